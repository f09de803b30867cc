//! One attempt of a cell, from its start event to its recorded end: the
//! wait for a quiet host, the launch on its executor, the stream read into
//! rows ([`super::ingest`]), then what the host, the job and the child's
//! output say, made into the cell's outcome and recorded. Which cell runs,
//! and when, is [`super::schedule`]'s: nothing here looks at other cells
//! (but for the host's ceiling, which a cell that ran above it re-probes).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::cell::{cell_program, outcome, train_dir, Cell, CellInfo, End, Ending, Event, Reporter};
use super::executor::{Executor, Launched, Place, StderrSource};
use super::ingest::{ingest, CellClock, Ingested, STDOUT_GRACE};
use super::output::Tail;
use super::record::{finish_cell, finish_unstarted};
use super::watch::{self, HostWatch};
use super::{RunnerError, RunnerOptions};
use crate::experiment::fingerprint::{self, PeakSource};
use crate::experiment::plan::{self, Arm, Plan};
use crate::experiment::slurm as client;
use crate::store::{FastestPhase, LineProblems, NodeInfo, RunOutcome, RunStatus, Store};
use crate::system::Root;

/// Runs one attempt of the cell `info` (already started in the store,
/// unless it follows an adopted job) and records its end.
#[expect(
    clippy::too_many_arguments,
    reason = "one cell's whole context; each argument is a different part of it"
)]
pub(super) fn run_cell(
    store: &mut Store,
    plan: &Plan,
    arm_index: usize,
    info: &CellInfo,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
    place: Place<'_>,
    executor: &dyn Executor,
) -> Result<RunOutcome, RunnerError> {
    let arm = &plan.arms[arm_index];
    reporter.report(&Event::CellStarted { cell: info });
    let local = runs_here(plan);
    if local {
        wait_for_quiet(plan, info, options, reporter);
    }
    let started = Instant::now();
    let waited_before = store.lock_wait();
    let program = cell_program(arm, options);
    let job_dir = executor.job_dir(info, place.adopt.as_ref())?;
    let cell_dir = train_dir(plan, arm, info, job_dir.as_deref());
    let cell = Cell {
        plan,
        arm,
        info,
        options,
        program: &program,
        cell_dir: cell_dir.as_deref(),
        job_dir: job_dir.as_deref(),
    };
    let stored_before = place.adopt.as_ref().map_or(0, |a| a.stored);
    let node = place.node;
    let watch = local.then(|| HostWatch::start(Root::default()));
    let launched = match executor.launch(&cell, place, reporter) {
        Ok(launched) => launched,
        Err(error) => {
            let wall = started.elapsed().as_secs_f64();
            return Ok(finish_unstarted(store, reporter, info, error, wall)?);
        }
    };
    record_launch(store, info, &launched, job_dir.as_deref(), node)?;
    let ingested = ingest(
        store,
        &launched,
        info,
        stored_before,
        job_dir.as_deref(),
        reporter,
        CellClock {
            started,
            timeout: arm.timeout(),
        },
    );
    let Launched { stderr, finish, .. } = launched;
    finish();
    let ran = Ran {
        ingested,
        stderr,
        started,
        waited_before,
        watch,
        job_dir,
        cell_dir,
    };
    record_end(store, plan, arm, info, options, reporter, ran)
}

/// The runner's host is the cell's only for a local cell.
fn runs_here(plan: &Plan) -> bool {
    matches!(plan.executor, plan::Executor::Local)
}

/// `[measurement] wait_for_quiet`: waits (up to its limit) for the host's
/// other programs to leave the CPU before a local cell starts, and warns
/// when they did not.
fn wait_for_quiet(
    plan: &Plan,
    info: &CellInfo,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
) {
    let Some(limit) = plan.measurement.wait_for_quiet else {
        return;
    };
    let root = Root::default();
    let threshold = plan
        .measurement
        .threshold(root.online_cpus().map(|n| n as i64));
    let stopped = || options.stop.is_stopped();
    if let Err(cores) = watch::wait_for_quiet(
        &root,
        threshold,
        crate::experiment::plan::seconds_duration(limit),
        &stopped,
    ) {
        reporter.report(&Event::Warning {
            cell: info,
            message: format!(
                "the host stayed busy ({cores:.2} cores of other programs' CPU, limit \
                 {threshold:.2}) for the {limit} s of wait_for_quiet; running the cell anyway"
            ),
        });
    }
}

