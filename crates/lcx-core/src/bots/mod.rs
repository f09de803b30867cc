//! Scripted Lost Cities opponents: `random`, `discard-only` and the rule-based
//! heuristic bots (balanced, aggressive, cautious, noisy), plus [`arena`],
//! which plays bot-vs-bot matches.
//!
//! Bots are pure (no I/O) and see the full [`GameState`] but only read what
//! the acting player may know (own hand, the table, counts). They answer
//! with unified action ids (docs/deep-cfr.md §1.4).

pub mod arena;
mod discard_only;
mod heuristic;
mod random;
mod view;

use std::fmt;
use std::str::FromStr;

pub use discard_only::DiscardOnlyBot;
pub use heuristic::{HeuristicBot, HeuristicParams, NoisyBot};
pub use random::RandomBot;

use crate::game::{GameError, GameState};

/// A player that picks moves. `&mut self` lets seeded bots advance their RNG;
/// `Send` lets matches and traversals run bots on worker threads.
pub trait Bot: Send {
    /// A legal unified action id for `state`'s current player, or `None`
    /// when the state is terminal (nothing is legal).
    fn act(&mut self, state: &GameState) -> Option<usize>;
}

/// The bots that can be built by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BotKind {
    Random,
    DiscardOnly,
    HeuristicBalanced,
    HeuristicAggressive,
    HeuristicCautious,
    HeuristicNoisy,
}

impl BotKind {
    /// Every kind, in the order names are listed to users.
    pub const ALL: [BotKind; 6] = [
        BotKind::Random,
        BotKind::DiscardOnly,
        BotKind::HeuristicBalanced,
        BotKind::HeuristicAggressive,
        BotKind::HeuristicCautious,
        BotKind::HeuristicNoisy,
    ];

    /// The canonical (hyphenated, lowercase) name.
    pub fn name(self) -> &'static str {
        match self {
            BotKind::Random => "random",
            BotKind::DiscardOnly => "discard-only",
            BotKind::HeuristicBalanced => "heuristic-balanced",
            BotKind::HeuristicAggressive => "heuristic-aggressive",
            BotKind::HeuristicCautious => "heuristic-cautious",
            BotKind::HeuristicNoisy => "heuristic-noisy",
        }
    }

    /// Parses a bot name: case-insensitive, surrounding spaces ignored, `_`
    /// accepted for `-` (so `discard_only` and `Heuristic_Balanced` work).
    pub fn parse(name: &str) -> Result<BotKind, BotError> {
        let canonical = name.trim().to_ascii_lowercase().replace('_', "-");
        BotKind::ALL
            .into_iter()
            .find(|kind| kind.name() == canonical)
            .ok_or_else(|| BotError::Unknown {
                name: name.to_string(),
                valid: valid_names().join(", "),
            })
    }

    /// Whether the bot's moves are a function of the state alone (two such
    /// bots can repeat a cycle of pile draws forever).
    pub fn is_deterministic(self) -> bool {
        !matches!(self, BotKind::Random | BotKind::HeuristicNoisy)
    }

    /// A fresh bot of this kind; `seed` feeds the stochastic ones and is
    /// ignored by the deterministic ones.
    pub fn build(self, seed: u64) -> Box<dyn Bot> {
        match self {
            BotKind::Random => Box::new(RandomBot::new(seed)),
            BotKind::DiscardOnly => Box::new(DiscardOnlyBot),
            BotKind::HeuristicBalanced => Box::new(HeuristicBot::new(HeuristicParams::balanced())),
            BotKind::HeuristicAggressive => {
                Box::new(HeuristicBot::new(HeuristicParams::aggressive()))
            }
            BotKind::HeuristicCautious => Box::new(HeuristicBot::new(HeuristicParams::cautious())),
            BotKind::HeuristicNoisy => Box::new(NoisyBot::new(
                HeuristicBot::new(HeuristicParams::balanced()),
                NoisyBot::DEFAULT_EPSILON,
                seed,
            )),
        }
    }
}

impl fmt::Display for BotKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BotKind {
    type Err = BotError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BotKind::parse(s)
    }
}

/// The canonical names of all bots, in [`BotKind::ALL`] order.
pub fn valid_names() -> [&'static str; 6] {
    BotKind::ALL.map(BotKind::name)
}

/// Builds a bot by name (see [`BotKind::parse`] for the accepted spellings).
pub fn build(name: &str, seed: u64) -> Result<Box<dyn Bot>, BotError> {
    Ok(BotKind::parse(name)?.build(seed))
}

