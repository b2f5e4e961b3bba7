//! Lake files sized at the source (`src/collector/merge.rs`), read back by DuckDB: a quiet app
//! gets at most one file per hour and shard, moved hour by hour on the server's clock; a busy
//! app's files reach `collector.lake_file_mb` except the last of each hour; a kill -9 in the
//! middle of an hour loses nothing and doubles nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tributary::clock::Clock;

use crate::binary::{self, Rng};
use crate::events::batch;
use crate::helpers::*;
use crate::load::post_until_taken;
use crate::python;

const HOUR_MICROS: i64 = 3_600_000_000;
const MINUTE_MICROS: i64 = 60_000_000;

/// An event of visitor `visitor` (two visitors per app land on both shards), with `pad`
/// characters of noise in its properties (so its bytes do not compress away).
fn event(id: &str, visitor: usize, pad: &str) -> Value {
    json!({
        "type": "track",
        "event": "Tick",
        "anonymousId": format!("00000000-0000-4000-8000-{visitor:012}"),
        "messageId": id,
        "properties": {"pad": pad},
    })
}

/// The lake's files per `(dt/hour, shard)`, with their sizes, oldest flush first.
fn files_by_hour_and_shard(lake: &Path) -> BTreeMap<(String, String), Vec<(String, u64)>> {
    let mut out: BTreeMap<(String, String), Vec<(String, u64)>> = BTreeMap::new();
    for f in python::read_local(lake).files {
        let (dir, name) = f.rsplit_once('/').unwrap();
        // part-<node>-<shard>-<lsn>.parquet
        let mut fields = name.trim_end_matches(".parquet").rsplit('-');
        let _lsn = fields.next().unwrap();
        let shard = fields.next().unwrap().to_owned();
        let hour = dir.split_once("/dt=").unwrap().1.to_owned();
        let bytes = std::fs::metadata(lake.join(&f)).unwrap().len();
        out.entry((hour, shard))
            .or_default()
            .push((name.to_owned(), bytes));
    }
    out
}

/// The files the shards keep on disk waiting to be merged.
fn parked_parts(data_dir: &Path) -> usize {
    crate::observe::parquet_files(&data_dir.join("wal"))
        .iter()
        .filter(|p| p.to_str().unwrap().contains("/parts/"))
        .count()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_exactly(lake: &Path, sent: &BTreeSet<String>) {
    let view = python::read_local(lake);
    let ids = view.message_ids();
    assert_eq!(ids.len(), sent.len(), "no row lost or doubled");
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), *sent);
}

#[tokio::test]
async fn a_quiet_app_gets_one_file_per_hour_and_shard() {
    let app = spawn_app_with(|s| s.collector.lake_file_max_wait_ms = 0);
    let (_, ik) = app.create_app("enterprise").await;
    let lake = app.data_dir.join("lake");
    // The clock is set to exact minutes from the start of the next hour (a test's clock
    // otherwise carries the real time it took into every hour's end).
    let now = app.clock.now_micros();
    let start = now - now.rem_euclid(HOUR_MICROS) + HOUR_MICROS;
    let set = |at: i64| app.clock.advance(at - app.clock.now_micros());
    let mut sent = BTreeSet::new();
    // Three hours of one event a second: a batch of 60 per minute, the clock a minute on
    // before each (so the shards flush a part every minute: 60 parts per hour and shard).
    for minute in 1..180 {
        let at = start + minute * MINUTE_MICROS;
        set(at);
        if at.rem_euclid(HOUR_MICROS) == 0 {
            // An hour is over: its files appear seconds later.
            wait_until("the hour just over in the lake", || {
                python::read_local(&lake).rows.len() == sent.len()
            });
        }
        let events: Vec<Value> = (0..60)
            .map(|i| {
                let id = format!("q{minute}_{i}");
                sent.insert(id.clone());
                event(&id, i % 2, "")
            })
            .collect();
        let a = app.collect(&ik, batch(events)).await;
        assert_eq!(a.status, 200, "{}", a.body);
        if minute == 30 {
            wait_until("parts parked on the shards' disk", || {
                parked_parts(&app.data_dir) > 0
            });
            assert!(
                files_by_hour_and_shard(&lake).is_empty(),
                "nothing in the lake before its hour is over"
            );
        }
    }
    set(start + 3 * HOUR_MICROS);
    wait_until("three hours in the lake", || {
        python::read_local(&lake).rows.len() == sent.len()
    });
    let files = files_by_hour_and_shard(&lake);
    let hours: BTreeSet<&String> = files.keys().map(|(h, _)| h).collect();
    assert_eq!(hours.len(), 3, "{files:?}");
    for ((hour, shard), list) in &files {
        assert_eq!(list.len(), 1, "hour {hour}, shard {shard}: {list:?}");
    }
    assert_exactly(&lake, &sent);
    assert_eq!(parked_parts(&app.data_dir), 0);
}

