//! The game state, its transitions (docs/deep-cfr.md §1.4–1.6), scoring caches (§1.7), undo and
//! invariant checks (docs/deep-cfr.md §1.8).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::card::Card;
use super::rules::{Rules, MAX_CARDS_PER_COLOR, MAX_COLORS, MAX_DECK, MAX_HAND};
use super::GameError;

/// The two phases of a turn, both taken by the same player.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Play or discard a hand card.
    Card,
    /// Draw from the deck or take the top of a discard pile.
    Draw,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Card => "card",
            Phase::Draw => "draw",
        }
    }
}

/// Internal marker for "no pending discard colour".
const NO_PENDING: u8 = u8::MAX;
/// Internal marker in [`Undo::source`] for "drawn from the deck".
const FROM_DECK: u8 = u8::MAX;

/// Everything needed to revert one applied action. Small and `Copy`, so
/// callers keep it on their own stack (no allocation per action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Undo {
    action: u8,
    /// Card action: the hand slot the card left. Draw: unused.
    slot: u8,
    /// Draw: the pile colour drawn from, or [`FROM_DECK`].
    source: u8,
    card: Card,
    prev_player: u8,
    prev_phase: Phase,
    prev_pending: u8,
    prev_terminal: bool,
    /// Play only: expedition caches before the play.
    prev_play_floor: u8,
    prev_handshakes: u8,
    prev_sum: i32,
    prev_score: i32,
}

impl Undo {
    /// The unified id of the action this record reverts.
    #[inline]
    pub fn action(&self) -> usize {
        self.action as usize
    }
}

/// A complete game state. Flat and fixed-size: `clone()` copies a few hundred
/// bytes and touches no heap. Equality compares the live contents only (array
/// slots past a length are stale leftovers and do not count).
#[derive(Clone)]
pub struct GameState {
    rules: Rules,
    n_colors: u8,
    hand_size: u8,
    current_player: u8,
    phase: Phase,
    pending: u8,
    terminal: bool,
    deck_len: u8,
    turn_count: u32,
    hand_len: [u8; 2],
    pile_len: [u8; MAX_COLORS],
    /// Bit c set ⇔ pile c is non-empty (kept in step with `pile_len` so the
    /// draw mask is two shifts instead of a loop over colours).
    pile_nonempty: u8,
    exp_len: [[u8; MAX_COLORS]; 2],
    /// Cached per expedition: the lowest rank that may still be played
    /// (0 while no number is down, else last number + 1; storing the floor
    /// rather than the last number makes the legality test one comparison),
    /// handshake count, face sum of the numbers and score.
    play_floor: [[u8; MAX_COLORS]; 2],
    handshakes: [[u8; MAX_COLORS]; 2],
    numeric_sum: [[i32; MAX_COLORS]; 2],
    exp_score: [[i32; MAX_COLORS]; 2],
    totals: [i32; 2],
    hands: [[Card; MAX_HAND]; 2],
    /// Bottom first; the top of the deck is `deck[deck_len - 1]`.
    deck: [Card; MAX_DECK],
    piles: [[Card; MAX_CARDS_PER_COLOR]; MAX_COLORS],
    exps: [[[Card; MAX_CARDS_PER_COLOR]; MAX_COLORS]; 2],
}

impl PartialEq for GameState {
    fn eq(&self, o: &Self) -> bool {
        let nc = self.n_colors as usize;
        self.rules == o.rules
            && self.current_player == o.current_player
            && self.phase == o.phase
            && self.pending == o.pending
            && self.terminal == o.terminal
            && self.turn_count == o.turn_count
            && self.deck() == o.deck()
            && (0..2).all(|p| {
                self.hand(p) == o.hand(p)
                    && self.totals[p] == o.totals[p]
                    && (0..nc).all(|c| {
                        self.expedition(p, c) == o.expedition(p, c)
                            && self.play_floor[p][c] == o.play_floor[p][c]
                            && self.handshakes[p][c] == o.handshakes[p][c]
                            && self.numeric_sum[p][c] == o.numeric_sum[p][c]
                            && self.exp_score[p][c] == o.exp_score[p][c]
                    })
            })
            && (0..nc).all(|c| self.discard_pile(c) == o.discard_pile(c))
    }
}

