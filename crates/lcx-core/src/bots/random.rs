//! `random`: a seeded bot that picks uniformly among the legal action ids.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::Bot;
use crate::game::{random_set_bit, GameState};

/// Uniform over legal unified ids, reproducible from its seed (ChaCha8 is
/// portable and stable across rand releases, unlike `StdRng`).
#[derive(Debug, Clone)]
pub struct RandomBot {
    rng: ChaCha8Rng,
}

impl RandomBot {
    pub fn new(seed: u64) -> Self {
        RandomBot {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }
}

impl Bot for RandomBot {
    fn act(&mut self, state: &GameState) -> Option<usize> {
        random_set_bit(state.legal_mask(), &mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_picks_only_return_set_bits_and_cover_them_all() {
        let mask: u64 = (1 << 0) | (1 << 10) | (1 << 17) | (1 << 19);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut seen = [0u64; 32];
        for _ in 0..4000 {
            let a = random_set_bit(mask, &mut rng).unwrap();
            assert!(mask & (1 << a) != 0, "picked unset bit {a}");
            seen[a] += 1;
        }
        // 4 set bits, 4000 draws: each expected 1000; 800 is > 6 sigma away.
        for bit in [0, 10, 17, 19] {
            assert!(seen[bit] > 800, "bit {bit} drawn {} times", seen[bit]);
        }
        assert_eq!(random_set_bit(0, &mut rng), None);
    }
}
