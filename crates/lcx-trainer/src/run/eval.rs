//! Evaluation against scripted bots (docs/deep-cfr.md §10): the strategy network plays
//! greedily (argmax of the masked logits, ties to the lowest id) in many
//! games at once, its decisions batched into few forwards.

use std::collections::BTreeMap;

use tch::{Device, Kind, Tensor};

use crate::nn::network::Mlp;
use crate::TrainerError;
use lcx_core::bots::{self, Bot};
use lcx_core::cfr::regret::ACTIONS;
use lcx_core::encoding::Encoding;
use lcx_core::game::{GameState, Rules};

/// How to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalSpec {
    pub games: usize,
    /// Game k deals from `base_seed + k`.
    pub base_seed: u64,
    pub max_steps: u64,
    pub batch_size: usize,
}

/// Results from the network's side (suffix 0) and the bot's (suffix 1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalResult {
    pub games: u64,
    pub wins0: u64,
    pub wins1: u64,
    pub draws: u64,
    pub score0: i64,
    pub score1: i64,
    pub length: u64,
    pub timeouts: u64,
    pub seconds: f64,
}

impl EvalResult {
    /// `eval/<opponent>/…` metrics.
    pub fn metrics(&self, opponent: &str) -> BTreeMap<String, f64> {
        let g = self.games.max(1) as f64;
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: f64| {
            m.insert(format!("eval/{opponent}/{k}"), v);
        };
        put("games", self.games as f64);
        put("wins0", self.wins0 as f64);
        put("wins1", self.wins1 as f64);
        put("draws", self.draws as f64);
        put("win_rate0", self.wins0 as f64 / g);
        put("win_rate1", self.wins1 as f64 / g);
        put("avg_score0", self.score0 as f64 / g);
        put("avg_score1", self.score1 as f64 / g);
        put("avg_score_diff0", (self.score0 - self.score1) as f64 / g);
        put("avg_game_length", self.length as f64 / g);
        put("max_step_timeouts", self.timeouts as f64);
        put(
            "throughput",
            if self.seconds > 0.0 {
                self.games as f64 / self.seconds
            } else {
                0.0
            },
        );
        m
    }
}

/// The greedy choice: the legal action with the largest logit, lowest id on
/// ties.
pub fn greedy_action(logits: &[f32], mask: u64) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for a in lcx_core::game::mask_iter(mask) {
        if best.is_none_or(|(_, b)| logits[a] > b) {
            best = Some((a, logits[a]));
        }
    }
    best.map(|(a, _)| a)
}

struct Game {
    state: GameState,
    bot: Box<dyn Bot>,
    net_seat: usize,
    steps: u64,
    done: bool,
}

