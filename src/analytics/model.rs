//! The traffic query (a window of whole hours or days) and its answer, shaped as api.md §9.

use serde::Serialize;
use utoipa::ToSchema;

use crate::collector::rollup::store::Unit;
use crate::collector::rollup::{Bucket, HOUR_MICROS};
use crate::collector::EventType;
use crate::ids::Timestamp;
use crate::validation::FieldError;

/// The longest window, in days.
pub const MAX_DAYS: i64 = 92;
/// Entries of `topPages` and `topEvents`.
pub const TOP: usize = 10;

/// The step of the series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Interval {
    Hour,
    Day,
}

impl Interval {
    fn hours(self) -> i64 {
        match self {
            Interval::Hour => 1,
            Interval::Day => 24,
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Interval::Hour => Unit::Hour,
            Interval::Day => Unit::Day,
        }
    }

    /// The interval holding the time `micros`, counted from the epoch.
    fn index(self, micros: i64) -> i64 {
        micros.div_euclid(HOUR_MICROS * self.hours())
    }

    fn start(self, index: i64) -> Timestamp {
        Timestamp::from_micros(index * self.hours() * HOUR_MICROS)
    }
}

/// Whole intervals of `received_at`, UTC: from the one holding `from` to the one holding `to`,
/// both included, as indexes since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub interval: Interval,
    pub first: i64,
    pub last: i64,
}

impl Window {
    /// Parses the query: `from` and `to` (ISO 8601 date-times or dates; `to` defaults to now,
    /// `from` to 23 hours before `to`, so the default is the 24 hours ending with the current
    /// one) and `interval` (`hour`, the default, or `day`). Every bad field is reported.
    pub fn parse(
        from: Option<&str>,
        to: Option<&str>,
        interval: Option<&str>,
        now_micros: i64,
    ) -> Result<Window, Vec<FieldError>> {
        let mut errors = Vec::new();
        let interval = match interval {
            None | Some("hour") => Interval::Hour,
            Some("day") => Interval::Day,
            Some(_) => {
                errors.push(FieldError::new("interval", "must be hour or day"));
                Interval::Hour
            }
        };
        let mut time = |name: &str, value: Option<&str>| match value.map(Timestamp::parse) {
            None => None,
            Some(Some(t)) => Some(t.micros()),
            Some(None) => {
                let msg = "must be an ISO 8601 date-time (2026-11-23T10:00:00Z) or date";
                errors.push(FieldError::new(name, msg));
                Some(now_micros)
            }
        };
        let to = time("to", to).unwrap_or(now_micros);
        let from = time("from", from).unwrap_or(to - 23 * HOUR_MICROS);
        let w = Window {
            interval,
            first: interval.index(from),
            last: interval.index(to),
        };
        if errors.is_empty() && from > to {
            errors.push(FieldError::new("from", "must not be after to"));
        }
        let hours = (w.last - w.first + 1) * interval.hours();
        if errors.is_empty() && hours > MAX_DAYS * 24 {
            let msg = format!("the window spans more than {MAX_DAYS} days");
            errors.push(FieldError::new("to", msg));
        }
        if errors.is_empty() {
            Ok(w)
        } else {
            Err(errors)
        }
    }

    /// The hours of the window, as hour indexes.
    pub fn hours(&self) -> std::ops::Range<i64> {
        let n = self.interval.hours();
        self.first * n..(self.last + 1) * n
    }

    /// The interval holding hour `hour` (an hour index).
    pub fn interval_of(&self, hour: i64) -> i64 {
        hour.div_euclid(self.interval.hours())
    }

    /// The days wholly inside the window, as day indexes `[first, end)`.
    pub fn whole_days(&self) -> (i64, i64) {
        let std::ops::Range { start: h0, end: h1 } = self.hours();
        (
            h0.div_euclid(24) + i64::from(h0.rem_euclid(24) != 0),
            h1.div_euclid(24),
        )
    }
}

/// Events per type.
#[derive(Debug, Serialize, ToSchema, PartialEq, Eq)]
pub struct ByType {
    pub page: u64,
    pub track: u64,
    pub identify: u64,
    pub group: u64,
    pub screen: u64,
    pub alias: u64,
}

/// One interval of the series.
#[derive(Debug, Serialize, ToSchema)]
pub struct Point {
    /// The interval's start (UTC).
    pub start: Timestamp,
    /// Rows in the lake for the interval (duplicates and WAL replays never count twice).
    pub events: u64,
    #[serde(rename = "byType")]
    pub by_type: ByType,
    /// Distinct anonymousIds, estimated (HyperLogLog, standard error 0.8%).
    pub visitors: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub events: u64,
    /// Distinct anonymousIds over the window, estimated.
    pub visitors: u64,
    /// Distinct anonymousIds seen with a userId (identified) over the window, estimated.
    pub identified_visitors: u64,
}

#[derive(Debug, Serialize, ToSchema, PartialEq, Eq)]
pub struct PageCount {
    /// `page_path` of page events.
    pub path: String,
    pub count: u64,
}

#[derive(Debug, Serialize, ToSchema, PartialEq, Eq)]
pub struct EventCount {
    /// The name of track events.
    pub event: String,
    pub count: u64,
}

/// One entry of `countries` or `devices`.
#[derive(Debug, Serialize, ToSchema, PartialEq, Eq)]
pub struct NameCount {
    /// The country (ISO 3166-1 alpha-2, from `collector.geoip_database`) or the device class
    /// (`desktop`, `mobile`, `tablet`, `other`, from the user agent).
    pub name: String,
    pub count: u64,
}

