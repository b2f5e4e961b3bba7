//! Decoding and validating a tracker batch (api.md §7): simd-json parses the body in place into
//! its tape (a flat array of nodes, strings borrowed from the body: no tree, no map, no string
//! copied), and each event is read in one pass over its keys and checked on its own, so one bad
//! event is reported (with its index and field) and the others are kept. Only what an accepted
//! event keeps is copied out of the body; `properties` and `traits` are copied as the client
//! sent them (cut out of the body by the offsets of the tape's keys, `fields::Source`) when
//! another member follows them, else encoded from the tape.
//!
//! Accepted shapes: `{"batch": [event, ...], "sentAt": "...", "writeKey"?: "..."}` or a single
//! event object. A key given twice counts once, its last value (as in a JSON object read into a
//! map). Never panics, whatever the input (see `fuzz/`).

mod fields;
mod numbers;
mod scratch;
mod time;

use std::cell::RefCell;
use std::sync::Arc;

use bumpalo::Bump;
use serde::Serialize;
use simd_json::prelude::*;
use simd_json::tape::Value;
use simd_json::{Buffers, Tape};

use super::event::{Event, EventType, Text};
use fields::{page_from_properties, pick_with, After, Checker, Source, MAX_ID_CHARS};
pub use numbers::clamp_numbers;
pub use scratch::Scratch;
use time::parse_time;
pub use time::{event_time, MAX_TIME, MIN_TIME};

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
    /// The type the path names (Segment's `/v1/track`...): events that carry no `type` have it.
    pub kind: Option<EventType>,
}

/// A parsed body: the events still as JSON (views into the tape), plus the batch-level fields.
pub struct Parsed<'t, 'i> {
    items: Vec<Value<'t, 'i>>,
    sent_at: Option<i64>,
    /// The batch's `context` and `integrations` (objects), merged into each event's.
    context: Option<Value<'t, 'i>>,
    integrations: Option<Value<'t, 'i>>,
    /// `writeKey` of the body, for beacons that cannot set headers.
    pub write_key: Option<String>,
    /// What follows the events in the body, to find the last one's closing brace.
    end: End<'i>,
}

/// What follows the last event in the body.
#[derive(Clone, Copy)]
enum End<'i> {
    /// The body is one event: nothing.
    Nothing,
    /// The end of `batch`, then this key of the body's object.
    Key(&'i str),
    /// The end of `batch`, the body's last member, then the end of the body's object.
    Body,
}

impl Parsed<'_, '_> {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Parses `body[..len]` into a tape and hands it to `f`. The rest of `body` is simd-json's
/// padding (at least [`simd_json::INPUT_PADDING`] bytes, any content), which spares simd-json a
/// padded copy of the body. The tape and simd-json's scratch space are kept per thread.
fn with_tape<'de, R>(
    body: &'de mut [u8],
    len: usize,
    f: impl FnOnce(&Tape<'de>) -> R,
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
    f: impl FnOnce(&Tape<'de>) -> R,
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
    const KEYS: [&str; 5] = ["batch", "sentAt", "writeKey", "context", "integrations"];
    let (picked, next) = pick_with(&object, |k| KEYS.iter().position(|key| *key == k));
    let [batch, sent_at, write_key, context, integrations] = picked;
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
            context: None,
            integrations: None,
            write_key,
            end: End::Nothing,
        });
    };
    // The batch's context and integrations, when given, are objects (Segment's shape).
    for (v, field) in [(context, "context"), (integrations, "integrations")] {
        if v.is_some_and(|v| v.as_object().is_none() && v.as_null().is_none()) {
            return Err(BodyError::Invalid {
                field,
                message: "must be an object".into(),
            });
        }
    }
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
            // Sized at once (the tape's iterator gives no size hint: collected, the list grew
            // by doubling, an allocation per doubling).
            items: {
                let mut list = Vec::with_capacity(items.len());
                list.extend(items.iter());
                list
            },
            sent_at,
            context,
            integrations,
            write_key,
            end: next[0].map_or(End::Body, End::Key),
        }),
        None => Err(BodyError::Invalid {
            field: "batch",
            message: "must be an array of events".into(),
        }),
    }
}

/// Parses a body and counts its events (what the parse benchmark measures).
pub fn count_events(body: &[u8]) -> Result<usize, BodyError> {
    let mut copy = Vec::new();
    padded(body, &mut copy);
    with_tape(&mut copy, body.len(), |tape| parse(tape).map(|p| p.len()))?
}

