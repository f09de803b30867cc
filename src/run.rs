//! `lcx run FILE` / `lcx run --resume ID` / `lcx run --attach ID`: the
//! flags become a [`RunRequest`]; lcx-core's session validates, records
//! and runs it; this prints what came of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use lcx_core::experiment::run::{RunnerError, StopSignal};
use lcx_core::experiment::{plan, reporter};
use lcx_core::session::{self, Host, Prepared, RunRequest, RunSettings, Start};
use lcx_core::store::ExperimentStatus;

use crate::args::DbArgs;

/// Exit code after Ctrl-C / SIGTERM (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx run experiments/option-b.toml\n  lcx run quick.toml --iterations 20 --repeats 3\n  lcx run --command 'sleep 0.05'\n  lcx run -n old --command 'sleep 0.05' -n new --command 'sleep 0.06' --runs 20\n  lcx run -P ms 10 30 --command 'sleep 0.0{ms}'\n  lcx run --resume latest\n\nEnvironment: LCX_DB (the database), LCX_HOSTNAME (the host's name in the experiment's fingerprint: on CI, name the runner's kind so that its jobs form one series in `lcx history`)."
)]
pub struct Args {
    /// The experiment file (TOML).
    #[arg(
        required_unless_present_any = ["resume", "attach", "commands"],
        conflicts_with_all = ["resume", "attach", "commands"]
    )]
    file: Option<PathBuf>,
    /// Time commands without a file, as hyperfine does: each is an arm
    /// that lcx times run by run (`timing = "process"`), the first the
    /// baseline; 10 runs after 1 warm-up, 3 interleaved repeats. A string
    /// of plain words runs without a shell; one with shell syntax through
    /// `sh -c`, the shell's start-up taken off. Repeatable.
    #[arg(long = "command", value_name = "CMD", conflicts_with_all = ["resume", "attach"])]
    commands: Vec<String>,
    /// The arm name of each --command, in order (default cmd1, cmd2, …).
    #[arg(
        short = 'n',
        long = "command-name",
        value_name = "NAME",
        requires = "commands"
    )]
    command_names: Vec<String>,
    /// The experiment's name with --command (default: one made from the
    /// commands, so the same commands share one history).
    #[arg(long, value_name = "NAME", requires = "commands")]
    name: Option<String>,
    /// With --command: an arm per value of VAR from MIN to MAX (integers),
    /// `{VAR}` in the commands replaced by it (hyperfine's -P) and `$VAR`
    /// set to it unless lcx's environment has a VAR already; repeatable,
    /// the values crossed.
    #[arg(
        short = 'P',
        long = "parameter-scan",
        num_args = 3,
        value_names = ["VAR", "MIN", "MAX"],
        allow_negative_numbers = true,
        requires = "commands"
    )]
    parameter_scan: Vec<String>,
    /// With --command: an arm per value of VAR (comma-separated), as -P
    /// (hyperfine's -L); repeatable, the values crossed.
    #[arg(
        short = 'L',
        long = "parameter-list",
        num_args = 2,
        value_names = ["VAR", "VALUES"],
        requires = "commands"
    )]
    parameter_list: Vec<String>,
    /// Run the missing, failed and interrupted cells of an earlier
    /// experiment: an id, `latest`, or an experiment name.
    #[arg(long, value_name = "ID|latest|NAME", conflicts_with = "attach")]
    resume: Option<String>,
    /// Slurm: submit every cell as a job (chained, so they run one at a
    /// time in plan order) and exit; the jobs outlive this process.
    #[arg(long, conflicts_with_all = ["attach", "fail_fast", "dry_run"])]
    detach: bool,
    /// Follow the jobs of a detached experiment (or of one whose
    /// coordinator died): ingest what they wrote, follow the rest, and run
    /// its cells that have no job, as --resume does.
    #[arg(long, value_name = "ID|latest|NAME")]
    attach: Option<String>,
    /// Override a trainer config key for every arm (after the file's `set`,
    /// before each arm's own); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Replace the file's `iterations`: every run of a cell, its warm-up
    /// included.
    #[arg(long, value_name = "N", value_parser = crate::args::count, allow_hyphen_values = true)]
    iterations: Option<u32>,
    /// Runs of a cell after its warm-up (hyperfine's --runs): `iterations`
    /// becomes N plus the warm-up.
    #[arg(
        short = 'r',
        long,
        value_name = "N",
        value_parser = crate::args::count,
        allow_hyphen_values = true,
        conflicts_with = "iterations"
    )]
    runs: Option<u32>,
    /// Replace the file's `warmup` (a count or `auto`): the first N runs of
    /// each cell, recorded but left out of every statistic.
    #[arg(short = 'w', long, value_name = "N|auto")]
    warmup: Option<String>,
    /// Replace the file's `repeats` with a fixed count (adaptive repeats off).
    #[arg(long, value_name = "N", value_parser = crate::args::count, allow_hyphen_values = true)]
    repeats: Option<u32>,
    /// Run only these arms (comma-separated names, as `--dry-run` lists them).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    arms: Vec<String>,
    /// Run arm ARM at a code revision (a branch, tag, sha, `HEAD~1`, or
    /// `worktree` for the working tree with its uncommitted changes),
    /// replacing the file's `revision` for it; repeatable.
    #[arg(long = "revision", value_name = "ARM=REV", value_parser = parse_revision)]
    revisions: Vec<(String, String)>,
    /// Where the cells run: `local` (child processes, the default) or
    /// `slurm` (one job per cell), replacing the file's `[executor] kind`.
    #[arg(long, value_name = "local|slurm")]
    executor: Option<String>,
    /// Print what this host would run, skip or run in another precision
    /// (and why), and the cells; run and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: each arm's resolved config too.
    #[arg(long, requires = "dry_run")]
    verbose: bool,
    /// Stop at the first failed cell (default: record it and go on).
    #[arg(long)]
    fail_fast: bool,
    #[command(flatten)]
    db: DbArgs,
    /// Plain log lines even on a terminal (default: progress bars on a terminal).
    #[arg(long)]
    plain: bool,
    /// With --resume or --attach: take over an experiment whose last
    /// runner was on another host and may still be running there (it
    /// cannot be checked).
    #[arg(long)]
    takeover: bool,
    /// Keep each completed training cell's run directory under
    /// runs/tmp/lcx-cell-PID-RUN/ (config, train.log, checkpoints); by
    /// default only cells that did not complete keep theirs.
    #[arg(long)]
    keep_runs: bool,
    /// Do not hold the host lock during each cell: run even while another
    /// lcx measures on this host (by default a local cell waits for it;
    /// the lock file is $LCX_HOST_LOCK, else lcx/host.lock in
    /// $XDG_RUNTIME_DIR or ~/.cache).
    #[arg(long)]
    no_host_lock: bool,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    // Before `--command`'s file is written: a bad one writes nothing.
    session::check_hostname_override()?;
    if let Some(file) = &args.file {
        mistaken_command(file)?;
    }
    let commands_file = match args.commands.as_slice() {
        [] => None,
        _ => Some(crate::commands::experiment_file(&crate::commands::Asked {
            commands: &args.commands,
            names: &args.command_names,
            name: args.name.as_deref(),
            scans: &args.parameter_scan,
            lists: &args.parameter_list,
            runs_with_auto_warmup: args.runs.is_some() && args.warmup.as_deref() == Some("auto"),
            db: &args.db,
            dry_run: args.dry_run,
        })?),
    };
    let start = match (&commands_file, &args.file, &args.resume, &args.attach) {
        (Some(file), ..) | (None, Some(file), _, _) => Start::File(file.clone()),
        (None, None, _, Some(attach)) => Start::Attach(attach.clone()),
        // clap asks for one of them; `--dry-run` alone reads the latest.
        (None, None, resume, None) => {
            Start::Resume(resume.clone().unwrap_or_else(|| "latest".into()))
        }
    };
    let request = RunRequest {
        start,
        overrides: plan::Overrides {
            sets: args.sets.clone(),
            iterations: args.iterations,
            runs: args.runs,
            warmup: args.warmup.clone(),
            repeats: args.repeats,
            arms: args.arms.clone(),
            revisions: args.revisions.clone(),
            executor: args.executor.clone(),
            probe: None,
        },
        db: args.db.to_path_buf(),
        detach: args.detach,
        takeover: args.takeover,
    };
    // Builds of lcx revisions link the libtorch this lcx was built against.
    let libtorch = option_env!("LCX_LIBTORCH_LIB").map(Path::new);
    let host = Host::this_process(libtorch).context("locating the lcx binary")?;
    if args.dry_run {
        return dry_run(&request, &host, args.verbose);
    }
    // Installed before the builds, so a Ctrl-C stops a revision build too.
    let stop = StopSignal::on_signals().context("installing the Ctrl-C handler")?;
    let host = host.with_stop(Arc::clone(&stop));
    let prepared = request.prepare(&host, &mut |line: &str| errln!("lcx: {line}"));
    let prepared = match prepared {
        Err(e) if stop.is_stopped() => {
            errln!("lcx: {:#}", anyhow::Error::from(e));
            return Ok(EXIT_INTERRUPTED);
        }
        other => other?,
    };
    let mut session = match prepared {
        Prepared::Ready(session) => {
            for warning in session.plan.warnings() {
                errln!("lcx: warning: {warning}");
            }
            session
        }
        Prepared::Done { id } => {
            let done = RunnerError::NothingToResume {
                id,
                status: ExperimentStatus::Completed.to_string(),
            };
            errln!("lcx: {done}");
            return Ok(0);
        }
    };
    let settings = RunSettings {
        fail_fast: args.fail_fast,
        keep_runs: args.keep_runs,
        stop,
        cuda_available: None,
        host_lock: !args.no_host_lock,
    };
    let mut reporter = reporter::for_stderr(args.plain);
    let summary = session.run(&host, settings, reporter.as_mut());
    drop(reporter);
    let summary = summary?;

    let id = session.experiment_id;
    let db = args.db.display();
    match summary.status {
        ExperimentStatus::Interrupted => {
            errln!(
                "lcx: experiment {id} interrupted; finished iterations are kept.\n\
                 lcx: resume with: lcx run --resume {id} --db {db}"
            );
            if session.has_jobs_to_follow()? {
                errln!(
                    "lcx: some of its Slurm jobs had already ended and are not ingested yet: \
                     lcx run --attach {id} --db {db} reads them first"
                );
            }
            Ok(EXIT_INTERRUPTED)
        }
        ExperimentStatus::Completed => {
            print_summary(&args.db, id);
            outln!("experiment {id} completed; the whole report: `lcx report {id} --db {db}`");
            Ok(0)
        }
        ExperimentStatus::Detached => {
            outln!(
                "experiment {id} detached: {} submitted as Slurm jobs{}; \
                 follow them with `lcx run --attach {id} --db {db}`",
                lcx_core::text::counted(summary.pending as u64, "cell"),
                match summary.failed {
                    0 => String::new(),
                    n => format!(" ({n} could not be submitted)"),
                }
            );
            Ok(if summary.failed > 0 { 1 } else { 0 })
        }
        _ => {
            print_summary(&args.db, id);
            outln!(
                "experiment {id} finished with failed or unfinished cells; \
                 rerun them with `lcx run --resume {id} --db {db}`\n\
                 no verdict rests on them: `lcx report {id} --check --db {db}` \
                 says what is left undecided (it never exits 0 while a cell did not complete)"
            );
            Ok(1)
        }
    }
}

