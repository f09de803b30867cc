//! Engine and encoding parity with the reference implementation, checked
//! against the recorded fixtures in tests/fixtures/ (format: README.md there).
//! `LCX_GOLDEN_GAMES` / `LCX_GOLDEN_ENCODINGS` point the replays at larger
//! recordings in the same format.

use std::collections::HashMap;
use std::path::PathBuf;

use lcx_core::encoding::Encoding;
use lcx_core::game::{Card, GameState, Phase, Rules};
use serde::Deserialize;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn path_from_env(var: &str, default: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => fixture(default),
    }
}

/// The non-header records of a JSON Lines file.
fn records(path: &PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .filter(|v| v.get("kind").and_then(Value::as_str) != Some("header"))
        .collect()
}

type Pair = [u8; 2];

fn card(c: &Pair) -> Card {
    Card::new(c[0], c[1])
}

fn pairs(cards: &[Card]) -> Vec<Pair> {
    cards.iter().map(|c| [c.color(), c.rank()]).collect()
}

#[derive(Deserialize)]
struct GameRec {
    game_id: u64,
    deck: Vec<Pair>,
    initial_hands: Vec<Vec<Pair>>,
    steps: Vec<StepRec>,
    #[serde(rename = "final")]
    fin: FinalRec,
}

#[derive(Deserialize)]
struct StepRec {
    phase: String,
    player: usize,
    deck_len: usize,
    hand: Vec<Pair>,
    scores: [i32; 2],
    legal: Vec<usize>,
    action: usize,
}

#[derive(Deserialize)]
struct FinalRec {
    terminal: bool,
    turn_count: u32,
    num_steps: usize,
    last_player: usize,
    phase: String,
    expedition_scores: Vec<Vec<i32>>,
    total_scores: [i32; 2],
    expeditions: Vec<Vec<Vec<Pair>>>,
    discards: Vec<Vec<Pair>>,
    hands: Vec<Vec<Pair>>,
}

