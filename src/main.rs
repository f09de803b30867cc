//! Thin binary: parse, dispatch, print the error chain, pick the exit code.
use std::process::ExitCode;

fn main() -> ExitCode {
    match lcx::cli::run() {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(lcx::cli::exit_code_for(&err))
        }
    }
}
