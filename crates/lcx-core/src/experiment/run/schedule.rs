//! Which cells run, and in what order: a new experiment runs everything in
//! plan order; a resume the cells not completed; adaptive repeats stop
//! after the round whose data suffice; an arm that requires CUDA is
//! skipped where there is none; Slurm cells are pinned to nodes as
//! `[executor] placement` asks. One cell from its start to its record is
//! [`super::attempt`]'s, the contended cells' reruns [`super::rerun`]'s.

use std::time::Instant;

use super::attempt::run_cell;
use super::cell::{summary, CellInfo, Event, Reporter, Summary};
use super::executor::{Adopt, Executor, Place};
use super::hooks::ArmHooks;
use super::placement::Pinning;
use super::record::finish_unstarted;
use super::slurm::{adoptable, end_adopted, Slurm};
use super::{RunnerError, RunnerOptions};
use crate::experiment::plan::{self, Arm, Plan, Requirement};
use crate::experiment::slurm as client;
use crate::store::{ExperimentStatus, NodeInfo, Run, RunOutcome, RunStatus, RunnerIdentity, Store};
use crate::system::lock::{Acquired, Held, HostLock};

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
    let invocation = Invocation {
        plan,
        experiment_id,
        options,
    };
    let (todo, placement) = begin(store, invocation, reporter)?;
    let slurm = match &plan.executor {
        plan::Executor::Slurm(o) => Some(Slurm::new(o)),
        plan::Executor::Local => None,
    };
    if let (true, Some(slurm)) = (options.detach, &slurm) {
        return slurm.detach(store, plan, experiment_id, todo, options, reporter);
    }
    // Several cells in flight: submit them all, then follow each in plan
    // order; the jobs' own records give each cell's time and node.
    let parallel = matches!(&plan.executor, plan::Executor::Slurm(o) if o.max_parallel > 1);
    let (todo, placement) = match (&slurm, parallel && !options.stop.is_stopped()) {
        (Some(slurm), true) => submit_ahead(store, invocation, slurm, todo, placement, reporter)?,
        _ => (todo, placement),
    };
    let mut schedule = Schedule::new(invocation, &todo, placement, slurm.is_some(), parallel);
    let mut cells_left = todo.into_iter().enumerate();
    for (position, (arm_index, run)) in cells_left.by_ref() {
        if schedule.cell(store, reporter, position, arm_index, &run)? == Flow::Stop {
            break;
        }
    }
    // Jobs submitted by `--detach` for cells this invocation stopped
    // before: they must not run on unobserved.
    for (_, (_, run)) in cells_left {
        if let Some((job, _)) = adoptable(schedule.follow, &run) {
            end_adopted(store, &run, &job)?;
        }
    }
    schedule.end(store, reporter)?;
    finish(store, invocation, started, reporter)
}

/// What every step of one invocation reads and none changes.
#[derive(Clone, Copy)]
pub(super) struct Invocation<'a> {
    pub plan: &'a Plan,
    pub experiment_id: i64,
    pub options: &'a RunnerOptions,
}

/// Claims the experiment and says what this invocation runs; returns the
/// cells to run, in plan order, and the Slurm placement their experiment's
/// earlier cells imply.
fn begin(
    store: &mut Store,
    invocation: Invocation<'_>,
    reporter: &mut dyn Reporter,
) -> Result<(Vec<(usize, Run)>, Pinning), RunnerError> {
    let Invocation {
        plan,
        experiment_id,
        options,
    } = invocation;
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
    Ok((todo, Pinning::new(plan, &runs)))
}

/// Several Slurm cells in flight (`max_parallel` above 1): every cell's
/// job is submitted ahead, and the schedule then follows each. Returns the
/// cells to follow, in plan order, and the placement now that the jobs
/// are submitted.
fn submit_ahead(
    store: &mut Store,
    invocation: Invocation<'_>,
    slurm: &Slurm,
    todo: Vec<(usize, Run)>,
    placement: Pinning,
    reporter: &mut dyn Reporter,
) -> Result<(Vec<(usize, Run)>, Pinning), RunnerError> {
    // Unpacked as in `begin`: the lines the two share are the parameter
    // list that `Invocation` bundles, not logic to share.
    let Invocation {
        plan,
        experiment_id,
        options,
    } = invocation;
    // Cells an earlier coordinator left jobs for are followed, the rest
    // submitted.
    let (adopt, submit): (Vec<_>, Vec<_>) = todo
        .into_iter()
        .partition(|(_, run)| adoptable(options.attach, run).is_some());
    slurm.submit_all(store, plan, submit, options, reporter, placement)?;
    let placement = Pinning::new(plan, &store.runs(experiment_id)?);
    let runs = store.runs(experiment_id)?;
    let mut todo: Vec<(usize, Run)> = adopt;
    for run in runs {
        if run.status == RunStatus::Running && !todo.iter().any(|(_, r)| r.id == run.id) {
            if let Some(arm) = plan.arms.iter().position(|a| a.name == run.arm) {
                todo.push((arm, run));
            }
        }
    }
    todo.sort_by_cached_key(|(arm, run)| plan.cell_rank(*arm, run.repeat.max(1) as u32));
    Ok((todo, placement))
}

