//! Traffic rollups, kept by the shard writers as they commit events and persisted exactly once
//! by the uploaders, so the dashboard never scans the lake.
//!
//! ```text
//! writer.count -> Delta (per app and received_at hour)           this file, held in live.rs
//!   -> Flush -> stager: live::apply -> store::apply               store.rs (sled tree `rollups`)
//!      one sled transaction: merge every bucket into its hour and its day, and record the
//!      shard's rollup LSN; a job at or below that LSN is skipped
//!   <- GET /api/v1/analytics/traffic                              analytics/ (reads store.rs
//!      and, through live.rs, the deltas committed and not yet applied: live from the 200)
//! ```
//!
//! A bucket holds, for one app and one hour (or day) of `received_at` (the lake's partitions):
//! the count per event type, the page views per `page_path` and the track events per name
//! (`top.rs`: exact up to 1 000 names, Space-Saving beyond), the events per country and per
//! device class (`top.rs` too: a few hundred names at most), a HyperLogLog of anonymousIds
//! (`hll.rs`, precision 14) and one of the anonymousIds seen with a userId (identified).
//!
//! Exactly once: the stager applies a flush's delta after its files are in the lake and
//! before its checkpoint, in one transaction with the shard's `rollup LSN = last_lsn`. A crash
//! before the apply: the WAL replay rebuilds the rows and their delta. A crash after the apply
//! and before the checkpoint: the replay skips, when it builds deltas, every row at or below
//! the rollup LSN the writer read at start (so a replay that cuts its flushes at other LSNs
//! never counts a row twice), and a job at or below the rollup LSN is not applied.
//!
//! Memory of a delta (it lives between two flushes of a shard, then with its flush until the
//! stager applies it; `live.rs` shares it, never copies it): per row at most one new entry
//! in each structure of its bucket, so it is bounded by the rows of the open files: at most
//! `rows x (2 x 8 bytes of sparse sketch + page path or event name + ~80 bytes)`, and per
//! (app, hour) at most 2 x 16 KiB of dense sketches and 2 x 1 000 names: a fraction of the
//! open files' own bytes (`file_bytes` in budget.rs), which it shadows.

pub mod hll;
pub mod live;
pub mod store;
pub mod top;
pub mod wire;

use std::collections::BTreeMap;

use super::event::{Event, EventType};
use hll::Hll;
use top::Top;

pub const HOUR_MICROS: i64 = 3_600_000_000;

/// The rollup of one app over one hour or one day.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bucket {
    /// Events per type, in the order of `EventType::ALL`.
    pub by_type: [u64; EventType::ALL.len()],
    /// Page views per `page_path`.
    pub pages: Top,
    /// Track events per name.
    pub events: Top,
    /// Events per country (`country`, when a database is set).
    pub countries: Top,
    /// Events per device class (`device_class`: desktop, mobile, tablet, other).
    pub devices: Top,
    /// Distinct anonymousIds.
    pub visitors: Hll,
    /// Distinct anonymousIds of rows that carry a userId.
    pub identified: Hll,
}

fn type_index(t: EventType) -> usize {
    EventType::ALL.iter().position(|x| *x == t).unwrap_or(0)
}

impl Bucket {
    /// Counts one committed row.
    pub fn add(&mut self, e: &Event) {
        self.by_type[type_index(e.kind)] += 1;
        match (e.kind, &e.page_path, &e.event) {
            (EventType::Page, Some(path), _) => self.pages.add(path, 1),
            (EventType::Track, _, Some(name)) => self.events.add(name, 1),
            _ => {}
        }
        if let Some(country) = &e.country {
            self.countries.add(country, 1);
        }
        if let Some(device) = &e.device_class {
            self.devices.add(device, 1);
        }
        if let Some(anon) = &e.anonymous_id {
            self.visitors.insert(anon.as_bytes());
            if e.user_id.is_some() {
                self.identified.insert(anon.as_bytes());
            }
        }
    }

    /// Adds `other` (a later flush, another shard, another hour of the same day).
    pub fn merge(&mut self, other: &Bucket) {
        for (a, b) in self.by_type.iter_mut().zip(other.by_type) {
            *a += b;
        }
        self.pages.merge(&other.pages);
        self.events.merge(&other.events);
        self.countries.merge(&other.countries);
        self.devices.merge(&other.devices);
        self.visitors.merge(&other.visitors);
        self.identified.merge(&other.identified);
    }

