//! The experiment and its cells in the store: created (all cells
//! `pending`), read back for a resume, and each cell's end recorded.

use std::path::Path;

use super::cell::{unstarted, CellInfo, Event, Reporter};
use super::RunnerError;
use crate::experiment::plan::Plan;
use crate::store::{
    Fingerprint, NewExperiment, NewRun, RunOutcome, RunStatus, RunnerIdentity, Store, StoreError,
};

/// Records a new experiment and its cells (all `pending`) in one
/// transaction; returns its id.
pub fn create_experiment(
    store: &mut Store,
    plan: &Plan,
    file_text: &str,
    command_line: Vec<String>,
    git: (Option<String>, Option<bool>),
    fingerprint: Fingerprint,
) -> Result<i64, RunnerError> {
    let experiment = NewExperiment {
        name: plan.name.clone(),
        description: plan.description.clone(),
        workload: plan.workload.as_str().to_string(),
        // From the repository's root where it has one, so that the
        // report's reproduce line is not a path of this machine.
        file_path: crate::experiment::fingerprint::path_in_repo(&plan.file)
            .unwrap_or_else(|| plan.file.display().to_string()),
        file_text: file_text.to_string(),
        file_sha256: crate::experiment::plan::sha256_hex(file_text.as_bytes()),
        plan_json: plan.to_json(),
        iterations: i64::from(plan.iterations),
        warmup: i64::from(plan.warmup),
        repeats: i64::from(plan.repeats),
        baseline: Some(plan.baseline.clone()),
        lcx_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: git.0,
        git_dirty: git.1,
        command_line,
        runner: Some(RunnerIdentity::current()),
        fingerprint,
    };
    Ok(store.insert_experiment(&experiment, &cells(plan))?)
}

/// An experiment recorded without its cells (an lcx before 0.2 killed
/// between its two writes) gets them from its stored plan, all `pending`;
/// returns whether it had to. Its runs are otherwise left as they are.
pub(crate) fn plan_missing_cells(
    store: &mut Store,
    plan: &Plan,
    experiment_id: i64,
) -> Result<bool, StoreError> {
    if !store.runs(experiment_id)?.is_empty() {
        return Ok(false);
    }
    store.insert_runs(experiment_id, &cells(plan))?;
    Ok(true)
}

/// The plan's cells as new, `pending` rows, in plan order.
fn cells(plan: &Plan) -> Vec<NewRun> {
    plan.cells()
        .into_iter()
        .map(|cell| {
            let arm = &plan.arms[cell.arm];
            NewRun {
                arm: arm.name.clone(),
                arm_label: arm.label.clone(),
                arm_index: cell.arm as i64,
                repeat: i64::from(cell.repeat),
                config_toml: arm.config_toml.clone(),
                config_sha256: arm.config_sha256.clone(),
                command: arm.command_line(),
                env: arm.env.clone(),
                revision: arm.revision.as_ref().map(|r| crate::store::RunRevision {
                    asked: r.asked.clone(),
                    sha: r.sha.clone(),
                    diff_sha256: r.diff_sha256.clone(),
                    binary_version: r.version.clone(),
                }),
            }
        })
        .collect()
}

/// Reads back the plan an experiment was started with (for `--resume`).
pub fn stored_plan(store: &Store, experiment_id: i64) -> Result<Plan, RunnerError> {
    let experiment = store
        .experiment(experiment_id)?
        .ok_or_else(|| StoreError::ExperimentNotFound(experiment_id.to_string()))?;
    let mut plan =
        Plan::from_stored(&experiment.plan_json).map_err(|source| RunnerError::BadPlan {
            id: experiment_id,
            source,
        })?;
    // `lcx rename` renames the row; a resume's cells get the name it has now.
    plan.name = experiment.name;
    Ok(plan)
}