impl Eq for GameState {}

impl std::fmt::Debug for GameState {
    /// The snapshot view: live contents only, no capacity padding.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nc = self.n_colors as usize;
        let cards = |cs: &[Card]| {
            cs.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        writeln!(
            f,
            "GameState {{ player {} phase {} pending {:?} turn {} terminal {} totals {:?}",
            self.current_player,
            self.phase.as_str(),
            self.pending_discard_color(),
            self.turn_count,
            self.terminal,
            self.totals
        )?;
        writeln!(f, "  deck: {}", cards(self.deck()))?;
        for p in 0..2 {
            writeln!(f, "  hand {p}: {}", cards(self.hand(p)))?;
            for c in 0..nc {
                writeln!(f, "  exp {p}/{c}: {}", cards(self.expedition(p, c)))?;
            }
        }
        for c in 0..nc {
            writeln!(f, "  pile {c}: {}", cards(self.discard_pile(c)))?;
        }
        write!(f, "}}")
    }
}

impl GameState {
    /// A new game: the ordered deck shuffled with a ChaCha8 RNG seeded from
    /// `seed`, then dealt (docs/deep-cfr.md §1.2).
    pub fn new(rules: &Rules, seed: u64) -> Result<Self, GameError> {
        rules.validate()?;
        let mut s = Self::empty(rules);
        // Written in place (no Vec): a new game per seed is on the hot path
        // of random playouts.
        let mut n = 0;
        for color in 0..s.n_colors {
            for _ in 0..rules.n_handshakes {
                s.deck[n] = Card::new(color, 0);
                n += 1;
            }
            for rank in 1..=rules.n_ranks as u8 {
                s.deck[n] = Card::new(color, rank);
                n += 1;
            }
        }
        s.deck_len = n as u8;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        s.deck[..n].shuffle(&mut rng);
        s.deal();
        Ok(s)
    }

    /// A new game from an explicit deck order (index 0 = bottom, last element
    /// = top, dealt first). The deck must be exactly the variant's full deck.
    pub fn from_deck(rules: &Rules, deck: &[Card]) -> Result<Self, GameError> {
        rules.validate()?;
        if deck.len() != rules.deck_size() {
            return Err(GameError::InvalidDeck(format!(
                "expected {} cards, got {}",
                rules.deck_size(),
                deck.len()
            )));
        }
        let mut want = [0i32; 256];
        for c in rules.ordered_deck() {
            want[c.packed() as usize] += 1;
        }
        for &c in deck {
            if !rules.contains(c) {
                return Err(GameError::InvalidDeck(format!(
                    "card {c} does not exist in this variant"
                )));
            }
            want[c.packed() as usize] -= 1;
            if want[c.packed() as usize] < 0 {
                return Err(GameError::InvalidDeck(format!(
                    "card {c} appears too often"
                )));
            }
        }
        let mut s = Self::empty(rules);
        s.deck[..deck.len()].copy_from_slice(deck);
        s.deck_len = deck.len() as u8;
        s.deal();
        Ok(s)
    }

    /// A state with nothing anywhere; `rules` must already be valid.
    pub(super) fn empty(rules: &Rules) -> Self {
        Self {
            rules: *rules,
            n_colors: rules.n_colors as u8,
            hand_size: rules.hand_size as u8,
            current_player: 0,
            phase: Phase::Card,
            pending: NO_PENDING,
            terminal: false,
            deck_len: 0,
            turn_count: 0,
            hand_len: [0; 2],
            pile_len: [0; MAX_COLORS],
            pile_nonempty: 0,
            exp_len: [[0; MAX_COLORS]; 2],
            play_floor: [[0; MAX_COLORS]; 2],
            handshakes: [[0; MAX_COLORS]; 2],
            numeric_sum: [[0; MAX_COLORS]; 2],
            exp_score: [[0; MAX_COLORS]; 2],
            totals: [0; 2],
            hands: [[Card::default(); MAX_HAND]; 2],
            deck: [Card::default(); MAX_DECK],
            piles: [[Card::default(); MAX_CARDS_PER_COLOR]; MAX_COLORS],
            exps: [[[Card::default(); MAX_CARDS_PER_COLOR]; MAX_COLORS]; 2],
        }
    }

