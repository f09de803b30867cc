//! `lcx run FILE` / `lcx run --resume ID`: validate an experiment, record
//! it, run its cells and keep every line in the store.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Context;

use lcx_core::experiment::reporter::{PlainReporter, ProgressReporter};
use lcx_core::experiment::revision;
use lcx_core::experiment::runner::{self, Reporter, RunnerError, RunnerOptions, StopSignal};
use lcx_core::experiment::{plan, Plan};
use lcx_core::store::{ExperimentStatus, Store};

use crate::args::DbArgs;

/// Exit code after Ctrl-C / SIGTERM (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment file (TOML).
    #[arg(
        required_unless_present_any = ["resume", "attach"],
        conflicts_with_all = ["resume", "attach"]
    )]
    file: Option<PathBuf>,
    /// Run the missing, failed and interrupted cells of an earlier
    /// experiment: an id, `latest`, or an experiment name.
    #[arg(long, value_name = "ID|latest|NAME", conflicts_with = "attach")]
    resume: Option<String>,
    /// Slurm: submit every cell as a job (chained, so they run one at a
    /// time in plan order) and exit; the jobs outlive this process.
    #[arg(long, conflicts_with_all = ["attach", "fail_fast", "dry_run"])]
    detach: bool,
    /// Follow the jobs of a detached experiment (or of one whose
    /// coordinator died): ingest what they wrote, follow the rest, and run
    /// its cells that have no job, as --resume does.
    #[arg(long, value_name = "ID|latest|NAME")]
    attach: Option<String>,
    /// Override a trainer config key for every arm (after the file's `set`,
    /// before each arm's own); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Replace the file's `iterations`.
    #[arg(long, value_name = "N")]
    iterations: Option<u32>,
    /// Replace the file's `warmup` (a count or `auto`).
    #[arg(long, value_name = "N|auto")]
    warmup: Option<String>,
    /// Replace the file's `repeats` with a fixed count (adaptive repeats off).
    #[arg(long, value_name = "N")]
    repeats: Option<u32>,
    /// Run only these arms (comma-separated names, as `--dry-run` lists them).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    arms: Vec<String>,
    /// Run arm ARM at a code revision (a branch, tag, sha, `HEAD~1`, or
    /// `worktree` for the working tree with its uncommitted changes),
    /// replacing the file's `revision` for it; repeatable.
    #[arg(long = "revision", value_name = "ARM=REV", value_parser = parse_revision)]
    revisions: Vec<(String, String)>,
    /// Where the cells run: `local` (child processes, the default) or
    /// `slurm` (one job per cell), replacing the file's `[executor] kind`.
    #[arg(long, value_name = "local|slurm")]
    executor: Option<String>,
    /// Print the cells and their resolved configs; run and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Stop at the first failed cell (default: record it and go on).
    #[arg(long)]
    fail_fast: bool,
    #[command(flatten)]
    db: DbArgs,
    /// Plain log lines even on a terminal (default: progress bars on a terminal).
    #[arg(long)]
    plain: bool,
    /// With --resume or --attach: take over an experiment whose last
    /// runner was on another host and may still be running there (it
    /// cannot be checked).
    #[arg(long)]
    takeover: bool,
    /// Keep each completed training cell's run directory under
    /// runs/tmp/lcx-cell-PID-RUN/ (config, train.log, checkpoints); by
    /// default only cells that did not complete keep theirs.
    #[arg(long)]
    keep_runs: bool,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let overrides = plan::Overrides {
        sets: args.sets.clone(),
        iterations: args.iterations,
        warmup: args.warmup.clone(),
        repeats: args.repeats,
        arms: args.arms.clone(),
        revisions: args.revisions.clone(),
        executor: args.executor.clone(),
    };
    let earlier = args.resume.as_deref().or(args.attach.as_deref());
    if args.takeover && earlier.is_none() {
        return Err(crate::bad_input(anyhow::anyhow!(
            "--takeover takes over an earlier experiment: give --resume ID or --attach ID"
        )));
    }
    if earlier.is_some() && overrides != plan::Overrides::default() {
        let flag = if args.attach.is_some() {
            "--attach"
        } else {
            "--resume"
        };
        return Err(crate::bad_input(anyhow::anyhow!(
            "--set, --iterations, --warmup, --repeats, --arms, --revision and --executor \
             cannot be combined with {flag}: a resumed experiment keeps what was recorded"
        )));
    }
    // Validation comes first and completely: a bad file writes nothing, not
    // even an empty database.
    let (plan, text) = match &args.file {
        Some(file) => {
            let loaded = plan::load(file, &overrides).map_err(crate::bad_input)?;
            (Some(loaded.0), Some(loaded.1))
        }
        None => (None, None),
    };
    let cache = crate::run::revision_cache(&args.db);
    if args.dry_run {
        let plan = match plan {
            Some(plan) => plan,
            None => {
                let store = Store::open_read_only(&args.db).map_err(user_or_work)?;
                let selector = earlier.unwrap_or("latest");
                let experiment = store.find_experiment(selector).map_err(crate::bad_input)?;
                runner::stored_plan(&store, experiment.id)?
            }
        };
        let builds = revision::survey(&plan, &cache).map_err(revision_error)?;
        print_dry_run(&plan, &builds);
        return Ok(0);
    }
    if let (true, Some(plan)) = (args.detach, &plan) {
        detachable(plan).map_err(crate::bad_input)?;
    }
    // Every revision is built (or found in the cache) before anything is
    // recorded: a broken revision fails the experiment before it starts.
    let plan = match plan {
        Some(mut plan) => {
            revision::prepare(&mut plan, &cache, &mut progress_line).map_err(revision_error)?;
            Some(plan)
        }
        None => None,
    };

    // A resume needs the database it resumes: a mistyped --db must not
    // leave a new, empty one behind.
    let opened = if args.file.is_some() {
        Store::open(&args.db)
    } else {
        Store::open_existing(&args.db)
    };
    let mut store = opened.map_err(user_or_work)?;
    let (plan, experiment_id) = match (plan, text) {
        (Some(plan), Some(text)) => {
            let id = record(&mut store, &plan, &text, &args.db)?;
            (plan, id)
        }
        _ => {
            let selector = earlier.unwrap_or("latest");
            let experiment = store.find_experiment(selector).map_err(crate::bad_input)?;
            let id = experiment.id;
            let db = args.db.display();
            match (experiment.status, args.attach.is_some()) {
                (ExperimentStatus::Detached, false) => {
                    return Err(crate::bad_input(anyhow::anyhow!(
                        "experiment {id} is detached: its cells are Slurm jobs that may still \
                         run; follow them with `lcx run --attach {id} --db {db}`"
                    )))
                }
                (ExperimentStatus::Completed, true) => {
                    return Err(crate::bad_input(anyhow::anyhow!(
                        "experiment {id} is completed: it has no jobs left to follow"
                    )))
                }
                (ExperimentStatus::Failed | ExperimentStatus::Interrupted, true)
                    if !has_jobs_to_follow(&store, id)? =>
                {
                    return Err(crate::bad_input(anyhow::anyhow!(
                        "experiment {id} is {}: no coordinator left jobs to follow; \
                         `lcx run --resume {id} --db {db}` runs its unfinished cells",
                        experiment.status
                    )))
                }
                _ => {}
            }
            if experiment.status == ExperimentStatus::Completed {
                let err = RunnerError::NothingToResume {
                    id: experiment.id,
                    status: experiment.status.to_string(),
                };
                eprintln!("lcx: {err}");
                return Ok(0);
            }
            let mut plan = runner::stored_plan(&store, experiment.id)?;
            if args.detach {
                detachable(&plan).map_err(crate::bad_input)?;
            }
            // The recorded shas; only what the cache lost is built again.
            revision::prepare(&mut plan, &cache, &mut progress_line).map_err(revision_error)?;
            (plan, experiment.id)
        }
    };

    let stop = StopSignal::new();
    install_signal_handler(&stop)?;
    let options = RunnerOptions {
        fail_fast: args.fail_fast,
        takeover: args.takeover,
        keep_runs: args.keep_runs,
        detach: args.detach,
        attach: args.attach.is_some(),
        ..options(&stop)?
    };
    let summary = execute(
        &mut store,
        &plan,
        experiment_id,
        &options,
        args.plain,
        &args.db,
    )?;

    let db = args.db.display();
    match summary.status {
        ExperimentStatus::Interrupted => {
            eprintln!(
                "lcx: experiment {experiment_id} interrupted; finished iterations are kept.\n\
                 lcx: resume with: lcx run --resume {experiment_id} --db {db}"
            );
            if has_jobs_to_follow(&store, experiment_id)? {
                eprintln!(
                    "lcx: some of its Slurm jobs had already ended and are not ingested yet: \
                     lcx run --attach {experiment_id} --db {db} reads them first"
                );
            }
            Ok(EXIT_INTERRUPTED)
        }
        ExperimentStatus::Completed => {
            println!(
                "experiment {experiment_id} completed; see `lcx report {experiment_id} --db {db}`"
            );
            Ok(0)
        }
        ExperimentStatus::Detached => {
            println!(
                "experiment {experiment_id} detached: {} submitted as Slurm jobs{}; \
                 follow them with `lcx run --attach {experiment_id} --db {db}`",
                lcx_core::report::render::counted(summary.pending as u64, "cell"),
                match summary.failed {
                    0 => String::new(),
                    n => format!(" ({n} could not be submitted)"),
                }
            );
            Ok(if summary.failed > 0 { 1 } else { 0 })
        }
        _ => {
            println!(
                "experiment {experiment_id} finished with failed or unfinished cells; \
                 rerun them with `lcx run --resume {experiment_id} --db {db}`\n\
                 no verdict rests on them: `lcx report {experiment_id} --check --db {db}` \
                 says what is left undecided (it never exits 0 while a cell did not complete)"
            );
            Ok(1)
        }
    }
}

