//! `timing = "process"`: lcx times a command itself, as hyperfine does. Each
//! iteration runs the command once (stdin and stdout to /dev/null, stderr
//! kept for the cell's log) and writes one metric line: wall time from spawn
//! to exit, and the user and system CPU time and peak memory that `wait4`
//! reports for it and the children it waited for. The cell's child is
//! `lcx time-process -- COMMAND…`, so such an arm gets the warm-up, repeats,
//! interleaving, contention figures and verdicts of any other.
//!
//! A command that needs a shell (`sh -c '…'`) is timed with the shell's
//! start-up taken off, as hyperfine does: before its runs, the cell times
//! the same shell running nothing (`sh -c ''`) and subtracts that mean from
//! each run's wall, user and system time (never below zero), and each line
//! says how much (`process/shell_seconds`).
//!
//! With [`Measure::Instructions`] (`timing = "instructions"`) each run is
//! counted by cachegrind instead (`bench::cachegrind`), a shell's counts
//! taken off the same way.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::system::proc::wait_with_usage;

pub const WALL: &str = "process/wall_seconds";
pub const USER: &str = "process/user_seconds";
pub const SYSTEM: &str = "process/system_seconds";
pub const MAX_RSS: &str = "process/max_rss_bytes";
pub const SHELL: &str = "process/shell_seconds";

/// Runs of the empty shell whose mean is taken off (after one unmeasured
/// run that loads the shell into the page cache).
const SHELL_RUNS: u32 = 30;

use super::run_error::failure;
pub use super::run_error::TimingError;

/// What one run cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Cost {
    wall: f64,
    user: f64,
    system: f64,
    max_rss: u64,
}

/// What each run of a timed command measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Its wall and CPU time and peak memory (`timing = "process"`).
    Time,
    /// What cachegrind counts of it (`timing = "instructions"`,
    /// `bench::cachegrind`).
    Instructions,
}

/// Runs `argv` `iterations` times, one metric line to `out` per run. With
/// `subtract_shell` (`argv` is `SHELL -c STRING`), the mean cost of `SHELL
/// -c ''` is measured first and taken off each run.
pub fn time_runs(
    argv: &[String],
    iterations: u32,
    subtract_shell: bool,
    measure: Measure,
    out: &mut dyn Write,
) -> Result<(), TimingError> {
    let (program, args) = argv.split_first().ok_or(TimingError::NoCommand)?;
    if subtract_shell && args.is_empty() {
        return Err(TimingError::NoCommand);
    }
    if measure == Measure::Instructions {
        return count_runs(program, args, iterations, subtract_shell, out);
    }
    let shell = match subtract_shell {
        false => None,
        true => Some(shell_cost(program, &args[0])?),
    };
    for iteration in 1..=iterations {
        let cost = run_once(program, args, iteration)?;
        let mut line = serde_json::Map::new();
        line.insert("iteration".into(), iteration.into());
        let less = |x: f64, by: f64| (x - by).max(0.0);
        match shell {
            None => {
                line.insert(WALL.into(), cost.wall.into());
                line.insert(USER.into(), cost.user.into());
                line.insert(SYSTEM.into(), cost.system.into());
            }
            Some(sh) => {
                line.insert(WALL.into(), less(cost.wall, sh.wall).into());
                line.insert(USER.into(), less(cost.user, sh.user).into());
                line.insert(SYSTEM.into(), less(cost.system, sh.system).into());
                line.insert(SHELL.into(), sh.wall.into());
            }
        }
        line.insert(MAX_RSS.into(), cost.max_rss.into());
        write_line(out, line)?;
    }
    Ok(())
}

