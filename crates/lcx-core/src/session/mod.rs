//! One run of an experiment, from request to summary, for `lcx run` and
//! `lcx bisect` alike: which experiment (a new one from a file, or an
//! earlier one to resume or attach to), which flags may be combined, the
//! revisions built before anything is recorded, the experiment recorded
//! with this machine's fingerprint, and its cells run. The command line
//! turns flags into a [`RunRequest`] and prints what comes back; every
//! decision is made here, so both commands make it the same way.
//! `bisect.rs` is `lcx bisect`'s search, one such run per probed commit.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::experiment::fingerprint;
use crate::experiment::plan::{self, Overrides, Plan, PlanError};
use crate::experiment::revision::{self, Cache, Planned, RevisionError};
use crate::experiment::run::{
    self, PrecisionCheck, Reporter, RunnerError, RunnerOptions, StopSignal, Summary,
};
use crate::store::{ExperimentStatus, RunStatus, Store, StoreError};

pub mod bisect;
mod dry_run;

pub use dry_run::{asks_about_cuda, dry_run_text, on_this_host, shell_words, HostCan};

/// Which experiment a request runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// A new experiment from this file.
    File(PathBuf),
    /// `--resume`: the unfinished cells of an earlier experiment (an id,
    /// `latest` or a name).
    Resume(String),
    /// `--attach`: the jobs an earlier coordinator left, followed, and its
    /// cells without a job run as a resume runs them.
    Attach(String),
}

/// What `lcx run` (or one probe of `lcx bisect`) was asked to do.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub start: Start,
    /// The command line's changes to the file: a new experiment only.
    pub overrides: Overrides,
    pub db: PathBuf,
    /// Slurm: submit every cell and return (`--detach`).
    pub detach: bool,
    /// Resume even when the last runner was on another host.
    pub takeover: bool,
}

/// This process, as the experiment records it.
#[derive(Debug, Clone)]
pub struct Host {
    /// The binary `Program::Lcx` cells run, asked for its torch facts.
    pub lcx_exe: PathBuf,
    /// The command line, kept with the experiment.
    pub argv: Vec<String>,
    /// The libtorch this lcx links (found when it was built), which its
    /// builds of lcx revisions link too.
    pub libtorch: Option<PathBuf>,
    /// The stop signal the command line installed, if it did before the
    /// builds: Ctrl-C then stops a revision build as it stops a cell.
    pub stop: Option<Arc<StopSignal>>,
}

impl Host {
    /// This process: its own binary and command line.
    pub fn this_process(libtorch: Option<&Path>) -> std::io::Result<Host> {
        Ok(Host {
            lcx_exe: std::env::current_exe()?,
            argv: std::env::args().collect(),
            libtorch: libtorch.map(Path::to_path_buf),
            stop: None,
        })
    }

    /// The same host, whose builds `stop` stops.
    pub fn with_stop(self, stop: Arc<StopSignal>) -> Host {
        Host {
            stop: Some(stop),
            ..self
        }
    }

    /// The build cache of `db` (revisions built once, kept beside it).
    pub fn cache(&self, db: &Path) -> Cache {
        Cache::for_db(db)
            .with_libtorch(self.libtorch.as_deref())
            .with_stop(self.stop.clone())
    }
}

/// Why a request cannot run. [`SessionError::is_user_input`] tells the
/// request's fault (exit 2) from a failure while working (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("--takeover takes over an earlier experiment: give --resume ID or --attach ID")]
    TakeoverNeedsEarlier,
    #[error(
        "--set, --iterations, --warmup, --repeats, --arms, --revision and --executor cannot be \
         combined with {flag}: a resumed experiment keeps what was recorded"
    )]
    OverridesOnResume { flag: &'static str },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("--detach: {0}")]
    NotDetachable(String),
    /// `LCX_HOSTNAME` is no name (a line break, a control character, too
    /// long, not UTF-8).
    #[error(
        "LCX_HOSTNAME (`{}`): {why}; expected the host's name for history as one line of \
         visible text of at most {} characters",
        crate::escape::terminal_short(value, 60),
        plan::MAX_NAME
    )]
    HostName { value: String, why: String },
    /// A revision git cannot find, or a config the revision refuses.
    #[error(transparent)]
    RevisionInput(RevisionError),
    /// A revision that failed to check out or build.
    #[error("preparing the experiment's revisions")]
    Revision(#[source] RevisionError),
    /// The database the user named is missing, foreign or newer, or has
    /// no such experiment.
    #[error(transparent)]
    Database(StoreError),
    #[error("opening the database")]
    Open(#[source] StoreError),
    #[error(
        "experiment {id} is detached: its cells are Slurm jobs that may still run; follow them \
         with `lcx run --attach {id} --db {db}`"
    )]
    Detached { id: i64, db: String },
    #[error("experiment {id} is completed: it has no jobs left to follow")]
    NothingToFollow { id: i64 },
    #[error(
        "experiment {id} is {status}: no coordinator left jobs to follow; \
         `lcx run --resume {id} --db {db}` runs its unfinished cells"
    )]
    NoJobsToFollow {
        id: i64,
        status: ExperimentStatus,
        db: String,
    },
    #[error("recording the experiment into database {db}")]
    Record {
        db: String,
        #[source]
        source: RunnerError,
    },
    /// The experiment is another runner's, or the executor failed.
    #[error(transparent)]
    Runner(RunnerError),
    /// The store failed while the cells ran (a full disk): the experiment
    /// stays `running` and reads `abandoned` once this process is gone.
    #[error("recording experiment {id} into database {db}")]
    Recording {
        id: i64,
        db: String,
        #[source]
        source: RunnerError,
    },
}

