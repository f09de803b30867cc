//! Runs an experiment's cells and records them.
//!
//! The parts, in the order a cell meets them:
//! - [`schedule`]: which cells run, in what order (plan order, a resume's
//!   rest, adaptive repeats, CUDA requirements, Slurm placement), and
//!   [`rerun`] the contended ones again at the end;
//! - [`attempt`]: one cell from its start to its recorded end;
//! - [`executor::Executor`] ([`local`], [`slurm`]): where a cell's process runs and
//!   how its output comes back, as one stream of [`executor::Msg`]s;
//! - [`line`], [`rows`] and [`ingest`]: stdout lines become metric rows,
//!   committed as they arrive;
//! - [`hooks`]: an arm's setup, prepare and cleanup around its cells;
//! - [`cell`]: what a cell is and how its end becomes an outcome;
//! - [`record`]: the experiment and its cells in the store.
//!
//! The runner owns no terminal: it reports what happens as [`Event`]s to a
//! [`Reporter`] (progress bar, plain log, or a test's recorder), in the
//! manner of cargo-nextest. Memory stays flat however long an experiment
//! runs: lines are streamed, a child's stderr and non-JSON stdout keep
//! bounded tails ([`output`]), and events are handed over one by one.

use std::path::PathBuf;
use std::sync::Arc;

use crate::store::{Store, StoreError};

mod attempt;
pub mod cell;
pub mod executor;
mod hooks;
pub mod ingest;
pub mod line;
pub mod local;
pub mod output;
pub mod placement;
pub mod record;
mod rerun;
mod rows;
pub mod schedule;
pub mod slurm;
pub mod stop;
#[cfg(test)]
mod testkit;
mod watch;

pub use cell::{CellInfo, Event, Reporter, Summary};
pub use record::{create_experiment, stored_plan};
pub use schedule::run;
pub use stop::StopSignal;

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
    #[error(transparent)]
    HostLock(#[from] crate::system::lock::LockError),
    #[error("the stored plan of experiment {id} cannot be read: {source}")]
    BadPlan {
        id: i64,
        #[source]
        source: crate::experiment::plan::StoredPlanError,
    },
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
    /// The host lock file each local cell holds while it runs, so that two
    /// runners on one host never measure at once (`crate::system::lock`);
    /// `None` with `--no-host-lock`. A plan with `host_lock = false` and
    /// Slurm cells (they run on other nodes) take no lock either.
    pub host_lock: Option<PathBuf>,
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