/// A FILE that does not exist but reads as a command (`lcx run 'sleep
/// 0.05'`, as hyperfine is called): refused (exit 2) with the `--command`
/// line that times it. A path ending in `.toml` is a missing file, and
/// anything else is left to the plan's reader to say it cannot be read.
fn mistaken_command(file: &Path) -> anyhow::Result<()> {
    let Some(text) = file.to_str() else {
        return Ok(());
    };
    let looks_like_command = text.contains(char::is_whitespace) || on_path(text);
    if file.exists()
        || text.ends_with(".toml")
        || !looks_like_command
        || text.trim().is_empty()
        || lcx_core::escape::first_hidden(text).is_some()
    {
        return Ok(());
    }
    Err(crate::errors::bad_input(anyhow::anyhow!(
        "cannot read experiment file {text}: no such file; to time it as a command: \
         lcx run --command {}",
        shell_quoted(text)
    )))
}

/// Whether `name` is a program's name (no `/`) that an executable file on
/// `$PATH` holds.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    if name.is_empty() || name.contains('/') {
        return false;
    }
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// `text` as one word for a POSIX shell: in single quotes, each `'` as
/// `'\''`.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn parse_revision(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((arm, rev)) if !arm.is_empty() && !rev.is_empty() => {
            Ok((arm.to_string(), rev.to_string()))
        }
        _ => Err(format!(
            "expected ARM=REV (e.g. candidate=HEAD~1), found `{text}`"
        )),
    }
}

