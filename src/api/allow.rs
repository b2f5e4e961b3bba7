//! The methods each documented path answers, from the OpenAPI document, so that a known path
//! asked with another method answers `405 METHOD_NOT_ALLOWED` with an `Allow` header (and an
//! unknown path `404 NOT_FOUND`; a path with a trailing slash is unknown).

use serde_json::Value;

/// Path templates (`/acq/v1/contacts/{id}`) and their methods.
#[derive(Debug, Default)]
pub struct Allowed(Vec<(Vec<String>, String)>);

impl Allowed {
    /// Reads the `paths` of an OpenAPI document. `HEAD` is allowed wherever `GET` is.
    pub fn from_openapi(doc: &Value) -> Allowed {
        let routes = doc["paths"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(path, item)| {
                let mut methods: Vec<String> = item
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(m, _)| m.to_ascii_uppercase())
                    .collect();
                if methods.iter().any(|m| m == "GET") {
                    methods.push("HEAD".into());
                }
                methods.sort();
                (segments(path), methods.join(", "))
            })
            .collect();
        Allowed(routes)
    }

    /// `path` answers the methods of the documented path `like` (an operator's alias of it,
    /// served outside the document).
    pub fn alias(&mut self, path: &str, like: &str) {
        if let Some(methods) = self.methods(like).map(str::to_owned) {
            self.0.push((segments(path), methods));
        }
    }

    /// The `Allow` value of the route matching `path` (the one with the most literal segments,
    /// so `/contacts/batch` wins over `/contacts/{id}`), `None` when no route matches.
    pub fn methods(&self, path: &str) -> Option<&str> {
        let asked = segments(path);
        self.0
            .iter()
            .filter_map(|(template, methods)| {
                let mut literal = 0;
                let matches = template.len() == asked.len()
                    && template.iter().zip(&asked).all(|(t, a)| {
                        if t == a {
                            literal += 1;
                            true
                        } else {
                            t.starts_with('{') && t.ends_with('}') && !a.is_empty()
                        }
                    });
                matches.then_some((literal, methods.as_str()))
            })
            .max_by_key(|(literal, _)| *literal)
            .map(|(_, methods)| methods)
    }
}

/// A path's segments; a trailing slash makes an empty last segment, which no template's
/// segment matches: `/acq/v1/contacts/` is not `/acq/v1/contacts` (the document names every
/// path without one, so a trailing slash is an unknown path, 404, on every path).
fn segments(path: &str) -> Vec<String> {
    path.split('/').map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_path_names_its_methods_and_an_unknown_one_none() {
        let doc = serde_json::json!({"paths": {
            "/acq/v1/contacts/{id}": {"get": {}, "patch": {}, "delete": {}},
            "/acq/v1/contacts/batch": {"post": {}}
        }});
        let allowed = Allowed::from_openapi(&doc);
        assert_eq!(
            allowed.methods("/acq/v1/contacts/abc"),
            Some("DELETE, GET, HEAD, PATCH")
        );
        assert_eq!(allowed.methods("/acq/v1/contacts/batch"), Some("POST"));
        assert_eq!(allowed.methods("/acq/v1/contacts/a/b"), None);
        assert_eq!(allowed.methods("/acq/v1/contacts//"), None);
        assert_eq!(allowed.methods("/acq/v1/contacts/batch/"), None);
        assert_eq!(allowed.methods("/acq/v1/contacts/abc/"), None);
    }

    #[test]
    fn an_alias_answers_the_methods_of_its_documented_path() {
        let doc = serde_json::json!({"paths": {"/sdk/v1/analytics.js": {"get": {}}}});
        let mut allowed = Allowed::from_openapi(&doc);
        allowed.alias("/lib/site.js", "/sdk/v1/analytics.js");
        allowed.alias("/t/e", "/nowhere");
        assert_eq!(allowed.methods("/lib/site.js"), Some("GET, HEAD"));
        assert_eq!(allowed.methods("/lib/site.js/"), None);
        assert_eq!(allowed.methods("/t/e"), None);
    }
}
