//! The collector through faults of its lake (issue 22), with real processes: the release binary's
//! twin (`tributary serve`, debug), the lake on S3 (moto) behind a proxy the test cuts, and a
//! steady load from concurrent clients. The lake cut for five minutes, a small backlog budget,
//! a restart over a million events of backlog. (The full disk is in its own tests.)
//!
//! Each test prints its figures (`eprintln!`, shown with `--no-capture`) for the closing note.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::binary::{self, Server};
use crate::load::{self, Load, Reply, Spec};
use crate::observe::{eventually, BacklogSampler, Node};
use crate::proxy::Proxy;
use crate::python::{self, Moto};

const BUCKET: &str = "tributary-faults";

/// moto, and the cuttable proxy in front of it that the server talks to.
struct CutLake {
    moto: Moto,
    proxy: Proxy,
}

impl CutLake {
    async fn start() -> CutLake {
        let moto = Moto::start(BUCKET).await;
        let upstream: SocketAddr = moto
            .endpoint
            .trim_start_matches("http://")
            .parse()
            .expect("moto's address");
        let proxy = Proxy::start(upstream);
        CutLake { moto, proxy }
    }

    /// `tributary serve` over `data_dir` with its lake behind the proxy, and `env` on top.
    fn serve(&self, data_dir: &std::path::Path, env: &[(&str, &str)]) -> Server {
        let endpoint = self.proxy.endpoint();
        let mut all = python::s3_env(&endpoint, BUCKET);
        all.extend_from_slice(env);
        binary::start_with(data_dir, &all)
    }

    /// Waits until a first file is in the bucket (listed straight from moto).
    async fn first_file(&self, load: &Load) {
        let list = format!("{}/{BUCKET}?list-type=2&max-keys=1", self.moto.endpoint);
        eventually(
            "a first file in the lake",
            Duration::from_secs(30),
            Some(load),
            async || {
                let r = reqwest::get(&list).await.ok()?.text().await.ok()?;
                r.contains("<Key>").then_some(())
            },
        )
        .await;
    }

    /// Every row's messageId in the bucket, read by DuckDB straight from moto.
    fn message_ids(&self) -> python::S3Ids {
        python::read_s3_ids(&self.moto.endpoint, BUCKET)
    }
}

/// Waits for `n` answers to requests sent from now on; returns them.
async fn next_answers(load: &Load, n: usize, what: &str) -> Vec<Reply> {
    let from = Instant::now();
    let within = Duration::from_secs(30);
    eventually(what, within, Some(load), async || {
        let answers = load.replies_since(from);
        (answers.len() >= n).then_some(answers)
    })
    .await
    .0
}

/// moto behind the cuttable proxy, `tributary serve` over a fresh data dir with its lake
/// there, and an app's integration key.
struct Scene {
    lake: CutLake,
    tmp: tempfile::TempDir,
    server: Server,
    node: Node,
    key: String,
}

impl Scene {
    async fn start(app: &str, env: &[(&str, &str)]) -> Scene {
        let lake = CutLake::start().await;
        let tmp = tempfile::tempdir().unwrap();
        let server = lake.serve(tmp.path(), env);
        let node = Node::new(&server, tmp.path());
        let key = server.create_app(&node.http, app).await;
        Scene {
            lake,
            tmp,
            server,
            node,
            key,
        }
    }
}

const STEADY: Spec = Spec {
    prefix: "steady",
    clients: 2,
    events_per_batch: 10,
    every: Some(Duration::from_millis(250)),
    pad: 0,
};

