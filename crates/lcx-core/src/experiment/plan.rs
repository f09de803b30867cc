//! Experiment file (TOML, design.md §5) → validated, resolved [`Plan`].
//!
//! Reading is strict and happens completely before anything runs or is
//! written: unknown keys, wrong types, duplicate or empty arms, a baseline
//! that names no arm, warm-up ≥ iterations and every arm's resolved trainer
//! config are all checked here, and each error names the file, the key and
//! (where there is one) the arm.
//!
//! Schema (all paths relative to the experiment file):
//!
//! | key | meaning |
//! |---|---|
//! | `name` | experiment name (required) |
//! | `description`, `notes` | free text |
//! | `workload` | `train` \| `bench-forward` \| `bench-trainer` \| `command` (required) |
//! | `config` | trainer config file (lcx workloads; code defaults when absent) |
//! | `iterations` | iterations (train), timed repetitions (bench), or expected lines (command); ≥ 1 |
//! | `warmup` | leading iterations excluded from statistics (< iterations, default 0), or `"auto"`: detected per cell by MSER on the primary metric |
//! | `repeats` | cells per arm (default 1), or `{ min, max, precision }`: interleaved rounds past `min` until every judged speedup's 95 % interval is within ±precision, or `max` |
//! | `baseline` | arm the others are compared with (default: the first arm) |
//! | `set` | `key=value` config overrides for every arm |
//! | `order` | `interleaved` (A B A B, default) \| `sequential` (A A B B) |
//! | `[[arms]]` | `name`, `label`, `set`, `requires = "cuda"`, `env` (table of strings), `args` (extra flags of lcx workloads, e.g. `["--amp"]`), `command` (command workload: array of strings, or a string run with `sh -c`), `revision` (a git revision or `worktree`: the arm runs that code, see `experiment::revision`), `build` (command arms at a revision: run once in the checkout), `executor` (a table of this arm's own sbatch options: `partition` … `extra`, replacing `[executor]`'s) |
//! | `repository` | the git repository of `revision` arms (default: the one holding the experiment file) |
//! | `build` | the build command of every command arm at a revision that has no `build` of its own |
//! | `[matrix]` | key → list of values; one arm per combination (crossed with `[[arms]]` when both are given). A dotted key is a config `--set`, a key starting with `--` is a flag appended to `args`, `env.NAME` sets an environment variable, `revision` sets the arm's revision |
//! | `[[columns]]` | report table columns: `metric`, `label`, `show` = `value` \| `speedup` \| `both`, `direction` = `lower` \| `higher` \| `none` (shown, never judged) |
//! | `variable_iterations` | `true`: command arms may emit fewer lines than `iterations` (at least one); by default a cell that exits 0 with fewer lines is `failed`. Also an `[[arms]]` key |
//! | `[[guard]]` | a metric that must not get worse: `metric`, `margin` (in its units), optional `direction`, `arm`; a failed guard fails `--check` even when the gate passes |
//! | `[executor]` | `kind` = `local` (default) \| `slurm` (one job per cell; see `experiment::slurm`), and for Slurm `partition`, `account`, `qos`, `time`, `cpus_per_task`, `mem`, `gres`, `constraint`, `extra` (more sbatch flags), `placement` = `same-node` (default) \| `spread` \| `any`, `max_parallel` (cells in flight, default 1; above 1 every cell is submitted up front as that many dependency chains), `requeue` (false; true lets Slurm requeue a job and the cell start again) |
//! | `[gate]` | decision rule for `lcx report --check`: `metric`, `min_speedup` (> 1: superiority; ≤ 1: non-inferiority margin) or `max_slowdown`, optional `min_effect` (minimum relative effect, e.g. 0.05) and `arm` (default: every non-baseline arm) |
//!
//! Command-line `--set` applies after the file's `set` and before the arm's;
//! `--revision ARM=REV` replaces the arm's `revision`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::ConfigError;

/// Why an experiment file cannot be run. Every variant is the user's input.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot read experiment file {}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not valid TOML: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("{}: {key}: {message}", path.display())]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("{}: arm `{arm}`: trainer config", path.display())]
    Config {
        path: PathBuf,
        arm: String,
        #[source]
        error: ConfigError,
    },
    #[error("--set {arg:?}: {message}")]
    CliSet { arg: String, message: String },
    /// A command-line flag (`--iterations`, `--arms`, …) that cannot apply.
    #[error("{flag}: {message}")]
    Flag { flag: &'static str, message: String },
}

/// What the command line changes in an experiment file: `--set` and the
/// flags that replace a top-level key. Each one either applies or is an
/// error; none is silently outranked by the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--set KEY=VALUE`, after the file's `set` (arms' own `set` may not
    /// touch the same key).
    pub sets: Vec<String>,
    /// `--iterations N` replaces `iterations`.
    pub iterations: Option<u32>,
    /// `--warmup N|auto` replaces `warmup`.
    pub warmup: Option<String>,
    /// `--repeats N` replaces `repeats` (a fixed count: adaptive repeats off).
    pub repeats: Option<u32>,
    /// `--arms a,b`: only these arms (after matrix expansion), in file order.
    pub arms: Vec<String>,
    /// `--revision ARM=REV`: the arm runs that revision (replacing the
    /// file's `revision` for it).
    pub revisions: Vec<(String, String)>,
    /// `--executor local|slurm` replaces `[executor] kind`.
    pub executor: Option<String>,
}

impl Overrides {
    /// Only `--set`s.
    pub fn sets(sets: &[String]) -> Overrides {
        Overrides {
            sets: sets.to_vec(),
            ..Overrides::default()
        }
    }

    /// The flags other than `--set`, as command-line words (for the
    /// report's reproduce line).
    pub fn flag_words(&self) -> Vec<String> {
        let mut words = Vec::new();
        if let Some(n) = self.iterations {
            words.extend(["--iterations".to_string(), n.to_string()]);
        }
        if let Some(w) = &self.warmup {
            words.extend(["--warmup".to_string(), w.clone()]);
        }
        if let Some(n) = self.repeats {
            words.extend(["--repeats".to_string(), n.to_string()]);
        }
        if !self.arms.is_empty() {
            words.extend(["--arms".to_string(), self.arms.join(",")]);
        }
        for (arm, rev) in &self.revisions {
            words.extend(["--revision".to_string(), format!("{arm}={rev}")]);
        }
        if let Some(e) = &self.executor {
            words.extend(["--executor".to_string(), e.clone()]);
        }
        words
    }
}

/// What each cell's child process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    Train,
    BenchForward,
    BenchTrainer,
    Command,
}

impl Workload {
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Train => "train",
            Workload::BenchForward => "bench-forward",
            Workload::BenchTrainer => "bench-trainer",
            Workload::Command => "command",
        }
    }

    fn parse(text: &str) -> Option<Workload> {
        Some(match text {
            "train" => Workload::Train,
            "bench-forward" => Workload::BenchForward,
            "bench-trainer" => Workload::BenchTrainer,
            "command" => Workload::Command,
            _ => return None,
        })
    }

    /// Whether the cells are `lcx` subcommands fed a trainer config.
    pub fn uses_config(self) -> bool {
        self != Workload::Command
    }
}

/// Cell order across repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// A B C A B C …: drift hits every arm alike.
    Interleaved,
    /// A A B B C C.
    Sequential,
}

/// A hardware requirement of an arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Requirement {
    Cuda,
}

/// What a report column shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Show {
    Value,
    Speedup,
    Both,
}

/// Whether smaller or larger values of a metric are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Lower,
    Higher,
    /// `direction = "none"` on a column: a description of the work (a
    /// batch size, µs per call across batch sizes), shown and never judged.
    #[serde(rename = "none")]
    Neither,
}

/// A column of the report table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub metric: String,
    /// Defaults to the metric name.
    pub label: String,
    pub show: Show,
    /// `None`: the report infers it from the metric name.
    pub direction: Option<Direction>,
}

/// The experiment's decision rule (evaluated by the report side).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub metric: String,
    /// The speedup threshold (baseline mean / arm mean, inverted for
    /// higher-is-better): above 1 a superiority test, at or below 1 a
    /// non-inferiority margin (`max_slowdown = x` is stored as 1/(1+x)).
    pub min_speedup: f64,
    /// The file's `max_slowdown`, when it gave one instead of `min_speedup`.
    #[serde(default)]
    pub max_slowdown: Option<f64>,
    /// Minimum relative effect |Δ| / baseline for a verdict other than
    /// "no significant change" (e.g. 0.05 = 5 %).
    pub min_effect: Option<f64>,
    /// The arm the gate applies to; `None`: every non-baseline arm.
    pub arm: Option<String>,
}

/// A metric that must not get worse than the baseline by more than
/// `margin` (in the metric's own units), e.g. a win rate or a loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guard {
    pub metric: String,
    pub margin: f64,
    /// `None`: inferred from the metric's name by the report.
    pub direction: Option<Direction>,
    /// `None`: every non-baseline arm.
    pub arm: Option<String>,
}

/// Which program a cell runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Program {
    /// This lcx binary (resolved at spawn time, so a resume uses the
    /// current build).
    Lcx,
    /// An external program (argv[0]).
    External(String),
}

