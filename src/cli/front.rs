//! The `lcx` binary's own `cli` module: the torch-free commands only, from
//! the same source files as the library's `cli` (see src/main.rs).

mod compare;
mod config;
mod errors;
mod history;
pub mod light;
mod list;
mod play;
mod query;
mod report;

pub use errors::{bad_input, exit_code_for, quiet_broken_pipe};
