//! The event row's tests: its WAL form in every format, its columns and its size.
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
fn the_wal_form_round_trips_and_refuses_truncation_and_future_formats() {
    let e = full();
    let mut buf = Vec::new();
    e.encode_wal(&mut buf);
    assert_eq!(Event::decode_wal(&buf), Some(e));
    for cut in 0..buf.len() {
        assert_eq!(Event::decode_wal(&buf[..cut]), None, "cut at {cut}");
    }
    buf[0] = WAL_FORMAT + 1;
    assert_eq!(Event::decode_wal(&buf), None, "a future format is refused");
}

#[test]
fn records_hold_the_wal_form_in_two_parts_and_read_back_the_same_events() {
    let events = [full(), Event::example("app", "msg_2", "b", 3), full()];
    let records = Records::of(&events);
    assert_eq!(records.len(), 3);
    for (record, e) in records.records().zip(&events) {
        let mut whole = Vec::new();
        record.write_to(&mut whole);
        let mut encoded = Vec::new();
        e.encode_wal(&mut encoded);
        assert_eq!(
            whole, encoded,
            "the WAL gets the record as encode_wal writes it"
        );
        assert_eq!(record.decode().as_ref(), Some(e));
        // A head cut short, or with a byte too many, is not a record.
        let head = &whole[..whole.len() - record.texts.len()];
        assert!(Reader::of_parts(&head[..head.len() - 1], record.texts).is_none());
        let longer = [head, &[0]].concat();
        assert!(Reader::of_parts(&longer, record.texts).is_none());
        // Texts that are not all the record's are not read as an event.
        let short = &record.texts[..record.texts.len() - 1];
        assert_eq!(Record { head, texts: short }.decode(), None);
    }
}

#[test]
fn a_record_is_its_columns_bits_then_head_then_texts_each_checked() {
    let e = full();
    let mut buf = Vec::new();
    e.encode_wal(&mut buf);
    let present = u64::from_le_bytes(buf[1..9].try_into().unwrap());
    let there: Vec<_> = Event::COLUMNS
        .iter()
        .enumerate()
        .filter(|(i, _)| present >> i & 1 == 1)
        .map(|(_, c)| c.name)
        .collect();
    assert_eq!(
        there,
        [
            "message_id",
            "app_id",
            "type",
            "event",
            "anonymous_id",
            "session_id",
            "timestamp",
            "original_timestamp",
            "received_at",
            "page_url",
            "page_title",
            "page_referrer",
            "screen_width",
            "properties"
        ]
    );
    let tail = "msg_1apptrackBought \"it\"ases_1https://x.ioé{\"a\":1}";
    assert_eq!(&buf[9 + head_bytes(present)..], tail.as_bytes());
    assert_eq!(head_bytes(present), 10 * 4 + 3 * 8 + 4);
    let refused = |edit: &dyn Fn(&mut Vec<u8>), why: &str| {
        let mut b = buf.clone();
        edit(&mut b);
        assert_eq!(Event::decode_wal(&b), None, "{why}");
    };
    let at = buf.len() - tail.len() + tail.find('é').unwrap();
    refused(&|b| b[at + 1] = b'x', "a text that is not UTF-8");
    // page_title's length (after six texts', three times and page_url's): 1 cuts é in half.
    let title = 9 + 6 * 4 + 3 * 8 + 4;
    assert_eq!(buf[title..title + 4], 2u32.to_le_bytes());
    refused(&|b| b[title] = 1, "a text that ends inside a character");
    refused(&|b| b[1] &= !1, "no message_id");
    refused(
        &|b| b[1 + COLUMN_COUNT / 8] |= 1 << (COLUMN_COUNT % 8),
        "a column past the last",
    );
    refused(&|b| b.push(b'x'), "a text past the last");
    // Every number's range round-trips.
    for t in [i64::MIN, -1, 0, i64::MAX] {
        let e = Event {
            timestamp: t,
            sent_at: Some(t),
            screen_height: Some(t as i32),
            ..full()
        };
        let mut buf = Vec::new();
        e.encode_wal(&mut buf);
        assert_eq!(Event::decode_wal(&buf), Some(e), "{t}");
    }
}

/// A format 4 record, as that version wrote it: `full()` with a screen height of -300, a
/// timestamp of 2^40 µs and a value in one column of each format since.
const FORMAT_4: &str =
    "04050000006d73675f310300000061707005000000747261636b010b000000426f7567687420226974220101\
    00000061000001050000007365735f310000000000010000010100000000000000000200000000000000010c\
    00000068747470733a2f2f782e696f000102000000c3a9010000000000000001ffffffff01d4feffff000001\
    070000007b2261223a317d00000104000000486f6d650001030000006f6c640001060000004368726f6d6500\
    000103000000626f740101010200000046520000";

#[test]
fn older_records_replay_with_the_added_columns_empty() {
    // Format 3 is format 4 without the three place columns, format 2 is format 3 without
    // the five agent columns; format 1 is format 2 without the four columns before them
    // (an empty option is one byte).
    let e = Event {
        timestamp: 1 << 40,
        screen_height: Some(-300),
        ..full()
    };
    let named = Event {
        name: Some("Home".into()),
        previous_id: Some("old".into()),
        browser: Some("Chrome".into()),
        device_class: Some("bot".into()),
        is_bot: Some(true),
        country: Some("FR".into()),
        ..e.clone()
    };
    let hex = |i: usize| u8::from_str_radix(&FORMAT_4[2 * i..2 * i + 2], 16).unwrap();
    let mut buf: Vec<u8> = (0..FORMAT_4.len() / 2).map(hex).collect();
    assert_eq!(Event::decode_wal(&buf), Some(named.clone()));
    let mut now = Vec::new();
    named.encode_wal(&mut now);
    assert!(
        now.len() < buf.len(),
        "format 5 is the shorter: {} bytes",
        now.len()
    );
    // is_bot's value byte, before "FR" (option, length, bytes) and two empty options.
    let flag = buf.len() - 1 - (1 + 4 + 2) - 2;
    buf[flag] = 2;
    assert_eq!(Event::decode_wal(&buf), None, "a flag is 0 or 1");
    buf[flag] = 1;
    buf[0] = 3;
    buf.truncate(buf.len() - (1 + 4 + 2) - 1 - 1);
    assert_eq!(
        Event::decode_wal(&buf),
        Some(Event {
            country: None,
            ..named.clone()
        })
    );
    buf[0] = 2;
    buf.truncate(buf.len() - (1 + 4 + 6) - 1 - 1 - (1 + 4 + 3) - 2);
    let before_agent = Event {
        browser: None,
        device_class: None,
        is_bot: None,
        ..named.clone()
    };
    assert_eq!(
        Event::decode_wal(&buf),
        Some(Event {
            country: None,
            ..before_agent
        })
    );
    buf[0] = 1;
    buf.truncate(buf.len() - (1 + 4 + 4) - 1 - (1 + 4 + 3) - 1);
    assert_eq!(Event::decode_wal(&buf), Some(e));
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
    let text: usize = ["msg_1", "app", "track", "Bought \"it\"", "a", "ses_1"]
        .iter()
        .chain(&["https://x.io", "é", "", "{\"a\":1}"])
        .map(|s| s.len())
        .sum();
    assert_eq!(e.approx_bytes(), ROW_OVERHEAD + text);
    // The records' size is counted from the texts they wrote: the same.
    let mut records = Records::default();
    records.push(&e);
    records.push(&Event::default());
    assert_eq!(
        records.approx_bytes(),
        text + 2 * ROW_OVERHEAD + "page".len()
    );
}
