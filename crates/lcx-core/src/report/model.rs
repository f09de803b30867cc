//! Plain report data: what a report says, independent of how it is shown.
//!
//! [`super::builder`] fills a [`Report`] from stored rows; the pure renderers
//! in [`super::render`] turn it into markdown, JSON or CSV. Keeping the data
//! separate lets the renderers be snapshot-tested on hand-built reports.

use serde::Serialize;

pub use super::prose::Prose;

use super::stats::{
    Comparison, Decision, Direction, GateTest, Speedup, Summary, Verdict, VerdictRule,
};

/// Everything one experiment's report says.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub experiment: Meta,
    /// The arm the others are compared with.
    pub baseline: String,
    pub rule: VerdictRule,
    /// Table columns, in order.
    pub columns: Vec<ReportColumn>,
    /// One row per arm, in plan order (baseline included).
    pub arms: Vec<ArmResult>,
    /// Cells that did not complete (failed, interrupted, skipped, pending).
    pub incomplete: Vec<CellNote>,
    /// Cells whose output was not all stored as metrics.
    pub line_problems: Vec<LineNote>,
    /// Completed cells during which the rest of the host used more CPU
    /// than `[measurement] max_foreign_cpu` allows.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contended: Vec<ContendedCell>,
    /// Cells the runner ran again after the schedule, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reruns: Vec<RerunNote>,
    /// How far each arm's phases got towards the recorded peak (arms whose
    /// trainer emitted `perf/*` rates).
    pub roofline: Option<Roofline>,
    pub total_cells: usize,
    pub gate: Option<GateOutcome>,
    /// The `[[guard]]`s, per guarded arm.
    pub guards: Vec<GuardOutcome>,
    /// What `--check` acts on: the gate's decision combined with the
    /// guards', and INCONCLUSIVE while any cell did not complete or an arm
    /// has no data; PASS only when every cell completed and every gate and
    /// guard passed (or there is none).
    pub check: Decision,
    /// Why `check` is not PASS beyond the gate and guards: cells that did
    /// not complete, arms without data.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub check_notes: Vec<Prose>,
    /// `check` is INCONCLUSIVE because a gate or guard rests on contended
    /// cells (and `--allow-contended` was not given).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub check_on_contended: bool,
    /// The one-line summary without a gate (also shown with one).
    pub net_result: Prose,
    pub reproduce: Reproduce,
    /// lcx version, git commit, file hash, host and device fingerprint.
    pub environment: Vec<(Prose, String)>,
    pub runs: Vec<RunRef>,
    /// The experiment file's `notes`.
    pub notes: String,
    /// What lcx itself wants the reader to know (unknown metric directions,
    /// partial arms, a plan it could not read).
    pub remarks: Vec<Prose>,
    /// Plots written beside an archived report: (title, relative path).
    pub plots: Vec<(String, String)>,
    /// `[sweep]`: each arm at each point, where each starts to pay, and how
    /// the cost scales along the axis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepReport>,
}

/// A sweep's answer on the primary metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    pub metric: String,
    pub label: String,
    #[serde(serialize_with = "report_direction")]
    pub direction: Direction,
    pub axes: Vec<crate::experiment::SweepAxis>,
    /// The key crossovers run along.
    pub along: String,
    /// The file's arm every other is compared with, at each point.
    pub baseline: String,
    /// The file's arms, in plan order (the baseline among them).
    pub arms: Vec<String>,
    /// The axis counts workers or threads: each point has an efficiency.
    pub workers: bool,
    /// One row per point, in plan order.
    pub points: Vec<SweepRow>,
    /// Each arm's crossover: the first value of the axis from which it is
    /// improved and stays so, or null (none in the range, or undetermined:
    /// see [`Crossover::determined`]). With several axes, one per series
    /// (a combination of the other axes' values), keyed by its label.
    pub crossover: std::collections::BTreeMap<String, serde_json::Value>,
    /// The crossovers with their evidence, one per (arm, series).
    pub crossovers: Vec<Crossover>,
}

impl SweepReport {
    /// A sweep of one arm that no gate or guard judges: a scan, reported
    /// per point (the net result and the sweep section), never as verdicts
    /// against its first point. The builder and every renderer ask this.
    pub fn is_scan(&self, judged: bool) -> bool {
        self.arms.len() == 1 && !judged
    }

    /// The axis crossovers run along, with its place among the axes.
    pub fn along_axis(&self) -> Option<(usize, &crate::experiment::SweepAxis)> {
        self.axes
            .iter()
            .enumerate()
            .find(|(_, a)| a.key == self.along)
    }
}

