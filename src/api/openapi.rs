//! Makes the generated OpenAPI document say what the server answers, in one pass over every
//! operation, so no handler can forget it:
//!
//! - a JSON success schema `S` becomes the envelope `{success: true, data: S, meta}`; when `S`
//!   is an array of an operation that pages (it takes a `limit` query parameter), `pagination`
//!   is added and required; the small lists read whole (a board's statuses, topics and tags)
//!   answer without it;
//! - every error status is answered by the `Error` schema (interface §7);
//! - an operation secured by an API key can answer 401, 403 and 429 (with `Retry-After`), one
//!   secured by the integration key 401 and 403, one secured by the admin token 401; any
//!   operation that reads a body or query can answer 400, one that reads a body 408; any that
//!   touches the store 503.
//!
//! The handlers' own annotations keep what only they know: the success schema and the errors
//! specific to the operation.

use serde_json::{json, Map, Value};

/// Adds the envelope, error and shared schemas and completes every operation.
pub fn complete(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    if !schemas.is_object() {
        *schemas = json!({});
    }
    let schemas = schemas.as_object_mut().expect("an object");
    for (name, schema) in shared_schemas() {
        schemas.insert(name.to_owned(), schema);
    }
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            complete_operation(path, method, op);
        }
    }
}

fn complete_operation(path: &str, method: &str, op: &mut Value) {
    let schemes: Vec<String> = op["security"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|s| s.keys().cloned())
        .collect();
    let has = |s: &str| schemes.iter().any(|x| x == s);
    let reads_body = op.get("requestBody").is_some();
    let query = |name: Option<&str>| {
        op["parameters"].as_array().is_some_and(|ps| {
            ps.iter()
                .any(|p| p["in"] == "query" && name.is_none_or(|n| p["name"] == n))
        })
    };
    let (reads_query, pages) = (query(None), query(Some("limit")));
    let mut extra: Vec<(&str, &str)> = Vec::new();
    if has("api_key") {
        extra.extend([
            (
                "401",
                "UNAUTHORIZED: the X-API-Key is missing, unknown or revoked",
            ),
            ("403", "FORBIDDEN: the key lacks the permission"),
            (
                "429",
                "RATE_LIMITED: over the key's rate; wait Retry-After seconds",
            ),
        ]);
    }
    if has("app_key") {
        extra.extend([
            (
                "401",
                "UNAUTHORIZED: the integration key is missing, unknown or revoked",
            ),
            ("403", "PLAN_LIMIT_REACHED"),
        ]);
    }
    if has("admin_token") {
        extra.push(("401", "UNAUTHORIZED: the admin token is missing or wrong"));
    }
    if reads_body || reads_query {
        extra.push(("400", "VALIDATION_ERROR: one detail per invalid field"));
    }
    if reads_body {
        extra.push(("408", "REQUEST_TIMEOUT: the body did not arrive in time"));
    }
    if !schemes.is_empty() {
        extra.push((
            "503",
            "SERVICE_UNAVAILABLE: busy, or the disk is full; retry after Retry-After seconds",
        ));
    }
    let responses = op["responses"]
        .as_object_mut()
        .expect("every operation has responses");
    for (status, description) in extra {
        responses
            .entry(status)
            .or_insert_with(|| json!({ "description": description }));
    }
    for (status, response) in responses.iter_mut() {
        complete_response(status, response, (path, method), pages);
    }
}

/// Answers in a format of their own: this document, and analytics.js's settings (Segment's).
const NOT_ENVELOPED: [&str; 2] = ["/openapi.json", "/v1/projects/{writeKey}/settings"];

fn complete_response(
    status: &str,
    response: &mut Value,
    (path, method): (&str, &str),
    pages: bool,
) {
    let code: u16 = status.parse().unwrap_or(0);
    if code >= 400 {
        if response["description"].as_str().is_none_or(str::is_empty) {
            response["description"] = json!("Error");
        }
        response["content"] = json!({ "application/json": { "schema": schema_ref("Error") } });
        if code == 429 || code == 503 {
            response["headers"]["Retry-After"] = json!({
                "description": "Seconds to wait before retrying",
                "schema": { "type": "integer", "minimum": 0 }
            });
        }
        return;
    }
    if NOT_ENVELOPED.contains(&path) {
        return;
    }
    // `get_mut`, not `response["content"]`: indexing would add `"content": null` to an answer
    // without a body (a 304), which is not a valid document.
    let Some(json) = response
        .get_mut("content")
        .and_then(|c| c.get_mut("application/json"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let data = json.remove("schema").unwrap_or_else(|| {
        tracing::warn!(
            path,
            method,
            status,
            "a JSON success answer without a schema"
        );
        json!({})
    });
    json.insert("schema".into(), envelope(data, pages));
}

/// `{success: true, data, pagination?, meta}` around `data`; `pagination` when `data` is an
/// array and the operation `pages`.
fn envelope(data: Value, pages: bool) -> Value {
    let list = pages && data["type"] == "array";
    let mut properties = Map::new();
    properties.insert(
        "success".into(),
        json!({ "type": "boolean", "const": true }),
    );
    properties.insert("data".into(), data);
    let mut required = vec!["success", "data", "meta"];
    if list {
        properties.insert("pagination".into(), schema_ref("Pagination"));
        required.push("pagination");
    }
    properties.insert("meta".into(), schema_ref("Meta"));
    json!({ "type": "object", "required": required, "properties": properties })
}

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn shared_schemas() -> [(&'static str, Value); 4] {
    let codes: Vec<&str> = super::ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    [
        (
            "Meta",
            json!({
                "type": "object",
                "required": ["requestId"],
                "properties": { "requestId": {
                    "type": "string", "pattern": "^req_[0-9a-f]{32}$",
                    "description": "Also in the X-Request-Id header; quote it to support" } }
            }),
        ),
        (
            "Pagination",
            json!({
                "type": "object",
                "required": ["limit", "nextCursor", "hasMore"],
                "properties": {
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100 },
                    "nextCursor": { "type": ["string", "null"],
                        "description": "Pass as `cursor` for the next page; null on the last" },
                    "hasMore": { "type": "boolean" }
                }
            }),
        ),
        (
            "FieldError",
            json!({
                "type": "object",
                "required": ["field", "message"],
                "properties": { "field": { "type": "string" }, "message": { "type": "string" } }
            }),
        ),
        (
            "Error",
            json!({
                "type": "object",
                "description": "Every error answer (interface §7).",
                "required": ["success", "error", "meta"],
                "properties": {
                    "success": { "type": "boolean", "const": false },
                    "error": {
                        "type": "object",
                        "required": ["code", "message"],
                        "properties": {
                            "code": { "type": "string", "enum": codes },
                            "message": { "type": "string" },
                            "details": { "type": "array", "items": schema_ref("FieldError") }
                        }
                    },
                    "meta": schema_ref("Meta")
                }
            }),
        ),
    ]
}
