//! A cell: what the reporter is told about it, what an executor needs to
//! start it, and how the way its process ended becomes its outcome.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::RunnerOptions;
use crate::experiment::plan::{Arm, Plan, Program};
use crate::experiment::Workload;
use crate::store::{ExperimentStatus, LineProblems, Run, RunOutcome, RunStatus};

/// A cell as the reporter sees it.
#[derive(Debug, Clone)]
pub struct CellInfo {
    pub run_id: i64,
    pub arm: String,
    pub label: String,
    pub repeat: u32,
    pub repeats: u32,
    /// 1-based position among the cells this invocation runs.
    pub position: usize,
    pub cells: usize,
    /// Expected iterations (the plan's `iterations`).
    pub iterations: u32,
    /// The arm may print any number of lines (`variable_iterations`);
    /// otherwise lines past `iterations` are counted, not stored.
    pub variable_iterations: bool,
    pub attempt: i64,
}

impl CellInfo {
    /// Cell `run` of `arm`, the `position`-th of the `cells` this
    /// invocation runs, at its recorded attempt.
    pub(crate) fn of(plan: &Plan, arm: &Arm, run: &Run, position: usize, cells: usize) -> Self {
        CellInfo {
            run_id: run.id,
            arm: arm.name.clone(),
            label: arm.label.clone(),
            repeat: run.repeat.max(1) as u32,
            repeats: plan.repeats,
            position,
            cells,
            iterations: plan.iterations,
            variable_iterations: arm.variable_iterations,
            attempt: run.attempt,
        }
    }
}

/// What the runner reports, in order.
#[derive(Debug)]
pub enum Event<'a> {
    Started {
        experiment_id: i64,
        name: &'a str,
        /// Cells this invocation will run (all of them, or a resume's rest).
        cells: usize,
        total_cells: usize,
        resumed: bool,
        /// The experiment had no cells recorded (an older lcx killed while
        /// creating it): they were planned now from its stored plan.
        planned_cells: bool,
    },
    CellSkipped {
        cell: &'a CellInfo,
        reason: &'a str,
    },
    CellStarted {
        cell: &'a CellInfo,
    },
    Iteration {
        cell: &'a CellInfo,
        iteration: i64,
        /// Metric lines received so far in this cell.
        lines: u64,
        elapsed: Duration,
    },
    /// A problem with one line that does not fail the cell.
    Warning {
        cell: &'a CellInfo,
        message: String,
    },
    /// Where a cell went (a Slurm job id and its script).
    Note {
        cell: &'a CellInfo,
        message: String,
    },
    CellFinished {
        cell: &'a CellInfo,
        outcome: &'a RunOutcome,
        lines: u64,
    },
    Finished {
        experiment_id: i64,
        summary: &'a Summary,
    },
}

/// Consumes runner events (progress bar, plain log, test recorder).
pub trait Reporter {
    fn report(&mut self, event: &Event<'_>);
}

/// Outcome of one runner invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub experiment_id: i64,
    pub status: ExperimentStatus,
    pub completed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub interrupted: usize,
    /// Cells not run yet (after a stop or --fail-fast).
    pub pending: usize,
    pub wall_seconds: f64,
}

/// What an executor needs to start a cell.
pub(crate) struct Cell<'a> {
    pub plan: &'a Plan,
    pub arm: &'a Arm,
    pub info: &'a CellInfo,
    pub options: &'a RunnerOptions,
    pub program: &'a Path,
    /// A training cell's run directory (`LCX_RUNS_DIR`).
    pub cell_dir: Option<&'a Path>,
    /// Its job's folder ([`super::Executor::job_dir`]).
    pub job_dir: Option<&'a Path>,
}

/// The binary a cell runs: a revision's build, this lcx, or the arm's
/// own program.
pub(crate) fn cell_program(arm: &Arm, options: &RunnerOptions) -> PathBuf {
    match (
        &arm.program,
        arm.revision.as_ref().and_then(|r| r.binary.clone()),
    ) {
        // An arm at a revision runs that revision's build.
        (Program::Lcx, Some(binary)) => binary,
        (Program::Lcx, None) | (Program::Timer, _) => options.lcx_exe.clone(),
        (Program::External(p), _) => PathBuf::from(p),
    }
}

/// A training cell's run directory (config, log, checkpoints), which goes
/// once the cell has completed: inside its job's folder for a Slurm cell
/// (a later coordinator finds it there), else a folder of its own.
pub(crate) fn train_dir(
    plan: &Plan,
    arm: &Arm,
    info: &CellInfo,
    job_dir: Option<&Path>,
) -> Option<PathBuf> {
    if arm.program != Program::Lcx || plan.workload != Workload::Train {
        return None;
    }
    Some(match job_dir {
        Some(dir) => dir.join("run"),
        None => PathBuf::from("runs").join("tmp").join(format!(
            "lcx-cell-{}-{}",
            std::process::id(),
            info.run_id
        )),
    })
}

