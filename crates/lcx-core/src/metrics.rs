//! The metric vocabulary: every name the trainer and the benches write into
//! a metric line, with its unit, which way is better and what it counts.
//!
//! Metric names are the contract between the trainer (which writes lines),
//! the runner (which stores them) and the reports (which judge them), so
//! they are listed once, here. The store copies the list into its
//! `metric_info` table for SQL and pandas users; the reports take units and
//! directions from it; a unit test runs the trainer and each bench and fails
//! on any name missing from it. Each name also says which of lcx's programs
//! write it ([`Writers`]): a gate or guard on a built-in workload may judge
//! only those (`experiment::plan` refuses the rest before anything runs).
//!
//! A name may hold `*` for one path segment or a segment's tail (the
//! opponent in `eval/*/win_rate0`, a depth range in
//! `traversal/endpoint_depth_bucket_*`): the same wildcard as SQLite's
//! `GLOB`, so `metrics.name GLOB metric_info.name` joins the two tables.
//! Names from `command` arms are not listed; the reports fall back to
//! reading a direction from the name for those.

use serde::{Deserialize, Serialize};

/// Which way a metric improves: `Lower` for times and costs, `Higher` for
/// throughputs and win rates, `Neither` for counts that describe the work
/// rather than judge it (nodes visited, samples stored). The one type for
/// "which way is better": the vocabulary below, an experiment file's
/// `direction` key and the reports' judgements all use it.
///
/// Serde writes it as the file and `metric_info.direction` do (`lower`,
/// `higher`, `none`); the report's JSON has its own spelling (see
/// `report::model`). A `Neither` metric is shown and never judged; where
/// arithmetic needs a side all the same, `Neither` takes `Lower`'s, as the
/// reports always have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Lower,
    Higher,
    /// `direction = "none"` on a column, or a count in the vocabulary: a
    /// description of the work (a batch size, µs per call across batch
    /// sizes), shown and never judged.
    #[serde(rename = "none")]
    Neither,
}

impl Direction {
    /// The word stored in `metric_info.direction` and written in a report's
    /// CSV: `lower`, `higher`, `none`.
    pub fn word(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
            Direction::Neither => "none",
        }
    }

    /// Parses a judged direction as people spell it (`lower` / `higher`,
    /// with a few common aliases); never `Neither`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "lower" | "lower_is_better" | "lower-is-better" | "down" | "min" => Some(Self::Lower),
            "higher" | "higher_is_better" | "higher-is-better" | "up" | "max" => Some(Self::Higher),
            _ => None,
        }
    }

    /// How much better `arm` is than `baseline`: their difference, sign
    /// flipped for lower-is-better (and `Neither`), so > 0 is better.
    pub fn gain(self, arm: f64, baseline: f64) -> f64 {
        match self {
            Self::Higher => arm - baseline,
            Self::Lower | Self::Neither => baseline - arm,
        }
    }
}

/// One entry of the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricInfo {
    /// The metric's name, possibly with `*` wildcards (see the module docs).
    pub name: &'static str,
    /// What a value is measured in, as a table header or axis shows it
    /// (`s`, `nodes/s`, `µs`); `1` for plain numbers and ratios.
    pub unit: &'static str,
    pub better: Direction,
    /// The built-in programs whose lines hold it.
    pub writers: Writers,
    pub description: &'static str,
}

/// A set of lcx's own programs that write metric lines: what a built-in
/// workload may be asked about. Each vocabulary entry says which write it,
/// so the vocabulary is the one list of what a workload emits (tests check
/// it against the lines the trainer and each bench really write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writers(u8);

impl Writers {
    /// `lcx train` (the `train` workload).
    pub const TRAIN: Writers = Writers(1);
    /// `lcx bench forward` (the `bench-forward` workload).
    pub const BENCH_FORWARD: Writers = Writers(1 << 1);
    /// `lcx bench trainer` (the `bench-trainer` workload).
    pub const BENCH_TRAINER: Writers = Writers(1 << 2);
    /// `lcx bench engine` (no workload runs it).
    pub const BENCH_ENGINE: Writers = Writers(1 << 3);
    /// `lcx bench peak` (no workload runs it).
    pub const BENCH_PEAK: Writers = Writers(1 << 4);
    /// `timing = "process"` arms: lcx times each run of the command.
    pub const PROCESS: Writers = Writers(1 << 5);
    /// `timing = "instructions"` arms: lcx counts each run under cachegrind.
    pub const COUNTED: Writers = Writers(1 << 6);

