//! `lcx schema`: the reference of the experiment file (every key, its
//! type, default and workloads), from the same lists the reader checks.

use lcx_core::experiment::plan::keys;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Markdown,
    Json,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx schema | less      every key of an experiment file")]
pub struct Args {
    /// `markdown` (docs/experiment-file.md is this output) or `json`.
    #[arg(long, value_enum, default_value = "markdown")]
    format: Format,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.format {
        Format::Markdown => out!("{}", keys::reference_markdown()),
        Format::Json => jsonln!("{}", serde_json::to_string_pretty(keys::KEYS)?),
    }
    Ok(0)
}