    /// hand_size rounds; in each, player 0 then player 1 takes the top card.
    fn deal(&mut self) {
        for _ in 0..self.hand_size {
            for p in 0..2 {
                self.deck_len -= 1;
                let card = self.deck[self.deck_len as usize];
                let n = self.hand_len[p] as usize;
                self.hands[p][n] = card;
                self.hand_len[p] += 1;
            }
        }
    }

    // ----- accessors -------------------------------------------------------

    #[inline]
    pub fn rules(&self) -> &Rules {
        &self.rules
    }
    #[inline]
    pub fn n_colors(&self) -> usize {
        self.n_colors as usize
    }
    #[inline]
    pub fn hand_size(&self) -> usize {
        self.hand_size as usize
    }
    /// Size of the unified action space (22 classic).
    #[inline]
    pub fn action_size(&self) -> usize {
        2 * self.hand_size as usize + 1 + self.n_colors as usize
    }
    #[inline]
    pub fn current_player(&self) -> usize {
        self.current_player as usize
    }
    #[inline]
    pub fn phase(&self) -> Phase {
        self.phase
    }
    #[inline]
    pub fn is_terminal(&self) -> bool {
        self.terminal
    }
    /// The colour discarded earlier this turn (its pile may not be drawn).
    #[inline]
    pub fn pending_discard_color(&self) -> Option<usize> {
        (self.pending != NO_PENDING).then_some(self.pending as usize)
    }
    /// Number of draws so far (not actions).
    #[inline]
    pub fn turn_count(&self) -> u32 {
        self.turn_count
    }
    #[inline]
    pub fn deck_len(&self) -> usize {
        self.deck_len as usize
    }
    /// The deck, bottom first (the last element is the next card drawn).
    #[inline]
    pub fn deck(&self) -> &[Card] {
        &self.deck[..self.deck_len as usize]
    }
    /// Player `p`'s hand in slot order.
    #[inline]
    pub fn hand(&self, p: usize) -> &[Card] {
        &self.hands[p][..self.hand_len[p] as usize]
    }
    /// Player `p`'s expedition of `color`, in play order.
    #[inline]
    pub fn expedition(&self, p: usize, color: usize) -> &[Card] {
        &self.exps[p][color][..self.exp_len[p][color] as usize]
    }
    /// Discard pile of `color`, bottom first (last = top).
    #[inline]
    pub fn discard_pile(&self, color: usize) -> &[Card] {
        &self.piles[color][..self.pile_len[color] as usize]
    }
    #[inline]
    pub fn pile_top(&self, color: usize) -> Option<Card> {
        let n = self.pile_len[color] as usize;
        (n > 0).then(|| self.piles[color][n - 1])
    }
    /// Rank index of the last number in the expedition, 0 if none.
    #[inline]
    pub fn last_numeric(&self, p: usize, color: usize) -> u8 {
        self.play_floor[p][color].saturating_sub(1)
    }
    #[inline]
    pub fn expedition_handshakes(&self, p: usize, color: usize) -> u8 {
        self.handshakes[p][color]
    }
    /// Face sum of the numbers in the expedition.
    #[inline]
    pub fn expedition_numeric_sum(&self, p: usize, color: usize) -> i32 {
        self.numeric_sum[p][color]
    }
    #[inline]
    pub fn expedition_score(&self, p: usize, color: usize) -> i32 {
        self.exp_score[p][color]
    }
    #[inline]
    pub fn total_score(&self, p: usize) -> i32 {
        self.totals[p]
    }
    /// total(p) − total(1−p).
    #[inline]
    pub fn score_diff(&self, p: usize) -> i32 {
        self.totals[p] - self.totals[1 - p]
    }
    /// Whether `card` may be played on player `p`'s expedition (docs/deep-cfr.md §1.5): a
    /// handshake only before any number, a number only above the last one.
    #[inline]
    pub fn can_play(&self, p: usize, card: Card) -> bool {
        // Floor 0 (no number yet) admits handshakes and any number; otherwise
        // only a higher number (a handshake has rank 0 and fails).
        card.rank() >= self.play_floor[p][card.color() as usize]
    }