/// The code revision an arm runs (`revision = "main"` in the file), as
/// asked and, once `experiment::revision::prepare` has built it, as
/// resolved. The plan stored with the experiment holds the resolved
/// fields, so a resume runs the same build.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Revision {
    /// As written: a branch, tag, `HEAD~1`, a sha, or `worktree` (the
    /// working tree as it is, uncommitted changes included).
    pub asked: String,
    /// The git repository (absolute; its top level once prepared).
    pub repository: PathBuf,
    /// Command arms: run once in the checkout before any cell.
    pub build: Option<String>,
    /// lcx workloads: every `set` for the arm (file, command line, arm,
    /// and `run.max_iterations`), resolved by the revision's own lcx.
    pub config_sets: Vec<String>,
    /// The commit sha `asked` resolved to.
    pub sha: Option<String>,
    /// `worktree` with uncommitted changes: sha256 of the diff against
    /// `sha` and of the untracked files.
    pub diff_sha256: Option<String>,
    /// The checkout the cells run in (the build cache's entry).
    pub checkout: Option<PathBuf>,
    /// lcx workloads: the revision's `lcx` binary.
    pub binary: Option<PathBuf>,
    /// lcx workloads: what the binary's `--version` printed.
    pub version: Option<String>,
    /// `git log --oneline baseline..this` (capped), for the report.
    pub log: Vec<String>,
    /// Commits in `baseline..this`, the capped ones included.
    pub log_total: usize,
}

impl Revision {
    /// `main@1a2b3c4d5e6f`, with `+dirty` for a changed working tree.
    pub fn describe(&self) -> String {
        let mut out = self.asked.clone();
        if let Some(sha) = &self.sha {
            let short: String = sha.chars().take(12).collect();
            // A sha asked for is shown as one, at the same length as others.
            out = if sha.starts_with(&self.asked) && self.asked.len() >= 7 {
                short
            } else {
                format!("{out}@{short}")
            };
        }
        if self.diff_sha256.is_some() {
            out.push_str("+dirty");
        }
        out
    }
}

/// Where the cells run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Executor {
    /// Child processes of `lcx run` on this machine.
    #[default]
    Local,
    /// One Slurm job per cell (`experiment::slurm`); the output files must
    /// be on a filesystem the nodes and this machine share.
    Slurm(Box<SlurmOptions>),
}

/// `[executor] kind = "slurm"`: the `sbatch` options of every cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    /// Time limit per cell, in a form `sbatch --time` takes (`30`, `1:00:00`).
    pub time: Option<String>,
    pub cpus_per_task: Option<u32>,
    /// `sbatch --mem` (`4G`).
    pub mem: Option<String>,
    /// `sbatch --gres`; arms with `requires = "cuda"` ask for `gpu:1`
    /// when this is not given.
    pub gres: Option<String>,
    pub constraint: Option<String>,
    /// More `sbatch` flags, as given.
    pub extra: Vec<String>,
    /// Which nodes the cells may land on.
    pub placement: Placement,
    /// Cells in flight at once. Above 1 every cell is submitted up front,
    /// as that many chains of jobs (round r on chain r mod N, each cell
    /// after the one before it on its chain), so a round's arms still run
    /// back to back.
    pub max_parallel: u32,
    /// Let Slurm requeue a cell's job (`--requeue`: preemption, a failed
    /// node); the cell then starts again as a new attempt. Off by default
    /// (`--no-requeue`): such a job ends the cell.
    pub requeue: bool,
}

impl Default for SlurmOptions {
    fn default() -> SlurmOptions {
        SlurmOptions {
            partition: None,
            account: None,
            qos: None,
            time: None,
            cpus_per_task: None,
            mem: None,
            gres: None,
            constraint: None,
            extra: Vec::new(),
            placement: Placement::default(),
            // Plans stored before the key existed ran one cell at a time.
            max_parallel: 1,
            requeue: false,
        }
    }
}

impl SlurmOptions {
    /// The options of one arm's cells: each option the arm gives replaces
    /// `[executor]`'s; its `extra` flags come after `[executor]`'s (sbatch
    /// takes the last of a repeated flag).
    pub fn for_arm(&self, arm: &SlurmOverrides) -> SlurmOptions {
        let pick = |own: &Option<String>, all: &Option<String>| own.clone().or_else(|| all.clone());
        SlurmOptions {
            partition: pick(&arm.partition, &self.partition),
            account: pick(&arm.account, &self.account),
            qos: pick(&arm.qos, &self.qos),
            time: pick(&arm.time, &self.time),
            cpus_per_task: arm.cpus_per_task.or(self.cpus_per_task),
            mem: pick(&arm.mem, &self.mem),
            gres: pick(&arm.gres, &self.gres),
            constraint: pick(&arm.constraint, &self.constraint),
            extra: self.extra.iter().chain(&arm.extra).cloned().collect(),
            placement: self.placement,
            max_parallel: self.max_parallel,
            requeue: self.requeue,
        }
    }

    /// The sbatch flags these options give (`--time=30`, …), without the
    /// GPU a `requires = "cuda"` arm asks for by default.
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, value) in [
            ("partition", &self.partition),
            ("account", &self.account),
            ("qos", &self.qos),
            ("time", &self.time),
            ("mem", &self.mem),
            ("constraint", &self.constraint),
            ("gres", &self.gres),
        ] {
            if let Some(v) = value {
                out.push(format!("--{name}={v}"));
            }
        }
        if let Some(c) = self.cpus_per_task {
            out.push(format!("--cpus-per-task={c}"));
        }
        out.extend(self.extra.iter().cloned());
        out
    }
}

/// `[arms.executor]`: an arm's own `sbatch` options (a GPU arm's `gres`,
/// a slower arm's `time`); only Slurm cells read them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SlurmOverrides {
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    pub time: Option<String>,
    pub cpus_per_task: Option<u32>,
    pub mem: Option<String>,
    pub gres: Option<String>,
    pub constraint: Option<String>,
    pub extra: Vec<String>,
}

impl SlurmOverrides {
    pub fn is_empty(&self) -> bool {
        *self == SlurmOverrides::default()
    }
}

/// `[executor] placement`: which node each Slurm cell runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Every cell on the node the first cell landed on (`--nodelist`): an
    /// A/B on one machine. The default.
    #[default]
    SameNode,
    /// Each round (one repeat of every arm) on one node; rounds wherever
    /// Slurm puts them: arms compared within a node, repeats across nodes.
    Spread,
    /// Wherever Slurm puts each cell.
    Any,
}

/// A fully resolved arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arm {
    pub name: String,
    pub label: String,
    pub requires: Option<Requirement>,
    /// The arm's own overrides (its `set` plus matrix values).
    pub set: Vec<String>,
    pub program: Program,
    /// argv after the program.
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Working directory of the child (`None`: the runner's).
    pub workdir: Option<PathBuf>,
    /// The resolved trainer config of lcx workloads.
    pub config_toml: Option<String>,
    pub config_sha256: Option<String>,
    /// A command arm that may emit fewer lines than `iterations` (at least
    /// one); otherwise a cell that exits 0 with fewer is `failed`.
    #[serde(default)]
    pub variable_iterations: bool,
    /// The code revision the arm runs; `None`: the current binary (lcx
    /// workloads) or the command as it is on disk.
    #[serde(default)]
    pub revision: Option<Revision>,
    /// `[arms.executor]`: this arm's sbatch options (Slurm cells only).
    #[serde(default, skip_serializing_if = "SlurmOverrides::is_empty")]
    pub slurm: SlurmOverrides,
}

impl Arm {
    /// The resolved config that the child reads from its stdin: lcx
    /// workloads recorded since the child stopped re-reading the file
    /// (older stored plans name the file and their `set` list instead).
    pub fn stdin_config(&self) -> Option<&str> {
        let handed = self.program == Program::Lcx && reads_config_from_stdin(&self.args);
        self.config_toml.as_deref().filter(|_| handed)
    }