impl SessionError {
    /// Whether the request is at fault (a flag, the file, the database
    /// named, an experiment that cannot be resumed so): exit 2.
    pub fn is_user_input(&self) -> bool {
        match self {
            SessionError::TakeoverNeedsEarlier
            | SessionError::OverridesOnResume { .. }
            | SessionError::Plan(_)
            | SessionError::NotDetachable(_)
            | SessionError::HostName { .. }
            | SessionError::RevisionInput(_)
            | SessionError::Detached { .. }
            | SessionError::NothingToFollow { .. }
            | SessionError::NoJobsToFollow { .. } => true,
            SessionError::Database(_) => true,
            SessionError::Revision(_)
            | SessionError::Open(_)
            | SessionError::Record { .. }
            | SessionError::Runner(_)
            | SessionError::Recording { .. } => false,
        }
    }

    fn revision(err: RevisionError) -> SessionError {
        if err.is_user_input() {
            SessionError::RevisionInput(err)
        } else {
            SessionError::Revision(err)
        }
    }

    /// A database that cannot be opened: the user's fault when it is missing,
    /// foreign or newer.
    pub fn opening(err: StoreError) -> SessionError {
        if err.is_user_input() {
            SessionError::Database(err)
        } else {
            SessionError::Open(err)
        }
    }
}

/// A prepared request.
#[derive(Debug)]
pub enum Prepared {
    /// The experiment's cells are ready to run.
    Ready(Box<Session>),
    /// An earlier experiment that is already completed: nothing to run.
    Done { id: i64 },
}

/// A recorded experiment whose cells are about to run.
#[derive(Debug)]
pub struct Session {
    pub store: Store,
    pub plan: Plan,
    pub experiment_id: i64,
    db: PathBuf,
    detach: bool,
    attach: bool,
    takeover: bool,
    /// The revision builds this session's cells run, kept from `cache
    /// prune` for as long as the session lives.
    _leases: revision::Leases,
}

/// How the cells of a [`Session`] run.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Stop at the first failed cell.
    pub fail_fast: bool,
    /// Keep completed training cells' run directories.
    pub keep_runs: bool,
    pub stop: Arc<StopSignal>,
    /// Whether CUDA is usable (`None`: ask the lcx binary when an arm
    /// requires it).
    pub cuda_available: Option<bool>,
    /// Hold the host lock during each local cell (`--no-host-lock`: no).
    pub host_lock: bool,
}

impl RunRequest {
    /// The earlier experiment a resume or attach names.
    fn earlier(&self) -> Option<&str> {
        match &self.start {
            Start::File(_) => None,
            Start::Resume(s) | Start::Attach(s) => Some(s),
        }
    }

    /// Which flags may go together: checked before anything is read.
    pub fn check(&self) -> Result<(), SessionError> {
        let earlier = self.earlier().is_some();
        if self.takeover && !earlier {
            return Err(SessionError::TakeoverNeedsEarlier);
        }
        if earlier && self.overrides != Overrides::default() {
            let flag = match self.start {
                Start::Attach(_) => "--attach",
                _ => "--resume",
            };
            return Err(SessionError::OverridesOnResume { flag });
        }
        check_hostname_override()
    }

    /// The plan a new request reads (validated completely: a bad file
    /// writes nothing), with its file's text.
    fn load(&self) -> Result<Option<(Plan, String)>, SessionError> {
        match &self.start {
            Start::File(file) => Ok(Some(plan::load(file, &self.overrides)?)),
            _ => Ok(None),
        }
    }

