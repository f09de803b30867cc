//! `lcx history`: which experiments and which metric it shows, and, as
//! pure functions over store rows, one arm's warm-up-excluded mean across
//! past experiments (with a marker where it changed significantly from the
//! previous comparable run). The host fingerprint's key and summary here
//! are shared with `lcx compare` ([`super::compare`]) and the site.

use serde::Serialize;

use crate::experiment::plan::Plan;
use crate::metrics::ITERATION_SECONDS;
use crate::store::report_read::{HistoryRun, RunMoments};
use crate::store::{Experiment, Fingerprint, Store, StoreError};
use crate::text::markdown_table;

use super::builder;
use super::moments::{replicate_summary, shown_summary, SPREAD_LEGEND};
use super::stats::{compare, Comparison, Direction, Summary, Verdict, VerdictRule};
use super::words::{mean_sd, p_text};
use crate::escape::md_inline as md;

/// What must match for two timings to be comparable, each named: host,
/// CPU, GPU, torch and its thread counts (`None` where not recorded).
fn fingerprint_fields(f: &Fingerprint) -> [(&'static str, Option<String>); 8] {
    let number = |n: Option<i64>| n.map(|n| n.to_string());
    [
        ("host name", f.hostname.clone()),
        ("CPU model", f.cpu_model.clone()),
        ("CPU cores", number(f.cpu_cores)),
        ("GPU", f.gpu_name.clone()),
        (
            "CUDA available",
            f.cuda_available
                .map(|c| if c { "yes" } else { "no" }.to_string()),
        ),
        ("torch version", f.torch_version.clone()),
        ("torch intra-op threads", number(f.torch_intra_threads)),
        ("torch inter-op threads", number(f.torch_inter_threads)),
    ]
}

/// What must match for two timings to be comparable: host, CPU, GPU, torch
/// and its thread counts.
pub fn fingerprint_key(f: &Fingerprint) -> String {
    format!("{:?}", fingerprint_fields(f).map(|(_, value)| value))
}

/// Each field of [`fingerprint_key`] in which `a` and `b` differ, named
/// with both values, A's first: `host name: laptop vs ci-runner`. Empty
/// exactly when their keys are equal.
pub fn fingerprint_differences(a: &Fingerprint, b: &Fingerprint) -> Vec<String> {
    let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    fingerprint_fields(a)
        .iter()
        .zip(fingerprint_fields(b).iter())
        .filter(|((_, va), (_, vb))| va != vb)
        .map(|((name, va), (_, vb))| format!("{name}: {} vs {}", shown(va), shown(vb)))
        .collect()
}

/// `Example CPU ×16, RTX 4090, torch 2.11.0`.
pub fn fingerprint_summary(f: &Fingerprint) -> String {
    let mut parts = Vec::new();
    match (&f.cpu_model, f.cpu_cores) {
        (Some(m), Some(c)) => parts.push(format!("{m} ×{c}")),
        (Some(m), None) => parts.push(m.clone()),
        (None, Some(c)) => parts.push(format!("{c} cores")),
        (None, None) => {}
    }
    if let Some(g) = &f.gpu_name {
        parts.push(g.clone());
    }
    if let Some(t) = &f.torch_version {
        parts.push(format!("torch {t}"));
    }
    if parts.is_empty() {
        f.hostname.clone().unwrap_or_else(|| "unknown host".into())
    } else {
        parts.join(", ")
    }
}

/// The runs' values as fractions of their experiment's recorded all-core
/// FP32 peak (`lcx history --of-peak`), so a faster host does not read as a
/// faster build. Runs of experiments without a recorded peak are dropped;
/// returns how many experiments that was.
pub fn scale_to_peak(experiments: &[Experiment], runs: &mut Vec<HistoryRun>) -> usize {
    let peak = |id: i64| {
        experiments
            .iter()
            .find(|e| e.id == id)
            .and_then(|e| e.fingerprint.peak_fp32_gflops)
            .filter(|p| *p > 0.0)
    };
    let mut without: Vec<i64> = Vec::new();
    runs.retain_mut(|r| match peak(r.experiment_id) {
        Some(p) => {
            if let Some(m) = r.moments.as_mut() {
                m.sum /= p;
                m.sum_sq /= p * p;
                m.min /= p;
                m.max /= p;
            }
            true
        }
        None => {
            if !without.contains(&r.experiment_id) {
                without.push(r.experiment_id);
            }
            false
        }
    });
    without.len()
}

/// What orders experiments in a history: when they ran, then their id.
/// Not the id alone: an import gives experiments that ran long ago (on
/// another host, in a CI job) ids later than those that ran after them.
fn when_ran(e: &Experiment) -> (&str, i64) {
    (&e.created_at, e.id)
}

/// The experiments `lcx history NAME` covers, newest first (by when they
/// ran), with the
/// name they share. A name wins over an id or `latest` that spells it (an
/// experiment may be named `3`); only when no experiment has that name is
/// it read as a selector, for the history of the name it finds.
pub fn named_experiments(
    store: &Store,
    name: &str,
) -> Result<(String, Vec<Experiment>), StoreError> {
    let newest_first = |mut experiments: Vec<Experiment>| {
        experiments.sort_by(|a, b| when_ran(b).cmp(&when_ran(a)));
        experiments
    };
    let experiments = store.experiments(Some(name))?;
    if experiments.is_empty() && (name == "latest" || name.parse::<i64>().is_ok()) {
        if let Ok(e) = store.find_experiment(name) {
            let experiments = store.experiments(Some(&e.name))?;
            return Ok((e.name, newest_first(experiments)));
        }
    }
    Ok((name.to_string(), newest_first(experiments)))
}

/// Why `lcx history` cannot show the metric asked for.
#[derive(Debug, thiserror::Error)]
pub enum MetricError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No experiment of the name recorded it: a typo, most likely.
    #[error("--metric {asked}: no experiment named `{name}` recorded it ({hint})")]
    NotRecorded {
        asked: String,
        name: String,
        hint: String,
    },
}

