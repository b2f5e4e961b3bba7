//! The targeting part of the survey builder (`form.rs`): the share of visitors asked,
//! the attribute rules (key, operator, value; all must hold) and the URL rules (operator,
//! value; one must hold) as rows of inputs. Blank rows are skipped; the rows that remain
//! become the API's `targeting` object (`surveys::model::Targeting`), and the API's errors
//! (`targeting.attributes[1].value`) come back to the row they were typed in.

use maud::{html, Markup};
use serde_json::{json, Value};

use crate::dashboard::layout::{error_for, field};
use crate::dashboard::session::Form;
use crate::surveys::model::{AttributeRule, Operator, Targeting, UrlOperator, UrlRule};
use crate::validation::FieldError;

/// One attribute rule as typed: key, operator name, value text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttrRow {
    pub key: String,
    pub op: String,
    pub value: String,
}

/// One URL rule as typed: operator name, value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UrlRow {
    pub op: String,
    pub value: String,
}

/// The targeting inputs of the form, as typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub percentage: String,
    pub attrs: Vec<AttrRow>,
    pub urls: Vec<UrlRow>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            percentage: "100".into(),
            attrs: Vec::new(),
            urls: Vec::new(),
        }
    }
}

impl Rules {
    /// The rows of a posted form (`attr-key`, `attr-op`, `attr-value`, `url-op`, `url-value`,
    /// one of each per row, in order).
    pub fn from_form(form: &Form) -> Rules {
        let (keys, ops, values) = (
            form.all("attr-key"),
            form.all("attr-op"),
            form.all("attr-value"),
        );
        let attrs = keys
            .iter()
            .enumerate()
            .map(|(i, k)| AttrRow {
                key: (*k).to_owned(),
                op: ops.get(i).copied().unwrap_or_default().to_owned(),
                value: values.get(i).copied().unwrap_or_default().to_owned(),
            })
            .collect();
        let (ops, values) = (form.all("url-op"), form.all("url-value"));
        let urls = values
            .iter()
            .enumerate()
            .map(|(i, v)| UrlRow {
                op: ops.get(i).copied().unwrap_or_default().to_owned(),
                value: (*v).to_owned(),
            })
            .collect();
        Rules {
            percentage: form.get("percentage").to_owned(),
            attrs,
            urls,
        }
    }

    /// The rows of a saved survey.
    pub fn from_targeting(t: &Targeting) -> Rules {
        Rules {
            percentage: format!("{}", t.percentage),
            attrs: t
                .attributes
                .iter()
                .map(|r: &AttributeRule| AttrRow {
                    key: r.key.clone(),
                    op: r.operator.name().to_owned(),
                    value: r.value.as_ref().map(value_text).unwrap_or_default(),
                })
                .collect(),
            urls: t
                .urls
                .iter()
                .map(|r: &UrlRule| UrlRow {
                    op: r.operator.name().to_owned(),
                    value: r.value.clone(),
                })
                .collect(),
        }
    }

    /// The API's `targeting` object, and for each rule sent the form row it came from
    /// (attributes, then URLs), so errors find their row.
    pub fn body(&self) -> (Value, Vec<usize>, Vec<usize>) {
        let share = self.percentage.trim();
        let percentage = share
            .parse::<f64>()
            .map_or_else(|_| json!(share), |p| json!(p));
        let (mut attributes, mut attr_rows) = (Vec::new(), Vec::new());
        for (i, r) in self.attrs.iter().enumerate() {
            if r.key.trim().is_empty() && r.value.trim().is_empty() {
                continue;
            }
            let mut rule = json!({"key": r.key.trim(), "operator": r.op});
            if let Some(v) = value_json(&r.op, &r.value) {
                rule["value"] = v;
            }
            attributes.push(rule);
            attr_rows.push(i);
        }
        let (mut urls, mut url_rows) = (Vec::new(), Vec::new());
        for (i, r) in self.urls.iter().enumerate() {
            if r.value.trim().is_empty() {
                continue;
            }
            urls.push(json!({"operator": r.op, "value": r.value.trim()}));
            url_rows.push(i);
        }
        let body = json!({"percentage": percentage, "attributes": attributes, "urls": urls});
        (body, attr_rows, url_rows)
    }
}

/// A rule's value as typed, as the API's JSON value: none for `isSet` (or when left blank);
/// a number for the comparisons; a string for the text operators; for (not) equals a number,
/// `true` or `false` as such, and any other text as a string. A value in double quotes is
/// always that string (`"42"`, `"true"`).
pub fn value_json(op: &str, text: &str) -> Option<Value> {
    let text = text.trim();
    let quoted = serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_string);
    match Operator::parse(op) {
        Some(Operator::IsSet) => None,
        _ if text.is_empty() => None,
        _ if quoted.is_some() => quoted,
        Some(
            Operator::LessThan
            | Operator::LessEqual
            | Operator::GreaterThan
            | Operator::GreaterEqual
            | Operator::Equals
            | Operator::NotEquals,
        ) => match serde_json::from_str::<Value>(text) {
            Ok(v @ (Value::Number(_) | Value::Bool(_))) => Some(v),
            _ => Some(json!(text)),
        },
        _ => Some(json!(text)),
    }
}

