//! The readers of an event's fields: each reads one value from the tape, checks it (type,
//! length, shape) and records a rejection naming the field, so every bad field is reported.

use std::cell::RefCell;

use bumpalo::Bump;
use simd_json::prelude::*;
use simd_json::tape::{Object, Value};

use super::time::{parse_time, MAX_TIME, MIN_TIME};
use super::Rejected;
use crate::collector::event::{EventType, Text};
use crate::ids::visitor_id;

/// messageId, anonymousId, userId, groupId, previousId, an event's, page's or screen's name,
/// a page's category (README, "Collecting events").
pub(super) const MAX_ID_CHARS: usize = 200;
const MAX_TEXT_CHARS: usize = 2048;

fn is_null(v: &Value<'_, '_>) -> bool {
    v.as_null().is_some()
}

pub(super) struct Checker {
    pub(super) index: usize,
    pub(super) errors: Vec<Rejected>,
}

impl Checker {
    /// Whether `field` was already reported (so a required-field check does not repeat it).
    fn failed(&self, field: &str) -> bool {
        self.errors.iter().any(|e| e.field == field)
    }

    pub(super) fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(Rejected {
            index: self.index,
            field: field.to_owned(),
            message: message.into(),
            too_large: false,
        });
    }

    /// `written` (a text the decoder wrote into the request's arena), or None and a rejection
    /// for its size when the arena is full (see [`ArenaFull`]).
    fn kept<'t>(
        &mut self,
        field: &str,
        written: Result<Option<Text<'t>>, ArenaFull>,
    ) -> Option<Text<'t>> {
        written.unwrap_or_else(|ArenaFull| {
            self.fail(
                field,
                "too large: with the batch's context and integrations merged into its events, \
                 the batch would be over its size limit",
            );
            if let Some(last) = self.errors.last_mut() {
                last.too_large = true;
            }
            None
        })
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

    /// An optional id: a non-empty string, with `prefix` when given.
    fn id<'i>(&mut self, v: Option<Value<'_, 'i>>, field: &str, prefix: &str) -> Option<&'i str> {
        let s = self.str(v, field, MAX_ID_CHARS)?;
        let prefixed = prefix.is_empty() || s.starts_with(prefix);
        if s.is_empty() || !prefixed || s.len() == prefix.len() {
            let shape = if prefix.is_empty() {
                "a non-empty string".to_owned()
            } else {
                format!("a string starting with {prefix}")
            };
            self.fail(field, format!("must be {shape}"));
            return None;
        }
        self.plain(Some(s), field)
    }

    /// An optional string of at most `max` characters, without control characters.
    pub(super) fn plain_text<'i>(
        &mut self,
        v: Option<Value<'_, 'i>>,
        field: &str,
        max: usize,
    ) -> Option<&'i str> {
        let s = self.str(v, field, max);
        self.plain(s, field)
    }

    /// `s` unless it holds a control character (C0, DEL or C1: NUL, ESC, line breaks...),
    /// which a name, an id or a path never holds.
    fn plain<'s>(&mut self, s: Option<&'s str>, field: &str) -> Option<&'s str> {
        let s = s?;
        if has_control(s) {
            self.fail(field, "must not contain control characters");
            return None;
        }
        Some(s)
    }

    /// An ISO 8601 time from 2000-01-01 to 2099-12-31 (UTC).
    pub(super) fn time(&mut self, v: Option<Value<'_, '_>>, field: &str) -> Option<i64> {
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

    /// An optional object as JSON text: its text as sent (borrowed, see [`Source::text_of`];
    /// `next`: the key of the member after it) when known, else encoded back from the tape
    /// into the request's arena.
    pub(super) fn object_json<'s>(
        &mut self,
        v: Option<Value<'_, 's>>,
        field: &str,
        source: &Source<'s>,
        after: Option<After<'_>>,
    ) -> Option<Text<'s>> {
        let v = v.filter(|v| !is_null(v))?;
        if v.as_object().is_some() {
            if let Some(text) = source.text_of(Some(v), after) {
                return Some(Text::Borrowed(text));
            }
            let written = with_json_scratch(source.texts, |out| {
                // Writing to a Vec cannot fail.
                let _ = v.write(out);
            });
            return self.kept(field, written);
        }
        self.fail(field, "must be an object");
        None
    }
}

