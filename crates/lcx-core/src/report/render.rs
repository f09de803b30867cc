//! Pure renderers: [`Report`] → markdown, JSON or CSV text.
//!
//! Like hyperfine's exporters these only serialise; they never touch the
//! database or the file system, so they are snapshot-tested on hand-built
//! reports.

use std::fmt::Write as _;

use super::model::{ArmResult, ColumnKind, MetricResult, Report};
use super::moments::SPREAD_LEGEND;
use super::stats::{equivalence_band, Comparison, Decision, Direction, GateTest, Verdict};
use super::words::{csv_field, num, trim_number};
use crate::text::{counted, markdown_table};

use super::words::{mean_sd, p_text, speedup_text};

// Every string of the report that lcx did not write itself goes through
// one of these (crate::escape's markdown rule): `md` for text, `code` for
// names shown as code, `md_block` for the author's description and notes,
// `Prose::markdown` for lcx's sentences that quote them.
use crate::escape::{md_block, md_code as code, md_inline as md};

fn comparison_detail(c: &Comparison) -> String {
    let mut parts = Vec::new();
    if let Some(s) = &c.speedup {
        let mut t = speedup_text(s);
        if s.ci_low.is_finite() && s.ci_high.is_finite() {
            let _ = write!(t, " [95% CI {:.2}–{:.2}]", s.ci_low, s.ci_high);
        }
        parts.push(t);
    }
    if let Some(w) = &c.welch {
        parts.push(p_text(w.p_value));
    }
    if c.relative_change.is_finite() {
        parts.push(format!("mean {:+.1}%", c.relative_change * 100.0));
    }
    parts.join(", ")
}

/// "5 rounds" (or "3 to 5 rounds") when any comparison was judged on
/// rounds as pairs.
fn paired_rounds(report: &Report) -> Option<String> {
    let counts: Vec<usize> = report
        .arms
        .iter()
        .flat_map(|a| &a.metrics)
        .filter_map(|m| m.comparison.and_then(|c| c.paired_rounds))
        .collect();
    let (low, high) = (*counts.iter().min()?, *counts.iter().max()?);
    Some(if low == high {
        counted(high as u64, "round")
    } else {
        format!("{low} to {high} rounds")
    })
}

