//! The site's pages as HTML strings: the index, an experiment's page and a
//! metric's history. Pure: the caller reads the store and writes files.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::html::{badge, esc, markdown, page};
use crate::report::model::Report;
use crate::report::words::speedup_text;

/// One experiment as the index lists it (kept in the site's manifest, so
/// an unchanged experiment's row costs no report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexRow {
    pub id: i64,
    pub name: String,
    /// `created_at` as stored (UTC).
    pub created: String,
    /// Short commit, `+dirty` when the tree was.
    pub revision: String,
    /// The host name: the one a user set (`LCX_HOSTNAME`) or the
    /// machine's, as `experiments.hostname` holds it.
    pub host: String,
    /// What the machine is (`AMD EPYC ×2, torch 2.11.0`).
    pub machine: String,
    pub arms: Vec<String>,
    /// The experiment's status (`completed`, `failed`, `running`, …).
    pub status: String,
    /// What `lcx report --check` decides: PASS, FAIL or INCONCLUSIVE.
    pub check: String,
    /// Whether a gate or guard was judged (else the check says only
    /// whether every cell completed).
    pub gated: bool,
    /// The headline: the gate's arm (else the first other arm) against the
    /// baseline on the gate's (else the report's first) metric.
    pub headline: Option<String>,
    /// The value metrics of the report, each with a history page.
    pub metrics: Vec<String>,
    /// Each regressed verdict against the baseline, as the index shows it
    /// (`regressed: b 0.55×`).
    pub regressions: Vec<String>,
}

impl IndexRow {
    /// The row of `report`.
    pub fn of(report: &Report, revision: String, host: String, machine: String) -> IndexRow {
        let e = &report.experiment;
        let metrics = {
            let mut m: Vec<String> = Vec::new();
            for c in &report.columns {
                if c.kind == crate::report::model::ColumnKind::Value && !m.contains(&c.metric) {
                    m.push(c.metric.clone());
                }
            }
            m
        };
        IndexRow {
            id: e.id,
            name: e.name.clone(),
            created: e.created_at.clone(),
            revision,
            host,
            machine,
            arms: report.arms.iter().map(|a| a.name.clone()).collect(),
            status: e.status.clone(),
            check: report.check.word().to_string(),
            gated: report.gate.is_some() || !report.guards.is_empty(),
            headline: headline(report),
            regressions: regressions(report, metrics.len() > 1),
            metrics,
        }
    }

    /// The word the index's Check column shows: the check's, but a neutral
    /// `completed` where nothing was gated and every cell completed (a
    /// PASS there would claim a judgement nobody asked for).
    pub fn check_word(&self) -> &str {
        if !self.gated && self.check == "PASS" {
            "completed"
        } else {
            &self.check
        }
    }
}

/// `regressed: b 0.55×` for each arm and metric whose verdict against the
/// baseline is a regression; `on METRIC` added when the report has several.
/// None in a scan: a point slower than the first is no regression.
fn regressions(report: &Report, name_metric: bool) -> Vec<String> {
    let mut out = Vec::new();
    if crate::report::render::is_scan(report) {
        return out;
    }
    for arm in report.arms.iter().filter(|a| !a.is_baseline) {
        for m in &arm.metrics {
            let Some(c) = m.comparison.as_ref() else {
                continue;
            };
            if c.verdict != crate::report::stats::Verdict::Regressed {
                continue;
            }
            let mut text = format!("regressed: {}", arm.name);
            if let Some(s) = &c.speedup {
                let _ = write!(text, " {:.2}×", s.ratio);
            }
            if name_metric {
                let _ = write!(text, " on {}", m.metric);
            }
            out.push(text);
        }
    }
    out
}

