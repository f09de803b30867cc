//! How a timed or counted run of a command fails: below both
//! `bench::process` (which times runs) and `bench::cachegrind` (which
//! counts them), so that neither reaches into the other for its errors.

#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    #[error("no command to time")]
    NoCommand,
    // The OS error is in the message, not a source: a chain would print
    // it twice.
    #[error("cannot start `{program}`: {error}")]
    Start {
        program: String,
        error: std::io::Error,
    },
    #[error("waiting for `{program}`: {error}")]
    Wait {
        program: String,
        error: std::io::Error,
    },
    /// The command failed: the run is not a measurement.
    #[error("{} of `{program}` {how}", match iteration {
        0 => "the empty run (timing the shell's start-up)".to_string(),
        n => format!("run {n}"),
    })]
    Failed {
        iteration: u32,
        program: String,
        how: String,
        /// The exit code to pass on (1 for a signal).
        code: i32,
    },
    #[error("writing a metric line: {0}")]
    Write(std::io::Error),
}

/// How a run that did not succeed ended, and the exit code a cell passes
/// on for it (1 for a signal).
pub(super) fn failure(status: std::process::ExitStatus) -> (String, i32) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => (format!("exited with {code}"), code),
        (None, Some(sig)) => (format!("was killed by signal {sig}"), 1),
        (None, None) => ("ended without an exit code".to_string(), 1),
    }
}
