//! What the machine is doing, read from the kernel's files: the CPU time
//! of the whole host, load, clock speeds, swap. The runner samples it
//! around each cell to tell a quiet measurement from a contended one.
//! Every reader takes a [`Root`] (`/` on a real host, a folder of fake
//! files in tests) and answers `None` for what the host does not have
//! (macOS has no `/proc`): unknown is recorded as unknown, never as zero.
//!
//! [`affinity`] pins a cell to CPUs; [`lock`] keeps two benchmarks on one host from running at once;
//! [`settings`], [`snapshot`] and [`check`] are `lcx system show` and
//! `check`: what is set that adds noise, and how to fix it.

pub mod affinity;
pub mod check;
pub mod gpu;
pub mod lock;
pub mod proc;
pub mod settings;
pub mod snapshot;

pub use proc::{CpuTimes, Root};
