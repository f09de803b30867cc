//! Command-line surface: clap types and glue only. Nothing below `cli/` sees
//! clap; each subcommand module turns its arguments into library calls.
//!
//! Two binaries share this tree: `lcx-torch` runs [`run`] (every command);
//! `lcx` compiles only [`light`]'s commands and hands the rest to
//! `lcx-torch` (src/main.rs says why).

use clap::{Parser, Subcommand};

mod bench;
mod bisect;
mod cache;
mod compare;
mod config;
mod errors;
mod history;
pub mod light;
mod list;
mod play;
mod query;
mod report;
mod run;
mod train;
mod version;

pub(crate) use errors::metrics_sink;
pub use errors::{bad_input, exit_code_for, quiet_broken_pipe, BadInput};

#[derive(Debug, Parser)]
#[command(
    name = "lcx",
    bin_name = "lcx",
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
    /// Micro-benchmarks: `bench forward`, `bench engine`, `bench trainer`.
    Bench(bench::Args),
    /// Train the embedded Deep CFR trainer (one run; metrics per iteration).
    Train(train::Args),
    /// Run an experiment file (or `--resume` one), recording every iteration in SQLite.
    Run(run::Args),
    /// Find the first commit of good..bad whose arm is regressed against good.
    Bisect(bisect::Args),
    /// The builds of arms at code revisions: `cache list`, `cache prune`.
    Cache(cache::Args),
    #[command(flatten)]
    Light(light::Command),
}

/// Parses the process arguments and runs the chosen subcommand; returns the
/// process exit code. `lcx-torch`'s entry.
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
        Command::Bisect(args) => bisect::run(args),
        Command::Cache(args) => cache::run(args),
        Command::Light(command) => command.run(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_command_is_listed_once() {
        let names: Vec<String> = super::Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{names:?}");
        for name in ["train", "run", "bench", "report", "query", "play", "config"] {
            assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
        }
    }
}
