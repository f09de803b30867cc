//! The store's public contract on real files: the documented table, view
//! and column names exist (sqlite3/pandas users rely on them), migrations
//! are recorded, concurrent openers wait instead of failing, and the
//! runner library reports events in plan order.

use std::collections::BTreeMap;
use std::path::Path;

use lcx_core::experiment::reporter::RecordingReporter;
use lcx_core::experiment::{plan, run as runner, RunnerOptions, StopSignal};
use lcx_core::store::{Fingerprint, SqlValue, Store, LATEST_VERSION};

fn columns(store: &Store, table: &str) -> Vec<String> {
    store
        .query(&format!(
            "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
        ))
        .unwrap()
        .rows
        .into_iter()
        .map(|r| match &r[0] {
            SqlValue::Text(t) => t.clone(),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn documented_schema_names_exist() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db")).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST_VERSION);
    let expect: BTreeMap<&str, &[&str]> = BTreeMap::from([
        (
            "experiments",
            &[
                "id",
                "name",
                "file_text",
                "file_sha256",
                "plan_json",
                "warmup",
                "status",
                "lcx_version",
                "git_commit",
                "git_dirty",
                "cpu_model",
                "cpu_cores",
                "gpu_name",
                "gpu_driver",
                "cuda_version",
                "torch_version",
                "torch_intra_threads",
            ][..],
        ),
        (
            "runs",
            &[
                "id",
                "experiment_id",
                "arm",
                "repeat",
                "attempt",
                "config_toml",
                "config_sha256",
                "command_json",
                "status",
                "exit_code",
                "signal",
                "error",
                "stderr_tail",
                "wall_seconds",
            ][..],
        ),
        (
            "metrics",
            &[
                "run_id",
                "attempt",
                "iteration",
                "name",
                "value",
                "superseded",
            ][..],
        ),
        ("metric_text", &["run_id", "iteration", "name", "value"][..]),
        (
            "reports",
            &["id", "experiment_id", "path", "sha256", "created_at"][..],
        ),
        (
            "run_metric_stats",
            &[
                "experiment_id",
                "run_id",
                "arm",
                "repeat",
                "name",
                "n",
                "mean",
                "min",
                "max",
                "variance",
            ][..],
        ),
        (
            "arm_metric_stats",
            &[
                "experiment_id",
                "arm",
                "name",
                "n",
                "runs",
                "mean",
                "min",
                "max",
                "variance",
            ][..],
        ),
        (
            "metrics_current",
            &[
                "experiment_id",
                "run_id",
                "arm",
                "iteration",
                "name",
                "value",
                "warmup",
            ][..],
        ),
    ]);
    for (table, wanted) in expect {
        let have = columns(&store, table);
        for column in wanted {
            assert!(
                have.iter().any(|c| c == column),
                "{table}.{column} missing: {have:?}"
            );
        }
    }
    let mode = store.query("SELECT * FROM pragma_journal_mode").unwrap();
    assert_eq!(mode.rows[0][0], SqlValue::Text("wal".into()));
}

#[test]
fn concurrent_first_opens_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || Store::open(&path).map(|s| s.schema_version().unwrap()))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), LATEST_VERSION);
    }
}

#[test]
fn runner_library_emits_events_in_interleaved_order() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"
name = "lib"
workload = "command"
iterations = 2
repeats = 2
[[arms]]
name = "x"
command = "echo '{\"t\": 1}'; echo '{\"t\": 2}'"
[[arms]]
name = "y"
command = "echo '{\"t\": 1}'; exit 4"
[[arms]]
name = "z"
requires = "cuda"
command = "true"
"#;
    let file = dir.path().join("e.toml");
    std::fs::write(&file, text).unwrap();
    let (plan, text) = plan::load(&file, &Default::default()).unwrap();
    let mut store = Store::open_in_memory().unwrap();
    let id = runner::create_experiment(
        &mut store,
        &plan,
        &text,
        vec!["test".into()],
        (None, None),
        Fingerprint::default(),
    )
    .unwrap();
    let options = RunnerOptions {
        fail_fast: false,
        lcx_exe: env!("CARGO_BIN_EXE_lcx").into(),
        stop: StopSignal::new(),
        cuda_available: Some(false),
        takeover: false,
        keep_runs: false,
        detach: false,
        attach: false,
        host_lock: None,
        precise_enough: None,
    };
    let mut reporter = RecordingReporter::default();
    let summary = runner::run(&mut store, &plan, id, &options, &mut reporter).unwrap();
    assert_eq!(
        reporter.events,
        vec![
            "started 6",
            "start x#1",
            "completed x#1",
            "start y#1",
            "failed y#1",
            "skipped z#1",
            "start x#2",
            "completed x#2",
            "start y#2",
            "failed y#2",
            "skipped z#2",
            "finished failed",
        ]
    );
    assert_eq!(
        (summary.completed, summary.failed, summary.skipped),
        (2, 2, 2)
    );
    assert!(Path::new(&plan.file).is_absolute());
}

