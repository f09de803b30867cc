//! `lcx compare A B`: two experiments (ids, names, `latest`) or two runs
//! (`run:ID`) side by side on their shared arms, with ratio and verdict;
//! mismatched fingerprints, warm-ups and configs are flagged.

use lcx_core::report::history::{self, fingerprint_key, CompareRow};
use lcx_core::report::prose::Prose;
use lcx_core::report::stats::{compare, Summary, VerdictRule};
use lcx_core::report::{build, Options};
use lcx_core::store::{RunStatus, Store};

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
    let options = Options {
        min_effect: Some(rule.min_effect),
        alpha: Some(rule.alpha),
        allow_contended: false,
    };
    let ra = build::load(store, ea.id, options).map_err(user_or_not)?;
    let rb = build::load(store, eb.id, options).map_err(user_or_not)?;
    let rows = history::compare_reports(&ra, &rb, rule);
    let mut warnings = Vec::new();
    if fingerprint_key(&ea.fingerprint) != fingerprint_key(&eb.fingerprint) {
        warnings.push(format!(
            "fingerprints differ: A ran on {}, B on {}; timings may not be comparable",
            history::fingerprint_summary(&ea.fingerprint),
            history::fingerprint_summary(&eb.fingerprint)
        ));
    }
    if (ea.warmup, ea.iterations) != (eb.warmup, eb.iterations) {
        warnings.push(format!(
            "warm-up/iterations differ: A {}/{}, B {}/{}",
            ea.warmup, ea.iterations, eb.warmup, eb.iterations
        ));
    }
    let runs_a = store.runs(ea.id).map_err(user_or_not)?;
    let runs_b = store.runs(eb.id).map_err(user_or_not)?;
    let mut arms: Vec<&str> = rows.iter().map(|r| r.arm.as_str()).collect();
    arms.dedup();
    for arm in arms {
        let hash = |runs: &[lcx_core::store::Run]| {
            runs.iter()
                .find(|r| r.arm == arm)
                .and_then(|r| r.config_sha256.clone())
        };
        let (ha, hb) = (hash(&runs_a), hash(&runs_b));
        if ha != hb {
            warnings.push(format!(
                "arm `{arm}`: the resolved configs differ (config sha256)"
            ));
        }
    }
    if ea.file_sha256 != eb.file_sha256 {
        warnings.push("the experiment files differ (file sha256)".into());
    }
    out!(
        "{}",
        history::render_compare(
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
    let get = |id: i64| -> anyhow::Result<lcx_core::store::Run> {
        store
            .run(id)
            .map_err(user_or_not)?
            .ok_or_else(|| crate::bad_input(anyhow::anyhow!("no run with id {id}")))
    };
    let (run_a, run_b) = (get(ida)?, get(idb)?);
    let exp = |id: i64| -> anyhow::Result<lcx_core::store::Experiment> {
        store
            .experiment(id)
            .map_err(user_or_not)?
            .ok_or_else(|| crate::bad_input(anyhow::anyhow!("no experiment {id}")))
    };
    let (ea, eb) = (exp(run_a.experiment_id)?, exp(run_b.experiment_id)?);
    let plan_a = build::stored_plan(&ea).ok();
    let names_a = store.metric_names_fast(ea.id).map_err(user_or_not)?;
    let columns = build::resolve_columns(&ea, plan_a.as_ref(), &names_a);
    let metrics = build::needed_metrics(&columns, plan_a.as_ref());
    let ma = lcx_core::report::moments::run_moments(store, ea.id, &metrics, &[ida])
        .map_err(user_or_not)?;
    let mb = lcx_core::report::moments::run_moments(store, eb.id, &metrics, &[idb])
        .map_err(user_or_not)?;
    let summary = |ms: &[lcx_core::store::report_read::RunMoments], m: &str| -> Option<Summary> {
        let x = ms.iter().find(|x| x.name == m && x.n > 0)?;
        Summary::from_moments(x.n as usize, x.sum, x.sum_sq, x.min, x.max)
    };
    let mut rows = Vec::new();
    for metric in &metrics {
        let (sa, sb) = (summary(&ma, metric), summary(&mb, metric));
        if sa.is_none() && sb.is_none() {
            continue;
        }
        let direction = build::metric_direction(plan_a.as_ref(), metric).0;
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
                _ if build::is_descriptive(plan_a.as_ref(), metric) => None,
                // A cell that did not complete is shown, never judged.
                _ if run_a.status != RunStatus::Completed
                    || run_b.status != RunStatus::Completed =>
                {
                    None
                }
                (Some(x), Some(y)) => Some(compare(x, y, direction, rule)),
                _ => None,
            },
        });
    }
    let mut warnings = Vec::new();
    if fingerprint_key(&ea.fingerprint) != fingerprint_key(&eb.fingerprint) {
        warnings.push("the runs' fingerprints differ; timings may not be comparable".into());
    }
    if run_a.config_sha256 != run_b.config_sha256 {
        warnings.push("the runs' resolved configs differ (config sha256)".into());
    }
    if ea.warmup != eb.warmup {
        warnings.push(format!("warm-up differs: A {}, B {}", ea.warmup, eb.warmup));
    }
    out!(
        "{}",
        history::render_compare(
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
