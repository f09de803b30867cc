//! `lcx run` end to end: real child processes (small `sh` commands), real
//! SQLite files in a temp dir, real signals.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use lcx_core::experiment::fingerprint::TorchFacts;
use lcx_core::store::{ExperimentStatus, RunStatus, Store};

use crate::support::{burner, count, lcx, report_text, signal, wait_for_rows, write};

fn run_ok(args: &[&str]) -> Output {
    let out = lcx().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "lcx {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A shell loop printing `n` metric lines, `pause` seconds apart.
fn counting(n: u32, pause: &str) -> String {
    format!(
        r#"i=1; while [ $i -le {n} ]; do echo "{{\"iteration\":$i,\"time/iteration_seconds\":0.0$i,\"mode\":\"fp32\"}}"; sleep {pause}; i=$((i+1)); done"#
    )
}

fn experiment(name: &str, iterations: u32, arms: &[(&str, String)], extra: &str) -> String {
    let mut text = format!(
        "name = \"{name}\"\nworkload = \"command\"\niterations = {iterations}\nwarmup = 1\n{extra}\n"
    );
    for (arm, command) in arms {
        let quoted = toml::Value::String(command.clone()).to_string();
        text.push_str(&format!(
            "\n[[arms]]\nname = \"{arm}\"\ncommand = {quoted}\n"
        ));
    }
    text
}

#[test]
fn command_arms_run_interleaved_and_every_line_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let text = experiment(
        "two-arms",
        3,
        &[
            ("a", counting(3, "0")),
            // Non-JSON output is log, not an error; lines without
            // `iteration` are numbered by position.
            (
                "b",
                r#"echo hello; echo '{"t": 1}'; echo '{"t": 2, "nested": {"x": 5}}'; echo '{"t": 3}'"#
                    .to_string(),
            ),
        ],
        "repeats = 2",
    );
    let file = write(dir.path(), "e.toml", &text);
    let db = dir.path().join("x.db");
    let out = run_ok(&["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("completed"), "{stdout}");

    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("latest").unwrap();
    assert_eq!(e.status, ExperimentStatus::Completed);
    assert_eq!(e.file_text, text);
    assert_eq!(e.file_sha256.len(), 64);
    assert!(e.fingerprint.cpu_cores.unwrap_or(0) >= 1);
    let runs = store.runs(e.id).unwrap();
    assert_eq!(runs.len(), 4);
    for r in &runs {
        assert_eq!(r.status, RunStatus::Completed, "{r:?}");
        assert_eq!(r.exit_code, Some(0));
        assert_eq!(r.iterations_done, 3);
    }
    // Interleaved: a#1 b#1 a#2 b#2 by start time.
    let mut by_start: Vec<_> = runs.iter().collect();
    by_start.sort_by(|x, y| x.started_at.cmp(&y.started_at));
    let order: Vec<_> = by_start
        .iter()
        .map(|r| (r.arm.as_str(), r.repeat))
        .collect();
    assert_eq!(order, vec![("a", 1), ("b", 1), ("a", 2), ("b", 2)]);

    let a1 = runs.iter().find(|r| r.arm == "a").unwrap();
    assert_eq!(
        store
            .metric_series(a1.id, "time/iteration_seconds")
            .unwrap(),
        vec![(1, 0.01), (2, 0.02), (3, 0.03)]
    );
    assert_eq!(store.run_texts(a1.id).unwrap()[0].2, "fp32");
    let b1 = runs.iter().find(|r| r.arm == "b").unwrap();
    assert_eq!(
        store.metric_series(b1.id, "t").unwrap(),
        vec![(1, 1.0), (2, 2.0), (3, 3.0)]
    );
    assert_eq!(
        store.metric_series(b1.id, "nested/x").unwrap(),
        vec![(2, 5.0)]
    );
    assert!(b1.stderr_tail.as_deref().unwrap_or("").contains("hello"));
    // The views drop warm-up iteration 1: b has t = 2, 3 in each repeat.
    let b = store
        .arm_stats(e.id)
        .unwrap()
        .into_iter()
        .find(|s| s.arm == "b" && s.name == "t")
        .unwrap();
    assert_eq!((b.n, b.mean, b.min, b.max), (4, 2.5, 2.0, 3.0));
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_failing_cell_is_recorded_and_the_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let text = experiment(
        "failing",
        3,
        &[
            (
                "bad",
                r#"echo '{"iteration":1,"t":1}'; echo 'something broke' >&2; exit 3"#.to_string(),
            ),
            ("good", counting(3, "0")),
        ],
        "",
    );
    let file = write(dir.path(), "e.toml", &text);
    let db = dir.path().join("x.db");
    let out = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("FAILED") && stderr.contains("something broke"),
        "{stderr}"
    );

    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("failing").unwrap();
    assert_eq!(e.status, ExperimentStatus::Failed);
    let runs = store.runs(e.id).unwrap();
    let bad = &runs[0];
    assert_eq!(bad.status, RunStatus::Failed);
    assert_eq!(bad.exit_code, Some(3));
    assert!(
        bad.error.as_deref().unwrap().contains("exit code 3"),
        "{bad:?}"
    );
    assert!(bad
        .stderr_tail
        .as_deref()
        .unwrap()
        .contains("something broke"));
    // The line before the failure is kept.
    assert_eq!(store.metric_series(bad.id, "t").unwrap(), vec![(1, 1.0)]);
    assert_eq!(runs[1].status, RunStatus::Completed);

    // --fail-fast: the good arm never starts.
    let out = lcx()
        .args([
            "run",
            file.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--fail-fast",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = store.find_experiment("latest").unwrap();
    let runs = store.runs(e.id).unwrap();
    assert_eq!(runs[0].status, RunStatus::Failed);
    assert_eq!(runs[1].status, RunStatus::Pending);
}

#[test]
fn kill_9_then_resume_completes_every_cell_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let arms: Vec<(&str, String)> = vec![
        ("a", counting(6, "0.05")),
        ("b", counting(6, "0.05")),
        ("c", counting(6, "0.05")),
    ];
    let file = write(dir.path(), "e.toml", &experiment("crash", 6, &arms, ""));
    let db = dir.path().join("x.db");
    let mut child = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill in the middle of the second cell.
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 8);
    signal(child.id(), libc::SIGKILL);
    child.wait().unwrap();

    {
        let store = Store::open_read_only(&db).unwrap();
        let e = store.find_experiment("latest").unwrap();
        assert_eq!(
            e.status,
            ExperimentStatus::Abandoned,
            "the killed runner is gone"
        );
    }
    let out = run_ok(&["run", "--resume", "latest", "--db", db.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("resuming"), "{stderr}");

    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("crash").unwrap();
    assert_eq!(e.status, ExperimentStatus::Completed);
    assert_eq!(
        store.experiments(None).unwrap().len(),
        1,
        "resume adds no experiment"
    );
    for r in store.runs(e.id).unwrap() {
        assert_eq!(r.status, RunStatus::Completed, "{r:?}");
        let series = store.metric_series(r.id, "time/iteration_seconds").unwrap();
        let iterations: Vec<i64> = series.iter().map(|p| p.0).collect();
        assert_eq!(iterations, (1..=6).collect::<Vec<_>>(), "arm {}", r.arm);
    }
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM (SELECT run_id, name, iteration FROM metrics
             WHERE superseded = 0 GROUP BY 1, 2, 3 HAVING COUNT(*) > 1)"
        ),
        0
    );
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn sigint_marks_the_running_cell_interrupted_and_says_how_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let arms: Vec<(&str, String)> =
        vec![("slow", counting(20, "0.1")), ("next", counting(20, "0"))];
    let file = write(dir.path(), "e.toml", &experiment("sigint", 20, &arms, ""));
    let db = dir.path().join("x.db");
    let child = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 2);
    signal(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lcx run --resume"), "{stderr}");

    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("sigint").unwrap();
    assert_eq!(e.status, ExperimentStatus::Interrupted);
    let runs = store.runs(e.id).unwrap();
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert!(runs[0].iterations_done >= 2, "finished iterations are kept");
    assert_eq!(
        runs[1].status,
        RunStatus::Pending,
        "no new cell starts after Ctrl-C"
    );
    drop(store);
    // `lcx list` counts it interrupted, not failed.
    let list = lcx()
        .args(["list", "--format", "json", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        (&rows[0]["failed"], &rows[0]["interrupted"]),
        (&0.into(), &1.into()),
        "{rows}"
    );
    let table = lcx()
        .args(["list", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains("| Interrupted |"));
    let store = Store::open(&db).unwrap();
    let kept = store
        .metric_series(runs[0].id, "time/iteration_seconds")
        .unwrap()
        .len();
    assert!(kept >= 2);

    // Resuming reruns the interrupted cell from iteration 1: its old rows
    // stay, superseded.
    // The stored plan is what resumes; editing the file must not matter.
    let text = experiment("sigint", 3, &[("slow", counting(3, "0"))], "");
    write(dir.path(), "e.toml", &text);
    let resumed = lcx()
        .args([
            "run",
            "--resume",
            &e.id.to_string(),
            "--db",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let runs = store.runs(e.id).unwrap();
    assert_eq!(runs[0].status, RunStatus::Completed);
    assert_eq!(runs[0].iterations_done, 20);
    assert_eq!(runs[1].status, RunStatus::Completed);
    assert_eq!(runs[0].attempt, 2);
    assert_eq!(
        count(
            &store,
            &format!(
                "SELECT COUNT(*) FROM metrics WHERE run_id = {} AND superseded = 1",
                runs[0].id
            )
        ),
        kept as i64
    );
}

#[test]
fn two_runners_on_one_database_both_complete() {
    let dir = tempfile::tempdir().unwrap();
    let arms: Vec<(&str, String)> = vec![("a", counting(20, "0.01")), ("b", counting(20, "0.01"))];
    let file = write(dir.path(), "e.toml", &experiment("shared", 20, &arms, ""));
    let db = dir.path().join("x.db");
    let spawn = || {
        lcx()
            .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (spawn(), spawn());
    for child in [first, second] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let store = Store::open(&db).unwrap();
    let experiments = store.experiments(Some("shared")).unwrap();
    assert_eq!(experiments.len(), 2);
    for e in experiments {
        assert_eq!(e.status, ExperimentStatus::Completed);
        for r in store.runs(e.id).unwrap() {
            assert_eq!(r.iterations_done, 20);
        }
    }
    assert_eq!(count(&store, "SELECT COUNT(*) FROM metrics"), 2 * 2 * 20);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn malformed_experiments_exit_2_and_create_no_database() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/experiments");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "only {} malformed files", files.len());
    let dir = tempfile::tempdir().unwrap();
    // Each lcx start loads libtorch; run the corpus a few files at a time.
    for (batch, chunk) in files.chunks(8).enumerate() {
        let children: Vec<_> = chunk
            .iter()
            .enumerate()
            .map(|(i, file)| {
                let db = dir.path().join(format!("never-{batch}-{i}.db"));
                let child = lcx()
                    .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                (file, db, child)
            })
            .collect();
        for (file, db, child) in children {
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{}: {stderr}", file.display());
            let stem = file.file_name().unwrap().to_str().unwrap();
            assert!(
                stderr.starts_with("error:") && stderr.contains(stem),
                "{}: the error should name the file: {stderr}",
                file.display()
            );
            assert!(!db.exists(), "{}: created the database", file.display());
        }
    }
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn a_newer_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 999;")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("new", 2, &[("a", counting(2, "0"))], ""),
    );
    let out = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a file from a newer lcx is the user's input"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("newer") && stderr.contains("999"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn dry_run_prints_cells_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "e.toml",
        &experiment(
            "dry",
            2,
            &[("a", "true".into()), ("b", "true".into())],
            "repeats = 2",
        ),
    );
    let db = dir.path().join("x.db");
    let out = run_ok(&[
        "run",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--dry-run",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("cell ").count(), 4, "{stdout}");
    assert!(stdout.contains("b #2"), "{stdout}");
    assert!(!db.exists());
}

#[test]
fn cuda_arms_are_skipped_visibly_without_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = experiment("gpu", 2, &[("cpu", counting(2, "0"))], "");
    text.push_str(&format!(
        "\n[[arms]]\nname = \"gpu\"\nrequires = \"cuda\"\ncommand = {}\n",
        toml::Value::String(counting(2, "0"))
    ));
    let file = write(dir.path(), "e.toml", &text);
    let db = dir.path().join("x.db");
    let out = run_ok(&["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("gpu").unwrap();
    let gpu = store
        .runs(e.id)
        .unwrap()
        .into_iter()
        .find(|r| r.arm == "gpu")
        .unwrap();
    // An arm needing CUDA makes the runner ask lcx-torch what libtorch sees.
    let facts: TorchFacts = serde_json::from_slice(&run_ok(&["version", "--json"]).stdout).unwrap();
    assert_eq!(facts.lcx_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(e.fingerprint.cuda_available, Some(facts.cuda_available));
    assert_eq!(e.fingerprint.torch_version, Some(facts.torch_version));
    assert!(e.fingerprint.torch_intra_threads.is_some_and(|n| n >= 1));
    if facts.cuda_available {
        assert_eq!(gpu.status, RunStatus::Completed);
    } else {
        assert_eq!(gpu.status, RunStatus::Skipped);
        assert!(gpu.skip_reason.unwrap().contains("CUDA"));
        assert!(stderr.contains("SKIPPED"), "{stderr}");
    }
    assert_eq!(e.status, ExperimentStatus::Completed);
}

/// A copy of `lcx` in `dir/bin` with an `lcx-torch` beside it that logs
/// each call to `lcx-torch.calls` and then runs `body` (shell).
fn lcx_beside_fake_torch(dir: &Path, body: &str) -> (PathBuf, PathBuf) {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let lcx = bin.join("lcx");
    std::fs::copy(env!("CARGO_BIN_EXE_lcx"), &lcx).unwrap();
    write(
        &bin,
        "lcx-torch",
        &format!("#!/bin/sh\necho \"$*\" >> \"$0.calls\"\n{body}\n"),
    );
    std::fs::set_permissions(
        bin.join("lcx-torch"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    (lcx, bin)
}

#[test]
fn libtorch_is_asked_once_for_the_fingerprint_and_the_cuda_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = experiment("gpu-once", 2, &[("cpu", counting(2, "0"))], "");
    text.push_str(&format!(
        "\n[[arms]]\nname = \"gpu\"\nrequires = \"cuda\"\ncommand = {}\n",
        toml::Value::String(counting(2, "0"))
    ));
    let file = write(dir.path(), "e.toml", &text);
    let db = dir.path().join("x.db");
    let facts = r#"{"lcx_version":"0","torch_version":"fake","cuda_available":false,"cuda_devices":0,"torch_intra_threads":1,"torch_inter_threads":1}"#;
    let (lcx, bin) = lcx_beside_fake_torch(dir.path(), &format!("echo '{facts}'"));
    let out = std::process::Command::new(&lcx)
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .env_remove("LCX_DB")
        .env("LCX_HOST_LOCK", crate::support::own_host_lock())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = std::fs::read_to_string(bin.join("lcx-torch.calls")).unwrap();
    assert_eq!(calls, "version --json\n", "lcx-torch was asked: {calls}");
    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("gpu-once").unwrap();
    assert_eq!(e.fingerprint.torch_version.as_deref(), Some("fake"));
    let gpu = store
        .runs(e.id)
        .unwrap()
        .into_iter()
        .find(|r| r.arm == "gpu")
        .unwrap();
    assert_eq!(gpu.status, RunStatus::Skipped);
}

#[test]
fn an_experiment_of_command_arms_never_asks_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    let text = experiment("plain", 2, &[("a", counting(2, "0"))], "");
    let file = write(dir.path(), "e.toml", &text);
    let db = dir.path().join("x.db");
    // An lcx-torch that cannot start: asking it anything would fail.
    let (lcx, bin) = lcx_beside_fake_torch(dir.path(), "exit 1");
    let out = std::process::Command::new(&lcx)
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .env_remove("LCX_DB")
        .env("LCX_HOST_LOCK", crate::support::own_host_lock())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !bin.join("lcx-torch.calls").exists(),
        "lcx run started lcx-torch"
    );
    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("plain").unwrap();
    assert_eq!(e.status, ExperimentStatus::Completed);
    assert_eq!(e.fingerprint.torch_version, None);
    assert_eq!(e.fingerprint.cuda_available, None);
    // The machine itself is still probed.
    assert!(e.fingerprint.cpu_cores.is_some_and(|n| n >= 1));
    assert!(e.fingerprint.peak_fp32_gflops.is_some());
}

#[test]
fn seed_experiments_validate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for entry in std::fs::read_dir(root.join("experiments")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        seen += 1;
        let out = lcx()
            .args(["run", path.to_str().unwrap(), "--dry-run"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(seen >= 5, "expected the seed experiments, found {seen}");
}

/// Issue 39 §6: a gate or guard naming a metric the train workload never
/// writes is refused before anything runs, by `lcx run` and `--dry-run`
/// alike, naming the file, the key, the likely name and the trainer's names.
#[test]
fn a_gate_on_a_metric_the_trainer_never_writes_is_refused_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "typo.toml",
        "name = \"typo\"\nworkload = \"train\"\niterations = 2\n\
         [[arms]]\nname = \"a\"\n[[arms]]\nname = \"b\"\nset = [\"traversal.scheduler=interleaved\"]\n\
         [gate]\nmetric = \"time/iteration_secs\"\nmin_speedup = 1.05\n",
    );
    let db = dir.path().join("lcx.db");
    for extra in [&[][..], &["--dry-run"][..]] {
        let out = lcx()
            .args(["run", file.to_str().unwrap(), "--plain", "--db"])
            .arg(&db)
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        for needle in [
            file.to_str().unwrap(),
            "gate.metric",
            "never writes `time/iteration_secs`",
            "did you mean `time/iteration_seconds`?",
            "it writes: time/iteration_seconds,",
        ] {
            assert!(
                stderr.contains(needle),
                "{extra:?}: `{needle}` not in {stderr}"
            );
        }
    }
    // Nothing ran: no cell, no experiment.
    if db.exists() {
        let store = Store::open_read_only(&db).unwrap();
        assert_eq!(count(&store, "SELECT COUNT(*) FROM experiments"), 0);
    }
}

/// #17: a resumed cell runs the config recorded when the experiment was
/// created, not the config file as it reads at resume time.
#[test]
fn a_resumed_cell_runs_the_recorded_config_not_the_edited_file() {
    let dir = tempfile::tempdir().unwrap();
    let smoke = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/configs/smoke.toml"))
        .unwrap();
    let config = write(dir.path(), "trainer.toml", &smoke);
    let file = write(
        dir.path(),
        "e.toml",
        "name = \"recorded\"\nworkload = \"train\"\nconfig = \"trainer.toml\"\niterations = 2\n\
         warmup = 0\n[[arms]]\nname = \"a\"\n[[arms]]\nname = \"b\"\nset = [\"network.hidden_size=8\"]\n",
    );
    let db = dir.path().join("x.db");
    let db_arg = db.to_str().unwrap();
    let child = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db_arg, "--plain"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_rows(
        &db,
        "SELECT COUNT(*) FROM runs WHERE status = 'completed'",
        1,
    );
    signal(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The file no longer parses: a child that reads it fails.
    std::fs::write(&config, "this is [not toml\n").unwrap();
    run_ok(&["run", "--resume", "recorded", "--db", db_arg, "--plain"]);

    let store = Store::open_read_only(&db).unwrap();
    let e = store.find_experiment("recorded").unwrap();
    assert_eq!(e.status, ExperimentStatus::Completed);
    let runs = store.runs(e.id).unwrap();
    assert!(runs
        .iter()
        .all(|r| r.status == RunStatus::Completed && r.iterations_done == 2));
    let b = runs.iter().find(|r| r.arm == "b").unwrap();
    let recorded = b.config_toml.clone().unwrap();
    assert!(recorded.contains("hidden_size = 8"), "{recorded}");

    // The recorded config is what `config show --run` prints, the first
    // half of the report's reproduce line for the cell.
    let shown = run_ok(&["config", "show", "--run", &b.id.to_string(), "--db", db_arg]);
    assert_eq!(String::from_utf8(shown.stdout).unwrap(), recorded);
    let report = run_ok(&["report", "recorded", "--db", db_arg]);
    let report = String::from_utf8(report.stdout).unwrap();
    assert!(
        // The database is not the default one, so the line names it.
        report.contains(&format!("lcx config show --run {} --db {db_arg} | ", b.id)),
        "{report}"
    );
}

/// #19 item 7: the command line's counts and arm subset apply, are stored
/// and reproduced; a `--set` that something else would outrank is refused
/// before anything is written.
#[test]
fn command_line_counts_and_arms_apply_and_outranked_sets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lines = r#"i=1; while [ $i -le $LCX_ITERATIONS ]; do echo "{\"iteration\":$i,\"time/iteration_seconds\":0.5}"; i=$((i+1)); done"#;
    let file = write(
        dir.path(),
        "e.toml",
        &experiment(
            "flags",
            6,
            &[
                ("a", lines.to_string()),
                ("b", lines.to_string()),
                ("c", lines.to_string()),
            ],
            "repeats = 3",
        ),
    );
    let db = dir.path().join("x.db");
    let db_arg = db.to_str().unwrap();
    let file_arg = file.to_str().unwrap();
    run_ok(&[
        "run",
        file_arg,
        "--db",
        db_arg,
        "--iterations",
        "3",
        "--warmup",
        "0",
        "--repeats",
        "1",
        "--arms",
        "c,a",
        "--plain",
    ]);
    let store = Store::open_read_only(&db).unwrap();
    let e = store.find_experiment("flags").unwrap();
    assert_eq!((e.iterations, e.warmup, e.repeats), (3, 0, 1));
    let runs = store.runs(e.id).unwrap();
    let arms: Vec<&str> = runs.iter().map(|r| r.arm.as_str()).collect();
    assert_eq!(arms, ["a", "c"]);
    assert!(runs
        .iter()
        .all(|r| r.status == RunStatus::Completed && r.iterations_done == 3));
    let report = String::from_utf8(run_ok(&["report", "flags", "--db", db_arg]).stdout).unwrap();
    assert!(
        report.contains("--iterations 3 --warmup 0 --repeats 1 --arms c,a"),
        "{report}"
    );
    drop(store);

    // A training experiment: the runner sets run.max_iterations itself.
    let smoke = concat!(env!("CARGO_MANIFEST_DIR"), "/experiments/smoke.toml");
    let fresh = dir.path().join("fresh.db");
    let out = lcx()
        .args([
            "run",
            smoke,
            "--db",
            fresh.to_str().unwrap(),
            "--set",
            "run.max_iterations=5",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--iterations"), "{stderr}");
    assert!(!fresh.exists(), "nothing written");
}

/// The flags that only make sense for an earlier experiment or for Slurm
/// are refused with exit 2 before anything is written.
#[test]
fn detach_attach_and_takeover_are_refused_where_they_mean_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = crate::support::write(
        dir.path(),
        "local.toml",
        &experiment("local", 2, &[("a", counting(2, "0"))], ""),
    );
    let db = dir.path().join("lcx.db");
    let run = |args: &[&str]| {
        lcx()
            .args(args)
            .args(["--db", db.to_str().unwrap()])
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let file = file.to_str().unwrap();
    for (args, says) in [
        (vec!["run", file, "--detach"], "kind = \"slurm\""),
        (vec!["run", file, "--takeover"], "--takeover"),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} wrote the database");
    }
    // A local experiment that finished has no jobs to attach to.
    let out = run(&["run", file]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["run", "--attach", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("completed") && err.contains("no jobs left"),
        "{err}"
    );
}

/// A negative or zero count is read and refused with what is wrong with
/// it (exit 2), written either way clap takes a value.
#[test]
fn a_count_below_one_is_refused_saying_so() {
    for args in [
        ["--iterations=-1", "--dry-run"],
        ["--iterations", "-1"],
        ["--repeats", "0"],
    ] {
        let out = crate::support::lcx()
            .args(["run", "x.toml"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("must be ≥ 1 (found "), "{args:?}: {err}");
    }
}

/// `--takeover` of an experiment whose runner is recorded on another host
/// while that runner is in fact alive: the old runner finds the newer claim
/// (at its next write, or within a second while its cell is silent), kills
/// its cell and exits naming the runner that took over; the new one reruns
/// the cell that was in flight, and every cell is recorded exactly once.
#[test]
fn a_takeover_fences_the_runner_it_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let iterations = 4;
    let file = crate::support::write(
        dir.path(),
        "fenced.toml",
        &experiment(
            "fenced",
            iterations,
            &[
                ("a", counting(iterations, "0.15")),
                ("b", counting(iterations, "0.15")),
            ],
            "repeats = 5",
        ),
    );
    let db = dir.path().join("lcx.db");
    let first = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::support::wait_for_rows(
        &db,
        "SELECT COUNT(*) FROM runs WHERE status = 'completed'",
        1,
    );
    // The first runner now looks as if it ran on a host this one cannot
    // check (a login node that lost its network).
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    conn.execute(
        "UPDATE experiments SET runner_host = 'elsewhere.example', runner_pid = 4242",
        [],
    )
    .unwrap();
    drop(conn);
    let second = lcx()
        .args([
            "run",
            "--resume",
            "1",
            "--takeover",
            "--db",
            db.to_str().unwrap(),
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let first_err = {
        let out = first.wait_with_output().unwrap();
        assert!(!out.status.success(), "the first runner went on to the end");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(
        first_err.contains("taken over by lcx") && first_err.contains(" pid "),
        "{first_err}"
    );
    let second_err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{second_err}");

    let store = Store::open_read_only(&db).unwrap();
    let count = |sql: &str| crate::support::count(&store, sql);
    assert_eq!(
        count("SELECT COUNT(*) FROM runs WHERE status != 'completed'"),
        0
    );
    assert_eq!(count("SELECT COUNT(*) FROM runs"), 10);
    // Exactly one live row per cell and iteration: nothing written twice,
    // and the old runner wrote nothing after the takeover.
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM metrics
             WHERE superseded = 0 AND name = 'time/iteration_seconds'"
        ),
        10 * i64::from(iterations)
    );
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM runs r WHERE iterations_done != (SELECT COUNT(*) FROM metrics m
             WHERE m.run_id = r.id AND m.superseded = 0 AND m.name = 'time/iteration_seconds')"
        ),
        0
    );
    assert_eq!(
        count("SELECT runner_epoch FROM experiments WHERE id = 1"),
        2,
        "one claim by each runner"
    );
    let e = store.experiment(1).unwrap().unwrap();
    assert_eq!(e.status, ExperimentStatus::Completed);
}

/// A cell's `wall_seconds` is the cell's own time: a runner that then waits
/// for another process's write lock records the wait apart.
#[test]
fn a_cells_wall_time_leaves_out_the_wait_for_the_database() {
    let dir = tempfile::tempdir().unwrap();
    // The cell prints a line after 0.5 s and runs 0.3 s more; the write of
    // its line waits for a lock another process holds for 3 s.
    let file = crate::support::write(
        dir.path(),
        "queued.toml",
        &experiment(
            "queued",
            1,
            &[(
                "a",
                r#"sleep 0.5; echo '{"iteration":1,"x":1}'; sleep 0.3"#.to_string(),
            )],
            "warmup = 0",
        )
        .replace("warmup = 1\n", ""),
    );
    let db = dir.path().join("lcx.db");
    let run = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The lock is taken once the cell has started, before its line.
    let conn = loop {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .unwrap();
        let started: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM runs WHERE status = 'running'",
                [],
                |r| r.get(0),
            )
            .unwrap_or(0);
        if started > 0 {
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            break conn;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    std::thread::sleep(std::time::Duration::from_secs(3));
    conn.execute_batch("COMMIT").unwrap();
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open_read_only(&db).unwrap();
    let runs = store.runs(1).unwrap();
    let wall = runs[0].wall_seconds.unwrap();
    let wait = runs[0].db_wait_seconds.unwrap();
    assert!(wall < 2.0, "wall {wall} s counts the 3 s wait for the lock");
    assert!(
        wait > 1.0,
        "the wait for the lock was not recorded: {wait} s"
    );
}

/// Every local cell records what the host was doing: a CPU burner started
/// while one arm of an A/A experiment runs makes exactly what it overlapped
/// contended (≥ 0.8 of a core of foreign CPU), the report marks those cells
/// and its verdicts and names the burner among the busiest other
/// programs, and `--check` on a gate resting on them is
/// INCONCLUSIVE (3) unless `--allow-contended`.
#[test]
fn a_cpu_burner_makes_the_cells_it_overlaps_contended() {
    let dir = tempfile::tempdir().unwrap();
    // The same cheap cell in both arms: 0.8 s, three iterations.
    let cell = r#"for i in 1 2 3; do sleep 0.25; echo "{\"iteration\":$i,\"t\":1.0$i}"; done"#;
    let file = write(
        dir.path(),
        "aa.toml",
        &experiment(
            "aa",
            3,
            &[("a", cell.to_string()), ("b", cell.to_string())],
            "repeats = 2\norder = \"sequential\"\n[gate]\nmetric = \"t\"\nmax_slowdown = 0.5\n",
        ),
    );
    let db = dir.path().join("lcx.db");
    let runner = spawn_run(dir.path(), &file, &db);
    // Arm b runs after both cells of arm a: burn one core from its start.
    wait_for_rows(
        &db,
        "SELECT COUNT(*) FROM runs WHERE arm = 'b' AND status != 'pending'",
        1,
    );
    let mut burner = burner();
    let out = runner.wait_with_output().unwrap();
    burner.kill().unwrap();
    burner.wait().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let store = Store::open_read_only(&db).unwrap();
    for run in store.runs(1).unwrap() {
        let c = &run.contention;
        assert!(c.cpu_seconds.is_some_and(|s| s < 0.5), "{c:?}");
        assert!(c.host_cpus.is_some_and(|n| n >= 1) && c.load_start.is_some());
        if run.arm == "b" {
            let foreign = c.foreign_cores().unwrap();
            assert!(foreign >= 0.8, "arm b #{}: {foreign} cores", run.repeat);
            // The burner (`sh`) is named among the busiest other programs.
            let busiest = c.foreign_processes.as_deref().unwrap_or_default();
            assert!(busiest.iter().any(|p| p.name == "sh"), "{busiest:?}");
        }
    }
    let text = report_text(&db);
    assert!(text.contains("contended**"), "{text}");
    // Who was busy: summarised under the verdicts and named per cell.
    assert!(text.contains("; busiest: `sh` "), "{text}");
    assert!(text.contains("| Busiest others "), "{text}");
    // Summarised under the verdicts (cells per arm), each in the Cells
    // section's table.
    assert!(text.contains("`b` 2 cells"), "{text}");
    assert!(text.contains("Contended cells"), "{text}");
    let check = |extra: &[&str]| {
        lcx()
            .args(["report", "--check", "--db", db.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = check(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("of a core on average): neither PASS nor FAIL from contended data"),
        "{err}"
    );
    let out = check(&["--allow-contended"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("contended"), "{err}");
}

/// `[measurement] rerun_contended`: the cells a CPU burner overlapped run
/// again at the end of the schedule, each beside a fresh baseline cell of
/// its repeat; with the burner gone the reruns are clean, the report says
/// which cells ran again and why, and the A/A verdict is "no change".
#[test]
#[ignore = "needs a quiet host: scripts/test.sh runs it alone after the suite"]
fn quiet_host_contended_cells_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let cell =
        r#"for i in 1 2 3; do sleep 0.2; echo "{\"iteration\":$i,\"t\":1.0$i$LCX_REPEAT}"; done"#;
    let file = write(
        dir.path(),
        "aa.toml",
        &experiment(
            "aa-rerun",
            3,
            &[("a", cell.to_string()), ("b", cell.to_string())],
            // Two burners take both cores of a small CI host; the limit
            // leaves room for the other tests running beside this one.
            "repeats = 2\norder = \"sequential\"\n\
             [measurement]\nmax_foreign_cpu = 1.2\nrerun_contended = 2\n",
        ),
    );
    let db = dir.path().join("lcx.db");
    let runner = spawn_run(dir.path(), &file, &db);
    wait_for_rows(
        &db,
        "SELECT COUNT(*) FROM runs WHERE arm = 'b' AND status != 'pending'",
        1,
    );
    let mut burners = [burner(), burner()];
    // The schedule is over once a cell runs again: the host goes quiet.
    wait_for_rows(
        &db,
        "SELECT COUNT(*) FROM runs WHERE rerun_note IS NOT NULL",
        1,
    );
    for b in &mut burners {
        b.kill().unwrap();
        b.wait().unwrap();
    }
    let out = runner.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("was contended"), "{err}");

    let store = Store::open_read_only(&db).unwrap();
    let runs = store.runs(1).unwrap();
    for run in runs.iter().filter(|r| r.arm == "b") {
        // Each b cell was contended (so ran again) and its rerun is clean.
        assert!(run.attempt >= 2, "b #{} was not run again", run.repeat);
        let note = run.rerun_note.as_deref().unwrap_or_default();
        assert!(note.contains("was contended"), "{note}");
        let cores = run.contention.foreign_cores().unwrap();
        assert!(cores <= 1.2, "b #{}'s rerun: {cores} cores", run.repeat);
    }
    // The baseline partner of each rerun ran again too.
    assert!(runs.iter().filter(|r| r.arm == "a").all(|r| r.attempt >= 2));
    let text = report_text(&db);
    assert!(
        text.contains("Cells run again after the schedule"),
        "{text}"
    );
    assert!(
        text.contains("the baseline beside contended arm b #1"),
        "{text}"
    );
    assert!(!text.contains("contended**"), "{text}");
    let json = lcx()
        .args(["report", "--format", "json", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let json = String::from_utf8_lossy(&json.stdout);
    assert!(json.contains("\"verdict\": \"equivalent\""), "{json}");
}

/// `timing = "process"`: lcx runs the command once per iteration and
/// records its wall time, user and system CPU and peak memory, with the
/// report's usual tables and verdicts. Its 50 ms sleep is timed within
/// 5 ms, which the suite's other tests (each probing or spinning both
/// cores of a small CI host now and then) would upset.
#[test]
#[ignore = "needs a quiet host: scripts/test.sh runs it alone after the suite"]
fn quiet_host_a_process_timed_arm_records_each_run_of_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "timed.toml",
        "name = \"timed\"\nworkload = \"command\"\niterations = 8\nwarmup = 1\n\
         timing = \"process\"\n\n[[arms]]\nname = \"sleep\"\ncommand = [\"sleep\", \"0.05\"]\n\n\
         [[arms]]\nname = \"spin\"\n\
         command = 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'\n",
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
    let values = |arm: &str, name: &str| -> Vec<f64> {
        let rows = store
            .query(&format!(
                "SELECT m.value FROM metrics m JOIN runs r ON r.id = m.run_id
                 WHERE r.arm = '{arm}' AND m.name = '{name}' ORDER BY m.iteration"
            ))
            .unwrap()
            .rows;
        rows.iter()
            .map(|r| match r[0] {
                lcx_core::store::SqlValue::Real(v) => v,
                lcx_core::store::SqlValue::Integer(v) => v as f64,
                ref other => panic!("{other:?}"),
            })
            .collect()
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let wall = values("sleep", "process/wall_seconds");
    assert_eq!(wall.len(), 8);
    // A sleep of 50 ms never takes less; spawning it adds a few ms at most.
    assert!(wall.iter().all(|&w| w >= 0.05), "{wall:?}");
    let m = median(wall.clone());
    assert!(m < 0.055, "median {m} s: {wall:?}");
    // The sleep barely uses the CPU; the spin loop is nearly all CPU.
    assert!(median(values("sleep", "process/user_seconds")) < 0.01);
    let spin_wall = median(values("spin", "process/wall_seconds"));
    let spin_cpu = median(values("spin", "process/user_seconds"))
        + median(values("spin", "process/system_seconds"));
    assert!(
        spin_cpu > 0.3 * spin_wall,
        "cpu {spin_cpu} of wall {spin_wall}"
    );
    assert!(values("spin", "process/max_rss_bytes")
        .iter()
        .all(|&b| b > 0.0));
    // The report's default table leads with the wall time, with its unit.
    let text = report_text(&db);
    let header = text.lines().find(|l| l.starts_with("| Mode")).unwrap();
    assert!(
        header.split('|').nth(2).unwrap().contains("wall s"),
        "{text}"
    );
    assert!(
        text.contains("lcx time-process --iterations 8 -- sleep 0.05"),
        "{text}"
    );
}

/// `lcx run --command A --command B` compares commands without a file:
/// each an arm timed by lcx, the first the baseline; a command beside a
/// file is refused.
#[test]
fn commands_compare_without_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let run = |args: &[&str]| {
        lcx()
            .arg("run")
            .args(args)
            .args(["--db", db.to_str().unwrap(), "--plain"])
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&[
        "--command",
        "sleep 0.01",
        "--command",
        "sleep 0.12",
        "--iterations",
        "4",
        "--repeats",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = lcx()
        .args(["report", "--format", "json", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let json = String::from_utf8_lossy(&json.stdout);
    assert!(json.contains("\"label\": \"sleep 0.12\""), "{json}");
    assert!(json.contains("\"verdict\": \"regressed\""), "{json}");
    // The file it stands for is kept beside the database.
    let kept: Vec<_> = std::fs::read_dir(dir.path().join(".lcx/commands"))
        .unwrap()
        .collect();
    assert_eq!(kept.len(), 1);

    let out = run(&["x.toml", "--command", "true", "--command", "false"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `lcx run FILE --db DB --plain` in `dir`, in the background, its stderr
/// piped.
fn spawn_run(dir: &Path, file: &Path, db: &Path) -> std::process::Child {
    lcx()
        .args([
            "run",
            file.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--plain",
        ])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs a command experiment whose arms carry `extra_a` / the file
/// `extra`; each cell prints the CPUs its process may use as a text field.
fn run_cpu_report(dir: &Path, arm_a: &str, extra: &str) -> (std::process::Output, PathBuf) {
    let cell = r#"c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status); for i in 1 2; do echo "{\"iteration\":$i,\"t\":1,\"cpus\":\"$c\"}"; done"#;
    let quoted = toml::Value::String(cell.to_string()).to_string();
    let file = write(
        dir,
        "pin.toml",
        &format!(
            "name = \"pin\"\nworkload = \"command\"\niterations = 2\nwarmup = 1\n{extra}\n\
             [[arms]]\nname = \"a\"\ncommand = {quoted}\n{arm_a}\n\
             [[arms]]\nname = \"b\"\ncommand = {quoted}\n"
        ),
    );
    let db = dir.join("lcx.db");
    let out = lcx()
        .args([
            "run",
            file.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--plain",
        ])
        .current_dir(dir)
        .output()
        .unwrap();
    (out, db)
}

/// The CPUs each arm's cells recorded on their run rows and printed
/// themselves (the `cpus` text field), for arm `a` and `b`.
fn cpus_seen(db: &Path) -> Vec<(String, String, String)> {
    let store = Store::open_read_only(db).unwrap();
    let rows = store
        .query(
            "SELECT r.arm, r.cpus, t.value FROM runs r JOIN metric_text t ON t.run_id = r.id
             WHERE t.name = 'cpus' AND t.iteration = 1 ORDER BY r.arm",
        )
        .unwrap()
        .rows;
    let text = |v: &lcx_core::store::SqlValue| match v {
        lcx_core::store::SqlValue::Text(s) => s.clone(),
        other => panic!("{other:?}"),
    };
    rows.iter()
        .map(|r| (text(&r[0]), text(&r[1]), text(&r[2])))
        .collect()
}

/// `cpus` on an arm runs its cells on those CPUs (the cell sees it), the
/// run row records what the kernel gave, and the report names it; the
/// other arm runs where the kernel schedules it.
#[test]
fn an_arm_with_cpus_runs_pinned_and_the_run_and_report_say_so() {
    use lcx_core::system::affinity;
    let allowed = affinity::allowed().unwrap();
    let last = affinity::CpuSet::from_cpus(allowed.iter().last());
    let dir = tempfile::tempdir().unwrap();
    let (out, db) = run_cpu_report(dir.path(), &format!("cpus = \"{last}\""), "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = cpus_seen(&db);
    assert_eq!(
        seen,
        vec![
            ("a".into(), last.to_string(), last.to_string()),
            ("b".into(), allowed.to_string(), allowed.to_string()),
        ]
    );
    let text = report_text(&db);
    assert!(
        text.contains(&format!("- CPUs of `a`: {last} (pinned)")),
        "{text}"
    );
    assert!(
        text.contains(&format!("- CPUs of `b`: {allowed} (not pinned)")),
        "{text}"
    );

    // A CPU this host does not give lcx: exit 2, nothing written.
    let dir = tempfile::tempdir().unwrap();
    let (out, db) = run_cpu_report(dir.path(), "cpus = \"1000\"", "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("pin.toml: arms (`a`).cpus: CPU 1000 is not one this process may use here"),
        "{err}"
    );
    assert!(!db.exists());
}

/// `[measurement] pin = true`: every arm's cells run on the same set, the
/// CPUs left once the runner keeps the lowest (or the isolated ones).
#[test]
fn pin_runs_every_arm_on_the_same_cpus() {
    use lcx_core::system::affinity;
    let allowed = affinity::allowed().unwrap();
    let isolated = lcx_core::system::Root::default()
        .isolated_cpus()
        .and_then(|l| affinity::CpuSet::parse(&l).ok());
    let dir = tempfile::tempdir().unwrap();
    let (out, db) = run_cpu_report(dir.path(), "", "[measurement]\npin = true\n");
    let Ok(set) = affinity::pin_set(&allowed, isolated.as_ref()) else {
        // One CPU: nothing to pin to, and lcx says so before writing.
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("measurement.pin"), "{err}");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let set = set.to_string();
    assert_eq!(
        cpus_seen(&db),
        vec![
            ("a".into(), set.clone(), set.clone()),
            ("b".into(), set.clone(), set.clone()),
        ]
    );
}

/// An experiment row's ceiling: (GFLOP/s, source, probe date, note).
fn ceiling_of(db: &Path, id: i64) -> (f64, String, String, Option<String>) {
    let store = Store::open_read_only(db).unwrap();
    let f = store.experiment(id).unwrap().unwrap().fingerprint;
    (
        f.peak_fp32_gflops.unwrap(),
        f.peak_source.unwrap(),
        f.peak_probed_at.unwrap(),
        f.peak_note,
    )
}

/// A one-cell command experiment run with `cache` as the peak cache; its
/// two lines hold `fields` (JSON members).
fn run_with_cache(dir: &Path, db: &Path, cache: &Path, fields: &str) -> Output {
    let cell = format!("echo '{{\"iteration\":1,{fields}}}'; echo '{{\"iteration\":2,{fields}}}'");
    let file = write(dir, "one.toml", &experiment("one", 2, &[("a", cell)], ""));
    run_file_with_cache(dir, &file, db, cache)
}

/// `lcx run FILE` in `dir` with `cache` as the peak cache.
fn run_file_with_cache(dir: &Path, file: &Path, db: &Path, cache: &Path) -> Output {
    lcx()
        .args([
            "run",
            file.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--plain",
        ])
        .env("LCX_PEAK_CACHE", cache)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The ceiling is probed once per host and boot: the next experiment
/// (into the same database, or another one) reads the cached best without
/// probing, and a database carries it to a user whose cache lacks it.
#[test]
fn experiments_one_after_the_other_share_one_probe_of_the_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache/peak.json");
    let db = dir.path().join("lcx.db");
    let line = r#""t":1"#;
    // A probe with no clean try caches a floor that later runs read
    // instead of probing: start again until one is clean (a busy CI host
    // may disturb a few).
    let mut first = 0;
    for _ in 0..5 {
        let out = run_with_cache(dir.path(), &db, &cache, line);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        first += 1;
        if ceiling_of(&db, first).1 == "probed" {
            break;
        }
        // The floor is kept beside the cache file.
        std::fs::remove_file(cache.with_extension("floors.json")).unwrap();
    }
    let (gflops, source, probed_at, _) = ceiling_of(&db, first);
    assert_eq!(source, "probed", "{first} probes were all disturbed");
    assert!(cache.exists());

    let out = run_with_cache(dir.path(), &db, &cache, line);
    assert!(out.status.success());
    assert_eq!(
        ceiling_of(&db, first + 1),
        (gflops, "cached".to_string(), probed_at.clone(), None)
    );
    // Another database on the same host reads the user's cache file.
    let other = dir.path().join("other.db");
    assert!(run_with_cache(dir.path(), &other, &cache, line)
        .status
        .success());
    assert_eq!(ceiling_of(&other, 1).1, "cached");
    // A user without the file gets it from the database's host_peaks.
    let fresh = dir.path().join("fresh/peak.json");
    assert!(run_with_cache(dir.path(), &db, &fresh, line)
        .status
        .success());
    assert_eq!(ceiling_of(&db, first + 2).0, gflops);
    assert_eq!(ceiling_of(&db, first + 2).1, "cached");
    assert!(
        fresh.exists(),
        "the database's entry was not written back to the file"
    );
    let text = report_text(&db);
    assert!(text.contains("cached for this host and boot"), "{text}");
}

/// A busy boot is probed once: a probe with no clean try is cached as a
/// floor, flagged, and the next run reads it (its source `disturbed`, the
/// report says so) instead of spending both cores on another probe. An
/// experiment of timed commands probes nothing and records no ceiling.
#[test]
fn a_disturbed_probe_is_read_back_and_timed_commands_probe_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("peak.json");
    let db = dir.path().join("lcx.db");
    let out = run_with_cache(dir.path(), &db, &cache, r#""t":1"#);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Whatever this host's probe read (a ceiling, or a floor kept beside
    // the cache file), make its entry a floor no probe would return.
    let floors = dir.path().join("peak.floors.json");
    let probed = if cache.exists() { &cache } else { &floors };
    let mut entries: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(probed).unwrap()).unwrap();
    assert_eq!(entries.len(), 1);
    entries[0]["gflops"] = serde_json::json!(1.25);
    entries[0]["disturbed"] = serde_json::json!(true);
    std::fs::write(&floors, serde_json::to_vec(&entries).unwrap()).unwrap();
    let _ = std::fs::remove_file(&cache);
    let other = dir.path().join("other.db");
    let out = run_with_cache(dir.path(), &other, &cache, r#""t":1"#);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (gflops, source, _, _) = ceiling_of(&other, 1);
    assert_eq!((gflops, source.as_str()), (1.25, "disturbed"));
    let text = report_text(&other);
    assert!(
        text.contains("DISTURBED: no try had all its cores"),
        "{text}"
    );

    // Timed commands: no probe, no ceiling, no line about one.
    let before = std::fs::read(&floors).unwrap();
    let file = write(
        dir.path(),
        "timed.toml",
        "name = \"timed\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 2\n\
         [[arms]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    let timed = dir.path().join("timed.db");
    let out = run_file_with_cache(dir.path(), &file, &timed, &cache);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open_read_only(&timed).unwrap();
    let f = store.experiment(1).unwrap().unwrap().fingerprint;
    assert_eq!((f.peak_fp32_gflops, f.peak_source), (None, None));
    assert_eq!(std::fs::read(&floors).unwrap(), before);
    assert!(!cache.exists());
    let text = report_text(&timed);
    assert!(!text.contains("measured peak"), "{text}");
}

/// A phase cannot run above the machine's ceiling: when one does, the
/// runner probes again, records why on the experiment, and the report
/// says the share of peak cannot be read.
#[test]
fn a_phase_faster_than_the_ceiling_makes_the_runner_probe_again() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("peak.json");
    let db = dir.path().join("lcx.db");
    let line = r#""perf/training_gflops":1000000000"#;
    let out = run_with_cache(dir.path(), &db, &cache, line);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let (_, source, _, note) = ceiling_of(&db, 1);
    assert_eq!(source, "reprobed");
    let note = note.unwrap();
    assert!(
        note.contains(
            "cell `a` #1's training phase ran at 1000000000.0 GFLOP/s, above the recorded ceiling"
        ),
        "{note}"
    );
    assert!(
        note.contains("its FLOP count or its clock is wrong"),
        "{note}"
    );
    assert!(err.contains("above the recorded ceiling"), "{err}");
    let text = report_text(&db);
    assert!(text.contains("**The ceiling was probed again:**"), "{text}");
    assert!(
        text.contains("training rate (1.00G GFLOP/s) is above its ceiling"),
        "{text}"
    );
}

/// A cell past its `timeout` is stopped with its process group and
/// recorded `failed: timed out after …`; the run goes on to the next cell
/// and ends in seconds, not when the hung command would have.
#[test]
fn a_cell_past_its_timeout_is_killed_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let file = write(
        dir.path(),
        "hang.toml",
        &format!(
            "name = \"hang\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 2\n\
             timeout = \"30s\"\n\n[[arms]]\nname = \"quick\"\ncommand = [\"true\"]\n\n\
             [[arms]]\nname = \"hung\"\ntimeout = \"1s\"\n\
             command = [\"sh\", \"-c\", \"echo $$ > {}; exec sleep 60\"]\n",
            pid_file.display()
        ),
    );
    let db = dir.path().join("lcx.db");
    let started = std::time::Instant::now();
    let out = lcx()
        .arg("run")
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < std::time::Duration::from_secs(30),
        "the run waited {took:?}"
    );
    let store = Store::open_read_only(&db).unwrap();
    let runs = store.runs(1).unwrap();
    assert_eq!(runs[0].status, RunStatus::Completed);
    assert_eq!(runs[1].status, RunStatus::Failed);
    let error = runs[1].error.clone().unwrap_or_default();
    assert!(error.starts_with("timed out after 1s"), "{error}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ran past its timeout of 1s"), "{stderr}");
    // The hung process went with its cell: gone, or a zombie left to init
    // (a container's pid 1 may not reap it).
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let state = stat
        .rsplit(") ")
        .next()
        .and_then(|rest| rest.chars().next());
    assert!(
        matches!(state, None | Some('Z' | 'X')),
        "pid {pid} still runs: {stat}"
    );
}

/// A command that ignores LCX_ITERATIONS and prints more lines than the
/// plan's `iterations`: the cell is its first `iterations` lines, the rest
/// are counted and said so (stderr, the report's Cells section); an arm
/// with `variable_iterations = true` keeps them all.
#[test]
fn lines_past_iterations_are_counted_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let six = r#"for i in 1 2 3 4 5 6; do echo "{\"t\": $i}"; done"#;
    let file = write(
        dir.path(),
        "extra.toml",
        &format!(
            "name = \"extra\"\nworkload = \"command\"\niterations = 3\n\n\
             [[arms]]\nname = \"fixed\"\ncommand = {six:?}\n\n\
             [[arms]]\nname = \"free\"\nvariable_iterations = true\ncommand = {six:?}\n"
        ),
    );
    let db = dir.path().join("lcx.db");
    let out = lcx()
        .arg("run")
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("past the 3 asked for"), "{stderr}");
    let store = Store::open_read_only(&db).unwrap();
    let stored = |arm: &str| {
        count(
            &store,
            &format!(
                "SELECT COUNT(*) FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.arm = '{arm}'"
            ),
        )
    };
    assert_eq!((stored("fixed"), stored("free")), (3, 6));
    let extra = |arm: &str| {
        count(
            &store,
            &format!("SELECT extra_lines FROM runs WHERE arm = '{arm}'"),
        )
    };
    assert_eq!((extra("fixed"), extra("free")), (3, 0));
    let runs = store.runs(1).unwrap();
    assert!(runs.iter().all(|r| r.status == RunStatus::Completed));
    let report = report_text(&db);
    assert!(report.contains("Lines past iterations"), "{report}");
    assert!(report.contains("read `LCX_ITERATIONS`"), "{report}");
}

/// `setup` runs once per arm before its first cell, `prepare` before each
/// cell, `cleanup` once per arm at the end, each outside the cell (the
/// log shows the order); a failing setup fails its arm's cells with the
/// hook's own words, the other arm completes, and its cleanup still runs.
#[test]
fn hooks_run_around_the_cells_and_a_failed_setup_fails_its_arm() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let file = write(
        dir.path(),
        "hooks.toml",
        &format!(
            "name = \"hooks\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 1\n\
             repeats = 2\n\
             setup = \"echo setup $LCX_ARM >> {log}\"\n\
             prepare = \"echo prepare $LCX_ARM $LCX_REPEAT >> {log}\"\n\
             cleanup = [\"sh\", \"-c\", \"echo cleanup $LCX_ARM $LCX_HOOK >> {log}\"]\n\n\
             [[arms]]\nname = \"a\"\ncommand = \"echo cell $LCX_ARM $LCX_REPEAT >> {log}\"\n\n\
             [[arms]]\nname = \"b\"\nsetup = \"echo setup b >> {log}; echo no disk left >&2; exit 3\"\n\
             command = \"echo cell $LCX_ARM >> {log}\"\n",
            log = log.display()
        ),
    );
    let db = dir.path().join("lcx.db");
    let out = lcx()
        .arg("run")
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "setup a",
            "prepare a 1",
            "cell a 1",
            "setup b",
            "prepare a 2",
            "cell a 2",
            "cleanup a cleanup",
            "cleanup b cleanup",
        ],
        "{stderr}"
    );
    let store = Store::open_read_only(&db).unwrap();
    let runs = store.runs(1).unwrap();
    let status = |arm: &str| -> Vec<RunStatus> {
        runs.iter()
            .filter(|r| r.arm == arm)
            .map(|r| r.status)
            .collect()
    };
    assert_eq!(status("a"), [RunStatus::Completed; 2]);
    assert_eq!(status("b"), [RunStatus::Failed; 2]);
    for run in runs.iter().filter(|r| r.arm == "b") {
        let error = run.error.clone().unwrap_or_default();
        assert!(
            error.starts_with("setup `echo setup b")
                && error.ends_with("exited with exit code 3: no disk left"),
            "{error}"
        );
    }
}

/// A failing `prepare` fails that cell alone; a failing `cleanup` is a
/// warning and leaves the cells' records as they were.
#[test]
fn a_failed_prepare_fails_its_cell_and_a_failed_cleanup_warns() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("second");
    let file = write(
        dir.path(),
        "prep.toml",
        &format!(
            "name = \"prep\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 1\n\
             repeats = 2\n\n[[arms]]\nname = \"a\"\ncommand = [\"true\"]\n\
             prepare = \"test $LCX_REPEAT = 1\"\ncleanup = \"echo cannot unmount >&2; false\"\n\
             setup = \"touch {}\"\n",
            flag.display()
        ),
    );
    let db = dir.path().join("lcx.db");
    let out = lcx()
        .arg("run")
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(flag.exists());
    assert!(
        stderr.contains(
            "cleanup `echo cannot unmount >&2; false` exited with exit code 1: cannot unmount"
        ),
        "{stderr}"
    );
    let store = Store::open_read_only(&db).unwrap();
    let runs = store.runs(1).unwrap();
    assert_eq!(runs[0].status, RunStatus::Completed);
    assert_eq!(runs[1].status, RunStatus::Failed);
    assert_eq!(
        runs[1].error.as_deref(),
        Some("prepare `test $LCX_REPEAT = 1` exited with exit code 1")
    );
}

/// Commands lcx times (`timing = "process"`) lead with their wall time:
/// the report's first column, its net result, `lcx history`'s default
/// metric and the JSON's first column, never `process/max_rss_bytes` by
/// the alphabet.
#[test]
fn timed_commands_lead_with_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let file = write(
        dir.path(),
        "t.toml",
        "name = \"timed\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 3\n\
         [[arms]]\nname = \"a\"\ncommand = [\"true\"]\n[[arms]]\nname = \"b\"\ncommand = [\"true\"]\n",
    );
    let run = lcx()
        .args(["run", "--plain"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = report_text(&db);
    let header = text.lines().find(|l| l.starts_with("| Mode")).unwrap();
    assert!(
        header.starts_with("| Mode") && header.contains("wall s"),
        "{header}"
    );
    let first = header.split('|').nth(2).unwrap();
    assert!(first.contains("wall"), "{header}");
    assert!(text.contains("Net result: on wall s"), "{text}");
    let history = lcx()
        .args(["history", "timed", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&history.stdout);
    assert!(out.contains("process/wall_seconds"), "{out}");
    let json = lcx()
        .args(["report", "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["columns"][0]["metric"], "process/wall_seconds");
}