/// A stored value as the form shows it, so that [`value_json`] reads it back the same: a
/// string that would read as a number or boolean (or has quotes of its own) in quotes.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) if serde_json::from_str::<Value>(s.trim()).is_ok() || s.trim() != s => {
            v.to_string()
        }
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// An API error path of the targeting as the form's field: `targeting.attributes[0].value`
/// is `attr-<row>-value` (rows from [`Rules::body`]), `targeting.percentage` is `percentage`.
pub fn form_field(path: &str, attr_rows: &[usize], url_rows: &[usize]) -> Option<String> {
    let rest = path.strip_prefix("targeting")?;
    if rest.is_empty() || rest == ".percentage" {
        return Some("percentage".into());
    }
    let (list, rest, prefix) = if let Some(r) = rest.strip_prefix(".attributes") {
        (attr_rows, r, "attr")
    } else if let Some(r) = rest.strip_prefix(".urls") {
        (url_rows, r, "url")
    } else {
        return Some("targeting".into());
    };
    let Some(r) = rest.strip_prefix('[') else {
        return Some(format!("{prefix}s"));
    };
    let (n, tail) = r.split_once(']')?;
    let row = n.parse::<usize>().ok().and_then(|n| list.get(n).copied())?;
    let part = match tail.trim_start_matches('.') {
        "" if prefix == "attr" => "key",
        "" => "value",
        p => p,
    };
    Some(format!("{prefix}-{row}-{part}"))
}

/// The operator cell of rule row `i` of `kind` (`attr` or `url`): a select of `names`,
/// `current` chosen, labelled "`title` n: operator", with its error under it.
fn op_cell(
    kind: &str,
    i: usize,
    title: &str,
    names: &[&str],
    current: &str,
    errors: &[FieldError],
) -> Markup {
    let err = error_for(errors, &format!("{kind}-{i}-operator"));
    let label = format!("{title} {}: operator", i + 1);
    html! {
        div.field.invalid[err.is_some()] {
            select #(format!("f-{kind}-{i}-op")) name=(format!("{kind}-op")) aria-label=(label) {
                @for n in names { option value=(n) selected[*n == current] { (n) } }
            }
            @if let Some(m) = err { p.field-error { (m) } }
        }
    }
}

/// An input of a rule row with its error under it (`aria-describedby`).
fn cell(id: &str, name: &str, label: &str, value: &str, errors: &[FieldError]) -> Markup {
    let err = error_for(errors, id.trim_start_matches("f-"));
    let err_id = format!("{id}-error");
    html! {
        div.field.invalid[err.is_some()] {
            input #(id) name=(name) type="text" value=(value) aria-label=(label)
                aria-invalid=[err.map(|_| "true")] aria-describedby=[err.map(|_| err_id.as_str())];
            @if let Some(m) = err { p.field-error #(err_id) { (m) } }
        }
    }
}

fn attr_row(i: usize, r: &AttrRow, errors: &[FieldError]) -> Markup {
    let names: Vec<&str> = Operator::ALL.iter().map(|o| o.name()).collect();
    let n = i + 1;
    html! {
        div.rule-row data-rule="attr" {
            (cell(&format!("f-attr-{i}-key"), "attr-key", &format!("Attribute rule {n}: key"), &r.key, errors))
            (op_cell("attr", i, "Attribute rule", &names, &r.op, errors))
            (cell(&format!("f-attr-{i}-value"), "attr-value", &format!("Attribute rule {n}: value"), &r.value, errors))
        }
    }
}

fn url_row(i: usize, r: &UrlRow, errors: &[FieldError]) -> Markup {
    let names: Vec<&str> = UrlOperator::ALL.iter().map(|o| o.name()).collect();
    let n = i + 1;
    html! {
        div.rule-row data-rule="url" {
            (op_cell("url", i, "URL rule", &names, &r.op, errors))
            (cell(&format!("f-url-{i}-value"), "url-value", &format!("URL rule {n}: value"), &r.value, errors))
        }
    }
}

/// The rules of `kind` (`attr` or `url`): `[heading, hint, add button]`, the list's error,
/// the `rows`, then the "Add" button `app.js` shows.
fn rules_block(
    kind: &str,
    [heading, hint, add]: [&str; 3],
    err: Option<&str>,
    rows: Markup,
) -> Markup {
    let id = format!("{kind}-rules");
    let heading_id = format!("{kind}-rules-h");
    html! {
        div.rules #(id) aria-labelledby=(heading_id) {
            h3 #(heading_id) { (heading) }
            p.hint { (hint) }
            @if let Some(m) = err { p.field-error { (m) } }
            (rows)
            button.button.small type="button" data-add-row=(kind) hidden { (add) }
        }
    }
}

