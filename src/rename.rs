//! `lcx rename`: experiments given another name (their history moves with it).

use anyhow::anyhow;

use crate::args::DbArgs;
use crate::bad_input;
use crate::db::user_or_not;
use lcx_core::store::{Store, StoreError};

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx rename quick sort-speedup   every experiment named quick")]
pub struct Args {
    /// An experiment id, `latest`, or a name (every experiment of that name).
    experiment: String,
    /// The new name (one line, at most 200 characters).
    new_name: String,
    /// Rename an experiment whose runner cannot be checked from this host
    /// (another host) or that is detached to its Slurm jobs. One whose
    /// runner is alive here is never renamed: its cells would go on getting
    /// the old name.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    db: DbArgs,
}

/// The ids `selectors` name: an id, `latest`, or a name, which stands for
/// every experiment of that name (oldest first), without repeats.
pub fn resolve_all(store: &Store, selectors: &[String]) -> anyhow::Result<Vec<i64>> {
    let mut ids = Vec::new();
    for s in selectors {
        let found: Vec<i64> = if s == "latest" || s.parse::<i64>().is_ok() {
            vec![store.find_experiment(s).map_err(user_or_not)?.id]
        } else {
            let mut of_name: Vec<i64> = store
                .experiments(Some(s))
                .map_err(user_or_not)?
                .iter()
                .map(|e| e.id)
                .collect();
            of_name.reverse();
            of_name
        };
        if found.is_empty() {
            return Err(user_or_not(StoreError::ExperimentNotFound(s.clone())));
        }
        for id in found {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    Ok(ids)
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    lcx_core::experiment::plan::check_name(&args.new_name)
        .map_err(|m| bad_input(anyhow!("the new name {m}")))?;
    let mut store = crate::db::open_db_for_writing(&args.db)?;
    let ids = resolve_all(&store, std::slice::from_ref(&args.experiment))?;
    let joined = store
        .experiments(Some(&args.new_name))
        .map_err(user_or_not)?
        .len();
    store
        .rename_experiments(&ids, &args.new_name, args.force)
        .map_err(user_or_not)?;
    outln!(
        "renamed {} experiment(s) to `{}`{}",
        ids.len(),
        args.new_name,
        if joined > 0 {
            format!(", beside the {joined} already named so (one history now)")
        } else {
            String::new()
        }
    );
    Ok(0)
}
