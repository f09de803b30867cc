//! Lost Cities rules engine (spec §1): pure game logic, no I/O, no tch.
//!
//! The state is a flat, fixed-capacity struct (arrays + lengths, one byte per
//! card) so that `clone()` is a memcpy and applying an action never touches the
//! heap. Undo is an explicit [`Undo`] record returned by [`GameState::apply`];
//! callers that want the spec's push/pop API keep an [`UndoStack`] next to the
//! state, so the history never makes cloning a state more expensive.

mod card;
mod rules;
mod snapshot;
mod state;

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

/// `SELECT_IN_BYTE[b][j]` = position of the `j`-th set bit of byte `b`.
static SELECT_IN_BYTE: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let (mut i, mut j) = (0, 0);
        while i < 8 {
            if (b >> i) & 1 == 1 {
                t[b][j] = i as u8;
                j += 1;
            }
            i += 1;
        }
        b += 1;
    }
    t
};

/// The `k`-th set bit of `mask` (0-based, ascending), if there are more than
/// `k` bits set. Used to pick a uniformly random legal action with one draw.
///
/// Branch-free broadword select (Vigna, "Broadword implementation of
/// rank/select queries", 2008): a loop clearing `k` low bits mispredicts on
/// its random trip count, which showed up as ~15% of a random playout.
#[inline]
pub fn nth_set_bit(mask: u64, k: u32) -> Option<usize> {
    const L8: u64 = 0x0101_0101_0101_0101;
    const H8: u64 = 0x8080_8080_8080_8080;
    // Byte i of `sums` = number of set bits in bytes 0..=i.
    let mut s = mask - ((mask >> 1) & 0x5555_5555_5555_5555);
    s = (s & 0x3333_3333_3333_3333) + ((s >> 2) & 0x3333_3333_3333_3333);
    let sums = ((s + (s >> 4)) & 0x0f0f_0f0f_0f0f_0f0f).wrapping_mul(L8);
    if k >= (sums >> 56) as u32 {
        return None;
    }
    let kk = (k as u64).wrapping_mul(L8);
    // High bit of each byte set where sums_i <= k: those bytes precede the
    // byte holding the answer; their count × 8 is that byte's bit offset.
    let le = (((kk | H8) - (sums & !H8)) ^ sums ^ kk) & H8;
    let place = (((le >> 7).wrapping_mul(L8) >> 53) & !7) as u32;
    let before = ((sums << 8) >> place) & 0xff;
    let byte = ((mask >> place) & 0xff) as usize;
    let rank = k as usize - before as usize;
    Some(place as usize + SELECT_IN_BYTE[byte][rank] as usize)
}

#[cfg(test)]
mod tests;
