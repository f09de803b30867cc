//! A sweep's section: the arm rows (each already compared with the
//! baseline at its own point) pivoted by point, each arm's crossover along
//! the sweep's axis, and how each arm's cost scales from the first point
//! (with the efficiency of a workers axis). It judges nothing anew: the
//! verdicts are the arm rows'.

use std::collections::BTreeMap;

use crate::experiment::{Plan, Sweep};
use crate::report::model::{series_of, ArmResult, Crossover, SweepCell, SweepReport, SweepRow};
use crate::report::prose::Prose;
use crate::report::stats::{speedup_at, Speedup, Verdict, VerdictRule};
use crate::report::words::{num, speedup_text};

use super::columns::{label_of, metric_direction};
use crate::report::model::ReportColumn;

/// The sweep section of a plan with a `[sweep]`, on `metric`.
pub(super) fn sweep(
    plan: Option<&Plan>,
    arms: &[ArmResult],
    metric: Option<&str>,
    columns: &[ReportColumn],
    rule: VerdictRule,
) -> Option<SweepReport> {
    let plan = plan?;
    let sweep = plan.sweep.as_ref()?;
    let metric = metric?;
    let along = sweep.along_axis()?;
    let (direction, _) = metric_direction(Some(plan), metric);
    let mut file_arms: Vec<String> = Vec::new();
    for a in &plan.arms {
        if !file_arms.iter().any(|f| f == a.file_arm()) {
            file_arms.push(a.file_arm().to_string());
        }
    }
    let row_of = |name: &str| arms.iter().find(|a| a.name == name);
    let mut points: Vec<SweepRow> = sweep
        .points()
        .into_iter()
        .map(|values| {
            let cells = file_arms
                .iter()
                .filter_map(|file_arm| {
                    let run_arm = plan.arm_at(file_arm, &values)?;
                    let m = row_of(run_arm).and_then(|r| r.metric(metric));
                    Some(SweepCell {
                        arm: file_arm.clone(),
                        run_arm: run_arm.to_string(),
                        summary: m.and_then(|m| m.summary),
                        comparison: m.and_then(|m| m.comparison),
                        scaling: None,
                        efficiency: None,
                    })
                })
                .collect();
            SweepRow {
                series: series_label(sweep, &values),
                values,
                cells,
            }
        })
        .collect();
    scale(sweep, &mut points, arms, metric, direction, rule);
    let crossovers: Vec<Crossover> = file_arms
        .iter()
        .filter(|a| **a != plan.baseline)
        .flat_map(|arm| {
            series_of(&points)
                .into_iter()
                .map(|series| crossover(sweep, &points, arm, series))
                .collect::<Vec<_>>()
        })
        .collect();
    Some(SweepReport {
        metric: metric.to_string(),
        label: label_of(columns, metric),
        direction,
        axes: sweep.axes.clone(),
        along: along.key.clone(),
        baseline: plan.baseline.clone(),
        workers: sweep.counts_workers(sweep.along),
        crossover: crossover_json(sweep, &crossovers),
        arms: file_arms,
        points,
        crossovers,
    })
}

