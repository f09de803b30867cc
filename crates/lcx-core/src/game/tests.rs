//! Unit tests of the rules engine: docs/deep-cfr.md §13.1–13.3 plus property
//! tests over random games.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

fn c(color: u8, rank: u8) -> Card {
    Card::new(color, rank)
}

/// A hand-built snapshot on `rules`: everything empty, player 0, CARD phase.
fn blank(rules: Rules) -> Snapshot {
    let n = rules.n_colors as usize;
    Snapshot {
        config: rules,
        deck: vec![],
        hands: vec![vec![], vec![]],
        expeditions: vec![vec![vec![]; n], vec![vec![]; n]],
        discards: vec![vec![]; n],
        current_player: 0,
        phase: Phase::Card,
        pending_discarded_color: None,
        turn_count: 0,
        terminal: false,
    }
}

fn build(snap: &Snapshot) -> GameState {
    GameState::from_snapshot(snap).expect("valid snapshot")
}

fn random_action(s: &GameState, rng: &mut ChaCha8Rng) -> usize {
    let m = s.legal_mask();
    assert_ne!(m, 0, "a live state must offer an action");
    let k = rng.random_range(0..m.count_ones());
    nth_set_bit(m, k).expect("k < popcount")
}

// ----- docs/deep-cfr.md §13.1 rules and masks ------------------------------------------------

#[test]
fn deck_size_is_colors_times_cards_per_color() {
    let r = Rules::small();
    assert_eq!(r.deck_size(), 18);
    assert_eq!(r.ordered_deck().len(), 18);
    let s = GameState::new(&r, 7).unwrap();
    assert_eq!(s.deck_len() + s.hand(0).len() + s.hand(1).len(), 18);
    assert_eq!(Rules::classic().deck_size(), 60);
    assert_eq!(Rules::classic().action_size(), 22);
}

#[test]
fn classic_deal_leaves_8_and_44() {
    let s = GameState::new(&Rules::classic(), 1).unwrap();
    assert_eq!(s.hand(0).len(), 8);
    assert_eq!(s.hand(1).len(), 8);
    assert_eq!(s.deck_len(), 44);
    assert_eq!(
        (s.current_player(), s.phase(), s.turn_count()),
        (0, Phase::Card, 0)
    );
    assert_eq!(s.pending_discard_color(), None);
    assert!(!s.is_terminal());
    s.validate_invariants().unwrap();
}

#[test]
fn lower_number_cannot_follow_higher() {
    let mut snap = blank(Rules::classic());
    snap.hands[0] = vec![c(0, 2)];
    snap.expeditions[0][0] = vec![c(0, 4)];
    let mut s = build(&snap);
    assert_eq!(s.legal_mask(), 0b10);
    assert!(matches!(s.apply(0), Err(GameError::IllegalAction { .. })));
}

#[test]
fn handshake_after_number_is_illegal_number_after_handshakes_is_legal() {
    let mut snap = blank(Rules::classic());
    snap.hands[0] = vec![c(1, 0), c(2, 5)];
    snap.expeditions[0][1] = vec![c(1, 3)];
    snap.expeditions[0][2] = vec![c(2, 0), c(2, 0)];
    let s = build(&snap);
    assert!(!s.is_legal(0), "handshake onto a number");
    assert!(s.is_legal(2), "number onto handshakes only");
    assert!(s.can_play(0, c(2, 1)));
}

#[test]
fn mixed_hand_against_four() {
    let mut snap = blank(Rules::classic());
    snap.hands[0] = vec![c(0, 0), c(0, 3), c(0, 5)];
    snap.expeditions[0][0] = vec![c(0, 4)];
    let s = build(&snap);
    let mut m = vec![false; 22];
    s.legal_bools(&mut m);
    assert_eq!((m[0], m[2], m[4]), (false, false, true));
    assert!(m[1] && m[3] && m[5], "discards are always legal");
    assert!(
        m[6..].iter().all(|b| !b),
        "empty slots and draws are masked"
    );
}

