//! Information-state encoding (docs/deep-cfr.md §2): a game state seen by one observer as
//! a flat `f32` vector for the networks.
//!
//! Layout and normalisers follow the reference exactly (fixtures README,
//! "Encoding layout"); every division is done in `f32` on integer-valued
//! operands so that vectors match the recorded goldens bit for bit. The
//! encoder writes into the caller's slice and never allocates.

use serde::{Deserialize, Serialize};

use crate::game::{GameState, Phase, Rules, MAX_COLORS};

/// Values per colour in the derived-playability block.
const DERIVED_PER_COLOR: usize = 15;
/// Values appended after the per-colour derived block.
const DERIVED_TAIL: usize = 3;
/// Values per hand slot in the slot-aware block.
const SLOT_FEATURES: usize = 6;

/// Which optional feature blocks follow the base block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Encoding {
    pub derived_playability: bool,
    pub slot_aware_playability: bool,
}

impl From<&crate::config::EncodingConfig> for Encoding {
    fn from(c: &crate::config::EncodingConfig) -> Self {
        Encoding {
            derived_playability: c.derived_playability,
            slot_aware_playability: c.slot_aware_playability,
        }
    }
}

/// Input dimension for a trainer config (rules + encoding flags).
pub fn input_dim_for(cfg: &crate::config::TrainerConfig) -> usize {
    Encoding::from(&cfg.encoding).input_dim(&cfg.rules)
}

/// Size of the base block: 171 for the classic rules.
pub fn base_dim(rules: &Rules) -> usize {
    let n = rules.n_colors as usize;
    let h = rules.hand_size as usize;
    let r = rules.n_ranks as usize;
    5 + 3 * h + 8 * n + 4 * n + n * (r + 1) + 3 + 1 + (n + 1) + (2 * h + 1 + n)
}

impl Encoding {
    /// Base block only (`smoke` configs): 171 classic.
    pub const BASE: Encoding = Encoding {
        derived_playability: false,
        slot_aware_playability: false,
    };
    /// Both optional blocks (`default` config): 297 classic.
    pub const FULL: Encoding = Encoding {
        derived_playability: true,
        slot_aware_playability: true,
    };

    /// Length of the encoded vector: 171 / 249 / 219 / 297 classic.
    pub fn input_dim(&self, rules: &Rules) -> usize {
        let n = rules.n_colors as usize;
        let h = rules.hand_size as usize;
        let mut d = base_dim(rules);
        if self.derived_playability {
            d += DERIVED_PER_COLOR * n + DERIVED_TAIL;
        }
        if self.slot_aware_playability {
            d += SLOT_FEATURES * h;
        }
        d
    }

    /// Convenience: encodes into a fresh vector (allocates; not for hot loops).
    pub fn encode_vec(&self, state: &GameState, observer: usize) -> Vec<f32> {
        let mut v = vec![0.0; self.input_dim(state.rules())];
        self.encode(state, observer, &mut v);
        v
    }

