//! The roofline: the fraction of the measured peak each arm's phases
//! reached, from the work rates the trainer emits, and how the peak was
//! found. It reads the per-run moments of [`PERF_METRICS`] and the
//! experiment's fingerprint; it must not judge the rates.

use crate::report::model::{Roofline, RooflineArm};
use crate::store::report_read::RunMoments;
use crate::store::Experiment;

use super::arms::ArmName;

/// What the trainer emits of its work rate, and the device ceiling it
/// measured on a GPU: read against the recorded peak.
pub const PERF_METRICS: [&str; 5] = [
    "perf/traversal_gflops",
    "perf/training_gflops",
    "peak/device_matmul_gflops",
    "peak/device_matmul_half_gflops",
    "peak/bf16_gflops",
];

/// The fraction of the recorded peak each arm's phases reached, for arms
/// whose trainer emitted its work rate. A GPU arm that measured its
/// device's matrix-product ceiling is read against that.
pub(super) fn roofline(
    e: &Experiment,
    arms: &[ArmName],
    perf: &[RunMoments],
    counted: &[i64],
) -> Option<Roofline> {
    let mean = |arm: &str, metric: &str| {
        let ms: Vec<&RunMoments> = perf
            .iter()
            .filter(|m| m.arm == arm && m.name == metric && m.n > 0 && counted.contains(&m.run_id))
            .collect();
        crate::report::moments::shown_summary(&ms).map(|s| s.mean)
    };
    let rows: Vec<RooflineArm> = arms
        .iter()
        .map(|a| RooflineArm {
            arm: a.name.clone(),
            traversal_gflops: mean(&a.name, PERF_METRICS[0]),
            training_gflops: mean(&a.name, PERF_METRICS[1]),
            device_peak_gflops: mean(&a.name, PERF_METRICS[2]),
            device_half_peak_gflops: mean(&a.name, PERF_METRICS[3]),
            bf16_peak_gflops: mean(&a.name, PERF_METRICS[4]),
        })
        .filter(|r| r.traversal_gflops.is_some() || r.training_gflops.is_some())
        .collect();
    if rows.is_empty() {
        return None;
    }
    let f = &e.fingerprint;
    Some(Roofline {
        peak_gflops: f.peak_fp32_gflops,
        peak_gflops_core: f.peak_fp32_gflops_core,
        isa: f.peak_isa.clone(),
        threads: f.cpu_cores,
        provenance: peak_provenance(f),
        note: f.peak_note.clone(),
        arms: rows,
    })
}

/// How an experiment's ceiling was found: "best of 5, spread 2 %, probed
/// 2026-12-03, cached".
pub(super) fn peak_provenance(f: &crate::store::Fingerprint) -> Option<String> {
    let source = f.peak_source.as_deref()?;
    let mut parts = Vec::new();
    match f.peak_tries {
        Some(0) => parts.push("no clean try".to_string()),
        Some(tries) => parts.push(format!("best of {tries}")),
        None => {}
    }
    if let Some(spread) = f.peak_spread {
        parts.push(format!("spread {:.0} %", 100.0 * spread));
    }
    if let Some(at) = &f.peak_probed_at {
        parts.push(format!("probed {}", at.get(..10).unwrap_or(at)));
    }
    parts.push(match source {
        "cached" => "cached for this host and boot".to_string(),
        "disturbed" => {
            "DISTURBED: no try had all its cores, a floor rather than the ceiling".into()
        }
        "reprobed" => "probed again during the run".into(),
        other => other.to_string(),
    });
    Some(parts.join(", "))
}
