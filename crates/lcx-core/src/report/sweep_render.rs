//! The sweep section of a report as markdown: each arm's crossover in a
//! sentence, then the pivot table (a row per point; each arm's value, its
//! speedup against the baseline at that point, and how it scales from the
//! first point). Pure, like the other renderers.

use std::fmt::Write as _;

use super::model::{Crossover, SweepReport};
use super::stats::{Speedup, Verdict};
use super::words::mean_sd;
use crate::escape::{md_code as code, md_inline as md};
use crate::text::markdown_table;

/// `1.12× [1.07–1.18]`, or the ratio alone without an interval.
pub fn interval_text(s: &Speedup) -> String {
    if s.ci_low.is_finite() && s.ci_high.is_finite() {
        format!("{:.2}× [{:.2}–{:.2}]", s.ratio, s.ci_low, s.ci_high)
    } else {
        format!("{:.2}×", s.ratio)
    }
}

/// One crossover in a sentence: "`amp` pays from hidden_size 2048: 1.12×
/// [1.07–1.18]; not at 1024: 1.01× [0.97–1.05] (inconclusive)".
pub fn crossover_sentence(sweep: &SweepReport, c: &Crossover) -> String {
    let short = sweep
        .along_axis()
        .map_or(sweep.along.as_str(), |(_, a)| a.short.as_str());
    let series = if c.series.is_empty() {
        String::new()
    } else {
        format!(" ({})", md(&c.series))
    };
    let speed = |s: &Option<Speedup>| {
        s.as_ref()
            .map_or_else(|| "not judged".into(), interval_text)
    };
    // A point's speedup and verdict, or that it was not judged.
    let judged = |s: &Option<Speedup>, verdict: &Verdict| match s {
        Some(s) => format!("{} ({})", interval_text(s), verdict.text()),
        None => "not judged".into(),
    };
    let before = c
        .before
        .as_ref()
        .map(|(v, s, verdict)| format!("not at {}: {}", md(v), judged(s, verdict)));
    if !c.determined {
        let at = c
            .before
            .as_ref()
            .map(|(v, _, _)| format!(" at {} {}", md(short), md(v)))
            .unwrap_or_default();
        let from = c
            .point
            .as_ref()
            .map(|p| format!("; it pays from {} {} on", md(short), md(p)))
            .unwrap_or_default();
        return format!(
            "{}{series}: crossover undetermined: not judged{at}{from}",
            code(&c.arm)
        );
    }
    match &c.point {
        Some(p) => {
            let mut out = format!(
                "{}{series} pays from {} {}: {}",
                code(&c.arm),
                md(short),
                md(p),
                speed(&c.speedup)
            );
            match before {
                Some(b) => {
                    let _ = write!(out, "; {b}");
                }
                None => out.push_str(" (at every point of the range)"),
            }
            out
        }
        None => {
            let last = c
                .before
                .as_ref()
                .map(|(v, s, verdict)| {
                    format!(" (at {} {}: {})", md(short), md(v), judged(s, verdict))
                })
                .unwrap_or_default();
            format!("{}{series}: no crossover in the range{last}", code(&c.arm))
        }
    }
}

/// The whole sweep section.
pub fn sweep_section(sweep: &SweepReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Sweep along {}\n", code(&sweep.along));
    let others = sweep.arms.iter().filter(|a| **a != sweep.baseline).count();
    let better = match sweep.direction {
        crate::metrics::Direction::Higher => "higher is better",
        _ => "lower is better",
    };
    if others > 0 {
        let _ = writeln!(
            out,
            "Each arm against {} at the same point, on {} ({better}). An arm pays \
             from the first point where its verdict is improved and stays so up the axis.\n",
            code(&sweep.baseline),
            md(&sweep.label)
        );
        for c in &sweep.crossovers {
            let _ = writeln!(out, "- {}", crossover_sentence(sweep, c));
        }
        out.push('\n');
    } else {
        let _ = writeln!(
            out,
            "One arm, on {} ({better}): each point against the same arm at the \
             axis' first point.\n",
            md(&sweep.label)
        );
    }
    out.push_str(&pivot_table(sweep));
    out.push_str("\n\n");
    if sweep.workers {
        out.push_str(
            "Efficiency = the speedup over the first point ÷ the ratio of workers \
             (1 is perfect strong scaling).\n\n",
        );
    }
    out
}

/// Whether the table shows each arm against its own first point: a sweep
/// of one arm, or of workers.
fn shows_scaling(sweep: &SweepReport) -> bool {
    sweep.arms.len() == 1 || sweep.workers
}

