//! Cells as Slurm jobs: the job script, `sbatch`, the job's state from
//! `scontrol show job` (no accounting needed), `scancel`, and a follower
//! that reads the job's output file as it grows on the shared filesystem
//! and hands its lines to the runner exactly as a local child's pipe does.
//!
//! Slurm places the job; lcx runs no agent on the nodes. The coordinator
//! (`lcx run`) stays the only process that writes the database.
//!
//! The parts:
//! - `script.rs`: what a job runs ([`JobSpec`]), its `#SBATCH` options,
//!   and the `node`/`started`/`exit` records it leaves in the cell's folder;
//! - `submit.rs`: the folder written and the job handed to `sbatch`;
//! - `state.rs`: a job's state from `scontrol`, `scancel`, waiting for a
//!   placement;
//! - `follow.rs`: the output file read as it grows, until the job ends.

use std::time::Duration;

use crate::store::RunStatus;

mod follow;
mod script;
mod state;
mod submit;

pub use follow::{follow, Event, REQUEUE_GRACE};
pub use script::{node_record, ran_seconds, sbatch_options, script, JobSpec};
pub use state::{cancel, job_state, parse_job, wait_placed, JobState};
pub use submit::submit;

/// How often the coordinator looks at a job and its output file.
const POLL: Duration = Duration::from_millis(200);

/// `scontrol` failures in a row after which a job is given up (about a
/// minute of polls).
const SCONTROL_ERRORS: u32 = 300;

/// The end of a job as the runner records it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEnd {
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    /// `COMPLETED (exit code 0)`, `TIMEOUT: time limit`, …
    pub how: String,
    /// COMPLETED with exit code 0.
    pub success: bool,
    /// The status Slurm decided, when it outranks the exit code
    /// (CANCELLED → interrupted, TIMEOUT → failed "time limit").
    pub status: Option<(RunStatus, String)>,
}
