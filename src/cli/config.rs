//! `lcx config show`: prints a trainer config fully resolved (file, then
//! each `--set`, then code defaults for the rest) as TOML, so what a run
//! will use can be checked before running it.

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::bad_input;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print the fully resolved trainer config as TOML.
    Show {
        /// Trainer config file (TOML); without it, the code defaults.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override one key, e.g. `--set traversal.scheduler=interleaved`
        /// (repeatable, applied in order; VALUE is TOML, `null` unsets).
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
    },
}

pub fn run(args: Args) -> Result<u8> {
    match args.action {
        Action::Show { config, sets } => {
            let resolved = crate::config::load(config.as_deref(), &sets).map_err(bad_input)?;
            print!("{}", resolved.to_toml());
            Ok(0)
        }
    }
}
