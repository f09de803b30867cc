//! `lcx bisect`'s policy: which arm and metric are bisected, the commits
//! of `good..bad`, which commit each probe runs, a commit that does not
//! build skipped as `git bisect skip` does, and when the answer is found
//! (one commit, or the candidates skips left). Each probe is an ordinary
//! experiment, run by [`RunRequest`] as `lcx run` runs one. This module
//! prints nothing: what it finds reaches the command line through a
//! [`BisectObserver`], which owns the words and the streams.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::experiment::bisect::{self, Commit, Found, Probe};
use crate::experiment::plan::{self, Overrides, Plan, PlanError};
use crate::experiment::revision::{BuildFailure, RevisionError};
use crate::experiment::run::{Reporter, StopSignal};
use crate::report::stats::Verdict;
use crate::store::{ExperimentStatus, StoreError};

use super::{Host, Prepared, RunRequest, RunSettings, SessionError, Start};

/// What `lcx bisect` was asked to do.
#[derive(Debug, Clone)]
pub struct BisectRequest {
    /// The experiment file whose arm is bisected.
    pub file: PathBuf,
    /// A revision where the arm is fast, and a later one where it is slow.
    pub good: String,
    pub bad: String,
    /// The arm (default: the file's baseline) and the metric judged
    /// (default: the file's primary metric).
    pub arm: Option<String>,
    pub metric: Option<String>,
    /// Replace the file's `repeats` and `iterations` in every probe.
    pub repeats: Option<u32>,
    pub iterations: Option<u32>,
    pub db: PathBuf,
}

/// Why a bisection cannot start or go on. [`BisectError::is_user_input`]
/// tells the request's fault (exit 2) from a failure while working.
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("--arm {arm}: no such arm in {file} (arms: {arms})")]
    NoSuchArm {
        arm: String,
        file: String,
        arms: String,
    },
    #[error("{file}: no metric to judge: give --metric, a [gate] or [[columns]]")]
    NoMetric { file: String },
    /// A probe is two arms at one setting; a sweep is many settings.
    #[error(
        "{file} has a [sweep]: lcx bisect probes one arm at one setting; copy the file \
         without [sweep], with the point's value in the arm's `set` (or `env`)"
    )]
    Sweep { file: String },
    #[error("the bisected arm's repository")]
    NoRepository,
    /// `--good` or `--bad` names no commit.
    #[error("{0}")]
    Resolve(String),
    #[error("--good {good} --bad {bad}: {reason}")]
    Range {
        good: String,
        bad: String,
        reason: String,
    },
    #[error("--bad {bad} is not a descendant of --good {good} in {repository}: nothing to bisect")]
    NotDescendant {
        good: String,
        bad: String,
        repository: String,
    },
    /// A probe's experiment could not be prepared or run.
    #[error(transparent)]
    Session(Box<SessionError>),
    #[error("a probe is a new experiment, so it always has cells to run")]
    NothingToRun,
    #[error("interrupted at {commit} (experiment {id}); the probes so far are in {db}")]
    Interrupted { commit: String, id: i64, db: String },
    #[error("reading experiment {id}")]
    Report {
        id: i64,
        #[source]
        source: StoreError,
    },
    #[error(
        "probe of {commit} did not complete (experiment {id}): see `lcx report {id} --db {db}`"
    )]
    Incomplete { commit: String, id: i64, db: String },
}

impl BisectError {
    /// Whether the request is at fault (the file, a flag, a revision):
    /// exit 2. A probe's session error says so itself.
    pub fn is_user_input(&self) -> bool {
        match self {
            BisectError::Plan(_)
            | BisectError::NoSuchArm { .. }
            | BisectError::NoMetric { .. }
            | BisectError::Sweep { .. }
            | BisectError::Resolve(_)
            | BisectError::Range { .. }
            | BisectError::NotDescendant { .. } => true,
            BisectError::Session(e) => e.is_user_input(),
            BisectError::NoRepository
            | BisectError::NothingToRun
            | BisectError::Interrupted { .. }
            | BisectError::Report { .. }
            | BisectError::Incomplete { .. } => false,
        }
    }
}

impl From<SessionError> for BisectError {
    fn from(err: SessionError) -> BisectError {
        BisectError::Session(Box::new(err))
    }
}

/// What one probe found of its commit, as the command line shows it.
#[derive(Debug)]
pub enum Finding<'a> {
    /// The commit does not build: it is skipped.
    Skipped(&'a BuildFailure),
    /// The probe ran as experiment `experiment_id`: the candidate's verdict
    /// against good (`None`: no data) and its speed as a ratio of good's.
    Judged {
        verdict: Option<Verdict>,
        ratio: Option<f64>,
        experiment_id: i64,
    },
}

/// One probe, numbered from 1 in the order they ran.
#[derive(Debug)]
pub struct ProbeReport<'a> {
    pub number: usize,
    pub commit: &'a Commit,
    pub finding: Finding<'a>,
}

