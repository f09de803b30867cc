//! The rule-based Lost Cities bot (balanced / aggressive / cautious presets)
//! and its noisy variant.
//!
//! The decision procedure follows the reference project's heuristic bot
//! (docs/deep-cfr.md §10.4): in the CARD phase a cascade of stages
//! (handshake, number, forced opening, discard), each taking the candidate
//! with the highest (score, action id); in the DRAW phase the deck is weighed
//! against every legal pile top and the deck wins ties. Every decision is a
//! pure function of the state, computed on the stack from a [`View`] so the
//! trainer can use it as a traversal opponent without allocating.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::view::{Card, View};
use super::Bot;
use crate::game::GameState;

/// Tunable weights of the heuristic. [`HeuristicParams::default`] is the
/// balanced preset; the presets differ only in the first five fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeuristicParams {
    /// Opening target as a fraction of the best possible colour sum.
    pub open_target_ratio: f64,
    /// Minimum supporting numbers for an opening, as a fraction of the hand size.
    pub open_min_card_ratio: f64,
    /// A handshake needs this multiple of the opening target in playable numbers.
    pub handshake_target_multiplier: f64,
    /// Minimum playable numbers behind a handshake, as a fraction of the hand size.
    pub handshake_min_card_ratio: f64,
    /// No openings or handshakes once the deck is at or below this fraction.
    pub late_open_block_ratio: f64,

    /// Deck fraction at or below which the game counts as late.
    pub late_deck_ratio: f64,
    /// Deck fraction at or below which the game counts as mid.
    pub mid_deck_ratio: f64,

    pub commitment_weight: f64,
    pub gift_penalty_weight: f64,
    pub discard_safety_bonus: f64,
    pub unusable_discard_bonus: f64,

    pub deck_draw_early_value: f64,
    pub deck_draw_mid_value: f64,
    pub deck_draw_late_value: f64,
    pub deny_opponent_weight: f64,
    pub winning_deck_bonus: f64,
    pub losing_deck_penalty: f64,
    pub losing_visible_draw_bonus: f64,
    pub speculative_visible_draw_bonus: f64,
    pub dead_visible_draw_penalty: f64,
    pub unopened_draw_penalty_three_open: f64,
    pub unopened_draw_penalty_four_open: f64,
    pub strong_deny_threshold: f64,

    pub low_card_sequence_bonus: f64,
    pub started_expedition_play_bonus: f64,
    pub started_expedition_followup_bonus: f64,
}

impl Default for HeuristicParams {
    fn default() -> Self {
        Self::balanced()
    }
}

impl HeuristicParams {
    /// The reference's default parameter set.
    pub fn balanced() -> Self {
        HeuristicParams {
            open_target_ratio: 0.50,
            open_min_card_ratio: 0.40,
            handshake_target_multiplier: 1.15,
            handshake_min_card_ratio: 0.34,
            late_open_block_ratio: 0.20,
            late_deck_ratio: 0.20,
            mid_deck_ratio: 0.35,
            commitment_weight: 1.0,
            gift_penalty_weight: 1.0,
            discard_safety_bonus: 6.0,
            unusable_discard_bonus: 20.0,
            deck_draw_early_value: 2.0,
            deck_draw_mid_value: 1.0,
            deck_draw_late_value: -1.0,
            deny_opponent_weight: 0.40,
            winning_deck_bonus: 0.75,
            losing_deck_penalty: 1.25,
            losing_visible_draw_bonus: 1.5,
            speculative_visible_draw_bonus: 1.5,
            dead_visible_draw_penalty: 2.0,
            unopened_draw_penalty_three_open: 10.0,
            unopened_draw_penalty_four_open: 20.0,
            strong_deny_threshold: 10.0,
            low_card_sequence_bonus: 5.0,
            started_expedition_play_bonus: 4.0,
            started_expedition_followup_bonus: 3.0,
        }
    }

    /// Opens and invests on thinner support, and keeps opening later.
    pub fn aggressive() -> Self {
        HeuristicParams {
            open_target_ratio: 0.42,
            open_min_card_ratio: 0.30,
            handshake_target_multiplier: 1.00,
            handshake_min_card_ratio: 0.25,
            late_open_block_ratio: 0.12,
            ..Self::balanced()
        }
    }

    /// Needs more support to open or invest, and stops opening earlier.
    pub fn cautious() -> Self {
        HeuristicParams {
            open_target_ratio: 0.62,
            open_min_card_ratio: 0.50,
            handshake_target_multiplier: 1.35,
            handshake_min_card_ratio: 0.45,
            late_open_block_ratio: 0.30,
            ..Self::balanced()
        }
    }
}