/// Whether `s` holds a control character (C0, DEL or C1). Bytes first: a C1 character is
/// encoded from 0xC2, so text without bytes below 0x20, 0x7F or 0xC2 (most text) has none.
fn has_control(s: &str) -> bool {
    may_hold_control(s.as_bytes()) && s.chars().any(char::is_control)
}

/// Whether `bytes` has a byte below 0x20, 0x7F or 0xC2. 32 bytes at a time without an early
/// exit inside a block, so the compiler checks a block in a few vector instructions (a user
/// agent is 100-200 bytes; a byte at a time this was 2% of the collector's CPU at saturation).
/// The bytes after the last whole block are checked as one block too: the last 32 bytes
/// (overlapping the block before), or, in text shorter than a block, its bytes padded with
/// spaces.
fn may_hold_control(bytes: &[u8]) -> bool {
    const BLOCK: usize = 32;
    let suspect = |block: &[u8; BLOCK]| {
        block.iter().fold(false, |seen, &b| {
            seen | (b < 0x20 || b == 0x7f || b == 0xc2)
        })
    };
    let Some(last) = bytes.last_chunk::<BLOCK>() else {
        let mut padded = [b' '; BLOCK];
        padded[..bytes.len()].copy_from_slice(bytes);
        return suspect(&padded);
    };
    let (blocks, _) = bytes.as_chunks::<BLOCK>();
    blocks.iter().any(suspect) || suspect(last)
}

/// The body as sent, beside the copy simd-json parsed in place (`base`: that copy's address).
/// A string of the tape points into the copy at the offset of its text in the body (after its
/// opening quote), so an object's text as sent can be cut out of the body by offsets.
pub(super) struct Source<'b> {
    pub(super) text: &'b [u8],
    pub(super) base: usize,
    /// The request's arena, for the texts the decoder writes.
    pub(super) texts: &'b Bump,
}

impl<'b> Source<'b> {
    /// The offset in the body of the opening quote of `key` (a string of the tape).
    pub(super) fn quote_of(&self, key: &str) -> Option<usize> {
        let at = (key.as_ptr() as usize)
            .checked_sub(self.base)?
            .checked_sub(1)?;
        (self.text.get(at) == Some(&b'"')).then_some(at)
    }

    /// The first offset before `at` that is not JSON whitespace.
    fn back(&self, mut at: usize) -> Option<usize> {
        loop {
            at = at.checked_sub(1)?;
            if !matches!(self.text[at], b' ' | b'\t' | b'\n' | b'\r') {
                return Some(at);
            }
        }
    }

    /// [`Source::back`], when the byte found there is `byte`.
    pub(super) fn back_to(&self, at: usize, byte: u8) -> Option<usize> {
        self.back(at).filter(|&b| self.text[b] == byte)
    }

    /// The offset of the opening brace of `value`, an object with members (found from its
    /// first key).
    pub(super) fn open_of(&self, value: Value<'_, 'b>) -> Option<usize> {
        let (first, _) = value.as_object()?.iter().next()?;
        self.back_to(self.quote_of(first)?, b'{')
    }

    /// The offset of the last byte of an object member's value, from what follows it.
    fn end_of(&self, after: After<'_>) -> Option<usize> {
        match after {
            After::Key(next) => self.back(self.back_to(self.quote_of(next)?, b',')?),
            After::Close(close) => {
                (self.text.get(close) == Some(&b'}')).then_some(())?;
                self.back(close)
            }
        }
    }

