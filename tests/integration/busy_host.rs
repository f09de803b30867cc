//! Answers on a busy host (decision 0030): a gate on cachegrind's counts
//! (`timing = "instructions"`) decides beside a CPU burner, where a gate on
//! time stays INCONCLUSIVE; randomized rounds run in the order their seed
//! draws, and are judged as pairs.

use std::path::Path;

use lcx_core::store::Store;

use crate::support::{burner, lcx, report_text, write};

/// An experiment of two `awk` loops counted under cachegrind, the second
/// running `b_loops` iterations to the first's 100 000.
fn counted(dir: &Path, b_loops: u32) -> std::path::PathBuf {
    write(
        dir,
        "ic.toml",
        &format!(
            "name = \"ic\"\nworkload = \"command\"\ntiming = \"instructions\"\niterations = 2\n\
             warmup = 0\nrepeats = 2\norder = \"randomized\"\n\
             [[arms]]\nname = \"a\"\ncommand = [\"awk\", \"BEGIN{{for(i=0;i<100000;i++)s+=i}}\"]\n\
             [[arms]]\nname = \"b\"\ncommand = [\"awk\", \"BEGIN{{for(i=0;i<{b_loops};i++)s+=i}}\"]\n\
             [gate]\nmetric = \"process/instructions\"\nmax_slowdown = 0.005\n"
        ),
    )
}

fn has_valgrind() -> bool {
    lcx_core::bench::cachegrind::find_valgrind(std::env::var_os("PATH").as_deref()).is_some()
}

/// Beside a process spinning on a core the whole time, every cell is
/// contended; the counts are not moved by it, so the gate on them
/// decides: A/A passes (exit 0), 1 % more loop iterations fails (exit 1),
/// never INCONCLUSIVE (3). The report still lists the contended cells.
#[test]
fn a_gate_on_instruction_counts_decides_beside_a_burner() {
    if !has_valgrind() {
        eprintln!("valgrind is not installed: skipped");
        return;
    }
    let mut burn = burner();
    let mut verdicts = Vec::new();
    for (loops, expected) in [(100_000, 0), (101_000, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let file = counted(dir.path(), loops);
        let db = dir.path().join("lcx.db");
        let out = lcx()
            .args([
                "run",
                file.to_str().unwrap(),
                "--db",
                db.to_str().unwrap(),
                "--plain",
            ])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{err}");
        let check = lcx()
            .args(["report", "--check", "--db", db.to_str().unwrap()])
            .output()
            .unwrap();
        let text = report_text(&db);
        verdicts.push((check.status.code(), expected, text));
    }
    burn.kill().unwrap();
    burn.wait().unwrap();
    for (code, expected, text) in verdicts {
        assert_eq!(code, Some(expected), "{text}");
        assert!(text.contains("contended**"), "{text}");
        assert!(
            text.contains("is a count that load cannot move, so it was judged on them"),
            "{text}"
        );
    }
}

/// With no valgrind on PATH, an instructions arm is refused before
/// anything is written: exit 2, the key, and how to install it.
#[test]
fn instructions_without_valgrind_is_exit_2_with_how_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let file = counted(dir.path(), 100_000);
    let db = dir.path().join("lcx.db");
    let empty = dir.path().join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    for args in [vec!["run", "--dry-run"], vec!["run"]] {
        let out = lcx()
            .args(&args)
            .args([file.to_str().unwrap(), "--db", db.to_str().unwrap()])
            .env("PATH", &empty)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("timing") && err.contains("apt-get install valgrind"),
            "{err}"
        );
        assert!(!db.exists(), "{args:?} wrote {}", db.display());
    }
    // The timer itself says so too (a resumed plan reaches it).
    let out = lcx()
        .args([
            "time-process",
            "--iterations",
            "1",
            "--instructions",
            "--",
            "true",
        ])
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("valgrind"));
}

/// `order = "randomized"`: the cells run round by round, each round's arms
/// in the order drawn from the stored seed, and the report judges the
/// arms on the rounds as pairs (no load counts as contention here, so the
/// suite's other tests leave every round even).
#[test]
fn randomized_rounds_run_in_the_seeds_order_and_are_judged_as_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let arm = |name: &str, t: f64| {
        format!(
            "[[arms]]\nname = \"{name}\"\ncommand = 'for i in 1 2; do echo \"{{\\\"iteration\\\":$i,\\\"t\\\":{t}$i}}\"; done'\n"
        )
    };
    let file = write(
        dir.path(),
        "r.toml",
        &format!(
            "name = \"r\"\nworkload = \"command\"\niterations = 2\nwarmup = 0\nrepeats = 5\n\
             order = \"randomized\"\norder_seed = 11\nhost_lock = false\n\
             [measurement]\nmax_foreign_cpu = 64\n{}{}{}",
            arm("a", 1.0),
            arm("b", 2.0),
            arm("c", 3.0)
        ),
    );
    let db = dir.path().join("lcx.db");
    let out = lcx()
        .args([
            "run",
            file.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--plain",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open_read_only(&db).unwrap();
    let mut runs = store.runs(1).unwrap();
    runs.sort_by(|x, y| x.started_at.cmp(&y.started_at).then(x.id.cmp(&y.id)));
    let ran: Vec<(usize, i64)> = runs
        .iter()
        .map(|r| (r.arm_index as usize, r.repeat))
        .collect();
    let expected: Vec<(usize, i64)> = (1..=5u32)
        .flat_map(|round| {
            lcx_core::experiment::plan::round_order(3, 11, round)
                .into_iter()
                .map(move |a| (a, i64::from(round)))
        })
        .collect();
    assert_eq!(ran, expected);
    let text = report_text(&db);
    assert!(text.contains("judged on the 5 rounds as pairs"), "{text}");
    let dry = lcx()
        .args(["run", "--dry-run", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&dry.stdout).contains("randomized (seed 11) order"),
        "{}",
        String::from_utf8_lossy(&dry.stdout)
    );
}
