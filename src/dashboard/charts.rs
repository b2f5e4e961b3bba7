//! Charts drawn on the server as inline SVG (no script): line charts of several series, bar
//! charts of one, and the small bars of a table row. Colours come from CSS classes
//! (`app.css`: `.s-0` to `.s-3` follow the palette variables, light and dark). Every chart is
//! a `role="img"` with an `aria-label` summary; each point carries a `<title>` tooltip; the
//! figures themselves are in a table the page shows beside the chart.

use maud::{html, Markup};

use super::layout::thousands;

/// The drawing area, in SVG user units (the SVG scales to its container's width).
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 52.0;
/// Room for the right-hand tick labels a phone shows (`.tick-right`).
const RIGHT: f64 = 36.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 30.0;
/// The most labels under the x axis of a line chart; a bar chart labels up to 16 bars.
const X_LABELS: usize = 8;
const BAR_LABELS: usize = 16;

/// One line of a chart: a name (legend, tooltips) and one value per x label.
pub struct Series<'a> {
    pub name: &'a str,
    pub values: Vec<u64>,
}

/// The y axis: its top and its tick values, at 1, 2 or 5 times a power of ten.
fn y_ticks(max: u64) -> (u64, Vec<u64>) {
    let max = max.max(1);
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            let s = step * m;
            if max.div_ceil(s) <= 4 {
                let top = max.div_ceil(s) * s;
                return (top, (0..=top / s).map(|i| i * s).collect());
            }
        }
        step *= 10;
    }
}

/// The plot's frame: the x position of point `i` of `n` and the y of a value.
struct Frame {
    n: usize,
    top: u64,
    /// Bars are centred in their slot; lines run from edge to edge.
    bars: bool,
}

impl Frame {
    fn x(&self, i: usize) -> f64 {
        let w = WIDTH - LEFT - RIGHT;
        if self.bars {
            LEFT + w * (i as f64 + 0.5) / self.n.max(1) as f64
        } else if self.n <= 1 {
            LEFT + w / 2.0
        } else {
            LEFT + w * i as f64 / (self.n - 1) as f64
        }
    }

    fn y(&self, v: u64) -> f64 {
        let h = HEIGHT - TOP - BOTTOM;
        HEIGHT - BOTTOM - h * v as f64 / self.top as f64
    }
}

/// Gridlines, y tick labels and the x labels (every k-th, so at most `X_LABELS` under lines
/// and `BAR_LABELS` under bars).
fn axes(f: &Frame, ticks: &[u64], labels: &[String]) -> Markup {
    let most = if f.bars && labels.len() <= BAR_LABELS {
        BAR_LABELS
    } else {
        X_LABELS
    };
    let every = labels.len().div_ceil(most).max(1);
    html! {
        g.axis {
            @for t in ticks {
                @let y = format!("{:.1}", f.y(*t));
                line.gridline x1=(LEFT) x2=(WIDTH - RIGHT) y1=(y) y2=(y) {}
                text.tick x=(LEFT - 8.0) y=(y) text-anchor="end" dominant-baseline="middle" { (thousands(*t)) }
                // The same at the right: shown where a phone scrolls the
                // chart to its latest figures and the left axis is out of view.
                text.tick.tick-right x=(WIDTH - RIGHT + 8.0) y=(y) dominant-baseline="middle" aria-hidden="true" { (thousands(*t)) }
            }
            line.baseline x1=(LEFT) x2=(WIDTH - RIGHT) y1=(HEIGHT - BOTTOM) y2=(HEIGHT - BOTTOM) {}
            @for (i, l) in labels.iter().enumerate().filter(|(i, _)| i % every == 0) {
                @let x = format!("{:.1}", f.x(i));
                line.mark x1=(x) x2=(x) y1=(HEIGHT - BOTTOM) y2=(HEIGHT - BOTTOM + 4.0) {}
                text.tick x=(x) y=(HEIGHT - 8.0) text-anchor="middle" { (l) }
            }
        }
    }
}

/// The legend under a chart: a swatch of each series' colour and its name.
pub fn legend(names: &[&str]) -> Markup {
    html! {
        ul.legend {
            @for (i, n) in names.iter().enumerate() {
                li { span class=(format!("swatch s-{i}")) aria-hidden="true" {} (n) }
            }
        }
    }
}

fn svg_open(label: &str, body: Markup) -> Markup {
    html! {
        svg.chart viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-label=(label) {
            (body)
        }
    }
}

