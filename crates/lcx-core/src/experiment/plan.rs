//! Experiment file (TOML) → validated, resolved [`Plan`].
//!
//! Reading is strict and happens completely before anything runs or is
//! written: unknown keys, wrong types, duplicate or empty arms, a baseline
//! that names no arm, warm-up ≥ iterations and every arm's resolved trainer
//! config are all checked here, and each error names the file, the key and
//! (where there is one) the arm.
//!
//! The keys, their types, defaults and meaning: [`keys::KEYS`] (printed by
//! `lcx schema`, committed as docs/experiment-file.md).
//!
//! Command-line `--set` applies after the file's `set` and before the arm's;
//! `--revision ARM=REV` replaces the arm's `revision`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{ConfigError, SetError};
use crate::system::affinity::CpuSet;
use crate::toml_read::{self, KeyError, Table};

mod arms;
mod exec;
pub mod keys;
mod matrix;
pub mod placeholder;
mod probe;
mod read;
mod resolve;
pub mod shell;
mod stored;
mod sweep;

pub use exec::{inherited_env_bytes, ExecLimits};
pub use probe::Probe;
pub use read::{
    check_env_name, check_min_effect, check_name, check_visible, MAX_ARMS, MAX_NAME, MAX_SECONDS,
};
pub use stored::{StoredPlanError, PLAN_VERSION};

use read::*;
use resolve::*;
pub use resolve::{check_arm_name, check_revision, sanitize};

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
    /// A command-line `--set` that is malformed or cannot apply.
    #[error(transparent)]
    CliSet(SetError),
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
    /// `--runs N`: `iterations` becomes N runs after the warm-up (hyperfine's
    /// `--runs`; the warm-up is the file's or `--warmup`'s).
    pub runs: Option<u32>,
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
    /// `lcx bisect`: the plan is one probe of the file's arm.
    pub probe: Option<Probe>,
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
        if let Some(n) = self.runs {
            words.extend(["--runs".to_string(), n.to_string()]);
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

    /// Which of lcx's programs writes the cells' lines: the names a gate
    /// may judge are theirs (`metrics::written_by`). `None`: a `command`
    /// arm writes names of its own.
    pub fn writers(self) -> Option<crate::metrics::Writers> {
        use crate::metrics::Writers;
        match self {
            Workload::Train => Some(Writers::TRAIN),
            Workload::BenchForward => Some(Writers::BENCH_FORWARD),
            Workload::BenchTrainer => Some(Writers::BENCH_TRAINER),
            Workload::Command => None,
        }
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
    /// Rounds as interleaved, each round's arms in an order drawn from
    /// `order_seed` and the round (Abedi and Brecht's randomized multiple
    /// interleaved trials): what the host does at one position of a round
    /// falls on every arm in turn, not on the same arm each time.
    Randomized,
}

/// The order of the arms in round `repeat` of a randomized plan: a
/// Fisher–Yates shuffle driven by splitmix64 from the seed and the round,
/// so a resume or another host draws the same order.
pub fn round_order(arms: usize, seed: u64, repeat: u32) -> Vec<usize> {
    let mut state = seed ^ u64::from(repeat).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..arms).collect();
    for i in (1..arms).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// How a command arm is measured (`timing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    /// The command prints its own metric lines.
    Lines,
    /// lcx times each run (`bench::process`).
    Process,
    /// lcx counts each run under cachegrind (`bench::cachegrind`).
    Instructions,
}

