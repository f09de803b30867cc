//! Unit tests of experiment-file validation and plan resolution.

use super::*;

fn plan(text: &str) -> Result<Plan, PlanError> {
    from_str(text, Path::new("/exp/dir/x.toml"), &Overrides::default())
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
    // A string runs through `sh -c` (only timed arms skip the shell).
    assert_eq!(p.arms[0].command_line(), vec!["sh", "-c", "echo 1"]);
    assert_eq!(p.arms[1].program, Program::External("printf".into()));
    assert_eq!(p.arms[1].env.get("N").map(String::as_str), Some("3"));
    assert_eq!(p.arms[0].workdir.as_deref(), Some(Path::new("/exp/dir")));
    assert_eq!(p.file, Path::new("/exp/dir/x.toml"));
    assert!(p.arms[0].config_toml.is_none());
    // The plan survives the JSON round trip that --resume relies on.
    let back = Plan::from_stored(&p.to_json()).unwrap();
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
fn randomized_rounds_draw_each_rounds_order_from_the_stored_seed() {
    let four = format!(
        "{COMMAND}[[arms]]\nname = \"c\"\ncommand = \"true\"\n[[arms]]\nname = \"d\"\ncommand = \"true\"\n"
    )
    .replace("warmup = 1", "warmup = 1\nrepeats = 40\norder = \"randomized\"\norder_seed = 7");
    let p = plan(&four).unwrap();
    assert_eq!((p.order, p.order_seed), (Order::Randomized, 7));
    let cells = p.cells();
    // Rounds stay whole: each round runs every arm once, rounds in turn.
    for (round, chunk) in cells.chunks(4).enumerate() {
        let mut arms: Vec<usize> = chunk.iter().map(|c| c.arm).collect();
        assert!(chunk.iter().all(|c| c.repeat == round as u32 + 1));
        arms.sort_unstable();
        assert_eq!(arms, vec![0, 1, 2, 3]);
    }
    // The order differs from round to round, and every arm leads some.
    let firsts: std::collections::BTreeSet<usize> = cells.chunks(4).map(|c| c[0].arm).collect();
    assert_eq!(firsts.len(), 4, "{cells:?}");
    for (rank, c) in cells.iter().enumerate() {
        assert_eq!(p.cell_rank(c.arm, c.repeat), rank as u64);
    }
    // The seed is stored: the plan a resume reads runs the same rounds.
    let back = Plan::from_stored(&p.to_json()).unwrap();
    assert_eq!(back.cells(), cells);
    // Another seed, other rounds; the same seed, the same ones.
    let other = plan(&four.replace("order_seed = 7", "order_seed = 8")).unwrap();
    assert_ne!(other.cells(), cells);
    assert_eq!(plan(&four).unwrap().cells(), cells);
    // A seed without a randomized order, or not a count, is refused.
    let err = error(&four.replace("order = \"randomized\"\n", ""));
    assert!(
        err.contains("order_seed") && err.contains("randomized"),
        "{err}"
    );
    let err = error(&four.replace("order_seed = 7", "order_seed = -1"));
    assert!(
        err.contains("order_seed") && err.contains("integer"),
        "{err}"
    );
    // A stored plan from before the seed existed reads as seed 0.
    let mut stored: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    stored.as_object_mut().unwrap().remove("order_seed");
    let old = Plan::from_stored(&stored.to_string()).unwrap();
    assert_eq!(old.order_seed, 0);
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
            direction: Some(Direction::Higher),
            fold: Fold::Mean,
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
    let err = from_str(
        COMMAND,
        Path::new("x.toml"),
        &Overrides::sets(&["a.b=1".to_string()]),
    )
    .unwrap_err();
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

const TRAIN: &str = r#"
name = "t"
workload = "train"
iterations = 4
warmup = 1
repeats = { min = 2, max = 6, precision = 0.05 }
[[arms]]
name = "rec"
set = ["traversal.scheduler=recursive"]
[[arms]]
name = "int"
set = ["traversal.scheduler=interleaved"]
[[arms]]
name = "wide"
set = ["network.hidden_size=32"]
"#;

fn with(cli: Overrides) -> Result<Plan, PlanError> {
    from_str(TRAIN, Path::new("/exp/dir/x.toml"), &cli)
}

fn sets(list: &[&str]) -> Overrides {
    Overrides::sets(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

#[test]
fn a_set_that_the_runner_or_an_arm_would_outrank_is_an_error_naming_both() {
    // The runner writes run.max_iterations from `iterations`.
    let err = with(sets(&["run.max_iterations=5"]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("run.max_iterations") && err.contains("--iterations"),
        "{err}"
    );
    let err = with(sets(&["run={max_iterations = 5}"]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("--iterations"), "{err}");
    let file = TRAIN.replace(
        "warmup = 1\n",
        "warmup = 1\nset = [\"run.max_iterations=9\"]\n",
    );
    assert!(error(&file).contains("`iterations`"), "{}", error(&file));
    let arm = TRAIN.replace("network.hidden_size=32", "run.max_iterations=9");
    assert!(error(&arm).contains("arms"), "{}", error(&arm));
    // An arm's own `set` of the key would win over the command line.
    let err = with(sets(&["traversal.scheduler=bogus"]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("arm `rec`") && err.contains("traversal.scheduler=recursive"),
        "{err}"
    );
    let err = with(sets(&["traversal={scheduler = \"interleaved\"}"])).unwrap_err();
    assert!(matches!(err, PlanError::CliSet { .. }), "{err}");
    // A key no arm sets applies to every arm.
    let p = with(sets(&["network.num_layers=3"])).unwrap();
    assert!(p
        .arms
        .iter()
        .all(|a| a.config_toml.as_deref().unwrap().contains("num_layers = 3")));
    // Without the arms that set it, a key is free again.
    let mut cli = sets(&["network.hidden_size=8"]);
    cli.arms = vec!["rec".into(), "int".into()];
    let p = with(cli).unwrap();
    assert_eq!(p.arms.len(), 2);
}

#[test]
fn flags_replace_the_files_counts_and_are_recorded() {
    let p = with(Overrides {
        iterations: Some(7),
        warmup: Some("2".into()),
        repeats: Some(3),
        ..Overrides::default()
    })
    .unwrap();
    assert_eq!((p.iterations, p.warmup, p.repeats), (7, 2, 3));
    assert!(
        p.adaptive.is_none(),
        "a fixed --repeats turns adaptive repeats off"
    );
    assert!(p.arms[0]
        .config_toml
        .as_deref()
        .unwrap()
        .contains("max_iterations = 7"));
    assert_eq!(
        p.cli_flags,
        ["--iterations", "7", "--warmup", "2", "--repeats", "3"]
    );
    let auto = with(Overrides {
        warmup: Some("auto".into()),
        ..Overrides::default()
    })
    .unwrap();
    assert!(auto.warmup_auto);
    let p = with(Overrides::default()).unwrap();
    assert_eq!((p.iterations, p.warmup, p.repeats), (4, 1, 6));
    assert!(p.adaptive.is_some() && p.cli_flags.is_empty());
    for (cli, flag) in [
        (
            Overrides {
                iterations: Some(0),
                ..Overrides::default()
            },
            "--iterations",
        ),
        (
            Overrides {
                iterations: Some(1),
                ..Overrides::default()
            },
            "--iterations",
        ),
        (
            Overrides {
                warmup: Some("4".into()),
                ..Overrides::default()
            },
            "--warmup",
        ),
        (
            Overrides {
                warmup: Some("x".into()),
                ..Overrides::default()
            },
            "--warmup",
        ),
        (
            Overrides {
                repeats: Some(0),
                ..Overrides::default()
            },
            "--repeats",
        ),
    ] {
        let err = with(cli.clone()).unwrap_err();
        assert!(err.to_string().starts_with(flag), "{cli:?}: {err}");
    }
}

#[test]
fn arms_runs_a_subset_that_keeps_the_baseline() {
    let subset = |names: &[&str]| Overrides {
        arms: names.iter().map(|s| s.to_string()).collect(),
        ..Overrides::default()
    };
    let p = with(subset(&["wide", "rec"])).unwrap();
    let names: Vec<&str> = p.arms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["rec", "wide"], "file order");
    assert_eq!(p.baseline, "rec");
    assert_eq!(p.cli_flags, ["--arms", "wide,rec"]);
    // The default baseline is the file's first arm, not the subset's.
    let err = with(subset(&["int"])).unwrap_err().to_string();
    assert!(err.contains("`rec`") && err.contains("baseline"), "{err}");
    let err = with(subset(&["rec", "nosuch"])).unwrap_err().to_string();
    assert!(
        err.contains("nosuch") && err.contains("rec, int, wide"),
        "{err}"
    );
    let gated = format!(
        "{TRAIN}\n[gate]\nmetric = \"time/iteration_seconds\"\nmin_speedup = 1.1\narm = \"int\"\n"
    );
    let err = from_str(&gated, Path::new("x.toml"), &subset(&["rec", "wide"]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`int`") && err.contains("[gate]"), "{err}");
}

#[test]
fn a_bench_trainer_cell_measures_one_mode() {
    let text = "name = \"b\"\nworkload = \"bench-trainer\"\niterations = 3\n\
                [[arms]]\nname = \"a\"\nargs = [\"--both\"]\n";
    let msg = error(text);
    assert!(msg.contains("args[0]") && msg.contains("--amp"), "{msg}");
}

#[test]
fn repeats_have_one_limit_in_the_file_and_on_the_command_line() {
    let file = |n: u64| COMMAND.replace("warmup = 1", &format!("warmup = 1\nrepeats = {n}"));
    assert_eq!(
        plan(&file(u64::from(MAX_REPEATS))).unwrap().repeats,
        MAX_REPEATS
    );
    let too_many = error(&file(u64::from(MAX_REPEATS) + 1));
    assert!(
        too_many.contains("repeats: expected an integer from 1 to 10000"),
        "{too_many}"
    );
    let flag = from_str(
        COMMAND,
        Path::new("/exp/dir/x.toml"),
        &Overrides {
            repeats: Some(MAX_REPEATS + 1),
            ..Default::default()
        },
    )
    .expect_err("over the limit")
    .to_string();
    assert!(
        flag.contains("--repeats") && flag.contains("from 1 to 10000"),
        "{flag}"
    );
}

#[test]
fn a_gate_or_guard_must_judge_its_metric() {
    let with = |extra: &str| format!("{COMMAND}{extra}");
    let none_column = "[[columns]]\nmetric = \"m\"\ndirection = \"none\"\n";
    let gated = error(&with(&format!(
        "{none_column}[gate]\nmetric = \"m\"\nmin_speedup = 1.1\n"
    )));
    assert!(
        gated.contains("gate.metric") && gated.contains("direction = \"none\""),
        "{gated}"
    );
    // A count of work (no better side in the vocabulary) needs a direction.
    let guarded = error(&with(
        "[[guard]]\nmetric = \"traversal/nodes\"\nmargin = 1\n",
    ));
    assert!(
        guarded.contains("guard[0].direction") && guarded.contains("no better side"),
        "{guarded}"
    );
    let directed =
        with("[[guard]]\nmetric = \"traversal/nodes\"\nmargin = 1\ndirection = \"higher\"\n");
    assert!(plan(&directed).is_ok());
    // A `none` column is shown, and never the primary metric.
    let p = plan(&with(&format!(
        "{none_column}[[columns]]\nmetric = \"t\"\n"
    )))
    .unwrap();
    assert_eq!(p.primary_metric().as_deref(), Some("t"));
}

#[test]
fn an_unknown_key_names_the_one_it_likely_meant() {
    let e = error(&COMMAND.replace("warmup = 1", "warmup = 1\nrepeat = 2"));
    assert!(e.contains("did you mean `repeats`?"), "{e}");
    let far = error(&COMMAND.replace("warmup = 1", "warmup = 1\nzzzzzz = 2"));
    assert!(!far.contains("did you mean"), "{far}");
}

#[test]
fn revisions_come_from_arms_the_matrix_and_the_command_line() {
    let text = r#"
name = "r"
workload = "command"
iterations = 3
repository = "../repo"
build = "make"
[[arms]]
name = "base"
revision = "main"
command = "./bench"
[[arms]]
name = "head"
revision = "HEAD"
build = "make fast"
command = "./bench"
"#;
    let p = plan(text).unwrap();
    let rev = |i: usize| p.arms[i].revision.clone().unwrap();
    assert_eq!(rev(0).asked, "main");
    assert_eq!(rev(0).repository, Path::new("/exp/repo"));
    assert_eq!(rev(0).build.as_deref(), Some("make"));
    assert_eq!(
        rev(1).build.as_deref(),
        Some("make fast"),
        "an arm's build wins"
    );
    let back = Plan::from_stored(&p.to_json()).unwrap();
    assert_eq!(back, p);

    // `--revision ARM=REV` replaces the file's, and is recorded as a flag.
    let cli = Overrides {
        revisions: vec![("head".into(), "v2".into())],
        ..Overrides::default()
    };
    let p = from_str(text, Path::new("/exp/dir/x.toml"), &cli).unwrap();
    assert_eq!(p.arms[1].revision.as_ref().unwrap().asked, "v2");
    assert_eq!(p.cli_flags, vec!["--revision", "head=v2"]);
    let cli = Overrides {
        revisions: vec![("nope".into(), "v2".into())],
        ..Overrides::default()
    };
    let err = from_str(text, Path::new("/exp/dir/x.toml"), &cli)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--revision") && err.contains("`nope` names no arm"),
        "{err}"
    );

    // A revision matrix makes one arm per revision.
    let m = plan(
        r#"
name = "m"
workload = "command"
iterations = 2
[[arms]]
name = "t"
command = "./t"
[matrix]
revision = ["v1", "v2"]
"#,
    )
    .unwrap();
    let names: Vec<&str> = m.arms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["t-revision-v1", "t-revision-v2"]);
    assert_eq!(m.arms[1].revision.as_ref().unwrap().asked, "v2");
    assert!(m.arms[0].revision.as_ref().unwrap().build.is_none());
}

#[test]
fn a_train_arm_at_a_revision_leaves_its_config_to_that_revision() {
    let p = plan(
        r#"
name = "t"
workload = "train"
iterations = 3
set = ["traversal.key_only_that_revision_knows=1"]
[[arms]]
name = "old"
revision = "v1"
"#,
    )
    .unwrap();
    let arm = &p.arms[0];
    assert!(arm.config_toml.is_none(), "resolved by the revision's lcx");
    let sets = &arm.revision.as_ref().unwrap().config_sets;
    assert_eq!(
        sets,
        &[
            "traversal.key_only_that_revision_knows=1",
            "run.max_iterations=3"
        ]
    );
    // The same key without a revision is this lcx's to refuse.
    let err = plan(
        r#"
name = "t"
workload = "train"
iterations = 3
set = ["traversal.key_only_that_revision_knows=1"]
[[arms]]
name = "now"
"#,
    )
    .unwrap_err();
    let source = std::error::Error::source(&err).map(|s| s.to_string());
    assert!(
        source.is_some_and(|s| s.contains("key_only_that_revision_knows")),
        "{err}"
    );
}

#[test]
fn bad_revision_keys_name_the_key() {
    let base = "name = \"r\"\nworkload = \"command\"\niterations = 2\n";
    let arm = |extra: &str| format!("{base}[[arms]]\nname = \"a\"\ncommand = \"x\"\n{extra}\n");
    for (extra, key, message) in [
        (
            "revision = \"\"",
            "arms[0] (`a`).revision",
            "must not be empty",
        ),
        (
            "revision = \"--all\"",
            "arms[0] (`a`).revision",
            "not a revision",
        ),
        (
            "revision = \"a b\"",
            "arms[0] (`a`).revision",
            "not a revision",
        ),
        ("build = \"make\"", "arms[0] (`a`).build", "has none"),
        (
            "revision = \"v1\"\nbuild = \"\"",
            "arms[0] (`a`).build",
            "must not be empty",
        ),
    ] {
        let err = error(&arm(extra));
        assert!(err.contains(key) && err.contains(message), "{extra}: {err}");
    }
    let err = error(
        "name = \"t\"\nworkload = \"train\"\niterations = 2\n[[arms]]\nname = \"a\"\nrevision = \"v1\"\nbuild = \"make\"\n",
    );
    assert!(err.contains("cargo build --release --locked"), "{err}");
    let err = error(&format!(
        "{base}[[arms]]\nname = \"a\"\ncommand = \"x\"\nrevision = \"v1\"\n[matrix]\nrevision = [\"v2\"]\n"
    ));
    assert!(
        err.contains("matrix.revision") && err.contains("one place"),
        "{err}"
    );
}

#[test]
fn the_executor_table_and_flag() {
    let base = "name = \"e\"\nworkload = \"command\"\niterations = 2\n[[arms]]\nname = \"a\"\ncommand = \"x\"\n";
    assert_eq!(plan(base).unwrap().executor, Executor::Local);
    let p = plan(&format!(
        "{base}[executor]\nkind = \"slurm\"\npartition = \"gpu\"\ntime = \"10\"\ncpus_per_task = 4\nextra = [\"--exclusive\"]\n"
    ))
    .unwrap();
    let Executor::Slurm(o) = &p.executor else {
        panic!("{:?}", p.executor)
    };
    assert_eq!(o.sbatch.partition.as_deref(), Some("gpu"));
    assert_eq!(o.sbatch.cpus_per_task, Some(4));
    assert_eq!(o.sbatch.extra, ["--exclusive"]);
    assert_eq!(o.placement, Placement::SameNode, "the default");
    assert_eq!(o.max_parallel, 1, "the default");
    assert!(!o.requeue, "the default");
    let requeue = plan(&format!(
        "{base}[executor]\nkind = \"slurm\"\nrequeue = true\n"
    ))
    .unwrap();
    assert!(matches!(&requeue.executor, Executor::Slurm(o) if o.requeue));
    let wide = plan(&format!(
        "{base}[executor]\nkind = \"slurm\"\nmax_parallel = 3\n"
    ))
    .unwrap();
    assert!(matches!(&wide.executor, Executor::Slurm(o) if o.max_parallel == 3));
    let err = error(&format!(
        "{}[executor]\nkind = \"slurm\"\nmax_parallel = 2\n",
        base.replace(
            "iterations = 2\n",
            "iterations = 2\nrepeats = { min = 2, max = 6, precision = 0.05 }\n"
        )
    ));
    assert!(
        err.contains("executor.max_parallel") && err.contains("adaptive"),
        "{err}"
    );
    // A plan stored before max_parallel existed ran one cell at a time.
    let old: SlurmOptions = serde_json::from_str("{\"partition\": \"gpu\"}").unwrap();
    assert_eq!(old.max_parallel, 1);
    let spread = plan(&format!(
        "{base}[executor]\nkind = \"slurm\"\nplacement = \"spread\"\n"
    ))
    .unwrap();
    assert!(matches!(&spread.executor, Executor::Slurm(o) if o.placement == Placement::Spread));
    let back = Plan::from_stored(&p.to_json()).unwrap();
    assert_eq!(back, p);
    // The flag replaces the kind, both ways.
    let with = |kind: &str, text: &str| {
        from_str(
            text,
            Path::new("/exp/dir/x.toml"),
            &Overrides {
                executor: Some(kind.into()),
                ..Overrides::default()
            },
        )
    };
    assert!(matches!(
        with("slurm", base).unwrap().executor,
        Executor::Slurm(_)
    ));
    let text = format!("{base}[executor]\nkind = \"slurm\"\n");
    assert_eq!(with("local", &text).unwrap().executor, Executor::Local);
    let err = with("k8s", base).unwrap_err().to_string();
    assert!(err.contains("--executor") && err.contains("k8s"), "{err}");
    for (extra, key) in [
        ("kind = \"pbs\"", "executor.kind"),
        (
            "kind = \"slurm\"\nmax_parallel = 0",
            "executor.max_parallel",
        ),
        (
            "kind = \"slurm\"\nmax_parallel = 2\nplacement = \"spread\"",
            "executor.max_parallel",
        ),
        (
            "kind = \"local\"\nmax_parallel = 2",
            "executor.max_parallel",
        ),
        (
            "kind = \"slurm\"\nextra = [\"exclusive\"]",
            "executor.extra[0]",
        ),
        ("kind = \"slurm\"\npartitoin = \"x\"", "executor.partitoin"),
        (
            "kind = \"slurm\"\ncpus_per_task = 0",
            "executor.cpus_per_task",
        ),
        (
            "kind = \"slurm\"\nplacement = \"near\"",
            "executor.placement",
        ),
    ] {
        let err = error(&format!("{base}[executor]\n{extra}\n"));
        assert!(err.contains(key), "{extra}: {err}");
    }
}

#[test]
fn an_arm_gives_its_own_sbatch_options() {
    let file = "name = \"e\"\nworkload = \"command\"\niterations = 2\n\
        [executor]\nkind = \"slurm\"\ntime = \"10\"\ngres = \"gpu:1\"\nextra = [\"--exclusive\"]\n\
        [[arms]]\nname = \"a\"\ncommand = \"x\"\n\
        [[arms]]\nname = \"b\"\ncommand = \"y\"\n\
        [arms.executor]\ntime = \"30\"\ngres = \"gpu:2\"\nextra = [\"--comment=b\"]\n\
        [matrix]\n\"env.N\" = [\"1\", \"2\"]\n";
    let p = plan(file).unwrap();
    let Executor::Slurm(o) = &p.executor else {
        panic!("{:?}", p.executor)
    };
    assert_eq!(p.arms.len(), 4);
    let arm = |name: &str| p.arms.iter().rfind(|a| a.name.starts_with(name)).unwrap();
    // The matrix keeps each arm's own options.
    let a = o.for_arm(&arm("a-").slurm);
    assert_eq!(
        (a.sbatch.time.as_deref(), a.sbatch.gres.as_deref()),
        (Some("10"), Some("gpu:1"))
    );
    assert_eq!(a.sbatch.extra, ["--exclusive"]);
    let b = o.for_arm(&arm("b-").slurm);
    assert_eq!(
        (b.sbatch.time.as_deref(), b.sbatch.gres.as_deref()),
        (Some("30"), Some("gpu:2"))
    );
    assert_eq!(
        b.sbatch.extra,
        ["--exclusive", "--comment=b"],
        "the arm's flags come last"
    );
    let back = Plan::from_stored(&p.to_json()).unwrap();
    assert_eq!(back, p);

    let base = "name = \"e\"\nworkload = \"command\"\niterations = 2\n[executor]\nkind = \"slurm\"\n[[arms]]\nname = \"a\"\ncommand = \"x\"\n";
    for (extra, key) in [
        (
            "placement = \"spread\"",
            "`a`).executor.placement: applies to every cell",
        ),
        (
            "kind = \"local\"",
            "`a`).executor.kind: applies to every cell",
        ),
        ("time = \"\"", "`a`).executor.time"),
        ("extra = [\"exclusive\"]", "`a`).executor.extra[0]"),
        ("tiem = \"1\"", "`a`).executor.tiem"),
    ] {
        let err = error(&format!("{base}[arms.executor]\n{extra}\n"));
        assert!(err.contains(key), "{extra}: {err}");
    }
    let err = error(&format!("{base}executor = \"slurm\"\n"));
    assert!(
        err.contains("`a`).executor") && err.contains("table"),
        "{err}"
    );
}

#[test]
fn type_and_range_errors_read_like_the_config_readers() {
    let zero = error(&COMMAND.replace("iterations = 3", "iterations = 0"));
    assert!(
        zero.ends_with("x.toml: iterations: must be an integer >= 1, got 0"),
        "{zero}"
    );
    let huge = error(&COMMAND.replace("iterations = 3", "iterations = 99999999999"));
    assert!(
        huge.contains("iterations: must be an integer from 1 to 4294967295, got 99999999999"),
        "{huge}"
    );
    let name = error(&COMMAND.replace("name = \"a\"", "name = 3"));
    assert!(
        name.contains("arms[0].name: must be a string, got 3"),
        "{name}"
    );
    let typo = error(&COMMAND.replace("warmup = 1", "warmpu = 1"));
    assert!(
        typo.contains("warmpu: unknown key (did you mean `warmup`? known keys: name,"),
        "{typo}"
    );
}

#[test]
fn a_metric_has_one_fold_which_silent_columns_and_guards_take() {
    let three_arms = format!("{COMMAND}[[arms]]\nname = \"c\"\ncommand = \"echo 2\"\n");
    let with = |extra: &str| plan(&format!("{three_arms}{extra}"));
    // The guard says `last`; the column of the same metric is silent and
    // takes it, with a label that says so.
    let p = with(
        "[[columns]]\nmetric = \"eval/random/win_rate0\"\n\
         [[columns]]\nmetric = \"t\"\n\
         [[guard]]\nmetric = \"eval/random/win_rate0\"\nmargin = 0.05\nfold = \"last\"\n",
    )
    .unwrap();
    assert_eq!(p.columns[0].fold, Fold::Last);
    assert_eq!(p.columns[0].label, "final eval/random/win_rate0");
    assert_eq!(p.columns[1].fold, Fold::Mean);
    assert_eq!(p.fold_of("eval/random/win_rate0"), Fold::Last);
    assert_eq!(p.fold_of("t"), Fold::Mean);
    assert_eq!(p.fold_of("unlisted"), Fold::Mean);
    // Stored plans from before `fold` read as the mean.
    let mut json: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    json["columns"][1].as_object_mut().unwrap().remove("fold");
    json["guards"][0].as_object_mut().unwrap().remove("fold");
    json["guards"][0]
        .as_object_mut()
        .unwrap()
        .remove("baseline");
    let old = Plan::from_stored(&json.to_string()).unwrap();
    assert_eq!(
        (old.columns[1].fold, old.guards[0].fold),
        (Fold::Mean, Fold::Mean)
    );
    // Two folds of one metric: refused, naming both keys.
    let e = with(
        "[[columns]]\nmetric = \"w\"\nfold = \"mean\"\n\
         [[guard]]\nmetric = \"w\"\nmargin = 1\ndirection = \"higher\"\nfold = \"last\"\n",
    )
    .expect_err("two folds")
    .to_string();
    assert!(
        e.contains("guard[0].fold") && e.contains("folded `mean` by columns[0].fold"),
        "{e}"
    );
    let e = with("[[columns]]\nmetric = \"w\"\nfold = \"mode\"\n")
        .expect_err("unknown fold")
        .to_string();
    assert!(
        e.contains("columns[0].fold") && e.contains("expected mean, median, min or last"),
        "{e}"
    );
    let median = with("[[columns]]\nmetric = \"w\"\nfold = \"median\"\n").unwrap();
    assert_eq!(median.fold_of("w"), Fold::Median);
}

/// The times of commands lcx times fold to each cell's fastest run by
/// default, where there are cells enough for an interval of them; a
/// column's own fold wins, counts and other names keep the mean, and plans
/// stored before the default keep their means.
#[test]
fn timed_commands_fold_their_times_to_the_fastest_run() {
    let timed =
        format!("timing = \"process\"\n{COMMAND}").replace("warmup = 1", "warmup = 1\nrepeats = 3");
    let p = plan(&timed).unwrap();
    assert!(p.fastest_times);
    assert_eq!(p.fold_of("process/wall_seconds"), Fold::Min);
    assert_eq!(p.fold_of("process/user_seconds"), Fold::Mean);
    assert_eq!(p.fold_of("process/max_rss_bytes"), Fold::Mean);
    let own = plan(&format!(
        "{timed}[[columns]]\nmetric = \"process/wall_seconds\"\nfold = \"mean\"\n"
    ))
    .unwrap();
    assert_eq!(own.fold_of("process/wall_seconds"), Fold::Mean);
    // One repeat: one median per arm would have no interval.
    let once = plan(&timed.replace("repeats = 3", "repeats = 1")).unwrap();
    assert_eq!(once.fold_of("process/wall_seconds"), Fold::Mean);
    // Commands that print their own lines, and counted ones, keep means.
    let lines = plan(&COMMAND.replace("warmup = 1", "warmup = 1\nrepeats = 3")).unwrap();
    assert!(!lines.fastest_times);
    let counted = plan(&timed.replace("\"process\"", "\"instructions\"")).unwrap();
    assert!(!counted.fastest_times);
    let mut stored: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    stored.as_object_mut().unwrap().remove("fastest_times");
    let old = Plan::from_stored(&stored.to_string()).unwrap();
    assert_eq!(old.fold_of("process/wall_seconds"), Fold::Mean);
}

#[test]
fn a_guard_may_compare_with_an_arm_of_its_own() {
    let three_arms = format!("{COMMAND}[[arms]]\nname = \"c\"\ncommand = \"echo 2\"\n");
    let with = |extra: &str| plan(&format!("{three_arms}{extra}"));
    let p = with("[[guard]]\nmetric = \"w\"\nmargin = 1\ndirection = \"higher\"\nbaseline = \"b\"\narm = \"c\"\n")
        .unwrap();
    assert_eq!(p.guards[0].baseline.as_deref(), Some("b"));
    assert_eq!(p.baseline, "a", "the experiment's baseline stays");
    // The arm guarded against the experiment's baseline is fine when the
    // guard has its own...
    with("[[guard]]\nmetric = \"w\"\nmargin = 1\ndirection = \"higher\"\nbaseline = \"b\"\narm = \"a\"\n")
        .unwrap();
    // ...but not the guard's own baseline, nor an arm that does not exist.
    let e = with("[[guard]]\nmetric = \"w\"\nmargin = 1\ndirection = \"higher\"\nbaseline = \"b\"\narm = \"b\"\n")
        .expect_err("arm = baseline")
        .to_string();
    assert!(
        e.contains("guard[0].arm") && e.contains("guard's baseline `b`"),
        "{e}"
    );
    let e =
        with("[[guard]]\nmetric = \"w\"\nmargin = 1\ndirection = \"higher\"\nbaseline = \"z\"\n")
            .expect_err("no such arm")
            .to_string();
    assert!(
        e.contains("guard[0].baseline") && e.contains("`z` names no arm"),
        "{e}"
    );
}

#[test]
fn a_guard_and_a_column_of_one_metric_agree_on_its_direction() {
    let e = error(&format!(
        "{COMMAND}[[columns]]\nmetric = \"w\"\ndirection = \"higher\"\n\
         [[guard]]\nmetric = \"w\"\nmargin = 1\ndirection = \"lower\"\n"
    ));
    assert!(
        e.contains("guard[0].direction") && e.contains("columns[0].direction"),
        "{e}"
    );
}

#[test]
fn a_guard_may_say_its_repeats_are_paired() {
    let with = |extra: &str| plan(&format!("{COMMAND}{extra}"));
    let guard = "[[guard]]\nmetric = \"w\"\nmargin = 1\ndirection = \"higher\"\n";
    assert!(
        !with(guard).unwrap().guards[0].paired,
        "unpaired by default"
    );
    assert!(with(&format!("{guard}paired = true\n")).unwrap().guards[0].paired);
    let e = error(&format!("{COMMAND}{guard}paired = \"yes\"\n"));
    assert!(
        e.contains("guard[0].paired") && e.contains("true or false"),
        "{e}"
    );
    // A stored plan from before `paired` reads as unpaired.
    let p = with(guard).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
    assert!(json["guards"][0].get("paired").is_none());
    json["guards"][0]["margin"] = 2.into();
    let old = Plan::from_stored(&json.to_string()).unwrap();
    assert!(!old.guards[0].paired);
}

#[test]
fn slurm_options_and_the_name_are_one_line_and_the_name_is_short() {
    let file = |executor: &str, name: &str| {
        format!(
            "name = \"{name}\"\nworkload = \"command\"\niterations = 1\n\
             [executor]\nkind = \"slurm\"\n{executor}\n[[arms]]\nname = \"a\"\ncommand = \"true\"\n"
        )
    };
    for key in [
        "partition",
        "account",
        "qos",
        "time",
        "mem",
        "gres",
        "constraint",
    ] {
        for bad in ["\\n", "\\r", "\\u001b", "\\t"] {
            let e = error(&file(&format!("{key} = \"x{bad}touch /tmp/pwned\""), "n"));
            assert!(
                e.contains(&format!("executor.{key}: contains the control character")),
                "{e}"
            );
        }
        // Shell words are not control characters: the script quotes them.
        for fine in [";", "$(touch x)", "`id`", "'", "\\\""] {
            plan(&file(&format!("{key} = \"x{fine}\""), "n")).unwrap();
        }
    }
    let e = error(&file("extra = [\"--comment=x\\nid\"]", "n"));
    assert!(
        e.contains("executor.extra[0]: contains the control character"),
        "{e}"
    );
    let e = error(&file("", "x\\ny"));
    assert!(
        e.contains("name: contains the control character '\\n'"),
        "{e}"
    );
    let e = error(&file("", &"n".repeat(201)));
    assert!(
        e.contains("name: is 201 characters long; at most 200"),
        "{e}"
    );
    plan(&file("", &"n".repeat(200))).unwrap();
}

#[test]
fn a_gate_or_guard_on_a_metric_the_workload_never_writes_is_refused() {
    let train = |extra: &str| plan(&format!("{TRAIN}{extra}"));
    let gate = error(&format!(
        "{TRAIN}[gate]\nmetric = \"time/iteration_second\"\nmin_speedup = 1.1\n"
    ));
    for needle in [
        "/exp/dir/x.toml",
        "gate.metric",
        "the train workload never writes `time/iteration_second`",
        "did you mean `time/iteration_seconds`?",
        "it writes: time/iteration_seconds, ",
        "eval/*/win_rate0",
    ] {
        assert!(gate.contains(needle), "`{needle}` not in: {gate}");
    }
    let guard = error(&format!(
        "{TRAIN}[[guard]]\nmetric = \"time/traversal_seconds\"\nmargin = 1\n\
         [[guard]]\nmetric = \"eval/random/win_rat0\"\nmargin = 0.05\n"
    ));
    assert!(
        guard.contains("guard[1].metric")
            && guard.contains("did you mean `eval/random/win_rate0`?"),
        "{guard}"
    );
    // A bench's own names, not the trainer's.
    let bench = format!(
        "name = \"b\"\nworkload = \"bench-forward\"\niterations = 3\n[[arms]]\nname = \"a\"\n\
         [[arms]]\nname = \"b\"\n[gate]\nmetric = \"{}\"\nmin_speedup = 1.1\n",
        "time/iteration_seconds"
    );
    let e = error(&bench);
    assert!(
        e.contains("the bench-forward workload never writes")
            && e.contains("it writes: batch_size, forwards, bench/us_per_call, bench/us_per_state"),
        "{e}"
    );
    assert!(plan(&bench.replace("time/iteration_seconds", "bench/us_per_call")).is_ok());
    // What the trainer writes passes, a wildcard name included.
    train("[gate]\nmetric = \"time/iteration_seconds\"\nmin_speedup = 1.1\n").unwrap();
    train("[[guard]]\nmetric = \"eval/heuristic/win_rate0\"\nmargin = 0.05\n").unwrap();
    // A command writes names of its own.
    plan(&format!(
        "{COMMAND}[gate]\nmetric = \"my/own_seconds\"\nmin_speedup = 1.1\n"
    ))
    .unwrap();
}

#[test]
fn a_gate_without_margin_is_warned_of_not_refused() {
    let gated = |gate: &str| plan(&format!("{COMMAND}[gate]\nmetric = \"t\"\n{gate}\n")).unwrap();
    for gate in ["min_speedup = 1.0", "max_slowdown = 0"] {
        let w = gated(gate).warnings();
        assert_eq!(w.len(), 1, "{gate}: {w:?}");
        let key = gate.split(" =").next().unwrap();
        assert!(
            w[0].contains(&format!("`gate.{key}")) && w[0].contains("max_slowdown = 0.03"),
            "{w:?}"
        );
    }
    assert!(gated("min_speedup = 1.05").warnings().is_empty());
    assert!(gated("max_slowdown = 0.03").warnings().is_empty());
}

#[test]
fn a_timed_commands_gate_names_one_of_the_four_process_figures() {
    let timed = "name = \"t\"\nworkload = \"command\"\ntiming = \"process\"\niterations = 2\n\
         [[arms]]\nname = \"a\"\ncommand = \"true\"\n[[arms]]\nname = \"b\"\ncommand = \"true\"\n";
    let e = error(&format!(
        "{timed}[gate]\nmetric = \"process/wall_secs\"\nmin_speedup = 1.1\n"
    ));
    assert!(
        e.contains("gate.metric")
            && e.contains(
                "a command lcx times (`timing = \"process\"`) never writes `process/wall_secs`"
            )
            && e.contains("did you mean `process/wall_seconds`?")
            && e.contains("process/max_rss_bytes"),
        "{e}"
    );
    let e = error(&format!(
        "{timed}[[guard]]\nmetric = \"process/rss\"\nmargin = 0.1\n"
    ));
    assert!(e.contains("guard[0].metric"), "{e}");
    plan(&format!(
        "{timed}[gate]\nmetric = \"process/user_seconds\"\nmin_speedup = 1.1\n"
    ))
    .unwrap();
    // An arm that prints its own lines may print any name.
    let mixed = timed.replacen(
        "command = \"true\"",
        "timing = \"lines\"\ncommand = \"true\"",
        1,
    );
    plan(&format!(
        "{mixed}[gate]\nmetric = \"my/seconds\"\nmin_speedup = 1.1\narm = \"b\"\n"
    ))
    .unwrap();
}

#[test]
fn arms_at_a_revision_may_gate_on_a_name_their_lcx_writes() {
    // Both arms the gate compares run another lcx: its names may differ.
    let revisions = "name = \"t\"\nworkload = \"train\"\niterations = 2\n\
         [[arms]]\nname = \"old\"\nrevision = \"v1\"\n[[arms]]\nname = \"new\"\nrevision = \"v2\"\n\
         [[arms]]\nname = \"here\"\n";
    let gated = |arm: &str| {
        plan(&format!(
            "{revisions}[gate]\nmetric = \"time/new_seconds\"\nmin_speedup = 1.1\narm = \"{arm}\"\n"
        ))
    };
    gated("new").unwrap();
    // An arm running this lcx would never write it.
    let e = gated("here").unwrap_err().to_string();
    assert!(
        e.contains("gate.metric") && e.contains("never writes"),
        "{e}"
    );
    // Without `arm` the gate compares every arm, `here` too.
    let all = plan(&format!(
        "{revisions}[gate]\nmetric = \"time/new_seconds\"\nmin_speedup = 1.1\n"
    ));
    assert!(all.is_err());
}

#[test]
fn the_measurement_table_is_read_and_checked() {
    let p = plan(&format!(
        "{COMMAND}\n[measurement]\nmax_foreign_cpu = 0.3\nrerun_contended = 2\nwait_for_quiet = \"2m\"\n"
    ))
    .unwrap();
    assert_eq!(
        p.measurement,
        Measurement {
            max_foreign_cpu: Some(0.3),
            rerun_contended: 2,
            wait_for_quiet: Some(120.0),
            pin: false,
        }
    );
    assert_eq!(p.measurement.threshold(Some(64)), 0.3);
    let default = plan(COMMAND).unwrap().measurement;
    assert_eq!(default, Measurement::default());
    // Half a core, or a tenth of the host when that is less.
    assert_eq!(default.threshold(Some(64)), 0.5);
    assert!((default.threshold(Some(2)) - 0.2).abs() < 1e-12);
    assert_eq!(default.threshold(None), 0.5);
    for (bad, says) in [
        ("max_foreign_cpu = 0", "measurement.max_foreign_cpu"),
        ("max_foreign_cpu = \"x\"", "measurement.max_foreign_cpu"),
        ("rerun_contended = -1", "measurement.rerun_contended"),
        ("wait_for_quiet = \"soon\"", "measurement.wait_for_quiet"),
        ("wait_for_quiet = -3", "measurement.wait_for_quiet"),
        ("rerun_contented = 1", "rerun_contended"),
    ] {
        let err = error(&format!("{COMMAND}\n[measurement]\n{bad}\n"));
        assert!(err.contains(says), "{bad}: {err}");
    }
    let err = error(&format!("measurement = 3\n{COMMAND}"));
    assert!(err.contains("[measurement]"), "{err}");
}

#[test]
fn an_arm_names_its_cpus_or_pin_gives_every_arm_the_same() {
    let with_cpus = COMMAND.replace(
        "command = \"echo 1\"",
        "command = \"echo 1\"\ncpus = \"0-2,5\"",
    );
    let p = plan(&with_cpus).unwrap();
    assert_eq!(
        p.arms[0].cpus.as_ref().map(|c| c.to_string()).as_deref(),
        Some("0-2,5")
    );
    assert_eq!(p.arms[1].cpus, None);
    let one =
        plan(&COMMAND.replace("command = \"echo 1\"", "command = \"echo 1\"\ncpus = 3")).unwrap();
    assert_eq!(one.arms[0].cpus, Some(CpuSet::from_cpus([3])));
    for (bad, says) in [
        (
            "cpus = \"2-1\"",
            "arms[0] (`a`).cpus: the range `2-1` runs backwards",
        ),
        ("cpus = \"\"", "arms[0] (`a`).cpus: an empty CPU list"),
        ("cpus = -1", "arms[0] (`a`).cpus: -1 is not a CPU number"),
        ("cpus = [0, 1]", "arms[0] (`a`).cpus"),
    ] {
        let err = error(&COMMAND.replace(
            "command = \"echo 1\"",
            &format!("command = \"echo 1\"\n{bad}"),
        ));
        assert!(err.contains(says), "{bad}: {err}");
    }
    // Two sources of one cell's CPUs would leave one unheeded.
    let err = error(&format!("{with_cpus}\n[measurement]\npin = true\n"));
    assert!(
        err.contains("arms[0] (`a`).cpus: [measurement] pin = true already"),
        "{err}"
    );
    // Slurm binds CPUs itself.
    let err = error(&format!("{with_cpus}\n[executor]\nkind = \"slurm\"\n"));
    assert!(err.contains("arms[0] (`a`).cpus: Slurm binds"), "{err}");
    let err = error(&format!(
        "{COMMAND}\n[executor]\nkind = \"slurm\"\n[measurement]\npin = true\n"
    ));
    assert!(err.contains("measurement.pin: Slurm binds"), "{err}");
    // The stored plan keeps the sets.
    let json = serde_json::to_string(&p).unwrap();
    assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), p);
}

#[test]
fn cpus_are_placed_on_this_host_when_the_experiment_is_created() {
    let all = CpuSet::parse("0-7").unwrap();
    let mut pinned = plan(&format!("{COMMAND}\n[measurement]\npin = true\n")).unwrap();
    assert!(pinned.measurement.pin);
    pinned.place_cpus(Some(&all), None).unwrap();
    for arm in &pinned.arms {
        assert_eq!(
            arm.cpus.as_ref().map(|c| c.to_string()).as_deref(),
            Some("1-7")
        );
    }
    let isolated = CpuSet::parse("6-7").unwrap();
    pinned.place_cpus(Some(&all), Some(&isolated)).unwrap();
    assert_eq!(pinned.arms[1].cpus, Some(isolated));
    let err = pinned
        .place_cpus(Some(&CpuSet::from_cpus([0])), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("measurement.pin: this process may use only CPU 0"),
        "{err}"
    );
    let err = pinned.place_cpus(None, None).unwrap_err().to_string();
    assert!(
        err.contains("measurement.pin: this system does not say"),
        "{err}"
    );

    let asks = COMMAND.replace(
        "command = \"echo 1\"",
        "command = \"echo 1\"\ncpus = \"6-9\"",
    );
    let mut p = plan(&asks).unwrap();
    let err = p.place_cpus(Some(&all), None).unwrap_err().to_string();
    assert!(
        err.contains(
            "arms (`a`).cpus: CPU 8-9 is not one this process may use here (allowed: 0-7)"
        ),
        "{err}"
    );
    p.place_cpus(Some(&CpuSet::parse("0-15").unwrap()), None)
        .unwrap();
    assert_eq!(
        p.arms[0].cpus.as_ref().map(|c| c.to_string()).as_deref(),
        Some("6-9")
    );
    // Nothing pinned: nothing to place, even where affinity is unknown.
    let mut free = plan(COMMAND).unwrap();
    free.place_cpus(None, None).unwrap();
    assert!(free.arms.iter().all(|a| a.cpus.is_none()));
}

#[test]
fn timing_process_makes_lcx_time_the_command() {
    let p = plan(&format!("timing = \"process\"\n{COMMAND}")).unwrap();
    assert_eq!(p.arms[0].program, Program::Timer);
    // The count rides on the command line, so that a pasted reproduce
    // line runs; plain words need no shell, so none is subtracted.
    assert_eq!(
        p.arms[0].command_line(),
        [
            "lcx",
            "time-process",
            "--iterations",
            "3",
            "--",
            "echo",
            "1"
        ]
    );
    let shell = format!("timing = \"process\"\n{COMMAND}").replace("\"echo 1\"", "\"echo $X\"");
    assert_eq!(
        plan(&shell).unwrap().arms[0].command_line(),
        [
            "lcx",
            "time-process",
            "--iterations",
            "3",
            "--subtract-shell",
            "--",
            "sh",
            "-c",
            "echo $X"
        ]
    );
    // An array that calls a shell itself is run as it is, nothing taken off.
    let array = format!("timing = \"process\"\n{COMMAND}")
        .replace("\"echo 1\"", "[\"sh\", \"-c\", \"echo $X\"]");
    assert_eq!(
        plan(&array).unwrap().arms[0].command_line(),
        [
            "lcx",
            "time-process",
            "--iterations",
            "3",
            "--",
            "sh",
            "-c",
            "echo $X"
        ]
    );
    // An arm's own `timing` wins over the file's.
    let text = format!("timing = \"process\"\n{COMMAND}timing = \"lines\"\n");
    let p = plan(&text).unwrap();
    assert_eq!(p.arms[0].program, Program::Timer);
    assert_eq!(p.arms[1].program, Program::External("printf".into()));
    let err = error(&format!("timing = \"wall\"\n{COMMAND}"));
    assert!(
        err.contains("timing") && err.contains("\"process\""),
        "{err}"
    );
    let err = error(
        "name = \"t\"\nworkload = \"train\"\niterations = 2\ntiming = \"process\"\n\
         [[arms]]\nname = \"a\"\n",
    );
    assert!(err.contains("timing"), "{err}");
}

#[test]
fn host_lock_is_on_unless_the_file_says_false() {
    let base = "name = \"e\"\nworkload = \"command\"\niterations = 2\n[[arms]]\nname = \"a\"\ncommand = \"x\"\n";
    assert!(plan(base).unwrap().host_lock, "the default");
    let off = plan(&format!("host_lock = false\n{base}")).unwrap();
    assert!(!off.host_lock);
    assert_eq!(Plan::from_stored(&off.to_json()).unwrap(), off);
    let err = error(&format!("host_lock = \"no\"\n{base}"));
    assert!(err.contains("host_lock: must be true or false"), "{err}");
    // A plan stored before the key existed held the lock like any other.
    let mut stored: serde_json::Value = serde_json::from_str(&off.to_json()).unwrap();
    assert_eq!(stored["host_lock"], false);
    stored.as_object_mut().unwrap().remove("host_lock");
    assert!(Plan::from_stored(&stored.to_string()).unwrap().host_lock);
}

/// `timeout`: the file's for every arm, an arm's own wins, in the forms a
/// user writes; anything else names the key and what was expected.
#[test]
fn timeouts_come_from_the_file_or_the_arm() {
    let text = COMMAND.replacen("warmup = 1\n", "warmup = 1\ntimeout = \"10m\"\n", 1);
    let text = text.replacen("name = \"b\"\n", "name = \"b\"\ntimeout = 2.5\n", 1);
    let p = plan(&text).unwrap();
    assert_eq!(p.arms[0].timeout_seconds, Some(600.0));
    assert_eq!(
        p.arms[1].timeout(),
        Some(std::time::Duration::from_millis(2500))
    );
    assert_eq!(Plan::from_stored(&p.to_json()).unwrap(), p);
    assert_eq!(plan(COMMAND).unwrap().arms[0].timeout(), None);
    for (form, seconds) in [("\"90s\"", 90.0), ("\"1.5h\"", 5400.0), ("\"30\"", 30.0)] {
        let text = COMMAND.replacen(
            "warmup = 1\n",
            &format!("warmup = 1\ntimeout = {form}\n"),
            1,
        );
        assert_eq!(
            plan(&text).unwrap().arms[0].timeout_seconds,
            Some(seconds),
            "{form}"
        );
    }
    let bad = COMMAND.replacen("warmup = 1\n", "warmup = 1\ntimeout = \"soon\"\n", 1);
    let e = error(&bad);
    assert!(
        e.contains("timeout") && e.contains("expected a duration"),
        "{e}"
    );
    let zero = COMMAND.replacen("name = \"a\"\n", "name = \"a\"\ntimeout = 0\n", 1);
    let e = error(&zero);
    assert!(e.contains("timeout") && e.contains("above 0"), "{e}");
}

#[test]
fn hooks_come_from_the_arm_else_the_file() {
    let p = plan(&format!(
        "setup = \"make\"\nprepare = [\"sync\"]\n{COMMAND}cleanup = \"rm -f x\"\n"
    ))
    .unwrap();
    // The file's `cleanup` above sits in the last arm's table: that arm's.
    let sh = |s: &str| Some(vec!["sh".to_string(), "-c".to_string(), s.to_string()]);
    assert_eq!(p.arms[0].hooks.setup, sh("make"));
    assert_eq!(p.arms[0].hooks.prepare, Some(vec!["sync".to_string()]));
    assert_eq!(p.arms[0].hooks.cleanup, None);
    assert_eq!(p.arms[1].hooks.cleanup, sh("rm -f x"));
    assert_eq!(p.arms[1].hooks.setup, sh("make"));
    // Stored and read back with the plan (a `--resume` runs the same hooks).
    let stored = Plan::from_stored(&p.to_json()).unwrap();
    assert_eq!(stored.arms, p.arms);
}

#[test]
fn a_bad_hook_names_its_key() {
    let e = error(&format!("{COMMAND}prepare = \"  \"\n"));
    assert!(
        e.contains("arms[1] (`b`).prepare") && e.contains("must not be empty"),
        "{e}"
    );
    let e = error(&format!("setup = 3\n{COMMAND}"));
    assert!(
        e.contains("setup") && e.contains("an array of strings or a shell string"),
        "{e}"
    );
    let e = error(&format!("cleanup = []\n{COMMAND}"));
    assert!(
        e.contains("cleanup") && e.contains("must name a program"),
        "{e}"
    );
}

#[test]
fn hooks_are_refused_with_slurm() {
    let slurm = "[executor]\nkind = \"slurm\"\n";
    let e = error(&format!("prepare = \"sync\"\n{COMMAND}{slurm}"));
    assert!(e.contains("prepare") && e.contains("runner's host"), "{e}");
    let e = error(&format!("{COMMAND}setup = \"make\"\n{slurm}"));
    assert!(e.contains("arms[1] (`b`).setup"), "{e}");
}

/// Issue 58's numbers and names: each refused at plan time with the key and
/// what was expected, where `lcx run` used to panic or misbehave.
#[test]
fn numbers_and_names_are_checked_where_they_are_read() {
    let with = |extra: &str| format!("{COMMAND}{extra}");
    let top =
        |line: &str| COMMAND.replacen("iterations = 3", &format!("iterations = 3\n{line}"), 1);
    // Durations: at most 30 days, every spelling.
    for t in ["1e308", "\"99999999999999999999h\"", "2592001", "\"721h\""] {
        let e = error(&top(&format!("timeout = {t}")));
        assert!(e.contains("timeout") && e.contains("30 days"), "{t}: {e}");
    }
    assert!(plan(&top("timeout = \"720h\"")).is_ok());
    for t in ["1e308", "\"99999999999999999999h\""] {
        let e = error(&with(&format!("[measurement]\nwait_for_quiet = {t}\n")));
        assert!(
            e.contains("measurement.wait_for_quiet") && e.contains("30 days"),
            "{e}"
        );
    }
    // A stored plan from before the bound cannot panic the runner.
    assert_eq!(
        seconds_duration(1e308),
        std::time::Duration::from_secs(30 * 86_400)
    );
    assert_eq!(
        seconds_duration(f64::NAN),
        std::time::Duration::from_secs(30 * 86_400)
    );
    assert_eq!(seconds_duration(-1.0), std::time::Duration::ZERO);
    // min_effect: a fraction in [0, 1), as --min-effect.
    for m in ["1", "1.5", "100", "-0.1"] {
        let e = error(&with(&format!(
            "[gate]\nmetric = \"t\"\nmin_speedup = 1.1\nmin_effect = {m}\n"
        )));
        assert!(
            e.contains("gate.min_effect") && e.contains("[0, 1)"),
            "{m}: {e}"
        );
    }
    // A matrix env key follows the arms' env rule; names follow the arms'.
    let e = error(&with("[matrix]\n\"env.A=B\" = [1, 2]\n"));
    assert!(e.contains("matrix.env.A=B") && e.contains("no `=`"), "{e}");
    let p = plan(&with("[matrix]\n\"env.Ü_Ä\" = [\"x y\"]\n")).unwrap();
    assert!(
        p.arms.iter().all(|a| a
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))),
        "{:?}",
        p.arms
    );
    // A cap on arms, counted before any is made.
    let values: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let huge = with(&format!(
        "[matrix]\n\"env.A\" = [{v}]\n\"env.B\" = [{v}]\n",
        v = values.join(", ")
    ));
    let started = std::time::Instant::now();
    let e = error(&huge);
    assert!(
        e.contains("makes 2000000 arms") && e.contains("at most 1000"),
        "{e}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "counted, not made"
    );
    // Names and labels a reader can see.
    for name in [
        "\u{200b}",
        "\u{200b}\u{200c}",
        "evil\u{202e}txt",
        "a\u{1b}[2Jb",
        "x\u{9b}",
    ] {
        let e = error(&COMMAND.replacen("name = \"c\"", &format!("name = {name:?}"), 1));
        assert!(e.contains("name"), "{name:?}: {e}");
    }
    let e = error(&COMMAND.replacen("name = \"a\"", "name = \"a\"\nlabel = \"x\\u202ey\"", 1));
    assert!(e.contains("label") && e.contains("control"), "{e}");
    let e = error(&with("[[columns]]\nmetric = \"t\"\nlabel = \"\\u200b\"\n"));
    assert!(
        e.contains("columns[0].label") && e.contains("visible"),
        "{e}"
    );
}

#[test]
fn shell_true_runs_plain_words_through_the_shell() {
    // `lcx run --command` with `-P`/`-L` writes it on the plain arms of a
    // command whose other values need a shell (decision 0027).
    let text = format!("timing = \"process\"\n{COMMAND}").replacen(
        "command = \"echo 1\"",
        "command = \"echo 1\"\nshell = true",
        1,
    );
    assert_eq!(
        plan(&text).unwrap().arms[0].command_line()[4..],
        ["--subtract-shell", "--", "sh", "-c", "echo 1"]
    );
    let array = text.replacen("\"echo 1\"", "[\"echo\", \"1\"]", 1);
    let err = error(&array);
    assert!(
        err.contains("shell") && err.contains("applies to a `command` given as a string"),
        "{err}"
    );
}
