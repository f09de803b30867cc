//! The seam between the runner and the place a cell runs. An
//! [`Executor`] starts a cell (a local child, a Slurm job) and hands back
//! one stream of [`Msg`]s that reads the same whichever ran it: stdout
//! lines in order, the end of stdout, how the process ended. Everything
//! after that (ingestion, outcome, recording) knows nothing of executors.

use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use super::cell::{Cell, CellInfo, End, Reporter};
use super::output::{collect_tail, Tail};
use super::RunnerError;
use crate::store::NodeInfo;

/// Where a cell's process runs and how what it prints comes back.
///
/// The contract, which the tests below hold both executors to: the
/// stream carries the process's complete stdout lines in order, then
/// [`Msg::Eof`] and [`Msg::Ended`] with its exit code (or signal); the
/// cell sees the environment of [`super::cell::process_env`]; its stderr
/// tail is there once it ended; [`Launched::kill`] ends it promptly, as
/// an unsuccessful end.
pub(crate) trait Executor {
    /// The folder of the cell's files that outlives its process (a Slurm
    /// job's folder on the shared filesystem); `None` where its pipes are
    /// all there is (a local child).
    fn job_dir(
        &self,
        info: &CellInfo,
        adopt: Option<&Adopt>,
    ) -> Result<Option<PathBuf>, RunnerError>;

    /// Starts the cell, or follows the job an earlier coordinator left for
    /// it (`place.adopt`). An `Err` is a cell that could not start; it
    /// fails with that message.
    fn launch(
        &self,
        cell: &Cell<'_>,
        place: Place<'_>,
        reporter: &mut dyn Reporter,
    ) -> Result<Launched, String>;
}

/// Where and how a cell runs, beyond what the cell itself says.
#[derive(Default)]
pub(crate) struct Place<'a> {
    /// Slurm placement: pin the job to this node.
    pub nodelist: Option<String>,
    pub adopt: Option<Adopt>,
    /// Slurm: a job the new one must wait for (`--attach`'s chain).
    pub after: Option<String>,
    /// A local cell's hardware (this machine).
    pub node: Option<&'a NodeInfo>,
}

/// A job an earlier coordinator submitted, followed instead of submitted
/// again (`--attach`).
pub(crate) struct Adopt {
    pub job: String,
    pub dir: PathBuf,
    /// Metric lines of the current attempt already stored: the first
    /// lines of the job's stdout, which an earlier follower ingested.
    pub stored: u64,
    /// The job run those lines came from (its `started` record).
    pub run: Option<String>,
}

/// What the reader and waiter threads tell the cell loop.
#[derive(Debug)]
pub(crate) enum Msg {
    Line(Vec<u8>),
    Overlong {
        head: Vec<u8>,
        bytes: usize,
    },
    /// The child's stdout reached end of file (or failed).
    Eof,
    /// The child exited (reaped by the waiter thread), or its job ended;
    /// `at` is when that was seen, not when the cell loop got to it (the
    /// loop may have waited for the database meanwhile).
    Ended {
        end: Result<End, String>,
        at: Instant,
    },
    /// Slurm placed the cell's job on this node.
    Placed(String),
    /// Slurm requeued the job and it started again.
    Restarted,
    /// A run of the job began (its `started` record).
    RunStarted(String),
}

/// Lines in flight between the reader thread and the cell loop: bounded, so
/// a child that prints faster than the store writes is slowed down by the
/// pipe instead of growing the runner's memory.
pub(crate) const CHANNEL_LINES: usize = 8192;

/// A started cell: its messages, and what the cell loop calls on it.
pub(crate) struct Launched {
    pub rx: mpsc::Receiver<Msg>,
    /// Stops the cell at once (the store failed).
    pub kill: Box<dyn Fn()>,
    /// The cell's process ended: take what it left behind with it.
    pub on_end: Box<dyn Fn()>,
    pub stderr: StderrSource,
    /// After the loop: the stop signal and the watchdog forget the cell.
    pub finish: Box<dyn FnOnce()>,
    /// The host it runs on, when known at the start (a local child).
    pub host: Option<String>,
    /// Its Slurm job.
    pub job: Option<String>,
    /// The CPUs its process may run on, as the kernel said once it
    /// started (a local child; `None` where unknown).
    pub cpus: Option<crate::system::affinity::CpuSet>,
}

/// Where a cell's stderr tail comes from.
pub(crate) enum StderrSource {
    /// A local child's pipe, read by a thread as it runs.
    Pipe(Arc<Mutex<Tail>>, Option<std::thread::JoinHandle<()>>),
    /// A job's stderr file on the shared filesystem, read once it ended.
    File(PathBuf),
}

