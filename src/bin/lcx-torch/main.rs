//! `lcx-torch`: every lcx command, linked against libtorch. `lcx` execs it
//! for the commands that train or time networks (`train`, `bench`,
//! `version`) and for `--help`, which lists every command; the torch-free
//! ones come from `lcx_cli` ([`light::Command`], flattened in).
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lcx_cli::light;

mod bench;
mod train;
mod version;

#[derive(Debug, Parser)]
#[command(
    name = "lcx",
    bin_name = "lcx",
    about = light::ABOUT,
    // `--version` is handled by hand, as `lcx` handles it: the short line,
    // libtorch's facts only for `version --verbose` or `--json`.
    disable_version_flag = true,
    arg_required_else_help = true
)]
struct Cli {
    #[arg(short = 'V', long, help = light::VERSION_HELP)]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    // About texts and places in the help: `light::TORCH_COMMANDS`, which
    // `lcx --help` lists without loading libtorch.
    #[command(about = light::TORCH_COMMANDS[2].1, display_order = light::TORCH_COMMANDS[2].2)]
    Version(version::Args),
    #[command(about = light::TORCH_COMMANDS[1].1, display_order = light::TORCH_COMMANDS[1].2)]
    Bench(bench::Args),
    #[command(about = light::TORCH_COMMANDS[0].1, display_order = light::TORCH_COMMANDS[0].2)]
    Train(train::Args),
    #[command(flatten)]
    Light(light::Command),
}

/// Parses the process arguments and runs the chosen subcommand; returns the
/// process exit code.
fn run() -> anyhow::Result<u8> {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        // `--version`: the same line `lcx` prints without this binary.
        println!("lcx {}", env!("CARGO_PKG_VERSION"));
        return Ok(0);
    };
    match command {
        Command::Version(args) => version::run(&args),
        Command::Bench(args) => bench::run(args),
        Command::Train(args) => train::run(args),
        Command::Light(command) => command.run(),
    }
}

fn main() -> ExitCode {
    lcx_cli::quiet_broken_pipe();
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            lcx_cli::print_error(&err);
            ExitCode::from(lcx_cli::exit_code_for(&err))
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    /// A line's words as a shell splits them (single quotes group), up to
    /// a run of two spaces (the comment that follows an example).
    fn words(line: &str) -> Vec<String> {
        let line = line.trim_start();
        let code = line.split("  ").next().unwrap_or(line);
        let mut out = Vec::new();
        let mut word = String::new();
        let mut quoted = false;
        for c in code.chars() {
            match c {
                '\'' => quoted = !quoted,
                ' ' if !quoted => {
                    if !word.is_empty() {
                        out.push(std::mem::take(&mut word));
                    }
                }
                _ => word.push(c),
            }
        }
        if !word.is_empty() {
            out.push(word);
        }
        out
    }

    /// Every command's help ends with an example, and every example is a
    /// command line this parser takes.
    #[test]
    fn every_command_has_an_example_that_parses() {
        let cli = super::Cli::command();
        let mut examples = 0;
        for sub in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
            if sub.get_name() == "help" {
                continue;
            }
            let after = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                after.starts_with("Example"),
                "`lcx {}` has no example",
                sub.get_name()
            );
            for line in after.lines().filter(|l| l.trim_start().starts_with("lcx ")) {
                // `a && b`, `a | b`: each lcx command on its own.
                let all = words(line);
                for argv in all.split(|w| w == "&&" || w == "|") {
                    if argv.first().map(String::as_str) != Some("lcx") {
                        continue;
                    }
                    if let Err(e) = super::Cli::try_parse_from(argv) {
                        panic!("`{line}` does not parse: {e}");
                    }
                    examples += 1;
                }
            }
        }
        assert!(examples >= 20, "{examples} examples");
    }

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