/// Environment every child gets, so external commands can see which cell
/// they are.
fn cell_env(plan: &Plan, info: &CellInfo) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        ("LCX_EXPERIMENT".to_string(), plan.name.clone()),
        ("LCX_ARM".to_string(), info.arm.clone()),
        ("LCX_REPEAT".to_string(), info.repeat.to_string()),
        ("LCX_ITERATIONS".to_string(), plan.iterations.to_string()),
        ("LCX_RUN_ID".to_string(), info.run_id.to_string()),
    ]);
    if let Some(revision) = plan
        .arms
        .iter()
        .find(|a| a.name == info.arm)
        .and_then(|a| a.revision.as_ref())
    {
        env.insert("LCX_REVISION".to_string(), revision.asked.clone());
        if let Some(sha) = &revision.sha {
            env.insert("LCX_REVISION_SHA".to_string(), sha.clone());
        }
    }
    env
}

/// The environment of a cell's process, on whichever executor.
pub(crate) fn process_env(
    plan: &Plan,
    arm: &Arm,
    info: &CellInfo,
    cell_dir: Option<&Path>,
) -> BTreeMap<String, String> {
    let mut env = cell_env(plan, info);
    if let Some(dir) = cell_dir {
        env.insert("LCX_RUNS_DIR".into(), dir.display().to_string());
    }
    env.extend(arm.env.clone());
    env
}

/// How a cell's process ended, whichever executor ran it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct End {
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    /// `exit code 1`, `killed by signal 9 (SIGKILL)`, `TIMEOUT: time limit`.
    pub how: String,
    pub success: bool,
    /// A scheduler's decision that outranks the exit code.
    pub status: Option<(RunStatus, String)>,
    /// User + system CPU seconds of the cell's process tree, where the
    /// executor can tell (a local child; not a Slurm job).
    pub cpu_seconds: Option<f64>,
}

/// Why a cell that exited 0 is not complete: it stored fewer lines than
/// the plan's `iterations` (any number of at least one for an arm with
/// `variable_iterations`).
pub(crate) fn short_count(plan: &Plan, arm: &Arm, stored: u64) -> Option<String> {
    let expected = u64::from(plan.iterations);
    let short = if arm.variable_iterations {
        (stored == 0).then(|| "exited 0 without emitting any metric line".to_string())
    } else {
        (stored < expected).then(|| {
            format!(
                "exited 0 after emitting {stored} of {}",
                crate::text::counted(expected, "iteration")
            )
        })
    }?;
    // A command that printed nothing at all most likely expected to be
    // timed, as hyperfine would (`command = "true"`).
    let silent_command = stored == 0 && matches!(arm.program, Program::External(_));
    Some(if silent_command {
        format!(
            "{short}: a command arm prints one JSON object per iteration on stdout \
             ({{\"iteration\": 1, \"my/seconds\": 0.5}}); to have lcx time each run of the \
             command itself, as hyperfine does, set `timing = \"process\"`"
        )
    } else {
        short
    })
}

/// The outcome of a cell whose process never started (the executor
/// refused it: no such program, `sbatch` failed).
pub(crate) fn unstarted(error: String, wall_seconds: f64) -> RunOutcome {
    RunOutcome {
        status: RunStatus::Failed,
        exit_code: None,
        signal: None,
        error: Some(error),
        stderr_tail: None,
        wall_seconds,
        db_wait_seconds: None,
        problems: LineProblems::default(),
    }
}

/// What the cell loop saw of a cell by the time it ended.
#[derive(Debug)]
pub(crate) struct Ending {
    /// How its process ended; `Err` when that was never seen.
    pub end: Result<End, String>,
    /// Metric lines stored for the current attempt.
    pub stored: u64,
    /// Lines dropped because they repeated a recorded iteration.
    pub duplicates: u64,
    pub problems: LineProblems,
    /// The runner was asked to stop while the cell ran.
    pub stopped: bool,
    /// The last non-empty line of its stderr.
    pub last_line: Option<String>,
    pub wall_seconds: f64,
    /// The runner stopped it at its `timeout` (this long).
    pub timed_out: Option<std::time::Duration>,
}

