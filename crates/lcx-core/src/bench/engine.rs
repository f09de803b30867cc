//! `lcx bench engine`: single-thread speed of the rules engine and the
//! encoder — uniformly random full games, `clone()` of a mid-game state, one
//! apply+undo, and one information-state encoding.
//!
//! Pure library code (the CLI wires it up); everything runs on the calling
//! thread so the figures are per core. `black_box` keeps the optimiser from
//! deleting the measured work.

use std::hint::black_box;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::encoding::Encoding;
#[cfg(target_arch = "x86_64")]
use crate::game::{fast_select_available, random_set_bit_bmi2};
use crate::game::{random_set_bit, random_set_bit_portable, GameError, GameState, Rules};

/// How much work to time.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineBenchOptions {
    pub rules: Rules,
    pub encoding: Encoding,
    /// Full random games to play (after `warmup_games` untimed ones).
    pub games: u64,
    pub warmup_games: u64,
    /// Repetitions of each micro-measurement (clone, apply+undo, encode).
    pub micro_iters: u64,
    pub seed: u64,
}

impl Default for EngineBenchOptions {
    fn default() -> Self {
        Self {
            rules: Rules::classic(),
            encoding: Encoding::FULL,
            games: 20_000,
            warmup_games: 500,
            micro_iters: 2_000_000,
            seed: 1,
        }
    }
}

/// The measured figures (JSON via serde).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineBenchResult {
    pub games: u64,
    pub total_actions: u64,
    pub seconds: f64,
    pub games_per_second: f64,
    pub actions_per_second: f64,
    pub mean_actions_per_game: f64,
    /// Per action, including the legal mask and the random choice.
    pub ns_per_action: f64,
    /// `clone()` of a mid-game state.
    pub clone_ns: f64,
    /// `apply` of a legal action followed by its `undo`.
    pub apply_undo_ns: f64,
    /// One `encode` of a mid-game state.
    pub encode_ns: f64,
    pub encode_dim: usize,
    /// Bytes copied by a clone.
    pub state_bytes: usize,
}

impl EngineBenchResult {
    /// The runner's metric line: iteration 1 and every figure under
    /// `bench/engine/` (the names in [`crate::metrics`]).
    pub fn metric_line(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("iteration".into(), 1.into());
        if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(self) {
            for (k, v) in fields {
                map.insert(format!("bench/engine/{k}"), v);
            }
        }
        serde_json::Value::Object(map)
    }
}

/// Plays one uniformly random game to the end; returns its action count.
///
/// On x86-64 CPUs with a fast BMI2 (see [`fast_select_available`]) the whole
/// playout — legal mask, select and `apply`, all inlined — is compiled a
/// second time with BMI1/BMI2/POPCNT/LZCNT and chosen at run time; the games
/// and the draws are the same either way.
#[inline]
pub fn play_random_game<R: Rng>(rules: &Rules, seed: u64, rng: &mut R) -> Result<u64, GameError> {
    #[cfg(target_arch = "x86_64")]
    if fast_select_available() {
        // SAFETY: `fast_select_available` checked at run time that the CPU
        // has every feature `play_random_game_bmi2` is compiled for.
        return unsafe { play_random_game_bmi2(rules, seed, rng) };
    }
    playout(rules, seed, rng, random_set_bit_portable)
}

/// [`playout`] compiled for BMI1/BMI2/POPCNT/LZCNT, with the `pdep` select.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi1,bmi2,popcnt,lzcnt")]
fn play_random_game_bmi2<R: Rng>(rules: &Rules, seed: u64, rng: &mut R) -> Result<u64, GameError> {
    // The closure inherits this function's target features, so the call is
    // safe and inlined.
    playout(rules, seed, rng, |mask, rng| random_set_bit_bmi2(mask, rng))
}

/// The playout loop, `pick` drawing the action from the legal mask.
/// `inline(always)` so that each caller above compiles it (and the `apply`
/// and legal-mask code it inlines) with its own target features.
#[inline(always)]
fn playout<R: Rng>(
    rules: &Rules,
    seed: u64,
    rng: &mut R,
    mut pick: impl FnMut(u64, &mut R) -> Option<usize>,
) -> Result<u64, GameError> {
    let mut s = GameState::new(rules, seed)?;
    let mut actions = 0u64;
    // Same draws and picks as `nth_set_bit(mask, rng.random_range(0..popcount))`.
    while let Some(a) = pick(s.legal_mask(), rng) {
        s.apply(a)?;
        actions += 1;
    }
    black_box(&s);
    Ok(actions)
}

/// Plays `games` random games; returns (actions, seconds).
pub fn time_random_games(rules: &Rules, games: u64, seed: u64) -> Result<(u64, f64), GameError> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let start = Instant::now();
    let mut actions = 0u64;
    for g in 0..games {
        actions += play_random_game(rules, black_box(seed.wrapping_add(g)), &mut rng)?;
    }
    Ok((actions, start.elapsed().as_secs_f64()))
}

