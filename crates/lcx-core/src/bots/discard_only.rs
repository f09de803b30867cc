//! `discard_only`: the baseline that never builds an expedition. In the CARD
//! phase it discards the lowest legal slot; in the DRAW phase it takes the
//! deck when it can, otherwise the first legal id (docs/deep-cfr.md §5.6).

use super::Bot;
use crate::game::GameState;

#[derive(Debug, Clone, Copy, Default)]
pub struct DiscardOnlyBot;

impl DiscardOnlyBot {
    /// The move for `state`'s current player; `None` when terminal.
    pub fn choose(state: &GameState) -> Option<usize> {
        choose_from_mask(state.legal_mask(), state.draw_base())
    }
}

/// The decision from the legal mask alone. Ids below `card_actions` are the
/// card actions (odd = discard), `card_actions` itself is the deck. A
/// CARD-phase mask always has a legal discard, so the first-legal fallback
/// only matters in the DRAW phase.
pub(crate) fn choose_from_mask(mask: u64, card_actions: usize) -> Option<usize> {
    let card_ids = if card_actions >= 64 {
        u64::MAX
    } else {
        (1u64 << card_actions) - 1
    };
    let discards = mask & card_ids & 0xAAAA_AAAA_AAAA_AAAA;
    if discards != 0 {
        return Some(discards.trailing_zeros() as usize);
    }
    if card_actions < 64 && mask & (1 << card_actions) != 0 {
        return Some(card_actions);
    }
    (mask != 0).then(|| mask.trailing_zeros() as usize)
}

impl Bot for DiscardOnlyBot {
    fn act(&mut self, state: &GameState) -> Option<usize> {
        Self::choose(state)
    }
}

#[cfg(test)]
mod tests {
    use super::choose_from_mask;

    fn mask(ids: &[usize]) -> u64 {
        ids.iter().fold(0, |m, &i| m | 1 << i)
    }

    #[test]
    fn card_phase_discards_the_lowest_slot() {
        // Plays of slots 0 and 2 are legal too; it still discards slot 0.
        let all_discards: Vec<usize> = (0..8).map(|s| 2 * s + 1).collect();
        let mut ids = all_discards.clone();
        ids.extend([0, 4]);
        assert_eq!(choose_from_mask(mask(&ids), 16), Some(1));
        // A hand of 3 cards: only slots 0..2 exist.
        assert_eq!(choose_from_mask(mask(&[1, 3, 5, 2]), 16), Some(1));
        // Never a play, even when a play has a lower id than every discard.
        assert_eq!(choose_from_mask(mask(&[0, 2, 3, 5]), 16), Some(3));
    }

    #[test]
    fn draw_phase_takes_the_deck_else_the_first_pile() {
        assert_eq!(choose_from_mask(mask(&[16, 17, 20]), 16), Some(16));
        assert_eq!(choose_from_mask(mask(&[16]), 16), Some(16));
        assert_eq!(choose_from_mask(mask(&[19, 21]), 16), Some(19));
        assert_eq!(choose_from_mask(0, 16), None);
        // Tiny rules (hand 1): the deck is id 2, piles 3 and 4.
        assert_eq!(choose_from_mask(mask(&[2, 4]), 2), Some(2));
        assert_eq!(choose_from_mask(mask(&[4]), 2), Some(4));
        assert_eq!(choose_from_mask(mask(&[0, 1]), 2), Some(1));
    }
}
