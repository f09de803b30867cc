//! Hand-built report inputs for the renderer snapshot tests (test-only).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::experiment::{Arm, Column, Direction, Fold, Gate, Order, Plan, Program, Show, Workload};
use crate::store::report_read::RunMoments;
use crate::store::{Experiment, ExperimentStatus, Fingerprint, Run, RunStatus};

use super::builder::{assemble, Input, Options};
use super::model::Report;

fn arm(name: &str, label: &str, set: &[&str]) -> Arm {
    Arm {
        name: name.into(),
        label: label.into(),
        requires: None,
        set: set.iter().map(|s| s.to_string()).collect(),
        program: Program::Lcx,
        args: vec![
            "train".into(),
            "--config".into(),
            "configs/default.toml".into(),
        ],
        env: BTreeMap::new(),
        workdir: None,
        config_toml: None,
        config_sha256: None,
        variable_iterations: false,
        revision: None,
        slurm: Default::default(),
        cpus: None,
        timeout_seconds: None,
        hooks: Default::default(),
        sweep: None,
    }
}

fn plan(gate_min: f64, columns: bool) -> Plan {
    Plan {
        name: "option-b-interleaved-traversal".into(),
        description: "Recursive vs interleaved traversal scheduler".into(),
        workload: Workload::Train,
        file: PathBuf::from("/work/experiments/option-b.toml"),
        config: None,
        iterations: 10,
        warmup: 2,
        warmup_auto: false,
        host_lock: true,
        sweep: None,
        fastest_times: false,
        adaptive: None,
        repeats: 1,
        baseline: "recursive".into(),
        order: Order::Interleaved,
        order_seed: 0,
        file_set: vec!["evaluation.eval_every=0".into()],
        cli_set: vec!["traversal.traversals_per_iteration=64".into()],
        cli_flags: Vec::new(),
        arms: vec![
            arm(
                "recursive",
                "recursive, 8 workers",
                &["traversal.scheduler=recursive"],
            ),
            arm(
                "interleaved",
                "interleaved, 8 workers",
                &["traversal.scheduler=interleaved"],
            ),
            arm("gpu", "interleaved on CUDA", &[]),
        ],
        columns: if columns {
            vec![
                Column {
                    metric: "time/iteration_seconds".into(),
                    label: "iter s".into(),
                    show: Show::Value,
                    direction: None,
                    fold: Fold::Mean,
                },
                Column {
                    metric: "time/traversal_seconds".into(),
                    label: "traversal s".into(),
                    show: Show::Both,
                    direction: None,
                    fold: Fold::Mean,
                },
                Column {
                    metric: "traversal/nodes_per_second".into(),
                    label: "nodes/s".into(),
                    show: Show::Value,
                    direction: Some(Direction::Higher),
                    fold: Fold::Mean,
                },
                Column {
                    metric: "interleaved/avg_batch_size".into(),
                    label: "batch mean".into(),
                    show: Show::Value,
                    direction: None,
                    fold: Fold::Mean,
                },
            ]
        } else {
            Vec::new()
        },
        gate: Some(Gate {
            metric: "time/traversal_seconds".into(),
            min_speedup: gate_min,
            max_slowdown: None,
            min_effect: None,
            arm: Some("interleaved".into()),
            points: Default::default(),
        }),
        guards: Vec::new(),
        notes: "Interleaving batches network calls across traversals.".into(),
        executor: Default::default(),
        measurement: Default::default(),
    }
}