/// Where a bisection's progress goes: the command line prints it.
pub trait BisectObserver {
    /// A line of a revision build's progress.
    fn build_progress(&mut self, line: &str);
    /// A fresh reporter for one probe's cells.
    fn reporter(&mut self) -> Box<dyn Reporter>;
    /// What a probe found, as soon as it is known.
    fn probed(&mut self, probe: &ProbeReport<'_>);
}

/// How a bisection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `bad` is not regressed against `good`: nothing to bisect.
    NotRegressed,
    /// The first regressed commit.
    First(Commit),
    /// Skipped commits left several candidates, oldest first: every one
    /// but the last was skipped (it does not build), the last is regressed.
    OneOf(Vec<Commit>),
}

/// A bisection whose arm, metric and commits are known; nothing has run.
#[derive(Debug, Clone)]
pub struct Bisection {
    request: BisectRequest,
    /// The arm and the metric judged.
    pub arm: String,
    pub metric: String,
    /// `good..bad` on bad's first-parent line, oldest first; never empty.
    pub commits: Vec<Commit>,
    /// `good` as resolved once: a commit made during a long bisect moves
    /// neither the baseline nor the range.
    good_sha: String,
}

/// A commit's sha as lcx bisect shows it: its first 12 characters.
pub fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

impl BisectRequest {
    /// Reads the file, chooses the arm and the metric and lists the commits
    /// to search; builds nothing and writes nothing.
    pub fn prepare(&self) -> Result<Bisection, BisectError> {
        let (file_plan, _) = plan::load(&self.file, &Overrides::default())?;
        let arm = self.arm(&file_plan)?;
        let metric = self.metric(&file_plan)?;
        let mut bisection = Bisection {
            request: self.clone(),
            arm,
            metric,
            commits: Vec::new(),
            good_sha: String::new(),
        };
        let overrides = bisection.overrides(&self.good, &self.bad);
        let (first, _) = plan::load(&self.file, &overrides)?;
        let repository = first
            .arms
            .iter()
            .find_map(|a| a.revision.as_ref())
            .map(|r| r.repository.clone())
            .ok_or(BisectError::NoRepository)?;
        let (good_sha, commits) = self.commits(&repository)?;
        bisection.good_sha = good_sha;
        bisection.commits = commits;
        Ok(bisection)
    }

