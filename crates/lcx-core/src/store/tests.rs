//! Unit tests of the store against in-memory and temp-file databases.

use std::collections::BTreeMap;

use super::*;

fn new_experiment(name: &str, warmup: i64) -> NewExperiment {
    NewExperiment {
        name: name.into(),
        description: "d".into(),
        workload: "command".into(),
        file_path: "x.toml".into(),
        file_text: "name = \"x\"".into(),
        file_sha256: "ab".into(),
        plan_json: "{}".into(),
        iterations: 4,
        warmup,
        repeats: 2,
        baseline: Some("a".into()),
        lcx_version: "0.1.0".into(),
        git_commit: None,
        git_dirty: Some(true),
        command_line: vec!["lcx".into(), "run".into()],
        runner: None,
        fingerprint: Fingerprint {
            cpu_cores: Some(2),
            cuda_available: Some(false),
            ..Fingerprint::default()
        },
    }
}

fn new_run(arm: &str, index: i64, repeat: i64) -> NewRun {
    NewRun {
        arm: arm.into(),
        arm_label: arm.to_uppercase(),
        arm_index: index,
        repeat,
        config_toml: None,
        config_sha256: None,
        command: vec!["sh".into(), "-c".into(), "true".into()],
        env: BTreeMap::from([("K".to_string(), "v".to_string())]),
        revision: None,
    }
}

fn line(store: &mut Store, run: i64, attempt: i64, iteration: i64, value: f64) {
    store
        .insert_line(
            run,
            attempt,
            iteration,
            &[("t".to_string(), value)],
            &[("mode".to_string(), "fp32".to_string())],
        )
        .unwrap();
}

#[test]
fn fresh_store_has_latest_schema() {
    let store = Store::open_in_memory().unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST_VERSION);
    const { assert!(LATEST_VERSION >= 1) };
}

#[test]
fn round_trips_experiment_and_runs() {
    let mut store = Store::open_in_memory().unwrap();
    let id = store
        .insert_experiment(&new_experiment("exp", 1), &[])
        .unwrap();
    let ids = store
        .insert_runs(id, &[new_run("a", 0, 1), new_run("b", 1, 1)])
        .unwrap();
    let e = store.experiment(id).unwrap().unwrap();
    assert_eq!(e.name, "exp");
    assert_eq!(e.status, ExperimentStatus::Running);
    assert_eq!(e.git_dirty, Some(true));
    assert_eq!(e.command_line, vec!["lcx", "run"]);
    assert_eq!(e.fingerprint.cpu_cores, Some(2));
    let runs = store.runs(id).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].id, ids[0]);
    assert_eq!(runs[1].arm_label, "B");
    assert_eq!(runs[0].status, RunStatus::Pending);
    assert_eq!(runs[0].env.get("K").map(String::as_str), Some("v"));
    assert_eq!(runs[0].command[0], "sh");

    store
        .set_experiment_status(id, ExperimentStatus::Completed)
        .unwrap();
    let e = store.experiment(id).unwrap().unwrap();
    assert_eq!(e.status, ExperimentStatus::Completed);
    assert!(e.finished_at.is_some());
}

#[test]
fn find_experiment_by_id_name_and_latest() {
    let mut store = Store::open_in_memory().unwrap();
    let a1 = store
        .insert_experiment(&new_experiment("a", 0), &[])
        .unwrap();
    let b = store
        .insert_experiment(&new_experiment("b", 0), &[])
        .unwrap();
    let a2 = store
        .insert_experiment(&new_experiment("a", 0), &[])
        .unwrap();
    assert_eq!(store.find_experiment("latest").unwrap().id, a2);
    assert_eq!(store.find_experiment("a").unwrap().id, a2);
    assert_eq!(store.find_experiment("b").unwrap().id, b);
    assert_eq!(store.find_experiment(&a1.to_string()).unwrap().id, a1);
    assert!(matches!(
        store.find_experiment("nope"),
        Err(StoreError::ExperimentNotFound(_))
    ));
    assert_eq!(store.experiments(Some("a")).unwrap().len(), 2);
    assert_eq!(store.experiments(None).unwrap()[0].id, a2);
}

