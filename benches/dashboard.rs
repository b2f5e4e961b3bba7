//! The dashboard's contacts page over an app with 100 000 contacts: what one page view costs
//! on the server (the store walk and count on a store thread, then the HTML), without HTTP.
//!
//! `cargo bench --bench dashboard`
//!
//! - `dashboard/contacts_page`: the first page (50 rows, `-createdAt`);
//! - `dashboard/contacts_page_by_score`: sorted by score, a page deep in (cursor);
//! - `dashboard/contacts_page_status`: filtered by a status that a third of the contacts have;
//! - `dashboard/contacts_page_search`: a search that matches 11 contacts, so the walk reads
//!   every contact of the app (the known limit of filters checked during the index walk);
//! - `dashboard/traffic_page`: the Traffic page over a month of rollups (30 days of hourly and
//!   daily buckets, 2 000 pages and 60 event names per day so the top-1000 sketches are full,
//!   40 000 visitors a day) and 200 lake files of the last day: its two windows, the files and
//!   the HTML with five SVG charts;
//! - `dashboard/survey_page`: a CSAT survey's page with 10 000 responses (all of them read): the
//!   summary, the score per day, each question's chart and the first page of responses.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use tributary::accounts::{Role, Session, User};
use tributary::clock::{Clock, SystemClock};
use tributary::collector::rollup::{self, store as rollups, HOUR_MICROS};
use tributary::collector::written::{self, WrittenFile};
use tributary::collector::{Event, EventType};
use tributary::contacts::model::{ContactPatch, Mode};
use tributary::contacts::store;
use tributary::dashboard::contacts::table::{load, render};
use tributary::dashboard::session::Viewer;
use tributary::dashboard::surveys::results::ResultsQuery;
use tributary::dashboard::{surveys::list as survey_page, traffic};
use tributary::ids::{object_id, Timestamp};
use tributary::storage::changes::Actor;
use tributary::surveys::model::{ResponseDraft, ResponseMetadata, SurveyPatch, SurveyStatus};
use tributary::surveys::store as surveys;
use tributary::tenants::{App, Plan};

// The server's allocator, so the figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CONTACTS: u64 = 100_000;
const STATUSES: [&str; 3] = ["new", "customer", "qualified"];

fn fill(db: &sled::Db, app: &str) {
    let started = Instant::now();
    for chunk in (0..CONTACTS).collect::<Vec<_>>().chunks(1000) {
        let items: Vec<_> = chunk
            .iter()
            .map(|n| {
                let v = json!({
                    "email": format!("lead{n}@example.com"), "firstName": "Ada",
                    "lastName": format!("Lovelace{n}"), "company": format!("Engines {}", n % 50),
                    "source": "import", "status": STATUSES[(n % 3) as usize],
                    "tags": ["newsletter", "b2b"], "score": (n % 101) as i64
                });
                ContactPatch::parse(v.as_object().expect("object"), Mode::Create)
            })
            .collect();
        let by = (SystemClock.now(), &Actor::System);
        store::batch(db, app, &items, false, None, by).expect("batch");
    }
    eprintln!("{CONTACTS} contacts stored in {:?}", started.elapsed());
}

/// A month of traffic, one flush per hour, and the last day's lake files.
fn fill_traffic(db: &sled::Db, app: &str, now: i64) {
    let started = Instant::now();
    let first_hour = now.div_euclid(HOUR_MICROS) - 30 * 24;
    let mut n = 0u64;
    for (lsn, hour) in (first_hour..=first_hour + 30 * 24).enumerate() {
        let mut delta = rollup::Delta::default();
        for i in 0..300u64 {
            n += 1;
            let visitor = format!("6f1c2d3e-4b5a-4c6d-8e7f-{:012x}", (n * 7919) % 40_000);
            let mut e = Event::example(app, &format!("msg_{n}"), &visitor, hour * HOUR_MICROS);
            e.received_at = hour * HOUR_MICROS + (i as i64) * 1000;
            e.page_path = Some(format!("/docs/page-{}", (n * 31) % 2000).into());
            if i % 3 == 0 {
                e.kind = EventType::Track;
                e.event = Some(format!("Event {}", n % 60).into());
            }
            if i % 10 == 0 {
                e.user_id = Some(format!("user_{}", n % 5000).into());
            }
            delta.add(&e);
        }
        rollups::apply(db, 0, lsn as u64 + 1, &delta).expect("rollups applied");
    }
    let files: Vec<_> = (0..200)
        .map(|i| {
            let at = Timestamp::from_micros(now - i * 400_000_000);
            let path = format!("events/app_id={app}/date=x/hour=y/part-{i:05}.parquet");
            let file = WrittenFile {
                path,
                rows: 16_384,
                bytes: 1_200_000,
                written_at: at,
            };
            (app.to_owned(), file)
        })
        .collect();
    written::record(db, &files, Timestamp::from_micros(now)).expect("files recorded");
    eprintln!(
        "a month of rollups ({n} events) stored in {:?}",
        started.elapsed()
    );
}