/// The metric `lcx history` shows for `experiments` (newest first, all
/// named `name`): `asked`, which one of them must have recorded, else the
/// one `lcx report` leads with for the newest ([`builder::report_metric`]:
/// for a command experiment without a gate or columns that is a metric its
/// command printed, not the trainer's), else the trainer's iteration time.
pub fn history_metric(
    store: &Store,
    name: &str,
    experiments: &[Experiment],
    asked: Option<&str>,
) -> Result<String, MetricError> {
    let Some(asked) = asked else {
        let chosen = match experiments.first() {
            Some(latest) => builder::report_metric(store, latest)?,
            None => None,
        };
        return Ok(chosen.unwrap_or_else(|| ITERATION_SECONDS.into()));
    };
    let mut known: Vec<String> = Vec::new();
    for e in experiments {
        for recorded in store.metric_names_fast(e.id)? {
            if !known.contains(&recorded) {
                known.push(recorded);
            }
        }
    }
    if known.iter().any(|k| k == asked) {
        return Ok(asked.to_string());
    }
    let near = crate::config::nearest(asked, &known, 3);
    let hint = if near.is_empty() {
        "they recorded no metrics".to_string()
    } else {
        format!("closest recorded: {}", near.join(", "))
    };
    Err(MetricError::NotRecorded {
        asked: asked.to_string(),
        name: name.to_string(),
        hint,
    })
}

/// Which way a change of `metric` counts in a history, by `plan`, the
/// stored plan of its newest experiment (as in that one's report); `None`
/// for a descriptive metric, whose values are shown, never judged.
pub fn judged_direction(plan: Option<&Plan>, metric: &str) -> Option<Direction> {
    let (direction, _) = builder::metric_direction(plan, metric);
    (!builder::is_descriptive(plan, metric)).then_some(direction)
}

/// One line of `lcx history`.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    #[serde(skip)]
    pub fingerprint_key: String,
    pub experiment_id: i64,
    pub date: String,
    pub arm: String,
    pub commit: String,
    /// The host name its experiment recorded.
    pub host: Option<String>,
    pub fingerprint: String,
    pub runs: usize,
    /// What the row shows: [`shown_summary`], as the report does.
    pub summary: Option<Summary>,
    /// What its change is tested on: [`replicate_summary`].
    #[serde(skip)]
    replicate: Option<Summary>,
    /// Against the previous row of this arm with the same fingerprint.
    pub change: Option<Comparison>,
    /// Id of that previous experiment.
    pub compared_with: Option<i64>,
    /// The arm's previous row ran on another host fingerprint: a break in
    /// the series, not a change of code.
    pub new_host: bool,
    /// Why this row starts a new series of its arm, when it does: another
    /// host, another resolved config, command, or iteration count. Such a
    /// row is compared only with earlier rows of the same set-up.
    pub series_break: Option<String>,
    #[serde(skip)]
    setup: Setup,
    /// A step change starts at this row: its relative size, found by
    /// [`step_changes`] over the rows of this arm on this fingerprint.
    pub step: Option<f64>,
    /// Which way that step goes for the metric (`None` for a descriptive
    /// metric, or without a step): the only change `lcx history` marks.
    pub step_verdict: Option<Verdict>,
}

