//! Experiments: a TOML file (the format the README and `plan.rs` document) is read and validated into a
//! [`Plan`] (every arm resolved to the exact child command and trainer
//! config), the plan expands to cells (arm × repeat), and the [`runner`]
//! runs each cell as a child process, writing its JSON lines to the store
//! and emitting [`runner::Event`]s that a [`reporter`] turns into a progress
//! bar or plain log lines.
//!
//! Nothing here parses command-line flags; the command line's `run.rs` does that.

pub mod bisect;
pub mod child;
pub mod fingerprint;
pub mod plan;
pub mod reporter;
pub mod revision;
pub mod runner;
pub mod slurm;
pub mod warmup;

pub use plan::{
    Adaptive, Arm, CellSpec, Column, Direction, Fold, Gate, Guard, Order, Plan, PlanError, Program,
    Requirement, Show, Workload,
};
pub use runner::{Event, RunnerError, RunnerOptions, StopSignal, Summary};
