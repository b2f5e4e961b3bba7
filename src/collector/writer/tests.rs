//! The shard writer's tests: commits, replay, flushes by rows, age and hour, the gate.
use super::*;
use crate::clock::ManualClock;
use crossbeam_channel::bounded;

const T0: i64 = 1_790_000_000_000_000;

struct Fixture {
    _dir: tempfile::TempDir,
    cfg: WriterConfig,
    db: Db,
    clock: Arc<ManualClock>,
    gates: Arc<Gates>,
}

/// Apps being deleted and erased persons, as the server's gatekeeper reads them.
#[derive(Default)]
struct Gates {
    closed: std::sync::Mutex<Vec<String>>,
    erased: crate::tenants::Suppressions,
}

impl Gatekeeper for Gates {
    fn gate(&self, app: &str) -> AppGate {
        if self.closed.lock().unwrap().iter().any(|a| a == app) {
            return AppGate::Closed;
        }
        self.erased
            .of(app)
            .map_or(AppGate::Open, AppGate::Suppressing)
    }
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        index: 0,
        node_id: "n0".into(),
        dir: dir.path().join("shard-0"),
        prefix: String::new(),
        max_rows: 1000,
        max_bytes: 1 << 30,
        max_age: Duration::from_secs(60),
        max_memory: 1 << 30,
        dedupe_filter_bytes: 64 * 1024,
        count_bots: false,
        uplink: None,
    };
    let db = Db::temporary();
    Fixture {
        _dir: dir,
        cfg,
        db,
        clock: Arc::new(ManualClock::at(T0)),
        gates: Arc::default(),
    }
}

impl Fixture {
    fn open(&self) -> (Writer, Vec<wal::Record>, Receiver<Flush>) {
        let (tx, rx) = bounded(8);
        let index = dedupe::Index::open(&self.cfg.dir, self.clock.now_micros()).unwrap();
        let (w, records) = Writer::open(Parts {
            cfg: self.cfg.clone(),
            db: self.db.clone(),
            clock: self.clock.clone(),
            counters: Arc::default(),
            stager: tx,
            health: Arc::new(Health::new(u64::MAX, &self.cfg.dir, 1)),
            index,
            rollups: Arc::new(rollup::live::Live::new(1)),
            handed: Arc::default(),
            gate: self.gates.clone(),
        })
        .unwrap();
        (w, records, rx)
    }
}

/// A closed file's rows, read back from its Parquet bytes.
fn read(f: &Encoded) -> arrow_array::RecordBatch {
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f.bytes.clone())
            .unwrap()
            .build()
            .unwrap();
    let mut batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
    assert_eq!(batches.len(), 1, "one row group in these small files");
    batches.remove(0)
}

fn ev(id: &str, anon: &str) -> Event<'static> {
    Event::example("app", id, anon, T0)
}

/// `msg_1`: visitor `a` identified as `u1`.
fn identify_a_as_u1() -> Event<'static> {
    Event {
        kind: EventType::Identify,
        user_id: Some("u1".into()),
        ..ev("msg_1", "a")
    }
}

/// Commits one batch the way the run loop does and returns the answer.
fn commit(w: &mut Writer, events: Vec<Event>) -> Result<Committed, WriteError> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    w.commit(vec![(Records::of(&events), reply)]);
    answer.blocking_recv().unwrap()
}

#[test]
fn acknowledged_events_are_in_the_wal_and_replayed_after_a_crash() {
    let f = fixture();
    let (mut w, records, _uploads) = f.open();
    assert!(records.is_empty());
    let done = commit(
        &mut w,
        vec![ev("msg_1", "a"), ev("msg_2", "b"), ev("msg_1", "a")],
    );
    assert_eq!(
        done.unwrap(),
        Committed {
            accepted: 2,
            duplicates: 1
        }
    );
    let again = commit(&mut w, vec![ev("msg_2", "b")]);
    assert_eq!(
        again.unwrap(),
        Committed {
            accepted: 0,
            duplicates: 1
        }
    );
    drop(w); // a crash: nothing flushed
    let (mut w, records, uploads) = f.open();
    let ids: Vec<_> = records
        .iter()
        .map(|r| Event::decode_wal(&r.payload).unwrap().message_id)
        .collect();
    assert_eq!(ids, ["msg_1", "msg_2"]);
    w.replay(records).unwrap();
    let job = uploads
        .try_recv()
        .expect("the replay is handed to the uploader");
    assert_eq!(job.last_lsn, 2);
    assert_eq!(job.files.iter().map(|f| f.rows).sum::<usize>(), 2);
    assert_eq!(job.ids.len(), 2);
}

