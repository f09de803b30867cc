//! Bot-vs-bot matches: play many games with alternating seats and summarise
//! them. Pure and deterministic for a given [`MatchSpec`] (games run in
//! parallel, but every game's seeds depend only on the spec and its index,
//! and results are combined in index order). Timing is left to the caller.

use rayon::prelude::*;

use super::{Bot, BotError, BotKind};
use crate::game::{GameError, GameState, Rules};

/// Default cap on actions per game; two deterministic bots can otherwise
/// trade discards forever (only a deck draw ends the game).
pub const DEFAULT_MAX_STEPS: u64 = 10_000;

/// What to play.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchSpec {
    /// `bots[0]` is "p0": it takes seat 0 in even games and seat 1 in odd ones.
    pub bots: [BotKind; 2],
    pub games: u64,
    pub seed: u64,
    /// A game still running after this many actions is scored as it stands.
    pub max_steps: u64,
}

/// Seeds of game `k` of a match with base seed `seed`: the deal, and the bot
/// in each seat. Same scheme as the reference evaluator (game seed `s + k`,
/// bot seed `2·(s + k) + seat`), so seats never share a bot seed.
pub fn game_seeds(seed: u64, k: u64) -> (u64, [u64; 2]) {
    let deal = seed.wrapping_add(k);
    let bot = |seat: u64| deal.wrapping_mul(2).wrapping_add(seat);
    (deal, [bot(0), bot(1)])
}

/// One finished (or truncated) game, seen from the seats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GameOutcome {
    /// Total score per seat.
    pub scores: [i32; 2],
    /// Actions taken (card and draw actions both count).
    pub length: u64,
    /// Stopped by the step cap rather than by the deck running out.
    pub truncated: bool,
}

/// Plays one game from `state` until it is terminal or `max_steps` actions
/// have been taken. `bots[s]` plays seat `s`. Fails only if a bot answers
/// with an illegal move (a bug in the bot).
pub fn play_game(
    mut state: GameState,
    bots: [&mut dyn Bot; 2],
    max_steps: u64,
) -> Result<GameOutcome, GameError> {
    let [b0, b1] = bots;
    let mut length = 0;
    let mut truncated = false;
    while !state.is_terminal() {
        if length >= max_steps {
            truncated = true;
            break;
        }
        let bot: &mut dyn Bot = if state.current_player() == 0 {
            &mut *b0
        } else {
            &mut *b1
        };
        // A non-terminal state always has a legal action, so `None` cannot
        // happen with a correct engine; stopping is the safe reading of it.
        let Some(action) = bot.act(&state) else {
            break;
        };
        state.apply(action)?;
        length += 1;
    }
    Ok(GameOutcome {
        scores: [state.total_score(0), state.total_score(1)],
        length,
        truncated,
    })
}

/// Aggregate of a match, per bot (index 0 = `spec.bots[0]`), not per seat.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchSummary {
    pub games: u64,
    pub wins: [u64; 2],
    pub draws: u64,
    pub mean_score: [f64; 2],
    /// Mean of (bot 0's score − bot 1's score).
    pub mean_score_diff: f64,
    /// Mean actions per game.
    pub mean_length: f64,
    pub truncated: u64,
}

/// Plays game `k` of `spec`, returning the outcome per bot (not per seat).
pub fn play_match_game(rules: &Rules, spec: &MatchSpec, k: u64) -> Result<GameOutcome, BotError> {
    let (deal, bot_seeds) = game_seeds(spec.seed, k);
    // p0 sits in seat 0 on even games, seat 1 on odd games.
    let p0_seat = (k % 2) as usize;
    let mut seat_bots: [Box<dyn Bot>; 2] = [0, 1].map(|seat| {
        let kind = if seat == p0_seat {
            spec.bots[0]
        } else {
            spec.bots[1]
        };
        kind.build(bot_seeds[seat])
    });
    let [s0, s1] = &mut seat_bots;
    let game_error = |source| BotError::Game { game: k, source };
    let state = GameState::new(rules, deal).map_err(game_error)?;
    let out = play_game(state, [s0.as_mut(), s1.as_mut()], spec.max_steps).map_err(game_error)?;
    let scores = if p0_seat == 0 {
        out.scores
    } else {
        [out.scores[1], out.scores[0]]
    };
    Ok(GameOutcome { scores, ..out })
}

