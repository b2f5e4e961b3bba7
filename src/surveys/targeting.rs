//! Who sees a survey: attribute rules, URL rules and deterministic sampling, their parsing
//! from a create or PATCH body, and the match of a visitor.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fields::names;
use crate::fields::Text;
use crate::validation::{at_most, type_name, unknown_keys, FieldError};

/// The most attribute rules of a targeting.
pub const MAX_RULES: usize = 50;
/// The most URL rules of a targeting.
pub const MAX_URL_RULES: usize = 20;
/// The longest value of a URL rule.
pub const MAX_URL_RULE_CHARS: usize = 500;

names! {
    /// The operators of an attribute rule (api.md §4).
    pub Operator {
        Equals = "equals",
        NotEquals = "notEquals",
        LessThan = "lessThan",
        LessEqual = "lessEqual",
        GreaterThan = "greaterThan",
        GreaterEqual = "greaterEqual",
        IsSet = "isSet",
        Contains = "contains",
        DoesNotContain = "doesNotContain",
        StartsWith = "startsWith",
        EndsWith = "endsWith",
    }
}

impl Operator {
    /// What `value` must be: none for isSet, a number for comparisons, a string for the text
    /// operators, a string, number or boolean for (not) equals.
    fn check_value(self, v: Option<&Value>) -> Result<(), String> {
        use Operator::*;
        match (self, v) {
            (IsSet, None | Some(Value::Null)) => Ok(()),
            (IsSet, Some(_)) => Err("isSet takes no value".into()),
            (_, None | Some(Value::Null)) => Err("is required for this operator".into()),
            (LessThan | LessEqual | GreaterThan | GreaterEqual, Some(Value::Number(_))) => Ok(()),
            (LessThan | LessEqual | GreaterThan | GreaterEqual, Some(v)) => {
                Err(format!("must be a number, not {}", type_name(v)))
            }
            (Contains | DoesNotContain | StartsWith | EndsWith, Some(Value::String(s))) => {
                Text::line(0, 500).check(s).map(|_| ())
            }
            (Contains | DoesNotContain | StartsWith | EndsWith, Some(v)) => {
                Err(format!("must be a string, not {}", type_name(v)))
            }
            (Equals | NotEquals, Some(Value::String(s))) => Text::line(0, 500).check(s).map(|_| ()),
            (Equals | NotEquals, Some(Value::Number(_) | Value::Bool(_))) => Ok(()),
            (Equals | NotEquals, Some(v)) => Err(format!(
                "must be a string, number or boolean, not {}",
                type_name(v)
            )),
        }
    }
}

/// `{"key": "plan", "operator": "equals", "value": "pro"}`; rules AND together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AttributeRule {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

names! {
    /// The operators of a URL rule (Formbricks' "show on URL" filters).
    pub UrlOperator {
        Equals = "equals",
        Contains = "contains",
        StartsWith = "startsWith",
        EndsWith = "endsWith",
        DoesNotContain = "doesNotContain",
    }
}

impl UrlOperator {}

/// `{"operator": "contains", "value": "/pricing"}`: a rule on the full URL of the page the
/// visitor is on (as the widget sends it: scheme, host, path, query and fragment), compared
/// case-sensitively as Formbricks does. URL rules OR together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UrlRule {
    pub operator: UrlOperator,
    /// 1 to 500 characters.
    pub value: String,
}

impl UrlRule {
    pub fn matches(&self, url: &str) -> bool {
        let v = self.value.as_str();
        match self.operator {
            UrlOperator::Equals => url == v,
            UrlOperator::Contains => url.contains(v),
            UrlOperator::StartsWith => url.starts_with(v),
            UrlOperator::EndsWith => url.ends_with(v),
            UrlOperator::DoesNotContain => !url.contains(v),
        }
    }
}

/// Who sees a survey: a share of visitors (deterministic sampling), attribute rules (all must
/// hold) and URL rules (one must hold; none: any page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Targeting {
    /// In (0, 100].
    pub percentage: f64,
    pub attributes: Vec<AttributeRule>,
    /// At most 20; empty: every page.
    #[serde(default)]
    pub urls: Vec<UrlRule>,
}

impl Default for Targeting {
    fn default() -> Self {
        Targeting {
            percentage: 100.0,
            attributes: Vec::new(),
            urls: Vec::new(),
        }
    }
}

