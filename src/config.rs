//! `lcx config show`: prints a trainer config fully resolved (file, then
//! each `--set`, then code defaults for the rest) as TOML, so what a run
//! will use can be checked before running it.

use std::path::PathBuf;

use anyhow::Result;

use crate::args::DbArgs;
use crate::bad_input;
use crate::db::open_db;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx config show --config configs/default.toml --set traversal.scheduler=interleaved\n  lcx config show --run 12        (pipe it into `lcx train --config -`)"
)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print the fully resolved trainer config as TOML.
    #[command(mut_arg("db", |db| db.help("Database for --run")))]
    Show {
        /// Trainer config file (TOML); without it, the code defaults.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override one key, e.g. `--set traversal.scheduler=interleaved`
        /// (repeatable, applied in order; VALUE is TOML, `null` unsets).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Print the config a recorded cell ran; a report's "Reproduce"
        /// section names each arm's run id, and `lcx query "SELECT id, arm,
        /// repeat FROM runs WHERE experiment_id = N"` lists them all. Pipe it
        /// into `lcx train --config -` to run that cell again.
        #[arg(long, value_name = "RUN_ID", conflicts_with_all = ["config", "sets"])]
        run: Option<i64>,
        #[command(flatten)]
        db: DbArgs,
    },
}

pub fn run(args: Args) -> Result<u8> {
    match args.action {
        Action::Show {
            run: Some(run_id),
            db,
            ..
        } => {
            let store = open_db(&db)?;
            let run = store.run(run_id)?.ok_or_else(|| {
                bad_input(anyhow::anyhow!(
                    "--run {run_id}: no such run in {}",
                    db.display()
                ))
            })?;
            let text = run.config_toml.ok_or_else(|| {
                bad_input(anyhow::anyhow!(
                    "--run {run_id}: arm `{}` runs a command, not the trainer: it has no config",
                    run.arm
                ))
            })?;
            // TOML into a pipe (`| lcx train --config -`) as recorded; on a
            // terminal its hidden controls show.
            print!("{}", crate::data_for_stdout(&text));
            Ok(0)
        }
        Action::Show { config, sets, .. } => {
            let resolved = lcx_core::config::load(config.as_deref(), &sets).map_err(bad_input)?;
            print!("{}", resolved.to_toml());
            Ok(0)
        }
    }
}
