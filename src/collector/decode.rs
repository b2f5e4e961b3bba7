//! Decoding and validating a tracker batch (api.md §7): simd-json parses the body in place into
//! its tape (a flat array of nodes, strings borrowed from the body: no tree, no map, no string
//! copied), and each event is read in one pass over its keys and checked on its own, so one bad
//! event is reported (with its index and field) and the others are kept. Only what an accepted
//! event keeps is copied out of the body.
//!
//! Accepted shapes: `{"batch": [event, ...], "sentAt": "...", "writeKey"?: "..."}` or a single
//! event object. A key given twice counts once, its last value (as in a JSON object read into a
//! map). Never panics, whatever the input (see `fuzz/`).

use std::cell::RefCell;
use std::sync::Arc;

use chrono::DateTime;
use serde::Serialize;
use simd_json::prelude::*;
use simd_json::tape::{Object, Value};
use simd_json::{Buffers, Tape};

use super::event::{Event, EventType};
use crate::ids::canonical_anonymous_id;

const MAX_ID_CHARS: usize = 200;
const MAX_TEXT_CHARS: usize = 2048;

/// Why a whole body is refused (400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    NotJson(String),
    /// A number literal outside the range of a 64-bit float (retried clamped, see `decode`).
    NumberOutOfRange(String),
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
    pub app_id: Arc<str>,
    /// When the server received the batch, µs since the epoch.
    pub received_at: i64,
    pub ip: Option<Arc<str>>,
    pub user_agent: Option<Arc<str>>,
}

/// A parsed body: the events still as JSON (views into the tape), plus the batch-level fields.
pub struct Parsed<'t, 'i> {
    items: Vec<Value<'t, 'i>>,
    sent_at: Option<i64>,
    /// `writeKey` of the body, for beacons that cannot set headers.
    pub write_key: Option<String>,
}

impl Parsed<'_, '_> {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// The first instant after the latest time an event may carry (2100-01-01T00:00:00Z, µs).
pub const MAX_TIME: i64 = 4_102_444_800_000_000;

fn parse_time(s: &str) -> Option<i64> {
    utc_time(s.as_bytes()).or_else(|| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.timestamp_micros())
    })
}

/// The fast path of [`parse_time`], for what trackers send: `YYYY-MM-DDTHH:MM:SS[.f]Z` (1 to 9
/// fraction digits, truncated to µs as chrono does). `None` for any other form, which chrono
/// then reads (offsets, lower-case separators, leap seconds) or refuses.
fn utc_time(s: &[u8]) -> Option<i64> {
    fn num(s: &[u8]) -> Option<i64> {
        s.iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    }
    let (head, tail) = s.split_at_checked(19)?;
    if [head[4], head[7], head[10], head[13], head[16]] != *b"--T::" {
        return None;
    }
    let (year, month, day) = (num(&head[..4])?, num(&head[5..7])?, num(&head[8..10])?);
    let (hour, minute, second) = (
        num(&head[11..13])?,
        num(&head[14..16])?,
        num(&head[17..19])?,
    );
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if !(1..=days_in_month).contains(&day) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let micros = match tail {
        [b'Z'] => 0,
        [b'.', digits @ .., b'Z'] if (1..=9).contains(&digits.len()) => {
            let n = num(digits)?;
            let scale = 10i64.pow(9 - digits.len() as u32);
            n * scale / 1000
        }
        _ => return None,
    };
    // Days from 1970-01-01 to the date (the proleptic Gregorian calendar, H. Hinnant's method).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + micros)
}

fn is_null(v: &Value<'_, '_>) -> bool {
    v.as_null().is_some()
}

/// Parses `body[..len]` into a tape and hands it to `f`. The rest of `body` is simd-json's
/// padding (at least [`simd_json::INPUT_PADDING`] bytes, any content), which spares simd-json a
/// padded copy of the body. The tape and simd-json's scratch space are kept per thread.
fn with_tape<R>(
    body: &mut [u8],
    len: usize,
    f: impl FnOnce(&Tape<'_>) -> R,
) -> Result<R, BodyError> {
    thread_local! {
        static SCRATCH: RefCell<(Buffers, Tape<'static>)> =
            RefCell::new((Buffers::new(16 * 1024), Tape::null()));
    }
    // The kept tape's nodes borrow nothing between requests: it is emptied (`reset`) before it
    // goes back, and given the body's lifetime for the time of one parse.
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut kept) => {
            let (buffers, tape) = &mut *kept;
            let mut current = Tape(std::mem::take(&mut tape.0)).reset();
            let out = fill(body, len, buffers, &mut current, f);
            tape.0 = current.reset().0;
            out
        }
        Err(_) => fill(body, len, &mut Buffers::new(len), &mut Tape(Vec::new()), f),
    })
}

