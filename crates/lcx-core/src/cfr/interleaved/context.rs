//! A game in flight ([`Context`]) and the node procedure run as a state
//! machine over its frame stack ([`Core`]): the recursive scheduler's steps,
//! cut where a node waits for a network query, so a context can stop there
//! and resume when the answer arrives.

use super::GameJob;
use crate::bots::{DiscardOnlyBot, HeuristicBot, HeuristicParams};
use crate::cfr::policy::Net;
use crate::cfr::regret::{self, RegretInfo, ACTIONS};
use crate::cfr::rng::Lcg;
use crate::cfr::stats::TraversalStats;
use crate::cfr::traversal::{
    enter_node, has_legal_first_open, outcome_target, outcome_values, record_decision,
    resample_deck, stores_strategy, unswap_deck, Opponent, SampleBuffer, TraversalError,
    TraversalParams,
};
use crate::game::{GameState, Undo};

/// What a context is waiting for after a node posted a network query.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) net: Net,
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
pub(super) struct Context {
    /// Position of the game in the job order (samples are emitted in it).
    pub(super) job: usize,
    state: GameState,
    rng: Lcg,
    traverser: usize,
    iteration: u32,
    /// Nodes visited in this game (for `max_nodes`).
    pub(super) nodes: u64,
    stack: Vec<Frame>,
    /// Info states of the traverser's open nodes, `dim` floats each, in
    /// stack order.
    saved: Vec<f32>,
    last_value: f64,
    pub(super) pending: Option<Pending>,
    /// The encoded info state of the pending request.
    pub(super) query: Vec<f32>,
    advantage: SampleBuffer,
    strategy: SampleBuffer,
}

impl Context {
    pub(super) fn new(job: usize, spec: GameJob, dim: usize) -> Self {
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
    pub(super) fn restart(&mut self, job: usize, spec: GameJob, dim: usize) {
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
    pub(super) fn retire(&mut self) -> Finished {
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

/// A finished game: its job index and its advantage and strategy samples.
pub(super) type Finished = (usize, SampleBuffer, SampleBuffer);

/// The node logic, shared by all contexts (stats are order-independent
/// sums, so one set serves every game).
pub(super) struct Core<'a> {
    params: &'a TraversalParams,
    heuristic: HeuristicBot,
    pub(super) stats: TraversalStats,
}

impl<'a> Core<'a> {
    /// The node logic for `params`, its statistics at zero.
    pub(super) fn new(params: &'a TraversalParams) -> Self {
        Self {
            params,
            heuristic: HeuristicBot::new(HeuristicParams::balanced()),
            stats: TraversalStats::default(),
        }
    }

    /// Runs `ctx` until it posts a request (true) or its game is done (false).
    pub(super) fn advance(&mut self, ctx: &mut Context) -> Result<bool, TraversalError> {
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
    pub(super) fn deliver(
        &mut self,
        ctx: &mut Context,
        output: &[f32],
    ) -> Result<(), TraversalError> {
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