/// Thresholds that follow from the params and the rules; recomputed per move
/// because that is a handful of float operations.
#[derive(Debug, Clone, Copy)]
struct Derived {
    middle_rank: u8,
    max_color_sum: i32,
    break_even_sum: i32,
    open_target_sum: f64,
    min_open_cards: i32,
    min_handshake_numbers: i32,
    late_deck: i32,
    mid_deck: i32,
    late_open_block: i32,
    bonus_possible: bool,
}

/// `max(1, min(cap, round(x)))` with Python's round-half-to-even, which is
/// how the reference turns ratios into card counts.
fn ratio_count(total: i32, ratio: f64, cap: i32) -> i32 {
    let rounded = (f64::from(total) * ratio).round_ties_even() as i32;
    rounded.min(cap).max(1)
}

impl Derived {
    fn new(v: &View, p: &HeuristicParams) -> Self {
        let max_color_sum: i32 = (1..=i32::from(v.n_ranks)).map(|r| v.min_rank + r - 1).sum();
        let break_even_sum = -v.penalty;
        let hand = i32::from(v.hand_capacity);
        let deck = v.deck_size;
        let late_deck = ((f64::from(deck) * p.late_deck_ratio).round_ties_even() as i32).max(1);
        Derived {
            middle_rank: v.n_ranks.div_ceil(2),
            max_color_sum,
            break_even_sum,
            // A target above break-even would be unreachable on small rule sets.
            open_target_sum: (0.8 * f64::from(break_even_sum))
                .min(p.open_target_ratio * f64::from(max_color_sum)),
            min_open_cards: ratio_count(hand, p.open_min_card_ratio, hand),
            min_handshake_numbers: ratio_count(hand, p.handshake_min_card_ratio, hand),
            late_deck,
            mid_deck: ((f64::from(deck) * p.mid_deck_ratio).round_ties_even() as i32)
                .max(late_deck + 1),
            late_open_block: ((f64::from(deck) * p.late_open_block_ratio).round_ties_even() as i32)
                .max(1),
            bonus_possible: i32::from(v.n_handshakes) + i32::from(v.n_ranks) >= v.bonus_threshold,
        }
    }
}

/// Keeps the best (score, id) seen so far; ties go to the higher id, as a
/// `max` over `(score, id)` pairs does.
#[derive(Clone, Copy)]
struct Best {
    score: f64,
    action: Option<usize>,
}

impl Best {
    fn new() -> Self {
        Best {
            score: f64::NEG_INFINITY,
            action: None,
        }
    }

    fn offer(&mut self, score: f64, action: usize) {
        let better = match self.action {
            None => true,
            Some(a) => score > self.score || (score == self.score && action > a),
        };
        if better {
            self.score = score;
            self.action = Some(action);
        }
    }
}

/// The rule-based bot. Deterministic: the same state always yields the same move.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeuristicBot {
    params: HeuristicParams,
}

impl HeuristicBot {
    pub fn new(params: HeuristicParams) -> Self {
        HeuristicBot { params }
    }

    pub fn params(&self) -> &HeuristicParams {
        &self.params
    }

    /// The unified action id this bot plays in `state` (for its current
    /// player). `None` only when the state is terminal.
    pub fn choose(&self, state: &GameState) -> Option<usize> {
        let view = View::new(state);
        self.choose_in(&view)
    }

    pub(crate) fn choose_in(&self, v: &View) -> Option<usize> {
        if v.legal == 0 {
            return None;
        }
        let d = Derived::new(v, &self.params);
        let ctx = Ctx {
            v,
            p: &self.params,
            d: &d,
        };
        let choice = if v.card_phase {
            ctx.card_action()
        } else {
            ctx.draw_action()
        };
        // The stages only ever propose legal moves; the fallback keeps a
        // hand-built odd state from producing an illegal one.
        Some(match choice {
            Some(a) if v.is_legal(a) => a,
            _ => v.first_legal(),
        })
    }
}

impl Bot for HeuristicBot {
    fn act(&mut self, state: &GameState) -> Option<usize> {
        self.choose(state)
    }
}

/// `heuristic-noisy`: the balanced heuristic, except that with probability
/// `epsilon` (0.15) it plays a uniformly random legal move.
#[derive(Debug, Clone)]
pub struct NoisyBot {
    base: HeuristicBot,
    epsilon: f64,
    rng: ChaCha8Rng,
}

