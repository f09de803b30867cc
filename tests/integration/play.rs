//! `lcx play`: JSON summary consistency, unknown-bot errors, step cap.

use std::process::{Command, Output};

fn lcx_play(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lcx"))
        .arg("play")
        .args(args)
        .output()
        .expect("failed to spawn lcx")
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "lcx play failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn u(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an unsigned integer in {v}"))
}

fn pair_f64(v: &serde_json::Value, key: &str) -> [f64; 2] {
    let arr = v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not an array in {v}"));
    assert_eq!(arr.len(), 2, "{key} must have 2 entries");
    [0, 1].map(|i| {
        arr[i]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}[{i}] not a number"))
    })
}

#[test]
fn json_summary_is_internally_consistent() {
    let out = lcx_play(&[
        "--p0",
        "heuristic_balanced",
        "--p1",
        "random",
        "--games",
        "6",
        "--seed",
        "11",
        "--format",
        "json",
    ]);
    let v = json_of(&out);
    let games = u(&v, "games");
    assert_eq!(games, 6);
    let wins = pair_f64(&v, "wins");
    let draws = u(&v, "draws");
    assert_eq!(wins[0] as u64 + wins[1] as u64 + draws, games, "{v}");
    let mean = pair_f64(&v, "mean_score");
    let diff = v["mean_score_diff"].as_f64().expect("mean_score_diff");
    assert!((mean[0] - mean[1] - diff).abs() < 1e-9, "{v}");
    // A real game takes well over 100 actions (44 deck draws, each with a card action).
    let length = v["mean_length"].as_f64().expect("mean_length");
    assert!(length >= 88.0, "{v}");
    assert!(v["games_per_second"].as_f64().expect("games_per_second") > 0.0);
    assert_eq!(u(&v, "truncated"), 0, "{v}");

    // Same flags, same numbers (timing aside).
    let again = json_of(&lcx_play(&[
        "--p0",
        "heuristic-balanced",
        "--p1",
        "random",
        "--games",
        "6",
        "--seed",
        "11",
        "--format",
        "json",
    ]));
    for key in ["wins", "draws", "mean_score", "mean_length", "truncated"] {
        assert_eq!(v[key], again[key], "{key} differs between identical runs");
    }
}

