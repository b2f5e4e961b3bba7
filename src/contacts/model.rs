//! The contact record (interface §2.3) as typed values, and its validation (api.md §5).
//!
//! A JSON body is parsed field by field into a [`ContactPatch`], so one request reports every
//! bad field at once (`details[{field, message}]`), not just the first one serde trips over.
//! The patch is then applied to a contact (a blank one on create) inside the store's
//! transaction, where the rules that depend on the current state (consent) are checked.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::Timestamp;
use crate::validation::{check_text, normalize_email, type_name, FieldError};

pub const MAX_TAGS: usize = 50;
pub const MAX_TAG_CHARS: usize = 64;
pub const MAX_CUSTOM_FIELDS: usize = 50;
pub const MAX_SCORE: i64 = 100;

/// Declares a closed set of names: the enum, its serde names, `ALL`, `name()` and `parse()`.
macro_rules! names {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
        // The names are the variants in snake_case; `rename_all` says so to utoipa, which does
        // not read the `rename` literals through this macro.
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            pub fn parse(s: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.name() == s)
            }

            /// The names, comma-separated, for error messages.
            pub fn names() -> String {
                $name::ALL.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
            }
        }
    };
}

names! {
    /// Where a contact stands in the pipeline.
    Status {
        New = "new",
        Contacted = "contacted",
        Interested = "interested",
        Qualified = "qualified",
        DemoScheduled = "demo_scheduled",
        Customer = "customer",
        Lost = "lost",
        Unsubscribed = "unsubscribed",
    }
}

names! {
    /// Where a contact came from.
    Source {
        Manual = "manual",
        Import = "import",
        Prospection = "prospection",
        Form = "form",
        Api = "api",
        Enrichment = "enrichment",
    }
}

/// A normalised e-mail address (trimmed, lowercased, `local@domain.tld`): built only by
/// [`Email::parse`], so every `Email` in a record or an index is valid and unique per form.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(transparent)]
pub struct Email(String);

impl Email {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Normalises and checks an address.
    pub fn parse(raw: &str) -> Result<Email, &'static str> {
        normalize_email(raw).map(Email)
    }
}

/// A contact as stored and as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Contact {
    /// ObjectId, 24 hex characters.
    pub id: String,
    pub app_id: String,
    /// Always `contact`.
    #[serde(rename = "type")]
    pub kind: String,
    pub email: Email,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub company: Option<String>,
    /// Present only when the contact is linked to a company.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub company_id: Option<String>,
    pub phone: Option<String>,
    pub job_title: Option<String>,
    pub website: Option<String>,
    pub address: Option<String>,
    pub city: Option<String>,
    pub country: Option<String>,
    pub source: Source,
    pub tags: Vec<String>,
    /// 0..=100
    pub score: i64,
    pub status: Status,
    pub email_verified: bool,
    pub unsubscribed: bool,
    pub gdpr_consent: bool,
    /// Flat key/value pairs: string, number, boolean or null values.
    #[schema(value_type = Object)]
    pub custom_fields: Map<String, Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Optional free-text fields: (JSON name, maximum characters).
const TEXT_FIELDS: [(&str, usize); 9] = [
    ("firstName", 100),
    ("lastName", 100),
    ("company", 200),
    ("phone", 40),
    ("jobTitle", 200),
    ("website", 2048),
    ("address", 1000),
    ("city", 200),
    ("country", 100),
];

const READ_ONLY: [&str; 5] = ["id", "appId", "type", "createdAt", "updatedAt"];

impl Contact {
    fn text_mut(&mut self, field: &str) -> Option<&mut Option<String>> {
        Some(match field {
            "firstName" => &mut self.first_name,
            "lastName" => &mut self.last_name,
            "company" => &mut self.company,
            "phone" => &mut self.phone,
            "jobTitle" => &mut self.job_title,
            "website" => &mut self.website,
            "address" => &mut self.address,
            "city" => &mut self.city,
            "country" => &mut self.country,
            _ => return None,
        })
    }