/// Where a series of means shifts to a new level, in the manner of asv's
/// step detection: the piecewise-constant fit (segments of at least 2
/// values) that minimises the squared error plus a penalty of
/// `3 σ² ln n` per segment, σ estimated robustly from successive
/// differences (so a few steps do not inflate it); a boundary is kept where
/// the level moves by at least `min_effect`. Returns (index where the new
/// level starts, relative change), in order.
pub fn step_changes(values: &[f64], min_effect: f64) -> Vec<(usize, f64)> {
    let n = values.len();
    if n < 4 || values.iter().any(|x| !x.is_finite()) {
        return Vec::new();
    }
    let mut diffs: Vec<f64> = values.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    diffs.sort_by(f64::total_cmp);
    let mad = diffs[diffs.len() / 2];
    let scale = values.iter().map(|x| x.abs()).sum::<f64>() / n as f64;
    // Noise of a series with identical values: a hair of its scale.
    let sigma = (mad / (0.6745 * std::f64::consts::SQRT_2)).max(scale * 1e-6);
    let penalty = 3.0 * sigma * sigma * (n as f64).ln();
    let (mut sum, mut sq) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for (i, x) in values.iter().enumerate() {
        sum[i + 1] = sum[i] + x;
        sq[i + 1] = sq[i] + x * x;
    }
    let sse = |a: usize, b: usize| {
        let k = (b - a) as f64;
        let s = sum[b] - sum[a];
        (sq[b] - sq[a] - s * s / k).max(0.0)
    };
    // best[j]: cost of the best fit of values[..j]; from[j]: its last start.
    let mut best = vec![f64::INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = -penalty;
    for j in 2..=n {
        for i in (0..=j - 2).filter(|&i| i == 0 || i >= 2) {
            if !best[i].is_finite() {
                continue;
            }
            let c = best[i] + sse(i, j) + penalty;
            if c < best[j] {
                best[j] = c;
                from[j] = i;
            }
        }
    }
    let mut starts = Vec::new();
    let mut j = n;
    while j > 0 {
        let i = from[j];
        if i > 0 {
            starts.push(i);
        }
        j = i;
    }
    starts.reverse();
    let mean = |a: usize, b: usize| (sum[b] - sum[a]) / (b - a) as f64;
    let mut bounds = vec![0];
    bounds.extend(&starts);
    bounds.push(n);
    let mut out = Vec::new();
    for w in bounds.windows(3) {
        let (before, after) = (mean(w[0], w[1]), mean(w[1], w[2]));
        if before != 0.0 {
            let rel = (after - before) / before.abs();
            if rel.abs() >= min_effect {
                out.push((w[1], rel));
            }
        }
    }
    out
}

/// What a cell measured, beyond the host: two rows of an arm are
/// comparable only when these match. The experiment file's own hash is
/// left out on purpose: editing its notes or columns changes no number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Setup {
    config_sha256: Option<String>,
    /// argv without the program, `--config X` and `--set K=V` (the config
    /// hash covers those, however they were handed over).
    command: Vec<String>,
    env: std::collections::BTreeMap<String, String>,
    iterations: i64,
    warmup: i64,
}

impl Setup {
    fn of(e: &Experiment, run: Option<&HistoryRun>) -> Setup {
        let Some(run) = run else {
            return Setup::default();
        };
        let mut command = Vec::new();
        let mut words = run.command.iter().skip(1);
        while let Some(w) = words.next() {
            if w == "--config" || w == "--set" {
                words.next();
            } else {
                command.push(w.clone());
            }
        }
        Setup {
            config_sha256: run.config_sha256.clone(),
            command,
            env: run.env.clone(),
            iterations: e.iterations,
            warmup: e.warmup,
        }
    }

    /// Why `self` is not comparable with `before`, if it is not.
    fn differs_from(&self, before: &Setup) -> Option<&'static str> {
        if self.config_sha256 != before.config_sha256 {
            Some("config changed")
        } else if (&self.command, &self.env) != (&before.command, &before.env) {
            Some("command changed")
        } else if (self.iterations, self.warmup) != (before.iterations, before.warmup) {
            Some("iterations or warm-up changed")
        } else {
            None
        }
    }
}