/// `copy` made `body` followed by simd-json's padding.
fn padded(body: &[u8], copy: &mut Vec<u8>) {
    copy.clear();
    copy.reserve(body.len() + simd_json::INPUT_PADDING);
    copy.extend_from_slice(body);
    copy.resize(body.len() + simd_json::INPUT_PADDING, b' ');
}

/// Validates and enriches every event; returns the accepted ones and the rejections.
fn validate<'a>(
    parsed: &Parsed<'_, 'a>,
    source: &Source<'a>,
    enrich: &'a Enrichment,
    max_event_bytes: usize,
) -> (Vec<Event<'a>>, Vec<Rejected>) {
    let mut events = Vec::with_capacity(parsed.items.len());
    let mut rejected = Vec::new();
    for (index, item) in parsed.items.iter().enumerate() {
        let batch = Batch {
            parsed,
            source,
            enrich,
            close: event_close(parsed, index, source),
        };
        match check_event(index, *item, &batch, max_event_bytes) {
            Ok(e) => events.push(e),
            Err(mut r) => rejected.append(&mut r),
        }
    }
    (events, rejected)
}

/// The keys of an event that are read (others are ignored), in the order `check_event` takes them.
const EVENT_KEYS: [&str; 17] = [
    "type",
    "messageId",
    "anonymousId",
    "userId",
    "sessionId",
    "event",
    "groupId",
    "previousId",
    "properties",
    "traits",
    "timestamp",
    "originalTimestamp",
    "sentAt",
    "context",
    "integrations",
    "name",
    "category",
];

/// The positions in [`EVENT_KEYS`] of the objects whose text is cut out of the body, bounded by
/// the member after them (`pick_with`'s second list).
const PROPERTIES: usize = 8;
const TRAITS: usize = 9;
const CONTEXT: usize = 13;
const _: () = assert!(
    matches!(EVENT_KEYS[PROPERTIES].as_bytes(), b"properties")
        && matches!(EVENT_KEYS[TRAITS].as_bytes(), b"traits")
        && matches!(EVENT_KEYS[CONTEXT].as_bytes(), b"context")
);

/// The index of an event key in [`EVENT_KEYS`]: one match (a switch on the length, then one
/// comparison) instead of a comparison with each key.
fn event_key(k: &str) -> Option<usize> {
    Some(match k {
        "type" => 0,
        "messageId" => 1,
        "anonymousId" => 2,
        "userId" => 3,
        "sessionId" => 4,
        "event" => 5,
        "groupId" => 6,
        "previousId" => 7,
        "properties" => 8,
        "traits" => 9,
        "timestamp" => 10,
        "originalTimestamp" => 11,
        "sentAt" => 12,
        "context" => 13,
        "integrations" => 14,
        "name" => 15,
        "category" => 16,
        _ => return None,
    })
}

/// The event's type: its own `type`, else the one its path names.
fn event_type(
    c: &mut Checker,
    v: Option<Value<'_, '_>>,
    implied: Option<EventType>,
) -> Option<EventType> {
    let Some(v) = v.filter(|v| v.as_null().is_none()) else {
        if implied.is_none() {
            c.fail("type", TYPE_MESSAGE);
        }
        return implied;
    };
    match v.into_string().and_then(EventType::parse) {
        Some(k) if implied.is_none_or(|i| i == k) => Some(k),
        Some(_) => {
            let path = implied.map_or("", EventType::as_str);
            c.fail(
                "type",
                format!("must be {path} (the path's type) or absent"),
            );
            None
        }
        None => {
            c.fail("type", TYPE_MESSAGE);
            None
        }
    }
}

const TYPE_MESSAGE: &str = "must be one of: page, track, identify, group, screen, alias";

/// Free text of a page or screen (`name`, `category`): read for the types that have it.
fn name_of<'i>(
    c: &mut Checker,
    kind: Option<EventType>,
    types: &[EventType],
    v: Option<Value<'_, 'i>>,
    field: &str,
) -> Option<&'i str> {
    if !kind.is_some_and(|k| types.contains(&k)) {
        return None;
    }
    c.plain_text(v, field, MAX_ID_CHARS)
}

/// What the events of one body share.
struct Batch<'b, 't, 'i> {
    parsed: &'b Parsed<'t, 'i>,
    source: &'b Source<'i>,
    enrich: &'i Enrichment,
    /// The offset of the event's closing brace in the body, when found: the text of an object
    /// that is its last member can then be cut out of the body too.
    close: Option<usize>,
}