#[tokio::test]
async fn the_lake_cut_for_five_minutes_under_steady_load() {
    const CUT: Duration = Duration::from_secs(300);
    let mut scene = Scene::start(
        "cut",
        &[
            ("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "100000"),
            ("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "1000"),
        ],
    )
    .await;
    let load = Load::start(&scene.node.base, &scene.key, STEADY);

    // Before: the lake takes the uploads and the service is ready.
    scene.lake.first_file(&load).await;
    scene
        .node
        .becomes_ready("/readyz says ok", Some(&load))
        .await;

    scene.lake.proxy.cut().await;
    let cut_at = Instant::now();
    let (_, to_report) = eventually(
        "/readyz reports the lake",
        Duration::from_secs(30),
        Some(&load),
        async || {
            let r = scene.node.health("/readyz").await;
            (r.status == 503 && r.has_problem("lake")).then_some(r)
        },
    )
    .await;
    let ready = scene.node.health("/readyz").await;
    assert!(
        ready.retry_after,
        "a 503 readiness carries Retry-After: {ready:?}"
    );
    let health = scene.node.health("/healthz").await;
    assert_eq!(health.status, 200, "the process serves: {health:?}");
    assert_eq!(health.says(), "degraded", "{health:?}");
    assert!(health.has_problem("lake"), "{health:?}");

    // The cut holds for five minutes; every second the load's answers are checked, and now and
    // then that the outage is still reported.
    let mut samples = 0;
    while cut_at.elapsed() < CUT {
        load.check();
        tokio::time::sleep(Duration::from_secs(1)).await;
        samples += 1;
        if samples % 15 == 0 {
            let r = scene.node.health("/readyz").await;
            assert!(
                r.status == 503 && r.has_problem("lake"),
                "{:?} into the cut: {r:?}",
                cut_at.elapsed()
            );
        }
    }
    let (m, _, disagree) = scene.node.against_the_disk().await;
    let backlog_at_restore = m.get("backlog_bytes");
    let outbox_at_restore = m.get("outbox_files");
    let failures = m.get("upload_failures_total");
    let oldest = m.get("oldest_unuploaded_age_seconds");
    assert!(
        backlog_at_restore > 0.0 && outbox_at_restore > 0.0,
        "the backlog grew during the cut"
    );
    assert!(failures > 0.0, "failed puts are counted");
    assert!(
        oldest >= CUT.as_secs_f64() * 0.9,
        "the oldest unuploaded file is about as old as the cut: {oldest} s"
    );
    let last_upload = m.get("last_upload_timestamp_seconds");

    scene.lake.proxy.restore().await;
    let restored = Instant::now();
    scene
        .node
        .uploads_resume(last_upload, Some(&load), Duration::from_secs(60))
        .await;
    let to_resume = restored.elapsed();
    scene
        .node
        .backlog_drains(1e6, Some(&load), Duration::from_secs(180))
        .await;
    let to_drain = restored.elapsed();
    scene
        .node
        .becomes_ready("/readyz says ok again", Some(&load))
        .await;
    // A little more of the steady load after the drain.
    next_answers(&load, 10, "ten answers after the drain").await;
    let outcome = load.stop().await;
    scene.server.terminate().await;

    let ids = scene.lake.message_ids();
    let rows = load::assert_every_acknowledged_event_once(&ids.ids, &[&outcome]);
    eprintln!(
        "lake cut {CUT:?} under steady load: {}; readiness reported the outage {to_report:?} after the cut; \
         at restore: backlog {backlog_at_restore} bytes in {outbox_at_restore} outbox files, {failures} failed puts, \
         oldest {oldest} s; uploads resumed {to_resume:?} after the restore, backlog drained {to_drain:?} after it; \
         lake: {rows} rows in {} files",
        outcome.figures(),
        ids.files
    );
    assert!(
        to_resume <= Duration::from_secs(5),
        "uploads resumed {to_resume:?} after the lake came back (want 5 s at most)"
    );
    assert!(
        disagree.is_empty(),
        "/metrics disagrees with the disk at the end of the cut: {disagree:?}"
    );
}

#[tokio::test]
async fn a_small_backlog_budget_answers_503_until_the_backlog_drains() {
    // Small files, so that the outbox fills in small steps under the cut.
    let mut scene = Scene::start(
        "budget",
        &[
            ("TRIBUTARY__COLLECTOR__MAX_BACKLOG_MB", "1"),
            ("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "50"),
            ("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "500"),
        ],
    )
    .await;
    // 200 events a second of about 400 bytes each: the budget lasts some seconds of the cut.
    let spec = Spec {
        prefix: "budget",
        clients: 2,
        events_per_batch: 20,
        every: Some(Duration::from_millis(200)),
        pad: 300,
    };
    let load = Load::start(&scene.node.base, &scene.key, spec);
    scene.lake.first_file(&load).await;
    let budget = scene.node.metrics().await.get("backlog_budget_bytes");
    assert!(
        (1e6..=f64::from(1 << 20)).contains(&budget),
        "collector.max_backlog_mb = 1 is a budget of 1 MB: {budget}"
    );
    let sampler = BacklogSampler::start(&scene.node);

    scene.lake.proxy.cut().await;
    let cut_at = Instant::now();
    let (first_503, to_full) = eventually(
        "a 503 once the budget is reached",
        Duration::from_secs(120),
        Some(&load),
        async || load.first_since(cut_at, 503),
    )
    .await;
    let during = load.replies_since(cut_at);
    let before_full = during.iter().filter(|r| r.sent < first_503.sent).count();
    assert!(
        before_full >= 3 && during.iter().all(|r| r.sent >= first_503.sent || r.status == 200),
        "the first requests of the cut are 200, until the budget is reached: {before_full} before the first 503"
    );
    // The backlog stood at the budget when the 503s began (sampled every 100 ms: a flush
    // that compresses the WAL into the outbox may lower it a little right after).
    let answered = first_503.sent + first_503.latency;
    let near = sampler.between(
        answered - Duration::from_secs(2),
        answered + Duration::from_secs(1),
    );
    let peak = near.iter().copied().fold(0.0, f64::max);
    assert!(
        peak >= 0.8 * budget,
        "the first 503 came with a backlog of {peak} bytes (budget {budget}): samples {near:?}"
    );
    // The 503s go on while the lake is away.
    eventually(
        "ten 503s",
        Duration::from_secs(60),
        Some(&load),
        async || (load.count_since(first_503.sent, 503) >= 10).then_some(()),
    )
    .await;

    scene.lake.proxy.restore().await;
    let restored = Instant::now();
    let ok_during_cut = load
        .replies_since(first_503.sent)
        .iter()
        .filter(|r| r.sent < restored && r.status == 200)
        .count();
    scene
        .node
        .backlog_drains(budget / 2.0, Some(&load), Duration::from_secs(120))
        .await;
    let to_drain = restored.elapsed();
    let (first_200, _) = eventually(
        "a 200 after the restore",
        Duration::from_secs(30),
        Some(&load),
        async || load.first_since(restored, 200),
    )
    .await;
    let after: Vec<u16> = next_answers(&load, 10, "ten answers after the drain")
        .await
        .iter()
        .map(|r| r.status)
        .collect();
    assert!(
        after.iter().all(|s| *s == 200),
        "200s once the backlog drained: {after:?}"
    );
    drop(sampler);
    let outcome = load.stop().await;
    scene.server.terminate().await;

    let ids = scene.lake.message_ids();
    let rows = load::assert_every_acknowledged_event_once(&ids.ids, &[&outcome]);
    eprintln!(
        "backlog budget {budget} bytes: {}; first 503 {to_full:?} into the cut after {before_full} requests (backlog \
         peak {peak} bytes), {ok_during_cut} x 200 during the cut after it; drained {to_drain:?} after the restore, \
         first 200 {:?} after it; lake: {rows} rows in {} files",
        outcome.figures(),
        first_200.sent + first_200.latency - restored,
        ids.files
    );
}

/// The allowance over `collector.max_memory_mb` + `storage.cache_mb` for what the budget does
/// not count (src/collector/budget.rs): the HTTP layer's buffers (two clients' 100 KB
/// batches here), the identity caches, the runtime and the binary itself.
const RSS_ALLOWANCE_MB: u64 = 64;

/// Polls `/healthz` until it answers 200.
async fn until_healthy(node: &Node) {
    eventually(
        "/healthz answers",
        Duration::from_secs(30),
        None,
        async || (node.health("/healthz").await.status == 200).then_some(()),
    )
    .await;
}

#[tokio::test]
async fn a_restart_with_a_million_events_of_backlog_listens_at_once() {
    const BACKLOG_EVENTS: usize = 1_000_000;
    const MAX_MEMORY_MB: u64 = 256;
    const CACHE_MB: u64 = 64;
    let (memory, cache) = (MAX_MEMORY_MB.to_string(), CACHE_MB.to_string());
    let env = [
        ("TRIBUTARY__COLLECTOR__MAX_MEMORY_MB", memory.as_str()),
        ("TRIBUTARY__STORAGE__CACHE_MB", cache.as_str()),
        ("TRIBUTARY__COLLECTOR__MAX_FILE_ROWS", "100000"),
        ("TRIBUTARY__COLLECTOR__MAX_FILE_AGE_MS", "5000"),
        // With the lake cut, a shutdown leaves the backlog on disk after a second of retries.
        ("TRIBUTARY__COLLECTOR__SHUTDOWN_UPLOAD_TIMEOUT_MS", "1000"),
    ];
    let bound = (MAX_MEMORY_MB + CACHE_MB + RSS_ALLOWANCE_MB) << 20;
    let Scene {
        mut lake,
        tmp,
        server: mut first,
        node: before,
        key,
    } = Scene::start("restart", &env).await;

    // A million events held while the lake is away, in large batches.
    lake.proxy.cut().await;
    let big = |prefix, every| Spec {
        prefix,
        clients: 2,
        events_per_batch: 500,
        every,
        // About the size of the tracker's events in the lake.
        pad: 100,
    };
    let filling = Instant::now();
    let load = Load::start(&first.base, &key, big("held", None));
    eventually(
        "a million events acknowledged",
        Duration::from_secs(900),
        Some(&load),
        async || (load.acked_events() >= BACKLOG_EVENTS).then_some(()),
    )
    .await;
    let held = load.stop().await;
    let fill_time = filling.elapsed();
    let backlog_before = before.metrics().await.get("backlog_bytes");
    let first_peak = before.peak_rss_bytes();
    let stopping = Instant::now();
    first.terminate().await;
    let stop_time = stopping.elapsed();

    // What a start costs on this machine right now (a debug build, other tests running): a
    // server on an empty data dir, timed the same way.
    let empty = tempfile::tempdir().unwrap();
    let starting = Instant::now();
    let mut fresh = lake.serve(empty.path(), &env);
    until_healthy(&Node::new(&fresh, empty.path())).await;
    let fresh_start = starting.elapsed();
    fresh.terminate().await;

    // The restart, the lake still cut: it listens at once and takes new batches.
    let starting = Instant::now();
    let mut second = lake.serve(tmp.path(), &env);
    let node = Node::new(&second, tmp.path());
    until_healthy(&node).await;
    let to_health = starting.elapsed();
    // Within 1 s; on a machine so loaded that an empty start is slow too, within half a second
    // of it: the backlog itself must not hold the start up.
    let allowed = Duration::from_secs(1).max(fresh_start + Duration::from_millis(500));
    assert!(
        to_health <= allowed,
        "/healthz answered {to_health:?} after the start (want {allowed:?}; an empty data dir \
         took {fresh_start:?}); log:\n{}",
        second.log_tail(20)
    );
    let load = Load::start(
        &node.base,
        &key,
        big("new", Some(Duration::from_millis(500))),
    );
    eventually(
        "new batches accepted over the backlog",
        Duration::from_secs(60),
        Some(&load),
        async || (load.acked_events() >= 20 * 500).then_some(()),
    )
    .await;
    // (A clean stop may have turned WAL segments into smaller Parquet files meanwhile.)
    let (m, disk, disagree) = node.against_the_disk().await;
    let backlog_restarted = m.get("backlog_bytes");
    assert!(
        backlog_restarted > 0.0,
        "the backlog is still there: {backlog_restarted} bytes, {backlog_before} before the restart"
    );

    lake.proxy.restore().await;
    let restored = Instant::now();
    node.backlog_drains(4e6, Some(&load), Duration::from_secs(600))
        .await;
    let to_drain = restored.elapsed();
    let fresh = load.stop().await;
    let peak = node.peak_rss_bytes();
    second.terminate().await;

    let ids = lake.message_ids();
    let rows = load::assert_every_acknowledged_event_once(&ids.ids, &[&held, &fresh]);
    let mib = |b: u64| b >> 20;
    eprintln!(
        "restart over a backlog of {} events: held in {fill_time:?} ({}), backlog {backlog_before} bytes, first \
         server's peak RSS {} MiB, SIGTERM took {stop_time:?}; restart: /healthz after {to_health:?} (an empty data dir: {fresh_start:?}), backlog \
         {backlog_restarted} bytes ({disk:?}), then {}; drained {to_drain:?} after the restore; peak RSS {} MiB (bound {} MiB = max_memory_mb {MAX_MEMORY_MB} + \
         cache_mb {CACHE_MB} + {RSS_ALLOWANCE_MB}); lake: {rows} rows in {} files",
        held.acked_events(),
        held.figures(),
        mib(first_peak),
        fresh.figures(),
        mib(peak),
        mib(bound),
        ids.files
    );
    assert!(
        peak <= bound,
        "the restarted server peaked at {} MiB, over the bound of {} MiB",
        mib(peak),
        mib(bound)
    );
    assert!(
        disagree.is_empty(),
        "/metrics disagrees with the disk after the restart: {disagree:?}"
    );
}
