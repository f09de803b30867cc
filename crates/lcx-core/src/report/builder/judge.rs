//! Judgements over the arm rows: which arms may be judged at all, the
//! verdict rule, the gate, the net result on the primary metric, and
//! whether adaptive repeats have reached their precision. Guards and
//! `--check` have files of their own; nothing here changes the arm rows.

use std::collections::BTreeMap;

use crate::experiment::{Gate, GatePoints, Plan};
use crate::report::model::{
    ArmResult, ColumnKind, GateArm, GateOutcome, Prose, Report, ReportColumn,
};
use crate::report::stats::{Decision, GateTest, Verdict, VerdictRule};
use crate::store::{Run, RunStatus};

use super::arms::{ArmName, Baselines};
use super::columns::label_of;
use super::Options;

/// The verdict rule: the command line's α and minimum effect, else the
/// gate's minimum effect, else 0.05 for either.
pub(super) fn verdict_rule(options: Options, gate: Option<&Gate>) -> VerdictRule {
    VerdictRule {
        alpha: options.alpha.unwrap_or(0.05),
        min_effect: options
            .min_effect
            .or(gate.and_then(|g| g.min_effect))
            .unwrap_or(0.05),
    }
}

/// The first line of a cell's error (the runner's word and the child's
/// last stderr line), or its status.
pub(super) fn first_error_line(r: &Run) -> String {
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

/// The arms whose numbers no verdict, gate or guard may use, with why:
/// judgements rest on completed cells only.
pub(super) fn unjudged_arms<'a>(
    order: &'a [ArmName],
    runs: &[Run],
    iterations: i64,
) -> BTreeMap<&'a str, Prose> {
    order
        .iter()
        .filter_map(|a| {
            unjudged_reason(&a.name, runs, iterations).map(|why| (a.name.as_str(), why))
        })
        .collect()
}

/// Adds the arms whose cells ran another precision than they asked for
/// (AMP requested, fp32 ran: no CUDA): their numbers are not the asked
/// precision's, so no verdict, gate or guard may call them AMP's.
pub(super) fn mismatched_precision<'a>(
    order: &'a [ArmName],
    precisions: &[(String, String, String)],
    unjudged: &mut BTreeMap<&'a str, Prose>,
) {
    for a in order {
        if let Some((asked, ran)) = super::arms::mismatched(precisions, &a.name).next() {
            unjudged.entry(a.name.as_str()).or_insert_with(|| {
                // The precisions are the cells' words: quoted, never ours.
                Prose::of_name(&a.name)
                    .and(": ")
                    .text(asked.to_uppercase())
                    .and(" requested, ran ")
                    .text(ran)
                    .and(": its numbers are not ")
                    .text(asked.to_uppercase())
                    .and(" numbers")
            });
        }
    }
}

/// What a gate or guard is judged from: the arm rows, the cells behind
/// them, the experiment's baseline and the arms that may not be judged.
pub(super) struct Evidence<'a> {
    pub plan: Option<&'a Plan>,
    pub arms: &'a [ArmResult],
    pub runs: &'a [Run],
    pub baselines: &'a Baselines,
    pub unjudged: &'a BTreeMap<&'a str, Prose>,
}

/// The gate on every arm it judges, and its decision over them.
pub(super) fn gate_outcome(
    g: &Gate,
    ev: &Evidence,
    rule: VerdictRule,
    columns: &[ReportColumn],
) -> GateOutcome {
    let test = GateTest::from_min_speedup(g.min_speedup);
    let gate_arms: Vec<GateArm> = gate_targets(g, ev)
        .iter()
        .map(|name| {
            let baseline = ev.baselines.of(name);
            let base_missing =
                no_data(ev, &g.metric, baseline).map(|why| Prose::ours("baseline ").then(why));
            gate_arm(ev, g, test, name, base_missing.as_ref())
        })
        .collect();
    let decision = if gate_arms.is_empty() {
        Decision::Inconclusive
    } else {
        Decision::combine(gate_arms.iter().map(|a| a.decision))
    };
    GateOutcome {
        metric: g.metric.clone(),
        label: label_of(columns, &g.metric),
        min_speedup: g.min_speedup,
        test,
        rule: test.describe(rule.alpha),
        pass: decision == Decision::Pass,
        decision,
        arms: gate_arms,
    }
}

/// The arms a gate judges: its `arm` (in a sweep, that arm at each point
/// it names) or every arm but the baselines.
fn gate_targets(g: &Gate, ev: &Evidence) -> Vec<String> {
    let Some(plan) = ev.plan.filter(|p| p.sweep.is_some()) else {
        return match &g.arm {
            Some(a) => vec![a.clone()],
            None => ev
                .arms
                .iter()
                .filter(|a| !a.is_baseline)
                .map(|a| a.name.clone())
                .collect(),
        };
    };
    plan.arms
        .iter()
        .filter(|a| !ev.baselines.is(&a.name))
        .filter(|a| g.arm.as_ref().is_none_or(|x| a.file_arm() == x))
        .filter(|a| judges_point(g, plan, a))
        .map(|a| a.name.clone())
        .collect()
}

