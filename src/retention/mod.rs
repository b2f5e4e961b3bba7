//! Retention: what an app keeps is set by its plan (`plans.<plan>.retention`, in days; 0 = for
//! ever). A sweep runs at start and then every `retention.sweep_interval_secs`; for each app it
//! removes the lake's `dt=` day partitions (`lake.rs`), the hourly and daily rollup buckets,
//! the survey responses and the lake-file records older than the plan's days, logs what went
//! and counts it in `/metrics` (`tributary_collector_retention_removed_total{kind}`).
//!
//! A unit (a day partition, an hour or day bucket) goes only once all of it is older than the
//! limit: with `lake_days = 3` on 2026-03-10, `dt=2026-03-06` goes and `dt=2026-03-07` stays.
//! "Now" is the server's clock, so tests move it rather than wait.

pub mod lake;

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;

use crate::clock::Clock;
use crate::collector::metrics::{Expired, RetentionCounters};
use crate::collector::rollup::store::{self as rollups, Unit};
use crate::config::{Plans, Retention};
use crate::ids::Timestamp;
use crate::storage::{Store, StoreError};

const HOUR_MICROS: i64 = 3_600_000_000;
const DAY_MICROS: i64 = 24 * HOUR_MICROS;

/// The first unit of each kind an app keeps at one instant (`None`: all of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cutoffs {
    /// The first `dt=` day partition kept, in days since the epoch.
    pub lake_day: Option<i64>,
    /// The first hourly bucket kept, in hours since the epoch.
    pub hour: Option<i64>,
    /// The first daily bucket kept, in days since the epoch.
    pub day: Option<i64>,
    /// Responses last changed before this go.
    pub responses: Option<Timestamp>,
    /// Records of files written before this go (never later than the lake's own limit: a
    /// record does not outlive its file).
    pub lake_file_records: Option<Timestamp>,
}

impl Cutoffs {
    /// The cut-offs of `kept` at `now_micros`.
    pub fn of(kept: &Retention, now_micros: i64) -> Cutoffs {
        let before = |days: u32| {
            (days > 0)
                .then(|| now_micros.saturating_sub(i64::from(days).saturating_mul(DAY_MICROS)))
        };
        let records = [kept.lake_file_records_days, kept.lake_days]
            .into_iter()
            .filter(|d| *d > 0)
            .min()
            .unwrap_or(0);
        Cutoffs {
            // A unit ending at or before the instant is wholly older: it goes.
            lake_day: before(kept.lake_days).map(|t| t.div_euclid(DAY_MICROS)),
            hour: before(kept.hourly_rollup_days).map(|t| t.div_euclid(HOUR_MICROS)),
            day: before(kept.daily_rollup_days).map(|t| t.div_euclid(DAY_MICROS)),
            responses: before(kept.responses_days).map(Timestamp::from_micros),
            lake_file_records: before(records).map(Timestamp::from_micros),
        }
    }
}

/// What one sweep removed from one app.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    pub lake_partitions: usize,
    pub lake_files: usize,
    pub hourly_buckets: usize,
    pub daily_buckets: usize,
    pub responses: usize,
    pub lake_file_records: usize,
}

impl Removed {
    fn by_kind(&self) -> [(Expired, usize); 6] {
        [
            (Expired::LakePartitions, self.lake_partitions),
            (Expired::LakeFiles, self.lake_files),
            (Expired::HourlyBuckets, self.hourly_buckets),
            (Expired::DailyBuckets, self.daily_buckets),
            (Expired::Responses, self.responses),
            (Expired::LakeFileRecords, self.lake_file_records),
        ]
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("lake: {0}")]
    Lake(#[from] object_store::Error),
}

/// Removes from sled what `app` keeps no longer.
fn sweep_sled(db: &sled::Db, app: &str, cut: Cutoffs) -> Result<Removed, StoreError> {
    let mut removed = Removed::default();
    if let Some(hour) = cut.hour {
        removed.hourly_buckets = rollups::drop_before(db, app, Unit::Hour, hour)?;
    }
    if let Some(day) = cut.day {
        removed.daily_buckets = rollups::drop_before(db, app, Unit::Day, day)?;
    }
    if let Some(t) = cut.responses {
        removed.responses = crate::surveys::store::drop_responses_before(db, app, t)?;
    }
    if let Some(t) = cut.lake_file_records {
        removed.lake_file_records = crate::collector::written::drop_before(db, app, t)?;
    }
    Ok(removed)
}

/// Everything a sweep needs: the store, the lake and its prefix, the plans, the clock and the
/// counters of `/metrics`.
pub struct Sweeper {
    pub store: Store,
    pub lake: Arc<dyn ObjectStore>,
    pub prefix: String,
    pub plans: Plans,
    pub clock: Arc<dyn Clock>,
    pub counters: RetentionCounters,
}

impl Sweeper {
    /// One sweep over every app; an app that fails is logged and the others still go (the
    /// next sweep retries it). Returns the total removed.
    pub async fn sweep(&self) -> Removed {
        let now = self.clock.now_micros();
        let apps = match self.store.run(crate::tenants::store::all_apps).await {
            Ok(apps) => apps,
            Err(e) => {
                self.counters.failures.inc();
                tracing::warn!(error = %e, "retention sweep: the apps could not be read");
                return Removed::default();
            }
        };
        let mut total = Removed::default();
        let mut failed = false;
        for app in apps {
            let cut = Cutoffs::of(&self.plans.get(app.plan).retention, now);
            match self.sweep_app(&app.id, cut, &mut total).await {
                Ok(r) if r != Removed::default() => tracing::info!(
                    app_id = %app.id,
                    plan = app.plan.name(),
                    lake_partitions = r.lake_partitions,
                    lake_files = r.lake_files,
                    hourly_buckets = r.hourly_buckets,
                    daily_buckets = r.daily_buckets,
                    responses = r.responses,
                    lake_file_records = r.lake_file_records,
                    "retention: removed what the plan keeps no longer"
                ),
                Ok(_) => {}
                Err(e) => {
                    failed = true;
                    tracing::warn!(app_id = %app.id, error = %e, "retention sweep failed; retried at the next one");
                }
            }
        }
        if failed {
            self.counters.failures.inc();
        } else {
            self.counters.sweeps.inc();
        }
        total
    }

