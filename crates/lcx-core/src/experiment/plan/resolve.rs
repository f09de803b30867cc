//! A raw arm resolved into an [`Arm`]: its trainer config (file, `set`
//! entries and `--set`, with the precedence refused where it would be silent),
//! its child command, and the checks on names, revisions and paths.

use super::*;

impl Reader<'_> {
    /// A `set` that another one would silently outrank is an error naming
    /// both: the command line's `--set` against an arm's own `set`, and
    /// any `set` of `run.max_iterations`, which the runner writes from
    /// `iterations` for training cells.
    pub(super) fn check_set_precedence<'s>(
        &self,
        workload: Workload,
        file_set: &'s [String],
        cli_set: &'s [String],
        arms: &'s [RawArm],
    ) -> Result<(), PlanError> {
        let key_of = |arg: &str| {
            crate::config::Set::parse(arg)
                .map(|set| set.path)
                .unwrap_or_default()
        };
        // Two keys collide when one is the other or a table holding it.
        let overlap = |a: &[String], b: &[String]| {
            let n = a.len().min(b.len());
            n > 0 && a[..n] == b[..n]
        };
        let max_iterations = ["run".to_string(), "max_iterations".to_string()];
        let sets_max_iterations =
            |sets: &'s [String]| sets.iter().find(|a| overlap(&key_of(a), &max_iterations));
        if workload == Workload::Train {
            let runner_wins = "the runner sets it from `iterations` for every training cell";
            if let Some(arg) = sets_max_iterations(cli_set) {
                return Err(PlanError::CliSet(SetError {
                    arg: arg.clone(),
                    message: format!("{runner_wins}; use --iterations N"),
                }));
            }
            if let Some(arg) = sets_max_iterations(file_set) {
                return Err(self.err("set", format!("`{arg}`: {runner_wins}; set `iterations`")));
            }
            for arm in arms {
                if let Some(arg) = sets_max_iterations(&arm.set) {
                    return Err(self.err(
                        format!("{}.set", arm.key),
                        format!("`{arg}`: {runner_wins}; set `iterations`"),
                    ));
                }
            }
        }
        for arg in cli_set {
            let key = key_of(arg);
            for arm in arms {
                if let Some(own) = arm.set.iter().find(|a| overlap(&key_of(a), &key)) {
                    return Err(PlanError::CliSet(SetError {
                        arg: arg.clone(),
                        message: format!(
                            "arm `{}` has `{own}` in its own `set` ({}), which would win \
                             over the command line; change the file, or leave the arm out \
                             with --arms",
                            arm.name,
                            self.path.display(),
                        ),
                    }));
                }
            }
        }
        Ok(())
    }

    pub(super) fn base_dir(&self) -> PathBuf {
        let abs = absolute(self.path);
        abs.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// Builds the child argv and, for lcx workloads, loads and validates the
    /// arm's trainer config exactly as the child will see it.
    ///
    /// An arm at a revision keeps its `set` list instead: the revision's own
    /// lcx resolves it once the revision is built, and may know other keys.
    pub(super) fn resolve_arm(
        &self,
        plan: &Plan,
        raw: RawArm,
        base_dir: &Path,
        revision: Option<Revision>,
    ) -> Result<Arm, PlanError> {
        let iterations = plan.iterations.to_string();
        if plan.workload == Workload::Command {
            return Ok(command_arm(raw, iterations, base_dir, revision));
        }
        let mut sets: Vec<String> = plan
            .file_set
            .iter()
            .chain(&plan.cli_set)
            .chain(&raw.set)
            .cloned()
            .collect();
        if plan.workload == Workload::Train {
            sets.push(format!("run.max_iterations={iterations}"));
        }
        let args = lcx_args(plan.workload, &iterations, &raw.args);
        if let Some(mut revision) = revision {
            revision.config_sets = sets;
            return Ok(lcx_arm(raw, args, None, Some(revision)));
        }

        let config_err = |error| PlanError::Config {
            path: self.path.to_path_buf(),
            arm: raw.name.clone(),
            error,
        };
        // Without a config file the benches start from configs/default.toml
        // (as `lcx bench` does by itself) and training from the code defaults.
        let config = match plan.workload {
            Workload::BenchForward | Workload::BenchTrainer => {
                crate::config::load_bench(plan.config.as_deref(), &sets)
            }
            _ => crate::config::load(plan.config.as_deref(), &sets),
        }
        .map_err(config_err)?;
        Ok(lcx_arm(raw, args, Some(config.to_toml()), None))
    }
}