    /// What `--dry-run` shows: the plan (the file's, or the stored plan of
    /// the earlier experiment) and the revisions it would build. Nothing
    /// is written, not even a database.
    pub fn dry_run(&self, host: &Host) -> Result<(Plan, Vec<Planned>), SessionError> {
        self.check()?;
        let plan = match self.load()? {
            Some((plan, _)) => plan,
            None => {
                let store = Store::open_read_only(&self.db).map_err(SessionError::opening)?;
                let selector = self.earlier().unwrap_or("latest");
                let experiment = store
                    .find_experiment(selector)
                    .map_err(SessionError::Database)?;
                run::stored_plan(&store, experiment.id).map_err(SessionError::Runner)?
            }
        };
        let builds =
            revision::survey(&plan, &host.cache(&self.db)).map_err(SessionError::revision)?;
        Ok((plan, builds))
    }

    /// Makes the request ready to run: the file validated, every revision
    /// built (a broken one fails before anything is recorded), and a new
    /// experiment recorded, or an earlier one found and checked to be
    /// resumable as asked.
    pub fn prepare(
        &self,
        host: &Host,
        progress: &mut dyn revision::Progress,
    ) -> Result<Prepared, SessionError> {
        self.check()?;
        let cache = &host.cache(&self.db);
        let loaded = self.load()?;
        if let (true, Some((plan, _))) = (self.detach, &loaded) {
            detachable(plan)?;
        }
        let loaded = match loaded {
            Some((mut plan, text)) => {
                let leases = revision::prepare(&mut plan, cache, progress)
                    .map_err(SessionError::revision)?;
                Some((plan, text, leases))
            }
            None => None,
        };
        // A resume needs the database it resumes: a mistyped --db must not
        // leave a new, empty one behind.
        let opened = match loaded {
            Some(_) => Store::open(&self.db),
            None => Store::open_existing(&self.db),
        };
        let mut store = opened.map_err(SessionError::opening)?;
        let db = self.db.display().to_string();
        let (plan, experiment_id, leases) = match loaded {
            Some((plan, text, leases)) => {
                let id = record(&mut store, &plan, &text, host)
                    .map_err(|source| SessionError::Record { db, source })?;
                (plan, id, leases)
            }
            None => {
                let selector = self.earlier().unwrap_or("latest");
                let experiment = store
                    .find_experiment(selector)
                    .map_err(SessionError::Database)?;
                let id = experiment.id;
                let attach = matches!(self.start, Start::Attach(_));
                match (experiment.status, attach) {
                    (ExperimentStatus::Detached, false) => {
                        return Err(SessionError::Detached { id, db })
                    }
                    (ExperimentStatus::Completed, true) => {
                        return Err(SessionError::NothingToFollow { id })
                    }
                    (status @ (ExperimentStatus::Failed | ExperimentStatus::Interrupted), true)
                        if !has_jobs_to_follow(&store, id)
                            .map_err(|e| SessionError::Runner(e.into()))? =>
                    {
                        return Err(SessionError::NoJobsToFollow { id, status, db });
                    }
                    // Completed with no cell at all (marked so by an older
                    // lcx, or by hand): nothing ran, so a resume plans and
                    // runs its cells, as `lcx report --check` says it will.
                    (ExperimentStatus::Completed, false)
                        if !store
                            .runs(id)
                            .map_err(|e| SessionError::Runner(e.into()))?
                            .is_empty() =>
                    {
                        return Ok(Prepared::Done { id })
                    }
                    _ => {}
                }
                let mut plan = run::stored_plan(&store, id).map_err(SessionError::Runner)?;
                if self.detach {
                    detachable(&plan)?;
                }
                // The recorded shas; only what the cache lost is built again.
                let leases = revision::prepare(&mut plan, cache, progress)
                    .map_err(SessionError::revision)?;
                (plan, id, leases)
            }
        };
        Ok(Prepared::Ready(Box::new(Session {
            store,
            plan,
            experiment_id,
            db: self.db.clone(),
            detach: self.detach,
            attach: matches!(self.start, Start::Attach(_)),
            takeover: self.takeover,
            _leases: leases,
        })))
    }
}

