//! What `lcx run` and `lcx bisect` share at the terminal: the Ctrl-C
//! handler, the build cache that links this lcx's libtorch, this process
//! as an experiment records it, and the preparation lines. Every decision
//! about a run is lcx-core's (`lcx_core::session`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Context;

use lcx_core::experiment::revision;
use lcx_core::experiment::run::StopSignal;
use lcx_core::session::Host;

/// The build cache of `db`, whose builds of lcx revisions link the
/// libtorch this lcx was built against (found by build.rs).
pub(crate) fn revision_cache(db: &std::path::Path) -> revision::Cache {
    revision::Cache::for_db(db)
        .with_libtorch(option_env!("LCX_LIBTORCH_LIB").map(std::path::Path::new))
}

/// This process: its own binary for lcx cells, its command line.
pub(crate) fn host() -> anyhow::Result<Host> {
    Ok(Host {
        lcx_exe: std::env::current_exe().context("locating the lcx binary")?,
        argv: std::env::args().collect(),
    })
}

/// Prints each preparation line (builds, cache hits) on stderr.
pub(crate) fn progress_line(line: &str) {
    eprintln!("lcx: {line}");
}

/// Ctrl-C / SIGTERM / SIGHUP: the first stops the running child (SIGTERM to
/// its group, SIGKILL after a grace period) and lets the runner record the
/// cell as interrupted; a second kills the child at once.
pub(crate) fn stop_on_signals() -> anyhow::Result<Arc<StopSignal>> {
    let stop = StopSignal::new();
    let handler = Arc::clone(&stop);
    let count = AtomicUsize::new(0);
    ctrlc::set_handler(move || {
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("\nlcx: stopping (press Ctrl-C again to kill the running cell at once)");
            handler.stop();
        } else {
            handler.force();
        }
    })
    .context("installing the Ctrl-C handler")?;
    Ok(stop)
}
