//! The commands that need no libtorch: experiments (`run`, `bisect`,
//! `cache`), the database commands, `config`, `play` and `system`. The `lcx` binary
//! runs these itself and hands everything else to `lcx-torch`
//! ([`exec_torch_binary`]). `lcx-torch` flattens [`Command`] into its own
//! command list, so both binaries parse these identically.

use std::ffi::OsString;

use clap::{Parser, Subcommand};

use super::{
    bisect, cache, compare, config, export, history, import, init, list, play, publish, query,
    rename, report, rm, run, schema, system, time_process,
};

/// The torch-free subcommands. Every command of both binaries has a
/// `display_order`: help lists them by how often a user reaches for them,
/// the torch commands ([`TORCH_COMMANDS`]) among them.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented experiment file to start from: two commands, or two trainer arms.
    #[command(display_order = 0)]
    Init(init::Args),
    /// Run an experiment file (or `--resume` one), or time commands as hyperfine does (`--command`).
    #[command(display_order = 1)]
    // Boxed: its many flags would size every variant of the enum.
    Run(Box<run::Args>),
    /// Report an experiment: warm-up-excluded tables, verdicts, gate; `--archive`, `--check`.
    #[command(display_order = 2)]
    Report(report::Args),
    /// One arm's results across every past experiment of a name.
    #[command(display_order = 3)]
    History(history::Args),
    /// Two experiments (or `run:ID` runs) side by side on their shared arms.
    #[command(display_order = 4)]
    Compare(compare::Args),
    /// The experiments in the database, newest first.
    #[command(display_order = 6)]
    List(list::Args),
    /// Read-only SQL against the database (table, CSV or JSON).
    #[command(display_order = 7)]
    Query(query::Args),
    /// Write a static site of every experiment and every metric's history.
    #[command(display_order = 5)]
    Publish(publish::Args),
    /// Every stored value with its cell and warm-up flag, as CSV or JSON Lines.
    #[command(display_order = 8)]
    Export(export::Args),
    /// Experiments from other lcx databases (hosts, CI jobs) into this one; twice adds nothing.
    #[command(display_order = 20)]
    Import(import::Args),
    /// Remove experiments and all their rows (`--dry-run` says what would go).
    #[command(display_order = 11)]
    Rm(rm::Args),
    /// Every key of an experiment file: type, default, workloads, meaning.
    #[command(display_order = 18)]
    Schema(schema::Args),
    /// Give experiments another name (their history moves with them).
    #[command(display_order = 12)]
    Rename(rename::Args),
    /// Inspect trainer configs: `config show --config FILE [--set KEY=VALUE]...`.
    #[command(display_order = 13)]
    Config(config::Args),
    /// Play bot-vs-bot matches with alternating seats and summarise them.
    #[command(display_order = 14)]
    Play(play::Args),
    /// What on this machine affects measurements: `system show`, `system check`.
    #[command(display_order = 15)]
    System(system::Args),
    /// Find the first commit of good..bad whose arm is regressed against good.
    #[command(display_order = 16)]
    Bisect(bisect::Args),
    /// The builds of arms at code revisions: `cache list`, `cache prune`.
    #[command(display_order = 17)]
    Cache(cache::Args),
    /// Time each run of a command, one metric line a run: what a `timing = "process"` cell runs.
    #[command(display_order = 19)]
    TimeProcess(time_process::Args),
}

/// The top-level about text, the same in both binaries.
pub const ABOUT: &str =
    "Run A/B speed experiments on an embedded Deep CFR trainer and keep every number in SQLite";

/// The help of `-V`/`--version`, the same in both binaries.
pub const VERSION_HELP: &str =
    "Print lcx's version (`lcx version --verbose` adds torch's and whether CUDA is available)";

/// The commands only `lcx-torch` runs: (name, about, display order). Its
/// parser takes their about text from here, and `lcx --help` lists them
/// from here without loading libtorch.
pub const TORCH_COMMANDS: [(&str, &str, usize); 3] = [
    (
        "train",
        "Train the embedded Deep CFR trainer (one run; metrics per iteration)",
        9,
    ),
    (
        "bench",
        "Micro-benchmarks: `bench forward`, `bench trainer`, `bench engine`, `bench peak`",
        10,
    ),
    (
        "version",
        "Print lcx's version; `--verbose`: the torch version and CUDA too, `--json`: as JSON",
        19,
    ),
];

