//! What `lcx report --check` decides: PASS only when every cell completed,
//! every arm that ran has data, no gate or guard rests on contended cells
//! (unless `--allow-contended`), and every gate and guard passed; with a
//! note for each reason it did not. It reads the cells and the outcomes
//! already judged; it must not judge anything anew.

use crate::experiment::Plan;
use crate::report::model::{ArmResult, ContendedCell, GateOutcome, GuardOutcome, Prose};
use crate::report::stats::Decision;
use crate::store::{Experiment, Run, RunStatus};

use super::judge::first_error_line;

/// The gate and guards as judged, and the experiment's baseline.
pub(super) struct Outcomes<'a> {
    pub gate: Option<&'a GateOutcome>,
    pub guards: &'a [GuardOutcome],
    pub baselines: &'a super::arms::Baselines,
    /// The rounds left out of every pair (`arms::uneven_rounds`).
    pub uneven: &'a std::collections::BTreeSet<i64>,
}

/// `--check`'s decision, the notes that say why it is not PASS, and the
/// completed cells measured on a busy host.
pub(super) struct Check {
    pub decision: Decision,
    pub notes: Vec<Prose>,
    pub contended: Vec<ContendedCell>,
    /// The decision is INCONCLUSIVE because a gate or guard rests on
    /// contended cells, whatever they leaned to.
    pub undecided_by_contention: bool,
}

/// `--check` passes only what ran: every cell completed, every arm with
/// data, every gate and guard passed.
pub(super) fn check(
    e: &Experiment,
    plan: Option<&Plan>,
    runs: &[Run],
    arms: &[ArmResult],
    outcomes: Outcomes,
    allow_contended: bool,
) -> Check {
    let mut notes = unfinished(e, runs, arms);
    let contended = contended_cells(plan, runs, outcomes.uneven);
    // Data from a busy host prove neither PASS nor FAIL: a gate or guard
    // that rests on a contended cell is INCONCLUSIVE whichever way it
    // leaned (a contended arm no gate or guard compares changes nothing).
    // A gate judged on randomized rounds as pairs rests only on rounds
    // whose arms saw the same contention (the others were left out of its
    // pairs), so contention does not unsettle it.
    let judged = judged_arms(&outcomes, arms);
    let undecided = !allow_contended && contended.iter().any(|c| judged.contains(&c.arm.as_str()));
    if undecided {
        notes.push(contended_note(runs, &contended));
    }
    let decision = if undecided {
        Decision::Inconclusive
    } else {
        let mut all: Vec<Decision> = outcomes.gate.iter().map(|g| g.decision).collect();
        all.extend(outcomes.guards.iter().map(|g| g.decision));
        if !notes.is_empty() {
            all.push(Decision::Inconclusive);
        }
        Decision::combine(all)
    };
    Check {
        decision,
        notes,
        contended,
        undecided_by_contention: undecided,
    }
}

/// What did not finish: a cell that did not complete (the first that
/// says why), nothing completed at all, an arm that ran and measured
/// nothing.
fn unfinished(e: &Experiment, runs: &[Run], arms: &[ArmResult]) -> Vec<Prose> {
    let mut notes = Vec::new();
    let not_done: Vec<&Run> = runs
        .iter()
        .filter(|r| !matches!(r.status, RunStatus::Completed | RunStatus::Skipped))
        .collect();
    if let Some(r) = not_done
        .iter()
        .find(|r| r.error.is_some())
        .or(not_done.first())
    {
        notes.push(
            Prose::ours(format!(
                "{} of {} did not complete (",
                not_done.len(),
                crate::text::counted(runs.len() as u64, "cell"),
            ))
            .name(&r.arm)
            .and(format!(" #{} {}: ", r.repeat, r.status))
            .text(first_error_line(r))
            .and(")"),
        );
    }
    // Nothing completed (every cell skipped, or none recorded): nothing
    // was shown, so nothing passes.
    if !runs.iter().any(|r| r.status == RunStatus::Completed) {
        notes.push(if runs.is_empty() {
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
            runs.iter()
                .any(|r| r.arm == a.name && r.status != RunStatus::Skipped)
                && !a.metrics.iter().any(|m| m.summary.is_some())
        })
        .map(|a| a.name.as_str())
        .collect();
    if !empty.is_empty() {
        notes.push(
            Prose::ours("no data for ")
                .then(Prose::join(empty.iter().map(|a| Prose::of_name(*a)), ", ")),
        );
    }
    notes
}

/// Completed cells measured on a busy host: a gate or guard that rests
/// on them did not measure what it claims.
fn contended_cells(
    plan: Option<&Plan>,
    runs: &[Run],
    uneven: &std::collections::BTreeSet<i64>,
) -> Vec<ContendedCell> {
    let measurement = plan.map(|p| p.measurement).unwrap_or_default();
    let randomized = plan.is_some_and(|p| p.order == crate::experiment::Order::Randomized);
    runs.iter()
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
                round_even: randomized.then(|| !uneven.contains(&r.repeat)),
                busiest: r.contention.foreign_processes.clone().unwrap_or_default(),
            })
        })
        .collect()
}

/// The arms a gate or guard compares, baselines included, where what it
/// judges is something load can move (a count of instructions is the same
/// on a busy host, `metrics::load_independent`) and the gate's comparison
/// did not pair the rounds by their contention: either way, contention
/// leaves the gate decided.
fn judged_arms<'a>(outcomes: &Outcomes<'a>, arms: &[ArmResult]) -> Vec<&'a str> {
    use crate::metrics::load_independent;
    let paired =
        |metric: &str, arm: &str| arms.iter().any(|a| a.name == arm && a.paired_on(metric));
    outcomes
        .gate
        .into_iter()
        .filter(|g| !load_independent(&g.metric))
        .flat_map(|g| {
            g.arms
                .iter()
                .filter(|a| !paired(&g.metric, &a.arm))
                .flat_map(|a| [a.arm.as_str(), outcomes.baselines.of(&a.arm)])
        })
        .chain(
            outcomes
                .guards
                .iter()
                .filter(|g| !load_independent(&g.metric))
                .flat_map(|g| [g.arm.as_str(), g.baseline.as_str()]),
        )
        .collect()
}

/// The note that contended cells decided nothing (`contended` is not
/// empty).
fn contended_note(runs: &[Run], contended: &[ContendedCell]) -> Prose {
    let completed = runs
        .iter()
        .filter(|r| r.status == RunStatus::Completed)
        .count();
    Prose::ours(format!(
        "{} of {} contended (other programs used more than {:.2} of a core on average): \
         neither PASS nor FAIL from contended data; rerun on a quiet host (`lcx system \
         check` says what is busy), or judge them anyway with --allow-contended",
        contended.len(),
        crate::text::counted(completed as u64, "completed cell"),
        contended.first().map_or(0.0, |c| c.threshold),
    ))
}
