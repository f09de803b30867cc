//! Arms at git revisions, end to end: a throwaway git repository in a temp
//! dir whose "trainer" gets slower at a planted commit, real builds (a
//! shell build for command arms, a real `cargo build` of a stand-in lcx for
//! train arms), the build cache, and `lcx bisect`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lcx_core::store::Store;

use crate::support::{count, git, lcx, write};

/// Prints `LCX_ITERATIONS` lines whose `time/iteration_seconds` is the
/// number in `speed.txt`, with a little spread per iteration and repeat.
const TRAINER: &str = r#"speed=$(cat speed.txt)
i=1
while [ $i -le "$LCX_ITERATIONS" ]; do
  awk -v s="$speed" -v i="$i" -v r="$LCX_REPEAT" 'BEGIN { printf "{\"iteration\": %d, \"time/iteration_seconds\": %.5f}\n", i, s * (0.99 + 0.01 * (i % 3)) * (1 + 0.004 * r) }'
  i=$((i+1))
done
"#;

/// The build copies the trainer (the cells run the copy, so a cell proves
/// the build ran in its checkout) and counts itself in `$LCX_TEST_BUILDS`.
const BUILD: &str = "cp trainer.sh built.sh && git rev-parse HEAD >> \"$LCX_TEST_BUILDS\"\n";

/// A repository with one commit per speed; returns it and the shas.
fn repository(dir: &Path, speeds: &[&str]) -> (PathBuf, Vec<String>) {
    repository_breaking(dir, speeds, &[])
}