/// A row per point: the axes' values, then per arm its value, its speedup
/// against the baseline there, and (one arm, or workers) its scaling.
fn pivot_table(sweep: &SweepReport) -> String {
    let mut table = markdown_table();
    let unit = crate::metrics::with_unit(&sweep.label, &sweep.metric);
    let first = sweep
        .along_axis()
        .and_then(|(_, a)| a.values.first())
        .cloned()
        .unwrap_or_default();
    let mut header: Vec<String> = sweep.axes.iter().map(|a| md(&a.short)).collect();
    for arm in &sweep.arms {
        header.push(format!("{} {}", md(arm), md(&unit)));
        if *arm != sweep.baseline {
            header.push(format!("{} vs {}", md(arm), md(&sweep.baseline)));
        }
        if shows_scaling(sweep) {
            header.push(format!("{} vs {}", md(arm), md(&first)));
        }
        if sweep.workers {
            header.push(format!("{} efficiency", md(arm)));
        }
    }
    table.set_header(header);
    for row in &sweep.points {
        let mut cells: Vec<String> = row.values.iter().map(|v| md(v)).collect();
        for arm in &sweep.arms {
            let cell = row.cells.iter().find(|c| &c.arm == arm);
            cells.push(
                cell.and_then(|c| c.summary.as_ref())
                    .map_or_else(|| "—".into(), mean_sd),
            );
            if *arm != sweep.baseline {
                cells.push(cell.and_then(|c| c.comparison.as_ref()).map_or_else(
                    || "—".into(),
                    |c| match &c.speedup {
                        Some(s) if c.verdict == Verdict::Inconclusive => {
                            format!("{} {}", interval_text(s), c.verdict.text())
                        }
                        Some(s) => format!("{} **{}**", interval_text(s), c.verdict.text()),
                        None => c.verdict.text().to_string(),
                    },
                ));
            }
            if shows_scaling(sweep) {
                cells.push(
                    cell.and_then(|c| c.scaling.as_ref())
                        .map_or_else(|| "—".into(), interval_text),
                );
            }
            if sweep.workers {
                cells.push(
                    cell.and_then(|c| c.efficiency)
                        .map_or_else(|| "—".into(), |e| format!("{e:.2}")),
                );
            }
        }
        table.add_row(cells);
    }
    table.to_string()
}