#[test]
fn identify_fills_later_events_of_the_visitor_in_the_same_group_and_after() {
    let f = fixture();
    let (mut w, _, uploads) = f.open();
    let identify = identify_a_as_u1();
    commit(&mut w, vec![identify, ev("msg_2", "a")]).unwrap();
    commit(&mut w, vec![ev("msg_3", "a"), ev("msg_4", "other")]).unwrap();
    w.flush(true).unwrap();
    let job = uploads.try_recv().unwrap();
    let batch = read(&job.files[0]);
    let users = batch
        .column(batch.schema().index_of("user_id").unwrap())
        .clone();
    let users = arrow_array::cast::AsArray::as_string::<i32>(&users);
    use arrow_array::Array;
    let got: Vec<_> = (0..4)
        .map(|i| users.is_valid(i).then(|| users.value(i)))
        .collect();
    assert_eq!(got, [Some("u1"), Some("u1"), Some("u1"), None]);
    let profile = profiles::store::get(&f.db.get().unwrap(), "app", "u1")
        .unwrap()
        .unwrap();
    assert_eq!(profile.anonymous_ids, ["a"]);
}

#[test]
fn an_edge_writer_pushes_the_profile_changes_and_still_applies_them() {
    use crate::storage::queue::UPLINK;
    let mut f = fixture();
    f.cfg.uplink = Some(UPLINK);
    let (mut w, _, _) = f.open();
    commit(&mut w, vec![identify_a_as_u1(), ev("msg_2", "a")]).unwrap();
    let db = f.db.get().unwrap();
    let items = UPLINK.peek(&db, 10, 1 << 20).unwrap();
    // The identify changes the profile; the page view a second later does not.
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].kind, profiles::model::UPLINK_KIND);
    let touch: profiles::OwnedTouch = serde_json::from_slice(&items[0].payload).unwrap();
    assert_eq!(
        (touch.app_id.as_str(), touch.user_id.as_str()),
        ("app", "u1")
    );
    let local = profiles::store::get(&db, "app", "u1").unwrap().unwrap();
    assert_eq!(local.anonymous_ids, ["a"], "the edge's own profile too");
}

/// Sends a batch to a running writer and waits for its answer.
fn write(tx: &crossbeam_channel::Sender<Msg>, events: Vec<Event>) -> Committed {
    let (reply, answer) = tokio::sync::oneshot::channel();
    tx.send(Msg::Write {
        events: Records::of(&events),
        reply,
        held: Default::default(),
    })
    .unwrap();
    answer.blocking_recv().unwrap().unwrap()
}

#[test]
fn events_of_an_erased_person_or_a_deleted_app_that_passed_the_edge_are_dropped_at_commit() {
    let f = fixture();
    let sled = sled::Config::new().temporary(true).open().unwrap();
    use crate::tenants::suppression::IdKind;
    f.gates
        .erased
        .add(&sled, "app", &[(IdKind::Anonymous, "gone")], None, "ers_1")
        .unwrap();
    let (w, _, uploads) = f.open();
    let refused = w.counters.refused_at_commit.clone();
    let (tx, rx) = bounded(8);
    let thread = std::thread::spawn(move || w.run(rx));
    let erased = Event {
        user_id: Some("u9".into()),
        ..ev("msg_2", "gone")
    };
    let done = write(&tx, vec![ev("msg_1", "a"), erased, ev("msg_3", "b")]);
    assert_eq!(done.accepted, 2);
    f.gates.closed.lock().unwrap().push("app".into());
    let done = write(&tx, vec![ev("msg_4", "a")]);
    assert_eq!(done.accepted, 0, "the app is being deleted");
    assert_eq!(refused.get(), 2);
    tx.send(Msg::Stop).unwrap();
    thread.join().unwrap();
    let job = uploads.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(job.files.iter().map(|f| f.rows).sum::<usize>(), 2);
}

#[test]
fn files_close_by_age_on_the_clock_and_by_rows() {
    let mut f = fixture();
    f.cfg.max_rows = 3;
    let (w, _, uploads) = f.open();
    let (tx, rx) = bounded(8);
    let thread = std::thread::spawn(move || w.run(rx));
    let send = |events: Vec<Event>| write(&tx, events);
    send(vec![ev("msg_1", "a")]);
    // Nothing closes while the clock stands still...
    assert!(uploads.recv_timeout(TICK * 2).is_err());
    // ...and the file closes once the clock passes max_age.
    f.clock.advance(61_000_000);
    let job = uploads
        .recv_timeout(Duration::from_secs(10))
        .expect("aged file flushed");
    assert_eq!(job.files[0].rows, 1);
    send(vec![ev("msg_2", "a"), ev("msg_3", "b"), ev("msg_4", "c")]);
    let job = uploads
        .recv_timeout(Duration::from_secs(10))
        .expect("full file flushed");
    assert_eq!(job.files.iter().map(|f| f.rows).sum::<usize>(), 3);
    tx.send(Msg::Stop).unwrap();
    thread.join().unwrap();
}