#[tokio::test]
async fn a_busy_app_gets_files_of_lake_file_mb_but_the_last_of_each_hour() {
    let app = spawn_app_with(|s| {
        s.collector.lake_file_max_wait_ms = 0;
        s.collector.lake_file_mb = 1;
        s.collector.max_file_rows = 4_000;
    });
    let (_, ik) = app.create_app("enterprise").await;
    let lake = app.data_dir.join("lake");
    let mut rng = Rng(0x5eed_0001);
    let mut sent = BTreeSet::new();
    // 48 000 events of ~120 bytes of noise: 5-6 MB of Parquet over two shards.
    for b in 0..96 {
        let events: Vec<Value> = (0..500)
            .map(|i| {
                let id = format!("b{b}_{i}");
                sent.insert(id.clone());
                let pad: String = (0..120)
                    .map(|_| char::from(b'a' + rng.next(26) as u8))
                    .collect();
                event(&id, i % 2, &pad)
            })
            .collect();
        let a = app.collect(&ik, batch(events)).await;
        assert_eq!(a.status, 200, "{}", a.body);
    }
    app.clock.advance(HOUR_MICROS);
    wait_until("every event in the lake", || {
        python::read_local(&lake).rows.len() == sent.len()
    });
    let files = files_by_hour_and_shard(&lake);
    let mut big = 0;
    for ((hour, shard), list) in &files {
        // The last of the hour (the newest flush) may be smaller; every other one is full.
        for (name, bytes) in &list[..list.len() - 1] {
            assert!(
                *bytes >= 1 << 20,
                "{hour} shard {shard}: {name} has {bytes} bytes"
            );
            big += 1;
        }
    }
    assert!(big >= 2, "files of lake_file_mb were written: {files:?}");
    assert_exactly(&lake, &sent);
}

#[tokio::test]
async fn a_kill_9_in_the_middle_of_an_hour_loses_nothing_and_doubles_nothing() {
    let data = tempfile::tempdir().unwrap();
    let hourly = [("TRIBUTARY__COLLECTOR__LAKE_FILE_MAX_WAIT_MS", "0")];
    let client = crate::helpers::test_client();
    let mut server = binary::start_with(data.path(), &hourly);
    let ik = server.create_app(&client, "hours").await;
    let mut sent = BTreeSet::new();
    // The test servers flush every 60 rows a shard: a stager slowed by a busy disk answers
    // 503 + Retry-After (back-pressure), which a client sends again.
    for b in 0..10 {
        let events: Vec<Value> = (0..50)
            .map(|i| {
                let id = format!("k{b}_{i}");
                sent.insert(id.clone());
                event(&id, i % 2, "")
            })
            .collect();
        post_until_taken(&client, &server.base, &ik, events).await;
    }
    wait_until("parts parked on the shards' disk", || {
        parked_parts(data.path()) >= 2
    });
    server.kill_9();
    let mut server = binary::start_with(data.path(), &hourly);
    let events: Vec<Value> = (0..50)
        .map(|i| {
            let id = format!("after_{i}");
            sent.insert(id.clone());
            event(&id, i % 2, "")
        })
        .collect();
    post_until_taken(&client, &server.base, &ik, events).await;
    // A stop merges every part at once.
    server.terminate().await;
    let lake = data.path().join("lake");
    assert_exactly(&lake, &sent);
    for ((hour, shard), list) in files_by_hour_and_shard(&lake) {
        assert_eq!(list.len(), 1, "hour {hour}, shard {shard}: {list:?}");
    }
}
