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

/// One error per key of `body` that is not in `allowed`.
pub fn only_fields(body: &Map<String, Value>, allowed: &[&str], errors: &mut Vec<FieldError>) {
    unknown_keys(body, allowed, str::to_owned, errors);
}

/// Normalises an e-mail address and checks its shape (`local@domain.tld`), so that every way of
/// writing one address gives one string (the unique key of a contact):
///
/// - the local part in NFKC, lowercased (`ｋate` is `kate`, `ﬁ` is `fi`, `ſ` is `s`);
/// - the domain in its IDNA ASCII form (UTS #46: `exámple.com` is `xn--exmple-qta.com`, as is
///   `EXÁMPLE.com`); a domain that has none (`a@-x.com`, `a@xn--zz.com`) is refused.
///
/// Addresses stored before this rule were trimmed and lowercased only, which is the same string
/// for every ASCII address; one stored with a non-ASCII domain or a compatibility character keeps
/// that form (it is found again under it, not under the new form) until its e-mail is written
/// again.
pub fn normalize_email(raw: &str) -> Result<String, &'static str> {
    use unicode_normalization::UnicodeNormalization;
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("must not be empty");
    }
    if raw.chars().count() > 254 {
        return Err("must be at most 254 characters");
    }
    let Some((local, domain)) = raw.rsplit_once('@') else {
        return Err("must be a valid e-mail address");
    };
    let local: String = local.nfkc().flat_map(char::to_lowercase).nfkc().collect();
    let Ok(domain) = idna::domain_to_ascii(domain) else {
        return Err("must be a valid e-mail address: its domain has no IDNA form");
    };
    let email = format!("{local}@{domain}");
    if email.len() > 254 {
        return Err("must be at most 254 characters");
    }
    let local_ok = !local.is_empty()
        && local.chars().count() <= 64
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
                && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
        })
        && labels.last().is_some_and(|tld| {
            tld.bytes().all(|c| c.is_ascii_alphabetic()) || tld.starts_with("xn--")
        });
    if local_ok && domain_ok {
        Ok(email)
    } else {
        Err("must be a valid e-mail address")
    }
}

/// One error per key of the object `m` not in `allowed`, at the path `at(key)`: "is not
/// accepted here (the allowed keys)".
pub fn unknown_keys(
    m: &serde_json::Map<String, serde_json::Value>,
    allowed: &[&str],
    at: impl Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    for k in m.keys().filter(|k| !allowed.contains(&k.as_str())) {
        errors.push(FieldError::new(
            at(k),
            format!("is not accepted here ({})", allowed.join(", ")),
        ));
    }
}

/// `v` when it is an array (with `object`, an object) of at most `max` items (`what`, in the
/// error); `None` when absent or null, or after an error at `field`.
pub fn at_most<'v>(
    v: Option<&'v serde_json::Value>,
    field: &str,
    object: bool,
    (max, what): (usize, &str),
    errors: &mut Vec<FieldError>,
) -> Option<&'v serde_json::Value> {
    use serde_json::Value;
    let v = v.filter(|v| !v.is_null())?;
    let len = match (v, object) {
        (Value::Array(a), false) => a.len(),
        (Value::Object(m), true) => m.len(),
        _ => {
            let kind = if object { "an object" } else { "an array" };
            let message = format!("must be {kind}, not {}", type_name(v));
            errors.push(FieldError::new(field, message));
            return None;
        }
    };
    if len > max {
        errors.push(FieldError::new(
            field,
            format!("must hold at most {max} {what}"),
        ));
        return None;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::normalize_email;

    #[test]
    fn every_form_of_one_address_is_one_string() {
        let same = [
            "kate.jose@example.com",
            " Kate.Jose@EXAMPLE.com ",
            "\u{ff4b}ate.jose@example.com",
            "kate.jose@\u{ff45}xample.com",
        ];
        for raw in same {
            assert_eq!(
                normalize_email(raw).unwrap(),
                "kate.jose@example.com",
                "{raw}"
            );
        }
        let idn = normalize_email("kate.jose@ex\u{e1}mple.com").unwrap();
        assert_eq!(idn, "kate.jose@xn--exmple-qta.com");
        assert_eq!(
            normalize_email("kate.jose@xn--exmple-qta.com").unwrap(),
            idn
        );
        assert_eq!(
            normalize_email("kate.jose@EXA\u{301}MPLE.com").unwrap(),
            idn
        );
        assert_eq!(
            normalize_email("\u{17f}am@example.com").unwrap(),
            "sam@example.com"
        );
        assert_eq!(
            normalize_email("\u{fb01}n@example.com").unwrap(),
            "fin@example.com"
        );
    }

    #[test]
    fn what_cannot_be_normalised_is_refused() {
        for bad in [
            "a@xn--zz.com",
            "a@-x.com",
            "a@b.c\u{0}m",
            "a\u{0}@b.co",
            "a@b..co",
        ] {
            assert!(normalize_email(bad).is_err(), "{bad:?}");
        }
    }
}