/// Records a new experiment with the state of the repository holding its
/// file (the commit its recorded, repository-relative path is read
/// against) and this machine's fingerprint.
pub(super) fn record(
    store: &mut Store,
    plan: &Plan,
    text: &str,
    db: &std::path::Path,
) -> anyhow::Result<i64> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let dir = plan.file.parent().filter(|d| d.is_dir()).unwrap_or(&cwd);
    let git = lcx_core::experiment::fingerprint::git_state(dir);
    // Only lcx-torch loads libtorch; an experiment of command arms never does.
    let torch = if plan.needs_torch() {
        std::env::current_exe()
            .ok()
            .and_then(|exe| lcx_core::experiment::fingerprint::torch_facts(&exe))
    } else {
        None
    };
    let fingerprint = lcx_core::experiment::fingerprint::probe(torch.as_ref());
    let argv: Vec<String> = std::env::args().collect();
    runner::create_experiment(store, plan, text, argv, git, fingerprint)
        .with_context(|| format!("recording the experiment into database {}", db.display()))
}

/// The build cache of `db`, whose builds of lcx revisions link the
/// libtorch this lcx was built against (found by build.rs).
pub(super) fn revision_cache(db: &std::path::Path) -> revision::Cache {
    revision::Cache::for_db(db)
        .with_libtorch(option_env!("LCX_LIBTORCH_LIB").map(std::path::Path::new))
}

