//! `timing = "instructions"`: each run of a command under valgrind's
//! cachegrind, which executes it on a simulated CPU and counts what it did:
//! instructions, and the misses of a simulated two-level cache. The counts
//! depend on the program, its input and its environment, not on what else
//! the host is doing, so a gate on them decides on a busy host (decision
//! 0030). The run takes tens of times longer than a native one; its wall
//! time is kept beside the counts, as a value, never as the measurement.
//!
//! Children the command starts are counted too (`--trace-children=yes`,
//! one output file each, summed): a shell string's `awk` is most of its
//! work. valgrind's own messages go to a file, not the cell's log.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::run_error::{failure, TimingError};

pub const INSTRUCTIONS: &str = "process/instructions";
pub const L1_MISSES: &str = "process/l1_misses";
pub const LL_MISSES: &str = "process/ll_misses";
pub const ESTIMATED_CYCLES: &str = "process/estimated_cycles";
pub const VALGRIND_SECONDS: &str = "process/valgrind_seconds";

/// The program lcx runs the command under.
pub const VALGRIND: &str = "valgrind";

/// How to get valgrind, for the error that says it is missing.
pub const INSTALL_HINT: &str = "install valgrind (Debian/Ubuntu: `sudo apt-get install valgrind`; \
     Fedora/RHEL: `sudo dnf install valgrind`; Arch: `sudo pacman -S valgrind`), or put it on PATH";

/// `valgrind` on `PATH` (`path`: the variable's value), as `execvp` finds
/// it: the first executable file of that name.
pub fn find_valgrind(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .map(|dir| dir.join(VALGRIND))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// What cachegrind counted for one run, summed over every process of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instructions executed (`Ir`).
    pub instructions: u64,
    /// Data reads and writes (`Dr + Dw`).
    pub data: u64,
    /// First-level misses, instruction and data (`I1mr + D1mr + D1mw`).
    pub l1_misses: u64,
    /// Last-level misses (`ILmr + DLmr + DLmw`): the accesses that went to
    /// memory.
    pub ll_misses: u64,
}

impl Counts {
    /// Cycles estimated from the counts, by the model iai-callgrind uses:
    /// an access that hits the first level costs 1, one that hits the last
    /// level 5, one that goes to memory 35. A ranking aid, not a
    /// prediction of any real CPU's cycles.
    pub fn estimated_cycles(&self) -> u64 {
        let accesses = self.instructions + self.data;
        let l1_hits = accesses.saturating_sub(self.l1_misses);
        let ll_hits = self.l1_misses.saturating_sub(self.ll_misses);
        l1_hits + 5 * ll_hits + 35 * self.ll_misses
    }

    fn add(&mut self, other: Counts) {
        self.instructions += other.instructions;
        self.data += other.data;
        self.l1_misses += other.l1_misses;
        self.ll_misses += other.ll_misses;
    }

    /// These counts less `other`'s, never below zero (a shell's start-up
    /// taken off a shell string's run).
    pub fn less(self, other: Counts) -> Counts {
        Counts {
            instructions: self.instructions.saturating_sub(other.instructions),
            data: self.data.saturating_sub(other.data),
            l1_misses: self.l1_misses.saturating_sub(other.l1_misses),
            ll_misses: self.ll_misses.saturating_sub(other.ll_misses),
        }
    }
}

/// One cachegrind output file's totals: its `events:` line names the
/// columns of its `summary:` line. `None` when either is missing or a
/// count is not a number (a file cut short).
pub fn parse_output(text: &str) -> Option<Counts> {
    let mut events: Option<Vec<&str>> = None;
    let mut summary: Option<Vec<u64>> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("events:") {
            events = Some(rest.split_whitespace().collect());
        } else if let Some(rest) = line.strip_prefix("summary:") {
            summary = rest
                .split_whitespace()
                .map(|w| w.parse().ok())
                .collect::<Option<Vec<u64>>>();
        }
    }
    let (events, summary) = (events?, summary?);
    if events.len() != summary.len() || !events.contains(&"Ir") {
        return None;
    }
    let get = |name: &str| {
        events
            .iter()
            .position(|e| *e == name)
            .map_or(0, |i| summary[i])
    };
    Some(Counts {
        instructions: get("Ir"),
        data: get("Dr") + get("Dw"),
        l1_misses: get("I1mr") + get("D1mr") + get("D1mw"),
        ll_misses: get("ILmr") + get("DLmr") + get("DLmw"),
    })
}