/// What one replicate is, said once when every arm agrees, and per arm
/// where they differ (an arm with one completed repeat of several is tested
/// on its iterations while the others use repeat means).
fn replicate_units(report: &Report) -> String {
    let mut by_unit: Vec<(&str, Vec<String>)> = Vec::new();
    for arm in &report.arms {
        let units: Vec<&str> = arm
            .metrics
            .iter()
            .filter(|m| m.replicate.is_some())
            .map(|m| m.replicate_unit.as_str())
            .collect();
        let Some(unit) = units.first() else { continue };
        match by_unit.iter_mut().find(|(u, _)| u == unit) {
            Some((_, arms)) => arms.push(md(&arm.label)),
            None => by_unit.push((unit, vec![md(&arm.label)])),
        }
    }
    let phrase = |unit: &str| {
        if unit == "repeats" {
            "each repeat's mean is one replicate"
        } else {
            "each iteration is one replicate"
        }
    };
    match by_unit.as_slice() {
        [] => phrase(if report.experiment.repeats > 1 {
            "repeats"
        } else {
            "iterations"
        })
        .to_string(),
        [(unit, _)] => phrase(unit).to_string(),
        several => several
            .iter()
            .map(|(unit, arms)| format!("{} for {}", phrase(unit), arms.join(", ")))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// The arm table (markdown, via [`markdown_table`]).
pub fn arm_table(report: &Report) -> String {
    let mut table = markdown_table();
    let mut header = vec!["Mode".to_string()];
    header.extend(report.columns.iter().map(|c| match c.kind {
        ColumnKind::Value => md(&crate::metrics::with_unit(&c.label, &c.metric)),
        ColumnKind::Speedup => md(&c.label),
    }));
    table.set_header(header);
    for arm in &report.arms {
        // The label alone, so that the table fits a page; the arm's name
        // is in the Runs table and the verdicts.
        let mut label = if arm.label.is_empty() {
            md(&arm.name)
        } else {
            md(&arm.label)
        };
        if arm.is_baseline {
            label.push_str(" [baseline]");
        }
        if arm.partial {
            label.push_str(" [partial]");
        } else if arm.completed == 0 && arm.cells > 0 {
            label.push_str(" [no data]");
        }
        let mut row = vec![label];
        for col in &report.columns {
            let m = arm.metric(&col.metric);
            let cell = match (col.kind, m) {
                (_, None) => "—".to_string(),
                (ColumnKind::Value, Some(m)) => m
                    .summary
                    .as_ref()
                    .map(mean_sd)
                    .unwrap_or_else(|| "—".into()),
                (ColumnKind::Speedup, Some(_)) if col.descriptive => "—".to_string(),
                (ColumnKind::Speedup, Some(m)) => {
                    if arm.is_baseline {
                        if m.summary.is_some() {
                            "1.00×".into()
                        } else {
                            "—".into()
                        }
                    } else {
                        m.comparison
                            .as_ref()
                            .and_then(|c| c.speedup.as_ref())
                            .map(speedup_text)
                            .unwrap_or_else(|| "—".into())
                    }
                }
            };
            row.push(cell);
        }
        table.add_row(row);
    }
    table.to_string()
}

/// The guards, one line per guarded arm, and the overall decision when a
/// guard overrules the gate.
pub fn guard_lines(report: &Report) -> Option<String> {
    if report.guards.is_empty() {
        return None;
    }
    let alpha = report.rule.alpha;
    let mut out = format!(
        "Guards (non-inferiority in the metric's own units: PASS when the {}% interval of the \
         arm's gain over its baseline lies above minus the margin, FAIL when it lies below, \
         INCONCLUSIVE when it holds minus the margin; one-sided α = {}):\n",
        trim_number(100.0 * (1.0 - alpha)),
        trim_number(alpha / 2.0)
    );
    for g in &report.guards {
        let detail = match &g.test {
            Some(t) if t.ci_low.is_finite() => format!(
                ", gain {}{} [{} to {}]",
                if t.gain >= 0.0 { "+" } else { "" },
                num(t.gain),
                num(t.ci_low),
                num(t.ci_high)
            ),
            Some(t) if t.gain.is_finite() => format!(", gain {}", num(t.gain)),
            _ => String::new(),
        };
        let detail = match g.pairs {
            Some(n) => format!("{detail}, paired over {}", counted(n as u64, "repeat")),
            None => detail,
        };
        let why = g
            .why
            .as_ref()
            .map(|w| format!(" ({})", w.markdown()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "- {} vs {} on {}{} (margin {}, {}): {}{detail}{why}",
            code(&g.arm),
            code(&g.baseline),
            match g.fold {
                crate::experiment::Fold::Last => "the final ",
                crate::experiment::Fold::Median => "the median ",
                crate::experiment::Fold::Min => "the fastest ",
                crate::experiment::Fold::Mean => "",
            },
            md(&g.metric),
            num(g.margin),
            direction_word(g.direction),
            g.decision.word()
        );
    }
    let failed: Vec<String> = report
        .guards
        .iter()
        .filter(|g| g.decision == super::stats::Decision::Fail)
        .map(|g| format!("{} on {}", code(&g.arm), md(&g.metric)))
        .collect();
    if let (Some(gate), false) = (&report.gate, failed.is_empty()) {
        if gate.decision == super::stats::Decision::Pass {
            let _ = write!(
                out,
                "\nOverall: FAIL: faster but learns worse: {}.",
                failed.join(", ")
            );
        }
    }
    Some(out.trim_end().to_string())
}

/// The four-way verdict rule in one paragraph.
pub fn verdict_rule_text(alpha: f64, min_effect: f64) -> String {
    let (low, high) = equivalence_band(min_effect);
    format!(
        "Verdicts compare each speedup's {}% interval (α = {alpha}) with no change (1×) and \
         with the minimum effect of {}% (speedups from {low:.3}× to {high:.3}× count as no \
         change): **improved** / **regressed** when the interval excludes 1× and the \
         speedup's one-sided {}% bound lies beyond the minimum effect (an estimate just past \
         it is not enough); **equivalent** when the whole interval lies within it; \
         **inconclusive** otherwise.",
        trim_number(100.0 * (1.0 - alpha)),
        trim_number(min_effect * 100.0),
        trim_number(100.0 * super::stats::CLEAR_LEVEL)
    )
}

/// `72 %` of `ceiling`, or `—`.
fn percent_of(value: Option<f64>, ceiling: Option<f64>) -> String {
    match (value, ceiling) {
        (Some(v), Some(c)) if c > 0.0 => format!("{:.0} %", 100.0 * v / c),
        _ => "—".into(),
    }
}

/// Each arm's phase rates as GFLOP/s and as a share of the measured peak.
fn roofline_section(r: &super::model::Roofline) -> String {
    let mut out = String::new();
    let mut t = markdown_table();
    t.set_header(vec![
        "Arm",
        "traversal GFLOP/s",
        "of peak",
        "training GFLOP/s",
        "of peak",
        "peak",
    ]);
    for a in &r.arms {
        let ceiling = a.ceiling(r.peak_gflops);
        let rate = |v: Option<f64>| v.map(num).unwrap_or_else(|| "—".into());
        t.add_row(vec![
            md(&a.arm),
            rate(a.traversal_gflops),
            percent_of(a.traversal_gflops, ceiling),
            rate(a.training_gflops),
            percent_of(a.training_gflops, ceiling),
            format!("{} {}", a.ceiling_name(), rate(ceiling)),
        ]);
    }
    let _ = writeln!(out, "{t}\n");
    let peak = match (r.peak_gflops, r.peak_gflops_core) {
        (Some(all), Some(core)) => format!(
            "{} GFLOP/s: `lcx bench peak`'s FMA loop ({}) on all {} cores ({}; {} on one core)",
            num(all),
            md(r.isa.as_deref().unwrap_or("?")),
            r.threads
                .map_or_else(|| "the".to_string(), |n| n.to_string()),
            r.provenance
                .as_deref()
                .map_or_else(|| "one probe at the experiment's start".to_string(), md),
            num(core)
        ),
        _ => "— (not recorded: the experiment predates lcx's peak probe)".into(),
    };
    let device = if r.arms.iter().any(|a| a.device_peak_gflops.is_some()) {
        " GPU arms are read against their device's measured matrix-product ceiling: \
         FP32 with TF32 off (`peak/device_matmul_gflops`), or for an arm whose steps ran \
         AMP, FP16 on the tensor cores (`peak/device_matmul_half_gflops`)."
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "Work rates from the FLOPs each phase did (forward rows × FLOPs per row; training \
         rows × forward, weight- and input-gradient FLOPs, plus AdamW) over the phase's \
         seconds, against this host's FP32 peak of {peak}.{device}\n"
    );
    if let Some(note) = &r.note {
        let _ = writeln!(out, "**The ceiling was probed again:** {}\n", md(note));
    }
    // A rate above its ceiling means the ceiling (or the FLOP count) is
    // wrong: the shares above cannot be read as they stand.
    for a in &r.arms {
        let Some(ceiling) = a.ceiling(r.peak_gflops) else {
            continue;
        };
        for (phase, rate) in [
            ("traversal", a.traversal_gflops),
            ("training", a.training_gflops),
        ] {
            if let Some(rate) = rate.filter(|&v| v > ceiling) {
                let _ = writeln!(
                    out,
                    "**{}'s {phase} rate ({} GFLOP/s) is above its ceiling ({})**: the \
                     probe read low or the phase's FLOPs are miscounted; its share of peak \
                     says nothing.\n",
                    code(&a.arm),
                    num(rate),
                    num(ceiling)
                );
            }
        }
    }
    out
}

/// "2 of 6 cells contended: …" under the verdicts, when any was: how
/// many, how busy the rest of the host was (the range over those cells),
/// and how many cells of each arm; the cells one by one are in the Cells
/// section's table.
fn contended_line(report: &Report) -> Option<String> {
    let first = report.contended.first()?;
    let mut per_arm: Vec<(&str, usize)> = Vec::new();
    for c in &report.contended {
        match per_arm.iter_mut().find(|(a, _)| *a == c.arm) {
            Some((_, n)) => *n += 1,
            None => per_arm.push((&c.arm, 1)),
        }
    }
    let arms: Vec<String> = per_arm
        .iter()
        .map(|(arm, n)| format!("{} {}", code(arm), crate::text::counted(*n as u64, "cell")))
        .collect();
    let (low, high) = report
        .contended
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), c| {
            (l.min(c.foreign_cores), h.max(c.foreign_cores))
        });
    // One figure where the range would print two equal ones.
    let (low, high) = (format!("{low:.2}"), format!("{high:.2}"));
    let load = if low == high {
        high
    } else {
        format!("{low} to {high}")
    };
    // A gate on a count (`timing = "instructions"`) is the same on a busy
    // host: it is judged, and `--check` follows it.
    // A gate on randomized rounds as pairs keeps the rounds every arm of
    // which was equally busy, and leaves the others out.
    let paired = |g: &crate::report::model::GateOutcome| {
        !g.arms.is_empty()
            && g.arms.iter().all(|a| {
                report
                    .arms
                    .iter()
                    .any(|r| r.name == a.arm && r.paired_on(&g.metric))
            })
    };
    let consequence = match report.gate.as_ref() {
        Some(g) if crate::metrics::load_independent(&g.metric) => format!(
            "the gate's {} is a count that load cannot move, so it was judged on them; \
             times above come from contended data",
            code(&g.metric)
        ),
        Some(g) if paired(g) => {
            let rounds = |even: bool| {
                let r: std::collections::BTreeSet<i64> = report
                    .contended
                    .iter()
                    .filter(|c| c.round_even == Some(even))
                    .map(|c| c.repeat)
                    .collect();
                r.len() as u64
            };
            format!(
                "the gate pairs randomized rounds, so a round whose arms were equally busy \
                 is judged as a pair ({} here) and one whose arms were not is left out ({})",
                counted(rounds(true), "round"),
                counted(rounds(false), "round")
            )
        }
        _ => "speedups, verdicts, the gate and guards above come from contended data".to_string(),
    };
    Some(format!(
        "**{} of {} contended** (other programs used {load} of a core on average, above \
         {:.2}{}; {}; each in the Cells section): {consequence}.",
        report.contended.len(),
        // Only completed cells are judged, so only they are counted here, as
        // `--check` counts them.
        crate::text::counted(
            report
                .runs
                .iter()
                .filter(|r| r.status == "completed")
                .count() as u64,
            "completed cell"
        ),
        first.threshold,
        busiest_over(&report.contended)
            .map(|b| format!("; busiest: {b}"))
            .unwrap_or_default(),
        arms.join(", ")
    ))
}

/// The programs that used the host most over `cells`, by name: each one's
/// load averaged over every one of those cells (0 where it was not among a
/// cell's busiest), the three busiest, e.g. `` `cargo` 0.91, `rustc` 0.40
/// of a core ``; `None` where no cell recorded any.
fn busiest_over(cells: &[crate::report::model::ContendedCell]) -> Option<String> {
    let mut load: Vec<(&str, f64)> = Vec::new();
    for p in cells.iter().flat_map(|c| &c.busiest) {
        match load.iter_mut().find(|(name, _)| *name == p.name) {
            Some((_, cores)) => *cores += p.cores,
            None => load.push((&p.name, p.cores)),
        }
    }
    if load.is_empty() {
        return None;
    }
    load.sort_by(|a, b| b.1.total_cmp(&a.1));
    let parts: Vec<String> = load
        .iter()
        .take(3)
        .map(|(name, cores)| format!("{} {:.2}", code(name), cores / cells.len() as f64))
        .collect();
    Some(format!("{} of a core", parts.join(", ")))
}

/// The gate lines: the decision per arm, then the rule applied, e.g.
/// `Verdict: PASS for the traversal s gate (min speedup 1.50×): interleaved
/// 3.20× ± 0.10`, ending with what `--check` says where it says otherwise
/// ("…; on contended cells, so `lcx report --check` says INCONCLUSIVE
/// (exit 3): …").
pub fn verdict_line(report: &Report) -> Option<String> {
    let gate = report.gate.as_ref()?;
    let arms: Vec<String> = gate
        .arms
        .iter()
        .map(|a| {
            let s = a.speedup.as_ref().map(speedup_text);
            let arm = md(&a.arm);
            match (&a.why, s) {
                (Some(why), Some(s)) => {
                    format!("{arm} {s}: {} ({})", a.decision.word(), why.markdown())
                }
                (Some(why), None) => format!("{arm}: {} ({})", a.decision.word(), why.markdown()),
                (None, Some(s)) => format!("{arm} {s}"),
                (None, None) => arm,
            }
        })
        .collect();
    let threshold = match gate.test {
        GateTest::Superiority { min_speedup } => format!("min speedup {min_speedup:.2}×"),
        GateTest::NonInferiority { margin } => format!("non-inferiority margin {margin:.3}×"),
    };
    Some(format!(
        "Verdict: {} for the {} gate ({threshold}): {}{}\n\nGate rule: {}.",
        gate.decision.word(),
        md(&gate.label),
        if arms.is_empty() {
            "no arm to judge".to_string()
        } else {
            arms.join("; ")
        },
        check_words(report, gate.decision),
        gate.rule
    ))
}

/// What the verdict line adds when `lcx report --check` decides otherwise
/// than the gate (contended cells, cells that did not complete, an arm
/// without data, a guard): what the gate's word rests on, then what
/// `--check` says, its exit code and why, so that the verdict a log shows
/// and a CI job's exit code never disagree. Nothing when they agree.
fn check_words(report: &Report, gate: Decision) -> String {
    if report.check == gate {
        return String::new();
    }
    let notes: Vec<String> = report.check_notes.iter().map(|n| n.markdown()).collect();
    let (on, why) = match report.check {
        Decision::Inconclusive if report.check_on_contended => ("on contended cells", &notes),
        Decision::Inconclusive if !notes.is_empty() => ("on incomplete data", &notes),
        Decision::Fail => ("but a guard failed", &Vec::new()),
        _ => ("but a guard is not PASS", &Vec::new()),
    };
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(": {}", why.join("; "))
    };
    format!(
        "; {on}, so `lcx report --check` says {} (exit {}){why}",
        report.check.word(),
        report.check.exit_code()
    )
}

