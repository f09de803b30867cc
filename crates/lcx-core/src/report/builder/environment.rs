//! The Environment section: lcx's version, where each arm's cells ran and
//! on which CPUs, the arms' code revisions, the checkout and the file, and
//! the host's fingerprint (peak, OS, CPU, memory, GPU, torch). It writes
//! what was recorded, as key and value; it must not judge it (the
//! placement remarks say what it means for the comparison).

use std::collections::{BTreeMap, BTreeSet};

use crate::experiment::Plan;
use crate::report::model::Prose;
use crate::report::words::num;
use crate::store::{Experiment, Fingerprint, Run};

use super::roofline::peak_provenance;

/// One line of the section: what, and its value.
type Line = (Prose, String);

/// The Environment section's lines, in the order they are shown.
pub(super) fn environment(e: &Experiment, plan: Option<&Plan>, runs: &[Run]) -> Vec<Line> {
    let mut env = vec![(Prose::ours("lcx"), e.lcx_version.clone())];
    env.extend(cells_hardware(runs));
    env.extend(revisions(plan));
    env.extend(cpus_by_arm(plan, runs));
    match (&e.git_commit, e.git_dirty) {
        (Some(c), Some(true)) => env.push(("git commit".into(), format!("{c} (dirty)"))),
        (Some(c), _) => env.push(("git commit".into(), c.clone())),
        (None, _) => env.push(("git commit".into(), "not a git checkout".into())),
    }
    let sha: String = e.file_sha256.chars().take(12).collect();
    env.push((
        "experiment file".into(),
        format!("{} (sha256 {sha}…)", e.file_path),
    ));
    env.extend(fingerprint(&e.fingerprint));
    env
}

/// Cells that ran away from `lcx run` (Slurm jobs), or on different
/// hardware: what each arm's cells ran on, as each cell recorded it.
fn cells_hardware(runs: &[Run]) -> Vec<Line> {
    let mut env = Vec::new();
    let hardware = hardware_by_arm(runs);
    let kinds: BTreeSet<&String> = hardware.values().flatten().collect();
    if kinds.len() > 1 || runs.iter().any(|r| r.slurm_job.is_some()) {
        for ((_, arm), h) in &hardware {
            let mut hosts: Vec<&str> = runs
                .iter()
                .filter(|r| r.arm == *arm)
                .filter_map(|r| r.node.as_ref().and_then(|n| n.hostname.as_deref()))
                .collect();
            hosts.sort_unstable();
            hosts.dedup();
            env.push((
                Prose::ours("cells of ").name(*arm).and(" ran on"),
                format!("{} ({})", h.join("; "), hosts.join(", ")),
            ));
        }
    }
    env
}

/// Arms at code revisions: what each ran, and what changed since the
/// baseline's revision.
fn revisions(plan: Option<&Plan>) -> Vec<Line> {
    let mut env = Vec::new();
    for arm in plan.map(|p| p.arms.as_slice()).unwrap_or_default() {
        let Some(r) = &arm.revision else {
            continue;
        };
        let mut value = r.describe();
        if let Some(v) = &r.version {
            value.push_str(&format!(" ({v})"));
        }
        env.push((Prose::ours("revision of ").name(&arm.name), value));
        if r.log_total > 0 {
            let mut log = r.log.join("; ");
            if r.log_total > r.log.len() {
                log.push_str(&format!("; … {} more", r.log_total - r.log.len()));
            }
            env.push((
                Prose::ours("commits in ")
                    .name(&arm.name)
                    .and(" since the baseline"),
                format!("{}: {log}", r.log_total),
            ));
        }
    }
    env
}

