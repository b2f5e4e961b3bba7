//! The field kit: one declarative table per request body ([`Body`], a list of [`Field`]s: JSON
//! name, [`Kind`] with its limits, required, nullable, description) that drives both the parsing
//! ([`Body::parse`]: field by field, every bad field reported as a [`FieldError`]) and the
//! OpenAPI schema (`schema.rs`, through [`request_body!`](crate::fields::request_body)), so a
//! limit is written once. `names.rs`: `names!`, the one way to declare a closed set of names.
//!
//! Parsing checks and normalises each field (text trimmed, integral floats made integers,
//! e-mails normalised, repeated list items dropped) into a [`Parsed`] map of JSON values that
//! the resource's model turns into its typed values. Ground layer: no HTTP, no resource.

mod names;
mod schema;

use serde_json::{Map, Value};

use crate::validation::type_name;
pub use crate::validation::FieldError;
pub use names::Names;
pub(crate) use names::{names, request_body};
pub use schema::{components, schema};

/// Whether a body creates a record (required fields must be there; `null` is the kind's type
/// error where a field cannot be null) or merge-patches one (RFC 7396: absent = unchanged; `null`
/// where a field cannot be cleared is "cannot be cleared").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Create,
    Patch,
}

/// Free text: trimmed (Unicode white space) before its length is counted, no control characters
/// (tabs and line breaks are allowed when `multiline`). An optional text (`min` 0) that is empty
/// once trimmed is no value (`null`).
#[derive(Debug, Clone, Copy)]
pub struct Text {
    pub min: usize,
    pub max: usize,
    pub multiline: bool,
    /// A shape the trimmed, non-empty text must also have (it documents the field instead of
    /// the generated pattern).
    pub shape: Option<&'static Shape>,
}

impl Text {
    /// One line of `min` to `max` characters.
    pub const fn line(min: usize, max: usize) -> Text {
        Text {
            min,
            max,
            multiline: false,
            shape: None,
        }
    }

    /// Text that may hold line breaks and tabs.
    pub const fn lines(min: usize, max: usize) -> Text {
        Text {
            multiline: true,
            ..Text::line(min, max)
        }
    }

    pub const fn shaped(self, shape: &'static Shape) -> Text {
        Text {
            shape: Some(shape),
            ..self
        }
    }

    /// Trims `raw` and checks it: at most `max` characters, no control characters, at least
    /// `min` (an empty text is "is required" when `min` > 0, and `""` when `min` is 0).
    pub fn check(&self, raw: &str) -> Result<String, String> {
        let (min, max) = (self.min, self.max);
        let v = raw.trim();
        let count = v.chars().count();
        if count > max {
            return Err(format!("must be at most {max} characters"));
        }
        if v.chars()
            .any(|c| c.is_control() && !(self.multiline && (c == '\n' || c == '\t')))
        {
            return Err("must not contain control characters".into());
        }
        if count == 0 && min > 0 {
            return Err(format!("is required: {min} to {max} characters"));
        }
        if count < min {
            return Err(format!("must be {min} to {max} characters"));
        }
        match self.shape {
            Some(shape) if count > 0 => (shape.parse)(v),
            _ => Ok(v.to_owned()),
        }
    }

    /// [`Text::check`] of a JSON value: `Ok(None)` for `null` or an empty optional text.
    pub fn check_value(&self, v: &Value) -> Result<Option<String>, String> {
        match v {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(self.check(s)?).filter(|t| !t.is_empty())),
            other => Err(format!("must be a string, not {}", type_name(other))),
        }
    }
}

/// A string of one shape, checked as sent (an id, a colour, an e-mail address).
#[derive(Debug)]
pub struct Shape {
    /// The pattern the document shows (it may show only the usual form: see `doc`).
    pub pattern: &'static str,
    /// Checks the string and returns its normal form, or why not.
    pub parse: fn(&str) -> Result<String, String>,
    /// What a missing value should be, for "is required: ...".
    pub hint: &'static str,
}