fn run(id: i64, arm: &str, index: i64, status: RunStatus) -> Run {
    Run {
        id,
        experiment_id: 12,
        arm: arm.into(),
        arm_label: match arm {
            "recursive" => "recursive, 8 workers",
            "interleaved" => "interleaved, 8 workers",
            _ => "interleaved on CUDA",
        }
        .into(),
        arm_index: index,
        repeat: 1,
        attempt: 1,
        config_toml: None,
        config_sha256: Some(format!("cfg{index}")),
        command: vec![
            "/work/target/release/lcx".into(),
            "train".into(),
            "--config".into(),
            "configs/default.toml".into(),
            "--set".into(),
            format!("traversal.scheduler={arm}"),
        ],
        env: BTreeMap::new(),
        status,
        skip_reason: (status == RunStatus::Skipped).then(|| "requires cuda; no GPU".into()),
        exit_code: (status == RunStatus::Completed).then_some(0),
        signal: None,
        error: None,
        stderr_tail: None,
        iterations_done: if status == RunStatus::Completed {
            10
        } else {
            0
        },
        started_at: None,
        finished_at: None,
        wall_seconds: (status == RunStatus::Completed).then_some(20.5 + index as f64),
        db_wait_seconds: None,
        contention: Default::default(),
        rerun_note: None,
        cpus: None,
        problems: Default::default(),
        warmup: None,
        revision: None,
        host: None,
        slurm_job: None,
        slurm_dir: None,
        slurm_run: None,
        node: None,
    }
}

/// Moments of an explicit series (8 post-warm-up values, 2 excluded).
fn moments(run_id: i64, arm: &str, name: &str, values: &[f64]) -> RunMoments {
    RunMoments {
        run_id,
        arm: arm.into(),
        repeat: 1,
        name: name.into(),
        n: values.len() as i64,
        sum: values.iter().sum(),
        sum_sq: values.iter().map(|v| v * v).sum(),
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        excluded: 2,
    }
}

/// A deterministic wiggle of ±`cv` around `mean` over 8 iterations.
fn series(mean: f64, cv: f64) -> Vec<f64> {
    [0.5, -1.0, 1.2, -0.3, 0.8, -1.1, 0.2, -0.3]
        .iter()
        .map(|k| mean * (1.0 + cv * k))
        .collect()
}

/// The experiment row of [`plan`]'s file.
fn experiment_of(p: &Plan) -> Experiment {
    Experiment {
        id: 12,
        name: p.name.clone(),
        description: p.description.clone(),
        workload: "train".into(),
        file_path: "experiments/option-b.toml".into(),
        file_text: String::new(),
        file_sha256: "0123456789abcdef0123".into(),
        plan_json: p.to_json(),
        iterations: 10,
        warmup: 2,
        repeats: 1,
        baseline: Some("recursive".into()),
        status: ExperimentStatus::Completed,
        created_at: "2025-03-04T10:11:12.000Z".into(),
        finished_at: Some("2025-03-04T10:12:40.000Z".into()),
        lcx_version: "0.1.0".into(),
        git_commit: Some("abc1234".into()),
        git_dirty: Some(true),
        command_line: vec!["lcx".into(), "run".into()],
        runner: None,
        fingerprint: Fingerprint {
            hostname: Some("bench-1".into()),
            os: Some("linux".into()),
            cpu_model: Some("Example CPU".into()),
            cpu_cores: Some(16),
            memory_bytes: Some(64 << 30),
            gpu_name: None,
            gpu_driver: None,
            cuda_version: None,
            cuda_available: Some(false),
            torch_version: Some("2.11.0".into()),
            torch_intra_threads: Some(8),
            torch_inter_threads: Some(1),
            ..Default::default()
        },
    }
}

/// The option-b report: two arms with data, one skipped GPU arm, a gate.
pub fn report(gate_min: f64, columns: bool) -> Report {
    report_with(gate_min, columns, |_| {})
}

/// [`report`] with its runs changed first.
pub fn report_with(gate_min: f64, columns: bool, change: impl FnOnce(&mut Vec<Run>)) -> Report {
    assemble(input_with(gate_min, columns, change), Options::default())
}

