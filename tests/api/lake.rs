//! Reading a local lake back with the `parquet` crate: the files, their Arrow types and Parquet
//! logical types, and every row as JSON (timestamps as µs). DuckDB, Spark and S3 (moto) read the
//! lake in the `interop` test binary.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{json, Map, Value};

/// What the lake holds (also what the interop tests' DuckDB reader prints, as JSON).
#[derive(Debug, serde::Deserialize)]
pub struct LakeView {
    /// Paths relative to the lake's root, sorted.
    pub files: Vec<String>,
    /// Column name -> Arrow type of the first file.
    pub types: Map<String, Value>,
    /// Every row, ordered by received_at then message_id; plus `valid_properties` (the
    /// properties text is valid JSON) and the Hive partition values `dt` and `hour`.
    pub rows: Vec<Map<String, Value>>,
    /// The Parquet logical type of the `timestamp` column of the first file.
    pub timestamp_logical: Option<String>,
}

impl LakeView {
    pub fn message_ids(&self) -> Vec<String> {
        self.rows
            .iter()
            .map(|r| r["message_id"].as_str().unwrap().to_owned())
            .collect()
    }

    pub fn row(&self, message_id: &str) -> &Map<String, Value> {
        self.rows
            .iter()
            .find(|r| r["message_id"] == message_id)
            .unwrap_or_else(|| panic!("{message_id} not in the lake"))
    }
}

fn parquet_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            parquet_files(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p.strip_prefix(root).unwrap().to_str().unwrap().to_owned());
        }
    }
}

fn cell(batch: &RecordBatch, col: usize, row: usize) -> Value {
    let a = batch.column(col);
    if a.is_null(row) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Utf8 => json!(a.as_string::<i32>().value(row)),
        DataType::Int32 => json!(a.as_primitive::<Int32Type>().value(row)),
        DataType::Boolean => json!(a.as_boolean().value(row)),
        DataType::Timestamp(..) => json!(a.as_primitive::<TimestampMicrosecondType>().value(row)),
        other => panic!("unexpected column type {other}"),
    }
}

/// The Hive partition `name=value` of a path.
fn partition(path: &str, name: &str) -> Value {
    path.split('/')
        .find_map(|seg| seg.strip_prefix(&format!("{name}=")))
        .map_or(Value::Null, |v| json!(v))
}

pub fn read_local(lake_dir: &Path) -> LakeView {
    let mut files = Vec::new();
    parquet_files(lake_dir, &lake_dir.join("events"), &mut files);
    files.sort();
    let mut view = LakeView {
        files: files.clone(),
        types: Map::new(),
        rows: Vec::new(),
        timestamp_logical: None,
    };
    for (n, f) in files.iter().enumerate() {
        let file = std::fs::File::open(lake_dir.join(f)).unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let schema = builder.schema().clone();
        if n == 0 {
            for field in schema.fields() {
                view.types
                    .insert(field.name().clone(), json!(field.data_type().to_string()));
            }
            let descr = builder.metadata().file_metadata().schema_descr();
            view.timestamp_logical = (0..descr.num_columns())
                .map(|i| descr.column(i))
                .find(|c| c.name() == "timestamp")
                .and_then(|c| c.logical_type_ref().map(|t| format!("{t:?}")));
        }
        for batch in builder.build().unwrap() {
            let batch = batch.unwrap();
            for r in 0..batch.num_rows() {
                let mut row: Map<String, Value> = schema
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(c, field)| (field.name().clone(), cell(&batch, c, r)))
                    .collect();
                let valid = row["properties"]
                    .as_str()
                    .map(|p| serde_json::from_str::<Value>(p).is_ok());
                row.insert("valid_properties".into(), json!(valid));
                row.insert("dt".into(), partition(f, "dt"));
                row.insert("hour".into(), partition(f, "hour"));
                view.rows.push(row);
            }
        }
    }
    view.rows.sort_by(|a, b| {
        (a["received_at"].as_i64(), a["message_id"].as_str())
            .cmp(&(b["received_at"].as_i64(), b["message_id"].as_str()))
    });
    view
}