/// An lcx workload's arm: `lcx` with `args`, in the runner's folder. The
/// resolved config (with its digest) travels with the arm, except at a
/// revision, whose own lcx resolves the `set` list once built.
fn lcx_arm(
    raw: RawArm,
    args: Vec<String>,
    config_toml: Option<String>,
    revision: Option<Revision>,
) -> Arm {
    let config_sha256 = config_toml.as_deref().map(|t| sha256_hex(t.as_bytes()));
    Arm {
        name: raw.name,
        label: raw.label,
        requires: raw.requires,
        set: raw.set,
        program: Program::Lcx,
        args,
        env: raw.env,
        workdir: None,
        config_toml,
        config_sha256,
        variable_iterations: false,
        revision,
        slurm: raw.slurm,
        cpus: raw.cpus,
        timeout_seconds: raw.timeout,
        hooks: raw.hooks,
        sweep: raw.sweep,
    }
}

/// A command arm: its command as the file gave it, or (`timing =
/// "process"`) run by lcx's timer, in the experiment file's folder.
fn command_arm(
    raw: RawArm,
    iterations: String,
    base_dir: &Path,
    revision: Option<Revision>,
) -> Arm {
    let mut argv = raw.command.unwrap_or_default();
    let timing = raw.timed.unwrap_or(Timing::Lines);
    let (program, args) = if timing.by_lcx() {
        // lcx runs the command once per iteration and writes the
        // lines (bench::process); the count is on its command line
        // too, so that the report's reproduce line runs as pasted.
        let mut timer = vec![
            "time-process".to_string(),
            "--iterations".into(),
            iterations,
        ];
        if timing == Timing::Instructions {
            timer.push("--instructions".into());
        }
        // A string runs as its words when it holds no shell syntax;
        // otherwise through `sh -c`, the shell's start-up taken off
        // (decision 0023).
        match raw.command_string.as_deref().map(super::shell::words) {
            Some(Some(words)) if !raw.shell => argv = words,
            Some(Some(_)) => timer.push("--subtract-shell".into()),
            Some(None) => timer.push("--subtract-shell".into()),
            None => {}
        }
        timer.push("--".into());
        (Program::Timer, timer.into_iter().chain(argv).collect())
    } else {
        (Program::External(argv.remove(0)), argv)
    };
    Arm {
        name: raw.name,
        label: raw.label,
        requires: raw.requires,
        set: raw.set,
        program,
        args,
        env: raw.env,
        workdir: Some(base_dir.to_path_buf()),
        config_toml: None,
        config_sha256: None,
        variable_iterations: raw.variable_iterations,
        revision,
        slurm: raw.slurm,
        cpus: raw.cpus,
        timeout_seconds: raw.timeout,
        hooks: raw.hooks,
        sweep: raw.sweep,
    }
}

/// The arguments of an lcx workload's cell: its subcommand, the config on
/// stdin, the iteration count where the subcommand takes one, the arm's
/// own `args`, and metric lines on stdout.
fn lcx_args(workload: Workload, iterations: &str, own: &[String]) -> Vec<String> {
    let mut args: Vec<String> = match workload {
        Workload::Train => vec!["train".into()],
        Workload::BenchForward => vec!["bench".into(), "forward".into()],
        Workload::BenchTrainer => vec!["bench".into(), "trainer".into()],
        Workload::Command => Vec::new(),
    };
    // The child reads the config resolved here from its stdin (the
    // runner writes `config_toml`), never the file or the `set` list
    // again: a resume after the file changed runs what was recorded.
    args.extend(["--config".into(), "-".into()]);
    match workload {
        Workload::BenchForward => args.extend(["--reps".into(), iterations.to_string()]),
        Workload::BenchTrainer => args.extend([
            "--runs".into(),
            iterations.to_string(),
            "--warmup".into(),
            "0".into(),
        ]),
        _ => {}
    }
    args.extend(own.iter().cloned());
    args.extend(["--metrics-out".into(), "-".into()]);
    args
}

/// A revision as git will be asked for it: `worktree`, or something `git
/// rev-parse` may resolve. A leading `-` would read as an option.
pub fn check_revision(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err("must not be empty (a branch, tag, sha, HEAD~1 or \"worktree\")".into());
    }
    if value.starts_with('-') || value.chars().any(|c| c.is_whitespace() || c == '\0') {
        return Err(format!(
            "`{value}` is not a revision (no leading `-`, no spaces)"
        ));
    }
    Ok(value.to_string())
}

pub use crate::names::check_arm_name;

pub fn sanitize(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

pub(super) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Removes `.` and folds `..` lexically (the config may not exist yet when
/// the error is reported, so no canonicalize).
pub(super) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
