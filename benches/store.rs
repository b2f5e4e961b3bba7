//! The contacts store on sled, called directly (no HTTP, no store actor).
//!
//! `cargo bench --bench store`
//!
//! - `contacts/create`: parsing (validation) + `build` + `create` (one sled transaction + `db.flush()`,
//!   the fsync every API write pays), a new e-mail each iteration;
//! - `contacts/get`: one existing contact by id;
//! - `contacts/list_20_of_1000`: the first page of 20 by `-createdAt` out of 1000 contacts;
//! - `ideas/vote`: one vote by a new voter on one idea: the transaction (duplicate-voter check,
//!   vote record, voter entries, voteCount, trending and their index entries) + `db.flush()`.

use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use tributary::storage::changes::Actor;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::{json, Map, Value};
use tributary::clock::{Clock, SystemClock};
use tributary::contacts::model::{ContactPatch, Mode};
use tributary::contacts::store::{self, Filter, Sort, SortField};
use tributary::storage::cursor::Walk;

/// Opened as the service opens it (`Store::open`).
fn open_db(dir: &Path) -> sled::Db {
    sled::Config::new()
        .path(dir)
        .mode(sled::Mode::HighThroughput)
        .open()
        .expect("open sled")
}

/// A realistic create body, parsed: a form lead with tags and custom fields.
fn lead(n: u64) -> ContactPatch {
    ContactPatch::parse(&body(n), Mode::Create).expect("valid body")
}

fn body(n: u64) -> Map<String, Value> {
    let v = json!({
        "email": format!("lead{n}@example.com"),
        "firstName": "Ada",
        "lastName": format!("Lovelace{n}"),
        "company": "Analytical Engines Ltd",
        "jobTitle": "Head of Growth",
        "phone": "+44 20 7946 0958",
        "website": "https://engines.example",
        "city": "London",
        "country": "GB",
        "source": "form",
        "status": "new",
        "tags": ["newsletter", "pricing-page", "b2b"],
        "score": (n % 101) as i64,
        "gdprConsent": true,
        "customFields": {"plan": "pro", "seats": 12, "trial": true, "utm_campaign": "spring-launch"}
    });
    let Value::Object(map) = v else {
        unreachable!("a JSON object")
    };
    map
}

fn create(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let app = tributary::ids::object_id();
    let next = AtomicU64::new(0);

    let mut g = c.benchmark_group("contacts");
    g.throughput(Throughput::Elements(1));
    g.bench_function("create", |b| {
        b.iter(|| {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let contact = store::build(&app, &lead(n), SystemClock.now()).expect("valid body");
            store::create(&db, &contact, None, &Actor::System).expect("created");
            black_box(contact)
        })
    });
    g.finish();
    drop(db);
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let app = tributary::ids::object_id();
    // `batch` flushes once for the lot, so seeding 1000 contacts is quick.
    let bodies: Vec<_> = (0..1000).map(|n| Ok(lead(n))).collect();
    let ids: Vec<String> = store::batch(
        &db,
        &app,
        &bodies,
        false,
        None,
        (SystemClock.now(), &Actor::System),
    )
    .expect("seeded")
    .into_iter()
    .map(|o| match o {
        store::BatchOutcome::Created(c) => c.id,
        other => panic!("seeding failed: {other:?}"),
    })
    .collect();
    assert_eq!(store::count(&db, &app).expect("count"), 1000);

    let mut g = c.benchmark_group("contacts");
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("get", |b| {
        b.iter(|| {
            i = (i + 1) % ids.len();
            let found = store::get(&db, &app, &ids[i]).expect("get");
            black_box(found.expect("exists"))
        })
    });

    let sort = Sort {
        field: SortField::CreatedAt,
        descending: true,
    };
    let filter = Filter::default();
    g.throughput(Throughput::Elements(20));
    g.bench_function("list_20_of_1000", |b| {
        b.iter(|| {
            let walk = Walk::new(20, None).descending(sort.descending);
            let page = store::list(&db, &app, &filter, sort.field, walk).expect("list");
            assert_eq!(page.items.len(), 20);
            assert!(page.next.is_some());
            black_box(page)
        })
    });
    g.finish();
}

fn vote(c: &mut Criterion) {
    use tributary::ideas::{engagement, model, store as ideas};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let app = tributary::ids::object_id();
    let body = json!({"title": "Dark mode", "author": {"id": "u1", "name": "Ada", "email": "ada@example.com"}});
    let draft = model::IdeaDraft::parse(body.as_object().expect("object"), SystemClock.now())
        .expect("valid idea");
    let by = (SystemClock.now(), &Actor::System);
    let idea = ideas::create(&db, &app, &draft, None, by).expect("idea created");
    let next = AtomicU64::new(0);
    let settings = tributary::config::Settings::load(None).expect("settings");
    let plan = settings.plan(tributary::config::Plan::Enterprise);

    let mut g = c.benchmark_group("ideas");
    g.throughput(Throughput::Elements(1));
    g.bench_function("vote", |b| {
        b.iter(|| {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let voter = model::Voter {
                id: Some(format!("voter{n}")),
                name: None,
                email: Some(format!("voter{n}@example.com")),
            };
            let at = SystemClock.now();
            let by = (at, &Actor::System);
            black_box(engagement::vote(&db, &app, &idea.id, &voter, at, by, &plan).expect("vote"))
        })
    });
    g.finish();
    let stored = ideas::get(&db, &app, &idea.id).expect("get").expect("idea");
    assert_eq!(stored.vote_count, next.load(Ordering::Relaxed));
}

criterion_group!(benches, create, read, vote);
criterion_main!(benches);