/// The input [`report_with`] assembles.
fn input_with(gate_min: f64, columns: bool, change: impl FnOnce(&mut Vec<Run>)) -> Input {
    let p = plan(gate_min, columns);
    let experiment = experiment_of(&p);
    let runs = vec![
        run(101, "recursive", 0, RunStatus::Completed),
        run(102, "interleaved", 1, RunStatus::Completed),
        run(103, "gpu", 2, RunStatus::Skipped),
    ];
    let mut runs = runs;
    change(&mut runs);
    let m = vec![
        moments(
            101,
            "recursive",
            "time/iteration_seconds",
            &series(4.0, 0.02),
        ),
        moments(
            101,
            "recursive",
            "time/traversal_seconds",
            &series(3.2, 0.02),
        ),
        moments(
            101,
            "recursive",
            "traversal/nodes_per_second",
            &series(12000.0, 0.02),
        ),
        moments(
            102,
            "interleaved",
            "time/iteration_seconds",
            &series(1.8, 0.03),
        ),
        moments(
            102,
            "interleaved",
            "time/traversal_seconds",
            &series(1.0, 0.03),
        ),
        moments(
            102,
            "interleaved",
            "traversal/nodes_per_second",
            &series(38400.0, 0.03),
        ),
        moments(
            102,
            "interleaved",
            "interleaved/avg_batch_size",
            &series(57.5, 0.01),
        ),
    ];
    let medians = m
        .iter()
        .map(|x| {
            let mut v = series(x.sum / x.n as f64, 0.0);
            v.sort_by(f64::total_cmp);
            (x.arm.clone(), x.name.clone(), v[4])
        })
        .collect();
    let names = [
        "interleaved/avg_batch_size",
        "time/iteration_seconds",
        "time/traversal_seconds",
        "traversal/nodes_per_second",
    ];
    Input {
        medians,
        ..bare_input(experiment, runs, &names, m)
    }
}

/// An input of these runs and moments, and nothing else.
fn bare_input(
    experiment: Experiment,
    runs: Vec<Run>,
    names: &[&str],
    moments: Vec<RunMoments>,
) -> Input {
    Input {
        experiment,
        runs,
        metric_names: names.iter().map(|n| n.to_string()).collect(),
        moments,
        medians: Vec::new(),
        unfolded: Vec::new(),
        nonfinite: Vec::new(),
        perf: Vec::new(),
        series: Vec::new(),
        precisions: Vec::new(),
        precision_reasons: Vec::new(),
        kernels: Vec::new(),
        texts: Vec::new(),
        db: None,
    }
}

/// A report of `recursive` vs `interleaved`, 3 repeats each, from cells
/// given as (arm, repeat, status, mean traversal seconds): a failed cell
/// carries 4 of its 10 iterations, a completed one all 8 after warm-up.
pub fn repeated(gate_min: f64, cells: &[(&str, i64, RunStatus, f64)]) -> Report {
    let mut p = plan(gate_min, true);
    p.repeats = 3;
    p.arms.truncate(2);
    let mut experiment = experiment_of(&p);
    experiment.repeats = 3;
    let mut runs = Vec::new();
    let mut m = Vec::new();
    for (i, &(arm, repeat, status, mean)) in cells.iter().enumerate() {
        let id = 200 + i as i64;
        let mut r = run(id, arm, i64::from(arm != "recursive"), status);
        r.repeat = repeat;
        let values = series(mean, 0.02);
        let values = if status == RunStatus::Completed {
            values
        } else {
            r.iterations_done = 4;
            r.error = Some("exited 1: out of memory\nmore".into());
            values[..2].to_vec()
        };
        let mut x = moments(id, arm, "time/traversal_seconds", &values);
        x.repeat = repeat;
        m.push(x);
        runs.push(r);
    }
    assemble(
        bare_input(experiment, runs, &["time/traversal_seconds"], m),
        Options::default(),
    )
}