impl StderrSource {
    /// The tail; a pipe still held open by an escaped process is not
    /// waited for (`abandoned`).
    pub(crate) fn collect(self, abandoned: bool) -> Arc<Mutex<Tail>> {
        match self {
            StderrSource::Pipe(tail, handle) => {
                if let (false, Some(handle)) = (abandoned, handle) {
                    let _ = handle.join();
                }
                tail
            }
            StderrSource::File(path) => match std::fs::File::open(&path) {
                Ok(file) => {
                    let (tail, handle) = collect_tail(file);
                    let _ = handle.join();
                    tail
                }
                Err(_) => Default::default(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::experiment::plan::Plan;
    use crate::experiment::run::cell::cell_program;
    use crate::experiment::run::testkit::{self, Recorder};
    use crate::experiment::run::RunnerOptions;

    fn command_plan(command: &str) -> Plan {
        testkit::plan(&format!(
            "iterations = 3\n[[arms]]\nname = \"a\"\ncommand = '{command}'"
        ))
    }

    fn info() -> CellInfo {
        CellInfo {
            run_id: 7,
            arm: "a".into(),
            label: "a".into(),
            repeat: 2,
            repeats: 3,
            position: 1,
            cells: 1,
            iterations: 3,
            variable_iterations: false,
            attempt: 1,
        }
    }

    /// Everything the stream carried until the end: stdout lines, whether
    /// `Eof` came, and the end.
    fn drain(launched: &Launched, limit: Duration) -> (Vec<String>, bool, Option<End>) {
        let deadline = Instant::now() + limit;
        let (mut lines, mut eof, mut end) = (Vec::new(), false, None);
        while !(eof && end.is_some()) {
            let left = deadline.saturating_duration_since(Instant::now());
            match launched.rx.recv_timeout(left) {
                Ok(Msg::Line(bytes)) => {
                    lines.push(String::from_utf8_lossy(&bytes).trim_end().to_string())
                }
                Ok(Msg::Eof) => eof = true,
                Ok(Msg::Ended { end: e, .. }) => {
                    (launched.on_end)();
                    end = Some(e.expect("the end is known"));
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        (lines, eof, end)
    }

    /// Runs `command` as cell 7 of arm `a` (repeat 2) on `executor`.
    fn launch(executor: &dyn Executor, plan: &Plan, options: &RunnerOptions) -> Launched {
        let info = info();
        let job_dir = executor.job_dir(&info, None).expect("a job folder");
        let program = cell_program(&plan.arms[0], options);
        let cell = Cell {
            plan,
            arm: &plan.arms[0],
            info: &info,
            options,
            program: &program,
            cell_dir: None,
            job_dir: job_dir.as_deref(),
        };
        executor
            .launch(&cell, Place::default(), &mut Recorder::default())
            .expect("the cell starts")
    }

    /// The contract every executor keeps (see [`Executor`]).
    fn keeps_the_contract(executor: &dyn Executor, limit: Duration) {
        let options = testkit::options();
        // Lines in order, the cell's environment, stderr, the exit code.
        let plan = command_plan(
            "for i in 1 2 3; do echo \"{\\\"iteration\\\": $i, \\\"x\\\": $LCX_REPEAT}\"; done; \
             echo \"$LCX_ARM $LCX_ITERATIONS $LCX_RUN_ID\"; echo boom >&2; exit 3",
        );
        let launched = launch(executor, &plan, &options);
        let (lines, eof, end) = drain(&launched, limit);
        assert_eq!(
            lines,
            [
                r#"{"iteration": 1, "x": 2}"#,
                r#"{"iteration": 2, "x": 2}"#,
                r#"{"iteration": 3, "x": 2}"#,
                "a 3 7",
            ]
        );
        assert!(eof, "the end of stdout is reported");
        let end = end.expect("the end is reported");
        assert_eq!((end.exit_code, end.success), (Some(3), false), "{end:?}");
        let tail = launched.stderr.collect(false);
        assert_eq!(tail.lock().unwrap().last_line(), Some("boom"));
        (launched.finish)();

        // A kill ends a cell that would run for minutes, unsuccessfully.
        let plan = command_plan("echo started; sleep 300");
        let launched = launch(executor, &plan, &options);
        // Once it has started (a job's placement may come first), kill it.
        loop {
            match launched.rx.recv_timeout(limit) {
                Ok(Msg::Line(_)) => break,
                Ok(Msg::Placed(_) | Msg::RunStarted(_)) => {}
                other => panic!("the cell did not start: {other:?}"),
            }
        }
        (launched.kill)();
        let (_, _, end) = drain(&launched, limit);
        let end = end.expect("a killed cell ends");
        assert!(!end.success, "{end:?}");
        (launched.finish)();
    }

    #[test]
    fn the_local_executor_keeps_the_contract() {
        keeps_the_contract(&super::super::local::Local, Duration::from_secs(20));
    }

    #[test]
    fn the_slurm_executor_keeps_the_contract() {
        // A real one-node cluster (`scripts/slurm-cluster.sh`), as in the
        // integration tests; `.ci/run` starts one and sets the variable.
        if std::env::var_os("LCX_SLURM_TESTS").is_none_or(|v| v.is_empty()) {
            eprintln!("slurm contract skipped: set LCX_SLURM_TESTS=1 with a cluster running");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let options = crate::experiment::plan::SlurmOptions::default();
        let slurm = super::super::slurm::Slurm::in_dir(&options, root.path().join("jobs"));
        keeps_the_contract(&slurm, Duration::from_secs(120));
    }
}
