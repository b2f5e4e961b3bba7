//! Decoding and validating a tracker batch (api.md §7): simd-json parses the body in place into
//! borrowed values; each event is checked on its own, so one bad event is reported (with its
//! index and field) and the others are kept.
//!
//! Accepted shapes: `{"batch": [event, ...], "sentAt": "...", "writeKey"?: "..."}` or a single
//! event object. Never panics, whatever the input (see `fuzz/`).

use chrono::DateTime;
use serde::Serialize;
use simd_json::prelude::*;
use simd_json::BorrowedValue as Value;

use super::event::{Event, EventType};

const MAX_ID_CHARS: usize = 200;
const MAX_TEXT_CHARS: usize = 2048;

/// Why a whole body is refused (400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    NotJson(String),
    /// More events than `collector.max_batch_events` (413).
    TooManyEvents(usize),
    Invalid {
        field: &'static str,
        message: String,
    },
}

/// One rejected event: `{"index", "field", "message"}` in the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub index: usize,
    pub field: String,
    pub message: String,
    /// Rejected for its size: when nothing else is left, the answer is 413, not 400.
    #[serde(skip)]
    pub too_large: bool,
}

/// Facts about the request, used to enrich each event.
#[derive(Debug, Clone, Default)]
pub struct Enrichment {
    pub app_id: String,
    /// When the server received the batch, µs since the epoch.
    pub received_at: i64,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
}

/// A parsed body: the events still as borrowed JSON, plus the batch-level fields.
pub struct Parsed<'a> {
    items: Vec<Value<'a>>,
    sent_at: Option<i64>,
    /// `writeKey` of the body, for beacons that cannot set headers.
    pub write_key: Option<String>,
}

impl Parsed<'_> {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

fn parse_time(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_micros())
}

/// Parses the body in place.
pub fn parse(body: &mut [u8]) -> Result<Parsed<'_>, BodyError> {
    let value =
        simd_json::to_borrowed_value(body).map_err(|e| BodyError::NotJson(e.to_string()))?;
    let Value::Object(mut root) = value else {
        return Err(BodyError::Invalid {
            field: "body",
            message: "must be a JSON object".into(),
        });
    };
    let write_key = match root.get("writeKey") {
        Some(v) => Some(
            v.as_str()
                .ok_or(BodyError::Invalid {
                    field: "writeKey",
                    message: "must be a string".into(),
                })?
                .to_owned(),
        ),
        None => None,
    };
    if !root.contains_key("batch") {
        root.remove("writeKey");
        return Ok(Parsed {
            items: vec![Value::Object(root)],
            sent_at: None,
            write_key,
        });
    }
    let sent_at = match root.get("sentAt") {
        None => None,
        Some(v) => Some(v.as_str().and_then(parse_time).ok_or(BodyError::Invalid {
            field: "sentAt",
            message: "must be an ISO 8601 timestamp".into(),
        })?),
    };
    match root.remove("batch") {
        Some(Value::Array(items)) if items.is_empty() => Err(BodyError::Invalid {
            field: "batch",
            message: "must hold at least one event".into(),
        }),
        Some(Value::Array(items)) => Ok(Parsed {
            items: *items,
            sent_at,
            write_key,
        }),
        _ => Err(BodyError::Invalid {
            field: "batch",
            message: "must be an array of events".into(),
        }),
    }
}

struct Checker {
    index: usize,
    errors: Vec<Rejected>,
}

impl Checker {
    /// Whether `field` was already reported (so a required-field check does not repeat it).
    fn failed(&self, field: &str) -> bool {
        self.errors.iter().any(|e| e.field == field)
    }

    fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(Rejected {
            index: self.index,
            field: field.to_owned(),
            message: message.into(),
            too_large: false,
        });
    }

    /// An optional string of at most `max` characters.
    fn text(&mut self, v: Option<&Value>, field: &str, max: usize) -> Option<String> {
        match v {
            None | Some(Value::Static(simd_json::StaticNode::Null)) => None,
            Some(v) => match v.as_str() {
                Some(s) if s.chars().count() <= max => Some(s.to_owned()),
                Some(_) => {
                    self.fail(field, format!("must be at most {max} characters"));
                    None
                }
                None => {
                    self.fail(field, "must be a string");
                    None
                }
            },
        }
    }

    /// An optional id: a non-empty string, with `prefix` when given.
    fn id(&mut self, v: Option<&Value>, field: &str, prefix: &str) -> Option<String> {
        let s = self.text(v, field, MAX_ID_CHARS)?;
        if s.is_empty() || !s.starts_with(prefix) || s.len() == prefix.len() {
            let shape = if prefix.is_empty() {
                "a non-empty string".to_owned()
            } else {
                format!("a string starting with {prefix}")
            };
            self.fail(field, format!("must be {shape}"));
            return None;
        }
        if s.chars().any(char::is_control) {
            self.fail(field, "must not contain control characters");
            return None;
        }
        Some(s)
    }

    fn time(&mut self, v: Option<&Value>, field: &str) -> Option<i64> {
        let s = self.text(v, field, 64)?;
        let t = parse_time(&s);
        if t.is_none() {
            self.fail(field, "must be an ISO 8601 timestamp with a time zone");
        }
        t
    }

    /// An optional object, encoded back to JSON text.
    fn object_json(&mut self, v: Option<&Value>, field: &str) -> Option<String> {
        match v {
            None | Some(Value::Static(simd_json::StaticNode::Null)) => None,
            Some(v @ Value::Object(_)) => Some(v.encode()),
            Some(_) => {
                self.fail(field, "must be an object");
                None
            }
        }
    }
}

