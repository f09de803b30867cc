//! Traversals (docs/deep-cfr.md §5): one freshly dealt game per traversal, walked for a
//! fixed traverser p, producing advantage samples for p and strategy samples.
//!
//! This file holds the recursive (depth-first) scheduler and the pieces of
//! a node that every scheduler shares: endpoint checks, deck resampling,
//! fixed-opponent moves, advantage targets. The order of random draws is part
//! of the contract: any scheduler that draws in the same order produces the
//! same samples for the same seeds.

use super::memory::SampleRef;
use super::policy::{Net, Policy, PolicyError};
use super::regret::{self, Fallback, ACTIONS};
use super::rng::Lcg;
use super::stats::{ActionKind, Buckets, FallbackMix, TraversalStats};
use crate::bots::{DiscardOnlyBot, HeuristicBot, HeuristicParams};
use crate::encoding::Encoding;
use crate::game::{GameError, GameState, Phase};

/// How a traversal samples at the traverser's nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// One sampled action per node, importance-weighted (the default).
    Outcome,
    /// Every legal action at the traverser's nodes (recursive only).
    External,
}

/// What a cutoff (depth or node limit) is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cutoff {
    /// The current score difference from p's side.
    ScoreDiff,
    /// The mean of `rollouts` playouts (random or heuristic moves), at most
    /// `max_steps` actions each; 0 rollouts falls back to the score difference.
    Rollout {
        rollouts: u32,
        heuristic: bool,
        max_steps: u32,
    },
}

/// Who plays against the traverser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opponent {
    /// The opponent's own advantage network, like the traverser.
    Network,
    /// A sample from the strategy network's masked softmax (fixed node).
    AverageStrategy,
    /// The balanced heuristic bot (fixed node).
    Heuristic,
    /// Discard the lowest slot, draw from the deck (fixed node).
    DiscardOnly,
}

/// Everything a traversal needs to know, resolved from the trainer config.
#[derive(Debug, Clone, PartialEq)]
pub struct TraversalParams {
    pub sampling: Sampling,
    pub max_depth: Option<u64>,
    pub max_nodes: Option<u64>,
    pub rm_epsilon: f64,
    pub explore_epsilon: f64,
    pub value_clip: Option<f64>,
    /// Unsampled legal actions get target 0 instead of −u.
    pub unsampled_zero: bool,
    pub cutoff: Cutoff,
    pub opponent: Opponent,
    pub strategy_interval: u64,
    pub store_traverser: bool,
    pub store_opponent: bool,
    pub fallback: Fallback,
    pub encoding: Encoding,
    pub buckets: Buckets,
}

/// Errors while traversing.
#[derive(Debug, thiserror::Error)]
pub enum TraversalError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("game engine: {0}")]
    Game(#[from] GameError),
    #[error("{0}")]
    Unsupported(String),
}

/// Samples produced by traversals, stored flat (row-major) until they go into
/// the reservoirs in a deterministic order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleBuffer {
    pub dim: usize,
    pub states: Vec<f32>,
    pub targets: Vec<[f32; ACTIONS]>,
    pub masks: Vec<u32>,
    pub iterations: Vec<u32>,
    pub players: Vec<u8>,
    pub first_open: Vec<bool>,
}

