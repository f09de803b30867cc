//! `lcx report`: render an experiment's report (markdown, JSON, CSV),
//! optionally archive it with plots, and `--check` its gate for CI.

use std::path::PathBuf;

use anyhow::Context;

use lcx_core::escape;
use lcx_core::report::{self, archive, builder};
use lcx_core::store::Store;

use crate::args::{formats, DbArgs, Format};
use crate::db::{open_db, user_or_not};

/// Output format of `lcx report`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx report                      the latest experiment\n  lcx report option-b --archive   a dated report with plots under archive/\n  lcx report --check              in CI: exit 0 PASS, 1 FAIL, 3 undecided\n  lcx report --format comment     a pull request's comment (at most 25 lines)"
)]
pub struct Args {
    /// Which experiment: an id, an experiment name (its latest run) or `latest`.
    #[arg(default_value = "latest", value_name = "ID|NAME|latest")]
    experiment: String,
    /// Report every experiment in the database, oldest first.
    #[arg(long, conflicts_with = "experiment")]
    all: bool,
    /// `markdown`, `json`, `csv`, or `comment`: at most 25 lines for a pull
    /// request (the --check decision, the verdict line, the metrics that
    /// changed or are gated, a note, where the full report is).
    #[arg(long, value_parser = formats(&[(Format::Markdown, None), (Format::Json, None), (Format::Csv, None), (Format::Comment, None)]), default_value = "markdown")]
    format: Format,
    /// With --format comment: the full report's address (the CI job's
    /// summary), linked from the comment's last line.
    #[arg(long, value_name = "URL")]
    link: Option<String>,
    /// Also write archive/YYYY-MM-DD-<slug>.md (never overwriting) with SVG plots beside it.
    #[arg(long)]
    archive: bool,
    /// Directory for --archive.
    #[arg(long, default_value = "archive", value_name = "DIR")]
    archive_dir: PathBuf,
    /// Exit 0 only when every cell completed and every gate and guard passed
    /// (or there is none), 1 when a gate or guard FAILs, 3 when INCONCLUSIVE
    /// (a cell that did not complete, an arm without data, too few data,
    /// a gate or guard on contended cells).
    #[arg(long)]
    check: bool,
    /// Let --check judge gates and guards on cells measured while other
    /// programs used the host's CPUs (otherwise INCONCLUSIVE).
    #[arg(long)]
    allow_contended: bool,
    /// Minimum relative effect for a verdict (default: the gate's, else 0.05).
    #[arg(long, value_name = "FRACTION", value_parser = crate::args::min_effect)]
    min_effect: Option<f64>,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    if args.link.is_some() && args.format != Format::Comment {
        return Err(crate::bad_input(anyhow::anyhow!(
            "--link: only with --format comment (the comment links to the full report)"
        )));
    }
    if let Some(c) = args.link.as_deref().and_then(escape::first_hidden) {
        return Err(crate::bad_input(anyhow::anyhow!(
            "--link: contains {}; expected one line of visible text (a URL)",
            escape::terminal_line(&c.to_string())
        )));
    }
    if let Some(link) = args.link.as_deref().filter(|l| !escape::safe_href(l)) {
        return Err(crate::bad_input(anyhow::anyhow!(
            "--link {}: expected an http(s) address or a relative path",
            escape::terminal_line(link)
        )));
    }
    let store = open_db(&args.db)?;
    let ids = if args.all {
        let mut ids: Vec<i64> = store
            .experiments(None)
            .map_err(user_or_not)?
            .iter()
            .map(|e| e.id)
            .collect();
        ids.reverse();
        if ids.is_empty() {
            return Err(crate::bad_input(anyhow::anyhow!(
                "{} holds no experiment yet",
                args.db.display()
            )));
        }
        ids
    } else {
        vec![
            store
                .find_experiment(&args.experiment)
                .map_err(user_or_not)?
                .id,
        ]
    };
    let options = builder::Options {
        min_effect: args.min_effect,
        alpha: None,
        allow_contended: args.allow_contended,
    };
    let mut reports = Vec::new();
    for id in &ids {
        let r = report::load(&store, *id, options)
            .map_err(user_or_not)
            .with_context(|| format!("building the report of experiment {id}"))?;
        reports.push(r);
    }
    drop(store);

    if args.archive {
        // Archiving writes one row per file to `reports`; that needs the
        // read-write open (which also migrates an older file).
        let mut writer = Store::open(&args.db)
            .map_err(user_or_not)
            .context("opening the database to record the archive")?;
        for r in &reports {
            let written = archive::archive(&mut writer, &args.archive_dir, r).map_err(|e| {
                if e.is_user_input() {
                    crate::bad_input(e)
                } else {
                    e.into()
                }
            })?;
            eprintln!(
                "archived: {} ({} plot(s))",
                escape::terminal_line(&written.markdown.display().to_string()),
                written.plots.len()
            );
        }
    }

    match args.format {
        // `--format` offers markdown, json, csv and comment.
        Format::Markdown | Format::Table => {
            // The renderer escaped every recorded string; the terminal rule
            // over the whole is the last guard and costs nothing on lcx's text.
            let texts: Vec<String> = reports.iter().map(report::render_markdown).collect();
            println!("{}", escape::terminal(&texts.join("\n\n---\n\n")));
        }
        Format::Json => {
            if args.all {
                // Plain data: cannot fail to serialise.
                let json = serde_json::to_string_pretty(&reports).unwrap_or_default();
                println!("{}", escape::json_visible(&json));
            } else if let Some(r) = reports.first() {
                println!("{}", report::render_json(r));
            }
        }
        Format::Comment => {
            let texts: Vec<String> = reports
                .iter()
                .map(|r| report::render_comment(r, args.link.as_deref()))
                .collect();
            print!("{}", escape::terminal(&texts.join("\n")));
        }
        Format::Csv => {
            for (i, r) in reports.iter().enumerate() {
                let csv = report::render_csv(r);
                // One header for the whole output.
                let body = if i == 0 {
                    csv.as_str()
                } else {
                    csv.split_once('\n').map(|(_, rest)| rest).unwrap_or("")
                };
                print!("{}", crate::data_for_stdout(body));
            }
        }
    }

    if args.check {
        // 0 PASS, 1 FAIL, 3 INCONCLUSIVE (no data, too few to decide, or a
        // cell that did not complete); over several experiments the worst
        // wins.
        let mut decisions = Vec::new();
        for r in &reports {
            decisions.push(r.check);
            let why = if r.check_notes.is_empty() {
                String::new()
            } else {
                let notes: Vec<String> = r.check_notes.iter().map(|n| n.plain()).collect();
                format!(": {}", notes.join("; "))
            };
            let what = if r.gate.is_none() && r.guards.is_empty() {
                " (no [gate] or [[guard]]: every cell must complete)"
            } else {
                ""
            };
            eprintln!(
                "check: {} for experiment #{} ({}){what}{}",
                r.check.word(),
                r.experiment.id,
                escape::terminal_line(&r.experiment.name),
                escape::terminal_line(&why)
            );
        }
        return Ok(report::stats::Decision::combine(decisions).exit_code());
    }
    Ok(0)
}