/// `interleaved 3.95× ± 0.33 [3.30, 4.73] on nodes/s`; for a sweep, where
/// each arm starts to pay (`amp pays from hidden-size 2048; …`).
fn headline(report: &Report) -> Option<String> {
    if let Some(sweep) = report.sweep.as_ref().filter(|s| !s.crossovers.is_empty()) {
        let parts: Vec<String> = sweep
            .crossovers
            .iter()
            .map(|c| {
                let series = if c.series.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", c.series)
                };
                match &c.point {
                    _ if !c.determined => format!("{}{series}: crossover undetermined", c.arm),
                    Some(p) => format!("{}{series} pays from {p}", c.arm),
                    None => format!("{}{series}: no crossover", c.arm),
                }
            })
            .collect();
        return Some(parts.join("; "));
    }
    let (metric, arm) = match &report.gate {
        Some(g) => (g.metric.clone(), g.arms.first().map(|a| a.arm.clone())),
        None => (
            report.columns.first().map(|c| c.metric.clone())?,
            report
                .arms
                .iter()
                .find(|a| !a.is_baseline)
                .map(|a| a.name.clone()),
        ),
    };
    let arm = arm?;
    let result = report.arms.iter().find(|a| a.name == arm)?;
    let speedup = result
        .metric(&metric)?
        .comparison
        .as_ref()?
        .speedup
        .as_ref()?;
    Some(format!(
        "{arm} {} [{}, {}] on {metric}",
        speedup_text(speedup),
        crate::report::words::num(speedup.ci_low),
        crate::report::words::num(speedup.ci_high)
    ))
}

/// The index: every experiment, newest first, with filters and sortable
/// columns (the script adds both; without it the table is still whole).
pub fn index_page(rows: &[IndexRow]) -> String {
    let mut body = String::new();
    let names = distinct(rows.iter().map(|r| r.name.as_str()));
    let arms = distinct(rows.iter().flat_map(|r| r.arms.iter().map(String::as_str)));
    let hosts = distinct(rows.iter().map(|r| r.host.as_str()));
    let _ = write!(
        body,
        "<h1>Experiments</h1>\n<p>{} of {}. Check: what <code>lcx report \
         --check</code> decides (PASS only when every cell completed and every gate and guard \
         passed; a neutral completed when there was nothing to judge). Click a column's header to sort by it.</p>\n\
         <form class=\"filters\" role=\"search\" aria-label=\"Filter experiments\">\
         <label>Name <input id=\"f-name\" type=\"search\" list=\"names\" \
         placeholder=\"part of a name\"></label>{}\
         <label>Arm {}</label><label>Host {}</label>\
         <label>Check {}</label></form>\n<p id=\"shown\" aria-live=\"polite\"></p>\n",
        crate::text::counted(rows.len() as u64, "experiment"),
        crate::text::counted(names.len() as u64, "name"),
        datalist("names", &names),
        select("f-arm", &arms),
        select("f-host", &hosts),
        select("f-check", &["PASS", "FAIL", "INCONCLUSIVE", "completed"]),
    );
    body.push_str(
        "<div class=\"table\" tabindex=\"0\"><table id=\"experiments\" class=\"sortable\">\n<thead><tr>\
         <th scope=\"col\" data-type=\"number\">#</th><th scope=\"col\">Name</th>\
         <th scope=\"col\">Date (UTC)</th><th scope=\"col\">Revision</th>\
         <th scope=\"col\">Host</th><th scope=\"col\">Arms</th><th scope=\"col\">Status</th>\
         <th scope=\"col\">Check</th><th scope=\"col\">Headline speedup (95 % interval)</th>\
         </tr></thead>\n<tbody>\n",
    );
    for r in rows {
        let check = if r.gated {
            badge(&r.check)
        } else {
            format!("{} <small>no gate</small>", badge(r.check_word()))
        };
        let mut status = esc(&r.status);
        for reg in &r.regressions {
            let _ = write!(
                status,
                "<br><strong class=\"regressed\">{}</strong>",
                esc(reg)
            );
        }
        let _ = writeln!(
            body,
            "<tr data-name=\"{name}\" data-arms=\"{arms}\" data-host=\"{host}\" \
             data-check=\"{check_word}\"><td data-sort=\"{id}\">{id}</td>\
             <td><a href=\"e/{id}.html\">{name}</a></td><td>{created}</td><td><code>{rev}</code></td>\
             <td data-sort=\"{host}\">{host}<br><small>{machine}</small></td><td>{arm_list}</td>\
             <td>{status}</td><td>{check}</td><td>{headline}</td></tr>",
            id = r.id,
            name = esc(&r.name),
            // Arm names hold no space (the reader refuses it): the separator.
            arms = esc(&r.arms.join(" ")),
            host = esc(&r.host),
            machine = esc(&r.machine),
            check_word = esc(r.check_word()),
            created = esc(r.created.get(..16).unwrap_or(&r.created)),
            rev = esc(&r.revision),
            arm_list = esc(&r.arms.join(", ")),
            headline = r.headline.as_deref().map(esc).unwrap_or_else(|| "—".into()),
        );
    }
    body.push_str("</tbody></table></div>\n");
    page("Experiments", "", &body)
}

fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out.sort_unstable();
    out
}

fn select(id: &str, options: &[&str]) -> String {
    let mut s = format!("<select id=\"{id}\"><option value=\"\">any</option>");
    for o in options {
        let _ = write!(s, "<option>{}</option>", esc(o));
    }
    s.push_str("</select>");
    s
}

fn datalist(id: &str, options: &[&str]) -> String {
    let mut s = format!("<datalist id=\"{id}\">");
    for o in options {
        let _ = write!(s, "<option value=\"{}\">", esc(o));
    }
    s.push_str("</datalist>");
    s
}

/// What an experiment's page shows beside its report.
pub struct ExperimentPage<'a> {
    pub row: &'a IndexRow,
    /// `lcx report`'s markdown, plots linked by file name.
    pub report_markdown: &'a str,
    /// The experiment file as it was run.
    pub file_path: &'a str,
    pub file_text: &'a str,
    /// The previous and next experiment of the same name.
    pub previous: Option<i64>,
    pub next: Option<i64>,
    /// `lcx compare previous this` as markdown, when there is a previous.
    pub diff_markdown: Option<String>,
    /// (arm, metric, page) of each history page of this experiment's name.
    pub histories: Vec<(String, String, String)>,
}

pub fn experiment_page(p: &ExperimentPage<'_>) -> String {
    let r = p.row;
    let mut body = String::new();
    let mut nav = vec!["<a href=\"../index.html\">all experiments</a>".to_string()];
    if let Some(prev) = p.previous {
        nav.push(format!(
            "<a rel=\"prev\" href=\"{prev}.html\">previous run of {} (#{prev})</a>",
            esc(&r.name)
        ));
    }
    if p.diff_markdown.is_some() {
        nav.push("<a href=\"#diff\">its diff against the previous</a>".into());
    }
    if let Some(next) = p.next {
        nav.push(format!(
            "<a rel=\"next\" href=\"{next}.html\">next run (#{next})</a>"
        ));
    }
    let _ = write!(
        body,
        "<nav aria-label=\"Related pages\">{}</nav>\n<p class=\"check\">Check: {}{}</p>\n",
        nav.join(" · "),
        badge(r.check_word()),
        if r.gated {
            ""
        } else {
            " (no gate or guard: nothing was judged, the check says only whether every \
             cell completed)"
        }
    );
    body.push_str("<article class=\"report\">\n");
    body.push_str(&markdown(p.report_markdown));
    body.push_str("</article>\n");
    if !p.histories.is_empty() {
        body.push_str("<section><h2>History</h2><ul class=\"histories\">");
        for (arm, metric, href) in &p.histories {
            let _ = write!(
                body,
                "<li><a href=\"../{}\">{} of {}</a></li>",
                esc(href),
                esc(metric),
                esc(arm)
            );
        }
        body.push_str("</ul></section>\n");
    }
    if let Some(diff) = &p.diff_markdown {
        let _ = write!(
            body,
            "<section id=\"diff\"><h2>Against the previous run (#{})</h2>\n{}</section>\n",
            p.previous.unwrap_or_default(),
            markdown(diff)
        );
    }
    let _ = writeln!(
        body,
        "<section><h2>The experiment file as run</h2><p><code>{}</code></p>\
         <pre tabindex=\"0\"><code>{}</code></pre></section>",
        esc(p.file_path),
        esc(p.file_text)
    );
    page(&format!("#{} {}", r.id, r.name), "../", &body)
}

/// One (experiment name, arm, metric) across experiments.
pub fn history_page(
    name: &str,
    arm: &str,
    metric: &str,
    svg: &str,
    table_markdown: &str,
) -> String {
    let body = format!(
        "<nav aria-label=\"Related pages\"><a href=\"../index.html\">all experiments</a></nav>\n\
         <h1>{metric} of {arm} in {name}</h1>\n<p>Each point is one experiment (hover for its \
         revision and date, click to open it); the bar is ± one standard deviation. Step \
         changes and changes of host are marked with their words.</p>\n<figure>{svg}\
         <figcaption>{metric} of arm {arm}, every experiment named {name}; the table below \
         holds the same numbers.</figcaption></figure>\n{}",
        markdown(table_markdown),
        metric = esc(metric),
        arm = esc(arm),
        name = esc(name),
    );
    page(&format!("{metric} of {arm} in {name}"), "../", &body)
}
