//! The lake's side of retention: an app's whole `dt=` day partitions before a day, deleted
//! through `object_store` (a local directory or S3 alike). Only `events/app_id=<app>/` is
//! listed, so another app's files are never seen. An app's deletion (`deletion/`) drops all of
//! its partitions, one at a time (`next_partition`, `drop_all`), then whatever is left.

use chrono::NaiveDate;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::ObjectStore;

/// Partitions and files one sweep deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub partitions: usize,
    pub files: usize,
}

/// The day of a `dt=YYYY-MM-DD` segment, in days since the epoch.
pub fn day_of(segment: &str) -> Option<i64> {
    let date = NaiveDate::parse_from_str(segment.strip_prefix("dt=")?, "%Y-%m-%d").ok()?;
    Some(date.signed_duration_since(NaiveDate::default()).num_days())
}

/// Deletes every file of `app`'s partitions whose day is before `first_kept` (days since the
/// epoch). A file another deleter removed first is no error.
pub async fn drop_before(
    lake: &dyn ObjectStore,
    prefix: &str,
    app: &str,
    first_kept: i64,
) -> Result<Dropped, object_store::Error> {
    let dir = crate::collector::lake::app_dir(prefix, app);
    let mut dropped = Dropped::default();
    for partition in lake.list_with_delimiter(Some(&dir)).await?.common_prefixes {
        match partition.filename().and_then(day_of) {
            Some(day) if day < first_kept => {}
            _ => continue,
        }
        dropped.files += drop_all(lake, &partition).await?;
        dropped.partitions += 1;
    }
    Ok(dropped)
}

/// The first of `app`'s partitions (in name order) after `after` (from the first with `None`),
/// `None` when there is none left.
pub async fn next_partition(
    lake: &dyn ObjectStore,
    prefix: &str,
    app: &str,
    after: Option<&str>,
) -> Result<Option<Path>, object_store::Error> {
    let dir = crate::collector::lake::app_dir(prefix, app);
    let mut partitions = lake.list_with_delimiter(Some(&dir)).await?.common_prefixes;
    partitions.sort();
    Ok(partitions
        .into_iter()
        .find(|p| after.is_none_or(|a| p.as_ref() > a)))
}

/// Deletes every object under `partition` (a partition, or an app's whole folder); returns how
/// many.
pub async fn drop_all(
    lake: &dyn ObjectStore,
    partition: &Path,
) -> Result<usize, object_store::Error> {
    let files = lake.list(Some(partition)).map_ok(|m| m.location).boxed();
    let mut deleted = lake.delete_stream(files);
    let mut n = 0;
    while let Some(done) = deleted.next().await {
        match done {
            Ok(_) => n += 1,
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};

    #[test]
    fn a_partition_names_its_day() {
        assert_eq!(day_of("dt=1970-01-02"), Some(1));
        assert_eq!(day_of("dt=2026-03-04"), Some(20_516));
        assert_eq!(day_of("hour=03"), None);
        assert_eq!(day_of("dt=2026-13-01"), None);
    }

    #[tokio::test]
    async fn partitions_before_the_day_go_whole_and_nothing_else() {
        let lake = InMemory::new();
        let files = [
            "lake/events/app_id=a/dt=2026-03-01/hour=00/part-1.parquet",
            "lake/events/app_id=a/dt=2026-03-01/hour=23/part-2.parquet",
            "lake/events/app_id=a/dt=2026-03-02/hour=00/part-3.parquet",
            "lake/events/app_id=a/dt=2026-03-03/hour=05/part-4.parquet",
            "lake/events/app_id=ab/dt=2026-03-01/hour=00/part-5.parquet",
            "lake/events/app_id=b/dt=2026-03-01/hour=00/part-6.parquet",
        ];
        for f in files {
            lake.put(&Path::from(f), PutPayload::from_static(b"x"))
                .await
                .unwrap();
        }
        let first_kept = day_of("dt=2026-03-03").unwrap();
        let dropped = drop_before(&lake, "/lake/", "a", first_kept).await.unwrap();
        assert_eq!(
            dropped,
            Dropped {
                partitions: 2,
                files: 3
            }
        );
        let left: Vec<String> = lake
            .list(None)
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(left, [files[3], files[4], files[5]]);
        assert_eq!(
            drop_before(&lake, "lake", "a", first_kept).await.unwrap(),
            Dropped::default()
        );
        // An app's deletion: its partitions one by one, in order, then nothing; others stay.
        let first = next_partition(&lake, "lake", "a", None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.as_ref(), "lake/events/app_id=a/dt=2026-03-03");
        let after = next_partition(&lake, "lake", "a", Some(first.as_ref())).await;
        assert_eq!(after.unwrap(), None);
        assert_eq!(drop_all(&lake, &first).await.unwrap(), 1);
        assert_eq!(
            next_partition(&lake, "lake", "a", None).await.unwrap(),
            None
        );
        assert!(next_partition(&lake, "lake", "ab", None)
            .await
            .unwrap()
            .is_some());
    }
}