/// An ObjectId: 24 lowercase hex characters.
pub static OBJECT_ID: Shape = Shape {
    pattern: "^[0-9a-f]{24}$",
    parse: |s| {
        crate::ids::is_object_id(s)
            .then(|| s.to_owned())
            .ok_or_else(|| "must be an id (24 hex characters)".into())
    },
    hint: "an id (24 hex characters)",
};

/// An e-mail address, normalised by [`crate::validation::normalize_email`].
pub static EMAIL: Shape = Shape {
    pattern: "^[A-Za-z0-9_+-]{1,20}(\\.[A-Za-z0-9_+-]{1,20}){0,2}@[A-Za-z0-9]{1,20}(-[A-Za-z0-9]{1,20})?(\\.[A-Za-z0-9]{1,20}){0,2}\\.[A-Za-z]{2,10}$",
    parse: |s| crate::validation::normalize_email(s).map_err(str::to_owned),
    hint: "an e-mail address",
};

/// The closed set of names a field takes (an enum declared with `names!`).
#[derive(Debug, Clone, Copy)]
pub struct NameSet {
    pub names: fn() -> &'static [&'static str],
    /// The enum's schema name and schema, for a `$ref`.
    pub schema: fn() -> (
        String,
        utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
    ),
}

impl NameSet {
    pub const fn of<T: Names>() -> NameSet {
        NameSet {
            names: names::names_of::<T>,
            schema: schema::named::<T>,
        }
    }
}

/// What a field holds.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Text(Text),
    Shape(&'static Shape),
    /// An integer (an integral float such as `77.0` counts: JSON has one number type).
    Integer {
        min: i64,
        max: i64,
    },
    Names(NameSet),
    Bool,
    /// An array of items of one kind; a repeated item counts once. `noun` names the items in
    /// messages ("tags").
    List {
        item: &'static Kind,
        max: usize,
        noun: &'static str,
    },
    Object(&'static Body),
    /// Checked by the resource (`parse` names its own fields), documented by `schema`.
    Custom {
        parse: fn(&str, &Value) -> Result<Value, Vec<FieldError>>,
        schema: fn() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        hint: &'static str,
    },
}

/// One field of a body.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The JSON name.
    pub name: &'static str,
    pub kind: Kind,
    /// Must be present on create.
    pub required: bool,
    /// `null` is accepted (it clears the field, or means none).
    pub nullable: bool,
    /// The description the document shows.
    pub doc: &'static str,
}

impl Field {
    pub const fn new(name: &'static str, kind: Kind) -> Field {
        Field {
            name,
            kind,
            required: false,
            nullable: false,
            doc: "",
        }
    }

    pub const fn text(name: &'static str, text: Text) -> Field {
        Field::new(name, Kind::Text(text))
    }

    pub const fn required(self) -> Field {
        Field {
            required: true,
            ..self
        }
    }

    pub const fn optional(self) -> Field {
        Field {
            required: false,
            ..self
        }
    }

    pub const fn nullable(self) -> Field {
        Field {
            nullable: true,
            ..self
        }
    }

    pub const fn doc(self, doc: &'static str) -> Field {
        Field { doc, ..self }
    }
}

/// What a body does with a field it does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    /// Refused: "is not accepted here (a, b, c)".
    Refuse,
    /// Refused with this message.
    RefuseWith(&'static str),
    /// Ignored (and allowed by the schema).
    Ignore,
}

/// A body (or a nested object): its fields and the rules between them.
#[derive(Debug)]
pub struct Body {
    /// The schema's name, when the body is a nested object the document refers to.
    pub name: &'static str,
    pub doc: &'static str,
    pub fields: &'static [Field],
    pub unknown: Unknown,
    /// At least one of these fields must hold a value, else this message (on the body).
    pub any_of: Option<(&'static [&'static str], &'static str)>,
}

