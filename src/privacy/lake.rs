//! An erasure's lake side: the person's rows out of every file of the app, each file rewritten
//! at the same path.
//!
//! `list (events/app_id=<app>/, sorted) -> per file: footer (two ranged reads) -> skip it when
//! no row group's statistics and Bloom filters on user_id / anonymous_id can hold the ids ->
//! else download to a scratch file, read it row group by row group without the person's rows,
//! write the rest with the lake's writer properties -> put at the same path`
//!
//! A reader sees the old file or the new one, never both or neither: a put replaces an object
//! atomically on S3 (a plain PUT, or a multipart upload's completion), and `object_store`'s
//! local store writes a staging file, fsyncs it and renames it over the old one. Memory stays
//! bounded whatever the file's size: one row group decoded at a time, uploads in parts of
//! `part_bytes`.
//!
//! A rewritten file carries `tributary.erasure = "<job id> <rows removed>"` in its key-value
//! metadata, so a job that rewrote a file and stopped before recording it counts the rows
//! again from the footer on resume instead of rewriting it.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::sync::Arc;

use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use parquet::arrow::arrow_reader::{ArrowPredicateFn, ParquetRecordBatchReaderBuilder, RowFilter};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::bloom_filter::Sbbf;
use parquet::errors::ParquetError;
use parquet::file::metadata::{KeyValue, ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData};
use parquet::file::statistics::Statistics;

use super::model::Person;

/// The key-value metadata a rewritten file carries: `<job id> <rows removed>`.
pub const MARK: &str = "tributary.erasure";
/// The lake's columns that hold a person's ids.
const USER: &str = "user_id";
const ANONYMOUS: &str = "anonymous_id";

#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    #[error("parquet {path}: {cause}")]
    Parquet { path: String, cause: ParquetError },
    #[error("scratch file: {0}")]
    Scratch(#[from] std::io::Error),
}

/// What became of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its statistics and Bloom filters rule the person out (or it is gone): not read.
    Skipped,
    /// Read, and none of its rows was the person's: left as it was.
    Clean,
    /// Rewritten without `rows` rows (by this job, now or before a restart).
    Rewritten { rows: u64 },
}

/// The person's ids as the lake's columns hold them.
#[derive(Debug, Clone, Default)]
pub struct Ids {
    users: BTreeSet<String>,
    anonymous: BTreeSet<String>,
}

impl Ids {
    pub fn of(person: &Person) -> Ids {
        Ids {
            users: person.user_id.iter().cloned().collect(),
            anonymous: person.anonymous_ids.clone(),
        }
    }

    fn is_empty(&self) -> bool {
        self.users.is_empty() && self.anonymous.is_empty()
    }

    /// Which rows of a batch (its user_id and anonymous_id columns) are kept.
    fn keep(&self, batch: &RecordBatch) -> BooleanArray {
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        };
        let (user, anon) = (column(USER), column(ANONYMOUS));
        let hit = |c: Option<&StringArray>, ids: &BTreeSet<String>, i: usize| {
            c.is_some_and(|c| c.is_valid(i) && ids.contains(c.value(i)))
        };
        (0..batch.num_rows())
            .map(|i| Some(!(hit(user, &self.users, i) || hit(anon, &self.anonymous, i))))
            .collect()
    }
}

/// Every Parquet file of `app`, in path order (the order a job resumes in).
pub async fn files(
    lake: &dyn ObjectStore,
    prefix: &str,
    app: &str,
) -> Result<Vec<Path>, object_store::Error> {
    let dir = crate::collector::lake::app_dir(prefix, app);
    let mut paths: Vec<Path> = lake
        .list(Some(&dir))
        .map_ok(|m| m.location)
        .try_filter(|p| std::future::ready(p.as_ref().ends_with(".parquet")))
        .try_collect()
        .await?;
    paths.sort();
    Ok(paths)
}

/// Rewrites lake files without a person's rows.
pub struct Rewriter {
    pub lake: Arc<dyn ObjectStore>,
    /// A directory for the file being rewritten (two files at a time).
    pub scratch: std::path::PathBuf,
    /// Files up to this size are put whole; larger ones go up in parts of it.
    pub part_bytes: usize,
}

