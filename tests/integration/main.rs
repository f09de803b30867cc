//! The one integration-test binary: each module drives the real `lcx`
//! binaries, SQLite files, child processes, git repositories and (with
//! `LCX_SLURM_TESTS=1`) a real Slurm cluster.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers too: a failed unwrap is a failed test"
)]

mod architecture;
mod bench_scripts;
mod binaries;
mod busy_host;
mod commands;
mod config;
mod cpu_check;
mod faults;
mod golden;
mod gpu_check;
mod host_lock;
mod import;
mod import_fuzz;
mod import_hostile;
mod malformed;
mod manage;
mod play;
mod publish;
mod readme;
mod reference;
mod report;
mod revisions;
mod runner;
mod slurm;
mod store;
mod support;
mod sweep;
mod system;
mod train;
mod verdict;
mod workflow;