/// The series of a sweep's points, in the order their first point comes.
pub fn series_of(points: &[SweepRow]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for p in points {
        if !out.contains(&p.series.as_str()) {
            out.push(&p.series);
        }
    }
    out
}

/// One point of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// A value per axis.
    pub values: Vec<String>,
    /// The other axes' values (`num_layers 3`); empty with one axis.
    pub series: String,
    pub cells: Vec<SweepCell>,
}

/// One arm at one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepCell {
    /// The file's arm.
    pub arm: String,
    /// The arm the sweep made of it at this point.
    pub run_arm: String,
    pub summary: Option<Summary>,
    /// Against the baseline at this point (`None` for the baseline).
    pub comparison: Option<Comparison>,
    /// Against the same arm at the series' first point.
    pub scaling: Option<Speedup>,
    /// A workers axis: `scaling` ÷ the ratio of workers to the first
    /// point's (1 is perfect strong scaling).
    pub efficiency: Option<f64>,
}

/// Where one arm starts to pay along one series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Crossover {
    pub arm: String,
    pub series: String,
    /// The first point of the trailing run of improved points.
    pub point: Option<String>,
    pub speedup: Option<Speedup>,
    /// The point just before it, where it did not pay (or the last point
    /// when there is no crossover), with its speedup and verdict.
    pub before: Option<(String, Option<Speedup>, Verdict)>,
    /// False when that point was not judged (no data, an arm that ran
    /// another precision): it may pay too, so where the arm starts to pay
    /// is unknown (`point` says only from where it surely does, and the
    /// JSON's `crossover` is null).
    pub determined: bool,
}

/// Experiment metadata.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Meta {
    pub id: i64,
    pub name: String,
    pub description: String,
    pub workload: String,
    /// `YYYY-MM-DD` of `created_at`.
    pub date: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub status: String,
    pub iterations: i64,
    pub warmup: i64,
    /// `warmup = "auto"`: each run's warm-up was detected (see [`RunRef`]).
    pub warmup_auto: bool,
    pub repeats: i64,
    pub file_path: String,
}

/// What a table column shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnKind {
    /// Warm-up-excluded mean ± sd.
    Value,
    /// Speedup over the baseline ± standard error.
    Speedup,
}

/// One column of the arm table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportColumn {
    pub metric: String,
    pub label: String,
    pub kind: ColumnKind,
    #[serde(serialize_with = "report_direction")]
    pub direction: Direction,
    /// False when the direction was guessed (unknown metric name, no
    /// `direction` in the file).
    pub direction_known: bool,
    /// Shown, never judged (see [`MetricResult::descriptive`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub descriptive: bool,
    /// `Last`: each cell contributed its last value (`fold = "last"`).
    #[serde(skip_serializing_if = "crate::experiment::Fold::is_mean")]
    pub fold: crate::experiment::Fold,
}

/// One metric of one arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricResult {
    pub metric: String,
    #[serde(serialize_with = "report_direction")]
    pub direction: Direction,
    /// Pooled over every post-warm-up iteration of the arm's runs (each
    /// cell's folded value, where a fold makes it one).
    pub summary: Option<Summary>,
    /// Where each cell folds to its median or fastest run: every
    /// post-warm-up run before the fold, pooled (the range and run count
    /// hyperfine prints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<Summary>,
    /// What the test used: the pooled summary with one run, the summary of
    /// the run means with several.
    pub replicate: Option<Summary>,
    /// Number of replicates the test used (iterations with one run, runs
    /// with several).
    pub replicates: usize,
    /// `iterations` or `repeats`.
    pub replicate_unit: String,
    /// Iterations excluded as warm-up, summed over runs.
    pub excluded_warmup: i64,
    /// Against the baseline; `None` for the baseline itself, without data,
    /// or for a descriptive metric.
    pub comparison: Option<Comparison>,
    /// A count of the work (batch size, nodes visited) with no better side
    /// in the metric vocabulary and none given in the file: shown, never
    /// judged.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub descriptive: bool,
}

/// One arm's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmResult {
    pub name: String,
    pub label: String,
    pub is_baseline: bool,
    /// Cells of this arm and how many completed.
    pub cells: usize,
    pub completed: usize,
    /// Statistics come from runs that did not complete (no completed run).
    pub partial: bool,
    /// Why no verdict, gate or guard uses this arm's numbers, when none
    /// does: too few completed cells for the rule (their data, if any, are
    /// shown, marked, never judged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unjudged: Option<Prose>,
    pub metrics: Vec<MetricResult>,
    /// The code revision the arm ran (`main@1a2b3c4d5e6f`), when it ran one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// In a sweep: the arm it is compared with (the baseline at its point).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared_with: Option<String>,
}