impl NoisyBot {
    /// The reference's noise level.
    pub const DEFAULT_EPSILON: f64 = 0.15;

    pub fn new(base: HeuristicBot, epsilon: f64, seed: u64) -> Self {
        NoisyBot {
            base,
            epsilon,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }
}

impl Bot for NoisyBot {
    fn act(&mut self, state: &GameState) -> Option<usize> {
        let view = View::new(state);
        if view.legal == 0 {
            return None;
        }
        if self.rng.random::<f64>() < self.epsilon {
            return crate::game::random_set_bit(view.legal, &mut self.rng);
        }
        self.base.choose_in(&view)
    }
}

/// A hand's cards that could follow one opener in its colour
/// (`Ctx::opener_support`).
#[derive(Default)]
struct OpenerSupport {
    numbers: i32,
    handshakes: i32,
    sum: i32,
    high: i32,
}

/// One decision's inputs, bundled so the helpers stay short.
struct Ctx<'a> {
    v: &'a View,
    p: &'a HeuristicParams,
    d: &'a Derived,
}

impl Ctx<'_> {
    fn me(&self) -> usize {
        self.v.player
    }

    fn late_penalty(&self, deck_left: i32) -> f64 {
        if deck_left <= self.d.late_deck {
            15.0
        } else if deck_left <= self.d.mid_deck {
            8.0
        } else {
            0.0
        }
    }

    /// Penalty for opening one more colour, by how many are already open.
    fn new_color_penalty(opened: i32) -> f64 {
        match opened {
            i32::MIN..=1 => 0.0,
            2 => 6.0,
            3 => 14.0,
            _ => 28.0,
        }
    }

    // ---------------------------------------------------------------- CARD

    fn card_action(&self) -> Option<usize> {
        let me = self.me();
        if let a @ Some(_) = self.best_handshake() {
            return a;
        }
        if let a @ Some(_) = self.best_number() {
            return a;
        }
        if self.v.opened_colors(me) == 0 {
            if let a @ Some(_) = self.best_forced_open() {
                return a;
            }
        }
        self.best_discard()
    }

    /// Stage 1: invest with a handshake when the hand backs the colour well
    /// and there is time left to play it out.
    fn best_handshake(&self) -> Option<usize> {
        let v = self.v;
        let me = self.me();
        if v.n_handshakes == 0 || v.deck_len <= self.d.late_open_block {
            return None;
        }
        let mut best = Best::new();
        for (slot, &card) in v.hand().iter().enumerate() {
            if !card.is_handshake() || !v.can_play(me, card) {
                continue;
            }
            let c = card.color();
            let (mut count, mut sum) = (0i32, 0i32);
            for (other_slot, &other) in v.hand().iter().enumerate() {
                if other_slot != slot
                    && other.color() == c
                    && !other.is_handshake()
                    && v.can_play(me, other)
                {
                    count += 1;
                    sum += v.face(other);
                }
            }
            if count < self.d.min_handshake_numbers
                || f64::from(sum) < self.d.open_target_sum * self.p.handshake_target_multiplier
            {
                continue;
            }
            let value =
                f64::from(sum) + 2.0 * f64::from(count) + self.bonus_potential(c, 0, 1, Some(card))
                    - self.late_penalty(v.deck_len);
            best.offer(value, 2 * slot);
        }
        best.action
    }

    /// Stage 2: extend a started expedition, or open a colour whose plan is
    /// worth it.
    fn best_number(&self) -> Option<usize> {
        let v = self.v;
        let me = self.me();
        let mut best = Best::new();
        for (slot, &card) in v.hand().iter().enumerate() {
            if card.is_handshake() || !v.can_play(me, card) {
                continue;
            }
            let c = usize::from(card.color());
            if v.exp_len[me][c] > 0 {
                best.offer(self.started_play_value(card), 2 * slot);
            } else if v.deck_len > self.d.late_open_block
                && self.opening_plan_value(card, v.deck_len) > 0.0
            {
                best.offer(self.open_value(card), 2 * slot);
            }
        }
        best.action
    }

    fn started_play_value(&self, card: Card) -> f64 {
        let v = self.v;
        let me = self.me();
        let c = usize::from(card.color());
        let face = v.face(card);
        let mut projected = v.exp_sum[me][c] + face;
        for &other in v.hand() {
            if other != card && other.color() == card.color() && other.rank() > card.rank() {
                projected += v.face(other);
            }
        }
        let mut value = self.p.started_expedition_play_bonus
            + self.p.started_expedition_followup_bonus
            // Low cards first keeps the sequence open early on ...
            + f64::from(v.max_face() + 1 - face);
        // ... while late in the game big cards are cashed in.
        if v.deck_len <= self.d.late_deck {
            value += 2.0 * f64::from(face);
        } else if v.deck_len <= self.d.mid_deck {
            value += 0.8 * f64::from(face);
        }
        if f64::from(projected) < self.d.open_target_sum {
            value -= 6.0;
        }
        value += 3.0 * f64::from(v.exp_handshakes[me][c]);
        value + self.bonus_potential(card.color(), 0, 1, Some(card))
    }

    /// What the hand holds to follow `opener` in its colour: the handshakes,
    /// and the numbers at or above the opener (their count, face sum, and how
    /// many reach the middle rank). A lower number would be dead once the
    /// opener is down, so it does not count.
    fn opener_support(&self, opener: Card) -> OpenerSupport {
        let v = self.v;
        let mut support = OpenerSupport::default();
        for &card in v.hand() {
            if card.color() != opener.color() {
                continue;
            }
            if card.is_handshake() {
                support.handshakes += 1;
            } else if card.rank() >= opener.rank() {
                support.numbers += 1;
                support.sum += v.face(card);
                if card.rank() >= self.d.middle_rank {
                    support.high += 1;
                }
            }
        }
        support
    }

    /// Value (> 0 means "worth opening") of opening `card`'s colour with it:
    /// strong, speculative, exceptional or single-late-card patterns.
    fn opening_plan_value(&self, opener: Card, deck_left: i32) -> f64 {
        let v = self.v;
        let d = self.d;
        let me = self.me();
        let OpenerSupport {
            numbers,
            handshakes,
            sum,
            high,
        } = self.opener_support(opener);
        let opened = v.opened_colors(me);
        let penalty = Self::new_color_penalty(opened);
        let opener_face = v.face(opener);
        let (sum_f, numbers_f) = (f64::from(sum), f64::from(numbers));

        let mut strong = numbers >= d.min_open_cards
            && sum_f >= d.open_target_sum
            && (high > 0 || sum_f >= 0.85 * f64::from(d.max_color_sum));
        let mut speculative =
            opened <= 2 && numbers >= 2 && sum_f >= 0.65 * d.open_target_sum && high > 0;
        let mut single_late = deck_left <= d.mid_deck && numbers >= 1 && opener_face >= 8;
        let exceptional = numbers > d.min_open_cards
            && sum_f >= f64::from(d.break_even_sum).max(d.open_target_sum * 1.4)
            && high >= 2
            && deck_left > d.mid_deck;
        if opened == 3 {
            speculative = false;
        }
        if opened >= 4 {
            strong = false;
            speculative = false;
            single_late = false;
        }

        if strong {
            6.0 + 0.25 * sum_f + 0.8 * numbers_f + 0.5 * f64::from(handshakes) - penalty
        } else if speculative {
            3.0 + 0.18 * sum_f + 0.7 * numbers_f + 0.4 * f64::from(handshakes) - penalty
        } else if opened == 3 {
            // With three colours open only a strong hand opens a fourth.
            0.0
        } else if exceptional {
            10.0 + 0.3 * sum_f + numbers_f + 0.7 * f64::from(high) - penalty
        } else if single_late {
            1.5 + 0.2 * f64::from(opener_face) - penalty
        } else {
            0.0
        }
    }

    fn open_value(&self, opener: Card) -> f64 {
        let v = self.v;
        let OpenerSupport {
            numbers,
            handshakes,
            sum,
            ..
        } = self.opener_support(opener);
        let mut value = f64::from(sum) + 2.0 * f64::from(numbers) + 1.5 * f64::from(handshakes);
        value += self.opening_plan_value(opener, v.deck_len);
        // Opening accepts the expedition penalty.
        value += f64::from(v.penalty);
        value += (f64::from(self.d.middle_rank) - f64::from(opener.rank())).max(0.0);
        value += self.bonus_potential(opener.color(), 0, 1, Some(opener));
        value - self.late_penalty(v.deck_len)
    }

    /// Stage 3 (only with no colour open): open the most promising colour
    /// even without a full plan, preferring low openers.
    fn best_forced_open(&self) -> Option<usize> {
        let v = self.v;
        let me = self.me();
        let mut best = Best::new();
        for (slot, &card) in v.hand().iter().enumerate() {
            if card.is_handshake()
                || !v.can_play(me, card)
                || v.exp_len[me][usize::from(card.color())] > 0
            {
                continue;
            }
            let plan = self.opening_plan_value(card, v.deck_len);
            let (mut count, mut sum) = (0i32, 0i32);
            for &other in v.hand() {
                if other.color() == card.color() && !other.is_handshake() {
                    count += 1;
                    sum += v.face(other);
                }
            }
            if plan <= 0.0
                && count < 2
                && f64::from(sum) < 0.5 * self.d.open_target_sum
                && v.deck_len > self.d.mid_deck
            {
                continue;
            }
            let value = plan + 0.2 * f64::from(sum) + f64::from(v.max_face() + 1 - v.face(card));
            best.offer(value, 2 * slot);
        }
        best.action
    }

    /// Stage 4: discard the card least useful to us and to the opponent.
    fn best_discard(&self) -> Option<usize> {
        let v = self.v;
        let me = self.me();
        let opp = 1 - me;
        let mut best = Best::new();
        for (slot, &card) in v.hand().iter().enumerate() {
            let mine_playable = v.can_play(me, card);
            let mut score = -self.value_for_me(card)
                - self.p.gift_penalty_weight * self.value_for_opponent(card);
            if !mine_playable {
                score += self.p.unusable_discard_bonus;
            }
            if !v.can_play(opp, card) {
                score += self.p.discard_safety_bonus;
            }
            if card.is_handshake() && mine_playable {
                score -= 4.0;
            }
            best.offer(score, 2 * slot + 1);
        }
        best.action
    }

    fn value_for_me(&self, card: Card) -> f64 {
        let v = self.v;
        let me = self.me();
        if !v.can_play(me, card) {
            return 0.0;
        }
        let commitment = self.commitment(card.color());
        if card.is_handshake() {
            return 7.0 + 1.2 * commitment;
        }
        let mut value = 0.8 * f64::from(v.face(card)) + self.p.commitment_weight * commitment;
        if v.exp_len[me][usize::from(card.color())] > 0 {
            value +=
                self.p.started_expedition_play_bonus + self.p.started_expedition_followup_bonus;
        }
        if commitment >= 6.0 && card.rank() <= self.d.middle_rank {
            value += self.p.low_card_sequence_bonus;
        }
        value
    }

    fn value_for_opponent(&self, card: Card) -> f64 {
        let v = self.v;
        let opp = 1 - self.me();
        if !v.can_play(opp, card) {
            return 0.0;
        }
        let interest = self.opponent_interest(card.color());
        if card.is_handshake() {
            8.0 + 1.5 * interest
        } else {
            f64::from(v.face(card)) * (0.4 + 0.25 * interest)
        }
    }

    /// How invested we are in a colour: what is on the table plus what we
    /// could still play from hand.
    fn commitment(&self, color: u8) -> f64 {
        let v = self.v;
        let me = self.me();
        let c = usize::from(color);
        let mut value = 0.0;
        if v.exp_len[me][c] > 0 {
            value += 5.0;
        }
        value += 2.0 * f64::from(v.exp_handshakes[me][c]);
        value += 0.25 * f64::from(v.exp_sum[me][c]);
        let (mut numbers, mut handshakes, mut sum) = (0i32, 0i32, 0i32);
        for &card in v.hand() {
            if card.color() != color || !v.can_play(me, card) {
                continue;
            }
            if card.is_handshake() {
                handshakes += 1;
            } else {
                numbers += 1;
                sum += v.face(card);
            }
        }
        value += 1.2 * f64::from(numbers);
        value += 1.5 * f64::from(handshakes);
        value += 0.15 * f64::from(sum);
        value + 0.05 * self.bonus_potential(color, 0, 0, None)
    }

    /// The opponent's visible interest in a colour (we cannot see their hand).
    fn opponent_interest(&self, color: u8) -> f64 {
        let v = self.v;
        let opp = 1 - self.me();
        let c = usize::from(color);
        let mut value = 0.0;
        if v.exp_len[opp][c] > 0 {
            value += 5.0;
        }
        value += 2.0 * f64::from(v.exp_handshakes[opp][c]);
        value += 0.25 * f64::from(v.exp_sum[opp][c]);
        let last = v.exp_last[opp][c];
        if last > 0 {
            value += 0.4 * f64::from(v.face(Card::new(color, last)));
        }
        if let Some(top) = v.discard_top[c] {
            if v.can_play(opp, top) {
                value += if top.is_handshake() {
                    1.5
                } else {
                    1.0 + 0.1 * f64::from(v.face(top))
                };
            }
        }
        if self.d.bonus_possible && v.exp_len[opp][c] + 1 >= v.bonus_threshold {
            value += 0.2 * f64::from(v.bonus_amount);
        }
        value
    }

    /// Credit for a colour that can reach the length bonus: the full bonus
    /// when the expedition (plus `committed` cards) already reaches it, 40 %
    /// when the playable cards in hand (plus `extra`) would.
    /// Every hand card equal to `exclude` is left out of the count (the
    /// reference compares card codes, so duplicate handshakes all drop out).
    fn bonus_potential(&self, color: u8, extra: i32, committed: i32, exclude: Option<Card>) -> f64 {
        let v = self.v;
        if !self.d.bonus_possible {
            return 0.0;
        }
        let me = self.me();
        let need = v.bonus_threshold - (v.exp_len[me][usize::from(color)] + committed);
        if need <= 0 {
            return f64::from(v.bonus_amount);
        }
        let playable = v
            .hand()
            .iter()
            .filter(|&&card| Some(card) != exclude && card.color() == color && v.can_play(me, card))
            .count() as i32;
        if playable + extra >= need {
            0.4 * f64::from(v.bonus_amount)
        } else {
            0.0
        }
    }

    // ---------------------------------------------------------------- DRAW

    fn draw_action(&self) -> Option<usize> {
        let v = self.v;
        let mut best: Option<(f64, usize)> = None;
        if v.is_legal(v.deck_action()) {
            best = Some((self.deck_value(), v.deck_action()));
        }
        for c in 0..usize::from(v.n_colors) {
            let action = v.pile_action(c);
            let Some(top) = v.discard_top[c] else {
                continue;
            };
            if !v.is_legal(action) {
                continue;
            }
            let value = self.pile_value(top);
            // Strictly better only: the deck (offered first) wins ties, and
            // among piles the later colour wins ties, as in the reference.
            let take = match best {
                None => true,
                Some((b, a)) => value > b || (value == b && a != v.deck_action()),
            };
            if take {
                best = Some((value, action));
            }
        }
        best.map(|(_, a)| a)
    }

    fn deck_value(&self) -> f64 {
        let v = self.v;
        let me = self.me();
        let mut value = if v.deck_len > self.d.mid_deck {
            self.p.deck_draw_early_value
        } else if v.deck_len > self.d.late_deck {
            self.p.deck_draw_mid_value
        } else {
            self.p.deck_draw_late_value
        };
        if v.score_diff(me) > 0 {
            value += self.p.winning_deck_bonus;
        } else {
            value -= self.p.losing_deck_penalty;
        }
        value
    }

    /// Worth of taking `card` from the top of its pile: our use for it,
    /// denying it to the opponent, and how it fits an opening plan.
    fn pile_value(&self, card: Card) -> f64 {
        let v = self.v;
        let p = self.p;
        let me = self.me();
        let c = usize::from(card.color());
        let opened = v.opened_colors(me);
        let unopened = v.exp_len[me][c] == 0;
        let commitment = self.commitment(card.color());
        let opp_value = self.value_for_opponent(card);
        let diff = v.score_diff(me);

        let mut value = p.deny_opponent_weight * opp_value;
        if diff <= 0 {
            value += p.losing_visible_draw_bonus;
        }
        if unopened {
            if opened >= 4 {
                value -= p.unopened_draw_penalty_four_open;
            } else if opened >= 3 {
                value -= p.unopened_draw_penalty_three_open;
            }
        }
        // Taking a fifth colour is refused unless it is exceptional or a
        // strong denial, or we are far behind.
        let refuse_fifth = |exceptional: bool| {
            unopened
                && opened >= 4
                && !exceptional
                && opp_value < p.strong_deny_threshold
                && diff > -15
        };

        if card.is_handshake() {
            if v.exp_last[me][c] > 0 {
                return value - p.dead_visible_draw_penalty;
            }
            if unopened {
                let (mut count, mut sum) = (0i32, 0i32);
                for &other in v.hand() {
                    if other.color() == card.color()
                        && !other.is_handshake()
                        && v.can_play(me, other)
                    {
                        count += 1;
                        sum += v.face(other);
                    }
                }
                if count < self.d.min_handshake_numbers
                    || f64::from(sum) < self.d.open_target_sum * p.handshake_target_multiplier
                {
                    let support = self.open_support(card);
                    if refuse_fifth(support >= 6.0) {
                        return -8.0;
                    }
                    return value + support - 0.5;
                }
            }
            return value + 6.0 + commitment;
        }

        let mut exceptional = false;
        if v.can_play(me, card) {
            value += f64::from(v.face(card)) + 0.7 * commitment;
            if unopened {
                let support = self.open_support(card);
                exceptional = support >= 6.0;
                value += support;
            } else {
                value += 5.0;
            }
        } else {
            value -= p.dead_visible_draw_penalty;
            if unopened {
                let support = self.open_support(card);
                exceptional = support >= 6.0;
                value += support;
            }
        }
        if refuse_fifth(exceptional) {
            return -8.0;
        }
        value + self.bonus_potential(card.color(), 1, 0, None)
    }

    /// How well a visible card would help open its (unopened) colour.
    fn open_support(&self, card: Card) -> f64 {
        let v = self.v;
        let p = self.p;
        let opened = v.opened_colors(self.me());
        let (mut future, mut handshakes) = (0i32, 0i32);
        for &other in v.hand() {
            if other.color() != card.color() {
                continue;
            }
            if other.is_handshake() {
                handshakes += 1;
            } else if other != card && other.rank() >= card.rank() {
                future += 1;
            }
        }
        let mut value = 0.8 * f64::from(future) + f64::from(handshakes);
        if card.rank() <= self.d.middle_rank {
            value += p.speculative_visible_draw_bonus;
        }
        if self.card_completes_opening(card) {
            value += 4.0;
        } else if opened <= 2 && (future > 0 || handshakes > 0) {
            value += p.speculative_visible_draw_bonus;
        }
        if opened <= 2 {
            value += 0.25 * self.opening_plan_value(card, v.deck_len);
        } else if opened == 3 {
            value += 0.1 * self.opening_plan_value(card, v.deck_len).max(0.0);
        }
        value
    }

    /// Whether `card` together with the hand's numbers of its colour at or
    /// above it would meet the opening requirements.
    fn card_completes_opening(&self, card: Card) -> bool {
        let v = self.v;
        let d = self.d;
        let (mut count, mut sum, mut high) = (1i32, v.face(card), card.rank() >= d.middle_rank);
        for &other in v.hand() {
            if other.color() == card.color() && !other.is_handshake() && other.rank() >= card.rank()
            {
                count += 1;
                sum += v.face(other);
                high |= other.rank() >= d.middle_rank;
            }
        }
        count >= d.min_open_cards && f64::from(sum) >= d.open_target_sum && high
    }
}