/// Builds history rows (oldest first) from `experiments` (any order) and
/// their runs' moments.
pub fn history_rows(
    experiments: &[Experiment],
    runs: &[HistoryRun],
    // `None` for a descriptive metric: values shown, no change judged.
    direction: Option<Direction>,
    rule: VerdictRule,
) -> Vec<HistoryRow> {
    let mut rows: Vec<HistoryRow> = Vec::new();
    // Slot → (experiment id, replicate summary) of the last row: rows
    // compare within one host and one set-up.
    let mut last: Vec<(Slot, (i64, Summary))> = Vec::new();
    let mut exps: Vec<&Experiment> = experiments.iter().collect();
    exps.sort_by_key(|e| when_ran(e));
    let mut arms: Vec<&str> = Vec::new();
    for r in runs {
        if !arms.contains(&r.arm.as_str()) {
            arms.push(&r.arm);
        }
    }
    for e in exps {
        let host_key = fingerprint_key(&e.fingerprint);
        for arm in &arms {
            let these: Vec<&HistoryRun> = runs
                .iter()
                .filter(|r| r.experiment_id == e.id && r.arm == *arm)
                .collect();
            if these.is_empty() {
                continue;
            }
            let setup = Setup::of(
                e,
                these
                    .iter()
                    .find(|r| r.status == "completed")
                    .or(these.first())
                    .copied(),
            );
            let counted: Vec<&RunMoments> = these
                .iter()
                .filter(|r| r.status == "completed")
                .filter_map(|r| r.moments.as_ref())
                .collect();
            let summary = shown_summary(&counted);
            let replicate = replicate_summary(&counted).map(|(s, _, _)| s);
            let slot = (arm.to_string(), host_key.clone(), setup.clone());
            let prev = last.iter().find(|(k, _)| *k == slot).map(|(_, v)| *v);
            let (change, compared_with) = match (&prev, &replicate) {
                (Some((id, p)), Some(s)) => match direction {
                    Some(d) => (Some(compare(p, s, d, rule)), Some(*id)),
                    None => (None, Some(*id)),
                },
                _ => (None, None),
            };
            if let Some(s) = replicate {
                last.retain(|(k, _)| *k != slot);
                last.push((slot, (e.id, s)));
            }
            let before = rows.iter().rev().find(|r| r.arm == *arm);
            let new_host = before.is_some_and(|r| r.fingerprint_key != host_key);
            let series_break = before.and_then(|b| {
                if new_host && b.host == e.fingerprint.hostname {
                    // The name stayed, the machine did not (a CI label
                    // that lands on another CPU, an upgraded box).
                    Some("new hardware".to_string())
                } else if new_host {
                    Some("new host".to_string())
                } else {
                    setup.differs_from(&b.setup).map(str::to_string)
                }
            });
            rows.push(HistoryRow {
                fingerprint_key: host_key.clone(),
                new_host,
                series_break,
                setup,
                step: None,
                step_verdict: None,
                experiment_id: e.id,
                date: e.created_at.get(..10).unwrap_or(&e.created_at).to_string(),
                arm: arm.to_string(),
                commit: commit_label(e),
                host: e.fingerprint.hostname.clone(),
                fingerprint: fingerprint_summary(&e.fingerprint),
                runs: counted.len(),
                summary,
                replicate,
                change,
                compared_with,
            });
        }
    }
    mark_steps(&mut rows, direction, rule.min_effect);
    rows
}

/// An arm on one host fingerprint (its key) and one set-up: the rows of a
/// history that are compared with each other.
type Slot = (String, String, Setup);

/// Marks the step changes within each arm's rows on one fingerprint and
/// set-up ([`step_changes`]), and which way each goes for the metric.
fn mark_steps(rows: &mut [HistoryRow], direction: Option<Direction>, min_effect: f64) {
    let mut groups: Vec<Slot> = Vec::new();
    for r in rows.iter() {
        let g = (r.arm.clone(), r.fingerprint_key.clone(), r.setup.clone());
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    for (arm, key, setup) in groups {
        let idx: Vec<usize> = (0..rows.len())
            .filter(|&i| {
                rows[i].arm == arm && rows[i].fingerprint_key == key && rows[i].setup == setup
            })
            .filter(|&i| rows[i].replicate.is_some())
            .collect();
        let means: Vec<f64> = idx
            .iter()
            .filter_map(|&i| rows[i].replicate.map(|s| s.mean))
            .collect();
        for (at, rel) in step_changes(&means, min_effect) {
            let row = &mut rows[idx[at]];
            row.step = Some(rel);
            row.step_verdict = direction.map(|d| {
                if d.gain(1.0 + rel, 1.0) > 0.0 {
                    Verdict::Improved
                } else {
                    Verdict::Regressed
                }
            });
        }
    }
}

fn short(commit: &str) -> String {
    commit.chars().take(10).collect()
}

/// An experiment's commit as history and the published index show it:
/// ten characters, `+dirty` for a dirty tree, `—` when none was recorded.
pub(crate) fn commit_label(e: &Experiment) -> String {
    match (&e.git_commit, e.git_dirty) {
        (Some(c), Some(true)) => format!("{}+dirty", short(c)),
        (Some(c), _) => short(c),
        (None, _) => "—".into(),
    }
}

/// The mark of a step: only the step rule marks a change, never one
/// row against the one before (on flat 30-run series that marked 163 of
/// 200).
fn marker(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Improved) => "▲ improved: ",
        Some(Verdict::Regressed) => "▼ regressed: ",
        _ => "",
    }
}

/// The hosts `experiments` ran on, newest first, each once (`?` for an
/// experiment that recorded none).
pub fn hosts_of(experiments: &[Experiment]) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    let mut newest: Vec<&Experiment> = experiments.iter().collect();
    newest.sort_by(|a, b| when_ran(b).cmp(&when_ran(a)));
    for e in newest {
        let host = host_name(e);
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
}

/// The host an experiment recorded, as `--host` matches it.
pub fn host_name(e: &Experiment) -> String {
    e.fingerprint.hostname.clone().unwrap_or_else(|| "?".into())
}