    /// The text as sent of an object member's `value` (see [`pick_with`]), when it has members
    /// and what follows it is known (`after`): its first key and that bound it. `None`
    /// otherwise (the caller encodes it from the tape).
    pub(super) fn text_of(
        &self,
        value: Option<Value<'_, 'b>>,
        after: Option<After<'_>>,
    ) -> Option<&'b str> {
        let (open, close) = self.span_of(value?, after?)?;
        // `get`: a range that is not one (close before open) is no object, never a panic.
        std::str::from_utf8(self.text.get(open..=close)?).ok()
    }

    /// The offsets of the braces of [`Source::text_of`]'s object.
    fn span_of(&self, value: Value<'_, 'b>, after: After<'_>) -> Option<(usize, usize)> {
        let open = self.open_of(value)?;
        let close = self.end_of(after).filter(|&c| self.text[c] == b'}')?;
        Some((open, close))
    }

    /// The text as sent of an object's member (`"key": value`) whose key is `key`, bounded by
    /// what follows it: the next member's key, or for the last member the object's closing
    /// brace (`close`, when known). `None` when it cannot be cut out (the caller encodes the
    /// member).
    fn member_of(&self, key: &str, next: Option<&str>, close: Option<usize>) -> Option<&'b [u8]> {
        let start = self.quote_of(key)?;
        let end = self.end_of(After::of(next, close)?)?;
        self.text.get(start..=end)
    }
}

/// What follows an object member's value in the body: the next member's key, or (the last
/// member) the closing brace of its object, at this offset.
#[derive(Clone, Copy)]
pub(super) enum After<'k> {
    Key(&'k str),
    Close(usize),
}

