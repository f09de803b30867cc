//! `lcx import` end to end: real databases made by `lcx run` (command
//! arms), merged, imported twice and into themselves, refused when they are
//! not lcx's, killed with SIGKILL mid-import, and `lcx export --format json`
//! round-tripped into an empty database.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use lcx_core::store::Store;

use crate::support::{count, lcx, succeed, write};

/// Two arms, `a` the baseline, `b` twice as slow; `lines` iterations.
pub(crate) fn experiment(name: &str, lines: u32) -> String {
    format!(
        r#"name = "{name}"
workload = "command"
iterations = {lines}
warmup = 1
repeats = 2
baseline = "a"
host_lock = false

[[arms]]
name = "a"
command = 'i=0; while [ $i -lt {lines} ]; do i=$((i+1)); echo "{{\"t\": 1.$i, \"tag\": \"x\"}}"; done'

[[arms]]
name = "b"
command = 'i=0; while [ $i -lt {lines} ]; do i=$((i+1)); echo "{{\"t\": 2.$i}}"; done'

[gate]
metric = "t"
arm = "b"
max_slowdown = 0.03
"#
    )
}

/// `lcx run FILE --db DB`, on the host `LCX_HOSTNAME` names when given.
pub(crate) fn run(file: &Path, db: &Path, host: Option<&str>) {
    let mut cmd = lcx();
    if let Some(host) = host {
        cmd.env("LCX_HOSTNAME", host);
    }
    succeed(cmd.arg("run").arg("--plain").arg(file).arg("--db").arg(db));
}

/// A database in `dir` holding one run of `name`.
pub(crate) fn database(dir: &Path, name: &str, lines: u32) -> PathBuf {
    let file = write(dir, &format!("{name}.toml"), &experiment(name, lines));
    let db = dir.join(format!("{name}.db"));
    run(&file, &db, None);
    db
}

/// `lcx import FILES… --db DB` with `flags`.
pub(crate) fn lcx_import(flags: &[&str], db: &Path, files: &[&Path]) -> Output {
    lcx()
        .arg("import")
        .args(flags)
        .args(files)
        .arg("--db")
        .arg(db)
        .output()
        .unwrap()
}

pub(crate) fn import(db: &Path, files: &[&Path]) -> Output {
    lcx_import(&[], db, files)
}

pub(crate) fn dry_run(db: &Path, files: &[&Path]) -> Output {
    lcx_import(&["--dry-run"], db, files)
}

