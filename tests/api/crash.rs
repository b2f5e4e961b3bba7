//! The durability guarantee under `kill -9`: the real binary, a bounded load on 127.0.0.1,
//! SIGKILL at random moments, restarts, then a clean SIGTERM. Afterwards the lake holds every
//! event that got a 200 exactly once, and nothing that was never sent.

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::binary::{start, start_with, Rng};
use crate::collector::{batch, ANON};
use crate::helpers::anon;
use crate::lake;

fn events(batch_no: u64) -> Vec<Value> {
    (0..10)
        .map(|i| {
            json!({"type": "track", "event": "Load", "anonymousId": ANON, "messageId": format!("msg_{batch_no}_{i}"),
                   "timestamp": chrono::Utc::now().to_rfc3339(), "properties": {"batch": batch_no, "i": i}})
        })
        .collect()
}

#[tokio::test]
async fn kill_9_at_random_moments_loses_and_duplicates_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let client = reqwest::Client::builder()
        .pool_idle_timeout(crate::helpers::IDLE_CONNECTION)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();

    let mut server = start(tmp.path());
    let key = server.create_app(&client, "crash").await;

    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    let sent: Arc<Mutex<HashSet<String>>> = Arc::default();
    // Batches whose answer was lost: a real client sends them again.
    let unanswered: Arc<Mutex<Vec<u64>>> = Arc::default();
    let next_batch = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut replies: HashMap<u16, u64> = HashMap::new();

    for round in 0..4 {
        let stop_at = Instant::now() + Duration::from_millis(150 + rng.next(700));
        let mut workers = Vec::new();
        for _ in 0..4 {
            let (client, base, key) = (client.clone(), server.base.clone(), key.clone());
            let (acked, sent, unanswered, next_batch) = (
                acked.clone(),
                sent.clone(),
                unanswered.clone(),
                next_batch.clone(),
            );
            workers.push(tokio::spawn(async move {
                let mut statuses = Vec::new();
                while Instant::now() < stop_at + Duration::from_secs(2) {
                    let retry = unanswered.lock().unwrap().pop();
                    let b = retry.unwrap_or_else(|| {
                        next_batch.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    });
                    let evs = events(b);
                    let ids: Vec<String> = evs
                        .iter()
                        .map(|e| e["messageId"].as_str().unwrap().to_owned())
                        .collect();
                    sent.lock().unwrap().extend(ids.iter().cloned());
                    let res = client
                        .post(format!("{base}/api/w/analytics/collect"))
                        .header("x-app-key", &key)
                        .json(&batch(evs))
                        .send()
                        .await;
                    match res {
                        Ok(r) if r.status() == 200 => {
                            let body: Value = r.json().await.unwrap_or_default();
                            let total = body["data"]["accepted"].as_u64().unwrap_or(0)
                                + body["data"]["duplicates"].as_u64().unwrap_or(0);
                            assert_eq!(total, 10, "every event is accepted or a duplicate: {body}");
                            acked.lock().unwrap().extend(ids);
                            statuses.push(200);
                        }
                        Ok(r) => {
                            statuses.push(r.status().as_u16());
                            unanswered.lock().unwrap().push(b);
                        }
                        Err(_) => {
                            unanswered.lock().unwrap().push(b);
                            // The server is gone: stop this worker.
                            break;
                        }
                    }
                }
                statuses
            }));
        }
        tokio::time::sleep_until(stop_at.into()).await;
        server.child.kill().expect("SIGKILL");
        server.child.wait().unwrap();
        for w in workers {
            for s in w.await.unwrap() {
                *replies.entry(s).or_default() += 1;
            }
        }
        eprintln!(
            "round {round}: killed; {} events acknowledged so far",
            acked.lock().unwrap().len()
        );
        server = start(tmp.path());
    }
    // A last round of retries, then a clean shutdown.
    let retries: Vec<u64> = std::mem::take(&mut *unanswered.lock().unwrap());
    for b in retries {
        let r = client
            .post(format!("{}/api/w/analytics/collect", server.base))
            .header("x-app-key", &key)
            .json(&batch(events(b)))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        acked
            .lock()
            .unwrap()
            .extend((0..10).map(|i| format!("msg_{b}_{i}")));
    }
    let pid = server.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "no clean exit within 60 s of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status}");

    let view = lake::read_local(&tmp.path().join("lake"));
    let ids = view.message_ids();
    let unique: HashSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "{} duplicated rows in the lake",
        ids.len() - unique.len()
    );
    let acked = acked.lock().unwrap();
    let missing: Vec<_> = acked.difference(&unique).take(5).collect();
    assert!(
        missing.is_empty(),
        "acknowledged events missing from the lake (seed {seed}): {missing:?}"
    );
    let sent = sent.lock().unwrap();
    assert!(unique.is_subset(&sent), "the lake holds events nobody sent");
    assert!(
        acked.len() >= 100,
        "the load was too small to mean anything: {} acked",
        acked.len()
    );
    eprintln!(
        "crash test: {} acked, {} rows, replies {replies:?}",
        acked.len(),
        ids.len()
    );
}

/// Lowering `collector.shards` after a crash: the shard that is no longer configured still
/// replays its write-ahead log into the lake, and the remaining shard serves on.
#[tokio::test]
async fn a_lowered_shard_count_still_replays_every_shards_wal() {
    let tmp = tempfile::tempdir().unwrap();
    let client = crate::helpers::test_client();
    // Files never close on their own: every acknowledged event is in a WAL only.
    let mut server = start_with(
        tmp.path(),
        &[
            ("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "600000"),
            ("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "100000"),
        ],
    );
    let key = server.create_app(&client, "shards").await;
    let send = |base: String, from: usize| {
        let (client, key) = (client.clone(), key.clone());
        async move {
            // One visitor per event: both shards get some.
            let evs: Vec<Value> = (from..from + 20)
                .map(|i| {
                    json!({"type": "page", "anonymousId": anon(&format!("v{i}")),
                           "messageId": format!("msg_shard_{i}")})
                })
                .collect();
            let r = client
                .post(format!("{base}/api/w/analytics/collect"))
                .header("x-app-key", &key)
                .json(&batch(evs))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["data"]["accepted"], 20, "{body}");
        }
    };
    send(server.base.clone(), 0).await;
    let wal = |i: usize| tmp.path().join("wal").join(format!("shard-{i}"));
    assert!(wal(0).is_dir() && wal(1).is_dir());
    server.kill_9();

    let mut server = start_with(
        tmp.path(),
        &[
            ("TRIBUTARY__COLLECTOR__SHARDS", "1"),
            ("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "150"),
        ],
    );
    send(server.base.clone(), 20).await;
    let want: HashSet<String> = (0..40).map(|i| format!("msg_shard_{i}")).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ids: HashSet<String> = lake::read_local(&tmp.path().join("lake"))
            .message_ids()
            .into_iter()
            .collect();
        if ids == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lake holds {} of the 40 events; missing {:?}",
            ids.len(),
            want.difference(&ids).take(5).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.terminate().await;
    let ids = lake::read_local(&tmp.path().join("lake")).message_ids();
    assert_eq!(ids.len(), 40, "each event once");
}
