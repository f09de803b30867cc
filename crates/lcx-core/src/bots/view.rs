//! A compact, stack-only snapshot of what the acting player may see, built
//! once per decision so the heuristic's many small scans read plain arrays.

use crate::game::{GameState, Phase};

pub(crate) use crate::game::Card;
/// Most colours / hand slots a view holds: the engine's own capacities.
pub(crate) use crate::game::{MAX_COLORS, MAX_HAND};

/// The acting player's view of a state.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub n_colors: u8,
    pub n_ranks: u8,
    pub min_rank: i32,
    pub n_handshakes: u8,
    pub hand_capacity: u8,
    pub penalty: i32,
    pub bonus_threshold: i32,
    pub bonus_amount: i32,
    /// Cards in the full deck (60 classic), not cards left.
    pub deck_size: i32,

    pub player: usize,
    pub card_phase: bool,
    pub legal: u64,
    pub deck_len: i32,
    pub totals: [i32; 2],

    hand: [Card; MAX_HAND],
    hand_len: usize,
    pub exp_len: [[i32; MAX_COLORS]; 2],
    pub exp_handshakes: [[i32; MAX_COLORS]; 2],
    /// Sum of the faces of the numbers played.
    pub exp_sum: [[i32; MAX_COLORS]; 2],
    /// Rank of the last number played, 0 if none.
    pub exp_last: [[u8; MAX_COLORS]; 2],
    pub discard_top: [Option<Card>; MAX_COLORS],
}

impl View {
    pub fn new(state: &GameState) -> View {
        let rules = state.rules();
        let player = state.current_player();
        let n_colors = state.n_colors();
        let mut v = View {
            // Rules::validate bounds every size by the engine capacities
            // (all < 256), so these narrowings are exact.
            n_colors: n_colors as u8,
            n_ranks: rules.n_ranks as u8,
            min_rank: rules.min_rank,
            n_handshakes: rules.n_handshakes as u8,
            hand_capacity: state.hand_size() as u8,
            penalty: rules.expedition_penalty,
            bonus_threshold: rules.bonus_threshold,
            bonus_amount: rules.bonus_amount,
            deck_size: rules.deck_size() as i32,
            player,
            card_phase: state.phase() == Phase::Card,
            legal: state.legal_mask(),
            deck_len: state.deck_len() as i32,
            totals: [state.total_score(0), state.total_score(1)],
            hand: [Card::default(); MAX_HAND],
            hand_len: 0,
            exp_len: [[0; MAX_COLORS]; 2],
            exp_handshakes: [[0; MAX_COLORS]; 2],
            exp_sum: [[0; MAX_COLORS]; 2],
            exp_last: [[0; MAX_COLORS]; 2],
            discard_top: [None; MAX_COLORS],
        };
        let hand = state.hand(player);
        v.hand[..hand.len()].copy_from_slice(hand);
        v.hand_len = hand.len();
        for p in 0..2 {
            for c in 0..n_colors {
                v.exp_len[p][c] = state.expedition(p, c).len() as i32;
                v.exp_handshakes[p][c] = i32::from(state.expedition_handshakes(p, c));
                v.exp_sum[p][c] = state.expedition_numeric_sum(p, c);
                v.exp_last[p][c] = state.last_numeric(p, c);
            }
        }
        for c in 0..n_colors {
            v.discard_top[c] = state.pile_top(c);
        }
        v
    }

    pub fn hand(&self) -> &[Card] {
        &self.hand[..self.hand_len]
    }

    pub fn face(&self, card: Card) -> i32 {
        if card.rank() == 0 {
            0
        } else {
            self.min_rank + i32::from(card.rank()) - 1
        }
    }

    /// Face of the highest number.
    pub fn max_face(&self) -> i32 {
        self.min_rank + i32::from(self.n_ranks) - 1
    }

    /// The engine's play rule: a handshake before any number, a number
    /// above the last one.
    pub fn can_play(&self, player: usize, card: Card) -> bool {
        let last = self.exp_last[player][usize::from(card.color())];
        if card.rank() == 0 {
            last == 0
        } else {
            card.rank() > last
        }
    }