impl SampleBuffer {
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            ..Self::default()
        }
    }

    pub fn len(&self) -> usize {
        self.masks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.masks.is_empty()
    }

    pub fn push(
        &mut self,
        state: &[f32],
        target: [f32; ACTIONS],
        mask: u64,
        iteration: u32,
        player: usize,
        first_open: bool,
    ) {
        self.states.extend_from_slice(state);
        self.targets.push(target);
        self.masks.push(mask as u32);
        self.iterations.push(iteration);
        self.players.push(player as u8);
        self.first_open.push(first_open);
    }

    /// Room for `rows` more samples, so appending many buffers copies each
    /// sample once instead of again at every doubling.
    pub fn reserve(&mut self, rows: usize) {
        self.states.reserve(rows * self.dim);
        self.targets.reserve(rows);
        self.masks.reserve(rows);
        self.iterations.reserve(rows);
        self.players.reserve(rows);
        self.first_open.reserve(rows);
    }

    /// Appends all of `other`.
    pub fn extend(&mut self, other: &SampleBuffer) {
        self.states.extend_from_slice(&other.states);
        self.targets.extend_from_slice(&other.targets);
        self.masks.extend_from_slice(&other.masks);
        self.iterations.extend_from_slice(&other.iterations);
        self.players.extend_from_slice(&other.players);
        self.first_open.extend_from_slice(&other.first_open);
    }

    /// Row `i` as a memory sample.
    pub fn get(&self, i: usize) -> SampleRef<'_> {
        SampleRef {
            info_state: &self.states[i * self.dim..(i + 1) * self.dim],
            target: &self.targets[i],
            mask: self.masks[i],
            iteration: self.iterations[i],
            player: self.players[i],
            is_first_open: self.first_open[i],
        }
    }
}

/// The output of a batch of traversals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraversalOutput {
    pub stats: TraversalStats,
    pub advantage: SampleBuffer,
    pub strategy: SampleBuffer,
}

impl TraversalOutput {
    pub fn new(dim: usize) -> Self {
        Self {
            stats: TraversalStats::default(),
            advantage: SampleBuffer::new(dim),
            strategy: SampleBuffer::new(dim),
        }
    }

    /// Concatenates `parts` in order (stats summed), reusing the first
    /// part's buffers and copying every other sample once.
    pub fn concat(dim: usize, parts: impl IntoIterator<Item = TraversalOutput>) -> Self {
        let mut parts = parts.into_iter();
        let Some(mut total) = parts.next() else {
            return Self::new(dim);
        };
        let rest: Vec<TraversalOutput> = parts.collect();
        total
            .advantage
            .reserve(rest.iter().map(|p| p.advantage.len()).sum());
        total
            .strategy
            .reserve(rest.iter().map(|p| p.strategy.len()).sum());
        for part in &rest {
            total.merge(part);
        }
        total
    }

    /// Appends `other` (stats summed, samples after ours).
    pub fn merge(&mut self, other: &TraversalOutput) {
        self.stats.merge(&other.stats);
        self.advantage.extend(&other.advantage);
        self.strategy.extend(&other.strategy);
    }
}

/// If `action` draws from the deck, picks the card to draw afresh (one
/// `next_u32` when more than one card is left) by swapping it to the top.
/// Returns the swapped index so the caller can undo it after the pop.
#[inline]
pub fn resample_deck(
    state: &mut GameState,
    action: usize,
    rng: &mut Lcg,
) -> Result<Option<usize>, GameError> {
    if state.phase() != Phase::Draw || action != state.draw_base() {
        return Ok(None);
    }
    let len = state.deck_len();
    if len <= 1 {
        return Ok(None);
    }
    let k = (rng.next_u32() % len as u32) as usize;
    let top = len - 1;
    if k == top {
        return Ok(None);
    }
    state.swap_deck_cards(k, top)?;
    Ok(Some(k))
}

/// Undoes a [`resample_deck`] swap after the draw has been popped.
#[inline]
pub fn unswap_deck(state: &mut GameState, swapped: Option<usize>) -> Result<(), GameError> {
    if let Some(k) = swapped {
        let top = state.deck_len() - 1;
        state.swap_deck_cards(k, top)?;
    }
    Ok(())
}

/// Number of colours in which `player` has an expedition.
pub fn opened_colors(state: &GameState, player: usize) -> u64 {
    (0..state.n_colors())
        .filter(|&c| !state.expedition(player, c).is_empty())
        .count() as u64
}