/// How a cell's end becomes its outcome. It completed only when its
/// process succeeded and stored the lines the plan asks for; otherwise a
/// stop outranks a scheduler's decision, which outranks the exit code.
pub(crate) fn outcome(plan: &Plan, arm: &Arm, ending: Ending) -> RunOutcome {
    let Ending {
        end,
        stored,
        duplicates,
        problems,
        stopped,
        last_line,
        wall_seconds,
        timed_out,
    } = ending;
    let mut outcome = match end {
        // An end never seen fails as an unstarted cell does, keeping the
        // line problems met before it was lost.
        Err(error) => RunOutcome {
            problems,
            ..unstarted(error, wall_seconds)
        },
        Ok(End {
            exit_code,
            signal,
            how,
            success,
            status: decided,
            cpu_seconds: _,
        }) => {
            let short = short_count(plan, arm, stored);
            let (status, error) = if success && short.is_none() {
                (RunStatus::Completed, None)
            } else if let Some(limit) = timed_out {
                let limit = crate::text::duration_words(limit);
                (
                    RunStatus::Failed,
                    Some(format!("timed out after {limit} ({how})")),
                )
            } else if stopped {
                // The runner stopped it: whatever the child made of SIGTERM,
                // the cell did not run to its end.
                (RunStatus::Interrupted, Some(format!("interrupted ({how})")))
            } else if let Some((status, why)) = decided {
                // The scheduler's word (cancelled, time limit, node failure).
                (status, Some(format!("{why} ({how})")))
            } else if success {
                (RunStatus::Failed, short)
            } else {
                let error = match &last_line {
                    Some(line) => format!("{how}: {line}"),
                    None => how,
                };
                (RunStatus::Failed, Some(error))
            };
            RunOutcome {
                status,
                exit_code,
                signal,
                error,
                stderr_tail: None,
                wall_seconds,
                db_wait_seconds: None,
                problems,
            }
        }
    };
    if duplicates > 0 && outcome.error.is_none() {
        outcome.error = Some(format!(
            "{duplicates} line(s) repeated an iteration and were ignored"
        ));
    }
    outcome
}

/// The counts behind a [`Summary`], from every cell of the experiment
/// (including those an earlier invocation ran).
pub(crate) fn count(runs: &[Run], status: RunStatus) -> usize {
    runs.iter().filter(|r| r.status == status).count()
}

/// A run's summary: its experiment's status comes from all its cells.
pub(crate) fn summary(experiment_id: i64, runs: &[Run], stopped: bool, wall: Duration) -> Summary {
    let count = |s| count(runs, s);
    let mut summary = Summary {
        experiment_id,
        status: ExperimentStatus::Completed,
        completed: count(RunStatus::Completed),
        failed: count(RunStatus::Failed),
        skipped: count(RunStatus::Skipped),
        interrupted: count(RunStatus::Interrupted)
            + count(RunStatus::Running)
            + count(RunStatus::Abandoned),
        pending: count(RunStatus::Pending),
        wall_seconds: wall.as_secs_f64(),
    };
    summary.status = if stopped {
        ExperimentStatus::Interrupted
    } else if runs.is_empty()
        || summary.failed > 0
        || summary.pending > 0
        || summary.interrupted > 0
    {
        // No cell is nothing done, never a completed experiment.
        ExperimentStatus::Failed
    } else {
        ExperimentStatus::Completed
    };
    summary
}