/// [`time_runs`] under cachegrind: one line of counts per run. A shell
/// string has the counts of `SHELL -c ''` taken off (counted once: the
/// same program counts the same).
fn count_runs(
    program: &str,
    args: &[String],
    iterations: u32,
    subtract_shell: bool,
    out: &mut dyn Write,
) -> Result<(), TimingError> {
    use super::cachegrind::{
        count_once, Counts, ESTIMATED_CYCLES, INSTRUCTIONS, L1_MISSES, LL_MISSES, VALGRIND_SECONDS,
    };
    let scratch = tempfile::Builder::new()
        .prefix("lcx-cachegrind-")
        .tempdir()
        .map_err(TimingError::Write)?;
    let shell = match subtract_shell {
        false => Counts::default(),
        true => {
            count_once(
                program,
                &[args[0].clone(), String::new()],
                0,
                scratch.path(),
            )?
            .0
        }
    };
    for iteration in 1..=iterations {
        let (counts, wall) = count_once(program, args, iteration, scratch.path())?;
        let counts = counts.less(shell);
        let mut line = serde_json::Map::new();
        line.insert("iteration".into(), iteration.into());
        line.insert(INSTRUCTIONS.into(), counts.instructions.into());
        line.insert(L1_MISSES.into(), counts.l1_misses.into());
        line.insert(LL_MISSES.into(), counts.ll_misses.into());
        line.insert(ESTIMATED_CYCLES.into(), counts.estimated_cycles().into());
        line.insert(VALGRIND_SECONDS.into(), wall.into());
        write_line(out, line)?;
    }
    Ok(())
}

fn write_line(
    out: &mut dyn Write,
    line: serde_json::Map<String, serde_json::Value>,
) -> Result<(), TimingError> {
    let line = serde_json::Value::Object(line);
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(TimingError::Write)
}

/// The mean cost of `shell FLAG ''`: a shell's start-up and exit.
fn shell_cost(shell: &str, flag: &str) -> Result<Cost, TimingError> {
    let empty = [flag.to_string(), String::new()];
    run_once(shell, &empty, 0)?;
    let mut sum = Cost::default();
    for _ in 0..SHELL_RUNS {
        let c = run_once(shell, &empty, 0)?;
        sum.wall += c.wall;
        sum.user += c.user;
        sum.system += c.system;
    }
    let n = f64::from(SHELL_RUNS);
    Ok(Cost {
        wall: sum.wall / n,
        user: sum.user / n,
        system: sum.system / n,
        max_rss: 0,
    })
}