/// The offset of the closing brace of event `index` in the body, found back from what follows
/// it: the next event's opening brace, or the end of the batch (see [`End`]). Each step checks
/// the byte it lands on, so a body it cannot follow gives `None`, never a wrong offset.
fn event_close(parsed: &Parsed<'_, '_>, index: usize, source: &Source<'_>) -> Option<usize> {
    let end_of_body = source.text.len();
    let after = match (parsed.items.get(index + 1), parsed.end) {
        (Some(next), _) => source.back_to(source.open_of(*next)?, b',')?,
        (None, End::Nothing) => end_of_body,
        (None, End::Key(key)) => {
            source.back_to(source.back_to(source.quote_of(key)?, b',')?, b']')?
        }
        (None, End::Body) => source.back_to(source.back_to(end_of_body, b'}')?, b']')?,
    };
    source.back_to(after, b'}')
}

fn check_event<'a>(
    index: usize,
    item: Value<'_, 'a>,
    batch: &Batch<'_, '_, 'a>,
    max_event_bytes: usize,
) -> Result<Event<'a>, Vec<Rejected>> {
    let enrich = batch.enrich;
    let mut c = Checker {
        index,
        errors: Vec::new(),
    };
    let Some(obj) = item.as_object() else {
        c.fail("body", "an event must be a JSON object");
        return Err(c.errors);
    };
    // The seven identifiers, in the order `Checker::ids` takes them.
    let (picked, next) = pick_with::<{ EVENT_KEYS.len() }>(&obj, event_key);
    let [kind, raw_ids @ .., properties, traits, timestamp, original, sent_at, context, integrations, name, category] =
        picked;
    let kind = event_type(&mut c, kind, enrich.kind);
    let ids = c.ids(kind, raw_ids);
    let name = name_of(
        &mut c,
        kind,
        &[EventType::Page, EventType::Screen],
        name,
        "name",
    );
    let category = name_of(&mut c, kind, &[EventType::Page], category, "category");
    let after = |i: usize| After::of(next[i], batch.close);
    let properties_json = c.object_json(properties, "properties", batch.source, after(PROPERTIES));
    let traits = c.object_json(traits, "traits", batch.source, after(TRAITS));
    // Segment's `timestamp` (when the event happened) else `originalTimestamp` (the client's
    // clock when the SDK made it: RudderStack sends only this one).
    let original_timestamp = match timestamp.filter(|v| v.as_null().is_none()) {
        Some(t) => c.time(Some(t), "timestamp"),
        None => c.time(original, "originalTimestamp"),
    };
    let sent_at = match sent_at {
        Some(v) => c.time(Some(v), "sentAt"),
        None => batch.parsed.sent_at,
    };
    let mut ctx = c.context(context, after(CONTEXT), batch.parsed.context, batch.source);
    let integrations = c.integrations(integrations, batch.parsed.integrations, batch.source);
    let (Some(kind), true) = (kind, c.errors.is_empty()) else {
        return Err(c.errors);
    };
    if kind == EventType::Page {
        page_from_properties(&mut ctx.page, properties);
    }
    let received_at = enrich.received_at;
    let text = |s: Option<&'a str>| s.map(Text::Borrowed);
    let [page_url, page_path, page_title, page_referrer] = ctx.page.map(text);
    let e = Event {
        message_id: match ids.message_id {
            Some(id) => Text::Borrowed(id),
            None => message_id(batch.source.texts),
        },
        app_id: Text::Borrowed(&enrich.app_id),
        kind,
        event: text(ids.event),
        anonymous_id: ids.anonymous_id,
        user_id: text(ids.user_id),
        group_id: text(ids.group_id),
        session_id: text(ids.session_id),
        timestamp: event_time(original_timestamp, sent_at, received_at),
        original_timestamp,
        sent_at,
        received_at,
        page_url,
        page_path,
        page_title,
        page_referrer,
        device_type: text(ctx.device_type),
        locale: text(ctx.locale),
        timezone: text(ctx.timezone),
        screen_width: ctx.screen[0],
        screen_height: ctx.screen[1],
        ip: enrich.ip.as_deref().map(Text::Borrowed),
        // The visitor's: the one an SDK forwards, else the request's (`agent.rs` reads it).
        user_agent: match ctx.user_agent {
            Some(ua) if enrich.user_agent.as_deref() != Some(ua) => Some(Text::Borrowed(ua)),
            _ => enrich.user_agent.as_deref().map(Text::Borrowed),
        },
        properties: properties_json,
        traits,
        context: ctx.rest,
        name: text(name),
        category: text(category),
        previous_id: text(ids.previous_id),
        integrations,
        browser: None,
        browser_version: None,
        os: None,
        device_class: None,
        is_bot: None,
        country: None,
        region: None,
        city: None,
    };
    if over_limit(item, batch, max_event_bytes) {
        c.fail("body", format!("event larger than {max_event_bytes} bytes"));
        c.errors[0].too_large = true;
        return Err(c.errors);
    }
    Ok(e)
}