#[cfg(test)]
mod tests {
    use super::super::view::testing::{card, classic};
    use super::*;

    fn balanced() -> HeuristicBot {
        HeuristicBot::new(HeuristicParams::balanced())
    }

    /// Junk for padding hands: colour-4 cards nobody wants to open with.
    const PAD: [(u8, u8); 3] = [(4, 1), (4, 2), (3, 1)];

    fn hand(cards: &[(u8, u8)]) -> Vec<Card> {
        cards.iter().map(|&(c, r)| card(c, r)).collect()
    }

    #[test]
    fn derived_thresholds_match_the_reference_for_classic_rules() {
        let v = classic(&[]);
        let d = Derived::new(&v, &HeuristicParams::balanced());
        assert_eq!(d.middle_rank, 5);
        assert_eq!(d.max_color_sum, 54);
        assert_eq!(d.open_target_sum, 16.0);
        // round(3.2) = 3 and round(2.72) = 3 cards; 12 / 21 / 12 deck cards.
        assert_eq!((d.min_open_cards, d.min_handshake_numbers), (3, 3));
        assert_eq!((d.late_deck, d.mid_deck, d.late_open_block), (12, 21, 12));
        let a = Derived::new(&v, &HeuristicParams::aggressive());
        assert_eq!(
            (a.min_open_cards, a.min_handshake_numbers, a.late_open_block),
            (2, 2, 7)
        );
        let c = Derived::new(&v, &HeuristicParams::cautious());
        assert_eq!(
            (c.min_open_cards, c.min_handshake_numbers, c.late_open_block),
            (4, 4, 18)
        );
    }