/// The history as a markdown table. A Host column appears when the rows
/// come from more than one host (imported from another machine or CI).
pub fn render_history(metric: &str, rows: &[HistoryRow]) -> String {
    let mut t = markdown_table();
    let metric = md(metric);
    let first_host = rows.first().map(|r| &r.host);
    let with_host = rows.iter().any(|r| Some(&r.host) != first_host);
    let mut header = vec![
        "Date",
        "Exp",
        "Arm",
        "Commit",
        "Fingerprint",
        "Runs",
        metric.as_str(),
        "Change vs previous",
        "Step",
    ];
    if with_host {
        header.insert(4, "Host");
    }
    t.set_header(header);
    for r in rows {
        let change = match (&r.change, r.compared_with) {
            (Some(c), Some(id)) => {
                let rel = if c.relative_change.is_finite() {
                    format!("{:+.1}%", c.relative_change * 100.0)
                } else {
                    String::new()
                };
                // One value a side (a single-iteration run) leaves nothing to
                // test; say so rather than print an empty test.
                let p = c
                    .welch
                    .map_or_else(|| "too few values for a test".into(), |w| p_text(w.p_value));
                let text = format!("{rel} vs #{id} ({p})").trim().to_string();
                match &r.series_break {
                    Some(why) => format!("{} since the previous row; {text}", md(why)),
                    None => text,
                }
            }
            _ => match &r.series_break {
                Some(why) => format!("{}: not compared", md(why)),
                None => "—".into(),
            },
        };
        let step = match r.step {
            Some(rel) => format!(
                "{}step {:+.1}% from here",
                marker(r.step_verdict),
                rel * 100.0
            ),
            None => String::new(),
        };
        let mut cells = vec![
            md(&r.date),
            format!("#{}", r.experiment_id),
            md(&r.arm),
            md(&r.commit),
            md(&r.fingerprint),
            r.runs.to_string(),
            r.summary
                .as_ref()
                .map(mean_sd)
                .unwrap_or_else(|| "no data".into()),
            change,
            step,
        ];
        if with_host {
            cells.insert(4, md(r.host.as_deref().unwrap_or("?")));
        }
        t.add_row(cells);
    }
    let mut out = t.to_string();
    out.push_str(&format!(
        "\n\nWarm-up-excluded mean; {SPREAD_LEGEND}. Change vs previous: the difference \
             from the previous experiment of the same arm on the same fingerprint and set-up \
             (tested on each repeat's mean when there are several), with Welch's p, never \
             marked on its own; a row on another host, resolved config, command or iteration \
             count than the arm's previous one starts a new series. Step, the only change \
             marked (up or down arrow): where the arm's level on one fingerprint and set-up \
             shifts (never across hosts: a change of machine is no change of code), by the piecewise-constant fit that minimises squared error plus 3 σ² ln \
             n per segment, keeping steps of at least the minimum effect.\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(id: i64, host: &str) -> Experiment {
        Experiment {
            id,
            name: "x".into(),
            description: String::new(),
            workload: "command".into(),
            file_path: String::new(),
            file_text: String::new(),
            file_sha256: String::new(),
            plan_json: String::new(),
            iterations: 10,
            warmup: 0,
            repeats: 1,
            baseline: None,
            status: crate::store::ExperimentStatus::Completed,
            created_at: format!("2025-01-{id:02}T00:00:00Z"),
            finished_at: None,
            lcx_version: "0".into(),
            git_commit: Some("0123456789abcdef".into()),
            git_dirty: Some(false),
            command_line: vec![],
            runner: None,
            fingerprint: Fingerprint {
                hostname: Some(host.into()),
                ..Fingerprint::default()
            },
        }
    }

    #[test]
    fn fingerprints_differ_exactly_where_named() {
        let a = Fingerprint {
            hostname: Some("laptop".into()),
            cpu_model: Some("AMD EPYC".into()),
            cpu_cores: Some(2),
            ..Fingerprint::default()
        };
        assert!(fingerprint_differences(&a, &a.clone()).is_empty());
        let b = Fingerprint {
            hostname: Some("ci-runner".into()),
            cpu_cores: Some(4),
            torch_version: Some("2.11.0".into()),
            ..a.clone()
        };
        assert_ne!(fingerprint_key(&a), fingerprint_key(&b));
        assert_eq!(
            fingerprint_differences(&a, &b),
            [
                "host name: laptop vs ci-runner",
                "CPU cores: 2 vs 4",
                "torch version: unknown vs 2.11.0"
            ]
        );
        // Every field of the key is named when it alone differs.
        let changes: [fn(&mut Fingerprint); 8] = [
            |f| f.hostname = None,
            |f| f.cpu_model = None,
            |f| f.cpu_cores = None,
            |f| f.gpu_name = Some("g".into()),
            |f| f.cuda_available = Some(true),
            |f| f.torch_version = Some("t".into()),
            |f| f.torch_intra_threads = Some(1),
            |f| f.torch_inter_threads = Some(1),
        ];
        for change in changes {
            let mut c = a.clone();
            change(&mut c);
            assert_ne!(fingerprint_key(&a), fingerprint_key(&c));
            assert_eq!(fingerprint_differences(&a, &c).len(), 1, "{c:?}");
        }
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn hrun(exp: i64, mean: f64) -> HistoryRun {
        let values: Vec<f64> = [0.99, 1.01, 1.0, 0.98, 1.02, 1.0]
            .iter()
            .map(|k| k * mean)
            .collect();
        HistoryRun {
            experiment_id: exp,
            run_id: exp * 10,
            arm: "a".into(),
            repeat: 1,
            status: "completed".into(),
            config_sha256: Some("c1".into()),
            command: argv(&["lcx", "train", "--config", "-", "--metrics-out", "-"]),
            env: Default::default(),
            moments: Some(RunMoments {
                run_id: exp * 10,
                arm: "a".into(),
                repeat: 1,
                name: "t".into(),
                n: values.len() as i64,
                sum: values.iter().sum(),
                sum_sq: values.iter().map(|v| v * v).sum(),
                min: 0.0,
                max: 0.0,
                excluded: 0,
            }),
        }
    }

    #[test]
    fn marks_significant_changes_against_same_fingerprint_only() {
        let exps = vec![exp(1, "h"), exp(2, "h"), exp(3, "other"), exp(4, "h")];
        let runs = vec![hrun(1, 1.0), hrun(2, 1.0), hrun(3, 5.0), hrun(4, 1.5)];
        let rows = history_rows(&exps, &runs, Some(Direction::Lower), VerdictRule::default());
        assert_eq!(rows.len(), 4);
        assert!(rows[0].change.is_none());
        assert!(matches!(
            rows[1].change.unwrap().verdict,
            Verdict::Equivalent | Verdict::Inconclusive
        ));
        // A different host starts its own line of comparison.
        assert!(rows[2].change.is_none());
        // Experiment 4 compares with 2 (same host), not 3: 50% slower.
        assert_eq!(rows[3].compared_with, Some(2));
        assert_eq!(rows[3].change.unwrap().verdict, Verdict::Regressed);
        let text = render_history("t", &rows);
        // Shown, never marked: one row against another is not the step rule.
        assert!(text.contains("+50.0% vs #2"), "{text}");
        assert!(!text.contains("▼"), "{text}");
        assert!(text.contains("0123456789"));
    }

    #[test]
    fn a_level_that_moves_with_the_host_is_no_step() {
        // Four experiments on one machine at 1.0, then four on another at
        // 2.0: the series breaks, and no step is marked on either side.
        let hosts = ["h", "h", "h", "h", "g", "g", "g", "g"];
        let exps: Vec<Experiment> = (1..=8).map(|i| exp(i, hosts[i as usize - 1])).collect();
        let runs: Vec<HistoryRun> = (1..=8)
            .map(|i| hrun(i, if i <= 4 { 1.0 } else { 2.0 }))
            .collect();
        let rows = history_rows(&exps, &runs, Some(Direction::Lower), VerdictRule::default());
        assert!(rows.iter().all(|r| r.step.is_none()), "{rows:#?}");
        assert_eq!(rows[4].series_break.as_deref(), Some("new host"));
        let text = render_history("t", &rows);
        assert!(text.contains("| Host "), "{text}");
        assert!(text.contains("| g "), "{text}");
        assert_eq!(hosts_of(&exps), ["g", "h"]);
        // The same values on one machine: a step, at the fifth.
        let one: Vec<Experiment> = (1..=8).map(|i| exp(i, "h")).collect();
        let rows = history_rows(&one, &runs, Some(Direction::Lower), VerdictRule::default());
        let steps: Vec<usize> = (0..8).filter(|&i| rows[i].step.is_some()).collect();
        assert_eq!(steps, [4]);
        assert!(!render_history("t", &rows).contains("| Host "));
        // The same name on another CPU: new hardware, not a change either.
        let mut moved: Vec<Experiment> = (1..=8).map(|i| exp(i, "ci")).collect();
        for e in &mut moved[4..] {
            e.fingerprint.cpu_model = Some("Other CPU".into());
        }
        let rows = history_rows(
            &moved,
            &runs,
            Some(Direction::Lower),
            VerdictRule::default(),
        );
        assert_eq!(rows[4].series_break.as_deref(), Some("new hardware"));
        assert!(rows.iter().all(|r| r.step.is_none()), "{rows:#?}");
    }

    #[test]
    fn single_values_are_compared_without_an_empty_test() {
        let exps = vec![exp(1, "h"), exp(2, "h")];
        let mut runs = vec![hrun(1, 1.0), hrun(2, 1.0)];
        for run in &mut runs {
            let m = run.moments.as_mut().unwrap();
            (m.n, m.sum, m.sum_sq) = (1, 1.0, 1.0);
        }
        let rows = history_rows(&exps, &runs, Some(Direction::Lower), VerdictRule::default());
        let text = render_history("t", &rows);
        assert!(
            text.contains("+0.0% vs #1 (too few values for a test)"),
            "{text}"
        );
        assert!(!text.contains("()"), "{text}");
    }

    #[test]
    fn another_config_command_or_count_starts_a_new_series_not_a_regression() {
        let mut exps = vec![
            exp(1, "h"),
            exp(2, "h"),
            exp(3, "h"),
            exp(4, "h"),
            exp(5, "h"),
        ];
        let mut runs = vec![
            hrun(1, 1.0),
            hrun(2, 1.25),
            hrun(3, 1.0),
            hrun(4, 1.0),
            hrun(5, 2.0),
        ];
        // 2: more traversals per player (another resolved config), 25 % slower.
        runs[1].config_sha256 = Some("c2".into());
        // 3: the same config handed the old way (file and --set): comparable.
        runs[2].command = argv(&[
            "/x/lcx",
            "train",
            "--config",
            "/a/b.toml",
            "--set",
            "k=v",
            "--metrics-out",
            "-",
        ]);
        // 4: another command flag, 5: another iteration count.
        runs[3].command = argv(&["lcx", "bench", "trainer", "--amp"]);
        runs[4].command = runs[3].command.clone();
        exps[4].iterations = 99;
        let rows = history_rows(&exps, &runs, Some(Direction::Lower), VerdictRule::default());
        assert_eq!(rows[1].series_break.as_deref(), Some("config changed"));
        assert!(rows[1].change.is_none(), "not compared with another config");
        assert_eq!(rows[2].series_break.as_deref(), Some("config changed"));
        assert_eq!(
            rows[2].compared_with,
            Some(1),
            "back to config 1: compared with #1"
        );
        assert_eq!(rows[3].series_break.as_deref(), Some("command changed"));
        assert_eq!(
            rows[4].series_break.as_deref(),
            Some("iterations or warm-up changed")
        );
        assert!(rows
            .iter()
            .all(|r| r.change.is_none_or(|c| c.verdict != Verdict::Regressed)));
        let text = render_history("t", &rows);
        assert!(text.contains("config changed: not compared"), "{text}");
        assert!(
            text.contains("config changed since the previous row; "),
            "{text}"
        );
        assert!(!text.contains("regressed"), "{text}");
    }

    #[test]
    fn steps_are_found_where_the_level_moves_and_nowhere_else() {
        let flat = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01];
        assert!(step_changes(&flat, 0.05).is_empty());
        let stepped = [1.0, 1.01, 0.99, 1.0, 1.2, 1.21, 1.19, 1.2, 1.2];
        let steps = step_changes(&stepped, 0.05);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].0, 4);
        assert!((steps[0].1 - 0.2).abs() < 0.01);
        // Two steps: up, then back down.
        let twice = [1.0, 1.0, 1.01, 1.3, 1.31, 1.3, 1.0, 1.01, 0.99];
        let at: Vec<usize> = step_changes(&twice, 0.05).iter().map(|s| s.0).collect();
        assert_eq!(at, vec![3, 6]);
    }

    /// 30 experiments of one arm, each one run of 10 iterations (1 %
    /// noise) around a level that moves by 2 % between runs, plus a step
    /// of `step` from run `at` on.
    fn series_rows(seed: u64, step: f64, at: usize) -> Vec<HistoryRow> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(300_000 + seed);
        let mut z = move || {
            let u1: f64 = rng.random::<f64>().max(1e-300);
            let u2: f64 = rng.random();
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        };
        let exps: Vec<Experiment> = (1..=30).map(|id| exp(id, "h")).collect();
        let runs: Vec<HistoryRun> = (1..=30i64)
            .map(|id| {
                let level = (if id as usize > at { 1.0 + step } else { 1.0 }) * (1.0 + 0.02 * z());
                let values: Vec<f64> = (0..10).map(|_| level * (1.0 + 0.01 * z())).collect();
                let mut r = hrun(id, 1.0);
                let m = r.moments.as_mut().unwrap();
                (m.n, m.sum, m.sum_sq) =
                    (10, values.iter().sum(), values.iter().map(|v| v * v).sum());
                r
            })
            .collect();
        history_rows(&exps, &runs, Some(Direction::Lower), VerdictRule::default())
    }

    #[test]
    fn history_marks_steps_only_not_run_to_run_noise() {
        let marked = |rows: &[HistoryRow]| {
            let text = render_history("t", rows);
            text.contains('▲') || text.contains('▼') || text.contains("improved")
        };
        let flat = (0..200)
            .filter(|&s| marked(&series_rows(s, 0.0, 30)))
            .count();
        // What marking each row against the one before would have done.
        let row_to_row = (0..200)
            .filter(|&s| {
                series_rows(s, 0.0, 30).iter().any(|r| {
                    r.change.is_some_and(|c| {
                        matches!(c.verdict, Verdict::Improved | Verdict::Regressed)
                    })
                })
            })
            .count();
        let found = (0..150u64)
            .filter(|&s| {
                let at = 5 + (s as usize % 20);
                let rows = series_rows(1_000 + s, 0.15, at);
                rows[at].step_verdict == Some(Verdict::Regressed)
                    && render_history("t", &rows).contains("▼ regressed: step +")
            })
            .count();
        eprintln!(
            "30-run series, 2 % between runs: flat series with a marker {flat} of 200 \
             (row against row would mark {row_to_row}); a planted 15 % step marked at its row \
             {found} of 150"
        );
        assert!(flat <= 10, "{flat} of 200 flat series marked (> 5 %)");
        // The rule it replaces would have failed this test.
        assert!(row_to_row > 10, "{row_to_row}");
        assert_eq!(found, 150, "planted steps found {found} of 150");
    }

    #[test]
    fn step_detection_rates_over_300_seeds() {
        use rand::{Rng, SeedableRng};
        let series = |seed: u64, step: f64| -> Vec<f64> {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(200_000 + seed);
            (0..12)
                .map(|i| {
                    let u1: f64 = rng.random::<f64>().max(1e-300);
                    let u2: f64 = rng.random();
                    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                    (if i >= 6 { 1.0 + step } else { 1.0 }) * (1.0 + 0.02 * z)
                })
                .collect()
        };
        let false_alarms = (0..300)
            .filter(|&s| !step_changes(&series(s, 0.0), 0.05).is_empty())
            .count();
        let found = (0..300)
            .filter(|&s| {
                step_changes(&series(s, 0.15), 0.05)
                    .iter()
                    .any(|(at, _)| (5..=7).contains(at))
            })
            .count();
        eprintln!("steps over 300 seeds of 12 means (2 % noise): false alarms {false_alarms}, a 15 % step found {found}");
        assert!(false_alarms <= 15, "false alarms {false_alarms} of 300");
        assert!(found >= 270, "found {found} of 300");
    }
}

