//! The merger: a shard's parts become lake files sized for readers.
//!
//! The stager writes each flush's files as parts (`<shard>/parts/<lake path>`, fsync'd before
//! the checkpoint, kept by `outbox.rs`'s rules). The parts of one lake directory (one app and
//! hour) wait there until they are due, then become one file in the outbox, named after the
//! group's first part. A group is due when:
//! - its parts reach `collector.lake_file_mb` (a busy app's files are that large);
//! - its hour is over, [`HOUR_GRACE`] after the hour, and every row of it is staged (the writer
//!   hands an hour's last rows over within a tick of its end, `shard::Handed`): a quiet app
//!   gets one file per hour and shard;
//! - its oldest part has waited `collector.lake_file_max_wait_ms`, when that is not 0 (a fresher
//!   lake, more files);
//! - its app is being settled (`settle.rs`: an erasure, an app deletion), or the server stops;
//! - the parts of all groups pass their share of the backlog budget ([`Policy::max_parts`]):
//!   the biggest groups go first.
//!
//! Only parts at or below the checkpoint are merged: a part beyond it (staged, checkpoint not
//! yet written) may be written again by a WAL replay.
//!
//! One part alone moves with a rename. Several are written as one file, row group by row group
//! (`write_merged`): a lake-sized row group (zstd, at least half `ROW_GROUP_ROWS` rows: a busy
//! app's) is appended as it is (bytes, statistics, Bloom filters and page indexes copied, nothing
//! decoded), so merging a busy app costs disk reads and writes, not CPU; the rows of the small ones
//! (a quiet app's flushes, Snappy under 1 024 rows, and a busy file's last rows) are decoded and
//! written again, zstd, in row groups of about `ROW_GROUP_ROWS` rows: a quiet app's hour becomes
//! one row group, and no lake file is a string of tiny ones. Memory: a decoded batch of 1 024 rows
//! and one row group's encoded pages.
//!
//! Crash safety: the merged file is written to `<shard>/merging.parquet` and fsync'd; the
//! manifest `<shard>/merging` (the outbox path, then the parts) is written atomically; the file
//! is renamed into the outbox; the parts are deleted; the manifest is deleted. At start
//! ([`recover`]) a manifest finishes the move (the merged file is durable), and without one the
//! half-written file is dropped (its parts are all still there). So a row is in a part or in a
//! merged file, never in both, and a reader never sees a file half-written.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io;
use std::path::Path as FsPath;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arrow_array::RecordBatch;
use object_store::path::Path;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnWriter, ArrowRowGroupWriterFactory, ArrowWriterOptions,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::bloom_filter::Sbbf;
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::writer::SerializedFileWriter;

use super::columns::{self, ROW_GROUP_ROWS};
use super::outbox::{Outbox, Staged};
use crate::storage::files::{sync_dir, write_atomic};

/// How long after an hour ends its parts are merged (once the writer has handed all of its
/// rows over): a batch stamped in the hour may wait this long in its shard's queue and still
/// land in the hour's one file.
pub const HOUR_GRACE: Duration = Duration::from_secs(10);
const MANIFEST: &str = "merging";
const MERGING: &str = "merging.parquet";
const HOUR_MICROS: i64 = 3_600_000_000;

/// The apps being settled (a count each: two jobs may settle one app).
#[derive(Debug, Default)]
pub struct Urgent(Mutex<HashMap<String, usize>>);

impl Urgent {
    pub fn contains(&self, app: &str) -> bool {
        self.lock().contains_key(app)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `app` urgent until the guard is dropped.
    pub fn hold(self: &Arc<Self>, app: &str) -> Held {
        *self.lock().entry(app.to_owned()).or_default() += 1;
        Held {
            urgent: self.clone(),
            app: app.to_owned(),
        }
    }
}

pub struct Held {
    urgent: Arc<Urgent>,
    app: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut apps = self.urgent.lock();
        if let Some(n) = apps.get_mut(&self.app) {
            *n -= 1;
            if *n == 0 {
                apps.remove(&self.app);
            }
        }
    }
}

