//! What the machine is doing, read from the kernel's files: the CPU time
//! of the whole host, load, clock speeds, swap. The runner samples it
//! around each cell to tell a quiet measurement from a contended one.
//! Every reader takes a [`Root`] (`/` on a real host, a folder of fake
//! files in tests) and answers `None` for what the host does not have
//! (macOS has no `/proc`): unknown is recorded as unknown, never as zero.
//!
//! [`host`] names this machine and boot; [`affinity`] pins a cell to CPUs; [`lock`] keeps two benchmarks on one host from running at once;
//! [`settings`], [`snapshot`] and [`check`] are `lcx system show` and
//! `check`: what is set that adds noise, and how to fix it.

pub mod affinity;
pub mod check;
pub mod gpu;
pub mod host;
pub mod lock;
pub mod proc;
pub mod settings;
pub mod snapshot;

pub use proc::{CpuTimes, Root};

/// The foreign CPU load (cores) above which a cell is contended unless an
/// experiment says otherwise: half a core, or 10 % of the host's CPUs when
/// that is less (on a small host a third of a core already shifts a
/// measurement). `lcx system check` and the runner judge a host alike.
pub fn default_max_foreign_cpu(host_cpus: Option<i64>) -> f64 {
    match host_cpus {
        Some(n) if n > 0 => (0.1 * n as f64).min(0.5),
        _ => 0.5,
    }
}