/// A line chart of `series` over `labels` (one value per label in each series), with a
/// legend; `label` is the accessible summary. Each point has a tooltip "name · x: value".
pub fn lines(label: &str, labels: &[String], series: &[Series<'_>]) -> Markup {
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .max()
        .unwrap_or(0);
    let (top, ticks) = y_ticks(max);
    let f = Frame {
        n: labels.len(),
        top,
        bars: false,
    };
    let path = |values: &[u64]| {
        let mut d = String::new();
        for (i, v) in values.iter().enumerate() {
            let cmd = if i == 0 { 'M' } else { 'L' };
            d.push_str(&format!("{cmd}{:.1} {:.1}", f.x(i), f.y(*v)));
        }
        d
    };
    let names: Vec<&str> = series.iter().map(|s| s.name).collect();
    let body = html! {
        (axes(&f, &ticks, labels))
        @for (k, s) in series.iter().enumerate() {
            g class=(format!("series s-{k}")) {
                path.line d=(path(&s.values)) {}
                @for (i, v) in s.values.iter().enumerate() {
                    circle.point.zero[*v == 0] cx=(format!("{:.1}", f.x(i))) cy=(format!("{:.1}", f.y(*v))) r="3" {
                        title { (s.name) " · " (labels[i]) ": " (thousands(*v)) }
                    }
                }
            }
        }
    };
    html! {
        figure.chart-box {
            (svg_open(label, body))
            figcaption { (legend(&names)) }
        }
    }
}

/// A bar chart of one series over `labels`; `label` is the accessible summary.
pub fn bars(label: &str, labels: &[String], name: &str, values: &[u64]) -> Markup {
    let (top, ticks) = y_ticks(values.iter().copied().max().unwrap_or(0));
    let f = Frame {
        n: labels.len(),
        top,
        bars: true,
    };
    let slot = (WIDTH - LEFT - RIGHT) / labels.len().max(1) as f64;
    let w = (slot * 0.7).max(1.0);
    let body = html! {
        (axes(&f, &ticks, labels))
        g class="series s-0" {
            @for (i, v) in values.iter().enumerate() {
                @let y = f.y(*v);
                rect.col x=(format!("{:.1}", f.x(i) - w / 2.0)) y=(format!("{y:.1}"))
                    width=(format!("{w:.1}")) height=(format!("{:.1}", HEIGHT - BOTTOM - y)) rx="2" {
                    title { (name) " · " (labels[i]) ": " (thousands(*v)) }
                }
            }
        }
    };
    html! { figure.chart-box { (svg_open(label, body)) } }
}

/// A line chart of one score over `labels` on the fixed range `lo..=hi` (NPS -100 to 100,
/// CSAT and PMF 0 to 100); a missing value (no answers in that bucket) breaks the line.
pub fn score_line(
    label: &str,
    labels: &[String],
    name: &str,
    values: &[Option<f64>],
    (lo, hi): (f64, f64),
) -> Markup {
    let f = Frame {
        n: labels.len(),
        top: 1,
        bars: false,
    };
    let y = |v: f64| HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * (v - lo) / (hi - lo);
    let ticks: Vec<f64> = (0..=4)
        .map(|i| lo + (hi - lo) * f64::from(i) / 4.0)
        .collect();
    let mut d = String::new();
    let mut pen = false;
    for (i, v) in values.iter().enumerate() {
        match v {
            Some(v) => {
                let cmd = if pen { 'L' } else { 'M' };
                d.push_str(&format!("{cmd}{:.1} {:.1}", f.x(i), y(*v)));
                pen = true;
            }
            None => pen = false,
        }
    }
    let every = labels.len().div_ceil(X_LABELS).max(1);
    let body = html! {
        g.axis {
            @for t in &ticks {
                @let ty = format!("{:.1}", y(*t));
                line.gridline x1=(LEFT) x2=(WIDTH - RIGHT) y1=(ty) y2=(ty) {}
                text.tick x=(LEFT - 8.0) y=(ty) text-anchor="end" dominant-baseline="middle" { (format!("{t:.0}")) }
                text.tick.tick-right x=(WIDTH - RIGHT + 8.0) y=(ty) dominant-baseline="middle" aria-hidden="true" { (format!("{t:.0}")) }
            }
            @for (i, l) in labels.iter().enumerate().filter(|(i, _)| i % every == 0) {
                @let x = format!("{:.1}", f.x(i));
                line.mark x1=(x) x2=(x) y1=(HEIGHT - BOTTOM) y2=(HEIGHT - BOTTOM + 4.0) {}
                text.tick x=(x) y=(HEIGHT - 8.0) text-anchor="middle" { (l) }
            }
        }
        g class="series s-0" {
            path.line d=(d) {}
            @for (i, v) in values.iter().enumerate() {
                @if let Some(v) = v {
                    circle.point cx=(format!("{:.1}", f.x(i))) cy=(format!("{:.1}", y(*v))) r="3.5" {
                        title { (name) " · " (labels[i]) ": " (format!("{v:.1}")) }
                    }
                }
            }
        }
    };
    html! { figure.chart-box { (svg_open(label, body)) } }
}

/// The bar of a table row: `value` of `max`, as a share of the cell's width.
pub fn meter(value: u64, max: u64) -> Markup {
    let width = if max == 0 {
        0.0
    } else {
        (value as f64 * 100.0 / max as f64).round()
    };
    html! {
        svg.meter viewBox="0 0 100 8" preserveAspectRatio="none" aria-hidden="true" focusable="false" {
            rect.bar-track x="0" y="0" width="100" height="8" rx="4" {}
            rect.bar-ok x="0" y="0" width=(width) height="8" rx="4" {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_y_axis_rounds_up_to_a_round_top_with_at_most_5_ticks() {
        assert_eq!(y_ticks(0), (1, vec![0, 1]));
        assert_eq!(y_ticks(3), (3, vec![0, 1, 2, 3]));
        assert_eq!(y_ticks(7), (8, vec![0, 2, 4, 6, 8]));
        assert_eq!(y_ticks(130), (150, vec![0, 50, 100, 150]));
        assert_eq!(y_ticks(1001), (1500, vec![0, 500, 1000, 1500]));
    }

    #[test]
    fn a_score_line_breaks_where_a_bucket_has_no_answers() {
        let labels: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let chart = score_line(
            "NPS",
            &labels,
            "NPS",
            &[Some(-100.0), Some(100.0), None, Some(0.0)],
            (-100.0, 100.0),
        )
        .into_string();
        // From the bottom (-100) to the top (100), then a new stroke at the middle (0).
        assert!(
            chart.contains(r#"d="M52.0 210.0L262.7 12.0M684.0 111.0""#),
            "{chart}"
        );
        assert_eq!(chart.matches("<circle").count(), 3);
        assert!(chart.contains(">-50</text>"));
    }
}