impl Timing {
    /// Whether lcx runs the command itself, once per iteration.
    pub fn by_lcx(self) -> bool {
        self != Timing::Lines
    }
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

/// A file's `direction` key (`lower`, `higher`, or `none`: the column is
/// not judged at all): the metric vocabulary's type, which the reports
/// judge with too.
pub use crate::metrics::Direction;

/// What one cell contributes of a metric to the statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fold {
    /// The mean of its post-warm-up iterations (a time, a rate).
    #[default]
    Mean,
    /// Its last recorded value (a win rate where training ended: a
    /// learning curve's mean would judge the path, not the result).
    Last,
    /// The median of its post-warm-up iterations (what a typical run of a
    /// command took: a few runs a preemption or a page-fault storm slowed
    /// several times move it not at all, where they move the mean by a
    /// fifth). A choice for a column whose typical value matters.
    Median,
    /// The least of its post-warm-up iterations (the fastest run: on a
    /// noisy host, what the work itself costs, every delay the host added
    /// being positive). The default for the times of commands lcx times,
    /// decision 0030.
    Min,
}

impl Fold {
    pub fn is_mean(&self) -> bool {
        *self == Fold::Mean
    }

    /// The label a column of `metric` gets when the file names none: a
    /// last-value column says it is the final value.
    pub fn default_label(&self, metric: &str) -> String {
        match self {
            Fold::Mean => metric.to_string(),
            Fold::Last => format!("final {metric}"),
            Fold::Median => format!("median {metric}"),
            Fold::Min => format!("fastest {metric}"),
        }
    }
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
    /// One per metric in a file (the reader makes the columns and guards
    /// of a metric agree); absent in plans stored before it existed.
    #[serde(default)]
    pub fold: Fold,
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
    /// The arm the gate applies to; `None`: every non-baseline arm. In a
    /// sweep, an arm of the file: the gate judges it at each point.
    pub arm: Option<String>,
    /// In a sweep: the points the gate judges (every point by default).
    #[serde(default, skip_serializing_if = "GatePoints::is_every")]
    pub points: GatePoints,
}

/// Which points of a sweep a gate judges, by their value on the axis the
/// crossover runs along.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatePoints {
    /// Every point (and every arm of a file without a sweep).
    #[default]
    Every,
    /// `from = V`: the point whose value is V and every point after it.
    From(String),
    /// `at = [V, …]`: these points.
    At(Vec<String>),
    /// `crossover_at_most = V`: as `from`, with the bound the minimum
    /// effect (the arm must be shown to pay from V on).
    Crossover(String),
}

impl GatePoints {
    pub fn is_every(&self) -> bool {
        *self == GatePoints::Every
    }
}

/// A metric that must not get worse than the baseline by more than
/// `margin` (in the metric's own units), e.g. a win rate or a loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guard {
    pub metric: String,
    pub margin: f64,
    /// `None`: inferred from the metric's name by the report.
    pub direction: Option<Direction>,
    /// `None`: every arm other than the guard's baseline.
    pub arm: Option<String>,
    /// The arm the guarded one is compared with; `None`: the experiment's
    /// baseline.
    #[serde(default)]
    pub baseline: Option<String>,
    #[serde(default)]
    pub fold: Fold,
    /// Repeat *k* of the arm and of its baseline ran from the same seed
    /// (the file says so): the guard tests the per-repeat differences, so
    /// the spread between seeds, common to both, drops out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paired: bool,
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
    /// This lcx binary timing an arm's command (`timing = "process"`): the
    /// args are `time-process -- COMMAND…`. Never a revision's build: the
    /// revision is the command's project, not lcx.
    Timer,
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

/// `[executor] kind = "slurm"`: the `sbatch` options of every cell, and
/// how the experiment's cells are spread over the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SlurmOptions {
    /// The options each cell's job is submitted with, stored beside the
    /// keys below as they always were (flattened, so a stored plan reads
    /// the same either way).
    #[serde(flatten)]
    pub sbatch: SbatchOptions,
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
            sbatch: SbatchOptions::default(),
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
    pub fn for_arm(&self, arm: &SbatchOptions) -> SlurmOptions {
        SlurmOptions {
            sbatch: arm.over(&self.sbatch),
            placement: self.placement,
            max_parallel: self.max_parallel,
            requeue: self.requeue,
        }
    }
}

