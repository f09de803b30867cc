//! Experiments: a TOML file (the format the README and `plan.rs` document) is read and validated into a
//! [`Plan`] (every arm resolved to the exact child command and trainer
//! config), the plan expands to cells (arm × repeat), and [`run`] runs
//! each cell on its executor (a local child process, a Slurm job), writing
//! its JSON lines to the store and emitting [`run::Event`]s that a
//! [`reporter`] turns into a progress bar or plain log lines.
//!
//! Nothing here parses command-line flags; the command line's `run.rs` does that.

pub mod bisect;
pub mod fingerprint;
mod group;
pub mod plan;
pub mod reporter;
pub mod revision;
pub mod run;
pub mod slurm;
pub mod warmup;

pub use plan::{
    Adaptive, Arm, CellSpec, Column, Direction, Fold, Gate, GatePoints, Guard, Order, Plan,
    PlanError, Program, Requirement, Show, Sweep, SweepAxis, SweepPoint, Workload,
};
pub use run::{Event, RunnerError, RunnerOptions, StopSignal, Summary};
