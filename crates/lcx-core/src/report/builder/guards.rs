//! The `[[guard]]`s: each guarded arm against its baseline on a metric
//! that must not get worse by more than a margin (a win rate, a loss),
//! with the reason wherever no PASS was reached. It reads the arm rows and
//! the per-cell moments; it must not change either.

use std::collections::BTreeMap;

use crate::experiment::{Guard, Plan};
use crate::report::model::{GuardOutcome, Prose};
use crate::report::stats::{Decision, GuardTest, Summary};
use crate::report::words::num;
use crate::store::report_read::RunMoments;
use crate::store::RunStatus;

use super::columns::metric_direction;
use super::judge::Evidence;

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
pub(super) fn guard_outcomes(
    plan: Option<&Plan>,
    ev: &Evidence,
    alpha: f64,
    moments: &[RunMoments],
) -> Vec<GuardOutcome> {
    let Some(plan) = plan else {
        return Vec::new();
    };
    let completed: Vec<i64> = ev
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Completed)
        .map(|r| r.id)
        .collect();
    let mut out = Vec::new();
    for g in &plan.guards {
        // The guard's own direction, else its metric's in the file (a
        // column's), else the name table's. The reader refuses `none` on a
        // guard and a guard disagreeing with a column.
        let direction = match g.direction {
            Some(d) => d,
            None => metric_direction(Some(plan), &g.metric).0,
        };
        for arm in ev.arms {
            // The guard's own baseline, else the experiment's; in a sweep,
            // that arm at the guarded arm's point.
            let baseline = match &g.baseline {
                // The experiment's baseline by name is the same as none (in a
                // sweep of one arm, the arm at the axis' first point).
                Some(b) if *b != plan.baseline => plan.at_point_of(b, &arm.name).unwrap_or(b),
                _ => ev.baselines.of(&arm.name),
            };
            if arm.name == baseline
                || g.arm
                    .as_ref()
                    .is_some_and(|x| x != plan.file_arm_of(&arm.name))
            {
                continue;
            }
            let base = ev
                .arms
                .iter()
                .find(|a| a.name == baseline)
                .and_then(|a| a.metric(&g.metric))
                .and_then(|m| m.replicate);
            let base_cells = g
                .paired
                .then(|| cell_values(moments, &completed, baseline, &g.metric));
            let value = arm.metric(&g.metric).and_then(|m| m.replicate);
            let missing = missing_sides(ev, g, baseline, &arm.name, (&base, &value));
            let (test, decision, why, pairs) = match (&base, &value) {
                _ if !missing.is_empty() => (
                    None,
                    Decision::Inconclusive,
                    Some(Prose::join(missing, "; ")),
                    None,
                ),
                (Some(b), Some(a)) => {
                    let (t, pairs) = match &base_cells {
                        Some(base_cells) => {
                            // (arm, baseline) per repeat that both ran.
                            let cells: Vec<(f64, f64)> =
                                cell_values(moments, &completed, &arm.name, &g.metric)
                                    .into_iter()
                                    .filter_map(|(k, v)| base_cells.get(&k).map(|b| (v, *b)))
                                    .collect();
                            let t = crate::report::stats::paired_guard_test(
                                &cells, direction, g.margin, alpha,
                            );
                            (t, Some(cells.len()))
                        }
                        None => (
                            crate::report::stats::guard_test(b, a, direction, g.margin, alpha),
                            None,
                        ),
                    };
                    let n = pairs.unwrap_or(b.n.min(a.n));
                    (Some(t), t.decision, why_not_passed(&t, g, pairs, n), pairs)
                }
                (None, _) | (_, None) => (None, Decision::Inconclusive, None, None),
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

/// Every side of a guard that cannot be judged, named: an arm that may
/// not be judged says why, one without the metric says so.
fn missing_sides(
    ev: &Evidence,
    g: &Guard,
    baseline: &str,
    arm: &str,
    (base, value): (&Option<Summary>, &Option<Summary>),
) -> Vec<Prose> {
    let mut missing = Vec::new();
    match (ev.unjudged.get(baseline), base) {
        (Some(why), _) => missing.push(Prose::ours("baseline ").then(why.clone())),
        (None, None) => missing.push(
            Prose::ours("baseline ")
                .name(baseline)
                .and(" has no ")
                .name(&g.metric),
        ),
        _ => {}
    }
    match (ev.unjudged.get(arm), value) {
        (Some(why), _) => missing.push(why.clone()),
        (None, None) => missing.push(Prose::of_name(arm).and(" has no ").name(&g.metric)),
        _ => {}
    }
    missing
}

/// Why a guard's test did not pass, where it did not: how much worse
/// beyond the margin, or why its interval could not decide (with about how
/// many more of the `n` replicates per arm would). `pairs`: the repeats a
/// paired test used.
fn why_not_passed(t: &GuardTest, g: &Guard, pairs: Option<usize>, n: usize) -> Option<Prose> {
    match t.decision {
        Decision::Fail => Some(Prose::ours(format!(
            "worse by {} (interval {} to {}), beyond the margin of {}",
            num(-t.gain),
            num(-t.ci_high),
            num(-t.ci_low),
            num(g.margin)
        ))),
        Decision::Inconclusive if t.ci_low.is_nan() && g.paired => Some(Prose::ours(format!(
            "{} in both arms: no interval",
            crate::text::counted(pairs.unwrap_or(0) as u64, "repeat")
        ))),
        Decision::Inconclusive if t.ci_low.is_nan() => Some("one replicate: no interval".into()),
        Decision::Inconclusive => {
            let more = crate::report::stats::replicates_to_reach(
                (t.ci_high - t.ci_low) / 2.0,
                t.gain + g.margin,
                n,
            )
            .map(|k| format!("; about {k} more replicates per arm would likely decide"))
            .unwrap_or_else(|| "; more repeats narrow it".into());
            Some(Prose::ours(format!(
                "the interval {} to {} holds minus the margin: neither shown within it nor \
                 beyond{more}",
                num(t.ci_low),
                num(t.ci_high)
            )))
        }
        Decision::Pass => None,
    }
}
