//! `[sweep]` end to end: real `lcx run`s of small command arms whose speed
//! depends on the point (`$N`, `scripts/sweep-arm.sh`), then the report's
//! crossover, pivot, plots, gates, history and site.
//!
//! `--check` passes `--allow-contended`, as in `report.rs`: these tests are
//! about the sweep's judgement, and the tests beside them make cells busy.

use std::path::Path;
use std::process::{Command, Output};

/// The arm: `my/seconds` 1 (1 % noise), `FACTOR` times faster from point
/// `FROM` on.
const ARM: &str = include_str!("../../scripts/sweep-arm.sh");

fn experiment(factor: f64, gate: &str) -> String {
    format!(
        r#"name = "planted"
workload = "command"
iterations = 6
warmup = 1
repeats = 3
baseline = "base"
host_lock = false

[[arms]]
name = "base"
command = ["sh", "arm.sh"]

[[arms]]
name = "fast"
command = ["sh", "arm.sh"]
env = {{ FROM = "4", FACTOR = "{factor}" }}

[sweep]
"env.N" = [1, 2, 4, 8]

[gate]
metric = "my/seconds"
arm = "fast"
{gate}
"#
    )
}

fn lcx(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lcx"))
        .env("LCX_DB", dir.join("lcx.db"))
        .env("LCX_HOST_LOCK", crate::support::own_host_lock())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

/// Runs the experiment in a fresh folder; the folder, and `--check`'s
/// exit code.
fn run(factor: f64, gate: &str) -> (tempfile::TempDir, i32) {
    let dir = tempfile::tempdir().unwrap();
    crate::support::write(dir.path(), "arm.sh", ARM);
    crate::support::write(dir.path(), "sweep.toml", &experiment(factor, gate));
    let out = lcx(dir.path(), &["run", "--plain", "sweep.toml"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let check = lcx(dir.path(), &["report", "--check", "--allow-contended"]);
    (dir, check.status.code().unwrap())
}

fn json(dir: &Path) -> serde_json::Value {
    let out = lcx(dir, &["report", "--format", "json"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_planted_crossover_is_found_gated_and_plotted() {
    let (dir, check) = run(1.3, "crossover_at_most = 4");
    let report = json(dir.path());
    assert_eq!(report["sweep"]["crossover"]["fast"], serde_json::json!(4));
    assert_eq!(report["gate"]["decision"], "pass");
    assert_eq!(check, 0);
    // Each point's arm against the baseline at that point, never another.
    let arms = report["arms"].as_array().unwrap();
    let fast4 = arms.iter().find(|a| a["name"] == "fast-n-4").unwrap();
    assert_eq!(fast4["compared_with"], "base-n-4");
    // The CSV says it too, in its last column.
    let csv = String::from_utf8(lcx(dir.path(), &["report", "--format", "csv"]).stdout).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",verdict,compared_with"),
        "{csv}"
    );
    let row = csv.lines().find(|l| l.contains(",fast-n-4,")).unwrap();
    assert!(row.ends_with(",base-n-4"), "{row}");
    let md = String::from_utf8(lcx(dir.path(), &["report"]).stdout).unwrap();
    assert!(md.contains("## Sweep along `env.N`"), "{md}");
    assert!(md.contains("`fast` pays from n 4: 1.3"), "{md}");
    assert!(md.contains("not at 2: "), "{md}");
    assert!(
        md.contains("| n | base my/seconds | fast my/seconds | fast vs base "),
        "{md}"
    );
    assert!(md.contains("| 4 | "), "{md}");
    let archive = lcx(dir.path(), &["report", "--archive", "--archive-dir", "out"]);
    assert!(archive.status.success());
    let names: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for suffix in ["my-seconds-speedup-by-n.svg", "my-seconds-by-n.svg"] {
        assert!(names.iter().any(|n| n.ends_with(suffix)), "{names:?}");
    }
    // Issue 78, point 3: the archived page shows the plots right after the
    // sweep's section, above the verdicts and the cells; the speedup plot
    // marks where `fast` starts to pay, on log axes.
    let page = names.iter().find(|n| n.ends_with(".md")).unwrap();
    let page = std::fs::read_to_string(dir.path().join("out").join(page)).unwrap();
    let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("no {s}: {page}"));
    assert!(at("## Sweep along") < at("## Plots"), "{page}");
    assert!(
        at("## Plots") < at("## Verdicts") && at("## Plots") < at("## Cells"),
        "{page}"
    );
    let speedup = names
        .iter()
        .find(|n| n.ends_with("my-seconds-speedup-by-n.svg"))
        .unwrap();
    let svg = std::fs::read_to_string(dir.path().join("out").join(speedup)).unwrap();
    for text in [
        "crossover: fast pays from n 4",
        "speedup (×) (log scale)",
        "n (log scale)",
    ] {
        assert!(svg.contains(text), "{text}: {svg}");
    }
}

#[test]
fn the_gate_fails_below_the_crossover_and_inconcludes_on_its_edge() {
    // Below 4 the arm is as fast as the baseline: shown short of 1.05×.
    let (dir, check) = run(1.3, "crossover_at_most = 2");
    assert_eq!(json(dir.path())["gate"]["decision"], "fail");
    assert_eq!(check, 1);
    // No margin at points where the arms are equal: the interval holds 1×.
    let (dir, check) = run(1.3, "min_speedup = 1.0\nat = [1, 2]");
    let report = json(dir.path());
    assert_eq!(report["gate"]["decision"], "inconclusive");
    let judged: Vec<&str> = report["gate"]["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["arm"].as_str().unwrap())
        .collect();
    assert_eq!(judged, ["fast-n-1", "fast-n-2"]);
    assert_eq!(check, 3);
}

#[test]
fn a_flat_sweep_has_no_crossover() {
    let (dir, _) = run(1.0, "crossover_at_most = 8");
    let report = json(dir.path());
    assert_eq!(
        report["sweep"]["crossover"]["fast"],
        serde_json::Value::Null
    );
    let md = String::from_utf8(lcx(dir.path(), &["report"]).stdout).unwrap();
    assert!(md.contains("`fast`: no crossover in the range"), "{md}");
    let dry = lcx(dir.path(), &["run", "--dry-run", "sweep.toml"]);
    let dry = String::from_utf8(dry.stdout).unwrap();
    assert!(dry.contains("sweep along `env.N`: 4 points"), "{dry}");
    assert!(dry.contains("fast-n-8 [fast at n 8] #1"), "{dry}");
    // A bisection probes one setting: a sweep is refused, by name.
    let bisect = lcx(
        dir.path(),
        &["bisect", "sweep.toml", "--good", "HEAD~1", "--bad", "HEAD"],
    );
    assert_eq!(bisect.status.code(), Some(2));
    let why = String::from_utf8_lossy(&bisect.stderr);
    assert!(why.contains("sweep.toml has a [sweep]"), "{why}");
}

#[test]
fn history_follows_the_crossover_and_the_site_shows_the_sweep() {
    let (dir, _) = run(1.3, "crossover_at_most = 4");
    // A second experiment of the name, in which the arm pays everywhere.
    let faster = experiment(1.3, "crossover_at_most = 4").replace("FROM = \"4\"", "FROM = \"1\"");
    crate::support::write(dir.path(), "sweep.toml", &faster);
    assert!(lcx(dir.path(), &["run", "--plain", "sweep.toml"])
        .status
        .success());
    let history = lcx(dir.path(), &["history", "planted"]);
    let history = String::from_utf8(history.stdout).unwrap();
    assert!(history.contains("Crossover per experiment"), "{history}");
    let (_, table) = history.split_once("Crossover per experiment").unwrap();
    let rows: Vec<&str> = table.lines().filter(|l| l.contains("| #")).collect();
    assert!(
        rows[0].contains("#2") && rows[0].contains("| 1 (1.3"),
        "newest first: {table}"
    );
    assert!(
        rows[1].contains("#1") && rows[1].contains("| 4 (1.3"),
        "{table}"
    );
    let site = dir.path().join("site");
    assert!(lcx(dir.path(), &["publish", site.to_str().unwrap()])
        .status
        .success());
    let page = std::fs::read_to_string(site.join("e/2.html")).unwrap();
    assert!(page.contains("Sweep along"), "{page}");
    assert!(page.contains("my-seconds-speedup-by-n.svg"), "{page}");
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(index.contains("fast pays from 1"), "{index}");
    assert!(index.contains("fast pays from 4"), "{index}");
}
