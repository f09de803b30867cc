//! Which columns a report shows and what each metric is: the file's
//! `[[columns]]` or the workload's defaults, the metrics the store must
//! fold for them, the primary metric, each metric's direction and whether
//! it is judged at all. It reads the plan and the recorded metric names
//! only; it must not look at cells or their numbers.

use crate::experiment::{Fold, Plan, Show};
use crate::report::model::{ColumnKind, Prose, ReportColumn};
use crate::report::stats::{direction_for, Direction};
use crate::store::Experiment;

/// The metric a report's net result, gate and series checks are about:
/// the plan's ([`Plan::primary_metric`], the one `warmup = "auto"` used),
/// else, for a plan without gate or columns, the first speedup column of
/// the default columns, else the first column.
pub fn primary_metric(plan: Option<&Plan>, columns: &[ReportColumn]) -> Option<String> {
    plan.and_then(Plan::primary_metric).or_else(|| {
        let judged = || columns.iter().filter(|c| !c.descriptive);
        judged()
            .find(|c| c.kind == ColumnKind::Speedup)
            .or(judged().next())
            .map(|c| c.metric.clone())
    })
}

/// The `direction` the file gives `metric` on any of its columns or guards
/// (the reader makes them agree).
fn file_direction(plan: Option<&Plan>, metric: &str) -> Option<Direction> {
    plan.and_then(|p| {
        p.columns
            .iter()
            .filter(|c| c.metric == metric)
            .find_map(|c| c.direction)
            .or_else(|| {
                p.guards
                    .iter()
                    .filter(|g| g.metric == metric)
                    .find_map(|g| g.direction)
            })
    })
}

/// Whether `metric` describes the work rather than its speed: the file
/// says `direction = "none"`, or says nothing and the vocabulary gives it
/// no better side. Such a metric is shown in the table and never judged.
pub fn is_descriptive(plan: Option<&Plan>, metric: &str) -> bool {
    // The gate's and the guards' metrics are judged: the reader makes sure
    // they have a direction.
    let judged = plan.is_some_and(|p| {
        p.gate.iter().any(|g| g.metric == metric) || p.guards.iter().any(|g| g.metric == metric)
    });
    if judged {
        return false;
    }
    match file_direction(plan, metric) {
        Some(d) => d == Direction::Neither,
        None => crate::metrics::lookup(metric).is_some_and(|i| i.better == Direction::Neither),
    }
}

/// The direction of a metric: the file's `direction` on any column of that
/// metric, else the name table.
pub fn metric_direction(plan: Option<&Plan>, metric: &str) -> (Direction, bool) {
    match file_direction(plan, metric) {
        // A `none` column is never judged (it is descriptive), but a report
        // row carries a side all the same: lower's, as it always has.
        Some(Direction::Neither) => (Direction::Lower, true),
        Some(d) => (d, true),
        None => direction_for(metric),
    }
}

/// Label of a speedup column derived from a value label: `iter s` →
/// `iter speedup`, `nodes/s` → `nodes/s speedup`.
fn speedup_label(label: &str) -> String {
    let base = label.strip_suffix(" s").unwrap_or(label);
    format!("{base} speedup")
}

/// Columns when the file has none, per workload; optional ones only when
/// the metric was recorded.
fn default_columns(workload: &str, present: &[String]) -> Vec<(String, String, ColumnKind)> {
    let has = |m: &str| present.iter().any(|p| p == m);
    let v = |m: &str, l: &str| (m.to_string(), l.to_string(), ColumnKind::Value);
    let s = |m: &str, l: &str| (m.to_string(), l.to_string(), ColumnKind::Speedup);
    let mut cols = Vec::new();
    match workload {
        "train" => {
            cols.push(v("time/iteration_seconds", "iter s"));
            cols.push(v("time/traversal_seconds", "traversal s"));
            cols.push(s("time/traversal_seconds", "traversal speedup"));
            cols.push(s("time/iteration_seconds", "iter speedup"));
            cols.push(v("traversal/nodes_per_second", "nodes/s"));
            if has("interleaved/avg_batch_size") {
                cols.push(v("interleaved/avg_batch_size", "batch mean"));
            }
            if has("interleaved/max_batch_size") {
                cols.push(v("interleaved/max_batch_size", "batch max"));
            }
        }
        "bench-forward" => {
            cols.push(v("bench/us_per_call", "µs/call"));
            cols.push(v("bench/us_per_state", "µs/state"));
            cols.push(s("bench/us_per_call", "µs/call speedup"));
        }
        "bench-trainer" => {
            // The trainer bench reports per step; accept a per-call name too.
            let metric = if has("bench/ms_per_call") && !has("bench/ms_per_step") {
                "bench/ms_per_call"
            } else {
                "bench/ms_per_step"
            };
            cols.push(v(metric, "ms/call"));
            cols.push(s(metric, "ms/call speedup"));
        }
        // Commands lcx counted (`timing = "instructions"`): instructions
        // lead, judged; the other counts and the time under valgrind follow.
        _ if has(crate::bench::cachegrind::INSTRUCTIONS) => {
            use crate::bench::cachegrind::{
                ESTIMATED_CYCLES, INSTRUCTIONS, L1_MISSES, LL_MISSES, VALGRIND_SECONDS,
            };
            cols.push(v(INSTRUCTIONS, "instructions"));
            cols.push(s(INSTRUCTIONS, "instructions speedup"));
            for (m, l) in [
                (ESTIMATED_CYCLES, "est. cycles"),
                (L1_MISSES, "L1 misses"),
                (LL_MISSES, "LL misses"),
                (VALGRIND_SECONDS, "valgrind s"),
            ] {
                if has(m) {
                    cols.push(v(m, l));
                }
            }
        }
        // Commands lcx timed (`timing = "process"`): the wall time leads,
        // judged; the rest of what lcx measured follows as values.
        _ if has(crate::bench::process::WALL) => {
            use crate::bench::process::{MAX_RSS, SHELL, SYSTEM, USER, WALL};
            cols.push(v(WALL, "wall s"));
            cols.push(s(WALL, "wall speedup"));
            for (m, l) in [
                (USER, "user s"),
                (SYSTEM, "system s"),
                (MAX_RSS, "max RSS"),
                (SHELL, "shell s"),
            ] {
                if has(m) {
                    cols.push(v(m, l));
                }
            }
        }
        _ => {
            if has("time/iteration_seconds") {
                cols.push(v("time/iteration_seconds", "iter s"));
                cols.push(s("time/iteration_seconds", "iter speedup"));
            }
            if has("time/traversal_seconds") {
                cols.push(v("time/traversal_seconds", "traversal s"));
                cols.push(s("time/traversal_seconds", "traversal speedup"));
            }
            if cols.is_empty() {
                // An unknown command: show what it printed, up to six metrics.
                for m in present.iter().filter(|m| *m != "iteration").take(6) {
                    cols.push(v(m, m));
                }
            }
        }
    }
    cols
}