/// A report input in which every string lcx did not write itself is a
/// string of `h`'s (a different call per field): the experiment's name,
/// description, notes, workload, file, commit, version and finish time,
/// every arm's name and label, the columns' labels and metrics, the gate
/// and guard, cells' errors, stderr, skip reasons, hosts, Slurm jobs and
/// folders, CPUs, commands, environment and rerun notes, the host's
/// fingerprint and ceiling provenance, the precisions, kernels, text values
/// and non-finite values lines carried, and the database path.
pub fn hostile_input(h: &mut dyn FnMut() -> String) -> Input {
    let mut p = plan(1.5, true);
    p.name = h();
    p.description = h();
    p.notes = h();
    let names: Vec<String> = (0..3).map(|_| h()).collect();
    for (a, name) in p.arms.iter_mut().zip(&names) {
        a.name = name.clone();
        a.label = h();
    }
    p.baseline = names[0].clone();
    let metrics: Vec<String> = (0..3).map(|_| h()).collect();
    p.columns = vec![
        Column {
            metric: metrics[0].clone(),
            label: h(),
            show: Show::Both,
            direction: None,
            fold: Fold::Mean,
        },
        Column {
            metric: metrics[1].clone(),
            label: h(),
            show: Show::Value,
            direction: Some(Direction::Higher),
            fold: Fold::Last,
        },
    ];
    p.gate = Some(Gate {
        metric: metrics[0].clone(),
        min_speedup: 1.5,
        max_slowdown: None,
        min_effect: None,
        arm: Some(names[1].clone()),
        points: Default::default(),
    });
    p.guards = vec![crate::experiment::Guard {
        metric: metrics[2].clone(),
        margin: 0.01,
        direction: Some(Direction::Higher),
        arm: None,
        baseline: None,
        fold: Fold::Mean,
        paired: false,
    }];
    let mut experiment = experiment_of(&p);
    experiment.workload = h();
    experiment.file_path = h();
    experiment.git_commit = Some(h());
    experiment.lcx_version = h();
    experiment.finished_at = Some(h());
    experiment.baseline = Some(names[0].clone());
    let f = &mut experiment.fingerprint;
    f.hostname = Some(h());
    f.os = Some(h());
    f.cpu_model = Some(h());
    f.gpu_name = Some(h());
    f.gpu_driver = Some(h());
    f.cuda_version = Some(h());
    f.torch_version = Some(h());
    f.peak_isa = Some(h());
    f.peak_fp32_gflops = Some(400.0);
    f.peak_fp32_gflops_core = Some(200.0);
    f.peak_source = Some(h());
    f.peak_probed_at = Some(h());
    f.peak_note = Some(h());
    let mut runs = Vec::new();
    for (i, status) in [
        RunStatus::Completed,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Skipped,
    ]
    .into_iter()
    .enumerate()
    {
        let arm_index = i.min(2);
        let mut r = run(300 + i as i64, &names[arm_index], arm_index as i64, status);
        r.arm_label = p.arms[arm_index].label.clone();
        r.command = vec!["/usr/bin/lcx".into(), h(), h()];
        r.env = [(h(), h())].into_iter().collect();
        r.host = Some(h());
        r.slurm_job = Some(h());
        r.slurm_dir = Some(h());
        r.cpus = Some(h());
        r.rerun_note = Some(h());
        r.node = Some(crate::store::NodeInfo {
            hostname: Some(h()),
            cpu_model: Some(h()),
            gpu_name: Some(h()),
            ..Default::default()
        });
        if status == RunStatus::Failed {
            r.error = Some(h());
            r.stderr_tail = Some(h());
            r.iterations_done = 3;
            r.exit_code = Some(1);
        }
        if status == RunStatus::Skipped {
            r.skip_reason = Some(h());
        }
        r.problems.malformed = 1;
        r.problems.nonfinite = 1;
        runs.push(r);
    }
    let mut m = Vec::new();
    for (run_id, arm, scale) in [(300, &names[0], 1.0), (301, &names[1], 0.5)] {
        for metric in metrics
            .iter()
            .chain(["perf/training_gflops".to_string()].iter())
        {
            m.push(moments(run_id, arm, metric, &series(10.0 * scale, 0.05)));
        }
    }
    let perf: Vec<RunMoments> = m
        .iter()
        .filter(|x| x.name.starts_with("perf/"))
        .cloned()
        .collect();
    let trend: Vec<(i64, f64)> = (1..=20).map(|i| (i, 1.0 + 0.1 * i as f64)).collect();
    Input {
        nonfinite: vec![(300, 3, metrics[0].clone(), h())],
        perf,
        series: vec![(300, trend)],
        precisions: vec![(names[1].clone(), h(), h())],
        precision_reasons: Vec::new(),
        kernels: vec![(names[0].clone(), h()), (names[1].clone(), h())],
        texts: vec![(names[0].clone(), metrics[0].clone(), 3, h())],
        db: Some(h()),
        ..bare_input(
            experiment,
            runs,
            &metrics.iter().map(String::as_str).collect::<Vec<_>>(),
            m,
        )
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::report::builder::kernel_remark;
    use crate::report::prose::Prose;
    use crate::report::stats::Decision;

    /// The plain text of each of `prose`, for assertions.
    fn plain(prose: &[Prose]) -> Vec<String> {
        prose.iter().map(Prose::plain).collect()
    }

    /// The report says what each arm's training ran on: once where every
    /// arm ran the same, arm by arm (each value of an arm that changed)
    /// otherwise, and nothing where no line said.
    /// Data from a busy host decide nothing: a gate that fails on contended
    /// cells is INCONCLUSIVE, as one that passes is; `--allow-contended`
    /// lets the FAIL stand.
    #[test]
    fn a_contended_fail_is_inconclusive() {
        let contend = |runs: &mut Vec<Run>| {
            for r in runs.iter_mut() {
                r.contention.foreign_cpu_seconds = Some(20.0);
                r.contention.host_seconds = Some(20.0);
                r.contention.host_cpus = Some(2);
            }
        };
        let quiet = report_with(4.0, true, |_| {});
        assert_eq!(quiet.check, Decision::Fail);
        let busy = report_with(4.0, true, contend);
        assert_eq!(busy.gate.as_ref().unwrap().decision, Decision::Fail);
        assert_eq!(busy.check, Decision::Inconclusive);
        let notes = plain(&busy.check_notes).join("; ");
        assert!(
            notes.contains("2 of 2 completed cells contended")
                && notes.contains("neither PASS nor FAIL"),
            "{notes}"
        );
        let md = super::super::render::render_markdown(&busy);
        assert!(md.contains("**2 of 2 completed cells contended**"), "{md}");
        // Summarised, not listed: the load, the cells per arm; the list
        // is the Cells section's table.
        assert!(
            md.contains("(other programs used 1.00 of a core on average, above 0.20; `"),
            "{md}"
        );
        assert!(
            md.contains(" 1 cell, `") && md.contains("; each in the Cells section)"),
            "{md}"
        );
        assert!(md.contains("Contended cells: other programs used"), "{md}");
        // The verdict line says what `--check` will exit with.
        assert!(
            md.contains(
                "; on contended cells, so `lcx report --check` says INCONCLUSIVE (exit 3): 2 of 2"
            ),
            "{md}"
        );
        assert!(!super::super::render::render_markdown(&quiet).contains("--check` says"));
        let allowed = assemble(
            {
                let mut input = input_with(4.0, true, contend);
                input.db = None;
                input
            },
            Options {
                allow_contended: true,
                ..Options::default()
            },
        );
        assert_eq!(allowed.check, Decision::Fail);
    }

    /// Randomized rounds are judged as pairs: rounds whose cells were
    /// equally busy are kept and decide the gate whatever the load (the
    /// host slowing whole rounds by up to 2.2× cancels in each ratio), a
    /// round whose arms saw uneven contention is left out, and the Cells
    /// section says which. The same cells in interleaved order are judged
    /// as independent samples, and `--check` stays INCONCLUSIVE on them.
    #[test]
    fn randomized_rounds_pair_evenly_contended_rounds_and_leave_uneven_ones_out() {
        let build = |order: Order| {
            let mut p = plan(0.95, true);
            p.arms.truncate(2);
            p.repeats = 4;
            p.order = order;
            let mut experiment = experiment_of(&p);
            experiment.repeats = 4;
            let (mut runs, mut m) = (Vec::new(), Vec::new());
            for round in 1..=4i64 {
                for (i, arm) in ["recursive", "interleaved"].into_iter().enumerate() {
                    let id = 400 + 2 * round + i as i64;
                    let mut r = run(id, arm, i as i64, RunStatus::Completed);
                    r.repeat = round;
                    // Busy throughout, but for the baseline's cell of round 4.
                    let foreign = if round == 4 && i == 0 { 0.0 } else { 1.0 };
                    r.contention.foreign_cpu_seconds = Some(20.0 * foreign);
                    r.contention.host_seconds = Some(20.0);
                    r.contention.host_cpus = Some(2);
                    runs.push(r);
                    let host = 1.0 + 0.3 * round as f64;
                    let slower = if i == 1 { 1.2 } else { 1.0 };
                    let mut x = moments(
                        id,
                        arm,
                        "time/traversal_seconds",
                        &series(3.0 * host * slower, 0.01),
                    );
                    x.repeat = round;
                    m.push(x);
                }
            }
            assemble(
                bare_input(experiment, runs, &["time/traversal_seconds"], m),
                Options::default(),
            )
        };
        let paired = build(Order::Randomized);
        let c = paired.arms[1]
            .metric("time/traversal_seconds")
            .and_then(|m| m.comparison)
            .unwrap();
        assert_eq!((c.paired_rounds, c.uneven_rounds), (Some(3), 1));
        let s = c.speedup.unwrap();
        assert!((s.ratio - 1.0 / 1.2).abs() < 1e-9, "{s:?}");
        assert_eq!(paired.gate.as_ref().unwrap().decision, Decision::Fail);
        assert_eq!(paired.check, Decision::Fail);
        assert!(!paired.check_on_contended);
        let rounds: Vec<(i64, Option<bool>)> = paired
            .contended
            .iter()
            .map(|c| (c.repeat, c.round_even))
            .collect();
        assert_eq!(rounds.len(), 7, "{rounds:?}");
        assert!(
            rounds.iter().all(|&(r, even)| even == Some(r != 4)),
            "{rounds:?}"
        );
        let md = super::super::render::render_markdown(&paired);
        assert!(md.contains("judged on the 3 rounds as pairs"), "{md}");
        assert!(md.contains("is judged as a pair (3 rounds here)"), "{md}");
        assert!(md.contains("left out (1 round)"), "{md}");
        assert!(
            md.contains("unevenly loaded: left out of the pairs"),
            "{md}"
        );

        let independent = build(Order::Interleaved);
        let c = independent.arms[1]
            .metric("time/traversal_seconds")
            .and_then(|m| m.comparison)
            .unwrap();
        assert_eq!(c.paired_rounds, None);
        assert_eq!(independent.check, Decision::Inconclusive);
        assert!(independent.contended.iter().all(|c| c.round_even.is_none()));
    }

    /// A command that printed more metrics than the default table shows
    /// is told which were left out.
    #[test]
    fn metrics_the_table_leaves_out_are_named() {
        let mut input = input_with(1.5, false, |_| {});
        input.experiment.workload = "command".into();
        let mut p = plan(1.5, false);
        p.workload = Workload::Command;
        input.experiment.plan_json = p.to_json();
        input.metric_names = (0..10).map(|i| format!("m{i}")).collect();
        input.metric_names.push("iteration".into());
        let report = assemble(input, Options::default());
        let text = plain(&report.remarks).join("\n");
        assert!(
            text.contains("The table shows 6 of the 10 metrics recorded")
                && text.contains("other 4 (`m6`, `m7`, `m8`, `m9`) are stored"),
            "{text}"
        );
    }

    #[test]
    fn the_report_names_the_training_kernel_of_each_arm() {
        let kernels = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, k)| (a.to_string(), k.to_string()))
                .collect()
        };
        let arms = ["avx2", "avx512", "torch"];
        assert_eq!(kernel_remark(&[], &arms), None);
        assert_eq!(
            kernel_remark(
                &kernels(&[("avx2", "lcx avx2-fma"), ("avx512", "lcx avx2-fma")]),
                &arms[..2]
            )
            .map(|p| p.plain())
            .as_deref(),
            Some("Training ran on lcx avx2-fma in every arm that ran.")
        );
        assert_eq!(
            kernel_remark(
                &kernels(&[
                    ("avx2", "lcx avx2-fma"),
                    ("avx512", "lcx avx2-fma"),
                    ("avx512", "lcx avx512f"),
                    ("torch", "libtorch"),
                ]),
                &arms
            )
            .map(|p| p.plain())
            .as_deref(),
            Some(
                "Training ran on: `avx2` on lcx avx2-fma; `avx512` on lcx avx2-fma and \
                 lcx avx512f; `torch` on libtorch."
            )
        );
        // An arm whose lines did not say (an older revision) is not
        // counted into "every arm that ran".
        assert_eq!(
            kernel_remark(
                &kernels(&[("avx2", "lcx avx2-fma"), ("avx512", "lcx avx2-fma")]),
                &arms
            )
            .map(|p| p.plain())
            .as_deref(),
            Some(
                "Training ran on: `avx2` on lcx avx2-fma; `avx512` on lcx avx2-fma; \
                 `torch` did not say."
            )
        );
        // Through the report: the skipped GPU arm has no lines, so it is
        // neither counted nor said to be silent.
        let mut input = input_with(1.5, false, |_| {});
        input.kernels = kernels(&[("recursive", "lcx avx512f"), ("interleaved", "lcx avx512f")]);
        let report = assemble(input, Options::default());
        assert!(
            report
                .remarks
                .iter()
                .any(|r| r.plain() == "Training ran on lcx avx512f in every arm that ran."),
            "{:?}",
            report.remarks
        );
    }

    #[test]
    fn failed_cells_never_decide_a_gate_over_400_seeds() {
        // A/A on completed cells (3.2 s a side); a failed cell's partial
        // data lean hard one way: a baseline's 3× slow (a PASS if used),
        // a candidate's 3× slow (a FAIL if used).
        let (mut pass, mut fail, mut decided_on_partial, mut unjudged_cases) = (0, 0, 0, 0);
        let mut check_pass_with_failures = 0;
        for seed in 0..400u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(400_000 + seed);
            let mut cells = Vec::new();
            let mut completed = [0usize; 2];
            for (k, arm) in ["recursive", "interleaved"].into_iter().enumerate() {
                for repeat in 1..=3 {
                    let ok = rng.random::<f64>() < 0.6;
                    let noise = 1.0 + 0.02 * (rng.random::<f64>() - 0.5);
                    if ok {
                        completed[k] += 1;
                        cells.push((arm, repeat, RunStatus::Completed, 3.2 * noise));
                    } else {
                        cells.push((arm, repeat, RunStatus::Failed, 9.6 * noise));
                    }
                }
            }
            let gate_min = if seed % 2 == 0 { 1.5 } else { 1.0 / 1.05 };
            let r = repeated(gate_min, &cells);
            let gate = r.gate.as_ref().map(|g| g.decision);
            let short = completed.iter().any(|&c| c < 2);
            if short {
                unjudged_cases += 1;
                if gate != Some(Decision::Inconclusive) {
                    decided_on_partial += 1;
                }
            }
            // A/A on completed cells: a 1.5× gate can never pass.
            if gate_min > 1.0 && gate == Some(Decision::Pass) {
                decided_on_partial += 1;
            }
            match gate {
                Some(Decision::Pass) => pass += 1,
                Some(Decision::Fail) => fail += 1,
                _ => {}
            }
            if completed.iter().sum::<usize>() < 6 && r.check == Decision::Pass {
                check_pass_with_failures += 1;
            }
        }
        eprintln!(
            "400 seeded experiments (each cell fails with p = 0.4; partial data 3× slow): \
             {unjudged_cases} with an arm under 2 completed cells, decided on partial data \
             {decided_on_partial}; gate PASS {pass}, FAIL {fail} over all; --check PASS with a \
             failed cell {check_pass_with_failures}"
        );
        assert_eq!(decided_on_partial, 0);
        assert_eq!(check_pass_with_failures, 0);
        assert!(unjudged_cases >= 100, "{unjudged_cases}");
    }

    #[test]
    fn an_unjudged_arm_names_its_cells_and_their_first_error_line() {
        let r = repeated(
            1.5,
            &[
                ("recursive", 1, RunStatus::Failed, 9.0),
                ("recursive", 2, RunStatus::Failed, 9.0),
                ("recursive", 3, RunStatus::Completed, 3.0),
                ("interleaved", 1, RunStatus::Completed, 1.0),
                ("interleaved", 2, RunStatus::Completed, 1.0),
                ("interleaved", 3, RunStatus::Completed, 1.0),
            ],
        );
        let gate = r.gate.as_ref().unwrap();
        assert_eq!(gate.decision, Decision::Inconclusive);
        let why = gate.arms[0]
            .why
            .as_ref()
            .map(|w| w.plain())
            .unwrap_or_default();
        assert_eq!(
            why,
            "baseline `recursive`: 2 of 3 cells did not complete (failed after 4 of 10 \
             iterations: exited 1: out of memory); a judgement needs 2 completed cells per arm \
             (each repeat one replicate)"
        );
        // The speedup column shows no verdict for it either.
        let arm = r.arms.iter().find(|a| a.name == "interleaved").unwrap();
        assert!(arm
            .metric("time/traversal_seconds")
            .unwrap()
            .comparison
            .is_none());
        assert_eq!(r.check, Decision::Inconclusive);
    }

    #[test]
    fn cells_on_other_hosts_are_named_and_slurm_jobs_listed() {
        let local = report(1.5, true);
        assert!(!local.remarks.iter().any(|r| r.plain().contains("hosts")));
        assert!(!super::super::render::render_markdown(&local).contains("Slurm job"));

        let placed = report_with(1.5, true, |runs| {
            for (r, node) in runs.iter_mut().zip(["node1", "node2", "node2"]) {
                r.host = Some(node.into());
                r.slurm_job = Some(format!("{}", r.id + 7000));
            }
        });
        let text = plain(&placed.remarks).join("\n");
        assert!(text.contains("2 different hosts"), "{text}");
        assert!(
            text.contains("`recursive` on node1; `interleaved` on node2"),
            "{text}"
        );
        assert!(
            text.contains("describes the machine that ran `lcx run` (bench-1)"),
            "{text}"
        );
        let md = super::super::render::render_markdown(&placed);
        assert!(md.contains("| Node") && md.contains("7101"), "{md}");
    }

    #[test]
    fn cells_on_different_hardware_are_warned_about_and_listed_per_arm() {
        let node = |host: &str, cpu: &str| crate::store::NodeInfo {
            hostname: Some(host.into()),
            cpu_model: Some(cpu.into()),
            cpus: Some(16),
            ..Default::default()
        };
        let same = report_with(1.5, true, |runs| {
            for (r, host) in runs.iter_mut().zip(["n1", "n2", "n2"]) {
                r.host = Some(host.into());
                r.slurm_job = Some(format!("{}", r.id + 7000));
                r.node = Some(node(host, "EPYC 9654"));
            }
        });
        let text = plain(&same.remarks).join("\n");
        assert!(
            text.contains("2 different hosts with the same recorded hardware"),
            "{text}"
        );
        assert!(
            !text.contains("kinds of hardware") && !text.contains("not recorded"),
            "{text}"
        );
        let env: Vec<String> = same
            .environment
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        assert!(
            env.iter()
                .any(|l| l == "cells of `recursive` ran on: EPYC 9654, 16 CPUs (n1)"),
            "{env:?}"
        );

        // Arms given different CPUs on one kind of node: not mixed hardware.
        let cpus = report_with(1.5, true, |runs| {
            for (r, n) in runs.iter_mut().zip([4, 8, 8]) {
                r.host = Some("n1".into());
                r.slurm_job = Some(format!("{}", r.id + 7000));
                r.node = Some(crate::store::NodeInfo {
                    cpus: Some(n),
                    ..node("n1", "EPYC 9654")
                });
            }
        });
        assert!(
            !cpus
                .remarks
                .iter()
                .any(|r| r.plain().contains("kinds of hardware")),
            "{:?}",
            cpus.remarks
        );

        let mixed = report_with(1.5, true, |runs| {
            for (r, (host, cpu)) in runs.iter_mut().zip([
                ("n1", "EPYC 9654"),
                ("n2", "Xeon 8480"),
                ("n2", "Xeon 8480"),
            ]) {
                r.host = Some(host.into());
                r.slurm_job = Some(format!("{}", r.id + 7000));
                r.node = Some(node(host, cpu));
            }
        });
        let text = plain(&mixed.remarks).join("\n");
        assert!(text.contains("2 kinds of hardware"), "{text}");
        assert!(
            text.contains("`recursive` on EPYC 9654, 16 CPUs; `interleaved` on Xeon 8480, 16 CPUs"),
            "{text}"
        );
    }
}
