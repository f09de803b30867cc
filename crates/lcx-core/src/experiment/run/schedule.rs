//! Which cells run, in what order, and one cell from start to record: a
//! new experiment runs everything in plan order; a resume the cells not
//! completed; adaptive repeats stop after the round whose data suffice; an
//! arm that requires CUDA is skipped where there is none; Slurm cells are
//! pinned to nodes as `[executor] placement` asks.

use std::time::Instant;

use super::cell::{
    cell_program, outcome, summary, train_dir, Cell, CellInfo, Ending, Event, Reporter, Summary,
};
use super::executor::Adopt;
use super::executor::{Executor, Launched, Place};
use super::hooks::ArmHooks;
use super::ingest::{ingest, CellClock, Ingested, STDOUT_GRACE};
use super::placement::Pinning;
use super::record::{finish_cell, finish_unstarted};
use super::slurm::{adoptable, end_adopted, Slurm};
use super::watch::{self, HostWatch};
use super::{RunnerError, RunnerOptions};
use crate::experiment::fingerprint::{self, PeakSource};
use crate::experiment::plan::{self, Plan, Requirement};
use crate::experiment::slurm as client;
use crate::store::{
    ExperimentStatus, FastestPhase, Run, RunOutcome, RunStatus, RunnerIdentity, Store,
};
use crate::system::lock::{Acquired, Held, HostLock};
use crate::system::Root;

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
    let repaired = super::record::plan_missing_cells(store, plan, experiment_id)?;
    let runs = store.runs(experiment_id)?;
    let (todo, resumed) = cells_to_run(plan, experiment_id, &runs)?;
    store.set_experiment_status(experiment_id, ExperimentStatus::Running)?;
    reporter.report(&Event::Started {
        experiment_id,
        name: &plan.name,
        cells: todo.len(),
        total_cells: runs.len(),
        resumed,
        planned_cells: repaired,
    });

    let mut placement = Pinning::new(plan, &runs);
    let slurm_options = match &plan.executor {
        plan::Executor::Slurm(o) => Some(Slurm::new(o)),
        plan::Executor::Local => None,
    };
    if let (true, Some(slurm)) = (options.detach, &slurm_options) {
        return slurm.detach(store, plan, experiment_id, todo, options, reporter);
    }
    // Several cells in flight: submit them all, then follow each in plan
    // order; the jobs' own records give each cell's time and node.
    let parallel = matches!(&plan.executor, plan::Executor::Slurm(o) if o.max_parallel > 1);
    // Follow jobs already submitted (by `--detach`, an earlier
    // coordinator, or just now) instead of submitting them.
    let follow = options.attach || parallel;
    let todo =
        if let (true, false, Some(slurm)) = (parallel, options.stop.is_stopped(), &slurm_options) {
            // Cells an earlier coordinator left jobs for are followed, the rest
            // submitted.
            let (adopt, submit): (Vec<_>, Vec<_>) = todo
                .into_iter()
                .partition(|(_, run)| adoptable(options.attach, run).is_some());
            slurm.submit_all(store, plan, submit, options, reporter, placement)?;
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
    let slurm = slurm_options.is_some();
    let executor = for_plan(plan);
    // Under `--attach`, the last job of the chain an earlier coordinator
    // left: a cell submitted now waits for it, so that cells still run one
    // at a time.
    let chain_tail: Option<String> = todo
        .iter()
        .rev()
        .find_map(|(_, run)| adoptable(follow, run).map(|(job, _)| job));
    // A local cell runs on this machine; a Slurm job records its node.
    let local_node = (!slurm).then(crate::experiment::fingerprint::node);
    let mut cuda: Option<Option<bool>> = options.cuda_available.map(Some);
    // One benchmark per host at a time; a Slurm cell runs on another node.
    let mut host_lock = match (&options.host_lock, plan.host_lock && !slurm) {
        (Some(path), true) => Some(HostLock::new(path, &plan.name)),
        _ => None,
    };
    let mut failed_fast = false;
    let cells = todo.len();
    let rounds: Vec<i64> = todo.iter().map(|(_, r)| r.repeat).collect();
    let mut enough: Option<String> = None;
    let mut cells_left = todo.into_iter().enumerate();
    let mut hooks = ArmHooks::new(plan, &options.stop);
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
                crate::experiment::fingerprint::torch_facts(&options.lcx_exe)
                    .map(|t| t.cuda_available)
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
        // Held from before the cell's start is stamped until its end is
        // recorded: the wait is in no cell's time, and no two cells'
        // windows on this host overlap.
        let _held = match host_lock.as_mut() {
            Some(lock) => match take_host_lock(lock, &info, options, reporter)? {
                Some(held) => Some(held),
                None => break,
            },
            None => None,
        };
        // Setup and prepare, under the host lock, before the cell's clock.
        if let Err(why) = hooks.before_cell(arm_index, &info) {
            if options.stop.is_stopped() {
                // Stopped inside a hook: the cell did not start.
                break;
            }
            info.attempt = store.start_run(run.id)?;
            reporter.report(&Event::CellStarted { cell: &info });
            finish_unstarted(store, reporter, &info, why, 0.0)?;
            failed_fast |= options.fail_fast;
            continue;
        }
        if adopt.is_none() {
            // A job an earlier coordinator left running (it was killed, its
            // login node went away) must not run beside the new attempt.
            if let (Some(job), true) = (&run.slurm_job, slurm) {
                client::cancel(job);
            }
            info.attempt = store.start_run(run.id)?;
        }
        let after = match (&adopt, &chain_tail) {
            (None, Some(tail)) => match client::job_state(tail) {
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
        let outcome = run_cell(
            store,
            plan,
            arm_index,
            &info,
            options,
            reporter,
            place,
            executor.as_ref(),
        )?;
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

    if !slurm && !failed_fast && plan.measurement.rerun_contended > 0 {
        rerun_contended(
            store,
            plan,
            experiment_id,
            options,
            reporter,
            executor.as_ref(),
            local_node.as_ref(),
            host_lock.as_mut(),
            &mut hooks,
        )?;
    }
    hooks.finish(&mut |cell, message| reporter.report(&Event::Warning { cell, message }));

    // The experiment's status comes from all its cells, including those an
    // earlier invocation ran.
    let runs = store.runs(experiment_id)?;
    let summary = summary(
        experiment_id,
        &runs,
        options.stop.is_stopped(),
        started.elapsed(),
    );
    store.set_experiment_status(experiment_id, summary.status)?;
    reporter.report(&Event::Finished {
        experiment_id,
        summary: &summary,
    });
    Ok(summary)
}

/// `[measurement] rerun_contended`: up to that many rounds at the end of
/// the schedule, each running again every completed cell that was
/// contended, beside a fresh cell of the baseline from the same repeat (so
/// the pair is measured under the same conditions), in plan order. Each
/// rerun attempt records why it ran.
#[expect(
    clippy::too_many_arguments,
    reason = "the schedule's context that `run_cell` needs, the host lock and the hooks"
)]
fn rerun_contended(
    store: &mut Store,
    plan: &Plan,
    experiment_id: i64,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
    executor: &dyn Executor,
    node: Option<&crate::store::NodeInfo>,
    mut host_lock: Option<&mut HostLock>,
    hooks: &mut ArmHooks<'_>,
) -> Result<(), RunnerError> {
    for round in 1..=plan.measurement.rerun_contended {
        let runs = store.runs(experiment_id)?;
        let contended: Vec<(&Run, f64, f64)> = runs
            .iter()
            .filter(|r| r.status == RunStatus::Completed)
            .filter_map(|r| {
                let cores = r.contention.foreign_cores()?;
                let limit = plan.measurement.threshold(r.contention.host_cpus);
                (cores > limit).then_some((r, cores, limit))
            })
            .collect();
        if contended.is_empty() {
            break;
        }
        let mut again: Vec<(usize, &Run, String)> = Vec::new();
        for (run, cores, limit) in &contended {
            let note = format!(
                "rerun {round}: attempt {} was contended ({cores:.2} cores of other programs' \
                 CPU, limit {limit:.2})",
                run.attempt
            );
            again.push((0, run, note));
            if run.arm != plan.baseline {
                if let Some(base) = runs
                    .iter()
                    .find(|b| b.arm == plan.baseline && b.repeat == run.repeat)
                {
                    // Stored text, shown as text (escaped) in reports: no
                    // markdown of its own.
                    let note = format!(
                        "rerun {round}: the baseline beside contended arm {} #{}",
                        run.arm, run.repeat
                    );
                    again.push((0, base, note));
                }
            }
        }
        for entry in &mut again {
            entry.0 = plan
                .arms
                .iter()
                .position(|a| a.name == entry.1.arm)
                .unwrap_or(0);
        }
        again.sort_by_key(|(arm, run, _)| plan.cell_rank(*arm, run.repeat.max(1) as u32));
        // A contended baseline cell is rerun once, not also as a partner.
        again.dedup_by_key(|(_, run, _)| run.id);
        let cells = again.len();
        for (position, (arm_index, run, note)) in again.into_iter().enumerate() {
            if options.stop.is_stopped() {
                return Ok(());
            }
            let arm = &plan.arms[arm_index];
            let mut info = CellInfo::of(plan, arm, run, position + 1, cells);
            let _held = match host_lock.as_deref_mut() {
                Some(lock) => match take_host_lock(lock, &info, options, reporter)? {
                    Some(held) => Some(held),
                    None => return Ok(()),
                },
                None => None,
            };
            if let Err(why) = hooks.before_cell(arm_index, &info) {
                // The completed attempt stands; the rerun did not happen.
                reporter.report(&Event::Warning {
                    cell: &info,
                    message: format!("not rerun: {why}"),
                });
                continue;
            }
            info.attempt = store.start_run(run.id)?;
            store.set_run_rerun_note(run.id, &note)?;
            reporter.report(&Event::Warning {
                cell: &info,
                message: note,
            });
            let place = Place {
                nodelist: None,
                adopt: None,
                after: None,
                node,
            };
            run_cell(
                store, plan, arm_index, &info, options, reporter, place, executor,
            )?;
        }
    }
    Ok(())
}

