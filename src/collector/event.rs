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
    /// Its fixed part, in the record's head (a value that is there also sets its column's bit).
    fn put(&self, out: &mut Out<'_>);
    /// Its text, in the record's tail (none for a number or a flag).
    fn text(&self) -> Option<&str> {
        None
    }
    fn get(r: &mut Reader<'a>) -> Option<Self>;
}

/// Text: one text column; in the WAL, a length and bytes, read back borrowed.
impl<'a> Field<'a> for Text<'a> {
    const KIND: ColumnKind = ColumnKind::Text;
    const NULLABLE: bool = false;
    fn cell(&self) -> Cell<'_> {
        Cell::Text(Some(self))
    }
    fn put(&self, out: &mut Out<'_>) {
        out.value(&(self.len() as u32).to_le_bytes());
    }
    fn text(&self) -> Option<&str> {
        Some(self)
    }
    #[inline(always)]
    fn get(r: &mut Reader<'a>) -> Option<Self> {
        r.text().map(Text::Borrowed)
    }
}

/// Written as its name, as format 1 always did.
impl Field<'_> for EventType {
    const KIND: ColumnKind = ColumnKind::Text;
    const NULLABLE: bool = false;
    fn cell(&self) -> Cell<'_> {
        Cell::Text(Some(self.as_str()))
    }
    fn put(&self, out: &mut Out<'_>) {
        out.value(&(self.as_str().len() as u32).to_le_bytes());
    }
    fn text(&self) -> Option<&str> {
        Some(self.as_str())
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        EventType::parse(r.text()?)
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
            fn put(&self, out: &mut Out<'_>) {
                out.value(&self.to_le_bytes());
            }
            #[inline(always)]
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
    fn put(&self, out: &mut Out<'_>) {
        out.value(&[u8::from(*self)]);
    }
    fn get(r: &mut Reader<'_>) -> Option<Self> {
        match r.take(1)? {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }
}

/// An empty option: its column's bit clear (format 5), a 0 byte before (a 1 before a value).
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
    fn put(&self, out: &mut Out<'_>) {
        if let Some(v) = self {
            v.put(out);
        }
    }
    fn text(&self) -> Option<&str> {
        self.as_ref().and_then(T::text)
    }
    // The reads of a record are inlined into `Event::read` (one copy per column): a call per
    // column took a third more of its instructions (`benches/insn.sh`).
    #[inline(always)]
    fn get(r: &mut Reader<'a>) -> Option<Self> {
        match r.is_there()? {
            true => Some(Some(T::get(r)?)),
            false => Some(None),
        }
    }
}

impl Event<'_> {
    /// Its estimated size, for the "close a file by bytes" rule: [`ROW_OVERHEAD`] and the bytes
    /// of its texts ([`Records`] counts the same from the texts it writes, without this walk).
    pub fn approx_bytes(&self) -> usize {
        let mut bytes = ROW_OVERHEAD;
        self.each_text(|t| bytes += t.len());
        bytes
    }
}

/// Version byte of the WAL encoding. Formats 1 to 4 write the columns one after the other
/// (an option as a 0, or a 1 and its value; a text as its length and bytes); 2, 3 and 4
/// append the columns added since (see `event_row!`). Format 5 writes a record in three parts:
///
/// - the columns that hold a value, one bit each (`u64`, bit `i` for column `i`);
/// - the head: the fixed part of each of those, in column order (a text's length as `u32`,
///   numbers little-endian, a flag as one byte);
/// - the tail: their texts, one after the other.
///
/// So a reader finds every fixed part without a chain of reads through the texts, and checks
/// the tail as UTF-8 once instead of text by text. A WAL written by any earlier version
/// replays: an older record leaves the columns added since empty.
const WAL_FORMAT: u8 = 5;

/// The first format written as head and tail.
const HEAD_AND_TAIL: u8 = 5;

/// A bit for each column of one kind (`Some`), or for each that is never null (`None`): a
/// format 5 record without one of those is not an event.
const fn column_bits(kind: Option<ColumnKind>) -> u64 {
    let (mut bits, mut i) = (0, 0);
    while i < Event::COLUMNS.len() {
        let c = Event::COLUMNS[i];
        let picked = match kind {
            Some(k) => c.kind as u8 == k as u8,
            None => !c.nullable,
        };
        if picked {
            bits |= 1 << i;
        }
        i += 1;
    }
    bits
}

const _: () = assert!(COLUMN_COUNT <= 64, "format 5 has a bit per column in a u64");

