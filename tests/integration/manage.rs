//! `lcx rm` and `lcx rename` on a real database: what they touch, and
//! nothing else.

use std::path::Path;

use lcx_core::store::{RunnerIdentity, Store};

use crate::support::{count, lcx, succeed, write};

/// A two-arm command experiment named `name`, run into `db`.
fn run_experiment(dir: &Path, db: &Path, name: &str) {
    let file = write(
        dir,
        &format!("{name}.toml"),
        &format!(
            "name = \"{name}\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 2\n\
             baseline = \"a\"\n\n[[arms]]\nname = \"a\"\ncommand = [\"true\"]\n\n\
             [[arms]]\nname = \"b\"\ncommand = [\"true\"]\n"
        ),
    );
    succeed(lcx().arg("run").arg(&file).arg("--db").arg(db));
}

/// Rows of every table that holds an experiment's data.
fn rows(db: &Path) -> [i64; 4] {
    let store = Store::open_read_only(db).unwrap();
    [
        count(&store, "SELECT COUNT(*) FROM experiments"),
        count(&store, "SELECT COUNT(*) FROM runs"),
        count(&store, "SELECT COUNT(*) FROM metrics"),
        count(&store, "SELECT COUNT(*) FROM metrics m JOIN runs r ON r.id = m.run_id JOIN experiments e ON e.id = r.experiment_id WHERE e.name = 'other'"),
    ]
}

fn lcx_db(db: &Path, args: &[&str]) -> std::process::Output {
    lcx().args(args).arg("--db").arg(db).output().unwrap()
}

#[test]
fn rm_removes_an_experiment_and_nothing_else_and_rename_moves_a_history() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    for name in ["quick", "quick", "other"] {
        run_experiment(dir.path(), &db, name);
    }
    let before = rows(&db);
    assert_eq!(before[0..2], [3, 6]);
    // A dry run removes nothing and says what would go.
    let dry = lcx_db(&db, &["rm", "quick", "--dry-run"]);
    assert!(dry.status.success());
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(
        said.contains("would remove 2 experiment(s), 4 cell(s)"),
        "{said}"
    );
    assert_eq!(rows(&db), before);
    // One experiment: its rows go, in every table; the others' stay.
    succeed(lcx().args(["rm", "1", "--db"]).arg(&db));
    let after = rows(&db);
    let per_experiment = (before[2] - before[3]) / 2;
    assert_eq!(after, [2, 4, before[2] - per_experiment, before[3]]);
    // A name that matches nothing, or an empty new name: exit 2, no change.
    assert_eq!(lcx_db(&db, &["rm", "nothing"]).status.code(), Some(2));
    assert_eq!(lcx_db(&db, &["rename", "quick", ""]).status.code(), Some(2));
    assert_eq!(rows(&db), after);
    // The remaining `quick` joins `other`'s history.
    let renamed = lcx_db(&db, &["rename", "quick", "other"]);
    assert!(renamed.status.success());
    assert!(String::from_utf8_lossy(&renamed.stdout).contains("one history now"));
    let store = Store::open_read_only(&db).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM experiments WHERE name = 'other'"
        ),
        2
    );
    drop(store);
    // An experiment whose runner is alive (this test's own process, as
    // recorded) is never removed.
    let me = RunnerIdentity::current();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE experiments SET status = 'running', runner_pid = ?1, runner_host = ?2,
             runner_boot_id = ?3, runner_start_ticks = ?4 WHERE id = 2",
        rusqlite::params![me.pid, me.host, me.boot_id, me.start_ticks],
    )
    .unwrap();
    drop(conn);
    let refused = lcx_db(&db, &["rm", "2", "--force"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is being run by lcx"));
    assert_eq!(rows(&db)[0], 2);
}
