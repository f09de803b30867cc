//! Stored rows → [`Report`]: column choice, per-arm statistics, verdicts,
//! the gate, reproduce commands and the environment.
//!
//! [`load`] asks the store for SQL aggregates only (per-run moments and
//! per-arm medians of the metrics the report shows), then [`assemble`] does
//! the arithmetic. `assemble` is pure so it can be tested without SQLite;
//! it runs the steps of this folder in order (each a file: columns, arms,
//! judge, guards, check, remarks, sweep, cells, roofline, reproduce,
//! environment)
//! and puts their results together. Each step takes the parts of the input
//! it reads and small typed values from the steps before it (`Basis`,
//! `Evidence`, `Outcomes`) rather than one shared context; none of them
//! reads the store.

mod arms;
mod cells;
mod check;
mod columns;
pub(crate) use columns::label_of;
mod environment;
mod guards;
mod judge;
mod remarks;
mod reproduce;
mod roofline;
mod sweep;

use crate::experiment::{self, Fold, Plan};
use crate::store::report_read::RunMoments;
use crate::store::{Experiment, Run, Store, StoreError};

use super::model::{Meta, Prose, Report};

pub use arms::counted_runs;
pub use columns::{
    is_descriptive, metric_direction, needed_metrics, primary_metric, resolve_columns,
};
pub use judge::{precision_reached, unjudged_reason};
// The report's tests check this remark on its own (fixture.rs).
#[cfg(test)]
pub(crate) use remarks::kernel_remark;
pub use roofline::PERF_METRICS;

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
    /// Per-run moments before the fold of metrics folded to a cell's
    /// median or minimum ([`super::moments::Summaries::unfolded`]).
    pub unfolded: Vec<RunMoments>,
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
    /// (arm, why AMP ran fp32), distinct: the `precision_reason` text
    /// field (absent from lines older than AMP on a CPU, when the one
    /// reason was no CUDA).
    pub precision_reasons: Vec<(String, String)>,
    /// (arm, what its training steps ran on), distinct: the
    /// `training_kernel` text field.
    pub kernels: Vec<(String, String)>,
    /// (arm, field, count, example) of text values ([`Store::text_counts`]).
    pub texts: Vec<(String, String, i64, String)>,
    /// The database the report was read from, for the reproduce lines'
    /// `--db`; `None` for the default `lcx.db` (or in memory).
    pub db: Option<String>,
}

