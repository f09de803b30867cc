//! `lcx history NAME [--arm A] [--metric M]`: one arm's warm-up-excluded
//! mean across every past experiment of that name, with changes marked.
//! Which experiments and which metric are lcx-core's `report::history`;
//! this file asks the database and prints.

use lcx_core::report::builder;
use lcx_core::report::history::{self, MetricError};
use lcx_core::report::stats::VerdictRule;

use crate::args::DbArgs;
use crate::db::{open_db, user_or_not};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx history option-b --arm interleaved-workers\n  lcx history latest\n  lcx history option-b --per-host --db history.db\n\nSteps are found within one host fingerprint only: a change of machine is no change of code."
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
    /// Only experiments that ran on this host (its name as `hostname`
    /// prints it, or as `LCX_HOSTNAME` named it).
    #[arg(long, value_name = "HOST", conflicts_with = "per_host")]
    host: Option<String>,
    /// One history per host, each compared within itself (the default
    /// shows every host in one table, with a Host column and a series
    /// break where the host changes).
    #[arg(long)]
    per_host: bool,
    #[command(flatten)]
    output: crate::args::TableOrJson,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let store = open_db(&args.db)?;
    let (name, mut experiments) =
        history::named_experiments(&store, &args.name).map_err(user_or_not)?;
    if let Some(host) = &args.host {
        let hosts = history::hosts_of(&experiments);
        // A name as `LCX_HOSTNAME` gives it: the space around it is no part.
        experiments.retain(|e| history::host_name(e).trim() == host.trim());
        if experiments.is_empty() && !hosts.is_empty() {
            return Err(crate::bad_input(anyhow::anyhow!(
                "--host {host}: no experiment named `{name}` ran there; it ran on {}",
                hosts
                    .iter()
                    .map(|h| format!("`{h}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let Some(latest) = experiments.first() else {
        return Err(crate::bad_input(anyhow::anyhow!(
            "no experiment named `{name}` in {} (see `lcx list`)",
            args.db.display()
        )));
    };
    let metric = history::history_metric(&store, &name, &experiments, args.metric.as_deref())
        .map_err(|e| match e {
            MetricError::Store(e) => user_or_not(e),
            e => crate::bad_input(e),
        })?;
    let mut runs = store
        .history_runs(&name, args.arm.as_deref(), args.revision.as_deref())
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
                "experiment `{name}` has no arm named `{arm}`"
            )));
        }
    }
    let rule = VerdictRule {
        alpha: 0.05,
        min_effect: args.min_effect,
    };
    let plan = builder::stored_plan(latest).ok();
    let judged = history::judged_direction(plan.as_ref(), &metric);
    runs.retain(|r| experiments.iter().any(|e| e.id == r.experiment_id));
    // One history for all, or one per host, each on its own experiments.
    let groups: Vec<(String, Vec<history::HistoryRow>)> = if args.per_host {
        history::hosts_of(&experiments)
            .into_iter()
            .map(|host| {
                let here: Vec<_> = experiments
                    .iter()
                    .filter(|e| history::host_name(e) == host)
                    .cloned()
                    .collect();
                let rows = history::history_rows(&here, &runs, judged, rule);
                (host, rows)
            })
            .collect()
    } else {
        let rows = history::history_rows(&experiments, &runs, judged, rule);
        vec![(String::new(), rows)]
    };
    if groups
        .iter()
        .all(|(_, rows)| rows.iter().all(|r| r.summary.is_none()))
    {
        errln!("note: no post-warm-up values of `{metric}` were recorded for these runs");
    }
    if args.output.json() {
        let json = if args.per_host {
            let hosts: Vec<_> = groups
                .iter()
                .map(|(host, rows)| serde_json::json!({"host": host, "rows": rows}))
                .collect();
            serde_json::to_string_pretty(&hosts)
        } else {
            serde_json::to_string_pretty(&groups[0].1)
        };
        jsonln!("{}", json.unwrap_or_default());
    } else {
        let label = if args.of_peak {
            format!("{metric} / peak")
        } else {
            metric.clone()
        };
        for (host, rows) in &groups {
            if args.per_host {
                out!("Host {}:\n\n", lcx_core::escape::md_code(host));
            }
            out!("{}", history::render_history(&label, rows));
            if args.per_host {
                out!("\n");
            }
        }
        // A sweep's answer over time: did a change move where an arm pays?
        let crossovers = history::crossover_rows(&store, &experiments).map_err(user_or_not)?;
        if let Some(first) = crossovers.iter().find(|r| !r.crossovers.is_empty()) {
            out!(
                "\nCrossover per experiment (where each arm starts to pay on {}, as its report \
                 judges it; newest first):\n\n{}\n",
                first.metric,
                history::render_crossovers(&crossovers)
            );
        }
    }
    Ok(0)
}