impl Rewriter {
    /// Removes the rows of `ids` from the file at `path` for erasure `job`.
    pub async fn erase(&self, path: &Path, ids: &Ids, job: &str) -> Result<Outcome, LakeError> {
        if ids.is_empty() {
            return Ok(Outcome::Skipped);
        }
        let meta = match self.footer(path).await {
            Ok(m) => m,
            Err(LakeError::Store(object_store::Error::NotFound { .. })) => {
                return Ok(Outcome::Skipped)
            }
            Err(e) => return Err(e),
        };
        if let Some(rows) = done_by(&meta, job) {
            return Ok(Outcome::Rewritten { rows });
        }
        if !self.may_hold(path, &meta, ids).await? {
            return Ok(Outcome::Skipped);
        }
        std::fs::create_dir_all(&self.scratch)?;
        let (src, dst) = (
            self.scratch.join("old.parquet"),
            self.scratch.join("new.parquet"),
        );
        self.download(path, &src).await?;
        let (ids2, job2, src2, dst2) = (ids.clone(), job.to_owned(), src.clone(), dst.clone());
        let removed = tokio::task::spawn_blocking(move || rewrite(&src2, &dst2, &ids2, &job2))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?
            .map_err(|cause| LakeError::Parquet {
                path: path.to_string(),
                cause,
            })?;
        let outcome = if removed == 0 {
            Outcome::Clean
        } else {
            self.upload(&dst, path).await?;
            Outcome::Rewritten { rows: removed }
        };
        for f in [src, dst] {
            let _ = std::fs::remove_file(f);
        }
        Ok(outcome)
    }

    /// The file's footer, from two ranged reads (its end, then its metadata).
    async fn footer(&self, path: &Path) -> Result<ParquetMetaData, LakeError> {
        let size = self.lake.head(path).await?.size;
        let bad = |m: &str| LakeError::Parquet {
            path: path.to_string(),
            cause: ParquetError::General(m.into()),
        };
        if size < 12 {
            return Err(bad("too short for Parquet"));
        }
        let tail = self.lake.get_range(path, size - 8..size).await?;
        if &tail[4..] != b"PAR1" {
            return Err(bad("no Parquet footer"));
        }
        let len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        let start = (size - 8)
            .checked_sub(len)
            .ok_or_else(|| bad("footer too long"))?;
        let footer = self.lake.get_range(path, start..size - 8).await?;
        ParquetMetaDataReader::decode_metadata(&footer).map_err(|cause| LakeError::Parquet {
            path: path.to_string(),
            cause,
        })
    }

