//! `lcx schema`: the reference of the experiment file (every key, its
//! type, default and workloads), from the same lists the reader checks.

use crate::args::{formats, Format};
use lcx_core::experiment::plan::keys;

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx schema | less      every key of an experiment file")]
pub struct Args {
    /// `markdown` (docs/experiment-file.md is this output) or `json`.
    #[arg(long, value_parser = formats(&[(Format::Markdown, None), (Format::Json, None)]), default_value = "markdown")]
    format: Format,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    // `--format` offers markdown and json.
    if args.format == Format::Json {
        jsonln!("{}", serde_json::to_string_pretty(keys::KEYS)?);
    } else {
        out!("{}", keys::reference_markdown());
    }
    Ok(0)
}