    /// A contact with the defaults of api.md §5, before a body is applied.
    pub fn blank(id: String, app_id: String, now: Timestamp) -> Contact {
        Contact {
            id,
            app_id,
            kind: "contact".into(),
            email: Email(String::new()),
            first_name: None,
            last_name: None,
            company: None,
            company_id: None,
            phone: None,
            job_title: None,
            website: None,
            address: None,
            city: None,
            country: None,
            source: Source::Api,
            tags: Vec::new(),
            score: 0,
            status: Status::New,
            email_verified: false,
            unsubscribed: false,
            gdpr_consent: false,
            custom_fields: Map::new(),
            created_at: now,
            updated_at: now,
        }
    }
}

/// Why applying a body to a contact failed.
#[derive(Debug, PartialEq)]
pub enum Rejection {
    Invalid(Vec<FieldError>),
    /// Leaving the unsubscribed state without consent (409).
    NeedsConsent,
}

/// Whether a body creates a contact or merge-patches one (RFC 7396).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Create,
    Patch,
}

/// One field of a merge patch: `Set` a value, or `Clear` it (`null`). Absent fields are `None`
/// where a `Change` is optional.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<T> {
    Set(T),
    Clear,
}

/// A validated body: every field it sets or clears, typed. Built by [`ContactPatch::parse`],
/// applied by [`ContactPatch::apply`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContactPatch {
    pub email: Option<Email>,
    pub company_id: Option<Change<String>>,
    pub source: Option<Source>,
    pub status: Option<Status>,
    /// `Clear` empties the list; `Set` replaces it.
    pub tags: Option<Change<Vec<String>>>,
    /// `Clear` sets 0.
    pub score: Option<Change<i64>>,
    /// `Clear` sets false.
    pub email_verified: Option<Change<bool>>,
    pub unsubscribed: Option<Change<bool>>,
    pub gdpr_consent: Option<Change<bool>>,
    /// `Clear` empties the map; `Set` merges key by key (a `null` value removes its key).
    pub custom_fields: Option<Change<Map<String, Value>>>,
    /// The free-text fields of [`TEXT_FIELDS`] by JSON name (`Clear` for null or empty).
    pub text: Vec<(&'static str, Change<String>)>,
}

fn bool_change(value: &Value) -> Result<Change<bool>, String> {
    match value {
        Value::Bool(b) => Ok(Change::Set(*b)),
        Value::Null => Ok(Change::Clear),
        other => Err(format!("must be a boolean, not {}", type_name(other))),
    }
}

fn company_id(value: &Value) -> Result<Change<String>, String> {
    match value {
        Value::Null => Ok(Change::Clear),
        Value::String(s)
            if !s.is_empty()
                && s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            Ok(Change::Set(s.clone()))
        }
        Value::String(_) => Err("must be 1 to 64 letters, digits, '_' or '-'".into()),
        other => Err(format!("must be a string, not {}", type_name(other))),
    }
}

fn named<T: Copy>(
    value: &Value,
    mode: Mode,
    parse: fn(&str) -> Option<T>,
    names: String,
) -> Result<T, String> {
    match value {
        Value::String(s) => parse(s).ok_or_else(|| format!("must be one of: {names}")),
        Value::Null if mode == Mode::Patch => Err("cannot be cleared".into()),
        _ => Err(format!("must be one of: {names}")),
    }
}

fn score(value: &Value) -> Result<Change<i64>, String> {
    match value {
        Value::Null => Ok(Change::Clear),
        // JSON has one number type: 77.0 is the integer 77 (as JSON Schema says too).
        Value::Number(n) => match n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        {
            Some(s) if (0..=MAX_SCORE).contains(&s) => Ok(Change::Set(s)),
            _ => Err(format!("must be an integer from 0 to {MAX_SCORE}")),
        },
        other => Err(format!("must be an integer, not {}", type_name(other))),
    }
}

