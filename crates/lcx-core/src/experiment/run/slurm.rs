//! The Slurm executor: a cell as a Slurm job whose script, stdout and
//! records live in a folder on the shared filesystem; the coordinator
//! follows the job's stdout file as it grows and its state from
//! `scontrol`. Also what only Slurm can do: submit every cell ahead as
//! chains of jobs (`max_parallel`, `lcx run --detach`) and follow jobs an
//! earlier coordinator left (`--attach`). Talking to Slurm itself (the job
//! script, `sbatch`, `scontrol`, the file follower) is
//! [`crate::experiment::slurm`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::cell::{
    cell_program, count, process_env, train_dir, Cell, CellInfo, End, Event, Reporter, Summary,
};
use super::executor::{Adopt, Executor, Launched, Msg, Place, StderrSource, CHANNEL_LINES};
use super::output;
use super::placement::Pinning;
use super::record::finish_unstarted;
use super::{RunnerError, RunnerOptions};
use crate::experiment::plan::{Plan, Requirement, SlurmOptions};
use crate::experiment::slurm as client;
use crate::store::{ExperimentStatus, LineProblems, Run, RunOutcome, RunStatus, Store};

/// Cells as Slurm jobs with the experiment's `[executor]` options.
pub(crate) struct Slurm<'a> {
    options: &'a SlurmOptions,
    /// Where new jobs' folders go; `None`: `runs/slurm/` under the
    /// working directory.
    root: Option<PathBuf>,
}

