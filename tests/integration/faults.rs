//! The runner under faults: children that lie about finishing, print
//! garbage, leave processes behind or hold their pipes; runners killed with
//! SIGKILL or racing each other; database files that are missing, foreign
//! or newer. Real child processes, real SQLite files, real signals.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lcx_core::store::{ExperimentStatus, RunStatus, Store};

use crate::support::{count, lcx, signal, wait_for_rows, write};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run_lcx(args: &[&str]) -> Output {
    lcx().args(args).output().unwrap()
}

/// A command experiment; each arm is (name, shell command, extra arm keys).
fn experiment(name: &str, iterations: u32, extra: &str, arms: &[(&str, &str, &str)]) -> String {
    let mut out =
        format!("name = \"{name}\"\nworkload = \"command\"\niterations = {iterations}\n{extra}\n");
    for (arm, command, keys) in arms {
        let quoted = toml::Value::String((*command).to_string()).to_string();
        out.push_str(&format!(
            "\n[[arms]]\nname = \"{arm}\"\ncommand = {quoted}\n{keys}\n"
        ));
    }
    out
}

/// `n` metric lines, `pause` seconds apart.
fn counting(n: u32, pause: &str) -> String {
    format!(
        r#"i=1; while [ $i -le {n} ]; do echo "{{\"iteration\":$i,\"t\":0.$i}}"; sleep {pause}; i=$((i+1)); done"#
    )
}

/// Whether a process runs (a zombie, killed but not reaped by its new
/// parent, does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_string));
            state.as_deref() != Some("Z")
        }
    }
}