/// The `sbatch` options a file passes through to Slurm, as `[executor]`
/// gives them for every cell and `[arms.executor]` for one arm's cells (a
/// GPU arm's `gres`, a slower arm's `time`). Every one may be absent: an
/// arm's absent one keeps `[executor]`'s ([`SlurmOptions::for_arm`]), and
/// an absent one of `[executor]` is left to the cluster's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SbatchOptions {
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
}

impl SbatchOptions {
    pub fn is_empty(&self) -> bool {
        *self == SbatchOptions::default()
    }

    /// These options laid over `under`: each one given here wins, and
    /// `extra` comes after `under`'s (sbatch takes the last of a repeated
    /// flag, so the arm's still wins).
    pub fn over(&self, under: &SbatchOptions) -> SbatchOptions {
        let pick = |own: &Option<String>, all: &Option<String>| own.clone().or_else(|| all.clone());
        SbatchOptions {
            partition: pick(&self.partition, &under.partition),
            account: pick(&self.account, &under.account),
            qos: pick(&self.qos, &under.qos),
            time: pick(&self.time, &under.time),
            cpus_per_task: self.cpus_per_task.or(under.cpus_per_task),
            mem: pick(&self.mem, &under.mem),
            gres: pick(&self.gres, &under.gres),
            constraint: pick(&self.constraint, &under.constraint),
            extra: under.extra.iter().chain(&self.extra).cloned().collect(),
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
    #[serde(default, skip_serializing_if = "SbatchOptions::is_empty")]
    pub slurm: SbatchOptions,
    /// The CPUs the arm's cells run on (`cpus = "0-3"`, or the set
    /// `[measurement] pin = true` chose when the experiment was created);
    /// `None`: wherever the kernel schedules them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<CpuSet>,
    /// `timeout`: the longest one cell may run (seconds) before the runner
    /// stops it and records it `failed: timed out after …`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// `setup`, `prepare`, `cleanup`: commands run around the arm's cells,
    /// outside every cell's recorded time.
    #[serde(default, skip_serializing_if = "Hooks::is_empty")]
    pub hooks: Hooks,
    /// In a sweep: the file's arm this one grew from and its point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepPoint>,
}

/// `[sweep]`: the axes every arm runs along. Each arm is compared with the
/// baseline at the same point, never with the baseline at another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// In the file's key order (TOML tables are read sorted by key).
    pub axes: Vec<SweepAxis>,
    /// The index of the axis crossovers run along (`axis = KEY`; the only
    /// key when there is one).
    pub along: usize,
}

/// One key of `[sweep]` and its values, in the file's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepAxis {
    /// As the file wrote it: `network.hidden_size`, `--batch-sizes`, `env.N`.
    pub key: String,
    /// The part arm names and labels use (`hidden_size`).
    pub short: String,
    /// Each value as the arm received it.
    pub values: Vec<String>,
}

impl Sweep {
    /// The points in the order their arms were made (first key slowest).
    pub fn points(&self) -> Vec<Vec<String>> {
        let mut points: Vec<Vec<String>> = vec![Vec::new()];
        for axis in &self.axes {
            points = points
                .into_iter()
                .flat_map(|p| {
                    axis.values.iter().map(move |v| {
                        let mut next = p.clone();
                        next.push(v.clone());
                        next
                    })
                })
                .collect();
        }
        points
    }

    /// The axis crossovers run along (`None` only in a damaged plan,
    /// which [`Plan::check_sweep`] refuses).
    pub fn along_axis(&self) -> Option<&SweepAxis> {
        self.axes.get(self.along)
    }

    /// `hidden_size 2048, num_layers 3`.
    pub fn label(&self, point: &[String]) -> String {
        self.axes
            .iter()
            .zip(point)
            .map(|(a, v)| format!("{} {v}", a.short))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether the axis counts workers or threads: its points then also
    /// get a strong-scaling efficiency.
    pub fn counts_workers(&self, axis: usize) -> bool {
        self.axes.get(axis).is_some_and(|a| {
            let key = a.key.to_lowercase();
            (key.contains("workers") || key.contains("threads"))
                && a.values
                    .iter()
                    .all(|v| v.parse::<f64>().is_ok_and(|n| n > 0.0))
        })
    }
}

/// Where a sweep's arm sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The file's arm (after `[matrix]`) it grew from.
    pub arm: String,
    /// Its value on each axis of [`Sweep::axes`].
    pub values: Vec<String>,
}