/// [`repository`] whose commits at the indices in `broken` do not build:
/// they hold a `broken.txt`, which the build refuses.
fn repository_breaking(dir: &Path, speeds: &[&str], broken: &[usize]) -> (PathBuf, Vec<String>) {
    let repo = dir.join("project");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    write(&repo, "trainer.sh", TRAINER);
    let refuse =
        "if [ -e broken.txt ]; then echo 'error: this commit does not build' >&2; exit 1; fi\n";
    write(&repo, "build.sh", &format!("{refuse}{BUILD}"));
    let mut shas = Vec::new();
    for (i, speed) in speeds.iter().enumerate() {
        let marker = repo.join("broken.txt");
        if broken.contains(&i) {
            write(&repo, "broken.txt", "a commit that does not build\n");
        } else if marker.exists() {
            std::fs::remove_file(marker).unwrap();
        }
        write(&repo, "speed.txt", &format!("{speed}\n"));
        write(&repo, "history.txt", &format!("commit {i}\n"));
        git(&repo, &["add", "-A"]);
        git(
            &repo,
            &["commit", "-q", "-m", &format!("commit {i}: speed {speed}")],
        );
        shas.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    (repo, shas)
}

fn experiment(dir: &Path, repo: &Path, arms: &[(&str, &str)], extra: &str) -> PathBuf {
    let mut text = format!(
        "name = \"revs\"\nworkload = \"command\"\niterations = 4\nwarmup = 1\nrepeats = 2\n\
         repository = {}\nbuild = \"sh build.sh\"\n{extra}\n\
         [[columns]]\nmetric = \"time/iteration_seconds\"\nshow = \"both\"\n",
        toml::Value::String(repo.display().to_string())
    );
    for (name, revision) in arms {
        text.push_str(&format!(
            "\n[[arms]]\nname = \"{name}\"\nrevision = \"{revision}\"\ncommand = \"sh built.sh\"\n"
        ));
    }
    write(dir, "revs.toml", &text)
}

fn run(dir: &Path, args: &[&str]) -> Output {
    lcx()
        .args(args)
        .env("LCX_TEST_BUILDS", dir.join("builds.txt"))
        .env_remove("LCX_REVISION_CACHE")
        .current_dir(dir)
        .output()
        .unwrap()
}

fn builds(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("builds.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn text_of(out: &Output) -> String {
    text(out)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The verdict of `arm` on `time/iteration_seconds` in experiment `id`.
fn verdict(dir: &Path, db: &Path, id: i64, arm: &str) -> String {
    let out = run(
        dir,
        &[
            "report",
            &id.to_string(),
            "--db",
            db.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arm = report["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == arm)
        .unwrap_or_else(|| panic!("no arm {arm} in {report}"));
    let metric = arm["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "time/iteration_seconds")
        .unwrap();
    metric["comparison"]["verdict"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn two_revisions_run_interleaved_the_slower_is_found_and_builds_are_cached() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, shas) = repository(dir.path(), &["1.0", "1.0", "1.5"]);
    let file = experiment(
        dir.path(),
        &repo,
        &[("base", "main~2"), ("candidate", "main")],
        "",
    );
    let db = dir.path().join("lcx.db");
    let out = run(dir.path(), &["run", file.to_str().unwrap(), "--plain"]);
    assert!(out.status.success(), "{}", text(&out));
    let log = text(&out);
    assert!(log.contains("building with `sh build.sh`"), "{log}");
    // Each sha built once, before any cell.
    assert_eq!(builds(dir.path()), vec![shas[0].clone(), shas[2].clone()]);

    let store = Store::open_read_only(&db).unwrap();
    // Interleaved: base, candidate, base, candidate.
    let order = store
        .query("SELECT arm FROM runs ORDER BY started_at, id")
        .unwrap();
    let arms: Vec<String> = order.rows.iter().map(|r| format!("{:?}", r[0])).collect();
    assert_eq!(arms.len(), 4);
    assert!(
        arms[0].contains("base") && arms[1].contains("candidate"),
        "{arms:?}"
    );
    assert!(
        arms[2].contains("base") && arms[3].contains("candidate"),
        "{arms:?}"
    );
    // Provenance per cell.
    assert_eq!(
        count(
            &store,
            &format!(
                "SELECT COUNT(*) FROM runs WHERE arm = 'candidate' AND revision = 'main' \
                 AND revision_sha = '{}' AND revision_diff_sha256 IS NULL",
                shas[2]
            )
        ),
        2
    );
    drop(store);
    assert_eq!(verdict(dir.path(), &db, 1, "candidate"), "regressed");

    // The report names each arm's revision and what changed between them.
    let out = run(dir.path(), &["report", "--db", db.to_str().unwrap()]);
    let report = text(&out);
    assert!(
        report.contains(&format!("main~2@{}", &shas[0][..12])),
        "{report}"
    );
    assert!(report.contains("commit 2: speed 1.5"), "{report}");

    // History selects cells by revision, as asked or by a sha prefix.
    let history = |rev: &str| {
        let out = run(
            dir.path(),
            &[
                "history",
                "revs",
                "--revision",
                rev,
                "--format",
                "json",
                "--db",
                db.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let by_name = history("main");
    assert!(
        by_name.contains("\"candidate\"") && !by_name.contains("\"base\""),
        "{by_name}"
    );
    let by_sha = history(&shas[0][..8]);
    assert!(
        by_sha.contains("\"base\"") && !by_sha.contains("\"candidate\""),
        "{by_sha}"
    );

    // `rev:` names the newest experiment with a cell at a revision.
    let out = run(
        dir.path(),
        &[
            "report",
            &format!("rev:{}", &shas[2][..10]),
            "--db",
            db.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("\"id\": 1"), "{}", text(&out));

    // A second experiment hits the cache: no build runs.
    let dry = run(dir.path(), &["run", file.to_str().unwrap(), "--dry-run"]);
    assert!(text(&dry).contains("cached"), "{}", text(&dry));
    let out = run(dir.path(), &["run", file.to_str().unwrap(), "--plain"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("cached build"), "{}", text(&out));
    assert_eq!(builds(dir.path()).len(), 2);

    // `lcx cache` lists both entries and prunes them.
    let out = run(dir.path(), &["cache", "list", "--db", db.to_str().unwrap()]);
    let listed = text(&out);
    assert!(
        listed.contains(&shas[0][..12]) && listed.contains(&shas[2][..12]),
        "{listed}"
    );
    let out = run(
        dir.path(),
        &["cache", "prune", "--all", "--db", db.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(!dir
        .path()
        .join(".lcx/revisions")
        .join(&shas[0][..12])
        .exists());
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 1);
}

#[test]
fn a_broken_revision_fails_before_any_cell_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = repository(dir.path(), &["1.0"]);
    write(
        &repo,
        "build.sh",
        "echo compiling; echo 'error: it does not build' >&2; exit 3\n",
    );
    git(&repo, &["commit", "-q", "-am", "break the build"]);
    let file = experiment(
        dir.path(),
        &repo,
        &[("base", "main~1"), ("broken", "main")],
        "",
    );
    let out = run(dir.path(), &["run", file.to_str().unwrap(), "--plain"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = text(&out);
    assert!(err.contains("arm `broken`"), "{err}");
    assert!(err.contains("`sh build.sh` exited with 3"), "{err}");
    assert!(err.contains("error: it does not build"), "{err}");
    assert!(
        !dir.path().join("lcx.db").exists(),
        "nothing may be recorded"
    );

    // A revision git does not know is the file's fault: exit 2.
    let file = experiment(
        dir.path(),
        &repo,
        &[("base", "main~1"), ("x", "no-such-branch")],
        "",
    );
    let out = run(dir.path(), &["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("revision `no-such-branch` is not a commit"),
        "{}",
        text(&out)
    );
}

#[test]
fn worktree_runs_the_uncommitted_edit_and_keys_the_cache_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, shas) = repository(dir.path(), &["1.0"]);
    write(&repo, "speed.txt", "3.0\n");
    write(&repo, "notes.txt", "an untracked file travels too\n");
    let file = experiment(
        dir.path(),
        &repo,
        &[("committed", "main"), ("edited", "worktree")],
        "",
    );
    let out = run(dir.path(), &["run", file.to_str().unwrap(), "--plain"]);
    assert!(out.status.success(), "{}", text(&out));
    let db = dir.path().join("lcx.db");
    let store = Store::open_read_only(&db).unwrap();
    let mean = |arm: &str| {
        store
            .query(&format!(
                "SELECT AVG(value) FROM metrics_current m JOIN runs r ON r.id = m.run_id \
                 WHERE r.arm = '{arm}' AND m.name = 'time/iteration_seconds'"
            ))
            .unwrap()
            .rows[0][0]
            .clone()
    };
    let (committed, edited) = (
        format!("{:?}", mean("committed")),
        format!("{:?}", mean("edited")),
    );
    assert!(committed.contains("Real(1.0"), "{committed}");
    assert!(
        edited.contains("Real(3.0") || edited.contains("Real(2.9"),
        "{edited}"
    );
    assert_eq!(
        count(
            &store,
            &format!(
                "SELECT COUNT(*) FROM runs WHERE arm = 'edited' AND revision = 'worktree' \
                 AND revision_sha = '{}' AND length(revision_diff_sha256) = 64",
                shas[0]
            )
        ),
        2
    );
    drop(store);
    // Two builds: the commit, and the commit with the edit.
    assert_eq!(builds(dir.path()).len(), 2);
    // The edit is in the snapshot, not in the repository's history.
    assert_eq!(git(&repo, &["status", "--porcelain"]).lines().count(), 2);
}

#[test]
fn bisect_finds_the_planted_regression_among_nine_commits() {
    let dir = tempfile::tempdir().unwrap();
    let speeds = [
        "1.0", "1.0", "1.0", "1.0", "1.0", "1.0", "1.5", "1.5", "1.5", "1.5",
    ];
    let (repo, shas) = repository(dir.path(), &speeds);
    let file = experiment(dir.path(), &repo, &[("trainer", "main")], "");
    let out = run(
        dir.path(),
        &[
            "bisect",
            "--good",
            &shas[0],
            "--bad",
            &shas[9],
            file.to_str().unwrap(),
            "--plain",
        ],
    );
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains(&format!("first regressed revision: {}", &shas[6][..12])),
        "{log}"
    );
    assert!(log.contains("commit 6: speed 1.5"), "{log}");
    // Each step is an ordinary experiment in the database; bisect over 9
    // commits takes the endpoints' check plus at most four steps.
    let store = Store::open_read_only(&dir.path().join("lcx.db")).unwrap();
    let steps = count(&store, "SELECT COUNT(*) FROM experiments");
    assert!((2..=5).contains(&steps), "{steps} experiments\n{log}");
    // Each revision is built once, the good one reused by every step.
    let built = builds(dir.path());
    let mut unique = built.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(built.len(), unique.len(), "{built:?}");
}

/// `lcx bisect --good shas[0] --bad shas[9]` over a repository whose
/// trainer slows at commit 6 and whose commits in `broken` do not build.
fn bisect_breaking(broken: &[usize], bad: usize) -> (tempfile::TempDir, Vec<String>, Output) {
    let dir = tempfile::tempdir().unwrap();
    let speeds = [
        "1.0", "1.0", "1.0", "1.0", "1.0", "1.0", "1.5", "1.5", "1.5", "1.5",
    ];
    let (repo, shas) = repository_breaking(dir.path(), &speeds, broken);
    let file = experiment(dir.path(), &repo, &[("trainer", "main")], "");
    let out = run(
        dir.path(),
        &[
            "bisect",
            "--good",
            &shas[0],
            "--bad",
            &shas[bad],
            file.to_str().unwrap(),
            "--plain",
        ],
    );
    (dir, shas, out)
}

/// Issue 39 §7: a probed commit that does not build is skipped, as `git
/// bisect skip` does, saying so with its build log, and the search goes on
/// with a neighbour; here it still narrows to the one regressed commit.
#[test]
fn bisect_skips_a_commit_that_does_not_build() {
    let (_dir, shas, out) = bisect_breaking(&[4], 9);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{} does not build (`sh build.sh` exited with 1): skipping it",
            &shas[4][..12]
        )),
        "{stderr}"
    );
    let build_log = stderr
        .split("build log: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .expect("the skip names the build log");
    assert!(
        std::fs::read_to_string(build_log)
            .unwrap()
            .contains("this commit does not build"),
        "{build_log}"
    );
    assert!(
        log.contains(&format!("first regressed revision: {}", &shas[6][..12])),
        "{log}"
    );
}

/// When the regressed commit itself does not build, the search cannot tell
/// it from the next: it reports both, as the range it could not narrow.
#[test]
fn bisect_reports_the_range_that_skipped_commits_leave() {
    let (_dir, shas, out) = bisect_breaking(&[6], 9);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains(&format!(
            "the first regressed revision is one of: {} {}",
            &shas[6][..12],
            &shas[7][..12]
        )),
        "{log}"
    );
    assert!(!log.contains("first regressed revision: "), "{log}");
    assert!(log.contains("(skipped: does not build)"), "{log}");
}

/// The ends are judged, never skipped: a `--bad` that does not build stays
/// an error.
#[test]
fn bisect_stops_when_an_end_does_not_build() {
    let (_dir, _shas, out) = bisect_breaking(&[6], 6);
    let log = text(&out);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("this commit does not build"), "{log}");
    assert!(!log.contains("skipping it"), "{log}");
}

/// A stand-in for lcx: a real cargo project with the subcommands the
/// runner calls (`--version`, `config show`, `train --config FILE`), whose
/// iteration time is a constant of its source.
fn stand_in_lcx(dir: &Path, speeds: &[&str]) -> (PathBuf, Vec<String>) {
    let repo = dir.join("stand-in");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    write(
        &repo,
        "Cargo.toml",
        "[package]\nname = \"lcx\"\nversion = \"0.0.1\"\nedition = \"2021\"\n\n[dependencies]\n",
    );
    write(&repo, ".gitignore", "/target\n");
    let mut shas = Vec::new();
    for (i, speed) in speeds.iter().enumerate() {
        let main = STAND_IN.replace("SPEED_VALUE", speed);
        write(&repo.join("src"), "main.rs", &main);
        if i == 0 {
            let out = Command::new(env!("CARGO"))
                .args(["generate-lockfile", "--offline"])
                .current_dir(&repo)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out));
        }
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", &format!("speed {speed}")]);
        shas.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    (repo, shas)
}

const STAND_IN: &str = r#"
const SPEED: f64 = SPEED_VALUE;
const KNOWN: &[&str] = &["run.max_iterations", "traversal.scheduler"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.windows(2).find(|w| w[0] == name).map(|w| w[1].clone());
    match args.first().map(String::as_str) {
        Some("--version") => println!("lcx 0.0.1 (stand-in, speed {SPEED})"),
        Some("config") => {
            for w in args.windows(2).filter(|w| w[0] == "--set") {
                let (key, value) = w[1].split_once('=').unwrap();
                if !KNOWN.contains(&key) {
                    eprintln!("error: --set {}: unknown key `{key}`", w[1]);
                    std::process::exit(2);
                }
                println!("{key} = {value}");
            }
        }
        Some("train") => {
            let path = flag("--config").expect("--config");
            assert_ne!(path, "-", "this stand-in reads its config from a file");
            let config = std::fs::read_to_string(path).unwrap();
            let n: u32 = config
                .lines()
                .find_map(|l| l.strip_prefix("run.max_iterations = "))
                .and_then(|v| v.trim().parse().ok())
                .expect("run.max_iterations");
            for i in 1..=n {
                let t = SPEED * (0.99 + 0.01 * f64::from(i % 3));
                println!("{{\"iteration\": {i}, \"time/iteration_seconds\": {t}}}");
            }
        }
        other => panic!("unexpected {other:?}"),
    }
}
"#;

#[test]
fn train_arms_at_revisions_build_with_cargo_and_resolve_their_own_config() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, shas) = stand_in_lcx(dir.path(), &["2.0", "1.0"]);
    let text_of = |extra_arm: &str| {
        format!(
            "name = \"stand-in\"\nworkload = \"train\"\niterations = 4\nwarmup = 1\n\
             repository = {}\n\
             [[columns]]\nmetric = \"time/iteration_seconds\"\nshow = \"both\"\n\
             [[arms]]\nname = \"old\"\nrevision = \"main~1\"\n\
             [[arms]]\nname = \"new\"\nrevision = \"main\"\nset = [\"traversal.scheduler=\\\"interleaved\\\"\"]\n{extra_arm}",
            toml::Value::String(repo.display().to_string())
        )
    };
    let file = write(dir.path(), "stand-in.toml", &text_of(""));
    let out = run(dir.path(), &["run", file.to_str().unwrap(), "--plain"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("cargo build --release --locked"),
        "{}",
        text(&out)
    );
    let db = dir.path().join("lcx.db");
    let store = Store::open_read_only(&db).unwrap();
    // The config each cell ran is the one its revision resolved.
    let config = store
        .query("SELECT config_toml, binary_version FROM runs WHERE arm = 'new'")
        .unwrap();
    let row = format!("{:?}", config.rows[0]);
    assert!(
        row.contains("traversal.scheduler = \\\"interleaved\\\""),
        "{row}"
    );
    assert!(row.contains("run.max_iterations = 4"), "{row}");
    assert!(row.contains("stand-in, speed 1)"), "{row}");
    assert_eq!(
        count(
            &store,
            &format!("SELECT COUNT(*) FROM runs WHERE arm = 'old' AND revision_sha = '{}' AND status = 'completed'", shas[0])
        ),
        1
    );
    drop(store);
    assert_eq!(verdict(dir.path(), &db, 1, "new"), "improved");

    // A key the revision does not know: its own message, exit 2, nothing
    // recorded.
    let file = write(
        dir.path(),
        "bad.toml",
        &text_of("[[arms]]\nname = \"typo\"\nrevision = \"main\"\nset = [\"travesal.depth=3\"]\n"),
    );
    let out = run(
        dir.path(),
        &["run", file.to_str().unwrap(), "--db", "other.db"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("unknown key `travesal.depth`"),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("other.db").exists());
}

#[test]
fn a_resume_reruns_failed_cells_on_the_recorded_build() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, shas) = repository(dir.path(), &["1.0", "1.2"]);
    // The candidate fails while a marker file exists outside the repository.
    let marker = dir.path().join("fail-now");
    std::fs::write(&marker, "").unwrap();
    let mut text = std::fs::read_to_string(experiment(
        dir.path(),
        &repo,
        &[("base", "main~1"), ("candidate", "main")],
        "",
    ))
    .unwrap();
    text.push_str(&format!(
        "\n[[arms]]\nname = \"flaky\"\nrevision = \"main\"\ncommand = \"test ! -e {} && sh built.sh\"\n",
        marker.display()
    ));
    let file = write(dir.path(), "flaky.toml", &text);
    let out = run(dir.path(), &["run", file.to_str().unwrap(), "--plain"]);
    assert_eq!(out.status.code(), Some(1), "{}", text_of(&out));
    // A new commit after the experiment started does not change what the
    // resume runs: the recorded sha does.
    write(&repo, "speed.txt", "9.0\n");
    git(&repo, &["commit", "-q", "-am", "later"]);
    std::fs::remove_file(&marker).unwrap();
    let out = run(dir.path(), &["run", "--resume", "latest", "--plain"]);
    assert!(out.status.success(), "{}", text_of(&out));
    let store = Store::open_read_only(&dir.path().join("lcx.db")).unwrap();
    assert_eq!(
        count(
            &store,
            &format!(
                "SELECT COUNT(*) FROM runs WHERE arm = 'flaky' AND status = 'completed' \
                 AND attempt = 2 AND revision_sha = '{}'",
                shas[1]
            )
        ),
        2
    );
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM metrics_current m JOIN runs r ON r.id = m.run_id \
             WHERE r.arm = 'flaky' AND m.value > 5"
        ),
        0,
        "the later commit's speed must not appear"
    );
    // Two shas, two builds: the resume built nothing.
    assert_eq!(builds(dir.path()).len(), 2);
}

/// Whether process `pid` is gone (or a zombie nobody has reaped yet).
fn gone(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.is_empty() || status.contains("State:\tZ")
}

/// A runner killed while it builds a revision (SIGKILL, SIGTERM, Ctrl-C's
/// SIGINT) takes the build with it, grandchildren included, and records
/// nothing; the half-built entry is never used: the next run builds it
/// again, from the start.
#[test]
fn a_build_dies_with_its_runner_and_a_half_build_is_built_again() {
    for sig in [libc::SIGKILL, libc::SIGTERM, libc::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let (repo, _) = repository(dir.path(), &["0.01"]);
        // A build that hangs (a long cargo, with a child of its own) until
        // the test says go.
        write(
            &repo,
            "build.sh",
            &format!(
                "if [ ! -e \"$LCX_TEST_GO\" ]; then\n  echo $$ >> \"$LCX_TEST_PIDS\"\n  \
                 sleep 300 &\n  echo $! >> \"$LCX_TEST_PIDS\"\n  wait\nfi\n{BUILD}"
            ),
        );
        git(&repo, &["commit", "-q", "-am", "a slow build"]);
        let file = experiment(dir.path(), &repo, &[("slow", "main")], "");
        let pids = dir.path().join("pids.txt");
        let go = dir.path().join("go");
        let start = || {
            lcx()
                .args(["run", file.to_str().unwrap(), "--plain"])
                .env("LCX_TEST_BUILDS", dir.path().join("builds.txt"))
                .env("LCX_TEST_PIDS", &pids)
                .env("LCX_TEST_GO", &go)
                .env_remove("LCX_REVISION_CACHE")
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let runner = start();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let build: Vec<i32> = loop {
            let text = std::fs::read_to_string(&pids).unwrap_or_default();
            let found: Vec<i32> = text.lines().filter_map(|l| l.parse().ok()).collect();
            if found.len() == 2 {
                break found;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the build never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        crate::support::signal(runner.id(), sig);
        let out = runner.wait_with_output().unwrap();
        if sig == libc::SIGINT {
            assert_eq!(out.status.code(), Some(130), "{}", text_of(&out));
            assert!(
                text_of(&out).contains("stopped while building revision `main`"),
                "{}",
                text_of(&out)
            );
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !build.iter().all(|&p| gone(p)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for pid in &build {
            assert!(
                gone(*pid),
                "signal {sig}: build process {pid} outlived its runner"
            );
        }
        assert!(
            builds(dir.path()).is_empty(),
            "signal {sig}: the build went on"
        );
        let db = dir.path().join("lcx.db");
        if db.exists() {
            let store = Store::open_read_only(&db).unwrap();
            assert_eq!(count(&store, "SELECT COUNT(*) FROM experiments"), 0);
        }

        // The half-built entry is built again, from the start, and used.
        std::fs::write(&go, "").unwrap();
        let out = start().wait_with_output().unwrap();
        assert!(out.status.success(), "signal {sig}: {}", text_of(&out));
        assert_eq!(builds(dir.path()).len(), 1, "signal {sig}");
    }
}

/// `cache prune --all` while an experiment runs keeps the builds its cells
/// use (saying so), and the experiment completes; once it has ended, prune
/// removes them and their lock files.
#[test]
fn prune_keeps_the_builds_a_running_experiment_uses() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = repository(dir.path(), &["0.01"]);
    let text = format!(
        "name = \"leased\"\nworkload = \"command\"\niterations = 2\nwarmup = 0\nrepeats = 3\n\
         repository = {}\nbuild = \"sh build.sh\"\n\n[[arms]]\nname = \"r\"\n\
         revision = \"main\"\ncommand = \"sleep 1; sh built.sh\"\n",
        toml::Value::String(repo.display().to_string())
    );
    let file = write(dir.path(), "leased.toml", &text);
    let db = dir.path().join("lcx.db");
    let runner = lcx()
        .args(["run", file.to_str().unwrap(), "--plain"])
        .env("LCX_TEST_BUILDS", dir.path().join("builds.txt"))
        .env_remove("LCX_REVISION_CACHE")
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::support::wait_for_rows(&db, "SELECT COUNT(*) FROM runs WHERE status = 'running'", 1);
    let prune = run(dir.path(), &["cache", "prune", "--all"]);
    assert!(prune.status.success(), "{}", text_of(&prune));
    assert!(
        text_of(&prune).contains("a running experiment's cells use it"),
        "{}",
        text_of(&prune)
    );
    let out = runner.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text_of(&out));
    let store = Store::open_read_only(&db).unwrap();
    assert_eq!(
        count(
            &store,
            "SELECT COUNT(*) FROM runs WHERE status = 'completed'"
        ),
        3
    );

    let prune = run(dir.path(), &["cache", "prune", "--all"]);
    assert!(
        text_of(&prune).contains("removed 1 build"),
        "{}",
        text_of(&prune)
    );
    let left: Vec<String> = std::fs::read_dir(dir.path().join(".lcx/revisions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "prune left {left:?}");
}