    #[test]
    fn ratio_count_rounds_half_to_even_like_python() {
        assert_eq!(ratio_count(8, 0.3125, 8), 2); // 2.5 -> 2
        assert_eq!(ratio_count(8, 0.4375, 8), 4); // 3.5 -> 4
        assert_eq!(ratio_count(8, 0.01, 8), 1); // floor of 1
        assert_eq!(ratio_count(8, 5.0, 8), 8); // capped at the hand
    }

    #[test]
    fn plays_the_directly_following_card_on_a_started_expedition() {
        // Colour 0 holds 2,3 (ranks 1,2); in hand the 4 (rank 3) and the 8.
        let mut cards = hand(&[(0, 7), (2, 9), (0, 3)]);
        cards.extend(hand(&PAD));
        let mut v = classic(&cards);
        v.play_to(0, &[card(0, 1), card(0, 2)]);
        assert_eq!(
            balanced().choose_in(&v),
            Some(2 * 2),
            "expected play of slot 2"
        );
    }

    #[test]
    fn invests_a_handshake_before_numbers_when_the_colour_is_backed() {
        // Colour 1: handshake + 6,7,8,9 (sum 30 ≥ 16·1.15, 4 ≥ 3 cards).
        let mut cards = hand(&[(1, 5), (1, 6), (1, 7), (1, 8), (1, 0)]);
        cards.extend(hand(&PAD));
        let mut v = classic(&cards);
        // Another colour is open, so the forced-opening stage stays out of it.
        v.play_to(0, &[card(2, 9)]);
        assert_eq!(balanced().choose_in(&v), Some(2 * 4));
        // With 12 cards left (late_open_block) neither handshakes nor
        // openings are allowed, and no open colour can take a card: discard.
        let mut late = v.clone();
        late.deck_len = 12;
        let choice = balanced().choose_in(&late).unwrap();
        assert_eq!(choice % 2, 1, "expected a discard, got {choice}");
    }

