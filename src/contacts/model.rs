//! The contact record (interface §2.3) and its validation (api.md §5).
//!
//! Input arrives as a JSON object and is checked field by field, so one request reports every
//! bad field at once (`details[{field, message}]`), not just the first one serde trips over.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::validation::FieldError;

pub const STATUSES: [&str; 8] = [
    "new",
    "contacted",
    "interested",
    "qualified",
    "demo_scheduled",
    "customer",
    "lost",
    "unsubscribed",
];
pub const SOURCES: [&str; 6] = [
    "manual",
    "import",
    "prospection",
    "form",
    "api",
    "enrichment",
];
pub const MAX_TAGS: usize = 50;
pub const MAX_TAG_CHARS: usize = 64;
pub const MAX_CUSTOM_FIELDS: usize = 50;
pub const MAX_SCORE: i64 = 100;

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
    pub email: String,
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
    /// manual, import, prospection, form, api, enrichment
    pub source: String,
    pub tags: Vec<String>,
    /// 0..=100
    pub score: i64,
    /// new, contacted, interested, qualified, demo_scheduled, customer, lost, unsubscribed
    pub status: String,
    pub email_verified: bool,
    pub unsubscribed: bool,
    pub gdpr_consent: bool,
    /// Flat key/value pairs: string, number, boolean or null values.
    #[schema(value_type = Object)]
    pub custom_fields: Map<String, Value>,
    pub created_at: String,
    pub updated_at: String,
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
            "companyId" => &mut self.company_id,
            _ => return None,
        })
    }

    /// A contact with the defaults of api.md §5, before the body is applied.
    pub fn blank(id: String, app_id: String, now: &str) -> Contact {
        Contact {
            id,
            app_id,
            kind: "contact".into(),
            email: String::new(),
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
            source: "api".into(),
            tags: Vec::new(),
            score: 0,
            status: "new".into(),
            email_verified: false,
            unsubscribed: false,
            gdpr_consent: false,
            custom_fields: Map::new(),
            created_at: now.to_owned(),
            updated_at: now.to_owned(),
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

/// Normalises and checks an e-mail address: trimmed, lowercased, `local@domain.tld`.
pub fn normalize_email(raw: &str) -> Result<String, &'static str> {
    let email = raw.trim().to_lowercase();
    if email.is_empty() {
        return Err("must not be empty");
    }
    if email.len() > 254 {
        return Err("must be at most 254 characters");
    }
    let Some((local, domain)) = email.rsplit_once('@') else {
        return Err("must be a valid e-mail address");
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .chars()
            .all(|c| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c));
    let labels: Vec<&str> = domain.split('.').collect();
    let domain_ok = labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
        && labels
            .last()
            .is_some_and(|tld| tld.chars().all(char::is_alphabetic) || tld.starts_with("xn--"));
    if local_ok && domain_ok {
        Ok(email)
    } else {
        Err("must be a valid e-mail address")
    }
}

fn check_text(value: &str, max: usize, multiline: bool) -> Result<String, String> {
    let v = value.trim();
    if v.chars().count() > max {
        return Err(format!("must be at most {max} characters"));
    }
    if v.chars()
        .any(|c| c.is_control() && !(multiline && (c == '\n' || c == '\t')))
    {
        return Err("must not contain control characters".into());
    }
    Ok(v.to_owned())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether a body creates a contact or merge-patches one (RFC 7396).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Create,
    Patch,
}

/// Applies `body` to `contact` (a blank one on create), checking every field. On create `email`
/// is required. On patch, `null` clears a field (email, status and source cannot be cleared),
/// `customFields` merge key by key and `tags` replace. Status rules: becoming `unsubscribed` sets
/// `unsubscribed: true`; leaving it needs `gdprConsent: true` in the same body.
pub fn apply(
    contact: &mut Contact,
    body: &Map<String, Value>,
    mode: Mode,
) -> Result<(), Rejection> {
    let mut errors = Vec::new();
    let was_unsubscribed = contact.status == "unsubscribed" || contact.unsubscribed;
    if mode == Mode::Create && !body.contains_key("email") {
        errors.push(FieldError::new("email", "is required"));
    }
    for (field, value) in body {
        let f = field.as_str();
        let mut bad = |msg: String| errors.push(FieldError::new(f, msg));
        if READ_ONLY.contains(&f) {
            if f == "type" && value.as_str() == Some("contact") {
                continue;
            }
            bad("is read-only".into());
            continue;
        }
        match f {
            "email" => match value {
                Value::String(s) => match normalize_email(s) {
                    Ok(e) => contact.email = e,
                    Err(m) => bad(m.into()),
                },
                Value::Null => bad("cannot be cleared".into()),
                other => bad(format!("must be a string, not {}", type_name(other))),
            },
            "companyId" => match value {
                Value::Null => contact.company_id = None,
                Value::String(s)
                    if !s.is_empty()
                        && s.len() <= 64
                        && s.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
                {
                    contact.company_id = Some(s.clone())
                }
                Value::String(_) => bad("must be 1 to 64 letters, digits, '_' or '-'".into()),
                other => bad(format!("must be a string, not {}", type_name(other))),
            },
            "source" | "status" => {
                let allowed: &[&str] = if f == "source" { &SOURCES } else { &STATUSES };
                match value {
                    Value::String(s) if allowed.contains(&s.as_str()) => {
                        if f == "source" {
                            contact.source = s.clone()
                        } else {
                            contact.status = s.clone()
                        }
                    }
                    Value::Null if mode == Mode::Patch => bad("cannot be cleared".into()),
                    _ => bad(format!("must be one of: {}", allowed.join(", "))),
                }
            }
            "tags" => match value {
                Value::Null => contact.tags.clear(),
                Value::Array(items) => match check_tags(items) {
                    Ok(tags) => contact.tags = tags,
                    Err(e) => errors.push(e),
                },
                other => bad(format!(
                    "must be an array of strings, not {}",
                    type_name(other)
                )),
            },
            "score" => match value {
                Value::Null => contact.score = 0,
                Value::Number(n) => match n.as_i64() {
                    Some(s) if (0..=MAX_SCORE).contains(&s) => contact.score = s,
                    _ => bad(format!("must be an integer from 0 to {MAX_SCORE}")),
                },
                other => bad(format!("must be an integer, not {}", type_name(other))),
            },
            "emailVerified" | "unsubscribed" | "gdprConsent" => {
                let target = match f {
                    "emailVerified" => &mut contact.email_verified,
                    "unsubscribed" => &mut contact.unsubscribed,
                    _ => &mut contact.gdpr_consent,
                };
                match value {
                    Value::Bool(b) => *target = *b,
                    Value::Null => *target = false,
                    other => bad(format!("must be a boolean, not {}", type_name(other))),
                }
            }
            "customFields" => match value {
                Value::Null => contact.custom_fields.clear(),
                Value::Object(patch) => {
                    if let Err(mut e) = merge_custom_fields(&mut contact.custom_fields, patch, mode)
                    {
                        errors.append(&mut e);
                    }
                }
                other => bad(format!("must be an object, not {}", type_name(other))),
            },
            _ => {
                let Some(&(_, max)) = TEXT_FIELDS.iter().find(|(name, _)| *name == f) else {
                    bad("is not a contact field".into());
                    continue;
                };
                let slot = contact.text_mut(f).expect("every text field has a slot");
                match value {
                    Value::Null => *slot = None,
                    Value::String(s) => match check_text(s, max, f == "address") {
                        Ok(v) if v.is_empty() => *slot = None,
                        Ok(v) => *slot = Some(v),
                        Err(m) => bad(m),
                    },
                    other => bad(format!("must be a string, not {}", type_name(other))),
                }
            }
        }
    }
    if let Some(phone) = &contact.phone {
        if body.contains_key("phone")
            && !(phone.chars().any(|c| c.is_ascii_digit())
                && phone
                    .chars()
                    .all(|c| c.is_ascii_digit() || " +-().x/".contains(c)))
        {
            errors.push(FieldError::new(
                "phone",
                "must be a phone number: digits, spaces and + - ( ) . x /",
            ));
        }
    }
    if !errors.is_empty() {
        return Err(Rejection::Invalid(errors));
    }
    // Status rules (api.md §5).
    let consent_given = body.get("gdprConsent") == Some(&Value::Bool(true));
    if contact.status == "unsubscribed" {
        if matches!(
            body.get("unsubscribed"),
            Some(Value::Bool(false) | Value::Null)
        ) {
            return Err(Rejection::Invalid(vec![FieldError::new(
                "unsubscribed",
                "cannot be false while status is unsubscribed",
            )]));
        }
        contact.unsubscribed = true;
    } else if was_unsubscribed && mode == Mode::Patch {
        let leaving_status = body.contains_key("status");
        let clearing_flag = matches!(
            body.get("unsubscribed"),
            Some(Value::Bool(false) | Value::Null)
        );
        if (leaving_status || clearing_flag) && !consent_given {
            return Err(Rejection::NeedsConsent);
        }
        if leaving_status && !body.contains_key("unsubscribed") {
            contact.unsubscribed = false;
        }
    }
    Ok(())
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
        if !tags.iter().any(|x| x == t) {
            tags.push(t.to_owned());
        }
    }
    Ok(tags)
}

fn merge_custom_fields(
    fields: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    mode: Mode,
) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    if mode == Mode::Create {
        fields.clear();
    }
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
            Value::Null => {
                fields.remove(key);
            }
            Value::String(s) if s.chars().count() > 1000 => {
                errors.push(FieldError::new(field, "must be at most 1000 characters"))
            }
            Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                fields.insert(key.clone(), value.clone());
            }
            other => errors.push(FieldError::new(
                field,
                format!(
                    "must be a string, number, boolean or null, not {}",
                    type_name(other)
                ),
            )),
        }
    }
    if fields.len() > MAX_CUSTOM_FIELDS {
        errors.push(FieldError::new(
            "customFields",
            format!("must hold at most {MAX_CUSTOM_FIELDS} keys"),
        ));
    }
    if errors.is_empty() {
        Ok(())
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
        Contact::blank("a".repeat(24), "b".repeat(24), "2026-01-01T00:00:00.000Z")
    }

    #[test]
    fn emails_are_normalised_or_rejected() {
        assert_eq!(
            normalize_email("  Ada@Example.COM ").unwrap(),
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
            assert!(normalize_email(bad).is_err(), "{bad:?} should be rejected");
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
