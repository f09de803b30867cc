//! One benchmark per host at a time: `lcx run`s that share a host lock
//! (`LCX_HOST_LOCK`) never run cells at once; `--no-host-lock` and
//! `host_lock = false` do not wait; a killed holder's lock is free.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use lcx_core::store::{SqlValue, Store};

use crate::support::{lcx, signal, wait_for_rows, write};

/// A command experiment of two arms, one cell each, whose cells wait for
/// the file `go` beside it, then run 0.3 s and print their line.
fn gated(dir: &Path, name: &str, extra: &str) -> std::path::PathBuf {
    let cell = toml::Value::String(
        r#"while [ ! -e go ]; do sleep 0.02; done; sleep 0.3; echo '{"iteration":1,"x":1}'"#.into(),
    );
    let text = format!(
        "name = \"{name}\"\nworkload = \"command\"\niterations = 1\nwarmup = 0\n{extra}\n\
         [[arms]]\nname = \"a\"\ncommand = {cell}\n[[arms]]\nname = \"b\"\ncommand = {cell}\n"
    );
    write(dir, &format!("{name}.toml"), &text)
}

fn start(dir: &Path, file: &Path, db: &str, lock: &Path, extra: &[&str]) -> Child {
    lcx()
        .args(["run", file.to_str().unwrap(), "--db", db, "--plain"])
        .args(extra)
        .env("LCX_HOST_LOCK", lock)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child's stderr, line by line as it comes, and all of it at the end.
fn lines_of(child: &mut Child) -> (mpsc::Receiver<String>, std::thread::JoinHandle<String>) {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let all = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap();
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    (rx, all)
}

/// Waits (a minute at most, against a hang) for a line containing `text`.
fn line_with(rx: &mpsc::Receiver<String>, text: &str) -> String {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no line with `{text}`: {e}"));
        if line.contains(text) {
            return line;
        }
    }
}

/// Every cell's (started_at, finished_at) in a database.
fn windows(db: &Path) -> Vec<(String, String)> {
    let store = Store::open_read_only(db).unwrap();
    let rows = store
        .query("SELECT started_at, finished_at FROM runs")
        .unwrap()
        .rows;
    rows.iter()
        .map(|r| match (&r[0], &r[1]) {
            (SqlValue::Text(a), SqlValue::Text(b)) => (a.clone(), b.clone()),
            other => panic!("a cell without its window: {other:?}"),
        })
        .collect()
}

fn succeeded(child: Child, stderr: std::thread::JoinHandle<String>) -> String {
    let out = child.wait_with_output().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[test]
fn two_runs_on_one_host_take_turns_and_the_second_names_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("host.lock");
    let first_file = gated(dir.path(), "first", "");
    let second_file = gated(dir.path(), "second", "");
    let first_db = dir.path().join("first.db");
    let second_db = dir.path().join("second.db");
    let mut first = start(
        dir.path(),
        &first_file,
        first_db.to_str().unwrap(),
        &lock,
        &[],
    );
    let (_, first_err) = lines_of(&mut first);
    // Its first cell is running, so it holds the lock (taken before the
    // cell starts) until `go` appears.
    wait_for_rows(
        &first_db,
        "SELECT COUNT(*) FROM runs WHERE status = 'running'",
        1,
    );
    let mut second = start(
        dir.path(),
        &second_file,
        second_db.to_str().unwrap(),
        &lock,
        &[],
    );
    let (second_lines, second_err) = lines_of(&mut second);
    let waiting = line_with(&second_lines, "waiting for");
    assert!(
        waiting.contains(&format!("experiment `first` (pid {})", first.id())),
        "{waiting}"
    );
    assert!(waiting.contains(lock.to_str().unwrap()), "{waiting}");
    write(dir.path(), "go", "");
    succeeded(first, first_err);
    let second_err = succeeded(second, second_err);
    // Said once, though it may wait before each of its cells.
    assert_eq!(second_err.matches("waiting for").count(), 1, "{second_err}");

    let mut all = windows(&first_db);
    all.extend(windows(&second_db));
    assert_eq!(all.len(), 4);
    all.sort();
    for pair in all.windows(2) {
        // ISO 8601 UTC with milliseconds: text order is time order.
        assert!(
            pair[0].1 <= pair[1].0,
            "cells overlap: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn no_host_lock_and_host_lock_false_do_not_wait_ctrl_c_stops_a_wait_and_a_killed_holder_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("host.lock");
    let holder_file = gated(dir.path(), "holder", "");
    let holder_db = dir.path().join("holder.db");
    let mut holder = start(
        dir.path(),
        &holder_file,
        holder_db.to_str().unwrap(),
        &lock,
        &[],
    );
    let _ = lines_of(&mut holder);
    wait_for_rows(
        &holder_db,
        "SELECT COUNT(*) FROM runs WHERE status = 'running'",
        1,
    );
    // The holder's cell runs until `go` appears, which it never does
    // here: a run that waited for the lock would never end.
    let quick = |name: &str, extra: &str| {
        write(
            dir.path(),
            &format!("{name}.toml"),
            &format!(
                "name = \"{name}\"\nworkload = \"command\"\niterations = 1\nwarmup = 0\n{extra}\n\
                 [[arms]]\nname = \"a\"\ncommand = \"echo '{{\\\"iteration\\\":1,\\\"x\\\":1}}'\"\n"
            ),
        )
    };
    let run = |file: &Path, db: &str, extra: &[&str]| {
        let out = lcx()
            .args(["run", file.to_str().unwrap(), "--db", db, "--plain"])
            .args(extra)
            .env("LCX_HOST_LOCK", &lock)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        assert!(!stderr.contains("waiting for"), "{stderr}");
    };
    run(&quick("flag", ""), "flag.db", &["--no-host-lock"]);
    run(&quick("file", "host_lock = false"), "file.db", &[]);

    // Ctrl-C while waiting stops the run as it stops a cell.
    let mut stopped = start(dir.path(), &quick("stopped", ""), "stopped.db", &lock, &[]);
    let (stopped_lines, stopped_err) = lines_of(&mut stopped);
    line_with(&stopped_lines, "waiting for experiment `holder`");
    signal(stopped.id(), libc::SIGINT);
    let code = stopped.wait().unwrap().code();
    let stopped_err = stopped_err.join().unwrap();
    assert_eq!(code, Some(130), "{stopped_err}");
    assert!(stopped_err.contains("lcx run --resume"), "{stopped_err}");

    // A run that takes the lock waits, until the holder is killed.
    let mut waiter = start(dir.path(), &quick("waiter", ""), "waiter.db", &lock, &[]);
    let (waiter_lines, waiter_err) = lines_of(&mut waiter);
    line_with(&waiter_lines, "waiting for experiment `holder`");
    signal(holder.id(), libc::SIGKILL);
    holder.wait().unwrap();
    succeeded(waiter, waiter_err);
}

/// `host_lock` is a boolean; anything else is refused like any bad key.
#[test]
fn a_host_lock_key_that_is_not_a_boolean_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = gated(dir.path(), "bad", "host_lock = 1");
    let out = Command::new(env!("CARGO_BIN_EXE_lcx"))
        .args(["run", file.to_str().unwrap(), "--db"])
        .arg(dir.path().join("x.db"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("host_lock: must be true or false"),
        "{stderr}"
    );
    assert!(!dir.path().join("x.db").exists());
}