/// Row counts of the tables an import fills.
pub(crate) fn counts(db: &Path) -> Vec<i64> {
    let store = Store::open(db).unwrap();
    [
        "experiments",
        "runs",
        "metrics",
        "metric_text",
        "reports",
        "host_peaks",
    ]
    .iter()
    .map(|t| count(&store, &format!("SELECT count(*) FROM {t}")))
    .collect()
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn databases_from_two_hosts_merge_once_and_bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = database(dir.path(), "laptop", 4);
    let b = database(dir.path(), "ci", 4);
    let history = dir.path().join("history.db");

    let source_bytes = std::fs::read(&a).unwrap();
    let out = import(&history, &[&a, &b]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The source is read, never written (not even by a checkpoint).
    assert_eq!(std::fs::read(&a).unwrap(), source_bytes);
    let said = text(&out.stdout);
    assert!(said.contains("1 experiment added (#1 laptop)"), "{said}");
    assert!(said.contains("1 experiment added (#2 ci)"), "{said}");
    let merged = counts(&history);
    assert_eq!(merged[..4], [2, 8, 32, 16], "{merged:?}");

    // Twice, and the history into itself: not one row more.
    let again = import(&history, &[&a, &b, &history]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("0 experiments added; 1 here already"));
    assert_eq!(counts(&history), merged);

    // A dry run lists, and writes nothing (not even a new database).
    let fresh = dir.path().join("fresh.db");
    let dry = dry_run(&fresh, &[&a]);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    assert!(text(&dry.stdout).contains("1 experiment would be added (#1 laptop)"));
    assert!(!fresh.exists());
    let kept = std::fs::read(&history).unwrap();
    let dry = dry_run(&history, &[&a]);
    assert!(text(&dry.stdout).contains("0 experiments would be added; 1 here already"));
    assert_eq!(std::fs::read(&history).unwrap(), kept, "a dry run wrote");
    // Two files holding one new experiment: the dry run says what the
    // import will, the second file judged against what the first adds.
    let copy = dir.path().join("copy-of-laptop.db");
    std::fs::copy(&a, &copy).unwrap();
    let dry = dry_run(&fresh, &[&a, &copy]);
    let said = text(&dry.stdout);
    assert!(
        said.contains("laptop.db: 1 experiment would be added (#1 laptop)"),
        "{said}"
    );
    assert!(
        said.contains("copy-of-laptop.db: 0 experiments would be added; 1 here already"),
        "{said}"
    );
    assert!(!fresh.exists());
    // Into itself, an empty file, a folder that is not there: as the
    // import would have it.
    let itself = text(&dry_run(&history, &[&history]).stdout);
    assert!(
        itself.contains("0 experiments would be added; 2 here already"),
        "{itself}"
    );
    let empty_file = write(dir.path(), "empty.db", "");
    let out = dry_run(&empty_file, &[&a]);
    assert!(
        text(&out.stdout).contains("1 experiment would be added"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(&empty_file).unwrap(), b"");
    let out = dry_run(&dir.path().join("no/such/folder/h.db"), &[&a]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("does not exist"),
        "{}",
        text(&out.stderr)
    );

    // The imported experiment reports as it did where it ran.
    let there = succeed(lcx().args(["report", "1", "--db"]).arg(&a));
    let here = succeed(lcx().args(["report", "1", "--db"]).arg(&history));
    assert_eq!(
        there.replace(a.to_str().unwrap(), "DB"),
        here.replace(history.to_str().unwrap(), "DB")
    );

    // Files lcx does not import: exit 2, the reason, nothing written.
    let notes = write(
        dir.path(),
        "notes.txt",
        "a text file, longer than a header is",
    );
    let foreign = dir.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
        .unwrap();
    let newer = dir.path().join("newer.db");
    std::fs::copy(&a, &newer).unwrap();
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 999")
        .unwrap();
    // lcx's version number on tables that are not lcx's, and an SQLite
    // file with no tables at all.
    let bogus = dir.path().join("bogus.db");
    rusqlite::Connection::open(&bogus)
        .unwrap()
        .execute_batch(&format!(
            "CREATE TABLE experiments (id); PRAGMA user_version = {};",
            lcx_core::store::LATEST_VERSION
        ))
        .unwrap();
    let bare = dir.path().join("bare.db");
    rusqlite::Connection::open(&bare)
        .unwrap()
        .execute_batch("VACUUM")
        .unwrap();
    let cut = dir.path().join("cut.db");
    let bytes = std::fs::read(&a).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let before = std::fs::read(&history).unwrap();
    for (file, why) in [
        (
            &notes,
            "neither an lcx database nor an `lcx export --format json` file",
        ),
        (&foreign, "another program"),
        (&newer, "schema version 999, newer than this lcx"),
        (&bogus, "its tables are not that version's (missing "),
        (&bare, "no lcx schema version"),
        (&cut, "damaged"),
        (&dir.path().join("absent.db"), "no such file"),
    ] {
        // Listed after a good file: that one does not come in either.
        let out = import(&history, &[&b, file]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", file.display());
        assert!(err.contains(why), "{}: {err}", file.display());
        assert!(err.contains(file.to_str().unwrap()), "{err}");
        assert!(text(&out.stdout).is_empty());
        let out = import(&fresh, &[file]);
        assert_eq!(out.status.code(), Some(2));
        assert!(!fresh.exists(), "a refused import made {}", fresh.display());
    }
    assert_eq!(std::fs::read(&history).unwrap(), before);

    let help = succeed(lcx().args(["import", "--help"]));
    for word in ["--dry-run", "lcx export --format json", "one transaction"] {
        assert!(help.contains(word), "{word}: {help}");
    }
}

#[test]
fn a_json_export_imported_into_an_empty_database_reports_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path(), "one", 5);
    let file = write(dir.path(), "two.toml", &experiment("two", 3));
    run(&file, &db, None);
    let export = dir.path().join("all.jsonl");
    succeed(
        lcx()
            .args(["export", "--format", "json", "-o"])
            .arg(&export)
            .arg("--db")
            .arg(&db),
    );
    let copy = dir.path().join("copy.db");
    let out = import(&copy, &[&export]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for id in ["1", "2"] {
        for format in ["markdown", "json"] {
            let report = |at: &Path| {
                succeed(
                    lcx()
                        .args(["report", id, "--format", format, "--db"])
                        .arg(at),
                )
                .replace(at.to_str().unwrap(), "DB")
            };
            assert_eq!(report(&db), report(&copy), "experiment {id}, {format}");
        }
    }
    // Exported again, the copy is the file it came from.
    let again = succeed(
        lcx()
            .args(["export", "--format", "json", "--db"])
            .arg(&copy),
    );
    assert_eq!(again, std::fs::read_to_string(&export).unwrap());
    // The database and its export are one experiment each, not two.
    let out = import(&copy, &[&db]);
    assert!(text(&out.stdout).contains("0 experiments added; 2 here already"));

    // The value lines are the CSV's columns, for pandas.
    let first_value = again
        .lines()
        .find(|l| l.contains(r#""record":"value""#))
        .unwrap();
    let value: serde_json::Value = serde_json::from_str(first_value).unwrap();
    assert_eq!(value["metric"], "t");
    assert_eq!(value["warmup"], true);

    // An export cut short at a line's end, or from before import, is
    // refused with the reason.
    let whole = std::fs::read_to_string(&export).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    let short = write(
        dir.path(),
        "short.jsonl",
        &(lines[..lines.len() - 1].join("\n") + "\n"),
    );
    let values_only = write(
        dir.path(),
        "old.jsonl",
        r#"{"experiment_id":1,"experiment":"one","run_id":1,"arm":"a","repeat":1,"status":"completed","iteration":1,"metric":"t","value":1.1,"warmup":true}"#,
    );
    let empty = dir.path().join("empty.db");
    let twice = write(dir.path(), "twice.jsonl", &format!("{whole}{whole}"));
    for (file, why) in [
        (&twice, "more follows its end line"),
        (&short, "cut short"),
        (&values_only, "export it again with this lcx"),
    ] {
        let out = import(&empty, &[file]);
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
        assert!(!empty.exists());
    }
}

#[test]
fn an_import_killed_at_any_point_leaves_its_database_as_it_was_or_whole() {
    let dir = tempfile::tempdir().unwrap();
    let source = database(dir.path(), "big", 10000);
    let small = database(dir.path(), "small", 3);
    let base = dir.path().join("base.db");
    assert!(import(&base, &[&small]).status.success());
    let before = counts(&base);
    let target = dir.path().join("target.db");

    // How long a whole import takes here, to spread the kills over it.
    std::fs::copy(&base, &target).unwrap();
    let start = Instant::now();
    assert!(import(&target, &[&source]).status.success());
    let whole = start.elapsed();
    let after = counts(&target);
    assert_ne!(before, after);

    let (mut unchanged, mut complete) = (0, 0);
    for trial in 0..20u32 {
        for side in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{side}", target.display()));
        }
        std::fs::copy(&base, &target).unwrap();
        let mut child = lcx()
            .arg("import")
            .arg(&source)
            .arg("--db")
            .arg(&target)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // From the start to past the end of a whole import, in 20 steps.
        std::thread::sleep(whole.mul_f64(f64::from(trial) / 16.0));
        crate::support::signal(child.id(), libc::SIGKILL);
        let _ = child.wait();
        let store = Store::open(&target).unwrap();
        assert_eq!(store.integrity_check().unwrap(), "ok", "trial {trial}");
        drop(store);
        let found = counts(&target);
        if found == before {
            unchanged += 1;
        } else if found == after {
            complete += 1;
        } else {
            panic!("trial {trial}: half an import: {found:?} (before {before:?}, after {after:?})");
        }
        // Whatever the kill left, importing again completes it.
        assert!(import(&target, &[&source]).status.success());
        assert_eq!(counts(&target), after, "trial {trial}");
    }
    eprintln!(
        "kill -9 of an import ({whole:?} whole), 20 trials: {unchanged} left it as it was, \
         {complete} complete"
    );
    assert!(unchanged > 0, "no kill landed before the commit");
}

/// docs/ci.md's workflow, rehearsed by its script: three jobs in fresh
/// folders, merged in order; the third's planted 30 % is the one change.
#[test]
fn the_ci_rehearsal_keeps_a_history_with_the_step_at_the_third_job() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ci-history-rehearsal.sh");
    let lock_dir = crate::support::own_host_lock();
    let mut cmd = std::process::Command::new("sh");
    cmd.arg(&script)
        .arg(&work)
        .env("LCX", env!("CARGO_BIN_EXE_lcx"))
        .env("LCX_HOST_LOCK", &lock_dir)
        .env_remove("LCX_DB");
    if std::env::var_os("LCX_PEAK_CACHE").is_none() {
        cmd.env("LCX_PEAK_CACHE", lock_dir.with_extension("peak.json"));
    }
    let out = cmd.output().unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}\n{}", text(&out.stderr));
    for job in [
        "job 1: gate exit 0",
        "job 2: gate exit 0",
        "job 3: gate exit 1",
    ] {
        assert!(said.contains(job), "{said}");
    }
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("history.json")).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    let ids: Vec<i64> = rows
        .iter()
        .map(|r| r["experiment_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3], "one point per job, in order");
    assert!(rows[0]["change"].is_null());
    assert_ne!(rows[1]["change"]["verdict"], "regressed", "{}", rows[1]);
    assert_eq!(rows[2]["change"]["verdict"], "regressed", "{}", rows[2]);
    let rel = rows[2]["change"]["relative_change"].as_f64().unwrap();
    assert!((rel - 0.3).abs() < 0.02, "{rel}");
    assert!(rows.iter().all(|r| r["host"] == "rehearsal-runner"));
    // The published history has the three jobs.
    let site = std::fs::read_to_string(work.join("site/index.html")).unwrap();
    assert!(site.contains("ci-bench"), "{site}");
}

/// Two copies of a database from before uuids (lcx 0.1.0's), upgraded
/// apart, name its experiment alike: importing the old file itself into
/// one of them (it is upgraded in a scratch copy, never written) finds it
/// there already.
#[test]
fn copies_of_an_older_database_upgraded_apart_are_one_experiment() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/release-0.1.0.db");
    let dir = tempfile::tempdir().unwrap();
    let uuid = |db: &Path| -> String {
        let store = Store::open(db).unwrap();
        match &store.query("SELECT uuid FROM experiments").unwrap().rows[0][0] {
            lcx_core::store::SqlValue::Text(t) => t.clone(),
            other => panic!("{other:?}"),
        }
    };
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    std::fs::copy(&fixture, &a).unwrap();
    std::fs::copy(&fixture, &b).unwrap();
    let named = uuid(&a);
    assert_eq!(named, uuid(&b));
    assert_eq!(&named[14..15], "8", "a version-8 uuid: {named}");
    let old = dir.path().join("old.db");
    std::fs::copy(&fixture, &old).unwrap();
    let before = std::fs::read(&old).unwrap();
    let out = import(&a, &[&old]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("0 experiments added; 1 here already"));
    assert_eq!(
        std::fs::read(&old).unwrap(),
        before,
        "the source was written"
    );
}

/// One experiment run on two hosts: one table with a Host column, or one
/// per host, or one host's alone.
#[test]
fn history_keeps_hosts_apart_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "x.toml", &experiment("x", 4));
    let history = dir.path().join("history.db");
    let mut dbs = Vec::new();
    for host in ["box-a", "box-b"] {
        let db = dir.path().join(format!("{host}.db"));
        run(&file, &db, Some(host));
        dbs.push(db);
    }
    // The later run imported first: history keeps the order they ran in.
    assert!(import(&history, &[&dbs[1], &dbs[0]]).status.success());
    let h = |args: &[&str]| {
        lcx()
            .arg("history")
            .arg("x")
            .args(args)
            .arg("--db")
            .arg(&history)
            .output()
            .unwrap()
    };
    let all = text(&h(&["--arm", "b"]).stdout);
    assert!(
        all.contains("| Host ") && all.contains("box-a") && all.contains("box-b"),
        "{all}"
    );
    assert!(all.contains("new host: not compared"), "{all}");
    let (at_a, at_b) = (all.find("box-a").unwrap(), all.find("box-b").unwrap());
    assert!(at_a < at_b, "box-a ran first:\n{all}");
    let one = text(&h(&["--arm", "b", "--host", "box-b"]).stdout);
    assert!(!one.contains("box-a") && !one.contains("| Host "), "{one}");
    assert_eq!(one.matches("| #").count(), 1, "{one}");
    let per = text(&h(&["--arm", "b", "--per-host"]).stdout);
    assert!(
        per.contains("Host `box-b`:") && per.contains("Host `box-a`:"),
        "{per}"
    );
    assert!(!per.contains("new host"), "{per}");
    let wrong = h(&["--host", "box-c"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        text(&wrong.stderr).contains(
            "--host box-c: no experiment named `x` ran there; it ran on `box-b`, `box-a`"
        ),
        "{}",
        text(&wrong.stderr)
    );
    // A host name is the user's text: escaped in the table and the
    // per-host heading. One with a control character is refused, by `lcx
    // run` (LCX_HOSTNAME) and by an import alike.
    let hostile = dir.path().join("hostile.db");
    run(&file, &hostile, Some("x`|y"));
    assert!(import(&history, &[&hostile]).status.success());
    let per = text(&h(&["--arm", "b", "--per-host"]).stdout);
    assert!(per.contains("Host ``x`|y``:"), "{per}");
    let all = text(&h(&["--arm", "b"]).stdout);
    assert!(all.contains("| x\\`\\|y "), "{all}");
    let conn = rusqlite::Connection::open(&hostile).unwrap();
    conn.execute(
        "UPDATE experiments SET hostname = 'x' || char(27) || '[31m', uuid = 'ab'",
        [],
    )
    .unwrap();
    drop(conn);
    let out = import(&history, &[&hostile]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("experiments.hostname of row 1 is not a name"),
        "{err}"
    );
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn list_and_the_site_name_the_host_each_experiment_ran_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "x.toml", &experiment("x", 3));
    let merged = dir.path().join("merged.db");
    let mut dbs = Vec::new();
    for host in ["laptop", "ci-runner"] {
        let db = dir.path().join(format!("{host}.db"));
        run(&file, &db, Some(host));
        dbs.push(db);
    }
    assert!(import(&merged, &[&dbs[0], &dbs[1]]).status.success());
    let table = succeed(lcx().arg("list").arg("--db").arg(&merged));
    assert!(table.contains("| Host "), "{table}");
    assert!(
        table.contains("| laptop ") && table.contains("| ci-runner "),
        "{table}"
    );
    let json = succeed(
        lcx()
            .args(["list", "--format", "json", "--db"])
            .arg(&merged),
    );
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut hosts: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap())
        .collect();
    hosts.sort_unstable();
    assert_eq!(hosts, ["ci-runner", "laptop"], "{json}");
    let site = dir.path().join("site");
    succeed(lcx().arg("publish").arg(&site).arg("--db").arg(&merged));
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    for host in ["laptop", "ci-runner"] {
        assert!(index.contains(&format!("data-host=\"{host}\"")), "{index}");
        assert!(
            index.contains(&format!("<option>{host}</option>")),
            "{index}"
        );
    }
}

