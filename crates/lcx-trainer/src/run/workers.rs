//! Running an iteration's traversals over the trainer's libtorch networks
//! (docs/deep-cfr.md §6.3 with lcx's §0 choices): in the calling thread
//! (`traversal.num_workers = 0`) or on a dedicated rayon pool of N threads
//! that share the networks read-only, each with one libtorch intra-op
//! thread. The generic part (seeds, chunks, deterministic merge) lives in
//! [`lcx_core::cfr::workers`]; this file adds what needs tch.
//!
//! libtorch's thread setting: `at::set_num_threads` stores a process-wide
//! default (picked up by threads that start using libtorch later) and sets
//! the calling thread's OpenMP/MKL thread count, which is per thread. Each
//! worker thread sets 1 for itself when it starts; because that also
//! overwrites the process-wide default, [`run_traversals`] restores the
//! calling thread's count afterwards, so training keeps all cores.

use lcx_core::cfr::interleaved::{InterleaveConfig, SchedulerMetrics};
use lcx_core::cfr::policy::{Net, Policy, PolicyError};
use lcx_core::cfr::traversal::{TraversalError, TraversalOutput, TraversalParams};
use lcx_core::cfr::workers::{plan_chunks, SchedulerKind, SeedPlan, TraversalPlan};
use lcx_core::config::{self as cfg, TrainerConfig};

use crate::nn::policy::TorchPolicy;

/// Why traversals could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Traversal(#[from] TraversalError),
    #[error("could not start {workers} traversal worker thread(s): {message}")]
    Pool { workers: usize, message: String },
}

/// The trainer's policy, shared by reference with the worker threads.
struct SharedPolicy<'a>(TorchPolicy<'a>);

// SAFETY: `tch::Tensor` is `Send` but not `Sync` because libtorch tensors
// are not safe to *mutate* concurrently. Here the networks are only read:
// `TorchPolicy::evaluate` runs each forward under a (thread-local) no_grad
// guard, which reads the parameters and allocates fresh outputs, and
// libtorch's reference counts are atomic. Nothing writes the parameters
// while workers hold this reference: `run_traversals` borrows the networks
// immutably for the whole traversal phase and joins every worker before
// returning, and the optimiser steps (which need `&mut`) run only after.
unsafe impl Sync for SharedPolicy<'_> {}

// Forwards each method to the wrapped TorchPolicy; the signature repeats
// `Policy::evaluate`'s because an impl must spell it out.
impl Policy for SharedPolicy<'_> {
    fn evaluate(
        &self,
        net: Net,
        states: &[f32],
        rows: usize,
        out: &mut [f32],
    ) -> Result<(), PolicyError> {
        self.0.evaluate(net, states, rows, out)
    }

    fn batch_invariant(&self) -> bool {
        self.0.batch_invariant()
    }
}

/// The scheduler a trainer config asks for.
pub fn scheduler_kind(c: &TrainerConfig) -> SchedulerKind {
    let t = &c.traversal;
    match t.scheduler {
        cfg::Scheduler::Recursive => SchedulerKind::Recursive,
        cfg::Scheduler::Interleaved => SchedulerKind::Interleaved(InterleaveConfig {
            width: t.interleave_width as usize,
            max_batch: t.interleave_max_batch as usize,
            refill: t.interleave_refill,
            share_games: t.interleave_share_games,
            single_row_forwards: c.run.deterministic,
        }),
    }
}

/// An iteration's traversal results.
#[derive(Debug, Clone, PartialEq)]
pub struct TraversalResult {
    pub output: TraversalOutput,
    /// Batching metrics; `None` under the recursive scheduler.
    pub scheduler: Option<SchedulerMetrics>,
    /// Worker threads used (0 = the calling thread).
    pub workers: usize,
}

/// Restores the calling thread's libtorch intra-op thread count on drop.
pub(crate) struct RestoreTorchThreads(pub(crate) i32);