    // ----- action ids ------------------------------------------------------

    /// Unified id of the first draw action (16 classic).
    #[inline]
    pub fn draw_base(&self) -> usize {
        2 * self.hand_size as usize
    }

    /// Converts a phase-local id of the current phase to a unified id.
    pub fn to_unified(&self, local: usize) -> Result<usize, GameError> {
        let (base, n) = match self.phase {
            Phase::Card => (0, self.draw_base()),
            Phase::Draw => (self.draw_base(), 1 + self.n_colors as usize),
        };
        if local >= n {
            return Err(GameError::IllegalAction {
                action: local,
                reason: format!(
                    "local id out of range for the {} phase (0..{n})",
                    self.phase.as_str()
                ),
            });
        }
        Ok(base + local)
    }

    /// Converts a unified id to the current phase's local id; an id of the
    /// other phase is an error.
    pub fn to_local(&self, unified: usize) -> Result<usize, GameError> {
        let base = self.draw_base();
        match self.phase {
            Phase::Card if unified < base => Ok(unified),
            Phase::Draw if unified >= base && unified < self.action_size() => Ok(unified - base),
            _ => Err(GameError::IllegalAction {
                action: unified,
                reason: format!("not an action of the {} phase", self.phase.as_str()),
            }),
        }
    }

    // ----- legality --------------------------------------------------------

    /// Legal unified ids as bits (bit i = id i). 0 when terminal.
    #[inline]
    pub fn legal_mask(&self) -> u64 {
        if self.terminal {
            0
        } else {
            self.raw_legal_mask()
        }
    }

    /// The legal mask ignoring the terminal flag. Always inlined, like
    /// [`Self::apply`]: both run once per step of every playout.
    #[inline(always)]
    fn raw_legal_mask(&self) -> u64 {
        match self.phase {
            Phase::Card => {
                let p = self.current_player as usize;
                let mut m = 0u64;
                for (i, &card) in self.hand(p).iter().enumerate() {
                    let play = self.can_play(p, card) as u64;
                    m |= (0b10 | play) << (2 * i);
                }
                m
            }
            Phase::Draw => self.draw_mask(),
        }
    }

    /// Legal draw actions as unified-id bits.
    #[inline]
    fn draw_mask(&self) -> u64 {
        let base = self.draw_base();
        let pending_bit = if self.pending < 8 {
            1u8 << self.pending
        } else {
            0
        };
        let piles = (self.pile_nonempty & !pending_bit) as u64;
        (((self.deck_len > 0) as u64) << base) | (piles << (base + 1))
    }

    #[inline]
    pub fn is_legal(&self, unified: usize) -> bool {
        unified < 64 && (self.legal_mask() >> unified) & 1 == 1
    }

    /// Fills `out[i]` with the legality of unified id `i` (use a slice of
    /// length [`Self::action_size`]).
    #[inline]
    pub fn legal_bools(&self, out: &mut [bool]) {
        super::mask_to_bools(self.legal_mask(), out)
    }

    /// Legal unified ids, ascending.
    #[inline]
    pub fn legal_actions(&self) -> super::MaskIter {
        super::mask_iter(self.legal_mask())
    }

    // ----- transitions -----------------------------------------------------

    /// Applies a phase-local id of the current phase.
    pub fn apply_local(&mut self, local: usize) -> Result<Undo, GameError> {
        let unified = self.to_unified(local)?;
        self.apply(unified)
    }