/// The other axes' values of a point, `num_layers 3` (empty with one axis).
fn series_label(sweep: &Sweep, values: &[String]) -> String {
    sweep
        .axes
        .iter()
        .zip(values)
        .enumerate()
        .filter(|(i, _)| *i != sweep.along)
        .map(|(_, (a, v))| format!("{} {v}", a.short))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Each arm's value at each point against its own at the series' first
/// point along the axis, and for a workers axis that speedup per worker
/// added.
fn scale(
    sweep: &Sweep,
    points: &mut [SweepRow],
    arms: &[ArmResult],
    metric: &str,
    direction: crate::metrics::Direction,
    rule: VerdictRule,
) {
    let replicate = |run_arm: &str| {
        arms.iter()
            .find(|a| a.name == run_arm)
            .and_then(|a| a.metric(metric))
            .and_then(|m| m.replicate)
    };
    let workers = sweep.counts_workers(sweep.along);
    let along = sweep.along;
    let snapshot: Vec<SweepRow> = points.to_vec();
    for row in points.iter_mut() {
        // The series' first point: the axis' first value, other axes as here.
        let Some(first) = snapshot.iter().find(|p| {
            p.series == row.series
                && p.values.get(along) == sweep.along_axis().and_then(|a| a.values.first())
        }) else {
            continue;
        };
        let count = |values: &[String]| values.get(along).and_then(|v| v.parse::<f64>().ok());
        let ratio = match (count(&row.values), count(&first.values)) {
            (Some(w), Some(w0)) if workers && w0 > 0.0 => Some(w / w0),
            _ => None,
        };
        for cell in &mut row.cells {
            // The first point is the reference, not a measurement of it.
            let Some(base) = first
                .cells
                .iter()
                .find(|c| c.arm == cell.arm && c.run_arm != cell.run_arm)
            else {
                continue;
            };
            let (Some(b), Some(a)) = (replicate(&base.run_arm), replicate(&cell.run_arm)) else {
                continue;
            };
            cell.scaling = speedup_at(&b, &a, direction, rule.alpha);
            cell.efficiency = match (cell.scaling, ratio) {
                (Some(s), Some(r)) => Some(s.ratio / r),
                _ => None,
            };
        }
    }
}

/// The net result of a scan ([`SweepReport::is_scan`]: what
/// `lcx run --command` with `-P`/`-L` makes of one command). It says how
/// the arm's value moves along the axis, never a verdict against the
/// first point: a bigger input that costs more is no regression.
pub(super) fn scan_result(sweep: &SweepReport) -> Option<Prose> {
    let arm = sweep.arms.first()?;
    let (along, _) = sweep.along_axis()?;
    let series = series_of(&sweep.points);
    let mut parts: Vec<Prose> = Vec::new();
    for s in series.iter().take(SCAN_SERIES) {
        let values: Vec<(&str, f64, Option<Speedup>)> = sweep
            .points
            .iter()
            .filter(|p| p.series == *s)
            .filter_map(|p| {
                let cell = p.cells.iter().find(|c| &c.arm == arm)?;
                Some((
                    p.values.get(along)?.as_str(),
                    cell.summary?.mean,
                    cell.scaling,
                ))
            })
            .collect();
        let (Some(first), Some(last)) = (values.first(), values.last()) else {
            continue;
        };
        let mut part = if s.is_empty() {
            Prose::default()
        } else {
            Prose::of_text(*s).and(": ")
        };
        part = part.and(format!("{} at ", num(first.1))).text(first.0);
        if values.len() > 1 {
            part = part.and(format!(" to {} at ", num(last.1))).text(last.0);
            // The sweep table's own figure: the speed against the first
            // point, with its interval (one statistic per claim).
            if let Some(scaling) = &last.2 {
                part = part.and(format!(
                    ", {} against the first point",
                    speedup_text(scaling)
                ));
            }
        }
        parts.push(part);
    }
    if parts.is_empty() {
        return None;
    }
    if series.len() > SCAN_SERIES {
        parts.push(Prose::ours(format!(
            "{} more series",
            series.len() - SCAN_SERIES
        )));
    }
    Some(
        Prose::ours("a scan of ")
            .name(arm)
            .and(" along ")
            .name(&sweep.along)
            .and(", one arm measured at each point and judged against none: on ")
            .text(crate::metrics::with_unit(&sweep.label, &sweep.metric))
            .and(", ")
            .then(Prose::join(parts, "; "))
            .and("; each point in the sweep section"),
    )
}

/// The series a scan's net result names before it says how many more.
const SCAN_SERIES: usize = 3;

/// Where `arm` starts to pay along `series`: the first point of the
/// trailing run of points where its verdict is improved, if that run is
/// not empty; the point before it is where it did not pay.
fn crossover(sweep: &Sweep, points: &[SweepRow], arm: &str, series: &str) -> Crossover {
    let along: Vec<(String, Option<&crate::report::stats::Comparison>)> = points
        .iter()
        .filter(|p| p.series == series)
        .filter_map(|p| {
            let cell = p.cells.iter().find(|c| c.arm == arm)?;
            Some((p.values.get(sweep.along)?.clone(), cell.comparison.as_ref()))
        })
        .collect();
    let improved = |c: &Option<&crate::report::stats::Comparison>| {
        c.is_some_and(|c| c.verdict == Verdict::Improved)
    };
    let start = along
        .iter()
        .rposition(|(_, c)| !improved(c))
        .map_or(0, |i| i + 1);
    let at = along.get(start);
    let stopper = start.checked_sub(1).and_then(|i| along.get(i));
    // An arm with no point, or stopped by a point it was not judged at.
    let determined = !along.is_empty() && stopper.is_none_or(|(_, c)| c.is_some());
    let before = stopper.map(|(v, c)| {
        (
            v.clone(),
            c.and_then(|c| c.speedup),
            c.map_or(Verdict::Inconclusive, |c| c.verdict),
        )
    });
    Crossover {
        arm: arm.to_string(),
        series: series.to_string(),
        point: at.map(|(v, _)| v.clone()),
        speedup: at.and_then(|(_, c)| c.and_then(|c| c.speedup)),
        before,
        determined,
    }
}

/// `sweep.crossover` in the JSON: arm → point or null; with several axes,
/// arm → {series → point or null}. A point that reads as a number is one.
fn crossover_json(sweep: &Sweep, crossovers: &[Crossover]) -> BTreeMap<String, serde_json::Value> {
    let value = |c: &Crossover| match c.point.as_ref().filter(|_| c.determined) {
        None => serde_json::Value::Null,
        Some(v) => serde_json::from_str::<serde_json::Number>(v)
            .map(serde_json::Value::Number)
            .unwrap_or_else(|_| serde_json::Value::String(v.clone())),
    };
    let mut out: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for c in crossovers {
        if sweep.axes.len() == 1 {
            out.insert(c.arm.clone(), value(c));
        } else {
            let entry = out
                .entry(c.arm.clone())
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let serde_json::Value::Object(map) = entry {
                map.insert(c.series.clone(), value(c));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::SweepAxis;
    use crate::metrics::Direction;
    use crate::report::stats::{compare, Summary};
    use rand::{Rng, SeedableRng};

    /// Three repeat means per arm and point, each with 2 % noise (what a
    /// cell's mean varies by on a busy 2-core host): the arm is `speed(n)`
    /// times faster than the baseline at point n.
    fn simulated(seed: u64, speed: impl Fn(u32) -> f64) -> (Sweep, Vec<SweepRow>) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut normal = move || {
            let (u1, u2): (f64, f64) = (rng.random(), rng.random());
            (-2.0 * (u1 + 1e-300).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        };
        let values = ["1", "2", "4", "8"];
        let sweep = Sweep {
            axes: vec![SweepAxis {
                key: "env.N".into(),
                short: "n".into(),
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            along: 0,
        };
        let rule = VerdictRule::default();
        let rows = values
            .iter()
            .map(|v| {
                let n: u32 = v.parse().unwrap();
                let mut repeats = |mean: f64| {
                    let xs: Vec<f64> = (0..3).map(|_| mean * (1.0 + 0.02 * normal())).collect();
                    Summary::from_values(&xs).unwrap()
                };
                let base = repeats(1.0);
                let arm = repeats(1.0 / speed(n));
                SweepRow {
                    values: vec![v.to_string()],
                    series: String::new(),
                    cells: vec![SweepCell {
                        arm: "fast".into(),
                        run_arm: format!("fast-n-{v}"),
                        summary: Some(arm),
                        comparison: Some(compare(&base, &arm, Direction::Lower, rule)),
                        scaling: None,
                        efficiency: None,
                    }],
                }
            })
            .collect();
        (sweep, rows)
    }

    #[test]
    fn a_planted_crossover_is_found_where_it_is_and_a_flat_sweep_has_none() {
        let seeds = 400;
        let found = (0..seeds)
            .filter(|&seed| {
                let (sweep, rows) = simulated(seed, |n| if n >= 4 { 1.3 } else { 1.0 });
                crossover(&sweep, &rows, "fast", "").point.as_deref() == Some("4")
            })
            .count();
        let flat = (0..seeds)
            .filter(|&seed| {
                let (sweep, rows) = simulated(1_000_000 + seed, |_| 1.0);
                crossover(&sweep, &rows, "fast", "").point.is_none()
            })
            .count();
        eprintln!(
            "planted crossover at 4 found in {found} of {seeds} seeds; \
             no crossover on the flat sweep in {flat} of {seeds}"
        );
        assert!(found * 100 >= seeds as usize * 95, "{found} of {seeds}");
        assert!(flat * 100 >= seeds as usize * 95, "{flat} of {seeds}");
    }

    #[test]
    fn the_crossover_names_the_point_before_it_and_the_json_its_value() {
        let (sweep, rows) = simulated(7, |n| if n >= 4 { 1.3 } else { 1.0 });
        let c = crossover(&sweep, &rows, "fast", "");
        assert_eq!(c.point.as_deref(), Some("4"));
        let (before, speedup, verdict) = c.before.clone().unwrap();
        assert_eq!(before, "2");
        assert!(speedup.is_some());
        assert_ne!(verdict, Verdict::Improved);
        let json = crossover_json(&sweep, std::slice::from_ref(&c));
        assert_eq!(json["fast"], serde_json::json!(4));
        // Paying everywhere: from the first point, nothing before it.
        let (sweep, rows) = simulated(8, |_| 1.5);
        let c = crossover(&sweep, &rows, "fast", "");
        assert_eq!(c.point.as_deref(), Some("1"));
        assert!(c.before.is_none());
        // Paying only in the middle is no crossover: it must stay paid.
        let (sweep, rows) = simulated(9, |n| if n == 2 || n == 4 { 1.5 } else { 1.0 });
        let c = crossover(&sweep, &rows, "fast", "");
        assert_eq!(c.point, None);
        assert_eq!(c.before.as_ref().map(|b| b.0.as_str()), Some("8"));
        assert_eq!(
            crossover_json(&sweep, &[c])["fast"],
            serde_json::Value::Null
        );
        // A point not judged before the paying run: where it starts is unknown.
        let (sweep, mut rows) = simulated(10, |n| if n >= 4 { 1.5 } else { 1.0 });
        rows[1].cells[0].comparison = None;
        let c = crossover(&sweep, &rows, "fast", "");
        assert!(!c.determined);
        assert_eq!(c.point.as_deref(), Some("4"));
        assert_eq!(
            crossover_json(&sweep, std::slice::from_ref(&c))["fast"],
            serde_json::Value::Null
        );
        for row in &mut rows {
            row.cells[0].comparison = None;
        }
        assert!(!crossover(&sweep, &rows, "fast", "").determined);
    }
}
