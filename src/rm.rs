//! `lcx rm`: experiments removed from the database, with all their rows.

use crate::args::DbArgs;
use crate::db::user_or_not;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx rm 12              one experiment\n  lcx rm quick --dry-run every experiment named quick, nothing removed"
)]
pub struct Args {
    /// An experiment id, `latest`, or a name (every experiment of that name).
    #[arg(required = true)]
    experiments: Vec<String>,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also remove a `running` experiment whose runner cannot be checked from
    /// this host (another host, a detached Slurm run); a live local runner's
    /// experiment is never removed.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let mut store = crate::db::open_db_for_writing(&args.db)?;
    let ids = crate::rename::resolve_all(&store, &args.experiments)?;
    let removal = store
        .remove_experiments(&ids, args.force, args.dry_run)
        .map_err(user_or_not)?;
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for (id, name) in &removal.experiments {
        outln!("{verb} experiment #{id} ({name})");
    }
    outln!(
        "{verb} {} experiment(s), {} cell(s), {} metric value(s){}",
        removal.experiments.len(),
        removal.runs,
        removal.metric_rows,
        if args.dry_run {
            "; nothing was removed"
        } else {
            ""
        }
    );
    Ok(0)
}