impl<'k> After<'k> {
    /// The next member's key (see [`pick_with`]), else the object's closing brace, when known.
    pub(super) fn of(next: Option<&'k str>, close: Option<usize>) -> Option<After<'k>> {
        next.map(After::Key).or(close.map(After::Close))
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
pub(super) struct Context<'i> {
    /// url, path, title, referrer.
    pub(super) page: [Option<&'i str>; 4],
    pub(super) device_type: Option<&'i str>,
    pub(super) locale: Option<&'i str>,
    pub(super) timezone: Option<&'i str>,
    /// width, height.
    pub(super) screen: [Option<i32>; 2],
    /// `userAgent`: the visitor's, forwarded by an SDK (ignored unless a plain string of at most
    /// [`MAX_AGENT_CHARS`]: it was never checked, so it refuses no event).
    pub(super) user_agent: Option<&'i str>,
    pub(super) rest: Option<Text<'i>>,
}

/// The longest forwarded user agent kept.
const MAX_AGENT_CHARS: usize = 1024;

/// The index of a key of `context` that has columns (or that the server sets: ip, userAgent),
/// in the order [`Checker::context`] takes them: one match (a switch on the length, then one
/// comparison) instead of a comparison with each key, for every member of every context.
fn context_key(k: &str) -> Option<usize> {
    Some(match k {
        "page" => 0,
        "device" => 1,
        "locale" => 2,
        "timezone" => 3,
        "screen" => 4,
        "ip" => 5,
        "userAgent" => 6,
        _ => return None,
    })
}

/// The values of the keys [`context_key`] numbers in a context, in one pass (the last of a
/// repeated key).
fn context_values<'t, 'i>(context: &Object<'t, 'i>) -> [Option<Value<'t, 'i>>; 7] {
    pick_with(context, context_key).0
}

/// [`context_values`] of an event's context, and in the same pass its other members (its
/// rest) as cut out of the body (`close`: the offset of the context's closing brace, when
/// known), when each of them can be.
fn split_context<'t, 'i>(
    context: &Object<'t, 'i>,
    close: Option<usize>,
    source: &Source<'i>,
) -> ([Option<Value<'t, 'i>>; 7], Option<Cut<'i>>) {
    let mut picked = [None; 7];
    let mut cut = Some(Cut::default());
    // A member of the rest, cut out once the key after it (or the context's end) is known.
    let mut waiting = None;
    for (k, v) in context.iter() {
        if let Some(w) = waiting.take() {
            cut = cut.and_then(|c| c.with(source.member_of(w, Some(k), close)?));
        }
        match context_key(k) {
            Some(i) => picked[i] = Some(v),
            None => waiting = Some(k),
        }
    }
    if let Some(w) = waiting {
        cut = cut.and_then(|c| c.with(source.member_of(w, None, close)?));
    }
    (picked, cut)
}

/// The most members of a context's rest written by [`Cut`] (more: `merged_json`).
const MAX_CUT: usize = 8;

/// The members of a context's rest as sent (`"key": value`), in order.
#[derive(Default)]
struct Cut<'i> {
    parts: [&'i [u8]; MAX_CUT],
    len: usize,
}

impl<'i> Cut<'i> {
    fn with(mut self, part: &'i [u8]) -> Option<Self> {
        *self.parts.get_mut(self.len)? = part;
        self.len += 1;
        Some(self)
    }

    /// The members as one object, written into the request's arena at its exact size (what
    /// `merged_json` writes for a context without a batch's, without its copy through a
    /// buffer). `None` if the text is no UTF-8 (never: the body is, and members are cut at
    /// ASCII bytes), for the caller to encode it instead.
    fn write(&self, texts: &'i Bump) -> Option<Result<Option<Text<'i>>, ArenaFull>> {
        let parts = &self.parts[..self.len];
        if parts.is_empty() {
            return Some(Ok(None));
        }
        // `{`, each member and a comma after it, the last comma a `}`.
        let len = 1 + parts.iter().map(|p| p.len() + 1).sum::<usize>();
        let Ok(out) = texts.try_alloc_slice_fill_copy(len, b',') else {
            return Some(Err(ArenaFull));
        };
        out[0] = b'{';
        let mut at = 1;
        for p in parts {
            out[at..at + p.len()].copy_from_slice(p);
            at += p.len() + 1;
        }
        out[len - 1] = b'}';
        let text = std::str::from_utf8(out).ok()?;
        Some(Ok(Some(Text::Borrowed(text))))
    }
}

/// The values of `keys` in `object`, in one pass (the last of a repeated key).
pub(super) fn pick<'t, 'i, const N: usize>(
    object: &Object<'t, 'i>,
    keys: &[&str; N],
) -> [Option<Value<'t, 'i>>; N] {
    pick_with(object, |k| keys.iter().position(|key| *key == k)).0
}

/// The values of the keys that `index` numbers (below `N`) in `object`, in one pass (the last
/// of a repeated key), and for each the key of the member that follows it (for
/// [`Source::text_of`]).
pub(super) fn pick_with<'t, 'i, const N: usize>(
    object: &Object<'t, 'i>,
    index: impl Fn(&str) -> Option<usize>,
) -> ([Option<Value<'t, 'i>>; N], [Option<&'i str>; N]) {
    let (mut out, mut next) = ([None; N], [None; N]);
    let mut waiting = None;
    for (k, v) in object.iter() {
        if let Some(w) = waiting.take() {
            next[w] = Some(k);
        }
        if let Some(i) = index(k).filter(|&i| i < N) {
            (out[i], next[i], waiting) = (Some(v), None, Some(i));
        }
    }
    (out, next)
}

/// The request's arena (`decode::Scratch`) holds as much as it may: the texts the decoder
/// writes for one request (a batch's `context` merged into each event...) are at most the
/// largest body, `collector.max_batch_bytes`.
pub(super) struct ArenaFull;

/// JSON text written by `write` into a buffer kept per thread, then copied out at its exact
/// size into `texts` (the request's arena): no reallocation as it grows, no allocation per
/// event. `None` if nothing was written.
fn with_json_scratch<'t>(
    texts: &'t Bump,
    write: impl FnOnce(&mut Vec<u8>),
) -> Result<Option<Text<'t>>, ArenaFull> {
    thread_local! {
        static JSON: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    JSON.with(|scratch| {
        let mut owned = Vec::new();
        let mut kept = scratch.try_borrow_mut();
        let out = kept.as_deref_mut().unwrap_or(&mut owned);
        out.clear();
        write(out);
        let text = match std::str::from_utf8(out).ok().filter(|t| !t.is_empty()) {
            None => Ok(None),
            Some(t) => match texts.try_alloc_str(t) {
                Ok(kept) => Ok(Some(Text::Borrowed(&*kept))),
                Err(_) => Err(ArenaFull),
            },
        };
        // A rare huge object does not stay as this thread's scratch space.
        if out.capacity() > 64 * 1024 {
            *out = Vec::new();
        }
        text
    })
}

/// The members of `first` whose keys are not `known`, then those of `second` whose keys are
/// neither `known` nor in `first` (a shallow merge: `first` wins), as a JSON object (None if
/// none). The members of `first` are copied as sent where they can be cut out of the body
/// (`first_close`: the offset of its closing brace, when known), the others encoded from the
/// tape: the same values either way.
fn merged_json<'b>(
    first: Option<&Object<'_, 'b>>,
    first_close: Option<usize>,
    second: Option<&Object<'_, '_>>,
    known: impl Fn(&str) -> bool,
    source: &Source<'b>,
) -> Result<Option<Text<'b>>, ArenaFull> {
    with_json_scratch(source.texts, |out| {
        let open = |out: &mut Vec<u8>| out.push(if out.is_empty() { b'{' } else { b',' });
        if let Some(first) = first {
            let mut members = first.iter().peekable();
            while let Some((k, v)) = members.next() {
                if known(k) {
                    continue;
                }
                open(out);
                let next = members.peek().map(|(n, _)| *n);
                match source.member_of(k, next, first_close) {
                    Some(sent) => out.extend_from_slice(sent),
                    None => write_member(out, k, v),
                }
            }
        }
        let from_second = second.into_iter().flat_map(|o| o.iter());
        for (k, v) in from_second.filter(|(k, _)| first.is_none_or(|f| f.get(*k).is_none())) {
            if !known(k) {
                open(out);
                write_member(out, k, v);
            }
        }
        if !out.is_empty() {
            out.push(b'}');
        }
    })
}

/// `"key":value`, encoded from the tape.
fn write_member(out: &mut Vec<u8>, key: &str, value: Value<'_, '_>) {
    // Writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, key);
    out.push(b':');
    let _ = value.write(&mut *out);
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

    /// The event's `context`, merged over the batch's (`batch`, already checked to be an
    /// object): a key the event lacks is taken from the batch.
    pub(super) fn context<'i>(
        &mut self,
        v: Option<Value<'_, 'i>>,
        after: Option<After<'_>>,
        batch: Option<Value<'_, 'i>>,
        source: &Source<'i>,
    ) -> Context<'i> {
        let mut out = Context::default();
        let ctx = self.object(v, "context");
        let batch = batch.and_then(|b| b.as_object());
        if ctx.is_none() && batch.is_none() {
            return out;
        }
        let close = v.zip(after).and_then(|(v, after)| source.span_of(v, after));
        let close = close.map(|(_, close)| close);
        // Without a batch's context, the rest is cut out in the same pass (else merged below).
        let (mut picked, cut) = match (&ctx, &batch) {
            (Some(c), None) => split_context(c, close, source),
            (Some(c), Some(_)) => (context_values(c), None),
            (None, _) => ([None; 7], None),
        };
        if let Some(b) = &batch {
            for (slot, from_batch) in picked.iter_mut().zip(context_values(b)) {
                *slot = slot.or(from_batch);
            }
        }
        let [page, device, locale, timezone, screen, _, user_agent] = picked;
        out.user_agent = user_agent
            .and_then(|v| v.into_string())
            .filter(|s| !s.is_empty() && s.len() <= MAX_AGENT_CHARS)
            .filter(|s| !has_control(s));
        if let Some(p) = page.and_then(|p| self.object(Some(p), "context.page")) {
            const FIELDS: [&str; 4] = [
                "context.page.url",
                "context.page.path",
                "context.page.title",
                "context.page.referrer",
            ];
            let values = pick(&p, &["url", "path", "title", "referrer"]);
            for (i, ((slot, v), field)) in out.page.iter_mut().zip(values).zip(FIELDS).enumerate() {
                let s = self.str(v, field, MAX_TEXT_CHARS);
                // The path, like a name, holds no control character.
                *slot = match i {
                    1 => self.plain(s, field),
                    _ => s,
                };
            }
        }
        if let Some(d) = device.and_then(|d| self.object(Some(d), "context.device")) {
            out.device_type = self.str(d.get("type"), "context.device.type", 64);
        }
        out.locale = self.str(locale, "context.locale", 35);
        if out.locale.is_some_and(|l| !is_locale(l)) {
            self.fail(
                "context.locale",
                "must be a language-region tag such as en-US",
            );
        }
        out.timezone = self.str(timezone, "context.timezone", 64);
        if out.timezone.is_some_and(|t| !is_timezone(t)) {
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
        let cut = cut.and_then(|c| c.write(source.texts));
        let known = |k: &str| context_key(k).is_some();
        let rest =
            cut.unwrap_or_else(|| merged_json(ctx.as_ref(), close, batch.as_ref(), known, source));
        out.rest = self.kept("context", rest);
        out
    }

    /// `integrations` (switches per destination): the event's merged over the batch's.
    pub(super) fn integrations<'i>(
        &mut self,
        v: Option<Value<'_, 'i>>,
        batch: Option<Value<'_, '_>>,
        source: &Source<'i>,
    ) -> Option<Text<'i>> {
        let own = self.object(v, "integrations");
        let batch = batch.and_then(|b| b.as_object());
        if own.is_none() && batch.is_none() {
            return None;
        }
        let merged = merged_json(own.as_ref(), None, batch.as_ref(), |_| false, source);
        self.kept("integrations", merged)
    }
}