/// A messageId for an event sent without one: `msg_` and a random UUID's 32 hex digits.
fn message_id(texts: &Bump) -> Text<'_> {
    let mut id = [0u8; 36];
    id[..4].copy_from_slice(b"msg_");
    uuid::Uuid::new_v4().simple().encode_lower(&mut id[4..]);
    // Written from ASCII just above.
    let id = std::str::from_utf8(&id).unwrap_or("msg_");
    match texts.try_alloc_str(id) {
        Ok(kept) => Text::Borrowed(kept),
        // The arena is full: 36 bytes of its own.
        Err(_) => Text::Owned(id.into()),
    }
}

/// Whether the event, as the client sent it (its JSON, compact), is over `max` bytes. What the
/// server adds (ip, userAgent, appId, receivedAt) does not count. The JSON is encoded only when
/// the event's text in the body (from its opening to its closing brace, when found) could come
/// near the limit: compact, whitespace goes and escapes only shrink, and a number grows at most
/// 4.5 times (`1e15` is written `1000000000000000.0`), so ordinary events cost no encoding.
fn over_limit<'i>(item: Value<'_, 'i>, batch: &Batch<'_, '_, 'i>, max: usize) -> bool {
    let open = batch.source.open_of(item);
    let span = open
        .zip(batch.close)
        .and_then(|(open, close)| close.checked_sub(open));
    span.is_none_or(|span| (span + 1) * 6 + 1024 > max) && item.encode().len() > max
}

/// The limits a body is decoded under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Events in one batch (more: the whole body is refused, 413).
    pub max_events: usize,
    /// One event's JSON as sent (more: that event is refused, 413 if nothing else is left).
    pub max_event_bytes: usize,
    /// The largest body, and the most the decoder writes for one (a batch's `context` merged
    /// into each of its events...): an event whose texts do not fit is refused for its size.
    pub max_batch_bytes: usize,
}

/// A decoded body: the accepted events (their text borrowed from the body), the rejections,
/// and the body's `writeKey`.
#[derive(Debug)]
pub struct Decoded<'a> {
    pub events: Vec<Event<'a>>,
    pub rejected: Vec<Rejected>,
    pub write_key: Option<String>,
}

impl Decoded<'_> {
    /// The same, independent of the body (for a body decoded on another thread).
    pub fn into_owned(self) -> Decoded<'static> {
        Decoded {
            events: self.events.into_iter().map(Event::into_owned).collect(),
            rejected: self.rejected,
            write_key: self.write_key,
        }
    }
}

/// Parses, validates and enriches a body. The events borrow their text from `body` (objects,
/// as sent) and from `scratch` (see [`Scratch`]: simd-json's copy and what the decoder
/// writes): the caller keeps both while it needs the events. A number beyond the range of a 64-bit
/// float (such as `1e400`, which JSON allows) does not refuse the body: it is stored as the
/// nearest float (`±1.7976931348623157e308`, or `0.0` for an underflow), see
/// [`clamp_numbers`]. Only such a body, refused by the first parse, is read twice.
pub fn decode<'a>(
    body: &'a [u8],
    scratch: &'a mut Scratch,
    enrich: &'a Enrichment,
    limits: Limits,
) -> Result<Decoded<'a>, BodyError> {
    match decode_in_place(body, scratch, enrich, limits) {
        Err(BodyError::NumberOutOfRange(_)) => {
            let clamped = clamp_numbers(body);
            let mut scratch = Scratch::default();
            decode_in_place(&clamped, &mut scratch, enrich, limits)
                .map(Decoded::into_owned)
                .map_err(|e| match e {
                    BodyError::NumberOutOfRange(m) => BodyError::NotJson(m),
                    e => e,
                })
        }
        r => r,
    }
}

/// [`decode`] for a caller that keeps the events past the body: their text is copied out.
pub fn decode_owned(
    body: &[u8],
    enrich: &Enrichment,
    limits: Limits,
) -> Result<Decoded<'static>, BodyError> {
    let mut scratch = Scratch::default();
    decode(body, &mut scratch, enrich, limits).map(Decoded::into_owned)
}

