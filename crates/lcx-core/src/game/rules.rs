//! Rules configuration (docs/deep-cfr.md §1.1): sizes and scoring constants of a Lost
//! Cities variant, their validation, and the derived quantities (deck size,
//! action-space layout, card codes) that the engine and the encoding share.

use serde::{Deserialize, Serialize};

use super::card::Card;
use super::GameError;

/// Most colours (expeditions) a variant may have. Fixed so that the state is
/// a flat array-based struct whose `clone()` is a memcpy.
pub const MAX_COLORS: usize = 8;
/// Most cards of one colour (handshakes + ranks). A card packs colour and rank
/// into one byte (`colour << 4 | rank`), so ranks must fit in four bits.
pub const MAX_CARDS_PER_COLOR: usize = 16;
/// Highest numeric rank index (ranks are 1..=n_ranks, 0 is a handshake).
pub const MAX_RANKS: usize = 15;
/// Most cards in a hand.
pub const MAX_HAND: usize = 16;
/// Most cards in the deck.
pub const MAX_DECK: usize = MAX_COLORS * MAX_CARDS_PER_COLOR;
/// Unified action ids must fit in the `u64` legal mask.
pub const MAX_ACTIONS: usize = 64;

/// Rules of one variant. Fields are signed so that a bad config value (e.g. a
/// negative hand size) reaches [`Rules::validate`] and gets a clear message
/// instead of a deserialisation error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Rules {
    pub n_colors: i32,
    pub n_ranks: i32,
    pub min_rank: i32,
    pub n_handshakes: i32,
    pub hand_size: i32,
    pub expedition_penalty: i32,
    pub bonus_threshold: i32,
    pub bonus_amount: i32,
}

impl Default for Rules {
    fn default() -> Self {
        Self::classic()
    }
}

impl Rules {
    /// The classic game: 5 colours, ranks 2..10, 3 handshakes, hand of 8.
    pub const fn classic() -> Self {
        Self {
            n_colors: 5,
            n_ranks: 9,
            min_rank: 2,
            n_handshakes: 3,
            hand_size: 8,
            expedition_penalty: -20,
            bonus_threshold: 8,
            bonus_amount: 20,
        }
    }

    /// The tiny deterministic variant of the `canonical_small` fixture (docs/deep-cfr.md §1.9).
    pub const fn canonical_small() -> Self {
        Self {
            n_colors: 2,
            n_ranks: 2,
            min_rank: 1,
            n_handshakes: 0,
            hand_size: 1,
            expedition_penalty: 0,
            bonus_threshold: 99,
            bonus_amount: 0,
        }
    }

    /// A small but non-trivial variant (3 colours × (1 handshake + 5 ranks),
    /// hand 3) used by fast tests: 18 cards, games of a few dozen actions.
    pub const fn small() -> Self {
        Self {
            n_colors: 3,
            n_ranks: 5,
            min_rank: 2,
            n_handshakes: 1,
            hand_size: 3,
            expedition_penalty: -20,
            bonus_threshold: 8,
            bonus_amount: 20,
        }
    }

    /// Checks docs/deep-cfr.md §1.1's constraints and this engine's fixed capacities.
    pub fn validate(&self) -> Result<(), GameError> {
        let positive = [
            ("n_colors", self.n_colors),
            ("n_ranks", self.n_ranks),
            ("min_rank", self.min_rank),
            ("hand_size", self.hand_size),
            ("bonus_threshold", self.bonus_threshold),
        ];
        for (field, value) in positive {
            if value <= 0 {
                return Err(GameError::InvalidRules(format!(
                    "{field} must be > 0, got {value}"
                )));
            }
        }
        if self.n_handshakes < 0 {
            return Err(GameError::InvalidRules(format!(
                "n_handshakes must be >= 0, got {}",
                self.n_handshakes
            )));
        }
        let caps = [
            ("n_colors", self.n_colors as i64, MAX_COLORS as i64),
            ("n_ranks", self.n_ranks as i64, MAX_RANKS as i64),
            ("hand_size", self.hand_size as i64, MAX_HAND as i64),
            (
                "n_ranks + n_handshakes",
                self.n_ranks as i64 + self.n_handshakes as i64,
                MAX_CARDS_PER_COLOR as i64,
            ),
        ];
        for (field, value, cap) in caps {
            if value > cap {
                return Err(GameError::InvalidRules(format!(
                    "{field} is {value}, above this engine's capacity of {cap}"
                )));
            }
        }
        // Scores are i32; keep faces small enough that no sum can overflow.
        if self.min_rank > 1_000_000
            || self.expedition_penalty.abs() > 1_000_000
            || self.bonus_amount.abs() > 1_000_000
        {
            return Err(GameError::InvalidRules(
                "min_rank, expedition_penalty and bonus_amount must lie within ±1,000,000"
                    .to_string(),
            ));
        }
        if self.deck_size() < 2 * self.hand_size as usize {
            return Err(GameError::InvalidRules(format!(
                "deck_size (n_colors·(n_ranks+n_handshakes) = {}) must be >= 2·hand_size = {}",
                self.deck_size(),
                2 * self.hand_size
            )));
        }
        Ok(())
    }

