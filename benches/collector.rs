//! The collector's hot path, stage by stage.
//!
//! `cargo bench --bench collector`
//!
//! - `parse/*`: a 10-event tracker batch (5 182 bytes, printed when it runs). `simd_decode` is
//!   what the endpoint does (a padded copy, simd-json's tape in place, validation and
//!   enrichment into `Event`s); `simd_parse` is the simd-json parse alone (copy and tape);
//!   `serde_json_value` parses the same bytes into a `serde_json::Value` as a reference (the
//!   crate builds serde_json with `preserve_order`, so objects are IndexMaps);
//! - `agent/*`: the user agent of one event judged (`collector/agent.rs`): `woothee_parse`
//!   uncached (a new agent), `cached` (the per-thread cache's hit), and `enrich_batch_10` (the
//!   edge's step over a decoded 10-event batch, one agent);
//! - `records/*`: a decoded 10-event batch into its WAL form at the edge (`encode_10`: one
//!   buffer, `Records`), and read back as borrowed events in the writer (`read_10`);
//! - `arrow/append_1000`: 1000 events into the column builders (column by column, as the
//!   writer appends a group's run), then `finish()`;
//! - `parquet/encode_10000`: one 10 000-row batch to Parquet (zstd 3);
//! - `submit/batch_10`: `Collector::submit` of 10 new events through one shard writer, which
//!   answers after the WAL append + fsync (so milliseconds, and mostly the disk).
//!
//! The benches run on the server's allocator (mimalloc), configured as the server configures it
//! (`memory::configure_allocator`: glibc's arenas keep zstd's contexts), as the figures are meant
//! to be its own.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use serde_json::{json, Value};
use tributary::collector::agent;
use tributary::collector::columns::{encode_parquet, RowBuilder};
use tributary::collector::decode::{self, Enrichment};
use tributary::collector::rollup::top::{self, Top};
use tributary::collector::{Collector, Event, Record, Records};
use tributary::config::Settings;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ANON: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f";
const LIMITS: decode::Limits = decode::Limits {
    max_events: 2000,
    max_event_bytes: 32 * 1024,
    max_batch_bytes: 500 * 1024,
};

/// One event as the browser tracker sends it (the shape of `tests/api/collector.rs::track`).
fn track(i: usize) -> Value {
    let (event, path, title) = [
        ("Signed Up", "/pricing", "Pricing"),
        ("Plan Selected", "/checkout", "Checkout"),
        ("Button Clicked", "/features", "Features"),
    ][i % 3];
    json!({
        "type": "track",
        "event": event,
        "anonymousId": ANON,
        "messageId": format!("msg_bench_{i:04}"),
        "sessionId": "ses_1",
        "timestamp": "2026-03-02T10:15:30.123Z",
        "properties": {"plan": "pro", "seats": 3, "nested": {"a": [1, 2]}},
        "context": {
            "page": {"url": format!("https://shop.example{path}?x=1"), "path": path, "title": title, "referrer": ""},
            "device": {"type": "desktop"}, "locale": "en-US", "timezone": "Europe/Paris",
            "screen": {"width": 1440, "height": 900}, "library": {"name": "tributary.js", "version": "1.0.0"}
        }
    })
}

/// The body of a 10-event batch, as bytes on the wire.
fn batch_body() -> Vec<u8> {
    let events: Vec<Value> = (0..10).map(track).collect();
    serde_json::to_vec(&json!({"batch": events, "sentAt": "2026-03-02T10:15:31.000Z"}))
        .expect("serializes")
}

fn enrichment() -> Enrichment {
    Enrichment {
        app_id: "65f0c0ffee0000000000beef".into(),
        received_at: chrono::Utc::now().timestamp_micros(),
        ip: Some("203.0.113.7".into()),
        user_agent: Some(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
             Chrome/124.0 Safari/537.36"
                .into(),
        ),
        ..Enrichment::default()
    }
}

/// The decoded events of one batch.
fn sample_events() -> Vec<Event<'static>> {
    let d = decode::decode_owned(&batch_body(), &enrichment(), LIMITS).expect("a valid body");
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    assert_eq!(d.events.len(), 10);
    d.events
}

/// `n` events, each with its own messageId and time, ten per visitor (anonymousId): unique
/// columns compress as little as they do in a real lake.
fn many_events(n: usize) -> Vec<Event<'static>> {
    let base = sample_events();
    (0..n)
        .map(|i| {
            let mut e = base[i % base.len()].clone();
            e.message_id = format!("msg_row_{i:08}").into();
            e.anonymous_id = Some(format!("6f1c2d3e-4b5a-4c6d-8e7f-{:012x}", i / 10).into());
            e.timestamp += i as i64 * 1_237;
            e
        })
        .collect()
}

fn parse(c: &mut Criterion) {
    let body = batch_body();
    let enrich = enrichment();
    eprintln!("parse: batch body is {} bytes, 10 events", body.len());
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("simd_decode", |b| {
        let mut scratch = decode::Scratch::default();
        b.iter(|| {
            let d = decode::decode(black_box(&body), &mut scratch, &enrich, LIMITS)
                .expect("a valid body");
            black_box(d.events.len())
        })
    });
    g.bench_function("simd_parse", |b| {
        b.iter(|| black_box(decode::count_events(black_box(&body)).expect("a valid body")))
    });
    g.bench_function("serde_json_value", |b| {
        b.iter(|| {
            let v: Value = serde_json::from_slice(black_box(&body)).expect("a valid body");
            black_box(v)
        })
    });
    g.finish();
}