/// When a group of parts is due. The default (tests of other steps) merges at once.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// `collector.lake_file_mb`.
    pub file_bytes: u64,
    /// `collector.lake_file_max_wait_ms`; `None`: until the hour is over.
    pub max_wait: Option<Duration>,
    /// Parts (all groups of the shard) beyond which the biggest groups are merged early: a
    /// quarter of the backlog budget over the shards.
    pub max_parts: u64,
}

/// Why a merge failed: the parts stay, it is tried again.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("merging parts: {0}")]
    Io(#[from] io::Error),
    #[error("merging parts: {0}")]
    Parquet(#[from] ParquetError),
    #[error("merging parts: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
}

/// A group of parts: one lake directory (app, day, hour), oldest part first.
#[derive(Debug)]
pub struct Group {
    pub parts: Vec<Staged>,
}

impl Group {
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }

    fn app_id(&self) -> &str {
        self.parts[0].app_id()
    }

    /// Start of the group's hour (µs), from `dt=YYYY-MM-DD/hour=HH` in its path.
    fn hour_start(&self) -> Option<i64> {
        let path = self.parts[0].path.as_ref();
        let dt = path.split('/').find_map(|p| p.strip_prefix("dt="))?;
        let hour: u32 = path
            .split('/')
            .find_map(|p| p.strip_prefix("hour="))?
            .parse()
            .ok()?;
        let day = chrono::NaiveDate::parse_from_str(dt, "%Y-%m-%d").ok()?;
        Some(day.and_hms_opt(hour, 0, 0)?.and_utc().timestamp_micros())
    }

    /// Whether the group is due by its own measure (size, hour, wait; not the shard's budget).
    pub fn due(&self, policy: &Policy, now: &Now) -> bool {
        // Over on the clock, and every row of it staged: none open in the writer, none handed
        // over and not yet checkpointed (so the hour's last rows are in this group).
        let hour_over = self.hour_start().is_none_or(|start| {
            now.micros >= start + HOUR_MICROS + HOUR_GRACE.as_micros() as i64
                && start.div_euclid(HOUR_MICROS) < now.hours_done
        });
        let waited = policy.max_wait.is_some_and(|wait| {
            let oldest = self.parts.iter().map(|p| p.staged_at).min();
            oldest.is_some_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() >= wait)
        });
        hour_over
            || waited
            || self.bytes() >= policy.file_bytes
            || now.urgent.contains(self.app_id())
    }
}

/// What a merge round knows of the moment.
pub struct Now<'a> {
    pub micros: i64,
    pub urgent: &'a Urgent,
    /// Hours (µs / hour) below this one have every committed row in parts at or below the
    /// checkpoint (`shard::Handed::hours_done`).
    pub hours_done: i64,
}

/// The shard's parts at or below `checkpoint`, grouped by lake directory.
pub fn groups(parts: &Outbox, checkpoint: u64) -> io::Result<Vec<Group>> {
    let mut by_dir: BTreeMap<String, Vec<Staged>> = BTreeMap::new();
    for p in parts
        .list()?
        .into_iter()
        .filter(|p| p.first_lsn <= checkpoint)
    {
        let dir = p
            .path
            .as_ref()
            .rsplit_once('/')
            .map_or("", |(d, _)| d)
            .to_owned();
        by_dir.entry(dir).or_default().push(p);
    }
    Ok(by_dir.into_values().map(|parts| Group { parts }).collect())
}

/// Which groups to merge now: the due ones, then, while the parts left pass `max_parts`, the
/// biggest of the rest. Every group when `all` (the server stops).
pub fn choose(groups: Vec<Group>, policy: &Policy, now: &Now, all: bool) -> Vec<Group> {
    let (mut due, mut rest): (Vec<Group>, Vec<Group>) =
        groups.into_iter().partition(|g| all || g.due(policy, now));
    let mut left: u64 = rest.iter().map(Group::bytes).sum();
    rest.sort_by_key(|g| std::cmp::Reverse(g.bytes()));
    for g in rest {
        if left <= policy.max_parts {
            break;
        }
        left -= g.bytes();
        due.push(g);
    }
    due
}

