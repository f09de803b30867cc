//! Planning an iteration's traversals and running them on either scheduler,
//! in the calling thread or on a rayon pool (docs/deep-cfr.md §6.3).
//!
//! Every game's seeds depend only on (iteration, player, index): the deal
//! seed as before, and its own RNG seed base_seed + index·1,000,003 with
//! base_seed = run.seed + 1,000,003·t + p. So how the games are cut into
//! chunks, how many workers run them, and which scheduler runs them change
//! nothing in the samples; results are merged in (player, start index)
//! order, which makes the memories' insertion order deterministic too.
//!
//! On a pool, the recursive scheduler runs one task per chunk. The
//! interleaved one, when each row's forward is the same in any batch
//! (lcx's kernel, or single-row forwards), runs one scheduler per thread
//! over a game queue shared by all chunks, and a worker that runs out of
//! games takes over half of a busy one's: on a shared, noisy 2-core box
//! one core would otherwise idle for up to a third of the phase while the
//! other finishes its chunk (measured: 0.31 s against 0.50 s). With a
//! batch-dependent libtorch forward, each chunk keeps its own scheduler,
//! so which rows share a batch, and so the results, stay reproducible.

use rayon::prelude::*;

use super::interleaved::{GameJob, InterleaveConfig, InterleavedTraverser, SchedulerMetrics};
use super::policy::Policy;
use super::traversal::{RecursiveTraverser, TraversalError, TraversalOutput, TraversalParams};
use crate::game::{GameState, Rules};

/// The per-game seeds of iteration `iteration` (docs/deep-cfr.md §6.2–6.3, with lcx's
/// own seed for every chunk). Arithmetic wraps: any `run.seed` is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedPlan {
    pub run_seed: u64,
    pub iteration: u64,
}

impl SeedPlan {
    /// run.seed + 1,000,003·t + p (the reference's worker seed).
    pub fn base_seed(&self, player: usize) -> u64 {
        self.run_seed
            .wrapping_add(self.iteration.wrapping_mul(1_000_003))
            .wrapping_add(player as u64)
    }

    /// The RNG seed of `player`'s game number `index`:
    /// base_seed + index·1,000,003.
    pub fn game_rng_seed(&self, player: usize, index: u64) -> u64 {
        self.base_seed(player)
            .wrapping_add(index.wrapping_mul(1_000_003))
    }

    /// The deal seed of `player`'s game number `index`:
    /// run.seed + 10,000·t + 10·index + p.
    pub fn deal_seed(&self, player: usize, index: u64) -> u64 {
        self.run_seed
            .wrapping_add(self.iteration.wrapping_mul(10_000))
            .wrapping_add(index.wrapping_mul(10))
            .wrapping_add(player as u64)
    }
}

/// Games `start..start + len` of `player`'s traversals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Chunk {
    pub player: usize,
    pub start: u64,
    pub len: u64,
}

/// Both players' traversals cut into chunks of `chunk_size` (0 counts as
/// 1), in (player, start) order.
pub fn plan_chunks(per_player: u64, chunk_size: u64) -> Vec<Chunk> {
    let size = chunk_size.max(1);
    let mut chunks = Vec::new();
    for player in 0..2 {
        let mut start = 0;
        while start < per_player {
            let len = size.min(per_player - start);
            chunks.push(Chunk { player, start, len });
            start += len;
        }
    }
    chunks
}

/// Which scheduler runs the games.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerKind {
    Recursive,
    Interleaved(InterleaveConfig),
}

/// Samples, statistics and (interleaved only) batching metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanOutput {
    pub output: TraversalOutput,
    pub scheduler: SchedulerMetrics,
}

/// Everything needed to run an iteration's games.
#[derive(Debug, Clone)]
pub struct TraversalPlan<'a> {
    pub params: &'a TraversalParams,
    pub scheduler: SchedulerKind,
    pub rules: &'a Rules,
    pub seeds: SeedPlan,
    /// Info-state width of the encoding.
    pub dim: usize,
}