    /// Both sets.
    pub const fn and(self, other: Writers) -> Writers {
        Writers(self.0 | other.0)
    }

    /// Whether every writer of `other` is in this set.
    pub const fn includes(self, other: Writers) -> bool {
        self.0 & other.0 == other.0
    }
}

// Names used by more than the module that writes them.
pub const ITERATION_SECONDS: &str = "time/iteration_seconds";
pub const TRAVERSAL_SECONDS: &str = "time/traversal_seconds";
pub const NODES_PER_ITERATION_SECOND: &str = "time/nodes_per_second";
pub const NODES_PER_TRAVERSAL_SECOND: &str = "traversal/nodes_per_second";
pub const FORWARD_BATCH_MEAN: &str = "traversal/forward_batch_mean";
pub const FORWARD_BATCH_MAX: &str = "traversal/forward_batch_max";

const fn m(
    name: &'static str,
    unit: &'static str,
    better: Direction,
    writers: Writers,
    description: &'static str,
) -> MetricInfo {
    MetricInfo {
        name,
        unit,
        better,
        writers,
        description,
    }
}

use Direction::{Higher, Lower, Neither};
const TRAIN: Writers = Writers::TRAIN;
const BENCH_FORWARD: Writers = Writers::BENCH_FORWARD;
const BENCH_TRAINER: Writers = Writers::BENCH_TRAINER;
const BENCH_ENGINE: Writers = Writers::BENCH_ENGINE;
const BENCH_PEAK: Writers = Writers::BENCH_PEAK;
const PROCESS: Writers = Writers::PROCESS;
const COUNTED: Writers = Writers::COUNTED;

