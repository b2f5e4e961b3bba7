//! The event row: what the decoder produces, the WAL stores and the Parquet files hold
//! (the columns of api.md §8).
//!
//! One list, in `event_row!` below, is the single source of truth for the lake's columns: it
//! declares the struct, and from it come the WAL encoding, the size estimate and the column
//! descriptions (`COLUMNS`, `cells`) that `columns.rs` turns into the Arrow schema and builders.
//! Adding a column is one line here. Plain data, so the decoder and its fuzzer stay light.
//!
//! An event borrows its text ([`Text`]): at the edge from the request body (and what the
//! events of one request share), in the writer and the replay from its WAL record. So no text
//! is copied into an allocation of its own between the socket and the WAL, nor between the WAL
//! and the Arrow builders: the edge encodes a request's events into one buffer ([`Records`]).

/// An event's text: borrowed (from the request body, what the events of one request share, or
/// a WAL record), or owned (what the server makes: a messageId, an object encoded again, a
/// cached userId).
#[derive(Clone)]
pub enum Text<'a> {
    Borrowed(&'a str),
    Owned(Box<str>),
}

impl Text<'_> {
    /// The same text, independent of what it borrowed from (copied only when borrowed).
    pub fn into_owned(self) -> Text<'static> {
        match self {
            Text::Borrowed(s) => Text::Owned(s.into()),
            Text::Owned(s) => Text::Owned(s),
        }
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Owned(s) => s,
        }
    }
}

impl AsRef<[u8]> for Text<'_> {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Default for Text<'_> {
    fn default() -> Self {
        Text::Borrowed("")
    }
}

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Text<'_> {}

impl std::fmt::Debug for Text<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        **self == **other
    }
}

impl std::fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(s: &'a str) -> Self {
        Text::Borrowed(s)
    }
}

impl From<String> for Text<'_> {
    fn from(s: String) -> Self {
        Text::Owned(s.into_boxed_str())
    }
}

/// The four event types of the interface (§6.1), and Segment's `screen` (a view in a mobile
/// app) and `alias` (a user's previous id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EventType {
    /// The default only so that an `Event` has one (`Event::example`): the decoder always
    /// sets the type.
    #[default]
    Page,
    Track,
    Identify,
    Group,
    Screen,
    Alias,
}

impl EventType {
    pub const ALL: [EventType; 6] = [
        EventType::Page,
        EventType::Track,
        EventType::Identify,
        EventType::Group,
        EventType::Screen,
        EventType::Alias,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Page => "page",
            EventType::Track => "track",
            EventType::Identify => "identify",
            EventType::Group => "group",
            EventType::Screen => "screen",
            EventType::Alias => "alias",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of a lake column. Every `i64` field is a timestamp in microseconds since the Unix
/// epoch, UTC; every `i32` an integer; every `bool` a flag; the rest are text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    Text,
    Timestamp,
    Int,
    Bool,
}

/// One lake column: its name, its kind, and whether it may be null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub kind: ColumnKind,
    pub nullable: bool,
}

/// One cell of a row, borrowed from the event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Text(Option<&'a str>),
    Timestamp(Option<i64>),
    Int(Option<i32>),
    Bool(Option<bool>),
}

/// What a field type contributes to its column: its kind, its cell, its WAL form and its size.
/// Implemented for the few types a row is made of.
pub trait Field<'a>: Sized {
    const KIND: ColumnKind;
    const NULLABLE: bool;
    fn cell(&self) -> Cell<'_>;
    fn put(&self, out: &mut Vec<u8>);
    fn get(r: &mut Reader<'a>) -> Option<Self>;
    /// Bytes held on the heap (text length).
    fn heap_bytes(&self) -> usize {
        0
    }
}

/// Text: one text column; in the WAL, a length and bytes, read back borrowed.
impl<'a> Field<'a> for Text<'a> {
    const KIND: ColumnKind = ColumnKind::Text;
    const NULLABLE: bool = false;
    fn cell(&self) -> Cell<'_> {
        Cell::Text(Some(self))
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        out.extend_from_slice(self.as_bytes());
    }
    fn get(r: &mut Reader<'a>) -> Option<Self> {
        std::str::from_utf8(r.text()?).ok().map(Text::Borrowed)
    }
    /// A text shared by a request's events is counted in full for each: the estimate errs on
    /// the safe side.
    fn heap_bytes(&self) -> usize {
        self.len()
    }
}

