//! The arms of a report: their order and labels as the cells recorded
//! them, which cells count, each metric's statistics per arm, and the arm
//! rows with their comparisons against the baseline. Gates, guards and
//! `--check` are judged from these rows elsewhere (`judge`, `guards`,
//! `check`); nothing here reads the store.

use std::collections::{BTreeMap, BTreeSet};

use crate::bench::trainer::ran_as_asked;
use crate::experiment::Order;
use crate::experiment::Plan;
use crate::report::model::{ArmResult, MetricResult, Prose};
use crate::report::stats::{compare, compare_paired, Summary, VerdictRule};
use crate::store::report_read::RunMoments;
use crate::store::{Run, RunStatus};

use super::columns::{is_descriptive, metric_direction};
use super::Input;

/// Which arm each arm is compared with: the experiment's baseline, or in
/// a sweep the baseline's arm at the same point (never the baseline at
/// another point).
pub(super) struct Baselines {
    /// The experiment's baseline (in a sweep, the file's arm).
    pub name: String,
    /// Each sweep arm's baseline at its point.
    per_arm: BTreeMap<String, String>,
}

impl Baselines {
    pub fn new(name: String, plan: Option<&Plan>) -> Baselines {
        let per_arm = plan
            .filter(|p| p.sweep.is_some())
            .map(|p| {
                p.arms
                    .iter()
                    .filter_map(|a| Some((a.name.clone(), p.baseline_of(&a.name)?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        Baselines { name, per_arm }
    }

    /// The arm `arm` is compared with. A sweep point whose baseline arm is
    /// absent from the plan has none: the experiment's name stands, and
    /// names no arm with cells.
    pub fn of<'a>(&'a self, arm: &str) -> &'a str {
        self.per_arm.get(arm).unwrap_or(&self.name)
    }

    /// In a sweep, the baseline `arm` is compared with at its point.
    pub fn at_point(&self, arm: &str) -> Option<&str> {
        self.per_arm.get(arm).map(String::as_str)
    }

    /// Whether `arm` is a baseline (of its own point, in a sweep).
    pub fn is(&self, arm: &str) -> bool {
        self.of(arm) == arm
    }
}

/// An arm as its cells name it.
pub(super) struct ArmName {
    pub name: String,
    pub label: String,
}

/// The arms in plan order (cells carry their arm's index), each labelled
/// as its first cell recorded.
pub(super) fn arm_order(runs: &[Run]) -> Vec<ArmName> {
    let mut order: Vec<(i64, String, String)> = Vec::new();
    for r in runs {
        if !order.iter().any(|(_, name, _)| name == &r.arm) {
            order.push((r.arm_index, r.arm.clone(), r.arm_label.clone()));
        }
    }
    order.sort_by_key(|(i, _, _)| *i);
    order
        .into_iter()
        .map(|(_, name, label)| ArmName { name, label })
        .collect()
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

/// One arm's statistics of one metric, before any comparison.
struct Stat {
    pooled: Option<Summary>,
    replicate: Option<Summary>,
    replicates: usize,
    unit: &'static str,
    excluded: i64,
    /// Every run before a median or minimum fold, pooled.
    runs: Option<Summary>,
    /// Each counted cell's mean by round (repeat), for rounds judged as
    /// pairs.
    by_round: BTreeMap<i64, f64>,
}

/// The rounds (repeats) of a randomized plan whose completed cells saw
/// uneven contention: the foreign loads of two of its cells differ by
/// more than what counts as contended at all, so one arm of the round ran
/// on a busier host than another by a contended amount (a round whose
/// cells were all equally busy is even, however busy). A cell without a
/// record of the load makes its round uneven unless none has one.
pub(super) fn uneven_rounds(plan: Option<&Plan>, runs: &[Run]) -> BTreeSet<i64> {
    let Some(plan) = plan.filter(|p| p.order == Order::Randomized) else {
        return BTreeSet::new();
    };
    let mut by_round: BTreeMap<i64, Vec<(Option<f64>, f64)>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.status == RunStatus::Completed) {
        let threshold = plan.measurement.threshold(r.contention.host_cpus);
        by_round
            .entry(r.repeat)
            .or_default()
            .push((r.contention.foreign_cores(), threshold));
    }
    by_round
        .into_iter()
        .filter(|(_, cells)| {
            let loads: Vec<f64> = cells.iter().filter_map(|(f, _)| *f).collect();
            if loads.is_empty() {
                return false;
            }
            let limit = cells.iter().map(|(_, t)| *t).fold(f64::INFINITY, f64::min);
            let (low, high) = loads
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
                    (l.min(*x), h.max(*x))
                });
            loads.len() < cells.len() || high - low > limit
        })
        .map(|(round, _)| round)
        .collect()
}

/// [`Stat`]s by (arm, metric).
type Stats = BTreeMap<(String, String), Stat>;

/// Every arm's statistics of every needed metric, over the counted cells.
fn statistics(arms: &[ArmName], needed: &[String], input: &Input, counted: &[i64]) -> Stats {
    let mut stats = Stats::new();
    for ArmName { name: arm, .. } in arms {
        for metric in needed {
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
            let (replicate, replicates, unit) =
                match crate::report::moments::replicate_summary(&with_data) {
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
                    runs: {
                        let raw: Vec<&RunMoments> = input
                            .unfolded
                            .iter()
                            .filter(|m| {
                                &m.arm == arm
                                    && &m.name == metric
                                    && m.n > 0
                                    && counted.contains(&m.run_id)
                            })
                            .collect();
                        crate::report::moments::shown_summary(&raw)
                    },
                    by_round: with_data.iter().map(|m| (m.repeat, m.mean())).collect(),
                },
            );
        }
    }
    stats
}