#[test]
fn lines_views_and_warmup_exclusion() {
    let mut store = Store::open_in_memory().unwrap();
    let id = store
        .insert_experiment(&new_experiment("exp", 1), &[])
        .unwrap();
    let runs = store
        .insert_runs(id, &[new_run("a", 0, 1), new_run("a", 0, 2)])
        .unwrap();
    for &run in &runs {
        let attempt = store.start_run(run).unwrap();
        assert_eq!(attempt, 1);
        // Iteration 1 is warm-up and deliberately an outlier.
        line(&mut store, run, attempt, 1, 100.0);
        line(&mut store, run, attempt, 2, 1.0);
        line(&mut store, run, attempt, 3, 3.0);
    }
    let per_run = store.run_stats(id).unwrap();
    assert_eq!(per_run.len(), 2);
    assert_eq!(per_run[0].n, 2);
    assert_eq!(per_run[0].mean, 2.0);
    assert_eq!(per_run[0].variance, Some(2.0));
    let per_arm = store.arm_stats(id).unwrap();
    assert_eq!(per_arm.len(), 1);
    assert_eq!(
        (per_arm[0].n, per_arm[0].min, per_arm[0].max),
        (4, 1.0, 3.0)
    );
    // Sample variance of [1, 3, 1, 3] = 4/3.
    let var = per_arm[0].variance.unwrap();
    assert!((var - 4.0 / 3.0).abs() < 1e-12, "{var}");
    assert_eq!(
        store.metric_series(runs[0], "t").unwrap(),
        vec![(1, 100.0), (2, 1.0), (3, 3.0)]
    );
    assert_eq!(store.run_texts(runs[0]).unwrap().len(), 3);
    assert_eq!(store.metric_names(id).unwrap(), vec!["t"]);
    assert_eq!(store.run(runs[0]).unwrap().unwrap().iterations_done, 3);
}

#[test]
fn duplicate_iteration_is_refused_whole() {
    let mut store = Store::open_in_memory().unwrap();
    let id = store
        .insert_experiment(&new_experiment("exp", 0), &[])
        .unwrap();
    let run = store.insert_runs(id, &[new_run("a", 0, 1)]).unwrap()[0];
    let attempt = store.start_run(run).unwrap();
    line(&mut store, run, attempt, 1, 1.0);
    let err = store
        .insert_line(
            run,
            attempt,
            1,
            &[("u".into(), 5.0), ("t".into(), 2.0)],
            &[],
        )
        .unwrap_err();
    assert!(matches!(
        err,
        StoreError::DuplicateIteration { iteration: 1, .. }
    ));
    // Nothing of the refused line landed: `u` was rolled back with it.
    assert_eq!(store.run_metrics(run).unwrap().len(), 1);
    assert_eq!(store.run(run).unwrap().unwrap().iterations_done, 1);
}

