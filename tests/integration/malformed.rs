//! Malformed experiment files, made by the test: every kind of wrong value
//! for every key (types, signs, ranges, huge and non-finite numbers,
//! durations no clock can hold, names of invisible or control characters,
//! matrix keys that dodge the rules, syntax errors, non-UTF-8 bytes). Each
//! goes through `lcx run --dry-run`; none may panic, a refusal must exit 2
//! naming the file, and every file the dry run accepts is then run for
//! real, which may fail its cells but never panic.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

/// One case: the keys it sets or replaces at the top, in the first arm and
/// as tables after the arms.
struct Case {
    what: String,
    top: BTreeMap<&'static str, String>,
    arm: Vec<String>,
    tail: Vec<String>,
    raw: Option<Vec<u8>>,
}

fn case(what: impl Into<String>) -> Case {
    Case {
        what: what.into(),
        top: BTreeMap::new(),
        arm: Vec::new(),
        tail: Vec::new(),
        raw: None,
    }
}

const TWO_LINES: &str = r#"command = ["sh", "-c", "echo '{\"t\": 1}'; echo '{\"t\": 2}'"]"#;

impl Case {
    fn top(mut self, key: &'static str, value: impl Into<String>) -> Case {
        self.top.insert(key, value.into());
        self
    }
    fn arm(mut self, line: impl Into<String>) -> Case {
        self.arm.push(line.into());
        self
    }
    fn tail(mut self, text: impl Into<String>) -> Case {
        self.tail.push(text.into());
        self
    }

    fn text(&self) -> Vec<u8> {
        if let Some(raw) = &self.raw {
            return raw.clone();
        }
        let mut top: BTreeMap<&str, String> = BTreeMap::from([
            ("name", "\"m\"".to_string()),
            ("workload", "\"command\"".to_string()),
            ("iterations", "2".to_string()),
        ]);
        for (k, v) in &self.top {
            top.insert(k, v.clone());
        }
        let mut out = String::new();
        for (k, v) in top {
            if v != "<none>" {
                out.push_str(&format!("{k} = {v}\n"));
            }
        }
        let arm_has_command = self.arm.iter().any(|l| l.starts_with("command"));
        out.push_str("\n[[arms]]\nname = \"a\"\n");
        if !arm_has_command {
            out.push_str(TWO_LINES);
            out.push('\n');
        }
        for l in &self.arm {
            out.push_str(l);
            out.push('\n');
        }
        out.push_str(&format!("\n[[arms]]\nname = \"b\"\n{TWO_LINES}\n"));
        for t in &self.tail {
            out.push('\n');
            out.push_str(t);
            out.push('\n');
        }
        out.into_bytes()
    }
}