fn is_locale(s: &str) -> bool {
    let mut parts = s.split(['-', '_']);
    let lang = parts.next().unwrap_or("");
    (2..=3).contains(&lang.len())
        && lang.chars().all(|c| c.is_ascii_alphabetic())
        && parts.all(|p| (2..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

fn is_timezone(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/_-+".contains(c))
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// The event's `context`: known shapes get their own columns; the rest stays as JSON text.
#[derive(Default)]
struct Context {
    /// url, path, title, referrer.
    page: [Option<String>; 4],
    device_type: Option<String>,
    locale: Option<String>,
    timezone: Option<String>,
    /// width, height.
    screen: [Option<i32>; 2],
    rest: Option<String>,
}

impl Checker {
    fn context(&mut self, v: Option<&Value>) -> Context {
        let mut out = Context::default();
        let ctx = match v {
            None | Some(Value::Static(simd_json::StaticNode::Null)) => return out,
            Some(Value::Object(ctx)) => ctx,
            Some(_) => {
                self.fail("context", "must be an object");
                return out;
            }
        };
        match ctx.get("page") {
            None => {}
            Some(Value::Object(p)) => {
                for (slot, key) in out
                    .page
                    .iter_mut()
                    .zip(["url", "path", "title", "referrer"])
                {
                    *slot = self.text(p.get(key), &format!("context.page.{key}"), MAX_TEXT_CHARS);
                }
            }
            Some(_) => self.fail("context.page", "must be an object"),
        }
        match ctx.get("device") {
            None => {}
            Some(Value::Object(d)) => {
                out.device_type = self.text(d.get("type"), "context.device.type", 64)
            }
            Some(_) => self.fail("context.device", "must be an object"),
        }
        out.locale = self.text(ctx.get("locale"), "context.locale", 35);
        if out.locale.as_deref().is_some_and(|l| !is_locale(l)) {
            self.fail(
                "context.locale",
                "must be a language-region tag such as en-US",
            );
        }
        out.timezone = self.text(ctx.get("timezone"), "context.timezone", 64);
        if out.timezone.as_deref().is_some_and(|t| !is_timezone(t)) {
            self.fail(
                "context.timezone",
                "must be an IANA zone name such as Europe/Paris",
            );
        }
        match ctx.get("screen") {
            None => {}
            Some(Value::Object(s)) => {
                for (slot, key) in out.screen.iter_mut().zip(["width", "height"]) {
                    match s.get(key).map(|v| v.as_i64()) {
                        None => {}
                        Some(Some(n)) if (0..=100_000).contains(&n) => *slot = Some(n as i32),
                        Some(_) => self.fail(
                            &format!("context.screen.{key}"),
                            "must be an integer from 0 to 100000",
                        ),
                    }
                }
            }
            Some(_) => self.fail("context.screen", "must be an object"),
        }
        let mut rest = ctx.clone();
        for k in [
            "page",
            "device",
            "locale",
            "timezone",
            "screen",
            "ip",
            "userAgent",
        ] {
            rest.remove(k);
        }
        if !rest.is_empty() {
            out.rest = Some(Value::Object(rest).encode());
        }
        out
    }
}

/// Validates and enriches every event; returns the accepted ones and the rejections.
pub fn validate(
    parsed: Parsed<'_>,
    enrich: &Enrichment,
    max_event_bytes: usize,
) -> (Vec<Event>, Vec<Rejected>) {
    let mut events = Vec::with_capacity(parsed.items.len());
    let mut rejected = Vec::new();
    for (index, item) in parsed.items.iter().enumerate() {
        match check_event(index, item, parsed.sent_at, enrich, max_event_bytes) {
            Ok(e) => events.push(e),
            Err(mut r) => rejected.append(&mut r),
        }
    }
    (events, rejected)
}

fn check_event(
    index: usize,
    item: &Value<'_>,
    batch_sent_at: Option<i64>,
    enrich: &Enrichment,
    max_event_bytes: usize,
) -> Result<Event, Vec<Rejected>> {
    let mut c = Checker {
        index,
        errors: Vec::new(),
    };
    let Some(obj) = item.as_object() else {
        c.fail("body", "an event must be a JSON object");
        return Err(c.errors);
    };
    let get = |k: &str| obj.get(k);
    let kind = get("type")
        .and_then(|v| v.as_str())
        .and_then(EventType::parse);
    if kind.is_none() {
        c.fail("type", "must be one of: page, track, identify, group");
    }
    let message_id = c.id(get("messageId"), "messageId", "msg_");
    let anonymous_id = c.text(get("anonymousId"), "anonymousId", 64);
    if let Some(a) = &anonymous_id {
        if uuid::Uuid::try_parse(a).is_err() {
            c.fail("anonymousId", "must be a UUID");
        }
    }
    let user_id = c.id(get("userId"), "userId", "");
    if anonymous_id.is_none()
        && user_id.is_none()
        && !c.failed("anonymousId")
        && !c.failed("userId")
    {
        c.fail("anonymousId", "anonymousId or userId is required");
    }
    let session_id = c.id(get("sessionId"), "sessionId", "ses_");
    let event = c.text(get("event"), "event", MAX_ID_CHARS);
    if kind == Some(EventType::Track)
        && event.as_deref().is_none_or(|e| e.trim().is_empty())
        && !c.errors.iter().any(|e| e.field == "event")
    {
        c.fail("event", "is required for track: the event name");
    }
    let group_id = c.id(get("groupId"), "groupId", "");
    if kind == Some(EventType::Group) && group_id.is_none() && !c.failed("groupId") {
        c.fail("groupId", "is required for group");
    }
    if kind == Some(EventType::Identify) && user_id.is_none() && !c.failed("userId") {
        c.fail("userId", "is required for identify");
    }
    let properties = c.object_json(get("properties"), "properties");
    let traits = c.object_json(get("traits"), "traits");
    let original_timestamp = c.time(get("timestamp"), "timestamp");
    let sent_at = match get("sentAt") {
        Some(v) => c.time(Some(v), "sentAt"),
        None => batch_sent_at,
    };

    let ctx = c.context(get("context"));
    let (Some(kind), true) = (kind, c.errors.is_empty()) else {
        return Err(c.errors);
    };
    let received_at = enrich.received_at;
    let timestamp = match (original_timestamp, sent_at) {
        (Some(orig), Some(sent)) => received_at.saturating_sub(sent.saturating_sub(orig)),
        (Some(orig), None) => orig,
        (None, _) => received_at,
    };
    let [page_url, page_path, page_title, page_referrer] = ctx.page;
    let e = Event {
        message_id: message_id.unwrap_or_else(|| format!("msg_{}", uuid::Uuid::new_v4().simple())),
        app_id: enrich.app_id.clone(),
        kind,
        event,
        anonymous_id,
        user_id,
        group_id,
        session_id,
        timestamp,
        original_timestamp,
        sent_at,
        received_at,
        page_url,
        page_path,
        page_title,
        page_referrer,
        device_type: ctx.device_type,
        locale: ctx.locale,
        timezone: ctx.timezone,
        screen_width: ctx.screen[0],
        screen_height: ctx.screen[1],
        ip: enrich.ip.clone(),
        user_agent: enrich.user_agent.clone(),
        properties,
        traits,
        context: ctx.rest,
    };
    if e.approx_bytes() > max_event_bytes {
        c.fail("body", format!("event larger than {max_event_bytes} bytes"));
        c.errors[0].too_large = true;
        return Err(c.errors);
    }
    Ok(e)
}

/// Convenience for tests and the fuzzer: parse and validate in one go.
pub fn decode(
    body: &mut [u8],
    enrich: &Enrichment,
    max_event_bytes: usize,
) -> Result<(Vec<Event>, Vec<Rejected>), BodyError> {
    let parsed = parse(body)?;
    Ok(validate(parsed, enrich, max_event_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enrich() -> Enrichment {
        Enrichment {
            app_id: "app1".into(),
            received_at: 1_000_000_000_000_000,
            ip: Some("10.0.0.1".into()),
            user_agent: Some("UA".into()),
        }
    }

    fn run(body: &str) -> Result<(Vec<Event>, Vec<Rejected>), BodyError> {
        let mut b = body.as_bytes().to_vec();
        decode(&mut b, &enrich(), 32 * 1024)
    }

    const ANON: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f";

    #[test]
    fn a_batch_is_validated_event_by_event() {
        let body = format!(
            r#"{{"sentAt": "2026-01-01T00:00:10Z", "batch": [
                {{"type": "track", "event": "Bought", "anonymousId": "{ANON}", "messageId": "msg_1",
                  "timestamp": "2026-01-01T00:00:00Z", "properties": {{"price": 9.5}},
                  "context": {{"page": {{"url": "https://x.io/p", "path": "/p", "title": "P", "referrer": ""}},
                               "device": {{"type": "mobile"}}, "locale": "fr-FR", "timezone": "Europe/Paris",
                               "screen": {{"width": 390, "height": 844}}, "library": {{"name": "t"}}, "ip": "6.6.6.6"}}}},
                {{"type": "track", "anonymousId": "{ANON}"}},
                {{"type": "jump", "anonymousId": "not-a-uuid", "messageId": "m2"}},
                {{"type": "identify", "userId": "u1", "traits": {{"email": "a@b.co"}}}}
            ]}}"#
        );
        let (events, rejected) = run(&body).unwrap();
        assert_eq!(events.len(), 2);
        let e = &events[0];
        assert_eq!(e.page_path.as_deref(), Some("/p"));
        assert_eq!(e.page_referrer.as_deref(), Some(""));
        assert_eq!((e.screen_width, e.screen_height), (Some(390), Some(844)));
        assert_eq!(
            e.ip.as_deref(),
            Some("10.0.0.1"),
            "the client's ip is overwritten"
        );
        assert_eq!(e.context.as_deref(), Some(r#"{"library":{"name":"t"}}"#));
        // Skew: the client clock says it sent 10 s after the event; the server got it at received_at.
        assert_eq!(e.timestamp, 1_000_000_000_000_000 - 10_000_000);
        let fields: Vec<(usize, &str)> = rejected
            .iter()
            .map(|r| (r.index, r.field.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                (1, "event"),
                (2, "type"),
                (2, "messageId"),
                (2, "anonymousId")
            ]
        );
        assert_eq!(events[1].user_id.as_deref(), Some("u1"));
        assert!(events[1].message_id.starts_with("msg_"));
    }

    #[test]
    fn bodies_that_are_not_batches_are_refused_whole() {
        assert!(matches!(run("{"), Err(BodyError::NotJson(_))));
        assert!(matches!(
            run("[1]"),
            Err(BodyError::Invalid { field: "body", .. })
        ));
        assert!(matches!(
            run(r#"{"batch": {}}"#),
            Err(BodyError::Invalid { field: "batch", .. })
        ));
        assert!(matches!(
            run(r#"{"batch": [], "sentAt": "x"}"#),
            Err(BodyError::Invalid {
                field: "sentAt",
                ..
            })
        ));
        let single = format!(r#"{{"type": "page", "anonymousId": "{ANON}", "writeKey": "ik_x"}}"#);
        let mut b = single.into_bytes();
        let parsed = parse(&mut b).unwrap();
        assert_eq!(parsed.write_key.as_deref(), Some("ik_x"));
        assert_eq!(parsed.len(), 1);
    }

    #[test]
    fn context_shapes_are_checked() {
        for (ctx, field) in [
            (r#"{"page": "x"}"#, "context.page"),
            (r#"{"page": {"url": 1}}"#, "context.page.url"),
            (r#"{"screen": {"width": -1}}"#, "context.screen.width"),
            (r#"{"screen": {"height": "tall"}}"#, "context.screen.height"),
            (r#"{"locale": "english"}"#, "context.locale"),
            (r#"{"timezone": "Not A Zone!"}"#, "context.timezone"),
            (r#"{"device": {"type": 3}}"#, "context.device.type"),
            (r#"[]"#, "context"),
        ] {
            let body = format!(r#"{{"type": "page", "anonymousId": "{ANON}", "context": {ctx}}}"#);
            let (events, rejected) = run(&body).unwrap();
            assert!(events.is_empty(), "{ctx}");
            assert_eq!(rejected[0].field, field, "{ctx}");
        }
    }

    #[test]
    fn explicit_nulls_do_not_satisfy_required_fields() {
        for (body, field) in [
            (r#"{"type": "page", "anonymousId": null}"#, "anonymousId"),
            (
                r#"{"type": "page", "anonymousId": null, "userId": null}"#,
                "anonymousId",
            ),
            (
                r#"{"type": "identify", "anonymousId": "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f", "userId": null}"#,
                "userId",
            ),
            (
                r#"{"type": "group", "userId": "u", "groupId": null}"#,
                "groupId",
            ),
            (
                r#"{"type": "track", "userId": "u", "event": null}"#,
                "event",
            ),
        ] {
            let (events, rejected) = run(body).unwrap();
            assert!(events.is_empty(), "{body}");
            assert_eq!(
                rejected
                    .iter()
                    .map(|r| r.field.as_str())
                    .collect::<Vec<_>>(),
                [field],
                "{body}"
            );
        }
    }

    #[test]
    fn oversized_events_are_rejected() {
        let body = format!(
            r#"{{"type": "track", "event": "x", "anonymousId": "{ANON}", "properties": {{"blob": "{}"}}}}"#,
            "a".repeat(40_000)
        );
        let (events, rejected) = run(&body).unwrap();
        assert!(events.is_empty());
        assert_eq!(rejected[0].field, "body");
    }
}
