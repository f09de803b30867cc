//! `lcx bisect --good REV --bad REV FILE`: the first commit of `good..bad`
//! whose arm is *regressed* against `good`. Every probe is an ordinary
//! experiment named `<name>-bisect`: the arm at `good` (baseline) and at the
//! probed commit, interleaved, stored in the database like any other. A
//! probed commit whose build fails is skipped, as `git bisect skip` does,
//! and the answer may then be a range of commits rather than one. That
//! policy is lcx-core's `session::bisect`; this file turns the flags into
//! its request, opens the database and prints what it reports.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use lcx_core::experiment::reporter;
use lcx_core::experiment::run::{Reporter, StopSignal};
use lcx_core::session::bisect::{
    short, BisectObserver, BisectRequest, Finding, Outcome, ProbeReport,
};
use lcx_core::session::{Host, SessionError};
use lcx_core::store::Store;

use crate::args::DbArgs;

/// Exit code when `bad` is not slower than `good` (nothing to bisect).
const EXIT_NOT_REGRESSED: u8 = 1;

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx bisect --good v0.1 --bad HEAD experiments/revisions.toml")]
pub struct Args {
    /// A revision where the arm is fast.
    #[arg(long, value_name = "REV")]
    good: String,
    /// A later revision where it is slow.
    #[arg(long, value_name = "REV")]
    bad: String,
    /// The experiment file whose arm is bisected.
    file: PathBuf,
    /// The arm to bisect (default: the baseline).
    #[arg(long, value_name = "NAME")]
    arm: Option<String>,
    /// The metric judged (default: the gate's, else the first speedup
    /// column's, else the first column's).
    #[arg(long, value_name = "NAME")]
    metric: Option<String>,
    /// Replace the file's `repeats` in every probe.
    #[arg(long, value_name = "N", value_parser = crate::args::count, allow_hyphen_values = true)]
    repeats: Option<u32>,
    /// Replace the file's `iterations` in every probe.
    #[arg(long, value_name = "N", value_parser = crate::args::count, allow_hyphen_values = true)]
    iterations: Option<u32>,
    #[command(flatten)]
    db: DbArgs,
    /// Plain log lines even on a terminal.
    #[arg(long)]
    plain: bool,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let request = BisectRequest {
        file: args.file,
        good: args.good,
        bad: args.bad,
        arm: args.arm,
        metric: args.metric,
        repeats: args.repeats,
        iterations: args.iterations,
        db: args.db.to_path_buf(),
    };
    let bisection = request.prepare()?;
    // The database is opened (and made) before the first build: a wrong
    // --db fails at once.
    drop(Store::open(&request.db).map_err(SessionError::opening)?);
    // Builds of lcx revisions link the libtorch this lcx was built against.
    let libtorch = option_env!("LCX_LIBTORCH_LIB").map(Path::new);
    let stop = StopSignal::on_signals().context("installing the Ctrl-C handler")?;
    let host = Host::this_process(libtorch)
        .context("locating the lcx binary")?
        .with_stop(Arc::clone(&stop));
    outln!(
        "bisecting `{}` on {}: {} commits in {}..{}, about {} probes after \
         checking the ends",
        bisection.arm,
        bisection.metric,
        bisection.commits.len(),
        request.good,
        request.bad,
        bisection.expected_probes()
    );
    let mut printer = Printer { plain: args.plain };
    match bisection.run(&host, &stop, &mut printer)? {
        Outcome::NotRegressed => {
            outln!(
                "{} is not regressed against {} on {}: nothing to bisect",
                request.bad,
                request.good,
                bisection.metric
            );
            return Ok(EXIT_NOT_REGRESSED);
        }
        Outcome::First(commit) => outln!(
            "first regressed revision: {} {}",
            short(&commit.sha),
            commit.subject
        ),
        Outcome::OneOf(candidates) => print_candidates(&candidates),
    }
    Ok(0)
}

/// What `git bisect` says when skips leave several candidates: the commits
/// it could not tell apart, none of them blamed.
fn print_candidates(candidates: &[lcx_core::experiment::bisect::Commit]) {
    outln!(
        "skipped commits that do not build leave more than one candidate: the first \
         regressed revision is one of: {}",
        candidates
            .iter()
            .map(|c| short(&c.sha))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // Every one but the last was skipped; the last is regressed.
    for (k, c) in candidates.iter().enumerate() {
        let why = if k + 1 == candidates.len() {
            "regressed"
        } else {
            "skipped: does not build"
        };
        outln!("  {} {} ({why})", short(&c.sha), c.subject);
    }
}

/// Prints a bisection's progress: builds and probes' cells on stderr, one
/// line per probe on stdout.
struct Printer {
    plain: bool,
}

impl BisectObserver for Printer {
    fn build_progress(&mut self, line: &str) {
        errln!("lcx: {line}");
    }

    fn reporter(&mut self) -> Box<dyn Reporter> {
        reporter::for_stderr(self.plain)
    }

    fn probed(&mut self, probe: &ProbeReport<'_>) {
        let (n, sha, subject) = (
            probe.number,
            short(&probe.commit.sha),
            &probe.commit.subject,
        );
        match &probe.finding {
            Finding::Skipped(failure) => {
                errln!(
                    "lcx: {sha} does not build (`{}` {}): skipping it, as `git bisect skip` \
                     does; build log: {}",
                    failure.command,
                    failure.status,
                    failure.log.display()
                );
                outln!("probe {n}: {sha} {subject}: skipped, does not build");
            }
            Finding::Judged {
                verdict,
                ratio,
                experiment_id,
            } => {
                let word = verdict.map_or("no data", |v| v.text());
                let ratio =
                    ratio.map_or_else(String::new, |r| format!(", {r:.2}× of good's speed"));
                outln!("probe {n}: {sha} {subject}: {word}{ratio} (experiment {experiment_id})");
            }
        }
    }
}