/// A CSAT survey with `n` completed responses; answers its id.
fn fill_survey(db: &sled::Db, app: &str, n: u64) -> String {
    let started = Instant::now();
    let body = json!({"title": "Checkout", "type": "csat", "questions": [
        {"id": "sat", "text": "How was checkout?", "type": "rating", "required": true},
        {"id": "why", "text": "What could we do better?", "type": "text"}
    ]});
    let patch = SurveyPatch::parse(body.as_object().expect("object"), true).expect("valid");
    let survey = patch.into_survey(SystemClock.now()).expect("a survey");
    surveys::create(db, app, &survey).expect("created");
    surveys::transition(
        db,
        app,
        &survey.id,
        SurveyStatus::Active,
        None,
        SystemClock.now(),
    )
    .expect("active");
    for i in 0..n {
        let draft = ResponseDraft {
            anonymous_id: format!("6f1c2d3e-4b5a-4c6d-8e7f-{i:012x}"),
            user_id: None,
            answers: vec![
                ("sat".into(), json!(1 + i % 5)),
                ("why".into(), json!(format!("answer {i}"))),
            ],
            completed: true,
            metadata: ResponseMetadata::default(),
            attributes: serde_json::Map::new(),
        };
        surveys::respond(db, app, &survey.id, &draft, SystemClock.now(), None).expect("response");
    }
    eprintln!("{n} survey responses stored in {:?}", started.elapsed());
    survey.id
}

fn viewer() -> Viewer {
    let now = SystemClock.now();
    let user = User {
        id: object_id(),
        email: "owner@example.com".into(),
        name: "Olive Owner".into(),
        role: Role::Owner,
        password_hash: String::new(),
        created_at: now,
    };
    let (session, _) = Session::start(&user.id, now);
    Viewer {
        user,
        session,
        session_key: String::new(),
    }
}

fn pages(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = sled::Config::new()
        .path(dir.path())
        .mode(sled::Mode::HighThroughput)
        .open()
        .expect("open sled");
    let now = SystemClock.now();
    let app = App {
        id: object_id(),
        name: "Bench".into(),
        plan: Plan::Enterprise,
        integration_key_id: object_id(),
        deletion_job_id: None,
        created_at: now,
        updated_at: now,
    };
    fill(&db, &app.id);
    let who = viewer();
    // A cursor deep into the score order: follow "next" 20 times.
    let mut deep = String::from("sort=-score");
    for _ in 0..20 {
        let html = render(&who, &app, &load(&db, &app.id, &deep).expect("page")).into_string();
        let at = html.find("rel=\"next\" href=\"").expect("a next page") + 17;
        let href = html[at..]
            .split('"')
            .next()
            .expect("href")
            .replace("&amp;", "&");
        deep = href.split_once('?').expect("query").1.to_owned();
    }
    let mut g = c.benchmark_group("dashboard");
    g.sample_size(30);
    for (name, query) in [
        ("contacts_page", String::new()),
        ("contacts_page_by_score", deep),
        ("contacts_page_status", "status=customer".into()),
        ("contacts_page_search", "q=lovelace9999".into()),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let listing = load(&db, &app.id, black_box(&query)).expect("page");
                black_box(render(&who, &app, &listing).into_string())
            })
        });
    }
    let now = SystemClock.now().micros();
    fill_traffic(&db, &app.id, now);
    // Nothing committed and not yet stored: the stored rollups only.
    let live = tributary::collector::rollup::live::Live::default();
    g.bench_function("traffic_page", |b| {
        b.iter(|| {
            let loaded = traffic::load(&db, &live, &app.id, black_box(now)).expect("traffic");
            black_box(traffic::render(&who, &app, &loaded).into_string())
        })
    });
    let survey = fill_survey(&db, &app.id, 10_000);
    let query = ResultsQuery::default();
    g.bench_function("survey_page", |b| {
        b.iter(|| {
            let s = surveys::get(&db, &app.id, &survey)
                .expect("read")
                .expect("survey");
            let responses = surveys::responses(&db, &app.id, &survey).expect("responses");
            let (page, _) = survey_page::results_page(&who, &app, &s, responses, &query);
            black_box(page.into_string())
        })
    });
    g.finish();
}

criterion_group!(benches, pages);
criterion_main!(benches);