fn read_pid(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(t) = std::fs::read_to_string(path) {
            if let Ok(pid) = t.trim().parse() {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_dead(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

#[test]
fn a_cell_that_exits_0_with_fewer_iterations_than_asked_has_failed() {
    let dir = tempfile::tempdir().unwrap();
    let one = r#"echo '{"iteration":1,"t":1}'"#;
    let file = write(
        dir.path(),
        "e.toml",
        &experiment(
            "short",
            3,
            "",
            &[
                ("full", &counting(3, "0"), ""),
                ("none", "true", ""),
                ("one", one, ""),
                ("variable", one, "variable_iterations = true"),
                ("variable-none", "true", "variable_iterations = true"),
            ],
        ),
    );
    let db = dir.path().join("x.db");
    let out = run_lcx(&["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("short").unwrap();
    assert_eq!(e.status, ExperimentStatus::Failed);
    let runs = store.runs(e.id).unwrap();
    let by = |arm: &str| runs.iter().find(|r| r.arm == arm).unwrap();
    assert_eq!(by("full").status, RunStatus::Completed);
    assert_eq!(by("none").status, RunStatus::Failed);
    let silent = by("none").error.clone().unwrap();
    assert!(
        silent.starts_with("exited 0 after emitting 0 of 3 iterations: a command arm prints")
            && silent.contains("timing = \"process\""),
        "{silent}"
    );
    assert_eq!(by("one").status, RunStatus::Failed);
    assert_eq!(
        by("one").error.as_deref(),
        Some("exited 0 after emitting 1 of 3 iterations")
    );
    assert_eq!(by("one").exit_code, Some(0));
    assert_eq!(
        by("variable").status,
        RunStatus::Completed,
        "declared variable"
    );
    assert_eq!(
        by("variable-none").status,
        RunStatus::Failed,
        "no line at all"
    );

    // A resume re-runs exactly the failed cells.
    let resumed = run_lcx(&["run", "--resume", "latest", "--db", db.to_str().unwrap()]);
    assert_eq!(resumed.status.code(), Some(1));
    let again = store.runs(e.id).unwrap();
    let attempts: Vec<(String, i64)> = again.iter().map(|r| (r.arm.clone(), r.attempt)).collect();
    assert_eq!(
        attempts,
        [
            ("full", 1),
            ("none", 2),
            ("one", 2),
            ("variable", 1),
            ("variable-none", 2)
        ]
        .map(|(a, n)| (a.to_string(), n))
    );
}

#[test]
fn a_cell_the_runner_stopped_is_interrupted_even_when_the_child_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    // A trainer that handles SIGTERM by exiting cleanly, half-way.
    let polite = format!("trap 'exit 0' TERM; {}", counting(50, "0.1"));
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("polite", 50, "", &[("p", &polite, "")]),
    );
    let db = dir.path().join("x.db");
    let child = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 3);
    signal(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let store = Store::open(&db).unwrap();
    let run = &store
        .runs(store.find_experiment("polite").unwrap().id)
        .unwrap()[0];
    assert_eq!(run.status, RunStatus::Interrupted, "{run:?}");
    assert_eq!(run.exit_code, Some(0), "the child did exit 0");
    assert!(run.iterations_done < 50);
}

#[test]
fn malformed_and_non_finite_lines_are_counted_kept_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "lines.txt",
        concat!(
            "{\"iteration\": 1, \"loss\": 0.5, \"t\": 1}\n",
            "{\"iteration\": 2, \"loss\": NaN, \"t\": 1}\n",
            "{\"iteration\": 3, \"loss\": Infinity, \"t\": 1, \"note\": \"NaN stays text\"}\n",
            "{\"iteration\": 4, \"loss\": -Infinity, \"t\": 1e999}\n",
            "{not json\n",
            "{\"iteration\": \"x\", \"t\": 1}\n",
            "plain log line\n",
            "{\"iteration\": 5, \"loss\": 0.25, \"t\": 1}\n",
        ),
    );
    let command = format!("cat {}", script.display());
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("garbage", 5, "", &[("g", &command, "")]),
    );
    let db = dir.path().join("x.db");
    let out = run_lcx(&["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr.matches("a metric line was not stored").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("non-finite values are stored apart").count(),
        1,
        "{stderr}"
    );

    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("garbage").unwrap();
    let run = &store.runs(e.id).unwrap()[0];
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.iterations_done, 5);
    assert_eq!(
        (
            run.problems.malformed,
            run.problems.nonfinite,
            run.problems.overlong
        ),
        (2, 4, 0)
    );
    assert_eq!(
        store.metric_series(run.id, "loss").unwrap(),
        vec![(1, 0.5), (5, 0.25)],
        "only finite values are statistics"
    );
    assert_eq!(
        store.nonfinite_values(e.id).unwrap(),
        vec![
            (run.id, 2, "loss".into(), "NaN".into()),
            (run.id, 3, "loss".into(), "Infinity".into()),
            (run.id, 4, "loss".into(), "-Infinity".into()),
            (run.id, 4, "t".into(), "Infinity".into()),
        ]
    );
    assert!(store.run_texts(run.id).unwrap().contains(&(
        3,
        "note".into(),
        "NaN stays text".into()
    )));
    let tail = run.stderr_tail.as_deref().unwrap();
    assert!(
        tail.contains("{not json") && tail.contains("plain log line"),
        "{tail}"
    );

    let report = run_lcx(&["report", "--db", db.to_str().unwrap()]);
    let md = text(&report.stdout);
    assert!(md.contains("| Malformed lines"), "{md}");
    assert!(
        md.contains(
            "`loss`: NaN at iteration 2; Infinity at iteration 3; -Infinity at iteration 4"
        ),
        "{md}"
    );
}

#[test]
fn a_killed_runner_leaves_an_abandoned_experiment_not_a_running_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("killed", 20, "", &[("a", &counting(20, "0.1"), "")]),
    );
    let db = dir.path().join("x.db");
    let mut child = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 2);
    {
        let store = Store::open_read_only(&db).unwrap();
        let e = store.find_experiment("killed").unwrap();
        assert_eq!(e.status, ExperimentStatus::Running, "its runner lives");
    }
    signal(child.id(), libc::SIGKILL);
    child.wait().unwrap();

    let store = Store::open_read_only(&db).unwrap();
    let e = store.find_experiment("killed").unwrap();
    assert_eq!(e.status, ExperimentStatus::Abandoned);
    assert_eq!(store.runs(e.id).unwrap()[0].status, RunStatus::Abandoned);
    let list = run_lcx(&["list", "--db", db.to_str().unwrap()]);
    assert!(
        text(&list.stdout).contains("| abandoned"),
        "{}",
        text(&list.stdout)
    );
    let report = run_lcx(&["report", "--db", db.to_str().unwrap()]);
    let md = text(&report.stdout);
    assert!(md.contains("abandoned"), "{md}");
    // The stored rows still say what the runner last wrote.
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM experiments WHERE status = 'running'"
        ),
        1
    );
}