/// Where the launched cell runs, as soon as that is known: its host and
/// job, its CPUs, its job's folder, this machine's hardware (a local cell).
fn record_launch(
    store: &mut Store,
    info: &CellInfo,
    launched: &Launched,
    job_dir: Option<&Path>,
    node: Option<&NodeInfo>,
) -> Result<(), RunnerError> {
    store.set_run_placement(
        info.run_id,
        launched.host.as_deref(),
        launched.job.as_deref(),
    )?;
    if let Some(cpus) = &launched.cpus {
        store.set_run_cpus(info.run_id, &cpus.to_string())?;
    }
    if let Some(dir) = job_dir {
        store.set_run_slurm_dir(info.run_id, &dir.display().to_string())?;
    }
    if let Some(node) = node {
        store.set_run_node(info.run_id, node)?;
    }
    Ok(())
}

/// What a launched cell left once its stream was read to the end.
struct Ran {
    ingested: Ingested,
    stderr: StderrSource,
    /// When its clock started (after the quiet wait, before the launch).
    started: Instant,
    /// The store's lock wait before the cell started.
    waited_before: Duration,
    /// What the host did meanwhile (a local cell).
    watch: Option<HostWatch>,
    job_dir: Option<PathBuf>,
    /// A training cell's run directory.
    cell_dir: Option<PathBuf>,
}

/// Makes the cell's outcome from what it left and records it: the host's
/// and job's records first, then its output's tails, its ending, and
/// (for a local cell) a look at the host's ceiling.
fn record_end(
    store: &mut Store,
    plan: &Plan,
    arm: &Arm,
    info: &CellInfo,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
    ran: Ran,
) -> Result<RunOutcome, RunnerError> {
    let Ingested {
        counts,
        stdout_log,
        current,
        exit,
        abandoned_pipe,
        store_error,
        timed_out,
    } = ran.ingested;
    let wall_seconds = record_host(
        store,
        info,
        &exit,
        ran.started,
        ran.watch,
        ran.job_dir.as_deref(),
    )?;
    let tails = output_tails(reporter, &current, ran.stderr, abandoned_pipe, &stdout_log);
    let problems = LineProblems {
        overlong: counts.problems.overlong + tails.stderr_overlong,
        ..counts.problems
    };
    let lines = counts.stored;
    let mut outcome = outcome(
        plan,
        arm,
        Ending {
            end: exit.map_or_else(
                || Err("the child's exit was not seen".to_string()),
                |(end, _)| end,
            ),
            stored: counts.stored,
            duplicates: counts.duplicates,
            problems,
            stopped: options.stop.is_stopped(),
            last_line: tails.last_line,
            wall_seconds,
            timed_out,
        },
    );
    outcome.stderr_tail = (!tails.text.is_empty()).then_some(tails.text);
    outcome.db_wait_seconds = Some((store.lock_wait() - ran.waited_before).as_secs_f64());
    if let Some(e) = store_error {
        outcome.status = RunStatus::Failed;
        outcome.error = Some(format!("recording failed: {e}"));
        // Best effort: the store just failed, this may fail too.
        let _ = store.finish_run(info.run_id, &outcome);
        return Err(e.into());
    }
    finish_cell(
        store,
        plan,
        info.run_id,
        &mut outcome,
        ran.cell_dir.as_deref(),
        options.keep_runs,
    )?;
    reporter.report(&Event::CellFinished {
        cell: &current,
        outcome: &outcome,
        lines,
    });
    if runs_here(plan) {
        recheck_ceiling(store, &current, reporter)?;
    }
    Ok(outcome)
}

