//! Runs an experiment's cells as child processes and records them.
//!
//! The runner owns no terminal: it reports what happens as [`Event`]s to a
//! [`Reporter`] (progress bar, plain log, or a test's recorder), in the
//! manner of cargo-nextest. Every JSON line a child prints is committed to
//! the store as soon as it has arrived: a line gets its own transaction
//! unless further complete lines were already waiting in the pipe, in which
//! case that burst shares one (up to [`MAX_BATCH`] lines). A trainer that
//! prints once per iteration thus gets a transaction per line, while a child
//! printing a million lines does not pay a million commits. A crash of the
//! runner loses at most lines that had arrived but were not yet committed,
//! and `--resume` picks up whatever cells are not completed.
//!
//! Memory stays flat however long an experiment runs: lines are streamed,
//! the child's stderr and non-JSON stdout keep bounded tails, and events are
//! handed to the reporter one by one.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::child::{self, Line, Tail};
use super::plan::{Plan, Program, Requirement};
use crate::store::{
    ExperimentStatus, Fingerprint, LineProblems, MetricLine, NewExperiment, NewRun, Run,
    RunOutcome, RunStatus, RunnerIdentity, Store, StoreError,
};

/// Failures that stop the runner itself (a failing cell is not one).
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("experiment {experiment_id}: its recorded runs do not match its plan: {message}")]
    Mismatch { experiment_id: i64, message: String },
    /// The executor could not do its part (no working directory, an
    /// unreachable Slurm controller while detaching).
    #[error("{0}")]
    Executor(String),
    #[error("experiment {id} is already {status}; nothing to resume")]
    NothingToResume { id: i64, status: String },
    #[error("the stored plan of experiment {id} cannot be read")]
    BadPlan {
        id: i64,
        #[source]
        source: serde_json::Error,
    },
}

/// How long a child has after SIGTERM before its group gets SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// A stop request shared between a signal handler and the runner. The
/// child of the running cell is in its own process group (so a terminal's
/// Ctrl-C reaches only the runner); stopping signals that whole group.
#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    child_group: AtomicI32,
    /// The Slurm job of the running cell: stopping cancels it.
    job: std::sync::Mutex<Option<String>>,
}

impl StopSignal {
    pub fn new() -> Arc<StopSignal> {
        Arc::new(StopSignal::default())
    }

    /// Asks the runner to stop: no new cell starts, the running child's
    /// process group gets SIGTERM, and SIGKILL after a grace period.
    pub fn stop(self: &Arc<Self>) {
        self.stopped.store(true, Ordering::SeqCst);
        self.cancel_job();
        let group = self.child_group.load(Ordering::SeqCst);
        if group > 0 {
            signal_group(group, libc::SIGTERM);
            let this = Arc::clone(self);
            std::thread::spawn(move || {
                std::thread::sleep(KILL_GRACE);
                if this.child_group.load(Ordering::SeqCst) == group {
                    signal_group(group, libc::SIGKILL);
                }
            });
        }
    }

    /// Kills the running child's group at once (a second Ctrl-C).
    pub fn force(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.cancel_job();
        let group = self.child_group.load(Ordering::SeqCst);
        if group > 0 {
            signal_group(group, libc::SIGKILL);
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    fn set_child(self: &Arc<Self>, group: i32) {
        self.child_group.store(group, Ordering::SeqCst);
        // A stop that raced with the spawn still reaches the new child.
        if self.is_stopped() {
            self.stop();
        }
    }

    fn clear_child(&self) {
        self.child_group.store(0, Ordering::SeqCst);
    }

    fn cancel_job(&self) {
        let job = self.job.lock().ok().and_then(|j| j.clone());
        if let Some(job) = job {
            super::slurm::cancel(&job);
        }
    }

    fn set_job(self: &Arc<Self>, job: &str) {
        if let Ok(mut j) = self.job.lock() {
            *j = Some(job.to_string());
        }
        // A stop that raced with the submission still cancels the job.
        if self.is_stopped() {
            self.cancel_job();
        }
    }

    fn clear_job(&self) {
        if let Ok(mut j) = self.job.lock() {
            *j = None;
        }
    }
}

fn signal_group(group: i32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid
    // addresses the process group we created for the child.
    unsafe {
        libc::kill(-group, signal);
    }
}

/// Settings of one runner invocation.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Stop after the first failed cell.
    pub fail_fast: bool,
    /// The binary that `Program::Lcx` cells run (normally current_exe()).
    pub lcx_exe: PathBuf,
    pub stop: Arc<StopSignal>,
    /// Whether CUDA is usable; `None` asks `lcx_exe version --json` the
    /// first time an arm requires it (this process never loads libtorch).
    pub cuda_available: Option<bool>,
    /// Resume even when the experiment's last runner was on another host
    /// and may still be running there.
    pub takeover: bool,
    /// For adaptive repeats: after a round, says why the experiment has
    /// enough data (every judged interval within the precision), or `None`
    /// to go on. Supplied by the caller, which knows the report's statistics.
    pub precise_enough: Option<PrecisionCheck>,
    /// Keep each training cell's run directory (`runs/tmp/lcx-cell-…`)
    /// after it completed; a cell that did not complete always keeps it.
    pub keep_runs: bool,
    /// Slurm: submit every cell (chained so they run one at a time) and
    /// return without following them (`lcx run --detach`).
    pub detach: bool,
    /// Slurm: follow the jobs an earlier coordinator submitted, reading
    /// their files from the start, instead of submitting them again
    /// (`lcx run --attach`).
    pub attach: bool,
}

/// The function behind a [`PrecisionCheck`]: (store, experiment id,
/// precision) → why the data suffice, or `None`.
pub type PrecisionFn = dyn Fn(&Store, i64, f64) -> Result<Option<String>, StoreError> + Send + Sync;

/// See [`RunnerOptions::precise_enough`].
#[derive(Clone)]
pub struct PrecisionCheck(pub Arc<PrecisionFn>);

impl std::fmt::Debug for PrecisionCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrecisionCheck")
    }
}

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
    pub attempt: i64,
}

