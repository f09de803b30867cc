//! The history chart: one arm's metric across experiments, drawn as SVG
//! by hand (each point a link to its experiment with a hover title, which
//! the archive's plotting library does not write). Pure.

use std::fmt::Write as _;

use super::html::esc;
use crate::report::history::HistoryRow;
use crate::report::stats::Verdict;
use crate::report::words::{mean_sd, num};

const W: f64 = 860.0;
const H: f64 = 340.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;

/// The chart of `rows` (oldest first) for `label`; `href` gives a row's
/// experiment page. Rows without data are left out of the line but keep
/// their place on the axis. The `<title>` and `<desc>` say in words what
/// the picture shows (the table below it says it in full).
pub fn history_svg(label: &str, rows: &[HistoryRow], href: &dyn Fn(i64) -> String) -> String {
    let values: Vec<(usize, f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.summary.map(|s| (i, s.mean, s.sd)))
        .filter(|(_, m, s)| m.is_finite() && s.is_finite())
        .collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {W} {H}\" \
         role=\"group\" aria-labelledby=\"chart-title chart-desc\">\
         <title id=\"chart-title\">{}</title><desc id=\"chart-desc\">{}</desc>",
        esc(&format!("{label} across experiments")),
        esc(&describe(rows, values.len()))
    );
    let (lo, hi) = value_range(&values);
    let frame = Frame {
        n: rows.len().max(1),
        lo,
        hi,
    };
    axes(&mut svg, &frame);
    changes(&mut svg, rows, &frame);
    series(&mut svg, rows, &values, &frame, href);
    svg.push_str("</svg>");
    svg
}

/// The chart's `<desc>`: how many experiments, how many with data, where
/// the steps are and how often the host changed.
fn describe(rows: &[HistoryRow], with_data: usize) -> String {
    let steps: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.step
                .map(|rel| format!("#{} ({:+.1} %)", r.experiment_id, rel * 100.0))
        })
        .collect();
    let hosts = rows.iter().filter(|r| r.new_host).count();
    format!(
        "{} experiments, {} with data{}{}",
        rows.len(),
        with_data,
        if steps.is_empty() {
            ", no step change".to_string()
        } else {
            format!(", step changes at {}", steps.join(", "))
        },
        match hosts {
            0 => String::new(),
            n => format!(", {n} change(s) of host"),
        }
    )
}

/// The values the y axis spans: every mean ± sd, padded; a flat series
/// gets a band around its value, no series a unit range.
fn value_range(values: &[(usize, f64, f64)]) -> (f64, f64) {
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (_, m, s)| {
            (lo.min(m - s), hi.max(m + s))
        });
    if !lo.is_finite() {
        (0.0, 1.0)
    } else if hi - lo < f64::EPSILON * hi.abs().max(1.0) {
        (lo - lo.abs().max(1.0) * 0.05, hi + hi.abs().max(1.0) * 0.05)
    } else {
        let pad = (hi - lo) * 0.08;
        (lo - pad, hi + pad)
    }
}

/// Where rows and values land: `n` rows across, `lo` to `hi` up.
struct Frame {
    n: usize,
    lo: f64,
    hi: f64,
}

impl Frame {
    /// The x of row `i` (one row sits in the middle).
    fn x(&self, i: usize) -> f64 {
        if self.n == 1 {
            LEFT + (W - LEFT - RIGHT) / 2.0
        } else {
            LEFT + (W - LEFT - RIGHT) * i as f64 / (self.n - 1) as f64
        }
    }

    /// The y of value `v`.
    fn y(&self, v: f64) -> f64 {
        TOP + (H - TOP - BOTTOM) * (1.0 - (v - self.lo) / (self.hi - self.lo))
    }
}

/// Axes, five value ticks and the x axis's label.
fn axes(svg: &mut String, f: &Frame) {
    let (lo, hi) = (f.lo, f.hi);
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" y1=\"{0}\" x2=\"{}\" y2=\"{0}\"/>",
        H - BOTTOM,
        W - RIGHT
    );
    for k in 0..=4 {
        let v = lo + (hi - lo) * f64::from(k) / 4.0;
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\"/>\
             <text class=\"tick\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            f.y(v) + 4.0,
            esc(&num(v)),
            y = f.y(v)
        );
    }
    let _ = write!(
        svg,
        "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">experiments, oldest first</text>",
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 12.0
    );
}

/// Host changes and step changes: marked lines with their words, between
/// a row and the one before it.
fn changes(svg: &mut String, rows: &[HistoryRow], f: &Frame) {
    let n = f.n;
    for (i, r) in rows.iter().enumerate() {
        let xi = f.x(i)
            - if n > 1 {
                (W - LEFT - RIGHT) / (2.0 * (n - 1) as f64)
            } else {
                0.0
            };
        if r.new_host {
            let _ = write!(
                svg,
                "<g class=\"host-change\"><line x1=\"{xi:.1}\" y1=\"{TOP}\" x2=\"{xi:.1}\" y2=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{}\">new host</text><title>{}</title></g>",
                H - BOTTOM,
                xi + 3.0,
                TOP - 8.0,
                esc(&format!("#{} ran on another host: {}", r.experiment_id, r.fingerprint))
            );
        }
        if let Some(rel) = r.step {
            let word = match r.step_verdict {
                Some(Verdict::Improved) => "improved",
                Some(Verdict::Regressed) => "regressed",
                _ => "changed",
            };
            let _ = write!(
                svg,
                "<g class=\"step {word}\" data-experiment=\"{}\"><line x1=\"{xi:.1}\" y1=\"{TOP}\" \
                 x2=\"{xi:.1}\" y2=\"{}\"/><text x=\"{:.1}\" y=\"{}\">step {:+.1} %</text>\
                 <title>{}</title></g>",
                r.experiment_id,
                H - BOTTOM,
                xi + 3.0,
                TOP + 12.0,
                rel * 100.0,
                esc(&format!(
                    "step change ({word}) of {:+.1} % from #{} on, by the penalised \
                     piecewise-constant fit lcx history uses",
                    rel * 100.0,
                    r.experiment_id
                ))
            );
        }
    }
}

/// The line through the means, then each point with its ± bar, a link to
/// its experiment with the row in its hover title.
fn series(
    svg: &mut String,
    rows: &[HistoryRow],
    values: &[(usize, f64, f64)],
    f: &Frame,
    href: &dyn Fn(i64) -> String,
) {
    let path: Vec<String> = values
        .iter()
        .map(|(i, m, _)| format!("{:.1},{:.1}", f.x(*i), f.y(*m)))
        .collect();
    if path.len() > 1 {
        let _ = write!(
            svg,
            "<polyline class=\"series\" points=\"{}\"/>",
            path.join(" ")
        );
    }
    for (i, m, s) in values {
        let r = &rows[*i];
        let tip = format!(
            "#{} {} {} {}: {}",
            r.experiment_id,
            r.date,
            r.commit,
            r.arm,
            r.summary.as_ref().map(mean_sd).unwrap_or_default()
        );
        let _ = write!(
            svg,
            "<a href=\"{}\" class=\"point\" data-experiment=\"{}\"><title>{}</title>\
             <line class=\"bar\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
             <circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"5\"/></a>",
            esc(&href(r.experiment_id)),
            r.experiment_id,
            esc(&tip),
            f.y(m - s),
            f.y(m + s),
            f.y(*m),
            x = f.x(*i)
        );
    }
}
