//! Command-line surface: clap types and glue only. Nothing below `cli/` sees
//! clap; each subcommand module turns its arguments into library calls.

use clap::{Parser, Subcommand};

mod bench;
mod compare;
mod config;
mod history;
mod list;
mod play;
mod query;
mod report;
mod run;
mod train;
mod version;

/// Marks an error as the user's input being wrong (a file, key or flag), as
/// opposed to a failure while doing the work. Such errors exit with code 2,
/// like clap's own usage errors; everything else exits with 1.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BadInput(#[from] pub anyhow::Error);

/// Wraps any error as [`BadInput`].
pub fn bad_input(err: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(BadInput(err.into()))
}

/// Opens a `--metrics-out PATH|-` sink: stdout for `-`, else a new file.
/// Writers flush after every JSON line, so a reader sees whole lines.
pub(crate) fn metrics_sink(
    path: Option<&std::path::PathBuf>,
) -> anyhow::Result<Option<Box<dyn std::io::Write>>> {
    use anyhow::Context;
    Ok(match path {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p)
                .with_context(|| format!("--metrics-out: cannot create {}", p.display()))?,
        ))),
    })
}

/// Exit code for an error that reached `main`.
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(|cause| cause.is::<BadInput>()) {
        2
    } else {
        1
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "lcx",
    about = "Run A/B speed experiments on an embedded Deep CFR trainer and keep every number in SQLite",
    // `--version` is handled by hand: asking libtorch about CUDA is not free,
    // so it happens only when the version is really asked for.
    disable_version_flag = true,
    arg_required_else_help = true
)]
struct Cli {
    /// Print lcx's version, the torch version and whether CUDA is available.
    #[arg(short = 'V', long)]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print lcx's version, the torch version and whether CUDA is available.
    Version,
    /// Micro-benchmarks: `bench forward`, `bench engine`.
    Bench(bench::Args),
    /// Train the embedded Deep CFR trainer (one run; metrics per iteration).
    Train(train::Args),
    /// Run an experiment file (or `--resume` one), recording every iteration in SQLite.
    Run(run::Args),
    /// Inspect trainer configs: `config show --config FILE [--set PATH=VALUE]...`.
    Config(config::Args),
    /// Play bot-vs-bot matches with alternating seats and summarise them.
    Play(play::Args),
    /// Report an experiment: warm-up-excluded tables, verdicts, gate; `--archive`, `--check`.
    Report(report::Args),
    /// One arm's results across every past experiment of a name.
    History(history::Args),
    /// Two experiments (or `run:ID` runs) side by side on their shared arms.
    Compare(compare::Args),
    /// The experiments in the database, newest first.
    List(list::Args),
    /// Read-only SQL against the database (table, CSV or JSON).
    Query(query::Args),
}

/// Parses the process arguments and runs the chosen subcommand; returns the
/// process exit code.
pub fn run() -> anyhow::Result<u8> {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        println!("lcx {}", version::long_version());
        return Ok(0);
    };
    match command {
        Command::Version => {
            println!("lcx {}", version::long_version());
            Ok(0)
        }
        Command::Bench(args) => bench::run(args),
        Command::Train(args) => train::run(args),
        Command::Run(args) => run::run(args),
        Command::Config(args) => config::run(args),
        Command::Play(args) => play::run(args),
        Command::Report(args) => report::run(args),
        Command::History(args) => history::run(args),
        Command::Compare(args) => compare::run(args),
        Command::List(args) => list::run(args),
        Command::Query(args) => query::run(args),
    }
}