#[test]
fn discarded_pile_is_blocked_then_opponent_may_take_it() {
    let r = Rules::classic();
    let mut s = GameState::new(&r, 3).unwrap();
    let card = s.hand(0)[0];
    let col = card.color() as usize;
    s.apply(1).unwrap(); // discard slot 0
    assert_eq!(s.pending_discard_color(), Some(col));
    let pile_id = r.draw_pile_action(col);
    assert!(!s.is_legal(pile_id));
    assert!(matches!(
        s.apply(pile_id),
        Err(GameError::IllegalAction { .. })
    ));
    s.validate_invariants().unwrap();
    s.apply(r.draw_deck_action()).unwrap();
    assert_eq!(s.current_player(), 1);
    assert_eq!(s.pending_discard_color(), None);
    // Opponent discards a card of another colour if possible, else plays/discards
    // slot 0; then the pile of `col` is drawable (unless they just discarded it).
    let slot = s
        .hand(1)
        .iter()
        .position(|k| k.color() as usize != col)
        .unwrap_or(0);
    s.apply(2 * slot + 1).unwrap();
    if s.pending_discard_color() != Some(col) {
        assert!(s.is_legal(pile_id));
        s.apply(pile_id).unwrap();
        assert_eq!(
            *s.hand(1).last().unwrap(),
            card,
            "the pile card moved into the hand"
        );
        assert!(s.discard_pile(col).is_empty());
    }
    s.validate_invariants().unwrap();
}

#[test]
fn last_deck_draw_ends_the_game_without_switching() {
    let r = Rules::canonical_small();
    let mut snap = blank(r);
    snap.deck = vec![c(0, 2)];
    snap.hands = vec![vec![c(0, 1)], vec![c(1, 1)]];
    snap.expeditions[1][1] = vec![c(1, 2)];
    let mut s = build(&snap);
    s.validate_invariants().unwrap();
    s.apply(0).unwrap();
    s.apply(r.draw_deck_action()).unwrap();
    assert!(s.is_terminal());
    assert_eq!(
        (s.current_player(), s.phase(), s.turn_count()),
        (0, Phase::Draw, 1)
    );
    assert_eq!(s.legal_mask(), 0);
    assert!(matches!(s.apply(0), Err(GameError::GameOver { .. })));
    s.validate_invariants().unwrap();
}

#[test]
fn card_action_with_nothing_to_draw_ends_the_game() {
    let r = Rules::canonical_small();
    let mut snap = blank(r);
    snap.hands = vec![vec![c(0, 1)], vec![c(1, 1)]];
    snap.expeditions[0][0] = vec![c(0, 2)];
    snap.expeditions[1][1] = vec![c(1, 2)];
    let mut s = build(&snap);
    s.validate_invariants().unwrap();
    assert_eq!(s.legal_mask(), 0b10, "(0,1) cannot go on (0,2)");
    s.apply(1).unwrap(); // discard: its own pile is the only one and is pending
    assert!(s.is_terminal());
    assert_eq!(s.phase(), Phase::Draw);
    assert_eq!(s.current_player(), 0);
    assert_eq!(s.legal_mask(), 0);
    s.validate_invariants().unwrap();
}

#[test]
fn empty_slots_are_masked() {
    let mut snap = blank(Rules::classic());
    snap.hands[0] = vec![c(3, 4)];
    let s = build(&snap);
    let mut m = vec![false; 22];
    s.legal_bools(&mut m);
    assert_eq!(&m[..3], &[true, true, false]);
    assert_eq!(m.iter().filter(|b| **b).count(), 2);
}

#[test]
fn empty_piles_cannot_be_drawn_and_draw_mask_has_no_card_bits() {
    let r = Rules::classic();
    let mut snap = blank(r);
    snap.phase = Phase::Draw;
    snap.deck = vec![c(4, 9)];
    snap.hands[0] = vec![c(0, 1)];
    snap.discards[2] = vec![c(2, 5)];
    let mut s = build(&snap);
    let mask = s.legal_mask();
    assert_eq!(mask, (1 << 16) | (1 << (17 + 2)));
    let mut m = vec![false; r.action_size()];
    s.legal_bools(&mut m);
    assert_eq!(m.len(), 22);
    assert!(m[..16].iter().all(|b| !b));
    for col in [0, 1, 3, 4] {
        assert!(s.apply(17 + col).is_err(), "empty pile {col}");
    }
    assert!(s.apply(0).is_err(), "card id in the draw phase");
    s.apply(19).unwrap();
    assert_eq!(s.hand(0), &[c(0, 1), c(2, 5)]);
    // Card phase: the draw bits are false.
    let s = GameState::new(&r, 9).unwrap();
    assert_eq!(s.legal_mask() >> 16, 0);
}