impl TraversalPlan<'_> {
    /// The games of `chunks`, in order, dealt lazily.
    pub fn jobs<'c>(
        &'c self,
        chunks: &'c [Chunk],
    ) -> impl Iterator<Item = Result<GameJob, TraversalError>> + 'c {
        let iteration = self.seeds.iteration as u32; // CFR iterations fit in u32
        chunks.iter().flat_map(move |c| {
            (c.start..c.start + c.len).map(move |i| {
                let state = GameState::new(self.rules, self.seeds.deal_seed(c.player, i))?;
                Ok(GameJob {
                    state,
                    traverser: c.player,
                    iteration,
                    rng_seed: self.seeds.game_rng_seed(c.player, i),
                })
            })
        })
    }

    /// Runs the games of `chunks` in the calling thread with one scheduler
    /// (so the interleaved window spans chunk borders).
    pub fn run<P: Policy>(
        &self,
        policy: &P,
        chunks: &[Chunk],
    ) -> Result<PlanOutput, TraversalError> {
        match self.scheduler {
            SchedulerKind::Recursive => {
                let mut t = RecursiveTraverser::new(self.params, policy, 0, self.dim);
                for job in self.jobs(chunks) {
                    let mut job = job?;
                    t.traverse_seeded(&mut job.state, job.traverser, job.iteration, job.rng_seed)?;
                }
                Ok(PlanOutput {
                    output: t.finish(),
                    scheduler: SchedulerMetrics::default(),
                })
            }
            SchedulerKind::Interleaved(config) => {
                let mut t = InterleavedTraverser::new(self.params, config, policy, self.dim)?;
                let output = t.run(self.jobs(chunks))?;
                Ok(PlanOutput {
                    output,
                    scheduler: t.metrics(),
                })
            }
        }
    }

    /// Runs the chunks on `pool` and merges the results in (player,
    /// start) order: interleaved schedulers sharing one game queue where
    /// the policy allows it (see the module doc), else one task per chunk.
    /// The policy is shared by reference.
    pub fn run_parallel<P: Policy + Sync>(
        &self,
        policy: &P,
        chunks: &[Chunk],
        pool: &rayon::ThreadPool,
    ) -> Result<PlanOutput, TraversalError> {
        let mut ordered = chunks.to_vec();
        ordered.sort();
        if let SchedulerKind::Interleaved(config) = self.scheduler {
            if config.share_games && config.batch_invisible(policy) {
                let games = ordered.iter().map(|c| c.len as usize).sum();
                let (output, scheduler) = InterleavedTraverser::run_shared(
                    self.params,
                    config,
                    policy,
                    self.dim,
                    (self.jobs(&ordered), games),
                    pool,
                )?;
                return Ok(PlanOutput { output, scheduler });
            }
        }
        let parts: Vec<PlanOutput> = pool.install(|| {
            ordered
                .par_iter()
                .map(|c| self.run(policy, std::slice::from_ref(c)))
                .collect::<Result<Vec<_>, _>>()
        })?;
        let mut scheduler = SchedulerMetrics::default();
        for part in &parts {
            scheduler.merge(&part.scheduler);
        }
        // Tens of MB of samples at full scale: concatenated with one copy.
        let output = TraversalOutput::concat(self.dim, parts.into_iter().map(|p| p.output));
        Ok(PlanOutput { output, scheduler })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfr::regret::Fallback;
    use crate::cfr::traversal::tests::{params, HashPolicy};
    use crate::cfr::traversal::Opponent;

    #[test]
    fn chunks_cover_every_game_in_order() {
        let c = plan_chunks(10, 4);
        let lens: Vec<(usize, u64, u64)> = c.iter().map(|c| (c.player, c.start, c.len)).collect();
        assert_eq!(
            lens,
            vec![
                (0, 0, 4),
                (0, 4, 4),
                (0, 8, 2),
                (1, 0, 4),
                (1, 4, 4),
                (1, 8, 2)
            ]
        );
        assert_eq!(plan_chunks(3, 0).len(), 6);
        assert!(plan_chunks(0, 4).is_empty());
    }

    #[test]
    fn concatenating_outputs_equals_merging_them_in_order() {
        let rules = Rules::default();
        let policy = HashPolicy { scale: 1.0 };
        let mut p = params();
        p.max_nodes = Some(60);
        let plan = plan(&p, &rules, SchedulerKind::Recursive);
        let parts: Vec<TraversalOutput> = plan_chunks(3, 1)
            .iter()
            .map(|c| plan.run(&policy, std::slice::from_ref(c)).unwrap().output)
            .collect();
        let mut merged = TraversalOutput::new(plan.dim);
        for part in &parts {
            merged.merge(part);
        }
        assert!(merged.advantage.len() > parts[0].advantage.len());
        assert_eq!(TraversalOutput::concat(plan.dim, parts), merged);
        assert_eq!(
            TraversalOutput::concat(plan.dim, []),
            TraversalOutput::new(plan.dim)
        );
    }

    #[test]
    fn seeds_follow_the_spec_formulas_and_wrap() {
        let s = SeedPlan {
            run_seed: 79,
            iteration: 3,
        };
        assert_eq!(s.base_seed(1), 79 + 3 * 1_000_003 + 1);
        assert_eq!(
            s.game_rng_seed(1, 5),
            79 + 3 * 1_000_003 + 1 + 5 * 1_000_003
        );
        assert_eq!(s.deal_seed(1, 5), 79 + 30_000 + 50 + 1);
        let big = SeedPlan {
            run_seed: u64::MAX,
            iteration: 1,
        };
        assert_eq!(big.base_seed(0), 1_000_002);
    }

    fn plan<'a>(
        params: &'a TraversalParams,
        rules: &'a Rules,
        kind: SchedulerKind,
    ) -> TraversalPlan<'a> {
        TraversalPlan {
            params,
            scheduler: kind,
            rules,
            seeds: SeedPlan {
                run_seed: 5,
                iteration: 2,
            },
            dim: params.encoding.input_dim(rules),
        }
    }

    /// 0 workers (one scheduler run), 1 worker and 3 workers, any chunk size
    /// and either scheduler: the same samples in the same order.
    #[test]
    fn workers_chunks_and_schedulers_give_identical_output() {
        let rules = Rules::default();
        let policy = HashPolicy { scale: 1.0 };
        let mut p = params();
        p.opponent = Opponent::Network;
        p.fallback = Fallback::ArgmaxTiebreak;
        p.max_nodes = Some(120);
        let shared = InterleaveConfig {
            width: 3,
            max_batch: 8,
            refill: true,
            share_games: true,
            single_row_forwards: false,
        };
        let per_chunk = InterleaveConfig {
            share_games: false,
            ..shared
        };
        let reference = plan(&p, &rules, SchedulerKind::Recursive)
            .run(&policy, &plan_chunks(5, 100))
            .unwrap();
        assert_eq!(reference.output.stats.endpoints(), 10);
        assert_eq!(reference.scheduler, SchedulerMetrics::default());
        // Player 0's samples come first.
        let players = &reference.output.advantage.players;
        assert!(players.windows(2).all(|w| w[0] <= w[1]) && players.contains(&1));
        for kind in [
            SchedulerKind::Recursive,
            SchedulerKind::Interleaved(shared),
            SchedulerKind::Interleaved(per_chunk),
        ] {
            let plan = plan(&p, &rules, kind);
            for chunk_size in [1, 2, 5] {
                let chunks = plan_chunks(5, chunk_size);
                let serial = plan.run(&policy, &chunks).unwrap();
                assert_eq!(
                    serial.output, reference.output,
                    "{kind:?} chunk {chunk_size}"
                );
                for workers in [1, 3] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(workers)
                        .build()
                        .unwrap();
                    let par = plan.run_parallel(&policy, &chunks, &pool).unwrap();
                    assert_eq!(
                        par.output, reference.output,
                        "{kind:?} chunk {chunk_size} workers {workers}"
                    );
                    if matches!(kind, SchedulerKind::Interleaved(_)) {
                        assert_eq!(par.scheduler.requests, serial.scheduler.requests);
                        assert!(par.scheduler.max_batch_size <= 3);
                        // Chunks of one game batch together only when
                        // the workers share games; one worker then runs
                        // them all in one window.
                        if chunk_size == 1 && (kind == SchedulerKind::Interleaved(per_chunk)) {
                            assert_eq!(par.scheduler.max_batch_size, 1);
                        }
                        if chunk_size == 1
                            && workers == 1
                            && kind == SchedulerKind::Interleaved(shared)
                        {
                            assert_eq!(par.scheduler.max_batch_size, 3);
                        }
                        // One call per network with requests in a round.
                        let s = par.scheduler;
                        assert!(s.batches <= s.forwards && s.forwards <= 3 * s.batches);
                        assert!(s.forwards <= s.requests);
                    }
                }
            }
        }
    }
}