impl Session {
    /// Runs the experiment's cells, reporting to `reporter`.
    pub fn run(
        &mut self,
        host: &Host,
        settings: RunSettings,
        reporter: &mut dyn Reporter,
    ) -> Result<Summary, SessionError> {
        let options = RunnerOptions {
            fail_fast: settings.fail_fast,
            lcx_exe: host.lcx_exe.clone(),
            stop: settings.stop,
            cuda_available: settings.cuda_available,
            takeover: self.takeover,
            precise_enough: Some(precision_check()),
            keep_runs: settings.keep_runs,
            detach: self.detach,
            attach: self.attach,
            host_lock: settings.host_lock.then(crate::system::lock::default_path),
        };
        let id = self.experiment_id;
        run::run(&mut self.store, &self.plan, id, &options, reporter).map_err(|e| match e {
            RunnerError::Store(
                StoreError::Taken { .. }
                | StoreError::TakenElsewhere { .. }
                | StoreError::Removed { .. },
            )
            | RunnerError::Executor(_)
            | RunnerError::HostLock(_) => SessionError::Runner(e),
            source => SessionError::Recording {
                id,
                db: self.db.display().to_string(),
                source,
            },
        })
    }

    /// Whether cells are `running` with a Slurm job and its folder
    /// recorded: jobs `--attach` can follow (or ingest, once ended).
    pub fn has_jobs_to_follow(&self) -> Result<bool, StoreError> {
        has_jobs_to_follow(&self.store, self.experiment_id)
    }
}

/// Adaptive repeats stop once the report's judged intervals are within the
/// precision.
fn precision_check() -> PrecisionCheck {
    PrecisionCheck(Arc::new(|store, id, precision| {
        let report = crate::report::builder::load(store, id, Default::default())?;
        Ok(crate::report::builder::precision_reached(
            &report, precision,
        ))
    }))
}

fn has_jobs_to_follow(store: &Store, id: i64) -> Result<bool, StoreError> {
    Ok(store.runs(id)?.iter().any(|r| {
        matches!(r.status, RunStatus::Running | RunStatus::Abandoned)
            && r.slurm_job.is_some()
            && r.slurm_dir.is_some()
    }))
}

/// Records a new experiment with the state of the repository holding its
/// file (the commit its recorded, repository-relative path is read
/// against) and this machine's fingerprint.
fn record(store: &mut Store, plan: &Plan, text: &str, host: &Host) -> Result<i64, RunnerError> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let dir = plan.file.parent().filter(|d| d.is_dir()).unwrap_or(&cwd);
    let git = fingerprint::git_state(dir);
    // Only lcx-torch loads libtorch; an experiment of command arms never does.
    let torch = plan
        .needs_torch()
        .then(|| fingerprint::torch_facts(&host.lcx_exe))
        .flatten();
    // Timed commands report no FLOP rate: their run spends no second of
    // both cores on a probe whose figure nothing reads.
    let ceiling = plan
        .uses_ceiling()
        .then(|| fingerprint::known_ceiling(Some(store), false));
    let fingerprint = fingerprint::probe(torch.as_ref(), ceiling.as_ref());
    run::create_experiment(store, plan, text, host.argv.clone(), git, fingerprint)
}

/// `LCX_HOSTNAME`, when set, held to the rule of names: a fingerprint
/// records it, `lcx history --host` matches it and every report shows it.
/// [`RunRequest::check`] calls it; `lcx run --command` before it writes
/// its file.
pub fn check_hostname_override() -> Result<(), SessionError> {
    match crate::system::host::hostname_override() {
        None => Ok(()),
        Some(Ok(name)) => {
            plan::check_name(&name).map_err(|why| SessionError::HostName { value: name, why })
        }
        Some(Err(value)) => Err(SessionError::HostName {
            value,
            why: "is not UTF-8 text".into(),
        }),
    }
}

