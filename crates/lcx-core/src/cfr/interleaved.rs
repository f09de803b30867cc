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
//! [`RecursiveTraverser::traverse_seeded`]: super::traversal::RecursiveTraverser::traverse_seeded

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::policy::{Net, Policy};
use super::regret::{self, RegretInfo, ACTIONS};
use super::rng::Lcg;
use super::stats::TraversalStats;
use super::traversal::{
    enter_node, has_legal_first_open, outcome_target, outcome_values, record_decision,
    resample_deck, stores_strategy, unswap_deck, Cutoff, Opponent, SampleBuffer, Sampling,
    TraversalError, TraversalOutput, TraversalParams,
};
use crate::bots::{DiscardOnlyBot, HeuristicBot, HeuristicParams};
use crate::game::{GameState, Undo};

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

/// What a context is waiting for after a node posted a network query.
#[derive(Debug, Clone, Copy)]
struct Pending {
    net: Net,
    depth: u64,
    player: usize,
    mask: u64,
}

/// The post-order half of a non-fixed node: everything steps 5–8 of
/// docs/deep-cfr.md §5.2 need once the child's value is known. The info state (needed
/// only for the traverser's advantage sample) lives in the context's
/// `saved` arena, so frames stay small.
#[derive(Debug, Clone, Copy)]
struct AfterChild {
    depth: u64,
    player: usize,
    action: usize,
    mask: u64,
    q_a: f64,
    sigma_a: f64,
    info: RegretInfo,
    undo: Undo,
    swapped: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
enum Frame {
    /// Steps 1–3 of a node at this depth.
    Enter(u64),
    /// Undo a fixed-opponent move; the child's value passes through.
    Fixed(Undo, Option<usize>),
    AfterChild(AfterChild),
}

/// One game in flight.
struct Context {
    /// Position of the game in the job order (samples are emitted in it).
    job: usize,
    state: GameState,
    rng: Lcg,
    traverser: usize,
    iteration: u32,
    /// Nodes visited in this game (for `max_nodes`).
    nodes: u64,
    stack: Vec<Frame>,
    /// Info states of the traverser's open nodes, `dim` floats each, in
    /// stack order.
    saved: Vec<f32>,
    last_value: f64,
    pending: Option<Pending>,
    /// The encoded info state of the pending request.
    query: Vec<f32>,
    advantage: SampleBuffer,
    strategy: SampleBuffer,
}

impl Context {
    fn new(job: usize, spec: GameJob, dim: usize) -> Self {
        let mut stack = Vec::with_capacity(64);
        stack.push(Frame::Enter(0));
        Self {
            job,
            state: spec.state,
            rng: Lcg::new(spec.rng_seed),
            traverser: spec.traverser,
            iteration: spec.iteration,
            nodes: 0,
            stack,
            saved: Vec::new(),
            last_value: 0.0,
            pending: None,
            query: vec![0.0; dim],
            advantage: SampleBuffer::new(dim),
            strategy: SampleBuffer::new(dim),
        }
    }

    /// Reuses this context's allocations for another game.
    fn restart(&mut self, job: usize, spec: GameJob, dim: usize) {
        self.job = job;
        self.state = spec.state;
        self.rng = Lcg::new(spec.rng_seed);
        self.traverser = spec.traverser;
        self.iteration = spec.iteration;
        self.nodes = 0;
        self.stack.clear();
        self.stack.push(Frame::Enter(0));
        self.saved.clear();
        self.last_value = 0.0;
        self.pending = None;
        self.advantage = SampleBuffer::new(dim);
        self.strategy = SampleBuffer::new(dim);
    }

    /// Takes a finished game's samples, leaving empty buffers.
    fn retire(&mut self) -> Finished {
        let dim = self.query.len();
        (
            self.job,
            std::mem::replace(&mut self.advantage, SampleBuffer::new(dim)),
            std::mem::replace(&mut self.strategy, SampleBuffer::new(dim)),
        )
    }

    fn score_diff(&self) -> f64 {
        f64::from(self.state.score_diff(self.traverser))
    }
}

/// The node logic, shared by all contexts (stats are order-independent
/// sums, so one set serves every game).
struct Core<'a> {
    params: &'a TraversalParams,
    heuristic: HeuristicBot,
    stats: TraversalStats,
}