/// What a merge put into the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merged {
    /// Bytes of the new outbox file(s).
    pub bytes: u64,
    /// Outbox files added.
    pub files: u64,
    /// Parts removed, and their bytes.
    pub parts: u64,
    pub parts_bytes: u64,
}

/// Moves a group's parts into the outbox as one file (or, parts of differing schemas, one
/// file each: only after an upgrade that added columns).
pub fn merge(
    shard_dir: &FsPath,
    parts: &Outbox,
    outbox: &Outbox,
    group: &Group,
) -> Result<Merged, MergeError> {
    let parts_bytes = group.bytes();
    let done = Merged {
        bytes: parts_bytes,
        files: 1,
        parts: group.parts.len() as u64,
        parts_bytes,
    };
    if group.parts.len() == 1 {
        move_part(parts, outbox, &group.parts[0])?;
        return Ok(done);
    }
    let metas = group
        .parts
        .iter()
        .map(|p| read_meta(&p.file))
        .collect::<Result<Vec<_>, _>>()?;
    let schema = metas[0].file_metadata().schema();
    if metas.iter().any(|m| m.file_metadata().schema() != schema) {
        for p in &group.parts {
            move_part(parts, outbox, p)?;
        }
        return Ok(Merged {
            files: done.parts,
            ..done
        });
    }
    let tmp = shard_dir.join(MERGING);
    let written = write_merged(group, &metas, File::create(&tmp)?);
    let out = match written {
        Ok(f) => f,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    out.sync_all()?;
    let bytes = out.metadata()?.len();
    let target = &group.parts[0].path;
    let mut manifest = format!("{target}\n");
    for p in &group.parts {
        manifest.push_str(p.path.as_ref());
        manifest.push('\n');
    }
    write_atomic(shard_dir, MANIFEST, manifest.as_bytes())?;
    finish(
        shard_dir,
        outbox,
        target,
        group.parts.iter().map(|p| &p.path),
    )?;
    Ok(Merged { bytes, ..done })
}

/// The move a manifest promises: the merged file into the outbox (unless it is there already),
/// the parts deleted, the manifest deleted.
fn finish<'p>(
    shard_dir: &FsPath,
    outbox: &Outbox,
    target: &Path,
    parts: impl Iterator<Item = &'p Path>,
) -> io::Result<()> {
    let tmp = shard_dir.join(MERGING);
    if tmp.exists() {
        let file = outbox.local(target);
        let dir = file.parent().unwrap_or(shard_dir).to_path_buf();
        fs::create_dir_all(&dir)?;
        fs::rename(&tmp, &file)?;
        sync_dir(&dir)?;
        sync_dir(shard_dir)?;
    }
    let store = Outbox::parts(shard_dir);
    for p in parts {
        let file = store.local(p);
        let dir = file.parent().map(FsPath::to_path_buf);
        store.remove(&Staged {
            path: p.clone(),
            file,
            bytes: 0,
            first_lsn: 0,
            staged_at: SystemTime::UNIX_EPOCH,
        })?;
        // The removal made durable before the manifest goes (a directory emptied is gone).
        if let Some(dir) = dir.filter(|d| d.is_dir()) {
            sync_dir(&dir)?;
        }
    }
    match fs::remove_file(shard_dir.join(MANIFEST)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    sync_dir(shard_dir)
}

/// At start, before the outbox and the parts are recovered, and before each merge round (a
/// merge that failed after its manifest, on a disk error, is finished before anything else is
/// merged, or its parts would be merged again under another name): finishes a merge its
/// manifest promised, or drops a merged file no manifest names. Returns whether a merge was
/// finished.
pub fn recover(shard_dir: &FsPath) -> io::Result<bool> {
    let manifest = match fs::read_to_string(shard_dir.join(MANIFEST)) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match fs::remove_file(shard_dir.join(MERGING)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => return Ok(false),
            }
        }
        Err(e) => return Err(e),
    };
    let mut lines = manifest.lines().filter(|l| !l.is_empty()).map(Path::from);
    let Some(target) = lines.next() else {
        fs::remove_file(shard_dir.join(MANIFEST))?;
        return Ok(false);
    };
    let parts: Vec<Path> = lines.collect();
    finish(shard_dir, &Outbox::new(shard_dir), &target, parts.iter())?;
    tracing::info!(path = %target, parts = parts.len(), "merge cut by a stop finished");
    Ok(true)
}