/// The category of unified `action` for `player` at `state` (docs/deep-cfr.md §5.8).
pub fn action_kind(state: &GameState, player: usize, action: usize) -> ActionKind {
    let base = state.draw_base();
    if action >= base {
        return if action == base {
            ActionKind::DrawDeck
        } else {
            ActionKind::DrawPile
        };
    }
    if action & 1 == 1 {
        return ActionKind::Discard;
    }
    match state.hand(player).get(action >> 1) {
        Some(card) if state.expedition(player, card.color() as usize).is_empty() => {
            ActionKind::OpenNew(card.color())
        }
        _ => ActionKind::PlayExisting,
    }
}

/// Counts one regret-matching decision of `player` at `state` (restored to
/// the node), with the fallback diagnostics when it fired; `chosen` is the
/// sampled action (`None` at an external-sampling traverser node).
pub fn record_decision(
    stats: &mut TraversalStats,
    state: &GameState,
    player: usize,
    mask: u64,
    depth: u64,
    info: &regret::RegretInfo,
    chosen: Option<usize>,
) {
    stats.regret_decision(
        depth,
        info.fallback,
        info.tie_size,
        info.full_tie,
        opened_colors(state, player),
        || fallback_mix(state, player, mask, chosen),
    );
}

/// The legal-action mix of a fallback decision and its chosen action.
pub fn fallback_mix(
    state: &GameState,
    player: usize,
    mask: u64,
    chosen: Option<usize>,
) -> FallbackMix {
    let mut mix = FallbackMix {
        chosen: chosen.map(|a| action_kind(state, player, a)),
        ..FallbackMix::default()
    };
    for a in crate::game::mask_iter(mask) {
        let kind = action_kind(state, player, a);
        mix.legal[kind.index()] += 1;
        if let ActionKind::OpenNew(c) = kind {
            mix.open_new_colors |= 1 << c;
        }
    }
    mix
}

/// Whether some legal play would start one of `player`'s empty expeditions
/// (handshake plays count) — the advantage sample's `is_first_open` flag.
pub fn has_legal_first_open(state: &GameState, player: usize, mask: u64) -> bool {
    if state.phase() != Phase::Card {
        return false;
    }
    let hand = state.hand(player);
    hand.iter().enumerate().any(|(slot, card)| {
        mask >> (2 * slot) & 1 == 1 && state.expedition(player, card.color() as usize).is_empty()
    })
}

/// The advantage target of an outcome-sampled node: 0 on illegal actions,
/// −u (or 0) on legal unsampled ones, ṽ − u on the sampled one.
pub fn outcome_target(
    mask: u64,
    sampled: usize,
    v_tilde: f64,
    u: f64,
    unsampled_zero: bool,
) -> [f32; ACTIONS] {
    let mut target = [0.0f32; ACTIONS];
    for (a, t) in target.iter_mut().enumerate() {
        if mask >> a & 1 == 1 {
            *t = if a == sampled {
                (v_tilde - u) as f32
            } else if unsampled_zero {
                0.0
            } else {
                (-u) as f32
            };
        }
    }
    target
}

/// The outcome-sampling value bookkeeping after a child returned `v`:
/// (ṽ, u) with ṽ = v / max(q(a), ε) clipped, u = σ(a)·ṽ.
#[inline]
pub fn outcome_values(params: &TraversalParams, v: f64, q_a: f64, sigma_a: f64) -> (f64, f64) {
    let pi = q_a.max(params.rm_epsilon);
    let mut v_tilde = v / pi;
    if let Some(clip) = params.value_clip {
        let clip = clip.max(1e-9);
        v_tilde = v_tilde.clamp(-clip, clip);
    }
    (v_tilde, sigma_a * v_tilde)
}

/// Whether a strategy sample is stored at a non-fixed node of `actor`.
#[inline]
pub fn stores_strategy(
    params: &TraversalParams,
    actor: usize,
    traverser: usize,
    depth: u64,
) -> bool {
    let allowed = if actor == traverser {
        params.store_traverser
    } else {
        params.store_opponent
    };
    allowed && depth.is_multiple_of(params.strategy_interval.max(1))
}

