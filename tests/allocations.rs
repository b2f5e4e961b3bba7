//! Heap allocations on the collector's hot path, counted by a global allocator that counts
//! (issue 27: "no per-event heap allocation on the path from the socket to the WAL, and none
//! from the WAL to the Arrow builders beyond the builders' own buffers").
//!
//! Each check runs the same step over a batch of 10 and of 100 tracker events and compares
//! the counts: a step that allocates per event shows it as a difference that grows with the
//! batch, whatever it allocates per request. The bytes are counted too: an open lake file that
//! holds one event must weigh what the shard's memory budget counts for it.

#![allow(
    unsafe_code,
    reason = "implementing GlobalAlloc is unsafe by definition; this one counts, then calls System"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use serde_json::{json, Value};
use tributary::collector::columns::{Encoder, OpenFile, RowBuilder};
use tributary::collector::decode::{self, Enrichment};
use tributary::collector::{Event, Record, Records};

/// Counts the allocations (and growths) of the thread that asked for them, and their bytes
/// (a growth counts its new size: the block it may move to).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // `try_with`: the allocator also serves threads that are tearing down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    let _ = BYTES.try_with(|n| n.set(n.get() + bytes as u64));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    (ALLOCATIONS.with(Cell::get) - before, out)
}

/// Bytes allocated by `f` on this thread.
fn allocated_bytes<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = BYTES.with(Cell::get);
    let out = f();
    (BYTES.with(Cell::get) - before, out)
}

const LIMITS: decode::Limits = decode::Limits {
    max_events: 2000,
    max_event_bytes: 32 * 1024,
    max_batch_bytes: 500 * 1024,
};

/// A tracker event (the shape of `tests/api/collector.rs::track`): a page, a context with
/// keys that have columns and keys that stay in its JSON, properties, a canonical visitor id.
fn track(i: usize) -> Value {
    json!({
        "type": "track",
        "event": "Plan Selected",
        "anonymousId": format!("6f1c2d3e-4b5a-4c6d-8e7f-{:012x}", i / 10),
        "messageId": format!("msg_alloc_{i:04}"),
        "sessionId": "ses_1",
        "timestamp": "2026-03-02T10:15:30.123Z",
        "properties": {"plan": "pro", "seats": 3, "nested": {"a": [1, 2]}},
        "context": {
            "page": {"url": "https://shop.example/checkout?x=1", "path": "/checkout",
                     "title": "Checkout", "referrer": ""},
            "device": {"type": "desktop"}, "locale": "en-US", "timezone": "Europe/Paris",
            "screen": {"width": 1440, "height": 900},
            "library": {"name": "tributary.js", "version": "1.0.0"}
        }
    })
}

fn body(events: usize) -> Vec<u8> {
    let batch: Vec<Value> = (0..events).map(track).collect();
    serde_json::to_vec(&json!({"batch": batch, "sentAt": "2026-03-02T10:15:31.000Z"})).unwrap()
}

fn enrichment() -> Enrichment {
    Enrichment {
        app_id: "65f0c0ffee0000000000beef".into(),
        received_at: 1_772_446_531_000_000,
        ip: Some("203.0.113.7".into()),
        user_agent: Some("Mozilla/5.0 (X11; Linux x86_64) Chrome/124.0 Safari/537.36".into()),
        ..Enrichment::default()
    }
}

/// The edge's step for one request: the body decoded into events (padded copy, tape,
/// validation, enrichment) and encoded into its WAL records.
fn edge(body: &[u8], scratch: &mut decode::Scratch, enrich: &Enrichment) -> (u64, Records) {
    allocations(|| {
        let decoded = decode::decode(body, scratch, enrich, LIMITS).expect("a valid body");
        assert!(decoded.rejected.is_empty(), "{:?}", decoded.rejected);
        Records::of(&decoded.events)
    })
}

#[test]
fn the_edge_allocates_per_request_not_per_event() {
    let enrich = enrichment();
    let bodies = [body(10), body(100), body(1000)];
    let mut scratch = decode::Scratch::default();
    // Warm: the per-thread scratch (tape, buffers) and the request's scratch reach their size.
    for _ in 0..3 {
        edge(&bodies[2], &mut scratch, &enrich);
    }
    let counts = bodies.each_ref().map(|b| edge(b, &mut scratch, &enrich));
    let events = counts.each_ref().map(|(_, records)| records.len());
    assert_eq!(events, [10, 100, 1000]);
    let counts = counts.map(|(n, _)| n);
    eprintln!("edge: allocations for 10, 100 and 1000 events: {counts:?}");
    // What one request allocates (its lists of items and events, its records' two buffers) is the
    // same whatever its size.
    assert!(
        counts[2] <= counts[0] + 1,
        "the edge allocates per event: {counts:?} allocations for 10, 100 and 1000 events"
    );
}

#[test]
fn the_writer_reads_records_into_the_builders_without_allocating_per_event() {
    let enrich = enrichment();
    let mut scratch = decode::Scratch::default();
    let batches = [10, 100, 1000, 2000].map(|n| edge(&body(n), &mut scratch, &enrich).1);
    let mut rows = RowBuilder::default();
    // What the writer does with a group: its records read back as events borrowing them, and
    // appended to the open file's builders.
    let append = |rows: &mut RowBuilder, records: &Records| {
        allocations(|| {
            let mut events = Vec::with_capacity(records.len());
            events.extend(records.records().filter_map(Record::decode));
            let refs: Vec<&Event> = events.iter().collect();
            rows.append_all(&refs);
            events.len()
        })
    };
    // Warm: a row group of 2000 rows, so the next one's builders are sized for 2000 rows at
    // its first row (then 10 + 100 + 1000 more fit without growing).
    append(&mut rows, &batches[3]);
    rows.finish();
    append(&mut rows, &batches[0]);
    let counts = [0, 1, 2].map(|i| append(&mut rows, &batches[i]));
    assert_eq!(counts.map(|(_, n)| n), [10, 100, 1000]);
    let counts = counts.map(|(n, _)| n);
    eprintln!("writer: allocations for 10, 100 and 1000 events: {counts:?}");
    assert!(
        counts[2] <= counts[0] + 1,
        "the writer allocates per event: {counts:?} allocations for 10, 100 and 1000 events"
    );
}

#[test]
fn an_open_file_holding_one_event_allocates_no_more_than_the_budget_counts_for_it() {
    // An edge keeps a file open per app and hour: with many quiet apps, most hold a few rows.
    // Their builders used to start with arrow's room for 1 024 rows in every column (about
    // 300 KB a file, uncounted: a thousand apps of one event each took 325 MB of RSS).
    let encoder = Encoder::spawn("alloc-test-encoder".into()).unwrap();
    let mut scratch = decode::Scratch::default();
    let records = edge(&body(1), &mut scratch, &enrichment()).1;
    let events: Vec<Event> = records.records().filter_map(Record::decode).collect();
    let refs: Vec<&Event> = events.iter().collect();
    let (bytes, file) = allocated_bytes(|| {
        let mut file = OpenFile::new(&encoder);
        file.append(&refs).unwrap();
        file
    });
    eprintln!("an open file with one event: {bytes} bytes allocated");
    assert_eq!(file.rows(), 1);
    assert!(
        bytes <= OpenFile::OVERHEAD as u64 + 2 * events[0].approx_bytes() as u64,
        "an open file with one event allocated {bytes} bytes; the budget counts {} for it",
        file.memory()
    );
}
