//! `lcx cache list|prune`: the builds of arms at code revisions
//! (`experiment::revision`), one entry per commit, uncommitted changes,
//! build command and toolchain.

use std::time::{Duration, SystemTime};

use lcx_core::experiment::revision::{Cache, Removal};

use crate::args::DbArgs;

/// `--db` of `cache list` and `cache prune`: only its folder is used.
const CACHE_DB_HELP: &str = "The database whose folder holds the cache (`.lcx/revisions/`); \
     `LCX_REVISION_CACHE` names another folder";

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  lcx cache list\n  lcx cache prune")]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Every build: revision, commit, size, build time, last use.
    #[command(mut_arg("db", |db| db.help(CACHE_DB_HELP)))]
    List {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Remove incomplete builds and builds unused for `--days` days.
    #[command(mut_arg("db", |db| db.help(CACHE_DB_HELP)))]
    Prune {
        /// Remove builds not used by an experiment for this many days.
        #[arg(long, value_name = "N", default_value_t = 30)]
        days: u64,
        /// Remove every build (and the shared cargo target folder).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        db: DbArgs,
    },
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.action {
        Action::List { db } => {
            let cache = Cache::for_db(&db);
            let entries = cache.entries()?;
            if entries.is_empty() {
                outln!("no builds in {}", cache.root.display());
                return Ok(0);
            }
            outln!("builds in {}:", cache.root.display());
            for e in &entries {
                let name = e
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let what = match &e.record {
                    Some(r) => format!(
                        "{} ({}), `{}`, built in {:.1} s",
                        r.asked,
                        &r.sha[..12.min(r.sha.len())],
                        if r.command.is_empty() {
                            "no build"
                        } else {
                            &r.command
                        },
                        r.seconds
                    ),
                    None => "incomplete (a build that failed or is running)".into(),
                };
                outln!(
                    "  {name}  {what}, {}, last used {}",
                    size(e.bytes),
                    e.used.map_or_else(|| "never".into(), ago)
                );
            }
            Ok(0)
        }
        Action::Prune { days, all, db } => {
            let cache = Cache::for_db(&db);
            let cutoff = SystemTime::now()
                .checked_sub(Duration::from_secs(days.saturating_mul(86_400)))
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let mut removed = 0;
            for e in cache.entries()? {
                let stale = e.used.is_none_or(|u| u < cutoff);
                if all || e.record.is_none() || stale {
                    let name = e.path.file_name().unwrap_or_default().to_string_lossy();
                    match cache.remove(&e)? {
                        Removal::Removed => removed += 1,
                        Removal::Building => {
                            outln!("kept {name}: another lcx is building it")
                        }
                        Removal::InUse => {
                            outln!("kept {name}: a running experiment's cells use it")
                        }
                    }
                }
            }
            // The shared cargo target goes only when no lcx build holds it.
            let target = cache.root.join("cargo-target");
            if all && target.exists() {
                match cache.lock_target()? {
                    Some(_held) => std::fs::remove_dir_all(&target)?,
                    None => outln!("kept cargo-target: an lcx build is using it"),
                }
            }
            let locks = cache.remove_stale_locks(all)?;
            if locks > 0 {
                outln!(
                    "removed {} left without a build",
                    lcx_core::text::counted(locks as u64, "lock file")
                );
            }
            outln!(
                "removed {} from {}",
                lcx_core::text::counted(removed, "build"),
                cache.root.display()
            );
            Ok(0)
        }
    }
}

fn size(bytes: u64) -> String {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

fn ago(t: SystemTime) -> String {
    let secs = SystemTime::now()
        .duration_since(t)
        .map_or(0, |d| d.as_secs());
    match secs {
        0..=119 => "just now".into(),
        120..=7199 => format!("{} min ago", secs / 60),
        7200..=172_799 => format!("{} h ago", secs / 3600),
        _ => format!("{} days ago", secs / 86_400),
    }
}
