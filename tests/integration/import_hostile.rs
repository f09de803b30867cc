//! `lcx import` of sources that no lcx wrote as they are: values of other
//! types, schemas changed by hand, another copy under a known uuid,
//! non-finite values, pipes, a full disk, a hot journal, an abandoned
//! experiment, working copies left by a killed import. Each is refused
//! (exit 2) or taken as lcx would record it, with words that name the
//! file, and the target is as it was, or not there when it was not.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use lcx_core::store::Store;

use crate::import::{counts, database, import, text};
use crate::support::{count, lcx, succeed};

/// A copy of the database `base` (made whole by `VACUUM INTO`) with
/// `sql` applied, as `name` in `dir`.
fn mutated(base: &Path, dir: &Path, name: &str, sql: &str) -> PathBuf {
    let copy = dir.join(name);
    let _ = std::fs::remove_file(&copy);
    let conn = rusqlite::Connection::open(base).unwrap();
    conn.execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
        .unwrap();
    drop(conn);
    let conn = rusqlite::Connection::open(&copy).unwrap();
    conn.execute_batch(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    copy
}

/// Asserts `out` is a refusal (exit 2) that says each of `words`, in
/// lcx's words rather than SQLite's codes or rusqlite's column indexes.
fn refused(out: &Output, words: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err} (expected {words:?})");
    for w in words {
        assert!(err.contains(w), "expected `{w}` in: {err}");
    }
    assert!(!err.contains("Error code"), "{err}");
    assert!(!err.contains("at index"), "{err}");
}

/// `lcx export --format json` of `db` into `file`.
fn export_json(db: &Path, file: &Path) -> PathBuf {
    succeed(
        lcx()
            .args(["export", "--format", "json", "-o"])
            .arg(file)
            .arg("--db")
            .arg(db),
    );
    file.to_path_buf()
}

/// `lcx publish` and `lcx export` of every experiment of `db` succeed.
fn still_readable(db: &Path, dir: &Path) {
    let site = dir.join("site");
    succeed(lcx().arg("publish").arg(&site).arg("--db").arg(db));
    succeed(lcx().args(["export", "--format", "json", "--db"]).arg(db));
    succeed(lcx().args(["export", "--format", "csv", "--db"]).arg(db));
}

#[test]
fn a_value_lcx_would_not_write_refuses_the_whole_file_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let base = database(dir.path(), "one", 4);
    let history = dir.path().join("history.db");
    assert!(import(&history, &[&database(dir.path(), "two", 3)])
        .status
        .success());
    let before = std::fs::read(&history).unwrap();
    let cases: &[(&str, &[&str])] = &[
        (
            "UPDATE metrics SET value = 'abc' WHERE rowid = 1",
            &["metrics.value of row 1 holds 'abc'", "a finite number"],
        ),
        (
            "UPDATE metrics SET value = X'0001' WHERE rowid = 2",
            &["metrics.value of row 2 holds X'0001'"],
        ),
        (
            "UPDATE metrics SET iteration = 9300000000000000000 WHERE rowid = 3",
            &["metrics.iteration of row 3", "an integer"],
        ),
        (
            "UPDATE metrics SET value = 9e999 WHERE rowid = 4",
            &["metrics.value of row 4", "metric_nonfinite"],
        ),
        (
            "UPDATE runs SET repeat = 'one' WHERE id = 1",
            &["runs.repeat of row 1 holds 'one'"],
        ),
        (
            "PRAGMA ignore_check_constraints = ON; UPDATE runs SET status = 'done' WHERE id = 2",
            &["runs.status of row 2 holds 'done'", "completed"],
        ),
        ("UPDATE experiments SET uuid = NULL", &["has no uuid"]),
        (
            "UPDATE experiments SET name = printf('%.*c', 100000, 'x')",
            &[
                "experiments.name of row 1 is not a name lcx accepts",
                "at most 200",
            ],
        ),
        (
            "UPDATE runs SET arm = 'a' || char(10) || 'b' WHERE id = 1",
            &["runs.arm of row 1 is not a name"],
        ),
        (
            "UPDATE experiments SET plan_json = '{not json'",
            &["experiments.plan_json of row 1", "JSON"],
        ),
    ];
    for (i, (sql, words)) in cases.iter().enumerate() {
        let bad = mutated(&base, dir.path(), &format!("bad-{i}.db"), sql);
        let fresh = dir.path().join(format!("fresh-{i}.db"));
        let out = import(&fresh, &[&bad]);
        refused(&out, words);
        assert!(text(&out.stderr).contains(bad.to_str().unwrap()));
        assert!(!fresh.exists(), "a failed import left {}", fresh.display());
        let out = import(&history, &[&bad]);
        refused(&out, words);
        assert_eq!(std::fs::read(&history).unwrap(), before, "{sql}");
    }
    still_readable(&history, dir.path());
}