/// Takes the host lock for a cell, saying whom it waits for; `None` when
/// a stop came while waiting.
fn take_host_lock(
    lock: &mut HostLock,
    cell: &CellInfo,
    options: &RunnerOptions,
    reporter: &mut dyn Reporter,
) -> Result<Option<Held>, RunnerError> {
    let path = lock.path().display().to_string();
    let taken = lock.acquire(&|| options.stop.is_stopped(), &mut |holder| {
        let message = match holder {
            Some(h) => format!(
                "waiting for {h}, which is measuring on this host (host lock {path}; \
                 --no-host-lock runs without waiting)"
            ),
            None => format!("waiting for the host lock {path}, which another process holds"),
        };
        reporter.report(&Event::Note { cell, message });
    })?;
    Ok(match taken {
        Acquired::Held(held) => Some(held),
        Acquired::Stopped => None,
    })
}

/// The executor a plan asks for.
fn for_plan(plan: &Plan) -> Box<dyn Executor + '_> {
    match &plan.executor {
        plan::Executor::Local => Box::new(super::local::Local),
        plan::Executor::Slurm(options) => Box::new(Slurm::new(options)),
    }
}

/// The cells of `runs` still to run (not completed), in plan order, each
/// with its arm's index; and whether any of them ran before (a resume).
pub(crate) fn cells_to_run(
    plan: &Plan,
    experiment_id: i64,
    runs: &[Run],
) -> Result<(Vec<(usize, Run)>, bool), RunnerError> {
    let mut todo: Vec<(usize, Run)> = Vec::new();
    let mut resumed = false;
    for run in runs {
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
    Ok((todo, resumed))
}

#[expect(
    clippy::too_many_arguments,
    reason = "one cell's whole context; each argument is a different part of it"
)]
fn run_cell(
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
    // The runner's host is the cell's only for a local cell.
    let local = matches!(plan.executor, plan::Executor::Local);
    if let (true, Some(limit)) = (local, plan.measurement.wait_for_quiet) {
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
    let launched = executor.launch(&cell, place, reporter);
    let launched = match launched {
        Ok(launched) => launched,
        Err(error) => {
            let wall = started.elapsed().as_secs_f64();
            return Ok(finish_unstarted(store, reporter, info, error, wall)?);
        }
    };
    store.set_run_placement(
        info.run_id,
        launched.host.as_deref(),
        launched.job.as_deref(),
    )?;
    if let Some(cpus) = &launched.cpus {
        store.set_run_cpus(info.run_id, &cpus.to_string())?;
    }
    if let Some(dir) = &job_dir {
        store.set_run_slurm_dir(info.run_id, &dir.display().to_string())?;
    }
    if let Some(node) = node {
        store.set_run_node(info.run_id, node)?;
    }

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
    let Ingested {
        counts,
        stdout_log,
        current,
        exit,
        abandoned_pipe,
        store_error,
        timed_out,
    } = ingested;
    finish();
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
        .as_deref()
        .and_then(client::ran_seconds)
        .unwrap_or(wall_seconds);
    if let Some(node) = job_dir.as_deref().and_then(client::node_record) {
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
        .map(|t| (t.text(), t.last_line().map(str::to_string), t.overlong));
    let (mut tail_text, last_line, stderr_overlong) = stderr.unwrap_or_default();
    if stderr_overlong > 0 {
        reporter.report(&Event::Warning {
            cell: &current,
            message: format!(
                "{} on stderr over the {} MiB line cap: cut, counted (runs.overlong_lines)",
                crate::text::counted(stderr_overlong as u64, "line"),
                super::output::MAX_LINE / (1024 * 1024)
            ),
        });
    }
    let problems = crate::store::LineProblems {
        overlong: counts.problems.overlong + stderr_overlong,
        ..counts.problems
    };
    if !stdout_log.is_empty() {
        if !tail_text.is_empty() {
            tail_text.push('\n');
        }
        tail_text.push_str("--- stdout (non-JSON lines) ---\n");
        tail_text.push_str(&stdout_log.text());
    }
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
            last_line,
            wall_seconds,
            timed_out,
        },
    );
    outcome.stderr_tail = (!tail_text.is_empty()).then_some(tail_text);
    outcome.db_wait_seconds = Some((store.lock_wait() - waited_before).as_secs_f64());
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
        cell_dir.as_deref(),
        options.keep_runs,
    )?;
    reporter.report(&Event::CellFinished {
        cell: &current,
        outcome: &outcome,
        lines,
    });
    if local {
        recheck_ceiling(store, &current, reporter)?;
    }
    Ok(outcome)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::run::testkit;

    fn two_arms(extra: &str) -> Plan {
        testkit::plan(&format!(
            "iterations = 1\nrepeats = 2\n{extra}\n[[arms]]\nname = \"a\"\ncommand = \"true\"\n\
             [[arms]]\nname = \"b\"\ncommand = \"true\""
        ))
    }

    fn names(todo: &[(usize, Run)]) -> Vec<String> {
        todo.iter()
            .map(|(_, r)| format!("{}#{}", r.arm, r.repeat))
            .collect()
    }

    #[test]
    fn a_new_experiment_runs_every_cell_in_plan_order() {
        let plan = two_arms("");
        let (store, id) = testkit::recorded(&plan);
        let (todo, resumed) = cells_to_run(&plan, id, &store.runs(id).unwrap()).unwrap();
        // Interleaved by default: a round of every arm, then the next.
        assert_eq!(names(&todo), ["a#1", "b#1", "a#2", "b#2"]);
        assert!(!resumed);
        let plan = two_arms("order = \"sequential\"");
        let (store, id) = testkit::recorded(&plan);
        let (todo, _) = cells_to_run(&plan, id, &store.runs(id).unwrap()).unwrap();
        assert_eq!(names(&todo), ["a#1", "a#2", "b#1", "b#2"]);
    }

    #[test]
    fn a_resume_runs_what_did_not_complete() {
        let plan = two_arms("");
        let (store, id) = testkit::recorded(&plan);
        let mut runs = store.runs(id).unwrap();
        runs[0].status = RunStatus::Completed;
        runs[1].status = RunStatus::Failed;
        let (todo, resumed) = cells_to_run(&plan, id, &runs).unwrap();
        assert_eq!(todo.len(), 3);
        assert!(!names(&todo).contains(&format!("{}#{}", runs[0].arm, runs[0].repeat)));
        assert!(resumed);
    }

    #[test]
    fn a_run_of_an_arm_the_plan_lacks_is_a_mismatch() {
        let plan = two_arms("");
        let (store, id) = testkit::recorded(&plan);
        let mut runs = store.runs(id).unwrap();
        runs[2].arm = "gone".into();
        let err = cells_to_run(&plan, id, &runs).unwrap_err();
        assert!(
            err.to_string().contains("arm `gone`, which the plan lacks"),
            "{err}"
        );
    }
}