/// Plays the whole match on the rayon pool, calling `on_game_done` once per
/// finished game (from worker threads, e.g. to tick a progress bar).
pub fn play_match(
    rules: &Rules,
    spec: &MatchSpec,
    on_game_done: &(dyn Fn() + Sync),
) -> Result<MatchSummary, BotError> {
    let outcomes = (0..spec.games)
        .into_par_iter()
        .map(|k| {
            let out = play_match_game(rules, spec, k);
            on_game_done();
            out
        })
        .collect::<Result<Vec<GameOutcome>, BotError>>()?;
    Ok(summarise(&outcomes))
}

/// Folds per-bot outcomes (in game order) into a summary; means are 0 for
/// an empty match.
pub fn summarise(outcomes: &[GameOutcome]) -> MatchSummary {
    let games = outcomes.len() as u64;
    let mut wins = [0u64; 2];
    let mut draws = 0u64;
    let mut score_sum = [0i64; 2];
    let mut length_sum = 0u64;
    let mut truncated = 0u64;
    for out in outcomes {
        match out.scores[0].cmp(&out.scores[1]) {
            std::cmp::Ordering::Greater => wins[0] += 1,
            std::cmp::Ordering::Less => wins[1] += 1,
            std::cmp::Ordering::Equal => draws += 1,
        }
        score_sum[0] += i64::from(out.scores[0]);
        score_sum[1] += i64::from(out.scores[1]);
        length_sum += out.length;
        truncated += u64::from(out.truncated);
    }
    let mean = |total: f64| {
        if games == 0 {
            0.0
        } else {
            total / games as f64
        }
    };
    MatchSummary {
        games,
        wins,
        draws,
        mean_score: [mean(score_sum[0] as f64), mean(score_sum[1] as f64)],
        mean_score_diff: mean((score_sum[0] - score_sum[1]) as f64),
        mean_length: mean(length_sum as f64),
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::super::DiscardOnlyBot;
    use super::*;

    fn out(a: i32, b: i32, length: u64, truncated: bool) -> GameOutcome {
        GameOutcome {
            scores: [a, b],
            length,
            truncated,
        }
    }

    #[test]
    fn summarise_counts_wins_draws_and_means() {
        let s = summarise(&[
            out(10, -5, 100, false),
            out(-3, 4, 120, false),
            out(7, 7, 140, true),
            out(20, 0, 100, false),
        ]);
        assert_eq!(s.games, 4);
        assert_eq!(s.wins, [2, 1]);
        assert_eq!(s.draws, 1);
        assert_eq!(s.mean_score, [8.5, 1.5]);
        assert_eq!(s.mean_score_diff, 7.0);
        assert_eq!(s.mean_length, 115.0);
        assert_eq!(s.truncated, 1);
    }

    #[test]
    fn summarise_of_nothing_is_all_zero() {
        let s = summarise(&[]);
        assert_eq!((s.games, s.wins, s.draws, s.truncated), (0, [0, 0], 0, 0));
        assert_eq!((s.mean_score, s.mean_length), ([0.0, 0.0], 0.0));
    }

    fn spec(p0: BotKind, p1: BotKind, games: u64, max_steps: u64) -> MatchSpec {
        MatchSpec {
            bots: [p0, p1],
            games,
            seed: 42,
            max_steps,
        }
    }

    #[test]
    fn scores_are_reported_per_bot_not_per_seat() {
        // discard-only never plays a card, so its score is 0 in whichever
        // seat it sits; a seat/bot mix-up would leak the heuristic's scores.
        let rules = Rules::classic();
        for order in [
            [BotKind::DiscardOnly, BotKind::HeuristicBalanced],
            [BotKind::HeuristicBalanced, BotKind::DiscardOnly],
        ] {
            let s = play_match(&rules, &spec(order[0], order[1], 10, 10_000), &|| {}).unwrap();
            let d = usize::from(order[1] == BotKind::DiscardOnly);
            assert_eq!(s.mean_score[d], 0.0, "{order:?}: {s:?}");
            assert!(s.mean_score[1 - d] != 0.0, "{order:?}: {s:?}");
            assert_eq!(s.wins[0] + s.wins[1] + s.draws, 10);
        }
    }

    #[test]
    fn seats_alternate_between_games() {
        let rules = Rules::classic();
        let sp = spec(BotKind::DiscardOnly, BotKind::Random, 4, 10_000);
        // Game k deals from seed+k; replaying it by hand with p0 in seat k%2
        // must give the same outcome as the arena.
        for k in 0..4 {
            let (deal, seeds) = game_seeds(sp.seed, k);
            let state = GameState::new(&rules, deal).unwrap();
            let mut d = DiscardOnlyBot;
            let p0_seat = (k % 2) as usize;
            let mut r = super::super::RandomBot::new(seeds[1 - p0_seat]);
            let by_seat = if p0_seat == 0 {
                play_game(state, [&mut d, &mut r], 10_000).unwrap()
            } else {
                let o = play_game(state, [&mut r, &mut d], 10_000).unwrap();
                GameOutcome {
                    scores: [o.scores[1], o.scores[0]],
                    ..o
                }
            };
            assert_eq!(
                play_match_game(&rules, &sp, k).unwrap(),
                by_seat,
                "game {k}"
            );
        }
    }

    #[test]
    fn step_cap_truncates_and_scores_the_game_as_it_stands() {
        let rules = Rules::classic();
        let s = play_match(
            &rules,
            &spec(
                BotKind::HeuristicBalanced,
                BotKind::HeuristicBalanced,
                3,
                25,
            ),
            &|| {},
        )
        .unwrap();
        assert_eq!((s.truncated, s.mean_length), (3, 25.0));
    }

    #[test]
    fn match_results_do_not_depend_on_thread_scheduling() {
        let rules = Rules::classic();
        let sp = spec(BotKind::HeuristicNoisy, BotKind::Random, 12, 10_000);
        let ticks = std::sync::atomic::AtomicU64::new(0);
        let a = play_match(&rules, &sp, &|| {
            ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        let b = play_match(&rules, &sp, &|| {}).unwrap();
        assert_eq!(a, b);
        assert_eq!(ticks.into_inner(), 12);
    }

    /// The strength requirement (≥ 90 % over 1,000 games, measured with
    /// `lcx play` in release) checked on 200 fixed games per opponent. The
    /// measured rates are ≈ 94 % (discard-only) and 100 % (random); at 94 %
    /// the standard error over 200 games is 1.7 points, so the 85 % floor
    /// sits over 5 standard errors below and cannot flake on a new deal
    /// shuffle, yet a real regression (to ~85 % or below) fails it.
    #[test]
    fn heuristic_balanced_beats_the_baselines() {
        let rules = Rules::classic();
        for opponent in [BotKind::Random, BotKind::DiscardOnly] {
            let s = play_match(
                &rules,
                &spec(BotKind::HeuristicBalanced, opponent, 200, 10_000),
                &|| {},
            )
            .unwrap();
            let rate = s.wins[0] as f64 / s.games as f64;
            assert!(rate >= 0.85, "vs {opponent}: win rate {rate:.3} ({s:?})");
            assert!(s.mean_score_diff > 0.0);
        }
    }

    #[test]
    fn seeds_differ_per_game_and_seat() {
        let (d0, b0) = game_seeds(5, 0);
        let (d1, b1) = game_seeds(5, 1);
        assert_eq!((d0, d1), (5, 6));
        assert_eq!(b0, [10, 11]);
        assert_eq!(b1, [12, 13]);
        // No overflow panic at the edge.
        let _ = game_seeds(u64::MAX, 3);
    }
}