/// The identifiers of an event as sent, in this order: messageId, anonymousId, userId,
/// sessionId, event, groupId, previousId.
pub(super) type RawIds<'t, 'i> = [Option<Value<'t, 'i>>; 7];

/// The identifiers of an event, checked against the requirements of its type.
pub(super) struct Ids<'i> {
    pub(super) message_id: Option<&'i str>,
    pub(super) anonymous_id: Option<Text<'i>>,
    pub(super) user_id: Option<&'i str>,
    pub(super) session_id: Option<&'i str>,
    pub(super) event: Option<&'i str>,
    pub(super) group_id: Option<&'i str>,
    pub(super) previous_id: Option<&'i str>,
}

impl Checker {
    /// A visitor's anonymousId: any string an SDK sends (see [`visitor_id`]).
    fn anonymous_id<'i>(&mut self, v: Option<Value<'_, 'i>>) -> Option<Text<'i>> {
        let a = self.str(v, "anonymousId", MAX_ID_CHARS)?;
        match visitor_id(a) {
            Ok(a) => {
                self.plain(Some(&a), "anonymousId")?;
                Some(match a {
                    std::borrow::Cow::Borrowed(a) => Text::Borrowed(a),
                    std::borrow::Cow::Owned(a) => a.into(),
                })
            }
            Err(m) => {
                self.fail("anonymousId", m);
                None
            }
        }
    }