/// Every case: at least 106, each a different mistake.
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let bad_numbers = [
        "0", "-1", "1.5", "\"3\"", "true", "[]", "nan", "inf", "-inf", "1e308",
    ];
    for v in bad_numbers {
        out.push(case(format!("iterations = {v}")).top("iterations", v));
    }
    for v in ["-1", "\"x\"", "2", "99", "nan", "1.5", "\"auto \""] {
        out.push(case(format!("warmup = {v}")).top("warmup", v));
    }
    for v in [
        "0",
        "-1",
        "100000",
        "\"3\"",
        "{ min = 0, max = 2, precision = 0.1 }",
        "{ min = 3, max = 2, precision = 0.1 }",
        "{ min = 1, max = 2, precision = 2 }",
        "{ min = 1, max = 2 }",
        "{ min = 1, max = 20000, precision = 0.1 }",
    ] {
        out.push(case(format!("repeats = {v}")).top("repeats", v));
    }
    for v in [
        "0",
        "-1",
        "1e308",
        "\"99999999999999999999h\"",
        "\"10x\"",
        "\"\"",
        "[]",
        "nan",
        "inf",
        "\"721h\"",
        "\"-5s\"",
        "\"1e400s\"",
        "9223372036854775807",
    ] {
        out.push(case(format!("timeout = {v}")).top("timeout", v));
        out.push(case(format!("arm timeout = {v}")).arm(format!("timeout = {v}")));
    }
    for v in [
        "1e308",
        "\"99999999999999999999h\"",
        "-1",
        "nan",
        "\"soon\"",
    ] {
        out.push(
            case(format!("wait_for_quiet = {v}"))
                .tail(format!("[measurement]\nwait_for_quiet = {v}")),
        );
    }
    for v in ["0", "-1", "inf", "nan", "\"x\""] {
        out.push(
            case(format!("max_foreign_cpu = {v}"))
                .tail(format!("[measurement]\nmax_foreign_cpu = {v}")),
        );
    }
    for v in ["-1", "11", "1e3", "\"x\""] {
        out.push(
            case(format!("rerun_contended = {v}"))
                .tail(format!("[measurement]\nrerun_contended = {v}")),
        );
    }
    for v in [
        "\"\"",
        "\" \"",
        "\"\\u200b\"",
        "\"a\\u202eb\"",
        "\"a\\u001b[2Jb\"",
        "\"a\\nb\"",
        "1",
        "true",
        "[]",
    ] {
        out.push(case(format!("name = {v}")).top("name", v));
    }
    out.push(case("name of 201 characters").top("name", format!("\"{}\"", "n".repeat(201))));
    for v in ["\"\\u202eevil\"", "\"\\u200b\"", "\"a\\u0007\"", "1"] {
        out.push(case(format!("label = {v}")).arm(format!("label = {v}")));
    }
    for v in ["\"random\"", "1"] {
        out.push(case(format!("order = {v}")).top("order", v));
    }
    for v in ["\"nope\"", "\"\"", "1"] {
        out.push(case(format!("baseline = {v}")).top("baseline", v));
    }
    for v in ["\"bogus\"", "1"] {
        out.push(case(format!("timing = {v}")).top("timing", v));
    }
    out.push(case("variable_iterations = \"yes\"").top("variable_iterations", "\"yes\""));
    out.push(case("host_lock = \"no\"").top("host_lock", "\"no\""));
    for v in ["\"\"", "[]", "[\"\"]", "[\"a\\u0000b\"]", "1"] {
        out.push(case(format!("setup = {v}")).top("setup", v));
    }
    for v in ["\"\"", "[]", "[\"\"]", "[\"a\\u0000b\"]", "1", "[1, 2]"] {
        out.push(case(format!("command = {v}")).arm(format!("command = {v}")));
    }
    for v in [
        "{ \"\" = \"x\" }",
        "{ \"A=B\" = \"x\" }",
        "{ A = [1] }",
        "{ \"A\\u001b\" = \"x\" }",
        "{ A = \"a\\u0000\" }",
    ] {
        out.push(case(format!("env = {v}")).arm(format!("env = {v}")));
    }
    for v in ["\"999999\"", "\"a-b\"", "\"3-1\"", "\"\""] {
        out.push(case(format!("cpus = {v}")).arm(format!("cpus = {v}")));
    }
    out.push(case("requires = \"gpu\"").arm("requires = \"gpu\""));
    out.push(case("revision = \"\"").arm("revision = \"\""));
    out.push(case("an unknown arm key").arm("bogus = 1"));
    out.push(case("an unknown top key").top("bogus", "1"));
    for name in ["\"a b\"", "\"\"", "\"\\u202e\"", "\"a/b\"", "1"] {
        out.push(
            case(format!("arm name {name}")).tail(format!("[[arms]]\nname = {name}\n{TWO_LINES}")),
        );
    }
    for g in [
        "min_speedup = 0",
        "min_speedup = -1",
        "min_speedup = nan",
        "min_speedup = inf",
        "min_speedup = \"x\"",
        "max_slowdown = 1",
        "max_slowdown = -0.1",
        "min_speedup = 1.1\nmin_effect = 1",
        "min_speedup = 1.1\nmin_effect = 1.5",
        "min_speedup = 1.1\nmin_effect = 100",
        "min_speedup = 1.1\nmin_effect = -0.1",
        "min_speedup = 1.1\nmin_effect = nan",
        "min_speedup = 1.1\narm = \"nope\"",
        "min_speedup = 1.1\nmax_slowdown = 0.1",
    ] {
        out.push(case(format!("[gate] {g}")).tail(format!("[gate]\nmetric = \"t\"\n{g}")));
    }
    for m in ["\"\"", "\"\\u200b\"", "\"t\\u202e\""] {
        out.push(
            case(format!("[gate] metric = {m}"))
                .tail(format!("[gate]\nmetric = {m}\nmin_speedup = 1.1")),
        );
    }
    for g in [
        "margin = -1",
        "margin = nan",
        "margin = inf",
        "margin = 0.1\npaired = \"x\"",
        "margin = 0.1\nfold = \"median\"",
        "margin = 0.1\ndirection = \"none\"",
    ] {
        out.push(case(format!("[[guard]] {g}")).tail(format!("[[guard]]\nmetric = \"t\"\n{g}")));
    }
    for c in [
        "show = \"bad\"",
        "direction = \"up\"",
        "label = \"\\u202e\"",
        "fold = \"x\"",
        "label = \"\\u200b\\u200c\"",
    ] {
        out.push(
            case(format!("[[columns]] {c}")).tail(format!("[[columns]]\nmetric = \"t\"\n{c}")),
        );
    }
    for e in [
        "kind = \"k8s\"",
        "max_parallel = 0",
        "max_parallel = 2000",
        "placement = \"x\"",
        "cpus_per_task = 0",
        "cpus_per_task = -1",
        "partition = \"a\\nb\"",
    ] {
        out.push(case(format!("[executor] {e}")).tail(format!("[executor]\n{e}")));
    }
    for m in [
        "\"env.A=B\" = [1, 2]",
        "\"env.\" = [1]",
        "\"env.A\" = []",
        "\"env.A\" = [[1]]",
        "\"env.A\\u001b\" = [1]",
        "\"x.y\" = [1]",
        "\"env.A\" = [\"\\u0000\"]",
    ] {
        out.push(case(format!("[matrix] {m}")).tail(format!("[matrix]\n{m}")));
    }
    let thousand: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    out.push(case("a matrix of a million arms").tail(format!(
        "[matrix]\n\"env.A\" = [{t}]\n\"env.B\" = [{t}]",
        t = thousand.join(", ")
    )));
    out.push(
        case("a 3 MB environment value")
            .arm(format!("env = {{ BIG = \"{}\" }}", "v".repeat(3 << 20))),
    );
    out.push(case("300,000 arguments").arm(format!(
        "command = [\"echo\", {}]",
        vec!["\"a\""; 300_000].join(", ")
    )));
    out.push(case("a second arm named a").tail(format!("[[arms]]\nname = \"a\"\n{TWO_LINES}")));
    for raw in [
        &b""[..],
        b"name = ",
        b"[[arms]",
        b"name = \"x",
        b"name = \"m\"\nname = \"n\"\n",
        b"\xff\xfe\x00garbage",
        b"arms = 1\nname = \"m\"\nworkload = \"command\"\niterations = 1\n",
        b"name = \"m\"\nworkload = \"command\"\niterations = 1\n",
        b"name = \"m\"\nworkload = \"tpu\"\niterations = 1\n[[arms]]\nname = \"a\"\ncommand = \"true\"\n",
    ] {
        let mut c = case(format!("raw {:?}", String::from_utf8_lossy(raw)));
        c.raw = Some(raw.to_vec());
        out.push(c);
    }
    out
}