#[test]
fn small_config_random_games_finish() {
    let r = Rules::small();
    for seed in 0..1000u64 {
        let mut s = GameState::new(&r, seed).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xabcdef);
        let mut steps = 0;
        while !s.is_terminal() {
            let a = random_action(&s, &mut rng);
            s.apply(a).unwrap();
            steps += 1;
            assert!(steps < 1000, "seed {seed}: no end after 1000 steps");
        }
        assert_eq!(s.deck_len(), 0);
    }
}

#[test]
fn local_and_unified_ids() {
    let r = Rules::classic();
    let mut s = GameState::new(&r, 4).unwrap();
    assert_eq!(s.to_unified(5).unwrap(), 5);
    assert_eq!(s.to_local(5).unwrap(), 5);
    assert!(s.to_local(16).is_err());
    assert!(s.to_unified(16).is_err());
    s.apply_local(1).unwrap();
    assert_eq!(s.to_unified(0).unwrap(), 16);
    assert_eq!(s.to_unified(3).unwrap(), 19);
    assert_eq!(s.to_local(21).unwrap(), 5);
    assert!(s.to_local(3).is_err());
    assert!(s.to_unified(6).is_err());
    s.apply_local(0).unwrap();
    assert_eq!(s.phase(), Phase::Card);
}

// ----- docs/deep-cfr.md §13.2 scoring --------------------------------------------------------

#[test]
fn scoring_table() {
    let r = Rules::classic();
    // Faces → rank indices (face − 1 for min_rank 2); 0 = handshake.
    let exp = |faces: &[i32]| -> Vec<Card> {
        faces
            .iter()
            .map(|&f| c(0, if f == 0 { 0 } else { (f - 1) as u8 }))
            .collect()
    };
    assert_eq!(r.score_cards(&exp(&[])), 0);
    assert_eq!(r.score_cards(&exp(&[0, 0])), -60);
    assert_eq!(r.score_cards(&exp(&[2, 4, 6])), -8);
    assert_eq!(r.score_cards(&exp(&[0, 0, 2, 3, 4])), -33);
    let r4 = Rules {
        bonus_threshold: 4,
        ..r
    };
    assert_eq!(r4.score_cards(&exp(&[2, 3, 4, 5])), 14);
    assert_eq!(r.score_cards(&exp(&[0, 6])), -28);
    assert_eq!(r.score_cards(&exp(&[5, 6])), -9);
    assert_eq!(r.score_cards(&exp(&[0, 0, 0])), -80);
}

#[test]
fn totals_and_score_diff_follow_plays() {
    let mut snap = blank(Rules::classic());
    snap.hands[0] = vec![c(0, 9), c(1, 0)];
    snap.expeditions[1][3] = vec![c(3, 8)]; // face 9 → −11
    snap.deck = vec![c(4, 1), c(4, 2)];
    let mut s = build(&snap);
    assert_eq!(s.total_score(1), -11);
    s.apply(0).unwrap(); // face 10 → −10
    assert_eq!(s.total_score(0), -10);
    assert_eq!(s.score_diff(0), 1);
    assert_eq!(s.score_diff(1), -1);
}

// ----- docs/deep-cfr.md §13.3 state ----------------------------------------------------------

fn mid_game(seed: u64, actions: usize) -> GameState {
    let mut s = GameState::new(&Rules::classic(), seed).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed + 1);
    for _ in 0..actions {
        if s.is_terminal() {
            break;
        }
        let a = random_action(&s, &mut rng);
        s.apply(a).unwrap();
    }
    s
}

#[test]
fn snapshot_round_trip() {
    for seed in 0..5 {
        let s = mid_game(seed, 41 + seed as usize * 13);
        let snap = s.to_snapshot();
        assert_eq!(GameState::from_snapshot(&snap).unwrap(), s);
        let json = s.to_json();
        assert!(json.contains("\"pending_discarded_color\""));
        assert!(json.contains("\"color\""));
        assert_eq!(GameState::from_json(&json).unwrap(), s);
    }
    assert!(matches!(
        GameState::from_json("{\"config\": 3}"),
        Err(GameError::InvalidSnapshot(_))
    ));
}

