//! Rows to Arrow columns to Parquet (zstd), in the lake's schema (api.md §8).

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int32Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;

use super::event::{Cell, ColumnKind, Event};

/// The Parquet schema of the lake (api.md §8), from [`Event::COLUMNS`]. Timestamps are
/// microseconds in UTC: DuckDB reads TIMESTAMP WITH TIME ZONE, Spark `timestamp` (it refuses
/// nanoseconds).
pub fn schema() -> SchemaRef {
    let fields: Vec<Field> = Event::COLUMNS
        .iter()
        .map(|c| {
            let t = match c.kind {
                ColumnKind::Text => DataType::Utf8,
                ColumnKind::Int => DataType::Int32,
                ColumnKind::Bool => DataType::Boolean,
                ColumnKind::Timestamp => {
                    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
                }
            };
            Field::new(c.name, t, c.nullable)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

enum ColumnBuilder {
    Str(StringBuilder),
    Ts(TimestampMicrosecondBuilder),
    Int(Int32Builder),
    Bool(BooleanBuilder),
}

/// Rows whose cells are gathered at once by [`RowBuilder::append_all`]: 32 x 38 cells of 24
/// bytes, about 29 KiB, within a core's first-level data cache.
const CELL_ROWS: usize = 32;

impl ColumnBuilder {
    /// An empty builder with room for `rows` values and, for text, `bytes` bytes of them.
    fn with_capacity(kind: ColumnKind, rows: usize, bytes: usize) -> ColumnBuilder {
        match kind {
            ColumnKind::Text => ColumnBuilder::Str(StringBuilder::with_capacity(rows, bytes)),
            ColumnKind::Int => ColumnBuilder::Int(Int32Builder::with_capacity(rows)),
            ColumnKind::Bool => ColumnBuilder::Bool(BooleanBuilder::with_capacity(rows)),
            ColumnKind::Timestamp => ColumnBuilder::Ts(
                TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC"),
            ),
        }
    }

    /// Bytes of text values held (0 for other kinds).
    fn text_bytes(&self) -> usize {
        match self {
            ColumnBuilder::Str(b) => b.values_slice().len(),
            _ => 0,
        }
    }
}

/// Room for the first rows of a builder that has no earlier row group to go by: none. A new
/// file's builders grow from nothing, so an open file holding a few rows (one of an edge's many
/// apps, each with a file for its hour) weighs those rows, not arrow's default room for 1 024
/// rows in every column (about 300 KB a file: a thousand quiet apps took 325 MB).
const FIRST_GROUP: (usize, usize) = (0, 0);

/// Column builders for one file's worth of events.
pub struct RowBuilder {
    columns: Vec<ColumnBuilder>,
    rows: usize,
    bytes: usize,
    /// The last finished row group's rows and, per column, its text bytes: the next group's
    /// builders are made that size at its first row, so a busy file's builders do not grow by
    /// doubling (copying what they hold each time) through every group. Taken at that first
    /// row, so an open file that gets no more rows holds only empty builders. Never more than
    /// one row group per column: the bound the open files' memory already counts.
    last_group: Option<(usize, Vec<usize>)>,
}

impl Default for RowBuilder {
    fn default() -> Self {
        let columns = Event::COLUMNS
            .iter()
            .map(|c| ColumnBuilder::with_capacity(c.kind, FIRST_GROUP.0, FIRST_GROUP.1))
            .collect();
        RowBuilder {
            columns,
            rows: 0,
            bytes: 0,
            last_group: None,
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
        self.append_all(&[e]);
    }

    /// Appends rows column by column, [`CELL_ROWS`] rows at a time: each builder takes them in
    /// turn, so its buffers stay in the cache (row by row, every row touches all the builders),
    /// and so do the rows' cells. Returns their estimated size ([`Event::approx_bytes`]).
    pub fn append_all(&mut self, events: &[&Event]) -> usize {
        if let Some((rows, bytes)) = self.last_group.take_if(|_| !events.is_empty()) {
            for ((column, spec), bytes) in self.columns.iter_mut().zip(Event::COLUMNS).zip(bytes) {
                *column = ColumnBuilder::with_capacity(spec.kind, rows, bytes);
            }
        }
        let mut rows = Vec::with_capacity(events.len().min(CELL_ROWS));
        for chunk in events.chunks(CELL_ROWS) {
            rows.clear();
            rows.extend(chunk.iter().map(|e| e.cells()));
            for (i, column) in self.columns.iter_mut().enumerate() {
                for row in &rows {
                    match (&mut *column, row[i]) {
                        (ColumnBuilder::Str(b), Cell::Text(v)) => b.append_option(v),
                        (ColumnBuilder::Ts(b), Cell::Timestamp(v)) => b.append_option(v),
                        (ColumnBuilder::Int(b), Cell::Int(v)) => b.append_option(v),
                        (ColumnBuilder::Bool(b), Cell::Bool(v)) => b.append_option(v),
                        // Both come from Event::COLUMNS: a cell always matches its column's kind.
                        _ => unreachable!("cells follow Event::COLUMNS"),
                    }
                }
            }
        }
        self.rows += events.len();
        let bytes = events.iter().map(|e| e.approx_bytes()).sum::<usize>();
        self.bytes += bytes;
        bytes
    }

    /// The rows as one record batch in schema order; the builder is left empty.
    pub fn finish(&mut self) -> RecordBatch {
        let bytes = self.columns.iter().map(ColumnBuilder::text_bytes).collect();
        self.last_group = Some((self.rows, bytes));
        let cols: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|c| match c {
                ColumnBuilder::Str(b) => Arc::new(b.finish()) as ArrayRef,
                ColumnBuilder::Ts(b) => Arc::new(b.finish()) as ArrayRef,
                ColumnBuilder::Int(b) => Arc::new(b.finish()) as ArrayRef,
                ColumnBuilder::Bool(b) => Arc::new(b.finish()) as ArrayRef,
            })
            .collect();
        self.rows = 0;
        self.bytes = 0;
        RecordBatch::try_new(schema(), cols).expect("columns match the schema")
    }
}

/// Rows per row group of a lake file: an open file holds at most this many rows as Arrow
/// builders; the rows before them are already Parquet, compressed.
pub const ROW_GROUP_ROWS: usize = 16_384;

/// Columns written plain (then zstd), without a dictionary: their values are (nearly) unique
/// per row (ids, times), or JSON text, whose repeats zstd finds as a dictionary would, so
/// hashing every value into one only costs time. Measured on 16 384 load-test rows (issue 27): the
/// JSON and `received_at` plain made the file 18% smaller and its encoding about 5% faster;
/// DuckDB read it as fast.
const PLAIN_COLUMNS: [&str; 9] = [
    "message_id",
    "timestamp",
    "original_timestamp",
    "sent_at",
    "received_at",
    "properties",
    "traits",
    "context",
    "integrations",
];

/// Free text and JSON: a reader never skips a row group by their range, and their min/max
/// cost a comparison of long, mostly equal prefixes per row, so they get no statistics.
const NO_STATISTICS: [&str; 9] = [
    "message_id",
    "properties",
    "traits",
    "context",
    "integrations",
    "user_agent",
    "page_url",
    "page_title",
    "page_referrer",
];

/// The person's ids: each row group carries a Bloom filter of them (1% false positives; sized
/// for [`ROW_GROUP_ROWS`] distinct values, 32 KiB, then folded down to the values it holds
/// when written, so a small file's filters stay small), so an erasure, DuckDB and Spark skip
/// the row groups and files that cannot hold a person.
const BLOOM_COLUMNS: [&str; 2] = ["user_id", "anonymous_id"];

/// The lake files' writer properties.
pub fn writer_properties() -> Result<WriterProperties, ParquetError> {
    Ok(properties_builder()?.build())
}

/// Files of fewer rows are written with Snappy ([`small_file_properties`]).
pub const SMALL_FILE_ROWS: usize = 1_024;

/// A small file's writer properties: Snappy instead of zstd, for a file that closes with fewer
/// than [`SMALL_FILE_ROWS`] rows (a quiet app's file at a flush). Parquet makes a codec for each
/// column of each file, and a zstd codec (a compression and a decompression context) asks the
/// CPU for its features each time it is made: six `cpuid` instructions, which trap to the
/// hypervisor in a virtual machine (about 4.5 µs each on our test machines), so 1.2 ms for a
/// file's 45 columns, more than compressing a thousand rows. Snappy needs no context. The
/// merger writes a group of such parts again with zstd; a part alone enters the lake as Snappy,
/// Parquet's most widely read codec (Spark's default; DuckDB reads it). Not above that size:
/// `collector.lake_file_mb` counts the parts' bytes, and Snappy's are larger than zstd's.
pub fn small_file_properties() -> Result<WriterProperties, ParquetError> {
    Ok(properties_builder()?
        .set_compression(Compression::SNAPPY)
        .build())
}

/// [`writer_properties`], still open to changes (the merger adds the parts' metadata).
pub fn properties_builder() -> Result<WriterPropertiesBuilder, ParquetError> {
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by("tributary".into())
        .set_statistics_enabled(EnabledStatistics::Chunk);
    for name in PLAIN_COLUMNS {
        props = props.set_column_dictionary_enabled(ColumnPath::from(name), false);
    }
    for name in BLOOM_COLUMNS {
        let column = || ColumnPath::from(name);
        props = props
            .set_column_bloom_filter_enabled(column(), true)
            .set_column_bloom_filter_fpp(column(), 0.01)
            .set_column_bloom_filter_max_ndv(column(), ROW_GROUP_ROWS as u64);
    }
    for name in NO_STATISTICS {
        props =
            props.set_column_statistics_enabled(ColumnPath::from(name), EnabledStatistics::None);
    }
    Ok(props)
}

/// Encodes a batch as one Parquet file (zstd).
pub fn encode_parquet(batch: &RecordBatch) -> Result<Vec<u8>, ParquetError> {
    let mut w = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(writer_properties()?))?;
    w.write(batch)?;
    w.into_inner()
}

/// A lake file's Parquet writer, boxed: it moves between a shard and its encoder.
type Parquet = Box<ArrowWriter<Vec<u8>>>;

/// A shard's row-group encoder: a thread that turns a full row group of an open file into
/// compressed Parquet (about 9 ms for [`ROW_GROUP_ROWS`] rows), so the shard goes on
/// committing meanwhile instead of keeping every batch that arrives during it waiting. One job
/// at a time and one queued: a shard that fills row groups faster waits for it.
#[derive(Clone)]
pub struct Encoder {
    jobs: Sender<Job>,
}

/// A row group to encode: the file's writer goes with it and comes back through `done`.
struct Job {
    writer: Parquet,
    batch: RecordBatch,
    done: Sender<Result<Parquet, ParquetError>>,
}

impl Encoder {
    /// Starts the thread (named `name`); it ends when the last clone of the encoder is dropped.
    pub fn spawn(name: String) -> std::io::Result<Encoder> {
        let (jobs, queue) = bounded::<Job>(1);
        std::thread::Builder::new().name(name).spawn(move || loop {
            match queue.recv_timeout(crate::memory::poll()) {
                Ok(Job {
                    mut writer,
                    batch,
                    done,
                }) => {
                    let encoded = writer
                        .write(&batch)
                        .and_then(|()| writer.flush())
                        .map(|()| writer);
                    let _ = done.send(encoded);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            // Its buffers (a row group's pages, a file's bytes) go back when the collector is
            // quiet, like the writer's.
            crate::memory::release_if_idle(crate::memory::Thread::Encoder);
        })?;
        Ok(Encoder { jobs })
    }
}

/// Where an open file's Parquet writer is.
enum Slot {
    /// None yet: made for the file's first full row group, or when it closes.
    NotYet,
    /// With the encoder, writing a row group; `bytes`: the file's compressed bytes before it
    /// plus the row group's Arrow size (for [`OpenFile::memory`]).
    Away {
        done: Receiver<Result<Parquet, ParquetError>>,
        bytes: usize,
    },
    /// Lost with an encoding error, already reported.
    Lost,
}

/// A lake file being written: rows gather in Arrow builders and every [`ROW_GROUP_ROWS`] rows
/// become a compressed Parquet row group in memory, encoded by the shard's [`Encoder`]. Memory:
/// at most two row groups as Arrow (one filling, one with the encoder) plus the compressed bytes
/// so far (about a fifth of the events' size), not the whole file as Arrow.
pub struct OpenFile {
    rows: RowBuilder,
    writer: Slot,
    total: usize,
    encoder: Encoder,
}

/// A closed lake file: its Parquet bytes and row count.
pub struct ClosedFile {
    pub bytes: Vec<u8>,
    pub rows: usize,
}

fn encoder_stopped() -> ParquetError {
    ParquetError::General("the row group encoder stopped".into())
}

impl OpenFile {
    /// The estimated bytes of an open file's own state beside its rows (its builders and their
    /// first allocations: 7 416 bytes with one event, `tests/allocations.rs`), counted in
    /// [`OpenFile::memory`] so that an edge with many quiet apps reaches its budget, and
    /// flushes, like one with a busy app. Not more: each flush closes every open file, and a
    /// small file's Parquet costs about a millisecond, so counting more flushes more often.
    pub const OVERHEAD: usize = 8 * 1024;

    pub fn new(encoder: &Encoder) -> OpenFile {
        OpenFile {
            rows: RowBuilder::default(),
            writer: Slot::NotYet,
            total: 0,
            encoder: encoder.clone(),
        }
    }

    /// Adds rows; every [`ROW_GROUP_ROWS`] rows go to the encoder. Returns their estimated
    /// size ([`Event::approx_bytes`]). An error is the encoding of an earlier row group failing.
    pub fn append(&mut self, mut events: &[&Event]) -> Result<usize, ParquetError> {
        let mut bytes = 0;
        while !events.is_empty() {
            let room = ROW_GROUP_ROWS - self.rows.rows();
            let (now, rest) = events.split_at(room.min(events.len()));
            bytes += self.rows.append_all(now);
            self.total += now.len();
            if self.rows.rows() >= ROW_GROUP_ROWS {
                let writer = self.take_writer(writer_properties)?;
                let batch = self.rows.finish();
                let bytes = writer.inner().len() + batch.get_array_memory_size();
                let (done_tx, done) = bounded(1);
                let job = Job {
                    writer,
                    batch,
                    done: done_tx,
                };
                self.encoder.jobs.send(job).map_err(|_| encoder_stopped())?;
                self.writer = Slot::Away { done, bytes };
            }
            events = rest;
        }
        Ok(bytes)
    }

    /// The Parquet writer: a new one with `props` for the file's first row group, or back from
    /// the encoder once it wrote the last row group sent.
    fn take_writer(
        &mut self,
        props: fn() -> Result<WriterProperties, ParquetError>,
    ) -> Result<Parquet, ParquetError> {
        match std::mem::replace(&mut self.writer, Slot::Lost) {
            Slot::NotYet => Ok(Box::new(ArrowWriter::try_new(
                Vec::new(),
                schema(),
                Some(props()?),
            )?)),
            Slot::Away { done, .. } => done.recv().map_err(|_| encoder_stopped())?,
            Slot::Lost => Err(ParquetError::General(
                "an earlier row group of this file failed to encode".into(),
            )),
        }
    }

    /// Bytes held: compressed row groups, the row group with the encoder, the estimated
    /// size of the rows in builders, and [`OpenFile::OVERHEAD`].
    pub fn memory(&self) -> usize {
        let parquet = match &self.writer {
            Slot::Away { bytes, .. } => *bytes,
            Slot::NotYet | Slot::Lost => 0,
        };
        OpenFile::OVERHEAD + parquet + self.rows.bytes()
    }

    pub fn rows(&self) -> usize {
        self.total
    }

    /// Encodes what is left and the footer on the caller's thread, once the encoder has
    /// handed back the writer (a flush needs the bytes now, so nothing is gained by sending it).
    /// A file of fewer than [`SMALL_FILE_ROWS`] rows is written with Snappy.
    pub fn close(mut self) -> Result<ClosedFile, ParquetError> {
        let props = if self.total < SMALL_FILE_ROWS {
            small_file_properties
        } else {
            writer_properties
        };
        let mut writer = self.take_writer(props)?;
        if self.rows.rows() > 0 {
            writer.write(&self.rows.finish())?;
        }
        Ok(ClosedFile {
            bytes: writer.into_inner()?,
            rows: self.total,
        })
    }
}

/// The codecs of a file's column chunks, each once (a level is not in the metadata).
#[cfg(test)]
pub(crate) fn codecs(meta: &parquet::file::metadata::ParquetMetaData) -> Vec<&'static str> {
    let mut all: Vec<&str> = meta
        .row_groups()
        .iter()
        .flat_map(|g| g.columns().iter())
        .map(|c| match c.compression() {
            Compression::ZSTD(_) => "zstd",
            Compression::SNAPPY => "snappy",
            _ => "other",
        })
        .collect();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::event::EventType;

    fn sample(i: i64) -> Event<'static> {
        Event {
            kind: EventType::Track,
            event: Some("Signed Up".into()),
            session_id: Some("ses_1".into()),
            timestamp: 1_700_000_000_000_000 + i,
            original_timestamp: Some(1),
            page_url: Some("https://x.io/a".into()),
            page_path: Some("/a".into()),
            page_referrer: Some("".into()),
            device_type: Some("desktop".into()),
            locale: Some("en-US".into()),
            timezone: Some("Europe/Paris".into()),
            screen_width: Some(1920),
            ip: Some("127.0.0.1".into()),
            user_agent: Some("ua".into()),
            properties: Some("{\"plan\":\"pro\"}".into()),
            ..Event::example("app", &format!("msg_{i}"), "a", 2)
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

    #[test]
    fn an_open_file_holds_compressed_row_groups_and_at_most_two_as_arrow() {
        let mut f = OpenFile::new(&Encoder::spawn("test-encoder".into()).unwrap());
        let n = ROW_GROUP_ROWS as i64 * 6 + 10;
        let events: Vec<Event> = (0..n).map(sample).collect();
        let input: usize = events.iter().map(Event::approx_bytes).sum();
        // Runs of uneven lengths, some across a row group's end, as group commits append them.
        let refs: Vec<&Event> = events.iter().collect();
        let mut at = 0;
        for len in [1, 7, ROW_GROUP_ROWS - 9, ROW_GROUP_ROWS * 2, 3]
            .into_iter()
            .cycle()
        {
            let end = (at + len).min(refs.len());
            f.append(&refs[at..end]).unwrap();
            at = end;
            if at == refs.len() {
                break;
            }
        }
        // Compressed row groups (about a fifth of the rows' size), one row group with the
        // encoder and one in builders (a seventh each): not the whole file as Arrow.
        assert!(
            f.memory() < input / 2,
            "memory {} for {input} bytes of events",
            f.memory()
        );
        let closed = f.close().unwrap();
        assert_eq!(closed.rows, n as usize);
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            bytes::Bytes::from(closed.bytes),
        )
        .unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 7);
        // A file with full row groups is zstd throughout, its last, partial one too.
        assert_eq!(super::codecs(reader.metadata()), ["zstd"]);
        let mut times = Vec::new();
        for batch in reader.build().unwrap() {
            let batch = batch.unwrap();
            let column = batch.column_by_name("timestamp").unwrap();
            let column = column
                .as_any()
                .downcast_ref::<arrow_array::TimestampMicrosecondArray>()
                .unwrap();
            times.extend(column.values().iter().copied());
        }
        let sent: Vec<i64> = events.iter().map(|e| e.timestamp).collect();
        assert_eq!(times, sent, "every row once, in order");
    }

    #[test]
    fn a_file_of_fewer_than_small_file_rows_is_snappy() {
        let encoder = Encoder::spawn("test-encoder".into()).unwrap();
        let events: Vec<Event> = (0..SMALL_FILE_ROWS as i64).map(sample).collect();
        let refs: Vec<&Event> = events.iter().collect();
        for (rows, codec) in [
            (40, "snappy"),
            (SMALL_FILE_ROWS - 1, "snappy"),
            (SMALL_FILE_ROWS, "zstd"),
        ] {
            let mut f = OpenFile::new(&encoder);
            f.append(&refs[..rows]).unwrap();
            let closed = f.close().unwrap();
            let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                bytes::Bytes::from(closed.bytes),
            )
            .unwrap();
            assert_eq!(super::codecs(reader.metadata()), [codec], "{rows} rows");
            let read: usize = reader.build().unwrap().map(|b| b.unwrap().num_rows()).sum();
            assert_eq!(read, rows);
        }
    }

    /// Parquet makes and drops a zstd codec per column per row group; their memory (glibc's, C
    /// code) stays in the thread's arena for the next row group instead of going back to the
    /// system and faulting in again (`memory::configure_allocator`).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_row_group_encoded_again_reuses_the_zstd_contexts_memory() {
        crate::memory::configure_allocator();
        std::thread::spawn(|| {
            let events: Vec<Event> = (0..ROW_GROUP_ROWS as i64).map(sample).collect();
            let mut b = RowBuilder::default();
            b.append_all(&events.iter().collect::<Vec<_>>());
            let batch = b.finish();
            let props = writer_properties().unwrap();
            // The count sees fresh memory touched: 64 MiB (mapped on its own), a page at a time
            // (16 384 faults, or 32 where transparent huge pages are always on).
            let before = crate::memory::thread_page_faults();
            let mut fresh = vec![0u8; 64 << 20];
            for b in fresh.iter_mut().step_by(4096) {
                *b = 1;
            }
            std::hint::black_box(&fresh);
            assert!(crate::memory::thread_page_faults() - before >= 32);
            drop(fresh);
            let mut out = Vec::with_capacity(64 << 20);
            let mut faults = Vec::new();
            for _ in 0..3 {
                out.clear();
                let before = crate::memory::thread_page_faults();
                let mut w = ArrowWriter::try_new(&mut out, schema(), Some(props.clone())).unwrap();
                w.write(&batch).unwrap();
                w.close().unwrap();
                faults.push(crate::memory::thread_page_faults() - before);
            }
            // The first row group faults its contexts in (about 1 500 pages in a fresh process);
            // a later one finds them in the arena (100 to 200 pages here; about 950 with glibc's
            // defaults).
            assert!(faults[2] < 450, "{faults:?}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_row_group_with_the_encoder_still_counts_in_the_files_memory() {
        let mut f = OpenFile::new(&Encoder::spawn("test-encoder".into()).unwrap());
        let events: Vec<Event> = (0..ROW_GROUP_ROWS as i64).map(sample).collect();
        let input: usize = events.iter().map(Event::approx_bytes).sum();
        f.append(&events.iter().collect::<Vec<_>>()).unwrap();
        assert!(matches!(f.writer, Slot::Away { .. }), "sent to the encoder");
        assert_eq!(f.rows.rows(), 0, "the builders are empty");
        // The shard's budget sums this: the group away must weigh what it holds.
        assert!(
            f.memory() >= input / 2,
            "memory {} for a row group of {input} bytes",
            f.memory()
        );
        let closed = f.close().unwrap();
        assert_eq!(closed.rows, ROW_GROUP_ROWS);
    }

    #[test]
    fn a_row_group_after_the_first_is_sized_by_the_one_before_at_its_first_row() {
        let mut b = RowBuilder::default();
        let events: Vec<Event> = (0..50).map(sample).collect();
        let refs: Vec<&Event> = events.iter().collect();
        b.append_all(&refs);
        let first = b.finish();
        let message_ids = Event::COLUMNS
            .iter()
            .position(|c| c.name == "message_id")
            .unwrap();
        let (rows, bytes) = b.last_group.clone().expect("sizes kept");
        assert_eq!(rows, 50);
        let ids: usize = events.iter().map(|e| e.message_id.len()).sum();
        assert_eq!(bytes[message_ids], ids);
        b.append_all(&[]);
        assert!(b.last_group.is_some(), "no rows: nothing sized yet");
        b.append_all(&refs);
        assert!(b.last_group.is_none(), "taken by the first row");
        assert_eq!(b.finish(), first, "the same rows, the same columns");
    }

    #[test]
    fn unique_and_json_columns_are_plain_and_every_chunk_keeps_min_and_max() {
        let mut b = RowBuilder::default();
        for i in 0..100 {
            b.append(&sample(i));
        }
        let bytes = encode_parquet(&b.finish()).unwrap();
        let meta =
            parquet::file::serialized_reader::SerializedFileReader::new(bytes::Bytes::from(bytes))
                .map(|r| parquet::file::reader::FileReader::metadata(&r).clone())
                .unwrap();
        let group = meta.row_group(0);
        let chunk = |name: &str| {
            group
                .columns()
                .iter()
                .find(|c| c.column_path().string() == name)
                .unwrap()
        };
        for name in PLAIN_COLUMNS {
            assert!(chunk(name).dictionary_page_offset().is_none(), "{name}");
        }
        // Repeated values (one visitor, one page) keep their dictionary.
        assert!(chunk("page_url").dictionary_page_offset().is_some());
        // Row groups can be skipped by time: each chunk has its min and max.
        let stats = chunk("timestamp").statistics().unwrap();
        assert_eq!(
            (stats.min_bytes_opt(), stats.max_bytes_opt()),
            (
                Some(&1_700_000_000_000_000i64.to_le_bytes()[..]),
                Some(&1_700_000_000_000_099i64.to_le_bytes()[..])
            )
        );
        // No page index: page statistics cost more than they save on files of this size.
        assert!(chunk("timestamp").column_index_offset().is_none());
        // Free text and JSON have none; names that filter keep theirs.
        for name in NO_STATISTICS {
            assert!(chunk(name).statistics().is_none(), "{name}");
        }
        assert!(chunk("event").statistics().is_some());
    }

    #[test]
    fn the_person_ids_have_bloom_filters_that_tell_absent_ids_apart() {
        let mut b = RowBuilder::default();
        for i in 0..1000 {
            let mut e = sample(i);
            e.anonymous_id = Some(format!("anon-{i}").into());
            e.user_id = Some(format!("user-{i}").into());
            b.append(&e);
        }
        let bytes = bytes::Bytes::from(encode_parquet(&b.finish()).unwrap());
        let options = parquet::file::serialized_reader::ReadOptionsBuilder::new()
            .with_reader_properties(
                parquet::file::properties::ReaderProperties::builder()
                    .set_read_bloom_filter(true)
                    .build(),
            )
            .build();
        let reader = parquet::file::serialized_reader::SerializedFileReader::new_with_options(
            bytes, options,
        )
        .unwrap();
        let group = parquet::file::reader::FileReader::get_row_group(&reader, 0).unwrap();
        let index = |name: &str| {
            let schema = group.metadata().schema_descr();
            (0..schema.num_columns())
                .find(|&i| schema.column(i).path().string() == name)
                .unwrap()
        };
        for (name, prefix) in [("anonymous_id", "anon"), ("user_id", "user")] {
            let filter = group.get_column_bloom_filter(index(name)).expect(name);
            for i in 0..1000 {
                assert!(
                    filter.check(&format!("{prefix}-{i}").as_str()),
                    "{name} {i}"
                );
            }
            let false_positives = (1000..3000)
                .filter(|i| filter.check(&format!("{prefix}-{i}").as_str()))
                .count();
            assert!(false_positives < 100, "{name}: {false_positives} of 2000");
        }
        // Columns nobody looks a person up by carry none.
        assert!(group.get_column_bloom_filter(index("event")).is_none());
        // A file of a few rows does not carry two filters of 32 KiB.
        let mut b = RowBuilder::default();
        for i in 0..10 {
            b.append(&sample(i));
        }
        let small = encode_parquet(&b.finish()).unwrap().len();
        assert!(small < 16 * 1024, "{small} bytes");
    }
}