    /// Applies a unified action id and returns the record that reverts it.
    // Always inlined (plain `#[inline]` left it out of line in the playout
    // loop): a caller that drops the `Undo` then never writes it, and a
    // caller compiled for extra target features (the BMI2 playout in
    // `bench::engine`) compiles this with them. ~8% on random games.
    #[inline(always)]
    pub fn apply(&mut self, action: usize) -> Result<Undo, GameError> {
        if self.terminal {
            return Err(GameError::GameOver { action });
        }
        let p = self.current_player as usize;
        let mut undo = Undo {
            action: action.min(255) as u8,
            slot: 0,
            source: FROM_DECK,
            card: Card::default(),
            prev_player: self.current_player,
            prev_phase: self.phase,
            prev_pending: self.pending,
            prev_terminal: self.terminal,
            prev_play_floor: 0,
            prev_handshakes: 0,
            prev_sum: 0,
            prev_score: 0,
        };
        let base = self.draw_base();
        match self.phase {
            Phase::Card => {
                let slot = action >> 1;
                let hand_len = self.hand_len[p] as usize;
                if action >= base || slot >= hand_len {
                    return Err(self.illegal(action));
                }
                let card = self.hands[p][slot];
                let color = card.color() as usize;
                let discard = action & 1 == 1;
                if !discard && !self.can_play(p, card) {
                    return Err(self.illegal(action));
                }
                remove_slot(&mut self.hands[p], slot);
                self.hand_len[p] -= 1;
                undo.slot = slot as u8;
                undo.card = card;
                if discard {
                    self.push_pile(color, card);
                    self.pending = color as u8;
                } else {
                    undo.prev_play_floor = self.play_floor[p][color];
                    undo.prev_handshakes = self.handshakes[p][color];
                    undo.prev_sum = self.numeric_sum[p][color];
                    undo.prev_score = self.exp_score[p][color];
                    // `can_play` held above, so the expedition stays in order.
                    self.push_expedition(p, color, card);
                    self.pending = NO_PENDING;
                }
                self.phase = Phase::Draw;
                // Only reachable from hand-built states: nothing left to draw.
                if self.deck_len == 0 && self.draw_mask() == 0 {
                    self.terminal = true;
                }
            }
            Phase::Draw => {
                // A hand-built state may hold a full hand in the draw phase;
                // refuse rather than overflow the fixed-size hand.
                if action < base
                    || action > base + self.n_colors as usize
                    || self.hand_len[p] as usize >= MAX_HAND
                {
                    return Err(self.illegal(action));
                }
                let card = if action == base {
                    if self.deck_len == 0 {
                        return Err(self.illegal(action));
                    }
                    self.deck_len -= 1;
                    self.deck[self.deck_len as usize]
                } else {
                    let color = action - base - 1;
                    if self.pile_len[color] == 0 || color as u8 == self.pending {
                        return Err(self.illegal(action));
                    }
                    undo.source = color as u8;
                    self.pile_len[color] -= 1;
                    if self.pile_len[color] == 0 {
                        self.pile_nonempty &= !(1 << color);
                    }
                    self.piles[color][self.pile_len[color] as usize]
                };
                undo.card = card;
                let n = self.hand_len[p] as usize;
                self.hands[p][n] = card;
                self.hand_len[p] += 1;
                self.pending = NO_PENDING;
                self.turn_count += 1;
                if self.deck_len == 0 {
                    // Quirk kept from the reference: the player who made the
                    // last draw stays current and the phase stays DRAW.
                    self.terminal = true;
                } else {
                    self.current_player ^= 1;
                    self.phase = Phase::Card;
                }
            }
        }
        Ok(undo)
    }

    #[cold]
    fn illegal(&self, action: usize) -> GameError {
        GameError::IllegalAction {
            action,
            reason: format!(
                "not legal in the {} phase for player {} (legal: {:?})",
                self.phase.as_str(),
                self.current_player,
                self.legal_actions().collect::<Vec<_>>()
            ),
        }
    }