fn text(field: &str, max: usize, value: &Value) -> Result<Change<String>, String> {
    match value {
        Value::Null => Ok(Change::Clear),
        Value::String(s) => match check_text(s, max, field == "address")? {
            v if v.is_empty() => Ok(Change::Clear),
            v if field == "phone" && !is_phone(&v) => {
                Err("must be a phone number: digits, spaces and + - ( ) . x /".into())
            }
            v => Ok(Change::Set(v)),
        },
        other => Err(format!("must be a string, not {}", type_name(other))),
    }
}

fn is_phone(v: &str) -> bool {
    v.chars().any(|c| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_digit() || " +-().x/".contains(c))
}

impl ContactPatch {
    /// Checks every field of `body`. On create `email` is required and `null` for status or
    /// source is an unknown value; on patch `null` clears a field (email, status and source
    /// cannot be cleared).
    pub fn parse(body: &Map<String, Value>, mode: Mode) -> Result<ContactPatch, Vec<FieldError>> {
        let mut patch = ContactPatch::default();
        let mut errors = Vec::new();
        if mode == Mode::Create && !body.contains_key("email") {
            errors.push(FieldError::new("email", "is required"));
        }
        for (field, value) in body {
            if let Err(e) = patch.parse_field(field, value, mode) {
                errors.extend(e);
            }
        }
        if errors.is_empty() {
            Ok(patch)
        } else {
            Err(errors)
        }
    }

    fn parse_field(&mut self, f: &str, value: &Value, mode: Mode) -> Result<(), Vec<FieldError>> {
        let one = |message: String| vec![FieldError::new(f, message)];
        if READ_ONLY.contains(&f) {
            return match (f, value.as_str()) {
                ("type", Some("contact")) => Ok(()),
                _ => Err(one("is read-only".into())),
            };
        }
        match f {
            "email" => match value {
                Value::String(s) => self.email = Some(Email::parse(s).map_err(|m| one(m.into()))?),
                Value::Null => return Err(one("cannot be cleared".into())),
                other => return Err(one(format!("must be a string, not {}", type_name(other)))),
            },
            "companyId" => self.company_id = Some(company_id(value).map_err(one)?),
            "source" => {
                self.source = Some(named(value, mode, Source::parse, Source::names()).map_err(one)?)
            }
            "status" => {
                self.status = Some(named(value, mode, Status::parse, Status::names()).map_err(one)?)
            }
            "tags" => {
                self.tags = Some(match value {
                    Value::Null => Change::Clear,
                    Value::Array(items) => Change::Set(check_tags(items).map_err(|e| vec![e])?),
                    other => {
                        return Err(one(format!(
                            "must be an array of strings, not {}",
                            type_name(other)
                        )))
                    }
                })
            }
            "score" => self.score = Some(score(value).map_err(one)?),
            "emailVerified" => self.email_verified = Some(bool_change(value).map_err(one)?),
            "unsubscribed" => self.unsubscribed = Some(bool_change(value).map_err(one)?),
            "gdprConsent" => self.gdpr_consent = Some(bool_change(value).map_err(one)?),
            "customFields" => {
                self.custom_fields = Some(match value {
                    Value::Null => Change::Clear,
                    Value::Object(patch) => Change::Set(check_custom_fields(patch)?),
                    other => {
                        return Err(one(format!("must be an object, not {}", type_name(other))))
                    }
                })
            }
            _ => {
                let Some(&(name, max)) = TEXT_FIELDS.iter().find(|(name, _)| *name == f) else {
                    return Err(one("is not a contact field".into()));
                };
                self.text.push((name, text(name, max, value).map_err(one)?));
            }
        }
        Ok(())
    }

    /// Applies the patch to `contact`, with the status rules of api.md §5: becoming
    /// `unsubscribed` sets `unsubscribed: true`; leaving it needs `gdprConsent: true` in the
    /// same body.
    pub fn apply(&self, contact: &mut Contact, mode: Mode) -> Result<(), Rejection> {
        let was_unsubscribed = contact.status == Status::Unsubscribed || contact.unsubscribed;
        self.assign(contact)?;
        let consent_given = self.gdpr_consent == Some(Change::Set(true));
        let clearing_flag = matches!(self.unsubscribed, Some(Change::Set(false) | Change::Clear));
        if contact.status == Status::Unsubscribed {
            if clearing_flag {
                return Err(Rejection::Invalid(vec![FieldError::new(
                    "unsubscribed",
                    "cannot be false while status is unsubscribed",
                )]));
            }
            contact.unsubscribed = true;
        } else if was_unsubscribed && mode == Mode::Patch {
            let leaving_status = self.status.is_some();
            if (leaving_status || clearing_flag) && !consent_given {
                return Err(Rejection::NeedsConsent);
            }
            if leaving_status && self.unsubscribed.is_none() {
                contact.unsubscribed = false;
            }
        }
        Ok(())
    }