impl Body {
    pub const fn new(name: &'static str, doc: &'static str, fields: &'static [Field]) -> Body {
        Body {
            name,
            doc,
            fields,
            unknown: Unknown::Refuse,
            any_of: None,
        }
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// "{id, name, email}" (optional fields with `?`), for messages.
    fn shape(&self) -> String {
        let names: Vec<String> = self
            .fields
            .iter()
            .map(|f| format!("{}{}", f.name, if f.required { "" } else { "?" }))
            .collect();
        format!("{{{}}}", names.join(", "))
    }

    /// Checks every field of `body`; one [`FieldError`] per bad field, named from `at` (`""` for
    /// a top-level body, `author.` for a nested one).
    pub fn parse(&self, body: &Map<String, Value>, mode: Mode) -> Result<Parsed, Vec<FieldError>> {
        let mut errors = Vec::new();
        let parsed = self.parse_at("", body, mode, &mut errors);
        if errors.is_empty() {
            Ok(parsed)
        } else {
            Err(errors)
        }
    }

    fn parse_at(
        &self,
        at: &str,
        body: &Map<String, Value>,
        mode: Mode,
        errors: &mut Vec<FieldError>,
    ) -> Parsed {
        let mut out = Map::new();
        for (key, value) in body {
            let path = format!("{at}{key}");
            let Some(field) = self.field(key) else {
                match self.unknown {
                    Unknown::Ignore => {}
                    Unknown::RefuseWith(m) => errors.push(FieldError::new(path, m)),
                    Unknown::Refuse => {
                        let names: Vec<&str> = self.fields.iter().map(|f| f.name).collect();
                        let m = format!("is not accepted here ({})", names.join(", "));
                        errors.push(FieldError::new(path, m));
                    }
                }
                continue;
            };
            if value.is_null() && !field.nullable && mode == Mode::Patch {
                errors.push(FieldError::new(path, "cannot be cleared"));
                continue;
            }
            if value.is_null() && field.nullable {
                out.insert(key.clone(), Value::Null);
                continue;
            }
            match field.kind.parse(&path, value) {
                Ok(v) => {
                    out.insert(key.clone(), v);
                }
                Err(e) => errors.extend(e),
            }
        }
        if mode == Mode::Create {
            for f in self.fields.iter().filter(|f| f.required) {
                if !body.contains_key(f.name) {
                    let hint = f.kind.hint();
                    let m = if hint.is_empty() {
                        "is required".to_owned()
                    } else {
                        format!("is required: {hint}")
                    };
                    errors.push(FieldError::new(format!("{at}{}", f.name), m));
                }
            }
        }
        if let Some((names, message)) = self.any_of {
            let given = names
                .iter()
                .any(|n| out.get(*n).is_some_and(|v| !v.is_null()));
            if !given && errors.is_empty() {
                let path = at.strip_suffix('.').unwrap_or("body");
                errors.push(FieldError::new(path, message));
            }
        }
        Parsed(out)
    }
}

impl Kind {
    /// What a missing value should be, for "is required: ...".
    fn hint(&self) -> String {
        match self {
            Kind::Text(t) if t.shape.is_some() => {
                t.shape.map(|s| s.hint).unwrap_or_default().into()
            }
            Kind::Text(t) => format!("{} to {} characters", t.min.max(1), t.max),
            Kind::Shape(s) => s.hint.into(),
            Kind::Integer { min, max } => format!("an integer from {min} to {max}"),
            Kind::Names(set) => format!("one of: {}", (set.names)().join(", ")),
            Kind::Bool => "a boolean".into(),
            Kind::List { noun, .. } => format!("an array of {noun}"),
            Kind::Object(body) => format!("an object {}", body.shape()),
            Kind::Custom { hint, .. } => (*hint).into(),
        }
    }