/// The side a guard or a guessed column judges on, in words; `Neither`
/// takes lower's, as [`Direction`] says.
fn direction_word(d: Direction) -> &'static str {
    match d {
        Direction::Lower | Direction::Neither => "lower is better",
        Direction::Higher => "higher is better",
    }
}

/// What `lcx run` prints when its cells are done, as hyperfine prints its
/// summary: the arms' table, the gate and guards, a contention warning and
/// the net result; the rest is `lcx report`'s.
pub fn render_summary(report: &Report) -> String {
    let mut out = String::new();
    if report.columns.is_empty() || report.arms.is_empty() {
        out.push_str("No metrics were recorded for this experiment.\n\n");
    } else {
        out.push_str(&arm_table(report));
        out.push_str("\n\n");
    }
    if let Some(sweep) = &report.sweep {
        for c in &sweep.crossovers {
            let _ = writeln!(
                out,
                "Crossover: {}\n",
                super::sweep_render::crossover_sentence(sweep, c)
            );
        }
    }
    out.push_str(&decisions(report));
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// The gate, the guards, a contention warning and the net result, each a
/// paragraph: what the report and the summary both end their top with.
fn decisions(report: &Report) -> String {
    let mut out = String::new();
    let lines = [
        verdict_line(report),
        guard_lines(report),
        contended_line(report),
        Some(format!("Net result: {}", report.net_result.markdown())),
    ];
    for line in lines.into_iter().flatten() {
        let _ = writeln!(out, "{line}\n");
    }
    out
}

/// The whole report as markdown in the shape of a hand-written record:
/// its sections in order, each written by its own function below.
pub fn render_markdown(report: &Report) -> String {
    // A sweep's plots show its crossover: right after its section, above
    // the tables a reader scrolls past; other reports keep them last.
    let (plots_early, plots_last) = match report.sweep {
        Some(_) => (plots_section(report), String::new()),
        None => (String::new(), plots_section(report)),
    };
    let sections = [
        heading(report),
        arms_section(report),
        report
            .roofline
            .as_ref()
            .map(roofline_section)
            .unwrap_or_default(),
        decisions(report),
        report
            .sweep
            .as_ref()
            .map(super::sweep_render::sweep_section)
            .unwrap_or_default(),
        plots_early,
        verdicts_section(report),
        cells_section(report),
        reproduce_section(report),
        environment_section(report),
        runs_section(report),
        notes_section(report),
        plots_last,
    ];
    let mut out = sections.concat();
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// The title, the date and status, the author's description and the
/// one-line shape of the experiment.
fn heading(report: &Report) -> String {
    let e = &report.experiment;
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", md(&e.name));
    let finished = e
        .finished_at
        .as_deref()
        .map(|f| format!(", finished {}", md(f)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Date: {} (experiment #{}, {}{finished})\n",
        e.date, e.id, e.status
    );
    if !e.description.trim().is_empty() {
        let _ = writeln!(out, "{}\n", md_block(e.description.trim()));
    }
    let _ = writeln!(
        out,
        "Workload {}, {}, {} per arm, baseline {}.\n",
        code(&e.workload),
        counted(e.iterations.max(0) as u64, "iteration"),
        counted(e.repeats.max(0) as u64, "repeat"),
        code(&report.baseline)
    );
    out
}

/// The arm table and the paragraph that says how to read it.
fn arms_section(report: &Report) -> String {
    let e = &report.experiment;
    let mut out = String::new();
    if report.columns.is_empty() || report.arms.is_empty() {
        out.push_str("No metrics were recorded for this experiment.\n\n");
        return out;
    }
    out.push_str(&arm_table(report));
    out.push_str("\n\n");
    let mut unit = replicate_units(report);
    if let Some(rounds) = paired_rounds(report) {
        unit.push_str(&format!(
            "; the arms ran in randomized rounds, so each speedup is judged on the {rounds} \
             as pairs (each round's ratio to the baseline one replicate, a paired t interval on \
             their logs), and what the host did to a whole round cancels"
        ));
    }
    let excluded = if e.warmup_auto {
        "warm-up detected per cell (MSER and the first iterations against the rest), its length in the Runs table".to_string()
    } else {
        format!(
            "first {} excluded",
            counted(e.warmup.max(0) as u64, "iteration")
        )
    };
    // Each fold other than the mean, with what a cell's value then is.
    use crate::experiment::Fold;
    let mut finals = String::new();
    for (fold, key, what) in [
        (
            Fold::Last,
            "last",
            "a cell's value is its last recorded one, not the mean of its iterations.",
        ),
        (
            Fold::Median,
            "median",
            "a cell's value is the median of its post-warm-up iterations, what a typical run \
             took: the mean and ± shown are over the cells' medians, and the few runs a busy \
             host slows several times do not move them (the outlier notes below count them).",
        ),
        (
            Fold::Min,
            "min",
            "a cell's value is its fastest post-warm-up iteration, what the work costs with the \
             least the host added: the mean and ± shown are over the cells' fastest runs; \
             slower runs are kept in the database and counted in the outlier notes below.",
        ),
    ] {
        let labels: Vec<String> = report
            .columns
            .iter()
            .filter(|c| c.fold == fold && c.kind == ColumnKind::Value)
            .map(|c| md(&c.label))
            .collect();
        if !labels.is_empty() {
            finals.push_str(&format!(
                " In {} (`fold = \"{key}\"`) {what}",
                labels.join(", ")
            ));
        }
    }
    let _ = writeln!(
        out,
        "Warm-up-excluded means ({excluded}); {SPREAD_LEGEND}; in the tests \
         {unit}. Speedup = baseline mean / arm mean (arm / baseline for \
         higher-is-better metrics), so > 1 is better; ± is its standard error.{finals}\n"
    );
    out
}

/// Per-arm verdicts on every metric of the table, under the rule they
/// follow; nothing for a report with one arm or no metric.
fn verdicts_section(report: &Report) -> String {
    let mut out = String::new();
    let mut metrics: Vec<(&str, &str)> = Vec::new();
    for c in &report.columns {
        if !metrics.iter().any(|(m, _)| *m == c.metric) {
            metrics.push((&c.metric, &c.label));
        }
    }
    let others: Vec<_> = report.arms.iter().filter(|a| !a.is_baseline).collect();
    if others.is_empty() || metrics.is_empty() || is_scan(report) {
        return out;
    }
    // A sweep compares at each point; a sweep of one arm, with its first.
    let against = match &report.sweep {
        Some(s) if s.arms.len() == 1 => format!(
            "{} at the first point of {}",
            code(&report.baseline),
            code(&s.along)
        ),
        Some(_) => format!("{} at each point", code(&report.baseline)),
        None => code(&report.baseline),
    };
    let _ = writeln!(
        out,
        "## Verdicts vs {against}\n\n{}\n",
        verdict_rule_text(report.rule.alpha, report.rule.min_effect)
    );
    for arm in others {
        // In a sweep, the baseline at the arm's own point.
        let baseline = report.arms.iter().find(|a| match &arm.compared_with {
            Some(b) => &a.name == b,
            None => a.is_baseline,
        });
        let has_data = arm.metrics.iter().any(|m| m.summary.is_some());
        if !has_data {
            let why = report
                .incomplete
                .iter()
                .find(|c| c.arm == arm.name)
                .map(|c| {
                    let reason = c
                        .reason
                        .as_deref()
                        .map(|r| format!(": {}", md(r)))
                        .unwrap_or_default();
                    format!(" ({}{reason})", c.status)
                })
                .unwrap_or_default();
            let _ = writeln!(out, "- **{}**: no data{why}", md(&arm.name));
            continue;
        }
        let _ = writeln!(out, "- **{}**", md(&arm.name));
        for (metric, label) in &metrics {
            let text = metric_verdict(arm, baseline, metric);
            let _ = writeln!(out, "  - {}: {text}", md(label));
        }
    }
    out.push('\n');
    out
}

/// A sweep of one arm that no gate or guard judges: a scan, reported per
/// point (the sweep section), not as verdicts against its first point.
pub fn is_scan(report: &Report) -> bool {
    let judged = report.gate.is_some() || !report.guards.is_empty();
    report.sweep.as_ref().is_some_and(|s| s.is_scan(judged))
}

/// One arm's verdict on one metric, with its detail, or why it has none.
fn metric_verdict(arm: &ArmResult, baseline: Option<&ArmResult>, metric: &str) -> String {
    let m = arm.metric(metric);
    match m.and_then(|m| m.comparison.as_ref()) {
        Some(c) => {
            let more = match c.more_replicates {
                Some(k) => format!(
                    "; about {} per arm would decide",
                    counted(k as u64, "more replicate")
                ),
                None => String::new(),
            };
            format!("{} ({}{more})", c.verdict.text(), comparison_detail(c))
        }
        // An arm at another revision that ran and wrote other
        // metrics: this one is not among what that code emits.
        None if m.and_then(|m| m.summary.as_ref()).is_none() => match &arm.revision {
            Some(r) => format!("not emitted by {}", md(r)),
            None => "no data".into(),
        },
        None if m.is_some_and(|m| m.descriptive) => {
            let mean = |m: Option<&MetricResult>| {
                m.and_then(|m| m.summary.as_ref())
                    .map_or_else(|| "—".to_string(), |s| num(s.mean))
            };
            format!(
                "not judged, a description of the work: {} against {}",
                mean(m),
                mean(baseline.and_then(|b| b.metric(metric)))
            )
        }
        None if baseline
            .and_then(|b| b.metric(metric))
            .and_then(|m| m.summary.as_ref())
            .is_none() =>
        {
            "no baseline data".into()
        }
        None => Verdict::Inconclusive.text().to_string(),
    }
}

/// The Cells section: what did not complete, what printed lines the
/// statistics left out, what ran again and what ran on a busy host.
fn cells_section(report: &Report) -> String {
    let mut out = String::from("## Cells\n\n");
    out.push_str(&incomplete_cells(report));
    out.push_str(&line_problems(report));
    out.push_str(&reruns(report));
    out.push_str(&contended_cells(report));
    out
}

/// Whether every cell completed, else the table of those that did not.
fn incomplete_cells(report: &Report) -> String {
    let mut out = String::new();
    if report.incomplete.is_empty() {
        let _ = match report.total_cells {
            1 => writeln!(out, "The one cell completed.\n"),
            n => writeln!(out, "All {n} cells completed.\n"),
        };
        return out;
    }
    let _ = writeln!(
        out,
        "{} of {} cells did not complete; statistics use completed cells only \
         (an arm without any completed cell is marked partial).\n",
        report.incomplete.len(),
        report.total_cells
    );
    let mut t = markdown_table();
    t.set_header(vec![
        "Run",
        "Arm",
        "Repeat",
        "Status",
        "Exit",
        "Iterations",
        "Reason",
    ]);
    for c in &report.incomplete {
        let exit = match (c.exit_code, c.signal) {
            (Some(code), _) => code.to_string(),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "—".into(),
        };
        t.add_row(vec![
            c.run_id.to_string(),
            md(&c.arm),
            c.repeat.to_string(),
            c.status.clone(),
            exit,
            c.iterations_done.to_string(),
            c.reason.as_deref().map(md).unwrap_or_else(|| "—".into()),
        ]);
    }
    let _ = writeln!(out, "{t}\n");
    out
}

/// The cells whose output had lines the statistics left out, and each
/// non-finite value they printed.
fn line_problems(report: &Report) -> String {
    let mut out = String::new();
    if report.line_problems.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "{} of {} cells printed output that is not in the statistics: lines that are \
         not valid metric JSON, lines over the 1 MiB cap (both kept in the cell's \
         `stderr_tail`), non-finite values (kept in `metric_nonfinite`, never \
         averaged), and metric lines past the `iterations` asked for (counted, not \
         stored: the command should read `LCX_ITERATIONS`, or its arm say \
         `variable_iterations = true`).\n",
        report.line_problems.len(),
        report.total_cells
    );
    let mut t = markdown_table();
    t.set_header(vec![
        "Run",
        "Arm",
        "Repeat",
        "Malformed lines",
        "Overlong lines",
        "Non-finite values",
        "Lines past iterations",
    ]);
    for p in &report.line_problems {
        t.add_row(vec![
            p.run_id.to_string(),
            md(&p.arm),
            p.repeat.to_string(),
            p.malformed.to_string(),
            p.overlong.to_string(),
            p.nonfinite_values.to_string(),
            p.extra.to_string(),
        ]);
    }
    let _ = writeln!(out, "{t}\n");
    for p in report
        .line_problems
        .iter()
        .filter(|p| !p.nonfinite.is_empty())
    {
        for detail in &p.nonfinite {
            let _ = writeln!(
                out,
                "- run {} ({} #{}): {}",
                p.run_id,
                code(&p.arm),
                p.repeat,
                detail.markdown()
            );
        }
    }
    if report.line_problems.iter().any(|p| !p.nonfinite.is_empty()) {
        out.push('\n');
    }
    out
}

/// The cells run again after the schedule.
fn reruns(report: &Report) -> String {
    let mut out = String::new();
    if report.reruns.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "Cells run again after the schedule (`[measurement] rerun_contended`); the \
         statistics use the rerun, the earlier attempt's rows are kept, superseded.\n"
    );
    let mut t = markdown_table();
    t.set_header(vec!["Run", "Arm", "Repeat", "Attempt", "Why"]);
    for r in &report.reruns {
        t.add_row(vec![
            r.run_id.to_string(),
            md(&r.arm),
            r.repeat.to_string(),
            r.attempt.to_string(),
            md(&r.why),
        ]);
    }
    let _ = writeln!(out, "{t}\n");
    out
}

/// The cells that ran while other programs used the host's CPUs.
fn contended_cells(report: &Report) -> String {
    let mut out = String::new();
    if report.contended.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "Contended cells: other programs used the host's CPUs while they ran (the \
         host's busy time less the cell's own and the runner's, averaged over the \
         cell, in cores).\n"
    );
    let rounds = report.contended.iter().any(|c| c.round_even.is_some());
    let named = report.contended.iter().any(|c| !c.busiest.is_empty());
    let mut t = markdown_table();
    let mut header = vec!["Run", "Arm", "Repeat", "Foreign CPU", "Limit"];
    if named {
        header.push("Busiest others");
    }
    if rounds {
        header.push("Its round");
    }
    t.set_header(header);
    for c in &report.contended {
        let mut row = vec![
            c.run_id.to_string(),
            md(&c.arm),
            c.repeat.to_string(),
            format!("{:.2} cores", c.foreign_cores),
            format!("{:.2}", c.threshold),
        ];
        if named {
            row.push(busiest_over(std::slice::from_ref(c)).unwrap_or_default());
        }
        match c.round_even {
            Some(true) => row.push("evenly loaded: judged as a pair".to_string()),
            Some(false) => row.push("unevenly loaded: left out of the pairs".to_string()),
            None => {}
        }
        t.add_row(row);
    }
    let _ = writeln!(out, "{t}\n");
    out
}

/// The experiment's `lcx run` line and one cell's line per arm.
fn reproduce_section(report: &Report) -> String {
    let mut out = String::from("## Reproduce\n\n");
    out.push_str(&code_block("sh", &report.reproduce.experiment));
    if !report.reproduce.cells.is_empty() {
        out.push_str("One cell of each arm:\n\n");
        let mut lines = String::new();
        for (arm, cmd) in &report.reproduce.cells {
            let _ = writeln!(lines, "# {}\n{cmd}", crate::escape::terminal_line(arm));
        }
        out.push_str(&code_block("sh", lines.trim_end()));
    }
    out
}

/// The environment, a list of what and its value.
fn environment_section(report: &Report) -> String {
    let mut out = String::from("## Environment\n\n");
    for (k, v) in &report.environment {
        let _ = writeln!(out, "- {}: {}", k.markdown(), md(v));
    }
    out.push('\n');
    out
}

/// The Runs table: every cell, with its node and Slurm job where any cell
/// ran as one.
fn runs_section(report: &Report) -> String {
    let mut out = String::from("## Runs\n\n");
    let mut t = markdown_table();
    // Slurm cells also say where they ran and as which job.
    let jobs = report.runs.iter().any(|r| r.slurm_job.is_some());
    let mut header = vec![
        "Run",
        "Arm",
        "Repeat",
        "Status",
        "Iterations",
        "Warm-up",
        "Wall s",
    ];
    if jobs {
        header.extend(["Node", "Slurm job"]);
    }
    t.set_header(header);
    for r in &report.runs {
        let mut row = vec![
            r.run_id.to_string(),
            md(&r.arm),
            r.repeat.to_string(),
            r.status.clone(),
            r.iterations_done.to_string(),
            r.warmup.to_string(),
            match (r.wall_seconds, r.runner_stall_seconds) {
                (Some(w), Some(stall)) => format!("{} (runner stopped {} s)", num(w), num(stall)),
                (Some(w), None) => num(w),
                (None, _) => "—".into(),
            },
        ];
        if jobs {
            let dash = || "—".to_string();
            row.push(r.host.as_deref().map(md).unwrap_or_else(dash));
            row.push(match (&r.slurm_job, &r.slurm_script) {
                (Some(job), Some(script)) if is_plain_path(script) => {
                    format!("{} ([job.sh](<{script}>))", md(job))
                }
                (Some(job), Some(script)) => format!("{} ({})", md(job), md(script)),
                (Some(job), None) => md(job),
                _ => dash(),
            });
        }
        t.add_row(row);
    }
    let _ = writeln!(out, "{t}\n");
    out
}

/// The author's notes, lcx's remarks and the metrics whose direction was
/// guessed; nothing when there are none.
fn notes_section(report: &Report) -> String {
    let mut out = String::new();
    let unknown = report.columns.iter().any(|c| !c.direction_known);
    if report.notes.trim().is_empty() && report.remarks.is_empty() && !unknown {
        return out;
    }
    out.push_str("## Notes\n\n");
    if !report.notes.trim().is_empty() {
        let _ = writeln!(out, "{}\n", md_block(report.notes.trim()));
    }
    for r in &report.remarks {
        let _ = writeln!(out, "- {}", r.markdown());
    }
    let mut seen = Vec::new();
    for c in report.columns.iter().filter(|c| !c.direction_known) {
        if seen.contains(&c.metric) {
            continue;
        }
        seen.push(c.metric.clone());
        let _ = writeln!(
            out,
            "- {}: direction unknown, treated as {} (set `direction` in `[[columns]]`).",
            code(&c.metric),
            direction_word(c.direction)
        );
    }
    out.push('\n');
    out
}

/// The plots, each an image link.
fn plots_section(report: &Report) -> String {
    let mut out = String::new();
    if !report.plots.is_empty() {
        out.push_str("## Plots\n\n");
        for (title, path) in &report.plots {
            let _ = writeln!(out, "![{}]({path})\n", md(title));
        }
    }
    out
}

/// A fenced code block of `body` (shell lines lcx wrote around recorded
/// names and paths): the fence is longer than any run of backticks inside,
/// so nothing in it can close the block early, and hidden controls show
/// as their escapes.
fn code_block(lang: &str, body: &str) -> String {
    let fence = "`".repeat((crate::escape::longest_backtick_run(body) + 1).max(3));
    format!(
        "{fence}{lang}\n{}\n{fence}\n\n",
        crate::escape::terminal(body)
    )
}

/// A path that may be a link target in markdown as it is: a relative or
/// absolute file path of plain characters.
fn is_plain_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_'))
        && crate::escape::safe_href(path)
}

