//! The command line's torch-free half: every command except `train`,
//! `bench` and `version`, which need libtorch. The `lcx` binary is built
//! from this library alone and runs these commands itself, so `lcx report`
//! or an experiment of command arms starts in milliseconds rather than
//! paying libtorch's 0.7 s of start-up; the rest it hands to `lcx-torch`
//! ([`light::exec_torch_binary`]), which adds them (src/bin/lcx-torch/).
//!
//! This crate does not use lcx-trainer, so nothing here can reach tch.
//! clap stays here: nothing below the command line sees it; each command's
//! module turns its arguments into lcx-core calls.

mod args;
mod bisect;
mod cache;
mod compare;
mod config;
mod errors;
mod export;
mod history;
mod init;
pub mod light;
mod list;
mod play;
mod publish;
mod query;
mod rename;
mod report;
mod rm;
mod run;
mod schema;
mod system;
mod time_process;

pub use errors::{bad_input, exit_code_for, metrics_sink, quiet_broken_pipe, BadInput};
