//! `lcx compare`'s judging: two experiments side by side on their shared
//! arms and metrics, or two runs, each pair tested only where both sides
//! have the completed cells a judgement needs (the report builder's rule,
//! [`builder::unjudged_reason`], never a copy of it), and the warnings that
//! say what else differs between them. The store is read here as the
//! builder reads it; the command line finds the experiments and runs,
//! and prints. Nothing here writes or prints.

use std::fmt::Write as _;

use serde::Serialize;

use crate::store::report_read::RunMoments;
use crate::store::{Experiment, Fingerprint, Run, Store, StoreError};
use crate::text::markdown_table;

use super::builder;
use super::history::fingerprint_differences;
use super::model::Report;
use super::moments::SPREAD_LEGEND;
use super::stats::{compare, Comparison, Summary, VerdictRule};
use super::words::{mean_sd, p_text, speedup_text};
use crate::escape::md_inline as md;

/// What `lcx compare` shows: its rows, and what may make them not
/// comparable.
#[derive(Debug, Clone)]
pub struct Compared {
    pub rows: Vec<CompareRow>,
    pub warnings: Vec<String>,
}

/// One row of `lcx compare`.
#[derive(Debug, Clone, Serialize)]
pub struct CompareRow {
    pub arm: String,
    pub metric: String,
    pub label: String,
    pub a: Option<Summary>,
    pub b: Option<Summary>,
    /// B against A (A is the reference).
    pub comparison: Option<Comparison>,
}

/// Side by side on shared arms and metrics of two reports' arms.
pub fn compare_reports(a: &Report, b: &Report, rule: VerdictRule) -> Vec<CompareRow> {
    let mut rows = Vec::new();
    let mut metrics: Vec<(String, String)> = Vec::new();
    for c in &a.columns {
        if !metrics.iter().any(|(m, _)| m == &c.metric) {
            metrics.push((c.metric.clone(), c.label.clone()));
        }
    }
    for arm_a in &a.arms {
        let Some(arm_b) = b.arms.iter().find(|x| x.name == arm_a.name) else {
            continue;
        };
        for (metric, label) in &metrics {
            let (Some(ma), Some(mb)) = (arm_a.metric(metric), arm_b.metric(metric)) else {
                continue;
            };
            // Numbers of an arm without enough completed cells are shown,
            // never judged (decision 0018).
            let judged = arm_a.unjudged.is_none() && arm_b.unjudged.is_none();
            let comparison = match (&ma.replicate, &mb.replicate) {
                (Some(x), Some(y)) if !ma.descriptive && judged => {
                    Some(compare(x, y, ma.direction, rule))
                }
                _ => None,
            };
            rows.push(CompareRow {
                arm: arm_a.name.clone(),
                metric: metric.clone(),
                label: label.clone(),
                a: ma.summary,
                b: mb.summary,
                comparison,
            });
        }
    }
    rows
}

/// The compare table plus warnings (mismatched fingerprints or configs).
pub fn render_compare(
    a_name: &super::prose::Prose,
    b_name: &super::prose::Prose,
    rows: &[CompareRow],
    warnings: &[String],
) -> String {
    let mut t = markdown_table();
    t.set_header(vec![
        "Arm".to_string(),
        "Metric".to_string(),
        format!("A: {}", a_name.markdown()),
        format!("B: {}", b_name.markdown()),
        "B vs A".to_string(),
        "Verdict".to_string(),
    ]);
    for r in rows {
        let fmt = |s: &Option<Summary>| s.as_ref().map(mean_sd).unwrap_or_else(|| "—".into());
        let (ratio, verdict) = match &r.comparison {
            Some(c) => (
                c.speedup
                    .as_ref()
                    .map(speedup_text)
                    .unwrap_or_else(|| "—".into()),
                match c.welch {
                    Some(w) => format!("{} ({})", c.verdict.text(), p_text(w.p_value)),
                    None => c.verdict.text().to_string(),
                },
            ),
            None => ("—".into(), "no data".into()),
        };
        t.add_row(vec![
            md(&r.arm),
            md(&r.label),
            fmt(&r.a),
            fmt(&r.b),
            ratio,
            verdict,
        ]);
    }
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str("No shared arm and metric to compare.\n");
    } else {
        let _ = writeln!(out, "{t}");
        let _ = writeln!(
            out,
            "\nWarm-up-excluded mean; {SPREAD_LEGEND}. B vs A is a speedup (> 1: B is better)."
        );
    }
    for w in warnings {
        let _ = writeln!(out, "Warning: {}", md(w));
    }
    out
}

