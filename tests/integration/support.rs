//! Helpers shared by the runner tests: the `lcx` binary, files in a temp
//! dir, counts from a database that a running `lcx run` is writing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lcx_core::store::{SqlValue, Store};

/// The `lcx` binary, with no `LCX_DB` from the environment, a host lock
/// of its own ([`own_host_lock`]) and a peak cache that is not the
/// user's: `LCX_PEAK_CACHE` when set (scripts/test.sh probes it before the
/// tests start, on a quiet host), else one per test process. The tests'
/// runs then share one probe instead of each probing beside the others.
pub fn lcx() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lcx"));
    cmd.env_remove("LCX_DB");
    cmd.env("LCX_HOST_LOCK", own_host_lock());
    if std::env::var_os("LCX_PEAK_CACHE").is_none() {
        cmd.env(
            "LCX_PEAK_CACHE",
            std::env::temp_dir()
                .join(format!("lcx-test-locks-{}", std::process::id()))
                .join("peak.json"),
        );
    }
    cmd
}

/// A host lock file (`LCX_HOST_LOCK`) no other command uses: the tests'
/// runners neither wait for each other nor for a benchmark running on the
/// machine meanwhile. The host lock's own tests give two runners one file.
/// `scripts/NAME` run with bash, `--out OUT` and `--bin` the directory of
/// the lcx under test, then `extra`; the user's database is not its, and
/// the suite's peak cache (probed once, see scripts/test.sh) is.
pub fn check_script(name: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = Path::new(env!("CARGO_BIN_EXE_lcx")).parent().unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("scripts").join(name))
        .arg("--out")
        .arg(out)
        .arg("--bin")
        .arg(bin)
        .args(extra)
        .env_remove("LCX_DB")
        .env_remove("OUT");
    if let Some(cache) = std::env::var_os("LCX_PEAK_CACHE") {
        cmd.env("LCX_PEAK_CACHE", cache);
    }
    cmd.output().unwrap()
}

pub fn own_host_lock() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir()
        .join(format!("lcx-test-locks-{}", std::process::id()))
        .join(format!("{}.lock", NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// `lcx report --db DB` (the latest experiment), its markdown.
pub fn report_text(db: &Path) -> String {
    let out = lcx()
        .args(["report", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `cmd`, fails the test with its stderr unless it succeeded, and
/// returns its stdout.
pub fn succeed(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The one integer a counting query returns.
pub fn count(store: &Store, sql: &str) -> i64 {
    match store.query(sql).unwrap().rows[0][0] {
        SqlValue::Integer(n) => n,
        ref other => panic!("{sql}: {other:?}"),
    }
}

/// Waits until `sql` counts at least `n` (the runner writes as lines arrive).
pub fn wait_for_rows(db: &Path, sql: &str, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(store) = Store::open_read_only(db) {
            if store.query(sql).is_ok() && count(&store, sql) >= n {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {sql} >= {n}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `sig` to a process this test started.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a process the test spawned and has not reaped.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// A process spinning on one core until it is killed.
pub fn burner() -> std::process::Child {
    Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap()
}

/// `git ARGS` in `dir`, which must succeed, as a test's author (no user
/// configuration needed); its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "advice.detachedHead=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