impl Core<'_> {
    /// Runs `ctx` until it posts a request (true) or its game is done (false).
    fn advance(&mut self, ctx: &mut Context) -> Result<bool, TraversalError> {
        debug_assert!(ctx.pending.is_none());
        while let Some(frame) = ctx.stack.pop() {
            match frame {
                Frame::Enter(depth) => {
                    if self.enter(ctx, depth)? {
                        return Ok(true);
                    }
                }
                Frame::Fixed(undo, swapped) => {
                    ctx.state.undo(&undo);
                    unswap_deck(&mut ctx.state, swapped)?;
                }
                Frame::AfterChild(a) => self.after_child(ctx, a)?,
            }
        }
        Ok(false)
    }

    /// Steps 1–3 of docs/deep-cfr.md §5.2; true when a network query was posted.
    fn enter(&mut self, ctx: &mut Context, depth: u64) -> Result<bool, TraversalError> {
        let params = self.params;
        ctx.nodes += 1;
        // Only the score-difference cutoff is supported here (checked in
        // `InterleavedTraverser::new`), so every endpoint is worth it.
        if enter_node(
            &mut self.stats,
            params,
            ctx.nodes,
            depth,
            ctx.state.is_terminal(),
        )
        .is_some()
        {
            ctx.last_value = ctx.score_diff();
            return Ok(false);
        }
        let player = ctx.state.current_player();
        let mask = ctx.state.legal_mask();
        let net = if player != ctx.traverser && params.opponent != Opponent::Network {
            match params.opponent {
                Opponent::Heuristic => {
                    let action = self.heuristic.choose(&ctx.state);
                    Self::fixed_move(ctx, action, depth)?;
                    return Ok(false);
                }
                Opponent::DiscardOnly => {
                    let action = DiscardOnlyBot::choose(&ctx.state);
                    Self::fixed_move(ctx, action, depth)?;
                    return Ok(false);
                }
                _ => Net::Strategy,
            }
        } else {
            Net::Advantage(player as u8)
        };
        params.encoding.encode(&ctx.state, player, &mut ctx.query);
        ctx.pending = Some(Pending {
            net,
            depth,
            player,
            mask,
        });
        Ok(true)
    }

    /// A fixed-opponent move: resample a deck draw, apply, and visit the
    /// child; no move at all (no legal action) is worth the score difference.
    fn fixed_move(
        ctx: &mut Context,
        action: Option<usize>,
        depth: u64,
    ) -> Result<(), TraversalError> {
        let Some(action) = action else {
            ctx.last_value = ctx.score_diff();
            return Ok(());
        };
        let swapped = resample_deck(&mut ctx.state, action, &mut ctx.rng)?;
        let undo = ctx.state.apply(action)?;
        ctx.stack.push(Frame::Fixed(undo, swapped));
        ctx.stack.push(Frame::Enter(depth + 1));
        Ok(())
    }

    /// Hands the network's output row for `ctx`'s pending request back.
    fn deliver(&mut self, ctx: &mut Context, output: &[f32]) -> Result<(), TraversalError> {
        let Some(req) = ctx.pending.take() else {
            return Ok(());
        };
        let params = self.params;
        let mask = req.mask;
        if req.net == Net::Strategy {
            let mut probs = [0.0f64; ACTIONS];
            regret::strategy_policy(output, mask, &mut probs);
            let action = regret::sample_action(&probs, mask, ctx.rng.next_double());
            return Self::fixed_move(ctx, action, req.depth);
        }
        let p = ctx.traverser;
        let mut sigma = [0.0f64; ACTIONS];
        let info = regret::regret_matching(
            output,
            mask,
            params.rm_epsilon,
            params.fallback,
            &mut ctx.rng,
            &mut sigma,
        );
        if stores_strategy(params, req.player, p, req.depth) {
            let target = sigma.map(|x| x as f32);
            ctx.strategy
                .push(&ctx.query, target, mask, ctx.iteration, req.player, false);
            self.stats.strategy_samples += 1;
        }
        if mask == 0 {
            self.stats.terminals += 1;
            self.stats.endpoint(req.depth, params.buckets);
            ctx.last_value = ctx.score_diff();
            return Ok(());
        }
        let mut q = [0.0f64; ACTIONS];
        regret::explore(&sigma, mask, params.explore_epsilon, &mut q);
        let u_draw = ctx.rng.next_double();
        let Some(action) = regret::sample_action(&q, mask, u_draw) else {
            ctx.last_value = ctx.score_diff();
            return Ok(());
        };
        let swapped = resample_deck(&mut ctx.state, action, &mut ctx.rng)?;
        let undo = ctx.state.apply(action)?;
        if req.player == p {
            ctx.saved.extend_from_slice(&ctx.query);
        }
        ctx.stack.push(Frame::AfterChild(AfterChild {
            depth: req.depth,
            player: req.player,
            action,
            mask,
            q_a: q[action],
            sigma_a: sigma[action],
            info,
            undo,
            swapped,
        }));
        ctx.stack.push(Frame::Enter(req.depth + 1));
        Ok(())
    }

    /// Steps 5.3–8 of docs/deep-cfr.md §5.2 once the child's value is `ctx.last_value`.
    fn after_child(&mut self, ctx: &mut Context, a: AfterChild) -> Result<(), TraversalError> {
        ctx.state.undo(&a.undo);
        unswap_deck(&mut ctx.state, a.swapped)?;
        let stats = &mut self.stats;
        stats.sampled_actions += 1;
        record_decision(
            stats,
            &ctx.state,
            a.player,
            a.mask,
            a.depth,
            &a.info,
            Some(a.action),
        );
        let (v_tilde, u) = outcome_values(self.params, ctx.last_value, a.q_a, a.sigma_a);
        if a.player == ctx.traverser {
            let target = outcome_target(a.mask, a.action, v_tilde, u, self.params.unsampled_zero);
            let first_open = has_legal_first_open(&ctx.state, a.player, a.mask);
            let dim = ctx.query.len();
            let start = ctx.saved.len() - dim;
            ctx.advantage.push(
                &ctx.saved[start..],
                target,
                a.mask,
                ctx.iteration,
                a.player,
                first_open,
            );
            ctx.saved.truncate(start);
            stats.advantage_samples += 1;
        }
        ctx.last_value = u;
        Ok(())
    }
}

