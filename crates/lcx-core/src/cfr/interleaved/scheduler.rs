//! [`InterleavedTraverser`]: the window of games in flight and the loop
//! that runs it round by round (fill the window, forward a batch, hand each
//! answer back and run its game to the next query, retire finished games),
//! and the [`Feed`]s it takes games from: its own job list, or a queue
//! shared with other workers (`handoff.rs`).

use std::time::Instant;

use super::batch::Batch;
use super::context::{Context, Core, Finished};
use super::{GameJob, InterleaveConfig, SchedulerMetrics};
use crate::cfr::policy::Policy;
use crate::cfr::stats::TraversalStats;
use crate::cfr::traversal::{Cutoff, Sampling, TraversalError, TraversalOutput, TraversalParams};

/// The interleaved scheduler over a batched [`Policy`].
pub struct InterleavedTraverser<'a, P: Policy> {
    pub(super) core: Core<'a>,
    config: InterleaveConfig,
    policy: &'a P,
    dim: usize,
    metrics: SchedulerMetrics,
}

impl<'a, P: Policy> InterleavedTraverser<'a, P> {
    /// A scheduler for info states of `dim` floats. Settings the interleaved
    /// scheduler cannot run (external sampling, rollout cutoffs) are
    /// rejected; config validation rejects them earlier with a key name.
    pub fn new(
        params: &'a TraversalParams,
        config: InterleaveConfig,
        policy: &'a P,
        dim: usize,
    ) -> Result<Self, TraversalError> {
        if params.sampling != Sampling::Outcome {
            return Err(TraversalError::Unsupported(
                "the interleaved scheduler supports only outcome sampling".into(),
            ));
        }
        if !matches!(
            params.cutoff,
            Cutoff::ScoreDiff | Cutoff::Rollout { rollouts: 0, .. }
        ) {
            return Err(TraversalError::Unsupported(
                "the interleaved scheduler supports only the score_diff cutoff".into(),
            ));
        }
        Ok(Self {
            core: Core::new(params),
            config: InterleaveConfig {
                width: config.width.max(1),
                max_batch: config.max_batch.max(1),
                ..config
            },
            policy,
            dim,
            metrics: SchedulerMetrics::default(),
        })
    }

    /// Batching counters and timings so far.
    pub fn metrics(&self) -> SchedulerMetrics {
        self.metrics
    }

    /// Runs every job; samples come out in job order, statistics summed.
    /// Jobs are pulled lazily, as window slots free up.
    pub fn run<I>(&mut self, jobs: I) -> Result<TraversalOutput, TraversalError>
    where
        I: IntoIterator<Item = Result<GameJob, TraversalError>>,
    {
        let mut feed = LocalFeed(jobs.into_iter().enumerate());
        let done = self.run_feed(&mut feed)?;
        Ok(assemble(
            self.dim,
            std::mem::take(&mut self.core.stats),
            done,
        ))
    }

    /// The scheduler loop: runs games from `feed` until it has no more,
    /// and returns each finished game's samples with its job index.
    pub(super) fn run_feed(
        &mut self,
        feed: &mut impl Feed,
    ) -> Result<Vec<Finished>, TraversalError> {
        let start = Instant::now();
        let forward_before = self.metrics.forward_seconds;
        let mut waited = 0.0;
        let dim = self.dim;
        let width = self.config.width;
        let mut done: Vec<Finished> = Vec::new();
        // Contexts by slot; `None` where a context was handed to another
        // worker. Finished slots keep their allocations for the next game.
        let mut slots: Vec<Option<Context>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        // Slots in flight, in the order their games started.
        let mut window: Vec<usize> = Vec::with_capacity(width);
        let mut batch = Batch::new(dim, &self.config);

        loop {
            // Fill the window: always under refill, only once it has
            // drained in wave mode.
            if self.config.refill || window.is_empty() {
                while window.len() < width {
                    let Some(incoming) = feed.next() else { break };
                    let slot = match free.pop() {
                        Some(s) => s,
                        None => {
                            slots.push(None);
                            slots.len() - 1
                        }
                    };
                    let ctx = match (incoming?, slots[slot].take()) {
                        (Incoming::Handed(ctx), _) => {
                            // Handed over with its request pending.
                            self.metrics.handed_over += 1;
                            slots[slot] = Some(ctx);
                            window.push(slot);
                            continue;
                        }
                        (Incoming::Job(job, spec), Some(mut ctx)) => {
                            ctx.restart(job, spec, dim);
                            slots[slot].insert(ctx)
                        }
                        (Incoming::Job(job, spec), None) => {
                            slots[slot].insert(Context::new(job, spec, dim))
                        }
                    };
                    if self.core.advance(ctx)? {
                        window.push(slot);
                    } else {
                        done.push(ctx.retire());
                        free.push(slot);
                    }
                }
            }
            if window.is_empty() {
                let wait_start = Instant::now();
                let more = feed.wait();
                waited += wait_start.elapsed().as_secs_f64();
                if more {
                    continue;
                }
                break;
            }
            // Another worker ran out of games: give it some of ours.
            let spare = feed.spare(window.len());
            if spare > 0 {
                let handed = window.split_off(window.len() - spare);
                free.extend(&handed);
                feed.hand_over(handed.iter().filter_map(|&s| slots[s].take()).collect());
            }

            batch.collect(&window, &slots);
            batch.forward(self.policy, &mut self.metrics)?;

            // Hand results back and run each context to its next request.
            let mut finished = false;
            for (slot, output) in batch.results() {
                #[expect(
                    clippy::expect_used,
                    reason = "a slot enters the window with its context and leaves it when the context retires"
                )]
                let ctx = slots[slot].as_mut().expect("window slots hold contexts");
                self.core.deliver(ctx, output)?;
                if !self.core.advance(ctx)? {
                    done.push(ctx.retire());
                    free.push(slot);
                    finished = true;
                }
            }
            if finished {
                window.retain(|&s| slots[s].as_ref().is_some_and(|c| c.pending.is_some()));
            }
        }

        let elapsed = start.elapsed().as_secs_f64() - waited;
        let forward = self.metrics.forward_seconds - forward_before;
        self.metrics.scheduler_seconds += (elapsed - forward).max(0.0);
        Ok(done)
    }
}

