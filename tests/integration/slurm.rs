//! Cells as Slurm jobs on a real one-node cluster (`scripts/slurm-cluster.sh
//! start`; `.ci/run` starts one and sets `LCX_SLURM_TESTS=1`). Without
//! that variable these tests say so and return; with it and no working
//! cluster they fail.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lcx::store::{SqlValue, Store};

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
    drop(store);
    let store = Store::open_read_only(&dir.path().join("local.db")).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE host IS NOT NULL AND slurm_job IS NULL"
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