#[test]
fn oversized_regions_are_rejected() {
    let r = Rules::canonical_small();
    let mut snap = blank(r);
    snap.hands[0] = vec![c(0, 1), c(0, 2)];
    let e = GameState::from_snapshot(&snap).unwrap_err().to_string();
    assert!(e.contains("hands[0]"), "{e}");
    let mut snap = blank(r);
    snap.deck = vec![c(0, 1); 5];
    assert!(GameState::from_snapshot(&snap)
        .unwrap_err()
        .to_string()
        .contains("deck"));
    let mut snap = blank(r);
    snap.discards[1] = vec![c(1, 1), c(1, 2), c(1, 1)];
    assert!(GameState::from_snapshot(&snap)
        .unwrap_err()
        .to_string()
        .contains("discards[1]"));
    let mut snap = blank(r);
    snap.expeditions[0][0] = vec![c(0, 1), c(0, 2), c(0, 2)];
    assert!(GameState::from_snapshot(&snap)
        .unwrap_err()
        .to_string()
        .contains("expeditions[0][0]"));
    let mut snap = blank(r);
    snap.hands[1] = vec![c(5, 1)];
    assert!(GameState::from_snapshot(&snap).is_err(), "unknown colour");
}

#[test]
fn invariants_catch_card_loss_and_disorder() {
    let s = mid_game(11, 60);
    s.validate_invariants().unwrap();
    let mut snap = s.to_snapshot();
    snap.deck.pop();
    let e = GameState::from_snapshot(&snap)
        .unwrap()
        .validate_invariants()
        .unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");

    let r = Rules::canonical_small();
    let mut snap = blank(r);
    snap.hands = vec![vec![c(0, 1)], vec![c(1, 1)]];
    snap.expeditions[0][1] = vec![c(1, 2)];
    snap.deck = vec![c(0, 2)];
    build(&snap).validate_invariants().unwrap();
    snap.expeditions[0][1] = vec![c(1, 2), c(1, 1)];
    snap.hands[1] = vec![];
    let e = build(&snap).validate_invariants().unwrap_err();
    assert!(e.to_string().contains("strictly increasing"), "{e}");

    // A full deck with a handshake played after a number.
    let r = Rules::small();
    let mut snap = blank(r);
    snap.deck = r
        .ordered_deck()
        .into_iter()
        .filter(|&k| k != c(0, 0) && k != c(0, 2))
        .collect();
    snap.expeditions[0][0] = vec![c(0, 2), c(0, 0)];
    let e = build(&snap).validate_invariants().unwrap_err();
    assert!(e.to_string().contains("handshake after a number"), "{e}");

    // Pending colour in the card phase.
    let mut snap = s.to_snapshot();
    snap.phase = Phase::Card;
    snap.pending_discarded_color = Some(0);
    let e = build(&snap).validate_invariants().unwrap_err();
    assert!(e.to_string().contains("pending"), "{e}");
}

#[test]
fn deal_order_matches_spec_example() {
    // Deck [a,b,c,d,e,f] (top = f), hand 2: p0 [f,d], p1 [e,c], deck [a,b].
    let r = Rules {
        n_colors: 3,
        n_ranks: 2,
        min_rank: 1,
        n_handshakes: 0,
        hand_size: 2,
        ..Rules::canonical_small()
    };
    let deck = [c(0, 1), c(0, 2), c(1, 1), c(1, 2), c(2, 1), c(2, 2)];
    let s = GameState::from_deck(&r, &deck).unwrap();
    assert_eq!(s.hand(0), &[deck[5], deck[3]]);
    assert_eq!(s.hand(1), &[deck[4], deck[2]]);
    assert_eq!(s.deck(), &deck[..2]);
    // Hands keep deal order; removal shifts left, draws append.
    let mut s = s;
    s.apply(1).unwrap();
    assert_eq!(s.hand(0), &[deck[3]]);
    s.apply(r.draw_deck_action()).unwrap();
    assert_eq!(s.hand(0), &[deck[3], deck[1]]);
    assert!(GameState::from_deck(&r, &deck[..5]).is_err());
    let dup = [c(0, 1), c(0, 1), c(1, 1), c(1, 2), c(2, 1), c(2, 2)];
    assert!(GameState::from_deck(&r, &dup).is_err());
}

