//! The Traffic page of an app: events per hour over the last 48 hours and per day over the
//! last 30 days by type, visitors per day, the share of identified visitors, and the top pages
//! and events. Read through `analytics::store::traffic` (the rollups, live from the 200), never
//! from the lake; charts from `charts.rs`, each with its figures in a table under it. Under
//! them, the lake files written for the app in the last 24 hours (path, rows, size, time),
//! newest first, from the uploaders' record (`collector::written`): no listing of the object
//! store, no file read.

use actix_web::{web, HttpResponse};
use maud::{html, Markup};

use super::charts::{self, Series};
use super::error::PageError;
use super::layout::{self, size, thousands, Section, Shell};
use super::session::{AppPage, Viewer};
use crate::analytics::model::{Interval, NameCount, Point, Traffic, Window};
use crate::analytics::store;
use crate::collector::rollup::live::Live;
use crate::collector::rollup::HOUR_MICROS;
use crate::collector::written::{self, WrittenFile};
use crate::collector::Collector;
use crate::ids::Timestamp;
use crate::storage::StoreError;
use crate::tenants::App;

/// Hours of the hourly chart, days of the daily one.
const HOURS: i64 = 48;
const DAYS: i64 = 30;
/// The event types, in the order of the series (and of the palette).
const TYPES: [&str; 4] = ["page", "track", "identify", "group"];
/// The lake files listed: written in the last `FILE_HOURS`, at most `MAX_FILES`, newest first.
const FILE_HOURS: i64 = 24;
const MAX_FILES: usize = 200;

/// The hourly and the daily windows ending with the current hour and day.
fn windows(now_micros: i64) -> (Window, Window) {
    let hour = now_micros.div_euclid(HOUR_MICROS);
    let day = now_micros.div_euclid(24 * HOUR_MICROS);
    (
        Window {
            interval: Interval::Hour,
            first: hour - HOURS + 1,
            last: hour,
        },
        Window {
            interval: Interval::Day,
            first: day - DAYS + 1,
            last: day,
        },
    )
}

fn by_type(p: &Point) -> [u64; 4] {
    let t = &p.by_type;
    [t.page, t.track, t.identify, t.group]
}

fn x_labels(t: &Traffic) -> Vec<String> {
    let format = match t.interval {
        Interval::Hour => "%a %H:00",
        Interval::Day => "%b %d",
    };
    t.series
        .iter()
        .map(|p| p.start.time().format(format).to_string())
        .collect()
}