/// Experiments `a` (the reference) and `b` side by side, judged with
/// `rule`; warned where their hosts, warm-ups, configs or files differ.
pub fn experiments(
    store: &Store,
    a: &Experiment,
    b: &Experiment,
    rule: VerdictRule,
) -> Result<Compared, StoreError> {
    let options = super::Options {
        min_effect: Some(rule.min_effect),
        alpha: Some(rule.alpha),
        allow_contended: false,
    };
    let ra = builder::load(store, a.id, options)?;
    let rb = builder::load(store, b.id, options)?;
    let rows = compare_reports(&ra, &rb, rule);
    let mut warnings = Vec::new();
    if let Some(differ) = fingerprints_differ(&a.fingerprint, &b.fingerprint) {
        warnings.push(format!("{differ}; timings may not be comparable"));
    }
    if (a.warmup, a.iterations) != (b.warmup, b.iterations) {
        warnings.push(format!(
            "warm-up/iterations differ: A {}/{}, B {}/{}",
            a.warmup, a.iterations, b.warmup, b.iterations
        ));
    }
    let runs_a = store.runs(a.id)?;
    let runs_b = store.runs(b.id)?;
    let mut arms: Vec<&str> = rows.iter().map(|r| r.arm.as_str()).collect();
    arms.dedup();
    for arm in arms {
        let hash = |runs: &[Run]| {
            runs.iter()
                .find(|r| r.arm == arm)
                .and_then(|r| r.config_sha256.clone())
        };
        if hash(&runs_a) != hash(&runs_b) {
            warnings.push(format!(
                "arm `{arm}`: the resolved configs differ (config sha256)"
            ));
        }
    }
    if a.file_sha256 != b.file_sha256 {
        warnings.push("the experiment files differ (file sha256)".into());
    }
    Ok(Compared { rows, warnings })
}

/// Run `a` (of experiment `ea`, the reference) and run `b` (of `eb`) side
/// by side on `ea`'s report columns, judged with `rule`; warned where
/// their hosts, configs or warm-ups differ.
pub fn runs(
    store: &Store,
    (ea, run_a): (&Experiment, &Run),
    (eb, run_b): (&Experiment, &Run),
    rule: VerdictRule,
) -> Result<Compared, StoreError> {
    let plan_a = builder::stored_plan(ea).ok();
    let names_a = store.metric_names_fast(ea.id)?;
    let columns = builder::resolve_columns(ea, plan_a.as_ref(), &names_a);
    let metrics = builder::needed_metrics(&columns, plan_a.as_ref());
    let ma = super::moments::run_moments(store, ea.id, &metrics, &[run_a.id])?;
    let mb = super::moments::run_moments(store, eb.id, &metrics, &[run_b.id])?;
    // Each run is a cell of its own: judged only when it completed, the
    // report's rule for an arm of one cell. A skipped cell counts as
    // judged there, but it never ran, so it has no values to compare.
    let completed = |e: &Experiment, run: &Run| {
        builder::unjudged_reason(&run.arm, std::slice::from_ref(run), e.iterations).is_none()
    };
    let judged = completed(ea, run_a) && completed(eb, run_b);
    let mut rows = Vec::new();
    for metric in &metrics {
        let (sa, sb) = (run_summary(&ma, metric), run_summary(&mb, metric));
        if sa.is_none() && sb.is_none() {
            continue;
        }
        let direction = builder::metric_direction(plan_a.as_ref(), metric).0;
        rows.push(CompareRow {
            arm: format!("{} / {}", run_a.arm, run_b.arm),
            metric: metric.clone(),
            label: columns
                .iter()
                .find(|c| &c.metric == metric)
                .map(|c| c.label.clone())
                .unwrap_or_else(|| metric.clone()),
            a: sa,
            b: sb,
            comparison: match (&sa, &sb) {
                // A description of the work is shown, never judged.
                _ if builder::is_descriptive(plan_a.as_ref(), metric) => None,
                // A cell that did not complete is shown, never judged.
                _ if !judged => None,
                (Some(x), Some(y)) => Some(compare(x, y, direction, rule)),
                _ => None,
            },
        });
    }
    Ok(Compared {
        rows,
        warnings: run_warnings((ea, run_a), (eb, run_b)),
    })
}

/// One run's values of `metric`, when it has any.
fn run_summary(moments: &[RunMoments], metric: &str) -> Option<Summary> {
    let x = moments.iter().find(|x| x.name == metric && x.n > 0)?;
    Summary::from_moments(x.n as usize, x.sum, x.sum_sq, x.min, x.max)
}

/// `fingerprints differ (host name: laptop vs ci-runner; …)`, the fields
/// named with A's value first, where any differs.
fn fingerprints_differ(a: &Fingerprint, b: &Fingerprint) -> Option<String> {
    let differences = fingerprint_differences(a, b);
    (!differences.is_empty()).then(|| format!("fingerprints differ ({})", differences.join("; ")))
}

/// What may make two runs' timings not comparable.
fn run_warnings((ea, run_a): (&Experiment, &Run), (eb, run_b): (&Experiment, &Run)) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(differ) = fingerprints_differ(&ea.fingerprint, &eb.fingerprint) {
        warnings.push(format!("the runs' {differ}; timings may not be comparable"));
    }
    if run_a.config_sha256 != run_b.config_sha256 {
        warnings.push("the runs' resolved configs differ (config sha256)".into());
    }
    if ea.warmup != eb.warmup {
        warnings.push(format!("warm-up differs: A {}, B {}", ea.warmup, eb.warmup));
    }
    warnings
}