/// An arm's commands around its cells, in the manner of hyperfine's
/// `--setup`/`--prepare`/`--cleanup`: each an argv (a string in the file
/// runs through `sh -c`), run on the runner's host, in the arm's working
/// directory and environment, never inside a cell's timed region.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hooks {
    /// Once, before the arm's first cell of an `lcx run` (or `--resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<Vec<String>>,
    /// Before each of the arm's cells, after the host lock is taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<Vec<String>>,
    /// Once, after the last cell of the run, for every arm that had a cell
    /// in it (a failed setup may have left half its work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<Vec<String>>,
}

impl Hooks {
    /// The file's keys, in the order they run.
    pub const KEYS: [&'static str; 3] = ["setup", "prepare", "cleanup"];

    pub fn is_empty(&self) -> bool {
        self.setup.is_none() && self.prepare.is_none() && self.cleanup.is_none()
    }

    /// The hook of one key of [`Hooks::KEYS`].
    pub fn get(&self, key: &str) -> Option<&Vec<String>> {
        match key {
            "setup" => self.setup.as_ref(),
            "prepare" => self.prepare.as_ref(),
            "cleanup" => self.cleanup.as_ref(),
            _ => None,
        }
    }

    fn slot(&mut self, key: &str) -> Option<&mut Option<Vec<String>>> {
        match key {
            "setup" => Some(&mut self.setup),
            "prepare" => Some(&mut self.prepare),
            "cleanup" => Some(&mut self.cleanup),
            _ => None,
        }
    }

    /// Each hook this arm does not give taken from `file` (the file's
    /// top-level hooks apply to every arm without its own).
    pub fn or(mut self, file: &Hooks) -> Hooks {
        for key in Hooks::KEYS {
            if let Some(slot) = self.slot(key) {
                if slot.is_none() {
                    *slot = file.get(key).cloned();
                }
            }
        }
        self
    }
}

/// Seconds from a plan as a duration, within [0, [`read::MAX_SECONDS`]]:
/// the reader refuses anything else, and a plan stored by an older lcx (read
/// back on `--resume`) is clamped rather than allowed to panic the runner.
pub fn seconds_duration(seconds: f64) -> std::time::Duration {
    let s = if seconds.is_nan() {
        read::MAX_SECONDS
    } else {
        seconds.clamp(0.0, read::MAX_SECONDS)
    };
    std::time::Duration::try_from_secs_f64(s)
        .unwrap_or(std::time::Duration::from_secs(read::MAX_SECONDS as u64))
}

impl Arm {
    /// The file's arm this one grew from in a sweep; outside one, itself.
    pub fn file_arm(&self) -> &str {
        self.sweep.as_ref().map_or(&self.name, |s| &s.arm)
    }

    /// lcx counts its command's runs under cachegrind (`timing =
    /// "instructions"`): the timer's own flags, before `--`, say so.
    pub fn counts_instructions(&self) -> bool {
        self.program == Program::Timer
            && self
                .args
                .iter()
                .take_while(|a| *a != "--")
                .any(|a| a == "--instructions")
    }