/// Pools per-run moments into one summary (median from SQL).
fn pooled(moments: &[&RunMoments], median: Option<f64>) -> Option<Summary> {
    let mut s = crate::report::moments::shown_summary(moments)?;
    s.median = median;
    Some(s)
}

/// What every arm's comparisons rest on.
pub(super) struct Basis<'a> {
    pub plan: Option<&'a Plan>,
    /// The metrics the report shows or judges.
    pub needed: &'a [String],
    pub baselines: &'a Baselines,
    pub rule: VerdictRule,
    /// The arms whose numbers no verdict may use, with why.
    pub unjudged: &'a BTreeMap<&'a str, Prose>,
    /// Rounds left out of every pair ([`uneven_rounds`]).
    pub uneven: &'a BTreeSet<i64>,
}

/// The arm rows in plan order, and the remarks they call for, per arm in
/// this order: no completed cell, not judged, a precision other than the
/// one asked for.
pub(super) fn arm_results(
    input: &Input,
    counted: &[i64],
    order: &[ArmName],
    basis: &Basis,
) -> (Vec<ArmResult>, Vec<Prose>) {
    let stats = statistics(order, basis.needed, input, counted);
    let mut arms = Vec::new();
    let mut remarks = Vec::new();
    for ArmName { name: arm, label } in order {
        let arm_runs: Vec<&Run> = input.runs.iter().filter(|r| &r.arm == arm).collect();
        let completed = arm_runs
            .iter()
            .filter(|r| r.status == RunStatus::Completed)
            .count();
        let baseline = basis.baselines.of(arm);
        let is_baseline = arm == baseline;
        let judged =
            !basis.unjudged.contains_key(baseline) && !basis.unjudged.contains_key(arm.as_str());
        let metrics = metric_results(arm, is_baseline || !judged, &stats, basis);
        let partial = completed == 0 && arm_runs.iter().any(|r| r.iterations_done > 0);
        if partial {
            remarks.push(Prose::ours("Arm ").name(arm).and(
                " has no completed cell; its numbers come from incomplete cells (shown, never \
                 judged).",
            ));
        }
        if let Some(why) = basis.unjudged.get(arm.as_str()) {
            remarks.push(Prose::ours("Not judged: ").then(why.clone()).and("."));
        }
        // Never label what did not run: an AMP arm whose steps ran fp32
        // says so in its own row.
        let mut label = label.clone();
        let mismatched = precision_mismatches(&input.precisions, &input.precision_reasons, arm);
        // (Its remark is the "Not judged" one above: `judge::mismatched_precision`.)
        if !mismatched.is_empty() {
            label = format!("{label} ({})", mismatched.join("; "));
        }
        let revision = basis
            .plan
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
            unjudged: basis.unjudged.get(arm.as_str()).cloned(),
            metrics,
            revision,
            compared_with: basis
                .baselines
                .at_point(arm)
                .filter(|b| b != arm)
                .map(str::to_string),
        });
    }
    (arms, remarks)
}

