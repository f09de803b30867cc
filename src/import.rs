//! `lcx import FILE…`: experiments from other lcx databases (another host,
//! a CI job, a copy) into this one. Which experiments come in and why is
//! lcx-core's `store::import`; this file opens the databases and prints.

use std::path::PathBuf;

use lcx_core::store::import::{scratch, Imported, Scratch, Source};
use lcx_core::store::Store;

use crate::db::user_or_not;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx import ci-run-41.db ci-run-42.db --db history.db\n  lcx import laptop.db --dry-run\n\nAn experiment here already (the same uuid, the same cells and lines) is skipped, so importing a file twice adds nothing; one with other content is refused and named. Each file is imported in one transaction: a failure leaves this database as it was before that file. Experiments still running in a file are left for a later import."
)]
pub struct Args {
    /// lcx databases or `lcx export --format json` files to import from,
    /// in order (never changed; an older database is upgraded in a copy).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Say what would come in, file after file (imported into a scratch
    /// copy of the database); change nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    db: crate::args::DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    // Working copies left by an import that was killed, removed; this
    // one's removed on Ctrl-C or SIGTERM too (and on any error, as they
    // are dropped).
    scratch::remove_stale();
    scratch::remove_on_signal();
    let path: &std::path::Path = &args.db;
    // A database this import would create is removed again when it fails:
    // a failed import leaves no new file behind.
    let existed = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
    let result = import(&args);
    if scratch::signalled() {
        // The handler is removing the working copies and ends the process
        // with 130: the failure the signal caused is not this import's.
        loop {
            std::thread::park();
        }
    }
    if result.is_err() && !existed && !args.dry_run {
        for file in lcx_core::files::with_side_files(path) {
            let _ = std::fs::remove_file(file);
        }
    }
    result
}

fn import(args: &Args) -> anyhow::Result<u8> {
    // Every file checked (and an older one upgraded in a copy) before the
    // database is opened: a bad one changes and creates nothing.
    let sources = args
        .files
        .iter()
        .map(|f| Source::open(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(user_or_not)?;
    let path: &std::path::Path = &args.db;
    // A dry run imports into a scratch copy of the database: it says what
    // a real import would do, file after file, and writes nothing here.
    enum Into {
        Database(Store),
        Copy(Box<Scratch>),
    }
    let mut into = if args.dry_run {
        Into::Copy(Box::new(Scratch::of(path).map_err(user_or_not)?))
    } else {
        Into::Database(Store::open(path).map_err(user_or_not)?)
    };
    for source in &sources {
        let imported = match &mut into {
            Into::Database(store) => store.import_source(source, false),
            Into::Copy(scratch) => scratch.import_source(source),
        }
        .map_err(user_or_not)?;
        outln!(
            "{}",
            describe(
                &source.path().display().to_string(),
                &imported,
                args.dry_run
            )
        );
    }
    Ok(0)
}

/// `a.db: 2 experiments added (#4 option-b, #5 smoke), 1 here already`.
fn describe(file: &str, imported: &Imported, dry_run: bool) -> String {
    let list = |items: &[lcx_core::store::import::ImportedExperiment]| {
        items
            .iter()
            .map(|e| match e.id {
                Some(id) => format!("#{id} {}", e.name),
                None => format!("{} (#{} there)", e.name, e.source_id),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let verb = if dry_run { "would be added" } else { "added" };
    let mut parts = vec![format!(
        "{} {verb}{}",
        lcx_core::text::counted(imported.added.len() as u64, "experiment"),
        if imported.added.is_empty() {
            String::new()
        } else {
            format!(" ({})", list(&imported.added))
        }
    )];
    if !imported.present.is_empty() {
        parts.push(format!("{} here already", imported.present.len()));
    }
    if imported.reports > 0 {
        parts.push(format!(
            "{} {verb} to those",
            lcx_core::text::counted(imported.reports as u64, "archived report")
        ));
    }
    if !imported.running.is_empty() {
        parts.push(format!(
            "{} still running there, left out ({})",
            imported.running.len(),
            list(&imported.running)
        ));
    }
    if !imported.abandoned.is_empty() {
        parts.push(format!(
            "{} abandoned there (its runner is gone), left out until it is resumed \
             (`lcx run --resume ID`) or removed there ({})",
            imported.abandoned.len(),
            list(&imported.abandoned)
        ));
    }
    format!("{file}: {}", parts.join("; "))
}
