//! The interleaved (batched) traversal scheduler (docs/deep-cfr.md §6.2).
//!
//! Many traversals are in flight at once. Each game is a *context* with its
//! own state, RNG and an explicit frame stack instead of recursion, so a
//! context can stop at a network query and resume when the answer arrives.
//! Pending queries of all contexts in the window are gathered and evaluated
//! in one batched forward per network, which is what makes this scheduler
//! fast on CPUs and GPUs alike.
//!
//! A context performs exactly the operations of the recursive scheduler's
//! node procedure, in the same order and with the same random draws, and
//! statistics are order-independent sums, so with the same per-game RNG
//! seeds ([`RecursiveTraverser::traverse_seeded`]) both schedulers produce
//! identical statistics and samples (samples are emitted in job order).
//! Which contexts share a batch changes nothing but speed.
//!
//! The parts, a file each:
//! - `context.rs`: a game in flight and the node procedure as a state
//!   machine over its frame stack, stopping at each network query;
//! - `scheduler.rs`: [`InterleavedTraverser`], its window of games and the
//!   round loop (fill the window, forward, hand answers back, retire
//!   finished games), and the feeds it takes games from;
//! - `batch.rs`: a round's queries, gathered per network and forwarded;
//! - `handoff.rs`: [`InterleavedTraverser::run_shared`], one scheduler per
//!   thread over a shared game queue, and the hand-off of games in flight;
//! - `tests.rs`: the parity tests against the recursive scheduler, and the
//!   helpers the other files' tests (each next to its code) share.
//!
//! This file holds the public settings, metrics and job types.
//!
//! [`RecursiveTraverser::traverse_seeded`]: super::traversal::RecursiveTraverser::traverse_seeded

mod batch;
mod context;
mod handoff;
mod scheduler;
#[cfg(test)]
mod tests;

pub use scheduler::InterleavedTraverser;

use super::policy::Policy;
use crate::game::GameState;

/// Window and batch settings (`traversal.interleave_*`, `run.deterministic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterleaveConfig {
    /// Games in flight at once (`interleave_width`).
    pub width: usize,
    /// Most requests forwarded per round (`interleave_max_batch`).
    pub max_batch: usize,
    /// Start a new game as soon as one finishes; `false` runs waves of
    /// `width` games like the reference.
    pub refill: bool,
    /// On a worker pool, let the workers share games (see
    /// [`InterleavedTraverser::run_shared`]) where forwards allow it.
    pub share_games: bool,
    /// Forward every request on its own (`run.deterministic`): results then
    /// cannot depend on how rows were batched.
    pub single_row_forwards: bool,
}

impl InterleaveConfig {
    /// Whether each row's result is the same whatever batch it comes in:
    /// `policy` says so, or every request is forwarded on its own. Only
    /// then may timing decide which games share a window.
    pub fn batch_invisible(&self, policy: &impl Policy) -> bool {
        policy.batch_invariant() || self.single_row_forwards
    }
}

impl Default for InterleaveConfig {
    fn default() -> Self {
        Self {
            width: 64,
            max_batch: 128,
            refill: true,
            share_games: true,
            single_row_forwards: false,
        }
    }
}

/// Batching counters and timings (`interleaved/*` metrics). `merge` sums
/// counts and seconds across workers and keeps the largest batch.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SchedulerMetrics {
    /// Rounds that forwarded at least one request.
    pub batches: u64,
    /// Requests forwarded.
    pub requests: u64,
    /// Most requests forwarded in one round.
    pub max_batch_size: u64,
    /// Policy calls: a round makes one per network it has requests for, so
    /// a call carries at most the round's batch.
    pub forwards: u64,
    /// Building inputs, forwarding and copying outputs back.
    pub forward_seconds: f64,
    /// Advancing contexts and collecting requests.
    pub scheduler_seconds: f64,
    /// Games in flight handed to a worker that had run out (shared games
    /// only; see [`InterleavedTraverser::run_shared`]).
    pub handed_over: u64,
}

impl SchedulerMetrics {
    /// Sums counts and seconds; the max batch size is a max.
    pub fn merge(&mut self, other: &SchedulerMetrics) {
        self.batches += other.batches;
        self.requests += other.requests;
        self.max_batch_size = self.max_batch_size.max(other.max_batch_size);
        self.forwards += other.forwards;
        self.forward_seconds += other.forward_seconds;
        self.scheduler_seconds += other.scheduler_seconds;
        self.handed_over += other.handed_over;
    }

    /// requests / batches (0 without batches), recomputed after merging.
    pub fn avg_batch_size(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.requests as f64 / self.batches as f64
        }
    }

    /// requests / forwards: the rows one network forward carries, the size
    /// to hold against `lcx bench forward` (0 without forwards).
    pub fn avg_rows_per_forward(&self) -> f64 {
        if self.forwards == 0 {
            0.0
        } else {
            self.requests as f64 / self.forwards as f64
        }
    }

    /// The `interleaved/*` metrics.
    pub fn metrics(&self) -> Vec<(String, f64)> {
        [
            ("batches", self.batches as f64),
            ("requests", self.requests as f64),
            ("avg_batch_size", self.avg_batch_size()),
            ("max_batch_size", self.max_batch_size as f64),
            ("forwards", self.forwards as f64),
            ("avg_rows_per_forward", self.avg_rows_per_forward()),
            ("forward_seconds", self.forward_seconds),
            ("scheduler_seconds", self.scheduler_seconds),
            ("handed_over", self.handed_over as f64),
        ]
        .into_iter()
        .map(|(k, v)| (format!("interleaved/{k}"), v))
        .collect()
    }
}

/// One traversal to run: a freshly dealt game, the traverser, the CFR
/// iteration stamped on its samples, and the seed of the game's own RNG.
#[derive(Clone)]
pub struct GameJob {
    pub state: GameState,
    pub traverser: usize,
    pub iteration: u32,
    pub rng_seed: u64,
}