/// The plan stored with the experiment (one reader: [`Plan::from_stored`]).
pub fn stored_plan(e: &Experiment) -> Result<Plan, experiment::plan::StoredPlanError> {
    Plan::from_stored(&e.plan_json)
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
    let folds: Vec<(String, Fold)> = needed
        .iter()
        .filter_map(|m| Some((m.clone(), plan.as_ref()?.fold_of(m))))
        .filter(|(_, f)| !f.is_mean())
        .collect();
    let summaries = super::moments::summaries(store, experiment_id, &needed, &counted, &folds)?;
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
            unfolded: summaries.unfolded,
            nonfinite,
            perf,
            series,
            precisions: store.precisions(experiment_id)?,
            precision_reasons: store.text_values(experiment_id, "precision_reason")?,
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

/// Builds the report from rows; pure. The remarks come in the order the
/// reader meets them: the plan, where the cells ran, the columns, each
/// arm's, the baseline, training's kernel, then the cells' own.
pub fn assemble(input: Input, options: Options) -> Report {
    let e = &input.experiment;
    let (runs, names) = (input.runs.as_slice(), input.metric_names.as_slice());
    let stored = stored_plan(e);
    let mut remarks: Vec<Prose> = stored
        .as_ref()
        .err()
        .map(remarks::unreadable_plan)
        .into_iter()
        .collect();
    let plan = stored.as_ref().ok();
    remarks.extend(remarks::placement_remarks(e, runs));
    let columns = resolve_columns(e, plan, names);
    remarks.extend(columns::left_out_remark(e, plan, &columns, names));
    let needed = needed_metrics(&columns, plan);
    let gate = plan.and_then(|p| p.gate.as_ref());
    let rule = judge::verdict_rule(options, gate);

    let order = arms::arm_order(runs);
    let baseline = e
        .baseline
        .clone()
        .or_else(|| order.first().map(|a| a.name.clone()))
        .unwrap_or_default();
    let counted = counted_runs(runs);
    let mut unjudged = judge::unjudged_arms(&order, runs, e.iterations);
    judge::mismatched_precision(&order, &input.precisions, &mut unjudged);
    let baselines = arms::Baselines::new(baseline.clone(), plan);
    let uneven = arms::uneven_rounds(plan, runs);
    let basis = arms::Basis {
        plan,
        needed: &needed,
        baselines: &baselines,
        rule,
        unjudged: &unjudged,
        uneven: &uneven,
    };
    let (arms, arm_remarks) = arms::arm_results(&input, &counted, &order, &basis);
    remarks.extend(arm_remarks);
    remarks.extend(remarks::missing_baseline(&order, &baselines));
    remarks.extend(remarks::kernels(&input.kernels, &order, runs));

    let evidence = judge::Evidence {
        plan,
        arms: &arms,
        runs,
        baselines: &baselines,
        unjudged: &unjudged,
    };
    let gate = gate.map(|g| judge::gate_outcome(g, &evidence, rule, &columns));
    let guards = guards::guard_outcomes(plan, &evidence, rule.alpha, &input.moments);
    let outcomes = check::Outcomes {
        gate: gate.as_ref(),
        guards: &guards,
        baselines: &baselines,
        uneven: &uneven,
    };
    let check = check::check(e, plan, runs, &arms, outcomes, options.allow_contended);
    let primary = primary_metric(plan, &columns);
    let sweep = sweep::sweep(plan, &arms, primary.as_deref(), &columns, rule);
    // A scan (one arm along an axis) is not an A/B test: its net result
    // says how the arm's value moves, unless a gate asks for a verdict.
    let judged = gate.is_some() || !guards.is_empty();
    let net_result = match sweep.as_ref().filter(|s| s.is_scan(judged)) {
        Some(s) => sweep::scan_result(s),
        None => None,
    }
    .unwrap_or_else(|| judge::net_result(&arms, primary.as_deref(), &columns, &e.workload));

    remarks.extend(remarks::non_numeric(&input.texts, &needed, names));
    remarks.extend(remarks::runner_stalls(runs));
    remarks.extend(remarks::shell_subtracted(names));
    remarks.extend(remarks::one_process(e, &arms));
    if let Some(metric) = &primary {
        remarks.extend(remarks::series_remarks(e, runs, &input.series, metric));
    }

    Report {
        experiment: meta(e, plan),
        baseline,
        rule,
        columns,
        arms,
        incomplete: cells::incomplete(runs),
        line_problems: cells::line_problems(runs, &input.nonfinite),
        contended: check.contended,
        reruns: cells::reruns(runs),
        roofline: roofline::roofline(e, &order, &input.perf, &counted),
        total_cells: runs.len(),
        gate,
        guards,
        check: check.decision,
        check_notes: check.notes,
        check_on_contended: check.undecided_by_contention,
        net_result,
        reproduce: reproduce::reproduce(e, plan, runs, &order, input.db.as_deref()),
        environment: environment::environment(e, plan, runs),
        runs: cells::run_refs(e, runs),
        notes: plan.map(|p| p.notes.clone()).unwrap_or_default(),
        remarks,
        plots: Vec::new(),
        sweep,
    }
}

/// What the report says of the experiment itself.
fn meta(e: &Experiment, plan: Option<&Plan>) -> Meta {
    Meta {
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
        warmup_auto: plan.is_some_and(|p| p.warmup_auto),
        repeats: e.repeats,
        file_path: e.file_path.clone(),
    }
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