/// One run of `program args`, timed from spawn to exit; a failed run is
/// the cell's end (`iteration` 0: the shell's calibration).
fn run_once(program: &str, args: &[String], iteration: u32) -> Result<Cost, TimingError> {
    let spawn = |program: &str, args: &[String]| {
        let started = Instant::now();
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map(|child| (child, started))
    };
    // A script without a `#!` line is a shell script to `execvp` and to
    // every shell; the kernel alone refuses it. Run it as they would.
    let spawned = match spawn(program, args) {
        Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => {
            let with_sh: Vec<String> = std::iter::once(program.to_string())
                .chain(args.iter().cloned())
                .collect();
            spawn("sh", &with_sh)
        }
        other => other,
    };
    let (child, started) = spawned.map_err(|error| TimingError::Start {
        program: program.to_string(),
        error,
    })?;
    let (status, usage) =
        wait_with_usage(child.id() as libc::pid_t).map_err(|error| TimingError::Wait {
            program: program.to_string(),
            error,
        })?;
    let wall = started.elapsed().as_secs_f64();
    drop(child);
    if !status.success() {
        let (how, code) = failure(status);
        return Err(TimingError::Failed {
            iteration,
            program: program.to_string(),
            how,
            code,
        });
    }
    Ok(Cost {
        wall,
        user: usage.user_seconds,
        system: usage.system_seconds,
        max_rss: usage.max_rss_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    /// The lines of `n` timed runs of `words`.
    fn timed(words: &[&str], n: u32, subtract_shell: bool) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        time_runs(&argv(words), n, subtract_shell, Measure::Time, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), n as usize, "{text}");
        lines
    }

    #[test]
    fn each_run_is_one_line_with_its_wall_cpu_and_memory() {
        // A run that burns some CPU in a child it waits for.
        let lines = timed(
            &[
                "sh",
                "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
            ],
            3,
            false,
        );
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
        let err = time_runs(
            &argv(&["sh", "-c", "exit 7"]),
            3,
            false,
            Measure::Time,
            &mut out,
        )
        .unwrap_err();
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
        let err = time_runs(
            &argv(&["/no/such/program"]),
            1,
            false,
            Measure::Time,
            &mut out,
        )
        .unwrap_err();
        assert!(matches!(err, TimingError::Start { .. }), "{err}");
    }

    #[test]
    fn a_shell_string_has_the_shells_start_up_taken_off() {
        for line in &timed(&["sh", "-c", "true; true"], 3, true) {
            let shell = line[SHELL].as_f64().unwrap();
            let wall = line[WALL].as_f64().unwrap();
            // A shell takes time to start; what is left of `true; true`
            // beyond it is small, and never below zero.
            assert!(shell > 0.0 && wall >= 0.0, "{line}");
            assert!(line[USER].as_f64().unwrap() >= 0.0, "{line}");
        }
        // Without a shell to subtract, no line carries the figure.
        assert!(timed(&["true"], 1, false)[0].get(SHELL).is_none());
        // A script without `#!` runs as a shell script, as execvp runs it.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("bare");
        std::fs::write(&script, "exit 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        timed(&[script.to_str().unwrap()], 1, false);
        // A shell that cannot run its empty script is the cell's failure.
        let mut out = Vec::new();
        let err = time_runs(
            &argv(&["false", "-c", "x"]),
            1,
            true,
            Measure::Time,
            &mut out,
        )
        .unwrap_err();
        assert!(
            matches!(err, TimingError::Failed { iteration: 0, .. }),
            "{err}"
        );
    }

    #[test]
    fn instruction_counts_repeat_and_grow_with_the_work() {
        if super::super::cachegrind::find_valgrind(std::env::var_os("PATH").as_deref()).is_none() {
            eprintln!("valgrind is not installed: skipped");
            return;
        }
        let count = |words: &[&str], shell: bool| -> Vec<u64> {
            let mut out = Vec::new();
            time_runs(&argv(words), 2, shell, Measure::Instructions, &mut out).unwrap();
            String::from_utf8(out)
                .unwrap()
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    assert!(
                        v[super::super::cachegrind::ESTIMATED_CYCLES]
                            .as_u64()
                            .unwrap()
                            > 0
                    );
                    v[super::super::cachegrind::INSTRUCTIONS].as_u64().unwrap()
                })
                .collect()
        };
        let small = count(&["awk", "BEGIN{for(i=0;i<20000;i++)s+=i}"], false);
        let large = count(&["awk", "BEGIN{for(i=0;i<200000;i++)s+=i}"], false);
        // The same program counts the same, to a few instructions.
        let spread = small[0].abs_diff(small[1]) as f64 / small[0] as f64;
        assert!(spread < 1e-4, "{small:?}");
        // Ten times the loop: several times the instructions.
        assert!(large[0] > 4 * small[0], "{small:?} {large:?}");
        // A shell string counts its children; the shell's own start-up
        // is taken off.
        let in_shell = count(
            &["sh", "-c", "awk 'BEGIN{for(i=0;i<200000;i++)s+=i}'"],
            true,
        );
        let ratio = in_shell[0] as f64 / large[0] as f64;
        assert!((0.9..1.1).contains(&ratio), "{in_shell:?} {large:?}");
        // A failing command is the cell's failure, under valgrind too.
        let mut out = Vec::new();
        let err = time_runs(
            &argv(&["sh", "-c", "exit 3"]),
            1,
            false,
            Measure::Instructions,
            &mut out,
        )
        .unwrap_err();
        assert!(matches!(err, TimingError::Failed { code: 3, .. }), "{err}");
    }
}
