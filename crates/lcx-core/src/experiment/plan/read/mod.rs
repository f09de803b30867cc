//! Reading an experiment file into a [`Plan`]. [`Reader::plan`] walks the
//! file in four steps, each in its own module, each refusing a problem as
//! soon as it reads it; so of two problems in one file, the one an earlier
//! step reads is the one reported, whatever their order in the file:
//!
//! 1. `shape.rs`: the top-level keys, workload, iterations, warm-up,
//!    repeats, order, config and `set`;
//! 2. `arm_list.rs`: the arms (`[[arms]]` in `arms.rs`, `[matrix]` in
//!    `matrix.rs`, `--arms`, `--revision`, a bisect probe, `[sweep]` in
//!    `sweep.rs`) and the baseline;
//! 3. `judgements.rs`: `[[columns]]`, `[gate]` and `[[guard]]`;
//! 4. `placement.rs`: `[executor]`, `[measurement]` and `host_lock`.
//!
//! It then resolves each arm (`resolve.rs`) into the plan. This module also
//! holds the keys each table takes, the raw arm the steps pass on and the
//! reader's error helpers; the typed getters the steps share are in
//! `values.rs`, the rules of names and the limits in `rules.rs`. Reading
//! runs nothing and writes nothing.

use super::*;

mod arm_list;
mod judgements;
mod placement;
mod rules;
mod shape;
mod values;

use arm_list::ArmList;
pub use rules::{
    check_env_name, check_min_effect, check_name, check_visible, MAX_ARMS, MAX_NAME, MAX_SECONDS,
};

pub(super) const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "workload",
    "config",
    "iterations",
    "warmup",
    "repeats",
    "baseline",
    "set",
    "order",
    "order_seed",
    "arms",
    "matrix",
    "sweep",
    "columns",
    "gate",
    "notes",
    "variable_iterations",
    "guard",
    "repository",
    "build",
    "executor",
    "measurement",
    "timing",
    "host_lock",
    "timeout",
    "setup",
    "prepare",
    "cleanup",
];
/// The `[executor]` keys that apply to the whole experiment (an arm may not
/// give them); the rest are `ARM_EXECUTOR_KEYS`.
pub(super) const EXPERIMENT_EXECUTOR_KEYS: &[&str] =
    &["kind", "max_parallel", "placement", "requeue"];
pub(super) const GUARD_KEYS: &[&str] = &[
    "metric",
    "margin",
    "direction",
    "arm",
    "baseline",
    "fold",
    "paired",
];
pub(super) const ARM_KEYS: &[&str] = &[
    "name",
    "label",
    "set",
    "requires",
    "command",
    "shell",
    "env",
    "args",
    "variable_iterations",
    "revision",
    "build",
    "executor",
    "timing",
    "cpus",
    "timeout",
    "setup",
    "prepare",
    "cleanup",
];
/// The `[executor]` keys an arm may give for its own cells.
pub(super) const ARM_EXECUTOR_KEYS: &[&str] = &[
    "partition",
    "account",
    "qos",
    "time",
    "cpus_per_task",
    "mem",
    "gres",
    "constraint",
    "extra",
];
pub(super) const COLUMN_KEYS: &[&str] = &["metric", "label", "show", "direction", "fold"];
pub(super) const REPEATS_KEYS: &[&str] = &["min", "max", "precision"];
pub(super) const MEASUREMENT_KEYS: &[&str] = &[
    "max_foreign_cpu",
    "rerun_contended",
    "wait_for_quiet",
    "pin",
];
pub(super) const GATE_KEYS: &[&str] = &[
    "metric",
    "min_speedup",
    "max_slowdown",
    "min_effect",
    "arm",
    "from",
    "at",
    "crossover_at_most",
];

/// A raw arm before matrix expansion and config resolution.
#[derive(Clone)]
pub(super) struct RawArm {
    pub(super) name: String,
    pub(super) label: String,
    pub(super) key: String,
    pub(super) requires: Option<Requirement>,
    pub(super) set: Vec<String>,
    pub(super) args: Vec<String>,
    pub(super) env: BTreeMap<String, String>,
    pub(super) command: Option<Vec<String>>,
    pub(super) variable_iterations: bool,
    /// Whether the arm said `variable_iterations` itself (it wins over the
    /// file's).
    pub(super) variable_set: bool,
    /// `timing`: whether lcx times or counts each run of the command
    /// (`None`: the arm did not say; the file's applies).
    pub(super) timed: Option<super::Timing>,
    /// `command` as the file gave it when it is a string (its argv is then
    /// `sh -c STRING`): a timed arm runs plain words without the shell,
    /// and has the shell's start-up taken off otherwise (`shell`).
    pub(super) command_string: Option<String>,
    /// `shell = true`: a timed string runs through `sh -c` even when it is
    /// plain words (`lcx run --command` with `-P`/`-L` says so for every
    /// arm of a command when one of them needs a shell).
    pub(super) shell: bool,
    /// `timeout` (`None`: the arm did not say; the file's applies).
    pub(super) timeout: Option<f64>,
    /// `setup`, `prepare`, `cleanup` (each `None`: the file's applies).
    pub(super) hooks: Hooks,
    /// `revision` (from the arm, the matrix or `--revision`).
    pub(super) revision: Option<String>,
    /// The arm's own `build` (else the file's).
    pub(super) build: Option<String>,
    /// `[arms.executor]`.
    pub(super) slurm: SbatchOptions,
    /// `cpus`.
    pub(super) cpus: Option<CpuSet>,
    /// In a sweep: the arm it grew from and its point.
    pub(super) sweep: Option<SweepPoint>,
}