    /// Reverts the action `undo` was returned for. Records must be undone in
    /// reverse order of application, on the state they came from.
    #[inline]
    pub fn undo(&mut self, undo: &Undo) {
        let p = undo.prev_player as usize;
        match undo.prev_phase {
            Phase::Card => {
                let card = undo.card;
                let color = card.color() as usize;
                if undo.action & 1 == 1 {
                    self.pile_len[color] -= 1;
                    if self.pile_len[color] == 0 {
                        self.pile_nonempty &= !(1 << color);
                    }
                } else {
                    self.exp_len[p][color] -= 1;
                    self.play_floor[p][color] = undo.prev_play_floor;
                    self.handshakes[p][color] = undo.prev_handshakes;
                    self.numeric_sum[p][color] = undo.prev_sum;
                    self.totals[p] += undo.prev_score - self.exp_score[p][color];
                    self.exp_score[p][color] = undo.prev_score;
                }
                insert_slot(&mut self.hands[p], undo.slot as usize, card);
                self.hand_len[p] += 1;
            }
            Phase::Draw => {
                self.hand_len[p] -= 1;
                let card = self.hands[p][self.hand_len[p] as usize];
                if undo.source == FROM_DECK {
                    self.deck[self.deck_len as usize] = card;
                    self.deck_len += 1;
                } else {
                    let c = undo.source as usize;
                    self.piles[c][self.pile_len[c] as usize] = card;
                    self.pile_len[c] += 1;
                    self.pile_nonempty |= 1 << c;
                }
                self.turn_count -= 1;
            }
        }
        self.current_player = undo.prev_player;
        self.phase = undo.prev_phase;
        self.pending = undo.prev_pending;
        self.terminal = undo.prev_terminal;
    }

    /// Swaps two deck positions (0 = bottom); used to resample hidden cards.
    #[inline]
    pub fn swap_deck_cards(&mut self, i: usize, j: usize) -> Result<(), GameError> {
        let len = self.deck_len as usize;
        if i >= len || j >= len {
            return Err(GameError::DeckIndex { i, j, len });
        }
        self.deck.swap(i, j);
        Ok(())
    }

    // ----- invariants ------------------------------------------------------

