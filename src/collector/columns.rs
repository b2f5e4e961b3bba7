//! Rows to Arrow columns to Parquet (zstd), in the lake's schema (api.md §8).

use std::sync::Arc;

use arrow_array::builder::{Int32Builder, StringBuilder, TimestampMicrosecondBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::event::Event;

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The Parquet schema of the lake (api.md §8). Timestamps are microseconds in UTC: DuckDB
/// reads TIMESTAMP WITH TIME ZONE, Spark `timestamp` (it refuses nanoseconds).
pub fn schema() -> SchemaRef {
    let s = |name: &str, nullable: bool| Field::new(name, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        s("message_id", false),
        s("app_id", false),
        s("type", false),
        s("event", true),
        s("anonymous_id", true),
        s("user_id", true),
        s("group_id", true),
        s("session_id", true),
        Field::new("timestamp", ts_type(), false),
        Field::new("original_timestamp", ts_type(), true),
        Field::new("sent_at", ts_type(), true),
        Field::new("received_at", ts_type(), false),
        s("page_url", true),
        s("page_path", true),
        s("page_title", true),
        s("page_referrer", true),
        s("device_type", true),
        s("locale", true),
        s("timezone", true),
        Field::new("screen_width", DataType::Int32, true),
        Field::new("screen_height", DataType::Int32, true),
        s("ip", true),
        s("user_agent", true),
        s("properties", true),
        s("traits", true),
        s("context", true),
    ]))
}

/// One cell of a row, in the column's type.
enum Cell<'a> {
    Str(Option<&'a str>),
    Ts(Option<i64>),
    Int(Option<i32>),
}

/// The row's cells in schema order.
fn cells(e: &Event) -> [Cell<'_>; 26] {
    use Cell::{Int, Str, Ts};
    [
        Str(Some(&e.message_id)),
        Str(Some(&e.app_id)),
        Str(Some(&e.kind)),
        Str(e.event.as_deref()),
        Str(e.anonymous_id.as_deref()),
        Str(e.user_id.as_deref()),
        Str(e.group_id.as_deref()),
        Str(e.session_id.as_deref()),
        Ts(Some(e.timestamp)),
        Ts(e.original_timestamp),
        Ts(e.sent_at),
        Ts(Some(e.received_at)),
        Str(e.page_url.as_deref()),
        Str(e.page_path.as_deref()),
        Str(e.page_title.as_deref()),
        Str(e.page_referrer.as_deref()),
        Str(e.device_type.as_deref()),
        Str(e.locale.as_deref()),
        Str(e.timezone.as_deref()),
        Int(e.screen_width),
        Int(e.screen_height),
        Str(e.ip.as_deref()),
        Str(e.user_agent.as_deref()),
        Str(e.properties.as_deref()),
        Str(e.traits.as_deref()),
        Str(e.context.as_deref()),
    ]
}

enum ColumnBuilder {
    Str(StringBuilder),
    Ts(TimestampMicrosecondBuilder),
    Int(Int32Builder),
}

/// Column builders for one file's worth of events.
pub struct RowBuilder {
    columns: Vec<ColumnBuilder>,
    rows: usize,
    bytes: usize,
}

impl Default for RowBuilder {
    fn default() -> Self {
        let columns = schema()
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Utf8 => ColumnBuilder::Str(StringBuilder::new()),
                DataType::Int32 => ColumnBuilder::Int(Int32Builder::new()),
                _ => ColumnBuilder::Ts(TimestampMicrosecondBuilder::new().with_timezone("UTC")),
            })
            .collect();
        RowBuilder {
            columns,
            rows: 0,
            bytes: 0,
        }
    }
}

impl RowBuilder {
    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn append(&mut self, e: &Event) {
        for (column, cell) in self.columns.iter_mut().zip(cells(e)) {
            match (column, cell) {
                (ColumnBuilder::Str(b), Cell::Str(v)) => b.append_option(v),
                (ColumnBuilder::Ts(b), Cell::Ts(v)) => b.append_option(v),
                (ColumnBuilder::Int(b), Cell::Int(v)) => b.append_option(v),
                _ => unreachable!("cells() follows schema() order"),
            }
        }
        self.rows += 1;
        self.bytes += e.approx_bytes();
    }

    /// The rows as one record batch in schema order; the builder is left empty.
    pub fn finish(&mut self) -> RecordBatch {
        let cols: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|c| match c {
                ColumnBuilder::Str(b) => Arc::new(b.finish()) as ArrayRef,
                ColumnBuilder::Ts(b) => Arc::new(b.finish()) as ArrayRef,
                ColumnBuilder::Int(b) => Arc::new(b.finish()) as ArrayRef,
            })
            .collect();
        self.rows = 0;
        self.bytes = 0;
        RecordBatch::try_new(schema(), cols).expect("columns match the schema")
    }
}

/// Encodes a batch as one Parquet file (zstd).
pub fn encode_parquet(batch: &RecordBatch) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_created_by("tributary".into())
        .build();
    let mut w = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props))?;
    w.write(batch)?;
    w.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: i64) -> Event {
        Event {
            message_id: format!("msg_{i}"),
            app_id: "app".into(),
            kind: "track".into(),
            event: Some("Signed Up".into()),
            anonymous_id: Some("a".into()),
            user_id: None,
            group_id: None,
            session_id: Some("ses_1".into()),
            timestamp: 1_700_000_000_000_000 + i,
            original_timestamp: Some(1),
            sent_at: None,
            received_at: 2,
            page_url: Some("https://x.io/a".into()),
            page_path: Some("/a".into()),
            page_title: None,
            page_referrer: Some(String::new()),
            device_type: Some("desktop".into()),
            locale: Some("en-US".into()),
            timezone: Some("Europe/Paris".into()),
            screen_width: Some(1920),
            screen_height: None,
            ip: Some("127.0.0.1".into()),
            user_agent: Some("ua".into()),
            properties: Some("{\"plan\":\"pro\"}".into()),
            traits: None,
            context: None,
        }
    }

    #[test]
    fn rows_land_in_their_columns_and_encode_as_parquet() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Int32Type, TimestampMicrosecondType};
        let mut b = RowBuilder::default();
        b.append(&sample(0));
        b.append(&sample(1));
        let batch = b.finish();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(b.rows(), 0);
        let col = |n: &str| batch.column(batch.schema().index_of(n).unwrap()).clone();
        assert_eq!(col("message_id").as_string::<i32>().value(1), "msg_1");
        assert_eq!(col("page_path").as_string::<i32>().value(0), "/a");
        assert_eq!(col("timezone").as_string::<i32>().value(0), "Europe/Paris");
        assert_eq!(
            col("properties").as_string::<i32>().value(0),
            "{\"plan\":\"pro\"}"
        );
        assert!(col("traits").is_null(0));
        assert_eq!(
            col("screen_width").as_primitive::<Int32Type>().value(0),
            1920
        );
        assert_eq!(
            col("timestamp")
                .as_primitive::<TimestampMicrosecondType>()
                .value(1),
            1_700_000_000_000_001
        );
        let bytes = encode_parquet(&batch).unwrap();
        assert_eq!(&bytes[..4], b"PAR1");
    }
}