fn panicked(out: &Output) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    out.status.code() == Some(101) || out.status.code().is_none() || err.contains("panicked")
}

#[test]
fn malformed_files_are_refused_or_run_and_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases();
    assert!(cases.len() >= 106, "{} cases", cases.len());
    let mut refused = 0;
    let mut ran = 0;
    let mut problems = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let file = dir.path().join(format!("m{i}.toml"));
        std::fs::write(&file, c.text()).unwrap();
        let dry = crate::support::lcx()
            .args(["run", "--dry-run"])
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&dry.stderr);
        if panicked(&dry) {
            problems.push(format!("{}: --dry-run panicked: {err}", c.what));
            continue;
        }
        match dry.status.code() {
            Some(2) => {
                refused += 1;
                if !err.contains(&format!("m{i}.toml")) {
                    problems.push(format!("{}: refusal does not name the file: {err}", c.what));
                }
            }
            Some(0) => {
                ran += 1;
                let db = dir.path().join(format!("m{i}.db"));
                let run = run_for_real(&file, &db);
                if panicked(&run) {
                    problems.push(format!(
                        "{}: run panicked: {}",
                        c.what,
                        String::from_utf8_lossy(&run.stderr)
                    ));
                }
            }
            other => problems.push(format!("{}: --dry-run exited {other:?}: {err}", c.what)),
        }
    }
    eprintln!(
        "{} malformed files: {refused} refused (exit 2), {ran} accepted and run",
        cases.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Most are mistakes; some are legal oddities that must simply run.
    assert!(refused >= 100, "refused {refused}, ran {ran}");
}

fn run_for_real(file: &Path, db: &Path) -> Output {
    crate::support::lcx()
        .args(["run", "--plain"])
        .arg(file)
        .arg("--db")
        .arg(db)
        .output()
        .unwrap()
}