impl Drop for RestoreTorchThreads {
    fn drop(&mut self) {
        tch::set_num_threads(self.0);
    }
}

/// Runs iteration `iteration`'s traversals for both players with the
/// configured scheduler and worker count. Samples come out in (player,
/// game index) order whatever the worker count.
pub fn run_traversals(
    config: &TrainerConfig,
    params: &TraversalParams,
    policy: TorchPolicy<'_>,
    dim: usize,
    iteration: u64,
) -> Result<TraversalResult, WorkerError> {
    let t = &config.traversal;
    let kind = scheduler_kind(config);
    let plan = TraversalPlan {
        params,
        scheduler: kind,
        rules: &config.rules,
        seeds: SeedPlan {
            run_seed: config.run.seed,
            iteration,
        },
        dim,
    };
    let chunks = plan_chunks(
        u64::from(t.traversals_per_player),
        u64::from(t.worker_chunk_size),
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = t.num_workers.resolve(cpus, chunks.len());
    let out = if workers == 0 {
        // One scheduler over every game: the interleaved window is not cut
        // at chunk borders.
        plan.run(&policy, &chunks)?
    } else {
        let _restore = RestoreTorchThreads(tch::get_num_threads());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("lcx-traversal-{i}"))
            .start_handler(|_| tch::set_num_threads(1))
            .build()
            .map_err(|e| WorkerError::Pool {
                workers,
                message: e.to_string(),
            })?;
        plan.run_parallel(&SharedPolicy(policy), &chunks, &pool)?
    };
    Ok(TraversalResult {
        output: out.output,
        scheduler: matches!(kind, SchedulerKind::Interleaved(_)).then_some(out.scheduler),
        workers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::network::{Activation, MlpSpec};
    use crate::nn::optim::{AdamWConfig, NetTrainer};
    use crate::run::train::{traversal_params, Trainer};
    use lcx_core::cfr::regret::ACTIONS;
    use lcx_core::cfr::workers::Chunk;
    use lcx_core::encoding::Encoding;
    use lcx_core::game::{GameState, Rules};
    use tch::Device;

    fn smoke() -> TrainerConfig {
        crate::smoke_config()
    }

    /// Three small MLPs (adv0, adv1, strategy) for 297-wide info states.
    fn nets() -> [NetTrainer; 3] {
        let spec = MlpSpec {
            input_dim: 297,
            hidden_size: 48,
            num_layers: 2,
            outputs: ACTIONS,
            activation: Activation::Relu,
        };
        let adam = AdamWConfig {
            learning_rate: 1e-3,
            weight_decay: 0.0,
        };
        tch::manual_seed(7);
        [0, 1, 2].map(|_| NetTrainer::new(spec, Device::Cpu, adam).unwrap())
    }

    fn policy(nets: &[NetTrainer; 3]) -> TorchPolicy<'_> {
        let advantage = [&nets[0].net, &nets[1].net];
        TorchPolicy {
            advantage,
            strategy: &nets[2].net,
            device: Device::Cpu,
            dim: 297,
            native: TorchPolicy::native_snapshots(advantage, &nets[2].net).unwrap(),
            rows: None,
            graphs: None,
        }
    }

    /// The same networks with every forward in libtorch.
    fn libtorch_policy(nets: &[NetTrainer; 3]) -> TorchPolicy<'_> {
        TorchPolicy {
            native: None,
            ..policy(nets)
        }
    }

    /// Both ways the trainer can run forwards, with whether a row's result
    /// is exactly independent of its batch (lcx's kernel) or only up to
    /// rounding (libtorch, whose summation order depends on the batch).
    fn policies(nets: &[NetTrainer; 3]) -> Vec<(TorchPolicy<'_>, bool)> {
        let native = policy(nets);
        let exact = native.native.is_some();
        vec![(native, exact), (libtorch_policy(nets), false)]
    }

    #[test]
    fn batched_rows_match_batches_of_one() {
        let nets = nets();
        for (policy, exact) in policies(&nets) {
            batched_rows_match(&policy, exact);
        }
    }

    fn batched_rows_match(policy: &TorchPolicy<'_>, exact: bool) {
        let enc = Encoding {
            derived_playability: true,
            slot_aware_playability: true,
        };
        let rules = Rules::default();
        let rows = 24;
        let mut states = Vec::new();
        for s in 0..rows {
            let state = GameState::new(&rules, 1000 + s as u64).unwrap();
            states.extend(enc.encode_vec(&state, s % 2));
        }
        for net in [Net::Advantage(0), Net::Advantage(1), Net::Strategy] {
            let mut batched = vec![0.0f32; rows * ACTIONS];
            policy.evaluate(net, &states, rows, &mut batched).unwrap();
            for r in 0..rows {
                let mut single = [0.0f32; ACTIONS];
                policy
                    .evaluate(net, &states[r * 297..(r + 1) * 297], 1, &mut single)
                    .unwrap();
                let row = &batched[r * ACTIONS..(r + 1) * ACTIONS];
                if exact {
                    assert_eq!(single[..], row[..], "{net:?} row {r}");
                }
                for (a, b) in single.iter().zip(row) {
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + a.abs()),
                        "{net:?} row {r}: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// With a real MLP the interleaved scheduler samples the same actions as
    /// the recursive one on these seeds: same statistics, info states and
    /// masks, and targets equal within float tolerance where batching
    /// changes outputs by rounding (libtorch). With lcx's kernel a row's
    /// output does not depend on its batch, so the outputs are identical.
    #[test]
    fn torch_schedulers_sample_the_same_actions() {
        let nets = nets();
        for (policy, exact) in policies(&nets) {
            schedulers_agree(&policy, exact);
        }
    }

    fn schedulers_agree(policy: &TorchPolicy<'_>, exact: bool) {
        let rules = Rules::default();
        let mut c = smoke();
        c.encoding.derived_playability = true;
        c.encoding.slot_aware_playability = true;
        c.traversal.max_depth = None;
        c.traversal.max_nodes_per_traversal = Some(150);
        c.traversal.store_strategy_on_opponent_nodes = true;
        for opponent in [
            cfg::OpponentPolicy::Network,
            cfg::OpponentPolicy::AverageStrategy,
        ] {
            c.traversal.opponent_policy = opponent;
            let params = traversal_params(&c);
            let plan = |kind| TraversalPlan {
                params: &params,
                scheduler: kind,
                rules: &rules,
                seeds: SeedPlan {
                    run_seed: 3,
                    iteration: 1,
                },
                dim: 297,
            };
            let chunks = [
                Chunk {
                    player: 0,
                    start: 0,
                    len: 3,
                },
                Chunk {
                    player: 1,
                    start: 0,
                    len: 3,
                },
            ];
            let a = plan(SchedulerKind::Recursive).run(policy, &chunks).unwrap();
            let b = plan(SchedulerKind::Interleaved(InterleaveConfig {
                width: 6,
                max_batch: 6,
                refill: true,
                share_games: true,
                single_row_forwards: false,
            }))
            .run(policy, &chunks)
            .unwrap();
            assert!(b.scheduler.max_batch_size > 1, "rows were batched");
            let (a, b) = (a.output, b.output);
            if exact {
                assert_eq!(a, b, "{opponent}");
            }
            assert_eq!(a.stats, b.stats, "{opponent}");
            for (x, y) in [(&a.advantage, &b.advantage), (&a.strategy, &b.strategy)] {
                assert!(!x.is_empty());
                assert_eq!(x.states, y.states, "{opponent}: info states");
                assert_eq!(x.masks, y.masks);
                assert_eq!(x.players, y.players);
                assert_eq!(x.iterations, y.iterations);
                for (tx, ty) in x.targets.iter().zip(&y.targets) {
                    for (u, v) in tx.iter().zip(ty) {
                        assert!((u - v).abs() <= 1e-3 * (1.0 + u.abs()), "{u} vs {v}");
                    }
                }
            }
        }
    }

    fn traverse(c: &TrainerConfig, nets: &[NetTrainer; 3]) -> TraversalResult {
        let params = traversal_params(c);
        run_traversals(c, &params, policy(nets), 297, 2).unwrap()
    }

    #[test]
    fn one_two_and_zero_workers_give_the_same_samples() {
        let nets = nets();
        let mut c = smoke();
        c.encoding.derived_playability = true;
        c.encoding.slot_aware_playability = true;
        c.traversal.traversals_per_player = 5;
        c.traversal.worker_chunk_size = 2;
        c.traversal.max_depth = None;
        c.traversal.max_nodes_per_traversal = Some(80);
        for scheduler in [cfg::Scheduler::Recursive, cfg::Scheduler::Interleaved] {
            c.traversal.scheduler = scheduler;
            c.traversal.num_workers = cfg::WorkerCount::Fixed(1);
            let threads_before = tch::get_num_threads();
            let one = traverse(&c, &nets);
            assert_eq!(one.workers, 1);
            assert_eq!(
                tch::get_num_threads(),
                threads_before,
                "the calling thread keeps its libtorch threads"
            );
            c.traversal.num_workers = cfg::WorkerCount::Fixed(2);
            let two = traverse(&c, &nets);
            assert_eq!(two.workers, 2);
            assert_eq!(one.output, two.output, "{scheduler}: 1 vs 2 workers");
            c.traversal.num_workers = cfg::WorkerCount::Fixed(0);
            let zero = traverse(&c, &nets);
            assert_eq!(zero.workers, 0);
            assert_eq!(
                one.output.stats, zero.output.stats,
                "{scheduler}: 1 vs 0 workers"
            );
            assert_eq!(one.output.advantage.states, zero.output.advantage.states);
            assert_eq!(
                one.scheduler.is_some(),
                scheduler == cfg::Scheduler::Interleaved
            );
            if let (Some(a), Some(b)) = (one.scheduler, two.scheduler) {
                assert_eq!(a.requests, b.requests);
            }
        }
    }

    #[test]
    fn smoke_config_trains_with_the_interleaved_scheduler() {
        let mut c = smoke();
        c.traversal.scheduler = cfg::Scheduler::Interleaved;
        c.traversal.opponent_policy = cfg::OpponentPolicy::Network;
        c.traversal.traversals_per_player = 3;
        let mut trainer = Trainer::new(c).unwrap();
        let m = trainer.run_iteration().unwrap();
        assert_eq!(m["iteration"], 1.0);
        assert!(m["traversal/nodes"] > 0.0);
        assert!(m["samples/advantage"] > 0.0);
        assert!(m["loss/advantage"].is_finite());
        assert!(m["interleaved/batches"] > 0.0);
        assert!(m["interleaved/requests"] >= m["interleaved/batches"]);
        assert!(m["interleaved/max_batch_size"] >= m["interleaved/avg_batch_size"]);
        assert!(m["interleaved/forwards"] >= m["interleaved/batches"]);
        assert!(m["interleaved/avg_rows_per_forward"] <= m["interleaved/avg_batch_size"]);
        assert!(m["interleaved/avg_rows_per_forward"] >= 1.0);
        assert!(m["interleaved/forward_seconds"] >= 0.0);
        assert!(m["interleaved/scheduler_seconds"] >= 0.0);
        assert!(m["traversal/nodes_per_second"] > 0.0);
    }

    #[test]
    fn recursive_runs_emit_no_interleaved_metrics() {
        let mut trainer = Trainer::new(smoke()).unwrap();
        let m = trainer.run_iteration().unwrap();
        assert!(!m.keys().any(|k| k.starts_with("interleaved/")));
    }
}
