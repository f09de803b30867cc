//! Stored rows → [`Report`]: column choice, per-arm statistics, verdicts,
//! the gate, reproduce commands and the environment.
//!
//! [`load`] asks the store for SQL aggregates only (per-run moments and
//! per-arm medians of the metrics the report shows), then [`assemble`] does
//! the arithmetic. `assemble` is pure so it can be tested without SQLite.

use std::collections::BTreeMap;

use crate::experiment::{self, Fold, Plan, Show};
use crate::store::report_read::RunMoments;
use crate::store::{Experiment, Run, RunStatus, Store, StoreError};

use super::model::*;
use super::stats::{
    compare, direction_for, Decision, Direction, GateTest, Summary, Verdict, VerdictRule,
};

/// Knobs of a report that come from the command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Overrides the gate's and the default (5%) minimum effect.
    pub min_effect: Option<f64>,
    /// Overrides the 0.05 significance level.
    pub alpha: Option<f64>,
    /// `--check` judges gates and guards on contended cells instead of
    /// calling them inconclusive.
    pub allow_contended: bool,
}

/// Everything [`assemble`] needs, as read from the store.
#[derive(Debug, Clone)]
pub struct Input {
    pub experiment: Experiment,
    pub runs: Vec<Run>,
    /// Distinct metric names recorded (for default columns).
    pub metric_names: Vec<String>,
    /// Warm-up-excluded per-run moments of the report's metrics.
    pub moments: Vec<RunMoments>,
    /// (arm, metric, median) over the runs the statistics use.
    pub medians: Vec<(String, String, f64)>,
    /// Live non-finite values: (run id, iteration, metric, value).
    pub nonfinite: Vec<(i64, i64, String, String)>,
    /// Per-run moments of [`PERF_METRICS`] (for the fraction of peak).
    pub perf: Vec<RunMoments>,
    /// The primary metric's first
    /// [`SERIES_HEAD`](crate::experiment::warmup::SERIES_HEAD) values per
    /// counted run (warm-up included), for warm-up detection, trends and
    /// outliers.
    pub series: Vec<(i64, Vec<(i64, f64)>)>,
    /// (arm, precision asked for, precision that ran), distinct.
    pub precisions: Vec<(String, String, String)>,
    /// (arm, what its training steps ran on), distinct: the
    /// `training_kernel` text field.
    pub kernels: Vec<(String, String)>,
    /// (arm, field, count, example) of text values ([`Store::text_counts`]).
    pub texts: Vec<(String, String, i64, String)>,
    /// The database the report was read from, for the reproduce lines'
    /// `--db`; `None` for the default `lcx.db` (or in memory).
    pub db: Option<String>,
}

/// What the arms' training steps ran on (the `training_kernel` field), where
/// their lines say: the same host trains at two speeds with lcx's kernel at
/// its two widths, and arms named for a width tie on a CPU that lacks it.
/// `arms` are the report's arms with lines, in order. One value that every
/// one of them gave is said once; otherwise each arm's (all of an arm's,
/// where it changed), and the arms whose lines did not say (an older
/// revision, no line yet) are named as such. Nothing where no arm said.
pub(crate) fn kernel_remark(kernels: &[(String, String)], arms: &[&str]) -> Option<Prose> {
    let first = kernels.first()?;
    let of = |arm: &str| -> Vec<&str> {
        kernels
            .iter()
            .filter(|(a, _)| a == arm)
            .map(|(_, k)| k.as_str())
            .collect()
    };
    if arms.iter().all(|a| of(a) == [first.1.as_str()]) {
        return Some(
            Prose::ours("Training ran on ")
                .text(&first.1)
                .and(" in every arm that ran."),
        );
    }
    let each = arms.iter().map(|arm| match of(arm).as_slice() {
        [] => Prose::of_name(*arm).and(" did not say"),
        ks => Prose::of_name(*arm).and(" on ").text(ks.join(" and ")),
    });
    Some(
        Prose::ours("Training ran on: ")
            .then(Prose::join(each, "; "))
            .and("."),
    )
}

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

/// What the trainer emits of its work rate, and the device ceiling it
/// measured on a GPU: read against the recorded peak.
pub const PERF_METRICS: [&str; 4] = [
    "perf/traversal_gflops",
    "perf/training_gflops",
    "peak/device_matmul_gflops",
    "peak/device_matmul_half_gflops",
];

/// The plan stored with the experiment (one reader: [`Plan::from_stored`]).
pub fn stored_plan(e: &Experiment) -> Result<Plan, experiment::plan::StoredPlanError> {
    Plan::from_stored(&e.plan_json)
}

fn plan_direction(d: experiment::Direction) -> Direction {
    match d {
        // Never used to judge: a `none` column is descriptive.
        experiment::Direction::Lower | experiment::Direction::Neither => Direction::LowerIsBetter,
        experiment::Direction::Higher => Direction::HigherIsBetter,
    }
}

/// The `direction` the file gives `metric` on any of its columns or guards
/// (the reader makes them agree).
fn file_direction(plan: Option<&Plan>, metric: &str) -> Option<experiment::Direction> {
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
        Some(d) => d == experiment::Direction::Neither,
        None => crate::metrics::lookup(metric)
            .is_some_and(|i| i.better == crate::metrics::Better::Neither),
    }
}

