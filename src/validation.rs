//! Field-by-field validation shared by every resource: the `FieldError` a bad field produces
//! (`{"field": "email", "message": "must be a valid e-mail address"}`, the `details` of a 400)
//! and small checks that several resources apply to JSON input.

use serde_json::{Map, Value};

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// "a string", "an array", ... for messages such as "must be a string, not a number".
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Trims `value` and checks its length and that it holds no control characters (tabs and line
/// breaks are allowed in `multiline` text).
pub fn check_text(value: &str, max: usize, multiline: bool) -> Result<String, String> {
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

/// One error per key of `body` that is not in `allowed`.
pub fn only_fields(body: &Map<String, Value>, allowed: &[&str], errors: &mut Vec<FieldError>) {
    for k in body.keys().filter(|k| !allowed.contains(&k.as_str())) {
        errors.push(FieldError::new(
            k.clone(),
            format!("is not accepted here ({})", allowed.join(", ")),
        ));
    }
}

/// Trims and lowercases an e-mail address and checks its shape (`local@domain.tld`).
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