/// A state reached by `actions` random actions from a fresh deal (stops early
/// at the end of the game).
pub fn mid_game_state(rules: &Rules, seed: u64, actions: u64) -> Result<GameState, GameError> {
    let mut s = GameState::new(rules, seed)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..actions {
        let Some(a) = random_set_bit(s.legal_mask(), &mut rng) else {
            break;
        };
        s.apply(a)?;
    }
    Ok(s)
}

/// Mean ns per `clone()` of `state`.
pub fn time_clone(state: &GameState, iters: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..iters {
        let c = black_box(state).clone();
        black_box(&c);
    }
    start.elapsed().as_nanos() as f64 / iters.max(1) as f64
}

/// Mean ns per apply+undo, cycling over the state's legal actions.
pub fn time_apply_undo(state: &GameState, iters: u64) -> Result<f64, GameError> {
    let mut s = state.clone();
    let legal: Vec<usize> = s.legal_actions().collect();
    if legal.is_empty() {
        return Ok(0.0);
    }
    let start = Instant::now();
    for i in 0..iters {
        let a = legal[i as usize % legal.len()];
        let u = black_box(&mut s).apply(black_box(a))?;
        s.undo(&u);
    }
    Ok(start.elapsed().as_nanos() as f64 / iters.max(1) as f64)
}

/// Mean ns per `encode` of `state` for its current player.
pub fn time_encode(state: &GameState, encoding: &Encoding, iters: u64) -> f64 {
    let mut buf = vec![0f32; encoding.input_dim(state.rules())];
    let observer = state.current_player();
    let start = Instant::now();
    for _ in 0..iters {
        encoding.encode(
            black_box(state),
            black_box(observer),
            black_box(&mut buf[..]),
        );
    }
    start.elapsed().as_nanos() as f64 / iters.max(1) as f64
}

/// Runs every measurement on the calling thread.
pub fn run(options: &EngineBenchOptions) -> Result<EngineBenchResult, GameError> {
    let o = options;
    time_random_games(&o.rules, o.warmup_games, o.seed ^ 0x5eed)?;
    let (actions, seconds) = time_random_games(&o.rules, o.games, o.seed)?;
    let mid = mid_game_state(&o.rules, o.seed, 100)?;
    let clone_ns = time_clone(&mid, o.micro_iters);
    let apply_undo_ns = time_apply_undo(&mid, o.micro_iters)?;
    let encode_ns = time_encode(&mid, &o.encoding, (o.micro_iters / 10).max(1));
    let secs = seconds.max(1e-12);
    Ok(EngineBenchResult {
        games: o.games,
        total_actions: actions,
        seconds,
        games_per_second: o.games as f64 / secs,
        actions_per_second: actions as f64 / secs,
        mean_actions_per_game: actions as f64 / o.games.max(1) as f64,
        ns_per_action: seconds * 1e9 / actions.max(1) as f64,
        clone_ns,
        apply_undo_ns,
        encode_ns,
        encode_dim: o.encoding.input_dim(&o.rules),
        state_bytes: std::mem::size_of::<GameState>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_reports_consistent_figures() {
        let opts = EngineBenchOptions {
            games: 20,
            warmup_games: 1,
            micro_iters: 100,
            ..EngineBenchOptions::default()
        };
        let r = run(&opts).unwrap();
        assert_eq!(r.games, 20);
        assert_eq!(r.encode_dim, 297);
        // Random classic games take ~290 actions; never fewer than the
        // 44 draws that empty the deck, each preceded by a card action.
        assert!(r.mean_actions_per_game >= 88.0, "{r:?}");
        assert!(r.total_actions as f64 == r.mean_actions_per_game * 20.0);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("games_per_second").is_some());
        let line = r.metric_line();
        assert_eq!(line["iteration"], 1);
        assert_eq!(line["bench/engine/games"], 20);
        for key in line
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "iteration")
        {
            assert!(
                crate::metrics::lookup(key).is_some(),
                "{key} not in the vocabulary"
            );
        }
    }

    /// The dispatched playout (BMI2 where the CPU has a fast one) plays the
    /// same games with the same draws as the portable one.
    #[test]
    fn dispatched_playout_matches_portable() {
        let rules = Rules::classic();
        let mut a = SmallRng::seed_from_u64(3);
        let mut b = a.clone();
        for seed in 0..300 {
            let fast = play_random_game(&rules, seed, &mut a).unwrap();
            let portable = playout(&rules, seed, &mut b, random_set_bit_portable).unwrap();
            assert_eq!(fast, portable, "seed {seed}");
        }
        assert_eq!(a.random::<u64>(), b.random::<u64>());
    }
}
