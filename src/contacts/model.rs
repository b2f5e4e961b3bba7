//! The contact record (interface §2.3) as typed values, and its validation (api.md §5).
//!
//! A JSON body is parsed field by field into a [`ContactPatch`], so one request reports every
//! bad field at once (`details[{field, message}]`), not just the first one serde trips over.
//! The patch is then applied to a contact (a blank one on create) inside the store's
//! transaction, where the rules that depend on the current state (consent) are checked.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::fields::Mode;
use crate::fields::{names, Body, Field, Kind, NameSet, Parsed, Shape, Text, Unknown, EMAIL};
use crate::ids::Timestamp;
use crate::validation::{normalize_email, type_name, FieldError};

pub const MAX_TAGS: usize = 50;
pub const MAX_TAG_CHARS: usize = 64;
pub const MAX_CUSTOM_FIELDS: usize = 50;
pub const MAX_SCORE: i64 = 100;

names! {
    /// Where a contact stands in the pipeline.
    pub Status {
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
    pub Source {
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

/// One field of a merge patch: `Set` a value, or `Clear` it (`null`). Absent fields are `None`
/// where a `Change` is optional.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<T> {
    Set(T),
    Clear,
}

impl<T> Change<T> {
    /// `None` (a `null` the kit passed through) is `Clear`.
    fn of(v: Option<T>) -> Change<T> {
        v.map_or(Change::Clear, Change::Set)
    }
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

static COMPANY_ID: Shape = Shape {
    pattern: "^[A-Za-z0-9_-]{1,64}$",
    parse: |s| {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        ok.then(|| s.to_owned())
            .ok_or_else(|| "must be 1 to 64 letters, digits, '_' or '-'".into())
    },
    hint: "1 to 64 letters, digits, '_' or '-'",
};

static PHONE: Shape = Shape {
    pattern: "^\\s*([0-9 +().x/-]{0,20}[0-9][0-9 +().x/-]{0,19})?\\s*$",
    parse: |v| {
        let ok = v.chars().any(|c| c.is_ascii_digit())
            && v.chars()
                .all(|c| c.is_ascii_digit() || " +-().x/".contains(c));
        ok.then(|| v.to_owned())
            .ok_or_else(|| "must be a phone number: digits, spaces and + - ( ) . x /".into())
    },
    hint: "a phone number",
};

/// A tag: no comma (a comma separates tags in the list's `tag` filter).
static TAG: Shape = Shape {
    pattern: "^\\s*[^,\\s\\u0000-\\u001f\\u007f-\\u009f]([^,\\u0000-\\u001f\\u007f-\\u009f]{0,62}[^,\\s\\u0000-\\u001f\\u007f-\\u009f])?\\s*$",
    parse: |t| match t.contains(',') {
        true => Err("must not contain a comma (a comma separates tags in the tag filter)".into()),
        false => Ok(t.to_owned()),
    },
    hint: "1 to 64 characters, no comma",
};

static TAG_ITEM: Kind = Kind::Text(Text::line(1, MAX_TAG_CHARS).shaped(&TAG));

const fn text(name: &'static str, max: usize) -> Field {
    Field::text(name, Text::line(0, max)).nullable()
}

/// The fields of a contact's body: the create (`ContactInput`) and the merge patch
/// (`ContactChanges`). A text that is empty once trimmed clears the field, as `null` does.
pub static CONTACT: Body = Body {
    unknown: Unknown::RefuseWith("is not a contact field"),
    ..Body::new(
        "Contact",
        "",
        &[
            Field::new("email", Kind::Shape(&EMAIL)).required().doc(
                "A valid address, unique in the app; normalised (NFKC, lowercased, the domain in \
                 its ASCII form). The pattern shows the usual form; any address with a local part \
                 of 1 to 64 characters and a domain of dotted letter-digit labels is accepted.",
            ),
            Field::new("companyId", Kind::Shape(&COMPANY_ID))
                .nullable()
                .doc("1 to 64 letters, digits, `_` or `-`."),
            text("firstName", 100),
            text("lastName", 100),
            text("company", 200),
            Field::text("phone", Text::line(0, 40).shaped(&PHONE))
                .nullable()
                .doc("Digits, spaces and `+ - ( ) . x /`."),
            text("jobTitle", 200),
            text("website", 2048),
            Field::text("address", Text::lines(0, 1000))
                .nullable()
                .doc("May hold line breaks."),
            text("city", 200),
            text("country", 100),
            Field::new("source", Kind::Names(NameSet::of::<Source>()))
                .doc("Default `api`; cannot be cleared."),
            Field::new("status", Kind::Names(NameSet::of::<Status>()))
                .doc("Default `new`; cannot be cleared."),
            Field::new(
                "tags",
                Kind::List {
                    item: &TAG_ITEM,
                    max: MAX_TAGS,
                    noun: "tags",
                },
            )
            .nullable()
            .doc("At most 50 tags of 1 to 64 printable characters, no comma; `null` empties the list."),
            Field::new("score", Kind::Integer { min: 0, max: MAX_SCORE })
                .nullable()
                .doc("0 to 100; `null` sets 0."),
            Field::new("emailVerified", Kind::Bool).nullable(),
            Field::new("unsubscribed", Kind::Bool).nullable(),
            Field::new("gdprConsent", Kind::Bool).nullable(),
            Field::new(
                "customFields",
                Kind::Custom {
                    parse: custom_fields,
                    schema: custom_fields_schema,
                    hint: "an object",
                },
            )
            .nullable()
            .doc(
                "Flat: at most 50 keys (once merged) of 1 to 64 printable characters; values \
                 string (at most 1000 characters), number, boolean or null (null removes the key).",
            ),
        ],
    )
};

impl ContactPatch {
    /// Checks every field of `body` ([`CONTACT`]). On create `email` is required and `null` for
    /// status or source is an unknown value; on patch `null` clears a field (email, status and
    /// source cannot be cleared). Read-only fields are refused (`type: "contact"` is accepted).
    pub fn parse(body: &Map<String, Value>, mode: Mode) -> Result<ContactPatch, Vec<FieldError>> {
        let mut errors = Vec::new();
        let read_only = |k: &String| READ_ONLY.contains(&k.as_str());
        let parsed = if body.keys().any(read_only) {
            for (k, v) in body.iter().filter(|(k, _)| read_only(k)) {
                if !(k == "type" && v == "contact") {
                    errors.push(FieldError::new(k.clone(), "is read-only"));
                }
            }
            let rest = body.iter().filter(|(k, _)| !read_only(k));
            CONTACT.parse(&rest.map(|(k, v)| (k.clone(), v.clone())).collect(), mode)
        } else {
            CONTACT.parse(body, mode)
        };
        match parsed {
            Ok(p) if errors.is_empty() => Ok(ContactPatch::from_parsed(&p)),
            Ok(_) => Err(errors),
            Err(e) => {
                errors.extend(e);
                Err(errors)
            }
        }
    }

    fn from_parsed(p: &Parsed) -> ContactPatch {
        let text = CONTACT
            .fields
            .iter()
            .filter(|f| matches!(f.kind, Kind::Text(_)))
            .filter_map(|f| Some((f.name, Change::of(p.text(f.name)?))))
            .collect();
        ContactPatch {
            email: p.string("email").map(Email),
            company_id: p.text("companyId").map(Change::of),
            source: p.name("source"),
            status: p.name("status"),
            tags: p.strings("tags").map(Change::of),
            score: p.integer("score").map(Change::of),
            email_verified: p.bool("emailVerified").map(Change::of),
            unsubscribed: p.bool("unsubscribed").map(Change::of),
            gdpr_consent: p.bool("gdprConsent").map(Change::of),
            custom_fields: p
                .get("customFields")
                .map(|v| Change::of(v.as_object().cloned())),
            text,
        }
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

/// Checks the keys and values of a `customFields` patch (the count is checked once merged).
fn custom_fields(at: &str, v: &Value) -> Result<Value, Vec<FieldError>> {
    let Value::Object(patch) = v else {
        let m = format!("must be an object, not {}", type_name(v));
        return Err(vec![FieldError::new(at, m)]);
    };
    let mut errors = Vec::new();
    for (key, value) in patch {
        let field = format!("{at}.{key}");
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
        Ok(v.clone())
    } else {
        Err(errors)
    }
}

fn custom_fields_schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    let value = ObjectBuilder::new()
        .schema_type(
            [Type::String, Type::Number, Type::Boolean, Type::Null]
                .into_iter()
                .collect::<SchemaType>(),
        )
        .max_length(Some(1000));
    let name = ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^[^\\u0000-\\u001f\\u007f-\\u009f]{1,64}$"));
    ObjectBuilder::new()
        .schema_type(
            [Type::Object, Type::Null]
                .into_iter()
                .collect::<SchemaType>(),
        )
        .property_names(Some(name))
        .additional_properties(Some(value))
        .into()
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