#[test]
fn restart_supersedes_earlier_attempt() {
    let mut store = Store::open_in_memory().unwrap();
    let id = store
        .insert_experiment(&new_experiment("exp", 0), &[])
        .unwrap();
    let run = store.insert_runs(id, &[new_run("a", 0, 1)]).unwrap()[0];
    let first = store.start_run(run).unwrap();
    line(&mut store, run, first, 1, 9.0);
    line(&mut store, run, first, 2, 9.0);
    store
        .finish_run(
            run,
            &RunOutcome {
                status: RunStatus::Interrupted,
                exit_code: None,
                signal: Some(15),
                error: Some("interrupted".into()),
                stderr_tail: Some("bye".into()),
                wall_seconds: 0.5,
                db_wait_seconds: None,
                problems: Default::default(),
            },
        )
        .unwrap();
    let interrupted = store.run(run).unwrap().unwrap();
    assert_eq!(interrupted.status, RunStatus::Interrupted);
    assert_eq!(interrupted.signal, Some(15));
    assert!(interrupted.status.needs_rerun());

    let second = store.start_run(run).unwrap();
    assert_eq!(second, first + 1);
    // Iteration 1 again: allowed, because the old row is superseded.
    line(&mut store, run, second, 1, 1.0);
    assert_eq!(store.metric_series(run, "t").unwrap(), vec![(1, 1.0)]);
    let total = store.query("SELECT COUNT(*) FROM metrics").unwrap();
    assert_eq!(total.rows[0][0], SqlValue::Integer(3));
    let again = store.run(run).unwrap().unwrap();
    assert_eq!((again.status, again.signal), (RunStatus::Running, None));
}

#[test]
fn a_query_past_its_limit_is_interrupted_and_the_store_stays_writable() {
    let mut store = Store::open_in_memory().unwrap();
    // Counts for ever: only the limit ends it.
    let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                   SELECT COUNT(*) FROM c";
    let limit = std::time::Duration::from_millis(50);
    match store.query_within(endless, Some(limit)) {
        Err(StoreError::Interrupted { after }) => assert_eq!(after, limit),
        other => panic!("expected an interruption, got {other:?}"),
    }
    assert!(!StoreError::Interrupted { after: limit }.is_user_input());
    // The handler is gone and `query_only` off: the next statement runs
    // (with or without a limit), and the store writes again.
    let quick = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) \
                 SELECT COUNT(*) FROM c";
    let r = store
        .query_within(quick, Some(std::time::Duration::from_secs(60)))
        .unwrap();
    assert_eq!(r.rows[0][0], SqlValue::Integer(1000));
    assert_eq!(store.query_within(quick, None).unwrap().rows, r.rows);
    store
        .insert_experiment(&new_experiment("after", 0), &[])
        .unwrap();
}

#[test]
fn query_refuses_writes() {
    let store = Store::open_in_memory().unwrap();
    assert!(matches!(
        store.query("DELETE FROM experiments"),
        Err(StoreError::NotReadOnly(_))
    ));
    let r = store
        .query("SELECT 1 AS one, 'x' AS s, NULL AS n, 2.5 AS f")
        .unwrap();
    assert_eq!(r.columns, vec!["one", "s", "n", "f"]);
    assert_eq!(
        r.rows[0],
        vec![
            SqlValue::Integer(1),
            SqlValue::Text("x".into()),
            SqlValue::Null,
            SqlValue::Real(2.5)
        ]
    );
}

#[test]
fn skip_and_reports() {
    let mut store = Store::open_in_memory().unwrap();
    let id = store
        .insert_experiment(&new_experiment("exp", 0), &[])
        .unwrap();
    let run = store.insert_runs(id, &[new_run("gpu", 0, 1)]).unwrap()[0];
    store.skip_run(run, "requires cuda").unwrap();
    let r = store.run(run).unwrap().unwrap();
    assert_eq!(r.status, RunStatus::Skipped);
    assert_eq!(r.skip_reason.as_deref(), Some("requires cuda"));
    let rep = store
        .insert_report(Some(id), "archive/x.md", "ff", "markdown")
        .unwrap();
    assert_eq!(store.reports(id).unwrap()[0].id, rep);
}