#[test]
fn many_quiet_apps_reach_the_memory_budget_with_their_open_files_and_are_flushed() {
    // An edge keeps a file open per app and hour: a thousand apps of one event each must
    // weigh on the budget what their files hold, not only their events' bytes.
    let mut f = fixture();
    f.cfg.max_memory = 40 * OpenFile::OVERHEAD;
    let (w, _, uploads) = f.open();
    let (tx, rx) = bounded(8);
    let thread = std::thread::spawn(move || w.run(rx));
    let one = |i: usize| {
        let (app, id) = (format!("app{i}"), format!("msg_{i}"));
        vec![Event::example(&app, &id, "a", T0)]
    };
    for i in 0..30 {
        write(&tx, one(i));
    }
    // Far from max_rows, the clock standing still: nothing closes yet...
    assert!(uploads.recv_timeout(TICK * 2).is_err());
    // ...until the open files' count passes the budget.
    for i in 30..40 {
        write(&tx, one(i));
    }
    let job = uploads
        .recv_timeout(Duration::from_secs(10))
        .expect("files flushed on the memory budget");
    assert_eq!(job.files.len(), 40, "every app's file");
    assert!(job.files.iter().all(|f| f.rows == 1));
    tx.send(Msg::Stop).unwrap();
    thread.join().unwrap();
}

#[test]
fn files_close_when_their_hour_is_over_or_a_settle_asks() {
    let mut f = fixture();
    f.cfg.max_age = Duration::from_secs(7200);
    let (w, _, uploads) = f.open();
    let (tx, rx) = bounded(8);
    let thread = std::thread::spawn(move || w.run(rx));
    let send = |events: Vec<Event>| write(&tx, events);
    send(vec![ev("msg_1", "a"), ev("msg_2", "b")]);
    // A settle's flush: answered with the last committed LSN, the files handed over.
    let (reply, answer) = tokio::sync::oneshot::channel();
    tx.send(Msg::Flush { reply }).unwrap();
    assert_eq!(answer.blocking_recv().unwrap(), 2);
    let job = uploads.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!((job.last_lsn, job.files[0].rows), (2, 2));
    send(vec![ev("msg_3", "a")]);
    // Nothing closes within the hour (max_age is two hours)...
    let to_hour_end = HOUR_MICROS - T0.rem_euclid(HOUR_MICROS);
    f.clock.advance(to_hour_end - 1);
    assert!(uploads.recv_timeout(TICK * 2).is_err());
    // ...and the file closes once its hour is over.
    f.clock.advance(1);
    let job = uploads
        .recv_timeout(Duration::from_secs(10))
        .expect("the hour's file flushed");
    assert_eq!((job.last_lsn, job.files[0].rows), (3, 1));
    tx.send(Msg::Stop).unwrap();
    thread.join().unwrap();
}