/// Records a cell's end. A completed training cell's run directory goes
/// (unless `keep_runs`); one that did not complete keeps it, and its error
/// says where. With `warmup = "auto"`, a completed cell's warm-up is
/// detected from its primary metric and stored with it.
pub(crate) fn finish_cell(
    store: &mut Store,
    plan: &Plan,
    run_id: i64,
    outcome: &mut RunOutcome,
    cell_dir: Option<&Path>,
    keep_runs: bool,
) -> Result<(), StoreError> {
    if let Some(dir) = cell_dir {
        if outcome.status == RunStatus::Completed && !keep_runs {
            // Best effort: a folder that cannot be removed costs disk, not data.
            let _ = std::fs::remove_dir_all(dir);
        } else if dir.exists() && outcome.status != RunStatus::Completed {
            let kept = format!("run directory kept: {}", dir.display());
            outcome.error = Some(match outcome.error.take() {
                Some(e) => format!("{e} ({kept})"),
                None => kept,
            });
        }
    }
    store.finish_run(run_id, outcome)?;
    if plan.warmup_auto && outcome.status == RunStatus::Completed {
        let metric = plan
            .primary_metric()
            .unwrap_or_else(|| "time/iteration_seconds".into());
        let series = store.metric_head(run_id, &metric, crate::experiment::warmup::SERIES_HEAD)?;
        let values: Vec<f64> = series.iter().map(|p| p.1).collect();
        let warmup = crate::experiment::warmup::detect_warmup(&values);
        store.set_run_warmup(run_id, warmup as i64)?;
    }
    Ok(())
}

/// Records the end of a cell whose process never started (the executor
/// refused it, its setup or prepare failed) and reports it; returns the
/// outcome recorded.
pub(crate) fn finish_unstarted(
    store: &mut Store,
    reporter: &mut dyn Reporter,
    info: &CellInfo,
    error: String,
    wall_seconds: f64,
) -> Result<RunOutcome, StoreError> {
    let outcome = unstarted(error, wall_seconds);
    store.finish_run(info.run_id, &outcome)?;
    reporter.report(&Event::CellFinished {
        cell: info,
        outcome: &outcome,
        lines: 0,
    });
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::run::testkit;
    use crate::store::LineProblems;

    fn plan(extra: &str) -> Plan {
        testkit::plan(&format!(
            "iterations = 4\nrepeats = 2\n{extra}\n[[arms]]\nname = \"a\"\ncommand = \"true\"\n\
             [[arms]]\nname = \"b\"\ncommand = \"true\""
        ))
    }

    #[test]
    fn an_experiment_is_recorded_with_every_cell_pending_and_its_plan_reads_back() {
        let plan = plan("");
        let (store, id) = testkit::recorded(&plan);
        let runs = store.runs(id).unwrap();
        assert_eq!(runs.len(), 4);
        assert!(runs.iter().all(|r| r.status == RunStatus::Pending));
        assert_eq!(stored_plan(&store, id).unwrap(), plan);
    }

    fn outcome(status: RunStatus) -> RunOutcome {
        RunOutcome {
            status,
            exit_code: Some(0),
            signal: None,
            error: None,
            stderr_tail: None,
            wall_seconds: 1.0,
            db_wait_seconds: None,
            problems: LineProblems::default(),
        }
    }

    #[test]
    fn a_completed_cells_run_directory_goes_and_a_failed_ones_is_kept_and_named() {
        let plan = plan("");
        let (mut store, id) = testkit::recorded(&plan);
        let runs = store.runs(id).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let (done, failed) = (tmp.path().join("done"), tmp.path().join("failed"));
        for (run, dir, status) in [
            (&runs[0], &done, RunStatus::Completed),
            (&runs[1], &failed, RunStatus::Failed),
        ] {
            std::fs::create_dir(dir).unwrap();
            store.start_run(run.id).unwrap();
            let mut o = outcome(status);
            finish_cell(&mut store, &plan, run.id, &mut o, Some(dir), false).unwrap();
        }
        assert!(!done.exists());
        assert!(failed.exists());
        let error = store.run(runs[1].id).unwrap().unwrap().error.unwrap();
        assert!(error.starts_with("run directory kept: "), "{error}");
    }

    #[test]
    fn auto_warmup_is_detected_and_stored_for_a_completed_cell() {
        let plan = plan("warmup = \"auto\"\n[[columns]]\nmetric = \"t\"");
        let (mut store, id) = testkit::recorded(&plan);
        let run = store.runs(id).unwrap().remove(0);
        let attempt = store.start_run(run.id).unwrap();
        // A slow first iteration, then a steady series.
        let series = [9.0, 1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.02, 0.98];
        let lines: Vec<_> = series
            .iter()
            .enumerate()
            .map(|(i, v)| crate::store::MetricLine {
                iteration: i as i64 + 1,
                numbers: vec![("t".into(), *v)],
                texts: vec![],
                nonfinite: vec![],
            })
            .collect();
        store.insert_lines(run.id, attempt, &lines).unwrap();
        let mut o = outcome(RunStatus::Completed);
        finish_cell(&mut store, &plan, run.id, &mut o, None, false).unwrap();
        assert_eq!(store.run(run.id).unwrap().unwrap().warmup, Some(1));
    }
}