/// Why a plan cannot be detached: only Slurm cells outlive `lcx run`, and
/// what needs the coordinator between cells (a node per round, adaptive
/// repeats) cannot happen without one.
fn detachable(plan: &Plan) -> Result<(), SessionError> {
    let file = plan.file.display();
    let why = match &plan.executor {
        plan::Executor::Local => Some(format!(
            "experiment {file} runs its cells locally; detaching needs \
             `[executor] kind = \"slurm\"` (or --executor slurm)"
        )),
        plan::Executor::Slurm(o) if o.placement == plan::Placement::Spread => Some(format!(
            "{file}: `executor.placement = \"spread\"` pins each round to the node its first \
             cell lands on, which needs a coordinator; use same-node or any"
        )),
        plan::Executor::Slurm(_) if plan.adaptive.is_some() => Some(format!(
            "{file}: adaptive repeats decide after each round whether to go on, which needs a \
             coordinator; give `repeats` a number (or --repeats N)"
        )),
        plan::Executor::Slurm(_) => None,
    };
    why.map_or(Ok(()), |why| Err(SessionError::NotDetachable(why)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "name = \"s\"\nworkload = \"command\"\niterations = 1\n\
                        [[arms]]\nname = \"a\"\ncommand = 'echo \"{\\\"t\\\": 1}\"'\n";

    fn host() -> Host {
        Host {
            lcx_exe: PathBuf::from("lcx"),
            argv: vec!["lcx".into(), "run".into()],
            libtorch: None,
            stop: None,
        }
    }

    fn request(start: Start, db: &Path) -> RunRequest {
        RunRequest {
            start,
            overrides: Overrides::default(),
            db: db.to_path_buf(),
            detach: false,
            takeover: false,
        }
    }

    /// A folder with the experiment file `s.toml` and a database path.
    fn folder() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(&file, FILE).unwrap();
        let db = dir.path().join("lcx.db");
        (dir, file, db)
    }

    fn quiet() -> impl FnMut(&str) {
        |_: &str| {}
    }

    #[test]
    fn flags_that_do_not_go_together_are_refused_before_anything_is_read() {
        let missing = Path::new("/nonexistent/lcx.db");
        let mut takeover = request(Start::File("x.toml".into()), missing);
        takeover.takeover = true;
        let err = takeover.check().unwrap_err();
        assert!(matches!(err, SessionError::TakeoverNeedsEarlier));
        assert!(err.is_user_input());
        let mut resume = request(Start::Attach("3".into()), missing);
        resume.overrides.iterations = Some(2);
        let err = resume.prepare(&host(), &mut quiet()).unwrap_err();
        assert!(
            err.to_string().contains("cannot be combined with --attach"),
            "{err}"
        );
        assert!(err.is_user_input());
        assert!(!missing.exists());
    }

    #[test]
    fn a_new_experiment_is_recorded_and_an_earlier_one_resumed_as_its_status_allows() {
        let (_dir, file, db) = folder();
        let Prepared::Ready(mut session) = request(Start::File(file), &db)
            .prepare(&host(), &mut quiet())
            .unwrap()
        else {
            panic!("a new experiment is ready");
        };
        let id = session.experiment_id;
        let settings = RunSettings {
            fail_fast: false,
            keep_runs: false,
            stop: StopSignal::new(),
            cuda_available: Some(false),
            host_lock: false,
        };
        let mut reporter = crate::experiment::reporter::RecordingReporter::default();
        let summary = session.run(&host(), settings, &mut reporter).unwrap();
        assert_eq!(summary.status, ExperimentStatus::Completed);
        drop(session);

        let resumed = request(Start::Resume(id.to_string()), &db)
            .prepare(&host(), &mut quiet())
            .unwrap();
        assert!(matches!(resumed, Prepared::Done { id: done } if done == id));
        let err = request(Start::Attach("latest".into()), &db)
            .prepare(&host(), &mut quiet())
            .unwrap_err();
        assert!(matches!(err, SessionError::NothingToFollow { .. }), "{err}");

        // `detached` is how a running experiment without a coordinator reads.
        let mut store = Store::open(&db).unwrap();
        store
            .set_experiment_status(id, ExperimentStatus::Running)
            .unwrap();
        store.detach_experiment(id).unwrap();
        drop(store);
        let err = request(Start::Resume("s".into()), &db)
            .prepare(&host(), &mut quiet())
            .unwrap_err();
        assert!(err.to_string().contains("lcx run --attach"), "{err}");
        let mut store = Store::open(&db).unwrap();
        store
            .set_experiment_status(id, ExperimentStatus::Failed)
            .unwrap();
        drop(store);
        let err = request(Start::Attach("s".into()), &db)
            .prepare(&host(), &mut quiet())
            .unwrap_err();
        assert!(matches!(err, SessionError::NoJobsToFollow { .. }), "{err}");
        assert!(err.is_user_input());
    }

    #[test]
    fn a_resume_never_makes_a_database() {
        let (_dir, _, db) = folder();
        let err = request(Start::Resume("latest".into()), &db)
            .prepare(&host(), &mut quiet())
            .unwrap_err();
        assert!(err.is_user_input(), "{err}");
        assert!(!db.exists());
    }

    #[test]
    fn only_slurm_cells_without_adaptive_rounds_detach() {
        let (_dir, file, db) = folder();
        let mut local = request(Start::File(file), &db);
        local.detach = true;
        let err = local.prepare(&host(), &mut quiet()).unwrap_err();
        assert!(err.to_string().contains("runs its cells locally"), "{err}");
        assert!(!db.exists(), "a refused detach writes nothing");
    }

    #[test]
    fn a_dry_run_reads_the_file_and_writes_nothing() {
        let (_dir, file, db) = folder();
        let (plan, builds) = request(Start::File(file), &db).dry_run(&host()).unwrap();
        assert_eq!((plan.name.as_str(), builds.len()), ("s", 0));
        assert!(!db.exists());
    }
}