/// Another benchmarking tool's JSON, written over many lines or on one, is
/// refused for what it is (the tool named from the file's shape, never its
/// name), never as "line 1 is not JSON" about valid JSON; exit 2 and the
/// history byte-identical (issue 79's refusals).
#[test]
fn another_tools_json_is_named_and_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let made = lcx()
        .args([
            "run",
            "--command",
            "true",
            "--runs",
            "2",
            "--repeats",
            "1",
            "--db",
        ])
        .arg(&history)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap();
    let files = [
        (
            "hf.json",
            pretty(
                serde_json::json!({"results": [{"command": "sleep 0.1", "mean": 0.1,
                "stddev": 0.001, "times": [0.1, 0.1], "exit_codes": [0, 0]}]}),
            ),
            "it is a hyperfine `--export-json` file, which lcx does not import",
        ),
        (
            "pyperf.json",
            serde_json::json!({"version": "1.0", "metadata": {"hostname": "x"},
                "benchmarks": [{"runs": [{"values": [0.1]}]}]})
            .to_string(),
            "it is a pyperf JSON file, which lcx does not import",
        ),
        (
            "results.json",
            pretty(
                serde_json::json!({"machine_info": {"node": "x"}, "commit_info": {},
                "benchmarks": [{"name": "test_a", "stats": {"mean": 0.1}}]}),
            ),
            "it is a pytest-benchmark `--benchmark-json` file",
        ),
        (
            "gbench.json",
            pretty(serde_json::json!({"context": {"host_name": "x"},
                "benchmarks": [{"name": "BM_a", "real_time": 10.0}]})),
            "it is a Google Benchmark `--benchmark_format=json` file",
        ),
        (
            "other.json",
            pretty(serde_json::json!({"anything": [1, 2]})),
            "it is JSON that is none of what lcx imports",
        ),
    ];
    let before = std::fs::read(&history).unwrap();
    for (name, body, said) in files {
        let file = write(dir.path(), name, &body);
        let out = import(&history, &[&file]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(said), "{name}: {err}");
        assert!(!err.contains("is not JSON"), "{name}: {err}");
        assert!(
            err.contains("lcx imports lcx databases and `lcx export --format json` files"),
            "{name}: {err}"
        );
        assert_eq!(
            std::fs::read(&history).unwrap(),
            before,
            "{name} changed the history"
        );
    }
}