    /// Checks docs/deep-cfr.md §1.8's invariants plus the consistency of the cached scores.
    pub fn validate_invariants(&self) -> Result<(), GameError> {
        let r = &self.rules;
        let nc = self.n_colors as usize;
        let cpc = r.cards_per_color();
        let inv = |m: String| Err(GameError::Invariant(m));
        if self.current_player > 1 {
            return inv(format!("current_player is {}", self.current_player));
        }
        if self.deck_len as usize > r.deck_size() {
            return inv(format!(
                "deck holds {} > {} cards",
                self.deck_len,
                r.deck_size()
            ));
        }
        for p in 0..2 {
            if self.hand_len[p] as usize > self.hand_size as usize {
                return inv(format!(
                    "hand {p} holds {} > {} cards",
                    self.hand_len[p], self.hand_size
                ));
            }
            for c in 0..nc {
                if self.exp_len[p][c] as usize > cpc {
                    return inv(format!(
                        "expedition [{p}][{c}] holds {} cards",
                        self.exp_len[p][c]
                    ));
                }
            }
        }
        for c in 0..nc {
            if self.pile_len[c] as usize > cpc {
                return inv(format!("pile {c} holds {} cards", self.pile_len[c]));
            }
            if (self.pile_len[c] > 0) != ((self.pile_nonempty >> c) & 1 == 1) {
                return inv(format!("pile {c}: stale non-empty flag"));
            }
        }
        // Exactly the full deck, as a multiset.
        let mut count = [0i32; 256];
        for card in r.ordered_deck() {
            count[card.packed() as usize] += 1;
        }
        let mut seen = |card: Card, place: &str| -> Result<(), GameError> {
            if !r.contains(card) {
                return Err(GameError::Invariant(format!(
                    "{place} holds unknown card {card}"
                )));
            }
            count[card.packed() as usize] -= 1;
            Ok(())
        };
        for &card in self.deck() {
            seen(card, "deck")?;
        }
        for p in 0..2 {
            for &card in self.hand(p) {
                seen(card, "hand")?;
            }
            for c in 0..nc {
                for &card in self.expedition(p, c) {
                    seen(card, "expedition")?;
                }
            }
        }
        for c in 0..nc {
            for &card in self.discard_pile(c) {
                seen(card, "discard pile")?;
            }
        }
        for card in r.ordered_deck() {
            let k = count[card.packed() as usize];
            if k > 0 {
                return inv(format!("card {card} is missing ({k} lost)"));
            }
            if k < 0 {
                return inv(format!("card {card} is duplicated ({} extra)", -k));
            }
        }
        // Expedition order, colours and caches.
        for p in 0..2 {
            for c in 0..nc {
                let exp = self.expedition(p, c);
                let mut last = 0u8;
                let mut hs = 0u8;
                let mut sum = 0i32;
                for &card in exp {
                    if card.color() as usize != c {
                        return inv(format!("expedition [{p}][{c}] holds {card}"));
                    }
                    if card.is_handshake() {
                        if last > 0 {
                            return inv(format!("expedition [{p}][{c}]: handshake after a number"));
                        }
                        hs += 1;
                    } else {
                        if card.rank() <= last {
                            return inv(format!(
                                "expedition [{p}][{c}]: numbers not strictly increasing"
                            ));
                        }
                        last = card.rank();
                        sum += r.face(card.rank());
                    }
                }
                let score = r.expedition_score(exp.len(), hs, sum);
                if (last, hs, sum, score)
                    != (
                        self.last_numeric(p, c),
                        self.handshakes[p][c],
                        self.numeric_sum[p][c],
                        self.exp_score[p][c],
                    )
                {
                    return inv(format!("expedition [{p}][{c}]: stale cached summary"));
                }
            }
            let total: i32 = self.exp_score[p][..nc].iter().sum();
            if total != self.totals[p] {
                return inv(format!("total of player {p} is stale"));
            }
        }
        for c in 0..nc {
            if let Some(card) = self
                .discard_pile(c)
                .iter()
                .find(|k| k.color() as usize != c)
            {
                return inv(format!("pile {c} holds {card}"));
            }
        }
        if let Some(c) = self.pending_discard_color() {
            if self.phase == Phase::Card {
                return inv(format!("pending colour {c} during the card phase"));
            }
            if c >= nc || self.pile_len[c] == 0 {
                return inv(format!("pending colour {c} has no pile card"));
            }
        }
        // terminal ⇔ no legal action. A terminal state has none by definition;
        // a live state must offer at least one.
        if !self.terminal && self.raw_legal_mask() == 0 {
            return inv("the game is not over but no action is legal".to_string());
        }
        Ok(())
    }

    // Used by the snapshot module to rebuild a state field by field.
    pub(super) fn set_meta(
        &mut self,
        current_player: u8,
        phase: Phase,
        pending: Option<u8>,
        turn_count: u32,
        terminal: bool,
    ) {
        self.current_player = current_player;
        self.phase = phase;
        self.pending = pending.unwrap_or(NO_PENDING);
        self.turn_count = turn_count;
        self.terminal = terminal;
    }

    pub(super) fn push_deck(&mut self, card: Card) {
        self.deck[self.deck_len as usize] = card;
        self.deck_len += 1;
    }

    pub(super) fn push_hand(&mut self, p: usize, card: Card) {
        self.hands[p][self.hand_len[p] as usize] = card;
        self.hand_len[p] += 1;
    }

    #[inline]
    pub(super) fn push_pile(&mut self, color: usize, card: Card) {
        self.piles[color][self.pile_len[color] as usize] = card;
        self.pile_len[color] += 1;
        self.pile_nonempty |= 1 << color;
    }

    /// Appends to an expedition without checking order (snapshots may be
    /// disordered; `validate_invariants` reports it) and refreshes caches:
    /// the one place an expedition's score is kept, for `apply` and
    /// snapshots alike.
    #[inline]
    pub(super) fn push_expedition(&mut self, p: usize, color: usize, card: Card) {
        let n = self.exp_len[p][color] as usize;
        self.exps[p][color][n] = card;
        self.exp_len[p][color] += 1;
        if card.is_handshake() {
            self.handshakes[p][color] += 1;
        } else {
            self.play_floor[p][color] = card.rank() + 1;
            self.numeric_sum[p][color] += self.rules.face(card.rank());
        }
        let score = self.rules.expedition_score(
            n + 1,
            self.handshakes[p][color],
            self.numeric_sum[p][color],
        );
        self.totals[p] += score - self.exp_score[p][color];
        self.exp_score[p][color] = score;
    }
}