    /// The full argv, `lcx` standing for this binary (an arm at a revision
    /// names that revision's build).
    pub fn command_line(&self) -> Vec<String> {
        let built = self.revision.as_ref().and_then(|r| r.binary.as_ref());
        let program = match (&self.program, built) {
            (Program::Lcx, Some(binary)) => binary.display().to_string(),
            (Program::Lcx, None) => "lcx".to_string(),
            (Program::External(p), _) => p.clone(),
        };
        std::iter::once(program)
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// Whether a cell's argv has its child read the config from stdin
/// (`--config -`), as lcx cells recorded since then do.
pub fn reads_config_from_stdin(argv: &[String]) -> bool {
    argv.windows(2).any(|w| w[0] == "--config" && w[1] == "-")
}

/// A validated experiment, ready to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub name: String,
    pub description: String,
    pub workload: Workload,
    /// The experiment file (absolute).
    pub file: PathBuf,
    /// The trainer config file (absolute), if any.
    pub config: Option<PathBuf>,
    pub iterations: u32,
    /// Leading iterations excluded from statistics (0 with `warmup_auto`).
    pub warmup: u32,
    /// `warmup = "auto"`: each cell's warm-up is detected when it completes
    /// (MSER on the primary metric) and stored on its run row.
    #[serde(default)]
    pub warmup_auto: bool,
    /// Cells per arm (the most, with `adaptive`).
    pub repeats: u32,
    /// `repeats = { min, max, precision }`: rounds go on past `min` until
    /// every judged speedup's interval is within ±precision, or `max`.
    #[serde(default)]
    pub adaptive: Option<Adaptive>,
    pub baseline: String,
    pub order: Order,
    /// The file's `set`.
    pub file_set: Vec<String>,
    /// `--set` from the command line.
    pub cli_set: Vec<String>,
    /// The command line's other overrides (`--iterations 5`, `--arms a,b`),
    /// as words.
    #[serde(default)]
    pub cli_flags: Vec<String>,
    pub arms: Vec<Arm>,
    pub columns: Vec<Column>,
    pub gate: Option<Gate>,
    /// Metrics that must not get worse (`[[guard]]`), judged like a
    /// non-inferiority gate; a failed guard fails the experiment's check.
    #[serde(default)]
    pub guards: Vec<Guard>,
    pub notes: String,
    /// Where the cells run (`[executor]`, `--executor`).
    #[serde(default)]
    pub executor: Executor,
}

/// Adaptive repeats: at least `min` rounds, at most `max`, stopping once
/// every gated or speedup-column interval is within ±`precision`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Adaptive {
    pub min: u32,
    pub max: u32,
    pub precision: f64,
}

/// One cell: an arm index into [`Plan::arms`] and a 1-based repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellSpec {
    pub arm: usize,
    pub repeat: u32,
}

impl Plan {
    /// Whether its cells load libtorch (an `lcx` workload) or one of its
    /// arms needs CUDA: only then does a runner ask `lcx-torch` what
    /// libtorch sees (`fingerprint::torch_facts`).
    pub fn needs_torch(&self) -> bool {
        self.workload.uses_config()
            || self
                .arms
                .iter()
                .any(|arm| arm.requires == Some(Requirement::Cuda))
    }

    /// The cells in the order they run.
    pub fn cells(&self) -> Vec<CellSpec> {
        let mut cells = Vec::with_capacity(self.arms.len() * self.repeats as usize);
        match self.order {
            Order::Interleaved => {
                for repeat in 1..=self.repeats {
                    for arm in 0..self.arms.len() {
                        cells.push(CellSpec { arm, repeat });
                    }
                }
            }
            Order::Sequential => {
                for arm in 0..self.arms.len() {
                    for repeat in 1..=self.repeats {
                        cells.push(CellSpec { arm, repeat });
                    }
                }
            }
        }
        cells
    }

    /// Position of an (arm index, repeat) pair in [`Plan::cells`] order,
    /// used to sort a resume's leftover cells.
    pub fn cell_rank(&self, arm: usize, repeat: u32) -> u64 {
        let (arms, repeats) = (self.arms.len() as u64, u64::from(self.repeats));
        match self.order {
            Order::Interleaved => u64::from(repeat.saturating_sub(1)) * arms + arm as u64,
            Order::Sequential => arm as u64 * repeats + u64::from(repeat.saturating_sub(1)),
        }
    }

    /// The metric the gate judges, else the first column shown as a
    /// speedup, else the first column; `None` for a file with neither. What
    /// `warmup = "auto"` detects the transient on, and what the report's
    /// net result and series checks are about.
    pub fn primary_metric(&self) -> Option<String> {
        // A `direction = "none"` column is never judged, so never primary.
        let judged = || {
            self.columns
                .iter()
                .filter(|c| c.direction != Some(Direction::Neither))
        };
        self.gate.as_ref().map(|g| g.metric.clone()).or_else(|| {
            judged()
                .find(|c| c.show != Show::Value)
                .or(judged().next())
                .map(|c| c.metric.clone())
        })
    }

    pub fn to_json(&self) -> String {
        // A plan is strings, numbers and maps: serialising cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// The most repeats an experiment may ask for, in the file or with
/// `--repeats` alike (each is a process start per arm).
pub const MAX_REPEATS: u32 = 10_000;

/// Hex sha256 of some text.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads and validates an experiment file with the command line's
/// overrides. Returns the plan and the file's text as written.
pub fn load(path: &Path, cli: &Overrides) -> Result<(Plan, String), PlanError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlanError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let plan = from_str(&text, path, cli)?;
    Ok((plan, text))
}

/// Validates experiment text as if read from `path` (which anchors relative
/// paths and names the file in errors).
pub fn from_str(text: &str, path: &Path, cli: &Overrides) -> Result<Plan, PlanError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| PlanError::Syntax {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
    Reader { path }.plan(&table, cli)
}

const TOP_KEYS: &[&str] = &[
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
    "arms",
    "matrix",
    "columns",
    "gate",
    "notes",
    "variable_iterations",
    "guard",
    "repository",
    "build",
    "executor",
];
const EXECUTOR_KEYS: &[&str] = &[
    "kind",
    "partition",
    "account",
    "qos",
    "time",
    "cpus_per_task",
    "mem",
    "gres",
    "constraint",
    "extra",
    "max_parallel",
    "placement",
    "requeue",
];
const GUARD_KEYS: &[&str] = &["metric", "margin", "direction", "arm"];
const ARM_KEYS: &[&str] = &[
    "name",
    "label",
    "set",
    "requires",
    "command",
    "env",
    "args",
    "variable_iterations",
    "revision",
    "build",
    "executor",
];
/// The `[executor]` keys an arm may give for its own cells.
const ARM_EXECUTOR_KEYS: &[&str] = &[
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
const COLUMN_KEYS: &[&str] = &["metric", "label", "show", "direction"];
const GATE_KEYS: &[&str] = &["metric", "min_speedup", "max_slowdown", "min_effect", "arm"];

/// A raw arm before matrix expansion and config resolution.
struct RawArm {
    name: String,
    label: String,
    key: String,
    requires: Option<Requirement>,
    set: Vec<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    command: Option<Vec<String>>,
    variable_iterations: bool,
    /// Whether the arm said `variable_iterations` itself (it wins over the
    /// file's).
    variable_set: bool,
    /// `revision` (from the arm, the matrix or `--revision`).
    revision: Option<String>,
    /// The arm's own `build` (else the file's).
    build: Option<String>,
    /// `[arms.executor]`.
    slurm: SlurmOverrides,
}

/// One `[matrix]` key: (key, short name for arm names, values as (raw
/// text, TOML text)).
type Axis = (String, String, Vec<(String, String)>);

struct Reader<'a> {
    path: &'a Path,
}

fn type_name(v: &toml::Value) -> &'static str {
    v.type_str()
}