/// The direction of a metric: the file's `direction` on any column of that
/// metric, else the name table.
pub fn metric_direction(plan: Option<&Plan>, metric: &str) -> (Direction, bool) {
    match file_direction(plan, metric) {
        Some(d) => (plan_direction(d), true),
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
fn left_out_remark(
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

/// The runs whose numbers count: completed ones, or for an arm without any
/// completed run, whatever it has (the arm is then marked partial).
pub fn counted_runs(runs: &[Run]) -> Vec<i64> {
    let mut by_arm: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in runs {
        by_arm.entry(&r.arm).or_default().push(r);
    }
    let mut ids = Vec::new();
    for arm_runs in by_arm.values() {
        let done: Vec<i64> = arm_runs
            .iter()
            .filter(|r| r.status == RunStatus::Completed)
            .map(|r| r.id)
            .collect();
        if done.is_empty() {
            ids.extend(arm_runs.iter().map(|r| r.id));
        } else {
            ids.extend(done);
        }
    }
    ids.sort_unstable();
    ids
}

/// The first line of a cell's error (the runner's word and the child's
/// last stderr line), or its status.
fn first_error_line(r: &Run) -> String {
    r.error
        .as_deref()
        .and_then(|e| e.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(str::to_string)
        .unwrap_or_else(|| r.status.to_string())
}

/// Why no verdict, gate or guard may use an arm's numbers, if none may.
/// Judgements rest on completed cells only, and the rule needs two
/// replicates per arm: two completed cells when the arm has several (each
/// repeat one replicate), its one cell completed when it has one (its
/// iterations the replicates). Cells skipped as not needed (adaptive
/// repeats) are neither missing nor failed.
pub fn unjudged_reason(arm: &str, runs: &[Run], iterations: i64) -> Option<Prose> {
    let mine: Vec<&Run> = runs
        .iter()
        .filter(|r| r.arm == arm && r.status != RunStatus::Skipped)
        .collect();
    let completed = mine
        .iter()
        .filter(|r| r.status == RunStatus::Completed)
        .count();
    let need = if mine.len() > 1 { 2 } else { 1 };
    if mine.is_empty() || completed >= need {
        return None;
    }
    let not_done: Vec<&&Run> = mine
        .iter()
        .filter(|r| r.status != RunStatus::Completed)
        .collect();
    // The cell that says why, before a pending or interrupted one.
    let first = not_done
        .iter()
        .find(|r| r.error.is_some())
        .or(not_done.first())
        .map(|r| {
            Prose::ours(format!(
                " ({} after {} of {}: ",
                r.status,
                r.iterations_done,
                crate::text::counted(iterations.max(0) as u64, "iteration"),
            ))
            .text(first_error_line(r))
            .and(")")
        });
    let rule = if need == 2 {
        "a judgement needs 2 completed cells per arm (each repeat one replicate)"
    } else {
        "a judgement needs its one cell completed"
    };
    Some(
        Prose::of_name(arm)
            .and(format!(
                ": {} of {} did not complete",
                not_done.len(),
                crate::text::counted(mine.len() as u64, "cell"),
            ))
            .then(first.unwrap_or_default())
            .and(format!("; {rule}")),
    )
}

/// The metric `lcx report` leads with for `experiment` ([`primary_metric`]
/// over the columns the report would show): `lcx history`'s default, so
/// that the two speak of the same number.
pub fn report_metric(store: &Store, experiment: &Experiment) -> Result<Option<String>, StoreError> {
    let metric_names = store.metric_names_fast(experiment.id)?;
    let plan = stored_plan(experiment).ok();
    let columns = resolve_columns(experiment, plan.as_ref(), &metric_names);
    Ok(primary_metric(plan.as_ref(), &columns))
}

/// Reads an experiment's rows and builds its report.
pub fn load(store: &Store, experiment_id: i64, options: Options) -> Result<Report, StoreError> {
    let experiment = store
        .experiment(experiment_id)?
        .ok_or_else(|| StoreError::ExperimentNotFound(experiment_id.to_string()))?;
    let runs = store.runs(experiment_id)?;
    let metric_names = store.metric_names_fast(experiment_id)?;
    let plan = stored_plan(&experiment).ok();
    let columns = resolve_columns(&experiment, plan.as_ref(), &metric_names);
    let needed = needed_metrics(&columns, plan.as_ref());
    let counted = counted_runs(&runs);
    let last: Vec<String> = needed
        .iter()
        .filter(|m| plan.as_ref().is_some_and(|p| p.fold_of(m) == Fold::Last))
        .cloned()
        .collect();
    let summaries = super::moments::summaries(store, experiment_id, &needed, &counted, &last)?;
    let nonfinite = store.nonfinite_values(experiment_id)?;
    let perf_names: Vec<String> = PERF_METRICS
        .iter()
        .filter(|m| metric_names.iter().any(|n| n == *m))
        .map(|m| (*m).to_string())
        .collect();
    let perf = super::moments::run_moments(store, experiment_id, &perf_names, &counted)?;
    let mut series = Vec::new();
    if let Some(metric) = primary_metric(plan.as_ref(), &columns) {
        for id in &counted {
            series.push((
                *id,
                store.metric_head(*id, &metric, crate::experiment::warmup::SERIES_HEAD)?,
            ));
        }
    }
    Ok(assemble(
        Input {
            experiment,
            runs,
            metric_names,
            moments: summaries.moments,
            medians: summaries.medians,
            nonfinite,
            perf,
            series,
            precisions: store.precisions(experiment_id)?,
            kernels: store.text_values(experiment_id, "training_kernel")?,
            texts: store.text_counts(experiment_id)?,
            db: store
                .path()
                .filter(|p| *p != std::path::Path::new(crate::store::DEFAULT_DB))
                .map(|p| p.display().to_string()),
        },
        options,
    ))
}

/// `YYYY-MM-DD` of a stored timestamp. The date names archive files, so
/// anything else (a row edited by hand) reads `undated` rather than going
/// into a path.
fn short_date(ts: &str) -> String {
    let date = ts.get(..10).unwrap_or("");
    let shaped = date.len() == 10
        && date.char_indices().all(|(i, c)| {
            if i == 4 || i == 7 {
                c == '-'
            } else {
                c.is_ascii_digit()
            }
        });
    if shaped {
        date.to_string()
    } else {
        "undated".to_string()
    }
}

/// Whether adaptive repeats may stop: every non-baseline arm's speedup on
/// the gate's metric and on every speedup column has an interval within
/// ±`precision` of its estimate (on the log scale). `None`: go on.
pub fn precision_reached(report: &Report, precision: f64) -> Option<String> {
    // Only judged metrics have a speedup to be precise about.
    let judged = || report.columns.iter().filter(|c| !c.descriptive);
    let mut metrics: Vec<&str> = judged()
        .filter(|c| c.kind == ColumnKind::Speedup)
        .map(|c| c.metric.as_str())
        .collect();
    if let Some(g) = &report.gate {
        metrics.push(&g.metric);
    }
    if metrics.is_empty() {
        if let Some(c) = judged().next() {
            metrics.push(&c.metric);
        }
    }
    let others: Vec<&ArmResult> = report.arms.iter().filter(|a| !a.is_baseline).collect();
    if metrics.is_empty() || others.is_empty() {
        return None;
    }
    for arm in others {
        for m in &metrics {
            let s = arm.metric(m)?.comparison?.speedup?;
            if !super::stats::within_precision(&s, precision) {
                return None;
            }
        }
    }
    Some(format!(
        "every judged speedup's interval is within ±{}%",
        super::words::num(precision * 100.0)
    ))
}

/// Each counted cell's value of `metric` in `arm` (its mean after the
/// warm-up; its last value under `fold = "last"`), by repeat.
fn cell_values(
    moments: &[RunMoments],
    counted: &[i64],
    arm: &str,
    metric: &str,
) -> BTreeMap<i64, f64> {
    moments
        .iter()
        .filter(|m| m.arm == arm && m.name == metric && m.n > 0 && counted.contains(&m.run_id))
        .map(|m| (m.repeat, m.mean()))
        .collect()
}

/// Every `[[guard]]` on every arm it guards.
fn guard_outcomes(
    plan: Option<&Plan>,
    arms: &[ArmResult],
    baseline: &str,
    alpha: f64,
    moments: &[RunMoments],
    completed: &[i64],
    unjudged: &BTreeMap<&str, Prose>,
) -> Vec<GuardOutcome> {
    let Some(plan) = plan else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for g in &plan.guards {
        // The guard's own direction, else its metric's in the file (a
        // column's), else the name table's. The reader refuses `none` on a
        // guard and a guard disagreeing with a column.
        let direction = match g.direction {
            Some(d) => plan_direction(d),
            None => metric_direction(Some(plan), &g.metric).0,
        };
        let baseline = g.baseline.as_deref().unwrap_or(baseline);
        let base = arms
            .iter()
            .find(|a| a.name == baseline)
            .and_then(|a| a.metric(&g.metric))
            .and_then(|m| m.replicate);
        let base_cells = g
            .paired
            .then(|| cell_values(moments, completed, baseline, &g.metric));
        for arm in arms.iter().filter(|a| a.name != baseline) {
            if g.arm.as_ref().is_some_and(|x| x != &arm.name) {
                continue;
            }
            let value = arm.metric(&g.metric).and_then(|m| m.replicate);
            let mut pairs = None;
            // Every side that cannot be judged is named.
            let mut missing = Vec::new();
            match (unjudged.get(baseline), &base) {
                (Some(why), _) => missing.push(Prose::ours("baseline ").then(why.clone())),
                (None, None) => missing.push(
                    Prose::ours("baseline ")
                        .name(baseline)
                        .and(" has no ")
                        .name(&g.metric),
                ),
                _ => {}
            }
            match (unjudged.get(arm.name.as_str()), &value) {
                (Some(why), _) => missing.push(why.clone()),
                (None, None) => {
                    missing.push(Prose::of_name(&arm.name).and(" has no ").name(&g.metric))
                }
                _ => {}
            }
            let (test, decision, why) = match (&base, &value) {
                _ if !missing.is_empty() => (
                    None,
                    Decision::Inconclusive,
                    Some(Prose::join(missing, "; ")),
                ),
                (None, _) | (_, None) => (None, Decision::Inconclusive, None),
                (Some(b), Some(a)) => {
                    let t = match &base_cells {
                        Some(base_cells) => {
                            // (arm, baseline) per repeat that both ran.
                            let cells: Vec<(f64, f64)> =
                                cell_values(moments, completed, &arm.name, &g.metric)
                                    .into_iter()
                                    .filter_map(|(k, v)| base_cells.get(&k).map(|b| (v, *b)))
                                    .collect();
                            pairs = Some(cells.len());
                            super::stats::paired_guard_test(&cells, direction, g.margin, alpha)
                        }
                        None => super::stats::guard_test(b, a, direction, g.margin, alpha),
                    };
                    let why = match t.decision {
                        Decision::Fail => Some(Prose::ours(format!(
                            "worse by {} (interval {} to {}), beyond the margin of {}",
                            super::words::num(-t.gain),
                            super::words::num(-t.ci_high),
                            super::words::num(-t.ci_low),
                            super::words::num(g.margin)
                        ))),
                        Decision::Inconclusive if t.ci_low.is_nan() && g.paired => {
                            Some(Prose::ours(format!(
                                "{} in both arms: no interval",
                                crate::text::counted(pairs.unwrap_or(0) as u64, "repeat")
                            )))
                        }
                        Decision::Inconclusive if t.ci_low.is_nan() => {
                            Some("one replicate: no interval".into())
                        }
                        Decision::Inconclusive => {
                            let n = match pairs {
                                Some(p) => p,
                                None => b.n.min(a.n),
                            };
                            let more = super::stats::replicates_to_reach(
                                (t.ci_high - t.ci_low) / 2.0,
                                t.gain + g.margin,
                                n,
                            )
                            .map(|k| {
                                format!("; about {k} more replicates per arm would likely decide")
                            })
                            .unwrap_or_else(|| "; more repeats narrow it".into());
                            Some(Prose::ours(format!(
                                "the interval {} to {} holds minus the margin: neither shown \
                                 within it nor beyond{more}",
                                super::words::num(t.ci_low),
                                super::words::num(t.ci_high)
                            )))
                        }
                        Decision::Pass => None,
                    };
                    (Some(t), t.decision, why)
                }
            };
            out.push(GuardOutcome {
                metric: g.metric.clone(),
                arm: arm.name.clone(),
                baseline: baseline.to_string(),
                fold: g.fold,
                margin: g.margin,
                direction,
                pairs,
                test,
                decision,
                why,
            });
        }
    }
    out
}

/// What the primary metric's series say about the declared warm-up: a
/// transient longer than it (MSER), a trend after it, outlier iterations
/// (kept in the statistics, named here).
fn series_remarks(
    e: &Experiment,
    runs: &[Run],
    series: &[(i64, Vec<(i64, f64)>)],
    metric: &str,
) -> Vec<Prose> {
    let mut out = Vec::new();
    // Cells whose declared warm-up drops more than detection finds.
    let mut longer: Vec<(i64, usize)> = Vec::new();
    for (run_id, points) in series {
        let Some(run) = runs.iter().find(|r| r.id == *run_id) else {
            continue;
        };
        let warmup = run.warmup.unwrap_or(e.warmup).max(0) as usize;
        let cell = || {
            Prose::ours(format!("run {run_id} ("))
                .name(&run.arm)
                .and(format!(" #{}): ", run.repeat))
                .name(metric)
        };
        let values: Vec<f64> = points.iter().map(|p| p.1).collect();
        let detected = crate::experiment::warmup::detect_warmup(&values);
        if detected > warmup {
            out.push(cell().and(format!(
                " settles only after iteration {} (detected), but the warm-up is {warmup}: {} \
                 may be start-up transient.",
                points[detected - 1].0,
                crate::text::counted((detected - warmup) as u64, "more iteration")
            )));
        } else if detected < warmup && run.warmup.is_none() && values.len() >= 8 {
            longer.push((*run_id, detected));
        }
        let after: Vec<f64> = values.iter().skip(warmup).copied().collect();
        if let Some((slope, p)) = super::stats::trend(&after) {
            if p < 0.01 {
                out.push(cell().and(format!(
                    " trends after the warm-up ({:+.2} % per iteration, {}): the mean depends \
                     on how long the cell ran.",
                    slope * 100.0,
                    super::words::p_text(p)
                )));
            }
        }
        let flagged = super::stats::outliers(&after);
        if !flagged.is_empty() {
            let shown: Vec<String> = flagged
                .iter()
                .take(5)
                .map(|(i, z)| format!("{} (z = {z:.1})", points[warmup + i].0))
                .collect();
            out.push(
                Prose::ours(format!("run {run_id} ("))
                    .name(&run.arm)
                    .and(format!(
                        " #{}): outlier iteration{} of ",
                        run.repeat,
                        if flagged.len() == 1 { "" } else { "s" }
                    ))
                    .name(metric)
                    .and(format!(
                " by the modified z-score (beyond {:.1} on the MAD, which Gaussian noise of {} \
                 passes about 3 % of the time), kept in the statistics: {}{}.",
                super::stats::outlier_threshold(after.len()),
                crate::text::counted(after.len() as u64, "value"),
                shown.join(", "),
                if flagged.len() > 5 {
                    format!(" and {} more", flagged.len() - 5)
                } else {
                    String::new()
                }
            )),
            );
        }
    }
    if let Some(most) = longer.iter().map(|(_, d)| *d).max() {
        out.push(Prose::ours(format!(
            "The declared warm-up ({}) drops more than detection finds in {} of {} \
             (detected at most {most}): those iterations look like the rest and are \
             excluded all the same.",
            e.warmup,
            longer.len(),
            crate::text::counted(series.len() as u64, "cell"),
        )));
    }
    out
}

/// The fraction of the recorded peak each arm's phases reached, for arms
/// whose trainer emitted its work rate. A GPU arm that measured its
/// device's matrix-product ceiling is read against that.
fn roofline(
    e: &Experiment,
    arms: &[(i64, String, String)],
    perf: &[RunMoments],
    counted: &[i64],
) -> Option<Roofline> {
    let mean = |arm: &str, metric: &str| {
        let ms: Vec<&RunMoments> = perf
            .iter()
            .filter(|m| m.arm == arm && m.name == metric && m.n > 0 && counted.contains(&m.run_id))
            .collect();
        pooled(&ms, None).map(|s| s.mean)
    };
    let rows: Vec<RooflineArm> = arms
        .iter()
        .map(|(_, arm, _)| RooflineArm {
            arm: arm.clone(),
            traversal_gflops: mean(arm, PERF_METRICS[0]),
            training_gflops: mean(arm, PERF_METRICS[1]),
            device_peak_gflops: mean(arm, PERF_METRICS[2]),
            device_half_peak_gflops: mean(arm, PERF_METRICS[3]),
        })
        .filter(|r| r.traversal_gflops.is_some() || r.training_gflops.is_some())
        .collect();
    if rows.is_empty() {
        return None;
    }
    let f = &e.fingerprint;
    Some(Roofline {
        peak_gflops: f.peak_fp32_gflops,
        peak_gflops_core: f.peak_fp32_gflops_core,
        isa: f.peak_isa.clone(),
        threads: f.cpu_cores,
        provenance: peak_provenance(f),
        note: f.peak_note.clone(),
        arms: rows,
    })
}

/// How an experiment's ceiling was found: "best of 5, spread 2 %, probed
/// 2026-12-03, cached".
pub(crate) fn peak_provenance(f: &crate::store::Fingerprint) -> Option<String> {
    let source = f.peak_source.as_deref()?;
    let mut parts = Vec::new();
    match f.peak_tries {
        Some(0) => parts.push("no clean try".to_string()),
        Some(tries) => parts.push(format!("best of {tries}")),
        None => {}
    }
    if let Some(spread) = f.peak_spread {
        parts.push(format!("spread {:.0} %", 100.0 * spread));
    }
    if let Some(at) = &f.peak_probed_at {
        parts.push(format!("probed {}", at.get(..10).unwrap_or(at)));
    }
    parts.push(match source {
        "cached" => "cached for this host and boot".to_string(),
        "disturbed" => {
            "DISTURBED: no try had all its cores, a floor rather than the ceiling".into()
        }
        "reprobed" => "probed again during the run".into(),
        other => other.to_string(),
    });
    Some(parts.join(", "))
}

/// A metric's non-finite values, each with the iterations it occurred at.
type ValuesAt = Vec<(String, Vec<i64>)>;

/// `iteration 3`, `iterations 2, 4, 5`, at most eight of them.
fn iteration_list(its: &[i64]) -> String {
    let shown: Vec<String> = its.iter().take(8).map(i64::to_string).collect();
    let more = if its.len() > 8 {
        format!(" and {} more", its.len() - 8)
    } else {
        String::new()
    };
    format!(
        "iteration{} {}{more}",
        if its.len() == 1 { "" } else { "s" },
        shown.join(", ")
    )
}

/// Program name for display: the lcx binary's path becomes `lcx`.
/// A cell's argv as a user types it: the runner's own binary (a path of
/// the machine that ran it) becomes `lcx`.
fn pretty_argv(argv: &[String], lcx: &str) -> Vec<String> {
    let mut out = argv.to_vec();
    if let Some(first) = out.first_mut() {
        let file = std::path::Path::new(first.as_str())
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("");
        if file == "lcx" || file.starts_with("lcx-") {
            *first = lcx.into();
        }
    }
    out
}

/// What the report must say about where the cells ran: on more than one
/// host (not a like-for-like comparison), or elsewhere than the machine
/// the Environment section describes (Slurm nodes).
fn placement_remarks(e: &Experiment, runs: &[Run]) -> Vec<Prose> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut by_arm: BTreeMap<(i64, &str), BTreeSet<&str>> = BTreeMap::new();
    for r in runs {
        if let Some(h) = r.host.as_deref() {
            by_arm
                .entry((r.arm_index, r.arm.as_str()))
                .or_default()
                .insert(h);
        }
    }
    let hosts: BTreeSet<&str> = by_arm.values().flatten().copied().collect();
    let mut out = Vec::new();
    let hardware = hardware_by_arm(runs);
    // Kinds of machine: the CPUs each arm was given may differ on purpose.
    let kinds: BTreeSet<String> = runs
        .iter()
        .filter_map(|r| r.node.as_ref().and_then(|n| n.kind()))
        .collect();
    if kinds.len() > 1 {
        let per_arm = hardware.iter().map(|((_, arm), h)| {
            let h: Vec<&str> = h.iter().map(String::as_str).collect();
            Prose::of_name(*arm).and(" on ").text(h.join(" and "))
        });
        out.push(
            Prose::ours(format!(
                "The cells ran on {} kinds of hardware (",
                kinds.len()
            ))
            .then(Prose::join(per_arm, "; "))
            .and(
                "): the speeds compared here come from different machines. Pin the cells to \
                 one node (`placement = \"same-node\"`) or ask for one kind (`constraint`) \
                 for a like-for-like A/B.",
            ),
        );
    } else if hosts.len() > 1 {
        let per_arm = by_arm.iter().map(|((_, arm), h)| {
            Prose::of_name(*arm)
                .and(" on ")
                .text(h.iter().copied().collect::<Vec<_>>().join(", "))
        });
        let same = if kinds.len() == 1 {
            " with the same recorded hardware"
        } else {
            ""
        };
        out.push(
            Prose::ours(format!(
                "The cells ran on {} different hosts{same} (",
                hosts.len()
            ))
            .then(Prose::join(per_arm, "; "))
            .and(
                "): machines differ in more than their hardware (load, clocks, cooling). Pin \
                 the cells to one node for a like-for-like A/B.",
            ),
        );
    }
    let coordinator = e.fingerprint.hostname.as_deref();
    let unrecorded: BTreeSet<&str> = runs
        .iter()
        .filter(|r| r.node.is_none())
        .filter_map(|r| r.host.as_deref())
        .filter(|h| Some(*h) != coordinator)
        .collect();
    if !unrecorded.is_empty() {
        out.push(
            Prose::ours("The Environment section describes the machine that ran `lcx run` (")
                .text(coordinator.unwrap_or("unknown"))
                .and("); cells ran on ")
                .text(unrecorded.into_iter().collect::<Vec<_>>().join(", "))
                .and(", whose hardware was not recorded."),
        );
    }
    out
}

/// The hardware each arm's cells ran on (as recorded per cell), in arm
/// order.
fn hardware_by_arm(runs: &[Run]) -> std::collections::BTreeMap<(i64, &str), Vec<String>> {
    let mut out: std::collections::BTreeMap<(i64, &str), Vec<String>> = Default::default();
    for r in runs {
        if let Some(h) = r.node.as_ref().and_then(|n| n.hardware()) {
            let list = out.entry((r.arm_index, r.arm.as_str())).or_default();
            if !list.contains(&h) {
                list.push(h);
            }
        }
    }
    out
}

/// Where cells ran when they did not have the whole host: each arm's
/// CPUs as its cells recorded them (an arm's `cpus`, `[measurement] pin`),
/// with the asked set where the kernel gave another; or, for cells that
/// were not pinned, the CPUs the runner itself was limited to (`taskset`).
fn cpus_by_arm(plan: Option<&Plan>, runs: &[Run]) -> Vec<(Prose, String)> {
    let recorded = |arm: &str| {
        let mut sets: Vec<&str> = runs
            .iter()
            .filter(|r| r.arm == arm)
            .filter_map(|r| r.cpus.as_deref())
            .collect();
        sets.sort_unstable();
        sets.dedup();
        sets
    };
    let arms = plan.map(|p| p.arms.as_slice()).unwrap_or_default();
    if arms.iter().any(|a| a.cpus.is_some()) {
        return arms
            .iter()
            .map(|arm| {
                let sets = recorded(&arm.name);
                let asked = arm.cpus.as_ref().map(|c| c.to_string());
                let value = match (sets.as_slice(), asked) {
                    ([], Some(asked)) => format!("{asked} (asked; no cell recorded its CPUs)"),
                    ([], None) => "not pinned".to_string(),
                    ([one], Some(asked)) if *one == asked => format!("{one} (pinned)"),
                    (sets, Some(asked)) => format!("{} (asked {asked})", sets.join("; ")),
                    (sets, None) => format!("{} (not pinned)", sets.join("; ")),
                };
                (Prose::ours("CPUs of ").name(&arm.name), value)
            })
            .collect();
    }
    // Unpinned cells that still had fewer CPUs than the host was online.
    let limited: Vec<&str> = {
        let mut sets: Vec<&str> = runs
            .iter()
            .filter(|r| {
                let count = r
                    .cpus
                    .as_deref()
                    .and_then(|c| crate::system::affinity::CpuSet::parse(c).ok())
                    .map(|c| c.len() as i64);
                matches!((count, r.contention.host_cpus), (Some(n), Some(online)) if n < online)
            })
            .filter_map(|r| r.cpus.as_deref())
            .collect();
        sets.sort_unstable();
        sets.dedup();
        sets
    };
    if limited.is_empty() {
        return Vec::new();
    }
    vec![(
        Prose::ours("CPUs of cells"),
        format!(
            "{}: fewer than the host had online (lcx itself was limited, by taskset or a \
             cgroup)",
            limited.join("; ")
        ),
    )]
}

fn environment(e: &Experiment, plan: Option<&Plan>, runs: &[Run]) -> Vec<(Prose, String)> {
    let mut env = vec![(Prose::ours("lcx"), e.lcx_version.clone())];
    // Cells that ran away from `lcx run` (Slurm jobs), or on different
    // hardware: what each arm's cells ran on, as each cell recorded it.
    let hardware = hardware_by_arm(runs);
    let kinds: std::collections::BTreeSet<&String> = hardware.values().flatten().collect();
    if kinds.len() > 1 || runs.iter().any(|r| r.slurm_job.is_some()) {
        for ((_, arm), h) in &hardware {
            let mut hosts: Vec<&str> = runs
                .iter()
                .filter(|r| r.arm == *arm)
                .filter_map(|r| r.node.as_ref().and_then(|n| n.hostname.as_deref()))
                .collect();
            hosts.sort_unstable();
            hosts.dedup();
            env.push((
                Prose::ours("cells of ").name(*arm).and(" ran on"),
                format!("{} ({})", h.join("; "), hosts.join(", ")),
            ));
        }
    }
    // Arms at code revisions: what each ran, and what changed since the
    // baseline's revision.
    for arm in plan.map(|p| p.arms.as_slice()).unwrap_or_default() {
        let Some(r) = &arm.revision else {
            continue;
        };
        let mut value = r.describe();
        if let Some(v) = &r.version {
            value.push_str(&format!(" ({v})"));
        }
        env.push((Prose::ours("revision of ").name(&arm.name), value));
        if r.log_total > 0 {
            let mut log = r.log.join("; ");
            if r.log_total > r.log.len() {
                log.push_str(&format!("; … {} more", r.log_total - r.log.len()));
            }
            env.push((
                Prose::ours("commits in ")
                    .name(&arm.name)
                    .and(" since the baseline"),
                format!("{}: {log}", r.log_total),
            ));
        }
    }
    env.extend(cpus_by_arm(plan, runs));
    match (&e.git_commit, e.git_dirty) {
        (Some(c), Some(true)) => env.push(("git commit".into(), format!("{c} (dirty)"))),
        (Some(c), _) => env.push(("git commit".into(), c.clone())),
        (None, _) => env.push(("git commit".into(), "not a git checkout".into())),
    }
    let sha: String = e.file_sha256.chars().take(12).collect();
    env.push((
        "experiment file".into(),
        format!("{} (sha256 {sha}…)", e.file_path),
    ));
    let f = &e.fingerprint;
    let mut push = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            env.push((Prose::ours(k), v));
        }
    };
    push("host", f.hostname.clone());
    push(
        "measured peak (lcx bench peak)",
        match (f.peak_fp32_gflops, f.peak_fp32_gflops_core) {
            (Some(all), Some(core)) => Some(format!(
                "{} GFLOP/s FP32 on all cores, {} on one ({}); {} GB/s stream{}",
                super::words::num(all),
                super::words::num(core),
                f.peak_isa.as_deref().unwrap_or("?"),
                f.peak_stream_gbytes_per_second
                    .map(super::words::num)
                    .unwrap_or_else(|| "?".into()),
                peak_provenance(f)
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default()
            )),
            _ => None,
        },
    );
    push("os", f.os.clone());
    push(
        "cpu",
        match (&f.cpu_model, f.cpu_cores) {
            (Some(m), Some(c)) => Some(format!("{m}, {c} cores")),
            (Some(m), None) => Some(m.clone()),
            (None, Some(c)) => Some(format!("{c} cores")),
            (None, None) => None,
        },
    );
    push(
        "memory",
        f.memory_bytes
            .map(|b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)),
    );
    push("gpu", f.gpu_name.clone());
    push("gpu driver", f.gpu_driver.clone());
    push("cuda (driver)", f.cuda_version.clone());
    push(
        "cuda available to libtorch",
        f.cuda_available
            .map(|b| if b { "yes" } else { "no" }.to_string()),
    );
    push("torch", f.torch_version.clone());
    push(
        "torch threads (intra/inter)",
        match (f.torch_intra_threads, f.torch_inter_threads) {
            (None, None) => None,
            (a, b) => Some(format!(
                "{}/{}",
                a.map(|x| x.to_string()).unwrap_or_else(|| "?".into()),
                b.map(|x| x.to_string()).unwrap_or_else(|| "?".into())
            )),
        },
    );
    env
}

