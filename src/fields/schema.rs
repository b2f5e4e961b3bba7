//! The OpenAPI side of the kit: the JSON Schema of a [`Body`] (for `request_body!` types), from
//! the same table its parsing reads. Text patterns come from one function, [`text_pattern`].

use utoipa::openapi::schema::{
    AdditionalProperties, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema,
    SchemaType, Type,
};
use utoipa::openapi::{Ref, RefOr};

use super::{Body, Field, Kind, Mode, Names, Text, Unknown};

/// Unicode white space (what `str::trim` removes), as a character-class body.
const WS: &str = r"\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// The pattern of a [`Text`]: white space around, then `min` to `max` characters without control
/// characters (tabs and line breaks allowed when multiline) that start and end with a
/// non-space.
pub fn text_pattern(t: &Text) -> String {
    let control = if t.multiline {
        r"\u0000-\u0008\u000b-\u001f\u007f-\u009f"
    } else {
        r"\u0000-\u001f\u007f-\u009f"
    };
    let edge = format!("[^{WS}{control}]");
    let inner = format!("[^{control}]");
    let body = match (t.min, t.max) {
        (0, max) => format!("({edge}{inner}{{0,{}}})?", max - 1),
        (1, max) => format!("{edge}{inner}{{0,{}}}", max - 1),
        (min, max) => format!("{edge}{inner}{{{},{}}}{edge}", min - 2, max - 2),
    };
    format!("^[{WS}]*{body}[{WS}]*$")
}

fn typed(t: Type, nullable: bool) -> SchemaType {
    if nullable {
        [t, Type::Null].into_iter().collect()
    } else {
        SchemaType::from(t)
    }
}

fn doc(d: &str) -> Option<&str> {
    Some(d).filter(|d| !d.is_empty())
}

/// The schema of one field.
fn field_schema(f: &Field, out: &mut Vec<(String, RefOr<Schema>)>) -> RefOr<Schema> {
    let kind = kind_schema(&f.kind, f.nullable, out);
    match kind {
        RefOr::Ref(r) if f.nullable => OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Null))
            .item(r)
            .description(doc(f.doc))
            .into(),
        RefOr::Ref(mut r) => {
            r.description = f.doc.to_owned();
            RefOr::Ref(r)
        }
        RefOr::T(mut s) => {
            if !f.doc.is_empty() {
                match &mut s {
                    Schema::Object(o) => o.description = Some(f.doc.to_owned()),
                    Schema::Array(a) => a.description = Some(f.doc.to_owned()),
                    _ => {}
                }
            }
            RefOr::T(s)
        }
    }
}

fn kind_schema(
    kind: &Kind,
    nullable: bool,
    out: &mut Vec<(String, RefOr<Schema>)>,
) -> RefOr<Schema> {
    match kind {
        Kind::Text(t) => {
            let pattern = match t.shape {
                Some(s) => s.pattern.to_owned(),
                None => text_pattern(t),
            };
            ObjectBuilder::new()
                .schema_type(typed(Type::String, nullable))
                .min_length((t.min > 0).then_some(t.min))
                .pattern(Some(pattern))
                .into()
        }
        Kind::Shape(s) => ObjectBuilder::new()
            .schema_type(typed(Type::String, nullable))
            .pattern(Some(s.pattern))
            .into(),
        Kind::Integer { min, max } => ObjectBuilder::new()
            .schema_type(typed(Type::Integer, nullable))
            .minimum(Some(*min as f64))
            .maximum(Some(*max as f64))
            .into(),
        Kind::Bool => ObjectBuilder::new()
            .schema_type(typed(Type::Boolean, nullable))
            .into(),
        Kind::Names(set) => {
            let (name, schema) = (set.schema)();
            out.push((name.clone(), schema));
            RefOr::Ref(Ref::from_schema_name(name))
        }
        Kind::List { item, max, .. } => ArrayBuilder::new()
            .schema_type(typed(Type::Array, nullable))
            .items(kind_schema(item, false, out))
            .max_items(Some(*max))
            .into(),
        Kind::Object(body) => {
            let schema = object(body, Mode::Create, body.doc, out);
            out.push((body.name.to_owned(), schema));
            RefOr::Ref(Ref::from_schema_name(body.name))
        }
        Kind::Custom { schema, .. } => schema(),
    }
}

fn object(
    body: &Body,
    mode: Mode,
    description: &str,
    out: &mut Vec<(String, RefOr<Schema>)>,
) -> RefOr<Schema> {
    let mut o = ObjectBuilder::new().schema_type(Type::Object);
    for f in body.fields {
        o = o.property(f.name, field_schema(f, out));
        if f.required && mode == Mode::Create {
            o = o.required(f.name);
        }
    }
    if body.unknown != Unknown::Ignore {
        o = o.additional_properties(Some(AdditionalProperties::FreeForm(false)));
    }
    let o = o.build();
    match body.any_of {
        // One alternative per field that may carry the body (JSON Schema cannot say "one of
        // these is required" on a single object).
        Some((names, _)) => names
            .iter()
            .fold(AnyOfBuilder::new(), |any, n| {
                let mut alternative = o.clone();
                alternative.required.push((*n).to_owned());
                if let Some(f) = body.field(n) {
                    let f = Field {
                        nullable: false,
                        ..*f
                    };
                    let schema = field_schema(&f, out);
                    alternative.properties.insert((*n).to_owned(), schema);
                }
                any.item(alternative)
            })
            .description(doc(description))
            .into(),
        None => {
            let mut o = o;
            o.description = doc(description).map(str::to_owned);
            o.into()
        }
    }
}

/// The schema of a body for `mode` (required fields are listed on create only), described by
/// `description` (or the body's own `doc` when empty).
pub fn schema(body: &Body, mode: Mode, description: &str) -> RefOr<Schema> {
    let description = if description.is_empty() {
        body.doc
    } else {
        description
    };
    object(body, mode, description, &mut Vec::new())
}

/// The schemas a body refers to (its enums and nested objects), for `ToSchema::schemas`.
pub fn components(body: &Body, out: &mut Vec<(String, RefOr<Schema>)>) {
    object(body, Mode::Create, "", out);
}

/// The `$ref` name and schema of an enum declared with `names!`.
pub fn named<T: Names>() -> (String, RefOr<Schema>) {
    (<T as utoipa::ToSchema>::name().into_owned(), T::schema())
}