    /// `field` is required for `kind`: reported unless present or already reported.
    fn require<T>(&mut self, value: &Option<T>, field: &str, kind: &str) {
        if value.is_none() && !self.failed(field) {
            self.fail(field, format!("is required for {kind}"));
        }
    }

    pub(super) fn ids<'i>(&mut self, kind: Option<EventType>, raw: RawIds<'_, 'i>) -> Ids<'i> {
        let [message_id, anonymous_id, user_id, session_id, event, group_id, previous_id] = raw;
        let message_id = self.id(message_id, "messageId", "");
        let anonymous_id = self.anonymous_id(anonymous_id);
        let user_id = self.id(user_id, "userId", "");
        if anonymous_id.is_none()
            && user_id.is_none()
            && !self.failed("anonymousId")
            && !self.failed("userId")
        {
            self.fail("anonymousId", "anonymousId or userId is required");
        }
        let session_id = self.id(session_id, "sessionId", "ses_");
        let event = self.str(event, "event", MAX_ID_CHARS);
        let event = self.plain(event, "event");
        if kind == Some(EventType::Track)
            && event.is_none_or(|e| e.trim().is_empty())
            && !self.failed("event")
        {
            self.fail("event", "is required for track: the event name");
        }
        let group_id = self.id(group_id, "groupId", "");
        // previousId is read for alias only: other types never had it.
        let previous_id = match kind {
            Some(EventType::Alias) => self.id(previous_id, "previousId", ""),
            _ => None,
        };
        match kind {
            Some(EventType::Group) => self.require(&group_id, "groupId", "group"),
            Some(EventType::Identify) => self.require(&user_id, "userId", "identify"),
            Some(EventType::Alias) => {
                self.require(&user_id, "userId", "alias");
                self.require(&previous_id, "previousId", "alias");
            }
            _ => {}
        }
        Ids {
            message_id,
            anonymous_id,
            user_id,
            session_id,
            event,
            group_id,
            previous_id,
        }
    }
}