impl ArmResult {
    pub fn metric(&self, name: &str) -> Option<&MetricResult> {
        self.metrics.iter().find(|m| m.metric == name)
    }

    /// Whether its comparison on `metric` was judged on randomized rounds
    /// as pairs.
    pub fn paired_on(&self, metric: &str) -> bool {
        self.metric(metric)
            .and_then(|m| m.comparison)
            .is_some_and(|c| c.paired_rounds.is_some())
    }
}

/// A cell run again after the schedule (`[measurement] rerun_contended`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RerunNote {
    pub run_id: i64,
    pub arm: String,
    pub repeat: i64,
    pub attempt: i64,
    pub why: String,
}

/// A cell measured while other programs used the host's CPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContendedCell {
    pub run_id: i64,
    pub arm: String,
    pub repeat: i64,
    /// The rest of the host's average load during the cell, in cores.
    pub foreign_cores: f64,
    /// The load above which a cell is contended.
    pub threshold: f64,
    /// In randomized rounds: whether every cell of its round saw the same
    /// contention, so the round is still judged as a pair (`false`: left
    /// out); `None` in other orders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_even: Option<bool>,
    /// The programs that used the host most meanwhile, busiest first
    /// (empty: not recorded, or none above 0.05 of a core).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub busiest: Vec<crate::store::ForeignProcess>,
}

/// A cell that did not complete, never silently missing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellNote {
    pub run_id: i64,
    pub arm: String,
    pub repeat: i64,
    pub status: String,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    /// The error, or the skip reason.
    pub reason: Option<String>,
    pub iterations_done: i64,
}

/// A cell whose output was not all stored as metrics: malformed and
/// overlong lines, and non-finite values (kept apart, listed here).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineNote {
    pub run_id: i64,
    pub arm: String,
    pub repeat: i64,
    pub malformed: i64,
    pub nonfinite_values: i64,
    pub overlong: i64,
    /// Metric lines past `iterations`, not stored.
    pub extra: i64,
    /// `loss/strategy: NaN at iterations 3, 4`, one entry per metric.
    pub nonfinite: Vec<Prose>,
}

/// Each arm's phase rates against the machine's measured ceiling.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Roofline {
    /// `lcx bench peak` at the experiment's start (all cores / one core).
    pub peak_gflops: Option<f64>,
    pub peak_gflops_core: Option<f64>,
    pub isa: Option<String>,
    pub threads: Option<i64>,
    /// How the ceiling was found: "best of 5, spread 2 %, probed
    /// 2026-12-03, cached" (`None` for experiments before migration 0011).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
    /// What the runner did when a phase ran faster than the ceiling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub arms: Vec<RooflineArm>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RooflineArm {
    pub arm: String,
    /// Warm-up-excluded means of `perf/traversal_gflops` and
    /// `perf/training_gflops`.
    pub traversal_gflops: Option<f64>,
    pub training_gflops: Option<f64>,
    /// A GPU arm's measured FP32 matrix-product ceiling
    /// (`peak/device_matmul_gflops`, TF32 off).
    pub device_peak_gflops: Option<f64>,
    /// An AMP arm's FP16 tensor-core ceiling
    /// (`peak/device_matmul_half_gflops`, measured only when AMP ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_half_peak_gflops: Option<f64>,
    /// A CPU arm that trained in bf16 on `VDPBF16PS`: the host's bf16
    /// ceiling (`peak/bf16_gflops`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bf16_peak_gflops: Option<f64>,
}

impl RooflineArm {
    /// The ceiling this arm is read against: an AMP arm's FP16 ceiling, a
    /// GPU arm's FP32 one, a bf16 arm's `VDPBF16PS` one, else the host's
    /// FMA peak.
    pub fn ceiling(&self, host: Option<f64>) -> Option<f64> {
        self.device_half_peak_gflops
            .or(self.device_peak_gflops)
            .or(self.bf16_peak_gflops)
            .or(host)
    }

    /// Which ceiling [`RooflineArm::ceiling`] is, in words.
    pub fn ceiling_name(&self) -> &'static str {
        if self.device_half_peak_gflops.is_some() {
            "GPU FP16 matmul (tensor cores)"
        } else if self.device_peak_gflops.is_some() {
            "GPU FP32 matmul (TF32 off)"
        } else if self.bf16_peak_gflops.is_some() {
            "host bf16 VDPBF16PS"
        } else {
            "host FP32 FMA"
        }
    }
}

