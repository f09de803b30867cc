//! Plain data that goes into and comes out of the store.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Lifecycle of an experiment row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    Running,
    Completed,
    Failed,
    Interrupted,
    /// Never stored: a `running` row whose runner is gone (killed, or
    /// stopped by a failing disk), as readers on its host see it.
    Abandoned,
    /// Never stored: a `running` row that `lcx run --detach` left to its
    /// Slurm jobs, with no coordinator following them (`lcx run --attach`).
    Detached,
}

/// What [`crate::store::Store::remove_experiments`] removed (or would).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removal {
    /// (id, name) of each experiment.
    pub experiments: Vec<(i64, String)>,
    /// Cells.
    pub runs: i64,
    /// Metric lines' values: numbers, texts and non-finite values.
    pub metric_rows: i64,
}

/// Lifecycle of a run (cell) row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Interrupted,
    Skipped,
    /// Never stored: a `running` cell of an abandoned experiment.
    Abandoned,
}

macro_rules! string_enum {
    ($ty:ident, $column:literal, $($variant:ident => $text:literal),+ $(,)?) => {
        impl $ty {
            /// The spelling stored in the database.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $text),+ }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = super::StoreError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($ty::$variant),)+
                    other => Err(super::StoreError::BadValue {
                        column: $column,
                        value: other.to_string(),
                    }),
                }
            }
        }
    };
}

string_enum!(ExperimentStatus, "experiments.status",
    Running => "running", Completed => "completed", Failed => "failed",
    Interrupted => "interrupted", Abandoned => "abandoned", Detached => "detached");
string_enum!(RunStatus, "runs.status",
    Pending => "pending", Running => "running", Completed => "completed",
    Failed => "failed", Interrupted => "interrupted", Skipped => "skipped",
    Abandoned => "abandoned");

impl RunStatus {
    /// Whether `lcx run --resume` runs this cell again.
    pub fn needs_rerun(self) -> bool {
        !matches!(self, RunStatus::Completed | RunStatus::Skipped)
    }
}

/// The machine an experiment ran on. Every field is optional because each
/// probe (nvidia-smi, /proc, libtorch) may be unavailable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub hostname: Option<String>,
    pub os: Option<String>,
    pub cpu_model: Option<String>,
    pub cpu_cores: Option<i64>,
    pub memory_bytes: Option<i64>,
    pub gpu_name: Option<String>,
    pub gpu_driver: Option<String>,
    pub cuda_version: Option<String>,
    pub cuda_available: Option<bool>,
    pub torch_version: Option<String>,
    pub torch_intra_threads: Option<i64>,
    pub torch_inter_threads: Option<i64>,
    // The fields below came with later migrations; each carries
    // `serde(default)` so that JSON written without them still reads. The
    // attribute repeats per field, as serde wants it: no logic repeats.
    /// `lcx bench peak` at the experiment's start: the FMA loop's
    /// instruction set, its FP32 GFLOP/s on one core and on every core, and
    /// the streaming triad's GB/s.
    #[serde(default)]
    pub peak_isa: Option<String>,
    #[serde(default)]
    pub peak_fp32_gflops_core: Option<f64>,
    #[serde(default)]
    pub peak_fp32_gflops: Option<f64>,
    #[serde(default)]
    pub peak_stream_gbytes_per_second: Option<f64>,
    /// Where the ceiling came from (migration 0011): `probed`, `cached`,
    /// `disturbed` or `reprobed`; the clean tries, their spread and the
    /// probe's date; what the runner did when a rate exceeded it.
    #[serde(default)]
    pub peak_source: Option<String>,
    #[serde(default)]
    pub peak_tries: Option<i64>,
    #[serde(default)]
    pub peak_spread: Option<f64>,
    #[serde(default)]
    pub peak_probed_at: Option<String>,
    #[serde(default)]
    pub peak_note: Option<String>,
}

/// What the runner knows about an experiment when it starts it: the
/// columns of its row that the store does not assign (an [`Experiment`] is
/// the row read back, with its id, status, timestamps and runner).
#[derive(Debug, Clone)]
pub struct NewExperiment {
    pub name: String,
    pub description: String,
    pub workload: String,
    pub file_path: String,
    pub file_text: String,
    pub file_sha256: String,
    pub plan_json: String,
    pub iterations: i64,
    pub warmup: i64,
    pub repeats: i64,
    pub baseline: Option<String>,
    pub lcx_version: String,
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
    /// The runner's own argv.
    pub command_line: Vec<String>,
    pub runner: Option<super::RunnerIdentity>,
    pub fingerprint: Fingerprint,
}

