//! Unit tests of experiment-file validation and plan resolution.

use super::*;

fn plan(text: &str) -> Result<Plan, PlanError> {
    from_str(text, Path::new("/exp/dir/x.toml"), &[])
}

fn error(text: &str) -> String {
    plan(text).expect_err("expected an error").to_string()
}

const COMMAND: &str = r#"
name = "c"
workload = "command"
iterations = 3
warmup = 1
[[arms]]
name = "a"
command = "echo 1"
[[arms]]
name = "b"
command = ["printf", "x"]
env = { K = "v", N = 3 }
"#;

#[test]
fn command_plan_resolves() {
    let p = plan(COMMAND).unwrap();
    assert_eq!(p.arms.len(), 2);
    assert_eq!(p.baseline, "a");
    assert_eq!(p.arms[0].command_line(), vec!["sh", "-c", "echo 1"]);
    assert_eq!(p.arms[1].program, Program::External("printf".into()));
    assert_eq!(p.arms[1].env.get("N").map(String::as_str), Some("3"));
    assert_eq!(p.arms[0].workdir.as_deref(), Some(Path::new("/exp/dir")));
    assert_eq!(p.file, Path::new("/exp/dir/x.toml"));
    assert!(p.arms[0].config_toml.is_none());
    // The plan survives the JSON round trip that --resume relies on.
    let back: Plan = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(back, p);
}

#[test]
fn cells_interleave_or_run_sequentially() {
    let mut p = plan(&COMMAND.replace("warmup = 1", "warmup = 1\nrepeats = 2")).unwrap();
    let order: Vec<(usize, u32)> = p.cells().iter().map(|c| (c.arm, c.repeat)).collect();
    assert_eq!(order, vec![(0, 1), (1, 1), (0, 2), (1, 2)]);
    for (rank, c) in p.cells().iter().enumerate() {
        assert_eq!(p.cell_rank(c.arm, c.repeat), rank as u64);
    }
    p.order = Order::Sequential;
    let order: Vec<(usize, u32)> = p.cells().iter().map(|c| (c.arm, c.repeat)).collect();
    assert_eq!(order, vec![(0, 1), (0, 2), (1, 1), (1, 2)]);
    for (rank, c) in p.cells().iter().enumerate() {
        assert_eq!(p.cell_rank(c.arm, c.repeat), rank as u64);
    }
}

#[test]
fn matrix_crosses_arms_and_names_from_values() {
    let text = r#"
name = "m"
workload = "command"
iterations = 2
[[arms]]
name = "s"
command = "true"
[matrix]
"env.BATCH" = [1, 64]
"env.MODE" = ["a b", "c"]
"#;
    let p = plan(text).unwrap();
    let names: Vec<&str> = p.arms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "s-batch-1_mode-a-b",
            "s-batch-1_mode-c",
            "s-batch-64_mode-a-b",
            "s-batch-64_mode-c"
        ]
    );
    assert_eq!(p.arms[3].env.get("BATCH").map(String::as_str), Some("64"));
    assert_eq!(p.arms[0].env.get("MODE").map(String::as_str), Some("a b"));
}

#[test]
fn gate_and_columns_are_read() {
    let text = format!(
        "{COMMAND}\n[[columns]]\nmetric = \"t\"\nshow = \"both\"\ndirection = \"higher\"\n\
         [gate]\nmetric = \"t\"\nmin_speedup = 1.5\nmin_effect = 0.05\narm = \"b\"\n"
    );
    let p = plan(&text).unwrap();
    assert_eq!(
        p.columns,
        vec![Column {
            metric: "t".into(),
            label: "t".into(),
            show: Show::Both,
            direction: Some(Direction::Higher)
        }]
    );
    let gate = p.gate.unwrap();
    assert_eq!(gate.min_speedup, 1.5);
    assert_eq!(gate.min_effect, Some(0.05));
    assert_eq!(gate.arm.as_deref(), Some("b"));
}

#[test]
fn errors_name_the_file_key_and_arm() {
    let cases: &[(&str, &str)] = &[
        ("bogus = 1", "bogus"),
        (
            "[[arms]]\nname = \"a\"\ncommand = \"x\"\nsett = [\"a=1\"]",
            "arms[2] (`a`).sett",
        ),
        ("baseline = \"zzz\"", "`zzz` names no arm"),
        (
            "warmup = 3",
            "warm-up (3) must be smaller than iterations (3)",
        ),
        (
            "[[arms]]\nname = \"a\"\ncommand = \"y\"",
            "duplicate arm name",
        ),
        ("[[arms]]\nname = \"z\"", "arms[2] (`z`).command: missing"),
        (
            "[gate]\nmetric = \"t\"\nmin_speedup = 0",
            "gate.min_speedup",
        ),
    ];
    for (extra, needle) in cases {
        // Top-level keys must come before the first [[arms]] table.
        let text = if extra.starts_with('[') {
            format!("{COMMAND}\n{extra}")
        } else {
            let replaced = COMMAND.replacen("warmup = 1", "", 1);
            format!("{extra}\n{replaced}")
        };
        let msg = error(&text);
        assert!(msg.contains("/exp/dir/x.toml"), "{msg}");
        assert!(msg.contains(needle), "`{needle}` not in: {msg}");
    }
}

#[test]
fn command_workloads_refuse_config_keys() {
    assert!(error(&format!("set = [\"a.b=1\"]\n{COMMAND}")).contains("set"));
    let err = from_str(COMMAND, Path::new("x.toml"), &["a.b=1".to_string()]).unwrap_err();
    assert!(matches!(err, PlanError::CliSet { .. }), "{err}");
}

#[test]
fn no_arms_is_an_error() {
    let msg = error("name = \"x\"\nworkload = \"command\"\niterations = 1\n");
    assert!(msg.contains("no arms"), "{msg}");
}

#[test]
fn normalize_folds_parent_dirs() {
    assert_eq!(
        normalize(Path::new("/a/experiments/../configs/./x.toml")),
        PathBuf::from("/a/configs/x.toml")
    );
}

#[test]
fn sha256_matches_a_known_vector() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}