    /// Writes every field of the patch into `contact`.
    fn assign(&self, c: &mut Contact) -> Result<(), Rejection> {
        fn set<T: Clone>(slot: &mut T, change: &Option<Change<T>>, cleared: T) {
            match change {
                Some(Change::Set(v)) => *slot = v.clone(),
                Some(Change::Clear) => *slot = cleared,
                None => {}
            }
        }
        if let Some(e) = &self.email {
            c.email = e.clone();
        }
        match &self.company_id {
            Some(Change::Set(id)) => c.company_id = Some(id.clone()),
            Some(Change::Clear) => c.company_id = None,
            None => {}
        }
        c.source = self.source.unwrap_or(c.source);
        c.status = self.status.unwrap_or(c.status);
        set(&mut c.tags, &self.tags, Vec::new());
        set(&mut c.score, &self.score, 0);
        set(&mut c.email_verified, &self.email_verified, false);
        set(&mut c.unsubscribed, &self.unsubscribed, false);
        set(&mut c.gdpr_consent, &self.gdpr_consent, false);
        for (field, change) in &self.text {
            let slot = c.text_mut(field).expect("every text field has a slot");
            *slot = match change {
                Change::Set(v) => Some(v.clone()),
                Change::Clear => None,
            };
        }
        match &self.custom_fields {
            Some(Change::Clear) => c.custom_fields.clear(),
            Some(Change::Set(patch)) => {
                for (key, value) in patch {
                    match value {
                        Value::Null => c.custom_fields.remove(key),
                        v => c.custom_fields.insert(key.clone(), v.clone()),
                    };
                }
                if c.custom_fields.len() > MAX_CUSTOM_FIELDS {
                    return Err(Rejection::Invalid(vec![FieldError::new(
                        "customFields",
                        format!("must hold at most {MAX_CUSTOM_FIELDS} keys"),
                    )]));
                }
            }
            None => {}
        }
        Ok(())
    }
}

/// Parses `body` and applies it to `contact`: [`ContactPatch::parse`] then
/// [`ContactPatch::apply`].
pub fn apply(
    contact: &mut Contact,
    body: &Map<String, Value>,
    mode: Mode,
) -> Result<(), Rejection> {
    ContactPatch::parse(body, mode)
        .map_err(Rejection::Invalid)?
        .apply(contact, mode)
}

fn check_tags(items: &[Value]) -> Result<Vec<String>, FieldError> {
    if items.len() > MAX_TAGS {
        return Err(FieldError::new(
            "tags",
            format!("must hold at most {MAX_TAGS} tags"),
        ));
    }
    let mut tags: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("tags[{i}]");
        let Value::String(s) = item else {
            return Err(FieldError::new(
                field,
                format!("must be a string, not {}", type_name(item)),
            ));
        };
        let t = s.trim();
        if t.is_empty() || t.chars().count() > MAX_TAG_CHARS || t.chars().any(char::is_control) {
            return Err(FieldError::new(
                field,
                format!("must be 1 to {MAX_TAG_CHARS} printable characters"),
            ));
        }
        if t.contains(',') {
            return Err(FieldError::new(
                field,
                "must not contain a comma (a comma separates tags in the tag filter)",
            ));
        }
        if !tags.iter().any(|x| x == t) {
            tags.push(t.to_owned());
        }
    }
    Ok(tags)
}