impl Field<'_> for EventType {
    const KIND: ColumnKind = ColumnKind::Text;
    const NULLABLE: bool = false;
    fn cell(&self) -> Cell<'_> {
        Cell::Text(Some(self.as_str()))
    }
    /// Written as its name, as format 1 always did.
    fn put(&self, out: &mut Vec<u8>) {
        let name = self.as_str();
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        EventType::parse(&Text::get(r)?)
    }
}

/// Timestamps (`i64`, µs) and integers (`i32`): little-endian in the WAL.
macro_rules! number_field {
    ($t:ty, $kind:ident) => {
        impl Field<'_> for $t {
            const KIND: ColumnKind = ColumnKind::$kind;
            const NULLABLE: bool = false;
            fn cell(&self) -> Cell<'_> {
                Cell::$kind(Some(*self))
            }
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(r: &mut Reader<'_>) -> Option<Self> {
                let bytes = r.take(std::mem::size_of::<$t>())?;
                Some(<$t>::from_le_bytes(bytes.try_into().ok()?))
            }
        }
    };
}
number_field!(i64, Timestamp);
number_field!(i32, Int);

/// Flags: one byte in the WAL.
impl Field<'_> for bool {
    const KIND: ColumnKind = ColumnKind::Bool;
    const NULLABLE: bool = false;
    fn cell(&self) -> Cell<'_> {
        Cell::Bool(Some(*self))
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        match r.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

impl<'a, T: Field<'a>> Field<'a> for Option<T> {
    const KIND: ColumnKind = T::KIND;
    const NULLABLE: bool = true;
    fn cell(&self) -> Cell<'_> {
        match (self, T::KIND) {
            (Some(v), _) => v.cell(),
            (None, ColumnKind::Text) => Cell::Text(None),
            (None, ColumnKind::Timestamp) => Cell::Timestamp(None),
            (None, ColumnKind::Int) => Cell::Int(None),
            (None, ColumnKind::Bool) => Cell::Bool(None),
        }
    }
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            Some(v) => {
                out.push(1);
                v.put(out);
            }
            None => out.push(0),
        }
    }
    fn get(r: &mut Reader<'a>) -> Option<Self> {
        match r.byte()? {
            0 => Some(None),
            1 => Some(Some(T::get(r)?)),
            _ => None,
        }
    }
    fn heap_bytes(&self) -> usize {
        self.as_ref().map_or(0, T::heap_bytes)
    }
}

/// Reads what [`Field::put`] wrote; `None` on anything short or malformed.
pub struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    /// A text's bytes: its length, then as many bytes (not yet checked as UTF-8).
    fn text(&mut self) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize;
        self.take(len)
    }
}

/// Version byte of the WAL encoding: 2, 3 and 4 append the columns added since (see
/// `event_row!`). A WAL written by any earlier version replays: an older record leaves them
/// empty.
const WAL_FORMAT: u8 = 4;

/// The number of the lake's columns.
pub const COLUMN_COUNT: usize = Event::COLUMNS.len();

/// Fixed overhead counted per row by [`Event::approx_bytes`] (pointers, lengths, numbers).
const ROW_OVERHEAD: usize = 96;