#[test]
fn of_two_resumes_at_once_one_runs_the_cells_and_the_other_stops() {
    let dir = tempfile::tempdir().unwrap();
    let arms: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .map(|a| (a.to_string(), counting(8, "0.1")))
        .collect();
    let arms: Vec<(&str, &str, &str)> = arms
        .iter()
        .map(|(a, c)| (a.as_str(), c.as_str(), ""))
        .collect();
    let file = write(dir.path(), "e.toml", &experiment("race", 8, "", &arms));
    let db = dir.path().join("x.db");
    let mut first = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 3);
    signal(first.id(), libc::SIGKILL);
    first.wait().unwrap();

    let resume = || {
        lcx()
            .args([
                "run",
                "--resume",
                "latest",
                "--db",
                db.to_str().unwrap(),
                "--plain",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let one = resume();
    std::thread::sleep(Duration::from_millis(300));
    let two = resume();
    let outs = [
        one.wait_with_output().unwrap(),
        two.wait_with_output().unwrap(),
    ];
    let ran: Vec<&Output> = outs
        .iter()
        .filter(|o| text(&o.stderr).contains("cells to run"))
        .collect();
    assert_eq!(ran.len(), 1, "exactly one resume runs cells: {outs:?}");
    assert_eq!(ran[0].status.code(), Some(0), "{}", text(&ran[0].stderr));
    let other = outs
        .iter()
        .find(|o| !text(&o.stderr).contains("cells to run"))
        .unwrap();
    let said = text(&other.stderr);
    assert!(
        (other.status.code() == Some(1) && said.contains("is being run by lcx pid"))
            || (other.status.code() == Some(0) && said.contains("nothing to resume")),
        "{:?}: {said}",
        other.status
    );
    for o in &outs {
        assert!(
            !text(&o.stderr).contains("already recorded"),
            "{}",
            text(&o.stderr)
        );
    }
    let store = Store::open(&db).unwrap();
    let e = store.find_experiment("race").unwrap();
    assert_eq!(e.status, ExperimentStatus::Completed);
    for r in store.runs(e.id).unwrap() {
        assert_eq!(r.iterations_done, 8, "{r:?}");
        let attempts = count(
            &store,
            &format!(
                "SELECT COUNT(DISTINCT attempt) FROM metrics WHERE run_id = {} AND superseded = 0",
                r.id
            ),
        );
        assert_eq!(attempts, 1);
        let live = count(
            &store,
            &format!(
                "SELECT MAX(attempt) FROM metrics WHERE run_id = {} AND superseded = 0",
                r.id
            ),
        );
        assert_eq!(live, r.attempt, "live rows carry the run's attempt");
    }
}

fn side_files(db: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .map(|s| PathBuf::from(format!("{}{s}", db.display())))
        .filter(|p| p.exists())
        .collect()
}

#[test]
fn missing_foreign_and_newer_databases_are_left_untouched_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("x", 1, "", &[("a", r#"echo '{"t":1}'"#, "")]),
    );
    let missing = dir.path().join("missing.db");
    for args in [
        vec!["run", "--resume", "latest", "--db"],
        vec!["report", "--db"],
        vec!["list", "--db"],
    ] {
        let mut args = args.clone();
        args.push(missing.to_str().unwrap());
        let out = run_lcx(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("missing.db"),
            "{}",
            text(&out.stderr)
        );
        assert!(!missing.exists(), "{args:?} created the database");
        assert!(side_files(&missing).is_empty());
    }

    let make = |name: &str, wal: bool, sql: &str| {
        let path = dir.path().join(name);
        let conn = rusqlite::Connection::open(&path).unwrap();
        if wal {
            conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        }
        conn.execute_batch(sql).unwrap();
        drop(conn);
        assert!(side_files(&path).is_empty());
        path
    };
    let cases = [
        (
            "newer",
            make(
                "newer.db",
                true,
                "CREATE TABLE future (x); PRAGMA user_version = 999;",
            ),
            "newer",
        ),
        (
            "newer-rollback",
            make("newer2.db", false, "PRAGMA user_version = 999;"),
            "newer",
        ),
        (
            "foreign",
            make(
                "foreign.db",
                false,
                "CREATE TABLE experiments (id INTEGER);",
            ),
            "another program",
        ),
        (
            "foreign-wal",
            make(
                "foreign2.db",
                true,
                "CREATE TABLE experiments (id INTEGER);",
            ),
            "another program",
        ),
        (
            "not-sqlite",
            write(dir.path(), "text.db", &"not a database\n".repeat(20)),
            "not an SQLite",
        ),
    ];
    for (what, db, says) in &cases {
        let before = std::fs::read(db).unwrap();
        for args in [
            vec!["run", file.to_str().unwrap(), "--db"],
            vec!["run", "--resume", "latest", "--db"],
            vec!["report", "--db"],
            vec!["list", "--db"],
            vec!["history", "x", "--db"],
            vec!["query", "SELECT 1", "--db"],
        ] {
            let mut args = args.clone();
            args.push(db.to_str().unwrap());
            let out = run_lcx(&args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what} {args:?}: {stderr}");
            assert!(stderr.contains(says), "{what} {args:?}: {stderr}");
            assert_eq!(
                &std::fs::read(db).unwrap(),
                &before,
                "{what} {args:?} changed the file"
            );
            assert!(
                side_files(db).is_empty(),
                "{what} {args:?}: {:?}",
                side_files(db)
            );
        }
    }
}

#[test]
fn what_a_cell_started_does_not_outlive_it() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    // A background process with its own output redirected (so only the
    // group kill can end it), then the cell ends at once.
    let command = format!(
        r#"sleep 300 >/dev/null 2>&1 & echo $! > {}; echo '{{"t":1}}'"#,
        pidfile.display()
    );
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("orphans", 1, "", &[("a", &command, "")]),
    );
    let db = dir.path().join("x.db");
    let out = run_lcx(&["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let grandchild = read_pid(&pidfile);
    assert!(
        wait_dead(grandchild, Duration::from_secs(5)),
        "the cell's background process {grandchild} survived its end"
    );
}

#[test]
fn what_a_cell_started_dies_with_a_killed_runner() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let command = format!(
        r#"sleep 300 >/dev/null 2>&1 & echo $! > {}; echo '{{"iteration":1,"t":1}}'; sleep 300"#,
        pidfile.display()
    );
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("kill9", 2, "", &[("a", &command, "")]),
    );
    let db = dir.path().join("x.db");
    let mut runner = lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 1);
    let grandchild = read_pid(&pidfile);
    assert!(alive(grandchild));
    signal(runner.id(), libc::SIGKILL);
    runner.wait().unwrap();
    assert!(
        wait_dead(grandchild, Duration::from_secs(5)),
        "grandchild {grandchild} survived kill -9 of the runner"
    );
}

