//! `lcx config show`: the resolved config on stdout, bad input exits 2.

use std::path::PathBuf;
use std::process::{Command, Output};

fn lcx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lcx"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("lcx runs")
}

fn smoke() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("configs/smoke.toml")
        .display()
        .to_string()
}

#[test]
fn config_show_prints_the_resolved_config_with_sets_applied() {
    let out = lcx(&[
        "config",
        "show",
        "--config",
        &smoke(),
        "--set",
        "traversal.scheduler=interleaved",
        "--set",
        "optimization.learning_rate=2.5e-4",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("scheduler = \"interleaved\""), "{stdout}");
    assert!(stdout.contains("learning_rate = 0.00025"), "{stdout}");
    // File values and code defaults are both there.
    assert!(stdout.contains("hidden_size = 16"), "{stdout}");
    assert!(stdout.contains("interleave_refill = true"), "{stdout}");
    // What it prints is itself a valid config with the same values.
    let back = lcx_core::config::from_toml_str(&stdout, "stdout", &[]).expect("output reads back");
    let direct = lcx_core::config::load(
        Some(smoke().as_ref()),
        &[
            "traversal.scheduler=interleaved".into(),
            "optimization.learning_rate=2.5e-4".into(),
        ],
    )
    .expect("smoke loads");
    assert_eq!(back, direct);
}

#[test]
fn config_show_without_a_file_prints_the_code_defaults() {
    let out = lcx(&["config", "show"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("opponent_policy = \"average_strategy\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("experiment_name = \"deep_cfr\""),
        "{stdout}"
    );
}

#[test]
fn config_show_with_a_bad_key_exits_2_naming_it() {
    let out = lcx(&[
        "config",
        "show",
        "--config",
        &smoke(),
        "--set",
        "traversal.bogus_key=1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("traversal.bogus_key"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn config_show_with_a_bad_file_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[network]\nkind = \"color_shared\"\n").unwrap();
    let out = lcx(&["config", "show", "--config", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.toml"), "{stderr}");
    assert!(stderr.contains("network.kind"), "{stderr}");
    assert!(stderr.contains("not supported by lcx"), "{stderr}");
}