    /// `--arm`, else the file's baseline; it must be one of the file's arms.
    fn arm(&self, file_plan: &Plan) -> Result<String, BisectError> {
        if file_plan.sweep.is_some() {
            return Err(BisectError::Sweep {
                file: self.file.display().to_string(),
            });
        }
        let arm = self
            .arm
            .clone()
            .unwrap_or_else(|| file_plan.baseline.clone());
        if file_plan.arms.iter().any(|a| a.name == arm) {
            return Ok(arm);
        }
        Err(BisectError::NoSuchArm {
            arm,
            file: self.file.display().to_string(),
            arms: file_plan
                .arms
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// `--metric`, else the file's primary metric (its gate's, else its
    /// first speedup column's, else its first column's).
    fn metric(&self, file_plan: &Plan) -> Result<String, BisectError> {
        self.metric
            .clone()
            .or_else(|| file_plan.primary_metric())
            .ok_or_else(|| BisectError::NoMetric {
                file: self.file.display().to_string(),
            })
    }

    /// Both ends resolved once, and the commits between them: good's sha
    /// and `good..bad`, which must not be empty.
    fn commits(&self, repository: &Path) -> Result<(String, Vec<Commit>), BisectError> {
        let ends = bisect::resolve(repository, &self.good)
            .and_then(|g| bisect::resolve(repository, &self.bad).map(|b| (g, b)));
        let (good_sha, bad_sha) = ends.map_err(BisectError::Resolve)?;
        let commits = bisect::range(repository, &good_sha, &bad_sha).map_err(|reason| {
            BisectError::Range {
                good: self.good.clone(),
                bad: self.bad.clone(),
                reason,
            }
        })?;
        if commits.is_empty() {
            return Err(BisectError::NotDescendant {
                good: self.good.clone(),
                bad: self.bad.clone(),
                repository: repository.display().to_string(),
            });
        }
        Ok((good_sha, commits))
    }
}

impl Bisection {
    /// About how many probes the search takes after checking the ends.
    pub fn expected_probes(&self) -> usize {
        (self.commits.len() as f64).log2().ceil() as usize
    }

    /// The file's changes for one probe: the arm at `good_rev` as the
    /// baseline and at `rev` as the candidate, read from the file by the
    /// same reader as any plan.
    fn overrides(&self, good_rev: &str, rev: &str) -> Overrides {
        let arm = &self.arm;
        Overrides {
            repeats: self.request.repeats,
            iterations: self.request.iterations,
            probe: Some(plan::Probe {
                arm: arm.clone(),
                good: (
                    good_rev.to_string(),
                    format!("{arm} at {}", self.request.good),
                ),
                candidate: (rev.to_string(), format!("{arm} at {rev}")),
                metric: self.metric.clone(),
            }),
            ..Overrides::default()
        }
    }

    /// Runs the search: `bad` first (it must be regressed, or there is
    /// nothing to bisect), then the commits between, about log2 of them.
    /// The database must already be open-able: the command line opens it
    /// before the first build, so that a wrong `--db` fails at once.
    pub fn run(
        &self,
        host: &Host,
        stop: &Arc<StopSignal>,
        observer: &mut dyn BisectObserver,
    ) -> Result<Outcome, BisectError> {
        let mut prober = Prober {
            bisection: self,
            host,
            stop,
            observer,
            count: 0,
        };
        let commits = &self.commits;
        let last = &commits[commits.len() - 1];
        if prober.judge(last, false)? != Probe::Bad {
            return Ok(Outcome::NotRegressed);
        }
        Ok(
            match bisect::first_bad(commits.len(), |i| prober.judge(&commits[i], true))? {
                Found::One(i) => Outcome::First(commits[i].clone()),
                Found::OneOf(range) => {
                    Outcome::OneOf(range.iter().map(|&i| commits[i].clone()).collect())
                }
            },
        )
    }
}

/// One bisection's probes as they run, numbered.
struct Prober<'a> {
    bisection: &'a Bisection,
    host: &'a Host,
    stop: &'a Arc<StopSignal>,
    observer: &'a mut dyn BisectObserver,
    count: usize,
}

impl Prober<'_> {
    /// Runs one probe: `Bad` when the commit is regressed against good,
    /// `Skip` when it does not build and `skippable` (any commit but the
    /// ends: a bisection needs a judged good and bad end).
    fn judge(&mut self, commit: &Commit, skippable: bool) -> Result<Probe, BisectError> {
        self.count += 1;
        let b = self.bisection;
        let request = RunRequest {
            start: Start::File(b.request.file.clone()),
            overrides: b.overrides(&b.good_sha, &commit.sha),
            db: b.request.db.clone(),
            detach: false,
            takeover: false,
        };
        let observer = &mut *self.observer;
        let prepared = request.prepare(self.host, &mut |line: &str| {
            observer.build_progress(line);
        });
        let prepared = match prepared {
            // Only the probed commit's own build: `good` failing to build
            // leaves nothing to compare with.
            Err(SessionError::Revision(RevisionError::Build(failure)))
                if skippable && failure.arm == "candidate" =>
            {
                self.report(commit, Finding::Skipped(&failure));
                return Ok(Probe::Skip);
            }
            other => other?,
        };
        let Prepared::Ready(mut session) = prepared else {
            return Err(BisectError::NothingToRun);
        };
        let settings = RunSettings {
            fail_fast: false,
            keep_runs: false,
            stop: Arc::clone(self.stop),
            cuda_available: None,
            host_lock: true,
        };
        let mut reporter = self.observer.reporter();
        let summary = session.run(self.host, settings, reporter.as_mut());
        drop(reporter);
        let summary = summary?;
        let id = session.experiment_id;
        let db = || b.request.db.display().to_string();
        if summary.status == ExperimentStatus::Interrupted {
            return Err(BisectError::Interrupted {
                commit: short(&commit.sha).to_string(),
                id,
                db: db(),
            });
        }
        let judged = candidate_verdict(&session.store, id, &b.metric)?;
        self.report(
            commit,
            Finding::Judged {
                verdict: judged.map(|(v, _)| v),
                ratio: judged.and_then(|(_, r)| r),
                experiment_id: id,
            },
        );
        if summary.status != ExperimentStatus::Completed && judged.is_none() {
            return Err(BisectError::Incomplete {
                commit: short(&commit.sha).to_string(),
                id,
                db: db(),
            });
        }
        Ok(match judged {
            Some((Verdict::Regressed, _)) => Probe::Bad,
            _ => Probe::Good,
        })
    }

    fn report(&mut self, commit: &Commit, finding: Finding<'_>) {
        self.observer.probed(&ProbeReport {
            number: self.count,
            commit,
            finding,
        });
    }
}

/// The candidate's verdict against good on `metric` in probe experiment
/// `id`, with its speed as a ratio of good's; `None` when it has none.
fn candidate_verdict(
    store: &crate::store::Store,
    id: i64,
    metric: &str,
) -> Result<Option<(Verdict, Option<f64>)>, BisectError> {
    let report = crate::report::builder::load(store, id, Default::default())
        .map_err(|source| BisectError::Report { id, source })?;
    Ok(report
        .arms
        .iter()
        .find(|a| a.name == "candidate")
        .and_then(|a| a.metric(metric))
        .and_then(|m| m.comparison.as_ref())
        .map(|c| (c.verdict, c.speedup.map(|s| s.ratio))))
}