/// One `[matrix]` key: (key, short name for arm names, values as (raw
/// text, TOML text)).
pub(super) type Axis = (String, String, Vec<(String, String)>);

pub(super) struct Reader<'a> {
    pub(super) path: &'a Path,
}

/// The shared reader's view of `table`, whose keys are written `{prefix}key`
/// (`prefix` is empty or ends in a dot).
pub(super) fn at<'t>(table: &'t toml::Table, prefix: &'t str) -> Table<'t> {
    Table::new(table, prefix.strip_suffix('.').unwrap_or(prefix))
}

impl Reader<'_> {
    pub(super) fn err(&self, key: impl Into<String>, message: impl Into<String>) -> PlanError {
        PlanError::Invalid {
            path: self.path.to_path_buf(),
            key: key.into(),
            message: message.into(),
        }
    }

    /// A shared reader's error, with this file.
    pub(super) fn key_error(&self, e: KeyError) -> PlanError {
        self.err(e.key.clone(), e.message())
    }

    /// What a getter of the shared reader returned (`at(table,
    /// prefix).string(key)` …), its error with this file.
    pub(super) fn read<T>(&self, value: toml_read::Read<T>) -> Result<T, PlanError> {
        value.map_err(|e| self.key_error(e))
    }

    pub(super) fn check_keys(
        &self,
        table: &toml::Table,
        prefix: &str,
        allowed: &[&str],
    ) -> Result<(), PlanError> {
        at(table, prefix)
            .check_keys(allowed)
            .map_err(|e| self.key_error(e))
    }

    /// The plan a file and the command line's overrides describe: the four
    /// steps in order, then every arm resolved against the plan.
    pub(super) fn plan(&self, t: &toml::Table, cli: &Overrides) -> Result<Plan, PlanError> {
        let shape = self.shape(t, cli)?;
        let arm_list = self.arm_list(t, cli, &shape)?;
        let judged = self.judgements(
            t,
            cli,
            shape.workload,
            &arm_list.unswept,
            &arm_list.baseline,
            arm_list.sweep.as_ref(),
        )?;
        let placed = self.placement(t, cli, &arm_list.arms, shape.adaptive.is_some())?;
        let (name, adaptive) = match &cli.probe {
            // A probe runs a fixed number of repeats under a name of its own.
            Some(_) => (format!("{}-bisect", shape.name), None),
            None => (shape.name, shape.adaptive),
        };
        let ArmList {
            arms,
            baseline,
            repository,
            file_build,
            sweep,
            ..
        } = arm_list;
        let mut plan = Plan {
            executor: placed.executor,
            host_lock: placed.host_lock,
            name,
            description: shape.description,
            workload: shape.workload,
            file: normalize(&absolute(self.path)),
            config: shape.config,
            iterations: shape.iterations,
            warmup: shape.warmup,
            warmup_auto: shape.warmup_auto,
            repeats: shape.repeats,
            adaptive,
            baseline,
            order: shape.order,
            order_seed: shape.order_seed,
            file_set: shape.file_set,
            cli_set: cli.sets.clone(),
            cli_flags: cli.flag_words(),
            arms: Vec::with_capacity(arms.len()),
            columns: judged.columns,
            gate: judged.gate,
            guards: judged.guards,
            notes: shape.notes,
            measurement: placed.measurement,
            sweep,
            fastest_times: false,
        };
        let base_dir = self.base_dir();
        for raw in arms {
            let revision = raw.revision.clone().map(|asked| Revision {
                asked,
                repository: repository.clone(),
                build: raw.build.clone().or_else(|| file_build.clone()),
                ..Revision::default()
            });
            let arm = self.resolve_arm(&plan, raw, &base_dir, revision)?;
            plan.arms.push(arm);
        }
        // What the work costs with the least the host added, where lcx
        // times the runs and several cells give an interval of their
        // fastest runs (decision 0030).
        plan.fastest_times = plan.repeats >= 2
            && plan
                .arms
                .iter()
                .any(|a| a.program == Program::Timer && !a.counts_instructions());
        Ok(plan)
    }
}