/// The runner's settings for this process: its own binary for lcx cells,
/// adaptive repeats judged by the report's statistics.
pub(super) fn options(stop: &Arc<StopSignal>) -> anyhow::Result<RunnerOptions> {
    Ok(RunnerOptions {
        fail_fast: false,
        lcx_exe: std::env::current_exe().context("locating the lcx binary")?,
        stop: Arc::clone(stop),
        cuda_available: None,
        takeover: false,
        keep_runs: false,
        detach: false,
        attach: false,
        precise_enough: Some(runner::PrecisionCheck(Arc::new(|store, id, precision| {
            let report = lcx_core::report::build::load(store, id, Default::default())?;
            Ok(lcx_core::report::build::precision_reached(
                &report, precision,
            ))
        }))),
    })
}

/// Whether cells of the experiment are `running` with a Slurm job and its
/// folder recorded: jobs `--attach` can follow (or ingest, once ended).
fn has_jobs_to_follow(store: &Store, id: i64) -> anyhow::Result<bool> {
    Ok(store.runs(id)?.iter().any(|r| {
        matches!(
            r.status,
            lcx_core::store::RunStatus::Running | lcx_core::store::RunStatus::Abandoned
        ) && r.slurm_job.is_some()
            && r.slurm_dir.is_some()
    }))
}