#[test]
fn a_failed_wal_rotation_is_retried_on_the_clock_and_loses_nothing() {
    let f = fixture();
    let (w, _, uploads) = f.open();
    let failures = w.counters.flush_failures.clone();
    let (tx, rx) = bounded(8);
    let thread = std::thread::spawn(move || w.run(rx));
    let (reply, answer) = tokio::sync::oneshot::channel();
    tx.send(Msg::Write {
        events: Records::of(&[ev("msg_1", "a")]),
        reply,
        held: Default::default(),
    })
    .unwrap();
    answer.blocking_recv().unwrap().unwrap();
    // The next segment's name is taken by a directory: rotating the WAL fails.
    let blocker = f.cfg.dir.join("wal-00000000000000000002.log");
    std::fs::create_dir(&blocker).unwrap();
    f.clock.advance(61_000_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    while failures.get() == 0 {
        assert!(Instant::now() < deadline, "no flush was tried");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(uploads.try_recv().is_err(), "nothing flushed");
    // Once the disk is fine again, the next try (a second later on the clock) flushes.
    std::fs::remove_dir(&blocker).unwrap();
    assert!(
        uploads.recv_timeout(TICK * 2).is_err(),
        "no retry before its time"
    );
    f.clock.advance(FLUSH_RETRY.as_micros() as i64);
    let job = uploads
        .recv_timeout(Duration::from_secs(30))
        .expect("flushed after the retry");
    assert_eq!(failures.get(), 1, "one failure, then a success");
    assert_eq!((job.last_lsn, job.files[0].rows), (1, 1));
    tx.send(Msg::Stop).unwrap();
    thread.join().unwrap();
}

#[test]
fn a_replay_after_the_rollups_were_applied_counts_each_row_once_at_any_flush_boundaries() {
    let mut f = fixture();
    f.cfg.max_rows = 4;
    let evs = |r: std::ops::Range<usize>| -> Vec<Event> {
        r.map(|i| ev(&format!("msg_{i}"), &format!("v{i}")))
            .collect()
    };
    let (mut w, _, uploads) = f.open();
    commit(&mut w, evs(0..6)).unwrap();
    w.flush(true).unwrap();
    let first = uploads.try_recv().unwrap();
    assert_eq!((first.last_lsn, first.rollup.rows()), (6, 6));
    assert!(rollup::store::apply(&f.db.get().unwrap(), 0, first.last_lsn, &first.rollup).unwrap());
    commit(&mut w, evs(6..10)).unwrap();
    drop(w); // a crash after the rollups were applied, before the checkpoint
    let (mut w, records, uploads) = f.open();
    assert_eq!(records.len(), 10);
    w.replay(records).unwrap();
    let mut jobs = Vec::new();
    while let Ok(job) = uploads.try_recv() {
        rollup::store::apply(&f.db.get().unwrap(), 0, job.last_lsn, &job.rollup).unwrap();
        jobs.push((job.last_lsn, job.rollup.rows()));
    }
    assert_eq!(
        jobs,
        [(4, 0), (8, 2), (10, 2)],
        "other boundaries than the first time"
    );
    let hour = T0.div_euclid(rollup::HOUR_MICROS);
    let got = rollup::store::read(
        &f.db.get().unwrap(),
        "app",
        rollup::store::Unit::Hour,
        hour,
        hour + 1,
    );
    let bucket = &got.unwrap()[0].1;
    assert_eq!(bucket.events(), 10, "every row once");
    assert_eq!(bucket.visitors.estimate().round(), 10.0);
}

#[test]
fn an_identify_that_failed_to_reach_the_wal_links_nobody() {
    let f = fixture();
    let (mut w, _, uploads) = f.open();
    let identify = identify_a_as_u1();
    w.wal.fail_appends = true;
    assert!(matches!(
        commit(&mut w, vec![identify]),
        Err(WriteError::Wal(_))
    ));
    w.wal.fail_appends = false;
    commit(&mut w, vec![ev("msg_2", "a")]).unwrap();
    w.flush(true).unwrap();
    let job = uploads.try_recv().unwrap();
    let batch = read(&job.files[0]);
    let users = batch.column(batch.schema().index_of("user_id").unwrap());
    assert_eq!(batch.num_rows(), 1);
    assert!(
        arrow_array::Array::is_null(users.as_ref(), 0),
        "the visitor was never durably identified"
    );
    assert_eq!(
        profiles::store::user_of(&f.db.get().unwrap(), "app", "a").unwrap(),
        None
    );
}

#[test]
fn a_group_of_several_apps_and_hours_is_counted_per_app_and_hour_and_bots_are_not_traffic() {
    let f = fixture();
    let (mut w, _, uploads) = f.open();
    let at = |app: &str, id: &str, t: i64| Event::example(app, id, &format!("v{id}"), t);
    let later = T0 + rollup::HOUR_MICROS;
    let bot = Event {
        is_bot: Some(true),
        ..at("a", "m2", T0)
    };
    let a = vec![
        at("a", "m1", T0),
        bot,
        at("a", "m3", T0),
        at("a", "m4", later),
    ];
    let b = vec![at("b", "m5", T0), at("b", "m6", T0), at("b", "m6", T0)];
    let ((r1, a1), (r2, a2)) = (
        tokio::sync::oneshot::channel(),
        tokio::sync::oneshot::channel(),
    );
    w.commit(vec![(Records::of(&a), r1), (Records::of(&b), r2)]);
    let accepted = |a: tokio::sync::oneshot::Receiver<Result<Committed, WriteError>>| {
        let done: Committed = a.blocking_recv().unwrap().unwrap();
        (done.accepted, done.duplicates)
    };
    assert_eq!((accepted(a1), accepted(a2)), ((4, 0), (2, 1)));
    w.flush(true).unwrap();
    let job = uploads.try_recv().unwrap();
    let hour = T0.div_euclid(rollup::HOUR_MICROS);
    let traffic: Vec<(&str, i64, u64)> = job
        .rollup
        .buckets()
        .map(|(app, h, b)| (app, h - hour, b.events()))
        .collect();
    assert_eq!(traffic, [("a", 0, 2), ("a", 1, 1), ("b", 0, 2)]);
    // Usage counts every accepted event, the bot's too.
    let month = usage::month_of(T0);
    let db = f.db.get().unwrap();
    assert_eq!(usage::get(&db, "a", &month).unwrap(), 4);
    assert_eq!(usage::get(&db, "b", &month).unwrap(), 2);
}