/// One run of `program args` under cachegrind, its output files written
/// into `scratch` (emptied after): the counts summed over its processes,
/// and the run's wall time.
pub fn count_once(
    program: &str,
    args: &[String],
    iteration: u32,
    scratch: &Path,
) -> Result<(Counts, f64), TimingError> {
    let out_file = scratch.join("cachegrind.out.%p");
    let log_file = scratch.join("valgrind.log.%p");
    let started = Instant::now();
    let status = Command::new(VALGRIND)
        .arg("--tool=cachegrind")
        .arg("--cache-sim=yes")
        .arg("--trace-children=yes")
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg(format!("--log-file={}", log_file.display()))
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|error| TimingError::Start {
            program: VALGRIND.to_string(),
            error,
        })?;
    let wall = started.elapsed().as_secs_f64();
    let collected = collect(scratch);
    if !status.success() {
        let (how, code) = failure(status);
        return Err(TimingError::Failed {
            iteration,
            program: program.to_string(),
            how: match collected {
                Err(log) if !log.is_empty() => format!("{how} under valgrind: {log}"),
                _ => format!("{how} under valgrind"),
            },
            code,
        });
    }
    match collected {
        Ok(counts) => Ok((counts, wall)),
        Err(log) => Err(TimingError::Failed {
            iteration,
            program: program.to_string(),
            how: format!("left no cachegrind counts ({log})"),
            code: 1,
        }),
    }
}

/// The counts of every output file in `scratch`, summed, the folder
/// emptied; else the first lines of valgrind's log, which say why.
fn collect(scratch: &Path) -> Result<Counts, String> {
    let mut total = Counts::default();
    let mut files = 0;
    let mut log = String::new();
    let entries = std::fs::read_dir(scratch).map_err(|e| e.to_string())?;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        if name.starts_with("cachegrind.out.") {
            match parse_output(&text) {
                Some(c) => {
                    total.add(c);
                    files += 1;
                }
                None => return Err(format!("{name} holds no summary")),
            }
        } else if log.is_empty() {
            log = text
                .lines()
                .filter_map(|l| l.split_once("== ").map(|(_, rest)| rest.trim()))
                .filter(|l| !l.is_empty())
                .take(3)
                .collect::<Vec<_>>()
                .join("; ");
        }
    }
    if files == 0 {
        return Err(if log.is_empty() {
            "valgrind wrote no output file".to_string()
        } else {
            log
        });
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "desc: I1 cache: 32768 B, 64 B, 8-way associative\n\
        cmd: awk BEGIN{}\n\
        events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\n\
        fl=???\n\
        fn=main\n\
        0 10 1 1 4 1 0 2 0 0\n\
        summary: 1000 10 5 300 20 4 100 6 1\n";

    #[test]
    fn a_summary_is_read_by_its_events_line() {
        let c = parse_output(OUTPUT).unwrap();
        assert_eq!(
            c,
            Counts {
                instructions: 1000,
                data: 400,
                l1_misses: 36,
                ll_misses: 10,
            }
        );
        // 1400 accesses: 1364 hit L1, 26 hit LL, 10 went to memory.
        assert_eq!(c.estimated_cycles(), 1364 + 5 * 26 + 35 * 10);
        // Without the cache simulation there is only Ir.
        let bare = parse_output("events: Ir\nsummary: 77\n").unwrap();
        assert_eq!((bare.instructions, bare.l1_misses), (77, 0));
        // A file cut short, or one whose columns disagree, is no count.
        assert_eq!(parse_output("events: Ir I1mr\n"), None);
        assert_eq!(parse_output("events: Ir I1mr\nsummary: 5\n"), None);
        assert_eq!(parse_output("events: Ir\nsummary: x\n"), None);
        assert_eq!(parse_output("events: Dr\nsummary: 5\n"), None);
    }

    #[test]
    fn counts_less_a_shell_never_go_below_zero() {
        let a = Counts {
            instructions: 10,
            data: 5,
            l1_misses: 1,
            ll_misses: 0,
        };
        let b = Counts {
            instructions: 4,
            data: 9,
            l1_misses: 1,
            ll_misses: 3,
        };
        assert_eq!(
            a.less(b),
            Counts {
                instructions: 6,
                data: 0,
                l1_misses: 0,
                ll_misses: 0,
            }
        );
    }

    #[test]
    fn valgrind_is_found_on_path_as_execvp_would() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        // Not executable: skipped, as execvp skips it.
        std::fs::write(a.join(VALGRIND), "").unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(find_valgrind(Some(&path)), None);
        std::fs::write(b.join(VALGRIND), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(b.join(VALGRIND), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_valgrind(Some(&path)), Some(b.join(VALGRIND)));
        assert_eq!(find_valgrind(None), None);
    }
}