impl<'a> Slurm<'a> {
    pub(crate) fn new(options: &'a SlurmOptions) -> Slurm<'a> {
        Slurm {
            options,
            root: None,
        }
    }

    /// Jobs whose folders go under `root` (which the nodes must see).
    #[cfg(test)]
    pub(crate) fn in_dir(options: &'a SlurmOptions, root: PathBuf) -> Slurm<'a> {
        Slurm {
            options,
            root: Some(root),
        }
    }

    /// A new Slurm cell's folder on the shared filesystem:
    /// `runs/slurm/run-<id>-attempt-<n>-pid<pid>/` under the working
    /// directory. Run ids count per database: the coordinator's pid keeps
    /// the cells of two databases run from one folder apart.
    fn new_dir(&self, info: &CellInfo) -> Result<PathBuf, RunnerError> {
        let root = match &self.root {
            Some(root) => root.clone(),
            None => std::env::current_dir()
                .map_err(|e| RunnerError::Executor(format!("no working directory: {e}")))?
                .join("runs")
                .join("slurm"),
        };
        Ok(root.join(format!(
            "run-{}-attempt-{}-pid{}",
            info.run_id,
            info.attempt,
            std::process::id()
        )))
    }

    /// `lcx run --detach`: submits every cell ([`submit_all`]) and leaves the
    /// experiment to its jobs.
    pub(crate) fn detach(
        &self,
        store: &mut Store,
        plan: &Plan,
        experiment_id: i64,
        todo: Vec<(usize, Run)>,
        options: &RunnerOptions,
        reporter: &mut dyn Reporter,
    ) -> Result<Summary, RunnerError> {
        let started = Instant::now();
        let placement = Pinning::new(plan, &store.runs(experiment_id)?);
        self.submit_all(store, plan, todo, options, reporter, placement)?;
        let runs = store.runs(experiment_id)?;
        let count = |s| count(&runs, s);
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
    pub(crate) fn submit_all(
        &self,
        store: &mut Store,
        plan: &Plan,
        todo: Vec<(usize, Run)>,
        options: &RunnerOptions,
        reporter: &mut dyn Reporter,
        placement: Pinning,
    ) -> Result<(), RunnerError> {
        let mut submitted: Vec<(i64, String)> = Vec::new();
        let result = self.submit_each(
            store,
            plan,
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
                    _ => client::cancel(job),
                }
            }
        }
        result
    }

    /// [`submit_all`]'s loop; every job it submits goes into `submitted`.
    /// It takes submit_all's parameters one for one (hence the repeated
    /// signature) and adds only `submitted`, the list submit_all cleans up.
    #[expect(
        clippy::too_many_arguments,
        reason = "submit_all's own state, split out so that submit_all can cancel what it submitted on any error"
    )]
    fn submit_each(
        &self,
        store: &mut Store,
        plan: &Plan,
        todo: Vec<(usize, Run)>,
        options: &RunnerOptions,
        reporter: &mut dyn Reporter,
        mut placement: Pinning,
        submitted: &mut Vec<(i64, String)>,
    ) -> Result<(), RunnerError> {
        let chains = self.options.max_parallel.max(1) as usize;
        let cells = todo.len();
        let mut last: Vec<Option<String>> = vec![None; chains];
        for (position, (arm_index, run)) in todo.into_iter().enumerate() {
            if options.stop.is_stopped() {
                break;
            }
            let arm = &plan.arms[arm_index];
            if let Some(job) = &run.slurm_job {
                client::cancel(job);
            }
            let info = CellInfo {
                attempt: store.start_run(run.id)?,
                ..CellInfo::of(plan, arm, &run, position + 1, cells)
            };
            let program = cell_program(arm, options);
            let dir = self.new_dir(&info)?;
            let cell_dir = train_dir(plan, arm, &info, Some(&dir));
            let cell = Cell {
                plan,
                arm,
                info: &info,
                options,
                program: &program,
                cell_dir: cell_dir.as_deref(),
                job_dir: Some(&dir),
            };
            let chain = (run.repeat.max(1) as usize - 1) % chains;
            let after = last[chain].clone();
            let nodelist = placement.node_for(run.repeat);
            match self.submit_job(&cell, &dir, nodelist, after.clone()) {
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
                        if let Some(node) = client::wait_placed(&job, &|| stop.is_stopped())
                            .map_err(RunnerError::Executor)?
                        {
                            store.set_run_placement(run.id, Some(&node), None)?;
                            placement.ran(run.repeat, node);
                        }
                    }
                }
                Err(error) => {
                    finish_unstarted(store, reporter, &info, error, 0.0)?;
                }
            }
        }
        Ok(())
    }

    /// folder (script, config, stdout, stderr, the script's records) stays
    /// for reproducibility.
    fn launch_job(
        &self,
        cell: &Cell<'_>,
        dir: &Path,
        nodelist: Option<String>,
        after: Option<String>,
        reporter: &mut dyn Reporter,
    ) -> Result<Launched, String> {
        let job = self.submit_job(cell, dir, nodelist, after)?;
        reporter.report(&Event::Note {
            cell: cell.info,
            message: format!("Slurm job {job} ({})", dir.join("job.sh").display()),
        });
        Ok(follow_job(
            job,
            dir,
            self.options.requeue,
            None,
            cell.options,
        ))
    }

    /// Writes a cell's job script into `dir` and submits it; returns the
    /// job id. `after`: a job it must wait for (`--detach`'s chain).
    fn submit_job(
        &self,
        cell: &Cell<'_>,
        dir: &Path,
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
            job_dir: _,
        } = *cell;
        let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
        // The node resolves paths on the shared filesystem: make them absolute.
        let program = if program.is_absolute() || !program.to_string_lossy().contains('/') {
            program.to_path_buf()
        } else {
            arm.workdir.as_deref().unwrap_or(&cwd).join(program)
        };
        let cell_dir = cell_dir.map(|d| cwd.join(d));
        let options = self.options.for_arm(&arm.slurm);
        let spec = client::JobSpec {
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
        client::submit(&spec)
    }
}

impl Executor for Slurm<'_> {
    fn job_dir(
        &self,
        info: &CellInfo,
        adopt: Option<&Adopt>,
    ) -> Result<Option<PathBuf>, RunnerError> {
        match adopt {
            Some(adopt) => Ok(Some(adopt.dir.clone())),
            None => self.new_dir(info).map(Some),
        }
    }

    fn launch(
        &self,
        cell: &Cell<'_>,
        place: Place<'_>,
        reporter: &mut dyn Reporter,
    ) -> Result<Launched, String> {
        if let Some(adopt) = place.adopt {
            reporter.report(&Event::Note {
                cell: cell.info,
                message: format!(
                    "following Slurm job {} ({} line(s) already recorded)",
                    adopt.job, adopt.stored
                ),
            });
            return Ok(follow_job(
                adopt.job,
                &adopt.dir,
                self.options.requeue,
                adopt.run,
                cell.options,
            ));
        }
        let dir = cell.job_dir.ok_or("a Slurm cell needs a job folder")?;
        self.launch_job(cell, dir, place.nodelist, place.after, reporter)
    }
}

