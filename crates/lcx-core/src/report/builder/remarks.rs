//! The report's remarks that are not about one arm's row: an unreadable
//! plan, where the cells ran, what training ran on, text where numbers
//! were meant, a stalled runner, the shell's start-up taken off, one
//! process per arm, and what the primary metric's series say about the
//! warm-up. Each returns its sentences; the order they are read in is
//! `assemble`'s. Nothing here judges or changes the numbers.

use crate::experiment::plan::StoredPlanError;
use crate::report::model::{ArmResult, Prose};
use crate::store::{Experiment, Run};

use super::arms::{ArmName, Baselines};
use super::cells::stalled;
use super::environment::hardware_by_arm;

/// The stored plan could not be read: what the report does without it.
pub(super) fn unreadable_plan(why: &StoredPlanError) -> Prose {
    Prose::ours("The stored plan could not be read (")
        .text(why.to_string())
        .and("); default columns are shown and no gate is evaluated.")
}

/// What the report must say about where the cells ran: on more than one
/// host (not a like-for-like comparison), or elsewhere than the machine
/// the Environment section describes (Slurm nodes).
pub(super) fn placement_remarks(e: &Experiment, runs: &[Run]) -> Vec<Prose> {
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

/// The baseline named no arm that has cells: nothing can be compared (in
/// a sweep, at the points whose baseline arm has none).
pub(super) fn missing_baseline(order: &[ArmName], baselines: &Baselines) -> Option<Prose> {
    let mut missing: Vec<&str> = Vec::new();
    for b in order.iter().map(|a| baselines.of(&a.name)) {
        if !order.iter().any(|a| a.name == b) && !missing.contains(&b) {
            missing.push(b);
        }
    }
    let first = missing.first()?;
    Some(if missing.len() == 1 {
        Prose::ours("The baseline ")
            .name(*first)
            .and(" has no cells; no speedups or verdicts.")
    } else {
        Prose::ours("The baselines ")
            .then(Prose::join(
                missing.iter().map(|m| Prose::of_name(*m)),
                ", ",
            ))
            .and(" have no cells; no speedups or verdicts at their points.")
    })
}

/// What training ran on, said of the arms with lines: a skipped arm (no
/// GPU) has nothing to say.
pub(super) fn kernels(
    kernels: &[(String, String)],
    order: &[ArmName],
    runs: &[Run],
) -> Option<Prose> {
    let arm_names: Vec<&str> = order
        .iter()
        .map(|a| a.name.as_str())
        .filter(|n| runs.iter().any(|r| r.arm == *n && r.iterations_done > 0))
        .collect();
    kernel_remark(kernels, &arm_names)
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

/// Text where a number was meant: a report metric, a name that is numeric
/// elsewhere, or a number in quotes. Once per arm and metric.
pub(super) fn non_numeric(
    texts: &[(String, String, i64, String)],
    needed: &[String],
    metric_names: &[String],
) -> Vec<Prose> {
    let mut out = Vec::new();
    for (arm, name, count, example) in texts {
        let meant_numeric = needed.contains(name)
            || metric_names.contains(name)
            || example.trim().parse::<f64>().is_ok();
        if meant_numeric {
            out.push(
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
    out
}

/// Cells during which the runner itself could not run long enough to
/// matter: their wall time includes the stall, the child's own timings
/// do not.
pub(super) fn runner_stalls(runs: &[Run]) -> Vec<Prose> {
    let mut out = Vec::new();
    for r in runs {
        let Some(stall) = r.contention.runner_stall_seconds else {
            continue;
        };
        if stalled(stall, r.wall_seconds) {
            out.push(
                Prose::ours(format!("run {} (", r.id))
                    .name(&r.arm)
                    .and(format!(
                        " #{}): the runner could not run for {} s of the cell's {} s wall time \
                         (stopped, a paused machine, or starved): Wall s includes that time, \
                         the metrics the child timed do not.",
                        r.repeat,
                        crate::report::words::num(stall),
                        r.wall_seconds
                            .map_or_else(|| "?".into(), crate::report::words::num)
                    )),
            );
        }
    }
    out
}

/// The shell's start-up was measured and taken off (a cell recorded
/// `process/shell_seconds`): how, so the times are read right.
pub(super) fn shell_subtracted(metric_names: &[String]) -> Option<Prose> {
    metric_names
        .iter()
        .any(|m| m == crate::bench::process::SHELL)
        .then(|| {
            Prose::ours(
                "Shell start-up taken off: a command given as a string with shell syntax ran \
                 through `sh -c`; its cell first timed 30 runs of the empty `sh -c ''`, and their \
                 mean (the shell s column) was subtracted from each run's wall, user and system \
                 time, as hyperfine does. A string of plain words runs without a shell; an array \
                 runs as it is, with nothing taken off.",
            )
        })
}

/// Several arms that ran one process each: their intervals cannot see
/// differences between processes.
pub(super) fn one_process(e: &Experiment, arms: &[ArmResult]) -> Option<Prose> {
    (e.repeats == 1 && arms.len() > 1).then(|| {
        Prose::ours(
            "One process per arm: each iteration is a replicate, so differences between \
             processes (a slow core, a cold page cache) cannot be seen and the intervals are \
             too narrow for them; give `repeats` ≥ 3 (or adaptive repeats) for verdicts to \
             gate on.",
        )
    })
}

/// What the primary metric's series say about the declared warm-up: a
/// transient longer than it (MSER), a trend after it, outlier iterations
/// (kept in the statistics, named here).
pub(super) fn series_remarks(
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
        if let Some((slope, p)) = crate::report::stats::trend(&after) {
            if p < 0.01 {
                out.push(cell().and(format!(
                    " trends after the warm-up ({:+.2} % per iteration, {}): the mean depends \
                     on how long the cell ran.",
                    slope * 100.0,
                    crate::report::words::p_text(p)
                )));
            }
        }
        let flagged = crate::report::stats::outliers(&after);
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
                crate::report::stats::outlier_threshold(after.len()),
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