/// One parse of `body[..len]` into `tape`, then `f` over it.
fn fill<'de, R>(
    body: &'de mut [u8],
    len: usize,
    buffers: &mut Buffers,
    tape: &mut Tape<'de>,
    f: impl FnOnce(&Tape<'_>) -> R,
) -> Result<R, BodyError> {
    simd_json::fill_tape_padded(body, len, buffers, tape).map_err(|e| match e.error() {
        simd_json::ErrorType::InvalidNumber => BodyError::NumberOutOfRange(e.to_string()),
        _ => BodyError::NotJson(e.to_string()),
    })?;
    Ok(f(tape))
}

/// Reads the batch-level fields of a parsed body.
pub fn parse<'t, 'i>(tape: &'t Tape<'i>) -> Result<Parsed<'t, 'i>, BodyError> {
    let root = tape.as_value();
    let Some(object) = root.as_object() else {
        return Err(BodyError::Invalid {
            field: "body",
            message: "must be a JSON object".into(),
        });
    };
    let (mut batch, mut sent_at, mut write_key) = (None, None, None);
    for (k, v) in object.iter() {
        match k {
            "batch" => batch = Some(v),
            "sentAt" => sent_at = Some(v),
            "writeKey" => write_key = Some(v),
            _ => {}
        }
    }
    let write_key = match write_key {
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
    let Some(batch) = batch else {
        // A single event; its writeKey is not one of its fields, so it is not read as one.
        return Ok(Parsed {
            items: vec![root],
            sent_at: None,
            write_key,
        });
    };
    // An absurd batch sentAt (outside 2000-2099) is ignored rather than refusing the batch:
    // the events then keep their own timestamps (see `event_time`).
    let sent_at = match sent_at {
        None => None,
        Some(v) => Some(v.as_str().and_then(parse_time).ok_or(BodyError::Invalid {
            field: "sentAt",
            message: "must be an ISO 8601 timestamp".into(),
        })?),
    }
    .filter(|t| (MIN_TIME..MAX_TIME).contains(t));
    match batch.as_array() {
        Some(items) if items.is_empty() => Err(BodyError::Invalid {
            field: "batch",
            message: "must hold at least one event".into(),
        }),
        Some(items) => Ok(Parsed {
            items: items.iter().collect(),
            sent_at,
            write_key,
        }),
        None => Err(BodyError::Invalid {
            field: "batch",
            message: "must be an array of events".into(),
        }),
    }
}

/// Parses a body and counts its events (what the parse benchmark measures).
pub fn count_events(body: &[u8]) -> Result<usize, BodyError> {
    let mut padded = padded(body);
    with_tape(&mut padded, body.len(), |tape| parse(tape).map(|p| p.len()))?
}

/// A copy of `body` followed by simd-json's padding.
fn padded(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + simd_json::INPUT_PADDING);
    out.extend_from_slice(body);
    out.resize(body.len() + simd_json::INPUT_PADDING, b' ');
    out
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

    /// An optional string of at most `max` characters, borrowed from the body.
    fn str<'i>(&mut self, v: Option<Value<'_, 'i>>, field: &str, max: usize) -> Option<&'i str> {
        let v = v.filter(|v| !is_null(v))?;
        match v.into_string() {
            // A string of at most `max` bytes has at most `max` characters.
            Some(s) if s.len() <= max || s.chars().count() <= max => Some(s),
            Some(_) => {
                self.fail(field, format!("must be at most {max} characters"));
                None
            }
            None => {
                self.fail(field, "must be a string");
                None
            }
        }
    }

    /// An optional string of at most `max` characters.
    fn text(&mut self, v: Option<Value<'_, '_>>, field: &str, max: usize) -> Option<String> {
        self.str(v, field, max).map(str::to_owned)
    }

    /// An optional id: a non-empty string, with `prefix` when given.
    fn id(&mut self, v: Option<Value<'_, '_>>, field: &str, prefix: &str) -> Option<String> {
        let s = self.str(v, field, MAX_ID_CHARS)?;
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
        Some(s.to_owned())
    }

    /// An ISO 8601 time from 2000-01-01 to 2099-12-31 (UTC).
    fn time(&mut self, v: Option<Value<'_, '_>>, field: &str) -> Option<i64> {
        let s = self.str(v, field, 64)?;
        match parse_time(s) {
            None => {
                self.fail(field, "must be an ISO 8601 timestamp with a time zone");
                None
            }
            Some(t) if !(MIN_TIME..MAX_TIME).contains(&t) => {
                self.fail(field, "must be between 2000-01-01 and 2099-12-31");
                None
            }
            t => t,
        }
    }

    /// An optional object, encoded back to JSON text.
    fn object_json(&mut self, v: Option<Value<'_, '_>>, field: &str) -> Option<String> {
        let v = v.filter(|v| !is_null(v))?;
        if v.as_object().is_some() {
            return with_json_scratch(|out| {
                // Writing to a Vec cannot fail.
                let _ = v.write(out);
            });
        }
        self.fail(field, "must be an object");
        None
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

/// The keys of `context` that have columns (or that the server sets: ip, userAgent).
const CONTEXT_KEYS: [&str; 7] = [
    "page",
    "device",
    "locale",
    "timezone",
    "screen",
    "ip",
    "userAgent",
];

/// The values of `keys` in `object`, in one pass (the last of a repeated key).
fn pick<'t, 'i, const N: usize>(
    object: &Object<'t, 'i>,
    keys: &[&str; N],
) -> [Option<Value<'t, 'i>>; N] {
    let mut out = [None; N];
    for (k, v) in object.iter() {
        if let Some(i) = keys.iter().position(|key| *key == k) {
            out[i] = Some(v);
        }
    }
    out
}

/// JSON text written by `write` into a buffer kept per thread, then copied out at its exact
/// size: no reallocation as it grows, no spare capacity held by the event. `None` if nothing
/// was written.
fn with_json_scratch(write: impl FnOnce(&mut Vec<u8>)) -> Option<String> {
    thread_local! {
        static JSON: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    JSON.with(|scratch| {
        let mut owned = Vec::new();
        let mut kept = scratch.try_borrow_mut();
        let out = kept.as_deref_mut().unwrap_or(&mut owned);
        out.clear();
        write(out);
        let text = std::str::from_utf8(out)
            .ok()
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        // A rare huge object does not stay as this thread's scratch space.
        if out.capacity() > 64 * 1024 {
            *out = Vec::new();
        }
        text
    })
}

/// The members of `object` whose keys are not in `known`, as a JSON object (None if none).
fn rest_json(object: &Object<'_, '_>, known: &[&str]) -> Option<String> {
    with_json_scratch(|out| {
        for (k, v) in object.iter().filter(|(k, _)| !known.contains(k)) {
            out.push(if out.is_empty() { b'{' } else { b',' });
            // Writing to a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, k);
            out.push(b':');
            let _ = v.write(&mut *out);
        }
        if !out.is_empty() {
            out.push(b'}');
        }
    })
}

impl Checker {
    /// An optional object: its view, or None (and an error unless absent or null).
    fn object<'t, 'i>(&mut self, v: Option<Value<'t, 'i>>, field: &str) -> Option<Object<'t, 'i>> {
        let v = v.filter(|v| !is_null(v))?;
        let o = v.as_object();
        if o.is_none() {
            self.fail(field, "must be an object");
        }
        o
    }

    fn context(&mut self, v: Option<Value<'_, '_>>) -> Context {
        let mut out = Context::default();
        let Some(ctx) = self.object(v, "context") else {
            return out;
        };
        let [page, device, locale, timezone, screen, _, _] = pick(&ctx, &CONTEXT_KEYS);
        if let Some(p) = page.and_then(|p| self.object(Some(p), "context.page")) {
            const FIELDS: [&str; 4] = [
                "context.page.url",
                "context.page.path",
                "context.page.title",
                "context.page.referrer",
            ];
            let values = pick(&p, &["url", "path", "title", "referrer"]);
            for ((slot, v), field) in out.page.iter_mut().zip(values).zip(FIELDS) {
                *slot = self.text(v, field, MAX_TEXT_CHARS);
            }
        }
        if let Some(d) = device.and_then(|d| self.object(Some(d), "context.device")) {
            out.device_type = self.text(d.get("type"), "context.device.type", 64);
        }
        out.locale = self.text(locale, "context.locale", 35);
        if out.locale.as_deref().is_some_and(|l| !is_locale(l)) {
            self.fail(
                "context.locale",
                "must be a language-region tag such as en-US",
            );
        }
        out.timezone = self.text(timezone, "context.timezone", 64);
        if out.timezone.as_deref().is_some_and(|t| !is_timezone(t)) {
            self.fail(
                "context.timezone",
                "must be an IANA zone name such as Europe/Paris",
            );
        }
        if let Some(s) = screen.and_then(|s| self.object(Some(s), "context.screen")) {
            const SCREEN: [(&str, &str); 2] = [
                ("width", "context.screen.width"),
                ("height", "context.screen.height"),
            ];
            for (slot, (key, field)) in out.screen.iter_mut().zip(SCREEN) {
                match s.get(key).map(|v| v.as_i64()) {
                    None => {}
                    Some(Some(n)) if (0..=100_000).contains(&n) => *slot = Some(n as i32),
                    Some(_) => self.fail(field, "must be an integer from 0 to 100000"),
                }
            }
        }
        out.rest = rest_json(&ctx, &CONTEXT_KEYS);
        out
    }
}

/// Validates and enriches every event; returns the accepted ones and the rejections.
pub fn validate(
    parsed: &Parsed<'_, '_>,
    enrich: &Enrichment,
    max_event_bytes: usize,
) -> (Vec<Event>, Vec<Rejected>) {
    let mut events = Vec::with_capacity(parsed.items.len());
    let mut rejected = Vec::new();
    for (index, item) in parsed.items.iter().enumerate() {
        match check_event(index, *item, parsed.sent_at, enrich, max_event_bytes) {
            Ok(e) => events.push(e),
            Err(mut r) => rejected.append(&mut r),
        }
    }
    (events, rejected)
}

/// The keys of an event that are read (others are ignored), in the order `check_event` takes them.
const EVENT_KEYS: [&str; 12] = [
    "type",
    "messageId",
    "anonymousId",
    "userId",
    "sessionId",
    "event",
    "groupId",
    "properties",
    "traits",
    "timestamp",
    "sentAt",
    "context",
];

fn check_event(
    index: usize,
    item: Value<'_, '_>,
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
    let [kind, message_id, anonymous_id, user_id, session_id, event, group_id, properties, traits, timestamp, sent_at, context] =
        pick(&obj, &EVENT_KEYS);
    let kind = kind
        .and_then(|v| v.into_string())
        .and_then(EventType::parse);
    if kind.is_none() {
        c.fail("type", "must be one of: page, track, identify, group");
    }
    let ids = c.ids(
        kind,
        RawIds {
            message_id,
            anonymous_id,
            user_id,
            session_id,
            event,
            group_id,
        },
    );
    let properties = c.object_json(properties, "properties");
    let traits = c.object_json(traits, "traits");
    let original_timestamp = c.time(timestamp, "timestamp");
    let sent_at = match sent_at {
        Some(v) => c.time(Some(v), "sentAt"),
        None => batch_sent_at,
    };
    let ctx = c.context(context);
    let (Some(kind), true) = (kind, c.errors.is_empty()) else {
        return Err(c.errors);
    };
    let received_at = enrich.received_at;
    let [page_url, page_path, page_title, page_referrer] = ctx.page;
    let e = Event {
        message_id: ids
            .message_id
            .unwrap_or_else(|| format!("msg_{}", uuid::Uuid::new_v4().simple())),
        app_id: enrich.app_id.clone(),
        kind,
        event: ids.event,
        anonymous_id: ids.anonymous_id,
        user_id: ids.user_id,
        group_id: ids.group_id,
        session_id: ids.session_id,
        timestamp: event_time(original_timestamp, sent_at, received_at),
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
    if over_limit(&e, item, max_event_bytes) {
        c.fail("body", format!("event larger than {max_event_bytes} bytes"));
        c.errors[0].too_large = true;
        return Err(c.errors);
    }
    Ok(e)
}

/// Whether the event, as the client sent it (its JSON, compact), is over `max` bytes. What the
/// server adds (ip, userAgent, appId, receivedAt) does not count. The JSON is encoded only when
/// the kept text could come near the limit (an escape takes at most 6 bytes per character,
/// keys and punctuation less than 1 KiB), so ordinary events cost no encoding.
fn over_limit(e: &Event, item: Value<'_, '_>, max: usize) -> bool {
    let server = [&e.ip, &e.user_agent]
        .iter()
        .map(|s| s.as_ref().map_or(0, |s| s.len()))
        .sum::<usize>()
        + e.app_id.len();
    let text = e.approx_bytes().saturating_sub(server);
    text * 6 + 1024 > max && item.encode().len() > max
}

/// The earliest time an event may carry (2000-01-01T00:00:00Z, µs); earlier is an error.
pub const MIN_TIME: i64 = 946_684_800_000_000;
/// A client clock may run this far ahead of the server before its timestamp is distrusted.
const MAX_AHEAD: i64 = 10 * 60 * 1_000_000;
/// The longest an event may wait in a client (offline, stored, retried) and still have its
/// time corrected for clock skew.
const MAX_CLIENT_DELAY: i64 = 30 * 86_400 * 1_000_000;

/// The event's time: `receivedAt - (sentAt - timestamp)` (clock-skew correction, as Segment and
/// Snowplow do) when the client's two clocks readings are consistent (sent after created, at
/// most 30 days apart); otherwise the client's timestamp when it is not in the future; else
/// `receivedAt`. The client's value is always kept in `original_timestamp`.
pub fn event_time(original: Option<i64>, sent_at: Option<i64>, received_at: i64) -> i64 {
    let Some(orig) = original else {
        return received_at;
    };
    if let Some(sent) = sent_at {
        let delay = sent.saturating_sub(orig);
        if (0..=MAX_CLIENT_DELAY).contains(&delay) {
            return received_at - delay;
        }
    }
    if orig <= received_at.saturating_add(MAX_AHEAD) {
        orig
    } else {
        received_at
    }
}

/// The identifiers of an event as sent.
struct RawIds<'t, 'i> {
    message_id: Option<Value<'t, 'i>>,
    anonymous_id: Option<Value<'t, 'i>>,
    user_id: Option<Value<'t, 'i>>,
    session_id: Option<Value<'t, 'i>>,
    event: Option<Value<'t, 'i>>,
    group_id: Option<Value<'t, 'i>>,
}

/// The identifiers of an event, checked against the requirements of its type.
struct Ids {
    message_id: Option<String>,
    anonymous_id: Option<String>,
    user_id: Option<String>,
    session_id: Option<String>,
    event: Option<String>,
    group_id: Option<String>,
}

impl Checker {
    fn ids(&mut self, kind: Option<EventType>, raw: RawIds<'_, '_>) -> Ids {
        let message_id = self.id(raw.message_id, "messageId", "msg_");
        let anonymous_id =
            self.str(raw.anonymous_id, "anonymousId", 64).and_then(
                |a| match canonical_anonymous_id(a) {
                    Ok(a) => Some(a),
                    Err(m) => {
                        self.fail("anonymousId", m);
                        None
                    }
                },
            );
        let user_id = self.id(raw.user_id, "userId", "");
        if anonymous_id.is_none()
            && user_id.is_none()
            && !self.failed("anonymousId")
            && !self.failed("userId")
        {
            self.fail("anonymousId", "anonymousId or userId is required");
        }
        let session_id = self.id(raw.session_id, "sessionId", "ses_");
        let event = self.text(raw.event, "event", MAX_ID_CHARS);
        if kind == Some(EventType::Track)
            && event.as_deref().is_none_or(|e| e.trim().is_empty())
            && !self.failed("event")
        {
            self.fail("event", "is required for track: the event name");
        }
        let group_id = self.id(raw.group_id, "groupId", "");
        if kind == Some(EventType::Group) && group_id.is_none() && !self.failed("groupId") {
            self.fail("groupId", "is required for group");
        }
        if kind == Some(EventType::Identify) && user_id.is_none() && !self.failed("userId") {
            self.fail("userId", "is required for identify");
        }
        Ids {
            message_id,
            anonymous_id,
            user_id,
            session_id,
            event,
            group_id,
        }
    }
}

/// The limits a body is decoded under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Events in one batch (more: the whole body is refused, 413).
    pub max_events: usize,
    /// One event's JSON as sent (more: that event is refused, 413 if nothing else is left).
    pub max_event_bytes: usize,
}

/// A decoded body: the accepted events, the rejections, and the body's `writeKey`.
#[derive(Debug)]
pub struct Decoded {
    pub events: Vec<Event>,
    pub rejected: Vec<Rejected>,
    pub write_key: Option<String>,
}

/// Parses, validates and enriches a body. A number beyond the range of a 64-bit float (such as
/// `1e400`, which JSON allows) does not refuse the body: it is stored as the nearest float
/// (`±1.7976931348623157e308`, or `0.0` for an underflow), see [`clamp_numbers`].
pub fn decode(body: &[u8], enrich: &Enrichment, limits: Limits) -> Result<Decoded, BodyError> {
    // simd-json parses in place: it gets a padded copy, and `body` stays for the rare retry.
    match decode_in_place(&mut padded(body), body.len(), enrich, limits) {
        Err(BodyError::NumberOutOfRange(_)) => {
            let clamped = clamp_numbers(body);
            decode_in_place(&mut padded(&clamped), clamped.len(), enrich, limits).map_err(|e| {
                match e {
                    BodyError::NumberOutOfRange(m) => BodyError::NotJson(m),
                    e => e,
                }
            })
        }
        r => r,
    }
}

fn decode_in_place(
    body: &mut [u8],
    len: usize,
    enrich: &Enrichment,
    limits: Limits,
) -> Result<Decoded, BodyError> {
    with_tape(body, len, |tape| {
        let parsed = parse(tape)?;
        if parsed.len() > limits.max_events {
            return Err(BodyError::TooManyEvents(limits.max_events));
        }
        let (events, rejected) = validate(&parsed, enrich, limits.max_event_bytes);
        Ok(Decoded {
            events,
            rejected,
            write_key: parsed.write_key,
        })
    })?
}

/// The body with every number literal that a 64-bit float cannot hold replaced by the nearest
/// float; everything else (strings included) byte for byte.
pub fn clamp_numbers(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let (mut i, mut in_string) = (0, false);
    while i < body.len() {
        let b = body[i];
        if in_string {
            out.push(b);
            match b {
                b'\\' if i + 1 < body.len() => {
                    out.push(body[i + 1]);
                    i += 1;
                }
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'-' || b.is_ascii_digit() {
            let end = body[i..]
                .iter()
                .position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .map_or(body.len(), |n| i + n);
            out.extend_from_slice(clamped(&body[i..end]).as_bytes());
            i = end;
            continue;
        }
        in_string = b == b'"';
        out.push(b);
        i += 1;
    }
    out
}

/// One number token, clamped to the range of a 64-bit float when it is outside it.
fn clamped(token: &[u8]) -> std::borrow::Cow<'_, str> {
    let text = String::from_utf8_lossy(token);
    let Ok(v) = text.parse::<f64>() else {
        return text;
    };
    let mantissa = text.split(['e', 'E']).next().unwrap_or("");
    let written_zero = !mantissa.bytes().any(|c| matches!(c, b'1'..=b'9'));
    if v.is_infinite() {
        format!("{:e}", f64::MAX.copysign(v)).into()
    } else if v == 0.0 && !written_zero {
        // An underflow such as 1e-400.
        "0.0".into()
    } else {
        text
    }
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

    const LIMITS: Limits = Limits {
        max_events: 2000,
        max_event_bytes: 32 * 1024,
    };

    fn run(body: &str) -> Result<(Vec<Event>, Vec<Rejected>), BodyError> {
        decode(body.as_bytes(), &enrich(), LIMITS).map(|d| (d.events, d.rejected))
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
        let d = decode(single.as_bytes(), &enrich(), LIMITS).unwrap();
        assert_eq!(d.write_key.as_deref(), Some("ik_x"));
        assert_eq!((d.events.len(), d.rejected.len()), (1, 0));
        assert_eq!(count_events(single.as_bytes()), Ok(1));
    }

    #[test]
    fn a_repeated_key_counts_once_with_its_last_value_and_unknown_context_stays_json() {
        let body = format!(
            r#"{{"type": "track", "event": "A", "event": "B", "anonymousId": "{ANON}",
                "context": {{"lib\"x": {{"v": [1, "\u00e9\n", null]}}, "page": {{"path": "/a"}}, "ip": "1.2.3.4"}}}}"#
        );
        let (events, rejected) = run(&body).unwrap();
        assert!(rejected.is_empty(), "{rejected:?}");
        assert_eq!(events[0].event.as_deref(), Some("B"));
        assert_eq!(events[0].page_path.as_deref(), Some("/a"));
        let rest: serde_json::Value =
            serde_json::from_str(events[0].context.as_deref().unwrap()).unwrap();
        assert_eq!(
            rest,
            serde_json::json!({"lib\"x": {"v": [1, "\u{e9}\n", null]}})
        );
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

    #[test]
    fn the_event_limit_counts_the_client_json_not_what_the_server_adds() {
        // An event just under 32 KiB as sent, from a client with a 30 KB user agent.
        let pad = |n: usize| {
            format!(
                r#"{{"type":"track","event":"x","anonymousId":"{ANON}","properties":{{"b":"{}"}}}}"#,
                "a".repeat(n)
            )
        };
        let base = pad(0).len();
        let body = pad(32 * 1024 - base);
        assert_eq!(body.len(), 32 * 1024);
        let mut rich = enrich();
        rich.user_agent = Some("U".repeat(30_000).into());
        rich.ip = Some("2001:db8::1".into());
        let d = decode(body.as_bytes(), &rich, LIMITS).unwrap();
        let (events, rejected) = (d.events, d.rejected);
        assert_eq!((events.len(), rejected.len()), (1, 0), "{rejected:?}");
        let over = pad(32 * 1024 - base + 1);
        let d = decode(over.as_bytes(), &rich, LIMITS).unwrap();
        let (events, rejected) = (d.events, d.rejected);
        assert!(events.is_empty() && rejected[0].too_large);
    }

    #[test]
    fn one_visitor_is_one_anonymous_id_whatever_its_uuid_form() {
        let forms = [
            ANON.to_uppercase(),
            format!("{{{ANON}}}"),
            format!("urn:uuid:{ANON}"),
            ANON.replace('-', ""),
        ];
        for form in forms {
            let body = format!(r#"{{"type": "page", "anonymousId": "{form}"}}"#);
            let (events, rejected) = run(&body).unwrap();
            assert!(rejected.is_empty(), "{form}: {rejected:?}");
            assert_eq!(events[0].anonymous_id.as_deref(), Some(ANON), "{form}");
        }
        // A v1 UUID is still one visitor; nil and max identify nobody.
        let v1 = "c232ab00-9414-11ec-b3c8-9f6bdeced846";
        let (events, _) = run(&format!(r#"{{"type": "page", "anonymousId": "{v1}"}}"#)).unwrap();
        assert_eq!(events[0].anonymous_id.as_deref(), Some(v1));
        for bad in [
            "00000000-0000-0000-0000-000000000000",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
        ] {
            let (events, rejected) =
                run(&format!(r#"{{"type": "page", "anonymousId": "{bad}"}}"#)).unwrap();
            assert!(events.is_empty());
            assert_eq!(rejected[0].field, "anonymousId");
        }
    }

    #[test]
    fn the_fast_time_path_reads_what_chrono_reads() {
        let chrono = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .ok()
                .map(|t| t.timestamp_micros())
        };
        let mut cases: Vec<String> = [
            "2026-11-23T10:11:12Z",
            "2026-11-23T10:11:12.5Z",
            "2026-11-23T10:11:12.123456Z",
            "2026-11-23T10:11:12.123456789Z",
            "2026-11-23T10:11:12.1234567891Z",
            "2024-02-29T23:59:59.999Z",
            "2023-02-29T00:00:00Z",
            "2000-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999Z",
            "2099-12-31T23:59:59Z",
            "2026-13-01T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:60:00Z",
            "2026-01-01T00:00:60Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00z",
            "2026-01-01t00:00:00Z",
            "2026-01-01T00:00:00+02:00",
            "2026-01-01 00:00:00Z",
            "2026-1-01T00:00:00Z",
            "+026-01-01T00:00:00Z",
            "2026-01-01T00:00:00",
            "",
        ]
        .map(String::from)
        .to_vec();
        // Every day of four years (a leap year and a century among them), at varied times.
        for (y, m, d) in (1999..2003)
            .chain([1900, 2100])
            .flat_map(|y| (1..=12).flat_map(move |m| (1..=31).map(move |d| (y, m, d))))
        {
            cases.push(format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
                d % 24,
                m * 4,
                d + m,
                d * 7
            ));
        }
        for s in &cases {
            assert_eq!(parse_time(s), chrono(s), "{s}");
            if let Some(fast) = utc_time(s.as_bytes()) {
                assert_eq!(Some(fast), chrono(s), "{s}");
            }
        }
        assert_eq!(
            utc_time(b"2026-11-23T10:11:12.5Z"),
            chrono("2026-11-23T10:11:12.5Z")
        );
        assert!(utc_time(b"2026-11-23T10:11:12+00:00").is_none());
    }

    #[test]
    fn absurd_client_times_never_make_an_absurd_timestamp() {
        let received = enrich().received_at; // 2001-09-09T01:46:40Z
        let at = |ts: &str, sent: &str| {
            let body = format!(
                r#"{{"batch": [{{"type": "page", "anonymousId": "{ANON}", "timestamp": "{ts}"}}], "sentAt": "{sent}"}}"#
            );
            run(&body).unwrap()
        };
        // sentAt in 2999 is ignored: the event keeps its own (plausible) time.
        let (events, rejected) = at("2001-09-09T01:40:00Z", "2999-01-01T00:00:00Z");
        assert!(rejected.is_empty(), "{rejected:?}");
        assert_eq!(
            events[0].timestamp,
            parse_time("2001-09-09T01:40:00Z").unwrap()
        );
        // A consistent skew is corrected.
        let (events, _) = at("2001-09-09T02:46:30Z", "2001-09-09T02:46:40Z");
        assert_eq!(events[0].timestamp, received - 10_000_000);
        // A timestamp after its own sentAt, in the future: receivedAt, the original kept.
        let (events, _) = at("2001-09-10T00:00:00Z", "2001-09-09T00:00:00Z");
        assert_eq!(events[0].timestamp, received);
        assert_eq!(
            events[0].original_timestamp,
            parse_time("2001-09-10T00:00:00Z")
        );
        // Outside 2000-2099, the event (only that one) is refused.
        for ts in [
            "0000-01-01T00:00:00Z",
            "9999-12-31T00:00:00Z",
            "1999-12-31T23:59:59Z",
        ] {
            let body = format!(
                r#"{{"batch": [{{"type": "page", "anonymousId": "{ANON}", "timestamp": "{ts}"}}, {{"type": "page", "anonymousId": "{ANON}"}}]}}"#
            );
            let (events, rejected) = run(&body).unwrap();
            assert_eq!(events.len(), 1, "{ts}");
            assert_eq!(
                (rejected[0].index, rejected[0].field.as_str()),
                (0, "timestamp")
            );
        }
    }

    #[test]
    fn any_json_number_in_free_properties_is_kept() {
        let body = format!(
            r#"{{"batch": [{{"type": "track", "event": "x", "anonymousId": "{ANON}", "properties": {{"v": 100000000000000000000, "w": 1e400, "x": -1.5e-400, "n": 12}}}}, {{"type": "page", "anonymousId": "{ANON}"}}]}}"#
        );
        let (events, rejected) = run(&body).unwrap();
        assert!(rejected.is_empty(), "{rejected:?}");
        assert_eq!(events.len(), 2);
        let props: serde_json::Value =
            serde_json::from_str(events[0].properties.as_deref().unwrap()).unwrap();
        assert_eq!(props["v"].as_f64(), Some(1e20));
        assert_eq!(props["n"], 12);
        assert_eq!(props["w"].as_f64(), Some(f64::MAX));
        assert_eq!(props["x"].as_f64(), Some(0.0));
    }

    #[test]
    fn clamping_numbers_leaves_strings_and_ordinary_numbers_alone() {
        let body = br#"{"a": "9e999 \" -1e400", "b": [1e400, -2E+999, 0e-999, 0.5, 12, -0]}"#;
        let out = String::from_utf8(clamp_numbers(body)).unwrap();
        assert_eq!(
            out,
            r#"{"a": "9e999 \" -1e400", "b": [1.7976931348623157e308, -1.7976931348623157e308, 0e-999, 0.5, 12, -0]}"#
        );
    }
}