    #[test]
    fn cautious_needs_more_support_for_a_handshake_than_aggressive() {
        // Handshake + 2 playable numbers summing 17: aggressive (2 cards,
        // 16) invests, balanced and cautious (3 and 4 cards) do not.
        let mut cards = hand(&[(1, 0), (1, 7), (1, 8)]);
        cards.extend(hand(&PAD));
        let v = classic(&cards);
        assert_eq!(
            HeuristicBot::new(HeuristicParams::aggressive()).choose_in(&v),
            Some(0)
        );
        assert_ne!(balanced().choose_in(&v), Some(0));
        assert_ne!(
            HeuristicBot::new(HeuristicParams::cautious()).choose_in(&v),
            Some(0)
        );
    }

    #[test]
    fn discards_a_dead_card_first() {
        // Colour 0 is at rank 6; the 3 of colour 0 (rank 2) is dead for us.
        let mut cards = hand(&[(0, 8), (2, 9), (0, 2)]);
        cards.extend(hand(&[(1, 9), (3, 9)]));
        let mut v = classic(&cards);
        v.play_to(0, &[card(0, 6)]);
        // Ask the discard stage directly (the number stage would play the 9).
        let d = Derived::new(&v, &HeuristicParams::balanced());
        let params = HeuristicParams::balanced();
        let ctx = Ctx {
            v: &v,
            p: &params,
            d: &d,
        };
        assert_eq!(ctx.best_discard(), Some(2 * 2 + 1));
    }