#[test]
fn unknown_bot_exits_2_and_lists_valid_names() {
    let out = lcx_play(&["--p0", "alphazero", "--p1", "random", "--games", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("alphazero"), "{stderr}");
    assert!(stderr.contains("--p0"), "{stderr}");
    for name in [
        "random",
        "discard-only",
        "heuristic-balanced",
        "heuristic-aggressive",
        "heuristic-cautious",
        "heuristic-noisy",
    ] {
        assert!(stderr.contains(name), "{name} missing from: {stderr}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn step_cap_truncates_instead_of_hanging() {
    // A classic game needs at least 88 actions, so a cap of 40 truncates
    // every game whatever the bots do.
    let v = json_of(&lcx_play(&[
        "--p0",
        "heuristic-balanced",
        "--p1",
        "discard-only",
        "--games",
        "4",
        "--max-steps",
        "40",
        "--format",
        "json",
    ]));
    assert_eq!(u(&v, "truncated"), 4, "{v}");
    assert_eq!(v["mean_length"].as_f64(), Some(40.0), "{v}");

    // Two deterministic heuristics really do trade discards in a loop on
    // about one deal in five (measured: 41 of 200 at a 3,000-step cap); over
    // 24 deals some game must hit a 500-step cap, and the run still ends.
    let v = json_of(&lcx_play(&[
        "--p0",
        "heuristic-balanced",
        "--p1",
        "heuristic-balanced",
        "--games",
        "24",
        "--seed",
        "1",
        "--max-steps",
        "500",
        "--format",
        "json",
    ]));
    let truncated = u(&v, "truncated");
    assert!((1..24).contains(&truncated), "{v}");
    assert!(
        v["mean_length"].as_f64().expect("mean_length") < 500.0,
        "{v}"
    );
}

#[test]
fn table_output_names_both_bots() {
    let out = lcx_play(&["--p0", "discard_only", "--p1", "random", "--games", "2"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("discard-only"), "{stdout}");
    assert!(stdout.contains("random"), "{stdout}");
    assert!(stdout.contains("truncated"), "{stdout}");
}

// ---------------------------------------------------------------------------
// Heuristic parity with the reference bots (informative; see README of the
// fixtures: games 150+ were played by the reference's heuristic bots).

mod reference_parity {
    use std::path::PathBuf;

    use lcx_core::bots::{HeuristicBot, HeuristicParams};
    use lcx_core::game::{Card, GameState, Rules};
    use serde_json::Value;

    fn golden_games_path() -> PathBuf {
        match std::env::var_os("LCX_GOLDEN_GAMES") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden_games.jsonl")
            }
        }
    }

    fn card(v: &Value) -> Card {
        let pair = v.as_array().expect("card is [color, rank]");
        let n = |i: usize| pair[i].as_u64().expect("card field") as u8;
        Card::new(n(0), n(1))
    }

    /// The deterministic reference bot behind a recorded policy name, if any.
    fn params_for(policy: &str) -> Option<HeuristicParams> {
        match policy {
            "heuristic-balanced" => Some(HeuristicParams::balanced()),
            "heuristic-aggressive" => Some(HeuristicParams::aggressive()),
            "heuristic-cautious" => Some(HeuristicParams::cautious()),
            _ => None,
        }
    }

    /// Replays every recorded bot game and counts how often our heuristic
    /// picks the recorded move, for the deterministic presets (and, apart,
    /// for the noisy bot, whose random 15 % cannot match by design).
    #[test]
    fn heuristic_agrees_with_recorded_reference_moves() {
        let path = golden_games_path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let (mut same, mut total) = (0usize, 0usize);
        let (mut noisy_same, mut noisy_total) = (0usize, 0usize);
        let mut mismatches = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let g: Value = serde_json::from_str(line).expect("json line");
            if g["kind"] != "game" {
                continue;
            }
            let policies: Vec<String> =
                serde_json::from_value(g["policies"].clone()).expect("policies");
            if !policies.iter().any(|p| p.starts_with("heuristic")) {
                continue;
            }
            let deck: Vec<Card> = g["deck"]
                .as_array()
                .expect("deck")
                .iter()
                .map(card)
                .collect();
            let mut state = GameState::from_deck(&Rules::classic(), &deck).expect("deck");
            for (k, step) in g["steps"].as_array().expect("steps").iter().enumerate() {
                let action = step["action"].as_u64().expect("action") as usize;
                let policy = policies[state.current_player()].as_str();
                let bot = |p: HeuristicParams| HeuristicBot::new(p).choose(&state);
                if let Some(params) = params_for(policy) {
                    total += 1;
                    if bot(params) == Some(action) {
                        same += 1;
                    } else if mismatches.len() < 10 {
                        mismatches.push(format!(
                            "game {} step {k} ({policy}): recorded {action}, ours {:?}",
                            g["game_id"],
                            bot(params)
                        ));
                    }
                } else if policy == "heuristic-noisy" {
                    noisy_total += 1;
                    noisy_same += usize::from(bot(HeuristicParams::balanced()) == Some(action));
                }
                state.apply(action).expect("recorded move is legal");
            }
        }
        let rate = same as f64 / total.max(1) as f64;
        eprintln!(
            "heuristic parity: {same}/{total} = {:.2} % deterministic-bot moves; noisy {noisy_same}/{noisy_total}",
            100.0 * rate
        );
        assert!(total > 0, "no heuristic games in {}", path.display());
        // Parity is not a requirement, but on the shipped recording every
        // deterministic move matches (716/716); a drop means the heuristic
        // changed, which should be deliberate. 99 % leaves room for larger
        // recordings (LCX_GOLDEN_GAMES) with rare floating-point near-ties.
        assert!(
            rate >= 0.99,
            "parity {rate:.4}; first mismatches:\n{}",
            mismatches.join("\n")
        );
    }
}
