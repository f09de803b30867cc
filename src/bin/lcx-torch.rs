//! `lcx-torch`: every lcx command, linked against libtorch. `lcx` execs it
//! for the commands that train or time the networks; the experiment runner
//! starts its cells with it directly.
use std::process::ExitCode;

fn main() -> ExitCode {
    lcx::cli::quiet_broken_pipe();
    match lcx::cli::run() {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(lcx::cli::exit_code_for(&err))
        }
    }
}
