//! `lcx list`: the experiments in the database, newest first.

use crate::args::{DbArgs, TableOrJson};
use crate::db::{open_db, user_or_not};

/// Output of `lcx list` and `lcx history`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx list -n 10")]
pub struct Args {
    /// Show at most this many experiments.
    #[arg(long, short = 'n')]
    limit: Option<usize>,
    #[command(flatten)]
    output: TableOrJson,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let store = open_db(&args.db)?;
    let rows = store.experiment_list(args.limit).map_err(user_or_not)?;
    if args.output.json() {
        jsonln!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("No experiments in {} yet.", args.db.display());
        return Ok(0);
    }
    let mut t = lcx_core::text::markdown_table();
    t.set_header(vec![
        "ID",
        "Date",
        "Host",
        "Name",
        "Status",
        "Workload",
        "Arms",
        "Cells done",
        "Failed",
        "Interrupted",
        "Skipped",
    ]);
    for r in rows {
        t.add_row(vec![
            r.id.to_string(),
            r.created_at
                .get(..16)
                .unwrap_or(&r.created_at)
                .replace('T', " "),
            r.host
                .as_deref()
                .map_or_else(|| "—".into(), lcx_core::escape::md_inline),
            r.name,
            r.status,
            r.workload,
            r.arms.join(", "),
            format!("{}/{}", r.completed, r.cells),
            r.failed.to_string(),
            r.interrupted.to_string(),
            r.skipped.to_string(),
        ]);
    }
    outln!("{t}");
    Ok(0)
}
