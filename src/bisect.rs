//! `lcx bisect --good REV --bad REV FILE`: the first commit of `good..bad`
//! whose arm is *regressed* against `good`. Every probe is an ordinary
//! experiment named `<name>-bisect`: the arm at `good` (baseline) and at the
//! probed commit, interleaved, stored in the database like any other. A
//! probed commit whose build fails is skipped, as `git bisect skip` does,
//! and the answer may then be a range of commits rather than one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

use lcx_core::experiment::bisect::{Found, Probe};
use lcx_core::experiment::revision::RevisionError;
use lcx_core::experiment::run::StopSignal;
use lcx_core::experiment::{bisect, plan, reporter};
use lcx_core::report::stats::Verdict;
use lcx_core::session::{Host, Prepared, RunRequest, RunSettings, SessionError, Start};
use lcx_core::store::{ExperimentStatus, Store};

use crate::args::DbArgs;
use crate::bad_input;

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
    let (file_plan, _) = plan::load(&args.file, &plan::Overrides::default()).map_err(bad_input)?;
    let arm = args
        .arm
        .clone()
        .unwrap_or_else(|| file_plan.baseline.clone());
    if !file_plan.arms.iter().any(|a| a.name == arm) {
        return Err(bad_input(anyhow::anyhow!(
            "--arm {arm}: no such arm in {} (arms: {})",
            args.file.display(),
            file_plan
                .arms
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let metric = match args.metric.clone().or_else(|| file_plan.primary_metric()) {
        Some(m) => m,
        None => {
            return Err(bad_input(anyhow::anyhow!(
                "{}: no metric to judge: give --metric, a [gate] or [[columns]]",
                args.file.display()
            )))
        }
    };
    // One probe: the arm at `good` as the baseline, at `rev` as the
    // candidate, read from the file by the same reader as any plan.
    let probe = |good_rev: &str, rev: &str| plan::Overrides {
        repeats: args.repeats,
        iterations: args.iterations,
        probe: Some(plan::Probe {
            arm: arm.clone(),
            good: (good_rev.to_string(), format!("{arm} at {}", args.good)),
            candidate: (rev.to_string(), format!("{arm} at {rev}")),
            metric: metric.clone(),
        }),
        ..plan::Overrides::default()
    };
    let (first, _) = plan::load(&args.file, &probe(&args.good, &args.bad)).map_err(bad_input)?;
    let repository = first
        .arms
        .iter()
        .find_map(|a| a.revision.as_ref())
        .map(|r| r.repository.clone())
        .context("the bisected arm's repository")?;
    // Both ends resolve once: a commit made during a long bisect moves
    // neither `main` as the baseline nor the range.
    let ends = bisect::resolve(&repository, &args.good)
        .and_then(|g| bisect::resolve(&repository, &args.bad).map(|b| (g, b)));
    let (good_sha, bad_sha) = ends.map_err(|e| bad_input(anyhow::anyhow!("{e}")))?;
    let commits = bisect::range(&repository, &good_sha, &bad_sha).map_err(|e| {
        bad_input(anyhow::anyhow!(
            "--good {} --bad {}: {e}",
            args.good,
            args.bad
        ))
    })?;
    if commits.is_empty() {
        return Err(bad_input(anyhow::anyhow!(
            "--bad {} is not a descendant of --good {} in {}: nothing to bisect",
            args.bad,
            args.good,
            repository.display()
        )));
    }

    // The database is opened (and made) before the first build: a wrong
    // --db fails at once.
    drop(Store::open(&args.db).map_err(SessionError::opening)?);
    // Builds of lcx revisions link the libtorch this lcx was built against.
    let libtorch = option_env!("LCX_LIBTORCH_LIB").map(Path::new);
    let stop = StopSignal::on_signals().context("installing the Ctrl-C handler")?;
    let host = Host::this_process(libtorch)
        .context("locating the lcx binary")?
        .with_stop(Arc::clone(&stop));
    let steps = (commits.len() as f64).log2().ceil() as usize;
    outln!(
        "bisecting `{arm}` on {metric}: {} commits in {}..{}, about {steps} probes after \
         checking the ends",
        commits.len(),
        args.good,
        args.bad
    );
    // Runs one probe: `Bad` when the commit is regressed against good,
    // `Skip` when it does not build and `skippable` (any commit but the
    // ends: a bisection needs a judged good and bad end).
    let mut probe_count = 0;
    let mut judge = |commit: &bisect::Commit, skippable: bool| -> anyhow::Result<Probe> {
        probe_count += 1;
        let request = RunRequest {
            start: Start::File(args.file.clone()),
            overrides: probe(&good_sha, &commit.sha),
            db: args.db.to_path_buf(),
            detach: false,
            takeover: false,
        };
        let prepared = match request.prepare(&host, &mut |line: &str| errln!("lcx: {line}")) {
            // Only the probed commit's own build: `good` failing to build
            // leaves nothing to compare with.
            Err(SessionError::Revision(RevisionError::Build(failure)))
                if skippable && failure.arm == "candidate" =>
            {
                errln!(
                    "lcx: {} does not build (`{}` {}): skipping it, as `git bisect skip` \
                     does; build log: {}",
                    short(&commit.sha),
                    failure.command,
                    failure.status,
                    failure.log.display()
                );
                outln!(
                    "probe {probe_count}: {} {}: skipped, does not build",
                    short(&commit.sha),
                    commit.subject
                );
                return Ok(Probe::Skip);
            }
            other => other?,
        };
        let Prepared::Ready(mut session) = prepared else {
            anyhow::bail!("a probe is a new experiment, so it always has cells to run");
        };
        let settings = RunSettings {
            fail_fast: false,
            keep_runs: false,
            stop: Arc::clone(&stop),
            cuda_available: None,
            host_lock: true,
        };
        let mut reporter = reporter::for_stderr(args.plain);
        let summary = session.run(&host, settings, reporter.as_mut());
        drop(reporter);
        let summary = summary?;
        let id = session.experiment_id;
        if summary.status == ExperimentStatus::Interrupted {
            anyhow::bail!(
                "interrupted at {} (experiment {id}); the probes so far are in {}",
                short(&commit.sha),
                args.db.display()
            );
        }
        let report = lcx_core::report::build::load(&session.store, id, Default::default())
            .with_context(|| format!("reading experiment {id}"))?;
        let verdict = report
            .arms
            .iter()
            .find(|a| a.name == "candidate")
            .and_then(|a| a.metric(&metric))
            .and_then(|m| m.comparison.as_ref())
            .map(|c| (c.verdict, c.speedup.map(|s| s.ratio)));
        let (word, ratio) = match verdict {
            Some((v, ratio)) => (v.text(), ratio),
            None => ("no data", None),
        };
        let ratio = ratio.map_or_else(String::new, |r| format!(", {r:.2}× of good's speed"));
        outln!(
            "probe {probe_count}: {} {}: {word}{ratio} (experiment {id})",
            short(&commit.sha),
            commit.subject
        );
        if summary.status != ExperimentStatus::Completed && verdict.is_none() {
            anyhow::bail!(
                "probe of {} did not complete (experiment {id}): see `lcx report {id} --db {}`",
                short(&commit.sha),
                args.db.display()
            );
        }
        Ok(match verdict {
            Some((Verdict::Regressed, _)) => Probe::Bad,
            _ => Probe::Good,
        })
    };
    let last = &commits[commits.len() - 1];
    if judge(last, false)? != Probe::Bad {
        outln!(
            "{} is not regressed against {} on {metric}: nothing to bisect",
            args.bad,
            args.good
        );
        return Ok(EXIT_NOT_REGRESSED);
    }
    match bisect::first_bad(commits.len(), |i| judge(&commits[i], true))? {
        Found::One(i) => outln!(
            "first regressed revision: {} {}",
            short(&commits[i].sha),
            commits[i].subject
        ),
        Found::OneOf(range) => {
            // What `git bisect` says when skips leave several candidates:
            // the commits it could not tell apart, none of them blamed.
            outln!(
                "skipped commits that do not build leave more than one candidate: the first \
                 regressed revision is one of: {}",
                range
                    .iter()
                    .map(|&i| short(&commits[i].sha))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            // Every one but the last was skipped; the last is regressed.
            for (k, &i) in range.iter().enumerate() {
                let why = if k + 1 == range.len() {
                    "regressed"
                } else {
                    "skipped: does not build"
                };
                outln!(
                    "  {} {} ({why})",
                    short(&commits[i].sha),
                    commits[i].subject
                );
            }
        }
    }
    Ok(0)
}

fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}