/// An experiment row.
// Repeats `NewExperiment`'s fields rather than nesting it: readers name
// them flat (`experiment.name`) all over the workspace, and this is the
// row as read, where those are only some of its columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub id: i64,
    pub name: String,
    pub description: String,
    pub workload: String,
    pub file_path: String,
    pub file_text: String,
    pub file_sha256: String,
    pub plan_json: String,
    pub iterations: i64,
    pub warmup: i64,
    pub repeats: i64,
    pub baseline: Option<String>,
    pub status: ExperimentStatus,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub lcx_version: String,
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
    pub command_line: Vec<String>,
    /// The process that created or last resumed the experiment.
    pub runner: Option<super::RunnerIdentity>,
    pub fingerprint: Fingerprint,
}

/// A cell to be recorded as `pending` when the experiment starts.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub arm: String,
    pub arm_label: String,
    pub arm_index: i64,
    /// 1-based.
    pub repeat: i64,
    pub config_toml: Option<String>,
    pub config_sha256: Option<String>,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub revision: Option<RunRevision>,
}

/// The code revision a cell ran (an arm with `revision`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRevision {
    /// As the experiment asked for it (`main`, `HEAD~1`, `worktree`).
    pub asked: String,
    pub sha: Option<String>,
    /// The uncommitted changes of a `worktree` revision.
    pub diff_sha256: Option<String>,
    /// The revision's lcx `--version` (lcx workloads).
    pub binary_version: Option<String>,
}

/// A run (cell) row.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: i64,
    pub experiment_id: i64,
    pub arm: String,
    pub arm_label: String,
    pub arm_index: i64,
    pub repeat: i64,
    pub attempt: i64,
    pub config_toml: Option<String>,
    pub config_sha256: Option<String>,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub status: RunStatus,
    pub skip_reason: Option<String>,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub error: Option<String>,
    pub stderr_tail: Option<String>,
    pub iterations_done: i64,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// The cell's own time, start to exit (see [`RunOutcome::wall_seconds`]).
    pub wall_seconds: Option<f64>,
    /// How long its runner waited for the database's write lock meanwhile.
    pub db_wait_seconds: Option<f64>,
    /// What the host was doing meanwhile.
    pub contention: Contention,
    /// Why the runner ran this attempt again after the schedule (contention).
    pub rerun_note: Option<String>,
    /// The CPUs its process was allowed to run on (a local cell).
    pub cpus: Option<String>,
    pub problems: LineProblems,
    /// Iterations this cell excludes as warm-up when they were detected
    /// (`warmup = "auto"`); `None`: the experiment's `warmup`.
    pub warmup: Option<i64>,
    pub revision: Option<RunRevision>,
    /// The host the cell ran on (the Slurm node for a Slurm cell).
    pub host: Option<String>,
    pub slurm_job: Option<String>,
    /// The job's folder on the shared filesystem (Slurm cells).
    pub slurm_dir: Option<String>,
    /// The `started` record of the job run whose lines the cell holds.
    pub slurm_run: Option<String>,
    /// The hardware the cell ran on.
    pub node: Option<NodeInfo>,
}

/// The hardware one cell ran on: recorded per cell, because the cells of
/// a cluster experiment may land on different nodes. Every field is
/// optional (a node without `nvidia-smi`, a `/proc` that says little).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// CPUs the cell's process could use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_driver: Option<String>,
}