/// One experiment of a sweep's name, and where each arm started to pay in
/// it: `lcx history` of a sweep shows whether a change moved a crossover.
#[derive(Debug, Clone, Serialize)]
pub struct CrossoverRow {
    pub experiment_id: i64,
    pub date: String,
    pub commit: String,
    /// The metric the crossovers are on: what the report leads with.
    pub metric: String,
    pub crossovers: Vec<super::model::Crossover>,
}

/// The crossovers of every experiment in `experiments` (newest first, as
/// [`named_experiments`] gives them) that ran a sweep, each judged as its
/// own report judges it.
pub fn crossover_rows(
    store: &Store,
    experiments: &[Experiment],
) -> Result<Vec<CrossoverRow>, StoreError> {
    let mut out = Vec::new();
    for e in experiments {
        let swept = builder::stored_plan(e).is_ok_and(|p| p.sweep.is_some());
        if !swept {
            continue;
        }
        let report = builder::load(store, e.id, builder::Options::default())?;
        if let Some(sweep) = report.sweep {
            out.push(CrossoverRow {
                experiment_id: e.id,
                date: report.experiment.date.clone(),
                commit: e.git_commit.as_deref().map_or_else(|| "—".into(), short),
                metric: sweep.label,
                crossovers: sweep.crossovers,
            });
        }
    }
    Ok(out)
}