/// The batch groups in [`Net::index`] order.
const GROUPS: [Net; 3] = [Net::Advantage(0), Net::Advantage(1), Net::Strategy];

/// The interleaved scheduler over a batched [`Policy`].
pub struct InterleavedTraverser<'a, P: Policy> {
    core: Core<'a>,
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
            core: Core {
                params,
                heuristic: HeuristicBot::new(HeuristicParams::balanced()),
                stats: TraversalStats::default(),
            },
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
    fn run_feed(&mut self, feed: &mut impl Feed) -> Result<Vec<Finished>, TraversalError> {
        let start = Instant::now();
        let forward_before = self.metrics.forward_seconds;
        let mut waited = 0.0;
        let dim = self.dim;
        let width = self.config.width;
        let max_batch = self.config.max_batch;
        let mut done: Vec<Finished> = Vec::new();
        // Contexts by slot; `None` where a context was handed to another
        // worker. Finished slots keep their allocations for the next game.
        let mut slots: Vec<Option<Context>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        // Slots in flight, in the order their games started.
        let mut window: Vec<usize> = Vec::with_capacity(width);
        let mut batch: Vec<usize> = Vec::with_capacity(max_batch);
        let mut inputs: [Vec<f32>; 3] = Default::default();
        let mut outputs: [Vec<f32>; 3] = Default::default();
        let mut members: [Vec<usize>; 3] = Default::default();

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

            // Every context in the window has a pending request; the first
            // `max_batch` of them in window order go this round.
            batch.clear();
            batch.extend(window.iter().copied().take(max_batch));
            for g in 0..3 {
                inputs[g].clear();
                members[g].clear();
            }
            for &slot in &batch {
                #[expect(
                    clippy::expect_used,
                    reason = "a slot enters the window with its context and leaves it when the context retires"
                )]
                let ctx = slots[slot].as_ref().expect("window slots hold contexts");
                if let Some(req) = ctx.pending {
                    let g = req.net.index();
                    inputs[g].extend_from_slice(&ctx.query);
                    members[g].push(slot);
                }
            }
            let forward_start = Instant::now();
            for g in 0..3 {
                let rows = members[g].len();
                if rows == 0 {
                    continue;
                }
                outputs[g].clear();
                outputs[g].resize(rows * ACTIONS, 0.0);
                if self.config.single_row_forwards {
                    self.metrics.forwards += rows as u64;
                    for r in 0..rows {
                        self.policy.evaluate(
                            GROUPS[g],
                            &inputs[g][r * dim..(r + 1) * dim],
                            1,
                            &mut outputs[g][r * ACTIONS..(r + 1) * ACTIONS],
                        )?;
                    }
                } else {
                    self.metrics.forwards += 1;
                    self.policy
                        .evaluate(GROUPS[g], &inputs[g], rows, &mut outputs[g])?;
                }
            }
            self.metrics.forward_seconds += forward_start.elapsed().as_secs_f64();
            let n = batch.len() as u64;
            self.metrics.batches += 1;
            self.metrics.requests += n;
            self.metrics.max_batch_size = self.metrics.max_batch_size.max(n);

            // Hand results back and run each context to its next request.
            let mut finished = false;
            for g in 0..3 {
                for (r, &slot) in members[g].iter().enumerate() {
                    #[expect(
                        clippy::expect_used,
                        reason = "a slot enters the window with its context and leaves it when the context retires"
                    )]
                    let ctx = slots[slot].as_mut().expect("window slots hold contexts");
                    self.core
                        .deliver(ctx, &outputs[g][r * ACTIONS..(r + 1) * ACTIONS])?;
                    if !self.core.advance(ctx)? {
                        done.push(ctx.retire());
                        free.push(slot);
                        finished = true;
                    }
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