/// Why a plan cannot be detached: only Slurm cells outlive `lcx run`, and
/// what needs the coordinator between cells (a node per round, adaptive
/// repeats) cannot happen without one.
fn detachable(plan: &Plan) -> anyhow::Result<()> {
    let file = plan.file.display();
    match &plan.executor {
        plan::Executor::Local => anyhow::bail!(
            "--detach: experiment {file} runs its cells locally; detaching needs \
             `[executor] kind = \"slurm\"` (or --executor slurm)"
        ),
        plan::Executor::Slurm(o) if o.placement == plan::Placement::Spread => anyhow::bail!(
            "--detach: {file}: `executor.placement = \"spread\"` pins each round to the node \
             its first cell lands on, which needs a coordinator; use same-node or any"
        ),
        plan::Executor::Slurm(_) => {}
    }
    if plan.adaptive.is_some() {
        anyhow::bail!(
            "--detach: {file}: adaptive repeats decide after each round whether to go on, \
             which needs a coordinator; give `repeats` a number (or --repeats N)"
        );
    }
    Ok(())
}

/// Runs a recorded experiment's cells with progress bars on a terminal
/// (plain lines otherwise, or with `plain`).
pub(super) fn execute(
    store: &mut Store,
    plan: &Plan,
    experiment_id: i64,
    options: &RunnerOptions,
    plain: bool,
    db: &std::path::Path,
) -> anyhow::Result<runner::Summary> {
    let mut reporter: Box<dyn Reporter> = if !plain && std::io::stderr().is_terminal() {
        Box::new(ProgressReporter::new())
    } else {
        Box::new(PlainReporter::new(std::io::stderr()))
    };
    let summary = runner::run(store, plan, experiment_id, options, reporter.as_mut());
    drop(reporter);
    match summary {
        Ok(summary) => Ok(summary),
        Err(RunnerError::Store(
            e @ (lcx_core::store::StoreError::Taken { .. }
            | lcx_core::store::StoreError::TakenElsewhere { .. }),
        )) => Err(e.into()),
        Err(e @ RunnerError::Executor(_)) => Err(e.into()),
        // A store that fails mid-run (a full disk) names no file by
        // itself; the experiment stays `running` and reads `abandoned`
        // once this process is gone.
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "recording experiment {experiment_id} into database {}",
            db.display()
        ))),
    }
}

/// Prints each preparation line (builds, cache hits) on stderr.
pub(super) fn progress_line(line: &str) {
    eprintln!("lcx: {line}");
}

/// A revision git cannot find, or a config the revision refuses, is the
/// file's fault (exit 2); a failed build is work that failed (exit 1).
pub(super) fn revision_error(err: revision::RevisionError) -> anyhow::Error {
    if err.is_user_input() {
        crate::bad_input(err)
    } else {
        anyhow::Error::new(err).context("preparing the experiment's revisions")
    }
}

/// Store errors about the file the user named (missing, foreign, newer)
/// exit 2; the rest exit 1. Both name the database.
pub(super) fn user_or_work(err: lcx_core::store::StoreError) -> anyhow::Error {
    if err.is_user_input() {
        crate::bad_input(err)
    } else {
        anyhow::Error::new(err).context("opening the database")
    }
}