/// The crossovers as a markdown table: a row per experiment, a column per
/// arm (and series); `none` where an arm did not pay in the range.
pub fn render_crossovers(rows: &[CrossoverRow]) -> String {
    let mut columns: Vec<(String, String)> = Vec::new();
    for c in rows.iter().flat_map(|r| &r.crossovers) {
        let key = (c.arm.clone(), c.series.clone());
        if !columns.contains(&key) {
            columns.push(key);
        }
    }
    let mut t = markdown_table();
    let mut header = vec!["Date".to_string(), "Exp".into(), "Commit".into()];
    header.extend(columns.iter().map(|(arm, series)| {
        if series.is_empty() {
            format!("{} pays from", md(arm))
        } else {
            format!("{} ({}) pays from", md(arm), md(series))
        }
    }));
    t.set_header(header);
    for r in rows {
        let mut row = vec![md(&r.date), format!("#{}", r.experiment_id), md(&r.commit)];
        for (arm, series) in &columns {
            let c = r
                .crossovers
                .iter()
                .find(|c| &c.arm == arm && &c.series == series);
            row.push(match c {
                None => "—".into(),
                Some(c) if !c.determined => "undetermined".into(),
                Some(c) => match (&c.point, &c.speedup) {
                    (Some(p), Some(s)) => {
                        format!("{} ({})", md(p), super::sweep_render::interval_text(s))
                    }
                    (Some(p), None) => md(p),
                    (None, _) => "none".into(),
                },
            });
        }
        t.add_row(row);
    }
    t.to_string()
}
