//! Interoperability: the lake read by DuckDB and Spark, written to S3 (the moto server), every
//! operation's live answers validated against `/openapi.json` by Python's `jsonschema`, and the
//! browser tracker driven in headless Chromium.
//! These need the Python tools in `.venv`, Chromium and `tests/browser/node_modules`, which
//! `tests/run` installs; without them the tests stop at once with one line naming `tests/run`.

#![allow(
    dead_code,
    reason = "helpers shared with the `api` binary by path: this one uses only some of them"
)]
#![allow(
    clippy::too_many_lines,
    reason = "a scenario reads best as one story; the 100-line rule is for src/"
)]

#[path = "../api/binary.rs"]
mod binary;
mod browser;
mod deletion;
mod erasure;
#[path = "../api/events.rs"]
mod events;
mod faults;
mod fleet;
#[path = "../api/form_client.rs"]
mod form_client;
mod geo;
#[path = "../api/helpers.rs"]
mod helpers;
mod hours;
#[path = "../api/lake.rs"]
mod lake;
mod load;
mod observe;
mod openapi;
#[path = "../api/populate.rs"]
mod populate;
mod proxy;
mod python;
mod receiver;
mod retention;
mod rollups;
mod schema;
mod sdks;
mod surveys_csv;
mod uplink;
mod webhook_events;
mod webhooks;

use serde_json::json;

use events::*;
use helpers::*;

#[tokio::test]
async fn duckdb_reads_the_lake_with_utc_microsecond_timestamps() {
    let mut app = spawn_app_with(slow_files);
    let (app_id, ik) = app.create_app("free").await;
    let a = app.collect(&ik, tracks("d", 12)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    app.stop().await;
    let lake_dir = app.data_dir.join("lake");
    let duck = python::read_local(&lake_dir);
    let ours = lake::read_local(&lake_dir);
    assert_eq!(duck.types["timestamp"], "TIMESTAMP WITH TIME ZONE");
    assert_eq!(duck.types["received_at"], "TIMESTAMP WITH TIME ZONE");
    let logical = duck.timestamp_logical.clone().unwrap();
    assert!(
        logical.contains("MICROS") && logical.contains("isAdjustedToUTC=1"),
        "{logical}"
    );
    assert_eq!(duck.files, ours.files);
    assert_eq!(duck.rows.len(), 12);
    // DuckDB skips a file by its Bloom filter for an id it does not hold, never for one it does.
    let probe = python::bloom_probe(&lake_dir);
    assert!(
        !probe.held_excluded && probe.absent_excluded_of_20 >= 15,
        "{probe:?}"
    );
    for (d, o) in duck.rows.iter().zip(&ours.rows) {
        for col in [
            "message_id",
            "timestamp",
            "received_at",
            "properties",
            "page_path",
            "screen_width",
            "is_bot",
            "dt",
            "hour",
        ] {
            assert_eq!(
                d[col], o[col],
                "DuckDB and the parquet crate agree on {col}"
            );
        }
        assert_eq!(d["app_id"], json!(app_id));
        assert_eq!(d["valid_properties"], json!(true));
    }
}

#[tokio::test]
async fn the_lake_can_live_on_s3() {
    let moto = python::Moto::start("tributary-lake").await;
    let endpoint = moto.endpoint.clone();
    let mut app = spawn_app_with(move |s| {
        s.collector.max_file_rows = 7;
        s.lake.kind = tributary::config::LakeKind::S3;
        s.lake.s3_bucket = "tributary-lake".into();
        s.lake.s3_endpoint = endpoint;
        s.lake.s3_allow_http = true;
        s.lake.s3_access_key_id = "test".into();
        s.lake.s3_secret_access_key = "test".into();
    });
    let (_, ik) = app.create_app("free").await;
    for b in 0..3 {
        let a = app.collect(&ik, tracks(&format!("{b}_"), 10)).await;
        assert_eq!(a.status, 200, "{}", a.body);
    }
    app.stop().await;
    let view = python::read_s3(&moto.endpoint, "tributary-lake");
    // What the stopped server left on its disk, to tell a file never put from one overwritten.
    let left = crate::observe::parquet_files(&app.data_dir);
    assert_eq!(
        view.rows.len(),
        30,
        "files in the lake: {:?}; files left in the data dir: {left:?}",
        view.files
    );
    assert!(
        view.files.len() >= 2,
        "files close by row count: {:?}",
        view.files
    );
    assert_eq!(view.types["timestamp"], "TIMESTAMP WITH TIME ZONE");
    assert!(
        !app.data_dir.join("lake").exists(),
        "nothing was written locally"
    );
}

#[tokio::test]
async fn spark_reads_the_lake_with_microsecond_timestamps() {
    let mut app = spawn_app_with(slow_files);
    let (app_id, ik) = app.create_app("free").await;
    let a = app.collect(&ik, tracks("s", 5)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    app.stop().await;
    let lake_dir = app.data_dir.join("lake");
    let duck = python::read_local(&lake_dir);
    let spark = tokio::task::spawn_blocking(move || python::read_with_spark(&lake_dir))
        .await
        .unwrap();
    assert_eq!(spark.count, 5);
    assert_eq!(
        spark.types["timestamp"], "timestamp",
        "Spark refuses nanoseconds; microseconds read as timestamp"
    );
    assert_eq!(spark.types["received_at"], "timestamp");
    assert_eq!(spark.types["app_id"], "string");
    for row in &duck.rows {
        let id = row["message_id"].as_str().unwrap();
        assert_eq!(
            spark.timestamps[id], row["timestamp"],
            "Spark and DuckDB agree on {id} to the microsecond"
        );
    }
    assert!(duck.rows.iter().all(|r| r["app_id"] == json!(app_id)));
}
