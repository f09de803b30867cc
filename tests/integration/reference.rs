//! `scripts/reference-trainer.sh --convert`: the reference trainer's
//! metrics, as the lines an experiment's `command` arm stores. (Running
//! the reference itself needs its checkout and a network; the conversion
//! is what decides the figures.)

use std::path::Path;
use std::process::{Command, Output};

fn convert(file: &Path) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    Command::new("bash")
        .arg(root.join("scripts/reference-trainer.sh"))
        .arg("--convert")
        .arg(file)
        .output()
        .unwrap()
}

fn converted_fixture() -> Vec<serde_json::Value> {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-metrics.jsonl");
    let out = convert(&fixture);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn reference_metrics_become_lcx_metric_lines() {
    assert_eq!(
        converted_fixture(),
        [
            serde_json::json!({
                "iteration": 1,
                "time/iteration_seconds": 12.5,
                "time/traversal_seconds": 4.0,
                // Advantage and strategy training, which the reference
                // runs one after the other.
                "time/training_seconds": 8.25,
                "traversal/nodes": 50000,
                // Over the traversal (lcx's definition), not the
                // reference's own time/nodes_per_second (over the
                // iteration).
                "traversal/nodes_per_second": 12500.0,
                "loss/advantage": 701.5,
                // The reference's strategy loss is its last step's.
                "loss/strategy_last": 1.25,
                "samples/advantage": 24000.0,
                "samples/strategy": 12000.0,
            }),
            // The blank line is skipped; no traversal time is no rate
            // rather than a division by zero. An evaluating iteration
            // carries its results under lcx's keys (games_per_second is
            // lcx's throughput); diagnostics lcx has no name for
            // (policy_entropy, runtime counters) are left out.
            serde_json::json!({
                "iteration": 2,
                "time/iteration_seconds": 10.0,
                "time/traversal_seconds": 0.0,
                "time/training_seconds": 9.5,
                "traversal/nodes": 0,
                "traversal/nodes_per_second": 0.0,
                "loss/advantage": 820.0,
                "loss/strategy_last": 1.5,
                "samples/advantage": 48000.0,
                "samples/strategy": 24000.0,
                "time/evaluation_seconds": 2.5,
                "eval/random/games": 400.0,
                "eval/random/wins0": 290.0,
                "eval/random/wins1": 106.0,
                "eval/random/draws": 4.0,
                "eval/random/win_rate0": 0.725,
                "eval/random/win_rate1": 0.265,
                "eval/random/avg_score0": 10.5,
                "eval/random/avg_score1": -10.75,
                "eval/random/avg_score_diff0": 21.25,
                "eval/random/avg_game_length": 401.5,
                "eval/random/max_step_timeouts": 0.0,
                "eval/random/throughput": 160.0,
                "eval/heuristic_balanced/games": 400.0,
                "eval/heuristic_balanced/win_rate0": 0.0125,
                "eval/heuristic_balanced/avg_score_diff0": -70.25,
            }),
        ]
    );
}

/// Both arms of a learning experiment carry one set of names: every key
/// the conversion prints is one that `lcx train` prints for the same
/// evaluation (so a column or guard finds it in both arms).
#[test]
fn converted_keys_are_keys_lcx_train_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lcx"))
        .args(["train", "--config"])
        .arg(root.join("configs/smoke.toml"))
        .args([
            "--metrics-out",
            "-",
            "--set",
            "evaluation.eval_every=1",
            "--set",
            r#"evaluation.opponents=["random","heuristic_balanced"]"#,
            "--set",
            "evaluation.max_steps=200",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let ours: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let ours = ours.as_object().unwrap();
    let theirs = converted_fixture();
    let evaluated = theirs[1].as_object().unwrap();
    let missing: Vec<&String> = evaluated
        .keys()
        .filter(|k| !ours.contains_key(*k))
        .collect();
    assert!(missing.is_empty(), "lcx train does not print {missing:?}");
}

#[test]
fn a_line_that_is_not_reference_metrics_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics.jsonl");
    std::fs::write(
        &file,
        "{\"iteration\": 1, \"time/iteration_seconds\": 1.0}\n",
    )
    .unwrap();
    let out = convert(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("metrics.jsonl line 1") && stderr.contains("traversal/nodes"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    let missing = convert(&dir.path().join("absent.jsonl"));
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read"));
}

/// A training run prints each iteration as the reference writes it, not
/// all of them when it ends: `--follow` (what a training run uses) with a
/// stand-in trainer that writes its second line only once the test has
/// read the first. A trainer that fails fails the script.
#[test]
fn followed_lines_arrive_while_the_trainer_runs() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let line = |i: u32| {
        format!(
            r#"{{"iteration": {i}, "time/iteration_seconds": 1.5, "time/traversal_seconds": 1.0, "time/advantage_train_seconds": 0.25, "time/strategy_train_seconds": 0.25, "traversal/nodes": 10, "samples/advantage": 1, "samples/strategy": 1, "loss/advantage": 2, "loss/strategy": 3}}"#
        )
    };
    // Its chatter goes to stderr; the second line has no newline.
    let trainer = format!(
        "mkdir -p runs/tmp/x && echo training && printf '%s\\n' '{}' >> runs/tmp/x/metrics.jsonl \
         && while [ ! -e '{}' ]; do sleep 0.05; done && printf '%s' '{}' >> runs/tmp/x/metrics.jsonl \
         && exit \"$0\"",
        line(1),
        go.display(),
        line(2)
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spawn = |code: &str| {
        Command::new("bash")
            .arg(root.join("scripts/reference-trainer.sh"))
            .args(["--follow", "sh", "-c", &trainer, code])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut child = spawn("0");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["iteration"], 1);
    assert_eq!(v["time/training_seconds"], 0.5);
    // Only now may the trainer write its second line.
    std::fs::write(&go, "").unwrap();
    let rest: Vec<String> = stdout.lines().map(Result::unwrap).collect();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert!(rest[0].starts_with(r#"{"iteration": 2,"#), "{rest:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("training"));

    let failed = spawn("3").wait_with_output().unwrap();
    assert_eq!(failed.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("failed with exit code 3"),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
}