/// One arm's result on each needed metric, compared with the baseline's
/// unless `uncompared` (the baseline itself, or an arm that may not be
/// judged) or the metric is descriptive.
fn metric_results(arm: &str, uncompared: bool, stats: &Stats, basis: &Basis) -> Vec<MetricResult> {
    basis
        .needed
        .iter()
        .map(|metric| {
            let (direction, _) = metric_direction(basis.plan, metric);
            let descriptive = is_descriptive(basis.plan, metric);
            let st = &stats[&(arm.to_string(), metric.clone())];
            let base = &stats
                .get(&(basis.baselines.of(arm).to_string(), metric.clone()))
                .and_then(|b| b.replicate);
            let base_stat = stats.get(&(basis.baselines.of(arm).to_string(), metric.clone()));
            let comparison = match (uncompared || descriptive, base, &st.replicate) {
                (false, Some(b), Some(a)) => Some(match rounds(basis, base_stat, st) {
                    Some((pairs, uneven)) => {
                        let mut c = compare_paired(&pairs, direction, basis.rule);
                        c.uneven_rounds = uneven;
                        c
                    }
                    None => compare(b, a, direction, basis.rule),
                }),
                _ => None,
            };
            MetricResult {
                metric: metric.clone(),
                direction,
                summary: st.pooled,
                runs: st.runs,
                replicate: st.replicate,
                replicates: st.replicates,
                replicate_unit: st.unit.to_string(),
                excluded_warmup: st.excluded,
                comparison,
                descriptive,
            }
        })
        .collect()
}

/// The rounds an arm and its baseline both completed, as (baseline, arm)
/// pairs, less the rounds contention fell on unevenly ([`uneven_rounds`]),
/// and how many of those were left out; where the plan ran its arms in
/// randomized rounds and at least two even rounds are left. What a
/// round's host did to every arm of it cancels in their ratio. Otherwise
/// `None`, and the replicates are compared as independent samples
/// (interleaved rounds keep their old judgement).
fn rounds(basis: &Basis, base: Option<&Stat>, arm: &Stat) -> Option<(Vec<(f64, f64)>, usize)> {
    if basis.plan?.order != Order::Randomized || arm.unit != "repeats" {
        return None;
    }
    let base = base?;
    let both: Vec<(i64, f64, f64)> = arm
        .by_round
        .iter()
        .filter_map(|(round, a)| Some((*round, *base.by_round.get(round)?, *a)))
        .collect();
    let pairs: Vec<(f64, f64)> = both
        .iter()
        .filter(|(round, _, _)| !basis.uneven.contains(round))
        .map(|&(_, b, a)| (b, a))
        .collect();
    let uneven = both.len() - pairs.len();
    (pairs.len() >= 2).then_some((pairs, uneven))
}

/// Each (precision asked for, precision that ran) of `arm`'s cells where
/// the one that ran is not the one asked for (AMP asked, fp32 ran; AMP on
/// a CPU running bf16 is AMP, see [`ran_as_asked`]).
pub(super) fn mismatched<'p>(
    precisions: &'p [(String, String, String)],
    arm: &'p str,
) -> impl Iterator<Item = (&'p str, &'p str)> {
    precisions
        .iter()
        .filter(move |(a, asked, ran)| a == arm && !ran_as_asked(asked, ran))
        .map(|(_, asked, ran)| (asked.as_str(), ran.as_str()))
}

/// `AMP requested, ran fp32: <why>` for each precision `arm` asked for
/// and did not run, with the cells' `precision_reason` (lines written
/// before AMP ran on a CPU carry none: their one reason was no CUDA).
fn precision_mismatches(
    precisions: &[(String, String, String)],
    reasons: &[(String, String)],
    arm: &str,
) -> Vec<String> {
    let why: Vec<&str> = reasons
        .iter()
        .filter(|(a, _)| a == arm)
        .map(|(_, r)| r.as_str())
        .collect();
    let why = if why.is_empty() {
        "no CUDA".to_string()
    } else {
        why.join("; ")
    };
    mismatched(precisions, arm)
        .map(|(asked, ran)| format!("{} requested, ran {ran}: {why}", asked.to_uppercase()))
        .collect()
}
