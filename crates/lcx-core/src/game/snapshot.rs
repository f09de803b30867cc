//! JSON snapshot of a state (docs/deep-cfr.md §1.8): `{config, deck, hands, expeditions,
//! discards, current_player, phase, pending_discarded_color, turn_count,
//! terminal}` with cards as `{color, rank}`.
//!
//! Loading checks structure and capacities only; rule invariants (full deck,
//! expedition order, …) are left to [`GameState::validate_invariants`] so that
//! tests can build broken states on purpose and see them reported.

use serde::{Deserialize, Serialize};

use super::card::Card;
use super::rules::Rules;
use super::state::{GameState, Phase};
use super::GameError;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub config: Rules,
    /// Bottom first; the last element is the top of the deck.
    pub deck: Vec<Card>,
    /// `[player][slot]`.
    pub hands: Vec<Vec<Card>>,
    /// `[player][colour]` → cards in play order.
    pub expeditions: Vec<Vec<Vec<Card>>>,
    /// `[colour]` → pile, bottom first.
    pub discards: Vec<Vec<Card>>,
    pub current_player: u8,
    pub phase: Phase,
    pub pending_discarded_color: Option<u8>,
    pub turn_count: u32,
    pub terminal: bool,
}

impl GameState {
    pub fn to_snapshot(&self) -> Snapshot {
        let nc = self.n_colors();
        Snapshot {
            config: *self.rules(),
            deck: self.deck().to_vec(),
            hands: (0..2).map(|p| self.hand(p).to_vec()).collect(),
            expeditions: (0..2)
                .map(|p| (0..nc).map(|c| self.expedition(p, c).to_vec()).collect())
                .collect(),
            discards: (0..nc).map(|c| self.discard_pile(c).to_vec()).collect(),
            current_player: self.current_player() as u8,
            phase: self.phase(),
            pending_discarded_color: self.pending_discard_color().map(|c| c as u8),
            turn_count: self.turn_count(),
            terminal: self.is_terminal(),
        }
    }

    pub fn from_snapshot(snap: &Snapshot) -> Result<Self, GameError> {
        let r = &snap.config;
        r.validate()?;
        let nc = r.n_colors as usize;
        let cpc = r.cards_per_color();
        let bad = |m: String| Err(GameError::InvalidSnapshot(m));
        let check_card = |card: &Card, place: &str| -> Result<(), GameError> {
            if r.contains(*card) {
                Ok(())
            } else {
                Err(GameError::InvalidSnapshot(format!(
                    "{place} holds card {card}, which does not exist in this variant"
                )))
            }
        };
        if snap.deck.len() > r.deck_size() {
            return bad(format!(
                "deck has {} cards, capacity {}",
                snap.deck.len(),
                r.deck_size()
            ));
        }
        if snap.hands.len() != 2 {
            return bad(format!(
                "hands has {} entries, expected 2",
                snap.hands.len()
            ));
        }
        if snap.expeditions.len() != 2 {
            return bad(format!(
                "expeditions has {} entries, expected 2",
                snap.expeditions.len()
            ));
        }
        if snap.discards.len() != nc {
            return bad(format!(
                "discards has {} piles, expected n_colors = {nc}",
                snap.discards.len()
            ));
        }
        if snap.current_player > 1 {
            return bad(format!(
                "current_player is {}, expected 0 or 1",
                snap.current_player
            ));
        }
        if let Some(c) = snap.pending_discarded_color {
            if c as usize >= nc {
                return bad(format!("pending_discarded_color {c} is not a colour"));
            }
        }
        let mut s = GameState::empty(r);
        for card in &snap.deck {
            check_card(card, "deck")?;
            s.push_deck(*card);
        }
        for (p, hand) in snap.hands.iter().enumerate() {
            if hand.len() > r.hand_size as usize {
                return bad(format!(
                    "hands[{p}] has {} cards, capacity hand_size = {}",
                    hand.len(),
                    r.hand_size
                ));
            }
            for card in hand {
                check_card(card, "hand")?;
                s.push_hand(p, *card);
            }
        }
        for (p, exps) in snap.expeditions.iter().enumerate() {
            if exps.len() != nc {
                return bad(format!(
                    "expeditions[{p}] has {} colours, expected {nc}",
                    exps.len()
                ));
            }
            for (c, exp) in exps.iter().enumerate() {
                if exp.len() > cpc {
                    return bad(format!(
                        "expeditions[{p}][{c}] has {} cards, capacity {cpc}",
                        exp.len()
                    ));
                }
                for card in exp {
                    check_card(card, "expedition")?;
                    if card.color() as usize != c {
                        return bad(format!(
                            "expeditions[{p}][{c}] holds {card} of another colour"
                        ));
                    }
                    s.push_expedition(p, c, *card);
                }
            }
        }
        for (c, pile) in snap.discards.iter().enumerate() {
            if pile.len() > cpc {
                return bad(format!(
                    "discards[{c}] has {} cards, capacity {cpc}",
                    pile.len()
                ));
            }
            for card in pile {
                check_card(card, "discard pile")?;
                if card.color() as usize != c {
                    return bad(format!("discards[{c}] holds {card} of another colour"));
                }
                s.push_pile(c, *card);
            }
        }
        s.set_meta(
            snap.current_player,
            snap.phase,
            snap.pending_discarded_color,
            snap.turn_count,
            snap.terminal,
        );
        Ok(s)
    }

    pub fn to_json(&self) -> String {
        // Serialising plain data with string keys cannot fail.
        serde_json::to_string(&self.to_snapshot()).unwrap_or_default()
    }

    pub fn from_json(json: &str) -> Result<Self, GameError> {
        let snap: Snapshot = serde_json::from_str(json)
            .map_err(|e| GameError::InvalidSnapshot(format!("bad JSON: {e}")))?;
        Self::from_snapshot(&snap)
    }
}