/// The bytes of the head of a format 5 record whose columns `present` hold a value.
fn head_bytes(present: u64) -> usize {
    const TEXT: u64 = column_bits(Some(ColumnKind::Text));
    const TIME: u64 = column_bits(Some(ColumnKind::Timestamp));
    const INT: u64 = column_bits(Some(ColumnKind::Int));
    const BOOL: u64 = column_bits(Some(ColumnKind::Bool));
    let n = |kind: u64| (present & kind).count_ones() as usize;
    4 * n(TEXT) + 8 * n(TIME) + 4 * n(INT) + n(BOOL)
}

/// Writes the head of one format 5 record ([`WAL_FORMAT`]) and which columns hold a value.
pub struct Out<'b> {
    head: &'b mut Vec<u8>,
    present: u64,
    column: usize,
}

impl Out<'_> {
    /// The current column holds a value, of this fixed part.
    fn value(&mut self, fixed: &[u8]) {
        self.present |= 1 << self.column;
        self.head.extend_from_slice(fixed);
    }
}

/// The texts of a record still to be read.
enum Tail<'a> {
    /// Before format 5: each after its length, in the record.
    Inline,
    /// Format 5, checked as UTF-8 as a whole.
    Checked(&'a str),
}

/// Reads what [`Field::put`] and [`Field::text`] wrote; `None` on anything short or
/// malformed.
pub struct Reader<'a> {
    /// What is left of the head (format 5), or of the whole record (before).
    rest: &'a [u8],
    format: u8,
    /// Format 5: the columns that hold a value, and the one being read.
    present: u64,
    column: usize,
    tail: Tail<'a>,
}

impl<'a> Reader<'a> {
    /// A reader of `record` after its format byte; `None` for a format this build does not
    /// know, or a format 5 record that is not whole or whose texts are not UTF-8.
    fn open(record: &'a [u8]) -> Option<Reader<'a>> {
        let (&format, rest) = record.split_first()?;
        if !(HEAD_AND_TAIL..=WAL_FORMAT).contains(&format) {
            return (1..HEAD_AND_TAIL).contains(&format).then_some(Reader {
                rest,
                format,
                present: 0,
                column: 0,
                tail: Tail::Inline,
            });
        }
        let present = u64::from_le_bytes(*rest.first_chunk::<8>()?);
        let (head, texts) = record.split_at_checked(1 + 8 + head_bytes(present))?;
        Reader::of_parts(head, std::str::from_utf8(texts).ok()?)
    }

    /// A reader of a format 5 record given as its head (the format, the column bits and the
    /// fixed parts) and its texts; `None` unless the head is whole and the bits an event's.
    fn of_parts(head: &'a [u8], texts: &'a str) -> Option<Reader<'a>> {
        let (&format, rest) = head.split_first()?;
        let (present, rest) = rest.split_first_chunk::<8>()?;
        let present = u64::from_le_bytes(*present);
        const REQUIRED: u64 = column_bits(None);
        let all = u64::MAX >> (64 - COLUMN_COUNT);
        let valid = (HEAD_AND_TAIL..=WAL_FORMAT).contains(&format)
            && present & REQUIRED == REQUIRED
            && present & !all == 0
            && rest.len() == head_bytes(present);
        valid.then_some(Reader {
            rest,
            format,
            present,
            column: 0,
            tail: Tail::Checked(texts),
        })
    }
    #[inline(always)]
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        Some(head)
    }
    /// Whether the current column, an option, holds a value.
    #[inline(always)]
    fn is_there(&mut self) -> Option<bool> {
        if self.format >= HEAD_AND_TAIL {
            return Some(self.present >> self.column & 1 == 1);
        }
        match self.take(1)? {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }
    #[inline(always)]
    fn length(&mut self) -> Option<usize> {
        let len = self.take(4)?;
        Some(u32::from_le_bytes(len.try_into().ok()?) as usize)
    }
    /// A text: a slice of the checked tail, or (before format 5) its bytes checked now.
    #[inline(always)]
    fn text(&mut self) -> Option<&'a str> {
        let len = self.length()?;
        match &mut self.tail {
            Tail::Checked(t) => split(t, len),
            Tail::Inline => std::str::from_utf8(self.take(len)?).ok(),
        }
    }
    /// Whether the record was read to its end.
    fn is_done(&self) -> bool {
        self.rest.is_empty()
            && match self.tail {
                Tail::Inline => true,
                Tail::Checked(t) => t.is_empty(),
            }
    }
}