/// Traffic over a window: a series, totals, and the top pages and events (by count, then
/// name; exact while the app has at most 1 000 distinct names in the window), and the events
/// per country and per device class.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Traffic {
    pub interval: Interval,
    /// Start of the first interval.
    pub from: Timestamp,
    /// End of the last interval (exclusive).
    pub to: Timestamp,
    pub series: Vec<Point>,
    pub totals: Totals,
    pub top_pages: Vec<PageCount>,
    pub top_events: Vec<EventCount>,
    /// Events per country, the 10 first (by count, then name).
    pub countries: Vec<NameCount>,
    /// Events per device class (by count, then name).
    pub devices: Vec<NameCount>,
}

fn named(top: &crate::collector::rollup::top::Top, n: usize) -> Vec<NameCount> {
    let ranked = top.ranked(n).into_iter();
    ranked
        .map(|(name, count)| NameCount { name, count })
        .collect()
}

fn estimate(h: &crate::collector::rollup::hll::Hll) -> u64 {
    h.estimate().round() as u64
}

impl Traffic {
    /// The answer from the window's buckets (`series`: by interval index, missing ones are
    /// zero) and the union of the window (`totals`).
    pub fn build(w: &Window, series: &[(i64, Bucket)], totals: &Bucket) -> Traffic {
        let empty = Bucket::default();
        let mut stored = series.iter().peekable();
        let points = (w.first..=w.last)
            .map(|i| {
                let b = match stored.next_if(|(at, _)| *at == i) {
                    Some((_, b)) => b,
                    None => &empty,
                };
                Point {
                    start: w.interval.start(i),
                    events: b.events(),
                    by_type: ByType {
                        page: b.count(EventType::Page),
                        track: b.count(EventType::Track),
                        identify: b.count(EventType::Identify),
                        group: b.count(EventType::Group),
                        screen: b.count(EventType::Screen),
                        alias: b.count(EventType::Alias),
                    },
                    visitors: estimate(&b.visitors),
                }
            })
            .collect();
        Traffic {
            interval: w.interval,
            from: w.interval.start(w.first),
            to: w.interval.start(w.last + 1),
            series: points,
            totals: Totals {
                events: totals.events(),
                visitors: estimate(&totals.visitors),
                identified_visitors: estimate(&totals.identified),
            },
            top_pages: totals
                .pages
                .ranked(TOP)
                .into_iter()
                .map(|(path, count)| PageCount { path, count })
                .collect(),
            top_events: totals
                .events
                .ranked(TOP)
                .into_iter()
                .map(|(event, count)| EventCount { event, count })
                .collect(),
            countries: named(&totals.countries, TOP),
            devices: named(&totals.devices, TOP),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-23T10:30:00Z
    const NOW: i64 = 1_795_429_800_000_000;

    fn fields(r: Result<Window, Vec<FieldError>>) -> Vec<String> {
        r.unwrap_err().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn the_default_window_is_the_24_hours_ending_with_the_current_one() {
        let w = Window::parse(None, None, None, NOW).unwrap();
        assert_eq!(w.interval, Interval::Hour);
        assert_eq!(w.last - w.first + 1, 24);
        assert_eq!(w.interval.start(w.last).micros(), NOW - 30 * 60 * 1_000_000);
        let d = Window::parse(
            Some("2026-11-01"),
            Some("2026-11-23T23:59:59Z"),
            Some("day"),
            NOW,
        );
        let d = d.unwrap();
        assert_eq!(d.last - d.first + 1, 23);
        assert_eq!(
            d.interval.start(d.first).to_string(),
            "2026-11-01T00:00:00.000Z"
        );
    }

    #[test]
    fn bad_queries_name_their_field() {
        let given = |s: &'static str| (!s.is_empty()).then_some(s);
        // (from, to, interval, the field named, why); "" is absent.
        #[rustfmt::skip]
        let cases = [
            ("yesterday", "", "", "from", "not a date"),
            ("", "2026-13-01", "", "to", "no month 13"),
            ("", "", "week", "interval", "unknown interval"),
            ("2026-11-23T10:00:00Z", "2026-11-22T10:00:00Z", "", "from", "from after to"),
            ("2026-01-01", "2026-11-01", "day", "to", "longer than 92 days"),
        ];
        for (from, to, interval, want, why) in cases {
            let got = Window::parse(given(from), given(to), given(interval), NOW);
            assert_eq!(fields(got), [want], "{why}");
        }
        assert!(Window::parse(Some("2026-08-24"), Some("2026-11-23"), None, NOW).is_ok());
    }

    #[test]
    fn whole_days_leave_out_the_partial_ones_at_the_edges() {
        let w = Window::parse(
            Some("2026-11-20T10:00:00Z"),
            Some("2026-11-23T05:00:00Z"),
            None,
            NOW,
        );
        let (a, b) = w.unwrap().whole_days();
        let day = |i: i64| Interval::Day.start(i).to_string();
        assert_eq!(
            (day(a), day(b)),
            (
                "2026-11-21T00:00:00.000Z".into(),
                "2026-11-23T00:00:00.000Z".into()
            )
        );
        let w = Window::parse(Some("2026-11-20"), Some("2026-11-20T23:00:00Z"), None, NOW).unwrap();
        assert_eq!(w.whole_days().1 - w.whole_days().0, 1);
    }
}