/// The gate's decision for one arm.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateArm {
    pub arm: String,
    pub speedup: Option<Speedup>,
    pub verdict: Verdict,
    /// `decision == Pass` (kept for tools that read `pass`).
    pub pass: bool,
    pub decision: Decision,
    /// Why it did not pass, when it did not.
    pub why: Option<Prose>,
}

/// The experiment's gate, evaluated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateOutcome {
    pub metric: String,
    pub label: String,
    pub min_speedup: f64,
    pub test: GateTest,
    /// The rule applied and its error rate, in one line.
    pub rule: String,
    pub arms: Vec<GateArm>,
    /// `decision == Pass`.
    pub pass: bool,
    /// FAIL if any arm fails, else INCONCLUSIVE if any is, else PASS.
    pub decision: Decision,
}

/// One `[[guard]]` on one arm, evaluated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuardOutcome {
    pub metric: String,
    pub arm: String,
    /// The arm it is compared with (the guard's own or the experiment's).
    pub baseline: String,
    /// `Last`: each cell's final value was compared.
    pub fold: crate::experiment::Fold,
    pub margin: f64,
    #[serde(serialize_with = "report_direction")]
    pub direction: Direction,
    /// `paired = true`: the repeats both arms ran, whose per-repeat
    /// differences the test used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
    /// `None` when either side has no data.
    pub test: Option<super::stats::GuardTest>,
    pub decision: Decision,
    pub why: Option<Prose>,
}

/// A direction as the report's JSON has always spelled it,
/// `lower_is_better` or `higher_is_better`, where the experiment file and
/// the database write `lower`, `higher` or `none`. A row's direction is a
/// side to judge on; `Neither` takes lower's, as [`Direction`] says.
fn report_direction<S: serde::Serializer>(d: &Direction, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match d {
        Direction::Higher => "higher_is_better",
        Direction::Lower | Direction::Neither => "lower_is_better",
    })
}

/// Commands that reproduce the experiment.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Reproduce {
    /// `lcx run <file> --set …`.
    pub experiment: String,
    /// (arm, command of its first cell), shell-quoted.
    pub cells: Vec<(String, String)>,
}

/// A run id and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRef {
    pub run_id: i64,
    pub arm: String,
    pub repeat: i64,
    pub status: String,
    pub iterations_done: i64,
    pub wall_seconds: Option<f64>,
    /// Seconds of `wall_seconds` the runner could not run (stopped, a
    /// paused machine): in the wall time, not in what the child timed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_stall_seconds: Option<f64>,
    /// Leading iterations this run excluded as warm-up.
    pub warmup: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The cell's Slurm job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<String>,
    /// Its job script (`runs/slurm/run-<id>-attempt-<n>-pid<p>/job.sh`),
    /// which `sbatch` runs again as it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm_script: Option<String>,
}

/// Quotes one argument for a POSIX shell, only when it needs it.
pub fn shell_quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if safe {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Joins an argv into one shell-quoted line.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(
            shell_quote("traversal.num_workers=8"),
            "traversal.num_workers=8"
        );
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(
            shell_line(&["sh".into(), "-c".into(), "echo $X".into()]),
            "sh -c 'echo $X'"
        );
    }

    #[test]
    fn an_arm_is_read_against_the_peak_of_the_precision_it_ran() {
        let arm = |fp32: Option<f64>, half: Option<f64>| RooflineArm {
            arm: "a".into(),
            traversal_gflops: None,
            training_gflops: Some(10.0),
            device_peak_gflops: fp32,
            device_half_peak_gflops: half,
            bf16_peak_gflops: None,
        };
        let host = Some(200.0);
        let cpu = arm(None, None);
        assert_eq!(
            (cpu.ceiling(host), cpu.ceiling_name()),
            (host, "host FP32 FMA")
        );
        let fp32 = arm(Some(50_000.0), None);
        assert_eq!(
            (fp32.ceiling(host), fp32.ceiling_name()),
            (Some(50_000.0), "GPU FP32 matmul (TF32 off)")
        );
        let amp = arm(Some(50_000.0), Some(600_000.0));
        assert_eq!(
            (amp.ceiling(host), amp.ceiling_name()),
            (Some(600_000.0), "GPU FP16 matmul (tensor cores)")
        );
        let bf16 = RooflineArm {
            bf16_peak_gflops: Some(900.0),
            ..arm(None, None)
        };
        assert_eq!(
            (bf16.ceiling(host), bf16.ceiling_name()),
            (Some(900.0), "host bf16 VDPBF16PS")
        );
    }
}