impl<'a, P: Policy + Sync> InterleavedTraverser<'a, P> {
    /// Runs `jobs` on one scheduler per thread of `pool`, with the
    /// threads pulling games from the shared queue as their windows free
    /// up, and a worker whose games are all done taking over half of a
    /// busy one's games in flight. So no core idles while another works
    /// through the end of its share; results are those of [`Self::run`]
    /// over the same jobs (samples in job order, statistics summed).
    ///
    /// Which games share a window then depends on timing, so this needs a
    /// policy that gives each row the same result in any batch
    /// ([`Policy::batch_invariant`]) or single-row forwards; otherwise
    /// it is an error. `games` (the job count) caps each window at an even
    /// share, so the first worker to start does not take them all.
    pub fn run_shared<I>(
        params: &'a TraversalParams,
        config: InterleaveConfig,
        policy: &'a P,
        dim: usize,
        (jobs, games): (I, usize),
        pool: &rayon::ThreadPool,
    ) -> Result<(TraversalOutput, SchedulerMetrics), TraversalError>
    where
        I: Iterator<Item = Result<GameJob, TraversalError>> + Send,
    {
        if !config.batch_invisible(policy) {
            return Err(TraversalError::Unsupported(
                "sharing games between workers needs batch-invariant forwards".into(),
            ));
        }
        let workers = pool.current_num_threads();
        let config = InterleaveConfig {
            width: config.width.min(games.div_ceil(workers.max(1))),
            ..config
        };
        let shared = SharedWork::new(jobs, workers);
        // `broadcast` runs exactly one scheduler on every thread of the
        // pool, so a worker waiting for handed-over games never holds up
        // one that has not started.
        let parts: Vec<Result<_, TraversalError>> = pool.broadcast(|_| {
            let _abort = AbortOnExit(&shared);
            let mut t = Self::new(params, config, policy, dim)?;
            let mut feed = SharedFeed {
                work: &shared,
                taking: false,
            };
            let done = t.run_feed(&mut feed)?;
            Ok((done, std::mem::take(&mut t.core.stats), t.metrics()))
        });
        let mut metrics = SchedulerMetrics::default();
        let mut stats = TraversalStats::default();
        let mut done = Vec::new();
        for part in parts {
            let (finished, part_stats, part_metrics) = part?;
            done.extend(finished);
            stats.merge(&part_stats);
            metrics.merge(&part_metrics);
        }
        Ok((assemble(dim, stats, done), metrics))
    }
}

/// A finished game: its job index and its advantage and strategy samples.
type Finished = (usize, SampleBuffer, SampleBuffer);

/// The output of finished games: samples in job order, `stats` as given.
fn assemble(dim: usize, stats: TraversalStats, mut done: Vec<Finished>) -> TraversalOutput {
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
enum Incoming {
    /// A new game and its index in the job order.
    Job(usize, GameJob),
    /// A game in flight, handed over by another worker, its request
    /// pending.
    Handed(Context),
}

/// Where a scheduler's games come from.
trait Feed {
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
struct LocalFeed<I>(std::iter::Enumerate<I>);

impl<I: Iterator<Item = Result<GameJob, TraversalError>>> Feed for LocalFeed<I> {
    fn next(&mut self) -> Option<Result<Incoming, TraversalError>> {
        self.0.next().map(numbered)
    }
}

/// A job from a numbered job list, as it enters a window.
fn numbered(
    (job, spec): (usize, Result<GameJob, TraversalError>),
) -> Result<Incoming, TraversalError> {
    spec.map(|spec| Incoming::Job(job, spec))
}

/// Work shared by the schedulers of [`InterleavedTraverser::run_shared`].
struct SharedWork<I> {
    workers: usize,
    /// The job list, numbered in job order.
    jobs: Mutex<std::iter::Fuse<std::iter::Enumerate<I>>>,
    handoff: Mutex<Handoff>,
    /// Signalled when games are handed over or all work is done.
    wake: Condvar,
    /// Lock-free copies of `handoff`'s counts, read every round.
    idle: AtomicUsize,
    handed: AtomicUsize,
    /// Set by a failing worker: no more jobs start.
    aborted: AtomicBool,
}

#[derive(Default)]
struct Handoff {
    contexts: Vec<Context>,
    /// Workers in `wait`.
    idle: usize,
    done: bool,
}

impl<I: Iterator<Item = Result<GameJob, TraversalError>>> SharedWork<I> {
    fn new(jobs: I, workers: usize) -> Self {
        Self {
            workers,
            jobs: Mutex::new(jobs.enumerate().fuse()),
            handoff: Mutex::new(Handoff::default()),
            wake: Condvar::new(),
            idle: AtomicUsize::new(0),
            handed: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
        }
    }

    fn handoff(&self) -> MutexGuard<'_, Handoff> {
        // A worker that panicked holding the lock left the counts whole
        // (they change only together, without panicking code between).
        self.handoff.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.handoff().done = true;
        self.wake.notify_all();
    }
}

/// Ends the shared run when a worker leaves, whether done, failed or
/// panicking, so no other worker waits for it forever.
struct AbortOnExit<'s, I: Iterator<Item = Result<GameJob, TraversalError>>>(&'s SharedWork<I>);

impl<I: Iterator<Item = Result<GameJob, TraversalError>>> Drop for AbortOnExit<'_, I> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct SharedFeed<'s, I> {
    work: &'s SharedWork<I>,
    /// Set when this worker woke up to handed-over games, until it has
    /// taken what is there. Only such a worker takes them: the one that
    /// handed them over refills its window next round and would
    /// otherwise take them straight back.
    taking: bool,
}