/// The job and folder to follow for a cell under `--attach` (a cell still
/// `running` whose job an earlier coordinator submitted) or after
/// [`Slurm::submit_all`] submitted it ahead (`max_parallel` > 1).
pub(crate) fn adoptable(follow: bool, run: &Run) -> Option<(String, PathBuf)> {
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
pub(crate) fn end_adopted(store: &mut Store, run: &Run, job: &str) -> Result<(), RunnerError> {
    let ended = match client::job_state(job) {
        Ok(Some(state)) => state.is_final(),
        // Forgotten by Slurm: ended, if its script recorded an end.
        Ok(None) => run
            .slurm_dir
            .as_deref()
            .is_some_and(|d| Path::new(d).join("exit").exists()),
        Err(_) => false,
    };
    if ended {
        return Ok(());
    }
    client::cancel(job);
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
            db_wait_seconds: None,
            problems: LineProblems::default(),
        },
    )?;
    Ok(())
}

/// How a job ended, as the cell loop reads any end.
fn job_end(end: client::JobEnd) -> End {
    End {
        exit_code: end.exit_code,
        signal: end.signal,
        how: end.how,
        success: end.success,
        status: end.status,
        cpu_seconds: None,
    }
}

/// Follows a submitted job until it ends (from its stdout's start).
fn follow_job(
    job: String,
    dir: &Path,
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
            client::follow(&job, &dir, output::MAX_LINE, requeue, known_run, |event| {
                let msg = match event {
                    client::Event::Line(bytes) => Msg::Line(bytes),
                    client::Event::Overlong { head, bytes } => Msg::Overlong { head, bytes },
                    client::Event::Placed(node) => Msg::Placed(node),
                    client::Event::Restarted => Msg::Restarted,
                    client::Event::RunStarted(t) => Msg::RunStarted(t),
                    client::Event::Ended(end) => {
                        if tx.send(Msg::Eof).is_err() {
                            return false;
                        }
                        Msg::Ended {
                            end: end.map(job_end),
                            at: std::time::Instant::now(),
                        }
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
        kill: Box::new(move || client::cancel(&cancel)),
        on_end: Box::new(|| {}),
        stderr: StderrSource::File(dir.join("stderr")),
        finish: Box::new(move || stop.clear_job()),
        host: None,
        cpus: None,
        job: Some(job),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::run::testkit;

    #[test]
    fn a_new_jobs_folder_names_its_run_attempt_and_coordinator() {
        let options = SlurmOptions::default();
        let slurm = Slurm::in_dir(&options, PathBuf::from("/shared/jobs"));
        let info = CellInfo {
            run_id: 12,
            arm: "a".into(),
            label: "a".into(),
            repeat: 1,
            repeats: 1,
            position: 1,
            cells: 1,
            iterations: 1,
            variable_iterations: false,
            attempt: 3,
        };
        let dir = slurm.job_dir(&info, None).unwrap().unwrap();
        assert_eq!(
            dir,
            PathBuf::from(format!(
                "/shared/jobs/run-12-attempt-3-pid{}",
                std::process::id()
            ))
        );
        let adopt = Adopt {
            job: "5".into(),
            dir: PathBuf::from("/shared/old"),
            stored: 0,
            run: None,
        };
        assert_eq!(
            slurm.job_dir(&info, Some(&adopt)).unwrap(),
            Some(PathBuf::from("/shared/old"))
        );
    }

    #[test]
    fn only_a_running_cell_with_a_job_and_a_folder_is_followed() {
        let plan = testkit::plan("iterations = 1\n[[arms]]\nname = \"a\"\ncommand = \"true\"");
        let (store, id) = testkit::recorded(&plan);
        let mut run = store.runs(id).unwrap().remove(0);
        run.slurm_job = Some("41".into());
        run.slurm_dir = Some("/shared/run-1".into());
        assert_eq!(
            adoptable(true, &run),
            None,
            "a pending cell is submitted anew"
        );
        run.status = RunStatus::Running;
        assert_eq!(
            adoptable(true, &run),
            Some(("41".into(), PathBuf::from("/shared/run-1")))
        );
        assert_eq!(adoptable(false, &run), None, "only when following");
        run.slurm_dir = None;
        assert_eq!(adoptable(true, &run), None);
    }
}