#[test]
fn apply_then_undo_restores_every_legal_action() {
    for seed in 0..4 {
        let mut s = mid_game(seed, 0);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        while !s.is_terminal() {
            let before = s.clone();
            for a in s.legal_actions() {
                let mut t = before.clone();
                let u = t.apply(a).unwrap();
                t.validate_invariants().unwrap();
                t.undo(&u);
                assert_eq!(t, before, "seed {seed} action {a}");
            }
            let a = random_action(&s, &mut rng);
            s.apply(a).unwrap();
        }
    }
}

#[test]
fn twenty_deep_push_pop_restores() {
    let mut s = mid_game(5, 10);
    let start = s.clone();
    let mut hist = UndoStack::new();
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let mut locals = vec![];
    for _ in 0..20 {
        let a = random_action(&s, &mut rng);
        let local = s.to_local(a).unwrap();
        hist.push_action(&mut s, local).unwrap();
        locals.push(local);
    }
    assert_eq!(hist.len(), 20);
    while let Some(want) = locals.pop() {
        assert_eq!(hist.pop_action(&mut s).unwrap(), want);
    }
    assert_eq!(s, start);
    assert!(matches!(
        hist.pop_action(&mut s),
        Err(GameError::EmptyHistory)
    ));
}

#[test]
fn apply_with_undo_equals_apply_and_seeds_are_deterministic() {
    let mut a = GameState::new(&Rules::classic(), 77).unwrap();
    let mut b = GameState::new(&Rules::classic(), 77).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, GameState::new(&Rules::classic(), 78).unwrap());
    let mut hist = UndoStack::new();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    while !a.is_terminal() {
        let x = random_action(&a, &mut rng);
        a.apply(x).unwrap();
        hist.push_unified(&mut b, x).unwrap();
        assert_eq!(a, b);
    }
}

#[test]
fn swap_deck_cards_is_bounds_checked() {
    let mut s = GameState::new(&Rules::classic(), 2).unwrap();
    let (x, y) = (s.deck()[0], s.deck()[43]);
    s.swap_deck_cards(0, 43).unwrap();
    assert_eq!((s.deck()[0], s.deck()[43]), (y, x));
    assert!(matches!(
        s.swap_deck_cards(0, 44),
        Err(GameError::DeckIndex { len: 44, .. })
    ));
    assert!(s.swap_deck_cards(44, 0).is_err());
    s.validate_invariants().unwrap();
}

#[test]
fn rules_validation_names_the_field() {
    let bad = |f: fn(&mut Rules), word: &str| {
        let mut r = Rules::classic();
        f(&mut r);
        let e = r.validate().unwrap_err().to_string();
        assert!(e.contains(word), "{e} should mention {word}");
        assert!(GameState::new(&r, 0).is_err());
    };
    bad(|r| r.n_colors = 0, "n_colors");
    bad(|r| r.n_ranks = -1, "n_ranks");
    bad(|r| r.min_rank = 0, "min_rank");
    bad(|r| r.hand_size = 0, "hand_size");
    bad(|r| r.bonus_threshold = 0, "bonus_threshold");
    bad(|r| r.n_handshakes = -1, "n_handshakes");
    bad(|r| r.n_colors = 9, "n_colors");
    bad(|r| r.hand_size = 17, "hand_size");
    bad(|r| r.n_ranks = 14, "n_ranks + n_handshakes");
    bad(|r| r.hand_size = 31, "hand_size");
    bad(
        |r| {
            r.n_colors = 1;
            r.hand_size = 7
        },
        "deck_size",
    );
    Rules::classic().validate().unwrap();
    Rules::canonical_small().validate().unwrap();
    Rules::small().validate().unwrap();
}

#[test]
fn nth_set_bit_matches_naive_select() {
    let naive = |mut m: u64, k: u32| {
        for _ in 0..k {
            m &= m.wrapping_sub(1);
        }
        (m != 0).then(|| m.trailing_zeros() as usize)
    };
    for m in select_test_masks() {
        for k in 0..=64 {
            assert_eq!(nth_set_bit(m, k), naive(m, k), "mask {m:#x} k {k}");
        }
    }
}