/// A child that exited with `code`, as the tests of the cell loop and of
/// ingestion feed it.
#[cfg(test)]
impl End {
    pub(crate) fn exited(code: i64) -> End {
        End {
            exit_code: Some(code),
            signal: None,
            how: format!("exit code {code}"),
            success: code == 0,
            status: None,
            cpu_seconds: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::run::testkit;

    fn plan() -> Plan {
        testkit::plan(
            "iterations = 3\n[[arms]]\nname = \"a\"\ncommand = \"true\"\nenv = { LCX_ARM = \"mine\", X = \"1\" }\n\
             [[arms]]\nname = \"v\"\ncommand = \"true\"\nvariable_iterations = true",
        )
    }

    fn ending(end: Result<End, String>, stored: u64) -> Ending {
        Ending {
            end,
            stored,
            duplicates: 0,
            problems: LineProblems::default(),
            stopped: false,
            last_line: Some("boom".into()),
            wall_seconds: 1.5,
            timed_out: None,
        }
    }

    fn judged(arm: usize, ending: Ending) -> (RunStatus, Option<String>) {
        let plan = plan();
        let o = outcome(&plan, &plan.arms[arm], ending);
        (o.status, o.error)
    }

    #[test]
    fn a_cell_completes_only_with_success_and_every_iteration() {
        assert_eq!(
            judged(0, ending(Ok(End::exited(0)), 3)),
            (RunStatus::Completed, None)
        );
        assert_eq!(
            judged(0, ending(Ok(End::exited(0)), 2)),
            (
                RunStatus::Failed,
                Some("exited 0 after emitting 2 of 3 iterations".into())
            )
        );
        // An arm with variable iterations needs one line, not three.
        assert_eq!(
            judged(1, ending(Ok(End::exited(0)), 1)).0,
            RunStatus::Completed
        );
        // A command that printed nothing hears what a command arm prints
        // and that lcx can time it instead.
        let silent = judged(1, ending(Ok(End::exited(0)), 0)).1.unwrap();
        assert!(
            silent.starts_with(
                "exited 0 without emitting any metric line: a command arm prints \
                 one JSON object per iteration on stdout"
            ) && silent.ends_with("set `timing = \"process\"`"),
            "{silent}"
        );
        let silent = judged(0, ending(Ok(End::exited(0)), 0)).1.unwrap();
        assert!(
            silent.starts_with("exited 0 after emitting 0 of 3 iterations: a command arm"),
            "{silent}"
        );
    }

    #[test]
    fn a_stop_outranks_the_scheduler_which_outranks_the_exit_code() {
        let mut decided = End::exited(1);
        decided.status = Some((RunStatus::Interrupted, "TIMEOUT: time limit".into()));
        let stopped = Ending {
            stopped: true,
            ..ending(Ok(decided.clone()), 1)
        };
        assert_eq!(
            judged(0, stopped),
            (
                RunStatus::Interrupted,
                Some("interrupted (exit code 1)".into())
            )
        );
        assert_eq!(
            judged(0, ending(Ok(decided), 1)),
            (
                RunStatus::Interrupted,
                Some("TIMEOUT: time limit (exit code 1)".into())
            )
        );
        assert_eq!(
            judged(0, ending(Ok(End::exited(2)), 3)),
            (RunStatus::Failed, Some("exit code 2: boom".into()))
        );
        assert_eq!(
            judged(0, ending(Err("the child's exit was not seen".into()), 3)),
            (
                RunStatus::Failed,
                Some("the child's exit was not seen".into())
            )
        );
    }

    #[test]
    fn dropped_duplicates_are_named_on_an_otherwise_clean_cell() {
        let clean = Ending {
            duplicates: 2,
            ..ending(Ok(End::exited(0)), 3)
        };
        assert_eq!(
            judged(0, clean),
            (
                RunStatus::Completed,
                Some("2 line(s) repeated an iteration and were ignored".into())
            )
        );
        let failed = Ending {
            duplicates: 2,
            ..ending(Ok(End::exited(2)), 3)
        };
        assert_eq!(judged(0, failed).1.as_deref(), Some("exit code 2: boom"));
    }

    #[test]
    fn a_cell_sees_who_it_is_and_its_arm_env_comes_last() {
        let plan = plan();
        let info = CellInfo {
            run_id: 9,
            arm: "a".into(),
            label: "a".into(),
            repeat: 2,
            repeats: 1,
            position: 1,
            cells: 1,
            iterations: 3,
            variable_iterations: false,
            attempt: 1,
        };
        let env = process_env(&plan, &plan.arms[0], &info, Some(Path::new("runs/x")));
        let get = |k: &str| env.get(k).map(String::as_str);
        assert_eq!(get("LCX_EXPERIMENT"), Some("t"));
        assert_eq!(get("LCX_REPEAT"), Some("2"));
        assert_eq!(get("LCX_ITERATIONS"), Some("3"));
        assert_eq!(get("LCX_RUN_ID"), Some("9"));
        assert_eq!(get("LCX_RUNS_DIR"), Some("runs/x"));
        // The arm's own `env` is what the user wrote last: it wins.
        assert_eq!(get("LCX_ARM"), Some("mine"));
        assert_eq!(get("X"), Some("1"));
        assert_eq!(get("LCX_REVISION"), None);
    }

    fn run_with(status: RunStatus) -> Run {
        let plan = plan();
        let (store, id) = testkit::recorded(&plan);
        let mut run = store.runs(id).unwrap().remove(0);
        run.status = status;
        run
    }

    #[test]
    fn an_experiment_completes_only_when_every_cell_did() {
        let wall = Duration::from_secs(1);
        let done = [run_with(RunStatus::Completed), run_with(RunStatus::Skipped)];
        assert_eq!(
            summary(1, &done, false, wall).status,
            ExperimentStatus::Completed
        );
        for other in [
            RunStatus::Failed,
            RunStatus::Pending,
            RunStatus::Running,
            RunStatus::Interrupted,
        ] {
            let runs = [run_with(RunStatus::Completed), run_with(other)];
            let s = summary(1, &runs, false, wall);
            assert_eq!(s.status, ExperimentStatus::Failed, "{other:?}");
            assert_eq!(s.completed, 1);
        }
        assert_eq!(
            summary(1, &done, true, wall).status,
            ExperimentStatus::Interrupted
        );
    }
}
