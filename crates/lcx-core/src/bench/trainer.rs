//! `lcx bench trainer`'s metric line. The timing lives in lcx-trainer (it
//! needs the networks); the line is defined here, next to the metric
//! vocabulary, so a test without libtorch holds the names it writes to the
//! `bench-trainer` workload's list in `metrics`.

use serde::Serialize;

/// Whether a line that asked for precision `asked` ran it: the same word,
/// or `bf16` for `amp` (AMP on a CPU is bf16 mixed precision, as PyTorch's
/// CPU autocast; on CUDA it is fp16 with a grad scaler, written `amp`).
pub fn ran_as_asked(asked: &str, ran: &str) -> bool {
    asked == ran || (asked == "amp" && ran == "bf16")
}

/// One timed training call, as the line the experiment runner ingests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainerSample<'a> {
    pub iteration: usize,
    /// What ran: `fp32`, `amp` (fp16 autocast on CUDA) or `bf16` (AMP on
    /// a CPU: lcx's bf16 step).
    pub precision: &'a str,
    /// What the command line asked for: `fp32` or `amp`.
    pub precision_requested: &'a str,
    /// Why AMP, asked for, ran fp32; absent where it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision_reason: Option<&'a str>,
    /// What the steps ran on: `lcx avx512f`, `lcx avx2-fma`, `libtorch`,
    /// or `libtorch, CUDA graphs` when the call replayed any step from a
    /// graph.
    pub training_kernel: &'a str,
    #[serde(rename = "bench/ms_per_call")]
    pub ms_per_call: f64,
    /// The call's time over its steps (both advantage networks' and the
    /// strategy network's): the figure another trainer's step is held to.
    #[serde(rename = "bench/ms_per_step")]
    pub ms_per_step: f64,
    /// Steps of the call replayed from a CUDA graph.
    #[serde(rename = "bench/graphed_steps")]
    pub graphed_steps: u64,
    /// `None` (written `null`) when the call trained no advantage network.
    #[serde(rename = "loss/advantage")]
    pub loss_advantage: Option<f64>,
    #[serde(rename = "loss/strategy")]
    pub loss_strategy: Option<f64>,
}