impl Reader<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> PlanError {
        PlanError::Invalid {
            path: self.path.to_path_buf(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn check_keys(
        &self,
        table: &toml::Table,
        prefix: &str,
        allowed: &[&str],
    ) -> Result<(), PlanError> {
        for key in table.keys() {
            if !allowed.contains(&key.as_str()) {
                // The config reader's "did you mean" rule, for one style.
                let hint = crate::config::closest(key, allowed)
                    .map(|k| format!("did you mean `{prefix}{k}`? "))
                    .unwrap_or_default();
                return Err(self.err(
                    format!("{prefix}{key}"),
                    format!(
                        "unknown key ({hint}expected one of: {})",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn string(
        &self,
        table: &toml::Table,
        key: &str,
        prefix: &str,
    ) -> Result<Option<String>, PlanError> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.err(
                format!("{prefix}{key}"),
                format!("expected a string, found {}", type_name(other)),
            )),
        }
    }

    fn boolean(
        &self,
        table: &toml::Table,
        key: &str,
        prefix: &str,
    ) -> Result<Option<bool>, PlanError> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(other) => Err(self.err(
                format!("{prefix}{key}"),
                format!("expected true or false, found {}", type_name(other)),
            )),
        }
    }

    /// Strings that become argv or environment entries cannot hold a NUL
    /// byte (the child could not be started); refuse them with the file.
    fn no_nul(&self, key: impl Into<String>, value: &str) -> Result<(), PlanError> {
        if value.contains('\0') {
            return Err(self.err(
                key,
                "contains a NUL byte, which no command line or environment can carry",
            ));
        }
        Ok(())
    }

    fn revision_text(&self, key: &str, value: &str) -> Result<String, PlanError> {
        check_revision(value).map_err(|m| self.err(key, m))
    }

    /// `build` runs a command arm's build in its revision's checkout; lcx
    /// workloads always build with cargo.
    fn check_build(&self, key: &str, build: &str, workload: Workload) -> Result<(), PlanError> {
        if workload.uses_config() {
            return Err(self.err(
                key,
                format!(
                    "a {} arm at a revision is built with `cargo build --release --locked`; \
                     `build` is for command arms",
                    workload.as_str()
                ),
            ));
        }
        if build.trim().is_empty() {
            return Err(self.err(key, "must not be empty"));
        }
        self.no_nul(key, build)
    }

    fn count(&self, table: &toml::Table, key: &str, min: i64) -> Result<Option<u32>, PlanError> {
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) if *n >= min && *n <= i64::from(u32::MAX) => {
                Ok(Some(*n as u32))
            }
            Some(toml::Value::Integer(n)) => {
                Err(self.err(key, format!("expected an integer ≥ {min}, found {n}")))
            }
            Some(other) => Err(self.err(
                key,
                format!("expected an integer ≥ {min}, found {}", type_name(other)),
            )),
        }
    }

    fn number(
        &self,
        table: &toml::Table,
        key: &str,
        prefix: &str,
    ) -> Result<Option<f64>, PlanError> {
        let value = match table.get(key) {
            None => return Ok(None),
            Some(toml::Value::Float(f)) => *f,
            Some(toml::Value::Integer(i)) => *i as f64,
            Some(other) => {
                return Err(self.err(
                    format!("{prefix}{key}"),
                    format!("expected a number, found {}", type_name(other)),
                ))
            }
        };
        if !value.is_finite() {
            return Err(self.err(format!("{prefix}{key}"), "expected a finite number"));
        }
        Ok(Some(value))
    }

    fn strings(
        &self,
        table: &toml::Table,
        key: &str,
        prefix: &str,
    ) -> Result<Vec<String>, PlanError> {
        match table.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    toml::Value::String(s) => Ok(s.clone()),
                    other => Err(self.err(
                        format!("{prefix}{key}[{i}]"),
                        format!("expected a string, found {}", type_name(other)),
                    )),
                })
                .collect(),
            Some(other) => Err(self.err(
                format!("{prefix}{key}"),
                format!("expected an array of strings, found {}", type_name(other)),
            )),
        }
    }

    /// `set` lists: each entry must at least look like `key=value`; the
    /// config reader checks keys and values when the arm is resolved.
    fn sets(&self, table: &toml::Table, key: &str, prefix: &str) -> Result<Vec<String>, PlanError> {
        let sets = self.strings(table, key, prefix)?;
        for (i, set) in sets.iter().enumerate() {
            self.no_nul(format!("{prefix}{key}[{i}]"), set)?;
            if let Err(e) = crate::config::parse_set(set) {
                return Err(self.err(format!("{prefix}{key}[{i}]"), e.to_string()));
            }
        }
        Ok(sets)
    }

    fn tables<'t>(
        &self,
        table: &'t toml::Table,
        key: &str,
    ) -> Result<Vec<&'t toml::Table>, PlanError> {
        match table.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    toml::Value::Table(t) => Ok(t),
                    other => Err(self.err(
                        format!("{key}[{i}]"),
                        format!("expected a table, found {}", type_name(other)),
                    )),
                })
                .collect(),
            Some(other) => Err(self.err(
                key,
                format!(
                    "expected an array of tables ([[{key}]]), found {}",
                    type_name(other)
                ),
            )),
        }
    }

    fn plan(&self, t: &toml::Table, cli: &Overrides) -> Result<Plan, PlanError> {
        let cli_set = cli.sets.as_slice();
        self.check_keys(t, "", TOP_KEYS)?;
        for set in cli_set {
            if set.contains('\0') {
                return Err(PlanError::CliSet {
                    arg: set.clone(),
                    message: "contains a NUL byte".into(),
                });
            }
            if let Err(e) = crate::config::parse_set(set) {
                let message = match e {
                    ConfigError::Set { message, .. } => message,
                    other => other.to_string(),
                };
                return Err(PlanError::CliSet {
                    arg: set.clone(),
                    message,
                });
            }
        }
        let name = self
            .string(t, "name", "")?
            .ok_or_else(|| self.err("name", "missing (every experiment needs a name)"))?;
        if name.trim().is_empty() {
            return Err(self.err("name", "must not be empty"));
        }
        let description = self.string(t, "description", "")?.unwrap_or_default();
        let notes = self.string(t, "notes", "")?.unwrap_or_default();
        let workload_text = self.string(t, "workload", "")?.ok_or_else(|| {
            self.err(
                "workload",
                "missing (expected train, bench-forward, bench-trainer or command)",
            )
        })?;
        let workload = Workload::parse(&workload_text).ok_or_else(|| {
            self.err(
                "workload",
                format!(
                    "unknown workload `{workload_text}` (expected train, bench-forward, bench-trainer or command)"
                ),
            )
        })?;
        let iterations = match cli.iterations {
            Some(0) => {
                return Err(PlanError::Flag {
                    flag: "--iterations",
                    message: "expected an integer ≥ 1".into(),
                })
            }
            Some(n) => n,
            None => self
                .count(t, "iterations", 1)?
                .ok_or_else(|| self.err("iterations", "missing (expected an integer ≥ 1)"))?,
        };
        let (warmup, warmup_auto) = match cli.warmup.as_deref() {
            Some("auto") => (0, true),
            Some(w) => match w.parse::<u32>() {
                Ok(n) => (n, false),
                Err(_) => {
                    return Err(PlanError::Flag {
                        flag: "--warmup",
                        message: format!("expected an integer ≥ 0 or `auto`, found `{w}`"),
                    })
                }
            },
            None => {
                let auto = matches!(t.get("warmup"), Some(toml::Value::String(w)) if w == "auto");
                if let Some(toml::Value::String(w)) = t.get("warmup") {
                    if w != "auto" {
                        return Err(self.err(
                            "warmup",
                            format!("expected an integer ≥ 0 or \"auto\", found \"{w}\""),
                        ));
                    }
                }
                let n = if auto {
                    0
                } else {
                    self.count(t, "warmup", 0)?.unwrap_or(0)
                };
                (n, auto)
            }
        };
        if warmup >= iterations {
            let message = format!(
                "warm-up ({warmup}) must be smaller than iterations ({iterations}), \
                 or no iteration would be left for statistics"
            );
            return Err(match (cli.warmup.is_some(), cli.iterations.is_some()) {
                (true, _) => PlanError::Flag {
                    flag: "--warmup",
                    message,
                },
                (false, true) => PlanError::Flag {
                    flag: "--iterations",
                    message,
                },
                _ => self.err("warmup", message),
            });
        }
        let (repeats, adaptive) = match (cli.repeats, t.get("repeats")) {
            (Some(n), _) if !(1..=MAX_REPEATS).contains(&n) => {
                return Err(PlanError::Flag {
                    flag: "--repeats",
                    message: format!("expected an integer from 1 to {MAX_REPEATS}"),
                })
            }
            (Some(n), _) => (n, None),
            (None, repeats) => match repeats {
                Some(toml::Value::Table(r)) => {
                    self.check_keys(r, "repeats.", &["min", "max", "precision"])?;
                    let count = |key: &str| -> Result<u32, PlanError> {
                        match r.get(key) {
                            Some(toml::Value::Integer(n))
                                if *n >= 1 && *n <= i64::from(MAX_REPEATS) =>
                            {
                                Ok(*n as u32)
                            }
                            _ => Err(self.err(
                                format!("repeats.{key}"),
                                format!("expected an integer from 1 to {MAX_REPEATS}"),
                            )),
                        }
                    };
                    let (min, max) = (count("min")?, count("max")?);
                    if min > max {
                        return Err(self.err("repeats.min", "must not exceed repeats.max"));
                    }
                    let precision = self
                        .number(r, "precision", "repeats.")?
                        .filter(|p| *p > 0.0 && *p < 1.0)
                        .ok_or_else(|| {
                            self.err(
                            "repeats.precision",
                            "expected a fraction in (0, 1), e.g. 0.03 for intervals within ±3 %",
                        )
                        })?;
                    (
                        max,
                        Some(Adaptive {
                            min,
                            max,
                            precision,
                        }),
                    )
                }
                _ => match self.count(t, "repeats", 1)?.unwrap_or(1) {
                    n if n > MAX_REPEATS => {
                        return Err(self.err(
                            "repeats",
                            format!("expected an integer from 1 to {MAX_REPEATS}"),
                        ))
                    }
                    n => (n, None),
                },
            },
        };
        let order_text = self.string(t, "order", "")?;
        if adaptive.is_some() && order_text.as_deref() == Some("sequential") {
            return Err(self.err(
                "order",
                "adaptive repeats run interleaved rounds (A B A B …); remove `order = \"sequential\"`",
            ));
        }
        let order = match order_text.as_deref() {
            None | Some("interleaved") => Order::Interleaved,
            Some("sequential") => Order::Sequential,
            Some(other) => {
                return Err(self.err(
                    "order",
                    format!("unknown order `{other}` (expected interleaved or sequential)"),
                ))
            }
        };
        let base_dir = self.base_dir();
        let config = match self.string(t, "config", "")? {
            None => None,
            Some(_) if !workload.uses_config() => {
                return Err(self.err(
                    "config",
                    "a command workload takes no trainer config (remove `config`)",
                ))
            }
            Some(c) if c.trim().is_empty() => return Err(self.err("config", "must not be empty")),
            Some(c) => Some(normalize(&base_dir.join(c))),
        };
        let file_set = self.sets(t, "set", "")?;
        if !workload.uses_config() && !file_set.is_empty() {
            return Err(self.err(
                "set",
                "a command workload has no trainer config to set (use an arm's `env` instead)",
            ));
        }
        if !workload.uses_config() && !cli_set.is_empty() {
            return Err(PlanError::CliSet {
                arg: cli_set[0].clone(),
                message: format!(
                    "{}: a command workload has no trainer config to set",
                    self.path.display()
                ),
            });
        }

        let variable_iterations = self.boolean(t, "variable_iterations", "")?;
        if variable_iterations.is_some() && workload.uses_config() {
            return Err(self.err(
                "variable_iterations",
                "only command arms may emit a variable number of lines (lcx workloads emit \
                 exactly `iterations`)",
            ));
        }
        let mut raw_arms = self.arms(t, workload)?;
        if variable_iterations == Some(true) {
            for arm in raw_arms.iter_mut().filter(|a| !a.variable_set) {
                arm.variable_iterations = true;
            }
        }
        let raw_arms = raw_arms;
        let arms = self.expand_matrix(t, workload, raw_arms)?;
        // The file's default baseline is its first arm, subset or not.
        let file_baseline = arms.first().map(|a| a.name.clone());
        let mut arms = self.select_arms(t, &cli.arms, arms, file_baseline.as_deref())?;
        for (name, rev) in &cli.revisions {
            let rev = check_revision(rev).map_err(|message| PlanError::Flag {
                flag: "--revision",
                message: format!("{name}={rev}: {message}"),
            })?;
            let names = arms
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            match arms.iter_mut().find(|a| &a.name == name) {
                Some(arm) => arm.revision = Some(rev),
                None => {
                    return Err(PlanError::Flag {
                        flag: "--revision",
                        message: format!(
                            "`{name}` names no arm of {} (arms: {names})",
                            self.path.display(),
                        ),
                    })
                }
            }
        }
        let repository = match self.string(t, "repository", "")? {
            None => base_dir.clone(),
            Some(r) if r.trim().is_empty() => {
                return Err(self.err("repository", "must not be empty"))
            }
            Some(r) => normalize(&base_dir.join(r)),
        };
        let file_build = self.string(t, "build", "")?;
        if let Some(b) = &file_build {
            self.check_build("build", b, workload)?;
        }
        if let Some(arm) = arms
            .iter()
            .find(|a| a.build.is_some() && a.revision.is_none())
        {
            return Err(self.err(
                format!("{}.build", arm.key),
                "`build` runs in the checkout of the arm's `revision`, and this arm has none",
            ));
        }
        let arms = arms;
        self.check_set_precedence(workload, &file_set, cli_set, &arms)?;
        if arms.is_empty() {
            return Err(self.err(
                "arms",
                "no arms: give at least one [[arms]] table or a [matrix]",
            ));
        }
        let mut seen = BTreeSet::new();
        for arm in &arms {
            if !seen.insert(arm.name.as_str()) {
                return Err(self.err(
                    arm.key.clone(),
                    "duplicate arm name; arm names must be unique",
                ));
            }
        }
        let baseline = match self.string(t, "baseline", "")? {
            None => file_baseline.unwrap_or_else(|| arms[0].name.clone()),
            Some(b) if seen.contains(b.as_str()) => b,
            Some(b) => {
                return Err(self.err(
                    "baseline",
                    format!(
                        "`{b}` names no arm (arms: {})",
                        arms.iter()
                            .map(|a| a.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ))
            }
        };
        let columns = self.columns(t)?;
        let gate = self.gate(t, &seen, &baseline)?;
        let guards = self.guards(t, &seen, &baseline)?;
        // A gate or guard judges its metric: not one the file says is
        // never judged, and not a count of work without a direction.
        let undirected = |metric: &str| {
            columns
                .iter()
                .any(|c| c.metric == metric && c.direction == Some(Direction::Neither))
        };
        if let Some(g) = &gate {
            if undirected(&g.metric) {
                return Err(self.err(
                    "gate.metric",
                    format!(
                        "`{}` has `direction = \"none\"` in [[columns]]: a gate judges its metric",
                        g.metric
                    ),
                ));
            }
        }
        for (i, g) in guards.iter().enumerate() {
            let neither = crate::metrics::lookup(&g.metric)
                .is_some_and(|m| m.better == crate::metrics::Better::Neither);
            if undirected(&g.metric) || (neither && g.direction.is_none()) {
                return Err(self.err(
                    format!("guard[{i}].direction"),
                    format!(
                        "`{}` has no better side (a count of the work); say `direction = \"lower\"` or `\"higher\"` for the guard to judge it",
                        g.metric
                    ),
                ));
            }
        }

        let executor = self.executor(t, cli.executor.as_deref())?;
        if let (Executor::Slurm(o), Some(_)) = (&executor, &adaptive) {
            if o.max_parallel > 1 {
                return Err(self.err(
                    "executor.max_parallel",
                    "adaptive repeats decide after each round whether to run another, so \
                     rounds cannot be submitted ahead; give `repeats` a number or use \
                     max_parallel = 1",
                ));
            }
        }
        let mut plan = Plan {
            executor,
            name,
            description,
            workload,
            file: normalize(&absolute(self.path)),
            config,
            iterations,
            warmup,
            warmup_auto,
            repeats,
            adaptive,
            baseline,
            order,
            file_set,
            cli_set: cli_set.to_vec(),
            cli_flags: cli.flag_words(),
            arms: Vec::with_capacity(arms.len()),
            columns,
            gate,
            guards,
            notes,
        };
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
        Ok(plan)
    }

    /// `[executor]`, with `--executor` replacing its `kind`.
    fn executor(&self, t: &toml::Table, cli: Option<&str>) -> Result<Executor, PlanError> {
        let empty = toml::Table::new();
        let table = match t.get("executor") {
            None => &empty,
            Some(toml::Value::Table(e)) => e,
            Some(other) => {
                return Err(self.err(
                    "executor",
                    format!("expected a table ([executor]), found {}", type_name(other)),
                ))
            }
        };
        self.check_keys(table, "executor.", EXECUTOR_KEYS)?;
        let file_kind = self.string(table, "kind", "executor.")?;
        let kind = match (cli, file_kind.as_deref()) {
            (Some(k), _) => match k {
                "local" | "slurm" => k.to_string(),
                other => {
                    return Err(PlanError::Flag {
                        flag: "--executor",
                        message: format!("unknown executor `{other}` (expected local or slurm)"),
                    })
                }
            },
            (None, Some(k @ ("local" | "slurm"))) => k.to_string(),
            (None, Some(other)) => {
                return Err(self.err(
                    "executor.kind",
                    format!("unknown executor `{other}` (expected local or slurm)"),
                ))
            }
            (None, None) => "local".to_string(),
        };
        let max_parallel = match table.get("max_parallel") {
            None => 1,
            Some(toml::Value::Integer(n)) if *n >= 1 && *n <= 1024 => *n as u32,
            Some(_) => {
                return Err(self.err(
                    "executor.max_parallel",
                    "expected an integer from 1 to 1024 (cells in flight at once)",
                ))
            }
        };
        if kind == "local" {
            if max_parallel > 1 {
                return Err(self.err(
                    "executor.max_parallel",
                    "local cells run one at a time, so that they do not share this machine's \
                     cores; max_parallel applies to kind = \"slurm\"",
                ));
            }
            return Ok(Executor::Local);
        }
        let fields = self.slurm_fields(table, "executor.")?;
        let placement = match self.string(table, "placement", "executor.")?.as_deref() {
            None | Some("same-node") => Placement::SameNode,
            Some("spread") => Placement::Spread,
            Some("any") => Placement::Any,
            Some(other) => {
                return Err(self.err(
                    "executor.placement",
                    format!("unknown placement `{other}` (expected same-node, spread or any)"),
                ))
            }
        };
        if max_parallel > 1 && placement == Placement::Spread {
            return Err(self.err(
                "executor.max_parallel",
                "placement = \"spread\" pins each round to the node its first cell lands on, \
                 one round at a time; use same-node or any with max_parallel > 1",
            ));
        }
        let requeue = self
            .boolean(table, "requeue", "executor.")?
            .unwrap_or(false);
        Ok(Executor::Slurm(Box::new(
            SlurmOptions {
                placement,
                max_parallel,
                requeue,
                ..SlurmOptions::default()
            }
            .for_arm(&fields),
        )))
    }

    /// The sbatch options of `[executor]` or of an arm's `[arms.executor]`
    /// (`prefix` names the table in errors).
    fn slurm_fields(&self, table: &toml::Table, prefix: &str) -> Result<SlurmOverrides, PlanError> {
        let text = |key: &str| -> Result<Option<String>, PlanError> {
            let v = self.string(table, key, prefix)?;
            if let Some(v) = &v {
                if v.trim().is_empty() {
                    return Err(self.err(format!("{prefix}{key}"), "must not be empty"));
                }
                self.no_nul(format!("{prefix}{key}"), v)?;
            }
            Ok(v)
        };
        let extra = self.strings(table, "extra", prefix)?;
        for (i, e) in extra.iter().enumerate() {
            self.no_nul(format!("{prefix}extra[{i}]"), e)?;
            if !e.starts_with('-') {
                return Err(self.err(
                    format!("{prefix}extra[{i}]"),
                    format!("`{e}` is not an sbatch flag (write `--name=value`)"),
                ));
            }
        }
        let cpus = match table.get("cpus_per_task") {
            None => None,
            Some(toml::Value::Integer(n)) if *n >= 1 && *n <= i64::from(u32::MAX) => {
                Some(*n as u32)
            }
            Some(_) => {
                return Err(self.err(format!("{prefix}cpus_per_task"), "expected an integer ≥ 1"))
            }
        };
        Ok(SlurmOverrides {
            partition: text("partition")?,
            account: text("account")?,
            qos: text("qos")?,
            time: text("time")?,
            cpus_per_task: cpus,
            mem: text("mem")?,
            gres: text("gres")?,
            constraint: text("constraint")?,
            extra,
        })
    }

    /// `--arms a,b`: only the named arms (all when `wanted` is empty), in
    /// file order. Refuses an unknown name, and leaving out an arm that the
    /// baseline (given, or the file's first arm), `[gate]` or a `[[guard]]`
    /// names.
    fn select_arms(
        &self,
        t: &toml::Table,
        wanted: &[String],
        mut arms: Vec<RawArm>,
        file_baseline: Option<&str>,
    ) -> Result<Vec<RawArm>, PlanError> {
        if wanted.is_empty() {
            return Ok(arms);
        }
        if let Some(unknown) = wanted.iter().find(|w| !arms.iter().any(|a| &a.name == *w)) {
            return Err(PlanError::Flag {
                flag: "--arms",
                message: format!(
                    "`{unknown}` names no arm of {} (arms: {})",
                    self.path.display(),
                    arms.iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let named = |v: Option<&toml::Value>| {
            v.and_then(|v| v.get("arm"))
                .and_then(|a| a.as_str())
                .map(str::to_owned)
        };
        let mut wanted_by: Vec<(String, String)> = Vec::new();
        if let Some(b) = t.get("baseline").and_then(|b| b.as_str()) {
            wanted_by.push(("`baseline`".into(), b.to_owned()));
        } else if let Some(b) = file_baseline {
            wanted_by.push(("the default baseline (the first arm)".into(), b.to_owned()));
        }
        if let Some(a) = named(t.get("gate")) {
            wanted_by.push(("[gate]".into(), a));
        }
        if let Some(toml::Value::Array(guards)) = t.get("guard") {
            for (i, g) in guards.iter().enumerate() {
                if let Some(a) = named(Some(g)) {
                    wanted_by.push((format!("[[guard]] {}", i + 1), a));
                }
            }
        }
        if let Some((what, arm)) = wanted_by.iter().find(|(_, a)| !wanted.contains(a)) {
            return Err(PlanError::Flag {
                flag: "--arms",
                message: format!(
                    "leaves out arm `{arm}`, which {what} of {} names; add it",
                    self.path.display()
                ),
            });
        }
        arms.retain(|a| wanted.contains(&a.name));
        Ok(arms)
    }

    /// A `set` that another one would silently outrank is an error naming
    /// both: the command line's `--set` against an arm's own `set`, and
    /// any `set` of `run.max_iterations`, which the runner writes from
    /// `iterations` for training cells.
    fn check_set_precedence<'s>(
        &self,
        workload: Workload,
        file_set: &'s [String],
        cli_set: &'s [String],
        arms: &'s [RawArm],
    ) -> Result<(), PlanError> {
        let key_of = |arg: &str| {
            crate::config::parse_set(arg)
                .map(|(path, _)| path)
                .unwrap_or_default()
        };
        // Two keys collide when one is the other or a table holding it.
        let overlap = |a: &[String], b: &[String]| {
            let n = a.len().min(b.len());
            n > 0 && a[..n] == b[..n]
        };
        let max_iterations = ["run".to_string(), "max_iterations".to_string()];
        let sets_max_iterations =
            |sets: &'s [String]| sets.iter().find(|a| overlap(&key_of(a), &max_iterations));
        if workload == Workload::Train {
            let runner_wins = "the runner sets it from `iterations` for every training cell";
            if let Some(arg) = sets_max_iterations(cli_set) {
                return Err(PlanError::CliSet {
                    arg: arg.clone(),
                    message: format!("{runner_wins}; use --iterations N"),
                });
            }
            if let Some(arg) = sets_max_iterations(file_set) {
                return Err(self.err("set", format!("`{arg}`: {runner_wins}; set `iterations`")));
            }
            for arm in arms {
                if let Some(arg) = sets_max_iterations(&arm.set) {
                    return Err(self.err(
                        format!("{}.set", arm.key),
                        format!("`{arg}`: {runner_wins}; set `iterations`"),
                    ));
                }
            }
        }
        for arg in cli_set {
            let key = key_of(arg);
            for arm in arms {
                if let Some(own) = arm.set.iter().find(|a| overlap(&key_of(a), &key)) {
                    return Err(PlanError::CliSet {
                        arg: arg.clone(),
                        message: format!(
                            "arm `{}` has `{own}` in its own `set` ({}), which would win \
                             over the command line; change the file, or leave the arm out \
                             with --arms",
                            arm.name,
                            self.path.display(),
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    fn base_dir(&self) -> PathBuf {
        let abs = absolute(self.path);
        abs.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    fn arms(&self, t: &toml::Table, workload: Workload) -> Result<Vec<RawArm>, PlanError> {
        let mut out = Vec::new();
        for (i, arm) in self.tables(t, "arms")?.into_iter().enumerate() {
            let name = self.string(arm, "name", &format!("arms[{i}]."))?;
            let key = match &name {
                Some(n) => format!("arms[{i}] (`{n}`)"),
                None => format!("arms[{i}]"),
            };
            let prefix = format!("{key}.");
            self.check_keys(arm, &prefix, ARM_KEYS)?;
            let name = name.ok_or_else(|| self.err(format!("{prefix}name"), "missing"))?;
            check_arm_name(&name).map_err(|m| self.err(format!("{prefix}name"), m))?;
            let label = self
                .string(arm, "label", &prefix)?
                .unwrap_or_else(|| name.clone());
            let requires = match self.string(arm, "requires", &prefix)?.as_deref() {
                None => None,
                Some("cuda") => Some(Requirement::Cuda),
                Some(other) => {
                    return Err(self.err(
                        format!("{prefix}requires"),
                        format!("unknown requirement `{other}` (expected cuda)"),
                    ))
                }
            };
            let set = self.sets(arm, "set", &prefix)?;
            let args = self.strings(arm, "args", &prefix)?;
            for (i, a) in args.iter().enumerate() {
                self.no_nul(format!("{prefix}args[{i}]"), a)?;
                // One cell measures one mode: `--both` would print fp32 and
                // AMP lines as iterations 1..2N of one cell.
                if workload == Workload::BenchTrainer && a == "--both" {
                    return Err(self.err(
                        format!("{prefix}args[{i}]"),
                        "`--both` times two modes in one cell; give fp32 and `--amp` their own arms",
                    ));
                }
            }
            let revision = match self.string(arm, "revision", &prefix)? {
                Some(r) => Some(self.revision_text(&format!("{prefix}revision"), &r)?),
                None => None,
            };
            let build = self.string(arm, "build", &prefix)?;
            if let Some(b) = &build {
                self.check_build(&format!("{prefix}build"), b, workload)?;
            }
            let slurm = match arm.get("executor") {
                None => SlurmOverrides::default(),
                Some(toml::Value::Table(e)) => {
                    let table_prefix = format!("{prefix}executor.");
                    if let Some(key) = ["kind", "placement", "max_parallel", "requeue"]
                        .into_iter()
                        .find(|k| e.contains_key(*k))
                    {
                        return Err(self.err(
                            format!("{table_prefix}{key}"),
                            "applies to every cell of the experiment: set it in [executor]",
                        ));
                    }
                    self.check_keys(e, &table_prefix, ARM_EXECUTOR_KEYS)?;
                    self.slurm_fields(e, &table_prefix)?
                }
                Some(other) => {
                    return Err(self.err(
                        format!("{prefix}executor"),
                        format!(
                            "expected a table of sbatch options ({}), found {}",
                            ARM_EXECUTOR_KEYS.join(", "),
                            type_name(other)
                        ),
                    ))
                }
            };
            let variable = self.boolean(arm, "variable_iterations", &prefix)?;
            if variable.is_some() && workload.uses_config() {
                return Err(self.err(
                    format!("{prefix}variable_iterations"),
                    "only command arms may emit a variable number of lines",
                ));
            }
            let env = match arm.get("env") {
                None => BTreeMap::new(),
                Some(toml::Value::Table(env)) => {
                    let mut out = BTreeMap::new();
                    for (k, v) in env {
                        let value = match v {
                            toml::Value::String(s) => s.clone(),
                            toml::Value::Integer(_)
                            | toml::Value::Float(_)
                            | toml::Value::Boolean(_) => v.to_string(),
                            other => {
                                return Err(self.err(
                                    format!("{prefix}env.{k}"),
                                    format!("expected a string, found {}", type_name(other)),
                                ))
                            }
                        };
                        if k.is_empty() || k.contains('=') {
                            return Err(self.err(
                                format!("{prefix}env.{k}"),
                                "an environment variable name must be non-empty and hold no `=`",
                            ));
                        }
                        self.no_nul(format!("{prefix}env.{k}"), k)?;
                        self.no_nul(format!("{prefix}env.{k}"), &value)?;
                        out.insert(k.clone(), value);
                    }
                    out
                }
                Some(other) => {
                    return Err(self.err(
                        format!("{prefix}env"),
                        format!("expected a table of strings, found {}", type_name(other)),
                    ))
                }
            };
            let command = match arm.get("command") {
                None => None,
                Some(toml::Value::String(s)) if s.trim().is_empty() => {
                    return Err(self.err(format!("{prefix}command"), "must not be empty"))
                }
                Some(toml::Value::String(s)) => {
                    self.no_nul(format!("{prefix}command"), s)?;
                    Some(vec!["sh".to_string(), "-c".to_string(), s.clone()])
                }
                Some(toml::Value::Array(_)) => {
                    let argv = self.strings(arm, "command", &prefix)?;
                    for (i, a) in argv.iter().enumerate() {
                        self.no_nul(format!("{prefix}command[{i}]"), a)?;
                    }
                    if argv.first().is_none_or(|p| p.is_empty()) {
                        return Err(self.err(
                            format!("{prefix}command"),
                            "must name a program (a non-empty array whose first entry is the program)",
                        ));
                    }
                    Some(argv)
                }
                Some(other) => {
                    return Err(self.err(
                        format!("{prefix}command"),
                        format!(
                            "expected an array of strings or a shell string, found {}",
                            type_name(other)
                        ),
                    ))
                }
            };
            match workload {
                Workload::Command => {
                    if command.is_none() {
                        return Err(self.err(
                            format!("{prefix}command"),
                            "missing (a command workload arm runs this program)",
                        ));
                    }
                    if !set.is_empty() {
                        return Err(self.err(
                            format!("{prefix}set"),
                            "a command arm has no trainer config to set (use `env`)",
                        ));
                    }
                    if !args.is_empty() {
                        return Err(self.err(
                            format!("{prefix}args"),
                            "a command arm takes its arguments in `command`",
                        ));
                    }
                }
                _ => {
                    if command.is_some() {
                        return Err(self.err(
                            format!("{prefix}command"),
                            format!(
                                "only `workload = \"command\"` arms run a command (this is {})",
                                workload.as_str()
                            ),
                        ));
                    }
                }
            }
            out.push(RawArm {
                name,
                label,
                key,
                requires,
                set,
                args,
                env,
                command,
                variable_iterations: variable.unwrap_or(false),
                variable_set: variable.is_some(),
                revision,
                build,
                slurm,
            });
        }
        Ok(out)
    }

    /// Crosses the arms with the `[matrix]` combinations.
    fn expand_matrix(
        &self,
        t: &toml::Table,
        workload: Workload,
        arms: Vec<RawArm>,
    ) -> Result<Vec<RawArm>, PlanError> {
        let matrix = match t.get("matrix") {
            None => return Ok(arms),
            Some(toml::Value::Table(m)) => m,
            Some(other) => {
                return Err(self.err(
                    "matrix",
                    format!("expected a table of lists, found {}", type_name(other)),
                ))
            }
        };
        if matrix.is_empty() {
            return Err(self.err(
                "matrix",
                "is empty (give at least one key with a list of values)",
            ));
        }
        let mut axes: Vec<Axis> = Vec::new();
        for (key, values) in matrix {
            let full = format!("matrix.{key}");
            self.no_nul(&full, key)?;
            let kind_ok = if key == "revision" {
                true
            } else if let Some(var) = key.strip_prefix("env.") {
                !var.is_empty()
            } else if key.starts_with("--") {
                workload.uses_config() && key.len() > 2
            } else {
                workload.uses_config()
            };
            if !kind_ok {
                return Err(self.err(
                    full,
                    if workload.uses_config() {
                        "expected a config key (traversal.scheduler), a flag (--batch-sizes), env.NAME or revision"
                    } else {
                        "a command workload only takes env.NAME and revision matrix keys"
                    },
                ));
            }
            let items = match values {
                toml::Value::Array(items) if !items.is_empty() => items,
                toml::Value::Array(_) => return Err(self.err(full, "the list of values is empty")),
                other => {
                    return Err(self.err(
                        full,
                        format!("expected a list of values, found {}", type_name(other)),
                    ))
                }
            };
            let mut vals = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let raw = match item {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                        item.to_string()
                    }
                    other => {
                        return Err(self.err(
                            format!("{full}[{i}]"),
                            format!(
                                "expected a string, number or boolean, found {}",
                                type_name(other)
                            ),
                        ))
                    }
                };
                self.no_nul(format!("{full}[{i}]"), &raw)?;
                let raw = if key == "revision" {
                    self.revision_text(&format!("{full}[{i}]"), &raw)?
                } else {
                    raw
                };
                vals.push((raw, item.to_string()));
            }
            let short = key
                .trim_start_matches("--")
                .rsplit('.')
                .next()
                .unwrap_or(key)
                .to_lowercase();
            axes.push((key.clone(), short, vals));
        }
        // Cartesian product, first key slowest.
        let mut combos: Vec<Vec<usize>> = vec![Vec::new()];
        for (_, _, vals) in &axes {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    (0..vals.len()).map(move |i| {
                        let mut next = c.clone();
                        next.push(i);
                        next
                    })
                })
                .collect();
        }
        let bases = if arms.is_empty() {
            vec![None]
        } else {
            arms.into_iter().map(Some).collect()
        };
        let mut out = Vec::new();
        for base in &bases {
            for combo in &combos {
                let mut name_parts = Vec::new();
                let mut label_parts = Vec::new();
                let mut set = Vec::new();
                let mut args = Vec::new();
                let mut env = BTreeMap::new();
                let mut revision = None;
                for (axis, &i) in axes.iter().zip(combo) {
                    let (key, short, vals) = axis;
                    let (raw, toml_text) = &vals[i];
                    name_parts.push(format!("{short}-{}", sanitize(raw)));
                    label_parts.push(format!("{short} {raw}"));
                    if key == "revision" {
                        revision = Some(raw.clone());
                    } else if let Some(var) = key.strip_prefix("env.") {
                        env.insert(var.to_string(), raw.clone());
                    } else if key.starts_with("--") {
                        args.push(key.clone());
                        args.push(raw.clone());
                    } else {
                        set.push(format!("{key}={toml_text}"));
                    }
                }
                let combo_name = name_parts.join("_");
                let combo_label = label_parts.join(", ");
                let arm = match base {
                    None => {
                        if workload == Workload::Command {
                            return Err(self.err(
                                "arms",
                                "a command matrix needs [[arms]] with a `command` to vary",
                            ));
                        }
                        RawArm {
                            name: combo_name.clone(),
                            label: combo_label,
                            key: format!("matrix ({combo_name})"),
                            requires: None,
                            set,
                            args,
                            env,
                            command: None,
                            variable_iterations: false,
                            variable_set: false,
                            revision,
                            build: None,
                            slurm: SlurmOverrides::default(),
                        }
                    }
                    Some(b) => {
                        if let (Some(own), Some(_)) = (&b.revision, &revision) {
                            return Err(self.err(
                                "matrix.revision",
                                format!(
                                    "{} has `revision = \"{own}\"` itself; give the revision in one place",
                                    b.key
                                ),
                            ));
                        }
                        let mut arm_env = b.env.clone();
                        arm_env.extend(env);
                        RawArm {
                            name: format!("{}-{combo_name}", b.name),
                            label: format!("{}, {combo_label}", b.label),
                            key: format!("{} × matrix ({combo_name})", b.key),
                            requires: b.requires,
                            set: b.set.iter().cloned().chain(set).collect(),
                            args: b.args.iter().cloned().chain(args).collect(),
                            env: arm_env,
                            command: b.command.clone(),
                            variable_iterations: b.variable_iterations,
                            variable_set: b.variable_set,
                            revision: revision.or_else(|| b.revision.clone()),
                            build: b.build.clone(),
                            slurm: b.slurm.clone(),
                        }
                    }
                };
                out.push(arm);
            }
        }
        Ok(out)
    }

    fn columns(&self, t: &toml::Table) -> Result<Vec<Column>, PlanError> {
        let mut out = Vec::new();
        for (i, c) in self.tables(t, "columns")?.into_iter().enumerate() {
            let prefix = format!("columns[{i}].");
            self.check_keys(c, &prefix, COLUMN_KEYS)?;
            let metric = self
                .string(c, "metric", &prefix)?
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| self.err(format!("{prefix}metric"), "missing (the metric name)"))?;
            let label = self
                .string(c, "label", &prefix)?
                .unwrap_or_else(|| metric.clone());
            let show = match self.string(c, "show", &prefix)?.as_deref() {
                None | Some("value") => Show::Value,
                Some("speedup") => Show::Speedup,
                Some("both") => Show::Both,
                Some(other) => {
                    return Err(self.err(
                        format!("{prefix}show"),
                        format!("unknown `{other}` (expected value, speedup or both)"),
                    ))
                }
            };
            let direction = self.direction(c, &prefix, true)?;
            out.push(Column {
                metric,
                label,
                show,
                direction,
            });
        }
        Ok(out)
    }

    fn gate(
        &self,
        t: &toml::Table,
        arms: &BTreeSet<&str>,
        baseline: &str,
    ) -> Result<Option<Gate>, PlanError> {
        let g = match t.get("gate") {
            None => return Ok(None),
            Some(toml::Value::Table(g)) => g,
            Some(other) => {
                return Err(self.err(
                    "gate",
                    format!("expected a table ([gate]), found {}", type_name(other)),
                ))
            }
        };
        self.check_keys(g, "gate.", GATE_KEYS)?;
        let metric = self
            .string(g, "metric", "gate.")?
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| self.err("gate.metric", "missing (the metric the gate judges)"))?;
        let max_slowdown = self.number(g, "max_slowdown", "gate.")?;
        let min_speedup = match (self.number(g, "min_speedup", "gate.")?, max_slowdown) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    "gate.max_slowdown",
                    "give either min_speedup or max_slowdown, not both",
                ))
            }
            (Some(m), None) if m <= 0.0 => return Err(self.err("gate.min_speedup", "must be > 0")),
            (Some(m), None) => m,
            (None, Some(x)) if !(0.0..1.0).contains(&x) => {
                return Err(self.err(
                    "gate.max_slowdown",
                    "expected a fraction in [0, 1), e.g. 0.03 for 3 % slower at most",
                ))
            }
            (None, Some(x)) => 1.0 / (1.0 + x),
            (None, None) => {
                return Err(self.err(
                    "gate.min_speedup",
                    "missing (e.g. min_speedup = 1.5 to require 1.5×, or max_slowdown = 0.03)",
                ))
            }
        };
        let min_effect = self.number(g, "min_effect", "gate.")?;
        if min_effect.is_some_and(|e| e < 0.0) {
            return Err(self.err("gate.min_effect", "must be ≥ 0"));
        }
        let arm = self.string(g, "arm", "gate.")?;
        if let Some(a) = &arm {
            if !arms.contains(a.as_str()) {
                return Err(self.err("gate.arm", format!("`{a}` names no arm")));
            }
            if a == baseline {
                return Err(self.err(
                    "gate.arm",
                    format!("`{a}` is the baseline; the gate compares another arm with it"),
                ));
            }
        }
        Ok(Some(Gate {
            metric,
            min_speedup,
            max_slowdown,
            min_effect,
            arm,
        }))
    }

    /// A table's optional `direction` (`lower` | `higher`, and `none` where
    /// `none_ok`: a column may describe, a guard must judge).
    fn direction(
        &self,
        t: &toml::Table,
        prefix: &str,
        none_ok: bool,
    ) -> Result<Option<Direction>, PlanError> {
        match self.string(t, "direction", prefix)?.as_deref() {
            None => Ok(None),
            Some("lower") => Ok(Some(Direction::Lower)),
            Some("higher") => Ok(Some(Direction::Higher)),
            Some("none") if none_ok => Ok(Some(Direction::Neither)),
            Some(other) => Err(self.err(
                format!("{prefix}direction"),
                if none_ok {
                    format!("unknown `{other}` (expected lower, higher or none)")
                } else {
                    format!("unknown `{other}` (expected lower or higher: a guard judges)")
                },
            )),
        }
    }

    fn guards(
        &self,
        t: &toml::Table,
        arms: &BTreeSet<&str>,
        baseline: &str,
    ) -> Result<Vec<Guard>, PlanError> {
        let mut out = Vec::new();
        for (i, g) in self.tables(t, "guard")?.into_iter().enumerate() {
            let prefix = format!("guard[{i}].");
            self.check_keys(g, &prefix, GUARD_KEYS)?;
            let metric = self
                .string(g, "metric", &prefix)?
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| {
                    self.err(format!("{prefix}metric"), "missing (the metric guarded)")
                })?;
            let margin = self.number(g, "margin", &prefix)?.ok_or_else(|| {
                self.err(
                    format!("{prefix}margin"),
                    "missing (how much worse the arm may be, in the metric's units, e.g. 0.05)",
                )
            })?;
            if margin < 0.0 {
                return Err(self.err(format!("{prefix}margin"), "must be ≥ 0"));
            }
            let direction = self.direction(g, &prefix, false)?;
            let arm = self.string(g, "arm", &prefix)?;
            if let Some(a) = &arm {
                if !arms.contains(a.as_str()) || a == baseline {
                    return Err(self.err(
                        format!("{prefix}arm"),
                        format!("`{a}` is not an arm other than the baseline"),
                    ));
                }
            }
            out.push(Guard {
                metric,
                margin,
                direction,
                arm,
            });
        }
        Ok(out)
    }

    /// Builds the child argv and, for lcx workloads, loads and validates the
    /// arm's trainer config exactly as the child will see it.
    ///
    /// An arm at a revision keeps its `set` list instead: the revision's own
    /// lcx resolves it once the revision is built, and may know other keys.
    fn resolve_arm(
        &self,
        plan: &Plan,
        raw: RawArm,
        base_dir: &Path,
        revision: Option<Revision>,
    ) -> Result<Arm, PlanError> {
        let iterations = plan.iterations.to_string();
        if plan.workload == Workload::Command {
            let mut argv = raw.command.unwrap_or_default();
            let program = argv.remove(0);
            return Ok(Arm {
                name: raw.name,
                label: raw.label,
                requires: raw.requires,
                set: raw.set,
                program: Program::External(program),
                args: argv,
                env: raw.env,
                workdir: Some(base_dir.to_path_buf()),
                config_toml: None,
                config_sha256: None,
                variable_iterations: raw.variable_iterations,
                revision,
                slurm: raw.slurm,
            });
        }
        let mut sets: Vec<String> = plan
            .file_set
            .iter()
            .chain(&plan.cli_set)
            .chain(&raw.set)
            .cloned()
            .collect();
        let mut args: Vec<String> = match plan.workload {
            Workload::Train => vec!["train".into()],
            Workload::BenchForward => vec!["bench".into(), "forward".into()],
            Workload::BenchTrainer => vec!["bench".into(), "trainer".into()],
            Workload::Command => Vec::new(),
        };
        if plan.workload == Workload::Train {
            sets.push(format!("run.max_iterations={iterations}"));
        }
        // The child reads the config resolved here from its stdin (the
        // runner writes `config_toml`), never the file or the `set` list
        // again: a resume after the file changed runs what was recorded.
        args.extend(["--config".into(), "-".into()]);
        match plan.workload {
            Workload::BenchForward => args.extend(["--reps".into(), iterations.clone()]),
            Workload::BenchTrainer => args.extend([
                "--runs".into(),
                iterations.clone(),
                "--warmup".into(),
                "0".into(),
            ]),
            _ => {}
        }
        args.extend(raw.args.iter().cloned());
        args.extend(["--metrics-out".into(), "-".into()]);
        if let Some(mut revision) = revision {
            revision.config_sets = sets;
            return Ok(Arm {
                name: raw.name,
                label: raw.label,
                requires: raw.requires,
                set: raw.set,
                program: Program::Lcx,
                args,
                env: raw.env,
                workdir: None,
                config_toml: None,
                config_sha256: None,
                variable_iterations: false,
                revision: Some(revision),
                slurm: raw.slurm,
            });
        }

        let config_err = |error| PlanError::Config {
            path: self.path.to_path_buf(),
            arm: raw.name.clone(),
            error,
        };
        // Without a config file the benches start from configs/default.toml
        // (as `lcx bench` does by itself) and training from the code defaults.
        let config = match plan.workload {
            Workload::BenchForward | Workload::BenchTrainer => {
                crate::config::load_bench(plan.config.as_deref(), &sets)
            }
            _ => crate::config::load(plan.config.as_deref(), &sets),
        }
        .map_err(config_err)?;
        let toml_text = config.to_toml();
        let sha = sha256_hex(toml_text.as_bytes());
        Ok(Arm {
            name: raw.name,
            label: raw.label,
            requires: raw.requires,
            set: raw.set,
            program: Program::Lcx,
            args,
            env: raw.env,
            workdir: None,
            config_toml: Some(toml_text),
            config_sha256: Some(sha),
            variable_iterations: false,
            revision: None,
            slurm: raw.slurm,
        })
    }
}

/// A revision as git will be asked for it: `worktree`, or something `git
/// rev-parse` may resolve. A leading `-` would read as an option.
pub fn check_revision(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err("must not be empty (a branch, tag, sha, HEAD~1 or \"worktree\")".into());
    }
    if value.starts_with('-') || value.chars().any(|c| c.is_whitespace() || c == '\0') {
        return Err(format!(
            "`{value}` is not a revision (no leading `-`, no spaces)"
        ));
    }
    Ok(value.to_string())
}

/// Arm names end up in commands, file names and SQL filters: keep them
/// to a safe alphabet.
fn check_arm_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "`{name}` contains `{c}`; use letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok(())
}

fn sanitize(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Removes `.` and folds `..` lexically (the config may not exist yet when
/// the error is reported, so no canonicalize).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests;