/// The whole report as pretty JSON; characters a terminal would obey are
/// written as `\u` escapes (the parsed value is the same).
pub fn render_json(report: &Report) -> String {
    // The report is plain data (strings, numbers, options): serialising
    // cannot fail; non-finite floats become null.
    let json = serde_json::to_string_pretty(report).unwrap_or_default();
    crate::escape::json_visible(&json).into_owned()
}

fn opt(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => v.to_string(),
        _ => String::new(),
    }
}

/// One row per arm × metric, full precision.
pub fn render_csv(report: &Report) -> String {
    let mut out = String::from(
        "experiment_id,experiment,arm,baseline,metric,direction,n,replicates,replicate_unit,\
         excluded_warmup,mean,median,sd,min,max,speedup,speedup_se,speedup_ci_low,\
         speedup_ci_high,p_value,verdict,compared_with\n",
    );
    for arm in &report.arms {
        for m in &arm.metrics {
            let s = m.summary.as_ref();
            let c = m.comparison.as_ref();
            let sp = c.and_then(|c| c.speedup.as_ref());
            let fields = [
                report.experiment.id.to_string(),
                csv_field(&report.experiment.name),
                csv_field(&arm.name),
                arm.is_baseline.to_string(),
                csv_field(&m.metric),
                if m.descriptive {
                    "none".to_string()
                } else {
                    m.direction.word().to_string()
                },
                s.map(|s| s.n.to_string()).unwrap_or_default(),
                m.replicates.to_string(),
                m.replicate_unit.clone(),
                m.excluded_warmup.to_string(),
                opt(s.map(|s| s.mean)),
                opt(s.and_then(|s| s.median)),
                opt(s.map(|s| s.sd)),
                opt(s.map(|s| s.min)),
                opt(s.map(|s| s.max)),
                opt(sp.map(|s| s.ratio)),
                opt(sp.map(|s| s.se)),
                opt(sp.map(|s| s.ci_low)),
                opt(sp.map(|s| s.ci_high)),
                opt(c.and_then(|c| c.welch.as_ref()).map(|w| w.p_value)),
                c.map(|c| c.verdict.text().to_string()).unwrap_or_default(),
                // The arm the speedup is against: the baseline, or in a
                // sweep the baseline at this arm's point.
                csv_field(
                    arm.compared_with
                        .as_deref()
                        .or((!arm.is_baseline).then_some(report.baseline.as_str()))
                        .unwrap_or_default(),
                ),
            ];
            out.push_str(&fields.join(","));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn markdown_pass() {
        let report = fixture::report(1.5, true);
        let md = render_markdown(&report);
        assert!(md.contains("Verdict: PASS"), "{md}");
        insta::assert_snapshot!("markdown_pass", md);
    }

    #[test]
    fn markdown_fail_with_default_columns() {
        let report = fixture::report(4.0, false);
        let md = render_markdown(&report);
        assert!(md.contains("Verdict: FAIL"), "{md}");
        assert!(md.contains("below 4.00×"), "{md}");
        insta::assert_snapshot!("markdown_fail_default_columns", md);
    }

    #[test]
    fn json_and_csv() {
        let report = fixture::report(1.5, true);
        let json = render_json(&report);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["gate"]["pass"], true);
        insta::assert_snapshot!("json", json);
        let csv = render_csv(&report);
        // Header + 3 arms × 4 metrics.
        assert_eq!(csv.lines().count(), 1 + 3 * 4);
        insta::assert_snapshot!("csv", csv);
    }

    #[test]
    fn the_authors_code_spans_stay_code_spans() {
        let mut report = fixture::report(1.5, true);
        report.notes = "Set `traversal.opponent_policy=network`; `a\u{1b}b` and `x|y`.".into();
        report.experiment.description = "Runs ``a`b`` on `main`.".into();
        let md = render_markdown(&report);
        assert!(
            md.contains("Set `traversal.opponent_policy=network`;"),
            "{md}"
        );
        assert!(md.contains("`a\\x1bb`"), "{md}");
        assert!(!md.contains('\u{1b}'), "{md}");
        // A `|` inside is text, escaped, as before.
        assert!(md.contains("\\`x\\|y\\`"), "{md}");
        assert!(md.contains("Runs ``a`b`` on `main`."), "{md}");
    }

    #[test]
    fn names_and_labels_cannot_break_the_markdown() {
        let mut report = fixture::report(1.5, true);
        report.experiment.name = "<script>alert(1)</script>".into();
        report.arms[1].label = "fast | <b>bold</b>".into();
        report.columns[0].label = "s|x".into();
        let md = render_markdown(&report);
        assert!(!md.contains("<script>") && !md.contains("<b>"), "{md}");
        // Backslash escapes, which read in a terminal, not HTML entities.
        assert!(
            md.starts_with("# \\<script\\>alert(1)\\</script\\>"),
            "{md}"
        );
        assert!(md.contains("fast \\| \\<b\\>bold\\</b\\>"), "{md}");
        assert!(!md.contains("&lt;"), "{md}");
        // Every row of the arm table has as many unescaped `|` as its header.
        let table: Vec<&str> = md
            .lines()
            .skip_while(|l| !l.starts_with("| Mode"))
            .take_while(|l| l.starts_with('|'))
            .collect();
        let bars = |l: &str| l.replace("\\|", "").matches('|').count();
        assert!(table.len() >= 4, "{md}");
        assert!(
            table.iter().all(|l| bars(l) == bars(table[0])),
            "{table:#?}"
        );
    }

    #[test]
    fn line_problems_are_listed_in_the_cells_section() {
        let mut report = fixture::report(1.5, true);
        report.line_problems.push(super::super::model::LineNote {
            run_id: 7,
            arm: "interleaved".into(),
            repeat: 1,
            malformed: 2,
            nonfinite_values: 3,
            overlong: 1,
            extra: 4,
            nonfinite: vec![
                "loss/strategy: NaN at iterations 3, 4; Infinity at iteration 5".into(),
            ],
        });
        let md = render_markdown(&report);
        let cells = &md[md.find("## Cells").unwrap()..md.find("## Reproduce").unwrap()];
        assert!(cells.contains("| 7   | interleaved | 1      | 2               | 1              | 3                 | 4                     |"), "{cells}");
        assert!(
            cells.contains("- run 7 (`interleaved` #1): loss/strategy: NaN at iterations 3, 4; Infinity at iteration 5"),
            "{cells}"
        );
    }
}