/// The targeting fieldset: the share, then the rules typed so far and one blank row of each
/// kind (`app.js` shows the "Add" buttons, which add more rows; without script, a saved form
/// comes back with a new blank row).
pub fn render(rules: &Rules, errors: &[FieldError]) -> Markup {
    let blank_attr = AttrRow {
        op: "equals".into(),
        ..AttrRow::default()
    };
    let blank_url = UrlRow {
        op: "contains".into(),
        ..UrlRow::default()
    };
    let attrs = rules.attrs.iter().chain(std::iter::once(&blank_attr));
    let urls = rules.urls.iter().chain(std::iter::once(&blank_url));
    html! {
        fieldset.targeting {
            legend { "Who is asked" }
            (field("Visitors asked (%)", "percentage", "number", &rules.percentage, errors, html! {}))
            (rules_block("attr", ["Attribute rules", "All must hold. Values: text, a number, true or false; a value in double quotes is always text. isSet takes no value.", "Add attribute rule"],
                error_for(errors, "attrs"), html! { @for (i, r) in attrs.enumerate() { (attr_row(i, r, errors)) } }))
            (rules_block("url", ["Page URL rules", "One must hold, on the page's full URL; none: every page.", "Add URL rule"],
                error_for(errors, "urls"), html! { @for (i, r) in urls.enumerate() { (url_row(i, r, errors)) } }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_typed_by_their_operator_and_read_back_the_same() {
        assert_eq!(value_json("equals", "pro"), Some(json!("pro")));
        assert_eq!(value_json("equals", " 12 "), Some(json!(12)));
        assert_eq!(value_json("notEquals", "true"), Some(json!(true)));
        assert_eq!(value_json("equals", "\"12\""), Some(json!("12")));
        assert_eq!(value_json("greaterThan", "10"), Some(json!(10)));
        assert_eq!(value_json("greaterThan", "ten"), Some(json!("ten")));
        assert_eq!(value_json("contains", "42"), Some(json!("42")));
        assert_eq!(value_json("isSet", "x"), None);
        assert_eq!(value_json("equals", " "), None);
        for (op, v) in [
            ("equals", json!("pro")),
            ("equals", json!("12")),
            ("equals", json!(12)),
            ("equals", json!(false)),
            ("equals", json!("true")),
            ("contains", json!("\"q\"")),
            ("lessEqual", json!(2.5)),
        ] {
            assert_eq!(value_json(op, &value_text(&v)), Some(v.clone()), "{op} {v}");
        }
    }

    #[test]
    fn blank_rows_are_skipped_and_errors_find_their_row() {
        let form = Form::from_pairs(&[
            ("percentage", "50"),
            ("attr-key", ""),
            ("attr-op", "equals"),
            ("attr-value", ""),
            ("attr-key", "plan"),
            ("attr-op", "equals"),
            ("attr-value", "pro"),
            ("url-op", "contains"),
            ("url-value", "/pricing"),
            ("url-op", "contains"),
            ("url-value", ""),
        ]);
        let rules = Rules::from_form(&form);
        let (body, attr_rows, url_rows) = rules.body();
        assert_eq!(
            body,
            json!({"percentage": 50.0, "attributes": [{"key": "plan", "operator": "equals", "value": "pro"}],
                   "urls": [{"operator": "contains", "value": "/pricing"}]})
        );
        assert_eq!(
            (attr_rows.as_slice(), url_rows.as_slice()),
            (&[1][..], &[0][..])
        );
        let f = |p| form_field(p, &attr_rows, &url_rows);
        assert_eq!(
            f("targeting.attributes[0].value").as_deref(),
            Some("attr-1-value")
        );
        assert_eq!(f("targeting.attributes[0]").as_deref(), Some("attr-1-key"));
        assert_eq!(
            f("targeting.urls[0].operator").as_deref(),
            Some("url-0-operator")
        );
        assert_eq!(f("targeting.urls").as_deref(), Some("urls"));
        assert_eq!(f("targeting.percentage").as_deref(), Some("percentage"));
        assert_eq!(f("title"), None);
    }

    #[test]
    fn a_saved_targeting_shows_as_the_rows_that_make_it_again() {
        let t = Targeting {
            percentage: 25.0,
            attributes: vec![AttributeRule {
                key: "seats".into(),
                operator: Operator::GreaterThan,
                value: Some(json!(10)),
            }],
            urls: vec![UrlRule {
                operator: UrlOperator::StartsWith,
                value: "https://shop.example/".into(),
            }],
        };
        let (body, _, _) = Rules::from_targeting(&t).body();
        assert_eq!(serde_json::from_value::<Targeting>(body).unwrap(), t);
    }
}