    /// Encodes `state` as seen by `observer` (0 or 1) into `out`, which must
    /// be exactly [`Self::input_dim`] long (a shorter or longer slice is a
    /// programming error and panics).
    pub fn encode(&self, state: &GameState, observer: usize, out: &mut [f32]) {
        let rules = state.rules();
        let dim = self.input_dim(rules);
        assert_eq!(
            out.len(),
            dim,
            "encode: output slice has {} values, the encoding needs {dim}",
            out.len()
        );
        assert!(
            observer < 2,
            "encode: observer must be 0 or 1, got {observer}"
        );
        let p = observer;
        let opp = 1 - p;
        let nc = state.n_colors();
        let hs = state.hand_size();
        let n_ranks = rules.n_ranks as usize;

        // Normalisers, as f32 (integer-valued, so exact).
        let t = rules.deck_size() as f32;
        let t2 = (2 * rules.deck_size()) as f32;
        let l = rules.cards_per_color() as f32;
        let cpc = rules.cards_per_color() as i32;
        let c_norm = l;
        let d_i = rules.bonus_amount as i64
            + (rules.n_ranks as i64) * (rules.n_ranks as i64 + 1) * (rules.n_handshakes as i64 + 1);
        let d = d_i.max(1) as f32;
        let s_norm =
            ((rules.n_ranks as i64 * (2 * rules.min_rank as i64 + rules.n_ranks as i64 - 1)) / 2)
                .max(1) as f32;
        let w = rules.n_handshakes.max(1) as f32;
        let ncf = nc as f32;
        let rf = n_ranks as f32;

        let deck_len = state.deck_len() as f32;
        let turn = state.turn_count() as f32;
        let mut i = 0usize;

        // 1. meta
        out[0] = (state.phase() == Phase::Card) as u8 as f32;
        out[1] = (state.phase() == Phase::Draw) as u8 as f32;
        out[2] = state.current_player() as f32;
        out[3] = p as f32;
        out[4] = deck_len / t;
        i += 5;

        // 2. observer hand
        let hand = state.hand(p);
        for s in 0..hs {
            if let Some(card) = hand.get(s) {
                out[i] = 1.0;
                out[i + 1] = (card.color() as f32 + 1.0) / ncf;
                out[i + 2] = card.rank() as f32 / rf;
            } else {
                out[i] = 0.0;
                out[i + 1] = 0.0;
                out[i + 2] = 0.0;
            }
            i += 3;
        }

        // 3. expeditions, absolute player order (quirk kept)
        for q in 0..2 {
            for c in 0..nc {
                out[i] = state.expedition(q, c).len() as f32 / l;
                out[i + 1] = state.last_numeric(q, c) as f32 / rf;
                out[i + 2] = state.expedition_handshakes(q, c) as f32 / w;
                out[i + 3] = state.expedition_score(q, c) as f32 / d;
                i += 4;
            }
        }

        // 4. discard piles
        for c in 0..nc {
            out[i] = state.discard_pile(c).len() as f32 / l;
            if let Some(top) = state.pile_top(c) {
                out[i + 1] = 1.0;
                out[i + 2] = (top.color() as f32 + 1.0) / ncf;
                out[i + 3] = top.rank() as f32 / rf;
            } else {
                out[i + 1] = 0.0;
                out[i + 2] = 0.0;
                out[i + 3] = 0.0;
            }
            i += 4;
        }

        // 5. public card histogram, indexed by the spec's card code
        let stride = n_ranks + 1;
        let hist = &mut out[i..i + nc * stride];
        hist.fill(0.0);
        for c in 0..nc {
            for q in 0..2 {
                for card in state.expedition(q, c) {
                    hist[c * stride + card.rank() as usize] += 1.0;
                }
            }
            for card in state.discard_pile(c) {
                hist[c * stride + card.rank() as usize] += 1.0;
            }
        }
        i += nc * stride;

        // 6. scores relative to the observer
        let own = state.total_score(p);
        let other = state.total_score(opp);
        out[i] = own as f32 / d;
        out[i + 1] = other as f32 / d;
        out[i + 2] = (own - other) as f32 / d;
        i += 3;

        // 7. turn
        out[i] = turn / t2;
        i += 1;

        // 8. pending discard colour, one-hot with "none" last
        let pend = &mut out[i..i + nc + 1];
        pend.fill(0.0);
        pend[state.pending_discard_color().unwrap_or(nc)] = 1.0;
        i += nc + 1;

        // 9. legal mask of the player to move (ignores the observer: quirk)
        let mask = state.legal_mask();
        for (a, v) in out[i..i + state.action_size()].iter_mut().enumerate() {
            *v = ((mask >> a) & 1) as f32;
        }
        i += state.action_size();

        if self.derived_playability {
            // Per-colour tallies of the observer's hand relative to its
            // expeditions, gathered in one pass over the hand.
            let mut hand_count = [0i32; MAX_COLORS];
            let mut hand_wagers = [0i32; MAX_COLORS];
            let mut play_sum = [0i32; MAX_COLORS];
            let mut play_count = [0i32; MAX_COLORS];
            let mut dead_sum = [0i32; MAX_COLORS];
            let mut dead_count = [0i32; MAX_COLORS];
            for card in hand {
                let c = card.color() as usize;
                hand_count[c] += 1;
                if card.is_handshake() {
                    hand_wagers[c] += 1;
                } else if card.rank() > state.last_numeric(p, c) {
                    play_count[c] += 1;
                    play_sum[c] += rules.face(card.rank());
                } else {
                    dead_count[c] += 1;
                    dead_sum[c] += rules.face(card.rank());
                }
            }
            for c in 0..nc {
                let len = state.expedition(p, c).len();
                let last = state.last_numeric(p, c);
                let o = &mut out[i..i + DERIVED_PER_COLOR];
                o[0] = (len == 0) as u8 as f32;
                o[1] = (len > 0 && last == 0) as u8 as f32;
                o[2] = state.expedition_numeric_sum(p, c) as f32 / s_norm;
                o[3] = state.expedition_handshakes(p, c) as f32 / w;
                o[4] = len as f32 / c_norm;
                // Quirk kept: the rank index is normalised by the face sum.
                o[5] = last as f32 / s_norm;
                o[6] = hand_count[c] as f32 / c_norm;
                o[7] = hand_wagers[c] as f32 / w;
                o[8] = play_sum[c] as f32 / s_norm;
                o[9] = play_count[c] as f32 / c_norm;
                o[10] = dead_count[c] as f32 / c_norm;
                o[11] = dead_sum[c] as f32 / s_norm;
                let top_face = match state.pile_top(c) {
                    Some(top) if !top.is_handshake() && top.rank() > last => rules.face(top.rank()),
                    _ => 0,
                };
                let top_playable = matches!(
                    state.pile_top(c),
                    Some(top) if !top.is_handshake() && top.rank() > last
                );
                o[12] = top_playable as u8 as f32;
                o[13] = top_face as f32 / s_norm;
                let unknown = cpc
                    - hand_count[c]
                    - len as i32
                    - state.expedition(opp, c).len() as i32
                    - state.discard_pile(c).len() as i32;
                o[14] = unknown.max(0) as f32 / c_norm;
                i += DERIVED_PER_COLOR;
            }
            out[i] = deck_len / t;
            out[i + 1] = turn / t2;
            out[i + 2] = deck_len / t2;
            i += DERIVED_TAIL;
        }

        if self.slot_aware_playability {
            for s in 0..hs {
                let o = &mut out[i..i + SLOT_FEATURES];
                if let Some(&card) = hand.get(s) {
                    let c = card.color() as usize;
                    let last = state.last_numeric(p, c);
                    let lp = state.can_play(p, card);
                    let started = last > 0;
                    let num = !card.is_handshake();
                    let would_start = lp && !started;
                    o[0] = would_start as u8 as f32;
                    o[1] = (would_start && num) as u8 as f32;
                    o[2] = (would_start && !num && state.expedition(p, c).is_empty()) as u8 as f32;
                    o[3] = (lp && started) as u8 as f32;
                    o[4] = (num && !lp) as u8 as f32;
                    o[5] = (!num && lp && !started) as u8 as f32;
                } else {
                    o.fill(0.0);
                }
                i += SLOT_FEATURES;
            }
        }
        debug_assert_eq!(i, dim);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::{nth_set_bit, Card, Snapshot};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn play_random(rules: &Rules, seed: u64, actions: usize) -> GameState {
        let mut s = GameState::new(rules, seed).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..actions {
            let m = s.legal_mask();
            if m == 0 {
                break;
            }
            let k = rng.random_range(0..m.count_ones());
            s.apply(nth_set_bit(m, k).unwrap()).unwrap();
        }
        s
    }

    #[test]
    fn dims_classic() {
        let r = Rules::classic();
        let e = |d, s| Encoding {
            derived_playability: d,
            slot_aware_playability: s,
        };
        assert_eq!(e(false, false).input_dim(&r), 171);
        assert_eq!(e(true, false).input_dim(&r), 171 + 78);
        assert_eq!(e(false, true).input_dim(&r), 171 + 48);
        assert_eq!(e(true, true).input_dim(&r), 297);
        assert_eq!(base_dim(&r), 171);
        for enc in [
            e(false, false),
            e(true, false),
            e(false, true),
            e(true, true),
        ] {
            let s = GameState::new(&r, 1).unwrap();
            assert_eq!(enc.encode_vec(&s, 0).len(), enc.input_dim(&r));
        }
    }

    #[test]
    fn deterministic_and_observer_dependent() {
        let r = Rules::classic();
        let s = play_random(&r, 3, 57);
        let a = Encoding::FULL.encode_vec(&s, 0);
        let b = Encoding::FULL.encode_vec(&s.clone(), 0);
        assert_eq!(
            a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            b.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        let mut buf = vec![7.0f32; a.len()];
        Encoding::FULL.encode(&s, 0, &mut buf);
        assert_eq!(buf, a, "a dirty buffer is fully overwritten");
        let other = Encoding::FULL.encode_vec(&s, 1);
        assert_ne!(a, other, "the hand block depends on the observer");
        assert_eq!(a[3], 0.0);
        assert_eq!(other[3], 1.0);
    }

    #[test]
    fn tail_is_the_legal_mask_without_flags() {
        for (rules, seed) in [(Rules::classic(), 5), (Rules::small(), 6)] {
            let mut s = GameState::new(&rules, seed).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let n = rules.action_size();
            loop {
                let v = Encoding::BASE.encode_vec(&s, s.current_player());
                let mut want = vec![false; n];
                s.legal_bools(&mut want);
                let want: Vec<f32> = want.iter().map(|&b| b as u8 as f32).collect();
                assert_eq!(&v[v.len() - n..], &want[..]);
                // Block 9 ignores the observer.
                let w = Encoding::BASE.encode_vec(&s, 1 - s.current_player());
                assert_eq!(&w[w.len() - n..], &want[..]);
                let m = s.legal_mask();
                if m == 0 {
                    break;
                }
                let k = rng.random_range(0..m.count_ones());
                s.apply(nth_set_bit(m, k).unwrap()).unwrap();
            }
        }
    }

    #[test]
    fn finite_with_empty_slots() {
        // Draw phase (one empty slot), an almost empty hand, and a finished game.
        let r = Rules::classic();
        let mut s = GameState::new(&r, 8).unwrap();
        s.apply(1).unwrap();
        let v = Encoding::FULL.encode_vec(&s, 0);
        assert!(v.iter().all(|x| x.is_finite()));
        // Slot 7 of the observer's hand is empty: 3 zeros, then 6 zeros.
        assert_eq!(&v[5 + 21..5 + 24], &[0.0; 3]);
        assert_eq!(&v[297 - 6..], &[0.0; 6]);
        let mut snap = Snapshot {
            config: r,
            deck: vec![],
            hands: vec![vec![Card::new(2, 0)], vec![]],
            expeditions: vec![vec![vec![]; 5], vec![vec![]; 5]],
            discards: vec![vec![]; 5],
            current_player: 0,
            phase: crate::game::Phase::Card,
            pending_discarded_color: None,
            turn_count: 0,
            terminal: false,
        };
        snap.discards[1] = vec![Card::new(1, 4)];
        let s = GameState::from_snapshot(&snap).unwrap();
        for obs in 0..2 {
            let v = Encoding::FULL.encode_vec(&s, obs);
            assert!(v.iter().all(|x| x.is_finite()));
        }
        let done = play_random(&Rules::small(), 2, 10_000);
        assert!(done.is_terminal());
        let enc = Encoding::FULL;
        let v = enc.encode_vec(&done, 0);
        assert_eq!(v.len(), enc.input_dim(&Rules::small()));
        assert!(v.iter().all(|x| x.is_finite()));
    }

    #[test]
    fn known_values_at_the_deal() {
        let r = Rules::classic();
        let s = GameState::new(&r, 12).unwrap();
        let v = Encoding::FULL.encode_vec(&s, 0);
        assert_eq!(&v[..5], &[1.0, 0.0, 0.0, 0.0, 44.0 / 60.0]);
        let first = s.hand(0)[0];
        assert_eq!(v[6], (first.color() as f32 + 1.0) / 5.0);
        assert_eq!(v[7], first.rank() as f32 / 9.0);
        assert_eq!(v[148], 1.0, "no pending colour");
        // Derived: every colour unopened, unknown = 12 − hand cards of that colour.
        for c in 0..5 {
            let o = &v[171 + 15 * c..171 + 15 * (c + 1)];
            let in_hand = s.hand(0).iter().filter(|k| k.color() as usize == c).count();
            assert_eq!(o[0], 1.0);
            assert_eq!(o[6], in_hand as f32 / 12.0);
            assert_eq!(o[14], (12 - in_hand) as f32 / 12.0);
        }
    }

    /// A slice of the wrong length is a caller's bug: it stops at once
    /// with a message naming the slice, rather than writing a partial
    /// encoding.
    #[test]
    fn wrong_slice_length_panics_naming_the_slice() {
        let s = GameState::new(&Rules::classic(), 1).unwrap();
        let mut buf = vec![f32::NAN; 100];
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Encoding::FULL.encode(&s, 0, &mut buf)
        }));
        let payload = caught.expect_err("a 100-float slice for a 297-float encoding");
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(message.contains("output slice"), "{message}");
        assert!(buf.iter().all(|v| v.is_nan()), "nothing was written");
    }
}
