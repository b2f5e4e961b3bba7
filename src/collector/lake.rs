//! The lake: Parquet files under a Hive layout, written through `object_store` to a local
//! directory (default) or S3 (configuration).
//!
//! `events/app_id=<appId>/dt=YYYY-MM-DD/hour=HH/part-<node>-<shard>-<first lsn>.parquet`
//!
//! Partitions follow `received_at` (server time), so an hour closes once it is over and late
//! client clocks never reopen old partitions.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use object_store::path::Path;
use object_store::ObjectStore;

use crate::config::{LakeKind, LakeSettings};

#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("lake directory {0}: {1}")]
    Dir(String, std::io::Error),
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    #[error("lake.s3_bucket is required when lake.kind = \"s3\"")]
    NoBucket,
}

/// Opens the configured object store. `default_dir` is `<data-dir>/lake`.
pub fn open(
    settings: &LakeSettings,
    default_dir: &std::path::Path,
) -> Result<Arc<dyn ObjectStore>, LakeError> {
    match settings.kind {
        LakeKind::Local => {
            let dir = if settings.path.is_empty() {
                default_dir.to_path_buf()
            } else {
                settings.path.clone().into()
            };
            std::fs::create_dir_all(&dir)
                .map_err(|e| LakeError::Dir(dir.display().to_string(), e))?;
            // Directories a delete empties go too (retention drops whole partitions).
            let fs = object_store::local::LocalFileSystem::new_with_prefix(&dir)?
                .with_fsync(true)
                .with_automatic_cleanup(true);
            Ok(Arc::new(fs))
        }
        LakeKind::S3 => {
            if settings.s3_bucket.is_empty() {
                return Err(LakeError::NoBucket);
            }
            // Credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...).
            let mut b = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(&settings.s3_bucket)
                // Before `with_allow_http`, which is one of the client options.
                .with_client_options(client_options())
                .with_allow_http(settings.s3_allow_http)
                .with_retry(retry_config());
            if !settings.s3_region.is_empty() {
                b = b.with_region(&settings.s3_region);
            }
            if !settings.s3_access_key_id.is_empty() {
                b = b
                    .with_access_key_id(&settings.s3_access_key_id)
                    .with_secret_access_key(&settings.s3_secret_access_key);
            }
            if !settings.s3_endpoint.is_empty() {
                b = b.with_endpoint(&settings.s3_endpoint);
            }
            Ok(Arc::new(b.build()?))
        }
    }
}

/// Connections to S3: a host that does not answer fails an attempt in seconds, not minutes
/// (the uploader retries it, and the outbox keeps the file meanwhile).
fn client_options() -> object_store::ClientOptions {
    object_store::ClientOptions::new()
        .with_connect_timeout(Duration::from_secs(3))
        .with_timeout(Duration::from_secs(120))
}

/// The client's own retries stay short: the uploader's retry rule (`retry.rs`) is the one that
/// rides out an outage, so a lake that comes back is used within seconds.
fn retry_config() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            base: 2.0,
        },
        max_retries: 2,
        retry_timeout: Duration::from_secs(10),
    }
}

/// The folder of every file of `app_id`: `events/app_id=<app_id>` under `prefix`.
pub fn app_dir(prefix: &str, app_id: &str) -> Path {
    under(prefix, format!("events/app_id={app_id}"))
}

fn under(prefix: &str, p: String) -> Path {
    if prefix.is_empty() {
        Path::from(p)
    } else {
        Path::from(format!("{}/{p}", prefix.trim_matches('/')))
    }
}

/// Where a file of `app_id`'s events received in `hour` goes.
pub fn file_path(
    prefix: &str,
    app_id: &str,
    hour: DateTime<Utc>,
    node: &str,
    shard: usize,
    first_lsn: u64,
) -> Path {
    let p = format!(
        "events/app_id={app_id}/dt={}/hour={}/part-{node}-{shard}-{first_lsn:020}.parquet",
        hour.format("%Y-%m-%d"),
        hour.format("%H"),
    );
    under(prefix, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_hive_layout() {
        let t = DateTime::parse_from_rfc3339("2026-03-04T05:06:07Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            file_path("", "app1", t, "n0", 1, 42).as_ref(),
            "events/app_id=app1/dt=2026-03-04/hour=05/part-n0-1-00000000000000000042.parquet"
        );
        assert!(file_path("/lake/", "a", t, "n", 0, 1)
            .as_ref()
            .starts_with("lake/events/"));
        assert!(file_path("/lake/", "a", t, "n", 0, 1)
            .as_ref()
            .starts_with(&format!("{}/", app_dir("/lake/", "a").as_ref())));
        assert_eq!(app_dir("", "a").as_ref(), "events/app_id=a");
    }
}