/// Whether the schedule goes on after a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flow {
    Next,
    /// A stop, `--fail-fast`, or a stop while waiting for the host lock
    /// or inside a hook: no further cell starts.
    Stop,
}

/// What the schedule carries from one cell to the next.
pub(super) struct Schedule<'a> {
    pub invocation: Invocation<'a>,
    pub executor: Box<dyn Executor + 'a>,
    /// The cells run as Slurm jobs.
    pub slurm: bool,
    /// Follow jobs already submitted (by `--detach`, an earlier
    /// coordinator, or just now) instead of submitting them.
    pub follow: bool,
    pub placement: Pinning,
    /// Under `--attach`, the last job of the chain an earlier coordinator
    /// left: a cell submitted now waits for it, so that cells still run
    /// one at a time.
    pub chain_tail: Option<String>,
    /// A local cell runs on this machine; a Slurm job records its node.
    pub local_node: Option<NodeInfo>,
    /// Whether CUDA is usable, once asked (`None`: not asked yet).
    pub cuda: Option<Option<bool>>,
    /// One benchmark per host at a time; a Slurm cell runs on another node.
    pub host_lock: Option<HostLock>,
    pub hooks: ArmHooks<'a>,
    /// How many cells this invocation runs, and each one's repeat (its
    /// round), in order.
    pub cells: usize,
    pub rounds: Vec<i64>,
    /// A cell failed under `--fail-fast`.
    pub failed_fast: bool,
    /// Adaptive repeats have enough data: why, for each cell left.
    pub enough: Option<String>,
}

impl<'a> Schedule<'a> {
    /// The schedule of `todo`, in that order; `parallel`: its Slurm jobs
    /// were all submitted ahead.
    fn new(
        invocation: Invocation<'a>,
        todo: &[(usize, Run)],
        placement: Pinning,
        slurm: bool,
        parallel: bool,
    ) -> Self {
        let Invocation { plan, options, .. } = invocation;
        let follow = options.attach || parallel;
        Schedule {
            invocation,
            executor: for_plan(plan),
            slurm,
            follow,
            placement,
            chain_tail: todo
                .iter()
                .rev()
                .find_map(|(_, run)| adoptable(follow, run).map(|(job, _)| job)),
            local_node: (!slurm).then(crate::experiment::fingerprint::node),
            cuda: options.cuda_available.map(Some),
            host_lock: match (&options.host_lock, plan.host_lock && !slurm) {
                (Some(path), true) => Some(HostLock::new(path, &plan.name)),
                _ => None,
            },
            hooks: ArmHooks::new(plan, &options.stop),
            cells: todo.len(),
            rounds: todo.iter().map(|(_, r)| r.repeat).collect(),
            failed_fast: false,
            enough: None,
        }
    }

    /// Takes this invocation's host lock, where it has one, for `cell`:
    /// `None` when a stop came while waiting, else the guard to keep until
    /// the cell's end is recorded (itself `None` when there is no lock).
    pub(super) fn hold_host(
        &mut self,
        cell: &CellInfo,
        reporter: &mut dyn Reporter,
    ) -> Result<Option<Option<Held>>, RunnerError> {
        let options = self.invocation.options;
        Ok(match self.host_lock.as_mut() {
            Some(lock) => take_host_lock(lock, cell, options, reporter)?.map(Some),
            None => Some(None),
        })
    }

    /// Runs or skips the cell `run` of arm `arm_index`, the `position`-th
    /// (from 0) of this invocation.
    fn cell(
        &mut self,
        store: &mut Store,
        reporter: &mut dyn Reporter,
        position: usize,
        arm_index: usize,
        run: &Run,
    ) -> Result<Flow, RunnerError> {
        let Invocation { plan, options, .. } = self.invocation;
        if options.stop.is_stopped() || self.failed_fast {
            // This cell is not run: an adopted job of it is cancelled.
            if let Some(job) = adoptable(self.follow, run) {
                end_adopted(store, run, &job.0)?;
            }
            return Ok(Flow::Stop);
        }
        let arm = &plan.arms[arm_index];
        let mut info = CellInfo::of(plan, arm, run, position + 1, self.cells);
        if let Some(reason) = self.skip_reason(arm) {
            store.skip_run(run.id, &reason)?;
            reporter.report(&Event::CellSkipped {
                cell: &info,
                reason: &reason,
            });
            return Ok(Flow::Next);
        }
        // The last cell of a round: adaptive repeats may stop after it.
        let round_ends = self.rounds.get(position + 1) != Some(&run.repeat);
        let adopt = adoptable(self.follow, run).map(|(job, dir)| Adopt {
            job,
            dir,
            stored: run.iterations_done.max(0) as u64,
            run: run.slurm_run.clone(),
        });
        // Held from before the cell's start is stamped until its end is
        // recorded: the wait is in no cell's time, and no two cells'
        // windows on this host overlap.
        let Some(_held) = self.hold_host(&info, reporter)? else {
            return Ok(Flow::Stop);
        };
        // Setup and prepare, under the host lock, before the cell's clock.
        if let Err(why) = self.hooks.before_cell(arm_index, &info) {
            if options.stop.is_stopped() {
                // Stopped inside a hook: the cell did not start.
                return Ok(Flow::Stop);
            }
            info.attempt = store.start_run(run.id)?;
            reporter.report(&Event::CellStarted { cell: &info });
            finish_unstarted(store, reporter, &info, why, 0.0)?;
            self.failed_fast |= options.fail_fast;
            return Ok(Flow::Next);
        }
        if adopt.is_none() {
            // A job an earlier coordinator left running (it was killed, its
            // login node went away) must not run beside the new attempt.
            if let (Some(job), true) = (&run.slurm_job, self.slurm) {
                client::cancel(job);
            }
            info.attempt = store.start_run(run.id)?;
        }
        let place = self.place(run.repeat, adopt);
        let executor = self.executor.as_ref();
        let outcome = run_cell(
            store, plan, arm_index, &info, options, reporter, place, executor,
        )?;
        self.after_cell(store, run, &outcome, round_ends)?;
        Ok(Flow::Next)
    }