/// The top-level command as `lcx --help` shows it: the torch-free commands
/// with their arguments, the torch ones by name and about text (their own
/// help comes from `lcx-torch`). A test holds it to `lcx-torch --help`.
pub fn top_level() -> clap::Command {
    let mut cmd = clap::Command::new("lcx")
        .bin_name("lcx")
        .about(ABOUT)
        .disable_version_flag(true)
        .arg_required_else_help(true)
        .arg(
            clap::Arg::new("version")
                .short('V')
                .long("version")
                .help(VERSION_HELP)
                .action(clap::ArgAction::SetTrue),
        );
    // The enum's own doc comment would become the about text.
    cmd = <Command as Subcommand>::augment_subcommands(cmd).about(ABOUT);
    for (name, about, order) in TORCH_COMMANDS {
        cmd = cmd.subcommand(clap::Command::new(name).about(about).display_order(order));
    }
    cmd
}

/// `lcx --version`, `lcx -V` and `lcx version` print the version here, in
/// milliseconds and without `lcx-torch` (the quick start builds `lcx`
/// alone); what libtorch says (`version --verbose`, `--json`) is
/// `lcx-torch`'s to answer.
fn short_version(args: &[OsString]) -> Option<u8> {
    match args {
        [one] if matches!(one.to_str(), Some("--version" | "-V" | "version")) => {
            println!("lcx {}", env!("CARGO_PKG_VERSION"));
            Some(0)
        }
        _ => None,
    }
}

/// `lcx`, `lcx --help`, `lcx -h` and `lcx help` print the top-level help
/// here, in milliseconds: `lcx-torch` would load libtorch first.
fn top_level_help(args: &[OsString]) -> Option<u8> {
    let asks = match args {
        [] => true,
        [one] => matches!(one.to_str(), Some("--help" | "-h" | "help")),
        _ => false,
    };
    if !asks {
        return None;
    }
    let mut argv = vec![OsString::from("lcx")];
    argv.extend(args.iter().cloned());
    match top_level().try_get_matches_from(argv) {
        Ok(_) => None,
        Err(err) => {
            let _ = err.print();
            Some(u8::try_from(err.exit_code()).unwrap_or(2))
        }
    }
}

impl Command {
    /// Runs the subcommand; returns the process exit code.
    pub fn run(self) -> anyhow::Result<u8> {
        match self {
            Command::Init(args) => init::run(args),
            Command::Run(args) => run::run(*args),
            Command::Bisect(args) => bisect::run(args),
            Command::Cache(args) => cache::run(args),
            Command::Config(args) => config::run(args),
            Command::Play(args) => play::run(args),
            Command::Report(args) => report::run(args),
            Command::History(args) => history::run(args),
            Command::Compare(args) => compare::run(args),
            Command::List(args) => list::run(args),
            Command::Query(args) => query::run(args),
            Command::Rm(args) => rm::run(args),
            Command::Publish(args) => publish::run(args),
            Command::Export(args) => export::run(args),
            Command::Import(args) => import::run(args),
            Command::Schema(args) => schema::run(args),
            Command::Rename(args) => rename::run(args),
            Command::System(args) => system::run(args),
            Command::TimeProcess(args) => time_process::run(args),
        }
    }
}

#[derive(Debug, Parser)]
#[command(name = "lcx", bin_name = "lcx")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Whether `args` (without the program name) start with a torch-free
/// subcommand. Anything else (`--help`, `--version`, a typo, train, bench)
/// goes to `lcx-torch`, whose parser knows every command.
pub fn is_light(args: &[OsString]) -> bool {
    use clap::CommandFactory;
    args.first()
        .and_then(|a| a.to_str())
        .is_some_and(|a| Cli::command().find_subcommand(a).is_some())
}

/// Runs a torch-free command when the process arguments name one; `Ok(None)`
/// when they do not.
pub fn run() -> anyhow::Result<Option<u8>> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let rest = &args[1.min(args.len())..];
    if let Some(code) = short_version(rest).or_else(|| top_level_help(rest)) {
        return Ok(Some(code));
    }
    if !is_light(rest) {
        return Ok(None);
    }
    Cli::parse_from(args).command.run().map(Some)
}