/// Every metric lcx writes. Exact names before wildcard ones; no two
/// entries match one name (a test checks).
// A table, one `m(...)` row per metric: its rows share a shape because
// they are data, and a helper per group would only hide the names.
pub const VOCABULARY: &[MetricInfo] = &[
    // Time per iteration, and its parts.
    m(ITERATION_SECONDS, "s", Lower, TRAIN, "Wall time of one training iteration: traversals, memory, training, evaluation and checkpoints."),
    m(TRAVERSAL_SECONDS, "s", Lower, TRAIN, "Wall time of the iteration's game-tree traversals (both players)."),
    m("time/memory_add_seconds", "s", Lower, TRAIN, "Time adding the traversals' samples to the reservoir memories."),
    m("time/advantage_train_seconds", "s", Lower, TRAIN, "Time training both advantage networks."),
    m("time/strategy_train_seconds", "s", Lower, TRAIN, "Time training the strategy network."),
    m("time/training_seconds", "s", Lower, TRAIN, "Time training all three networks."),
    m("time/training_queued_seconds", "s", Lower, TRAIN, "On a GPU: host time until every training step was queued, before waiting for the device (close to time/training_seconds: the host limits)."),
    m("time/evaluation_seconds", "s", Lower, TRAIN, "Time playing the evaluation games (iterations that evaluate only)."),
    m("time/checkpoint_seconds", "s", Lower, TRAIN, "Time writing checkpoints (included in time/iteration_seconds)."),
    m(NODES_PER_ITERATION_SECOND, "nodes/s", Higher, TRAIN, "Traversal nodes per second of the whole iteration (the reference's definition): traversal/nodes ÷ time/iteration_seconds."),
    // Traversal counters.
    m("traversal/nodes", "nodes", Neither, TRAIN, "Game-tree nodes the traversals visited."),
    m(NODES_PER_TRAVERSAL_SECOND, "nodes/s", Higher, TRAIN, "Traversal nodes per traversal second: traversal/nodes ÷ time/traversal_seconds. Not time/nodes_per_second, which divides by the whole iteration."),
    m(FORWARD_BATCH_MEAN, "rows", Neither, TRAIN, "Requests per network forward round: the interleaved scheduler's mean batch; 1 for the recursive scheduler, which forwards one state at a time."),
    m(FORWARD_BATCH_MAX, "rows", Neither, TRAIN, "Largest forward round of the iteration (1 for the recursive scheduler)."),
    m("traversal/terminals", "nodes", Neither, TRAIN, "Traversal nodes that ended the game."),
    m("traversal/depth_cutoffs", "nodes", Neither, TRAIN, "Traversals stopped by the depth limit."),
    m("traversal/node_limit_cutoffs", "nodes", Neither, TRAIN, "Traversals stopped by the node limit."),
    m("traversal/max_depth_reached", "depth", Neither, TRAIN, "Deepest node any traversal reached."),
    m("traversal/endpoint_depth_sum", "depth", Neither, TRAIN, "Sum of the depths at which traversals ended."),
    m("traversal/endpoints", "nodes", Neither, TRAIN, "Traversal endpoints: terminals and cut-offs."),
    m("traversal/avg_endpoint_depth", "depth", Neither, TRAIN, "Mean depth at which traversals ended."),
    m("traversal/endpoint_depth_bucket_*", "nodes", Neither, TRAIN, "Endpoints whose depth falls in the bucket's range."),
    m("traversal/sampled_actions", "count", Neither, TRAIN, "Actions sampled at opponent and chance nodes."),
    m("traversal/regret_matching_decisions", "count", Neither, TRAIN, "Decisions made by regret matching."),
    m("traversal/regret_fallback_*", "1", Neither, TRAIN, "Regret-matching fallbacks (no positive regret): counts, rates, depths and tie statistics."),
    // The interleaved scheduler's own counters.
    m("interleaved/batches", "count", Neither, TRAIN, "Scheduler rounds that forwarded at least one request."),
    m("interleaved/requests", "rows", Neither, TRAIN, "States forwarded by the scheduler."),
    m("interleaved/avg_batch_size", "rows", Neither, TRAIN, "Requests per round (requests ÷ batches)."),
    m("interleaved/max_batch_size", "rows", Neither, TRAIN, "Most requests forwarded in one round."),
    m("interleaved/forwards", "count", Neither, TRAIN, "Policy calls: one per network a round has requests for."),
    m("interleaved/avg_rows_per_forward", "rows", Neither, TRAIN, "Rows one network forward carries (requests ÷ forwards)."),
    m("interleaved/forward_seconds", "s", Lower, TRAIN, "Time building inputs, forwarding and copying outputs back, summed over workers."),
    m("interleaved/scheduler_seconds", "s", Lower, TRAIN, "Time advancing game contexts and collecting requests, summed over workers."),
    m("interleaved/handed_over", "count", Neither, TRAIN, "Games in flight handed to a worker that had run out (shared games)."),
    // Learning.
    m("loss/advantage", "1", Lower, TRAIN.and(BENCH_TRAINER), "Mean training loss of the two advantage networks this iteration."),
    m("loss/strategy", "1", Lower, TRAIN.and(BENCH_TRAINER), "Mean training loss of the strategy network this iteration."),
    m("loss/strategy_last", "1", Lower, TRAIN, "The strategy network's loss on its last step this iteration (the reference trainer's loss/strategy)."),
    m("samples/advantage", "samples", Neither, TRAIN, "Samples held in the advantage memories (both players)."),
    m("samples/strategy", "samples", Neither, TRAIN, "Samples held in the strategy memory."),
    m("samples/advantage_player_*", "samples", Neither, TRAIN, "Samples held in one player's advantage memory, and (_first_open) those from a first opening move."),
    m("memory/advantage", "samples", Neither, TRAIN, "Samples ever offered to the advantage memories (both players)."),
    m("memory/advantage_player_*", "samples", Neither, TRAIN, "Samples ever offered to one player's advantage memory."),
    m("memory/strategy", "samples", Neither, TRAIN, "Samples ever offered to the strategy memory."),
    m("amp/grad_scale", "1", Neither, TRAIN, "The AMP gradient scaler's current scale."),
    m("amp/nonfinite_loss_count", "count", Lower, TRAIN, "Training steps skipped for a non-finite loss under AMP."),
    m("amp/overflow_steps", "steps", Lower, TRAIN, "Steps of the iteration the AMP grad scaler skipped for inf/NaN gradients (0 when the steps ran fp32)."),
    m("gpu/memory_used_mib", "MiB", Lower, TRAIN, "Memory in use on the training GPU at the iteration's end (nvidia-smi, whole device): with libtorch's caching allocator, the run's peak so far plus the CUDA context."),
    // Evaluation games against a bot, network's side 0, bot's side 1.
    m("eval/*/games", "games", Neither, TRAIN, "Evaluation games played against the opponent."),
    m("eval/*/wins0", "games", Higher, TRAIN, "Games the network won."),
    m("eval/*/wins1", "games", Lower, TRAIN, "Games the opponent won."),
    m("eval/*/draws", "games", Neither, TRAIN, "Drawn games."),
    m("eval/*/win_rate0", "fraction", Higher, TRAIN, "Share of games the network won."),
    m("eval/*/win_rate1", "fraction", Lower, TRAIN, "Share of games the opponent won."),
    m("eval/*/avg_score0", "points", Higher, TRAIN, "The network's mean score per game."),
    m("eval/*/avg_score1", "points", Lower, TRAIN, "The opponent's mean score per game."),
    m("eval/*/avg_score_diff0", "points", Higher, TRAIN, "The network's mean score minus the opponent's."),
    m("eval/*/avg_game_length", "moves", Neither, TRAIN, "Mean moves per evaluation game."),
    m("eval/*/max_step_timeouts", "games", Lower, TRAIN, "Games stopped by the step limit."),
    m("eval/*/throughput", "games/s", Higher, TRAIN, "Evaluation games per second."),
    // Work and achieved rates (see `lcx bench peak` for the machine's).
    m("perf/forward_rows", "rows", Neither, TRAIN, "States the traversals forwarded through a network."),
    m("perf/traversal_flops", "FLOP", Neither, TRAIN, "Floating-point operations of the traversals' forwards."),
    m("perf/training_flops", "FLOP", Neither, TRAIN, "Floating-point operations of training (forward, backward, optimiser)."),
    m("perf/traversal_gflops", "GFLOP/s", Higher, TRAIN, "Achieved rate of the traversals' forwards."),
    m("perf/training_gflops", "GFLOP/s", Higher, TRAIN, "Achieved rate of training."),
    m("traversal/graphed_forwards", "forwards", Neither, TRAIN, "On a GPU: traversal forwards of the iteration replayed from a CUDA graph (traversal.cuda_graphs); 0 when every forward ran eagerly."),
    m("perf/graphed_steps", "steps", Neither, TRAIN, "On a GPU: training steps of the iteration replayed from a CUDA graph (optimization.cuda_graphs); 0 when every step ran eagerly."),
    m("peak/device_matmul_gflops", "GFLOP/s", Higher, TRAIN, "FP32 matrix-product rate on the training GPU at start-up (best of 5; TF32 off, libtorch's default): the ceiling of an fp32 arm."),
    m("peak/device_matmul_half_gflops", "GFLOP/s", Higher, TRAIN, "FP16 (tensor-core) matrix-product rate on the training GPU at start-up (best of 5): the ceiling of an AMP arm."),
    m("peak/device_matmul_spread", "ratio", Lower, TRAIN, "How far the 5 device matrix-product tries lay apart: max / min - 1."),
    // lcx bench peak.
    m("peak/threads", "threads", Neither, BENCH_PEAK, "Threads the peak probe used."),
    m("peak/bf16_gflops_core", "GFLOP/s", Higher, BENCH_PEAK, "Peak bf16 rate of one core (VDPBF16PS probe; only where the CPU has AVX512_BF16)."),
    m("peak/bf16_gflops", "GFLOP/s", Higher, BENCH_PEAK.and(TRAIN), "Peak bf16 rate of all cores (VDPBF16PS probe; only where the CPU has AVX512_BF16): on a training line, measured once when the run trains in bf16 on lcx's AVX512-BF16 kernel, the ceiling its phases are read against."),
    m("peak/fp32_gflops_core", "GFLOP/s", Higher, BENCH_PEAK, "Peak fp32 rate of one core (FMA probe)."),
    m("peak/fp32_gflops", "GFLOP/s", Higher, BENCH_PEAK, "Peak fp32 rate of all cores (FMA probe)."),
    m("peak/stream_gbytes_per_second", "GB/s", Higher, BENCH_PEAK, "Memory bandwidth (stream triad)."),
    m("peak/probe_seconds", "s", Neither, BENCH_PEAK, "Time the peak probe took."),
    m("peak/tries", "tries", Neither, BENCH_PEAK, "Clean all-core tries the host's best ceiling is the best of."),
    m("peak/spread", "ratio", Lower, BENCH_PEAK, "How far those tries lay apart: max / min - 1."),
    m("peak/probe_fp32_gflops", "GFLOP/s", Higher, BENCH_PEAK, "This probe's all-core fp32 rate (the ceiling keeps the best)."),
    m("peak/probe_fp32_gflops_core", "GFLOP/s", Higher, BENCH_PEAK, "This probe's one-core fp32 rate."),
    m("peak/probe_tries", "tries", Neither, BENCH_PEAK, "This probe's clean all-core tries."),
    m("peak/probe_discarded", "tries", Lower, BENCH_PEAK, "This probe's tries discarded because a thread lost its core."),
    m("peak/probe_spread", "ratio", Lower, BENCH_PEAK, "How far this probe's clean tries lay apart: max / min - 1."),
    m("peak/probe_disturbed", "0/1", Lower, BENCH_PEAK, "1 when no try of this probe was clean (a floor, not the ceiling)."),
    m("peak/matmul_gflops", "GFLOP/s", Higher, BENCH_PEAK, "FP32 matrix-product rate on --device (TF32 off, libtorch's default)."),
    m("peak/matmul_half_gflops", "GFLOP/s", Higher, BENCH_PEAK, "FP16 matrix-product rate on a CUDA --device (tensor cores)."),
    // lcx bench forward / trainer.
    m("batch_size", "rows", Neither, BENCH_FORWARD, "The batch size this bench forward line timed."),
    m("forwards", "count", Neither, BENCH_FORWARD, "Forward calls in this timed repetition."),
    m("bench/us_per_call", "µs", Lower, BENCH_FORWARD, "Time of one forward call at the line's batch size."),
    m("bench/us_per_state", "µs", Lower, BENCH_FORWARD, "Time of one forward call ÷ its batch size."),
    m("bench/ms_per_call", "ms", Lower, BENCH_TRAINER, "Time of one training call (advantage and strategy updates) in bench trainer."),
    m("bench/ms_per_step", "ms", Lower, BENCH_TRAINER, "Time of one training step in bench trainer: the call's time over its steps (2 × advantage_updates_per_iteration + strategy_updates_per_iteration); what PyTorch's step is compared with (scripts/torch-step-yardstick.py)."),
    m("bench/graphed_steps", "steps", Neither, BENCH_TRAINER, "Steps of the bench trainer call replayed from a CUDA graph (optimization.cuda_graphs on a GPU); 0 when they ran eagerly."),
    // lcx bench engine.
    m("bench/engine/games", "games", Neither, BENCH_ENGINE, "Random games played."),
    m("bench/engine/total_actions", "count", Neither, BENCH_ENGINE, "Actions applied over all games."),
    m("bench/engine/seconds", "s", Lower, BENCH_ENGINE, "Time playing the games."),
    m("bench/engine/games_per_second", "games/s", Higher, BENCH_ENGINE, "Random games per second."),
    m("bench/engine/actions_per_second", "actions/s", Higher, BENCH_ENGINE, "Actions per second, legal mask and random choice included."),
    m("bench/engine/mean_actions_per_game", "count", Neither, BENCH_ENGINE, "Mean actions per game."),
    m("bench/engine/ns_per_action", "ns", Lower, BENCH_ENGINE, "Time per action, legal mask and random choice included."),
    m("bench/engine/clone_ns", "ns", Lower, BENCH_ENGINE, "One clone of a mid-game state."),
    m("bench/engine/apply_undo_ns", "ns", Lower, BENCH_ENGINE, "One apply of a legal action and its undo."),
    m("bench/engine/encode_ns", "ns", Lower, BENCH_ENGINE, "One encoding of a mid-game state."),
    m("bench/engine/encode_dim", "1", Neither, BENCH_ENGINE, "Length of the encoded state."),
    m("bench/engine/state_bytes", "bytes", Neither, BENCH_ENGINE, "Bytes copied by a state clone."),
    // timing = "process": one run of an arm's command, timed by lcx.
    m(crate::bench::process::WALL, "s", Lower, PROCESS, "Wall time of one run of the command, from spawn to exit."),
    m(crate::bench::process::USER, "s", Lower, PROCESS, "User CPU time of the run (the command and the children it waited for)."),
    m(crate::bench::process::SYSTEM, "s", Lower, PROCESS, "System CPU time of the run (the command and the children it waited for)."),
    m(crate::bench::process::MAX_RSS, "bytes", Lower, PROCESS, "Peak resident memory of the run's largest process."),
    // timing = "instructions": one run of an arm's command under cachegrind.
    m(crate::bench::cachegrind::INSTRUCTIONS, "instructions", Lower, COUNTED, "Instructions one run of the command executed, its children included, counted by cachegrind (a shell string's start-up taken off)."),
    m(crate::bench::cachegrind::L1_MISSES, "misses", Lower, COUNTED, "First-level cache misses of the run (instruction reads, data reads and writes) in cachegrind's simulated cache."),
    m(crate::bench::cachegrind::LL_MISSES, "misses", Lower, COUNTED, "Last-level cache misses of the run (accesses that went to memory) in cachegrind's simulated cache."),
    m(crate::bench::cachegrind::ESTIMATED_CYCLES, "cycles", Lower, COUNTED, "Cycles estimated from cachegrind's counts as iai-callgrind does: 1 per first-level hit, 5 per last-level hit, 35 per access that went to memory."),
    m(crate::bench::cachegrind::VALGRIND_SECONDS, "s", Neither, COUNTED, "Wall time of the run under valgrind, tens of times the native one: a value beside the counts, never judged by default."),
    m(crate::bench::process::SHELL, "s", Neither, PROCESS, "A shell string's own start-up: the mean wall time of the empty `sh -c ''` that was taken off each run's wall, user and system time."),
];