    /// Checks one value (not `null` where the field takes `null`) and returns its normal form.
    fn parse(&self, path: &str, v: &Value) -> Result<Value, Vec<FieldError>> {
        let one = |m: String| vec![FieldError::new(path, m)];
        let string = || {
            v.as_str()
                .ok_or_else(|| one(format!("must be a string, not {}", type_name(v))))
        };
        match self {
            Kind::Text(_) if v.is_null() => Err(one("must be a string, not null".into())),
            Kind::Text(t) => Ok(t
                .check_value(v)
                .map_err(one)?
                .map_or(Value::Null, Value::String)),
            Kind::Shape(s) => Ok(Value::String((s.parse)(string()?).map_err(one)?)),
            Kind::Integer { min, max } => integer(v, *min, *max).map(Value::from).map_err(one),
            Kind::Names(set) => {
                let names = (set.names)();
                match v.as_str().filter(|s| names.contains(s)) {
                    Some(s) => Ok(Value::String(s.to_owned())),
                    None => Err(one(format!("must be one of: {}", names.join(", ")))),
                }
            }
            Kind::Bool => match v {
                Value::Bool(b) => Ok(Value::Bool(*b)),
                other => Err(one(format!("must be a boolean, not {}", type_name(other)))),
            },
            Kind::List { item, max, noun } => {
                let Value::Array(items) = v else {
                    return Err(one(format!(
                        "must be an array of {noun}, not {}",
                        type_name(v)
                    )));
                };
                if items.len() > *max {
                    return Err(one(format!("must hold at most {max} {noun}")));
                }
                let mut out: Vec<Value> = Vec::with_capacity(items.len());
                let mut errors = Vec::new();
                for (i, x) in items.iter().enumerate() {
                    match item.parse(&format!("{path}[{i}]"), x) {
                        Ok(x) if !out.contains(&x) => out.push(x),
                        Ok(_) => {}
                        Err(e) => errors.extend(e),
                    }
                }
                if errors.is_empty() {
                    Ok(Value::Array(out))
                } else {
                    Err(errors)
                }
            }
            Kind::Object(body) => {
                let Value::Object(m) = v else {
                    return Err(one(format!(
                        "must be an object {}, not {}",
                        body.shape(),
                        type_name(v)
                    )));
                };
                let mut errors = Vec::new();
                let parsed = body.parse_at(&format!("{path}."), m, Mode::Create, &mut errors);
                if errors.is_empty() {
                    Ok(Value::Object(parsed.0))
                } else {
                    Err(errors)
                }
            }
            Kind::Custom { parse, .. } => parse(path, v),
        }
    }
}

/// An integer from `min` to `max`; `77.0` is the integer 77 (as JSON Schema says too).
fn integer(v: &Value, min: i64, max: i64) -> Result<i64, String> {
    let Value::Number(n) = v else {
        return Err(format!("must be an integer, not {}", type_name(v)));
    };
    n.as_i64()
        .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        .filter(|i| (min..=max).contains(i))
        .ok_or_else(|| format!("must be an integer from {min} to {max}"))
}

/// The checked fields of a body, in their normal form: present = sent, `null` = cleared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed(pub Map<String, Value>);

impl Parsed {
    /// The value sent (`Some(Value::Null)`: cleared), `None` when absent.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// A text, shape or name: `Some(None)` when cleared.
    pub fn text(&self, name: &str) -> Option<Option<String>> {
        self.get(name).map(|v| v.as_str().map(str::to_owned))
    }

    /// A text that cannot be cleared (or where clearing means none).
    pub fn string(&self, name: &str) -> Option<String> {
        self.text(name).flatten()
    }

    pub fn integer(&self, name: &str) -> Option<Option<i64>> {
        self.get(name).map(Value::as_i64)
    }

    pub fn bool(&self, name: &str) -> Option<Option<bool>> {
        self.get(name).map(Value::as_bool)
    }

    pub fn name<T: Names>(&self, name: &str) -> Option<T> {
        self.get(name).and_then(Value::as_str).and_then(T::parse)
    }

    /// A list of strings: `Some(None)` when cleared.
    pub fn strings(&self, name: &str) -> Option<Option<Vec<String>>> {
        self.get(name).map(|v| {
            v.as_array().map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect()
            })
        })
    }

    /// A nested object's fields.
    pub fn object(&self, name: &str) -> Option<Parsed> {
        self.get(name)
            .and_then(Value::as_object)
            .cloned()
            .map(Parsed)
    }
}

#[cfg(test)]
mod tests;
