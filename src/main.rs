//! `lcx`: the command line users run. It runs the torch-free commands and
//! the top-level help itself (`lcx_cli`) and hands the rest (train, bench,
//! version and their help) to `lcx-torch` beside it. This binary does not
//! link libtorch, whose static initialisers alone take about 0.6 s.
use std::process::ExitCode;

use lcx_cli::light;

fn main() -> ExitCode {
    lcx_cli::quiet_broken_pipe();
    let err = match light::run() {
        Ok(Some(code)) => return ExitCode::from(code),
        Ok(None) => light::exec_torch_binary(),
        Err(err) => err,
    };
    lcx_cli::print_error(&err);
    ExitCode::from(lcx_cli::exit_code_for(&err))
}