impl NodeInfo {
    /// The kind of machine, without the host's name or the CPUs a cell was
    /// given: two nodes of one kind give the same text, whatever each
    /// arm's `cpus_per_task`. `None` when nothing is known.
    pub fn kind(&self) -> Option<String> {
        let parts: Vec<&str> = [self.cpu_model.as_deref(), self.gpu_name.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// What decides speed, without the host's name: two nodes with the
    /// same hardware give the same text. `None` when nothing is known.
    pub fn hardware(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(cpu) = &self.cpu_model {
            parts.push(cpu.clone());
        }
        if let Some(n) = self.cpus {
            parts.push(format!("{n} CPUs"));
        }
        if let Some(gpu) = &self.gpu_name {
            match &self.gpu_driver {
                Some(d) => parts.push(format!("{gpu} (driver {d})")),
                None => parts.push(gpu.clone()),
            }
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Output of a cell that was not stored as metrics, counted per attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LineProblems {
    /// Lines that start like a JSON object but are not one (or carry an
    /// unusable `iteration`).
    pub malformed: i64,
    /// NaN / Infinity / out-of-range numbers (stored in `metric_nonfinite`).
    pub nonfinite: i64,
    /// Lines over the runner's line cap (their head is kept in the tail).
    pub overlong: i64,
    /// Metric lines past the plan's `iterations`, not stored (an arm
    /// without `variable_iterations`).
    pub extra: i64,
}

impl LineProblems {
    pub fn is_empty(&self) -> bool {
        *self == LineProblems::default()
    }
}

/// A numeric field whose value is not a finite number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NonFinite {
    NaN,
    Infinity,
    NegInfinity,
}

impl NonFinite {
    /// The spelling stored in `metric_nonfinite.value` (JSON5's / Python's).
    pub fn as_str(self) -> &'static str {
        match self {
            NonFinite::NaN => "NaN",
            NonFinite::Infinity => "Infinity",
            NonFinite::NegInfinity => "-Infinity",
        }
    }

    pub fn of(value: f64) -> Option<NonFinite> {
        if value.is_nan() {
            Some(NonFinite::NaN)
        } else if value == f64::INFINITY {
            Some(NonFinite::Infinity)
        } else if value == f64::NEG_INFINITY {
            Some(NonFinite::NegInfinity)
        } else {
            None
        }
    }
}

/// What the host was doing while a cell ran (migration 0009 documents each
/// field). `None` is unknown: a Slurm cell, a host without `/proc`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contention {
    pub cpu_seconds: Option<f64>,
    pub foreign_cpu_seconds: Option<f64>,
    pub host_seconds: Option<f64>,
    pub host_cpus: Option<i64>,
    pub steal_seconds: Option<f64>,
    pub load_start: Option<f64>,
    pub load_end: Option<f64>,
    pub cpu_mhz_min: Option<f64>,
    pub cpu_mhz_max: Option<f64>,
    pub swapped_pages: Option<i64>,
    pub gpu_other_processes: Option<i64>,
    /// Seconds the runner could not run during the cell (stopped, paused,
    /// starved): they are in the cell's wall time, not in the child's.
    pub runner_stall_seconds: Option<f64>,
    /// The programs outside the measurement that used the most CPU during
    /// the cell, busiest first (`None`: not measured).
    pub foreign_processes: Option<Vec<ForeignProcess>>,
}

/// A program outside the measurement that used the host's CPUs during a
/// cell: its name (`/proc/PID/stat`'s) and its load in cores, averaged
/// over the cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForeignProcess {
    pub name: String,
    pub cores: f64,
}

impl Contention {
    /// The average load, in cores, that the rest of the host put on it
    /// during the cell.
    pub fn foreign_cores(&self) -> Option<f64> {
        match (self.foreign_cpu_seconds, self.host_seconds) {
            (Some(cpu), Some(span)) if span > 0.0 => Some(cpu / span),
            _ => None,
        }
    }
}

/// A cell's fastest CPU phase beside its experiment's recorded ceiling
/// ([`crate::store::Store::fastest_phase`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FastestPhase {
    pub experiment: i64,
    /// The experiment's recorded FP32 ceiling and where it came from.
    pub ceiling: f64,
    pub source: Option<String>,
    /// `traversal` or `training`, and its highest GFLOP/s.
    pub phase: &'static str,
    pub rate: f64,
}

/// How a cell's child process ended, as recorded on its run row.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub status: RunStatus,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub error: Option<String>,
    pub stderr_tail: Option<String>,
    /// The cell's own time: from its start to its exit, without the time
    /// the runner then spent waiting for the database (`db_wait_seconds`).
    pub wall_seconds: f64,
    /// How long the runner waited for the database's write lock while the
    /// cell ran (`None`: not measured).
    pub db_wait_seconds: Option<f64>,
    pub problems: LineProblems,
}

/// One JSON line of a child, ready to store: its iteration, numeric
/// fields and text fields.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricLine {
    pub iteration: i64,
    pub numbers: Vec<(String, f64)>,
    pub texts: Vec<(String, String)>,
    /// Numeric fields that were NaN or infinite.
    pub nonfinite: Vec<(String, NonFinite)>,
}

/// One live numeric metric value.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricPoint {
    pub iteration: i64,
    pub name: String,
    pub value: f64,
}

/// Warm-up-excluded aggregate of one metric (a row of `run_metric_stats` or
/// `arm_metric_stats`).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricStats {
    pub experiment_id: i64,
    pub arm: String,
    /// `None` for per-arm aggregates.
    pub run_id: Option<i64>,
    pub repeat: Option<i64>,
    pub name: String,
    pub n: i64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Sample variance (n - 1); `None` when n < 2.
    pub variance: Option<f64>,
}

/// A row of the `reports` table.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRecord {
    pub id: i64,
    pub experiment_id: Option<i64>,
    pub path: String,
    pub sha256: String,
    pub format: String,
    pub created_at: String,
}