#[test]
fn a_repeated_iteration_is_dropped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e.toml");
    // Both lines arrive in one burst, so they share a transaction: the
    // duplicate must not take the first line down with it.
    std::fs::write(
        &file,
        r#"
name = "dup"
workload = "command"
iterations = 2
[[arms]]
name = "d"
command = "printf '{\"iteration\":1,\"t\":1}\n{\"iteration\":1,\"t\":9}\n{\"iteration\":2,\"t\":2}\n'"
"#,
    )
    .unwrap();
    let (plan, text) = plan::load(&file, &Default::default()).unwrap();
    let mut store = Store::open_in_memory().unwrap();
    let id = runner::create_experiment(
        &mut store,
        &plan,
        &text,
        vec![],
        (None, None),
        Fingerprint::default(),
    )
    .unwrap();
    let options = RunnerOptions {
        fail_fast: false,
        lcx_exe: env!("CARGO_BIN_EXE_lcx").into(),
        stop: StopSignal::new(),
        cuda_available: Some(false),
        takeover: false,
        keep_runs: false,
        detach: false,
        attach: false,
        host_lock: None,
        precise_enough: None,
    };
    let mut reporter = RecordingReporter::default();
    runner::run(&mut store, &plan, id, &options, &mut reporter).unwrap();
    assert!(
        reporter.events.contains(&"warning d".to_string()),
        "{:?}",
        reporter.events
    );
    let run = &store.runs(id).unwrap()[0];
    assert_eq!(
        store.metric_series(run.id, "t").unwrap(),
        vec![(1, 1.0), (2, 2.0)]
    );
    assert!(
        run.error.as_deref().unwrap().contains("repeated"),
        "{run:?}"
    );
}

/// A database written by lcx 0.1.0 (before stored plans carried a
/// version; `tests/fixtures/db/release-0.1.0.toml` says how it was made)
/// reads back: its plan through the one reader, its report with the
/// file's columns and gate, and a resume that finds nothing left to run.
#[test]
fn a_database_from_release_0_1_0_reads_back() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/release-0.1.0.db");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    std::fs::copy(&fixture, &db).unwrap();

    let store = Store::open(&db).unwrap();
    let plan = runner::stored_plan(&store, 1).unwrap();
    assert_eq!(plan.name, "fixture");
    assert_eq!(plan.arms.len(), 2);
    assert_eq!(plan.gate.as_ref().map(|g| g.metric.as_str()), Some("t"));
    drop(store);

    let out = crate::support::lcx()
        .args(["report", "1", "--check", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("PASS"), "{text}");
    assert!(!text.contains("could not be read"), "{text}");

    let out = crate::support::lcx()
        .args(["run", "--resume", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already completed; nothing to resume"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An experiment an older lcx recorded without its cells (killed between
/// its two writes), left running or marked completed, is never "completed"
/// on nothing: `--check` refuses it, and `--resume` plans its cells from
/// the stored plan and runs them, as `--check` says it will.
#[test]
fn an_experiment_without_cells_is_planned_on_resume_and_never_passes() {
    for status in ["running", "completed"] {
        without_cells(status);
    }
}

fn without_cells(status: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let file = crate::support::write(
        dir.path(),
        "e.toml",
        "name = \"e\"\nworkload = \"command\"\niterations = 2\nrepeats = 2\n\
         [[arms]]\nname = \"a\"\ncommand = 'echo \"{\\\"t\\\": 1}\"; echo \"{\\\"t\\\": 2}\"'\n",
    );
    let lcx = |args: &[&str]| {
        crate::support::lcx()
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap()
    };
    let run = lcx(&["run", file.to_str().unwrap(), "--plain"]);
    assert!(run.status.success());
    // What an lcx of one write per table could leave: the experiment, as
    // running, without its cells.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(&format!(
        "DELETE FROM metrics; DELETE FROM runs; UPDATE experiments SET status = '{status}';"
    ))
    .unwrap();
    drop(conn);

    let check = lcx(&["report", "1", "--check"]);
    let out = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(3), "{out}");
    assert!(out.contains("no cells were recorded"), "{status}: {out}");
    assert!(
        out.contains("`lcx run --resume 1` plans and runs them"),
        "{out}"
    );

    let resume = lcx(&["run", "--resume", "1", "--plain"]);
    let err = String::from_utf8_lossy(&resume.stderr);
    assert!(resume.status.success(), "{err}");
    assert!(err.contains("had no cells recorded"), "{err}");
    assert!(err.contains("2 of 2 cells to run"), "{err}");
    let check = lcx(&["report", "1", "--check"]);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// `--db` naming a folder is a usage error (exit 2) that says so, for the
/// commands that write and those that read.
#[test]
fn a_folder_given_as_the_database_is_refused_as_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = crate::support::write(
        dir.path(),
        "e.toml",
        "name = \"e\"\nworkload = \"command\"\niterations = 1\n[[arms]]\nname = \"a\"\ncommand = 'echo \"{\\\"t\\\": 1}\"'\n",
    );
    for args in [
        vec!["run", file.to_str().unwrap()],
        vec!["report"],
        vec!["list"],
    ] {
        let out = crate::support::lcx()
            .args(&args)
            .arg("--db")
            .arg(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("is a directory; --db / LCX_DB names the database file"),
            "{args:?}: {err}"
        );
    }
}