pub(super) fn parse_targeting(v: &Value, errors: &mut Vec<FieldError>) -> Option<Targeting> {
    let Value::Object(m) = v else {
        errors.push(FieldError::new(
            "targeting",
            format!("must be an object, not {}", type_name(v)),
        ));
        return None;
    };
    let before = errors.len();
    let keys = ["percentage", "attributes", "urls"];
    unknown_keys(m, &keys, |k| format!("targeting.{k}"), errors);
    let percentage = match m.get("percentage") {
        None => 100.0,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(p) if p > 0.0 && p <= 100.0 => p,
            _ => {
                errors.push(FieldError::new(
                    "targeting.percentage",
                    "must be greater than 0 and at most 100",
                ));
                100.0
            }
        },
        Some(v) => {
            errors.push(FieldError::new(
                "targeting.percentage",
                format!("must be a number, not {}", type_name(v)),
            ));
            100.0
        }
    };
    let mut attributes = Vec::new();
    let limit = (MAX_RULES, "rules");
    let rules = at_most(
        m.get("attributes"),
        "targeting.attributes",
        false,
        limit,
        errors,
    );
    if let Some(Value::Array(rules)) = rules {
        for (i, r) in rules.iter().enumerate() {
            if let Some(rule) = parse_rule(i, r, errors) {
                attributes.push(rule);
            }
        }
    }
    let urls = parse_urls(m.get("urls"), errors);
    (errors.len() == before).then_some(Targeting {
        percentage,
        attributes,
        urls,
    })
}

/// `targeting.urls`: at most [`MAX_URL_RULES`] `{"operator", "value"}` objects.
fn parse_urls(v: Option<&Value>, errors: &mut Vec<FieldError>) -> Vec<UrlRule> {
    let limit = (MAX_URL_RULES, "rules");
    let Some(Value::Array(rules)) = at_most(v, "targeting.urls", false, limit, errors) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let at = |f: &str| format!("targeting.urls[{i}].{f}");
        let Value::Object(m) = r else {
            errors.push(FieldError::new(
                format!("targeting.urls[{i}]"),
                "must be an object {\"operator\", \"value\"}",
            ));
            continue;
        };
        unknown_keys(m, &["operator", "value"], at, errors);
        let operator = m
            .get("operator")
            .and_then(Value::as_str)
            .and_then(UrlOperator::parse);
        if operator.is_none() {
            errors.push(FieldError::new(
                at("operator"),
                format!("must be one of {}", UrlOperator::names()),
            ));
        }
        let value = match m.get("value") {
            Some(Value::String(s)) => match Text::line(0, MAX_URL_RULE_CHARS).check(s) {
                Ok(t) if t.is_empty() => Err("must not be empty".to_owned()),
                other => other,
            },
            None | Some(Value::Null) => Err("is required".to_owned()),
            Some(v) => Err(format!("must be a string, not {}", type_name(v))),
        };
        match (operator, value) {
            (Some(operator), Ok(value)) => out.push(UrlRule { operator, value }),
            (_, Err(m)) => errors.push(FieldError::new(at("value"), m)),
            (None, Ok(_)) => {}
        }
    }
    out
}

fn parse_rule(i: usize, v: &Value, errors: &mut Vec<FieldError>) -> Option<AttributeRule> {
    let at = |f: &str| format!("targeting.attributes[{i}].{f}");
    let Value::Object(m) = v else {
        errors.push(FieldError::new(
            format!("targeting.attributes[{i}]"),
            "must be an object {\"key\", \"operator\", \"value\"}",
        ));
        return None;
    };
    let before = errors.len();
    unknown_keys(m, &["key", "operator", "value"], at, errors);
    let key = match m.get("key") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= 100 => {
            Some(s.trim().to_owned())
        }
        _ => {
            errors.push(FieldError::new(
                at("key"),
                "must be a string of 1 to 100 characters",
            ));
            None
        }
    };
    let operator = m
        .get("operator")
        .and_then(Value::as_str)
        .and_then(Operator::parse);
    match operator {
        None => errors.push(FieldError::new(
            at("operator"),
            format!("must be one of {}", Operator::names()),
        )),
        Some(op) => {
            if let Err(e) = op.check_value(m.get("value")) {
                errors.push(FieldError::new(at("value"), e));
            }
        }
    }
    if errors.len() != before {
        return None;
    }
    Some(AttributeRule {
        key: key?,
        operator: operator?,
        value: m.get("value").filter(|v| !v.is_null()).cloned(),
    })
}