    /// Cards of one colour: handshakes plus numeric ranks (12 classic).
    #[inline]
    pub fn cards_per_color(&self) -> usize {
        (self.n_ranks + self.n_handshakes) as usize
    }

    /// Total cards (60 classic).
    #[inline]
    pub fn deck_size(&self) -> usize {
        self.n_colors as usize * self.cards_per_color()
    }

    /// Size of the unified action space: `2·hand_size + 1 + n_colors` (22).
    #[inline]
    pub fn action_size(&self) -> usize {
        2 * self.hand_size as usize + 1 + self.n_colors as usize
    }

    /// Unified id of "draw from the deck" (16 classic).
    #[inline]
    pub fn draw_deck_action(&self) -> usize {
        2 * self.hand_size as usize
    }

    /// Unified id of "take the top of pile `color`" (17 + colour classic).
    #[inline]
    pub fn draw_pile_action(&self, color: usize) -> usize {
        2 * self.hand_size as usize + 1 + color
    }

    /// Face value of a numeric rank index (`min_rank + rank − 1`); 0 for a
    /// handshake.
    #[inline]
    pub fn face(&self, rank: u8) -> i32 {
        if rank == 0 {
            0
        } else {
            self.min_rank + rank as i32 - 1
        }
    }

    /// The spec's integer card code `colour·(n_ranks+1) + rank`.
    #[inline]
    pub fn card_code(&self, card: Card) -> usize {
        card.color() as usize * (self.n_ranks as usize + 1) + card.rank() as usize
    }

    /// Number of distinct card codes (`n_colors·(n_ranks+1)`, 50 classic).
    #[inline]
    pub fn n_card_codes(&self) -> usize {
        self.n_colors as usize * (self.n_ranks as usize + 1)
    }

    /// Score of one expedition from its summary (docs/deep-cfr.md §1.7).
    #[inline]
    pub fn expedition_score(&self, len: usize, handshakes: u8, numeric_sum: i32) -> i32 {
        if len == 0 {
            return 0;
        }
        let bonus = if len as i32 >= self.bonus_threshold {
            self.bonus_amount
        } else {
            0
        };
        (numeric_sum + self.expedition_penalty) * (handshakes as i32 + 1) + bonus
    }

    /// Score of an expedition given as cards in play order.
    pub fn score_cards(&self, cards: &[Card]) -> i32 {
        let handshakes = cards.iter().filter(|c| c.is_handshake()).count() as u8;
        let sum = cards.iter().map(|c| self.face(c.rank())).sum();
        self.expedition_score(cards.len(), handshakes, sum)
    }

    /// The unshuffled deck: each colour in turn, its handshakes then ranks
    /// 1..n_ranks (docs/deep-cfr.md §1.2).
    pub fn ordered_deck(&self) -> Vec<Card> {
        let mut deck = Vec::with_capacity(self.deck_size());
        for color in 0..self.n_colors as u8 {
            for _ in 0..self.n_handshakes {
                deck.push(Card::new(color, 0));
            }
            for rank in 1..=self.n_ranks as u8 {
                deck.push(Card::new(color, rank));
            }
        }
        deck
    }

    /// Whether `card` exists in this variant.
    #[inline]
    pub fn contains(&self, card: Card) -> bool {
        (card.color() as i32) < self.n_colors
            && (card.rank() as i32) <= self.n_ranks
            && (card.rank() > 0 || self.n_handshakes > 0)
    }
}