/// A sweep's plots, each `(title, kind, svg)`: each arm's speedup against
/// the baseline at each point with the no-change band (kind `speedup`,
/// when the sweep compares arms), its value at each point (kind `value`),
/// and (one arm, or a workers axis) its speedup over its own first point,
/// with ideal scaling for workers (kind `scaling`). The archive names the
/// files.
pub fn sweep_plots(
    sweep: &SweepReport,
    min_effect: f64,
) -> Result<Vec<(String, &'static str, String)>, super::plots::PlotError> {
    use super::plots::{sweep_plot, Guides, PointLine};
    let Some((at, axis)) = sweep.along_axis() else {
        return Ok(Vec::new());
    };
    let index = |values: &[String]| axis.values.iter().position(|v| Some(v) == values.get(at));
    let series = super::model::series_of(&sweep.points);
    // A line per (arm, series), from what `pick` reads of each cell.
    // `pick` reads a cell, told whether it sits at the axis' first value.
    type Pick<'p> = &'p dyn Fn(&super::model::SweepCell, bool) -> Option<(f64, Option<(f64, f64)>)>;
    let lines = |arms: &[&String], pick: Pick| {
        let mut out = Vec::new();
        for arm in arms {
            for s in &series {
                let points: Vec<super::plots::SweepPoint> = sweep
                    .points
                    .iter()
                    .filter(|p| p.series == *s)
                    .filter_map(|p| {
                        let cell = p.cells.iter().find(|c| &c.arm == *arm)?;
                        let at = index(&p.values)?;
                        let (y, ci) = pick(cell, at == 0)?;
                        Some((at, y, ci))
                    })
                    .collect();
                if points.is_empty() {
                    continue;
                }
                let name = if s.is_empty() {
                    (*arm).clone()
                } else {
                    format!("{arm}, {s}")
                };
                out.push(PointLine {
                    name,
                    color: out.len(),
                    points,
                });
            }
        }
        out
    };
    let interval = |s: &Speedup| {
        (s.ci_low.is_finite() && s.ci_high.is_finite()).then_some((s.ci_low, s.ci_high))
    };
    let x_label = axis.short.as_str();
    let metric = &sweep.metric;
    let mut out = Vec::new();
    let others: Vec<&String> = sweep
        .arms
        .iter()
        .filter(|a| **a != sweep.baseline)
        .collect();
    if !others.is_empty() {
        let l = lines(&others, &|c, _| {
            let s = c.comparison.as_ref()?.speedup?;
            Some((s.ratio, interval(&s)))
        });
        let title = format!("{metric} speedup vs {} by {x_label}", sweep.baseline);
        // Where each arm starts to pay (and surely does), on its line.
        let crossovers = sweep
            .crossovers
            .iter()
            .filter(|c| c.determined)
            .filter_map(|c| {
                let point = c.point.as_ref()?;
                let i = axis.values.iter().position(|v| v == point)?;
                let who = if c.series.is_empty() {
                    c.arm.clone()
                } else {
                    format!("{}, {}", c.arm, c.series)
                };
                Some((i, format!("crossover: {who} pays from {x_label} {point}")))
            })
            .collect();
        let guides = Guides {
            band: Some(super::stats::equivalence_band(min_effect)),
            reference: None,
            crossovers,
            ratio: true,
        };
        if !l.is_empty() {
            let svg = sweep_plot(&title, x_label, &axis.values, "speedup (×)", &l, &guides)?;
            out.push((title, "speedup", svg));
        }
    }
    let all: Vec<&String> = sweep.arms.iter().collect();
    let l = lines(&all, &|c, _| Some((c.summary.as_ref()?.mean, None)));
    // No cell has data (every arm skipped, say on a host without CUDA):
    // no plot rather than empty axes.
    if l.is_empty() {
        return Ok(out);
    }
    let title = format!("{metric} by {x_label}");
    let unit = crate::metrics::with_unit(&sweep.label, metric);
    let svg = sweep_plot(&title, x_label, &axis.values, &unit, &l, &Guides::default())?;
    out.push((title, "value", svg));
    if shows_scaling(sweep) {
        // The first point is the reference: 1× by definition.
        let l = lines(&all, &|c, first| match c.scaling {
            Some(s) => Some((s.ratio, interval(&s))),
            None if first && c.summary.is_some() => Some((1.0, None)),
            None => None,
        });
        let first = axis.values.first().cloned().unwrap_or_default();
        let reference = sweep.workers.then(|| {
            let w0: f64 = first.parse().unwrap_or(1.0);
            let ideal = axis
                .values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| Some((i, v.parse::<f64>().ok()? / w0)))
                .collect();
            ("ideal (speedup = workers ratio)".to_string(), ideal)
        });
        let guides = Guides {
            band: None,
            reference,
            ..Guides::default()
        };
        let title = format!("{metric} speedup over {x_label} {first}");
        let svg = sweep_plot(&title, x_label, &axis.values, "speedup (×)", &l, &guides)?;
        out.push((title, "scaling", svg));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::SweepAxis;
    use crate::report::model::{SweepCell, SweepRow};
    use crate::report::stats::Summary;

    /// Every name, value and label a sweep shows comes from a file or a
    /// command: markdown shows it as text, never as markup.
    #[test]
    fn names_and_values_are_shown_as_text() {
        let evil = "<script>alert(1)</script>";
        let sweep = SweepReport {
            metric: format!("{evil}/m"),
            label: evil.into(),
            direction: crate::metrics::Direction::Lower,
            axes: vec![
                SweepAxis {
                    key: format!("env.{evil}"),
                    short: evil.into(),
                    values: vec![evil.into(), "2".into()],
                },
                SweepAxis {
                    key: "env.B".into(),
                    short: "b".into(),
                    values: vec![evil.into()],
                },
            ],
            along: format!("env.{evil}"),
            baseline: evil.into(),
            arms: vec![evil.into(), format!("{evil}2")],
            workers: true,
            points: vec![SweepRow {
                values: vec![evil.into(), evil.into()],
                series: format!("b {evil}"),
                cells: vec![SweepCell {
                    arm: format!("{evil}2"),
                    run_arm: evil.into(),
                    summary: Summary::from_values(&[1.0, 1.1]),
                    comparison: None,
                    scaling: None,
                    efficiency: Some(0.5),
                }],
            }],
            crossover: Default::default(),
            crossovers: vec![Crossover {
                arm: format!("{evil}2"),
                series: format!("b {evil}"),
                point: Some(evil.into()),
                speedup: None,
                before: Some((evil.into(), None, Verdict::Inconclusive)),
                determined: true,
            }],
        };
        let md = sweep_section(&sweep);
        // Outside code spans (whose text markdown never reads as markup),
        // every `<` is escaped.
        let prose: String = md.split('`').step_by(2).collect();
        assert!(!prose.replace("\\<", "").contains('<'), "{md}");
        assert!(md.contains("pays from"), "{md}");
        assert!(md.contains("Efficiency"), "{md}");
    }
}
