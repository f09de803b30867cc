//! One verdict everywhere: the verdict line `lcx run` ends its summary
//! with and `lcx report --check`'s exit code never disagree, on a clean
//! experiment, one with a failed cell and one with contended cells.

use std::path::Path;
use std::process::{Command, Output};

fn lcx(db: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lcx"));
    cmd.env("LCX_DB", db)
        .env("LCX_HOST_LOCK", crate::support::own_host_lock())
        .current_dir(dir);
    cmd
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// A command arm printing 4 iterations of `t` = `<base><repeat><i>`
/// (a little spread within and between repeats); `fail_repeat` exits 1
/// after two lines of that repeat.
fn arm(name: &str, base: &str, fail_repeat: Option<u32>) -> String {
    let fail = fail_repeat.map_or(String::new(), |r| {
        format!(r#"if [ $i -eq 3 ] && [ "$LCX_REPEAT" = {r} ]; then exit 1; fi; "#)
    });
    let command = format!(
        r#"i=1; while [ $i -le 4 ]; do {fail}echo "{{\"iteration\":$i,\"t\":{base}$LCX_REPEAT$i}}"; i=$((i+1)); done"#
    );
    format!(
        "\n[[arms]]\nname = \"{name}\"\ncommand = {}\n",
        toml::Value::String(command)
    )
}

/// Runs experiment `name` (`slow` against `fast`, about 3× faster, gated
/// at 1.5×) and returns `lcx run`'s output and `lcx report --check`'s.
fn run_and_check(
    dir: &Path,
    name: &str,
    fail_repeat: Option<u32>,
    extra: &str,
) -> (Output, Output) {
    let db = dir.join(format!("{name}.db"));
    let mut body = format!(
        "name = \"{name}\"\nworkload = \"command\"\niterations = 4\nrepeats = 3\n\
         baseline = \"slow\"\n"
    );
    body.push_str(&arm("slow", "1.0", None));
    body.push_str(&arm("fast", "0.3", fail_repeat));
    body.push_str("\n[gate]\nmetric = \"t\"\nmin_speedup = 1.5\narm = \"fast\"\n");
    body.push_str(extra);
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, body).unwrap();
    let run = lcx(&db, dir)
        .args(["run", "--plain"])
        .arg(&file)
        .output()
        .unwrap();
    let check = lcx(&db, dir).args(["report", "--check"]).output().unwrap();
    (run, check)
}

/// The last `Verdict:` line `lcx run` printed.
fn verdict_line(run: &Output) -> String {
    let out = text(&run.stdout);
    out.lines()
        .rfind(|l| l.starts_with("Verdict: "))
        .unwrap_or_else(|| panic!("no verdict line: {out}\n{}", text(&run.stderr)))
        .to_string()
}

/// The exit code of `lcx report --check` the verdict line stands for.
fn code_said(line: &str) -> i32 {
    if line.contains("`lcx report --check` says INCONCLUSIVE (exit 3)") {
        3
    } else if line.contains("`lcx report --check` says FAIL (exit 1)") {
        1
    } else if line.starts_with("Verdict: PASS ") {
        0
    } else if line.starts_with("Verdict: FAIL ") {
        1
    } else if line.starts_with("Verdict: INCONCLUSIVE ") {
        3
    } else {
        panic!("a verdict line in no known form: {line}")
    }
}

/// `lcx run`'s verdict line, asserted to say what `--check` exited with.
fn agreeing_line(run: &Output, check: &Output) -> String {
    let line = verdict_line(run);
    assert_eq!(
        check.status.code(),
        Some(code_said(&line)),
        "{line}\n{}",
        text(&check.stderr)
    );
    line
}

/// A busy loop, killed when dropped (also when the test fails first).
struct Burner(std::process::Child);

impl Drop for Burner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Clean, a failed cell, contended cells: the verdict line says what
/// `--check` exits with. (The clean one may be contended too when other
/// tests load the host: the two must agree either way.)
#[test]
fn lcx_runs_verdict_and_the_checks_exit_code_never_disagree() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();

    let (run, check) = run_and_check(dir, "clean", None, "");
    let line = agreeing_line(&run, &check);
    assert!(line.starts_with("Verdict: PASS for the t gate"), "{line}");

    // fast #3 fails: the gate passes on the two completed cells, `--check`
    // says a cell did not complete.
    let (run, check) = run_and_check(dir, "failed", Some(3), "");
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    let line = agreeing_line(&run, &check);
    assert_eq!(check.status.code(), Some(3), "{line}");
    assert!(line.starts_with("Verdict: PASS for the t gate"), "{line}");
    assert!(
        line.contains(
            "so `lcx report --check` says INCONCLUSIVE (exit 3): 1 of 6 cells did not complete"
        ),
        "{line}"
    );

    // A planted load over the whole run, and a limit of a thousandth of a
    // core: every cell is contended.
    let burner = Burner(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap(),
    );
    let (run, check) = run_and_check(
        dir,
        "contended",
        None,
        "\n[measurement]\nmax_foreign_cpu = 0.001\n",
    );
    drop(burner);
    let line = agreeing_line(&run, &check);
    assert_eq!(check.status.code(), Some(3), "{line}");
    assert!(line.starts_with("Verdict: PASS for the t gate"), "{line}");
    assert!(
        line.contains("; on contended cells, so `lcx report --check` says INCONCLUSIVE (exit 3): "),
        "{line}"
    );
    assert!(line.contains("--allow-contended"), "{line}");
}