/// Masks for the select tests: edge cases plus random ones of varied density.
fn select_test_masks() -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut masks = vec![0, 1, u64::MAX, 1 << 63, 0x8000_0000_0000_0001, 0xff00];
    for _ in 0..2000 {
        let density = rng.random_range(0..4);
        let mut m = rng.random::<u64>();
        for _ in 0..density {
            m &= rng.random::<u64>();
        }
        masks.push(m);
    }
    masks
}

/// `random_set_bit` (dispatched) and `random_set_bit_portable` draw and pick
/// exactly like `nth_set_bit(mask, rng.random_range(0..popcount))`, so seeded
/// runs reproduce whichever path the CPU gets.
#[test]
fn random_set_bit_draws_like_nth_set_bit() {
    type Pick = fn(u64, &mut ChaCha8Rng) -> Option<usize>;
    let picks: [(&str, Pick); 2] = [
        ("dispatched", random_set_bit::<ChaCha8Rng>),
        ("portable", random_set_bit_portable::<ChaCha8Rng>),
    ];
    for (name, pick) in picks {
        let mut a = ChaCha8Rng::seed_from_u64(11);
        let mut b = a.clone();
        for m in select_test_masks() {
            for _ in 0..4 {
                let want = match m.count_ones() {
                    0 => None,
                    n => nth_set_bit(m, b.random_range(0..n)),
                };
                assert_eq!(pick(m, &mut a), want, "{name}: mask {m:#x}");
            }
        }
        assert_eq!(
            a.random::<u64>(),
            b.random::<u64>(),
            "{name}: RNG streams diverged"
        );
    }
}

/// The BMI2 `pdep` select against the portable one, whenever this CPU has
/// the features (even where dispatch skips it for a slow `pdep`).
#[cfg(target_arch = "x86_64")]
#[test]
fn bmi2_select_matches_portable() {
    if !(is_x86_feature_detected!("bmi1")
        && is_x86_feature_detected!("bmi2")
        && is_x86_feature_detected!("popcnt")
        && is_x86_feature_detected!("lzcnt"))
    {
        eprintln!("skipped: this CPU lacks BMI1/BMI2/POPCNT/LZCNT");
        return;
    }
    let mut a = ChaCha8Rng::seed_from_u64(12);
    let mut b = a.clone();
    for m in select_test_masks() {
        for k in 0..m.count_ones() {
            // SAFETY: the features were detected above.
            let got = unsafe { bits::x86::select_bmi2(m, k) };
            assert_eq!(Some(got), nth_set_bit(m, k), "mask {m:#x} k {k}");
        }
        // SAFETY: the features were detected above.
        let got = unsafe { random_set_bit_bmi2(m, &mut a) };
        assert_eq!(got, random_set_bit_portable(m, &mut b), "mask {m:#x}");
    }
    assert_eq!(a.random::<u64>(), b.random::<u64>());
}

#[test]
fn mask_helpers() {
    assert_eq!(mask_iter(0b1010_0110).collect::<Vec<_>>(), vec![1, 2, 5, 7]);
    assert_eq!(nth_set_bit(0b1010_0110, 2), Some(5));
    assert_eq!(nth_set_bit(0b1010_0110, 4), None);
    let mut b = [true; 4];
    mask_to_bools(0b0101, &mut b);
    assert_eq!(b, [true, false, true, false]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random games keep every invariant and every apply is undone exactly.
    #[test]
    fn random_games_keep_invariants(seed in any::<u64>(), small in any::<bool>()) {
        let rules = if small { Rules::small() } else { Rules::classic() };
        let mut s = GameState::new(&rules, seed).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed.rotate_left(17));
        let mut steps = 0;
        while !s.is_terminal() && steps < 2000 {
            prop_assert!(s.validate_invariants().is_ok(), "{:?}", s.validate_invariants());
            let a = random_action(&s, &mut rng);
            let before = s.clone();
            let u = s.apply(a).unwrap();
            let after = s.clone();
            s.undo(&u);
            prop_assert_eq!(&s, &before);
            s = after;
            steps += 1;
        }
        prop_assert!(s.validate_invariants().is_ok());
        if s.is_terminal() {
            prop_assert_eq!(s.legal_mask(), 0);
            prop_assert_eq!(s.deck_len(), 0);
            prop_assert_eq!(s.phase(), Phase::Draw);
        }
    }
}