    #[test]
    fn draw_prefers_a_playable_top_and_otherwise_the_deck() {
        let mut cards = hand(&[(0, 5), (0, 8), (2, 9)]);
        cards.extend(hand(&PAD));
        let mut v = classic(&cards);
        v.play_to(0, &[card(0, 2), card(0, 3)]);
        let mut useful = v.clone();
        // The next card of our started colour 0 is on its pile.
        useful.draw_phase(&[card(0, 4)], None);
        assert_eq!(balanced().choose_in(&useful), Some(17));
        // The same pile while it is the pending colour cannot be taken.
        let mut pending = v.clone();
        pending.draw_phase(&[card(0, 4)], Some(0));
        assert_eq!(balanced().choose_in(&pending), Some(16));
        // A card below our colour-0 run is dead for us: deck.
        let mut dull = v.clone();
        dull.draw_phase(&[card(0, 1)], None);
        assert_eq!(balanced().choose_in(&dull), Some(16));
    }

    #[test]
    fn draw_takes_a_pile_when_the_deck_is_empty_of_options() {
        let v0 = classic(&hand(&PAD));
        let mut v = v0.clone();
        v.deck_len = 0;
        v.draw_phase(&[card(3, 2), card(1, 5)], None);
        let a = balanced().choose_in(&v).unwrap();
        assert!(a == 18 || a == 20, "{a}");
    }

    #[test]
    fn best_keeps_the_higher_id_on_ties() {
        let mut b = Best::new();
        b.offer(1.0, 3);
        b.offer(1.0, 5);
        b.offer(0.5, 7);
        assert_eq!(b.action, Some(5));
    }

    #[test]
    fn terminal_view_has_no_move() {
        let mut v = classic(&hand(&PAD));
        v.legal = 0;
        assert_eq!(balanced().choose_in(&v), None);
    }
}