/// Whether a gate's `from`, `at` or `crossover_at_most` takes the point of
/// a sweep's arm.
fn judges_point(g: &Gate, plan: &Plan, arm: &crate::experiment::Arm) -> bool {
    let (Some(sweep), Some(at)) = (&plan.sweep, &arm.sweep) else {
        return true;
    };
    let Some(values) = sweep.along_axis().map(|a| &a.values) else {
        return false;
    };
    let Some(value) = at.values.get(sweep.along) else {
        return false;
    };
    let index = |v: &str| values.iter().position(|x| x == v);
    match &g.points {
        GatePoints::Every => true,
        GatePoints::At(points) => points.contains(value),
        GatePoints::From(from) | GatePoints::Crossover(from) => {
            matches!((index(value), index(from)), (Some(i), Some(f)) if i >= f)
        }
    }
}

/// Why an arm has nothing for the gate to judge: too few completed cells,
/// its cells' skip reason or status, or the metric never emitted.
fn no_data(ev: &Evidence, metric: &str, arm: &str) -> Option<Prose> {
    if let Some(why) = ev.unjudged.get(arm) {
        return Some(why.clone());
    }
    let has = ev
        .arms
        .iter()
        .find(|a| a.name == arm)
        .and_then(|a| a.metric(metric))
        .is_some_and(|m| m.replicate.is_some());
    if has {
        return None;
    }
    let runs: Vec<&Run> = ev.runs.iter().filter(|r| r.arm == arm).collect();
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
        Some(_) => Prose::of_name(arm).and(" recorded no ").name(metric),
        None => Prose::ours("no arm named ").name(arm),
    })
}

/// The gate on one arm: INCONCLUSIVE, naming every side that lacks data
/// (not only the first), else the test's decision on its speedup.
fn gate_arm(
    ev: &Evidence,
    g: &Gate,
    test: GateTest,
    name: &str,
    base_missing: Option<&Prose>,
) -> GateArm {
    let metric = ev
        .arms
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.metric(&g.metric));
    let missing: Vec<Prose> = base_missing
        .cloned()
        .into_iter()
        .chain(no_data(ev, &g.metric, name))
        .collect();
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
            ev.arms
                .iter()
                .find(|a| a.name == ev.baselines.of(name))
                .and_then(|a| a.metric(&g.metric))
                .map_or(0, |m| m.replicates),
        );
        // Rounds judged as pairs are the replicates of a paired speedup.
        let replicates = c.and_then(|c| c.paired_rounds).unwrap_or(replicates);
        let (d, why) = test.decide(speedup.as_ref(), replicates);
        (
            d,
            why.map(Prose::ours),
            speedup,
            c.map_or(Verdict::Inconclusive, |c| c.verdict),
        )
    };
    GateArm {
        arm: name.to_string(),
        speedup,
        verdict,
        pass: decision == Decision::Pass,
        decision,
        why,
    }
}

/// What a single arm ran to on `metric`, as hyperfine's `Range (min …
/// max)` and run count: `; on wall (s), range (min … max) 0.0101 … 0.0123
/// over 30 runs in 3 repeats`; nothing where the arm has no data. A
/// command's iteration is one run of it; with `fold = "last"` the values
/// are one per cell.
fn range(arm: &ArmResult, metric: &str, columns: &[ReportColumn], workload: &str) -> Prose {
    let Some(m) = arm.metric(metric) else {
        return Prose::default();
    };
    // Every run's, where the cells fold to their median or fastest run.
    let Some(s) = m.runs.as_ref().or(m.summary.as_ref()) else {
        return Prose::default();
    };
    let num = crate::report::words::num;
    // One value per cell under `fold = "last"`.
    let last = m.runs.is_none()
        && columns
            .iter()
            .any(|c| c.metric == metric && !c.fold.is_mean());
    let noun = match () {
        _ if last => "cell",
        _ if workload == "command" => "run",
        _ => "iteration",
    };
    let repeats = if !last && !arm.partial && arm.completed > 1 {
        format!(
            " in {}",
            crate::text::counted(arm.completed as u64, "repeat")
        )
    } else {
        String::new()
    };
    let label = crate::metrics::with_unit(&label_of(columns, metric), metric);
    Prose::ours("; on ").text(label).and(format!(
        ", range (min … max) {} … {} over {}{repeats}",
        num(s.min),
        num(s.max),
        crate::text::counted(s.n as u64, noun)
    ))
}