/// SQLite's `GLOB` restricted to what the vocabulary uses: `*` matches any
/// run of characters; every other character matches itself.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            // Try each split point: patterns hold at most two stars.
            (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| glob(tail, &rest[i..]))
        }
    }
}

/// Whether `name` is a count that what else the host does cannot move
/// (cachegrind's counts of a run, `timing = "instructions"`): a gate or
/// guard on it is judged on contended cells like on quiet ones.
pub fn load_independent(name: &str) -> bool {
    lookup(name).is_some_and(|m| m.writers == COUNTED && m.better != Neither)
}

/// The vocabulary's entry for `name`, if lcx writes it.
pub fn lookup(name: &str) -> Option<&'static MetricInfo> {
    VOCABULARY
        .iter()
        .find(|i| i.name == name)
        .or_else(|| VOCABULARY.iter().find(|i| glob(i.name, name)))
}

/// The names `writer`'s lines may hold, wildcards included, in vocabulary
/// order: what a gate or guard on a built-in workload may name.
pub fn written_by(writer: Writers) -> impl Iterator<Item = &'static str> {
    VOCABULARY
        .iter()
        .filter(move |i| i.writers.includes(writer))
        .map(|i| i.name)
}

/// Whether `writer` ever writes `name` (in some configuration: the
/// evaluation metrics only when it evaluates, `amp/*` only under AMP).
pub fn writes(writer: Writers, name: &str) -> bool {
    written_by(writer).any(|pattern| glob(pattern, name))
}

