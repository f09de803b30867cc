//! The cells as the report lists them: those that did not complete, those
//! whose output had lines the statistics left out, those run again after
//! the schedule, and every cell's row of the Runs table. It lists what was
//! recorded; it must not judge it.

use crate::report::model::{CellNote, LineNote, Prose, RerunNote, RunRef};
use crate::store::{Experiment, Run, RunStatus};

/// The cells that did not complete, with why.
pub(super) fn incomplete(runs: &[Run]) -> Vec<CellNote> {
    runs.iter()
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
        .collect()
}

/// The cells whose output had lines the statistics left out, with each
/// non-finite value and where it occurred. `nonfinite`: (run id,
/// iteration, metric, value) as the store lists them.
pub(super) fn line_problems(
    runs: &[Run],
    nonfinite: &[(i64, i64, String, String)],
) -> Vec<LineNote> {
    runs.iter()
        .filter(|r| !r.problems.is_empty())
        .map(|r| LineNote {
            run_id: r.id,
            arm: r.arm.clone(),
            repeat: r.repeat,
            malformed: r.problems.malformed,
            nonfinite_values: r.problems.nonfinite,
            overlong: r.problems.overlong,
            extra: r.problems.extra,
            nonfinite: nonfinite_values(r.id, nonfinite),
        })
        .collect()
}

/// A metric's non-finite values, each with the iterations it occurred at.
type ValuesAt = Vec<(String, Vec<i64>)>;

/// One cell's non-finite values, a sentence per metric: each value with
/// the iterations it occurred at.
fn nonfinite_values(run_id: i64, nonfinite: &[(i64, i64, String, String)]) -> Vec<Prose> {
    // metric → [(value, iterations)], in the store's name order.
    let mut by_metric: Vec<(String, ValuesAt)> = Vec::new();
    for (_, iteration, name, value) in nonfinite.iter().filter(|n| n.0 == run_id) {
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
    by_metric
        .into_iter()
        .map(|(metric, values)| {
            let parts = values
                .into_iter()
                .map(|(v, its)| Prose::of_text(v).and(format!(" at {}", iteration_list(&its))));
            Prose::of_name(metric)
                .and(": ")
                .then(Prose::join(parts, "; "))
        })
        .collect()
}

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

/// The cells run again after the schedule, with why.
pub(super) fn reruns(runs: &[Run]) -> Vec<RerunNote> {
    runs.iter()
        .filter_map(|r| {
            Some(RerunNote {
                run_id: r.id,
                arm: r.arm.clone(),
                repeat: r.repeat,
                attempt: r.attempt,
                why: r.rerun_note.clone()?,
            })
        })
        .collect()
}

/// Every cell's row of the Runs table, by arm, repeat and id.
pub(super) fn run_refs(e: &Experiment, runs: &[Run]) -> Vec<RunRef> {
    let mut sorted: Vec<&Run> = runs.iter().collect();
    sorted.sort_by_key(|r| (r.arm_index, r.repeat, r.id));
    sorted
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
        .collect()
}

/// Whether the runner's stall during a cell is worth saying: at least a
/// second and a twentieth of the cell's wall time.
pub(super) fn stalled(stall: f64, wall: Option<f64>) -> bool {
    stall >= 1.0 && wall.is_none_or(|w| stall >= 0.05 * w)
}
