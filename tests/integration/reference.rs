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

#[test]
fn reference_metrics_become_lcx_metric_lines() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-metrics.jsonl");
    let out = convert(&fixture);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
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
            }),
            // The blank line is skipped; no traversal time is no rate
            // rather than a division by zero.
            serde_json::json!({
                "iteration": 2,
                "time/iteration_seconds": 10.0,
                "time/traversal_seconds": 0.0,
                "time/training_seconds": 9.5,
                "traversal/nodes": 0,
                "traversal/nodes_per_second": 0.0,
            }),
        ]
    );
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