#[test]
fn a_schema_changed_by_hand_is_refused_column_by_column() {
    let dir = tempfile::tempdir().unwrap();
    let base = database(dir.path(), "one", 3);
    let cases: &[(&str, &str)] = &[
        (
            "ALTER TABLE experiments RENAME COLUMN created_at TO made_at",
            "table experiments: no column `created_at`",
        ),
        (
            "ALTER TABLE runs DROP COLUMN rerun_note",
            "table runs: no column `rerun_note`",
        ),
        (
            "ALTER TABLE runs ADD COLUMN extra TEXT",
            "a column `extra` lcx does not make",
        ),
        (
            "DROP INDEX metrics_live;
             CREATE INDEX metrics_live ON metrics (run_id, name, iteration) WHERE superseded = 0",
            "index metrics_live is defined otherwise",
        ),
    ];
    for (i, (sql, words)) in cases.iter().enumerate() {
        let bad = mutated(&base, dir.path(), &format!("bad-{i}.db"), sql);
        let fresh = dir.path().join(format!("fresh-{i}.db"));
        refused(&import(&fresh, &[&bad]), &[words]);
        assert!(!fresh.exists());
    }
    // A view of the user's own is no change to lcx's tables.
    let own = mutated(
        &base,
        dir.path(),
        "own.db",
        "CREATE VIEW mine AS SELECT name FROM experiments",
    );
    assert!(import(&dir.path().join("ok.db"), &[&own]).status.success());
}

#[test]
fn another_copy_under_a_known_uuid_is_refused_whatever_value_differs() {
    let dir = tempfile::tempdir().unwrap();
    let base = database(dir.path(), "one", 4);
    let history = dir.path().join("history.db");
    assert!(import(&history, &[&base]).status.success());
    let merged = counts(&history);
    for (i, sql) in [
        "UPDATE metrics SET value = value * 2",
        "UPDATE metrics SET value = value + 1e-9 WHERE rowid = 5",
        "UPDATE experiments SET name = 'other'",
        "UPDATE runs SET stderr_tail = 'changed' WHERE id = 1",
        "UPDATE metrics SET name = 'u' WHERE name = 't'",
        "UPDATE metric_text SET value = 'y' WHERE rowid = 1",
    ]
    .iter()
    .enumerate()
    {
        let other = mutated(&base, dir.path(), &format!("other-{i}.db"), sql);
        refused(
            &import(&history, &[&other]),
            &["is here already, as #1, with other cells or lines"],
        );
        assert_eq!(counts(&history), merged, "{sql}");
    }
    let same = import(&history, &[&base]);
    assert!(same.status.success(), "{}", text(&same.stderr));
    assert!(text(&same.stdout).contains("1 here already"));
}

#[test]
fn non_finite_values_of_an_export_go_where_the_runner_puts_them() {
    let dir = tempfile::tempdir().unwrap();
    let base = database(dir.path(), "one", 4);
    let export = succeed(
        lcx()
            .args(["export", "--format", "json", "--db"])
            .arg(&base),
    );
    // Two values of arm `a`'s first cell past the warm-up, made infinite
    // as the export tags them.
    let mut changed = 0;
    let lines: Vec<String> = export
        .lines()
        .map(|line| {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            let row = &v["row"];
            if v["table"] == "metrics"
                && row["run_id"] == 1
                && row["iteration"].as_i64() >= Some(2)
                && changed < 2
            {
                let tag = if changed == 0 { "inf" } else { "-inf" };
                v["row"]["value"] = serde_json::json!({ "real": tag });
                changed += 1;
            }
            serde_json::to_string(&v).unwrap()
        })
        .collect();
    assert_eq!(changed, 2);
    let file = dir.path().join("inf.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let target = dir.path().join("t.db");
    let out = import(&target, &[&file]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let store = Store::open(&target).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM metrics WHERE abs(value) > 1e308"
        ),
        0
    );
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM metric_nonfinite WHERE value IN ('Infinity', '-Infinity')"
        ),
        2
    );
    assert_eq!(
        count(&store, "SELECT nonfinite_values FROM runs WHERE id = 1"),
        2
    );
    let report = succeed(
        lcx()
            .args(["report", "--format", "json", "--db"])
            .arg(&target),
    );
    assert!(!report.to_lowercase().contains("inf\""), "{report}");
    // Imported twice, the same: nothing added, nothing refused.
    let again = import(&target, &[&file]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("1 here already"));
}