/// Plays `spec.games` games of the strategy network against `opponent`
/// (a bot name); the network takes seat 0 in even games, seat 1 in odd ones.
pub fn evaluate(
    strategy: &Mlp,
    device: Device,
    rules: &Rules,
    encoding: Encoding,
    opponent: &str,
    spec: &EvalSpec,
) -> Result<EvalResult, TrainerError> {
    let start = std::time::Instant::now();
    let dim = encoding.input_dim(rules);
    let mut games = Vec::with_capacity(spec.games);
    for k in 0..spec.games as u64 {
        let seed = spec.base_seed + k;
        let net_seat = (k % 2) as usize;
        let bot = bots::build(opponent, seed * 2 + (1 - net_seat as u64))
            .map_err(|e| TrainerError::BadShape(format!("evaluation opponent: {e}")))?;
        games.push(Game {
            state: GameState::new(rules, seed)
                .map_err(|e| TrainerError::BadShape(e.to_string()))?,
            bot,
            net_seat,
            steps: 0,
            done: false,
        });
    }
    let mut queue: Vec<usize> = Vec::new();
    let mut states = Vec::new();
    let mut logits = Vec::new();
    let _guard = tch::no_grad_guard();
    loop {
        queue.clear();
        for (i, g) in games.iter_mut().enumerate() {
            // Bots move until the network is to act or the game is over.
            loop {
                if g.done {
                    break;
                }
                if g.state.is_terminal() || g.steps >= spec.max_steps {
                    g.done = true;
                    break;
                }
                if g.state.current_player() == g.net_seat {
                    queue.push(i);
                    break;
                }
                let Some(a) = g.bot.act(&g.state) else {
                    g.done = true;
                    break;
                };
                g.state
                    .apply(a)
                    .map_err(|e| TrainerError::BadShape(e.to_string()))?;
                g.steps += 1;
            }
        }
        if queue.is_empty() {
            break;
        }
        for chunk in queue.chunks(spec.batch_size.max(1)) {
            states.clear();
            states.resize(chunk.len() * dim, 0.0);
            for (row, &i) in chunk.iter().enumerate() {
                let g = &games[i];
                encoding.encode(
                    &g.state,
                    g.state.current_player(),
                    &mut states[row * dim..(row + 1) * dim],
                );
            }
            let x = Tensor::f_from_slice(&states)?
                .f_view([chunk.len() as i64, dim as i64])?
                .f_to_device(device)?;
            let y = strategy
                .f_forward(&x)?
                .f_to_kind(Kind::Float)?
                .f_to_device(Device::Cpu)?
                .f_contiguous()?;
            logits.resize(chunk.len() * ACTIONS, 0.0);
            y.f_copy_data(&mut logits, chunk.len() * ACTIONS)?;
            for (row, &i) in chunk.iter().enumerate() {
                let g = &mut games[i];
                let mask = g.state.legal_mask();
                match greedy_action(&logits[row * ACTIONS..(row + 1) * ACTIONS], mask) {
                    Some(a) => {
                        g.state
                            .apply(a)
                            .map_err(|e| TrainerError::BadShape(e.to_string()))?;
                        g.steps += 1;
                    }
                    None => g.done = true,
                }
            }
        }
    }
    let mut r = EvalResult {
        games: games.len() as u64,
        ..EvalResult::default()
    };
    for g in &games {
        let s0 = i64::from(g.state.total_score(g.net_seat));
        let s1 = i64::from(g.state.total_score(1 - g.net_seat));
        r.score0 += s0;
        r.score1 += s1;
        match s0.cmp(&s1) {
            std::cmp::Ordering::Greater => r.wins0 += 1,
            std::cmp::Ordering::Less => r.wins1 += 1,
            std::cmp::Ordering::Equal => r.draws += 1,
        }
        r.length += g.steps;
        if !g.state.is_terminal() {
            r.timeouts += 1;
        }
    }
    r.seconds = start.elapsed().as_secs_f64();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::network::{Activation, MlpSpec};
    use tch::nn::VarStore;

    #[test]
    fn greedy_breaks_ties_low_and_skips_illegal() {
        assert_eq!(greedy_action(&[1.0, 3.0, 3.0, 9.0], 0b0111), Some(1));
        assert_eq!(greedy_action(&[1.0, 3.0], 0), None);
    }

    #[test]
    fn batched_evaluation_equals_batch_of_one() {
        tch::manual_seed(4);
        let rules = Rules::default();
        let enc = Encoding {
            derived_playability: false,
            slot_aware_playability: false,
        };
        let vs = VarStore::new(Device::Cpu);
        let spec = MlpSpec {
            input_dim: enc.input_dim(&rules),
            hidden_size: 16,
            num_layers: 1,
            outputs: 22,
            activation: Activation::Relu,
        };
        let net = Mlp::new(&vs.root(), spec).unwrap();
        let run = |batch| {
            let s = EvalSpec {
                games: 6,
                base_seed: 50,
                max_steps: 2000,
                batch_size: batch,
            };
            evaluate(&net, Device::Cpu, &rules, enc, "random", &s).unwrap()
        };
        let (a, b) = (run(64), run(1));
        assert_eq!(
            (a.wins0, a.wins1, a.draws, a.score0, a.score1, a.length),
            (b.wins0, b.wins1, b.draws, b.score0, b.score1, b.length)
        );
        assert_eq!(a.games, 6);
        assert_eq!(a.wins0 + a.wins1 + a.draws, 6);
        let m = a.metrics("random");
        assert!(
            m.contains_key("eval/random/win_rate0")
                && m.contains_key("eval/random/avg_score_diff0")
        );
    }
}