/// Which endpoint a node is (docs/deep-cfr.md §5.2 step 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The game's node budget ran out: worth the cutoff value.
    NodeLimit,
    /// The game is over: worth the score difference.
    Terminal,
    /// `max_depth` was reached: worth the cutoff value.
    Depth,
}

/// Steps 1–2 of a node, shared by both schedulers: counts the node (and the
/// depth reached), then checks node limit, terminal state and depth limit in
/// that order, counting the endpoint that fires.
pub fn enter_node(
    stats: &mut TraversalStats,
    params: &TraversalParams,
    nodes_this_game: u64,
    depth: u64,
    terminal: bool,
) -> Option<Endpoint> {
    stats.nodes += 1;
    stats.max_depth_reached = stats.max_depth_reached.max(depth);
    let endpoint = if params.max_nodes.is_some_and(|m| nodes_this_game >= m) {
        stats.node_limit_cutoffs += 1;
        Endpoint::NodeLimit
    } else if terminal {
        stats.terminals += 1;
        Endpoint::Terminal
    } else if params.max_depth.is_some_and(|m| depth >= m) {
        stats.depth_cutoffs += 1;
        Endpoint::Depth
    } else {
        return None;
    };
    stats.endpoint(depth, params.buckets);
    Some(endpoint)
}

/// The recursive (depth-first) scheduler: every non-fixed decision is a
/// batch-of-one network query. One RNG serves all the games of a batch.
pub struct RecursiveTraverser<'a, P: Policy> {
    params: &'a TraversalParams,
    policy: &'a P,
    rng: Lcg,
    heuristic: HeuristicBot,
    /// One encoding buffer per depth would be wasteful; nodes copy what they
    /// keep, so a single scratch row is reused.
    scratch: Vec<f32>,
    out: TraversalOutput,
    traverser: usize,
    iteration: u32,
    nodes_this_game: u64,
}

impl<'a, P: Policy> RecursiveTraverser<'a, P> {
    /// A traverser whose RNG starts from `seed`, for info states of `dim`.
    pub fn new(params: &'a TraversalParams, policy: &'a P, seed: u64, dim: usize) -> Self {
        Self {
            params,
            policy,
            rng: Lcg::new(seed),
            heuristic: HeuristicBot::new(HeuristicParams::balanced()),
            scratch: vec![0.0; dim],
            out: TraversalOutput::new(dim),
            traverser: 0,
            iteration: 0,
            nodes_this_game: 0,
        }
    }

    /// Traverses one game from `state` (left unchanged) for `traverser` at
    /// CFR iteration `iteration`; returns the root value.
    pub fn traverse(
        &mut self,
        state: &mut GameState,
        traverser: usize,
        iteration: u32,
    ) -> Result<f64, TraversalError> {
        if self.params.opponent == Opponent::DiscardOnly {
            return Err(TraversalError::Unsupported(
                "the recursive scheduler does not support opponent_policy = \"discard_only\""
                    .into(),
            ));
        }
        self.traverser = traverser;
        self.iteration = iteration;
        self.nodes_this_game = 0;
        self.node(state, 0)
    }

    /// Like [`traverse`](Self::traverse), but the RNG restarts from
    /// `game_rng_seed` for this game. This is the per-game seeding the
    /// interleaved scheduler uses (one RNG per context), so with the same
    /// seeds both schedulers make the same draws and produce the same output.
    pub fn traverse_seeded(
        &mut self,
        state: &mut GameState,
        traverser: usize,
        iteration: u32,
        game_rng_seed: u64,
    ) -> Result<f64, TraversalError> {
        self.rng = Lcg::new(game_rng_seed);
        self.traverse(state, traverser, iteration)
    }

    /// The samples and statistics gathered so far.
    pub fn finish(self) -> TraversalOutput {
        self.out
    }