#[test]
fn file_store_refuses_newer_schema_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    {
        let store = Store::open(&path).unwrap();
        assert_eq!(store.integrity_check().unwrap(), "ok");
        store
            .conn
            .execute_batch(&format!("PRAGMA user_version = {}", LATEST_VERSION + 1))
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::TooNew { .. }), "{err}");
    assert!(err.to_string().contains("newer"), "{err}");
    assert!(matches!(
        Store::open_read_only(&path),
        Err(StoreError::TooNew { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn read_only_open_needs_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.db");
    assert!(matches!(
        Store::open_read_only(&path),
        Err(StoreError::Missing(_))
    ));
    assert!(!path.exists());
    drop(Store::open(&path).unwrap());
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(ro.schema_version().unwrap(), LATEST_VERSION);
}

#[test]
fn metric_info_describes_the_stored_metrics_through_glob() {
    let mut store = Store::open_in_memory().unwrap();
    let id = store
        .insert_experiment(&new_experiment("exp", 0), &[])
        .unwrap();
    let run = store.insert_runs(id, &[new_run("a", 0, 1)]).unwrap()[0];
    store
        .insert_line(
            run,
            1,
            1,
            &[
                ("traversal/nodes_per_second".to_string(), 10.0),
                ("eval/random/win_rate0".to_string(), 0.5),
                ("mine/own".to_string(), 1.0),
            ],
            &[],
        )
        .unwrap();
    let q = store
        .query(
            "SELECT m.name, i.unit, i.direction FROM metrics_current m \
             LEFT JOIN metric_info i ON m.name GLOB i.name ORDER BY m.name",
        )
        .unwrap();
    let rows: Vec<String> = q.rows.iter().map(|r| format!("{r:?}")).collect();
    assert_eq!(q.rows.len(), 3, "one vocabulary row per metric: {rows:#?}");
    assert!(
        rows[0].contains("eval/random/win_rate0")
            && rows[0].contains("fraction")
            && rows[0].contains("higher"),
        "{rows:#?}"
    );
    assert!(
        rows[1].contains("mine/own") && rows[1].contains("Null"),
        "{rows:#?}"
    );
    assert!(rows[2].contains("nodes/s"), "{rows:#?}");
    let n = store.query("SELECT COUNT(*) FROM metric_info").unwrap();
    assert_eq!(
        format!("{:?}", n.rows[0][0]),
        format!(
            "{:?}",
            SqlValue::Integer(crate::metrics::VOCABULARY.len() as i64)
        )
    );
}

/// The experiment and its cells are one write: cells that cannot be
/// recorded (here two of `a` #1) leave no experiment behind, so no
/// experiment without its cells can ever be read back.
#[test]
fn an_experiment_is_recorded_with_its_cells_or_not_at_all() {
    let mut store = Store::open_in_memory().unwrap();
    let err = store
        .insert_experiment(
            &new_experiment("exp", 0),
            &[new_run("a", 0, 1), new_run("a", 0, 1)],
        )
        .unwrap_err();
    assert!(err.to_string().contains("UNIQUE"), "{err}");
    assert!(store.experiments(None).unwrap().is_empty());
    let id = store
        .insert_experiment(
            &new_experiment("exp", 0),
            &[new_run("a", 0, 1), new_run("b", 1, 1)],
        )
        .unwrap();
    assert_eq!(store.runs(id).unwrap().len(), 2);
}

/// `--db` naming a folder is the user's mistake, said as such (exit 2),
/// whichever way the database is opened.
#[test]
fn a_folder_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    for open in [Store::open, Store::open_existing, Store::open_read_only] {
        let err = open(dir.path()).map(|_| ()).unwrap_err();
        assert!(matches!(err, StoreError::IsDirectory(_)), "{err}");
        assert!(err.is_user_input());
        assert!(err
            .to_string()
            .contains("is a directory; --db / LCX_DB names the database file"));
    }
}

/// A claim fences the one before it: the replaced runner's next write for
/// the experiment, and its poll, are refused naming the new runner; its
/// rows stay as they were.
#[test]
fn a_newer_claim_fences_the_older_runner() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let mut old = Store::open(&db).unwrap();
    let id = old
        .insert_experiment(&new_experiment("e", 0), &[new_run("a", 0, 1)])
        .unwrap();
    let run = old.runs(id).unwrap()[0].id;
    // The old runner is recorded on a host this one cannot check.
    let mut elsewhere = RunnerIdentity::current();
    elsewhere.host = Some("login-1.example".into());
    old.claim_experiment(id, &elsewhere, false).unwrap();
    let attempt = old.start_run(run).unwrap();
    line(&mut old, run, attempt, 1, 1.0);
    old.check_claim().unwrap();

    // Without --takeover the claim is refused; with it, it is made.
    let mut new = Store::open(&db).unwrap();
    let me = RunnerIdentity::current();
    assert!(matches!(
        new.claim_experiment(id, &me, false),
        Err(StoreError::TakenElsewhere { .. })
    ));
    new.claim_experiment(id, &me, true).unwrap();

    let refused = old
        .insert_line(run, attempt, 2, &[("t".to_string(), 2.0)], &[])
        .unwrap_err();
    assert!(
        matches!(&refused, StoreError::TakenOver { id: i, by } if *i == id && by.contains(&format!("pid {}", me.pid))),
        "{refused}"
    );
    assert!(matches!(
        old.check_claim(),
        Err(StoreError::TakenOver { .. })
    ));
    assert!(old.finish_run(run, &outcome()).is_err());
    assert!(old
        .set_experiment_status(id, ExperimentStatus::Completed)
        .is_err());
    let row = &new.runs(id).unwrap()[0];
    assert_eq!((row.status, row.iterations_done), (RunStatus::Running, 1));
    // The new runner writes as usual.
    new.finish_run(run, &outcome()).unwrap();
}

fn outcome() -> RunOutcome {
    RunOutcome {
        status: RunStatus::Completed,
        exit_code: Some(0),
        signal: None,
        error: None,
        stderr_tail: None,
        wall_seconds: 1.0,
        db_wait_seconds: Some(0.0),
        problems: Default::default(),
    }
}

/// The files beside `path` that SQLite makes.
fn sides(path: &std::path::Path) -> Vec<String> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .filter(|s| {
            let mut p = path.as_os_str().to_owned();
            p.push(s);
            std::path::Path::new(&p).exists()
        })
        .map(|s| s.to_string())
        .collect()
}