/// The host's fingerprint, each fact it recorded.
fn fingerprint(f: &Fingerprint) -> Vec<Line> {
    let mut env = Vec::new();
    let mut push = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            env.push((Prose::ours(k), v));
        }
    };
    push("host", f.hostname.clone());
    push(
        "measured peak (lcx bench peak)",
        match (f.peak_fp32_gflops, f.peak_fp32_gflops_core) {
            (Some(all), Some(core)) => Some(format!(
                "{} GFLOP/s FP32 on all cores, {} on one ({}); {} GB/s stream{}",
                num(all),
                num(core),
                f.peak_isa.as_deref().unwrap_or("?"),
                f.peak_stream_gbytes_per_second
                    .map(num)
                    .unwrap_or_else(|| "?".into()),
                peak_provenance(f)
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default()
            )),
            _ => None,
        },
    );
    push("os", f.os.clone());
    push(
        "cpu",
        match (&f.cpu_model, f.cpu_cores) {
            (Some(m), Some(c)) => Some(format!("{m}, {c} cores")),
            (Some(m), None) => Some(m.clone()),
            (None, Some(c)) => Some(format!("{c} cores")),
            (None, None) => None,
        },
    );
    push(
        "memory",
        f.memory_bytes
            .map(|b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)),
    );
    push("gpu", f.gpu_name.clone());
    push("gpu driver", f.gpu_driver.clone());
    push("cuda (driver)", f.cuda_version.clone());
    push(
        "cuda available to libtorch",
        f.cuda_available
            .map(|b| if b { "yes" } else { "no" }.to_string()),
    );
    push("torch", f.torch_version.clone());
    push(
        "torch threads (intra/inter)",
        match (f.torch_intra_threads, f.torch_inter_threads) {
            (None, None) => None,
            (a, b) => Some(format!(
                "{}/{}",
                a.map(|x| x.to_string()).unwrap_or_else(|| "?".into()),
                b.map(|x| x.to_string()).unwrap_or_else(|| "?".into())
            )),
        },
    );
    env
}

/// The hardware each arm's cells ran on (as recorded per cell), in arm
/// order.
pub(super) fn hardware_by_arm(runs: &[Run]) -> BTreeMap<(i64, &str), Vec<String>> {
    let mut out: BTreeMap<(i64, &str), Vec<String>> = Default::default();
    for r in runs {
        if let Some(h) = r.node.as_ref().and_then(|n| n.hardware()) {
            let list = out.entry((r.arm_index, r.arm.as_str())).or_default();
            if !list.contains(&h) {
                list.push(h);
            }
        }
    }
    out
}

/// Where cells ran when they did not have the whole host: each arm's
/// CPUs as its cells recorded them (an arm's `cpus`, `[measurement] pin`),
/// with the asked set where the kernel gave another; or, for cells that
/// were not pinned, the CPUs the runner itself was limited to (`taskset`).
fn cpus_by_arm(plan: Option<&Plan>, runs: &[Run]) -> Vec<(Prose, String)> {
    let recorded = |arm: &str| {
        let mut sets: Vec<&str> = runs
            .iter()
            .filter(|r| r.arm == arm)
            .filter_map(|r| r.cpus.as_deref())
            .collect();
        sets.sort_unstable();
        sets.dedup();
        sets
    };
    let arms = plan.map(|p| p.arms.as_slice()).unwrap_or_default();
    if arms.iter().any(|a| a.cpus.is_some()) {
        return arms
            .iter()
            .map(|arm| {
                let sets = recorded(&arm.name);
                let asked = arm.cpus.as_ref().map(|c| c.to_string());
                let value = match (sets.as_slice(), asked) {
                    ([], Some(asked)) => format!("{asked} (asked; no cell recorded its CPUs)"),
                    ([], None) => "not pinned".to_string(),
                    ([one], Some(asked)) if *one == asked => format!("{one} (pinned)"),
                    (sets, Some(asked)) => format!("{} (asked {asked})", sets.join("; ")),
                    (sets, None) => format!("{} (not pinned)", sets.join("; ")),
                };
                (Prose::ours("CPUs of ").name(&arm.name), value)
            })
            .collect();
    }
    // Unpinned cells that still had fewer CPUs than the host was online.
    let limited: Vec<&str> = {
        let mut sets: Vec<&str> = runs
            .iter()
            .filter(|r| {
                let count = r
                    .cpus
                    .as_deref()
                    .and_then(|c| crate::system::affinity::CpuSet::parse(c).ok())
                    .map(|c| c.len() as i64);
                matches!((count, r.contention.host_cpus), (Some(n), Some(online)) if n < online)
            })
            .filter_map(|r| r.cpus.as_deref())
            .collect();
        sets.sort_unstable();
        sets.dedup();
        sets
    };
    if limited.is_empty() {
        return Vec::new();
    }
    vec![(
        Prose::ours("CPUs of cells"),
        format!(
            "{}: fewer than the host had online (lcx itself was limited, by taskset or a \
             cgroup)",
            limited.join("; ")
        ),
    )]
}