    fn cutoff_value(&mut self, state: &mut GameState) -> Result<f64, TraversalError> {
        let p = self.traverser;
        match self.params.cutoff {
            Cutoff::ScoreDiff | Cutoff::Rollout { rollouts: 0, .. } => {
                Ok(f64::from(state.score_diff(p)))
            }
            Cutoff::Rollout {
                rollouts,
                heuristic,
                max_steps,
            } => {
                let mut total = 0.0;
                for _ in 0..rollouts {
                    total += self.rollout(state, heuristic, max_steps)?;
                }
                Ok(total / f64::from(rollouts))
            }
        }
    }

    /// One playout from `state`, undone afterwards; p's score difference at
    /// its end.
    fn rollout(
        &mut self,
        state: &mut GameState,
        heuristic: bool,
        max_steps: u32,
    ) -> Result<f64, TraversalError> {
        let mut history: Vec<(crate::game::Undo, Option<usize>)> = Vec::new();
        self.out.stats.rollouts += 1;
        let mut steps = 0;
        while !state.is_terminal() && steps < max_steps {
            let mask = state.legal_mask();
            if mask == 0 {
                break;
            }
            let action = if heuristic {
                self.heuristic
                    .choose(state)
                    .unwrap_or(mask.trailing_zeros() as usize)
            } else {
                let k = self.rng.next_u32() % mask.count_ones();
                crate::game::nth_set_bit(mask, k).unwrap_or(mask.trailing_zeros() as usize)
            };
            let swapped = resample_deck(state, action, &mut self.rng)?;
            let undo = state.apply(action)?;
            history.push((undo, swapped));
            steps += 1;
        }
        self.out.stats.rollout_steps += u64::from(steps);
        if !state.is_terminal() {
            self.out.stats.rollout_timeouts += 1;
        }
        let value = f64::from(state.score_diff(self.traverser));
        while let Some((undo, swapped)) = history.pop() {
            state.undo(&undo);
            unswap_deck(state, swapped)?;
        }
        Ok(value)
    }

    /// Applies `action` (resampling a deck draw), recurses, and undoes both.
    fn child(
        &mut self,
        state: &mut GameState,
        action: usize,
        depth: u64,
    ) -> Result<f64, TraversalError> {
        let swapped = resample_deck(state, action, &mut self.rng)?;
        let undo = state.apply(action)?;
        let v = self.node(state, depth + 1);
        state.undo(&undo);
        unswap_deck(state, swapped)?;
        v
    }

    fn encode(&mut self, state: &GameState, player: usize) {
        self.params
            .encoding
            .encode(state, player, &mut self.scratch);
    }

    fn query(&mut self, net: Net, out: &mut [f32; ACTIONS]) -> Result<(), TraversalError> {
        self.policy.evaluate(net, &self.scratch, 1, out)?;
        Ok(())
    }