/// What the host and the job say about the cell's run: how contended a
/// local cell was, the node a job ran on; returns its wall time.
fn record_host(
    store: &mut Store,
    info: &CellInfo,
    exit: &Option<(Result<End, String>, Instant)>,
    started: Instant,
    watch: Option<HostWatch>,
    job_dir: Option<&Path>,
) -> Result<f64, RunnerError> {
    let cell_cpu = exit
        .as_ref()
        .and_then(|(end, _)| end.as_ref().ok())
        .and_then(|end| end.cpu_seconds);
    if let Some(watch) = watch {
        store.set_run_contention(info.run_id, &watch.finish(cell_cpu))?;
    }
    let wall_seconds = exit
        .as_ref()
        .map_or_else(|| started.elapsed(), |(_, at)| at.duration_since(started))
        .as_secs_f64();
    // A job's own records say how long its command ran on the node
    // (without queueing and polling) and what hardware it ran on.
    let wall_seconds = job_dir
        .and_then(client::ran_seconds)
        .unwrap_or(wall_seconds);
    if let Some(node) = job_dir.and_then(client::node_record) {
        store.set_run_node(info.run_id, &node)?;
    }
    Ok(wall_seconds)
}

/// The child's output as the cell's record keeps it.
struct Tails {
    /// Its stderr tail, then its non-JSON stdout lines.
    text: String,
    /// The last non-empty line of its stderr.
    last_line: Option<String>,
    /// Stderr lines over the line cap.
    stderr_overlong: i64,
}

/// Collects the child's stderr tail and puts its stdout log after it;
/// warns when stdout was given up after the exit and when stderr had lines
/// over the cap.
fn output_tails(
    reporter: &mut dyn Reporter,
    current: &CellInfo,
    stderr: StderrSource,
    abandoned_pipe: bool,
    stdout_log: &Tail,
) -> Tails {
    if abandoned_pipe {
        reporter.report(&Event::Warning {
            cell: current,
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
        .map(|t| (t.text(), t.last_line().map(str::to_string), t.overlong));
    let (mut text, last_line, stderr_overlong) = stderr.unwrap_or_default();
    if stderr_overlong > 0 {
        reporter.report(&Event::Warning {
            cell: current,
            message: format!(
                "{} on stderr over the {} MiB line cap: cut, counted (runs.overlong_lines)",
                crate::text::counted(stderr_overlong as u64, "line"),
                super::output::MAX_LINE / (1024 * 1024)
            ),
        });
    }
    if !stdout_log.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("--- stdout (non-JSON lines) ---\n");
        text.push_str(&stdout_log.text());
    }
    Tails {
        text,
        last_line,
        stderr_overlong,
    }
}

/// A phase can never run faster than the machine's ceiling: when a local
/// cell's did, the recorded ceiling was a low probe. The runner probes
/// again (once per experiment), keeps the host's best, and says so on the
/// experiment (`peak_note`) and to the user; a rate still above the new
/// probe points at the phase's FLOP count or clock instead.
fn recheck_ceiling(
    store: &mut Store,
    info: &CellInfo,
    reporter: &mut dyn Reporter,
) -> Result<(), RunnerError> {
    let Some(FastestPhase {
        experiment,
        ceiling,
        source,
        phase,
        rate,
    }) = store.fastest_phase(info.run_id)?
    else {
        return Ok(());
    };
    if rate <= ceiling || source.as_deref() == Some(PeakSource::Reprobed.as_str()) {
        return Ok(());
    }
    let known = fingerprint::known_ceiling(Some(store), true);
    let probed = known.probe.as_ref().map_or(0.0, |p| p.gflops);
    let best = known.ceiling.gflops;
    let mut note = format!(
        "cell `{}` #{}'s {phase} phase ran at {rate:.1} GFLOP/s, above the recorded ceiling of \
         {ceiling:.1}; a new probe read {probed:.1}, and the host's best is now {best:.1} ({})",
        info.arm,
        info.repeat,
        known.ceiling.describe()
    );
    if known.ceiling.disturbed {
        note.push_str("; no try of that probe had all its cores, so the figure is a floor");
    }
    if rate > best {
        note.push_str(
            "; the phase still runs above it, so its FLOP count or its clock is wrong, not only \
             the probe",
        );
    }
    let raised = (best > ceiling).then_some(&known.ceiling);
    store.set_experiment_peak(experiment, raised, PeakSource::Reprobed.as_str(), &note)?;
    reporter.report(&Event::Warning {
        cell: info,
        message: note,
    });
    Ok(())
}