#[test]
fn a_process_holding_the_cells_stdout_does_not_hold_the_cell() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("escaped.pid");
    // In the group and holding stdout: the group kill ends it at once.
    // Left the group (setsid) and holding stdout: the runner stops reading
    // after its grace period and says so; the test cleans it up.
    // The child waits for the escapee's pid file, so the escapee has left
    // the group before the child exits and the group is killed.
    let command = format!(
        r#"sleep 30 & setsid sh -c 'echo $$ > {p}; exec sleep 30' & while [ ! -s {p} ]; do sleep 0.01; done; echo '{{"t":1}}'"#,
        p = pidfile.display()
    );
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("held", 1, "", &[("a", &command, "")]),
    );
    let db = dir.path().join("x.db");
    let started = Instant::now();
    let out = run_lcx(&[
        "run",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--plain",
    ]);
    let took = started.elapsed();
    let escaped = read_pid(&pidfile);
    // SAFETY: kill(2) on the test's own escaped sleep (gone already is fine).
    unsafe { libc::kill(escaped, libc::SIGKILL) };
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(took < Duration::from_secs(15), "the runner waited {took:?}");
    assert!(stderr.contains("still holds its stdout"), "{stderr}");
    let store = Store::open(&db).unwrap();
    let run = &store
        .runs(store.find_experiment("held").unwrap().id)
        .unwrap()[0];
    assert_eq!(run.status, RunStatus::Completed);
    assert!(
        run.wall_seconds.unwrap() < 5.0,
        "the cell's time ends when the child exits: {run:?}"
    );
}