    /// `timeout` as a duration.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.timeout_seconds.map(seconds_duration)
    }

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
            (Program::Lcx, None) | (Program::Timer, _) => "lcx".to_string(),
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
    /// `order_seed`: what `Order::Randomized` draws each round's order
    /// from (stored, so a resume runs the rounds it planned).
    #[serde(default)]
    pub order_seed: u64,
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
    /// How a cell's host is judged (`[measurement]`).
    #[serde(default)]
    pub measurement: Measurement,
    /// Each local cell holds the host lock (`crate::system::lock`) while
    /// it runs; `host_lock = false` in the file opts out, for command
    /// experiments that measure no speed. Plans stored before the key
    /// existed take it.
    #[serde(default = "host_lock_default")]
    pub host_lock: bool,
    /// `[sweep]`: the axes every arm runs along.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// The wall time of commands lcx times folds to each cell's fastest
    /// run unless the file says otherwise (`Fold::Min`): set when the file was
    /// read with such arms and at least two repeats (one cell's minimum
    /// would be one value, with no interval). Plans stored before it keep
    /// their means.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fastest_times: bool,
}

fn host_lock_default() -> bool {
    true
}

/// `[measurement]`: when a cell counts as contended.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Measurement {
    /// The foreign CPU load (cores, averaged over the cell) above which a
    /// cell is contended; `None`: the default, [`Measurement::threshold`].
    #[serde(default)]
    pub max_foreign_cpu: Option<f64>,
    /// Rounds of reruns of contended cells at the end of the schedule, each
    /// beside a fresh cell of the baseline from the same repeat.
    #[serde(default)]
    pub rerun_contended: u32,
    /// Seconds to wait before each cell for the host to be quiet (foreign
    /// CPU over the last second below the limit); then the cell runs anyway.
    #[serde(default)]
    pub wait_for_quiet: Option<f64>,
    /// `pin = true`: every arm's cells run on the same CPUs
    /// ([`crate::system::affinity::pin_set`]), chosen when the experiment
    /// is created and stored on each arm.
    #[serde(default)]
    pub pin: bool,
}

impl Measurement {
    /// The experiment's `max_foreign_cpu`, else the host's default
    /// ([`crate::system::default_max_foreign_cpu`]).
    pub fn threshold(&self, host_cpus: Option<i64>) -> f64 {
        self.max_foreign_cpu
            .unwrap_or_else(|| crate::system::default_max_foreign_cpu(host_cpus))
    }
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
    /// Whether a plan's sweep holds together (a stored plan is read back
    /// from a database anyone may have edited): an axis the crossover runs
    /// along, and each swept arm a value on every axis.
    pub fn check_sweep(&self) -> Result<(), String> {
        let Some(sweep) = &self.sweep else {
            return Ok(());
        };
        if sweep.along >= sweep.axes.len() {
            return Err(format!(
                "its sweep runs along axis {} of {}",
                sweep.along,
                sweep.axes.len()
            ));
        }
        match self.arms.iter().find(|a| {
            a.sweep
                .as_ref()
                .is_some_and(|s| s.values.len() != sweep.axes.len())
        }) {
            Some(a) => Err(format!(
                "arm `{}` has a value on {} of the sweep's {} axes",
                a.name,
                a.sweep.as_ref().map_or(0, |s| s.values.len()),
                sweep.axes.len()
            )),
            None => Ok(()),
        }
    }

    /// The arm `arm` is compared with: the baseline, or in a sweep the
    /// baseline's arm at the same point. `None` for an arm not in the plan
    /// or a sweep point without a baseline arm (narrowed away).
    ///
    /// A sweep of one arm has no other arm to compare: each point is
    /// compared with the arm at the axis' first value (batch 16 against
    /// batch 1, 4 workers against 1), the other axes' values as its own.
    pub fn baseline_of(&self, arm: &str) -> Option<&str> {
        let this = self.arms.iter().find(|a| a.name == arm)?;
        let (Some(sweep), Some(at)) = (&self.sweep, &this.sweep) else {
            return Some(&self.baseline);
        };
        let mut want = at.values.clone();
        if self.sweeps_one_arm() {
            let first = sweep.along_axis().and_then(|a| a.values.first());
            if let (Some(v), Some(first)) = (want.get_mut(sweep.along), first) {
                first.clone_into(v);
            }
        }
        self.arm_at(&self.baseline, &want)
    }