fn arrow(c: &mut Criterion) {
    let events = many_events(1000);
    let mut g = c.benchmark_group("arrow");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("append_1000", |b| {
        let refs: Vec<&Event> = events.iter().collect();
        b.iter(|| {
            let mut rows = RowBuilder::default();
            rows.append_all(&refs);
            black_box(rows.finish())
        })
    });
    g.finish();
}

fn records(c: &mut Criterion) {
    let events = sample_events();
    let encoded = Records::of(&events);
    let mut g = c.benchmark_group("records");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("encode_10", |b| {
        b.iter(|| black_box(Records::of(black_box(&events)).len()))
    });
    g.bench_function("read_10", |b| {
        b.iter(|| {
            let read = encoded.records().filter_map(Record::decode);
            black_box(read.map(|e| e.message_id.len()).sum::<usize>())
        })
    });
    g.finish();
}

fn parquet(c: &mut Criterion) {
    let mut rows = RowBuilder::default();
    for e in &many_events(10_000) {
        rows.append(e);
    }
    let batch = rows.finish();
    let size = encode_parquet(&batch).expect("encodes").len();
    eprintln!("parquet: 10000 rows -> {size} bytes");
    let mut g = c.benchmark_group("parquet");
    g.sample_size(20);
    // Throughput in the tracker's JSON bytes of these rows: comparable with the parse figures.
    let json_per_event = batch_body().len() as u64 / 10;
    g.throughput(Throughput::Bytes(json_per_event * batch.num_rows() as u64));
    g.bench_function("encode_10000", |b| {
        b.iter(|| black_box(encode_parquet(&batch).expect("encodes")))
    });
    g.finish();
}

fn submit(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = Settings::load(None).expect("default settings");
    settings.storage.data_dir = dir.path().to_path_buf();
    settings.lake.kind = tributary::config::LakeKind::Local;
    settings.lake.path = String::new();
    settings.collector.shards = 1;
    let db = tributary::storage::Db::open(&dir.path().join("db"), 1 << 30).expect("open sled");
    let lake = tributary::collector::lake::open(&settings.lake, &dir.path().join("lake"))
        .expect("lake opens");
    let clock = std::sync::Arc::new(tributary::clock::SystemClock);
    let gate = std::sync::Arc::new(tributary::collector::gate::AdmitAll);
    let collector = Collector::start(&settings, &db, lake, clock, gate).expect("collector starts");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let template = sample_events();
    let next = AtomicU64::new(0);

    let mut g = c.benchmark_group("submit");
    g.throughput(Throughput::Elements(template.len() as u64));
    g.bench_function("batch_10", |b| {
        b.iter_batched(
            || {
                // New messageIds each time: a repeated one is a duplicate and skips the WAL.
                let n = next.fetch_add(1, Ordering::Relaxed);
                let now = chrono::Utc::now().timestamp_micros();
                template
                    .iter()
                    .enumerate()
                    .map(|(i, e)| Event {
                        message_id: format!("msg_sub_{n}_{i}").into(),
                        received_at: now,
                        ..e.clone()
                    })
                    .collect::<Vec<_>>()
            },
            |events| {
                let done = rt.block_on(collector.submit(events)).expect("committed");
                assert_eq!(done.accepted, 10);
                black_box(done)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
    collector.shutdown();
    let text = collector.metrics();
    let sum = |name: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("tributary_collector_{name}{{")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    eprintln!(
        "submit: {} events accepted, {} WAL fsyncs (mean {:.0} µs), {} Parquet files",
        sum("accepted_total"),
        sum("wal_fsync_seconds_count"),
        sum("wal_fsync_seconds_sum") * 1e6 / sum("wal_fsync_seconds_count").max(1.0),
        sum("files_written_total"),
    );
}

const AGENTS: [&str; 4] = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
];

fn agents(c: &mut Criterion) {
    let mut g = c.benchmark_group("agent");
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("woothee_parse", |b| {
        b.iter(|| {
            i += 1;
            black_box(agent::judge(black_box(AGENTS[i % AGENTS.len()])))
        })
    });
    g.bench_function("cached", |b| {
        b.iter(|| {
            i += 1;
            black_box(agent::judged(black_box(AGENTS[i % AGENTS.len()])))
        })
    });
    g.throughput(Throughput::Elements(10));
    let events = sample_events();
    g.bench_function("enrich_batch_10", |b| {
        b.iter_batched(
            || events.clone(),
            |events| {
                let verdicts = agent::judge_all(&events);
                let mut events: Vec<Event<'_>> = events;
                verdicts.fill(&mut events);
                black_box(events.len())
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// The top-pages table (`rollup/top.rs`) of a site with more distinct paths than it keeps: a
/// path not yet counted takes the place of the smallest count, a counted one adds to its own.
fn tops(c: &mut Criterion) {
    let mut g = c.benchmark_group("rollup");
    g.throughput(Throughput::Elements(1));
    let paths: Vec<String> = (0..100_000).map(|i| format!("/products/{i}")).collect();
    let mut full = Top::default();
    for p in &paths[..top::CAP] {
        full.add(p, 1);
    }
    let mut i = 0;
    g.bench_function("top_new_name_full_table", |b| {
        b.iter(|| {
            i = (i + 1) % paths.len();
            full.add(black_box(&paths[i]), 1)
        })
    });
    g.bench_function("top_counted_name", |b| {
        b.iter(|| full.add(black_box("/home"), 1))
    });
    g.finish();
}

criterion_group!(benches, parse, agents, records, arrow, parquet, submit, tops);

/// `criterion_main!`, with the allocators configured first as the server's `main` does.
fn main() {
    tributary::memory::configure_allocator();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