impl CellInfo {
    /// Cell `run` of `arm`, the `position`-th of the `cells` this
    /// invocation runs, at its recorded attempt.
    fn of(plan: &Plan, arm: &super::plan::Arm, run: &Run, position: usize, cells: usize) -> Self {
        CellInfo {
            run_id: run.id,
            arm: arm.name.clone(),
            label: arm.label.clone(),
            repeat: run.repeat.max(1) as u32,
            repeats: plan.repeats,
            position,
            cells,
            iterations: plan.iterations,
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

/// Records a new experiment and its cells (all `pending`); returns its id.
pub fn create_experiment(
    store: &mut Store,
    plan: &Plan,
    file_text: &str,
    command_line: Vec<String>,
    git: (Option<String>, Option<bool>),
    fingerprint: Fingerprint,
) -> Result<i64, RunnerError> {
    let id = store.insert_experiment(&NewExperiment {
        name: plan.name.clone(),
        description: plan.description.clone(),
        workload: plan.workload.as_str().to_string(),
        // From the repository's root where it has one, so that the
        // report's reproduce line is not a path of this machine.
        file_path: super::fingerprint::path_in_repo(&plan.file)
            .unwrap_or_else(|| plan.file.display().to_string()),
        file_text: file_text.to_string(),
        file_sha256: super::plan::sha256_hex(file_text.as_bytes()),
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
    })?;
    let runs: Vec<NewRun> = plan
        .cells()
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
        .collect();
    store.insert_runs(id, &runs)?;
    Ok(id)
}

/// Reads back the plan an experiment was started with (for `--resume`).
pub fn stored_plan(store: &Store, experiment_id: i64) -> Result<Plan, RunnerError> {
    let experiment = store
        .experiment(experiment_id)?
        .ok_or_else(|| StoreError::ExperimentNotFound(experiment_id.to_string()))?;
    serde_json::from_str(&experiment.plan_json).map_err(|source| RunnerError::BadPlan {
        id: experiment_id,
        source,
    })
}

/// Runs every cell of the experiment that is not completed yet, in plan
/// order. A new experiment runs everything; a resumed one runs the
/// missing, failed and interrupted cells (each from iteration 1, its
/// earlier rows kept but superseded).
pub fn run(
    store: &mut Store,
    plan: &Plan,
    experiment_id: i64,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
) -> Result<Summary, RunnerError> {
    let started = Instant::now();
    // Claim first: of two runners resuming one experiment, the second stops
    // here, before it has looked at which cells are left.
    store.claim_experiment(experiment_id, &RunnerIdentity::current(), options.takeover)?;
    let runs = store.runs(experiment_id)?;
    let mut todo: Vec<(usize, Run)> = Vec::new();
    let mut resumed = false;
    for run in &runs {
        let arm = plan
            .arms
            .iter()
            .position(|a| a.name == run.arm)
            .ok_or_else(|| RunnerError::Mismatch {
                experiment_id,
                message: format!("run {} has arm `{}`, which the plan lacks", run.id, run.arm),
            })?;
        if run.status != RunStatus::Pending {
            resumed = true;
        }
        if run.status != RunStatus::Completed {
            todo.push((arm, run.clone()));
        }
    }
    todo.sort_by_key(|(arm, run)| plan.cell_rank(*arm, run.repeat.max(1) as u32));
    store.set_experiment_status(experiment_id, ExperimentStatus::Running)?;
    reporter.report(&Event::Started {
        experiment_id,
        name: &plan.name,
        cells: todo.len(),
        total_cells: runs.len(),
        resumed,
    });

    let mut placement = Pinning::new(plan, &runs);
    if options.detach {
        return detach(
            store,
            plan,
            experiment_id,
            todo,
            options,
            reporter,
            placement,
        );
    }
    // Several cells in flight: submit them all, then follow each in plan
    // order; the jobs' own records give each cell's time and node.
    let parallel = matches!(&plan.executor, super::plan::Executor::Slurm(o) if o.max_parallel > 1);
    // Follow jobs already submitted (by `--detach`, an earlier
    // coordinator, or just now) instead of submitting them.
    let follow = options.attach || parallel;
    let todo = if parallel && !options.stop.is_stopped() {
        // Cells an earlier coordinator left jobs for are followed, the rest
        // submitted.
        let (adopt, submit): (Vec<_>, Vec<_>) = todo
            .into_iter()
            .partition(|(_, run)| adoptable(options.attach, run).is_some());
        submit_all(
            store,
            plan,
            experiment_id,
            submit,
            options,
            reporter,
            placement,
        )?;
        placement = Pinning::new(plan, &store.runs(experiment_id)?);
        let runs = store.runs(experiment_id)?;
        let mut todo: Vec<(usize, Run)> = adopt;
        for run in runs {
            if run.status == RunStatus::Running && !todo.iter().any(|(_, r)| r.id == run.id) {
                if let Some(arm) = plan.arms.iter().position(|a| a.name == run.arm) {
                    todo.push((arm, run));
                }
            }
        }
        todo.sort_by_key(|(arm, run)| plan.cell_rank(*arm, run.repeat.max(1) as u32));
        todo
    } else {
        todo
    };
    let slurm = matches!(plan.executor, super::plan::Executor::Slurm(_));
    // Under `--attach`, the last job of the chain an earlier coordinator
    // left: a cell submitted now waits for it, so that cells still run one
    // at a time.
    let chain_tail: Option<String> = todo
        .iter()
        .rev()
        .find_map(|(_, run)| adoptable(follow, run).map(|(job, _)| job));
    // A local cell runs on this machine; a Slurm job records its node.
    let local_node = (!slurm).then(super::fingerprint::node);
    let mut cuda: Option<Option<bool>> = options.cuda_available.map(Some);
    let mut failed_fast = false;
    let cells = todo.len();
    let rounds: Vec<i64> = todo.iter().map(|(_, r)| r.repeat).collect();
    let mut enough: Option<String> = None;
    let mut cells_left = todo.into_iter().enumerate();
    for (position, (arm_index, run)) in cells_left.by_ref() {
        if options.stop.is_stopped() || failed_fast {
            // This cell is not run: an adopted job of it is cancelled below.
            if let Some(job) = adoptable(follow, &run) {
                end_adopted(store, &run, &job.0)?;
            }
            break;
        }
        let arm = &plan.arms[arm_index];
        let mut info = CellInfo::of(plan, arm, &run, position + 1, cells);
        if let Some(reason) = &enough {
            let reason = format!("not needed: {reason}");
            store.skip_run(run.id, &reason)?;
            reporter.report(&Event::CellSkipped {
                cell: &info,
                reason: &reason,
            });
            continue;
        }
        // The last cell of a round: adaptive repeats may stop after it.
        let round_ends = rounds.get(position + 1) != Some(&run.repeat);
        // On Slurm the job asks for a GPU (`gres`); the coordinator's own
        // devices say nothing about the nodes'.
        if arm.requires == Some(Requirement::Cuda) && !slurm {
            let available = *cuda.get_or_insert_with(|| {
                super::fingerprint::torch_facts(&options.lcx_exe).map(|t| t.cuda_available)
            });
            if available != Some(true) {
                let reason = match available {
                    Some(_) => "requires CUDA, and no CUDA device is available",
                    None => "requires CUDA, and `lcx version --json` did not say whether a CUDA device is available",
                };
                store.skip_run(run.id, reason)?;
                reporter.report(&Event::CellSkipped {
                    cell: &info,
                    reason,
                });
                continue;
            }
        }
        let adopt = adoptable(follow, &run).map(|(job, dir)| Adopt {
            job,
            dir,
            stored: run.iterations_done.max(0) as u64,
            run: run.slurm_run.clone(),
        });
        if adopt.is_none() {
            // A job an earlier coordinator left running (it was killed, its
            // login node went away) must not run beside the new attempt.
            if let (Some(job), true) = (&run.slurm_job, slurm) {
                super::slurm::cancel(job);
            }
            info.attempt = store.start_run(run.id)?;
        }
        let after = match (&adopt, &chain_tail) {
            (None, Some(tail)) => match super::slurm::job_state(tail) {
                Ok(Some(state)) if !state.is_final() => Some(tail.clone()),
                _ => None,
            },
            _ => None,
        };
        let place = Place {
            nodelist: placement.node_for(run.repeat),
            adopt,
            after,
            node: local_node.as_ref(),
        };
        let outcome = run_cell(store, plan, arm_index, &info, options, reporter, place)?;
        if let Some(host) = store.run(run.id)?.and_then(|r| r.host) {
            placement.ran(run.repeat, host);
        }
        if outcome.status == RunStatus::Failed && options.fail_fast {
            failed_fast = true;
        }
        if let (Some(a), Some(check), true) = (&plan.adaptive, &options.precise_enough, round_ends)
        {
            if run.repeat >= i64::from(a.min) && run.repeat < i64::from(a.max) {
                if let Some(why) = (check.0)(store, experiment_id, a.precision)? {
                    enough = Some(format!("stopped after round {}: {why}", run.repeat));
                }
            }
        }
    }
    // Jobs submitted by `--detach` for cells this invocation stopped
    // before: they must not run on unobserved.
    for (_, (_, run)) in cells_left {
        if let Some((job, _)) = adoptable(follow, &run) {
            end_adopted(store, &run, &job)?;
        }
    }

    // The experiment's status comes from all its cells, including those an
    // earlier invocation ran.
    let runs = store.runs(experiment_id)?;
    let count = |s: RunStatus| runs.iter().filter(|r| r.status == s).count();
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
        wall_seconds: started.elapsed().as_secs_f64(),
    };
    summary.status = if options.stop.is_stopped() {
        ExperimentStatus::Interrupted
    } else if summary.failed > 0 || summary.pending > 0 || summary.interrupted > 0 {
        ExperimentStatus::Failed
    } else {
        ExperimentStatus::Completed
    };
    store.set_experiment_status(experiment_id, summary.status)?;
    reporter.report(&Event::Finished {
        experiment_id,
        summary: &summary,
    });
    Ok(summary)
}

/// Most lines committed in one transaction.
const MAX_BATCH: usize = 4096;

/// How long the runner keeps reading a cell's stdout after the child has
/// exited and its process group was killed: a process that left the group
/// (`setsid`) may still hold the pipe, and the cell must not wait for it.
const STDOUT_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
struct LineCounts {
    /// JSON object lines seen (numbers lines without `iteration`).
    json_lines: u64,
    /// Lines stored.
    stored: u64,
    /// Lines refused because their iteration was already recorded.
    duplicates: u64,
    problems: LineProblems,
}

/// Commits the pending lines in one transaction. A duplicate iteration
/// aborts that transaction, so the batch is then retried line by line and
/// only the offending lines are dropped (with a warning).
fn flush(
    store: &mut Store,
    info: &CellInfo,
    batch: &mut Vec<MetricLine>,
    counts: &mut LineCounts,
    reporter: &mut dyn Reporter,
    started: Instant,
) -> Result<(), StoreError> {
    if batch.is_empty() {
        return Ok(());
    }
    match store.insert_lines(info.run_id, info.attempt, batch) {
        Ok(()) => counts.stored += batch.len() as u64,
        Err(StoreError::DuplicateIteration { .. }) => {
            for line in batch.iter() {
                match store.insert_lines(info.run_id, info.attempt, std::slice::from_ref(line)) {
                    Ok(()) => counts.stored += 1,
                    Err(StoreError::DuplicateIteration { name, .. }) => {
                        counts.duplicates += 1;
                        if counts.duplicates <= 3 {
                            reporter.report(&Event::Warning {
                                cell: info,
                                message: format!(
                                    "iteration {} of `{name}` was already recorded; line ignored",
                                    line.iteration
                                ),
                            });
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Err(e) => return Err(e),
    }
    if let Some(last) = batch.last() {
        reporter.report(&Event::Iteration {
            cell: info,
            iteration: last.iteration,
            lines: counts.stored,
            elapsed: started.elapsed(),
        });
    }
    batch.clear();
    Ok(())
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

/// What the reader and waiter threads tell the cell loop.
enum Msg {
    Line(Vec<u8>),
    Overlong {
        head: Vec<u8>,
        bytes: usize,
    },
    /// The child's stdout reached end of file (or failed).
    Eof,
    /// The child exited (reaped by the waiter thread), or its job ended.
    Ended(Result<End, String>),
    /// Slurm placed the cell's job on this node.
    Placed(String),
    /// Slurm requeued the job and it started again.
    Restarted,
    /// A run of the job began (its `started` record).
    RunStarted(String),
}

/// How a cell's process ended, whichever executor ran it.
#[derive(Debug, Clone, PartialEq)]
struct End {
    exit_code: Option<i64>,
    signal: Option<i64>,
    /// `exit code 1`, `killed by signal 9 (SIGKILL)`, `TIMEOUT: time limit`.
    how: String,
    success: bool,
    /// A scheduler's decision that outranks the exit code.
    status: Option<(RunStatus, String)>,
}

impl End {
    fn of_exit(status: &std::process::ExitStatus) -> End {
        let (exit_code, signal, how) = child::describe_exit(status);
        End {
            exit_code,
            signal,
            how,
            success: status.success(),
            status: None,
        }
    }

    fn of_job(end: super::slurm::JobEnd) -> End {
        End {
            exit_code: end.exit_code,
            signal: end.signal,
            how: end.how,
            success: end.success,
            status: end.status,
        }
    }
}

/// Lines in flight between the reader thread and the cell loop: bounded, so
/// a child that prints faster than the store writes is slowed down by the
/// pipe instead of growing the runner's memory.
const CHANNEL_LINES: usize = 8192;

/// Turns one stdout line into a stored line, a log line or a counted
/// problem, warning once per cell for each kind of problem.
fn take_line(
    bytes: &[u8],
    info: &CellInfo,
    batch: &mut Vec<MetricLine>,
    counts: &mut LineCounts,
    stdout_log: &mut Tail,
    reporter: &mut dyn Reporter,
) {
    let text = String::from_utf8_lossy(bytes);
    match child::parse_line(&text) {
        Line::Log(line) => {
            if !line.trim().is_empty() {
                stdout_log.push(&line);
            }
        }
        Line::Malformed { line, reason } => {
            counts.problems.malformed += 1;
            stdout_log.push(&line);
            if counts.problems.malformed == 1 {
                reporter.report(&Event::Warning {
                    cell: info,
                    message: format!(
                        "a metric line was not stored ({reason}); such lines are counted \
                         on the cell and kept in its log"
                    ),
                });
            }
        }
        Line::Metrics {
            iteration,
            numbers,
            texts,
            nonfinite,
        } => {
            counts.json_lines += 1;
            let iteration = iteration.unwrap_or(counts.json_lines as i64);
            if !nonfinite.is_empty() {
                if counts.problems.nonfinite == 0 {
                    let (name, value) = &nonfinite[0];
                    reporter.report(&Event::Warning {
                        cell: info,
                        message: format!(
                            "`{name}` is {} at iteration {iteration}; non-finite values are \
                             stored apart and shown in the report",
                            value.as_str()
                        ),
                    });
                }
                counts.problems.nonfinite += nonfinite.len() as i64;
            }
            batch.push(MetricLine {
                iteration,
                numbers,
                texts,
                nonfinite,
            });
        }
    }
}

/// Which node the next Slurm cell is pinned to (`[executor] placement`).
struct Pinning {
    placement: Option<super::plan::Placement>,
    /// same-node: the node of the experiment's first Slurm cell.
    node: Option<String>,
    /// spread: the node of the current round (repeat).
    round: Option<(i64, String)>,
}

impl Pinning {
    fn new(plan: &Plan, runs: &[Run]) -> Pinning {
        let placement = match &plan.executor {
            super::plan::Executor::Slurm(o) => Some(o.placement),
            super::plan::Executor::Local => None,
        };
        // A resume keeps to the node the earlier cells ran on.
        let node = runs
            .iter()
            .filter(|r| r.slurm_job.is_some())
            .find_map(|r| r.host.clone());
        Pinning {
            placement,
            node,
            round: None,
        }
    }

    fn node_for(&self, repeat: i64) -> Option<String> {
        use super::plan::Placement;
        match self.placement? {
            Placement::SameNode => self.node.clone(),
            Placement::Spread => self
                .round
                .as_ref()
                .filter(|(r, _)| *r == repeat)
                .map(|(_, n)| n.clone()),
            Placement::Any => None,
        }
    }

    /// Whether the cell about to be submitted for `repeat` decides the
    /// node later cells are pinned to (so a detaching coordinator must
    /// wait until Slurm has placed it).
    fn pins_before(&self, repeat: i64) -> bool {
        use super::plan::Placement;
        match self.placement {
            Some(Placement::SameNode) => self.node.is_none(),
            Some(Placement::Spread) => self.round.as_ref().is_none_or(|(r, _)| *r != repeat),
            Some(Placement::Any) | None => false,
        }
    }

    fn ran(&mut self, repeat: i64, host: String) {
        if self.placement.is_none() {
            return;
        }
        if self.node.is_none() {
            self.node = Some(host.clone());
        }
        if self.round.as_ref().is_none_or(|(r, _)| *r != repeat) {
            self.round = Some((repeat, host));
        }
    }
}

/// A job an earlier coordinator submitted, followed instead of submitted
/// again (`--attach`).
struct Adopt {
    job: String,
    dir: PathBuf,
    /// Metric lines of the current attempt already stored: the first
    /// lines of the job's stdout, which an earlier follower ingested.
    stored: u64,
    /// The job run those lines came from (its `started` record).
    run: Option<String>,
}

/// Where and how a cell runs.
struct Place<'a> {
    /// Slurm placement: pin the job to this node.
    nodelist: Option<String>,
    adopt: Option<Adopt>,
    /// Slurm: a job the new one must wait for (`--attach`'s chain).
    after: Option<String>,
    /// A local cell's hardware (this machine).
    node: Option<&'a crate::store::NodeInfo>,
}

/// The job and folder to follow for a cell under `--attach` (a cell still
/// `running` whose job an earlier coordinator submitted) or after
/// [`submit_all`] submitted it ahead (`max_parallel` > 1).
fn adoptable(follow: bool, run: &Run) -> Option<(String, PathBuf)> {
    if !follow || run.status != RunStatus::Running {
        return None;
    }
    Some((
        run.slurm_job.clone()?,
        PathBuf::from(run.slurm_dir.as_ref()?),
    ))
}

/// An adopted job this invocation stops before following: cancelled and
/// its cell recorded interrupted while it is still queued or running. A
/// job that has already ended is left as it is (its cell `running`, its
/// files in place) for a later `lcx run --attach` to ingest.
fn end_adopted(store: &mut Store, run: &Run, job: &str) -> Result<(), RunnerError> {
    let ended = match super::slurm::job_state(job) {
        Ok(Some(state)) => state.is_final(),
        // Forgotten by Slurm: ended, if its script recorded an end.
        Ok(None) => run
            .slurm_dir
            .as_deref()
            .is_some_and(|d| std::path::Path::new(d).join("exit").exists()),
        Err(_) => false,
    };
    if ended {
        return Ok(());
    }
    super::slurm::cancel(job);
    store.finish_run(
        run.id,
        &RunOutcome {
            status: RunStatus::Interrupted,
            exit_code: None,
            signal: None,
            error: Some(format!(
                "interrupted: job {job} cancelled before it was followed"
            )),
            stderr_tail: None,
            wall_seconds: 0.0,
            problems: LineProblems::default(),
        },
    )?;
    Ok(())
}

/// `lcx run --detach`: submits every cell ([`submit_all`]) and leaves the
/// experiment to its jobs.
fn detach(
    store: &mut Store,
    plan: &Plan,
    experiment_id: i64,
    todo: Vec<(usize, Run)>,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
    placement: Pinning,
) -> Result<Summary, RunnerError> {
    let started = Instant::now();
    submit_all(
        store,
        plan,
        experiment_id,
        todo,
        options,
        reporter,
        placement,
    )?;
    let runs = store.runs(experiment_id)?;
    let count = |s: RunStatus| runs.iter().filter(|r| r.status == s).count();
    let status = if options.stop.is_stopped() {
        ExperimentStatus::Interrupted
    } else if count(RunStatus::Running) == 0 {
        // Nothing was submitted (every sbatch refused): nothing to attach to.
        ExperimentStatus::Failed
    } else {
        ExperimentStatus::Detached
    };
    match status {
        ExperimentStatus::Detached => store.detach_experiment(experiment_id)?,
        other => store.set_experiment_status(experiment_id, other)?,
    }
    Ok(Summary {
        experiment_id,
        status,
        completed: count(RunStatus::Completed),
        failed: count(RunStatus::Failed),
        skipped: count(RunStatus::Skipped),
        interrupted: count(RunStatus::Interrupted),
        pending: count(RunStatus::Pending) + count(RunStatus::Running),
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// Submits every cell of `todo` as a Slurm job, in plan order, as
/// `max_parallel` chains: round r goes on chain r mod N, each job after
/// the one before it on its chain (`afterany`), so a round's arms run back
/// to back and at most N cells at once. With `same-node` placement it
/// waits until the first job is placed and pins the rest to its node.
/// Stopped part-way, it cancels what it submitted (cells interrupted).
fn submit_all(
    store: &mut Store,
    plan: &Plan,
    experiment_id: i64,
    todo: Vec<(usize, Run)>,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
    placement: Pinning,
) -> Result<(), RunnerError> {
    let super::plan::Executor::Slurm(slurm) = &plan.executor else {
        return Err(RunnerError::Executor(format!(
            "experiment {experiment_id}: only Slurm cells can be submitted ahead"
        )));
    };
    let mut submitted: Vec<(i64, String)> = Vec::new();
    let result = submit_each(
        store,
        plan,
        slurm,
        todo,
        options,
        reporter,
        placement,
        &mut submitted,
    );
    if result.is_err() || options.stop.is_stopped() {
        // Stopped or failed part-way: nothing it submitted is left to run
        // unobserved (best effort after an error: the store may be gone).
        for (run_id, job) in &submitted {
            match store.run(*run_id) {
                Ok(Some(run)) if result.is_ok() => end_adopted(store, &run, job)?,
                _ => super::slurm::cancel(job),
            }
        }
    }
    result
}

/// [`submit_all`]'s loop; every job it submits goes into `submitted`.
#[expect(
    clippy::too_many_arguments,
    reason = "submit_all's own state, split out so that submit_all can cancel what it submitted on any error"
)]
fn submit_each(
    store: &mut Store,
    plan: &Plan,
    slurm: &super::plan::SlurmOptions,
    todo: Vec<(usize, Run)>,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
    mut placement: Pinning,
    submitted: &mut Vec<(i64, String)>,
) -> Result<(), RunnerError> {
    let chains = slurm.max_parallel.max(1) as usize;
    let cells = todo.len();
    let mut last: Vec<Option<String>> = vec![None; chains];
    for (position, (arm_index, run)) in todo.into_iter().enumerate() {
        if options.stop.is_stopped() {
            break;
        }
        let arm = &plan.arms[arm_index];
        if let Some(job) = &run.slurm_job {
            super::slurm::cancel(job);
        }
        let info = CellInfo {
            attempt: store.start_run(run.id)?,
            ..CellInfo::of(plan, arm, &run, position + 1, cells)
        };
        let program = cell_program(arm, options);
        let dir = job_dir(&info)?;
        let cell_dir = train_dir(plan, arm, &info, Some(&dir));
        let cell = Cell {
            plan,
            arm,
            info: &info,
            options,
            program: &program,
            cell_dir: cell_dir.as_deref(),
        };
        let chain = (run.repeat.max(1) as usize - 1) % chains;
        let after = last[chain].clone();
        let nodelist = placement.node_for(run.repeat);
        match submit_job(&cell, slurm, &dir, nodelist, after.clone()) {
            Ok(job) => {
                store.set_run_placement(run.id, None, Some(&job))?;
                store.set_run_slurm_dir(run.id, &dir.display().to_string())?;
                reporter.report(&Event::Note {
                    cell: &info,
                    message: format!(
                        "submitted Slurm job {job}{} ({})",
                        after
                            .as_ref()
                            .map(|p| format!(" after {p}"))
                            .unwrap_or_default(),
                        dir.join("job.sh").display()
                    ),
                });
                submitted.push((run.id, job.clone()));
                last[chain] = Some(job.clone());
                if placement.pins_before(run.repeat) {
                    reporter.report(&Event::Note {
                        cell: &info,
                        message: format!(
                            "waiting for job {job} to be placed: the other cells are pinned \
                             to its node"
                        ),
                    });
                    let stop = Arc::clone(&options.stop);
                    if let Some(node) = super::slurm::wait_placed(&job, &|| stop.is_stopped())
                        .map_err(RunnerError::Executor)?
                    {
                        store.set_run_placement(run.id, Some(&node), None)?;
                        placement.ran(run.repeat, node);
                    }
                }
            }
            Err(error) => {
                let outcome = RunOutcome {
                    status: RunStatus::Failed,
                    exit_code: None,
                    signal: None,
                    error: Some(error),
                    stderr_tail: None,
                    wall_seconds: 0.0,
                    problems: LineProblems::default(),
                };
                store.finish_run(run.id, &outcome)?;
                reporter.report(&Event::CellFinished {
                    cell: &info,
                    outcome: &outcome,
                    lines: 0,
                });
            }
        }
    }
    Ok(())
}

/// The binary a cell runs: a revision's build, this lcx, or the arm's
/// own program.
fn cell_program(arm: &super::plan::Arm, options: &RunnerOptions) -> PathBuf {
    match (
        &arm.program,
        arm.revision.as_ref().and_then(|r| r.binary.clone()),
    ) {
        // An arm at a revision runs that revision's build.
        (Program::Lcx, Some(binary)) => binary,
        (Program::Lcx, None) => options.lcx_exe.clone(),
        (Program::External(p), _) => PathBuf::from(p),
    }
}

/// A training cell's run directory (config, log, checkpoints), which goes
/// once the cell has completed: inside its job's folder for a Slurm cell
/// (a later coordinator finds it there), else a folder of its own.
fn train_dir(
    plan: &Plan,
    arm: &super::plan::Arm,
    info: &CellInfo,
    job_dir: Option<&std::path::Path>,
) -> Option<PathBuf> {
    if arm.program != Program::Lcx || plan.workload != super::Workload::Train {
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

/// A new Slurm cell's folder on the shared filesystem:
/// `runs/slurm/run-<id>-attempt-<n>-pid<pid>/` under the working directory.
/// Run ids count per database: the coordinator's pid keeps the cells of
/// two databases run from one folder apart.
fn job_dir(info: &CellInfo) -> Result<PathBuf, RunnerError> {
    let cwd = std::env::current_dir()
        .map_err(|e| RunnerError::Executor(format!("no working directory: {e}")))?;
    Ok(cwd.join("runs").join("slurm").join(format!(
        "run-{}-attempt-{}-pid{}",
        info.run_id,
        info.attempt,
        std::process::id()
    )))
}

fn run_cell(
    store: &mut Store,
    plan: &Plan,
    arm_index: usize,
    info: &CellInfo,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
    place: Place<'_>,
) -> Result<RunOutcome, RunnerError> {
    let arm = &plan.arms[arm_index];
    reporter.report(&Event::CellStarted { cell: info });
    let started = Instant::now();
    let program = cell_program(arm, options);
    let job_dir = match (&plan.executor, &place.adopt) {
        (_, Some(adopt)) => Some(adopt.dir.clone()),
        (super::plan::Executor::Slurm(_), None) => Some(job_dir(info)?),
        (super::plan::Executor::Local, None) => None,
    };
    let cell_dir = train_dir(plan, arm, info, job_dir.as_deref());
    let cell = Cell {
        plan,
        arm,
        info,
        options,
        program: &program,
        cell_dir: cell_dir.as_deref(),
    };
    let stored_before = place.adopt.as_ref().map_or(0, |a| a.stored);
    let launched = match (&plan.executor, place.adopt, &job_dir) {
        (_, Some(adopt), _) => {
            reporter.report(&Event::Note {
                cell: info,
                message: format!(
                    "following Slurm job {} ({} line(s) already recorded)",
                    adopt.job, adopt.stored
                ),
            });
            Ok(follow_job(
                adopt.job,
                &adopt.dir,
                requeues(plan),
                adopt.run,
                options,
            ))
        }
        (super::plan::Executor::Slurm(slurm), None, Some(dir)) => {
            launch_job(&cell, slurm, dir, place.nodelist, place.after, reporter)
        }
        _ => launch_local(&cell),
    };
    let Launched {
        rx,
        kill,
        on_end,
        stderr,
        finish,
        host,
        job,
    } = match launched {
        Ok(launched) => launched,
        Err(error) => {
            let outcome = RunOutcome {
                status: RunStatus::Failed,
                exit_code: None,
                signal: None,
                error: Some(error),
                stderr_tail: None,
                wall_seconds: started.elapsed().as_secs_f64(),
                problems: LineProblems::default(),
            };
            store.finish_run(info.run_id, &outcome)?;
            reporter.report(&Event::CellFinished {
                cell: info,
                outcome: &outcome,
                lines: 0,
            });
            return Ok(outcome);
        }
    };
    store.set_run_placement(info.run_id, host.as_deref(), job.as_deref())?;
    if let Some(dir) = &job_dir {
        store.set_run_slurm_dir(info.run_id, &dir.display().to_string())?;
    }
    if let Some(node) = place.node {
        store.set_run_node(info.run_id, node)?;
    }

    let mut stdout_log = Tail::default();
    // An adopted job's stdout is read from its start: the lines an earlier
    // follower stored are its first metric lines, skipped here.
    let mut counts = LineCounts {
        stored: stored_before,
        ..LineCounts::default()
    };
    let mut skip = stored_before;
    // The attempt the lines belong to: a job Slurm requeues starts a new one.
    let mut current = info.clone();
    let mut store_error = None;
    let mut batch: Vec<MetricLine> = Vec::new();
    let mut exit: Option<(Result<End, String>, Instant)> = None;
    let mut eof = false;
    let mut abandoned_pipe = false;
    let mut waiting: Option<Msg> = None;
    while !(eof && exit.is_some()) {
        let msg = match waiting.take() {
            Some(msg) => msg,
            None => match &exit {
                None => match rx.recv() {
                    Ok(msg) => msg,
                    Err(_) => break,
                },
                Some((_, at)) => {
                    let left = STDOUT_GRACE.saturating_sub(at.elapsed());
                    match rx.recv_timeout(left) {
                        Ok(msg) => msg,
                        Err(_) => {
                            abandoned_pipe = true;
                            break;
                        }
                    }
                }
            },
        };
        match msg {
            Msg::Line(first) => {
                // Commit as soon as no further line is already waiting: a
                // child printing one line per iteration gets one transaction
                // per line; a burst that arrived together shares one.
                let mut next = Some(first);
                while let Some(bytes) = next.take() {
                    let before = batch.len();
                    take_line(
                        &bytes,
                        &current,
                        &mut batch,
                        &mut counts,
                        &mut stdout_log,
                        reporter,
                    );
                    if skip > 0 && batch.len() > before {
                        batch.pop();
                        skip -= 1;
                    }
                    if batch.len() >= MAX_BATCH {
                        break;
                    }
                    match rx.try_recv() {
                        Ok(Msg::Line(bytes)) => next = Some(bytes),
                        Ok(other) => waiting = Some(other),
                        Err(_) => {}
                    }
                }
                if let Err(e) = flush(store, &current, &mut batch, &mut counts, reporter, started) {
                    // The store is unusable: stop the child, record what we
                    // can, and give up.
                    kill();
                    store_error = Some(e);
                    break;
                }
            }
            Msg::Overlong { head, bytes } => {
                counts.problems.overlong += 1;
                stdout_log.push(&child::overlong_note(&head, bytes));
                if counts.problems.overlong == 1 {
                    reporter.report(&Event::Warning {
                        cell: &current,
                        message: format!(
                            "a stdout line of {bytes} bytes is over the {} MiB line cap; \
                             its head is kept in the cell's log",
                            child::MAX_LINE / (1024 * 1024)
                        ),
                    });
                }
            }
            Msg::Eof => eof = true,
            Msg::RunStarted(started) => {
                if let Err(e) = store.set_run_slurm_run(current.run_id, &started) {
                    kill();
                    store_error = Some(e);
                    break;
                }
            }
            Msg::Restarted => {
                // Slurm requeued the job: what its earlier run printed is
                // superseded, and the cell starts again as a new attempt.
                let restarted = flush(store, &current, &mut batch, &mut counts, reporter, started)
                    .and_then(|()| store.start_run(current.run_id))
                    .and_then(|attempt| {
                        current.attempt = attempt;
                        store.set_run_placement(current.run_id, None, job.as_deref())?;
                        match &job_dir {
                            Some(dir) => {
                                store.set_run_slurm_dir(current.run_id, &dir.display().to_string())
                            }
                            None => Ok(()),
                        }
                    });
                if let Err(e) = restarted {
                    kill();
                    store_error = Some(e);
                    break;
                }
                counts = LineCounts::default();
                skip = 0;
                reporter.report(&Event::Warning {
                    cell: &current,
                    message: format!(
                        "Slurm requeued the job; its earlier lines are superseded and it runs \
                         again as attempt {}",
                        current.attempt
                    ),
                });
            }
            Msg::Placed(node) => {
                if let Err(e) = store.set_run_placement(info.run_id, Some(&node), None) {
                    kill();
                    store_error = Some(e);
                    break;
                }
            }
            Msg::Ended(end) => {
                // The cell is the child: whatever it left running in its
                // group goes with it (and so does a grandchild's hold on
                // the stdout pipe).
                on_end();
                exit = Some((end, Instant::now()));
            }
        }
    }
    if store_error.is_some() && exit.is_none() {
        // Wait for the killed child so its exit is what gets recorded.
        while let Ok(msg) = rx.recv_timeout(KILL_GRACE) {
            if let Msg::Ended(end) = msg {
                exit = Some((end, Instant::now()));
                break;
            }
        }
    }
    finish();
    let wall_seconds = exit
        .as_ref()
        .map_or_else(|| started.elapsed(), |(_, at)| at.duration_since(started))
        .as_secs_f64();
    // A job's own records say how long its command ran on the node
    // (without queueing and polling) and what hardware it ran on.
    let wall_seconds = job_dir
        .as_deref()
        .and_then(super::slurm::ran_seconds)
        .unwrap_or(wall_seconds);
    if let Some(node) = job_dir.as_deref().and_then(super::slurm::node_record) {
        store.set_run_node(info.run_id, &node)?;
    }
    if abandoned_pipe {
        reporter.report(&Event::Warning {
            cell: &current,
            message: format!(
                "the child exited, but a process it started outside its process group still \
                 holds its stdout; stopped reading {} s after the exit",
                STDOUT_GRACE.as_secs()
            ),
        });
    }
    let stderr_tail = stderr.collect(abandoned_pipe);
    let stderr = stderr_tail
        .lock()
        .map(|t| (t.text(), t.last_line().map(str::to_string)));
    let (mut tail_text, last_line) = stderr.unwrap_or_default();
    if !stdout_log.is_empty() {
        if !tail_text.is_empty() {
            tail_text.push('\n');
        }
        tail_text.push_str("--- stdout (non-JSON lines) ---\n");
        tail_text.push_str(&stdout_log.text());
    }
    let (lines, duplicates) = (counts.stored, counts.duplicates);
    let stopped = options.stop.is_stopped();
    let status = match exit {
        None => Err("the child's exit was not seen".to_string()),
        Some((end, _)) => end,
    };
    let mut outcome = match status {
        Err(error) => RunOutcome {
            status: RunStatus::Failed,
            exit_code: None,
            signal: None,
            error: Some(error),
            stderr_tail: None,
            wall_seconds,
            problems: counts.problems,
        },
        Ok(end) => {
            let End {
                exit_code,
                signal,
                how,
                success,
                status: decided,
            } = end;
            let short = short_count(plan, arm, lines);
            let (state, error) = if success && short.is_none() {
                (RunStatus::Completed, None)
            } else if stopped {
                // The runner stopped it: whatever the child made of SIGTERM,
                // the cell did not run to its end.
                (RunStatus::Interrupted, Some(format!("interrupted ({how})")))
            } else if let Some((state, why)) = decided {
                // The scheduler's word (cancelled, time limit, node failure).
                (state, Some(format!("{why} ({how})")))
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
                status: state,
                exit_code,
                signal,
                error,
                stderr_tail: None,
                wall_seconds,
                problems: counts.problems,
            }
        }
    };
    if duplicates > 0 && outcome.error.is_none() {
        outcome.error = Some(format!(
            "{duplicates} line(s) repeated an iteration and were ignored"
        ));
    }
    outcome.stderr_tail = (!tail_text.is_empty()).then_some(tail_text);
    if let Some(e) = store_error {
        outcome.status = RunStatus::Failed;
        outcome.error = Some(format!("recording failed: {e}"));
        // Best effort: the store just failed, this may fail too.
        let _ = store.finish_run(info.run_id, &outcome);
        return Err(e.into());
    }
    if let Some(dir) = &cell_dir {
        if outcome.status == RunStatus::Completed && !options.keep_runs {
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
    store.finish_run(info.run_id, &outcome)?;
    if plan.warmup_auto && outcome.status == RunStatus::Completed {
        let metric = plan
            .primary_metric()
            .unwrap_or_else(|| "time/iteration_seconds".into());
        let series = store.metric_head(info.run_id, &metric, super::warmup::SERIES_HEAD)?;
        let values: Vec<f64> = series.iter().map(|p| p.1).collect();
        let warmup = super::warmup::detect_warmup(&values);
        store.set_run_warmup(info.run_id, warmup as i64)?;
    }
    reporter.report(&Event::CellFinished {
        cell: &current,
        outcome: &outcome,
        lines,
    });
    Ok(outcome)
}

/// A started cell: its messages, and what the cell loop calls on it.
struct Launched {
    rx: std::sync::mpsc::Receiver<Msg>,
    /// Stops the cell at once (the store failed).
    kill: Box<dyn Fn()>,
    /// The cell's process ended: take what it left behind with it.
    on_end: Box<dyn Fn()>,
    stderr: StderrSource,
    /// After the loop: the stop signal and the watchdog forget the cell.
    finish: Box<dyn FnOnce()>,
    /// The host it runs on, when known at the start (a local child).
    host: Option<String>,
    /// Its Slurm job.
    job: Option<String>,
}

/// Where a cell's stderr tail comes from.
enum StderrSource {
    /// A local child's pipe, read by a thread as it runs.
    Pipe(
        Arc<std::sync::Mutex<Tail>>,
        Option<std::thread::JoinHandle<()>>,
    ),
    /// A job's stderr file on the shared filesystem, read once it ended.
    File(PathBuf),
}

impl StderrSource {
    /// The tail; a pipe still held open by an escaped process is not
    /// waited for (`abandoned`).
    fn collect(self, abandoned: bool) -> Arc<std::sync::Mutex<Tail>> {
        match self {
            StderrSource::Pipe(tail, handle) => {
                if let (false, Some(handle)) = (abandoned, handle) {
                    let _ = handle.join();
                }
                tail
            }
            StderrSource::File(path) => match std::fs::File::open(&path) {
                Ok(file) => {
                    let (tail, handle) = child::collect_tail(file);
                    let _ = handle.join();
                    tail
                }
                Err(_) => Default::default(),
            },
        }
    }
}

/// The environment of a cell's process, on whichever executor.
fn process_env(
    plan: &Plan,
    arm: &super::plan::Arm,
    info: &CellInfo,
    cell_dir: Option<&std::path::Path>,
) -> BTreeMap<String, String> {
    let mut env = cell_env(plan, info);
    if let Some(dir) = cell_dir {
        env.insert("LCX_RUNS_DIR".into(), dir.display().to_string());
    }
    env.extend(arm.env.clone());
    env
}

/// What either executor needs to start a cell.
struct Cell<'a> {
    plan: &'a Plan,
    arm: &'a super::plan::Arm,
    info: &'a CellInfo,
    options: &'a RunnerOptions,
    program: &'a std::path::Path,
    /// A training cell's run directory (`LCX_RUNS_DIR`).
    cell_dir: Option<&'a std::path::Path>,
}

/// Starts a cell as a child process of this runner, in its own process
/// group, with a watchdog that kills the group if the runner dies.
fn launch_local(cell: &Cell<'_>) -> Result<Launched, String> {
    let Cell {
        plan,
        arm,
        info,
        options,
        program,
        cell_dir,
    } = *cell;
    let mut command = Command::new(program);
    command
        .args(&arm.args)
        .envs(process_env(plan, arm, info, cell_dir))
        .stdin(if arm.stdin_config().is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group: a terminal's Ctrl-C goes to the runner only,
        // which then stops the whole group (grandchildren included).
        .process_group(0);
    if let Some(dir) = &arm.workdir {
        command.current_dir(dir);
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and only touches the child's own
    // process state between fork and exec.
    unsafe {
        command.pre_exec(|| {
            // If the runner dies (even by SIGKILL), its children die too
            // instead of running on unobserved.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", program.display()))?;
    if let (Some(text), Some(mut stdin)) = (arm.stdin_config(), child.stdin.take()) {
        let text = text.to_owned();
        // A thread, so that a child that never reads cannot block the
        // runner; a child that exits first makes the write fail, and its
        // exit is what the cell records.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, text.as_bytes());
        });
    }
    let group = child.id() as i32;
    // Kills the group if this runner dies before the cell ends (PDEATHSIG
    // reaches only the child, not what the child started).
    let reaper = GroupReaper::spawn(group);
    options.stop.set_child(group);
    let stderr = match child.stderr.take() {
        Some(stderr) => {
            let (tail, handle) = child::collect_tail(stderr);
            StderrSource::Pipe(tail, Some(handle))
        }
        None => StderrSource::Pipe(Default::default(), None),
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(CHANNEL_LINES);
    if let Some(stdout) = child.stdout.take() {
        let tx = tx.clone();
        // Detached: if something outside the group keeps the pipe open, the
        // cell ends without it (STDOUT_GRACE) and the thread ends with the pipe.
        std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(64 * 1024, stdout);
            loop {
                let msg = match child::read_line_bounded(&mut reader, child::MAX_LINE) {
                    Ok(child::LineRead::Line(bytes)) => Msg::Line(bytes),
                    Ok(child::LineRead::Overlong { head, bytes }) => Msg::Overlong { head, bytes },
                    Ok(child::LineRead::Eof) | Err(_) => {
                        let _ = tx.send(Msg::Eof);
                        return;
                    }
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
        });
    } else {
        let _ = tx.send(Msg::Eof);
    }
    std::thread::spawn(move || {
        let end = child
            .wait()
            .map(|status| End::of_exit(&status))
            .map_err(|e| format!("waiting for the child failed: {e}"));
        let _ = tx.send(Msg::Ended(end));
    });
    let stop = Arc::clone(&options.stop);
    Ok(Launched {
        rx,
        kill: Box::new(move || signal_group(group, libc::SIGKILL)),
        on_end: Box::new(move || signal_group(group, libc::SIGKILL)),
        stderr,
        finish: Box::new(move || {
            stop.clear_child();
            drop(reaper);
        }),
        host: crate::store::hostname(),
        job: None,
    })
}

/// Submits a cell as a Slurm job and follows it: its stdout file (on the
/// shared filesystem) line by line, its state from `scontrol`. The job's
/// folder (script, config, stdout, stderr, the script's records) stays
/// for reproducibility.
fn launch_job(
    cell: &Cell<'_>,
    slurm: &super::plan::SlurmOptions,
    dir: &std::path::Path,
    nodelist: Option<String>,
    after: Option<String>,
    reporter: &mut dyn Reporter,
) -> Result<Launched, String> {
    let job = submit_job(cell, slurm, dir, nodelist, after)?;
    reporter.report(&Event::Note {
        cell: cell.info,
        message: format!("Slurm job {job} ({})", dir.join("job.sh").display()),
    });
    Ok(follow_job(job, dir, slurm.requeue, None, cell.options))
}

/// Writes a cell's job script into `dir` and submits it; returns the
/// job id. `after`: a job it must wait for (`--detach`'s chain).
fn submit_job(
    cell: &Cell<'_>,
    slurm: &super::plan::SlurmOptions,
    dir: &std::path::Path,
    nodelist: Option<String>,
    after: Option<String>,
) -> Result<String, String> {
    let Cell {
        plan,
        arm,
        info,
        options: _,
        program,
        cell_dir,
    } = *cell;
    let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
    // The node resolves paths on the shared filesystem: make them absolute.
    let program = if program.is_absolute() || !program.to_string_lossy().contains('/') {
        program.to_path_buf()
    } else {
        arm.workdir.as_deref().unwrap_or(&cwd).join(program)
    };
    let cell_dir = cell_dir.map(|d| cwd.join(d));
    let options = slurm.for_arm(&arm.slurm);
    let spec = super::slurm::JobSpec {
        name: format!("lcx-{}-{}", plan.name, info.run_id),
        dir,
        program: &program,
        args: &arm.args,
        env: process_env(plan, arm, info, cell_dir.as_deref()),
        workdir: arm.workdir.clone().unwrap_or_else(|| cwd.clone()),
        stdin: arm.stdin_config(),
        options: &options,
        wants_gpu: arm.requires == Some(Requirement::Cuda),
        nodelist,
        after,
    };
    super::slurm::submit(&spec)
}

/// Follows a submitted job until it ends (from its stdout's start).
/// Whether the plan lets Slurm requeue its jobs (`[executor] requeue`).
fn requeues(plan: &Plan) -> bool {
    matches!(&plan.executor, super::plan::Executor::Slurm(o) if o.requeue)
}

fn follow_job(
    job: String,
    dir: &std::path::Path,
    requeue: bool,
    known_run: Option<String>,
    options: &RunnerOptions,
) -> Launched {
    options.stop.set_job(&job);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(CHANNEL_LINES);
    {
        let job = job.clone();
        let dir = dir.to_path_buf();
        std::thread::spawn(move || {
            super::slurm::follow(&job, &dir, child::MAX_LINE, requeue, known_run, |event| {
                let msg = match event {
                    super::slurm::Event::Line(bytes) => Msg::Line(bytes),
                    super::slurm::Event::Overlong { head, bytes } => Msg::Overlong { head, bytes },
                    super::slurm::Event::Placed(node) => Msg::Placed(node),
                    super::slurm::Event::Restarted => Msg::Restarted,
                    super::slurm::Event::RunStarted(t) => Msg::RunStarted(t),
                    super::slurm::Event::Ended(end) => {
                        if tx.send(Msg::Eof).is_err() {
                            return false;
                        }
                        Msg::Ended(end.map(End::of_job))
                    }
                };
                tx.send(msg).is_ok()
            });
        });
    }
    let stop = Arc::clone(&options.stop);
    let cancel = job.clone();
    Launched {
        rx,
        kill: Box::new(move || super::slurm::cancel(&cancel)),
        on_end: Box::new(|| {}),
        stderr: StderrSource::File(dir.join("stderr")),
        finish: Box::new(move || stop.clear_job()),
        host: None,
        job: Some(job),
    }
}

/// Why a cell that exited 0 is not complete: it stored fewer lines than
/// the plan's `iterations` (any number of at least one for an arm with
/// `variable_iterations`).
fn short_count(plan: &Plan, arm: &super::plan::Arm, stored: u64) -> Option<String> {
    let expected = u64::from(plan.iterations);
    if arm.variable_iterations {
        return (stored == 0).then(|| "exited 0 without emitting any metric line".to_string());
    }
    (stored < expected).then(|| {
        format!(
            "exited 0 after emitting {stored} of {}",
            crate::text::counted(expected, "iteration")
        )
    })
}

/// A forked watchdog that SIGKILLs a cell's process group when the runner
/// goes away without ending the cell (`kill -9`, a crash): PDEATHSIG only
/// reaches the child itself, not what it started. The runner holds the
/// write end of a pipe; the watchdog blocks reading it, and EOF (the
/// runner closed it, or died) makes it kill the group and exit. A process
/// that leaves the group (`setsid`, `setpgid`) escapes it, as it escapes
/// the runner's own group kill.
struct GroupReaper {
    pid: libc::pid_t,
    write_fd: libc::c_int,
}

impl GroupReaper {
    fn spawn(group: i32) -> Option<GroupReaper> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        let [read_fd, write_fd] = fds;
        // SAFETY: after fork the watchdog calls only async-signal-safe
        // functions (close, sigaction via signal, setpgid, read, kill,
        // _exit) and touches no memory shared with the runner's threads.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: see above; this is the forked watchdog.
            unsafe {
                // Every inherited descriptor but our pipe goes: a copy of a
                // cell's stdin write end, say, would keep that child waiting
                // for an end of file that never comes.
                close_all_but(read_fd);
                // Terminal signals belong to the runner: the inherited Ctrl-C
                // handler would write to the runner's own signal pipe.
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                libc::setpgid(0, 0);
                let mut byte = 0u8;
                loop {
                    let n = libc::read(read_fd, (&mut byte as *mut u8).cast(), 1);
                    if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                        break;
                    }
                }
                libc::kill(-group, libc::SIGKILL);
                libc::_exit(0);
            }
        }
        // SAFETY: closing our copy of the read end, which we own.
        unsafe { libc::close(read_fd) };
        if pid < 0 {
            // SAFETY: as above, the write end is ours.
            unsafe { libc::close(write_fd) };
            return None;
        }
        Some(GroupReaper { pid, write_fd })
    }
}

/// Closes every descriptor of this process except `keep`: `close_range(2)`
/// where the kernel has it (5.9 and later), a loop over the usual range
/// otherwise. Async-signal-safe, for the forked watchdog.
///
/// # Safety
/// Only in a freshly forked child that owns no Rust objects holding
/// descriptors it will use again.
unsafe fn close_all_but(keep: libc::c_int) {
    let keep = keep as libc::c_uint;
    // SAFETY: plain syscalls on this process's own descriptor table.
    unsafe {
        let low = keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0;
        let high = libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0;
        if !(low && high) {
            for fd in 0..4096 {
                if fd != keep as libc::c_int {
                    libc::close(fd);
                }
            }
        }
    }
}

impl Drop for GroupReaper {
    fn drop(&mut self) {
        // SAFETY: the descriptor and the child pid are ours; closing the
        // pipe ends the watchdog, and waitpid reaps it.
        unsafe {
            libc::close(self.write_fd);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}