/// A page's url, path, title and referrer from its `properties` (where server SDKs put them),
/// for the columns that `context.page` left empty. Free properties are never refused: a value
/// that is not a string within the limits (a path with a control character) is left out.
pub(super) fn page_from_properties<'i>(
    page: &mut [Option<&'i str>; 4],
    properties: Option<Value<'_, 'i>>,
) {
    // The browser tracker fills `context.page`: nothing to look up then.
    if page.iter().all(Option::is_some) {
        return;
    }
    let Some(p) = properties.and_then(|p| p.as_object()) else {
        return;
    };
    let values = pick(&p, &["url", "path", "title", "referrer"]);
    for (i, (slot, v)) in page.iter_mut().zip(values).enumerate() {
        if slot.is_none() {
            *slot = v
                .and_then(|v| v.into_string())
                .filter(|s| s.len() <= MAX_TEXT_CHARS && (i != 1 || !has_control(s)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_key_match_numbers_the_keys_in_their_order() {
        let keys = [
            "page",
            "device",
            "locale",
            "timezone",
            "screen",
            "ip",
            "userAgent",
        ];
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(context_key(key), Some(i), "{key}");
        }
        for other in ["", "Page", "pages", "useragent", "library"] {
            assert_eq!(context_key(other), None, "{other}");
        }
    }

    #[test]
    fn a_control_character_is_found_in_a_block_and_in_the_rest() {
        for len in 1..100 {
            let plain = "a".repeat(len);
            assert!(!has_control(&plain), "{len}");
            for at in 0..len {
                for control in ["\u{0}", "\n", "\u{1f}", "\u{7f}", "\u{85}", "\u{9f}"] {
                    let s = format!("{}{control}{}", &plain[..at], &plain[at + 1..]);
                    assert!(has_control(&s), "{len} {at} {control:?}");
                }
                // 0xC2 starts the C1 controls and also `¢`, `£`, `©`: only a suspect.
                let s = format!("{}¢{}", &plain[..at], &plain[at + 1..]);
                assert!(may_hold_control(s.as_bytes()) && !has_control(&s));
            }
        }
    }
}