fn decode_in_place<'a>(
    body: &'a [u8],
    scratch: &'a mut Scratch,
    enrich: &'a Enrichment,
    limits: Limits,
) -> Result<Decoded<'a>, BodyError> {
    let Scratch { copy, texts } = scratch;
    padded(body, copy);
    // One chunk the size of the body: what the decoder writes is (nearly always) less than the
    // events' text as sent, so the request allocates once for all its events' texts; and never
    // more than the largest body, whatever the batch merges into its events.
    if texts.allocated_bytes() < body.len() {
        *texts = Bump::with_capacity(body.len());
    }
    texts.reset();
    texts.set_allocation_limit(Some(limits.max_batch_bytes.max(body.len())));
    let source = Source {
        text: body,
        base: copy.as_ptr() as usize,
        texts,
    };
    with_tape(copy, body.len(), |tape| {
        let parsed = parse(tape)?;
        if parsed.len() > limits.max_events {
            return Err(BodyError::TooManyEvents(limits.max_events));
        }
        let (events, rejected) = validate(&parsed, &source, enrich, limits.max_event_bytes);
        Ok(Decoded {
            events,
            rejected,
            write_key: parsed.write_key,
        })
    })?
}

#[cfg(test)]
mod sdk_tests;
#[cfg(test)]
mod source_tests;
#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn enrich() -> Enrichment {
        Enrichment {
            app_id: "app1".into(),
            received_at: 1_000_000_000_000_000,
            ip: Some("10.0.0.1".into()),
            user_agent: Some("UA".into()),
            ..Enrichment::default()
        }
    }

    pub(super) const LIMITS: Limits = Limits {
        max_events: 2000,
        max_event_bytes: 32 * 1024,
        max_batch_bytes: 500 * 1024,
    };

    pub(super) fn run(body: &str) -> Result<(Vec<Event<'static>>, Vec<Rejected>), BodyError> {
        decode_owned(body.as_bytes(), &enrich(), LIMITS).map(|d| (d.events, d.rejected))
    }

    pub(super) const ANON: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f";

    #[test]
    fn the_event_key_match_numbers_the_keys_as_the_list_does() {
        for (i, key) in EVENT_KEYS.iter().enumerate() {
            assert_eq!(event_key(key), Some(i), "{key}");
        }
        for other in ["", "Type", "types", "userid", "context.page"] {
            assert_eq!(event_key(other), None, "{other}");
        }
    }

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
                {{"type": "jump", "anonymousId": "", "messageId": ""}},
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
        // The context's other members, as sent.
        assert_eq!(e.context.as_deref(), Some(r#"{"library": {"name": "t"}}"#));
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
    fn control_characters_in_an_event_name_or_a_page_path_refuse_that_event() {
        let page = |path: &str| {
            serde_json::json!({"type": "page", "anonymousId": ANON,
                "context": {"page": {"path": path, "title": "Tab\there"}}})
        };
        let track =
            |name: &str| serde_json::json!({"type": "track", "event": name, "anonymousId": ANON});
        let batch = serde_json::json!({"batch": [
            track("sign\u{0}up"),
            track("\u{1b}[31mred"),
            track("next\u{85}line"),
            track("del\u{7f}"),
            page("/a\u{0}b"),
            page("/a\nb"),
            track("Signed up"),
            page("/pricing?plan=pro"),
        ]});
        let (events, rejected) = run(&batch.to_string()).unwrap();
        let fields: Vec<(usize, &str, &str)> = rejected
            .iter()
            .map(|r| (r.index, r.field.as_str(), r.message.as_str()))
            .collect();
        let control = "must not contain control characters";
        assert_eq!(
            fields,
            [
                (0, "event", control),
                (1, "event", control),
                (2, "event", control),
                (3, "event", control),
                (4, "context.page.path", control),
                (5, "context.page.path", control),
            ]
        );
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event.as_deref(), Some("Signed up"));
        assert_eq!(events[1].page_path.as_deref(), Some("/pricing?plan=pro"));
        assert_eq!(events[1].page_title.as_deref(), Some("Tab\there"));
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
        let d = decode_owned(single.as_bytes(), &enrich(), LIMITS).unwrap();
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
        let d = decode_owned(body.as_bytes(), &rich, LIMITS).unwrap();
        let (events, rejected) = (d.events, d.rejected);
        assert_eq!((events.len(), rejected.len()), (1, 0), "{rejected:?}");
        let over = pad(32 * 1024 - base + 1);
        let d = decode_owned(over.as_bytes(), &rich, LIMITS).unwrap();
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
}