/// The report's columns: the file's `[[columns]]` (a `both` column becomes
/// a value and a speedup column), else the workload's defaults.
pub fn resolve_columns(
    e: &Experiment,
    plan: Option<&Plan>,
    present: &[String],
) -> Vec<ReportColumn> {
    let specs: Vec<(String, String, ColumnKind)> = match plan {
        Some(p) if !p.columns.is_empty() => p
            .columns
            .iter()
            .flat_map(|c| {
                let label = if c.label.is_empty() {
                    c.metric.clone()
                } else {
                    c.label.clone()
                };
                match c.show {
                    Show::Value => vec![(c.metric.clone(), label, ColumnKind::Value)],
                    Show::Speedup => vec![(c.metric.clone(), label, ColumnKind::Speedup)],
                    Show::Both => vec![
                        (c.metric.clone(), label.clone(), ColumnKind::Value),
                        (c.metric.clone(), speedup_label(&label), ColumnKind::Speedup),
                    ],
                }
            })
            .collect(),
        _ => default_columns(&e.workload, present),
    };
    // Guarded (learning) metrics sit beside the speed columns.
    let mut specs = specs;
    for g in plan.map(|p| p.guards.as_slice()).unwrap_or_default() {
        if !specs.iter().any(|(m, _, _)| *m == g.metric) {
            let label = g.fold.default_label(&g.metric);
            specs.push((g.metric.clone(), label, ColumnKind::Value));
        }
    }
    specs
        .into_iter()
        .map(|(metric, label, kind)| {
            let (direction, known) = metric_direction(plan, &metric);
            let descriptive = is_descriptive(plan, &metric);
            ReportColumn {
                fold: plan.map_or(Fold::Mean, |p| p.fold_of(&metric)),
                metric,
                label,
                kind,
                direction,
                // A descriptive metric's direction is not guessed: unused.
                direction_known: known || descriptive,
                descriptive,
            }
        })
        .collect()
}

/// What the default columns of a command's report left out: a command
/// that printed more metrics than the table shows is told which, never
/// shown a part as if it were the whole.
pub(super) fn left_out_remark(
    e: &Experiment,
    plan: Option<&Plan>,
    columns: &[ReportColumn],
    present: &[String],
) -> Option<Prose> {
    let chosen_by_file = plan.is_some_and(|p| !p.columns.is_empty());
    if chosen_by_file
        || matches!(
            e.workload.as_str(),
            "train" | "bench-forward" | "bench-trainer"
        )
    {
        return None;
    }
    let left: Vec<&String> = present
        .iter()
        .filter(|m| *m != "iteration" && !columns.iter().any(|c| &c.metric == *m))
        .collect();
    if left.is_empty() {
        return None;
    }
    let shown = present.len() - left.len() - usize::from(present.iter().any(|m| m == "iteration"));
    let named = Prose::join(
        left.iter().take(5).map(|m| Prose::of_name(m.as_str())),
        ", ",
    );
    Some(
        Prose::ours(format!(
            "The table shows {shown} of the {} metrics recorded (the first by name); the \
             other {} (",
            shown + left.len(),
            left.len()
        ))
        .then(named)
        .and(if left.len() > 5 { ", …" } else { "" })
        .and(
            ") are stored: name them in `[[columns]]`, or read them with `lcx query` or \
             `lcx export`.",
        ),
    )
}

/// The metrics a report needs from the store: its columns' and the gate's.
pub fn needed_metrics(columns: &[ReportColumn], plan: Option<&Plan>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let gate = plan.and_then(|p| p.gate.as_ref()).map(|g| g.metric.clone());
    let guards = plan
        .map(|p| {
            p.guards
                .iter()
                .map(|g| g.metric.clone())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for m in columns
        .iter()
        .map(|c| c.metric.clone())
        .chain(gate)
        .chain(guards)
    {
        if !names.contains(&m) {
            names.push(m);
        }
    }
    names
}

/// The label a metric goes by in sentences: its value column's, else any
/// column's, else its name.
pub(crate) fn label_of(columns: &[ReportColumn], metric: &str) -> String {
    columns
        .iter()
        .find(|c| c.metric == metric && c.kind == ColumnKind::Value)
        .or_else(|| columns.iter().find(|c| c.metric == metric))
        .map(|c| c.label.clone())
        .unwrap_or_else(|| metric.to_string())
}
