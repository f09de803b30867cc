//! `lcx`: the command line users run.
//!
//! It runs the commands that need no libtorch itself (reports, queries,
//! configs, bot matches) and hands the rest (train, run, bench, version,
//! help) to `lcx-torch` beside it. libtorch runs about 0.6 s of static
//! initialisers when it is loaded, which would otherwise be most of an
//! `lcx report`.
//!
//! Linking the `lcx` library is not enough to keep libtorch out: rustc keeps
//! every exported symbol of every linked crate, and tch's C++ glue comes
//! with them. So this binary compiles the torch-free modules from the same
//! source files, as its own crate, and never mentions `lcx::trainer`. The
//! library's unit tests cover these modules once: under `cfg(test)`
//! (`cargo test --all-targets` builds this target's test harness too) this
//! file compiles to nothing.
#![allow(
    dead_code,
    unused_imports,
    reason = "the shared modules carry items (and re-exports) only lcx-torch uses"
)]

#[cfg(not(test))]
#[path = "bots/mod.rs"]
mod bots;
#[cfg(not(test))]
#[path = "cli/front.rs"]
mod cli;
#[cfg(not(test))]
#[path = "config/mod.rs"]
mod config;
#[cfg(not(test))]
#[path = "game/mod.rs"]
mod game;
#[cfg(not(test))]
#[path = "metrics.rs"]
mod metrics;
#[cfg(not(test))]
#[path = "report/mod.rs"]
mod report;
#[cfg(not(test))]
#[path = "store/mod.rs"]
mod store;

#[cfg(not(test))]
mod experiment {
    //! Experiment files only; the runner lives in lcx-torch.
    pub mod plan;
    pub mod warmup;
    pub use plan::{Arm, Column, Direction, Gate, Order, Plan, Program, Show, Workload};
}

#[cfg(not(test))]
fn main() -> std::process::ExitCode {
    use std::process::ExitCode;
    cli::quiet_broken_pipe();
    let err = match cli::light::run() {
        Ok(Some(code)) => return ExitCode::from(code),
        Ok(None) => cli::light::exec_torch_binary(),
        Err(err) => err,
    };
    eprintln!("error: {err:#}");
    ExitCode::from(cli::exit_code_for(&err))
}

#[cfg(test)]
fn main() {}