    /// Whether the sweep grew every arm from one file arm: its points are
    /// then compared with the arm at the axis' first value.
    pub fn sweeps_one_arm(&self) -> bool {
        let first = self.arms.first().and_then(|a| a.sweep.as_ref());
        first.is_some_and(|first| {
            self.arms
                .iter()
                .all(|a| a.sweep.as_ref().is_some_and(|s| s.arm == first.arm))
        })
    }

    /// The arm the sweep grew from the file's arm `file_arm` at the point
    /// of `values`.
    pub fn arm_at(&self, file_arm: &str, values: &[String]) -> Option<&str> {
        self.arms
            .iter()
            .find(|a| {
                a.sweep
                    .as_ref()
                    .is_some_and(|s| s.arm == file_arm && s.values == values)
            })
            .map(|a| a.name.as_str())
    }

    /// The file's arm `arm` grew from (itself outside a sweep).
    pub fn file_arm_of<'a>(&'a self, arm: &'a str) -> &'a str {
        self.arms
            .iter()
            .find(|a| a.name == arm)
            .map_or(arm, Arm::file_arm)
    }

    /// The arm of the file's arm `file_arm` at `arm`'s point (`file_arm`
    /// itself outside a sweep).
    pub fn at_point_of<'a>(&'a self, file_arm: &'a str, arm: &str) -> Option<&'a str> {
        match self
            .arms
            .iter()
            .find(|a| a.name == arm)
            .and_then(|a| a.sweep.as_ref())
        {
            None => Some(file_arm),
            Some(at) => self.arm_at(file_arm, &at.values),
        }
    }

    /// How a cell's values of `metric` fold (the reader gives the columns
    /// and guards of one metric one fold).
    pub fn fold_of(&self, metric: &str) -> Fold {
        // The wall time only: user and system time are totals of CPU
        // the run used, which the host's delays do not add to.
        use crate::bench::process::WALL;
        self.columns
            .iter()
            .filter(|c| c.metric == metric)
            .map(|c| c.fold)
            .chain(
                self.guards
                    .iter()
                    .filter(|g| g.metric == metric)
                    .map(|g| g.fold),
            )
            .next()
            .unwrap_or(if self.fastest_times && metric == WALL {
                Fold::Min
            } else {
                Fold::Mean
            })
    }

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

    /// Whether a cell of it can report a FLOP rate, and so whether its
    /// report has a roofline to draw against the host's ceiling: every arm
    /// but one whose command lcx times as a process (that arm's lines are
    /// lcx's own four `process/*` figures). Only then does a run probe the
    /// ceiling.
    pub fn uses_ceiling(&self) -> bool {
        self.arms.iter().any(|arm| arm.program != Program::Timer)
    }

