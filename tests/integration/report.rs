//! `lcx report`, `history`, `compare`, `list` and `query` end to end, on
//! databases written by a real `lcx run` of small `sh` command arms.
//!
//! Their `--check`s pass `--allow-contended`: they are about gates and
//! guards, and the tests running beside them on a small CI host make their
//! cells contended (`runner.rs` tests contention itself).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lcx(db: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lcx"));
    cmd.env("LCX_DB", db);
    cmd.env("LCX_HOST_LOCK", crate::support::own_host_lock());
    cmd
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn run_lcx(db: &Path, dir: &Path, args: &[&str]) -> Output {
    lcx(db).current_dir(dir).args(args).output().unwrap()
}

fn ok(db: &Path, dir: &Path, args: &[&str]) -> String {
    let out = run_lcx(db, dir, args);
    assert!(
        out.status.success(),
        "lcx {args:?} failed ({:?}):\n{}\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A command arm printing 8 iterations: traversal seconds `<trav><i>`,
/// iteration seconds `<iter><i>` (e.g. 1.01 … 1.08: a little spread).
fn arm(name: &str, trav: &str, iter: &str) -> String {
    let command = format!(
        r#"i=1; while [ $i -le 8 ]; do echo "{{\"iteration\":$i,\"time/iteration_seconds\":{iter}$i,\"time/traversal_seconds\":{trav}$i}}"; i=$((i+1)); done"#
    );
    command_arm(name, &command)
}

/// An `[[arms]]` table running `command`.
fn command_arm(name: &str, command: &str) -> String {
    format!(
        "\n[[arms]]\nname = \"{name}\"\ncommand = {}\n",
        toml_string(command)
    )
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Writes and runs an experiment: `slow` (1.055 s after warm-up) vs `fast`
/// (0.355 s, a 2.97× traversal speedup), gated at `min_speedup`.
fn experiment(dir: &Path, db: &Path, name: &str, min_speedup: f64, more_arms: &str) -> PathBuf {
    let mut body = format!(
        "name = \"{name}\"\ndescription = \"slow vs fast\"\nworkload = \"command\"\n\
         iterations = 8\nwarmup = 2\nbaseline = \"slow\"\n\
         notes = \"Synthetic arms for the report tests.\"\n"
    );
    body.push_str(&arm("slow", "1.0", "2.0"));
    body.push_str(&arm("fast", "0.3", "0.6"));
    body.push_str(more_arms);
    body.push_str(
        "\n[[columns]]\nmetric = \"time/iteration_seconds\"\nlabel = \"iter s\"\n\
         \n[[columns]]\nmetric = \"time/traversal_seconds\"\nlabel = \"traversal s\"\nshow = \"both\"\n",
    );
    body.push_str(&format!(
        "\n[gate]\nmetric = \"time/traversal_seconds\"\nmin_speedup = {min_speedup}\narm = \"fast\"\n"
    ));
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, body).unwrap();
    let out = run_lcx(db, dir, &["run", "--plain", file.to_str().unwrap()]);
    // A failing arm makes `lcx run` exit non-zero; the data is still there.
    assert!(
        db.exists(),
        "lcx run wrote no database: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    file
}

#[test]
fn report_renders_table_verdict_and_check_passes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    experiment(dir.path(), &db, "gate-pass", 1.5, "");
    let md = ok(&db, dir.path(), &["report"]);
    assert!(md.starts_with("# gate-pass"), "{md}");
    assert!(md.contains("| Mode"), "{md}");
    assert!(md.contains("traversal speedup"), "{md}");
    assert!(md.contains("first 2 iterations excluded"), "{md}");
    assert!(
        md.contains("Verdict: PASS for the traversal s gate (min speedup 1.50×): fast 2.97×"),
        "{md}"
    );
    assert!(
        md.contains("lcx run gate-pass.toml") || md.contains("gate-pass.toml"),
        "{md}"
    );
    assert!(md.contains("Synthetic arms for the report tests."), "{md}");
    assert!(md.contains("All 2 cells completed."), "{md}");

    let check = run_lcx(
        &db,
        dir.path(),
        &["report", "latest", "--check", "--allow-contended"],
    );
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));

    let json: serde_json::Value = serde_json::from_str(&ok(
        &db,
        dir.path(),
        &["report", "gate-pass", "--format", "json"],
    ))
    .unwrap();
    assert_eq!(json["gate"]["pass"], true);
    let fast = &json["arms"][1];
    assert_eq!(fast["name"], "fast");
    // Warm-up excluded: 6 of 8 iterations count, 2 excluded.
    assert_eq!(fast["metrics"][0]["summary"]["n"], 6);
    assert_eq!(fast["metrics"][0]["excluded_warmup"], 2);

    let csv = ok(&db, dir.path(), &["report", "1", "--format", "csv"]);
    assert!(csv.starts_with("experiment_id,experiment,arm"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + 2 * 2, "{csv}");
}

#[test]
fn check_fails_on_failed_gate_and_lists_failed_cells() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let broken = command_arm(
        "broken",
        r#"echo '{"iteration":1,"time/traversal_seconds":2.0}'; echo boom >&2; exit 3"#,
    );
    experiment(dir.path(), &db, "gate-fail", 10.0, &broken);
    let check = run_lcx(&db, dir.path(), &["report", "--check", "--allow-contended"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check.stderr));
    let md = text(&check.stdout);
    assert!(md.contains("Verdict: FAIL"), "{md}");
    assert!(md.contains("below 10.00×"), "{md}");
    assert!(md.contains("1 of 3 cells did not complete"), "{md}");
    assert!(md.contains("| broken | 1"), "{md}");
    assert!(md.contains("failed"), "{md}");
    // An unknown experiment is the user's mistake.
    let missing = run_lcx(&db, dir.path(), &["report", "no-such-experiment"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn archive_twice_writes_two_files_and_records_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    experiment(dir.path(), &db, "Archive Me", 1.5, "");
    ok(&db, dir.path(), &["report", "--archive"]);
    ok(&db, dir.path(), &["report", "--archive"]);
    let archive = dir.path().join("archive");
    let mut md: Vec<String> = std::fs::read_dir(&archive)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    md.sort();
    assert_eq!(md.len(), 2, "{md:?}");
    assert!(md[0].ends_with("-archive-me-2.md") || md[1].ends_with("-archive-me-2.md"));
    let first = md.iter().find(|n| n.ends_with("-archive-me.md")).unwrap();
    let body = std::fs::read_to_string(archive.join(first)).unwrap();
    let stem = first.trim_end_matches(".md");
    let svg = format!("{stem}-time-iteration-seconds-per-iteration.svg");
    assert!(body.contains(&format!("]({svg})")), "{body}");
    assert!(archive.join(&svg).is_file());
    assert!(std::fs::read_to_string(archive.join(&svg))
        .unwrap()
        .starts_with("<svg"));
    let recorded = ok(
        &db,
        dir.path(),
        &[
            "query",
            "SELECT COUNT(*) FROM reports WHERE format = 'markdown'",
            "--format",
            "csv",
        ],
    );
    assert_eq!(recorded.lines().nth(1), Some("2"), "{recorded}");
    // --archive-dir elsewhere.
    let other = dir.path().join("elsewhere");
    ok(
        &db,
        dir.path(),
        &[
            "report",
            "--archive",
            "--archive-dir",
            other.to_str().unwrap(),
        ],
    );
    assert_eq!(
        std::fs::read_dir(&other)
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "md"))
            .count(),
        1
    );
}

