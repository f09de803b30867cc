//! `lcx train`: one training run of the embedded Deep CFR trainer.

use std::path::PathBuf;

use lcx_cli::{bad_input, metrics_sink};
use lcx_trainer::run::session::{self, SessionOptions};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  lcx train --config configs/smoke.toml --set run.max_iterations=2"
)]
pub struct Args {
    /// Trainer config (TOML) [default: the code defaults].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override a config key, e.g. `--set traversal.scheduler=interleaved` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Continue from a checkpoint (its .json or .safetensors file) at iteration + 1.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Keep the run under runs/ instead of runs/tmp/.
    #[arg(long)]
    keep: bool,
    /// Folder for run directories (`lcx run` gives each training cell its own).
    #[arg(long, env = "LCX_RUNS_DIR", default_value = "runs")]
    runs_dir: PathBuf,
    /// Also stream each iteration's metrics to PATH (`-` = stdout) as JSON lines.
    #[arg(long, value_name = "PATH")]
    metrics_out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let config = lcx_core::config::load(args.config.as_deref(), &args.sets).map_err(bad_input)?;
    if let Some(r) = &args.resume {
        if !r.with_extension("json").exists() {
            return Err(bad_input(anyhow::anyhow!(
                "--resume {}: no checkpoint sidecar {} found",
                r.display(),
                r.with_extension("json").display()
            )));
        }
    }
    let metrics_out = metrics_sink(args.metrics_out.as_ref())?;
    let dir = session::run(
        config,
        SessionOptions {
            runs_root: args.runs_dir,
            keep: args.keep,
            resume: args.resume,
            metrics_out,
        },
    )?;
    eprintln!("run directory: {}", dir.display());
    Ok(0)
}