/// Runs lcx and returns its output and peak resident memory in KiB.
fn run_measured(args: &[&str]) -> (Output, i64) {
    #[expect(
        clippy::zombie_processes,
        reason = "reaped below with wait4, which also reports its peak memory"
    )]
    let child = lcx()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let stdout = child.stdout.unwrap();
    let stderr = child.stderr.unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut { stdout }, &mut v).unwrap();
        v
    });
    let err_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut { stderr }, &mut v).unwrap();
        v
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with valid out-pointers.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let output = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(code << 8),
        stdout: out_thread.join().unwrap(),
        stderr: err_thread.join().unwrap(),
    };
    (output, usage.ru_maxrss)
}

#[test]
fn a_line_without_end_is_capped_and_the_cell_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let small = write(
        dir.path(),
        "small.toml",
        &experiment("small", 1, "", &[("a", r#"echo '{"t":1}'"#, "")]),
    );
    // 200 MB on stdout and on stderr without a newline, then a metric line.
    let flood = r#"head -c 200000000 /dev/zero | tr '\0' x; head -c 200000000 /dev/zero | tr '\0' y >&2; echo; echo '{"iteration":1,"t":1}'"#;
    let big = write(
        dir.path(),
        "big.toml",
        &experiment("flood", 1, "", &[("a", flood, "")]),
    );
    let db = dir.path().join("x.db");
    let (out, base_kb) =
        run_measured(&["run", small.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (out, flood_kb) =
        run_measured(&["run", big.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("over the 1 MiB line cap"), "{stderr}");
    assert!(
        flood_kb < base_kb + 64 * 1024,
        "the runner grew from {base_kb} KiB to {flood_kb} KiB reading 400 MB of unterminated lines"
    );
    let store = Store::open(&db).unwrap();
    let run = &store
        .runs(store.find_experiment("flood").unwrap().id)
        .unwrap()[0];
    assert_eq!(run.status, RunStatus::Completed);
    // One line over the cap on stdout, one on stderr: both counted.
    assert_eq!(run.problems.overlong, 2);
    assert_eq!(store.metric_series(run.id, "t").unwrap(), vec![(1, 1.0)]);
    let tail = run.stderr_tail.as_deref().unwrap();
    assert!(tail.contains("line of 200000000 bytes cut"), "{tail}");
    assert!(tail.len() < 64 * 1024);
}

#[test]
fn archive_names_from_the_database_stay_inside_the_archive_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("../../escape", 1, "", &[("a", r#"echo '{"t":1}'"#, "")]),
    );
    let db = dir.path().join("x.db");
    let out = run_lcx(&["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let archive = dir.path().join("nested/archive");
    std::fs::create_dir_all(&archive).unwrap();
    for created_at in ["../../x", "/tmp/lcx-escape-test/", "2026-01-01/../../y"] {
        {
            let conn = rusqlite::Connection::open(&db).unwrap();
            conn.execute("UPDATE experiments SET created_at = ?1", [created_at])
                .unwrap();
        }
        let out = run_lcx(&[
            "report",
            "--db",
            db.to_str().unwrap(),
            "--archive",
            "--archive-dir",
            archive.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    assert!(!Path::new("/tmp/lcx-escape-test").exists());
    let mut inside: Vec<String> = Vec::new();
    for entry in walk(dir.path()) {
        let rel = entry
            .strip_prefix(dir.path())
            .unwrap()
            .display()
            .to_string();
        if rel.ends_with(".md") || rel.ends_with(".svg") {
            assert!(
                rel.starts_with("nested/archive/"),
                "{rel} is outside the archive"
            );
            inside.push(rel);
        }
    }
    assert_eq!(
        inside.iter().filter(|p| p.ends_with(".md")).count(),
        3,
        "{inside:?}"
    );
    assert!(inside.iter().all(|p| p.contains("-escape")), "{inside:?}");
    assert!(
        inside.iter().any(|p| p.contains("undated-escape")),
        "{inside:?}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_full_disk_is_reported_with_the_database_path() {
    let dir = tempfile::tempdir().unwrap();
    let lines = "i=1; while [ $i -le 20000 ]; do echo \"{\\\"iteration\\\":$i,\\\"t\\\":$i}\"; i=$((i+1)); done";
    let file = write(
        dir.path(),
        "e.toml",
        &experiment("full", 20000, "", &[("a", lines, "")]),
    );
    let db = dir.path().join("x.db");
    // A file size limit makes SQLite's writes fail as on a full disk; the
    // ignored SIGXFSZ turns the limit into EFBIG for the writer.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 600; exec \"$0\" run {} --db {} --plain",
            file.display(),
            db.display()
        ))
        .arg(env!("CARGO_BIN_EXE_lcx"))
        .env_remove("LCX_DB")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&db.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("disk is full") || stderr.contains("disk I/O error"),
        "{stderr}"
    );
    let store = Store::open_read_only(&db).unwrap();
    let e = store.find_experiment("full").unwrap();
    assert_eq!(e.status, ExperimentStatus::Abandoned, "{stderr}");
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// A tmpfs of `kib` KiB mounted on a temp dir, unmounted when dropped;
/// `None` where this process may not mount (not root, no CAP_SYS_ADMIN).
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(kib: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// Creating the database on a full filesystem names the file and the free
/// space, and leaves no half-made file behind. Needs a tmpfs mount (root,
/// as in CI); elsewhere it says it was skipped.
#[test]
fn a_full_disk_while_creating_the_database_is_named() {
    let Some(disk) = SmallDisk::mount(16) else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = crate::support::write(
        dir.path(),
        "e.toml",
        "name = \"e\"\nworkload = \"command\"\niterations = 1\n\
         [[arms]]\nname = \"a\"\ncommand = 'echo \"{\\\"t\\\": 1}\"'\n",
    );
    // Fill the disk but for a few bytes.
    let filler = disk.dir.path().join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 64 * 1024]);
    let db = disk.dir.path().join("lcx.db");
    let out = crate::support::lcx()
        .args(["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "no space left on device while creating {}",
            db.display()
        )) && err.contains("bytes free)"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(disk.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "filler")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A runner stopped (SIGSTOP) while its cell runs: the child goes on, the
/// runner reads the end only once it runs again, so the cell's wall time
/// holds the pause. The runner measures its own stall, records it beside
/// the wall time, and the report flags the cell.
#[test]
fn a_stopped_runner_is_flagged_beside_the_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let file = write(
        dir.path(),
        "e.toml",
        "name = \"stop\"\nworkload = \"command\"\niterations = 1\n[[arms]]\nname = \"a\"\n\
         command = 'sleep 2; echo \"{\\\"t\\\": 1}\"'\n",
    );
    let mut child = lcx()
        .args(["run", "--plain"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Once the cell runs, stop the runner for 3 s.
    wait_for_rows(&db, "SELECT COUNT(*) FROM runs WHERE status = 'running'", 1);
    signal(child.id(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(3));
    signal(child.id(), libc::SIGCONT);
    assert!(child.wait().unwrap().success());
    let store = Store::open_read_only(&db).unwrap();
    let runs = store.runs(1).unwrap();
    let stall = runs[0].contention.runner_stall_seconds.unwrap();
    let wall = runs[0].wall_seconds.unwrap();
    assert!(stall >= 2.0 && wall >= stall, "stall {stall}, wall {wall}");
    let report = run_lcx(&["report", "--db", db.to_str().unwrap()]);
    let md = text(&report.stdout);
    assert!(md.contains("(runner stopped "), "{md}");
    assert!(md.contains("the runner could not run for"), "{md}");
}