/// Checks the keys and values of a `customFields` patch (the count is checked once merged).
fn check_custom_fields(patch: &Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldError>> {
    let mut errors = Vec::new();
    for (key, value) in patch {
        let field = format!("customFields.{key}");
        if key.is_empty() || key.chars().count() > 64 || key.chars().any(char::is_control) {
            errors.push(FieldError::new(
                field,
                "keys must be 1 to 64 printable characters",
            ));
            continue;
        }
        match value {
            Value::String(s) if s.chars().count() > 1000 => {
                errors.push(FieldError::new(field, "must be at most 1000 characters"))
            }
            Value::Null | Value::String(_) | Value::Number(_) | Value::Bool(_) => {}
            other => errors.push(FieldError::new(
                field,
                format!(
                    "must be a string, number, boolean or null, not {}",
                    type_name(other)
                ),
            )),
        }
    }
    if patch.values().filter(|v| !v.is_null()).count() > MAX_CUSTOM_FIELDS {
        errors.push(FieldError::new(
            "customFields",
            format!("must hold at most {MAX_CUSTOM_FIELDS} keys"),
        ));
    }
    if errors.is_empty() {
        Ok(patch.clone())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn fresh() -> Contact {
        Contact::blank(
            "a".repeat(24),
            "b".repeat(24),
            Timestamp::parse("2026-01-01T00:00:00.000Z").unwrap(),
        )
    }

    #[test]
    fn emails_are_normalised_or_rejected() {
        assert_eq!(
            Email::parse("  Ada@Example.COM ").unwrap().as_str(),
            "ada@example.com"
        );
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "a b@example.com",
            "ada@@example.com",
            "ada@-x.com",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn every_bad_field_is_reported_at_once() {
        let mut c = fresh();
        let err = apply(
            &mut c,
            &body(json!({"email": "nope", "score": 101, "status": "vip", "tags": [1], "colour": "red", "id": "x"})),
            Mode::Create,
        )
        .unwrap_err();
        let Rejection::Invalid(details) = err else {
            panic!("expected invalid")
        };
        let mut fields: Vec<_> = details.iter().map(|d| d.field.as_str()).collect();
        fields.sort();
        assert_eq!(
            fields,
            ["colour", "email", "id", "score", "status", "tags[0]"]
        );
    }

    #[test]
    fn a_score_written_as_a_whole_float_is_that_integer() {
        let mut c = fresh();
        apply(
            &mut c,
            &body(json!({"email": "a@b.co", "score": 77.0})),
            Mode::Create,
        )
        .unwrap();
        assert_eq!(c.score, 77);
        for bad in [json!(77.5), json!(101.0), json!(-1.0), json!(1e300)] {
            let body = body(json!({"email": "a@b.co", "score": bad}));
            assert!(ContactPatch::parse(&body, Mode::Create).is_err(), "{bad}");
        }
    }

    #[test]
    fn patch_merges_custom_fields_and_replaces_tags() {
        let mut c = fresh();
        apply(
            &mut c,
            &body(json!({"email": "a@b.co", "tags": ["x"], "customFields": {"a": 1, "b": "2"}})),
            Mode::Create,
        )
        .unwrap();
        apply(
            &mut c,
            &body(json!({"tags": ["y"], "customFields": {"a": null, "c": true}})),
            Mode::Patch,
        )
        .unwrap();
        assert_eq!(c.tags, ["y"]);
        assert_eq!(
            Value::Object(c.custom_fields.clone()),
            json!({"b": "2", "c": true})
        );
    }

    #[test]
    fn leaving_unsubscribed_needs_consent() {
        let mut c = fresh();
        apply(
            &mut c,
            &body(json!({"email": "a@b.co", "status": "unsubscribed"})),
            Mode::Create,
        )
        .unwrap();
        assert!(c.unsubscribed);
        let mut copy = c.clone();
        assert_eq!(
            apply(&mut copy, &body(json!({"status": "new"})), Mode::Patch),
            Err(Rejection::NeedsConsent)
        );
        apply(
            &mut c,
            &body(json!({"status": "new", "gdprConsent": true})),
            Mode::Patch,
        )
        .unwrap();
        assert!(!c.unsubscribed && c.gdpr_consent);
    }
}