    /// Sweeps one app, counting what went (in `/metrics` and `total`) as it goes.
    async fn sweep_app(
        &self,
        app: &str,
        cut: Cutoffs,
        total: &mut Removed,
    ) -> Result<Removed, SweepError> {
        let id = app.to_owned();
        let mut removed = self.store.run(move |db| sweep_sled(db, &id, cut)).await?;
        self.count(&removed, total);
        if let Some(day) = cut.lake_day {
            let dropped = lake::drop_before(&*self.lake, &self.prefix, app, day).await?;
            let lake = Removed {
                lake_partitions: dropped.partitions,
                lake_files: dropped.files,
                ..Removed::default()
            };
            self.count(&lake, total);
            (removed.lake_partitions, removed.lake_files) = (dropped.partitions, dropped.files);
        }
        Ok(removed)
    }

    fn count(&self, r: &Removed, total: &mut Removed) {
        for (kind, n) in r.by_kind() {
            self.counters.removed(kind, n as u64);
        }
        total.lake_partitions += r.lake_partitions;
        total.lake_files += r.lake_files;
        total.hourly_buckets += r.hourly_buckets;
        total.daily_buckets += r.daily_buckets;
        total.responses += r.responses;
        total.lake_file_records += r.lake_file_records;
    }
}

/// Starts the sweep: once now, then every `every`.
pub fn spawn(sweeper: Sweeper, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut timer = tokio::time::interval(every.max(Duration::from_secs(1)));
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            timer.tick().await;
            sweeper.sweep().await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-03-10T10:30:00Z.
    const NOW: i64 = 1_773_138_600_000_000;

    fn kept(lake: u32, hourly: u32, daily: u32, responses: u32, records: u32) -> Retention {
        Retention {
            lake_days: lake,
            hourly_rollup_days: hourly,
            daily_rollup_days: daily,
            responses_days: responses,
            lake_file_records_days: records,
        }
    }

    #[test]
    fn a_day_or_an_hour_goes_only_once_all_of_it_is_older_than_the_limit() {
        let today = NOW.div_euclid(DAY_MICROS);
        let hour = NOW.div_euclid(HOUR_MICROS);
        assert_eq!(lake::day_of("dt=2026-03-10"), Some(today));
        let c = Cutoffs::of(&kept(3, 2, 10, 30, 2), NOW);
        // 3 days before 10:30 on the 10th is 10:30 on the 7th: the 6th is wholly older.
        assert_eq!(c.lake_day, lake::day_of("dt=2026-03-07"));
        assert_eq!(c.day, Some(today - 10));
        // 48 hours before 10:30 is 10:30: the bucket of 09:00 ended before it, 10:00's did not.
        assert_eq!(c.hour, Some(hour - 48));
        assert_eq!(c.responses.map(|t| t.micros()), Some(NOW - 30 * DAY_MICROS));
        assert_eq!(
            c.lake_file_records.map(|t| t.micros()),
            Some(NOW - 2 * DAY_MICROS)
        );
        // On a boundary the unit that just ended goes.
        let midnight = today * DAY_MICROS;
        assert_eq!(
            Cutoffs::of(&kept(1, 1, 0, 0, 0), midnight).lake_day,
            Some(today - 1)
        );
        assert_eq!(
            Cutoffs::of(&kept(1, 1, 0, 0, 0), midnight - 1).lake_day,
            Some(today - 2)
        );
    }

    #[test]
    fn zero_keeps_for_ever_and_records_never_outlive_the_lake() {
        let c = Cutoffs::of(&kept(0, 0, 0, 0, 0), NOW);
        assert_eq!(
            c,
            Cutoffs {
                lake_day: None,
                hour: None,
                day: None,
                responses: None,
                lake_file_records: None
            }
        );
        let c = Cutoffs::of(&kept(1, 0, 0, 0, 0), NOW);
        assert_eq!(
            c.lake_file_records.map(|t| t.micros()),
            Some(NOW - DAY_MICROS)
        );
        let c = Cutoffs::of(&kept(5, 0, 0, 0, 7), NOW);
        assert_eq!(
            c.lake_file_records.map(|t| t.micros()),
            Some(NOW - 5 * DAY_MICROS)
        );
        // Days beyond any clock do not overflow: nothing is old enough.
        let c = Cutoffs::of(&kept(u32::MAX, u32::MAX, 0, 0, 0), NOW);
        assert!(c.lake_day.unwrap() < 0 && c.hour.unwrap() < 0);
    }

    #[test]
    fn the_default_plans_keep_the_lake_and_responses_long_and_hours_shorter() {
        let s = crate::config::Settings::load(None).unwrap();
        for &plan in crate::config::Plan::ALL {
            let r = s.plan(plan).retention;
            assert!(r.lake_days == 0 || r.lake_days >= 365, "{plan:?}");
            assert!(r.responses_days == 0 || r.responses_days >= 365, "{plan:?}");
            assert!(r.hourly_rollup_days >= 31, "{plan:?}");
            assert!(
                r.daily_rollup_days == 0 || r.daily_rollup_days > r.hourly_rollup_days,
                "{plan:?}: day buckets stay longer"
            );
        }
        assert_eq!(s.retention.sweep_interval_secs, 86_400);
    }
}