impl<I: Iterator<Item = Result<GameJob, TraversalError>>> Feed for SharedFeed<'_, I> {
    fn next(&mut self) -> Option<Result<Incoming, TraversalError>> {
        let w = self.work;
        if w.aborted.load(Ordering::Relaxed) {
            return None;
        }
        if self.taking {
            let mut h = w.handoff();
            if let Some(ctx) = h.contexts.pop() {
                w.handed.store(h.contexts.len(), Ordering::Relaxed);
                return Some(Ok(Incoming::Handed(ctx)));
            }
            self.taking = false;
        }
        let mut jobs = w.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.next().map(numbered)
    }

    fn spare(&self, in_flight: usize) -> usize {
        // Hand over only once the last handover has been picked up, and
        // share evenly between this worker and the idle ones.
        let idle = self.work.idle.load(Ordering::Relaxed);
        if idle == 0 || self.work.handed.load(Ordering::Relaxed) > 0 {
            0
        } else {
            in_flight * idle / (idle + 1)
        }
    }

    fn hand_over(&self, contexts: Vec<Context>) {
        let mut h = self.work.handoff();
        h.contexts.extend(contexts);
        self.work.handed.store(h.contexts.len(), Ordering::Relaxed);
        drop(h);
        self.work.wake.notify_all();
    }

    fn wait(&mut self) -> bool {
        let w = self.work;
        let mut h = w.handoff();
        h.idle += 1;
        w.idle.store(h.idle, Ordering::Relaxed);
        loop {
            if !h.contexts.is_empty() && !h.done {
                h.idle -= 1;
                w.idle.store(h.idle, Ordering::Relaxed);
                self.taking = true;
                return true;
            }
            // Everyone is here with nothing to hand over: all games are
            // done (the job list ran dry before any worker got here).
            if h.done || h.idle == w.workers {
                h.done = true;
                w.wake.notify_all();
                return false;
            }
            h = w.wake.wait(h).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfr::policy::PolicyError;
    use crate::cfr::regret::Fallback;
    use crate::cfr::traversal::tests::{params, HashPolicy};
    use crate::cfr::traversal::RecursiveTraverser;
    use crate::game::Rules;
    use proptest::prelude::*;
    use std::cell::RefCell;

    /// Wraps a policy and records every batch's (net, rows).
    struct Recording<'a, P: Policy> {
        inner: &'a P,
        calls: RefCell<Vec<(Net, usize)>>,
    }

    impl<P: Policy> Policy for Recording<'_, P> {
        fn evaluate(
            &self,
            net: Net,
            states: &[f32],
            rows: usize,
            out: &mut [f32],
        ) -> Result<(), PolicyError> {
            self.calls.borrow_mut().push((net, rows));
            self.inner.evaluate(net, states, rows, out)
        }
    }

    fn jobs(rules: &Rules, games: u64, deal_base: u64, rng_base: u64) -> Vec<GameJob> {
        (0..games)
            .map(|k| GameJob {
                state: GameState::new(rules, deal_base + 7 * k).unwrap(),
                traverser: (k % 2) as usize,
                iteration: 1 + (k % 3) as u32,
                rng_seed: rng_base.wrapping_add(k.wrapping_mul(1_000_003)),
            })
            .collect()
    }

    fn recursive(
        params: &TraversalParams,
        policy: &HashPolicy,
        jobs: &[GameJob],
    ) -> TraversalOutput {
        let dim = params.encoding.input_dim(&Rules::default());
        let mut t = RecursiveTraverser::new(params, policy, 0, dim);
        for j in jobs {
            let mut state = j.state.clone();
            t.traverse_seeded(&mut state, j.traverser, j.iteration, j.rng_seed)
                .unwrap();
            assert!(state == j.state);
        }
        t.finish()
    }

    fn interleaved<P: Policy>(
        params: &TraversalParams,
        config: InterleaveConfig,
        policy: &P,
        jobs: &[GameJob],
    ) -> (TraversalOutput, SchedulerMetrics) {
        let dim = params.encoding.input_dim(&Rules::default());
        let mut t = InterleavedTraverser::new(params, config, policy, dim).unwrap();
        let out = t.run(jobs.iter().cloned().map(Ok)).unwrap();
        (out, t.metrics())
    }

    fn assert_same(a: &TraversalOutput, b: &TraversalOutput, what: &str) {
        assert_eq!(a.stats, b.stats, "{what}: stats differ");
        assert_eq!(a.advantage, b.advantage, "{what}: advantage samples differ");
        assert_eq!(a.strategy, b.strategy, "{what}: strategy samples differ");
    }

    #[derive(Debug, Clone, Copy)]
    enum Cut {
        None,
        Nodes(u64),
        Depth(u64),
    }

    fn case_params(
        opponent: Opponent,
        fallback: Fallback,
        cut: Cut,
        store_opponent: bool,
    ) -> TraversalParams {
        let mut p = params();
        p.opponent = opponent;
        p.fallback = fallback;
        p.store_opponent = store_opponent;
        p.strategy_interval = 2;
        (p.max_nodes, p.max_depth) = match cut {
            Cut::None => (None, None),
            Cut::Nodes(n) => (Some(n), None),
            Cut::Depth(d) => (Some(1000), Some(d)),
        };
        p
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

        /// Recursive (per-game seeds) and interleaved agree exactly, whatever
        /// the window, batch cap and refill mode, for every opponent and
        /// fallback, with or without cutoffs, and with a zeroed network (every
        /// decision takes the fallback and argmax ties fire).
        #[test]
        fn recursive_and_interleaved_agree(
            seed in 0u64..1_000_000,
            opponent in prop::sample::select(vec![
                Opponent::Network, Opponent::AverageStrategy, Opponent::Heuristic,
            ]),
            argmax in any::<bool>(),
            zeroed in any::<bool>(),
            cut in prop::sample::select(vec![
                Cut::None, Cut::Nodes(40), Cut::Nodes(300), Cut::Depth(25),
            ]),
            store_opponent in any::<bool>(),
            width in 1usize..6,
            max_batch in 1usize..5,
            refill in any::<bool>(),
        ) {
            let fallback = if argmax { Fallback::ArgmaxTiebreak } else { Fallback::Uniform };
            let params = case_params(opponent, fallback, cut, store_opponent);
            let policy = HashPolicy { scale: if zeroed { 0.0 } else { 1.0 } };
            let jobs = jobs(&Rules::default(), 3, seed, seed.wrapping_mul(31));
            let expected = recursive(&params, &policy, &jobs);
            let config = InterleaveConfig { width, max_batch, refill, share_games: true, single_row_forwards: false };
            let (got, metrics) = interleaved(&params, config, &policy, &jobs);
            assert_same(&expected, &got, "interleaved");
            prop_assert!(metrics.max_batch_size as usize <= width.min(max_batch));
            prop_assert!(expected.stats.nodes > 0);
        }
    }

    #[test]
    fn zeroed_network_parity_exercises_argmax_ties() {
        let policy = HashPolicy { scale: 0.0 };
        let params = case_params(Opponent::Network, Fallback::ArgmaxTiebreak, Cut::None, true);
        let jobs = jobs(&Rules::default(), 4, 5, 17);
        let expected = recursive(&params, &policy, &jobs);
        assert!(expected.stats.regret_fallback_argmax_tie_count > 0);
        assert_eq!(
            expected.stats.regret_fallback_count,
            expected.stats.regret_matching_decisions
        );
        let config = InterleaveConfig {
            width: 3,
            max_batch: 2,
            ..InterleaveConfig::default()
        };
        let (got, _) = interleaved(&params, config, &policy, &jobs);
        assert_same(&expected, &got, "zeroed");
    }

    #[test]
    fn batches_group_by_sorted_network_and_respect_the_caps() {
        let policy = HashPolicy { scale: 1.0 };
        let rec = Recording {
            inner: &policy,
            calls: RefCell::new(Vec::new()),
        };
        let params = case_params(
            Opponent::AverageStrategy,
            Fallback::Uniform,
            Cut::Nodes(200),
            false,
        );
        let jobs = jobs(&Rules::default(), 9, 40, 3);
        let config = InterleaveConfig {
            width: 6,
            max_batch: 4,
            ..InterleaveConfig::default()
        };
        let (out, metrics) = interleaved(&params, config, &rec, &jobs);
        let calls = rec.calls.borrow();
        assert!(calls.iter().all(|&(_, rows)| (1..=4).contains(&rows)));
        assert_eq!(
            calls.iter().map(|&(_, r)| r as u64).sum::<u64>(),
            metrics.requests
        );
        assert_eq!(metrics.max_batch_size, 4);
        assert!(metrics.batches > 0 && metrics.batches <= calls.len() as u64);
        assert!(metrics.avg_batch_size() > 1.0);
        assert!(calls.iter().any(|&(n, _)| n == Net::Strategy));
        // Every non-endpoint node queried exactly once (no heuristic moves).
        assert_eq!(metrics.requests, out.stats.nodes - out.stats.endpoints());
    }

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
    fn discard_only_opponent_runs_and_stores_only_traverser_samples() {
        let policy = HashPolicy { scale: 1.0 };
        let mut params = case_params(Opponent::DiscardOnly, Fallback::Uniform, Cut::None, true);
        params.strategy_interval = 1;
        let jobs = jobs(&Rules::default(), 4, 3, 9);
        let (out, _) = interleaved(&params, InterleaveConfig::default(), &policy, &jobs);
        assert_eq!(out.stats.endpoints(), 4);
        assert_eq!(
            out.stats.regret_matching_decisions as usize,
            out.advantage.len()
        );
        assert_eq!(out.strategy.players, out.advantage.players);
        // Game k has traverser k % 2, and samples come out in job order.
        let mut seen = out.advantage.players.clone();
        seen.dedup();
        assert_eq!(seen, vec![0, 1, 0, 1]);
    }

    /// Hands over the newest `spare` games at the feed's `at`-th round.
    struct HandAt<I> {
        local: LocalFeed<I>,
        round: std::cell::Cell<usize>,
        at: usize,
        handed: RefCell<Vec<Context>>,
    }

    impl<I: Iterator<Item = Result<GameJob, TraversalError>>> Feed for HandAt<I> {
        fn next(&mut self) -> Option<Result<Incoming, TraversalError>> {
            self.local.next()
        }
        fn spare(&self, in_flight: usize) -> usize {
            self.round.set(self.round.get() + 1);
            if self.round.get() == self.at {
                in_flight / 2
            } else {
                0
            }
        }
        fn hand_over(&self, contexts: Vec<Context>) {
            self.handed.borrow_mut().extend(contexts);
        }
    }

    /// Only games handed over by another scheduler.
    struct Given(Vec<Context>);

    impl Feed for Given {
        fn next(&mut self) -> Option<Result<Incoming, TraversalError>> {
            self.0.pop().map(|c| Ok(Incoming::Handed(c)))
        }
    }

    /// Games moved to another scheduler mid-game (their network query
    /// pending) finish exactly as if they had stayed: the two schedulers'
    /// results together are one scheduler's, however the window is cut.
    #[test]
    fn games_handed_over_mid_game_finish_as_if_they_stayed() {
        let params = case_params(Opponent::Network, Fallback::ArgmaxTiebreak, Cut::None, true);
        let policy = HashPolicy { scale: 1.0 };
        let jobs = jobs(&Rules::default(), 9, 11, 17);
        let dim = params.encoding.input_dim(&Rules::default());
        let config = InterleaveConfig {
            width: 6,
            ..InterleaveConfig::default()
        };
        let (expected, _) = interleaved(&params, config, &policy, &jobs);
        for at in [1, 5, 40] {
            let mut first = InterleavedTraverser::new(&params, config, &policy, dim).unwrap();
            let mut feed = HandAt {
                local: LocalFeed(jobs.iter().cloned().map(Ok).enumerate()),
                round: Default::default(),
                at,
                handed: Default::default(),
            };
            let mut done = first.run_feed(&mut feed).unwrap();
            let handed = feed.handed.into_inner();
            assert_eq!(handed.len(), 3, "half of a full window of 6, round {at}");
            assert!(handed.iter().all(|c| c.pending.is_some() && c.nodes > 0));
            let mut second = InterleavedTraverser::new(&params, config, &policy, dim).unwrap();
            done.extend(second.run_feed(&mut Given(handed)).unwrap());
            let mut stats = std::mem::take(&mut first.core.stats);
            stats.merge(&second.core.stats);
            assert_same(&expected, &assemble(dim, stats, done), "handed over");
        }
    }

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    /// `jobs` on `workers` schedulers sharing them.
    fn shared<P: Policy + Sync>(
        params: &TraversalParams,
        config: InterleaveConfig,
        policy: &P,
        jobs: &[GameJob],
        workers: usize,
    ) -> Result<(TraversalOutput, SchedulerMetrics), TraversalError> {
        let dim = params.encoding.input_dim(&Rules::default());
        let queue = (jobs.iter().cloned().map(Ok), jobs.len());
        InterleavedTraverser::run_shared(params, config, policy, dim, queue, &pool(workers))
    }

    /// `HashPolicy`'s outputs, with or without the claim that batches do
    /// not matter, and optionally slow (a 1 ms sleep per forward) on the
    /// first thread that queries it.
    struct Variant<'a> {
        inner: &'a HashPolicy,
        invariant: bool,
        slow: Option<Mutex<Option<std::thread::ThreadId>>>,
    }

    impl Policy for Variant<'_> {
        fn evaluate(
            &self,
            net: Net,
            states: &[f32],
            rows: usize,
            out: &mut [f32],
        ) -> Result<(), PolicyError> {
            if let Some(slow) = &self.slow {
                let me = std::thread::current().id();
                if *slow.lock().unwrap().get_or_insert(me) == me {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            self.inner.evaluate(net, states, rows, out)
        }

        fn batch_invariant(&self) -> bool {
            self.invariant
        }
    }

    /// Workers sharing games give one scheduler's output, however many
    /// there are and whether or not the window is a whole share.
    #[test]
    fn shared_workers_give_one_schedulers_output() {
        let params = case_params(
            Opponent::Network,
            Fallback::ArgmaxTiebreak,
            Cut::Nodes(300),
            true,
        );
        let policy = HashPolicy { scale: 1.0 };
        let jobs = jobs(&Rules::default(), 24, 5, 9);
        for width in [2, 64] {
            let config = InterleaveConfig {
                width,
                ..InterleaveConfig::default()
            };
            let (expected, one) = interleaved(&params, config, &policy, &jobs);
            for workers in [1, 2, 4] {
                let (got, metrics) = shared(&params, config, &policy, &jobs, workers).unwrap();
                assert_same(
                    &expected,
                    &got,
                    &format!("width {width}, {workers} workers"),
                );
                assert_eq!(metrics.requests, one.requests);
            }
        }
    }

    /// One worker made slow (the first thread to query the network sleeps
    /// on every forward): the other runs out of games first and is handed
    /// games in flight, and the output is still one scheduler's.
    #[test]
    fn an_idle_worker_takes_over_games_from_a_slow_one() {
        let params = case_params(
            Opponent::Network,
            Fallback::ArgmaxTiebreak,
            Cut::Nodes(200),
            true,
        );
        let policy = HashPolicy { scale: 1.0 };
        let jobs = jobs(&Rules::default(), 8, 21, 23);
        let config = InterleaveConfig::default();
        let (expected, _) = interleaved(&params, config, &policy, &jobs);
        let slow = Variant {
            inner: &policy,
            invariant: true,
            slow: Some(Mutex::new(None)),
        };
        let (got, metrics) = shared(&params, config, &slow, &jobs, 2).unwrap();
        assert_same(&expected, &got, "slow worker");
        assert!(metrics.handed_over >= 1, "{metrics:?}");
    }

    /// The protocol step by step: a worker hands games over only while
    /// another waits, the waiting one gets them, and the giver's next
    /// refill does not take them back.
    #[test]
    fn handed_games_go_to_the_waiting_worker_not_back_to_the_giver() {
        let rules = Rules::default();
        let dim = params().encoding.input_dim(&rules);
        let games = jobs(&rules, 2, 1, 2);
        let work = SharedWork::new(games.clone().into_iter().map(Ok), 2);
        let mut giver = SharedFeed {
            work: &work,
            taking: false,
        };
        assert!(matches!(giver.next(), Some(Ok(Incoming::Job(0, _)))));
        assert!(matches!(giver.next(), Some(Ok(Incoming::Job(1, _)))));
        assert!(giver.next().is_none());
        assert_eq!(giver.spare(6), 0, "nobody waits yet");
        let (go, wait_for_go) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            // Owned here, so a failing assertion below drops it and the
            // taker's `recv` returns instead of hanging the scope.
            let go = go;
            let work = &work;
            let taker = scope.spawn(move || {
                let mut feed = SharedFeed {
                    work,
                    taking: false,
                };
                assert!(feed.wait(), "woken by the handover");
                // Let the giver refill first.
                wait_for_go.recv().unwrap();
                let mut got = Vec::new();
                while let Some(Ok(Incoming::Handed(ctx))) = feed.next() {
                    got.push(ctx.job);
                }
                got
            });
            while giver.spare(6) == 0 {
                std::thread::yield_now();
            }
            assert_eq!(giver.spare(6), 3, "half of six to the one waiting worker");
            let spec = |i: usize| games[i].clone();
            giver.hand_over(vec![
                Context::new(7, spec(0), dim),
                Context::new(8, spec(1), dim),
            ]);
            assert_eq!(giver.spare(6), 0, "not again before they are picked up");
            assert!(giver.next().is_none(), "the giver took its games back");
            go.send(()).unwrap();
            let mut got = taker.join().unwrap();
            got.sort_unstable();
            assert_eq!(got, [7, 8]);
        });
    }

    /// A batch-dependent policy cannot share games (which rows meet in a
    /// batch would depend on timing), and a failing game stops every
    /// worker with its error instead of leaving one waiting.
    #[test]
    fn shared_workers_refuse_batch_dependent_policies_and_stop_on_errors() {
        let params = params();
        let policy = HashPolicy { scale: 1.0 };
        let plain = Variant {
            inner: &policy,
            invariant: false,
            slow: None,
        };
        let jobs = jobs(&Rules::default(), 6, 3, 4);
        let dim = params.encoding.input_dim(&Rules::default());
        let refused = shared(&params, InterleaveConfig::default(), &plain, &jobs, 2);
        assert!(
            matches!(refused, Err(TraversalError::Unsupported(m)) if m.contains("batch-invariant"))
        );
        // Forwarding one row at a time makes any policy batch-invariant.
        let single = InterleaveConfig {
            single_row_forwards: true,
            ..InterleaveConfig::default()
        };
        let (expected, _) = interleaved(&params, single, &plain, &jobs);
        let (got, _) = shared(&params, single, &plain, &jobs, 2).unwrap();
        assert_same(&expected, &got, "single-row forwards");

        for workers in [1, 2, 3] {
            // On a thread of its own, so a worker left waiting fails the
            // test instead of hanging it.
            let (params, jobs) = (params.clone(), jobs.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let failing = jobs.iter().cloned().enumerate().map(|(i, j)| {
                    if i == 4 {
                        Err(TraversalError::Unsupported("job 4 is broken".into()))
                    } else {
                        Ok(j)
                    }
                });
                let result = InterleavedTraverser::run_shared(
                    &params,
                    InterleaveConfig::default(),
                    &HashPolicy { scale: 1.0 },
                    dim,
                    (failing, jobs.len()),
                    &pool(workers),
                );
                tx.send(result.map(|_| ()).map_err(|e| e.to_string()))
                    .unwrap();
            });
            let result = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("a failing job left a worker waiting");
            let err = result.unwrap_err();
            assert!(err.contains("job 4 is broken"), "{err}");
        }
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

    #[test]
    fn metrics_merge_sums_and_recomputes_the_average() {
        let mut a = SchedulerMetrics {
            batches: 2,
            requests: 10,
            max_batch_size: 7,
            forwards: 4,
            forward_seconds: 1.0,
            scheduler_seconds: 0.5,
            handed_over: 3,
        };
        let b = SchedulerMetrics {
            batches: 3,
            requests: 5,
            max_batch_size: 4,
            forwards: 2,
            forward_seconds: 2.0,
            scheduler_seconds: 0.25,
            handed_over: 1,
        };
        a.merge(&b);
        let m: std::collections::BTreeMap<String, f64> = a.metrics().into_iter().collect();
        assert_eq!(m["interleaved/batches"], 5.0);
        assert_eq!(m["interleaved/requests"], 15.0);
        assert_eq!(m["interleaved/avg_batch_size"], 3.0);
        assert_eq!(m["interleaved/max_batch_size"], 7.0);
        assert_eq!(m["interleaved/forwards"], 6.0);
        assert_eq!(m["interleaved/avg_rows_per_forward"], 2.5);
        assert_eq!(m["interleaved/forward_seconds"], 3.0);
        assert_eq!(m["interleaved/scheduler_seconds"], 0.75);
        assert_eq!(m["interleaved/handed_over"], 4.0);
    }
}