    /// What in the plan is valid but most likely not what its author
    /// meant, for `lcx run` to say before it runs (nothing is refused).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(g) = &self.gate {
            if g.min_speedup == 1.0 {
                let given = match g.max_slowdown {
                    Some(_) => "gate.max_slowdown = 0",
                    None => "gate.min_speedup = 1.0",
                };
                out.push(format!(
                    "{}: `{given}` leaves no margin: the gate can PASS only an arm shown \
                     faster than the baseline, and an arm as fast as it stays INCONCLUSIVE \
                     however many repeats run; for \"not slower\", give a margin such as \
                     `max_slowdown = 0.03` (3 %)",
                    self.file.display()
                ));
            }
        }
        out
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
            Order::Randomized => {
                for repeat in 1..=self.repeats {
                    for arm in round_order(self.arms.len(), self.order_seed, repeat) {
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
            Order::Randomized => {
                let round = round_order(self.arms.len(), self.order_seed, repeat.max(1));
                let at = round.iter().position(|&a| a == arm).unwrap_or(arm);
                u64::from(repeat.saturating_sub(1)) * arms + at as u64
            }
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
        self.gate
            .as_ref()
            .map(|g| g.metric.clone())
            .or_else(|| {
                judged()
                    .find(|c| c.show != Show::Value)
                    .or(judged().next())
                    .map(|c| c.metric.clone())
            })
            // Commands lcx times: their wall time, never an alphabetical
            // accident (`process/max_rss_bytes`); commands it counts, their
            // instructions.
            .or_else(|| {
                let timed: Vec<&Arm> = self
                    .arms
                    .iter()
                    .filter(|a| a.program == Program::Timer)
                    .collect();
                match timed.first() {
                    None => None,
                    Some(_) if timed.iter().all(|a| a.counts_instructions()) => {
                        Some(crate::bench::cachegrind::INSTRUCTIONS.to_string())
                    }
                    Some(_) => Some(crate::bench::process::WALL.to_string()),
                }
            })
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
    let mut plan = from_str(&text, path, cli)?;
    let isolated = crate::system::Root::default()
        .isolated_cpus()
        .and_then(|list| CpuSet::parse(&list).ok());
    plan.place_cpus(
        crate::system::affinity::allowed().as_ref(),
        isolated.as_ref(),
    )?;
    plan.check_exec_size(ExecLimits::here(), inherited_env_bytes())?;
    plan.check_counter(std::env::var_os("PATH").as_deref())?;
    Ok((plan, text))
}

impl Plan {
    /// Refuses a plan whose local cells count instructions (`timing =
    /// "instructions"`) where valgrind is not on `path`: every cell would
    /// fail. Slurm cells run on other hosts, which say so themselves.
    pub fn check_counter(&self, path: Option<&std::ffi::OsStr>) -> Result<(), PlanError> {
        let Some(arm) = self.arms.iter().find(|a| a.counts_instructions()) else {
            return Ok(());
        };
        if !matches!(self.executor, Executor::Local)
            || crate::bench::cachegrind::find_valgrind(path).is_some()
        {
            return Ok(());
        }
        Err(PlanError::Invalid {
            path: self.file.clone(),
            key: format!("arms (`{}`).timing", arm.name),
            message: format!(
                "\"instructions\" counts each run under valgrind's cachegrind, and `valgrind` \
                 is not on PATH: {}",
                crate::bench::cachegrind::INSTALL_HINT
            ),
        })
    }

    /// Fits the arms' CPUs to this host, where local cells run: `[measurement]
    /// pin = true` chooses one set for every arm
    /// ([`crate::system::affinity::pin_set`]); an arm's own `cpus` must be
    /// CPUs this process may use, or its cells could not start. The chosen
    /// sets are stored with the plan, so a resume runs on the same CPUs.
    pub fn place_cpus(
        &mut self,
        allowed: Option<&CpuSet>,
        isolated: Option<&CpuSet>,
    ) -> Result<(), PlanError> {
        let pinned = self.measurement.pin || self.arms.iter().any(|a| a.cpus.is_some());
        if !pinned || !matches!(self.executor, Executor::Local) {
            return Ok(());
        }
        let invalid = |key: String, message: String| PlanError::Invalid {
            path: self.file.clone(),
            key,
            message,
        };
        let Some(allowed) = allowed else {
            let key = if self.measurement.pin {
                "measurement.pin".to_string()
            } else {
                "cpus".to_string()
            };
            return Err(invalid(
                key,
                "this system does not say which CPUs a process may use (sched_getaffinity)".into(),
            ));
        };
        if self.measurement.pin {
            let set = crate::system::affinity::pin_set(allowed, isolated)
                .map_err(|m| invalid("measurement.pin".into(), m))?;
            for arm in &mut self.arms {
                arm.cpus = Some(set.clone());
            }
            return Ok(());
        }
        for arm in &self.arms {
            let Some(cpus) = &arm.cpus else { continue };
            let missing = cpus.without(allowed);
            if !missing.is_empty() {
                return Err(invalid(
                    format!("arms (`{}`).cpus", arm.name),
                    format!(
                        "CPU {missing} is not one this process may use here (allowed: {allowed})"
                    ),
                ));
            }
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests;
