//! Hand-built report inputs for the renderer snapshot tests (test-only).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::experiment::{Arm, Column, Direction, Fold, Gate, Order, Plan, Program, Show, Workload};
use crate::store::report_read::RunMoments;
use crate::store::{Experiment, ExperimentStatus, Fingerprint, Run, RunStatus};

use super::build::{assemble, Input, Options};
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
        adaptive: None,
        repeats: 1,
        baseline: "recursive".into(),
        order: Order::Interleaved,
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
        }),
        guards: Vec::new(),
        notes: "Interleaving batches network calls across traversals.".into(),
        executor: Default::default(),
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

/// The option-b report: two arms with data, one skipped GPU arm, a gate.
pub fn report(gate_min: f64, columns: bool) -> Report {
    report_with(gate_min, columns, |_| {})
}

/// [`report`] with its runs changed first.
pub fn report_with(gate_min: f64, columns: bool, change: impl FnOnce(&mut Vec<Run>)) -> Report {
    let p = plan(gate_min, columns);
    let experiment = Experiment {
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
    };
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
    assemble(
        Input {
            experiment,
            runs,
            metric_names: vec![
                "interleaved/avg_batch_size".into(),
                "time/iteration_seconds".into(),
                "time/traversal_seconds".into(),
                "traversal/nodes_per_second".into(),
            ],
            moments: m,
            medians,
            nonfinite: Vec::new(),
            perf: Vec::new(),
            series: Vec::new(),
            precisions: Vec::new(),
            db: None,
        },
        Options::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_on_other_hosts_are_named_and_slurm_jobs_listed() {
        let local = report(1.5, true);
        assert!(!local.remarks.iter().any(|r| r.contains("hosts")));
        assert!(!super::super::render::render_markdown(&local).contains("Slurm job"));

        let placed = report_with(1.5, true, |runs| {
            for (r, node) in runs.iter_mut().zip(["node1", "node2", "node2"]) {
                r.host = Some(node.into());
                r.slurm_job = Some(format!("{}", r.id + 7000));
            }
        });
        let text = placed.remarks.join("\n");
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
        let text = same.remarks.join("\n");
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
            !cpus.remarks.iter().any(|r| r.contains("kinds of hardware")),
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
        let text = mixed.remarks.join("\n");
        assert!(text.contains("2 kinds of hardware"), "{text}");
        assert!(
            text.contains("`recursive` on EPYC 9654, 16 CPUs; `interleaved` on Xeon 8480, 16 CPUs"),
            "{text}"
        );
    }
}
