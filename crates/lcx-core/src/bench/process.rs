//! `timing = "process"`: lcx times a command itself, as hyperfine does. Each
//! iteration runs the command once (stdin and stdout to /dev/null, stderr
//! kept for the cell's log) and writes one metric line: wall time from spawn
//! to exit, and the user and system CPU time and peak memory that `wait4`
//! reports for it and the children it waited for. The cell's child is
//! `lcx time-process -- COMMAND…`, so such an arm gets the warm-up, repeats,
//! interleaving, contention figures and verdicts of any other.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::system::proc::wait_with_usage;

pub const WALL: &str = "process/wall_seconds";
pub const USER: &str = "process/user_seconds";
pub const SYSTEM: &str = "process/system_seconds";
pub const MAX_RSS: &str = "process/max_rss_bytes";

#[derive(Debug, thiserror::Error)]
pub enum TimingError {
    #[error("no command to time")]
    NoCommand,
    #[error("cannot start `{program}`: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("waiting for `{program}`: {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
    /// The command failed: the run is not a measurement.
    #[error("run {iteration} of `{program}` {how}")]
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

/// Runs `argv` `iterations` times, one metric line to `out` per run.
pub fn time_runs(argv: &[String], iterations: u32, out: &mut dyn Write) -> Result<(), TimingError> {
    let (program, args) = argv.split_first().ok_or(TimingError::NoCommand)?;
    for iteration in 1..=iterations {
        let started = Instant::now();
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|source| TimingError::Start {
                program: program.clone(),
                source,
            })?;
        let (status, usage) =
            wait_with_usage(child.id() as libc::pid_t).map_err(|source| TimingError::Wait {
                program: program.clone(),
                source,
            })?;
        let wall = started.elapsed().as_secs_f64();
        drop(child);
        if !status.success() {
            use std::os::unix::process::ExitStatusExt;
            let (how, code) = match (status.code(), status.signal()) {
                (Some(code), _) => (format!("exited with {code}"), code),
                (None, Some(sig)) => (format!("was killed by signal {sig}"), 1),
                (None, None) => ("ended without an exit code".to_string(), 1),
            };
            return Err(TimingError::Failed {
                iteration,
                program: program.clone(),
                how,
                code,
            });
        }
        let mut line = serde_json::Map::new();
        line.insert("iteration".into(), iteration.into());
        line.insert(WALL.into(), wall.into());
        line.insert(USER.into(), usage.user_seconds.into());
        line.insert(SYSTEM.into(), usage.system_seconds.into());
        line.insert(MAX_RSS.into(), usage.max_rss_bytes.into());
        let line = serde_json::Value::Object(line);
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(TimingError::Write)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn each_run_is_one_line_with_its_wall_cpu_and_memory() {
        let mut out = Vec::new();
        // A run that burns some CPU in a child it waits for.
        let cmd = argv(&[
            "sh",
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
        ]);
        time_runs(&cmd, 3, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(line["iteration"], i as u64 + 1);
            let wall = line[WALL].as_f64().unwrap();
            let cpu = line[USER].as_f64().unwrap() + line[SYSTEM].as_f64().unwrap();
            assert!(wall > 0.0 && cpu > 0.0 && cpu <= wall * 1.5, "{line}");
            assert!(line[MAX_RSS].as_u64().unwrap() > 0, "{line}");
        }
    }

    #[test]
    fn a_failing_run_stops_the_cell_with_its_code() {
        let mut out = Vec::new();
        let err = time_runs(&argv(&["sh", "-c", "exit 7"]), 3, &mut out).unwrap_err();
        assert!(
            matches!(
                err,
                TimingError::Failed {
                    iteration: 1,
                    code: 7,
                    ..
                }
            ),
            "{err}"
        );
        assert!(out.is_empty());
        let err = time_runs(&argv(&["/no/such/program"]), 1, &mut out).unwrap_err();
        assert!(matches!(err, TimingError::Start { .. }), "{err}");
    }
}
