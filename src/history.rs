//! `lcx history NAME [--arm A] [--metric M]`: one arm's warm-up-excluded
//! mean across every past experiment of that name, with changes marked.

use lcx_core::report::stats::VerdictRule;
use lcx_core::report::{build, history};

use crate::args::DbArgs;
use crate::db::{open_db, user_or_not};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx history option-b --arm interleaved-workers\n  lcx history latest"
)]
pub struct Args {
    /// The experiment name (as in the file's `name`), or an experiment's
    /// id or `latest` for the history of its name.
    #[arg(value_name = "NAME|ID|latest")]
    name: String,
    /// Only this arm (default: every arm).
    #[arg(long)]
    arm: Option<String>,
    /// Only cells at this code revision (as the file asked for it, e.g.
    /// `main`, or a prefix of its commit sha).
    #[arg(long, value_name = "REV")]
    revision: Option<String>,
    /// The metric (default: the one `lcx report` leads with: the gate's,
    /// else the first judged column's).
    #[arg(long)]
    metric: Option<String>,
    /// Minimum relative effect for a change marker.
    #[arg(long, default_value_t = 0.05, value_name = "FRACTION", value_parser = crate::args::min_effect)]
    min_effect: f64,
    /// Show the metric as a fraction of each experiment's measured FP32
    /// peak (for GFLOP/s rates such as perf/traversal_gflops): a change of
    /// host then reads as such, not as a change of code.
    #[arg(long)]
    of_peak: bool,
    /// `table` (markdown) or `json`, as for `lcx query`.
    #[arg(long, value_parser = crate::args::formats(&[(crate::args::Format::Table, None), (crate::args::Format::Json, None)]), default_value = "table")]
    format: crate::args::Format,
    /// Same as `--format json` (kept for scripts written before `--format`).
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(mut args: Args) -> anyhow::Result<u8> {
    let store = open_db(&args.db)?;
    let mut experiments = store.experiments(Some(&args.name)).map_err(user_or_not)?;
    // A name wins over an id or `latest` that spells it: an experiment
    // may be named `3`.
    if experiments.is_empty() && (args.name == "latest" || args.name.parse::<i64>().is_ok()) {
        if let Ok(e) = store.find_experiment(&args.name) {
            args.name = e.name;
            experiments = store.experiments(Some(&args.name)).map_err(user_or_not)?;
        }
    }
    let Some(latest) = experiments.first() else {
        return Err(crate::bad_input(anyhow::anyhow!(
            "no experiment named `{}` in {} (see `lcx list`)",
            args.name,
            args.db.display()
        )));
    };
    let plan = build::stored_plan(latest).ok();
    let metric = match &args.metric {
        Some(m) => m.clone(),
        // The report's own choice: for a command experiment without a gate
        // or columns that is a metric its command printed, not the trainer's.
        None => build::report_metric(&store, latest)
            .map_err(user_or_not)?
            .unwrap_or_else(|| "time/iteration_seconds".into()),
    };
    if let Some(asked) = &args.metric {
        let mut known: Vec<String> = Vec::new();
        for e in &experiments {
            for name in store.metric_names_fast(e.id).map_err(user_or_not)? {
                if !known.contains(&name) {
                    known.push(name);
                }
            }
        }
        if !known.contains(asked) {
            let near = lcx_core::config::nearest(asked, &known, 3);
            let hint = if near.is_empty() {
                "they recorded no metrics".to_string()
            } else {
                format!("closest recorded: {}", near.join(", "))
            };
            return Err(crate::bad_input(anyhow::anyhow!(
                "--metric {asked}: no experiment named `{}` recorded it ({hint})",
                args.name
            )));
        }
    }
    let mut runs = store
        .history_runs(&args.name, args.arm.as_deref(), args.revision.as_deref())
        .map_err(user_or_not)?;
    lcx_core::report::moments::history_moments(&store, &mut runs, &metric).map_err(user_or_not)?;
    if args.of_peak {
        let dropped = history::scale_to_peak(&experiments, &mut runs);
        if dropped > 0 {
            errln!(
                "note: {dropped} experiment(s) recorded no peak (run before lcx measured it) \
                 and are left out of --of-peak"
            );
        }
    }
    if runs.is_empty() {
        if let Some(arm) = &args.arm {
            return Err(crate::bad_input(anyhow::anyhow!(
                "experiment `{}` has no arm named `{arm}`",
                args.name
            )));
        }
    }
    let (direction, _) = build::metric_direction(plan.as_ref(), &metric);
    let rule = VerdictRule {
        alpha: 0.05,
        min_effect: args.min_effect,
    };
    let judged = (!build::is_descriptive(plan.as_ref(), &metric)).then_some(direction);
    let rows = history::history_rows(&experiments, &runs, judged, rule);
    if rows.iter().all(|r| r.summary.is_none()) {
        errln!("note: no post-warm-up values of `{metric}` were recorded for these runs");
    }
    if args.json || args.format == crate::args::Format::Json {
        jsonln!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
    } else {
        let label = if args.of_peak {
            format!("{metric} / peak")
        } else {
            metric.clone()
        };
        out!("{}", history::render_history(&label, &rows));
    }
    Ok(0)
}