/// Deterministic sampling: the visitor's bucket in 0..10 000 for this survey (the first
/// bytes of SHA-256 of survey id and visitor), so the same visitor is always in or out.
pub fn bucket(survey_id: &str, visitor: &str) -> u64 {
    let h = <sha2::Sha256 as sha2::Digest>::digest(format!("{survey_id}\0{visitor}").as_bytes());
    u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]) % 10_000
}

/// Whether the visitor falls in the survey's percentage.
pub fn sampled(survey_id: &str, visitor: &str, percentage: f64) -> bool {
    (bucket(survey_id, visitor) as f64) < percentage * 100.0
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl AttributeRule {
    /// Whether the visitor's attributes satisfy the rule. An attribute the visitor lacks
    /// satisfies no rule (a targeted survey is shown only to visitors known to match).
    pub fn matches(&self, attrs: &Map<String, Value>) -> bool {
        let Some(have) = attrs.get(&self.key).filter(|v| !v.is_null()) else {
            return false;
        };
        let want = self.value.as_ref().unwrap_or(&Value::Null);
        let text = |v: &Value| as_text(v).unwrap_or_default();
        let equal = || match (as_number(have), as_number(want)) {
            (Some(a), Some(b)) => a == b,
            _ => text(have) == text(want),
        };
        let compare = |f: fn(f64, f64) -> bool| match (as_number(have), as_number(want)) {
            (Some(a), Some(b)) => f(a, b),
            _ => false,
        };
        match self.operator {
            Operator::IsSet => !text(have).is_empty(),
            Operator::Equals => equal(),
            Operator::NotEquals => !equal(),
            Operator::LessThan => compare(|a, b| a < b),
            Operator::LessEqual => compare(|a, b| a <= b),
            Operator::GreaterThan => compare(|a, b| a > b),
            Operator::GreaterEqual => compare(|a, b| a >= b),
            Operator::Contains => text(have).contains(&text(want)),
            Operator::DoesNotContain => !text(have).contains(&text(want)),
            Operator::StartsWith => text(have).starts_with(&text(want)),
            Operator::EndsWith => text(have).ends_with(&text(want)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sampling_buckets_are_pinned() {
        // Changing the hash would move visitors in and out of running surveys.
        assert_eq!(bucket("000000000000000000000001", "a:visitor-1"), 4036);
        assert_eq!(bucket("5f0c0c0c0c0c0c0c0c0c0c0c", "u:alice"), 3834);
        assert!(sampled("000000000000000000000001", "a:visitor-1", 40.37));
        assert!(!sampled("000000000000000000000001", "a:visitor-1", 40.36));
        assert!(sampled("000000000000000000000001", "a:visitor-1", 100.0));
    }

    #[test]
    fn attribute_rules_compare_as_documented() {
        let attrs = json!({"plan": "pro", "seats": "12", "email": "ann@example.com", "beta": true});
        let attrs = attrs.as_object().unwrap();
        let rule = |key: &str, op: Operator, value: Value| AttributeRule {
            key: key.into(),
            operator: op,
            value: (!value.is_null()).then_some(value),
        };
        use Operator::*;
        let yes = [
            rule("plan", Equals, json!("pro")),
            rule("plan", NotEquals, json!("free")),
            rule("seats", Equals, json!(12)),
            rule("seats", GreaterThan, json!(10)),
            rule("seats", LessEqual, json!(12)),
            rule("email", EndsWith, json!("@example.com")),
            rule("email", StartsWith, json!("ann")),
            rule("email", Contains, json!("example")),
            rule("email", DoesNotContain, json!("gmail")),
            rule("beta", Equals, json!(true)),
            rule("plan", IsSet, Value::Null),
        ];
        for r in yes {
            assert!(r.matches(attrs), "{r:?}");
        }
        let no = [
            rule("plan", Equals, json!("Pro")),
            rule("seats", LessThan, json!(12)),
            rule("plan", GreaterThan, json!(1)),
            rule("missing", IsSet, Value::Null),
            rule("missing", NotEquals, json!("x")),
        ];
        for r in no {
            assert!(!r.matches(attrs), "{r:?}");
        }
    }
}