/// The verdict table of a finished run, on stdout (`lcx report`'s arms
/// table, gate, guards and net result). A report that cannot be built is
/// said on stderr; the run's own outcome stands.
fn print_summary(db: &Path, id: i64) {
    let report = lcx_core::store::Store::open_read_only(db)
        .and_then(|store| lcx_core::report::load(&store, id, Default::default()));
    match report {
        Ok(report) => outln!("\n{}", lcx_core::report::render_summary(&report)),
        Err(e) => errln!("lcx: no summary: {e}"),
    }
}

/// `lcx run --dry-run`: what this host would run, skip or run otherwise,
/// and the cells; nothing runs and nothing is written.
fn dry_run(request: &RunRequest, host: &Host, verbose: bool) -> anyhow::Result<u8> {
    let (plan, builds) = request.dry_run(host)?;
    for warning in plan.warnings() {
        errln!("lcx: warning: {warning}");
    }
    let cuda = if plan.arms.iter().any(session::asks_about_cuda) {
        lcx_core::experiment::fingerprint::torch_facts(&host.lcx_exe).map(|t| t.cuda_available)
    } else {
        None
    };
    let can = session::HostCan { cuda };
    out!("{}", session::dry_run_text(&plan, &builds, can, verbose));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_quoted_as_one_shell_word() {
        assert_eq!(shell_quoted("sleep 0.05"), "'sleep 0.05'");
        assert_eq!(shell_quoted("echo 'a b'"), r"'echo '\''a b'\'''");
    }
}