/// The name among `writer`'s that `typo` most likely meant, by the one
/// "did you mean" rule (`toml_read::closest`). A wildcard name is compared
/// with its `*` segments filled from the typo's own (`eval/heuristic/win_rat0`
/// is one edit from `eval/heuristic/win_rate0`, not from `eval/*/win_rate0`).
pub fn closest_written(writer: Writers, typo: &str) -> Option<String> {
    let filled: Vec<String> = written_by(writer)
        .map(|pattern| fill_wildcards(pattern, typo))
        .collect();
    let known: Vec<&str> = filled.iter().map(String::as_str).collect();
    crate::toml_read::closest(typo, &known).map(str::to_string)
}

/// `pattern` with each `*` segment (or `prefix*` segment the typo's
/// segment starts with) replaced by the typo's segment at that place, when
/// both have as many segments; otherwise `pattern` as it is.
fn fill_wildcards(pattern: &str, typo: &str) -> String {
    let (ps, ts): (Vec<&str>, Vec<&str>) =
        (pattern.split('/').collect(), typo.split('/').collect());
    if !pattern.contains('*') || ps.len() != ts.len() {
        return pattern.to_string();
    }
    ps.iter()
        .zip(&ts)
        .map(|(p, t)| match p.strip_suffix('*') {
            Some(prefix)
                if !prefix.contains('*') && t.starts_with(prefix) && t.len() > prefix.len() =>
            {
                *t
            }
            _ => *p,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// `name` with its unit for a table header or an axis: `iter s` stays as it
/// is when it already ends in the unit; plain numbers get no unit.
pub fn with_unit(label: &str, metric: &str) -> String {
    match lookup(metric).map(|i| i.unit) {
        Some(unit) if unit != "1" && !names_unit(label, unit) => format!("{label} ({unit})"),
        _ => label.to_string(),
    }
}

/// Whether a label already says its unit: `iter s`, `nodes/s`, `us/call`
/// (`us` standing for µs, as ASCII-only files write it).
fn names_unit(label: &str, unit: &str) -> bool {
    label == unit
        || label
            .split([' ', '/', '(', ')'])
            .any(|w| w == unit || (unit == "µs" && w == "us"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_like_sqlite() {
        assert!(glob("eval/*/win_rate0", "eval/random/win_rate0"));
        assert!(!glob("eval/*/win_rate0", "eval/random/win_rate1"));
        assert!(glob(
            "traversal/endpoint_depth_bucket_*",
            "traversal/endpoint_depth_bucket_0_9"
        ));
        assert!(glob("a", "a") && !glob("a", "ab"));
    }

    #[test]
    fn no_two_entries_claim_one_name() {
        for (i, a) in VOCABULARY.iter().enumerate() {
            for b in &VOCABULARY[i + 1..] {
                assert_ne!(a.name, b.name);
                // A wildcard entry must not swallow another entry's name.
                assert!(
                    !glob(a.name, b.name) && !glob(b.name, a.name),
                    "{} vs {}",
                    a.name,
                    b.name
                );
            }
            assert!(
                !a.description.is_empty() && !a.unit.is_empty(),
                "{}",
                a.name
            );
        }
    }

    #[test]
    fn the_two_node_rates_are_told_apart() {
        let it = lookup(NODES_PER_ITERATION_SECOND).unwrap();
        let tr = lookup(NODES_PER_TRAVERSAL_SECOND).unwrap();
        assert!(it.description.contains("whole iteration"));
        assert!(tr.description.contains("traversal second"));
        assert_eq!(
            lookup("eval/heuristic/win_rate0").unwrap().better,
            Direction::Higher
        );
        assert!(lookup("my/own_metric").is_none());
    }

    /// The numeric fields of a metric line, `iteration` aside: what the
    /// runner stores as metrics.
    fn numeric_keys(line: &serde_json::Value) -> Vec<String> {
        let mut keys: Vec<String> = line
            .as_object()
            .expect("a metric line is an object")
            .iter()
            .filter(|(k, v)| *k != "iteration" && v.is_number())
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    fn listed(writer: Writers) -> Vec<String> {
        let mut names: Vec<String> = written_by(writer).map(str::to_string).collect();
        names.sort();
        names
    }

    #[test]
    fn each_bench_workload_lists_exactly_the_names_its_line_holds() {
        // The structs the benches serialise are their lines (`lcx bench
        // forward` and `trainer` write them as they are).
        let forward = serde_json::to_value(crate::bench::forward::ForwardSample {
            iteration: 1,
            batch_size: 4,
            forwards: 10,
            us_per_call: 2.0,
            us_per_state: 0.5,
        })
        .unwrap();
        assert_eq!(numeric_keys(&forward), listed(Writers::BENCH_FORWARD));
        let trainer = serde_json::to_value(crate::bench::trainer::TrainerSample {
            iteration: 1,
            precision: "fp32",
            precision_requested: "fp32",
            precision_reason: None,
            training_kernel: "lcx avx2-fma",
            ms_per_call: 3.0,
            ms_per_step: 1.0,
            graphed_steps: 0,
            loss_advantage: Some(0.5),
            loss_strategy: Some(0.25),
        })
        .unwrap();
        assert_eq!(numeric_keys(&trainer), listed(Writers::BENCH_TRAINER));
        let engine = crate::bench::engine::run(&crate::bench::engine::EngineBenchOptions {
            games: 1,
            warmup_games: 0,
            micro_iters: 1,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            numeric_keys(&engine.metric_line()),
            listed(Writers::BENCH_ENGINE)
        );
        // The trainer's names are held to its real lines by the
        // integration test `train::train_streams_metrics_and_writes_the_run_directory`.
        assert!(writes(Writers::TRAIN, "eval/heuristic/win_rate0"));
        assert!(writes(Writers::TRAIN, "loss/strategy"));
        assert!(writes(Writers::BENCH_TRAINER, "loss/strategy"));
        assert!(!writes(Writers::TRAIN, "bench/ms_per_call"));
        assert!(!writes(Writers::BENCH_FORWARD, ITERATION_SECONDS));
    }

    #[test]
    fn the_peak_line_holds_exactly_the_bench_peak_names() {
        // Every optional figure present: a probe ran and --device was given.
        let line = crate::bench::peak_line::PeakLine {
            iteration: 1,
            isa: "avx2-fma",
            threads: 4,
            fp32_gflops_core: 1.0,
            fp32_gflops: 4.0,
            stream_gbytes_per_second: 2.0,
            tries: 3,
            spread: 0.01,
            source: "probed",
            probe: Some(crate::bench::peak_line::ProbeFigures {
                fp32_gflops: 4.0,
                fp32_gflops_core: 1.0,
                tries: 3,
                discarded: 0,
                spread: 0.01,
                disturbed: 0,
                seconds: 0.5,
            }),
            matmul_gflops: Some(5.0),
            matmul_half_gflops: Some(9.0),
            bf16_gflops_core: Some(8.0),
            bf16_gflops: Some(16.0),
        };
        let value: serde_json::Value = serde_json::from_str(&line.to_json()).unwrap();
        assert_eq!(numeric_keys(&value), listed(Writers::BENCH_PEAK));
    }

    #[test]
    fn a_near_miss_is_matched_with_its_wildcards_filled() {
        let closest = |typo: &str| closest_written(Writers::TRAIN, typo);
        assert_eq!(
            closest("time/iteration_second").as_deref(),
            Some(ITERATION_SECONDS)
        );
        assert_eq!(
            closest("eval/heuristic/win_rat0").as_deref(),
            Some("eval/heuristic/win_rate0")
        );
        assert_eq!(closest("my/own_metric"), None);
        // Not a bench name for the trainer, however close.
        assert_eq!(
            closest_written(Writers::BENCH_FORWARD, "bench/us_per_cal").as_deref(),
            Some("bench/us_per_call")
        );
    }

    #[test]
    fn headers_carry_units_once() {
        assert_eq!(with_unit("iter", ITERATION_SECONDS), "iter (s)");
        assert_eq!(with_unit("iter s", ITERATION_SECONDS), "iter s");
        assert_eq!(with_unit("loss", "loss/strategy"), "loss");
        assert_eq!(with_unit("x", "unknown/thing"), "x");
        assert_eq!(
            with_unit(ITERATION_SECONDS, ITERATION_SECONDS),
            "time/iteration_seconds (s)"
        );
        assert_eq!(with_unit("nodes/s", NODES_PER_TRAVERSAL_SECOND), "nodes/s");
        assert_eq!(with_unit("us/call", "bench/us_per_call"), "us/call");
        assert_eq!(with_unit("per call", "bench/us_per_call"), "per call (µs)");
    }
}