/// Events by type over `t`, as a line chart and its table.
fn events_chart(title: &str, id: &str, t: &Traffic) -> Markup {
    let labels = x_labels(t);
    let series: Vec<Series> = TYPES
        .iter()
        .enumerate()
        .map(|(k, name)| Series {
            name,
            values: t.series.iter().map(|p| by_type(p)[k]).collect(),
        })
        .collect();
    let sums: Vec<String> = series
        .iter()
        .map(|s| format!("{} {}", thousands(s.values.iter().sum()), s.name))
        .collect();
    let summary = format!("{title}: {}", sums.join(", "));
    html! {
        section.card aria-labelledby=(id) {
            div.card-head { h2 #(id) { (title) } span.muted { (thousands(t.totals.events)) " events" } }
            (charts::lines(&summary, &labels, &series))
            details.figures {
                summary { "Figures" }
                div.table-wrap { table {
                    thead { tr { th scope="col" { "Interval" } @for n in TYPES { th.num scope="col" { (n) } } } }
                    tbody {
                        @for (i, p) in t.series.iter().enumerate() {
                            tr { th scope="row" { (labels[i]) } @for v in by_type(p) { td.num { (thousands(v)) } } }
                        }
                    }
                } }
            }
        }
    }
}

/// Unique visitors per day, as a bar chart and its table.
fn visitors_chart(t: &Traffic) -> Markup {
    let labels = x_labels(t);
    let values: Vec<u64> = t.series.iter().map(|p| p.visitors).collect();
    let peak = values.iter().copied().max().unwrap_or(0);
    let summary = format!(
        "Unique visitors per day over the last {DAYS} days: at most {} a day, {} in all",
        thousands(peak),
        thousands(t.totals.visitors)
    );
    html! {
        section.card aria-labelledby="visitors" {
            div.card-head { h2 #visitors { "Unique visitors per day" } span.muted { (thousands(t.totals.visitors)) " over " (DAYS) " days" } }
            (charts::bars(&summary, &labels, "visitors", &values))
            details.figures {
                summary { "Figures" }
                div.table-wrap { table {
                    thead { tr { th scope="col" { "Day" } th.num scope="col" { "Visitors" } } }
                    tbody { @for (l, v) in labels.iter().zip(&values) { tr { th scope="row" { (l) } td.num { (thousands(*v)) } } } }
                } }
            }
        }
    }
}

/// A top-10 table with a bar per row.
fn top_table(id: &str, title: &str, what: &str, rows: &[(&str, u64)]) -> Markup {
    let max = rows.iter().map(|(_, c)| *c).max().unwrap_or(0);
    html! {
        section.card #(id) aria-labelledby=(format!("{id}-title")) {
            h2 #(format!("{id}-title")) { (title) }
            @if rows.is_empty() {
                p.muted { "Nothing yet." }
            } @else {
                table.top {
                    thead { tr { th scope="col" { (what) } th.num scope="col" { "Events" } th scope="col" { span.sr-only { "Share" } } } }
                    tbody {
                        @for (name, count) in rows {
                            tr { td.name { (name) } td.num { (thousands(*count)) } td.meter-cell { (charts::meter(*count, max)) } }
                        }
                    }
                }
            }
        }
    }
}

/// The stat tiles: events, visitors, identified visitors and their share, over 30 days.
fn stats(t: &Traffic) -> Markup {
    let v = t.totals.visitors;
    let known = t.totals.identified_visitors.min(v);
    let share = if v == 0 {
        "–".to_owned()
    } else {
        format!("{:.0}%", known as f64 * 100.0 / v as f64)
    };
    html! {
        div.stats aria-label=(format!("The last {DAYS} days")) {
            div.stat { strong { (thousands(t.totals.events)) } span { "Events, " (DAYS) " days" } }
            div.stat { strong { (thousands(v)) } span { "Visitors" } }
            div.stat { strong { (thousands(known)) } span { "Identified visitors" } }
            div.stat #identified-share { strong { (share) } span { "Identified share" } }
        }
    }
}

fn files_table(files: &[WrittenFile]) -> Markup {
    let rows: u64 = files.iter().map(|f| f.rows).sum();
    let bytes: u64 = files.iter().map(|f| f.bytes).sum();
    html! {
        section.card aria-labelledby="lake-files-title" {
            h2 #lake-files-title { "Lake files, last " (FILE_HOURS) " hours" }
            @if files.is_empty() {
                p.muted #lake-files { "No file written for this app in the last " (FILE_HOURS) " hours." }
            } @else {
                p.hint {
                    (thousands(files.len() as u64)) " files, " (thousands(rows)) " rows, " (size(bytes))
                    @if files.len() == MAX_FILES { " (the newest " (MAX_FILES) ")" }
                    ". Parquet, one file per shard flush and hour."
                }
                div.table-wrap {
                    table #lake-files {
                        thead { tr { th { "Path" } th.num { "Rows" } th.num { "Size" } th { "Written" } } }
                        tbody {
                            @for f in files {
                                tr {
                                    td.name { code { (f.path) } }
                                    td.num { (thousands(f.rows)) }
                                    td.num title=(format!("{} bytes", f.bytes)) { (size(f.bytes)) }
                                    td { (f.written_at.time().format("%Y-%m-%d %H:%M:%S UTC")) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The page.
pub fn render<'a>(viewer: &Viewer, app: &App, loaded: &'a Loaded) -> Markup {
    let Loaded { hours, days, files } = loaded;
    let pages: Vec<(&str, u64)> = days
        .top_pages
        .iter()
        .map(|p| (p.path.as_str(), p.count))
        .collect();
    let events: Vec<(&str, u64)> = days
        .top_events
        .iter()
        .map(|e| (e.event.as_str(), e.count))
        .collect();
    let named = |list: &'a [NameCount]| -> Vec<(&'a str, u64)> {
        list.iter().map(|n| (n.name.as_str(), n.count)).collect()
    };
    let (countries, devices) = (named(&days.countries), named(&days.devices));
    let content = html! {
        (stats(days))
        (events_chart(&format!("Events per hour, last {HOURS} hours"), "per-hour", hours))
        (events_chart(&format!("Events per day, last {DAYS} days"), "per-day", days))
        (visitors_chart(days))
        div.grid {
            (top_table("top-pages", "Top pages", "Path", &pages))
            (top_table("top-events", "Top events", "Event", &events))
            (top_table("countries", "Countries", "Country", &countries))
            (top_table("devices", "Devices", "Device", &devices))
        }
        p.hint { "Hours and days are UTC and follow when the server received each event." }
        (files_table(files))
    };
    let shell = Shell {
        viewer,
        section: Section::Traffic,
        title: "Traffic",
        app: Some(app),
    };
    let refused = format!("/dashboard/apps/{}/refused", app.id);
    shell.render(
        html! { a.button href=(refused) { "Refused events" } },
        content,
    )
}

/// `GET /dashboard/apps/{id}/traffic`.
pub async fn page(
    AppPage(state, viewer, app): AppPage,
    collector: web::Data<Collector>,
) -> Result<HttpResponse, PageError> {
    let (id, now) = (app.id.clone(), collector.clock.now_micros());
    let live = collector.rollups.clone();
    let loaded = state.store.run(move |db| load(db, &live, &id, now)).await?;
    Ok(layout::ok(render(&viewer, &app, &loaded)))
}

/// What the page shows of an app at `now_micros`.
pub struct Loaded {
    /// The last 48 hours, by hour.
    hours: Traffic,
    /// The last 30 days, by day.
    days: Traffic,
    /// The lake files of the last 24 hours, newest first.
    files: Vec<WrittenFile>,
}

/// Reads the page's figures: two rollup windows and the recent files, a bounded number of
/// keys whatever the traffic (`benches/dashboard.rs` times it with a month of rollups).
pub fn load(db: &sled::Db, live: &Live, app: &str, now_micros: i64) -> Result<Loaded, StoreError> {
    let (h, d) = windows(now_micros);
    let since = Timestamp::from_micros(now_micros - FILE_HOURS * HOUR_MICROS);
    Ok(Loaded {
        hours: store::traffic(db, live, app, &h)?,
        days: store::traffic(db, live, app, &d)?,
        files: written::recent(db, app, since, MAX_FILES)?,
    })
}