    /// Whether a row group may hold one of the ids, by its user_id and anonymous_id chunks'
    /// statistics (min, max, all null) and Bloom filters (one ranged read each).
    async fn may_hold(
        &self,
        path: &Path,
        meta: &ParquetMetaData,
        ids: &Ids,
    ) -> Result<bool, LakeError> {
        for group in meta.row_groups() {
            for (name, wanted) in [(USER, &ids.users), (ANONYMOUS, &ids.anonymous)] {
                if self.chunk_may_hold(path, group, name, wanted).await? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    async fn chunk_may_hold(
        &self,
        path: &Path,
        group: &RowGroupMetaData,
        name: &str,
        wanted: &BTreeSet<String>,
    ) -> Result<bool, LakeError> {
        if wanted.is_empty() {
            return Ok(false);
        }
        let Some(chunk) = group
            .columns()
            .iter()
            .find(|c| c.column_path().string() == name)
        else {
            return Ok(false);
        };
        let mut candidates: Vec<&String> = match chunk.statistics() {
            Some(Statistics::ByteArray(s)) => {
                if s.null_count_opt() == Some(group.num_rows() as u64) {
                    return Ok(false);
                }
                let (min, max) = (s.min_opt(), s.max_opt());
                wanted
                    .iter()
                    .filter(|id| {
                        min.is_none_or(|m| m.data() <= id.as_bytes())
                            && max.is_none_or(|m| id.as_bytes() <= m.data())
                    })
                    .collect()
            }
            _ => wanted.iter().collect(),
        };
        if candidates.is_empty() {
            return Ok(false);
        }
        if let (Some(offset), Some(len)) =
            (chunk.bloom_filter_offset(), chunk.bloom_filter_length())
        {
            let (start, len) = (offset as u64, len as u64);
            let bytes = self.lake.get_range(path, start..start + len).await?;
            if let Ok(filter) = Sbbf::from_bytes(&bytes) {
                candidates.retain(|id| filter.check(id.as_str()));
            }
        }
        Ok(!candidates.is_empty())
    }

    /// Copies the object to a scratch file, chunk by chunk.
    async fn download(&self, path: &Path, to: &std::path::Path) -> Result<(), LakeError> {
        let mut file = std::fs::File::create(to)?;
        let mut stream = self.lake.get(path).await?.into_stream();
        while let Some(chunk) = stream.try_next().await? {
            file.write_all(&chunk)?;
        }
        file.sync_all()?;
        Ok(())
    }

    /// Puts a scratch file at `path`: whole when small, else as a multipart upload (completed
    /// atomically), never more than a few parts in memory.
    async fn upload(&self, from: &std::path::Path, path: &Path) -> Result<(), LakeError> {
        let mut file = std::fs::File::open(from)?;
        let size = file.metadata()?.len() as usize;
        if size <= self.part_bytes {
            let mut all = Vec::with_capacity(size);
            file.read_to_end(&mut all)?;
            self.lake.put(path, PutPayload::from(all)).await?;
            return Ok(());
        }
        let mut upload = WriteMultipart::new_with_chunk_size(
            self.lake.put_multipart(path).await?,
            self.part_bytes,
        );
        let sent = async {
            loop {
                let mut part = vec![0; self.part_bytes];
                let n = read_full(&mut file, &mut part)?;
                if n == 0 {
                    return Ok::<(), LakeError>(());
                }
                part.truncate(n);
                upload.wait_for_capacity(2).await?;
                upload.put(Bytes::from(part));
            }
        }
        .await;
        match sent {
            Ok(()) => {
                upload.finish().await?;
                Ok(())
            }
            Err(e) => {
                let _ = upload.abort().await;
                Err(e)
            }
        }
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The rows a file's earlier rewrite by `job` removed, from its mark.
fn done_by(meta: &ParquetMetaData, job: &str) -> Option<u64> {
    let kv = meta.file_metadata().key_value_metadata()?;
    let mark = kv.iter().find(|kv| kv.key == MARK)?.value.as_deref()?;
    let (by, rows) = mark.split_once(' ')?;
    (by == job).then(|| rows.parse().ok()).flatten()
}

/// Writes `src` without the rows of `ids` to `dst`, row group by row group, with the lake's
/// writer properties, its key-value metadata and the job's mark; answers the rows removed.
fn rewrite(
    src: &std::path::Path,
    dst: &std::path::Path,
    ids: &Ids,
    job: &str,
) -> Result<u64, ParquetError> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(src)?)?;
    let file = builder.metadata().file_metadata();
    let total = file.num_rows() as u64;
    // The file's own key-value metadata goes along (the writer adds the Arrow schema again).
    let kept_kv: Vec<KeyValue> = file
        .key_value_metadata()
        .into_iter()
        .flatten()
        .filter(|kv| kv.key != MARK && kv.key != "ARROW:schema")
        .cloned()
        .collect();
    let schema = builder.schema().clone();
    let mask = ProjectionMask::columns(builder.parquet_schema(), [USER, ANONYMOUS]);
    let filter_ids = ids.clone();
    let keep = ArrowPredicateFn::new(mask, move |batch: RecordBatch| Ok(filter_ids.keep(&batch)));
    let reader = builder
        .with_row_filter(RowFilter::new(vec![Box::new(keep)]))
        .with_batch_size(crate::collector::columns::ROW_GROUP_ROWS)
        .build()?;
    let props = crate::collector::columns::writer_properties()?;
    let mut writer = ArrowWriter::try_new(std::fs::File::create(dst)?, schema, Some(props))?;
    let mut kept = 0;
    for batch in reader {
        let batch = batch.map_err(|e| ParquetError::External(Box::new(e)))?;
        kept += batch.num_rows() as u64;
        writer.write(&batch)?;
    }
    let removed = total.saturating_sub(kept);
    for kv in kept_kv {
        writer.append_key_value_metadata(kv);
    }
    writer.append_key_value_metadata(KeyValue::new(MARK.into(), format!("{job} {removed}")));
    writer.into_inner()?.sync_all()?;
    Ok(removed)
}

#[cfg(test)]
mod tests;
