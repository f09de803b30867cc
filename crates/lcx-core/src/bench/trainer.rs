//! `lcx bench trainer`'s metric line. The timing lives in lcx-trainer (it
//! needs the networks); the line is defined here, next to the metric
//! vocabulary, so a test without libtorch holds the names it writes to the
//! `bench-trainer` workload's list in `metrics`.

use serde::Serialize;

/// One timed training call, as the line the experiment runner ingests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainerSample<'a> {
    pub iteration: usize,
    /// `fp32` or `amp`: what ran (AMP falls back to fp32 without CUDA).
    pub precision: &'a str,
    /// What the command line asked for.
    pub precision_requested: &'a str,
    /// What the steps ran on: `lcx avx512f`, `lcx avx2-fma`, `libtorch`,
    /// or `libtorch, CUDA graphs` when the call replayed any step from a
    /// graph.
    pub training_kernel: &'a str,
    #[serde(rename = "bench/ms_per_call")]
    pub ms_per_call: f64,
    /// Steps of the call replayed from a CUDA graph.
    #[serde(rename = "bench/graphed_steps")]
    pub graphed_steps: u64,
    /// `None` (written `null`) when the call trained no advantage network.
    #[serde(rename = "loss/advantage")]
    pub loss_advantage: Option<f64>,
    #[serde(rename = "loss/strategy")]
    pub loss_strategy: Option<f64>,
}