/// The hand as two little-endian 64-bit words (slots 0..8 and 8..16).
#[inline(always)]
fn hand_words(hand: &[Card; MAX_HAND]) -> (u64, u64) {
    let b = hand.map(Card::packed);
    let lo = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let hi = u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
    (lo, hi)
}

#[inline(always)]
fn set_hand_words(hand: &mut [Card; MAX_HAND], lo: u64, hi: u64) {
    let (l, h) = (lo.to_le_bytes(), hi.to_le_bytes());
    for i in 0..8 {
        hand[i] = Card::from_packed(l[i]);
        hand[i + 8] = Card::from_packed(h[i]);
    }
}

/// Bytes below `slot` (slot < 8).
#[inline(always)]
fn low_bytes(slot: usize) -> u64 {
    (1u64 << (8 * slot)) - 1
}

/// Removes `hand[slot]`, shifting later cards left. Done with shifts on the
/// hand viewed as two 64-bit words: no `memmove` call and no per-slot loop,
/// because this runs on every card action. (Plain u128 shifts by a variable
/// amount cost about three times as many instructions on x86-64.)
#[inline(always)]
fn remove_slot(hand: &mut [Card; MAX_HAND], slot: usize) {
    let (lo, hi) = hand_words(hand);
    let (lo, hi) = if slot < 8 {
        let low = low_bytes(slot);
        ((lo & low) | ((lo >> 8) & !low) | (hi << 56), hi >> 8)
    } else {
        let low = low_bytes(slot - 8);
        (lo, (hi & low) | ((hi >> 8) & !low))
    };
    set_hand_words(hand, lo, hi);
}

/// Inserts `card` at `slot`, shifting later cards right (inverse of
/// [`remove_slot`]; the last cell falls off, it is past any hand).
#[inline(always)]
fn insert_slot(hand: &mut [Card; MAX_HAND], slot: usize, card: Card) {
    let (lo, hi) = hand_words(hand);
    let k = card.packed() as u64;
    let (lo, hi) = if slot < 8 {
        let low = low_bytes(slot);
        (
            (lo & low) | (k << (8 * slot)) | ((lo & !low) << 8),
            (hi << 8) | (lo >> 56),
        )
    } else {
        let low = low_bytes(slot - 8);
        (
            lo,
            (hi & low) | (k << (8 * (slot - 8))) | ((hi & !low) << 8),
        )
    };
    set_hand_words(hand, lo, hi);
}

/// The spec's push/pop history (docs/deep-cfr.md §1.8), kept beside the state rather than in
/// it so that cloning a state never copies a history.
#[derive(Clone, Debug, Default)]
pub struct UndoStack {
    stack: Vec<Undo>,
}

impl UndoStack {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Self {
            stack: Vec::with_capacity(n),
        }
    }

    /// Applies a phase-local id and records how to undo it.
    pub fn push_action(&mut self, state: &mut GameState, local: usize) -> Result<(), GameError> {
        let undo = state.apply_local(local)?;
        self.stack.push(undo);
        Ok(())
    }

    /// Applies a unified id and records how to undo it.
    pub fn push_unified(&mut self, state: &mut GameState, action: usize) -> Result<(), GameError> {
        let undo = state.apply(action)?;
        self.stack.push(undo);
        Ok(())
    }

    /// Undoes the most recent action and returns its phase-local id.
    pub fn pop_action(&mut self, state: &mut GameState) -> Result<usize, GameError> {
        let undo = self.stack.pop().ok_or(GameError::EmptyHistory)?;
        state.undo(&undo);
        state.to_local(undo.action())
    }

    pub fn len(&self) -> usize {
        self.stack.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    pub fn clear(&mut self) {
        self.stack.clear();
    }
}