/// The output of finished games: samples in job order, `stats` as given.
pub(super) fn assemble(
    dim: usize,
    stats: TraversalStats,
    mut done: Vec<Finished>,
) -> TraversalOutput {
    done.sort_unstable_by_key(|(job, _, _)| *job);
    let mut out = TraversalOutput::new(dim);
    out.stats = stats;
    out.advantage
        .reserve(done.iter().map(|(_, a, _)| a.len()).sum());
    out.strategy
        .reserve(done.iter().map(|(_, _, s)| s.len()).sum());
    for (_, advantage, strategy) in &done {
        out.advantage.extend(advantage);
        out.strategy.extend(strategy);
    }
    out
}

/// What enters a scheduler's window.
#[expect(
    clippy::large_enum_variant,
    reason = "one per game, moved once straight into its slot"
)]
pub(super) enum Incoming {
    /// A new game and its index in the job order.
    Job(usize, GameJob),
    /// A game in flight, handed over by another worker, its request
    /// pending.
    Handed(Context),
}

/// Where a scheduler's games come from.
pub(super) trait Feed {
    /// The next game for the window, if any is left.
    fn next(&mut self) -> Option<Result<Incoming, TraversalError>>;
    /// How many of the `in_flight` games to hand over now.
    fn spare(&self, _in_flight: usize) -> usize {
        0
    }
    /// Takes the games `spare` asked for.
    fn hand_over(&self, _contexts: Vec<Context>) {}
    /// Called with an empty window once `next` has run dry: true when
    /// games may have been handed over, false when all work is done.
    fn wait(&mut self) -> bool {
        false
    }
}

/// One scheduler's own job list, numbered in job order.
pub(super) struct LocalFeed<I>(pub(super) std::iter::Enumerate<I>);

impl<I: Iterator<Item = Result<GameJob, TraversalError>>> Feed for LocalFeed<I> {
    fn next(&mut self) -> Option<Result<Incoming, TraversalError>> {
        self.0.next().map(numbered)
    }
}

/// A job from a numbered job list, as it enters a window.
pub(super) fn numbered(
    (job, spec): (usize, Result<GameJob, TraversalError>),
) -> Result<Incoming, TraversalError> {
    spec.map(|spec| Incoming::Job(job, spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfr::interleaved::tests::{assert_same, case_params, interleaved, jobs, Cut};
    use crate::cfr::regret::Fallback;
    use crate::cfr::traversal::tests::{params, HashPolicy};
    use crate::cfr::traversal::Opponent;
    use crate::game::Rules;

    #[test]
    fn waves_and_refill_give_the_same_output_but_refill_batches_more() {
        let policy = HashPolicy { scale: 1.0 };
        let params = case_params(
            Opponent::Network,
            Fallback::ArgmaxTiebreak,
            Cut::None,
            false,
        );
        let jobs = jobs(&Rules::default(), 12, 900, 77);
        let wave = InterleaveConfig {
            width: 4,
            max_batch: 64,
            refill: false,
            share_games: true,
            single_row_forwards: false,
        };
        let (a, ma) = interleaved(&params, wave, &policy, &jobs);
        let (b, mb) = interleaved(
            &params,
            InterleaveConfig {
                refill: true,
                ..wave
            },
            &policy,
            &jobs,
        );
        let single = InterleaveConfig {
            single_row_forwards: true,
            ..wave
        };
        let (c, _) = interleaved(&params, single, &policy, &jobs);
        assert_same(&a, &b, "refill");
        assert_same(&a, &c, "single-row forwards");
        assert_eq!(ma.requests, mb.requests);
        assert!(
            mb.batches < ma.batches,
            "refill {} vs waves {}",
            mb.batches,
            ma.batches
        );
    }

    #[test]
    fn unsupported_settings_are_rejected() {
        let policy = HashPolicy { scale: 1.0 };
        let mut p = params();
        p.sampling = Sampling::External;
        assert!(InterleavedTraverser::new(&p, InterleaveConfig::default(), &policy, 297).is_err());
        let mut p = params();
        p.cutoff = Cutoff::Rollout {
            rollouts: 2,
            heuristic: false,
            max_steps: 10,
        };
        assert!(InterleavedTraverser::new(&p, InterleaveConfig::default(), &policy, 297).is_err());
    }
}