#[derive(Debug, thiserror::Error)]
pub enum BotError {
    #[error("unknown bot {name:?}; valid bots: {valid}")]
    Unknown { name: String, valid: String },
    /// A match could not set up or advance a game (bad rules, or a bot
    /// answered with an illegal move, which would be a bug).
    #[error("match game {game}")]
    Game {
        game: u64,
        #[source]
        source: GameError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::Rules;

    #[test]
    fn names_parse_case_and_underscore_insensitively() {
        for kind in BotKind::ALL {
            assert_eq!(BotKind::parse(kind.name()).unwrap(), kind);
            let shouted = kind.name().to_ascii_uppercase().replace('-', "_");
            assert_eq!(BotKind::parse(&shouted).unwrap(), kind, "{shouted}");
        }
        assert_eq!(
            BotKind::parse(" discard_only ").unwrap(),
            BotKind::DiscardOnly
        );
        assert_eq!(
            "heuristic_noisy".parse::<BotKind>().unwrap(),
            BotKind::HeuristicNoisy
        );
        assert!(build("Heuristic_Cautious", 0).is_ok());
    }

    #[test]
    fn unknown_name_error_lists_every_valid_name() {
        let err = build("minimax", 3).err().expect("minimax is not a bot");
        let msg = err.to_string();
        assert!(msg.contains("\"minimax\""), "{msg}");
        for name in valid_names() {
            assert!(msg.contains(name), "{name} missing from {msg}");
        }
        // A near miss is still an error, not a fuzzy match.
        assert!(BotKind::parse("heuristic").is_err());
        assert!(BotKind::parse("").is_err());
    }

    #[test]
    fn determinism_flags_match_the_bots() {
        assert!(!BotKind::Random.is_deterministic());
        assert!(!BotKind::HeuristicNoisy.is_deterministic());
        assert!(BotKind::DiscardOnly.is_deterministic());
        assert!(BotKind::HeuristicCautious.is_deterministic());
    }

    fn assert_all_bots_legal(rules: &Rules, games: u64) {
        let mut checked = 0u64;
        for seed in 0..games {
            let mut state = GameState::new(rules, seed).expect("valid rules");
            // One instance of each bot for the whole game, so seeded bots
            // are exercised across many consecutive calls.
            let mut bots: Vec<Box<dyn Bot>> = BotKind::ALL
                .iter()
                .map(|k| k.build(seed ^ 0x5eed))
                .collect();
            let mut driver = RandomBot::new(seed);
            for _ in 0..2_000 {
                if state.is_terminal() {
                    for bot in &mut bots {
                        assert_eq!(bot.act(&state), None, "terminal state must give None");
                    }
                    break;
                }
                for (kind, bot) in BotKind::ALL.iter().zip(&mut bots) {
                    let a = bot.act(&state).unwrap_or_else(|| panic!("{kind}: no move"));
                    assert!(
                        state.is_legal(a),
                        "{kind} chose illegal {a} (rules {rules:?}, seed {seed}, phase {:?})",
                        state.phase()
                    );
                    checked += 1;
                }
                let a = driver.act(&state).expect("driver move");
                state.apply(a).expect("legal");
            }
        }
        assert!(checked > games * 6, "too few decisions checked: {checked}");
    }

    #[test]
    fn every_bot_plays_only_legal_moves_classic() {
        assert_all_bots_legal(&Rules::classic(), 60);
    }

    #[test]
    fn every_bot_plays_only_legal_moves_on_other_rule_sets() {
        // Different hand sizes move the deck id; tiny decks hit late-game
        // thresholds from the first move.
        assert_all_bots_legal(&Rules::small(), 100);
        assert_all_bots_legal(&Rules::canonical_small(), 50);
    }

    #[test]
    fn seeded_bots_replay_identically_and_depend_on_the_seed() {
        let state = GameState::new(&Rules::classic(), 9).unwrap();
        let moves = |kind: BotKind, seed: u64| -> Vec<usize> {
            let mut bot = kind.build(seed);
            (0..64).map(|_| bot.act(&state).unwrap()).collect()
        };
        for kind in [BotKind::Random, BotKind::HeuristicNoisy] {
            assert_eq!(moves(kind, 1), moves(kind, 1), "{kind}");
            assert_ne!(moves(kind, 1), moves(kind, 2), "{kind}");
        }
        let balanced = moves(BotKind::HeuristicBalanced, 1);
        assert!(balanced.windows(2).all(|w| w[0] == w[1]));
        // The noisy bot mostly follows balanced but not always.
        let noisy = moves(BotKind::HeuristicNoisy, 5);
        let agree = noisy.iter().filter(|&&a| a == balanced[0]).count();
        assert!((40..64).contains(&agree), "noisy agreed {agree}/64 times");
    }
}