/// Pools per-run moments into one summary (median from SQL).
fn pooled(moments: &[&RunMoments], median: Option<f64>) -> Option<Summary> {
    let mut s = super::moments::shown_summary(moments)?;
    s.median = median;
    Some(s)
}

/// Builds the report from rows; pure.
pub fn assemble(input: Input, options: Options) -> Report {
    let e = &input.experiment;
    let plan = stored_plan(e);
    let mut remarks = Vec::new();
    if let Err(why) = &plan {
        remarks.push(
            Prose::ours("The stored plan could not be read (")
                .text(why.to_string())
                .and("); default columns are shown and no gate is evaluated."),
        );
    }
    let plan = plan.ok();
    remarks.extend(placement_remarks(e, &input.runs));
    let columns = resolve_columns(e, plan.as_ref(), &input.metric_names);
    if let Some(remark) = left_out_remark(e, plan.as_ref(), &columns, &input.metric_names) {
        remarks.push(remark);
    }
    let needed = needed_metrics(&columns, plan.as_ref());
    let gate = plan.as_ref().and_then(|p| p.gate.clone());
    let rule = VerdictRule {
        alpha: options.alpha.unwrap_or(0.05),
        min_effect: options
            .min_effect
            .or(gate.as_ref().and_then(|g| g.min_effect))
            .unwrap_or(0.05),
    };

    // Arms in plan order (runs carry arm_index), labels from the runs.
    let mut arm_order: Vec<(i64, String, String)> = Vec::new();
    for r in &input.runs {
        if !arm_order.iter().any(|(_, name, _)| name == &r.arm) {
            arm_order.push((r.arm_index, r.arm.clone(), r.arm_label.clone()));
        }
    }
    arm_order.sort_by_key(|(i, _, _)| *i);
    let baseline = e
        .baseline
        .clone()
        .or_else(|| arm_order.first().map(|(_, n, _)| n.clone()))
        .unwrap_or_default();
    let counted = counted_runs(&input.runs);

    // Statistics per arm and metric, before comparisons.
    struct Stat {
        pooled: Option<Summary>,
        replicate: Option<Summary>,
        replicates: usize,
        unit: &'static str,
        excluded: i64,
    }
    let mut stats: BTreeMap<(String, String), Stat> = BTreeMap::new();
    for (_, arm, _) in &arm_order {
        for metric in &needed {
            let ms: Vec<&RunMoments> = input
                .moments
                .iter()
                .filter(|m| &m.arm == arm && &m.name == metric && counted.contains(&m.run_id))
                .collect();
            let excluded = ms.iter().map(|m| m.excluded).sum();
            let with_data: Vec<&RunMoments> = ms.iter().copied().filter(|m| m.n > 0).collect();
            let median = input
                .medians
                .iter()
                .find(|(a, n, _)| a == arm && n == metric)
                .map(|(_, _, v)| *v);
            let pooled = pooled(&with_data, median);
            let (replicate, replicates, unit) = match super::moments::replicate_summary(&with_data)
            {
                // One cell: its iterations, the pooled summary (with its median).
                Some((s, k, "iterations")) => (pooled.or(Some(s)), k, "iterations"),
                Some((s, k, u)) => (Some(s), k, u),
                None => (None, 0, "iterations"),
            };
            stats.insert(
                (arm.clone(), metric.clone()),
                Stat {
                    pooled,
                    replicate,
                    replicates,
                    unit,
                    excluded,
                },
            );
        }
    }

    // Verdicts, gates and guards rest on completed cells only.
    let unjudged: BTreeMap<&str, Prose> = arm_order
        .iter()
        .filter_map(|(_, arm, _)| {
            unjudged_reason(arm, &input.runs, e.iterations).map(|why| (arm.as_str(), why))
        })
        .collect();
    let base_judged = !unjudged.contains_key(baseline.as_str());
    let completed_ids: Vec<i64> = input
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Completed)
        .map(|r| r.id)
        .collect();
    let mut arms = Vec::new();
    for (_, arm, label) in &arm_order {
        let arm_runs: Vec<&Run> = input.runs.iter().filter(|r| &r.arm == arm).collect();
        let completed = arm_runs
            .iter()
            .filter(|r| r.status == RunStatus::Completed)
            .count();
        let is_baseline = arm == &baseline;
        let judged = base_judged && !unjudged.contains_key(arm.as_str());
        let metrics = needed
            .iter()
            .map(|metric| {
                let (direction, _) = metric_direction(plan.as_ref(), metric);
                let descriptive = is_descriptive(plan.as_ref(), metric);
                let st = &stats[&(arm.clone(), metric.clone())];
                let base = &stats
                    .get(&(baseline.clone(), metric.clone()))
                    .and_then(|b| b.replicate);
                let comparison = match (is_baseline || descriptive || !judged, base, &st.replicate)
                {
                    (false, Some(b), Some(a)) => Some(compare(b, a, direction, rule)),
                    _ => None,
                };
                MetricResult {
                    metric: metric.clone(),
                    direction,
                    summary: st.pooled,
                    replicate: st.replicate,
                    replicates: st.replicates,
                    replicate_unit: st.unit.to_string(),
                    excluded_warmup: st.excluded,
                    comparison,
                    descriptive,
                }
            })
            .collect();
        let partial = completed == 0 && arm_runs.iter().any(|r| r.iterations_done > 0);
        if partial {
            remarks.push(Prose::ours("Arm ").name(arm).and(
                " has no completed cell; its numbers come from incomplete cells (shown, never \
                 judged).",
            ));
        }
        if let Some(why) = unjudged.get(arm.as_str()) {
            remarks.push(Prose::ours("Not judged: ").then(why.clone()).and("."));
        }
        // Never label what did not run: an AMP arm whose steps ran fp32
        // says so in its own row.
        let mut label = label.clone();
        let mismatched: Vec<String> = input
            .precisions
            .iter()
            .filter(|(a, asked, ran)| a == arm && asked != ran)
            .map(|(_, asked, ran)| {
                format!("{} requested, ran {ran}: no CUDA", asked.to_uppercase())
            })
            .collect();
        if !mismatched.is_empty() {
            label = format!("{label} ({})", mismatched.join("; "));
            remarks.push(
                Prose::ours("Arm ")
                    .name(arm)
                    .and(": ")
                    .text(mismatched.join("; "))
                    .and("; its numbers are not AMP numbers."),
            );
        }
        let revision = plan
            .as_ref()
            .and_then(|p| p.arms.iter().find(|a| &a.name == arm))
            .and_then(|a| a.revision.as_ref())
            .map(|r| r.describe());
        arms.push(ArmResult {
            name: arm.clone(),
            label,
            is_baseline,
            cells: arm_runs.len(),
            completed,
            partial,
            unjudged: unjudged.get(arm.as_str()).cloned(),
            metrics,
            revision,
        });
    }
    if !arm_order.iter().any(|(_, n, _)| n == &baseline) && !arm_order.is_empty() {
        remarks.push(
            Prose::ours("The baseline ")
                .name(&baseline)
                .and(" has no cells; no speedups or verdicts."),
        );
    }
    // The arms with lines: a skipped arm (no GPU) has nothing to say.
    let arm_names: Vec<&str> = arm_order
        .iter()
        .map(|(_, n, _)| n.as_str())
        .filter(|n| {
            input
                .runs
                .iter()
                .any(|r| r.arm == *n && r.iterations_done > 0)
        })
        .collect();
    if let Some(remark) = kernel_remark(&input.kernels, &arm_names) {
        remarks.push(remark);
    }

    let label_of = |metric: &str| -> String {
        columns
            .iter()
            .find(|c| c.metric == metric && c.kind == ColumnKind::Value)
            .or_else(|| columns.iter().find(|c| c.metric == metric))
            .map(|c| c.label.clone())
            .unwrap_or_else(|| metric.to_string())
    };

    let gate_outcome = gate.as_ref().map(|g| {
        let test = GateTest::from_min_speedup(g.min_speedup);
        let targets: Vec<String> = match &g.arm {
            Some(a) => vec![a.clone()],
            None => arms
                .iter()
                .filter(|a| !a.is_baseline)
                .map(|a| a.name.clone())
                .collect(),
        };
        // Why an arm has nothing to judge: too few completed cells, its
        // cells' skip reason or status, or the metric never emitted.
        let no_data = |arm: &str| -> Option<Prose> {
            if let Some(why) = unjudged.get(arm) {
                return Some(why.clone());
            }
            let has = arms
                .iter()
                .find(|a| a.name == arm)
                .and_then(|a| a.metric(&g.metric))
                .is_some_and(|m| m.replicate.is_some());
            if has {
                return None;
            }
            let runs: Vec<&Run> = input.runs.iter().filter(|r| r.arm == arm).collect();
            if let Some(reason) = runs.iter().find_map(|r| r.skip_reason.as_deref()) {
                return Some(
                    Prose::of_name(arm)
                        .and(" has no data (skipped: ")
                        .text(reason)
                        .and(")"),
                );
            }
            Some(match runs.first() {
                Some(r) if r.status != RunStatus::Completed => {
                    Prose::of_name(arm).and(format!(" has no data (its cells are {})", r.status))
                }
                Some(_) => Prose::of_name(arm).and(" recorded no ").name(&g.metric),
                None => Prose::ours("no arm named ").name(arm),
            })
        };
        let base_missing = no_data(&baseline).map(|why| Prose::ours("baseline ").then(why));
        let gate_arms: Vec<GateArm> = targets
            .iter()
            .map(|name| {
                let metric = arms
                    .iter()
                    .find(|a| &a.name == name)
                    .and_then(|a| a.metric(&g.metric));
                // Every side that lacks data is named, not only the first.
                let missing: Vec<Prose> =
                    base_missing.iter().cloned().chain(no_data(name)).collect();
                let (decision, why, speedup, verdict) = if !missing.is_empty() {
                    (
                        Decision::Inconclusive,
                        Some(Prose::join(missing, "; ")),
                        None,
                        Verdict::Inconclusive,
                    )
                } else {
                    let c = metric.and_then(|m| m.comparison);
                    let speedup = c.and_then(|c| c.speedup);
                    let replicates = metric.map_or(0, |m| m.replicates).min(
                        arms.iter()
                            .find(|a| a.is_baseline)
                            .and_then(|a| a.metric(&g.metric))
                            .map_or(0, |m| m.replicates),
                    );
                    let (d, why) = test.decide(speedup.as_ref(), replicates);
                    (
                        d,
                        why.map(Prose::ours),
                        speedup,
                        c.map_or(Verdict::Inconclusive, |c| c.verdict),
                    )
                };
                GateArm {
                    arm: name.clone(),
                    speedup,
                    verdict,
                    pass: decision == Decision::Pass,
                    decision,
                    why,
                }
            })
            .collect();
        let decision = if gate_arms.is_empty() {
            Decision::Inconclusive
        } else {
            Decision::combine(gate_arms.iter().map(|a| a.decision))
        };
        GateOutcome {
            metric: g.metric.clone(),
            label: label_of(&g.metric),
            min_speedup: g.min_speedup,
            test,
            rule: test.describe(rule.alpha),
            pass: decision == Decision::Pass,
            decision,
            arms: gate_arms,
        }
    });

    // Net result on the primary metric.
    let guard_outcomes = guard_outcomes(
        plan.as_ref(),
        &arms,
        &baseline,
        rule.alpha,
        &input.moments,
        &completed_ids,
        &unjudged,
    );
    // `--check` passes only what ran: every cell completed, every arm
    // with data, every gate and guard passed.
    let mut check_notes = Vec::new();
    let not_done: Vec<&Run> = input
        .runs
        .iter()
        .filter(|r| !matches!(r.status, RunStatus::Completed | RunStatus::Skipped))
        .collect();
    if let Some(r) = not_done
        .iter()
        .find(|r| r.error.is_some())
        .or(not_done.first())
    {
        check_notes.push(
            Prose::ours(format!(
                "{} of {} did not complete (",
                not_done.len(),
                crate::text::counted(input.runs.len() as u64, "cell"),
            ))
            .name(&r.arm)
            .and(format!(" #{} {}: ", r.repeat, r.status))
            .text(first_error_line(r))
            .and(")"),
        );
    }
    // Nothing completed (every cell skipped, or none recorded): nothing
    // was shown, so nothing passes.
    if !input.runs.iter().any(|r| r.status == RunStatus::Completed) {
        check_notes.push(if input.runs.is_empty() {
            Prose::ours(format!(
                "no cells were recorded (its runner was killed while creating it); \
                 `lcx run --resume {}` plans and runs them",
                e.id
            ))
        } else {
            Prose::ours("no cell completed")
        });
    }
    // An arm that ran (not one skipped for want of CUDA, whose report
    // line says so) and measured nothing.
    let empty: Vec<&str> = arms
        .iter()
        .filter(|a| {
            input
                .runs
                .iter()
                .any(|r| r.arm == a.name && r.status != RunStatus::Skipped)
                && !a.metrics.iter().any(|m| m.summary.is_some())
        })
        .map(|a| a.name.as_str())
        .collect();
    if !empty.is_empty() {
        check_notes.push(
            Prose::ours("no data for ")
                .then(Prose::join(empty.iter().map(|a| Prose::of_name(*a)), ", ")),
        );
    }
    // Completed cells measured on a busy host: a gate or guard that rests
    // on them did not measure what it claims.
    let measurement = plan.as_ref().map(|p| p.measurement).unwrap_or_default();
    let contended: Vec<ContendedCell> = input
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Completed)
        .filter_map(|r| {
            let foreign = r.contention.foreign_cores()?;
            let threshold = measurement.threshold(r.contention.host_cpus);
            (foreign > threshold).then(|| ContendedCell {
                run_id: r.id,
                arm: r.arm.clone(),
                repeat: r.repeat,
                foreign_cores: foreign,
                threshold,
            })
        })
        .collect();
    let reruns: Vec<RerunNote> = input
        .runs
        .iter()
        .filter_map(|r| {
            Some(RerunNote {
                run_id: r.id,
                arm: r.arm.clone(),
                repeat: r.repeat,
                attempt: r.attempt,
                why: r.rerun_note.clone()?,
            })
        })
        .collect();
    // The arms a gate or guard compares, baselines included.
    let judged_arms: Vec<&str> = gate_outcome
        .iter()
        .flat_map(|g| g.arms.iter().map(|a| a.arm.as_str()))
        .chain(gate_outcome.as_ref().map(|_| baseline.as_str()))
        .chain(
            guard_outcomes
                .iter()
                .flat_map(|g| [g.arm.as_str(), g.baseline.as_str()]),
        )
        .collect();
    // Data from a busy host prove neither PASS nor FAIL: a gate or guard
    // that rests on a contended cell is INCONCLUSIVE whichever way it
    // leaned (a contended arm no gate or guard compares changes nothing).
    let undecided = !options.allow_contended
        && contended
            .iter()
            .any(|c| judged_arms.contains(&c.arm.as_str()));
    if undecided {
        let completed = input
            .runs
            .iter()
            .filter(|r| r.status == RunStatus::Completed)
            .count();
        check_notes.push(Prose::ours(format!(
            "{} of {} contended (other programs used more than {:.2} of a core on average): \
             neither PASS nor FAIL from contended data; rerun on a quiet host (`lcx system \
             check` says what is busy), or judge them anyway with --allow-contended",
            contended.len(),
            crate::text::counted(completed as u64, "completed cell"),
            contended[0].threshold,
        )));
    }
    let check = if undecided {
        Decision::Inconclusive
    } else {
        let mut all: Vec<Decision> = gate_outcome.iter().map(|g| g.decision).collect();
        all.extend(guard_outcomes.iter().map(|g| g.decision));
        if !check_notes.is_empty() {
            all.push(Decision::Inconclusive);
        }
        Decision::combine(all)
    };
    let primary = primary_metric(plan.as_ref(), &columns);
    let net_result = net_result(&arms, primary.as_deref(), &label_of);
    // Text where a number was meant: a report metric, a name that is
    // numeric elsewhere, or a number in quotes. Once per arm and metric.
    for (arm, name, count, example) in &input.texts {
        let meant_numeric = needed.contains(name)
            || input.metric_names.contains(name)
            || example.trim().parse::<f64>().is_ok();
        if meant_numeric {
            remarks.push(
                Prose::ours("Arm ")
                    .name(arm)
                    .and(", metric ")
                    .name(name)
                    .and(format!(
                        ": {} ignored (e.g. ",
                        crate::text::counted(*count as u64, "non-numeric value")
                    ))
                    .text(format!("{example:?}"))
                    .and("); only JSON numbers are measured."),
            );
        }
    }
    for r in input.runs.iter() {
        let Some(stall) = r.contention.runner_stall_seconds else {
            continue;
        };
        if stalled(stall, r.wall_seconds) {
            remarks.push(
                Prose::ours(format!("run {} (", r.id))
                    .name(&r.arm)
                    .and(format!(
                        " #{}): the runner could not run for {} s of the cell's {} s wall time \
                         (stopped, a paused machine, or starved): Wall s includes that time, \
                         the metrics the child timed do not.",
                        r.repeat,
                        super::words::num(stall),
                        r.wall_seconds.map_or_else(|| "?".into(), super::words::num)
                    )),
            );
        }
    }
    if input
        .metric_names
        .iter()
        .any(|m| m == crate::bench::process::SHELL)
    {
        remarks.push(Prose::ours(
            "Shell start-up taken off: a command given as a string with shell syntax ran \
             through `sh -c`; its cell first timed 30 runs of the empty `sh -c ''`, and their \
             mean (the shell s column) was subtracted from each run's wall, user and system \
             time, as hyperfine does. A string of plain words runs without a shell; an array \
             runs as it is, with nothing taken off.",
        ));
    }
    if e.repeats == 1 && arms.len() > 1 {
        remarks.push(Prose::ours(
            "One process per arm: each iteration is a replicate, so differences between \
             processes (a slow core, a cold page cache) cannot be seen and the intervals are \
             too narrow for them; give `repeats` ≥ 3 (or adaptive repeats) for verdicts to \
             gate on.",
        ));
    }
    if let Some(metric) = &primary {
        remarks.extend(series_remarks(e, &input.runs, &input.series, metric));
    }

    let incomplete: Vec<CellNote> = input
        .runs
        .iter()
        .filter(|r| r.status != RunStatus::Completed)
        .map(|r| CellNote {
            run_id: r.id,
            arm: r.arm.clone(),
            repeat: r.repeat,
            status: r.status.to_string(),
            exit_code: r.exit_code,
            signal: r.signal,
            reason: r.error.clone().or_else(|| r.skip_reason.clone()),
            iterations_done: r.iterations_done,
        })
        .collect();

    let line_problems: Vec<LineNote> = input
        .runs
        .iter()
        .filter(|r| !r.problems.is_empty())
        .map(|r| {
            // metric → [(value, iterations)], in the store's name order.
            let mut by_metric: Vec<(String, ValuesAt)> = Vec::new();
            for (_, iteration, name, value) in input.nonfinite.iter().filter(|n| n.0 == r.id) {
                if by_metric.last().is_none_or(|(m, _)| m != name) {
                    by_metric.push((name.clone(), Vec::new()));
                }
                if let Some((_, values)) = by_metric.last_mut() {
                    match values.iter_mut().find(|(v, _)| v == value) {
                        Some((_, its)) => its.push(*iteration),
                        None => values.push((value.clone(), vec![*iteration])),
                    }
                }
            }
            let nonfinite = by_metric
                .into_iter()
                .map(|(metric, values)| {
                    let parts = values.into_iter().map(|(v, its)| {
                        Prose::of_text(v).and(format!(" at {}", iteration_list(&its)))
                    });
                    Prose::of_name(metric)
                        .and(": ")
                        .then(Prose::join(parts, "; "))
                })
                .collect();
            LineNote {
                run_id: r.id,
                arm: r.arm.clone(),
                repeat: r.repeat,
                malformed: r.problems.malformed,
                nonfinite_values: r.problems.nonfinite,
                overlong: r.problems.overlong,
                extra: r.problems.extra,
                nonfinite,
            }
        })
        .collect();

    let roofline = roofline(e, &arm_order, &input.perf, &counted);

    // A file recorded from its repository's root is reproduced from the
    // root of a clone, with the wrapper that builds lcx there (`./lcx`);
    // one outside a repository by its path on the machine that ran it.
    let from_root = e.git_commit.is_some() && std::path::Path::new(&e.file_path).is_relative();
    let lcx = if from_root { "./lcx" } else { "lcx" };
    let mut exp_cmd = vec![lcx.to_string(), "run".to_string(), e.file_path.clone()];
    if let Some(db) = &input.db {
        exp_cmd.extend(["--db".to_string(), db.clone()]);
    }
    if let Some(p) = &plan {
        for s in &p.cli_set {
            exp_cmd.push("--set".into());
            exp_cmd.push(s.clone());
        }
        exp_cmd.extend(p.cli_flags.iter().cloned());
    }
    let mut cells = Vec::new();
    for (_, arm, _) in &arm_order {
        if let Some(r) = input.runs.iter().find(|r| &r.arm == arm) {
            let mut words: Vec<String> = r
                .env
                .iter()
                .map(|(k, v)| format!("{k}={}", shell_quote(v)))
                .collect();
            // A cell at a revision ran that revision's build: its path,
            // not this checkout's lcx.
            let argv = if r.revision.is_some() {
                r.command.clone()
            } else {
                pretty_argv(&r.command, lcx)
            };
            // A cell that read its recorded config from stdin is reproduced
            // from that record, not from the file as it is now.
            if r.config_toml.is_some() && crate::experiment::plan::reads_config_from_stdin(&argv) {
                let db = input
                    .db
                    .as_ref()
                    .map(|d| format!(" --db {}", shell_quote(d)))
                    .unwrap_or_default();
                words.insert(0, format!("{lcx} config show --run {}{db} |", r.id));
            }
            words.push(shell_line(&argv));
            cells.push((arm.clone(), words.join(" ")));
        }
    }

    let mut runs_sorted: Vec<&Run> = input.runs.iter().collect();
    runs_sorted.sort_by_key(|r| (r.arm_index, r.repeat, r.id));

    Report {
        experiment: Meta {
            id: e.id,
            name: e.name.clone(),
            description: e.description.clone(),
            workload: e.workload.clone(),
            date: short_date(&e.created_at),
            created_at: e.created_at.clone(),
            finished_at: e.finished_at.clone(),
            status: e.status.to_string(),
            iterations: e.iterations,
            warmup: e.warmup,
            warmup_auto: plan.as_ref().is_some_and(|p| p.warmup_auto),
            repeats: e.repeats,
            file_path: e.file_path.clone(),
        },
        baseline,
        rule,
        columns,
        arms,
        incomplete,
        line_problems,
        contended,
        reruns,
        roofline,
        total_cells: input.runs.len(),
        gate: gate_outcome,
        guards: guard_outcomes,
        check,
        check_notes,
        net_result,
        reproduce: Reproduce {
            experiment: shell_line(&exp_cmd),
            cells,
        },
        environment: environment(e, plan.as_ref(), &input.runs),
        runs: runs_sorted
            .iter()
            .map(|r| RunRef {
                run_id: r.id,
                arm: r.arm.clone(),
                repeat: r.repeat,
                status: r.status.to_string(),
                iterations_done: r.iterations_done,
                wall_seconds: r.wall_seconds,
                runner_stall_seconds: r
                    .contention
                    .runner_stall_seconds
                    .filter(|&s| stalled(s, r.wall_seconds)),
                warmup: r.warmup.unwrap_or(e.warmup),
                host: r.host.clone(),
                slurm_job: r.slurm_job.clone(),
                slurm_script: r
                    .slurm_dir
                    .as_ref()
                    .map(|d| std::path::Path::new(d).join("job.sh").display().to_string()),
            })
            .collect(),
        notes: plan.map(|p| p.notes).unwrap_or_default(),
        remarks,
        plots: Vec::new(),
    }
}

