//! `lcx compare A B`: two experiments (ids, names, `latest`) or two runs
//! (`run:ID`) side by side on their shared arms, with ratio and verdict;
//! mismatched fingerprints, warm-ups and configs are flagged. The judging
//! and the warnings are lcx-core's `report::compare`; this file finds the
//! two sides in the database and prints.

use lcx_core::report::compare::{self, render_compare, Compared};
use lcx_core::report::prose::Prose;
use lcx_core::report::stats::VerdictRule;
use lcx_core::store::{Experiment, Run, Store};

use crate::args::DbArgs;
use crate::db::{open_db, user_or_not};

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx compare 3 7")]
pub struct Args {
    /// The reference: an experiment id, name or `latest`, or `run:ID`.
    a: String,
    /// The candidate, same forms as A.
    b: String,
    /// Minimum relative effect for a verdict.
    #[arg(long, default_value_t = 0.05, value_name = "FRACTION", value_parser = crate::args::min_effect)]
    min_effect: f64,
    #[command(flatten)]
    db: DbArgs,
}

fn run_id(selector: &str) -> Option<&str> {
    selector
        .strip_prefix("run:")
        .or_else(|| selector.strip_prefix("r"))
        .filter(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()))
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let store = open_db(&args.db)?;
    let rule = VerdictRule {
        alpha: 0.05,
        min_effect: args.min_effect,
    };
    match (run_id(&args.a), run_id(&args.b)) {
        (Some(a), Some(b)) => compare_runs(&store, a, b, rule),
        (None, None) => compare_experiments(&store, &args.a, &args.b, rule),
        _ => Err(crate::bad_input(anyhow::anyhow!(
            "compare two experiments or two runs (`run:ID`), not one of each"
        ))),
    }
}

fn compare_experiments(store: &Store, a: &str, b: &str, rule: VerdictRule) -> anyhow::Result<u8> {
    let ea = store.find_experiment(a).map_err(user_or_not)?;
    let eb = store.find_experiment(b).map_err(user_or_not)?;
    if ea.id == eb.id {
        return Err(crate::bad_input(anyhow::anyhow!(
            "`{a}` and `{b}` are both experiment #{} ({}): nothing to compare; name two \
             experiments (`lcx list` shows them, `lcx history {}` a name's)",
            ea.id,
            ea.name,
            ea.id
        )));
    }
    let Compared { rows, warnings } =
        compare::experiments(store, &ea, &eb, rule).map_err(user_or_not)?;
    out!(
        "{}",
        render_compare(
            &Prose::ours(format!("#{} ", ea.id)).text(&ea.name),
            &Prose::ours(format!("#{} ", eb.id)).text(&eb.name),
            &rows,
            &warnings
        )
    );
    Ok(0)
}

fn compare_runs(store: &Store, a: &str, b: &str, rule: VerdictRule) -> anyhow::Result<u8> {
    let parse = |s: &str| {
        s.parse::<i64>()
            .map_err(|e| crate::bad_input(anyhow::anyhow!("run id `{s}`: {e}")))
    };
    let (ida, idb) = (parse(a)?, parse(b)?);
    let get = |id: i64| -> anyhow::Result<Run> {
        store
            .run(id)
            .map_err(user_or_not)?
            .ok_or_else(|| crate::bad_input(anyhow::anyhow!("no run with id {id}")))
    };
    let (run_a, run_b) = (get(ida)?, get(idb)?);
    let exp = |id: i64| -> anyhow::Result<Experiment> {
        store
            .experiment(id)
            .map_err(user_or_not)?
            .ok_or_else(|| crate::bad_input(anyhow::anyhow!("no experiment {id}")))
    };
    let (ea, eb) = (exp(run_a.experiment_id)?, exp(run_b.experiment_id)?);
    let Compared { rows, warnings } =
        compare::runs(store, (&ea, &run_a), (&eb, &run_b), rule).map_err(user_or_not)?;
    out!(
        "{}",
        render_compare(
            &Prose::ours(format!("run {ida} ("))
                .text(&run_a.arm)
                .and(")"),
            &Prose::ours(format!("run {idb} ("))
                .text(&run_b.arm)
                .and(")"),
            &rows,
            &warnings
        )
    );
    Ok(0)
}
