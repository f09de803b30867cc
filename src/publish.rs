//! `lcx publish DIR`: the database as a static site (index, a page per
//! experiment, a history page per arm and metric) that opens from the
//! file system.

use std::path::PathBuf;

use crate::args::DbArgs;
use crate::db::{open_db, user_or_not};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example:\n  lcx publish site/ && xdg-open site/index.html\n\nA second publish into the same folder rebuilds only the pages whose data changed."
)]
pub struct Args {
    /// The site's folder: new, empty, or one an earlier `lcx publish` wrote.
    dir: PathBuf,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let store = open_db(&args.db)?;
    let started = std::time::Instant::now();
    let done = lcx_core::publish::publish(&store, &args.dir).map_err(|e| {
        if e.is_user_input() {
            crate::bad_input(anyhow::Error::new(e))
        } else {
            anyhow::Error::new(e).context(format!("publishing into {}", args.dir.display()))
        }
    });
    let done = done.map_err(|e| match e.downcast::<lcx_core::store::StoreError>() {
        Ok(store) => user_or_not(store),
        Err(other) => other,
    })?;
    outln!(
        "published {} experiment(s) and {} history page(s) into {} in {:.2} s: {} file(s) \
         written, {} page(s) unchanged, {} removed; open {}",
        done.experiments,
        done.histories,
        args.dir.display(),
        started.elapsed().as_secs_f64(),
        done.written,
        done.kept,
        done.removed,
        args.dir.join("index.html").display()
    );
    Ok(0)
}