#[test]
fn query_is_read_only_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    experiment(dir.path(), &db, "q", 1.5, "");
    let count = "SELECT COUNT(*) AS n FROM metrics";
    let before = ok(&db, dir.path(), &["query", count, "--format", "csv"]);
    assert_eq!(before.trim(), "n\n32");
    let bytes_before = std::fs::read(&db).unwrap();
    for write in [
        "DELETE FROM metrics",
        "UPDATE experiments SET name = 'x'",
        "DROP TABLE runs",
        "INSERT INTO reports (path, sha256) VALUES ('a', 'b')",
    ] {
        let out = run_lcx(&db, dir.path(), &["query", write]);
        assert_eq!(out.status.code(), Some(2), "{write}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(err.contains("read-only"), "{write}: {err}");
    }
    assert_eq!(
        ok(&db, dir.path(), &["query", count, "--format", "csv"]),
        before
    );
    assert_eq!(std::fs::read(&db).unwrap(), bytes_before);

    let json: serde_json::Value = serde_json::from_str(&ok(
        &db,
        dir.path(),
        &["query", "SELECT arm, n FROM arm_metric_stats WHERE name = 'time/traversal_seconds' ORDER BY arm", "--format", "json"],
    ))
    .unwrap();
    assert_eq!(json[0]["arm"], "fast");
    assert_eq!(json[0]["n"], 6);
    let table = ok(&db, dir.path(), &["query", "SELECT name FROM experiments"]);
    assert!(
        table.contains("| name |") && table.contains("| q "),
        "{table}"
    );
    let bad = run_lcx(&db, dir.path(), &["query", "SELEC nonsense"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Issue 39 §7: `lcx query --timeout` ends a statement that would run for
/// ever, in every format, exit 1 (not 2: the SQL was valid), saying which
/// flag stopped it; `--timeout 0` is no limit.
#[test]
fn query_stops_at_its_timeout_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    experiment(dir.path(), &db, "q", 1.5, "");
    let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                   SELECT COUNT(*) FROM c";
    for format in ["table", "csv", "json"] {
        let mut child = lcx(&db)
            .current_dir(dir.path())
            .args(["query", endless, "--timeout", "1", "--format", format])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Not a measure of how fast it stops: a guard so that a query the
        // timeout misses fails the test instead of hanging it.
        let mut waited = 0;
        while child.try_wait().unwrap().is_none() {
            if waited == 1200 {
                child.kill().unwrap();
                panic!("{format}: `lcx query --timeout 1` still running after 120 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            waited += 1;
        }
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{format}: {err}");
        assert!(
            err.contains("query interrupted after 1 s (--timeout)"),
            "{format}: {err}"
        );
    }
    let unlimited = ok(
        &db,
        dir.path(),
        &[
            "query",
            "SELECT COUNT(*) AS n FROM metrics",
            "--timeout",
            "0",
            "--format",
            "csv",
        ],
    );
    assert_eq!(unlimited.trim(), "n\n32");
}

#[test]
fn history_shows_by_default_the_metric_the_report_leads_with() {
    // A command experiment without gate or columns whose command prints
    // only its own metric: the report leads with `time_s`, and so must
    // history, not the trainer's `time/iteration_seconds` (no data).
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let print = |v: &str| {
        format!(
            r#"i=1; while [ $i -le 4 ]; do echo "{{\"iteration\":$i,\"time_s\":{v}$i}}"; i=$((i+1)); done"#
        )
    };
    let file = dir.path().join("own.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"own\"\nworkload = \"command\"\niterations = 4\n{}{}",
            command_arm("a", &print("0.81")),
            command_arm("b", &print("0.42"))
        ),
    )
    .unwrap();
    ok(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    let report = ok(&db, dir.path(), &["report"]);
    assert!(report.contains("time_s"), "{report}");
    let history = ok(&db, dir.path(), &["history", "own", "--arm", "a"]);
    assert!(history.contains("time_s"), "{history}");
    assert!(history.contains("0.81"), "{history}");
    assert!(!history.contains("no data"), "{history}");
}

#[test]
fn list_history_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    experiment(dir.path(), &db, "again", 1.5, "");
    let file = experiment(dir.path(), &db, "again", 1.5, "");
    let list = ok(&db, dir.path(), &["list"]);
    assert!(list.contains("| 2 ") && list.contains("| 1 "), "{list}");
    assert!(list.contains("slow, fast"), "{list}");
    assert!(list.contains("2/2"), "{list}");

    let history = ok(
        &db,
        dir.path(),
        &[
            "history",
            "again",
            "--arm",
            "fast",
            "--metric",
            "time/traversal_seconds",
        ],
    );
    assert!(
        history.contains("#1") && history.contains("#2"),
        "{history}"
    );
    // Identical data: no change marker.
    assert!(
        !history.contains("▲") && !history.contains("▼"),
        "{history}"
    );
    assert!(history.contains("0.355 ± 0.019"), "{history}");
    // Another warm-up is another series, not a change of speed.
    ok(
        &db,
        dir.path(),
        &["run", "--plain", file.to_str().unwrap(), "--warmup", "3"],
    );
    let history = ok(&db, dir.path(), &["history", "again", "--arm", "fast"]);
    assert!(
        history.contains("iterations or warm-up changed: not compared"),
        "{history}"
    );

    let cmp = ok(&db, dir.path(), &["compare", "1", "2"]);
    assert!(cmp.contains("| fast"), "{cmp}");
    assert!(cmp.contains("1.00×"), "{cmp}");
    assert!(
        cmp.contains("equivalent") || cmp.contains("inconclusive"),
        "{cmp}"
    );
    let runs = ok(&db, dir.path(), &["compare", "run:1", "run:2"]);
    assert!(
        runs.contains("run 1 (slow)") && runs.contains("run 2 (fast)"),
        "{runs}"
    );
    assert!(runs.contains("improved"), "{runs}");
    let mixed = run_lcx(&db, dir.path(), &["compare", "1", "run:2"]);
    assert_eq!(mixed.status.code(), Some(2));
    let unknown = run_lcx(&db, dir.path(), &["history", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    // A metric no experiment recorded is an error with the nearest names.
    let typo = run_lcx(
        &db,
        dir.path(),
        &["history", "again", "--metric", "time/iteration_secnds"],
    );
    assert_eq!(typo.status.code(), Some(2));
    let stderr = text(&typo.stderr);
    assert!(
        stderr.contains("--metric time/iteration_secnds")
            && stderr.contains("closest recorded: time/iteration_seconds"),
        "{stderr}"
    );
    // One output convention: --format json, as for report and query.
    for args in [
        &["list", "--format", "json"][..],
        &["history", "again", "--format", "json"],
    ] {
        let json: serde_json::Value = serde_json::from_str(&ok(&db, dir.path(), args)).unwrap();
        assert!(
            json.as_array().is_some_and(|a| !a.is_empty()),
            "{args:?}: {json}"
        );
    }
}

#[test]
fn a_gate_without_data_is_inconclusive_and_check_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    // The gated arm needs CUDA: skipped on a CPU machine.
    let gpu = format!(
        "\n[[arms]]\nname = \"gpu\"\nrequires = \"cuda\"\ncommand = {}\n",
        toml_string(r#"echo '{"iteration":1,"time/traversal_seconds":0.1}'"#)
    );
    let file = experiment(dir.path(), &db, "gpu-gate", 1.5, &gpu);
    let text_of = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text_of.replace("arm = \"fast\"", "arm = \"gpu\"")).unwrap();
    let out = run_lcx(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let check = run_lcx(&db, dir.path(), &["report", "--check", "--allow-contended"]);
    let md = text(&check.stdout);
    let cuda = md.contains("cuda available to libtorch: yes");
    if !cuda {
        assert_eq!(check.status.code(), Some(3), "{md}");
        assert!(md.contains("Verdict: INCONCLUSIVE"), "{md}");
        assert!(md.contains("skipped: requires CUDA"), "{md}");
        assert!(text(&check.stderr).contains("check: INCONCLUSIVE"));
    }
    assert!(md.contains("Gate rule: superiority"), "{md}");

    // A baseline that printed nothing: no verdict says "no change".
    let empty = dir.path().join("empty.toml");
    std::fs::write(
        &empty,
        format!(
            "name = \"empty-base\"\nworkload = \"command\"\niterations = 2\nbaseline = \"quiet\"\n\
             variable_iterations = true\n\
             [[arms]]\nname = \"quiet\"\ncommand = {}\n{}\
             [gate]\nmetric = \"time/traversal_seconds\"\nmax_slowdown = 0.03\narm = \"fast\"\n",
            toml_string(r#"echo '{"iteration":1,"other":1}'"#),
            arm("fast", "0.3", "0.6").replace("le 8", "le 2")
        ),
    )
    .unwrap();
    let out = run_lcx(
        &db,
        dir.path(),
        &["run", "--plain", empty.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let check = run_lcx(
        &db,
        dir.path(),
        &["report", "empty-base", "--check", "--allow-contended"],
    );
    let md = text(&check.stdout);
    assert_eq!(check.status.code(), Some(3), "{md}");
    assert!(
        md.contains("Net result: no data for the baseline `quiet`"),
        "{md}"
    );
    assert!(md.contains("non-inferiority margin 0.971×"), "{md}");
    assert!(!md.contains("no significant change"), "{md}");
}

#[test]
fn a_transient_longer_than_the_warm_up_and_an_outlier_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    // 20 iterations: 1-4 half as slow again, iteration 15 an outlier.
    let series: Vec<String> = (1..=20)
        .map(|i| {
            let base = 1.0 + 0.01 * f64::from(i % 3);
            let v = if i <= 4 {
                base + 0.5
            } else if i == 15 {
                base + 0.3
            } else {
                base
            };
            format!("echo '{{\"iteration\":{i},\"time/iteration_seconds\":{v}}}'")
        })
        .collect();
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"cold\"\nworkload = \"command\"\niterations = 20\nwarmup = 1\n\
             [[arms]]\nname = \"a\"\ncommand = {}\n",
            toml_string(&series.join("; "))
        ),
    )
    .unwrap();
    let out = run_lcx(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let md = ok(&db, dir.path(), &["report"]);
    assert!(
        md.contains(
            "settles only after iteration 4 (detected), but the warm-up is 1: 3 more iterations"
        ),
        "{md}"
    );
    // The transient's iterations are outliers too; so is iteration 15.
    assert!(
        md.contains(
            "outlier iterations of `time/iteration_seconds` by the modified z-score (beyond"
        ),
        "{md}"
    );
    assert!(md.contains(", 15 (z = "), "{md}");
}

#[test]
fn warmup_auto_drops_each_cells_detected_transient_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    // Iterations 1-4 take 1.5 s, the rest 1.00-1.02 s.
    let series: Vec<String> = (1..=20)
        .map(|i| {
            let v = if i <= 4 {
                1.5
            } else {
                1.0 + 0.01 * f64::from(i % 3)
            };
            format!("echo '{{\"iteration\":{i},\"time/iteration_seconds\":{v}}}'")
        })
        .collect();
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"auto\"\nworkload = \"command\"\niterations = 20\nwarmup = \"auto\"\n\
             [[arms]]\nname = \"a\"\ncommand = {}\n",
            toml_string(&series.join("; "))
        ),
    )
    .unwrap();
    let out = run_lcx(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let store = lcx_core::store::Store::open_read_only(&db).unwrap();
    let run = &store.runs(1).unwrap()[0];
    assert_eq!(run.warmup, Some(4));
    let q = |sql: &str| match &store.query(sql).unwrap().rows[0][0] {
        lcx_core::store::SqlValue::Integer(n) => *n as f64,
        lcx_core::store::SqlValue::Real(x) => *x,
        other => panic!("{sql}: {other:?}"),
    };
    assert_eq!(q("SELECT detected FROM run_warmup WHERE run_id = 1"), 4.0);
    assert_eq!(q("SELECT declared FROM run_warmup WHERE run_id = 1"), 0.0);
    assert_eq!(q("SELECT n FROM arm_metric_stats WHERE arm = 'a'"), 16.0);
    let mean = q("SELECT mean FROM arm_metric_stats WHERE arm = 'a'");
    assert!(mean < 1.02, "the view still averages the transient: {mean}");
    let md = ok(&db, dir.path(), &["report"]);
    assert!(
        md.contains("warm-up detected per cell (MSER and the first iterations against the rest)"),
        "{md}"
    );
    assert!(md.contains("| Warm-up |"), "{md}");
    assert!(!md.contains("settles only after"), "{md}");
    // The report's mean agrees with the view's.
    assert!(
        // Three significant digits for a mean near 1.
        md.contains(&format!("{mean:.2} ±")),
        "{mean:.2} not in {md}"
    );

    // A word other than "auto" is refused with the key.
    std::fs::write(
        &file,
        std::fs::read_to_string(&file)
            .unwrap()
            .replace("\"auto\"", "\"soon\""),
    )
    .unwrap();
    let bad = run_lcx(&db, dir.path(), &["run", file.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("warmup: expected an integer ≥ 0 or \"auto\""),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn a_guard_fails_an_arm_that_is_faster_but_learns_worse() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let arm_with = |name: &str, time: &str, win: &str| {
        let command = format!(
            r#"i=1; while [ $i -le 8 ]; do echo "{{\"iteration\":$i,\"time/traversal_seconds\":{time}$i,\"eval/random/win_rate0\":{win}$i}}"; i=$((i+1)); done"#
        );
        command_arm(name, &command)
    };
    let write = |file: &str, fast_win: &str, margin: &str| {
        let path = dir.path().join(file);
        std::fs::write(
            &path,
            format!(
                "name = \"{file}\"\nworkload = \"command\"\niterations = 8\nwarmup = 1\nbaseline = \"slow\"\n{}{}\
                 [gate]\nmetric = \"time/traversal_seconds\"\nmin_speedup = 1.5\narm = \"fast\"\n\
                 [[guard]]\nmetric = \"eval/random/win_rate0\"\nmargin = {margin}\n",
                arm_with("slow", "1.0", "0.8"),
                arm_with("fast", "0.3", fast_win)
            ),
        )
        .unwrap();
        let out = run_lcx(&db, dir.path(), &["run", "--plain", path.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    // Win rate 0.80x vs 0.60x: 0.2 worse, the margin is 0.05.
    write("worse", "0.6", "0.05");
    let check = run_lcx(
        &db,
        dir.path(),
        &["report", "worse", "--check", "--allow-contended"],
    );
    let md = text(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{md}");
    assert!(md.contains("Verdict: PASS"), "{md}");
    assert!(
        md.contains("- `fast` vs `slow` on eval/random/win_rate0 (margin 0.05"),
        "{md}"
    );
    assert!(
        md.contains("Overall: FAIL: faster but learns worse: `fast` on eval/random/win_rate0"),
        "{md}"
    );
    // The same data with a margin of 0.3: faster and not worse beyond it.
    write("within", "0.6", "0.3");
    let check = run_lcx(
        &db,
        dir.path(),
        &["report", "within", "--check", "--allow-contended"],
    );
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
}

/// `paired = true`: repeat k of each arm shares a seed, so the guard tests
/// the per-repeat differences. Cells spread far apart by their repeat but
/// equal across arms pass a guard that, unpaired, cannot tell; a constant
/// drop beyond the margin fails; a failed cell leaves its repeat out.
#[test]
fn paired_guards_test_the_differences_of_repeats_that_share_a_seed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    // `w` of repeat k is 0.(k + plus): 0.2, 0.3, 0.4 with plus = 1.
    let arm = |name: &str, plus: u32, fail_third: bool| {
        let fail = if fail_third {
            "[ $LCX_REPEAT = 3 ] && exit 1; "
        } else {
            ""
        };
        let command = format!(
            r#"{fail}for i in 1 2; do echo "{{\"iteration\":$i,\"w\":0.$((LCX_REPEAT + {plus}))}}"; done"#
        );
        command_arm(name, &command)
    };
    let file = dir.path().join("paired.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"paired\"\nworkload = \"command\"\niterations = 2\nwarmup = 0\nrepeats = 3\n\
             {}{}{}{}\
             [[columns]]\nmetric = \"w\"\ndirection = \"higher\"\nfold = \"last\"\n\
             [[guard]]\nmetric = \"w\"\nmargin = 0.05\narm = \"same\"\n\
             [[guard]]\nmetric = \"w\"\nmargin = 0.05\npaired = true\n",
            arm("a", 1, false),
            arm("same", 1, false),
            arm("lower", 0, false),
            arm("gappy", 1, true),
        ),
    )
    .unwrap();
    let run = run_lcx(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(1), "gappy's third cell fails");
    let check = run_lcx(
        &db,
        dir.path(),
        &["report", "paired", "--check", "--allow-contended"],
    );
    let md = text(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{md}");
    for line in [
        // Unpaired, the spread of the repeats (±0.1) hides the equality.
        "- `same` vs `a` on the final w (margin 0.0500, higher is better): INCONCLUSIVE",
        "- `same` vs `a` on the final w (margin 0.0500, higher is better): PASS, \
         gain +0 [0 to 0], paired over 3 repeats",
        "- `lower` vs `a` on the final w (margin 0.0500, higher is better): FAIL, \
         gain -0.100 [-0.100 to -0.100], paired over 3 repeats",
        "- `gappy` vs `a` on the final w (margin 0.0500, higher is better): PASS, \
         gain +0 [0 to 0], paired over 2 repeats",
    ] {
        assert!(md.contains(line), "no `{line}` in:\n{md}");
    }
    let json = ok(&db, dir.path(), &["report", "paired", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let pairs: Vec<Option<u64>> = v["guards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["pairs"].as_u64())
        .collect();
    assert_eq!(pairs, [None, Some(3), Some(3), Some(2)]);
}

/// A learning metric evaluated every other iteration, judged on each
/// cell's final value (`fold = "last"`), with one guard on the experiment's
/// baseline and one on an arm of its own; the archive plots it per
/// iteration and against training time.
#[test]
fn guards_judge_final_values_against_their_own_baselines_and_are_plotted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    // `w` at iterations 2 and 4: `<early><repeat>` then `<late><repeat>`.
    let arm = |name: &str, seconds: &str, early: &str, late: &str| {
        let command = format!(
            r#"for i in 1 2 3 4; do w=""; [ $i = 2 ] && w=",\"w\":{early}$LCX_REPEAT"; [ $i = 4 ] && w=",\"w\":{late}$LCX_REPEAT"; echo "{{\"iteration\":$i,\"time/iteration_seconds\":{seconds}$i$w}}"; done"#
        );
        command_arm(name, &command)
    };
    let file = dir.path().join("learn.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"learn\"\nworkload = \"command\"\niterations = 4\nrepeats = 3\n{}{}{}\
             [[columns]]\nmetric = \"w\"\ndirection = \"higher\"\n\
             [[guard]]\nmetric = \"w\"\nmargin = 0.05\nfold = \"last\"\n\
             [[guard]]\nmetric = \"w\"\nmargin = 0.3\nbaseline = \"b\"\narm = \"c\"\n",
            // The mean of `a`'s values is 0.65, `b`'s 0.495: only the final
            // values (0.80, 0.79) make `b` no worse than `a`.
            arm("a", "1.0", "0.50", "0.80"),
            arm("b", "0.5", "0.20", "0.79"),
            arm("c", "0.5", "0.50", "0.60"),
        ),
    )
    .unwrap();
    ok(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    let check = run_lcx(
        &db,
        dir.path(),
        &["report", "learn", "--check", "--allow-contended"],
    );
    let md = text(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{md}");
    assert!(md.contains("final w"), "{md}");
    // a's final values (0.80x), not the mean of its series (0.65x).
    // (Not "0.65" alone: a contended cell's row may show 0.65 cores.)
    assert!(
        md.contains("0.80") && !md.contains("0.65 ±") && !md.contains("0.650 ±"),
        "{md}"
    );
    for line in [
        "- `b` vs `a` on the final w (margin 0.0500, higher is better): PASS",
        "- `c` vs `a` on the final w (margin 0.0500, higher is better): FAIL",
        "- `c` vs `b` on the final w (margin 0.300, higher is better): PASS",
        "In final w (`fold = \"last\"`) a cell's value is its last recorded one",
    ] {
        assert!(md.contains(line), "no `{line}` in:\n{md}");
    }
    ok(&db, dir.path(), &["report", "learn", "--archive"]);
    let names: Vec<String> = std::fs::read_dir(dir.path().join("archive"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for plot in [
        "-learn-w-per-iteration.svg",
        "-learn-w-by-training-time.svg",
    ] {
        assert!(
            names.iter().any(|n| n.ends_with(plot)),
            "no *{plot} in {names:?}"
        );
    }
    // Against training time, `b`'s curve (half the seconds) ends at about
    // half the x of `a`'s: the x axis is the summed iteration times.
    let svg = names
        .iter()
        .find(|n| n.ends_with("-learn-w-by-training-time.svg"))
        .unwrap();
    let svg = std::fs::read_to_string(dir.path().join("archive").join(svg)).unwrap();
    assert!(svg.contains("training time"), "{svg}");
}

#[test]
fn adaptive_repeats_stop_once_the_intervals_are_precise_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let arm = |name: &str, base: &str| {
        let command = format!(
            r#"i=1; while [ $i -le 4 ]; do echo "{{\"iteration\":$i,\"t\":{base}$LCX_REPEAT$i}}"; i=$((i+1)); done"#
        );
        command_arm(name, &command)
    };
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"adaptive\"\nworkload = \"command\"\niterations = 4\n\
             repeats = {{ min = 2, max = 6, precision = 0.05 }}\n{}{}\
             [[columns]]\nmetric = \"t\"\nshow = \"speedup\"\ndirection = \"lower\"\n",
            arm("a", "1.00"),
            arm("b", "0.50")
        ),
    )
    .unwrap();
    let out = run_lcx(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let store = lcx_core::store::Store::open_read_only(&db).unwrap();
    let runs = store.runs(1).unwrap();
    assert_eq!(runs.len(), 12, "cells for the most repeats");
    let done: Vec<i64> = runs
        .iter()
        .filter(|r| r.status == lcx_core::store::RunStatus::Completed)
        .map(|r| r.repeat)
        .collect();
    assert!(done.iter().all(|r| *r <= 2) && done.len() == 4, "{runs:#?}");
    let skipped = runs.iter().find(|r| r.repeat == 3).unwrap();
    assert!(
        skipped.skip_reason.as_deref().unwrap().starts_with(
            "not needed: stopped after round 2: every judged speedup's interval is within ±5"
        ),
        "{skipped:?}"
    );
    assert_eq!(
        store.find_experiment("adaptive").unwrap().status,
        lcx_core::store::ExperimentStatus::Completed
    );
    let md = ok(&db, dir.path(), &["report"]);
    assert!(md.contains("stopped after round 2"), "{md}");
}

#[test]
fn a_closed_pipe_ends_the_output_quietly_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    drop(lcx_core::store::Store::open(&db).unwrap());
    // 200,000 rows into `head -1`: lcx meets a closed pipe long before the end.
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            "set -o pipefail; \"$0\" query --format csv --db \"$1\" \
             'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 200000) SELECT x FROM c' \
             | head -1",
        )
        .arg(env!("CARGO_BIN_EXE_lcx"))
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "x\n");
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
}

/// #19 item 6: the public views count the cells the report counts (an
/// arm's completed cells), so SQL and `lcx report` give one number.
#[test]
fn the_views_give_the_reports_numbers_when_a_cell_failed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    // Repeat 2 of arm `a` prints slower lines, then fails.
    let a = r#"i=1; while [ $i -le 6 ]; do echo "{\"iteration\":$i,\"time/iteration_seconds\":0.$LCX_REPEAT$i}"; i=$((i+1)); done; [ "$LCX_REPEAT" = 1 ]"#;
    let b = r#"i=1; while [ $i -le 6 ]; do echo "{\"iteration\":$i,\"time/iteration_seconds\":0.3$i}"; i=$((i+1)); done"#;
    let file = dir.path().join("views.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"views\"\nworkload = \"command\"\niterations = 6\nwarmup = 1\nrepeats = 2\n\
             order = \"sequential\"\n[[arms]]\nname = \"a\"\ncommand = {}\n[[arms]]\nname = \"b\"\ncommand = {}\n",
            toml_string(a),
            toml_string(b)
        ),
    )
    .unwrap();
    let out = run_lcx(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_str(&ok(
        &db,
        dir.path(),
        &["report", "views", "--format", "json"],
    ))
    .unwrap();
    let store = lcx_core::store::Store::open_read_only(&db).unwrap();
    for arm in ["a", "b"] {
        let metric = json["arms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == arm)
            .and_then(|x| {
                x["metrics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| m["metric"] == "time/iteration_seconds")
            })
            .cloned()
            .unwrap();
        let rows = store
            .query(&format!(
                "SELECT n, mean, runs FROM arm_metric_stats \
                 WHERE arm = '{arm}' AND name = 'time/iteration_seconds'"
            ))
            .unwrap()
            .rows;
        let (n, mean, runs) = match rows[0].as_slice() {
            [lcx_core::store::SqlValue::Integer(n), lcx_core::store::SqlValue::Real(m), lcx_core::store::SqlValue::Integer(r)] => {
                (*n, *m, *r)
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(n, metric["summary"]["n"].as_i64().unwrap(), "{arm}: n");
        assert!(
            (mean - metric["summary"]["mean"].as_f64().unwrap()).abs() < 1e-12,
            "{arm}: view {mean} vs report {}",
            metric["summary"]
        );
        // `a` counts its completed repeat only; `b` both.
        assert_eq!(
            (n, runs),
            if arm == "a" { (5, 1) } else { (10, 2) },
            "{arm}"
        );
    }
    // The markdown says what a replicate is per arm where they differ.
    let md = ok(&db, dir.path(), &["report", "views"]);
    assert!(
        md.contains(
            "each iteration is one replicate for a; each repeat's mean is one replicate for b"
        ),
        "{md}"
    );
    // The failed cell is still there for whoever asks, with its status.
    let failed = store
        .query("SELECT COUNT(*) FROM run_metric_stats WHERE status = 'failed' AND counted = 0")
        .unwrap()
        .rows;
    assert_eq!(failed[0][0], lcx_core::store::SqlValue::Integer(1));
}

/// #19: a metric that describes the work (a count with no better side in
/// the vocabulary, or a column marked `direction = "none"`) is shown and
/// never judged: no "regressed 0.00×" for a per-call time that grows with
/// the batch by design. A guard must judge, so `none` there is refused.
#[test]
fn a_descriptive_metric_is_shown_and_never_judged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db");
    let line = |calls: &str, nodes: &str| {
        toml_string(&format!(
            r#"i=1; while [ $i -le 6 ]; do echo "{{\"iteration\":$i,\"time/iteration_seconds\":1.$i,\"mine/calls\":{calls}$i,\"traversal/nodes\":{nodes}$i}}"; i=$((i+1)); done"#
        ))
    };
    let body = format!(
        "name = \"describe\"\nworkload = \"command\"\niterations = 6\nwarmup = 1\nbaseline = \"a\"\n\
         [[arms]]\nname = \"a\"\ncommand = {}\n[[arms]]\nname = \"b\"\ncommand = {}\n\
         [[columns]]\nmetric = \"time/iteration_seconds\"\nlabel = \"iter s\"\n\
         [[columns]]\nmetric = \"mine/calls\"\nlabel = \"calls\"\ndirection = \"none\"\n\
         [[columns]]\nmetric = \"traversal/nodes\"\nlabel = \"nodes\"\n",
        line("1", "10"),
        line("9", "90")
    );
    let file = dir.path().join("describe.toml");
    std::fs::write(&file, &body).unwrap();
    ok(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    let md = ok(&db, dir.path(), &["report"]);
    let verdicts = &md[md.find("## Verdicts").unwrap()..md.find("## Cells").unwrap()];
    assert!(
        verdicts.contains("calls: not judged, a description of the work"),
        "{verdicts}"
    );
    assert!(
        verdicts.contains("nodes: not judged, a description of the work"),
        "{verdicts}"
    );
    let judged: Vec<&str> = verdicts
        .lines()
        .filter(|l| l.starts_with("  - ") && (l.contains("improved") || l.contains("regressed")))
        .collect();
    assert!(judged.is_empty(), "{judged:?}");
    assert!(!md.contains("direction unknown"), "{md}");
    let csv = ok(&db, dir.path(), &["report", "--format", "csv"]);
    assert!(
        csv.lines().any(|l| l.contains(",mine/calls,none,")),
        "{csv}"
    );
    // A guard judges: `none` is refused there, naming the key.
    let guarded = body + "[[guard]]\nmetric = \"mine/calls\"\nmargin = 1\ndirection = \"none\"\n";
    std::fs::write(&file, guarded).unwrap();
    let out = run_lcx(
        &db,
        dir.path(),
        &["run", "--dry-run", file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("guard"), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("direction"),
        "{}",
        text(&out.stderr)
    );
}

/// A command arm printing `time_s` = `<prefix><i>` for 6 iterations; with
/// `fail_at`, it prints `boom at <i>` to stderr and exits 1 at that
/// iteration (after `fail_at - 1` lines).
fn six_lines(prefix: &str, fail_at: Option<u32>) -> String {
    let stop = fail_at.map_or(String::new(), |k| {
        format!(r#"if [ $i -eq {k} ]; then echo "boom at $i" >&2; exit 1; fi; "#)
    });
    format!(
        r#"i=1; while [ $i -le 6 ]; do {stop}echo "{{\"iteration\":$i,\"time_s\":{prefix}$i}}"; i=$((i+1)); done"#
    )
}

/// Runs a 3-repeat experiment of `base` vs `cand` gated on `time_s`
/// (`gate` lines), returns (report markdown, `--check` exit code, its stderr,
/// `lcx run`'s stdout).
fn gated(
    dir: &Path,
    name: &str,
    base: &str,
    cand: &str,
    gate: &str,
) -> (String, i32, String, String) {
    let db = dir.join(format!("{name}.db"));
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\nworkload = \"command\"\niterations = 6\nwarmup = 1\nrepeats = 3\n\
             baseline = \"base\"\n{}{}\n[[columns]]\nmetric = \"time_s\"\ndirection = \"lower\"\n\
             show = \"both\"\n{gate}",
            command_arm("base", base),
            command_arm("cand", cand),
        ),
    )
    .unwrap();
    let run = run_lcx(&db, dir, &["run", "--plain", file.to_str().unwrap()]);
    let check = run_lcx(&db, dir, &["report", "--check", "--allow-contended"]);
    (
        text(&check.stdout),
        check.status.code().unwrap_or(-1),
        text(&check.stderr),
        text(&run.stdout),
    )
}

#[test]
fn gates_never_pass_or_fail_on_cells_that_did_not_complete() {
    let dir = tempfile::tempdir().unwrap();
    let gate = "\n[gate]\nmetric = \"time_s\"\nmin_speedup = 1.5\narm = \"cand\"\n";
    // Every baseline cell fails at iteration 4 of 6: its partial data
    // (slow) would have made the 2× faster candidate PASS.
    let (md, code, err, run) = gated(
        dir.path(),
        "base-fails",
        &six_lines("1.0", Some(5)),
        &six_lines("0.5", None),
        gate,
    );
    assert_eq!(code, 3, "{md}\n{err}");
    assert!(md.contains("Verdict: INCONCLUSIVE"), "{md}");
    assert!(
        md.contains("`base`: 3 of 3 cells did not complete (failed after 4 of 6 iterations: "),
        "{md}"
    );
    assert!(md.contains("boom at 5"), "{md}");
    assert!(
        md.contains("nothing judged on"),
        "the net result says why: {md}"
    );
    assert!(
        md.contains("a judgement needs 2 completed cells per arm"),
        "{md}"
    );
    assert!(err.contains("check: INCONCLUSIVE"), "{err}");
    assert!(
        run.trim_end()
            .lines()
            .last()
            .unwrap_or("")
            .contains("--check"),
        "lcx run's last line points at --check: {run}"
    );

    // The candidate fails the same way with slow partial data: not FAIL.
    let (md, code, err, _) = gated(
        dir.path(),
        "cand-fails",
        &six_lines("0.5", None),
        &six_lines("1.0", Some(5)),
        gate,
    );
    assert_eq!(code, 3, "{md}\n{err}");
    assert!(!md.contains("Verdict: FAIL"), "{md}");
    assert!(md.contains("`cand`: 3 of 3 cells did not complete"), "{md}");

    // One of three candidate cells fails: two completed cells remain, the
    // rule's minimum, so the gate is decided on them; --check still says
    // that a cell did not complete.
    let one = r#"i=1; while [ $i -le 6 ]; do if [ $i -eq 3 ] && [ "$LCX_REPEAT" = 2 ]; then exit 1; fi; echo "{\"iteration\":$i,\"time_s\":0.5$i}"; i=$((i+1)); done"#;
    let (md, code, err, _) = gated(dir.path(), "one-fails", &six_lines("1.0", None), one, gate);
    assert!(md.contains("Verdict: PASS"), "{md}");
    assert_eq!(code, 3, "{md}\n{err}");
    assert!(err.contains("1 of 6 cells did not complete"), "{err}");

    // A gated metric that no arm emitted: every arm that lacks it is named.
    let other = six_lines("1.0", None);
    let file_gate = "\n[gate]\nmetric = \"missing_s\"\nmin_speedup = 1.5\narm = \"cand\"\n";
    let (md, code, _, _) = gated(dir.path(), "never-emitted", &other, &other, file_gate);
    assert_eq!(code, 3, "{md}");
    assert!(
        md.contains("baseline `base` recorded no `missing_s`"),
        "{md}"
    );
    assert!(md.contains("`cand` recorded no `missing_s`"), "{md}");
}

#[test]
fn check_without_a_gate_exits_3_while_any_cell_did_not_complete() {
    let dir = tempfile::tempdir().unwrap();
    let (md, code, err, _) = gated(
        dir.path(),
        "no-gate",
        &six_lines("1.0", None),
        &six_lines("1.0", Some(2)),
        "",
    );
    assert_eq!(code, 3, "{md}\n{err}");
    assert!(
        err.contains("no [gate] or [[guard]]: every cell must complete"),
        "{err}"
    );
    assert!(err.contains("3 of 6 cells did not complete"), "{err}");
    // And 0 once every cell completed.
    let (md, code, err, _) = gated(
        dir.path(),
        "no-gate-ok",
        &six_lines("1.0", None),
        &six_lines("1.0", None),
        "",
    );
    assert_eq!(code, 0, "{md}\n{err}");
}

#[test]
fn max_slowdown_is_inconclusive_until_the_data_show_the_margin() {
    let dir = tempfile::tempdir().unwrap();
    // Equal arms whose repeats spread by 10 %: the interval of the speedup
    // is too wide to show "no more than 3 % slower".
    let noisy = r#"i=1; while [ $i -le 6 ]; do echo "{\"iteration\":$i,\"time_s\":$((9 + LCX_REPEAT)).$i}"; i=$((i+1)); done"#;
    let gate = "\n[gate]\nmetric = \"time_s\"\nmax_slowdown = 0.03\narm = \"cand\"\n";
    let (md, code, err, _) = gated(dir.path(), "wide", noisy, noisy, gate);
    assert_eq!(code, 3, "{md}\n{err}");
    assert!(md.contains("Verdict: INCONCLUSIVE"), "{md}");
    assert!(
        md.contains("neither shown to reach it nor shown short of it"),
        "{md}"
    );
    assert!(
        md.contains("more replicates per arm would likely decide"),
        "{md}"
    );
    assert!(
        md.contains("non-inferiority: PASS when the 95 % interval's lower end"),
        "{md}"
    );
    // Identical cells: a zero-width interval at 1×, shown within the margin.
    let steady = six_lines("1.0", None);
    let (md, code, err, _) = gated(dir.path(), "steady", &steady, &steady, gate);
    assert_eq!(code, 0, "{md}\n{err}");
}

#[test]
fn string_values_of_a_metric_are_named_not_dropped_silently() {
    let dir = tempfile::tempdir().unwrap();
    let quoted = r#"i=1; while [ $i -le 6 ]; do echo "{\"iteration\":$i,\"time_s\":1.$i,\"rate\":\"0.$i\",\"mode\":\"fp32\"}"; i=$((i+1)); done"#;
    let (md, _, _, _) = gated(dir.path(), "strings", quoted, quoted, "");
    assert!(
        md.contains("Arm `base`, metric `rate`: 18 non-numeric values ignored (e.g. \"0.1\")"),
        "{md}"
    );
    assert!(md.contains("Arm `cand`, metric `rate`"), "{md}");
    // A text field that is not a number in disguise is not noise.
    assert!(!md.contains("metric `mode`"), "{md}");
}

/// What a person reads on a terminal shows control and bidi characters as
/// escapes, never obeys them: an experiment whose description, notes and
/// label hold terminal escapes, whose command prints a metric name and
/// stderr with them, through `run`, `report`, `history`, `list`, `query`'s
/// table, `export --format json` and an error message. The markdown report
/// escapes `<` with a backslash, not as `&lt;`.
#[test]
fn terminal_outputs_show_escapes_and_never_obey_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let file = dir.path().join("t.toml");
    std::fs::write(
        &file,
        "name = \"term\"\n\
         description = \"desc \\u001b]0;title\\u0007 a < b & c\"\n\
         notes = \"clear \\u001b[2J \\u202eevil \\u009b31m\"\n\
         workload = \"command\"\niterations = 2\n\
         [[arms]]\nname = \"a\"\n\
         command = 'printf \"{\\\"t\\\\u001b[31m\\\": 1}\\n{\\\"t\\\\u001b[31m\\\": 2}\\n\"'\n\
         [[arms]]\nname = \"b\"\n\
         command = 'printf \"\\033]0;owned\\007 \\342\\200\\256x\\n\" >&2; exit 1'\n",
    )
    .unwrap();
    let hidden = |s: &str| {
        s.chars()
            .find(|c| matches!(c, '\u{1b}' | '\u{7}' | '\u{9b}' | '\u{202e}'))
    };
    let mut outputs = Vec::new();
    let run = run_lcx(&db, dir.path(), &["run", "--plain", file.to_str().unwrap()]);
    outputs.push(("run", text(&run.stdout) + &text(&run.stderr)));
    for args in [
        &["report"][..],
        &["report", "--format", "json"],
        &["history", "term", "--metric", "t\u{1b}[31m"],
        &["list"],
        &["query", "SELECT DISTINCT name FROM metrics"],
        &["query", "SELECT error, stderr_tail FROM runs"],
        &["export", "--format", "json"],
        &["report", "no\u{1b}]0;such"],
    ] {
        let out = run_lcx(&db, dir.path(), args);
        outputs.push((args[0], text(&out.stdout) + &text(&out.stderr)));
    }
    for (what, out) in &outputs {
        assert_eq!(
            hidden(out),
            None,
            "{what} printed a control character raw:\n{out}"
        );
    }
    let report = &outputs[1].1;
    assert!(
        report.contains("\\x1b\\]0;title\\x07 a \\< b & c"),
        "{report}"
    );
    assert!(report.contains("\\u{202e}evil"), "{report}");
    assert!(!report.contains("&lt;"), "{report}");
    // The failed cell's stderr, as the run printed it: visible.
    assert!(
        outputs[0].1.contains("\\x1b]0;owned\\x07"),
        "{}",
        outputs[0].1
    );
    // JSON keeps the value: parsed back, the escape is there.
    let json: serde_json::Value = serde_json::from_str(&outputs[2].1).unwrap();
    assert!(json["experiment"]["description"]
        .as_str()
        .unwrap()
        .contains('\u{1b}'));
}

/// `lcx report --format comment`: a pull request's comment of at most 25
/// lines for an experiment of 20 arms, the regressed ones listed (gated
/// first) and the rest counted, its heading the exit code `--check` gives
/// on the same data; a hidden marker first, for the job to update it in
/// place; `--link` only beside it.
#[test]
fn a_comment_for_twenty_arms_fits_in_twenty_five_lines() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lcx.db");
    let mut file = String::from(
        "name = \"wide\"\nworkload = \"command\"\niterations = 6\nwarmup = 1\nrepeats = 2\n\
         [measurement]\nmax_foreign_cpu = 64\n",
    );
    // The baseline and 4 arms like it; 15 arms 40 % slower.
    for i in 0..20 {
        let whole = if i >= 5 { 2 } else { 1 };
        file.push_str(&format!(
            "[[arms]]\nname = \"arm{i:02}\"\ncommand = 'for i in 1 2 3 4 5 6; do echo \
             \"{{\\\"t\\\": {whole}.$i$LCX_REPEAT}}\"; done'\n"
        ));
    }
    file.push_str("[gate]\nmetric = \"t\"\narm = \"arm15\"\nmax_slowdown = 0.05\n");
    std::fs::write(dir.path().join("wide.toml"), file).unwrap();
    ok(&db, dir.path(), &["run", "wide.toml", "--plain"]);
    let comment = ok(&db, dir.path(), &["report", "--format", "comment"]);
    let lines: Vec<&str> = comment.lines().collect();
    assert!(lines.len() <= 25, "{} lines:\n{comment}", lines.len());
    assert_eq!(lines[0], "<!-- lcx-comment wide -->");
    let check = run_lcx(&db, dir.path(), &["report", "--check"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check.stderr));
    assert!(
        lines[1].contains("FAIL (`lcx report --check` exits 1)"),
        "{comment}"
    );
    assert!(
        lines[2].starts_with("Verdict: FAIL for the t gate"),
        "{comment}"
    );
    // The gated arm first, then the other regressions, the rest counted.
    let rows: Vec<&&str> = lines.iter().filter(|l| l.starts_with("| arm")).collect();
    assert!(rows[0].starts_with("| arm15 | t (gated) |"), "{comment}");
    assert!(
        rows.iter().all(|r| r.contains("**regressed**")),
        "{comment}"
    );
    assert_eq!(rows.len(), 12, "{comment}");
    assert!(
        comment.contains("… and 3 more in the full report."),
        "{comment}"
    );
    assert!(!comment.contains("arm03"), "{comment}");
    // Where the full report is: the command, or the link given.
    assert!(
        lines.last().unwrap().contains("`lcx report 1`"),
        "{comment}"
    );
    let linked = ok(
        &db,
        dir.path(),
        &[
            "report",
            "--format",
            "comment",
            "--link",
            "https://ci.example/1",
        ],
    );
    assert!(
        linked.contains("[The full report](https://ci.example/1)"),
        "{linked}"
    );
    let out = run_lcx(
        &db,
        dir.path(),
        &["report", "--link", "https://ci.example/1"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--link: only with --format comment"));
    // A link that would run script is refused; spaces and parentheses,
    // which would end the markdown link early, are percent-encoded.
    let out = run_lcx(
        &db,
        dir.path(),
        &[
            "report",
            "--format",
            "comment",
            "--link",
            "javascript:alert(1)",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("expected an http(s) address"));
    let odd = ok(
        &db,
        dir.path(),
        &[
            "report",
            "--format",
            "comment",
            "--link",
            "https://ci.example/a (b)",
        ],
    );
    assert!(
        odd.contains("[The full report](https://ci.example/a%20%28b%29)"),
        "{odd}"
    );
}
