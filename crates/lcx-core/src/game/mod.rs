//! Lost Cities rules engine (docs/deep-cfr.md §1): pure game logic, no I/O, no tch.
//!
//! The state is a flat, fixed-capacity struct (arrays + lengths, one byte per
//! card) so that `clone()` is a memcpy and applying an action never touches the
//! heap. Undo is an explicit [`Undo`] record returned by [`GameState::apply`];
//! callers that want the spec's push/pop API keep an [`UndoStack`] next to the
//! state, so the history never makes cloning a state more expensive.

mod bits;
mod card;
mod rules;
mod snapshot;
mod state;

#[cfg(target_arch = "x86_64")]
pub use bits::x86::random_set_bit_bmi2;
pub use bits::{fast_select_available, nth_set_bit, random_set_bit, random_set_bit_portable};
pub use card::Card;
pub use rules::{
    Rules, MAX_ACTIONS, MAX_CARDS_PER_COLOR, MAX_COLORS, MAX_DECK, MAX_HAND, MAX_RANKS,
};
pub use snapshot::Snapshot;
pub use state::{GameState, Phase, Undo, UndoStack};

/// Errors of the rules engine. Messages name the offending field or value.
#[derive(Debug, thiserror::Error)]
pub enum GameError {
    #[error("invalid rules: {0}")]
    InvalidRules(String),
    #[error("action {action} is not legal: {reason}")]
    IllegalAction { action: usize, reason: String },
    #[error("action {action} applied to a finished game")]
    GameOver { action: usize },
    #[error("undo stack is empty: nothing to pop")]
    EmptyHistory,
    #[error("deck index out of range: swap_deck_cards({i}, {j}) on a deck of {len} cards")]
    DeckIndex { i: usize, j: usize, len: usize },
    #[error("invalid deck: {0}")]
    InvalidDeck(String),
    #[error("invalid snapshot: {0}")]
    InvalidSnapshot(String),
    #[error("invariant violated: {0}")]
    Invariant(String),
}

/// Iterator over the set bits of a legal mask, ascending (unified ids).
#[derive(Clone, Copy, Debug)]
pub struct MaskIter(u64);

impl Iterator for MaskIter {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            None
        } else {
            let i = self.0.trailing_zeros() as usize;
            self.0 &= self.0 - 1;
            Some(i)
        }
    }
    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for MaskIter {}

/// The unified ids set in `mask`, ascending.
#[inline]
pub fn mask_iter(mask: u64) -> MaskIter {
    MaskIter(mask)
}

/// Writes `mask` as booleans: `out[i] = bit i` for every `i < out.len()`.
#[inline]
pub fn mask_to_bools(mask: u64, out: &mut [bool]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = i < 64 && (mask >> i) & 1 == 1;
    }
}

#[cfg(test)]
mod tests;