/// A part alone: renamed into the outbox.
fn move_part(parts: &Outbox, outbox: &Outbox, part: &Staged) -> io::Result<()> {
    let file = outbox.local(&part.path);
    let dir = file.parent().map(FsPath::to_path_buf).unwrap_or_default();
    fs::create_dir_all(&dir)?;
    fs::rename(&part.file, &file)?;
    sync_dir(&dir)?;
    if let Some(from) = part.file.parent() {
        sync_dir(from)?;
    }
    // The directories the part leaves empty.
    parts.remove(part)
}

fn read_meta(file: &FsPath) -> Result<Arc<ParquetMetaData>, MergeError> {
    let f = File::open(file)?;
    Ok(Arc::new(
        ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Optional)
            .parse_and_finish(&f)?,
    ))
}

/// The parts' row groups into one file: a lake-sized row group (zstd, at least half
/// [`ROW_GROUP_ROWS`] rows: a busy app's) is appended as it is (bytes, statistics, Bloom
/// filters and page indexes copied, nothing decoded); the rows of the others (a quiet app's
/// flushes, Snappy, and a busy file's last rows) are decoded a batch at a time and gather in a
/// row group of their own, zstd, appended when it reaches [`ROW_GROUP_ROWS`] rows and at the end
/// (so rows are not in the parts' order; a lake file's rows have none). Memory: one decoded
/// batch and the encoded pages of the row group gathering.
fn write_merged(
    group: &Group,
    metas: &[Arc<ParquetMetaData>],
    out: File,
) -> Result<File, MergeError> {
    let arrow_metas = metas
        .iter()
        .map(|m| ArrowReaderMetadata::try_new(m.clone(), ArrowReaderOptions::new()))
        .collect::<Result<Vec<_>, _>>()?;
    let options = ArrowWriterOptions::new()
        .with_properties(columns::writer_properties()?)
        .with_parquet_schema(metas[0].file_metadata().schema_descr().clone());
    let (mut writer, factory) =
        ArrowWriter::try_new_with_options(out, arrow_metas[0].schema().clone(), options)?
            .into_serialized_writer()?;
    let mut rows = Rows::default();
    for ((p, meta), arrow_meta) in group.parts.iter().zip(metas).zip(&arrow_metas) {
        let input = File::open(&p.file)?;
        for (g, rg) in meta.row_groups().iter().enumerate() {
            if rg.num_rows() as usize >= ROW_GROUP_ROWS / 2
                && rg
                    .columns()
                    .iter()
                    .all(|c| matches!(c.compression(), Compression::ZSTD(_)))
            {
                copy_row_group(&mut writer, &input, meta, g)?;
                continue;
            }
            let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(
                input.try_clone()?,
                arrow_meta.clone(),
            )
            .with_row_groups(vec![g])
            .with_batch_size(1024)
            .build()?;
            for batch in reader {
                rows.write(&factory, &writer, &batch?)?;
                if rows.count >= ROW_GROUP_ROWS {
                    rows.close(&mut writer)?;
                }
            }
        }
    }
    rows.close(&mut writer)?;
    Ok(writer.into_inner()?)
}

/// A row group being written again from decoded rows.
#[derive(Default)]
struct Rows {
    writers: Vec<ArrowColumnWriter>,
    count: usize,
}