/// Whether the runner's stall during a cell is worth saying: at least a
/// second and a twentieth of the cell's wall time.
fn stalled(stall: f64, wall: Option<f64>) -> bool {
    stall >= 1.0 && wall.is_none_or(|w| stall >= 0.05 * w)
}

fn net_result(
    arms: &[ArmResult],
    primary: Option<&str>,
    label_of: &dyn Fn(&str) -> String,
) -> Prose {
    let Some(metric) = primary else {
        return "no metrics to compare".into();
    };
    let label = label_of(metric);
    let others: Vec<&ArmResult> = arms.iter().filter(|a| !a.is_baseline).collect();
    if others.is_empty() {
        return "a single arm, nothing to compare".into();
    }
    let has_data = |a: &ArmResult| a.metric(metric).is_some_and(|m| m.replicate.is_some());
    if let Some(base) = arms.iter().find(|a| a.is_baseline) {
        if let Some(why) = &base.unjudged {
            return Prose::ours("nothing judged on ")
                .text(&label)
                .and(": baseline ")
                .then(why.clone());
        }
        if !has_data(base) {
            return Prose::ours("no data for the baseline ")
                .name(&base.name)
                .and(" on ")
                .text(&label)
                .and(": nothing can be compared");
        }
    }
    let mut groups: [(Verdict, Vec<Prose>); 4] = [
        (Verdict::Improved, Vec::new()),
        (Verdict::Regressed, Vec::new()),
        (Verdict::Equivalent, Vec::new()),
        (Verdict::Inconclusive, Vec::new()),
    ];
    let mut without = Vec::new();
    let mut unjudged = Vec::new();
    for a in &others {
        if let Some(why) = &a.unjudged {
            unjudged.push(why.clone());
            continue;
        }
        let Some(c) = a.metric(metric).and_then(|m| m.comparison) else {
            without.push(Prose::of_name(&a.name));
            continue;
        };
        let s = c
            .speedup
            .map(|s| format!(" {}", super::words::speedup_text(&s)))
            .unwrap_or_default();
        if let Some((_, names)) = groups.iter_mut().find(|(v, _)| *v == c.verdict) {
            names.push(Prose::of_text(&a.name).and(s));
        }
    }
    let mut parts: Vec<Prose> = groups
        .into_iter()
        .filter(|(_, names)| !names.is_empty())
        .map(|(v, names)| Prose::ours(format!("{} ", v.text())).then(Prose::join(names, "; ")))
        .collect();
    if !without.is_empty() {
        parts.push(Prose::ours("no data for ").then(Prose::join(without, ", ")));
    }
    if !unjudged.is_empty() {
        parts.push(Prose::ours("not judged: ").then(Prose::join(unjudged, "; ")));
    }
    Prose::ours("on ")
        .text(&label)
        .and(": ")
        .then(Prose::join(parts, "; "))
}
