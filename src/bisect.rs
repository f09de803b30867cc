//! `lcx bisect --good REV --bad REV FILE`: the first commit of `good..bad`
//! whose arm is *regressed* against `good`. Every probe is an ordinary
//! experiment named `<name>-bisect`: the arm at `good` (baseline) and at the
//! probed commit, interleaved, stored in the database like any other.

use std::path::PathBuf;

use anyhow::Context;

use lcx_core::experiment::runner::StopSignal;
use lcx_core::experiment::{bisect, plan, revision, Plan};
use lcx_core::report::stats::Verdict;
use lcx_core::store::{ExperimentStatus, Store};

use crate::args::DbArgs;
use crate::bad_input;

use super::run::{execute, install_signal_handler, options, progress_line, record, revision_error};

/// Exit code when `bad` is not slower than `good` (nothing to bisect).
const EXIT_NOT_REGRESSED: u8 = 1;

#[derive(Debug, clap::Args)]
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
    #[arg(long, value_name = "N")]
    repeats: Option<u32>,
    /// Replace the file's `iterations` in every probe.
    #[arg(long, value_name = "N")]
    iterations: Option<u32>,
    #[command(flatten)]
    db: DbArgs,
    /// Plain log lines even on a terminal.
    #[arg(long)]
    plain: bool,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let (file_plan, text) =
        plan::load(&args.file, &plan::Overrides::default()).map_err(bad_input)?;
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
    // One probe's plan: the arm at `good` as the baseline, at `rev` as the
    // candidate; no gate or guards (they name the file's arms).
    let probe = |good_rev: &str, rev: &str| -> anyhow::Result<Plan> {
        let overrides = plan::Overrides {
            revisions: vec![(arm.clone(), rev.to_string())],
            repeats: args.repeats,
            iterations: args.iterations,
            ..plan::Overrides::default()
        };
        let (mut plan, _) = plan::load(&args.file, &overrides).map_err(bad_input)?;
        let template = plan
            .arms
            .iter()
            .find(|a| a.name == arm)
            .cloned()
            .context("the bisected arm")?;
        let mut good = template.clone();
        good.name = "good".into();
        good.label = format!("{arm} at {}", args.good);
        if let Some(r) = good.revision.as_mut() {
            r.asked = good_rev.to_string();
        }
        let mut candidate = template;
        candidate.name = "candidate".into();
        candidate.label = format!("{arm} at {rev}");
        plan.name = format!("{}-bisect", plan.name);
        plan.arms = vec![good, candidate];
        plan.baseline = "good".into();
        plan.gate = None;
        plan.guards.clear();
        plan.adaptive = None;
        if !plan.columns.iter().any(|c| c.metric == metric) {
            plan.columns.push(lcx_core::experiment::Column {
                metric: metric.clone(),
                label: metric.clone(),
                show: lcx_core::experiment::Show::Both,
                direction: None,
                fold: lcx_core::experiment::Fold::Mean,
            });
        }
        Ok(plan)
    };
    let first = probe(&args.good, &args.bad)?;
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

    let cache = crate::run::revision_cache(&args.db);
    let mut store = Store::open(&args.db).map_err(super::run::user_or_work)?;
    let stop = StopSignal::new();
    install_signal_handler(&stop)?;
    let options = options(&stop)?;
    let steps = (commits.len() as f64).log2().ceil() as usize;
    println!(
        "bisecting `{arm}` on {metric}: {} commits in {}..{}, about {steps} probes after \
         checking the ends",
        commits.len(),
        args.good,
        args.bad
    );
    // Runs one probe; `Ok(true)` when the commit is regressed against good.
    let mut probe_count = 0;
    let mut judge = |commit: &bisect::Commit| -> anyhow::Result<bool> {
        probe_count += 1;
        let mut plan = probe(&good_sha, &commit.sha)?;
        revision::prepare(&mut plan, &cache, &mut progress_line).map_err(revision_error)?;
        let id = record(&mut store, &plan, &text, &args.db)?;
        let summary = execute(&mut store, &plan, id, &options, args.plain, &args.db)?;
        if summary.status == ExperimentStatus::Interrupted {
            anyhow::bail!(
                "interrupted at {} (experiment {id}); the probes so far are in {}",
                short(&commit.sha),
                args.db.display()
            );
        }
        let report = lcx_core::report::build::load(&store, id, Default::default())
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
        println!(
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
        Ok(matches!(verdict, Some((Verdict::Regressed, _))))
    };
    let last = &commits[commits.len() - 1];
    if !judge(last)? {
        println!(
            "{} is not regressed against {} on {metric}: nothing to bisect",
            args.bad, args.good
        );
        return Ok(EXIT_NOT_REGRESSED);
    }
    let found = bisect::first_bad(commits.len(), |i| judge(&commits[i]))?;
    let commit = &commits[found];
    println!(
        "first regressed revision: {} {}",
        short(&commit.sha),
        commit.subject
    );
    Ok(0)
}

fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}
