//! Cells as Slurm jobs on a real one-node cluster (`scripts/slurm-cluster.sh
//! start`; `.ci/run` starts one and sets `LCX_SLURM_TESTS=1`). Without
//! that variable these tests say so and return; with it and no working
//! cluster they fail.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lcx_core::store::{SqlValue, Store};

use crate::support::{count, lcx, signal, wait_for_rows, write};

/// The Slurm tests share one node of two CPUs and one of them sets it
/// down: they run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether the Slurm tests run here; panics when asked for and no
/// cluster answers.
fn cluster() -> bool {
    if std::env::var_os("LCX_SLURM_TESTS").is_none_or(|v| v.is_empty()) {
        eprintln!("slurm tests skipped: start scripts/slurm-cluster.sh and set LCX_SLURM_TESTS=1");
        return false;
    }
    let out = Command::new("sinfo").args(["-h", "-o", "%T"]).output();
    match out {
        Ok(o) if o.status.success() => true,
        other => panic!("LCX_SLURM_TESTS is set but sinfo fails: {other:?}"),
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A command experiment of two arms whose lines are a function of arm,
/// repeat and iteration only, so that two executors must store the same.
fn smoke(dir: &Path, name: &str, extra: &str) -> std::path::PathBuf {
    let arm = |name: &str, scale: &str| {
        format!(
            "\n[[arms]]\nname = \"{name}\"\ncommand = 'i=1; while [ $i -le $LCX_ITERATIONS ]; do echo \"{{\\\"iteration\\\": $i, \\\"time/iteration_seconds\\\": {scale}.$LCX_REPEAT$i}}\"; i=$((i+1)); done'\n"
        )
    };
    write(
        dir,
        &format!("{name}.toml"),
        &format!(
            "name = \"{name}\"\nworkload = \"command\"\niterations = 3\nwarmup = 1\nrepeats = 3\n{extra}\n{}{}",
            arm("a", "1"),
            arm("b", "2")
        ),
    )
}

fn rows(db: &Path) -> Vec<Vec<SqlValue>> {
    let store = Store::open_read_only(db).unwrap();
    store
        .query(
            "SELECT r.arm, r.repeat, r.status, m.iteration, m.name, m.value \
             FROM runs r JOIN metrics_current m ON m.run_id = r.id ORDER BY 1, 2, 4, 5",
        )
        .unwrap()
        .rows
}

#[test]
fn a_smoke_experiment_through_slurm_lands_the_rows_it_lands_locally() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = smoke(dir.path(), "smoke-slurm", "");
    let run = |executor: &str, db: &str| {
        let out = lcx()
            .args([
                "run",
                file.to_str().unwrap(),
                "--plain",
                "--executor",
                executor,
                "--db",
                db,
            ])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{executor}: {}", text(&out));
        out
    };
    run("local", "local.db");
    let out = run("slurm", "slurm.db");
    assert!(text(&out).contains("Slurm job"), "{}", text(&out));
    let (local, slurm) = (
        rows(&dir.path().join("local.db")),
        rows(&dir.path().join("slurm.db")),
    );
    assert_eq!(local.len(), 2 * 3 * 3);
    assert_eq!(local, slurm);
    // Every cell says where it ran; Slurm cells also as which job.
    let store = Store::open_read_only(&dir.path().join("slurm.db")).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE host IS NOT NULL AND slurm_job GLOB '[0-9]*'"
        ),
        6
    );
    // Each job recorded its node's hardware, its folder and how long its
    // command ran there.
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE json_extract(node_json, '$.hostname') = host \
             AND json_extract(node_json, '$.cpus') >= 1 AND slurm_dir IS NOT NULL \
             AND wall_seconds >= 0"
        ),
        6
    );
    drop(store);
    let store = Store::open_read_only(&dir.path().join("local.db")).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE host IS NOT NULL AND slurm_job IS NULL \
             AND json_extract(node_json, '$.hostname') = host"
        ),
        6
    );
    drop(store);
    let out = lcx()
        .args(["report", "--db", "slurm.db"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(text(&out).contains("Slurm job"), "{}", text(&out));
    assert!(
        text(&out).contains("/job.sh>)"),
        "the report links each job script"
    );
    assert!(text(&out).contains("cells of `a` ran on"), "{}", text(&out));
    // Each cell's job script is kept; with the default placement
    // (same-node) every cell after the first is pinned to the first's node.
    let folders: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path().join("runs/slurm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 6);
    let script = |run: i64| {
        let prefix = format!("run-{run}-attempt-1-pid");
        let folder = folders
            .iter()
            .find(|f| {
                f.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .unwrap_or_else(|| panic!("no {prefix}* in {folders:?}"));
        std::fs::read_to_string(folder.join("job.sh")).unwrap()
    };
    assert!(!script(1).contains("--nodelist"), "{}", script(1));
    let node = String::from_utf8_lossy(
        &Command::new("sinfo")
            .args(["-h", "-o", "%n"])
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .to_string();
    for run in 2..=6 {
        let text = script(run);
        assert!(
            text.contains(&format!("#SBATCH --nodelist={node}\n")),
            "{text}"
        );
    }
    // Same verdicts from both.
    let verdicts = |db: &str| {
        let out = lcx()
            .args(["report", "--db", db, "--format", "json"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["arms"][1]["metrics"][0]["comparison"]["verdict"].clone()
    };
    assert_eq!(verdicts("local.db"), verdicts("slurm.db"));
    assert_eq!(verdicts("slurm.db"), "regressed");
}

/// The Slurm job id of run `run_id` of experiment file `name`, once queued.
fn job_of(name: &str, run_id: i64) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new("squeue")
            .args(["-h", "-o", "%i", "-n", &format!("lcx-{name}-{run_id}")])
            .output()
            .unwrap();
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !id.is_empty() {
            return id;
        }
        assert!(
            Instant::now() < deadline,
            "no job for run {run_id} of {name}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sleeper(dir: &Path, name: &str, extra: &str) -> std::path::PathBuf {
    write(
        dir,
        &format!("{name}.toml"),
        &format!(
            "name = \"{name}\"\nworkload = \"command\"\niterations = 2\n\
             [executor]\nkind = \"slurm\"\n{extra}\n\
             [[arms]]\nname = \"slow\"\n\
             command = 'echo \"{{\\\"iteration\\\": 1, \\\"t\\\": 1}}\"; sleep 300; echo \"{{\\\"iteration\\\": 2, \\\"t\\\": 1}}\"'\n"
        ),
    )
}

/// Starts `lcx run` on a sleeper experiment and waits for its job's first
/// line; returns the runner and the job id.
fn start_sleeper(dir: &Path, name: &str, db: &Path) -> (std::process::Child, String) {
    let file = sleeper(dir, name, "");
    let child = lcx()
        .args([
            "run",
            file.to_str().unwrap(),
            "--plain",
            "--db",
            db.to_str().unwrap(),
        ])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_rows(db, "SELECT COUNT(*) FROM metrics", 1);
    (child, job_of(name, 1))
}

fn status_of(db: &Path) -> (String, String) {
    let store = Store::open_read_only(db).unwrap();
    let row = store
        .query("SELECT status, COALESCE(error, '') FROM runs WHERE id = 1")
        .unwrap()
        .rows[0]
        .clone();
    match (&row[0], &row[1]) {
        (SqlValue::Text(s), SqlValue::Text(e)) => (s.clone(), e.clone()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn scancel_interrupts_and_a_time_limit_fails_the_cell() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Cancelled from outside lcx: interrupted, first line kept.
    let db = dir.path().join("c.db");
    let (child, job) = start_sleeper(dir.path(), "cancelled", &db);
    assert!(Command::new("scancel")
        .arg(&job)
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (status, error) = status_of(&db);
    assert_eq!(status, "interrupted", "{error}");
    assert!(error.contains("job cancelled"), "{error}");

    // Over its time limit (1 minute; Slurm ends it within about 90 s).
    let file = sleeper(dir.path(), "timeout", "time = \"1\"");
    let db = dir.path().join("t.db");
    let out = lcx()
        .args([
            "run",
            file.to_str().unwrap(),
            "--plain",
            "--db",
            db.to_str().unwrap(),
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (status, error) = status_of(&db);
    assert_eq!(status, "failed");
    assert!(error.contains("time limit"), "{error}");
}

#[test]
fn ctrl_c_cancels_the_job_and_a_resume_submits_only_what_is_missing() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("slow-now");
    std::fs::write(&marker, "").unwrap();
    // Arm `quick` completes; arm `slow` sleeps while the marker exists.
    let file = write(
        dir.path(),
        "resume.toml",
        &format!(
            "name = \"resume-slurm\"\nworkload = \"command\"\niterations = 2\n\
             [executor]\nkind = \"slurm\"\n\
             [[arms]]\nname = \"quick\"\ncommand = 'echo \"{{\\\"t\\\": 1}}\"; echo \"{{\\\"t\\\": 2}}\"'\n\
             [[arms]]\nname = \"slow\"\n\
             command = 'echo \"{{\\\"t\\\": 1}}\"; while [ -e {} ]; do sleep 0.2; done; echo \"{{\\\"t\\\": 2}}\"'\n",
            marker.display()
        ),
    );
    let db = dir.path().join("lcx.db");
    let child = lcx()
        .args(["run", file.to_str().unwrap(), "--plain"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let job = job_of("resume-slurm", 2);
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics WHERE run_id = 2", 1);
    signal(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    // The job is gone from the queue (cancelled), the cell interrupted.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let q = Command::new("squeue")
            .args(["-h", "-j", &job, "-t", "PD,R,CG"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&q.stdout).trim().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "job {job} still queued");
        std::thread::sleep(Duration::from_millis(200));
    }
    let store = Store::open_read_only(&db).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE arm = 'slow' AND status = 'interrupted'"
        ),
        1
    );
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE arm = 'quick' AND status = 'completed'"
        ),
        1
    );
    drop(store);

    std::fs::remove_file(&marker).unwrap();
    let out = lcx()
        .args(["run", "--resume", "latest", "--plain"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let store = Store::open_read_only(&db).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE status = 'completed'"
        ),
        2
    );
    // Only the interrupted cell was submitted again.
    let folders: Vec<String> = std::fs::read_dir(dir.path().join("runs/slurm"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        folders.iter().any(|f| f.starts_with("run-2-attempt-2-")),
        "{folders:?}"
    );
    assert!(
        !folders.iter().any(|f| f.starts_with("run-1-attempt-2-")),
        "{folders:?}"
    );
}

#[test]
fn a_node_that_goes_down_fails_the_cell_with_node_failure() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("n.db");
    let (child, job) = start_sleeper(dir.path(), "node-down", &db);
    let node = String::from_utf8_lossy(
        &Command::new("squeue")
            .args(["-h", "-j", &job, "-o", "%N"])
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .to_string();
    let scontrol = |state: &str| {
        let mut args = vec![
            "update".to_string(),
            format!("nodename={node}"),
            format!("state={state}"),
        ];
        if state == "down" {
            args.push("reason=lcx-test".into());
        }
        Command::new("scontrol")
            .args(&args)
            .status()
            .unwrap()
            .success()
    };
    assert!(scontrol("down"));
    let out = child.wait_with_output().unwrap();
    // The node may be back by itself already (ReturnToService=2).
    scontrol("resume");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (status, error) = status_of(&db);
    assert_eq!(status, "failed", "{error}");
    assert!(error.contains("node failure"), "{error}");
    // The node takes jobs again for the tests after this one.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !String::from_utf8_lossy(
        &Command::new("sinfo")
            .args(["-h", "-o", "%T"])
            .output()
            .unwrap()
            .stdout,
    )
    .contains("idle")
    {
        assert!(Instant::now() < deadline, "the node did not come back");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `--detach` submits every cell and exits; the experiment reads
/// `detached`; `--attach` ingests what the jobs wrote and follows the
/// rest. A follower killed part-way and a second `--attach` store every
/// line exactly once.
#[test]
fn detach_then_attach_ingests_every_line_once() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (d, db) = (dir.path(), dir.path().join("d.db"));
    let db_arg = db.to_str().unwrap();

    // Not on the local executor: exit 2, nothing written.
    let local = smoke(d, "detach-local", "");
    let out = lcx()
        .args(["run", local.to_str().unwrap(), "--detach", "--db", db_arg])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("kind = \"slurm\""), "{}", text(&out));
    assert!(!db.exists());

    // Cell a#1 prints a line, then waits while the marker exists.
    let marker = d.join("hold");
    std::fs::write(&marker, "").unwrap();
    let file = write(
        d,
        "detached.toml",
        &format!(
            "name = \"detached\"\nworkload = \"command\"\niterations = 2\nrepeats = 2\n\
             [executor]\nkind = \"slurm\"\n\
             [[arms]]\nname = \"a\"\n\
             command = 'echo \"{{\\\"iteration\\\": 1, \\\"t\\\": $LCX_REPEAT}}\"; \
             while [ -e {} ] && [ $LCX_REPEAT = 1 ]; do sleep 0.2; done; \
             echo \"{{\\\"iteration\\\": 2, \\\"t\\\": $LCX_REPEAT}}\"'\n\
             [arms.executor]\ntime = \"5\"\n",
            marker.display()
        ),
    );
    let out = lcx()
        .args([
            "run",
            file.to_str().unwrap(),
            "--detach",
            "--plain",
            "--db",
            db_arg,
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("detached: 2 cells submitted"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("after "),
        "the second job waits for the first: {}",
        text(&out)
    );
    let status = |db: &Path| {
        let store = Store::open_read_only(db).unwrap();
        store.experiment(1).unwrap().unwrap().status.to_string()
    };
    assert_eq!(status(&db), "detached");
    // A resume would submit the cells again beside their jobs: refused.
    let out = lcx()
        .args(["run", "--resume", "1", "--db", db_arg])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--attach 1"), "{}", text(&out));

    // The first follower sees a#1's first line, then dies.
    let mut first = lcx()
        .args(["run", "--attach", "1", "--plain", "--db", db_arg])
        .current_dir(d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 1);
    signal(first.id(), libc::SIGKILL);
    let _ = first.wait();
    assert_eq!(
        status(&db),
        "detached",
        "its jobs run on without a follower"
    );
    std::fs::remove_file(&marker).unwrap();

    let out = lcx()
        .args(["run", "--attach", "1", "--plain", "--db", db_arg])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("1 line(s) already recorded"),
        "{}",
        text(&out)
    );
    assert_eq!(status(&db), "completed");
    let store = Store::open_read_only(&db).unwrap();
    // The arm's own sbatch option is in each of its job scripts.
    for run in store.runs(1).unwrap() {
        let dir = run.slurm_dir.expect("a job folder");
        let script = std::fs::read_to_string(Path::new(&dir).join("job.sh")).unwrap();
        assert!(script.contains("\n#SBATCH --time=5\n"), "{script}");
    }
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM metrics WHERE superseded = 0"),
        4,
        "every line once"
    );
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE status = 'completed' AND attempt = 1 \
             AND error IS NULL AND iterations_done = 2 AND node_json IS NOT NULL"
        ),
        2
    );
    drop(store);
    // Nothing is left to follow.
    let out = lcx()
        .args(["run", "--attach", "1", "--db", db_arg])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// A job Slurm has already forgotten (it ended more than `MinJobAge`
/// ago) ends as its script's exit record says.
#[test]
fn a_job_slurm_has_forgotten_ends_as_its_exit_record_says() {
    if !cluster() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("stdout"), "{\"iteration\": 1}\n").unwrap();
    std::fs::write(dir.path().join("started"), "10.0\n").unwrap();
    std::fs::write(dir.path().join("exit"), "0 12.5\n").unwrap();
    let mut events = Vec::new();
    // No such job: scontrol says "Invalid job id".
    lcx_core::experiment::slurm::follow("4000000000", dir.path(), 1 << 20, false, None, |e| {
        events.push(e);
        true
    });
    let lines = events
        .iter()
        .filter(|e| matches!(e, lcx_core::experiment::slurm::Event::Line(_)))
        .count();
    assert_eq!(lines, 1);
    match events.last() {
        Some(lcx_core::experiment::slurm::Event::Ended(Ok(end))) => {
            assert!(end.success, "{end:?}");
            assert!(end.how.contains("exit record"), "{}", end.how);
        }
        _ => panic!("no end"),
    }
    assert_eq!(
        lcx_core::experiment::slurm::ran_seconds(dir.path()),
        Some(2.5)
    );
    std::fs::remove_file(dir.path().join("exit")).unwrap();
    let mut end = None;
    lcx_core::experiment::slurm::follow("4000000000", dir.path(), 1 << 20, false, None, |e| {
        if let lcx_core::experiment::slurm::Event::Ended(r) = e {
            end = Some(r);
        }
        true
    });
    let err = end.unwrap().unwrap_err();
    assert!(err.contains("no exit record"), "{err}");
}

/// `max_parallel = 2`: every cell is submitted up front as two chains
/// (round 1 on one, round 2 on the other, each round's arms back to back),
/// both rounds run at once, and the coordinator still records every cell.
#[test]
fn max_parallel_runs_rounds_side_by_side_as_chains_of_jobs() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let arm = |name: &str| {
        format!(
            "\n[[arms]]\nname = \"{name}\"\ncommand = 'sleep 2; i=1; while [ $i -le $LCX_ITERATIONS ]; do echo \"{{\\\"iteration\\\": $i, \\\"t\\\": $LCX_REPEAT}}\"; i=$((i+1)); done'\n"
        )
    };
    let file = write(
        dir.path(),
        "wide.toml",
        &format!(
            "name = \"wide\"\nworkload = \"command\"\niterations = 2\nrepeats = 2\n\
             [executor]\nkind = \"slurm\"\nmax_parallel = 2\nplacement = \"any\"\n{}{}",
            arm("a"),
            arm("b")
        ),
    );
    let out = lcx()
        .args(["run", file.to_str().unwrap(), "--plain", "--db", "w.db"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let store = Store::open_read_only(&dir.path().join("w.db")).unwrap();
    let runs = store.runs(1).unwrap();
    assert_eq!(runs.len(), 4);
    assert!(
        runs.iter()
            .all(|r| r.status.to_string() == "completed" && r.iterations_done == 2),
        "{runs:?}"
    );
    let folder = |arm: &str, repeat: i64| {
        let r = runs
            .iter()
            .find(|r| r.arm == arm && r.repeat == repeat)
            .unwrap();
        (
            std::path::PathBuf::from(r.slurm_dir.clone().unwrap()),
            r.slurm_job.clone().unwrap(),
        )
    };
    let read = |p: std::path::PathBuf| -> f64 {
        let t = std::fs::read_to_string(&p).unwrap();
        t.split_whitespace().last().unwrap().parse().unwrap()
    };
    // Each round's second arm waits for its first; the rounds do not wait
    // for each other.
    let (a1, a1_job) = folder("a", 1);
    let (b1, _) = folder("b", 1);
    let (a2, _) = folder("a", 2);
    let b1_script = std::fs::read_to_string(b1.join("job.sh")).unwrap();
    assert!(
        b1_script.contains(&format!("#SBATCH --dependency=afterany:{a1_job}\n")),
        "{b1_script}"
    );
    let a2_script = std::fs::read_to_string(a2.join("job.sh")).unwrap();
    assert!(!a2_script.contains("--dependency"), "{a2_script}");
    // Round 2 started before round 1's first cell ended.
    assert!(
        read(a2.join("started")) < read(a1.join("exit")),
        "rounds ran one after the other"
    );
    // Each cell's time is its command's on the node (about 2 s), not the
    // time the coordinator spent following it.
    for r in &runs {
        let wall = r.wall_seconds.unwrap();
        assert!((1.5..30.0).contains(&wall), "{wall}");
    }
}

/// Ctrl-C of a coordinator with several jobs in flight cancels all of
/// them, the ones it was not following yet included.
#[test]
fn ctrl_c_with_cells_in_flight_cancels_every_job() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "inflight.toml",
        "name = \"inflight\"\nworkload = \"command\"\niterations = 2\nrepeats = 2\n\
         [executor]\nkind = \"slurm\"\nmax_parallel = 2\n\
         [[arms]]\nname = \"slow\"\n\
         command = 'echo \"{\\\"t\\\": 1}\"; sleep 300; echo \"{\\\"t\\\": 2}\"'\n",
    );
    let db = dir.path().join("lcx.db");
    let child = lcx()
        .args(["run", file.to_str().unwrap(), "--plain"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both jobs run (same node, two CPUs); the second is not followed yet.
    job_of("inflight", 2);
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics WHERE run_id = 1", 1);
    signal(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let q = Command::new("squeue")
            .args(["-h", "-n", "lcx-inflight-1,lcx-inflight-2", "-t", "PD,R,CG"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&q.stdout).trim().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "jobs still queued: {q:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let store = Store::open_read_only(&db).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE status = 'interrupted'"
        ),
        2,
        "{}",
        text(&out)
    );
}

/// A one-arm command experiment whose cell prints iteration 1, waits while
/// `marker` exists, then prints iteration 2; `requeue = true`.
fn held_requeueable(dir: &Path, name: &str, marker: &Path) -> std::path::PathBuf {
    write(
        dir,
        &format!("{name}.toml"),
        &format!(
            "name = \"{name}\"\nworkload = \"command\"\niterations = 2\n\
             [executor]\nkind = \"slurm\"\nrequeue = true\n\
             [[arms]]\nname = \"a\"\n\
             command = 'echo \"{{\\\"iteration\\\": 1, \\\"t\\\": 1}}\"; while [ -e {} ]; do sleep 0.2; done; \
             echo \"{{\\\"iteration\\\": 2, \\\"t\\\": 2}}\"'\n",
            marker.display()
        ),
    )
}

/// Waits until `scontrol show job` says `state` for `job`.
fn wait_job_state(job: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !String::from_utf8_lossy(
        &Command::new("scontrol")
            .args(["show", "job", "-o", job])
            .output()
            .unwrap()
            .stdout,
    )
    .contains(&format!("JobState={state}"))
    {
        assert!(Instant::now() < deadline, "job {job} never {state}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Requeues a running job, lets the held cell go on (removes `marker`),
/// and starts the new run at once instead of after Slurm's two-minute hold.
fn requeue_now(job: &str, marker: &Path) {
    let scontrol = |args: &[&str]| {
        let out = Command::new("scontrol").args(args).output().unwrap();
        assert!(out.status.success(), "scontrol {args:?}: {}", text(&out));
    };
    scontrol(&["requeue", job]);
    wait_job_state(job, "PENDING");
    std::fs::remove_file(marker).unwrap();
    // Once the killed run has been cleaned up (starting it sooner makes
    // slurmd refuse the launch).
    std::thread::sleep(Duration::from_secs(2));
    scontrol(&["update", &format!("JobId={job}"), "StartTime=now"]);
}

/// The cell of a requeued job: completed as attempt 2, its first run's
/// line superseded.
fn assert_restarted_once(db: &Path) {
    let store = Store::open_read_only(db).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE status = 'completed' AND attempt = 2 \
             AND iterations_done = 2 AND error IS NULL AND slurm_job IS NOT NULL"
        ),
        1
    );
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM metrics WHERE superseded = 0"),
        2
    );
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM metrics WHERE superseded = 1"),
        1
    );
}

/// `requeue = true`: a job Slurm requeues starts the cell again as a new
/// attempt; what its first run printed is superseded, not counted twice.
#[test]
fn a_requeued_job_starts_the_cell_again_as_a_new_attempt() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("hold");
    std::fs::write(&marker, "").unwrap();
    let file = held_requeueable(dir.path(), "requeue", &marker);
    let db = dir.path().join("lcx.db");
    let child = lcx()
        .args(["run", file.to_str().unwrap(), "--plain"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let job = job_of("requeue", 1);
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 1);
    requeue_now(&job, &marker);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Slurm requeued the job"),
        "{}",
        text(&out)
    );
    assert_restarted_once(&db);
}

/// Ctrl-C cancels the jobs still running; a job that had already ended is
/// left for `--attach`, which ingests it, rather than being called
/// interrupted.
#[test]
fn a_job_that_ended_before_ctrl_c_is_left_for_attach() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Round 1 waits while the marker exists; round 2 (the other chain)
    // ends at once.
    let marker = dir.path().join("hold");
    std::fs::write(&marker, "").unwrap();
    let file = write(
        dir.path(),
        "ended.toml",
        &format!(
            "name = \"ended\"\nworkload = \"command\"\niterations = 1\nrepeats = 2\n\
             [executor]\nkind = \"slurm\"\nmax_parallel = 2\n\
             [[arms]]\nname = \"a\"\n\
             command = 'echo \"{{\\\"t\\\": 1}}\"; while [ $LCX_REPEAT = 1 ] && [ -e {} ]; do sleep 0.2; done'\n",
            marker.display()
        ),
    );
    let db = dir.path().join("lcx.db");
    let child = lcx()
        .args(["run", file.to_str().unwrap(), "--plain"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let second = job_of("ended", 2);
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics WHERE run_id = 1", 1);
    // The second job has ended before the coordinator is stopped.
    wait_job_state(&second, "COMPLETED");
    signal(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(text(&out).contains("--attach 1"), "{}", text(&out));
    let statuses = |db: &Path| -> Vec<String> {
        let store = Store::open_read_only(db).unwrap();
        store
            .runs(1)
            .unwrap()
            .iter()
            .map(|r| r.status.to_string())
            .collect()
    };
    assert_eq!(statuses(&db), ["interrupted", "running"]);
    // `--attach` ingests the ended job and, as a resume does, runs the
    // interrupted cell again.
    std::fs::remove_file(&marker).unwrap();
    let out = lcx()
        .args(["run", "--attach", "1", "--plain"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("following Slurm job"), "{}", text(&out));
    assert_eq!(statuses(&db), ["completed", "completed"]);
    let store = Store::open_read_only(&db).unwrap();
    let attempts: Vec<i64> = store.runs(1).unwrap().iter().map(|r| r.attempt).collect();
    assert_eq!(
        attempts,
        [2, 1],
        "the ended job was ingested, not run again"
    );
}

/// A job Slurm requeued while no coordinator followed it: the cell starts
/// again on `--attach` instead of mixing the two runs' lines.
#[test]
fn a_job_requeued_while_detached_restarts_its_cell_on_attach() {
    if !cluster() {
        return;
    }
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("hold");
    std::fs::write(&marker, "").unwrap();
    let file = held_requeueable(dir.path(), "rqd", &marker);
    let db = dir.path().join("lcx.db");
    let run = |args: &[&str]| {
        lcx()
            .args(args)
            .args(["--plain"])
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&["run", file.to_str().unwrap(), "--detach"]);
    assert!(out.status.success(), "{}", text(&out));
    // A follower ingests the first run's first line, then dies.
    let mut first = lcx()
        .args(["run", "--attach", "1", "--plain"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_rows(&db, "SELECT COUNT(*) FROM metrics", 1);
    signal(first.id(), libc::SIGKILL);
    let _ = first.wait();
    // Requeued and run to its end with nobody following.
    let job = job_of("rqd", 1);
    requeue_now(&job, &marker);
    wait_job_state(&job, "COMPLETED");
    let out = run(&["run", "--attach", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Slurm requeued the job"),
        "{}",
        text(&out)
    );
    assert_restarted_once(&db);
}