/// lcx writes only lcx databases: a file of 1 to 99 bytes (no SQLite file
/// is shorter than its header) is not SQLite to any way of opening it, and
/// stays as it was, with nothing beside it.
#[test]
fn a_short_file_is_not_a_database_and_stays_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for len in [1usize, 2, 50, 99] {
        let path = dir.path().join(format!("short-{len}.db"));
        let bytes = vec![b'x'; len];
        std::fs::write(&path, &bytes).unwrap();
        for open in [Store::open, Store::open_existing, Store::open_read_only] {
            let err = open(&path).map(|_| ()).unwrap_err();
            assert!(matches!(err, StoreError::NotSqlite(_)), "{len}: {err}");
            assert!(err.is_user_input());
        }
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert!(sides(&path).is_empty(), "{:?}", sides(&path));
    }
}

/// An empty file: `lcx run` (Store::open) makes a database in it; every
/// other way of opening refuses it and leaves it empty.
#[test]
fn only_the_runner_makes_a_database_in_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    std::fs::write(&path, b"").unwrap();
    for open in [Store::open_existing, Store::open_read_only] {
        let err = open(&path).map(|_| ()).unwrap_err();
        assert!(matches!(err, StoreError::Empty(_)), "{err}");
        assert!(err.is_user_input());
        assert!(err.to_string().contains("only `lcx run`"), "{err}");
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    assert!(sides(&path).is_empty(), "{:?}", sides(&path));
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST_VERSION);
}

