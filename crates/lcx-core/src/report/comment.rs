//! `lcx report --format comment`: what a reviewer reads on a pull request
//! in ten seconds. The `--check` decision and its exit code, the gate's
//! verdict line (the one `lcx run` and `lcx report` print, with what
//! `--check` adds to it), only the metrics that changed or are gated, one
//! line on what makes the data weak, and where the full report is: at most
//! [`MAX_LINES`] lines whatever the experiment's size. Its first line is a
//! hidden marker, so that a job can find its own comment and update it in
//! place on the next push (`scripts/pr-comment.sh`). Pure, like the other
//! renderers.

use std::fmt::Write as _;

use super::builder::label_of;
use super::model::Report;
use super::render::{is_scan, verdict_line};
use super::stats::Verdict;
use super::words::speedup_text;
use crate::escape::{md_code as code, md_inline as md};

/// The most lines a comment has, whatever the experiment's size.
pub const MAX_LINES: usize = 25;

/// The table rows shown before "… and N more": the rest of the comment
/// (marker, heading, verdict, table head, notes, link) fits beside them.
const MAX_ROWS: usize = 12;

/// The hidden first line a job looks for to update its comment: one per
/// experiment name, in characters that cannot end an HTML comment.
pub fn marker(report: &Report) -> String {
    let mut name: String = report
        .experiment
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // `--` would end the comment early.
    while name.contains("--") {
        name = name.replace("--", "-_");
    }
    format!("<!-- lcx-comment {name} -->")
}

/// The comment for `report`; `link` is where the full report is (the job's
/// summary, say), else the command that prints it.
pub fn render_comment(report: &Report, link: Option<&str>) -> String {
    let mut lines: Vec<String> = vec![marker(report)];
    let check = report.check;
    lines.push(format!(
        "### lcx {}: {} (`lcx report --check` exits {})",
        code(&report.experiment.name),
        check.word(),
        check.exit_code()
    ));
    // The verdict line's first paragraph: the gate rule stays in the full
    // report.
    let verdict = verdict_line(report)
        .map(|v| v.split("\n\n").next().unwrap_or_default().to_string())
        .unwrap_or_else(|| format!("Net result: {}", report.net_result.markdown()));
    lines.push(verdict);
    let rows = rows(report);
    if rows.is_empty() {
        lines.push("No metric changed beyond the minimum effect.".into());
    } else {
        lines.push("| Arm | Metric | Speedup | 95% CI | Verdict |".into());
        lines.push("|---|---|---|---|---|".into());
        for row in rows.iter().take(MAX_ROWS) {
            lines.push(row.clone());
        }
        if rows.len() > MAX_ROWS {
            lines.push(format!(
                "… and {} more in the full report.",
                rows.len() - MAX_ROWS
            ));
        }
    }
    if let Some(note) = note(report) {
        lines.push(note);
    }
    lines.push(match link {
        // `--link` is an http(s) address (checked where it is read);
        // what would end a markdown link's destination is percent-encoded.
        Some(url) => format!(
            "[The full report]({}) · experiment #{}",
            url.replace(' ', "%20")
                .replace('(', "%28")
                .replace(')', "%29"),
            report.experiment.id
        ),
        None => format!(
            "The full report: `lcx report {}` on the job's database.",
            report.experiment.id
        ),
    });
    let mut out = String::new();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// One row per arm and metric that changed (improved or regressed) or
/// that the gate judges: gated rows first, then by the size of the change.
fn rows(report: &Report) -> Vec<String> {
    if is_scan(report) {
        return Vec::new();
    }
    let gated = |arm: &str, metric: &str| {
        report
            .gate
            .as_ref()
            .is_some_and(|g| g.metric == metric && g.arms.iter().any(|a| a.arm == arm))
    };
    let mut found: Vec<(bool, f64, String)> = Vec::new();
    for arm in report.arms.iter().filter(|a| !a.is_baseline) {
        let mut seen: Vec<&str> = Vec::new();
        for m in &arm.metrics {
            if seen.contains(&m.metric.as_str()) {
                continue;
            }
            seen.push(&m.metric);
            let Some(c) = &m.comparison else { continue };
            let is_gated = gated(&arm.name, &m.metric);
            if !is_gated && !matches!(c.verdict, Verdict::Improved | Verdict::Regressed) {
                continue;
            }
            let (speedup, interval, size) = match &c.speedup {
                Some(s) => (
                    speedup_text(s),
                    format!("{:.2}–{:.2}", s.ci_low, s.ci_high),
                    s.ratio.ln().abs(),
                ),
                None => ("—".into(), "—".into(), 0.0),
            };
            let verdict = match c.verdict {
                Verdict::Improved => "**improved**",
                Verdict::Regressed => "**regressed**",
                v => v.text(),
            };
            found.push((
                is_gated,
                size,
                format!(
                    "| {} | {}{} | {speedup} | {interval} | {verdict} |",
                    md(&arm.name),
                    md(&label_of(&report.columns, &m.metric)),
                    if is_gated { " (gated)" } else { "" }
                ),
            ));
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
    found.into_iter().map(|(_, _, row)| row).collect()
}

/// One line on what makes the data weak: cells that did not complete,
/// contended cells, why `--check` could not decide.
fn note(report: &Report) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    if !report.incomplete.is_empty() {
        parts.push(format!(
            "{} of {} cells did not complete",
            report.incomplete.len(),
            report.total_cells
        ));
    }
    if !report.contended.is_empty() {
        parts.push(format!(
            "{} cells ran while other programs used the host (contended)",
            report.contended.len()
        ));
    }
    if parts.is_empty() && report.check_notes.is_empty() {
        return None;
    }
    let mut line = if parts.is_empty() {
        "Note: `--check` could not decide".to_string()
    } else {
        format!("Note: {}", parts.join("; "))
    };
    // What to do about contended cells, where they are what left it undecided.
    if report.check == super::stats::Decision::Inconclusive && !report.contended.is_empty() {
        line.push_str(
            "; on a shared runner rerun the contended cells (`[measurement] rerun_contended`), \
             judge them anyway (`--allow-contended`), or count instructions (docs/ci.md)",
        );
    }
    line.push('.');
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_keeps_a_name_and_cannot_end_its_comment_early() {
        let mut report = crate::report::fixture::report(1.5, false);
        for (name, expected) in [
            ("ci-bench", "<!-- lcx-comment ci-bench -->"),
            ("a-->b c", "<!-- lcx-comment a-__b_c -->"),
            ("x---y", "<!-- lcx-comment x-_-y -->"),
        ] {
            report.experiment.name = name.into();
            let m = marker(&report);
            assert_eq!(m, expected, "{name}");
            assert!(
                !m["<!--".len()..m.len() - "-->".len()].contains("--"),
                "{m}"
            );
        }
        let comment = render_comment(&report, None);
        assert!(comment.lines().count() <= MAX_LINES, "{comment}");
        assert!(comment.starts_with("<!-- lcx-comment x-_-y -->\n### lcx `x---y`: "));
    }
}