    fn node(&mut self, state: &mut GameState, depth: u64) -> Result<f64, TraversalError> {
        let params = self.params;
        let p = self.traverser;
        self.nodes_this_game += 1;
        match enter_node(
            &mut self.out.stats,
            params,
            self.nodes_this_game,
            depth,
            state.is_terminal(),
        ) {
            Some(Endpoint::Terminal) => return Ok(f64::from(state.score_diff(p))),
            Some(Endpoint::NodeLimit | Endpoint::Depth) => return self.cutoff_value(state),
            None => {}
        }
        let player = state.current_player();
        let mask = state.legal_mask();
        if player != p && params.opponent != Opponent::Network {
            let action = match params.opponent {
                Opponent::Heuristic => self.heuristic.choose(state),
                Opponent::DiscardOnly => DiscardOnlyBot::choose(state),
                _ => {
                    self.encode(state, player);
                    let mut logits = [0.0f32; ACTIONS];
                    self.query(Net::Strategy, &mut logits)?;
                    let mut probs = [0.0f64; ACTIONS];
                    regret::strategy_policy(&logits, mask, &mut probs);
                    regret::sample_action(&probs, mask, self.rng.next_double())
                }
            };
            let Some(action) = action else {
                return Ok(f64::from(state.score_diff(p)));
            };
            return self.child(state, action, depth);
        }

        self.encode(state, player);
        let info_state = self.scratch.clone();
        let mut advantages = [0.0f32; ACTIONS];
        self.query(Net::Advantage(player as u8), &mut advantages)?;
        let mut sigma = [0.0f64; ACTIONS];
        let info = regret::regret_matching(
            &advantages,
            mask,
            params.rm_epsilon,
            params.fallback,
            &mut self.rng,
            &mut sigma,
        );
        if stores_strategy(params, player, p, depth) {
            let target = sigma.map(|x| x as f32);
            self.out
                .strategy
                .push(&info_state, target, mask, self.iteration, player, false);
            self.out.stats.strategy_samples += 1;
        }
        if mask == 0 {
            self.out.stats.terminals += 1;
            self.out.stats.endpoint(depth, params.buckets);
            return Ok(f64::from(state.score_diff(p)));
        }

        if params.sampling == Sampling::External && player == p {
            let mut values = [0.0f64; ACTIONS];
            let mut u = 0.0;
            for a in crate::game::mask_iter(mask) {
                values[a] = self.child(state, a, depth)?;
                u += sigma[a] * values[a];
            }
            record_decision(&mut self.out.stats, state, player, mask, depth, &info, None);
            let mut target = [0.0f32; ACTIONS];
            for a in crate::game::mask_iter(mask) {
                target[a] = (values[a] - u) as f32;
            }
            let first_open = has_legal_first_open(state, player, mask);
            self.out.advantage.push(
                &info_state,
                target,
                mask,
                self.iteration,
                player,
                first_open,
            );
            self.out.stats.advantage_samples += 1;
            return Ok(u);
        }

        let mut q = [0.0f64; ACTIONS];
        if params.sampling == Sampling::External {
            q = sigma;
        } else {
            regret::explore(&sigma, mask, params.explore_epsilon, &mut q);
        }
        let u_draw = self.rng.next_double();
        let Some(action) = regret::sample_action(&q, mask, u_draw) else {
            return Ok(f64::from(state.score_diff(p)));
        };
        let v = self.child(state, action, depth)?;
        self.out.stats.sampled_actions += 1;
        record_decision(
            &mut self.out.stats,
            state,
            player,
            mask,
            depth,
            &info,
            Some(action),
        );
        if params.sampling == Sampling::External {
            // Opponent node under external sampling: the value passes through.
            return Ok(v);
        }
        let (v_tilde, u) = outcome_values(params, v, q[action], sigma[action]);
        if player == p {
            // As the external-sampling push above, kept apart: the inner
            // loop's speed and samples are pinned by benchmarks and tests.
            let target = outcome_target(mask, action, v_tilde, u, params.unsampled_zero);
            let first_open = has_legal_first_open(state, player, mask);
            self.out.advantage.push(
                &info_state,
                target,
                mask,
                self.iteration,
                player,
                first_open,
            );
            self.out.stats.advantage_samples += 1;
        }
        Ok(u)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::game::Rules;
    use std::collections::BTreeMap;

    #[test]
    fn actions_fall_into_the_legal_mix_categories() {
        let mut state = GameState::new(&Rules::default(), 3).unwrap();
        let p = state.current_player();
        let mask = state.legal_mask();
        // Nothing is opened yet: every legal play opens its colour.
        let mix = fallback_mix(&state, p, mask, Some(1));
        assert_eq!(mix.chosen, Some(ActionKind::Discard));
        assert_eq!(mix.legal[ActionKind::Discard.index()], 8);
        assert_eq!(mix.legal[ActionKind::PlayExisting.index()], 0);
        let opens = mix.legal[1];
        assert!(opens >= 1);
        assert!(mix.open_new_colors.count_ones() as u64 <= opens);
        // Play slot 0, then its colour is opened for the next card of it.
        let card = state.hand(p)[0];
        assert_eq!(action_kind(&state, p, 0), ActionKind::OpenNew(card.color()));
        state.apply(0).unwrap();
        let base = state.draw_base();
        assert_eq!(action_kind(&state, p, base), ActionKind::DrawDeck);
        assert_eq!(action_kind(&state, p, base + 1), ActionKind::DrawPile);
        let mix = fallback_mix(&state, p, state.legal_mask(), Some(base));
        assert_eq!(mix.legal[ActionKind::DrawDeck.index()], 1);
        assert_eq!(mix.chosen, Some(ActionKind::DrawDeck));
        assert_eq!(mix.open_new_colors, 0);
    }

    /// A deterministic stand-in network: outputs are a fixed function of the
    /// input row, so equal info states get equal outputs.
    pub(crate) struct HashPolicy {
        pub scale: f32,
    }

    impl Policy for HashPolicy {
        fn evaluate(
            &self,
            net: Net,
            states: &[f32],
            rows: usize,
            out: &mut [f32],
        ) -> Result<(), PolicyError> {
            let dim = states.len() / rows.max(1);
            let salt = match net {
                Net::Advantage(p) => 1.0 + f32::from(p),
                Net::Strategy => 7.0,
            };
            for r in 0..rows {
                let row = &states[r * dim..(r + 1) * dim];
                let h: f32 = row
                    .iter()
                    .enumerate()
                    .map(|(i, x)| x * ((i % 13) as f32 + salt))
                    .sum();
                for a in 0..ACTIONS {
                    out[r * ACTIONS + a] = self.scale * ((h * 0.37 + a as f32 * 1.3 + salt).sin());
                }
            }
            Ok(())
        }

        fn batch_invariant(&self) -> bool {
            true
        }
    }

    pub(crate) fn params() -> TraversalParams {
        TraversalParams {
            sampling: Sampling::Outcome,
            max_depth: None,
            max_nodes: Some(1000),
            rm_epsilon: 1e-4,
            explore_epsilon: 0.05,
            value_clip: Some(500.0),
            unsampled_zero: false,
            cutoff: Cutoff::ScoreDiff,
            opponent: Opponent::Network,
            strategy_interval: 1,
            store_traverser: true,
            store_opponent: false,
            fallback: Fallback::ArgmaxTiebreak,
            encoding: Encoding {
                derived_playability: true,
                slot_aware_playability: true,
            },
            buckets: Buckets::default(),
        }
    }

    fn run(params: &TraversalParams, policy: &HashPolicy, games: u64) -> TraversalOutput {
        let rules = Rules::default();
        let dim = params.encoding.input_dim(&rules);
        let mut t = RecursiveTraverser::new(params, policy, 11, dim);
        for g in 0..games {
            let mut state = GameState::new(&rules, 100 + g).unwrap();
            let before = state.clone();
            t.traverse(&mut state, (g % 2) as usize, 3).unwrap();
            assert!(state == before, "traversal changed the game state");
        }
        t.finish()
    }

    #[test]
    fn traversal_leaves_state_unchanged_and_counts_match_samples() {
        let policy = HashPolicy { scale: 1.0 };
        let out = run(&params(), &policy, 4);
        assert_eq!(out.stats.advantage_samples as usize, out.advantage.len());
        assert_eq!(out.stats.strategy_samples as usize, out.strategy.len());
        assert!(out.advantage.len() > 10);
        assert_eq!(
            out.advantage.states.len(),
            out.advantage.len() * out.advantage.dim
        );
        assert_eq!(
            out.stats.endpoints(),
            4,
            "one endpoint per outcome-sampled game"
        );
        assert!(out.advantage.iterations.iter().all(|&t| t == 3));
        // Targets are 0 on illegal actions.
        for (target, mask) in out.advantage.targets.iter().zip(&out.advantage.masks) {
            for (a, t) in target.iter().enumerate() {
                if mask >> a & 1 == 0 {
                    assert_eq!(*t, 0.0);
                }
            }
        }
    }

    #[test]
    fn zero_mode_leaves_unsampled_targets_at_zero() {
        let policy = HashPolicy { scale: 1.0 };
        let mut p = params();
        p.unsampled_zero = true;
        let out = run(&p, &policy, 2);
        for target in &out.advantage.targets {
            assert!(target.iter().filter(|&&t| t != 0.0).count() <= 1);
        }
    }

    #[test]
    fn external_sampling_targets_have_several_nonzero_entries() {
        let policy = HashPolicy { scale: 1.0 };
        let mut p = params();
        p.sampling = Sampling::External;
        p.store_traverser = false;
        p.store_opponent = true;
        p.max_depth = Some(4);
        let out = run(&p, &policy, 2);
        assert!(out
            .advantage
            .targets
            .iter()
            .any(|t| t.iter().filter(|&&x| x != 0.0).count() > 1));
        assert_eq!(
            out.stats.sampled_actions as usize,
            out.stats.regret_matching_decisions as usize - out.advantage.len()
        );
    }

    #[test]
    fn rollouts_are_two_per_depth_cutoff() {
        let policy = HashPolicy { scale: 1.0 };
        let mut p = params();
        p.max_depth = Some(6);
        p.cutoff = Cutoff::Rollout {
            rollouts: 2,
            heuristic: false,
            max_steps: 50,
        };
        let out = run(&p, &policy, 3);
        assert!(out.stats.depth_cutoffs > 0);
        assert_eq!(out.stats.rollouts, 2 * out.stats.depth_cutoffs);
        p.cutoff = Cutoff::Rollout {
            rollouts: 2,
            heuristic: true,
            max_steps: 50,
        };
        let out = run(&p, &policy, 2);
        assert_eq!(out.stats.rollouts, 2 * out.stats.depth_cutoffs);
    }

    #[test]
    fn zeroed_networks_fill_every_fallback_metric() {
        let policy = HashPolicy { scale: 0.0 };
        let out = run(&params(), &policy, 2);
        let m: BTreeMap<String, f64> = out.stats.metrics(Buckets::default()).into_iter().collect();
        assert_eq!(m["traversal/regret_fallback_rate"], 1.0);
        assert!(m["traversal/regret_fallback_depth_bucket_0_49"] > 0.0);
        assert!(m["traversal/regret_fallback_opened_colors_count_0"] > 0.0);
        assert_eq!(m["traversal/regret_fallback_argmax_full_tie_rate"], 1.0);
    }

    #[test]
    fn fixed_opponents_store_no_opponent_samples() {
        for opponent in [Opponent::AverageStrategy, Opponent::Heuristic] {
            let policy = HashPolicy { scale: 1.0 };
            let mut p = params();
            p.opponent = opponent;
            p.store_opponent = true;
            let out = run(&p, &policy, 2);
            // Only the traverser's nodes are non-fixed: every decision and
            // every strategy sample is the traverser's (game g has p = g % 2).
            assert!(!out.advantage.is_empty());
            assert_eq!(
                out.stats.regret_matching_decisions as usize,
                out.advantage.len()
            );
            assert_eq!(out.strategy.players, out.advantage.players);
        }
        let mut p = params();
        p.opponent = Opponent::DiscardOnly;
        let policy = HashPolicy { scale: 1.0 };
        let mut t = RecursiveTraverser::new(&p, &policy, 1, 297);
        let mut state = GameState::new(&Rules::default(), 1).unwrap();
        assert!(matches!(
            t.traverse(&mut state, 0, 1),
            Err(TraversalError::Unsupported(_))
        ));
    }

    #[test]
    fn same_seed_same_samples() {
        let policy = HashPolicy { scale: 1.0 };
        let a = run(&params(), &policy, 3);
        let b = run(&params(), &policy, 3);
        assert_eq!(a, b);
    }
}