/// The first `len` bytes of `text` (`None` if it is shorter, or they end inside a character);
/// `text` keeps the rest.
#[inline(always)]
fn split<'a>(text: &mut &'a str, len: usize) -> Option<&'a str> {
    let (head, rest) = text.split_at_checked(len)?;
    *text = rest;
    Some(head)
}

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
            /// hot path): [`WAL_FORMAT`]'s. Returns the bytes of its texts (its tail), so
            /// [`Event::approx_bytes`] is [`ROW_OVERHEAD`] more, without a second pass.
            pub fn encode_wal(&self, buf: &mut Vec<u8>) -> usize {
                self.encode_head(buf);
                let tail = buf.len();
                self.each_text(|t| buf.extend_from_slice(t.as_bytes()));
                buf.len() - tail
            }

            /// A record's head: its format, the bits of the columns that hold a value, and
            /// their fixed parts.
            fn encode_head(&self, buf: &mut Vec<u8>) {
                buf.push(WAL_FORMAT);
                let bits = buf.len();
                buf.extend_from_slice(&[0; 8]);
                let mut out = Out { head: buf, present: 0, column: 0 };
                $( Field::put(&self.$field, &mut out); out.column += 1; )+
                $( $( Field::put(&self.$added, &mut out); out.column += 1; )+ )*
                let present = out.present.to_le_bytes();
                buf[bits..bits + 8].copy_from_slice(&present);
            }

            /// A record's tail: the texts, in column order.
            fn each_text(&self, mut f: impl FnMut(&str)) {
                $( if let Some(t) = Field::text(&self.$field) { f(t) } )+
                $( $( if let Some(t) = Field::text(&self.$added) { f(t) } )+ )*
            }

            /// Reads [`Event::encode_wal`]'s form, or an older format's (without the columns
            /// added since), borrowing its text; `None` when the bytes are not one whole event.
            pub fn decode_wal(bytes: &'a [u8]) -> Option<Event<'a>> {
                Event::read(Reader::open(bytes)?)
            }

            /// Inlined where it is called, so the reader stays in registers (passed to one
            /// copy for both callers, reading took a fifth more instructions: `insn.sh`).
            #[inline(always)]
            fn read(mut r: Reader<'a>) -> Option<Event<'a>> {
                let format = r.format;
                let e = Event {
                    $( $field: { let v = <$ty as Field<'a>>::get(&mut r)?; r.column += 1; v }, )+
                    $( $( $added: if format >= $n {
                        let v = <$aty as Field<'a>>::get(&mut r)?;
                        r.column += 1;
                        v
                    } else {
                        None
                    }, )+ )*
                };
                r.is_done().then_some(e)
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

/// The events of one request for one shard in their WAL form, in two buffers: what the edge
/// hands to a shard writer (a few allocations per request, not one per text), and what the writer
/// reads its events from (borrowing) and appends to its WAL as they are. The records' texts are
/// kept apart, in a `String`, so the writer reads them without checking them as UTF-8 again.
#[derive(Debug, Default)]
pub struct Records {
    /// The records' heads ([`Event::encode_wal`]'s form without its texts).
    heads: Vec<u8>,
    /// The records' texts (their tails).
    texts: String,
    /// Where each record's head and texts end.
    ends: Vec<(usize, usize)>,
    /// The sum of the events' [`Event::approx_bytes`].
    approx: usize,
}

impl Records {
    /// Room for `events` records of the usual size (a tracker's event: a head of about 110
    /// bytes, texts of about 520), so that a request's records are not copied as they grow.
    pub fn with_capacity(events: usize) -> Records {
        Records {
            heads: Vec::with_capacity(events * 128),
            texts: String::with_capacity(events * 640),
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
        e.encode_head(&mut self.heads);
        let texts = self.texts.len();
        e.each_text(|t| self.texts.push_str(t));
        self.ends.push((self.heads.len(), self.texts.len()));
        self.approx += ROW_OVERHEAD + self.texts.len() - texts;
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
    pub fn records(&self) -> impl Iterator<Item = Record<'_>> {
        let starts = std::iter::once((0, 0)).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|((h, t), &(head, texts))| Record {
                head: &self.heads[h..head],
                texts: &self.texts[t..texts],
            })
    }
}

/// One event's WAL record in [`Records`]: its head, then its texts.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    head: &'a [u8],
    texts: &'a str,
}

impl<'a> Record<'a> {
    /// The event, borrowing the record (as [`Event::decode_wal`] of its bytes, without
    /// checking its texts as UTF-8 again); `None` when it is not one whole event.
    pub fn decode(self) -> Option<Event<'a>> {
        Event::read(Reader::of_parts(self.head, self.texts)?)
    }

    /// Appends the record as the WAL holds it ([`Event::encode_wal`]'s form).
    pub fn write_to(self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(self.head);
        buf.extend_from_slice(self.texts.as_bytes());
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
mod tests;
