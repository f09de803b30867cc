//! Known-answer check of the CFR core: Kuhn poker solved by external-sampling
//! Monte Carlo CFR with this module's regret matching, sampling and RNG. The
//! average strategy must approach the game's known value of −1/18 for the
//! first player. Tests only.

#![expect(
    clippy::needless_range_loop,
    reason = "two-action arrays indexed by action read plainest as index loops"
)]

use std::collections::HashMap;

use super::regret::{self, Fallback};
use super::rng::Lcg;

/// Terminal payoff for player 0, or None when the history is not terminal.
/// Actions: 0 = pass/fold, 1 = bet/call. Each player antes 1.
fn payoff(cards: [usize; 2], h: &[u8]) -> Option<f64> {
    let showdown = |stake: f64| if cards[0] > cards[1] { stake } else { -stake };
    match h {
        [0, 0] => Some(showdown(1.0)),
        [1, 1] | [0, 1, 1] => Some(showdown(2.0)),
        [1, 0] => Some(1.0),
        [0, 1, 0] => Some(-1.0),
        _ => None,
    }
}

#[derive(Default)]
struct Node {
    regret: [f32; 2],
    strategy_sum: [f64; 2],
}

struct Solver {
    nodes: HashMap<(usize, Vec<u8>), Node>,
    rng: Lcg,
}

impl Solver {
    fn sigma(&mut self, key: &(usize, Vec<u8>)) -> [f64; 2] {
        let node = self.nodes.entry(key.clone()).or_default();
        let mut sigma = [0.0; 2];
        regret::regret_matching(
            &node.regret,
            0b11,
            1e-12,
            Fallback::Uniform,
            &mut self.rng,
            &mut sigma,
        );
        sigma
    }

    /// External sampling: the traverser tries both actions, the opponent
    /// samples one from its current strategy (and adds to its average).
    fn walk(&mut self, cards: [usize; 2], h: &mut Vec<u8>, traverser: usize) -> f64 {
        if let Some(v0) = payoff(cards, h) {
            return if traverser == 0 { v0 } else { -v0 };
        }
        let player = h.len() % 2;
        let key = (cards[player], h.clone());
        let sigma = self.sigma(&key);
        if player == traverser {
            let mut values = [0.0; 2];
            for a in 0..2 {
                h.push(a as u8);
                values[a] = self.walk(cards, h, traverser);
                h.pop();
            }
            let u = sigma[0] * values[0] + sigma[1] * values[1];
            let node = self.nodes.get_mut(&key).expect("created by sigma");
            for a in 0..2 {
                node.regret[a] += (values[a] - u) as f32;
            }
            u
        } else {
            let node = self.nodes.get_mut(&key).expect("created by sigma");
            for a in 0..2 {
                node.strategy_sum[a] += sigma[a];
            }
            let a = regret::sample_action(&sigma, 0b11, self.rng.next_double()).unwrap_or(0);
            h.push(a as u8);
            let v = self.walk(cards, h, traverser);
            h.pop();
            v
        }
    }

    fn average(&self, card: usize, h: &[u8]) -> [f64; 2] {
        match self.nodes.get(&(card, h.to_vec())) {
            Some(n) if n.strategy_sum[0] + n.strategy_sum[1] > 0.0 => {
                let mut w = n.strategy_sum;
                regret::normalize_legal(&mut w, 0b11);
                w
            }
            _ => [0.5, 0.5],
        }
    }

    /// Exact expected value for player 0 of the average strategy profile.
    fn value(&self) -> f64 {
        fn go(s: &Solver, cards: [usize; 2], h: &mut Vec<u8>) -> f64 {
            if let Some(v) = payoff(cards, h) {
                return v;
            }
            let p = s.average(cards[h.len() % 2], h);
            let mut v = 0.0;
            for a in 0..2 {
                h.push(a as u8);
                v += p[a] * go(s, cards, h);
                h.pop();
            }
            v
        }
        let mut total = 0.0;
        for c0 in 0..3 {
            for c1 in 0..3 {
                if c0 != c1 {
                    total += go(self, [c0, c1], &mut Vec::new()) / 6.0;
                }
            }
        }
        total
    }
}

#[test]
fn kuhn_poker_average_strategy_reaches_the_game_value() {
    let mut solver = Solver {
        nodes: HashMap::new(),
        rng: Lcg::new(2024),
    };
    // Chance is enumerated (all six deals each iteration): the LCG's low
    // bits are too regular to sample deals with `% 3` without bias.
    for _ in 0..5_000 {
        for c0 in 0..3 {
            for c1 in (0..3).filter(|&c| c != c0) {
                for traverser in 0..2 {
                    solver.walk([c0, c1], &mut Vec::new(), traverser);
                }
            }
        }
    }
    let value = solver.value();
    assert!(
        (value + 1.0 / 18.0).abs() < 0.01,
        "value {value}, expected {}",
        -1.0 / 18.0
    );
    // Dominated choices are learnt: with the king, the second player always
    // calls a bet; with the jack, it folds to one.
    assert!(solver.average(2, &[1])[1] > 0.95);
    assert!(solver.average(0, &[1])[0] > 0.95);
}