/// The net result on the primary metric: the arms grouped by verdict, each
/// with its speedup, then those without data and those not judged.
pub(super) fn net_result(
    arms: &[ArmResult],
    primary: Option<&str>,
    columns: &[ReportColumn],
    workload: &str,
) -> Prose {
    let Some(metric) = primary else {
        return "no metrics to compare".into();
    };
    let label = label_of(columns, metric);
    let others: Vec<&ArmResult> = arms.iter().filter(|a| !a.is_baseline).collect();
    if others.is_empty() {
        let single = Prose::ours("a single arm, nothing to compare");
        return match arms {
            [arm] => single.then(range(arm, metric, columns, workload)),
            _ => single,
        };
    }
    let has_data = |a: &ArmResult| a.metric(metric).is_some_and(|m| m.replicate.is_some());
    // Each arm's own baseline: in a sweep, the one at its point.
    let base_of = |a: &ArmResult| {
        arms.iter().find(|b| match &a.compared_with {
            Some(name) => &b.name == name,
            None => b.is_baseline,
        })
    };
    let bases: Vec<&ArmResult> = arms.iter().filter(|a| a.is_baseline).collect();
    // Said once when no baseline can be compared with at all.
    if let Some(base) = bases
        .first()
        .filter(|_| bases.iter().all(|b| b.unjudged.is_some()))
    {
        return Prose::ours("nothing judged on ")
            .text(&label)
            .and(": baseline ")
            .then(base.unjudged.clone().unwrap_or_default());
    }
    if let Some(base) = bases.first().filter(|_| bases.iter().all(|b| !has_data(b))) {
        return Prose::ours("no data for the baseline ")
            .name(&base.name)
            .and(" on ")
            .text(&label)
            .and(": nothing can be compared");
    }
    let mut groups: [(Verdict, Vec<Prose>); 4] = [
        (Verdict::Improved, Vec::new()),
        (Verdict::Regressed, Vec::new()),
        (Verdict::Equivalent, Vec::new()),
        (Verdict::Inconclusive, Vec::new()),
    ];
    let mut without = Vec::new();
    let mut unjudged: Vec<NotJudged> = Vec::new();
    for a in &others {
        if let Some(why) = &a.unjudged {
            not_judged(&mut unjudged, &a.name, why.clone());
            continue;
        }
        if let Some(why) = base_of(a).and_then(|b| b.unjudged.as_ref()) {
            not_judged(
                &mut unjudged,
                &a.name,
                Prose::of_name(&a.name)
                    .and(": its baseline ")
                    .then(why.clone()),
            );
            continue;
        }
        let Some(c) = a.metric(metric).and_then(|m| m.comparison) else {
            without.push(Prose::of_name(&a.name));
            continue;
        };
        let s = c
            .speedup
            .map(|s| format!(" {}", crate::report::words::speedup_text(&s)))
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
        let listed = unjudged.into_iter().map(|n| match n.rest {
            Some(rest) => Prose::join(n.names.into_iter().map(Prose::of_name), ", ")
                .and(": ")
                .then(rest),
            None => n.whole,
        });
        parts.push(Prose::ours("not judged: ").then(Prose::join(listed, "; ")));
    }
    Prose::ours("on ")
        .text(&label)
        .and(": ")
        .then(Prose::join(parts, "; "))
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
            if !crate::report::stats::within_precision(&s, precision) {
                return None;
            }
        }
    }
    Some(format!(
        "every judged speedup's interval is within ±{}%",
        crate::report::words::num(precision * 100.0)
    ))
}

/// Arms not judged for one reason, named together in a net result.
struct NotJudged {
    /// The reason after its arm's name (`AMP requested, ran fp32: …`);
    /// `None` for one that does not start with it, kept whole.
    rest: Option<Prose>,
    names: Vec<String>,
    whole: Prose,
}

/// Adds arm `name`, not judged because `why`, to the arms with the same
/// reason, or as a reason of its own.
fn not_judged(list: &mut Vec<NotJudged>, name: &str, why: Prose) {
    let rest = why.about(name);
    if let Some(rest) = &rest {
        if let Some(n) = list.iter_mut().find(|n| n.rest.as_ref() == Some(rest)) {
            n.names.push(name.to_string());
            return;
        }
    }
    list.push(NotJudged {
        rest,
        names: vec![name.to_string()],
        whole: why,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 78, point 6: six arms not judged for one reason are named
    /// once, together; another reason stays apart, and a reason that does
    /// not start with its arm's name is kept whole.
    #[test]
    fn arms_not_judged_for_one_reason_are_named_together() {
        let fp32 = |arm: &str| {
            Prose::of_name(arm)
                .and(": AMP requested, ran ")
                .text("fp32")
                .and(": its numbers are not AMP numbers")
        };
        let mut list = Vec::new();
        for arm in ["amp-512", "amp-1024", "amp-2048"] {
            not_judged(&mut list, arm, fp32(arm));
        }
        not_judged(
            &mut list,
            "slow",
            Prose::of_name("slow").and(": no completed cell"),
        );
        not_judged(&mut list, "odd", Prose::ours("a reason of its own"));
        not_judged(&mut list, "amp-4096", fp32("amp-4096"));
        let names: Vec<Vec<String>> = list.iter().map(|n| n.names.clone()).collect();
        assert_eq!(
            names,
            [
                vec!["amp-512", "amp-1024", "amp-2048", "amp-4096"],
                vec!["slow"],
                vec!["odd"]
            ]
        );
        assert_eq!(
            list[0].rest.as_ref().map(Prose::plain).as_deref(),
            Some("AMP requested, ran fp32: its numbers are not AMP numbers")
        );
        assert!(list[2].rest.is_none());
        assert_eq!(list[2].whole.plain(), "a reason of its own");
    }
}