/// The libtorch half of the command line, installed beside `lcx`.
pub const TORCH_BINARY: &str = "lcx-torch";

/// Replaces this process with `lcx-torch` (found beside the running binary)
/// and the same arguments, so signals, exit codes and the terminal are its
/// own. Returns only when that fails.
pub fn exec_torch_binary() -> anyhow::Error {
    use anyhow::Context;
    let path = match std::env::current_exe().context("locating the lcx binary") {
        Ok(exe) => exe.with_file_name(TORCH_BINARY),
        Err(err) => return err,
    };
    if !path.is_file() {
        return anyhow::anyhow!(
            "{} is missing: this command needs lcx's libtorch half, which is built \
             beside lcx (`cargo build --release` builds both; `cargo install` installs both)",
            path.display()
        );
    }
    let mut command = std::process::Command::new(&path);
    command.args(std::env::args_os().skip(1));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Keep the user's argv[0] (`lcx`, `./target/release/lcx`): it is
        // what usage messages and recorded command lines show.
        if let Some(arg0) = std::env::args_os().next() {
            command.arg0(arg0);
        }
        let err = command.exec();
        anyhow::Error::new(err).context(format!("starting {}", path.display()))
    }
    #[cfg(not(unix))]
    {
        #[expect(
            clippy::disallowed_methods,
            reason = "stands in for exec: the child's exit code is this process's"
        )]
        match command.status() {
            Ok(status) => std::process::exit(status.code().unwrap_or(1)),
            Err(err) => anyhow::Error::new(err).context(format!("starting {}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_torch_free_commands_are_these() {
        let derived: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        assert_eq!(
            derived,
            [
                "init",
                "run",
                "report",
                "history",
                "compare",
                "list",
                "query",
                "publish",
                "export",
                "import",
                "rm",
                "schema",
                "rename",
                "config",
                "play",
                "system",
                "bisect",
                "cache",
                "time-process"
            ]
        );
    }

    /// `--db` is one flag ([`crate::args::DbArgs`]) in every command that
    /// takes it; flattening it leaves each command's own about text.
    #[test]
    fn every_db_flag_is_the_same_flag() {
        fn walk(command: &clap::Command, path: String, found: &mut Vec<String>) {
            if let Some(db) = command.get_arguments().find(|a| a.get_id() == "db") {
                assert_eq!(db.get_long(), Some("db"), "{path}");
                assert_eq!(db.get_env(), Some(std::ffi::OsStr::new("LCX_DB")), "{path}");
                assert_eq!(
                    db.get_default_values(),
                    [std::ffi::OsStr::new(lcx_core::store::DEFAULT_DB)],
                    "{path}"
                );
                assert!(db.get_help().is_some(), "{path}: --db without help");
                let about = command.get_about().map(|a| a.to_string());
                assert!(
                    about.is_some_and(|a| !a.contains("LCX_DB")),
                    "{path}: its about is not its own"
                );
                found.push(path.clone());
            }
            for sub in command.get_subcommands() {
                walk(sub, format!("{path} {}", sub.get_name()), found);
            }
        }
        let mut found = Vec::new();
        walk(&Cli::command(), "lcx".into(), &mut found);
        assert_eq!(
            found,
            [
                "lcx run",
                "lcx report",
                "lcx history",
                "lcx compare",
                "lcx list",
                "lcx query",
                "lcx publish",
                "lcx export",
                "lcx import",
                "lcx rm",
                "lcx rename",
                "lcx config show",
                "lcx bisect",
                "lcx cache list",
                "lcx cache prune"
            ]
        );
    }

    #[test]
    fn only_torch_free_commands_stay_in_lcx() {
        let light = |a: &[&str]| is_light(&a.iter().map(OsString::from).collect::<Vec<_>>());
        assert!(light(&["report", "--db", "x.db"]));
        assert!(light(&["query", "SELECT 1"]));
        assert!(!light(&["train", "--config", "c.toml"]));
        assert!(light(&["run", "e.toml"]));
        assert!(light(&["cache", "list"]));
        assert!(light(&["system", "check"]));
        assert!(!light(&["version", "--json"]));
        assert!(!light(&["bench", "forward"]));
        assert!(!light(&["--version"]));
        assert!(!light(&["--help"]));
        assert!(!light(&[]));
    }
}