macro_rules! event_row {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty $(as $name:literal)? ),+
     $( ; since format $n:literal : $( $(#[$adoc:meta])* $added:ident : $aty:ty ),+ )* $(,)?) => {
        /// One accepted, enriched event: one row of the lake.
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct Event<'a> {
            $( $(#[$doc])* pub $field: $ty, )+
            $( $( $(#[$adoc])* pub $added: $aty, )+ )*
        }

        impl<'a> Event<'a> {
            /// The lake's columns, in file order.
            pub const COLUMNS: &'static [Column] = &[
                $( Column {
                    name: event_row!(@name $field $($name)?),
                    kind: <$ty as Field<'a>>::KIND,
                    nullable: <$ty as Field<'a>>::NULLABLE,
                }, )+
                $( $( Column {
                    name: stringify!($added),
                    kind: <$aty as Field<'a>>::KIND,
                    nullable: <$aty as Field<'a>>::NULLABLE,
                }, )+ )*
            ];

            /// The row's cells, in the order of [`Event::COLUMNS`].
            pub fn cells(&self) -> [Cell<'_>; COLUMN_COUNT] {
                [
                    $( Field::cell(&self.$field), )+
                    $( $( Field::cell(&self.$added), )+ )*
                ]
            }

            /// The compact binary form kept in the write-ahead log (no JSON escaping on the
            /// hot path).
            pub fn encode_wal(&self, out: &mut Vec<u8>) {
                out.push(WAL_FORMAT);
                $( Field::put(&self.$field, out); )+
                $( $( Field::put(&self.$added, out); )+ )*
            }

            /// Reads [`Event::encode_wal`]'s form, or an older format's (without the columns
            /// added since), borrowing its text; `None` when the bytes are not one whole event.
            pub fn decode_wal(bytes: &'a [u8]) -> Option<Event<'a>> {
                let mut r = Reader(bytes);
                let format = r.byte()?;
                if !(1..=WAL_FORMAT).contains(&format) {
                    return None;
                }
                let e = Event {
                    $( $field: <$ty as Field<'a>>::get(&mut r)?, )+
                    $( $( $added: if format >= $n { <$aty as Field<'a>>::get(&mut r)? } else { None }, )+ )*
                };
                r.0.is_empty().then_some(e)
            }

            /// Rough in-memory size, for the "close a file by bytes" rule.
            pub fn approx_bytes(&self) -> usize {
                ROW_OVERHEAD $( + Field::heap_bytes(&self.$field) )+
                    $( $( + Field::heap_bytes(&self.$added) )+ )*
            }

            /// The same event, independent of what its text borrowed from.
            pub fn into_owned(self) -> Event<'static> {
                Event {
                    $( $field: Owned::owned(self.$field), )+
                    $( $( $added: Owned::owned(self.$added), )+ )*
                }
            }
        }
    };
    (@name $field:ident $name:literal) => { $name };
    (@name $field:ident) => { stringify!($field) };
}

event_row! {
    message_id: Text<'a>,
    app_id: Text<'a>,
    kind: EventType as "type",
    event: Option<Text<'a>>,
    anonymous_id: Option<Text<'a>>,
    user_id: Option<Text<'a>>,
    group_id: Option<Text<'a>>,
    session_id: Option<Text<'a>>,
    /// The event's time: the client's, corrected for clock skew (µs, UTC).
    timestamp: i64,
    /// The client's `timestamp` as sent.
    original_timestamp: Option<i64>,
    sent_at: Option<i64>,
    received_at: i64,
    page_url: Option<Text<'a>>,
    page_path: Option<Text<'a>>,
    page_title: Option<Text<'a>>,
    page_referrer: Option<Text<'a>>,
    device_type: Option<Text<'a>>,
    locale: Option<Text<'a>>,
    timezone: Option<Text<'a>>,
    screen_width: Option<i32>,
    screen_height: Option<i32>,
    ip: Option<Text<'a>>,
    user_agent: Option<Text<'a>>,
    /// JSON text.
    properties: Option<Text<'a>>,
    /// JSON text.
    traits: Option<Text<'a>>,
    /// JSON text: the context fields that have no column of their own.
    context: Option<Text<'a>>;
    // The lake's schema only grows: new columns go last, nullable (old files read as null).
    since format 2:
    /// The page's or screen's `name`.
    name: Option<Text<'a>>,
    /// The page's `category`.
    category: Option<Text<'a>>,
    /// alias: the user's previous id.
    previous_id: Option<Text<'a>>,
    /// JSON text: the `integrations` switches (the batch's, overridden by the event's).
    integrations: Option<Text<'a>>;
    since format 3:
    /// The visitor's browser, from its user agent (`agent.rs`): `Chrome`, `Safari`, `Googlebot`.
    browser: Option<Text<'a>>,
    browser_version: Option<Text<'a>>,
    /// The OS family: `Windows`, `macOS`, `iOS`, `Android`, `Linux`...
    os: Option<Text<'a>>,
    /// From the user agent: `desktop`, `mobile`, `tablet`, `bot` or `other` (`device_type` is
    /// what the client said).
    device_class: Option<Text<'a>>,
    /// A known crawler, or a headless or automated browser: left out of the traffic rollups.
    is_bot: Option<bool>;
    since format 4:
    /// The client's country (ISO 3166-1 alpha-2), region and city, from the address
    /// (`geo.rs`, when `collector.geoip_database` is set).
    country: Option<Text<'a>>,
    region: Option<Text<'a>>,
    city: Option<Text<'a>>,
}

/// A field made independent of what its text borrowed ([`Event::into_owned`]).
trait Owned {
    type Out;
    fn owned(self) -> Self::Out;
}

impl Owned for Text<'_> {
    type Out = Text<'static>;
    fn owned(self) -> Text<'static> {
        self.into_owned()
    }
}

impl Owned for Option<Text<'_>> {
    type Out = Option<Text<'static>>;
    fn owned(self) -> Option<Text<'static>> {
        self.map(Text::into_owned)
    }
}

macro_rules! owned_as_is {
    ($($t:ty),+) => { $( impl Owned for $t { type Out = $t; fn owned(self) -> $t { self } } )+ };
}
owned_as_is!(EventType, i64, Option<i64>, Option<i32>, Option<bool>);

/// The events of one request for one shard in their WAL form, in one buffer: what the edge
/// hands to a shard writer (one allocation per request, not one per text), and what the writer
/// reads its events from (borrowing) and appends to its WAL as they are.
#[derive(Debug, Default)]
pub struct Records {
    bytes: Vec<u8>,
    /// Where each record ends in `bytes`.
    ends: Vec<usize>,
    /// The sum of the events' [`Event::approx_bytes`].
    approx: usize,
}

impl Records {
    /// Room for `events` records of the usual size (a tracker's event, about 600 bytes).
    pub fn with_capacity(events: usize) -> Records {
        Records {
            bytes: Vec::with_capacity(events * 640),
            ends: Vec::with_capacity(events),
            approx: 0,
        }
    }

    /// The records of `events`.
    pub fn of(events: &[Event<'_>]) -> Records {
        let mut out = Records::with_capacity(events.len());
        for e in events {
            out.push(e);
        }
        out
    }

    pub fn push(&mut self, e: &Event<'_>) {
        e.encode_wal(&mut self.bytes);
        self.ends.push(self.bytes.len());
        self.approx += e.approx_bytes();
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The estimated in-memory size of the events (the open files' byte rule, the budget).
    pub fn approx_bytes(&self) -> usize {
        self.approx
    }

    /// Each event's WAL record.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter())
            .map(|(a, &b)| &self.bytes[a..b])
    }
}

impl<'a> Event<'a> {
    /// The key that routes the event to a shard and identifies the visitor.
    pub fn visitor(&self) -> &str {
        self.anonymous_id
            .as_deref()
            .or(self.user_id.as_deref())
            .unwrap_or("")
    }

    /// The bytes of `(app_id, message_id)` of a WAL record, for their fingerprint, read
    /// without the rest of it (they are its first two fields in every format) and not checked
    /// as UTF-8 ([`Event::decode_wal`] does that); `None` when the record is not that long.
    pub fn wal_ids(bytes: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
        let mut r = Reader(bytes);
        if !(1..=WAL_FORMAT).contains(&r.byte()?) {
            return None;
        }
        let message_id = r.text()?;
        Some((r.text()?, message_id))
    }

    /// A minimal event, for tests and benches: a page view of `anonymous_id` in `app_id`.
    pub fn example(app_id: &str, message_id: &str, anonymous_id: &str, at: i64) -> Event<'a> {
        Event {
            message_id: message_id.to_owned().into(),
            app_id: app_id.to_owned().into(),
            kind: EventType::Page,
            anonymous_id: Some(anonymous_id.to_owned().into()),
            timestamp: at,
            received_at: at,
            ..Event::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Event<'static> {
        Event {
            kind: EventType::Track,
            event: Some("Bought \"it\"".into()),
            session_id: Some("ses_1".into()),
            timestamp: -5,
            original_timestamp: Some(1),
            page_url: Some("https://x.io".into()),
            page_title: Some("é".into()),
            page_referrer: Some("".into()),
            screen_width: Some(-1),
            properties: Some("{\"a\":1}".into()),
            ..Event::example("app", "msg_1", "a", 2)
        }
    }

    #[test]
    fn the_wal_form_round_trips_and_refuses_truncation() {
        let e = full();
        let mut buf = Vec::new();
        e.encode_wal(&mut buf);
        let ids = Some((&b"app"[..], &b"msg_1"[..]));
        assert_eq!(Event::wal_ids(&buf), ids);
        assert_eq!(Event::decode_wal(&buf), Some(e));
        for cut in 0..buf.len() {
            assert_eq!(Event::decode_wal(&buf[..cut]), None, "cut at {cut}");
        }
        // The ids alone: read from the first fields, refused where those are cut.
        let ids_end = 1 + (4 + "msg_1".len()) + (4 + "app".len());
        for cut in 0..ids_end {
            assert_eq!(Event::wal_ids(&buf[..cut]), None, "cut at {cut}");
        }
        assert_eq!(Event::wal_ids(&buf[..ids_end]), ids);
        buf[0] = WAL_FORMAT + 1;
        assert_eq!(Event::wal_ids(&buf), None, "a future format is refused");
    }

    #[test]
    fn older_records_replay_with_the_added_columns_empty() {
        // Format 3 is format 4 without the three place columns, format 2 is format 3 without
        // the five agent columns; format 1 is format 2 without the four columns before them
        // (an empty option is one byte).
        let e = full();
        let mut buf = Vec::new();
        e.encode_wal(&mut buf);
        assert_eq!(buf[0], 4);
        buf[0] = 3;
        buf.truncate(buf.len() - 3);
        assert_eq!(Event::decode_wal(&buf), Some(e.clone()));
        buf[0] = 2;
        buf.truncate(buf.len() - 5);
        assert_eq!(Event::decode_wal(&buf), Some(e.clone()));
        buf[0] = 1;
        buf.truncate(buf.len() - 4);
        assert_eq!(Event::decode_wal(&buf), Some(e.clone()));
        let named = Event {
            name: Some("Home".into()),
            previous_id: Some("old".into()),
            browser: Some("Chrome".into()),
            device_class: Some("bot".into()),
            is_bot: Some(true),
            country: Some("FR".into()),
            ..e
        };
        let mut buf = Vec::new();
        named.encode_wal(&mut buf);
        assert_eq!(Event::decode_wal(&buf), Some(named));
        // is_bot's value byte, before "FR" (option, length, bytes) and two empty options.
        let flag = buf.len() - 1 - (1 + 4 + 2) - 2;
        buf[flag] = 2;
        assert_eq!(Event::decode_wal(&buf), None, "a flag is 0 or 1");
        buf[flag] = 1;
        buf[0] = 5;
        assert_eq!(Event::decode_wal(&buf), None, "a future format is refused");
    }

    #[test]
    fn every_type_round_trips_through_the_wal() {
        for t in EventType::ALL {
            let e = Event { kind: t, ..full() };
            let mut buf = Vec::new();
            e.encode_wal(&mut buf);
            assert_eq!(Event::decode_wal(&buf).map(|e| e.kind), Some(t));
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        assert_eq!(EventType::parse("Page"), None);
    }

    #[test]
    fn columns_cells_and_size_follow_the_one_list() {
        let e = full();
        let names: Vec<_> = Event::COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names.len(), 38);
        assert_eq!(&names[..3], &["message_id", "app_id", "type"]);
        assert_eq!(names[25], "context");
        assert_eq!(
            &names[26..30],
            &["name", "category", "previous_id", "integrations"]
        );
        let agent = ["browser", "browser_version", "os", "device_class", "is_bot"];
        assert_eq!(&names[30..35], &agent);
        assert_eq!(Event::COLUMNS[34].kind, ColumnKind::Bool);
        assert_eq!(&names[35..], &["country", "region", "city"]);
        let cells = e.cells();
        assert_eq!(cells.len(), Event::COLUMNS.len());
        for (col, cell) in Event::COLUMNS.iter().zip(&cells) {
            let kind = match cell {
                Cell::Text(_) => ColumnKind::Text,
                Cell::Timestamp(_) => ColumnKind::Timestamp,
                Cell::Int(_) => ColumnKind::Int,
                Cell::Bool(_) => ColumnKind::Bool,
            };
            assert_eq!(kind, col.kind, "{}", col.name);
        }
        assert_eq!(cells[2], Cell::Text(Some("track")));
        assert!(!Event::COLUMNS[8].nullable && Event::COLUMNS[9].nullable);
        let text: usize = ["msg_1", "app", "Bought \"it\"", "a", "ses_1"]
            .iter()
            .chain(&["https://x.io", "é", "", "{\"a\":1}"])
            .map(|s| s.len())
            .sum();
        assert_eq!(e.approx_bytes(), ROW_OVERHEAD + text);
    }
}