/// `lcx import FILE --db DB` with standard input from `input`, waited on
/// for at most 20 s (a hang fails the test rather than the suite).
fn import_within(file: &Path, db: &Path, input: Option<&[u8]>) -> Output {
    let mut child = lcx()
        .arg("import")
        .arg(file)
        .arg("--db")
        .arg(db)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = input {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        // The import may refuse before it reads: a closed pipe is fine.
        let _ = stdin.write_all(input);
    }
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("lcx import {} hung", file.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_pipe_is_refused_at_once_never_read_or_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let target = dir.path().join("t.db");
    refused(
        &import_within(&fifo, &target, None),
        &["it is a pipe", "save it to a file"],
    );
    assert!(!target.exists());
    let base = database(dir.path(), "one", 3);
    let export = succeed(
        lcx()
            .args(["export", "--format", "json", "--db"])
            .arg(&base),
    );
    refused(
        &import_within(Path::new("/dev/stdin"), &target, Some(export.as_bytes())),
        &["it is a pipe"],
    );
    assert!(!target.exists());
}

/// A tmpfs of `kb` kB mounted on a new folder, unmounted when dropped:
/// a disk that fills up as a real one does (ENOSPC). `None` where this
/// user may not mount (not root): the test then says it was skipped.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(kb: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kb}k"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk(dir))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

#[test]
fn a_full_disk_is_said_with_the_database_and_leaves_no_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = database(dir.path(), "big", 3000);
    let export = export_json(&base, &dir.path().join("big.jsonl"));
    let Some(disk) = SmallDisk::mount(400) else {
        eprintln!("skipped: a full disk needs a tmpfs, and this user may not mount one");
        return;
    };
    let elsewhere = dir.path().join("t.db");
    for (file, target, words) in [
        // The database on the full disk.
        (
            &base,
            disk.0.path().join("full.db"),
            "no space left on device while importing into",
        ),
        // The working copy of an export (TMPDIR) on it: not the file's fault.
        (
            &export,
            elsewhere,
            "loading an export into its working copy (TMPDIR)",
        ),
    ] {
        let out = lcx()
            .arg("import")
            .arg(file)
            .arg("--db")
            .arg(&target)
            .env("TMPDIR", disk.0.path())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(words), "{err}");
        assert!(!err.contains("Error code"), "{err}");
        assert!(!target.exists(), "{err}");
        // No working copy left on the full disk.
        let left: Vec<_> = std::fs::read_dir(disk.0.path()).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn leftovers_and_half_states_are_said_as_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let base = database(dir.path(), "one", 3);
    // A working copy a killed import left is removed by the next one; a
    // live process's is not.
    let tmp = tempfile::tempdir().unwrap();
    let stale = tmp.path().join("lcx-import-4194999-left");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("export.db"), vec![0u8; 4096]).unwrap();
    let out = lcx()
        .arg("import")
        .arg(&base)
        .arg("--db")
        .arg(dir.path().join("t.db"))
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!stale.exists());

    // An experiment whose runner on this host is gone is abandoned there,
    // not "still running".
    let abandoned = mutated(
        &base,
        dir.path(),
        "abandoned.db",
        "UPDATE experiments SET status = 'running'",
    );
    let out = import(&dir.path().join("a.db"), &[&abandoned]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("1 abandoned there (its runner is gone)"),
        "{said}"
    );
    assert!(!said.contains("still running"), "{said}");

    // A hot rollback journal: a writer that died in mid-transaction.
    let hot = mutated(&base, dir.path(), "hot.db", "PRAGMA journal_mode = DELETE");
    let script = format!(
        "import sqlite3, os\nc = sqlite3.connect({:?}, isolation_level=None)\n\
         c.execute('BEGIN IMMEDIATE')\nc.execute(\"UPDATE experiments SET name = 'half'\")\n\
         c.execute('PRAGMA cache_spill = 1')\nc.execute('PRAGMA cache_size = 1')\n\
         c.execute(\"UPDATE metrics SET value = value + 1\")\nos._exit(0)\n",
        hot.to_str().unwrap()
    );
    let ran = std::process::Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(ran.success());
    let journal = dir.path().join("hot.db-journal");
    assert!(journal.exists(), "no hot journal was left");
    let out = import(&dir.path().join("h.db"), &[&hot]);
    refused(
        &out,
        &[
            "rollback journal",
            "hot.db-journal",
            "stopped in mid-transaction",
        ],
    );
}

#[test]
fn a_signalled_import_takes_its_working_copy_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = database(dir.path(), "big", 20000);
    let export = export_json(&base, &dir.path().join("big.jsonl"));
    let mut caught = 0;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let tmp = tempfile::tempdir().unwrap();
        let target = dir.path().join(format!("t-{signal}.db"));
        let mut child = lcx()
            .arg("import")
            .arg(&export)
            .arg("--db")
            .arg(&target)
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Signalled once its working copy exists, while it loads.
        let start = Instant::now();
        while std::fs::read_dir(tmp.path()).unwrap().count() == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no working copy appeared"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        crate::support::signal(child.id(), signal);
        let status = child.wait().unwrap();
        if status.success() {
            // It finished first: nothing to show this time.
            continue;
        }
        caught += 1;
        assert_eq!(status.code(), Some(130));
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "signal {signal} left {left:?}");
        assert!(!target.exists() || Store::open_read_only(&target).is_ok());
    }
    assert!(caught > 0, "every import ended before its signal");
}