impl Rows {
    fn write(
        &mut self,
        factory: &ArrowRowGroupWriterFactory,
        file: &SerializedFileWriter<File>,
        batch: &RecordBatch,
    ) -> Result<(), MergeError> {
        if self.writers.is_empty() {
            self.writers = factory.create_column_writers(file.flushed_row_groups().len())?;
        }
        let mut writers = self.writers.iter_mut();
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            for leaf in compute_leaves(field, column)? {
                let w = writers
                    .next()
                    .ok_or_else(|| io::Error::other("a part has more columns than its schema"))?;
                w.write(&leaf)?;
            }
        }
        self.count += batch.num_rows();
        Ok(())
    }

    /// Appends the row group, if rows were written.
    fn close(&mut self, file: &mut SerializedFileWriter<File>) -> Result<(), MergeError> {
        if self.count == 0 {
            return Ok(());
        }
        let mut rg = file.next_row_group()?;
        for w in std::mem::take(&mut self.writers) {
            w.close()?.append_to_row_group(&mut rg)?;
        }
        rg.close()?;
        self.count = 0;
        Ok(())
    }
}

/// Appends row group `g` of a part as it is.
fn copy_row_group(
    writer: &mut SerializedFileWriter<File>,
    input: &File,
    meta: &ParquetMetaData,
    g: usize,
) -> Result<(), MergeError> {
    let rg = meta.row_group(g);
    let page_index = meta.page_index();
    let mut rg_out = writer.next_row_group()?;
    for (c, column) in rg.columns().iter().enumerate() {
        let result = ColumnCloseResult {
            bytes_written: column.compressed_size() as u64,
            rows_written: rg.num_rows() as u64,
            metadata: column.clone(),
            bloom_filter: Sbbf::read_from_column_chunk(column, input).ok().flatten(),
            column_index: page_index.and_then(|pi| pi.column_index(g, c)).cloned(),
            offset_index: page_index.and_then(|pi| pi.offset_index(g, c)).cloned(),
        };
        rg_out.append_column(input, result)?;
    }
    rg_out.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::columns::{codecs, Encoder, OpenFile};
    use crate::collector::event::Event;
    use crate::collector::lake;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::serialized_reader::ReadOptionsBuilder;

    /// 2026-11-26T10:00:00Z.
    const HOUR10: i64 = 1_795_687_200_000_000;

    fn part_path(app: &str, hour_micros: i64, lsn: u64) -> Path {
        let hour = chrono::DateTime::from_timestamp_micros(hour_micros).unwrap();
        lake::file_path("", app, hour, "n0", 0, lsn)
    }

    /// A part of `rows` events of visitors `v<first>..`, written to `parts` as the stager does.
    fn write_part(parts: &Outbox, app: &str, lsn: u64, first: usize, rows: usize) {
        let mut f = OpenFile::new(&Encoder::spawn("test-encoder".into()).unwrap());
        for i in first..first + rows {
            let mut e = Event::example(app, &format!("m{i}"), &format!("v{i}"), HOUR10 + 1);
            e.user_id = Some(format!("u{i}").into());
            f.append(&[&e]).unwrap();
        }
        let closed = f.close().unwrap();
        parts
            .write(&part_path(app, HOUR10, lsn), &closed.bytes)
            .unwrap();
    }

    fn staged(path: Path, bytes: u64) -> Staged {
        Staged {
            first_lsn: 0,
            file: std::path::PathBuf::from(path.as_ref()),
            path,
            bytes,
            staged_at: SystemTime::now(),
        }
    }

    fn policy() -> Policy {
        Policy {
            file_bytes: 100,
            max_wait: None,
            max_parts: 150,
        }
    }

    fn apps(groups: &[Group]) -> Vec<&str> {
        let mut a: Vec<&str> = groups.iter().map(Group::app_id).collect();
        a.sort();
        a
    }

    #[test]
    fn a_group_is_due_by_size_hour_end_urgency_or_the_shards_budget() {
        let group = |app: &str, sizes: &[u64]| Group {
            parts: sizes
                .iter()
                .enumerate()
                .map(|(i, &b)| staged(part_path(app, HOUR10, i as u64), b))
                .collect(),
        };
        let urgent = Arc::new(Urgent::default());
        let at = |micros: i64, hours_done: i64| Now {
            micros,
            urgent: &urgent,
            hours_done,
        };
        let during = at(HOUR10 + 30 * 60_000_000, HOUR10 / HOUR_MICROS);
        let p = policy();
        assert!(!group("a", &[40, 50]).due(&p, &during));
        assert!(group("a", &[40, 60]).due(&p, &during), "size");
        let after = HOUR10 + HOUR_MICROS + HOUR_GRACE.as_micros() as i64;
        let staged_all = HOUR10 / HOUR_MICROS + 1;
        assert!(!group("a", &[1]).due(&p, &at(after - 1, staged_all)));
        assert!(
            group("a", &[1]).due(&p, &at(after, staged_all)),
            "hour over"
        );
        assert!(
            !group("a", &[1]).due(&p, &at(after, staged_all - 1)),
            "the writer still holds rows of the hour"
        );
        let held = urgent.hold("a");
        assert!(group("a", &[1]).due(&p, &during), "settling");
        drop(held);
        assert!(!group("a", &[1]).due(&p, &during));
        let waited = Policy {
            max_wait: Some(Duration::ZERO),
            ..policy()
        };
        assert!(group("a", &[1]).due(&waited, &during), "waited");

        // 90 + 80 + 10 = 180 bytes of parts over a budget of 150: the biggest goes early.
        let all = || vec![group("a", &[90]), group("b", &[80]), group("c", &[10])];
        let chosen = choose(all(), &p, &during, false);
        assert_eq!(apps(&chosen), ["a"]);
        assert_eq!(apps(&choose(all(), &p, &during, true)), ["a", "b", "c"]);
    }

    fn message_ids(file: &FsPath) -> Vec<String> {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(file).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let mut ids = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let col = batch.column_by_name("message_id").unwrap();
            let col = arrow_array::cast::AsArray::as_string::<i32>(col);
            ids.extend(col.iter().map(|v| v.unwrap().to_owned()));
        }
        ids.sort();
        ids
    }

    fn expected(ranges: &[(usize, usize)]) -> Vec<String> {
        let mut ids: Vec<String> = ranges
            .iter()
            .flat_map(|&(first, n)| (first..first + n).map(|i| format!("m{i}")))
            .collect();
        ids.sort();
        ids
    }

    /// Merges the parts `sizes` (rows each) of app "a" in a fresh shard; returns the merged
    /// file's path and the shard.
    fn merged(sizes: &[usize]) -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let (parts, outbox) = (Outbox::parts(tmp.path()), Outbox::new(tmp.path()));
        let mut first = 0;
        for (lsn, &rows) in sizes.iter().enumerate() {
            write_part(&parts, "a", lsn as u64 + 1, first, rows);
            first += rows;
        }
        let mut gs = groups(&parts, u64::MAX).unwrap();
        assert_eq!(gs.len(), 1);
        let group = gs.remove(0);
        let m = merge(tmp.path(), &parts, &outbox, &group).unwrap();
        assert_eq!((m.files, m.parts), (1, sizes.len() as u64));
        assert!(parts.list().unwrap().is_empty(), "the parts are gone");
        let out = outbox.list().unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].path,
            part_path("a", HOUR10, 1),
            "named after the first"
        );
        assert_eq!(out[0].bytes, m.bytes);
        let file = out[0].file.clone();
        (tmp, file)
    }

    /// The rows of each row group, and whether each one's Bloom filter of `user_id` holds
    /// `user`.
    fn row_groups_and_bloom(file: &FsPath, user: &str) -> Vec<(i64, bool)> {
        let options = ReadOptionsBuilder::new()
            .with_reader_properties(
                parquet::file::properties::ReaderProperties::builder()
                    .set_read_bloom_filter(true)
                    .build(),
            )
            .build();
        let r = SerializedFileReader::new_with_options(File::open(file).unwrap(), options).unwrap();
        let descr = r.metadata().file_metadata().schema_descr_ptr();
        let column = (0..descr.num_columns())
            .find(|&i| descr.column(i).name() == "user_id")
            .unwrap();
        (0..r.metadata().num_row_groups())
            .map(|g| {
                let group = r.get_row_group(g).unwrap();
                let bloom = group.get_column_bloom_filter(column).unwrap();
                (group.metadata().num_rows(), bloom.check(&user))
            })
            .collect()
    }

    #[test]
    fn a_small_group_is_written_again_as_one_zstd_row_group() {
        let (_tmp, file) = merged(&[3, 5, 2]);
        assert_eq!(message_ids(&file), expected(&[(0, 10)]));
        assert_eq!(row_groups_and_bloom(&file, "u3"), [(10, true)]);
        assert!(row_groups_and_bloom(&file, "nobody")
            .iter()
            .all(|&(_, holds)| !holds));
        // The parts are Snappy (files of under 1 024 rows); the lake file is zstd.
        assert_eq!(codecs(&read_meta(&file).unwrap()), ["zstd"]);
    }

    #[test]
    fn full_row_groups_are_copied_and_the_small_ones_gather_in_one() {
        // Two busy files (a full row group and 3 616 rows each) and a quiet flush of 30.
        let (_tmp, file) = merged(&[20_000, 20_000, 30]);
        assert_eq!(message_ids(&file), expected(&[(0, 40_030)]));
        let full = ROW_GROUP_ROWS as i64;
        // Each full row group copied with its Bloom filter; the rest in one, written again.
        assert_eq!(
            row_groups_and_bloom(&file, "u3"),
            [(full, true), (full, false), (40_030 - 2 * full, false)]
        );
        assert_eq!(
            row_groups_and_bloom(&file, "u20000"),
            [(full, false), (full, true), (40_030 - 2 * full, false)]
        );
        assert_eq!(
            row_groups_and_bloom(&file, "u40010"),
            [(full, false), (full, false), (40_030 - 2 * full, true)]
        );
        assert_eq!(codecs(&read_meta(&file).unwrap()), ["zstd"]);
    }

    #[test]
    fn small_row_groups_beyond_a_full_one_are_cut_into_full_ones() {
        // 3 x 6 000 rows (zstd, under half a row group): one full row group and the rest.
        let (_tmp, file) = merged(&[6_000, 6_000, 6_000]);
        assert_eq!(message_ids(&file), expected(&[(0, 18_000)]));
        let rows: Vec<i64> = row_groups_and_bloom(&file, "u3")
            .iter()
            .map(|&(n, _)| n)
            .collect();
        // Cut at the first batch (1 024 rows) that reaches a full row group.
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows[0] >= ROW_GROUP_ROWS as i64 && rows[0] < ROW_GROUP_ROWS as i64 + 1024);
        assert_eq!(codecs(&read_meta(&file).unwrap()), ["zstd"]);
    }

    #[test]
    fn a_merge_cut_after_its_manifest_finishes_at_start_and_one_cut_before_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (parts, outbox) = (Outbox::parts(dir), Outbox::new(dir));
        write_part(&parts, "a", 1, 0, 2);
        write_part(&parts, "a", 2, 2, 2);
        // Cut before the manifest: the half-made file goes, the parts stay.
        fs::write(dir.join(MERGING), b"half").unwrap();
        assert!(!recover(dir).unwrap());
        assert!(!dir.join(MERGING).exists());
        assert_eq!(parts.list().unwrap().len(), 2);

        // Cut after the manifest, before the rename: the move is finished.
        let group = groups(&parts, u64::MAX).unwrap().remove(0);
        let metas: Vec<_> = group
            .parts
            .iter()
            .map(|p| read_meta(&p.file).unwrap())
            .collect();
        write_merged(&group, &metas, File::create(dir.join(MERGING)).unwrap()).unwrap();
        let target = part_path("a", HOUR10, 1);
        let manifest = format!(
            "{target}\n{}\n{}\n",
            group.parts[0].path, group.parts[1].path
        );
        write_atomic(dir, MANIFEST, manifest.as_bytes()).unwrap();
        assert!(recover(dir).unwrap());
        assert!(parts.list().unwrap().is_empty());
        assert!(!dir.join(MANIFEST).exists());
        let shipped = outbox.list().unwrap();
        assert_eq!(shipped.len(), 1);
        assert_eq!(message_ids(&shipped[0].file), expected(&[(0, 4)]));
        // Recovering again (a crash during recovery) changes nothing.
        assert!(!recover(dir).unwrap());
        assert_eq!(outbox.list().unwrap().len(), 1);
    }
}