fn load_games() -> Vec<GameRec> {
    let path = path_from_env("LCX_GOLDEN_GAMES", "golden_games.jsonl");
    records(&path)
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

fn start(g: &GameRec) -> GameState {
    let deck: Vec<Card> = g.deck.iter().map(card).collect();
    GameState::from_deck(&Rules::classic(), &deck)
        .unwrap_or_else(|e| panic!("game {}: {e}", g.game_id))
}

#[test]
fn canonical_small_trace() {
    let text = std::fs::read_to_string(fixture("canonical_small.json")).expect("fixture");
    let v: Value = serde_json::from_str(&text).expect("json");
    let rules: Rules = serde_json::from_value(v["config"].clone()).expect("config");
    assert_eq!(rules, Rules::canonical_small());
    let deck: Vec<Card> = serde_json::from_value(v["initial_deck"].clone()).expect("deck");
    let mut s = GameState::from_deck(&rules, &deck).expect("state");
    assert_eq!(s.hand(0), &[Card::new(1, 2)]);
    assert_eq!(s.hand(1), &[Card::new(1, 1)]);
    assert_eq!(s.deck(), &[Card::new(0, 1), Card::new(0, 2)]);
    let steps = v["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 7);
    for (k, step) in steps.iter().enumerate() {
        if let Some(a) = step["action"].as_u64() {
            s.apply(a as usize)
                .unwrap_or_else(|e| panic!("step {k}: {e}"));
        }
        assert_eq!(
            s.phase().as_str(),
            step["phase"].as_str().unwrap(),
            "step {k}"
        );
        assert_eq!(
            s.current_player() as u64,
            step["current_player"].as_u64().unwrap(),
            "step {k}"
        );
        assert_eq!(
            s.turn_count() as u64,
            step["turn_count"].as_u64().unwrap(),
            "step {k}"
        );
        assert_eq!(
            s.is_terminal(),
            step["terminal"].as_bool().unwrap(),
            "step {k}"
        );
        assert_eq!(
            s.score_diff(0) as i64,
            step["score_diff_player0"].as_i64().unwrap(),
            "step {k}"
        );
        let want: Vec<bool> = serde_json::from_value(step["legal_mask"].clone()).unwrap();
        let mut got = vec![false; rules.action_size()];
        s.legal_bools(&mut got);
        assert_eq!(got, want, "mask at step {k}");
        s.validate_invariants()
            .unwrap_or_else(|e| panic!("step {k}: {e}"));
    }
}

#[test]
fn scoring_matches_reference() {
    let recs = records(&fixture("golden_scoring.jsonl"));
    assert!(recs.len() >= 100);
    let rules = Rules::classic();
    for r in &recs {
        let cards: Vec<Pair> = serde_json::from_value(r["cards"].clone()).unwrap();
        let cards: Vec<Card> = cards.iter().map(card).collect();
        let want = r["score"].as_i64().unwrap();
        assert_eq!(rules.score_cards(&cards) as i64, want, "record {}", r["id"]);
    }
}

#[test]
fn golden_games_replay() {
    let games = load_games();
    let draw = Rules::classic().draw_deck_action();
    for g in &games {
        let id = g.game_id;
        let mut s = start(g);
        assert_eq!(g.initial_hands.len(), 2);
        for p in 0..2 {
            assert_eq!(
                pairs(s.hand(p)),
                g.initial_hands[p],
                "game {id}: initial hand {p}"
            );
        }
        for (k, st) in g.steps.iter().enumerate() {
            let ctx = format!("game {id} step {k}");
            assert!(!s.is_terminal(), "{ctx}: terminal too early");
            assert_eq!(s.phase().as_str(), st.phase, "{ctx}: phase");
            assert_eq!(s.current_player(), st.player, "{ctx}: player");
            assert_eq!(s.deck_len(), st.deck_len, "{ctx}: deck_len");
            assert_eq!(pairs(s.hand(st.player)), st.hand, "{ctx}: hand");
            assert_eq!(
                [s.total_score(0), s.total_score(1)],
                st.scores,
                "{ctx}: scores"
            );
            let legal: Vec<usize> = s.legal_actions().collect();
            assert_eq!(legal, st.legal, "{ctx}: legal ids");
            // Draw-phase legality never includes card ids and vice versa.
            assert_eq!(
                s.phase() == Phase::Draw,
                st.action >= draw,
                "{ctx}: action phase"
            );
            s.apply(st.action).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        }
        let f = &g.fin;
        let ctx = format!("game {id} final");
        assert_eq!(f.num_steps, g.steps.len(), "{ctx}: num_steps");
        assert_eq!(s.is_terminal(), f.terminal, "{ctx}: terminal");
        assert_eq!(s.turn_count(), f.turn_count, "{ctx}: turn_count");
        assert_eq!(s.current_player(), f.last_player, "{ctx}: last_player");
        assert_eq!(s.phase().as_str(), f.phase, "{ctx}: phase");
        for p in 0..2 {
            assert_eq!(pairs(s.hand(p)), f.hands[p], "{ctx}: hand {p}");
            for c in 0..5 {
                assert_eq!(
                    pairs(s.expedition(p, c)),
                    f.expeditions[p][c],
                    "{ctx}: exp {p}/{c}"
                );
                assert_eq!(
                    s.expedition_score(p, c),
                    f.expedition_scores[p][c],
                    "{ctx}: score {p}/{c}"
                );
            }
        }
        for c in 0..5 {
            assert_eq!(pairs(s.discard_pile(c)), f.discards[c], "{ctx}: pile {c}");
        }
        assert_eq!(
            [s.total_score(0), s.total_score(1)],
            f.total_scores,
            "{ctx}: totals"
        );
        assert_eq!(s.legal_mask(), 0, "{ctx}: no legal action at the end");
        s.validate_invariants()
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    }
    println!("replayed {} games", games.len());
    assert!(!games.is_empty(), "no games in the golden file");
}

#[test]
fn golden_encodings_bitwise() {
    let path = path_from_env("LCX_GOLDEN_ENCODINGS", "golden_encodings.jsonl");
    let recs = records(&path);
    let games: HashMap<u64, GameRec> = load_games().into_iter().map(|g| (g.game_id, g)).collect();
    // (game, step) → records at that step, so each game is replayed once.
    let mut by_game: HashMap<u64, Vec<(usize, usize, Vec<f64>)>> = HashMap::new();
    for r in &recs {
        let gid = r["game_id"].as_u64().expect("game_id");
        let step = r["step"].as_u64().expect("step") as usize;
        let player = r["player"].as_u64().expect("player") as usize;
        let x: Vec<f64> = serde_json::from_value(r["x"].clone()).expect("x");
        by_game.entry(gid).or_default().push((step, player, x));
    }
    let enc = Encoding::FULL;
    let dim = enc.input_dim(&Rules::classic());
    assert_eq!(dim, 297);
    let mut buf = vec![0f32; dim];
    let mut checked = 0usize;
    let mut inexact = 0usize;
    let mut ids: Vec<u64> = by_game.keys().copied().collect();
    ids.sort_unstable();
    for gid in ids {
        let g = games.get(&gid).unwrap_or_else(|| {
            panic!("encoding record for game {gid}, absent from the games file")
        });
        let mut recs = by_game.remove(&gid).unwrap_or_default();
        recs.sort_by_key(|r| r.0);
        let mut s = start(g);
        let mut at = 0usize;
        for (step, player, x) in recs {
            assert!(
                step <= g.steps.len(),
                "game {gid}: step {step} beyond the game"
            );
            while at < step {
                s.apply(g.steps[at].action).expect("replay");
                at += 1;
            }
            assert_eq!(x.len(), dim, "game {gid} step {step}: record length");
            enc.encode(&s, player, &mut buf);
            for (i, (&got, &want)) in buf.iter().zip(&x).enumerate() {
                let want = want as f32;
                if got.to_bits() != want.to_bits() {
                    inexact += 1;
                    assert!(
                        (got - want).abs() <= 1e-6,
                        "game {gid} step {step} player {player} index {i}: got {got}, want {want}"
                    );
                }
            }
            checked += 1;
        }
    }
    println!("checked {checked} encodings ({inexact} values within 1e-6 but not bit-exact)");
    assert!(checked > 0, "no encodings in {}", path.display());
    assert_eq!(inexact, 0, "encodings are close but not bit-exact");
}
