//! `lcx init [--command|--train] FILE`: a commented experiment file to
//! start from, which `lcx run` takes as it is.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use crate::bad_input;

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx init quick.toml && lcx run quick.toml && lcx report")]
pub struct Args {
    /// The file to write; an existing file is left alone (exit 2).
    file: PathBuf,
    /// Two commands of your own, timed by lcx (the default).
    #[arg(long, conflicts_with = "train")]
    command: bool,
    /// Two arms of the embedded trainer (needs lcx-torch).
    #[arg(long)]
    train: bool,
}

/// Two commands timed by lcx itself, a gate on the second.
const COMMAND_TEMPLATE: &str = r#"# An lcx experiment of two commands (`lcx init --command`).
# Run it with `lcx run FILE`, read it with `lcx report`; in CI,
# `lcx report --check` exits 0 when the gate passes, 1 when it fails,
# 3 when the data shows neither (or a cell failed).
name = "quick"              # experiments of one name form a history (`lcx history`)
workload = "command"
timing = "process"          # lcx times each run: process/wall_seconds, …/user_seconds, …/max_rss_bytes
iterations = 11             # runs per cell, the warm-up included (`lcx run --runs 10` says the same)
warmup = 1                  # the first run of each cell: recorded, left out of every statistic
repeats = 3                 # cells per arm, the arms taking turns
baseline = "before"

[[arms]]
name = "before"
command = ["sleep", "0.05"]  # an array runs as it is; a string of plain words too, and one with
                             # shell syntax through `sh -c`, the shell's start-up taken off
# env = { MY_FLAG = "0" }    # the arm's environment, on top of lcx's
# timeout = "10m"            # past it the cell is killed and recorded failed (also a top-level key)
# setup = "make"             # once before the arm's first cell, outside every timing (also top-level)
# prepare = "sync"           # before each cell, outside its timing
# cleanup = "make clean"     # once after the run's last cell

[[arms]]
name = "after"
command = ["sleep", "0.02"]

# PASS when `after` is shown at least 1.5× faster than `before` (95 % interval).
[gate]
metric = "process/wall_seconds"
arm = "after"
min_speedup = 1.5
"#;

/// Two trainer arms that differ in one setting.
const TRAIN_TEMPLATE: &str = r#"# An lcx experiment of the embedded trainer (`lcx init --train`): two arms
# that differ in one setting, each a few short iterations.
# Run it with `lcx run FILE`, read it with `lcx report`; the keys the arms
# set are listed by `lcx config show`.
name = "my-trainer-change"
workload = "train"
# config = "configs/default.toml"   # a trainer config, relative to this file; lcx's defaults without it
iterations = 5
warmup = 1
repeats = 1
baseline = "recursive"
set = [                              # for every arm
  "traversal.traversals_per_player=10",
  "evaluation.eval_every=0",
  "checkpoint.save_every=0",
  "checkpoint.save_latest=false",
]

[[arms]]
name = "recursive"
set = ["traversal.scheduler=recursive"]

[[arms]]
name = "interleaved"
set = ["traversal.scheduler=interleaved"]

# PASS when `interleaved` is shown at least 1.1× faster per iteration.
[gate]
metric = "time/iteration_seconds"
arm = "interleaved"
min_speedup = 1.1
"#;

pub fn run(args: Args) -> anyhow::Result<u8> {
    let text = if args.train {
        TRAIN_TEMPLATE
    } else {
        COMMAND_TEMPLATE
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&args.file)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                bad_input(anyhow::anyhow!(
                    "{} exists; lcx init writes a new file only",
                    args.file.display()
                ))
            } else {
                anyhow::Error::new(e).context(format!("creating {}", args.file.display()))
            }
        })?;
    if let Err(e) = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
    {
        // Nothing half-written stays behind (a full disk, say).
        drop(file);
        let _ = std::fs::remove_file(&args.file);
        return Err(e).with_context(|| format!("writing {}", args.file.display()));
    }
    errln!(
        "wrote {}; run it with `lcx run {}`, then `lcx report`",
        args.file.display(),
        args.file.display()
    );
    Ok(0)
}