    /// Why a cell of `arm` is skipped, if it is: adaptive repeats already
    /// have enough data, or the arm requires CUDA and there is none.
    fn skip_reason(&mut self, arm: &Arm) -> Option<String> {
        if let Some(reason) = &self.enough {
            return Some(format!("not needed: {reason}"));
        }
        // On Slurm the job asks for a GPU (`gres`); the coordinator's own
        // devices say nothing about the nodes'.
        if arm.requires != Some(Requirement::Cuda) || self.slurm {
            return None;
        }
        let lcx_exe = &self.invocation.options.lcx_exe;
        let available = *self.cuda.get_or_insert_with(|| {
            crate::experiment::fingerprint::torch_facts(lcx_exe).map(|t| t.cuda_available)
        });
        let reason = match available {
            Some(true) => return None,
            Some(false) => "requires CUDA, and no CUDA device is available",
            None => "requires CUDA, and `lcx version --json` did not say whether a CUDA device is available",
        };
        Some(reason.to_string())
    }

    /// Where a cell of round `repeat` runs: the node it is pinned to, the
    /// job it follows (`adopt`) or waits for, this machine's hardware.
    fn place(&self, repeat: i64, adopt: Option<Adopt>) -> Place<'_> {
        let after = match (&adopt, &self.chain_tail) {
            (None, Some(tail)) => match client::job_state(tail) {
                Ok(Some(state)) if !state.is_final() => Some(tail.clone()),
                _ => None,
            },
            _ => None,
        };
        Place {
            nodelist: self.placement.node_for(repeat),
            adopt,
            after,
            node: self.local_node.as_ref(),
        }
    }

    /// What a cell's end means for the cells after it: the node its round
    /// ran on, a failure under `--fail-fast`, and after a round's last
    /// cell, whether adaptive repeats have enough data.
    fn after_cell(
        &mut self,
        store: &Store,
        run: &Run,
        outcome: &RunOutcome,
        round_ends: bool,
    ) -> Result<(), RunnerError> {
        let Invocation {
            plan,
            experiment_id,
            options,
        } = self.invocation;
        if let Some(host) = store.run(run.id)?.and_then(|r| r.host) {
            self.placement.ran(run.repeat, host);
        }
        if outcome.status == RunStatus::Failed && options.fail_fast {
            self.failed_fast = true;
        }
        if let (Some(a), Some(check), true) = (&plan.adaptive, &options.precise_enough, round_ends)
        {
            if run.repeat >= i64::from(a.min) && run.repeat < i64::from(a.max) {
                if let Some(why) = (check.0)(store, experiment_id, a.precision)? {
                    self.enough = Some(format!("stopped after round {}: {why}", run.repeat));
                }
            }
        }
        Ok(())
    }

    /// After the last cell: `[measurement] rerun_contended`'s rounds, then
    /// every started arm's cleanup.
    fn end(mut self, store: &mut Store, reporter: &mut dyn Reporter) -> Result<(), RunnerError> {
        let plan = self.invocation.plan;
        if !self.slurm && !self.failed_fast && plan.measurement.rerun_contended > 0 {
            self.rerun_contended(store, reporter)?;
        }
        self.hooks
            .finish(&mut |cell, message| reporter.report(&Event::Warning { cell, message }));
        Ok(())
    }
}

/// The experiment's status comes from all its cells, including those an
/// earlier invocation ran.
fn finish(
    store: &mut Store,
    invocation: Invocation<'_>,
    started: Instant,
    reporter: &mut dyn Reporter,
) -> Result<Summary, RunnerError> {
    let Invocation {
        experiment_id,
        options,
        ..
    } = invocation;
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
    todo.sort_by_cached_key(|(arm, run)| plan.cell_rank(*arm, run.repeat.max(1) as u32));
    Ok((todo, resumed))
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
