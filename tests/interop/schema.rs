//! The lake's schema only grows: files of an earlier release (without the columns added since)
//! and new files read as one glob in DuckDB (`union_by_name`), the old rows null in the new
//! columns, whichever file the glob meets first.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use reqwest::Method;
use serde_json::{json, Value};

use crate::events::*;
use crate::helpers::*;
use crate::python;

/// The columns of the lake before `name`, `category`, `previous_id` and `integrations`.
const OLD_COLUMNS: usize = 26;

/// Writes `file`'s rows as a file of the earlier release (its first 26 columns), each
/// messageId prefixed with `prefix`, at `to`.
fn write_old_release_copy(file: &std::path::Path, to: &std::path::Path, prefix: &str) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut writer = None;
    for batch in reader {
        let batch = batch.unwrap();
        let mut old = batch
            .project(&(0..OLD_COLUMNS).collect::<Vec<_>>())
            .unwrap();
        let ids = arrow_array::cast::AsArray::as_string::<i32>(old.column(0));
        let renamed: StringArray = ids
            .iter()
            .map(|id| id.map(|id| format!("{prefix}{id}")))
            .collect();
        let mut columns: Vec<ArrayRef> = old.columns().to_vec();
        columns[0] = Arc::new(renamed);
        old = RecordBatch::try_new(old.schema(), columns).unwrap();
        let w = writer.get_or_insert_with(|| {
            ArrowWriter::try_new(std::fs::File::create(to).unwrap(), old.schema(), None).unwrap()
        });
        w.write(&old).unwrap();
    }
    writer.unwrap().close().unwrap();
}

#[tokio::test]
async fn files_of_an_earlier_schema_read_in_one_glob_with_new_ones() {
    let mut app = spawn_app_with(slow_files);
    let (_, ik) = app.create_app("free").await;
    let body = json!({"batch": [
        {"type": "screen", "userId": "u1", "name": "Home", "messageId": "new-screen"},
        {"type": "track", "userId": "u1", "event": "Bought", "messageId": "new-track", "integrations": {"All": false}}
    ]});
    let a = app
        .send(Method::POST, "/v1/batch", &[("x-app-key", &ik)], Some(body))
        .await;
    assert_eq!(a.counts(), (2, 0, 0), "{}", a.body);
    app.stop().await;
    let lake_dir = app.data_dir.join("lake");
    let files = python::read_local(&lake_dir).files;
    assert_eq!(files.len(), 1, "{files:?}");
    let new_file = lake_dir.join(&files[0]);
    let dir = new_file.parent().unwrap();
    // One file of the earlier release sorts before the new one, one after.
    write_old_release_copy(&new_file, &dir.join("a-old.parquet"), "a-");
    write_old_release_copy(&new_file, &dir.join("z-old.parquet"), "z-");
    let view = python::read_local(&lake_dir);
    assert_eq!(view.files.len(), 3);
    assert_eq!(view.rows.len(), 6);
    for r in &view.rows {
        let id = r["message_id"].as_str().unwrap();
        let old = !id.starts_with("new-");
        let screen = id.ends_with("new-screen");
        assert_eq!(
            r["type"],
            json!(if screen { "screen" } else { "track" }),
            "{id}"
        );
        let want_name = if screen && !old {
            json!("Home")
        } else {
            Value::Null
        };
        assert_eq!(r["name"], want_name, "{id}");
        if old {
            assert_eq!(r["integrations"], Value::Null, "{id}");
        }
    }
    assert_eq!(
        view.row("new-track")["integrations"],
        json!(r#"{"All":false}"#)
    );
}