/// A database cut short is damaged, said before SQLite reads it: a clear
/// error of the user's kind (exit 2), the file as it was, no side files.
#[test]
fn a_truncated_database_is_refused_as_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.db");
    {
        let mut store = Store::open(&path).unwrap();
        let id = store
            .insert_experiment(&new_experiment("exp", 0), &[])
            .unwrap();
        let runs = store
            .insert_runs(id, &[new_run("a", 0, 1), new_run("b", 1, 1)])
            .unwrap();
        for i in 1..=200 {
            line(&mut store, runs[0], 1, i, i as f64);
        }
    }
    assert!(sides(&path).is_empty(), "the last close checkpoints");
    let whole = std::fs::read(&path).unwrap();
    std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
    let cut = std::fs::read(&path).unwrap();
    for open in [Store::open, Store::open_existing, Store::open_read_only] {
        let err = open(&path).map(|_| ()).unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{err}");
        assert!(err.is_user_input());
        assert!(err.to_string().contains("cut short"), "{err}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), cut);
    assert!(sides(&path).is_empty(), "{:?}", sides(&path));
}

/// A `user_version` below the schema the file holds: refused before any
/// write (no migration, no switch to WAL), naming what does not match, and
/// without quoting the migrations' SQL.
#[test]
fn a_version_that_does_not_match_the_tables_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.db");
    {
        let store = Store::open(&path).unwrap();
        store
            .conn
            .execute_batch("PRAGMA journal_mode = DELETE; PRAGMA user_version = 5")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).map(|_| ()).unwrap_err();
    assert!(
        matches!(err, StoreError::Inconsistent { found: 5, .. }),
        "{err}"
    );
    assert!(err.is_user_input());
    assert!(err.to_string().contains("not expected"), "{err}");
    assert!(!err.to_string().contains("--"), "no SQL comment: {err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(sides(&path).is_empty(), "{:?}", sides(&path));
    // Read-only commands refuse its version as older than this lcx's.
    assert!(matches!(
        Store::open_read_only(&path),
        Err(StoreError::TooOld { found: 5, .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// `lcx rm --force` from a host that cannot see the runner: the runner's
/// next write (or its poll of a silent cell) says the experiment was
/// removed, instead of "Query returned no rows".
#[test]
fn a_runner_whose_experiment_was_removed_is_told_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let mut runner = Store::open(&db).unwrap();
    let id = runner
        .insert_experiment(&new_experiment("e", 0), &[new_run("a", 0, 1)])
        .unwrap();
    let run = runner.runs(id).unwrap()[0].id;
    let mut elsewhere = RunnerIdentity::current();
    elsewhere.host = Some("login-1.example".into());
    runner.claim_experiment(id, &elsewhere, false).unwrap();
    let attempt = runner.start_run(run).unwrap();
    let mut other = Store::open(&db).unwrap();
    // Without --force the unknown runner keeps its experiment.
    assert!(matches!(
        other.remove_experiments(&[id], false, false),
        Err(StoreError::StillRunning { .. })
    ));
    other.remove_experiments(&[id], true, false).unwrap();
    let err = runner
        .insert_line(run, attempt, 1, &[("t".to_string(), 1.0)], &[])
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Removed { id: i } if i == id),
        "{err}"
    );
    assert!(err.to_string().contains("was removed"), "{err}");
    assert!(matches!(
        runner.check_claim(),
        Err(StoreError::Removed { .. })
    ));
}

/// `lcx rename` judges a live experiment as `lcx rm` does: a runner alive
/// here is never renamed under it; one elsewhere only with --force.
#[test]
fn a_live_experiment_is_not_renamed_under_its_runner() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let mut store = Store::open(&db).unwrap();
    let id = store
        .insert_experiment(&new_experiment("e", 0), &[new_run("a", 0, 1)])
        .unwrap();
    store
        .claim_experiment(id, &RunnerIdentity::current(), false)
        .unwrap();
    let err = store.rename_experiments(&[id], "f", true).unwrap_err();
    assert!(matches!(err, StoreError::StillRunning { .. }), "{err}");
    assert_eq!(store.experiment(id).unwrap().unwrap().name, "e");
    // A runner on a host that cannot be checked: only with force.
    let other = store
        .insert_experiment(&new_experiment("g", 0), &[new_run("a", 0, 1)])
        .unwrap();
    let mut elsewhere = RunnerIdentity::current();
    elsewhere.host = Some("login-1.example".into());
    store.claim_experiment(other, &elsewhere, false).unwrap();
    assert!(matches!(
        store.rename_experiments(&[other], "f", false),
        Err(StoreError::StillRunning { .. })
    ));
    store.rename_experiments(&[other], "f", true).unwrap();
    assert_eq!(store.experiment(other).unwrap().unwrap().name, "f");
}

/// A database file with one finished experiment of two cells and lines.
fn source_db(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.db"));
    let mut store = Store::open(&path).unwrap();
    let id = store
        .insert_experiment(&new_experiment(name, 1), &[])
        .unwrap();
    let runs = store
        .insert_runs(id, &[new_run("a", 0, 1), new_run("b", 1, 1)])
        .unwrap();
    for (k, run) in runs.iter().enumerate() {
        store.start_run(*run).unwrap();
        for i in 1..=4 {
            line(&mut store, *run, 1, i, 1.0 + k as f64 + i as f64 / 10.0);
        }
        store.finish_run(*run, &outcome()).unwrap();
    }
    store
        .set_experiment_status(id, ExperimentStatus::Completed)
        .unwrap();
    path
}

fn counts(store: &Store) -> Vec<i64> {
    ["experiments", "runs", "metrics", "metric_text"]
        .iter()
        .map(|t| {
            store
                .conn
                .query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
                .unwrap()
        })
        .collect()
}

#[test]
fn an_import_adds_each_experiment_once() {
    let dir = tempfile::tempdir().unwrap();
    let a = source_db(dir.path(), "a");
    let mut target = Store::open(&dir.path().join("t.db")).unwrap();
    let first = target.import(&a, false).unwrap();
    assert_eq!(first.added.len(), 1);
    assert_eq!(counts(&target), [1, 2, 8, 8]);
    // Twice, and the target into itself: nothing more.
    let again = target.import(&a, false).unwrap();
    assert!(again.added.is_empty() && again.present.len() == 1);
    let t = dir.path().join("t.db");
    assert!(target.import(&t, false).unwrap().added.is_empty());
    assert_eq!(counts(&target), [1, 2, 8, 8]);
    // A dry run says what would come and writes nothing.
    let b = source_db(dir.path(), "b");
    let dry = target.import(&b, true).unwrap();
    assert_eq!(dry.added.len(), 1);
    assert_eq!(dry.added[0].id, None);
    assert_eq!(counts(&target), [1, 2, 8, 8]);
    target.import(&b, false).unwrap();
    assert_eq!(counts(&target), [2, 4, 16, 16]);
    assert_eq!(target.integrity_check().unwrap(), "ok");
    // A report archived there since: its record comes in, once.
    Store::open(&a)
        .unwrap()
        .insert_report(Some(1), "archive/2026-12-06-a.md", "abc", "markdown")
        .unwrap();
    assert_eq!(target.import(&a, false).unwrap().reports, 1);
    assert_eq!(target.import(&a, false).unwrap().reports, 0);
    let reports = |s: &Store| -> i64 {
        s.conn
            .query_row("SELECT count(*) FROM reports", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(reports(&target), 1);
    assert_eq!(counts(&target), [2, 4, 16, 16]);
}

#[test]
fn an_experiment_changed_since_its_copy_is_refused_and_nothing_comes_in() {
    let dir = tempfile::tempdir().unwrap();
    let a = source_db(dir.path(), "a");
    let copy = dir.path().join("copy.db");
    {
        let store = Store::open(&a).unwrap();
        store
            .conn
            .execute("VACUUM INTO ?1", [copy.to_string_lossy().as_ref()])
            .unwrap();
    }
    // The copy runs on: one more line in its experiment.
    {
        let mut c = Store::open(&copy).unwrap();
        let run: i64 = c
            .conn
            .query_row("SELECT min(id) FROM runs", [], |r| r.get(0))
            .unwrap();
        line(&mut c, run, 1, 5, 9.0);
        let id = c
            .insert_experiment(&new_experiment("more", 1), &[])
            .unwrap();
        c.set_experiment_status(id, ExperimentStatus::Completed)
            .unwrap();
    }
    let mut target = Store::open(&a).unwrap();
    let before = counts(&target);
    let e = target.import(&copy, false).unwrap_err();
    assert!(matches!(e, StoreError::ImportConflict(_)), "{e}");
    assert!(e.is_user_input());
    assert!(e.to_string().contains("experiment #1 `a`"), "{e}");
    assert_eq!(
        counts(&target),
        before,
        "one transaction: nothing of the file"
    );
}

#[test]
fn a_source_that_is_no_lcx_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut target = Store::open(&dir.path().join("t.db")).unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a database at all, and longer than a header").unwrap();
    assert!(target.import(&text, false).unwrap_err().is_user_input());
    let foreign = dir.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let e = target.import(&foreign, false).unwrap_err();
    assert!(matches!(e, StoreError::NotImportable { .. }), "{e}");
    assert!(e.to_string().contains("another program"), "{e}");
    let newer = source_db(dir.path(), "newer");
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch(&format!("PRAGMA user_version = {}", LATEST_VERSION + 1))
        .unwrap();
    let e = target.import(&newer, false).unwrap_err();
    assert!(matches!(e, StoreError::TooNew { .. }), "{e}");
    let truncated = source_db(dir.path(), "cut");
    {
        // Checkpointed into the main file, then cut in half.
        let s = Store::open(&truncated).unwrap();
        s.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let len = std::fs::metadata(&truncated).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&truncated)
        .unwrap();
    f.set_len(len / 2).unwrap();
    assert!(target
        .import(&truncated, false)
        .unwrap_err()
        .is_user_input());
    assert_eq!(counts(&target), [0, 0, 0, 0]);
}

#[test]
fn an_import_keeps_the_higher_ceiling_of_one_host_key() {
    use crate::bench::peak::cache::{Ceiling, HostKey};
    let ceiling = |gflops: f64| Ceiling {
        key: HostKey {
            hostname: "box".into(),
            boot_id: "b1".into(),
            governor: "performance".into(),
            cpu_model: "CPU".into(),
            cpus: "0-1".into(),
        },
        isa: "avx2-fma".into(),
        threads: 2,
        gflops,
        gflops_core: gflops / 2.0,
        stream_gbytes_per_second: 10.0,
        tries: 5,
        spread: 0.01,
        probed_at: "2026-12-06T00:00:00Z".into(),
        checked_at: "2026-12-06T00:00:00Z".into(),
        probes: 1,
        disturbed: false,
    };
    let peak = |s: &Store| -> f64 {
        s.conn
            .query_row("SELECT fp32_gflops FROM host_peaks", [], |r| r.get(0))
            .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let a = source_db(dir.path(), "a");
    Store::open(&a)
        .unwrap()
        .save_host_peak(&ceiling(200.0))
        .unwrap();
    let mut target = Store::open(&dir.path().join("t.db")).unwrap();
    target.save_host_peak(&ceiling(150.0)).unwrap();
    target.import(&a, false).unwrap();
    assert_eq!(peak(&target), 200.0, "a disturbed low probe gives way");
    let b = source_db(dir.path(), "b");
    Store::open(&b)
        .unwrap()
        .save_host_peak(&ceiling(100.0))
        .unwrap();
    target.import(&b, false).unwrap();
    assert_eq!(peak(&target), 200.0, "the higher one stays");
}