/// Ctrl-C / SIGTERM / SIGHUP: the first stops the running child (SIGTERM to
/// its group, SIGKILL after a grace period) and lets the runner record the
/// cell as interrupted; a second kills the child at once.
pub(super) fn install_signal_handler(stop: &Arc<StopSignal>) -> anyhow::Result<()> {
    let stop = Arc::clone(stop);
    let count = AtomicUsize::new(0);
    ctrlc::set_handler(move || {
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("\nlcx: stopping (press Ctrl-C again to kill the running cell at once)");
            stop.stop();
        } else {
            stop.force();
        }
    })
    .context("installing the Ctrl-C handler")
}

fn print_dry_run(plan: &Plan, builds: &[revision::Planned]) {
    use lcx_core::report::render::counted;
    println!(
        "experiment `{}` ({}): {} × {}, {} ({} warm-up), {} order, baseline `{}`",
        plan.name,
        plan.workload.as_str(),
        counted(plan.arms.len() as u64, "arm"),
        counted(u64::from(plan.repeats), "repeat"),
        counted(u64::from(plan.iterations), "iteration"),
        plan.warmup,
        match plan.order {
            lcx_core::experiment::Order::Interleaved => "interleaved",
            lcx_core::experiment::Order::Sequential => "sequential",
        },
        plan.baseline
    );
    for (i, cell) in plan.cells().into_iter().enumerate() {
        let arm = &plan.arms[cell.arm];
        let requires = match arm.requires {
            Some(lcx_core::experiment::Requirement::Cuda) => " (requires cuda)".to_string(),
            None => String::new(),
        };
        println!(
            "cell {}: {} #{} — {}{requires}",
            i + 1,
            arm.name,
            cell.repeat,
            shell_words(&arm.command_line())
        );
        for (k, v) in &arm.env {
            println!("    env {k}={v}");
        }
        if let Some(b) = builds.iter().find(|b| b.arm == arm.name) {
            println!("    at revision {}", b.revision.describe());
        }
        if let (Some(_), Some(sha)) = (arm.stdin_config(), &arm.config_sha256) {
            let short: String = sha.chars().take(12).collect();
            println!(
                "    stdin: the resolved config of arm `{}` (sha256 {short}…)",
                arm.name
            );
        }
    }
    if let plan::Executor::Slurm(slurm) = &plan.executor {
        println!(
            "\nexecutor: slurm, placement {}",
            match slurm.placement {
                plan::Placement::SameNode => "same-node",
                plan::Placement::Spread => "spread",
                plan::Placement::Any => "any",
            }
        );
        for arm in &plan.arms {
            let mut flags = slurm.for_arm(&arm.slurm).flags();
            if arm.requires == Some(lcx_core::experiment::Requirement::Cuda)
                && slurm.for_arm(&arm.slurm).gres.is_none()
            {
                flags.push("--gres=gpu:1".into());
            }
            println!("  arm `{}`: sbatch {}", arm.name, shell_words(&flags));
        }
    }
    if !builds.is_empty() {
        println!(
            "\nrevisions (build cache {}):",
            builds[0]
                .entry
                .parent()
                .map_or_else(String::new, |p| p.display().to_string())
        );
        for b in builds {
            let what = if b.cached {
                "cached".to_string()
            } else if b.command.is_empty() {
                "would check out (nothing to build)".to_string()
            } else {
                format!("would build with `{}`", b.command)
            };
            println!("  {} (arm `{}`): {what}", b.revision.describe(), b.arm);
        }
    }
    for arm in &plan.arms {
        if arm.revision.is_some() && arm.config_toml.is_none() {
            println!(
                "\n# arm `{}`: its config is resolved by its revision's own lcx once built (set: {})",
                arm.name,
                arm.revision.as_ref().map_or_else(String::new, |r| r.config_sets.join(" "))
            );
        }
        if let Some(config) = &arm.config_toml {
            println!("\n# resolved config of arm `{}`", arm.name);
            println!("{config}");
        }
    }
}

fn parse_revision(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((arm, rev)) if !arm.is_empty() && !rev.is_empty() => {
            Ok((arm.to_string(), rev.to_string()))
        }
        _ => Err(format!(
            "expected ARM=REV (e.g. candidate=HEAD~1), found `{text}`"
        )),
    }
}

/// Quotes argv for display so it can be pasted into a shell.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