    pub fn opened_colors(&self, player: usize) -> i32 {
        self.exp_len[player][..usize::from(self.n_colors)]
            .iter()
            .filter(|&&n| n > 0)
            .count() as i32
    }

    pub fn score_diff(&self, player: usize) -> i32 {
        self.totals[player] - self.totals[1 - player]
    }

    pub fn is_legal(&self, action: usize) -> bool {
        action < 64 && self.legal & (1 << action) != 0
    }

    pub fn first_legal(&self) -> usize {
        self.legal.trailing_zeros() as usize
    }

    pub fn deck_action(&self) -> usize {
        2 * usize::from(self.hand_capacity)
    }

    pub fn pile_action(&self, color: usize) -> usize {
        self.deck_action() + 1 + color
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Hand-built classic-rules views for unit tests of the heuristic.
    use super::*;

    pub fn card(color: u8, rank: u8) -> Card {
        Card::new(color, rank)
    }

    /// Classic rules, player 0 to act in the CARD phase, 30 cards left,
    /// nothing on the table; every discard and every legal play allowed.
    pub fn classic(hand: &[Card]) -> View {
        let mut v = View {
            n_colors: 5,
            n_ranks: 9,
            min_rank: 2,
            n_handshakes: 3,
            hand_capacity: 8,
            penalty: -20,
            bonus_threshold: 8,
            bonus_amount: 20,
            deck_size: 60,
            player: 0,
            card_phase: true,
            legal: 0,
            deck_len: 30,
            totals: [0, 0],
            hand: [Card::default(); MAX_HAND],
            hand_len: hand.len(),
            exp_len: [[0; MAX_COLORS]; 2],
            exp_handshakes: [[0; MAX_COLORS]; 2],
            exp_sum: [[0; MAX_COLORS]; 2],
            exp_last: [[0; MAX_COLORS]; 2],
            discard_top: [None; MAX_COLORS],
        };
        v.hand[..hand.len()].copy_from_slice(hand);
        v.refresh_legal();
        v
    }

    impl View {
        /// Appends `cards` (in order) to `player`'s expedition.
        pub fn play_to(&mut self, player: usize, cards: &[Card]) {
            for &c in cards {
                let i = usize::from(c.color());
                self.exp_len[player][i] += 1;
                if c.rank() == 0 {
                    self.exp_handshakes[player][i] += 1;
                } else {
                    self.exp_sum[player][i] += self.face(c);
                    self.exp_last[player][i] = c.rank();
                }
                self.totals[player] = self.total(player);
            }
            self.refresh_legal();
        }

        fn total(&self, player: usize) -> i32 {
            (0..usize::from(self.n_colors))
                .filter(|&c| self.exp_len[player][c] > 0)
                .map(|c| {
                    (self.exp_sum[player][c] + self.penalty) * (self.exp_handshakes[player][c] + 1)
                        + if self.exp_len[player][c] >= 8 { 20 } else { 0 }
                })
                .sum()
        }

        /// Switches to the DRAW phase with these pile tops (`pending` is the
        /// colour just discarded, whose pile may not be taken).
        pub fn draw_phase(&mut self, tops: &[Card], pending: Option<u8>) {
            self.card_phase = false;
            for &t in tops {
                self.discard_top[usize::from(t.color())] = Some(t);
            }
            self.legal = 0;
            if self.deck_len > 0 {
                self.legal |= 1 << self.deck_action();
            }
            for c in 0..usize::from(self.n_colors) {
                if self.discard_top[c].is_some() && pending != Some(c as u8) {
                    self.legal |= 1 << self.pile_action(c);
                }
            }
        }

        pub fn refresh_legal(&mut self) {
            if !self.card_phase {
                return;
            }
            let mut legal = 0;
            for (slot, &c) in self.hand().iter().enumerate() {
                legal |= 1 << (2 * slot + 1);
                if self.can_play(self.player, c) {
                    legal |= 1 << (2 * slot);
                }
            }
            self.legal = legal;
        }
    }
}
