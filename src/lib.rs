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

/// `println!` for a person at a terminal: the text goes through the
/// terminal rule ([`lcx_core::escape::terminal`]), so what it quotes from
/// files, names, databases and children shows control characters as
/// escapes instead of obeying them. lcx's own text passes unchanged.
macro_rules! outln {
    ($($arg:tt)*) => {
        println!("{}", lcx_core::escape::terminal(&format!($($arg)*)))
    };
}

/// `print!` by the terminal rule (see [`outln!`]).
macro_rules! out {
    ($($arg:tt)*) => {
        print!("{}", lcx_core::escape::terminal(&format!($($arg)*)))
    };
}

/// `eprintln!` by the terminal rule (see [`outln!`]).
macro_rules! errln {
    ($($arg:tt)*) => {
        eprintln!("{}", lcx_core::escape::terminal(&format!($($arg)*)))
    };
}

/// `println!` of JSON text: what a terminal would obey is written as `\u`
/// escapes ([`lcx_core::escape::json_visible`]), the value unchanged.
macro_rules! jsonln {
    ($($arg:tt)*) => {
        println!("{}", lcx_core::escape::json_visible(&format!($($arg)*)))
    };
}

mod args;
mod bisect;
mod cache;
mod commands;
mod compare;
mod config;
mod db;
mod errors;
mod export;
mod history;
mod import;
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

pub use errors::{
    bad_input, data_for_stdout, exit_code_for, metrics_sink, print_error, quiet_broken_pipe,
    BadInput,
};