    pub fn events(&self) -> u64 {
        self.by_type.iter().sum()
    }

    pub fn count(&self, t: EventType) -> u64 {
        self.by_type[type_index(t)]
    }
}

/// What a shard committed since its last flush, per app and hour of `received_at`.
#[derive(Debug, Default)]
pub struct Delta {
    buckets: BTreeMap<String, BTreeMap<i64, Bucket>>,
}

impl Delta {
    /// Counts one committed row.
    pub fn add(&mut self, e: &Event) {
        self.bucket(&e.app_id, e.received_at.div_euclid(HOUR_MICROS))
            .add(e);
    }

    /// The bucket of `app`'s `hour` (since the epoch), made empty if new: a writer counts a
    /// run of rows of one app and hour into it with one lookup.
    pub fn bucket(&mut self, app: &str, hour: i64) -> &mut Bucket {
        if !self.buckets.contains_key(app) {
            self.buckets.insert(app.to_string(), BTreeMap::new());
        }
        let hours = self.buckets.get_mut(app).expect("inserted above");
        hours.entry(hour).or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Drops every bucket of `app` (its deletion); true when it had some.
    pub fn forget(&mut self, app: &str) -> bool {
        self.buckets.remove(app).is_some()
    }

    /// `(app, hour since the epoch, bucket)`, by app then hour.
    pub fn buckets(&self) -> impl Iterator<Item = (&str, i64, &Bucket)> {
        self.buckets
            .iter()
            .flat_map(|(app, hours)| hours.iter().map(move |(h, b)| (app.as_str(), *h, b)))
    }

    /// `(hour, bucket)` of `app` for the hours in `hours`.
    pub fn hours_of(
        &self,
        app: &str,
        hours: std::ops::Range<i64>,
    ) -> impl Iterator<Item = (i64, &Bucket)> {
        self.buckets
            .get(app)
            .into_iter()
            .flat_map(move |h| h.range(hours.clone()).map(|(h, b)| (*h, b)))
    }

    /// The rows counted.
    pub fn rows(&self) -> u64 {
        self.buckets().map(|(_, _, b)| b.events()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_790_000_000_000_000;

    fn page(app: &str, anon: &str, path: &str, at: i64) -> Event<'static> {
        Event {
            page_path: Some(path.to_owned().into()),
            ..Event::example(app, "m", anon, at)
        }
    }

    #[test]
    fn a_delta_counts_rows_per_app_and_hour_by_type_page_and_event() {
        let mut d = Delta::default();
        d.add(&page("a", "v1", "/home", T0));
        d.add(&page("a", "v2", "/home", T0 + 1));
        d.add(&page("a", "v1", "/pricing", T0 + HOUR_MICROS));
        d.add(&Event {
            kind: EventType::Track,
            event: Some("Signed Up".into()),
            user_id: Some("u1".into()),
            ..Event::example("b", "m", "v3", T0)
        });
        let got: Vec<(&str, i64, u64)> = d.buckets().map(|(a, h, b)| (a, h, b.events())).collect();
        let h0 = T0.div_euclid(HOUR_MICROS);
        assert_eq!(got, [("a", h0, 2), ("a", h0 + 1, 1), ("b", h0, 1)]);
        assert_eq!(d.rows(), 4);
        let (_, _, a0) = d.buckets().next().unwrap();
        assert_eq!(a0.count(EventType::Page), 2);
        assert_eq!(a0.pages.ranked(5), [("/home".to_owned(), 2)]);
        assert_eq!(a0.visitors.estimate().round(), 2.0);
        assert!(a0.identified.is_empty());
        let (_, _, b0) = d.buckets().nth(2).unwrap();
        assert_eq!(b0.events.ranked(5), [("Signed Up".to_owned(), 1)]);
        assert_eq!(b0.identified.estimate().round(), 1.0);
    }

    #[test]
    fn merging_buckets_adds_counts_and_unites_visitors() {
        let (mut x, mut y) = (Bucket::default(), Bucket::default());
        x.add(&page("a", "v1", "/home", T0));
        y.add(&page("a", "v1", "/home", T0));
        y.add(&page("a", "v2", "/docs", T0));
        x.merge(&y);
        assert_eq!(x.events(), 3);
        assert_eq!(x.visitors.estimate().round(), 2.0);
        assert_eq!(
            x.pages.ranked(5),
            [("/home".to_owned(), 2), ("/docs".to_owned(), 1)]
        );
    }
}
