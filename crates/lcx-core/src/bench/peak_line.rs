//! `lcx bench peak`'s output: its metric line, typed so that each key is
//! spelt once (the vocabulary's `bench-peak` names are held to this struct
//! by a test in `metrics`), and the sentence and table a person reads. It
//! measures nothing: the host's probe and its cache are `bench/peak/`, a
//! device's matrix products are timed by lcx-trainer (this crate links no
//! libtorch) and handed in as [`DeviceRates`].

use std::fmt::Write as _;

use serde::Serialize;

use crate::bench::peak;
use crate::bench::peak::cache::{KnownCeiling, PeakSource};
use crate::text::markdown_table;

/// A libtorch device's matrix-product rates (`--device`): the ceilings a
/// GPU's phases are read against.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceRates {
    /// The device as the table names it (`Cpu`, `Cuda(0)`).
    pub device: String,
    /// The side of the square matrices.
    pub size: i64,
    /// FP32 GFLOP/s (TF32 off).
    pub fp32_gflops: f64,
    /// FP16 GFLOP/s on a GPU's tensor cores; `None` on a CPU, where FP16
    /// products are no faster and not what AMP runs.
    pub half_gflops: Option<f64>,
}

/// The one JSON line `lcx bench peak --metrics-out` writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeakLine<'a> {
    pub iteration: u32,
    #[serde(rename = "peak/isa")]
    pub isa: &'a str,
    #[serde(rename = "peak/threads")]
    pub threads: usize,
    #[serde(rename = "peak/fp32_gflops_core")]
    pub fp32_gflops_core: f64,
    #[serde(rename = "peak/fp32_gflops")]
    pub fp32_gflops: f64,
    #[serde(rename = "peak/stream_gbytes_per_second")]
    pub stream_gbytes_per_second: f64,
    #[serde(rename = "peak/tries")]
    pub tries: usize,
    #[serde(rename = "peak/spread")]
    pub spread: f64,
    /// `cached`, `probed`, `disturbed` or `reprobed`.
    #[serde(rename = "peak/source")]
    pub source: &'static str,
    /// This run's probe, when one ran.
    #[serde(flatten)]
    pub probe: Option<ProbeFigures>,
    #[serde(rename = "peak/matmul_gflops", skip_serializing_if = "Option::is_none")]
    pub matmul_gflops: Option<f64>,
    #[serde(
        rename = "peak/matmul_half_gflops",
        skip_serializing_if = "Option::is_none"
    )]
    pub matmul_half_gflops: Option<f64>,
    /// The `VDPBF16PS` ceiling, where the CPU has AVX512_BF16 (probed on
    /// every call, not cached).
    #[serde(
        rename = "peak/bf16_gflops_core",
        skip_serializing_if = "Option::is_none"
    )]
    pub bf16_gflops_core: Option<f64>,
    #[serde(rename = "peak/bf16_gflops", skip_serializing_if = "Option::is_none")]
    pub bf16_gflops: Option<f64>,
}

/// What this run's probe found (the ceiling keeps the best of all).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeFigures {
    #[serde(rename = "peak/probe_fp32_gflops")]
    pub fp32_gflops: f64,
    #[serde(rename = "peak/probe_fp32_gflops_core")]
    pub fp32_gflops_core: f64,
    #[serde(rename = "peak/probe_tries")]
    pub tries: usize,
    #[serde(rename = "peak/probe_discarded")]
    pub discarded: usize,
    #[serde(rename = "peak/probe_spread")]
    pub spread: f64,
    /// 1 when no try was clean: the figures are a floor.
    #[serde(rename = "peak/probe_disturbed")]
    pub disturbed: u8,
    #[serde(rename = "peak/probe_seconds")]
    pub seconds: f64,
}

impl<'a> PeakLine<'a> {
    /// The line for the host's known ceiling and, with `--device`, the
    /// device's rates.
    pub fn new(
        known: &'a KnownCeiling,
        device: Option<&DeviceRates>,
        bf16: Option<&peak::Bf16Peak>,
    ) -> PeakLine<'a> {
        let c = &known.ceiling;
        PeakLine {
            iteration: 1,
            isa: &c.isa,
            threads: c.threads,
            fp32_gflops_core: c.gflops_core,
            fp32_gflops: c.gflops,
            stream_gbytes_per_second: c.stream_gbytes_per_second,
            tries: c.tries,
            spread: c.spread,
            source: known.source.as_str(),
            probe: known.probe.as_ref().map(|p| ProbeFigures {
                fp32_gflops: p.gflops,
                fp32_gflops_core: p.gflops_core,
                tries: p.tries,
                discarded: p.discarded,
                spread: p.spread,
                disturbed: u8::from(p.disturbed),
                seconds: p.seconds,
            }),
            matmul_gflops: device.map(|d| d.fp32_gflops),
            matmul_half_gflops: device.and_then(|d| d.half_gflops),
            bf16_gflops_core: bf16.map(|b| b.gflops_core),
            bf16_gflops: bf16.map(|b| b.gflops),
        }
    }

    /// The line as written: one JSON object, its keys in sorted order (as
    /// every line `lcx bench peak` has written).
    pub fn to_json(&self) -> String {
        // Through a `Value`, whose map is ordered by key, rather than the
        // struct's field order.
        serde_json::to_value(self)
            .map(|v| v.to_string())
            .unwrap_or_default()
    }
}

/// What `lcx bench peak` prints: how the ceiling was found, then a table
/// of its figures (and the device's, and the FMA bound at the reported
/// clock where one is reported).
pub fn peak_text(
    known: &KnownCeiling,
    device: Option<&DeviceRates>,
    bf16: Option<&peak::Bf16Peak>,
) -> String {
    let c = &known.ceiling;
    let mut table = markdown_table();
    table.set_header(["measure", "value"]);
    table.add_row([
        format!("FP32 GFLOP/s, one core ({})", c.isa),
        format!("{:.1}", c.gflops_core),
    ]);
    table.add_row([
        format!("FP32 GFLOP/s, {} threads", c.threads),
        format!("{:.1}", c.gflops),
    ]);
    table.add_row([
        "stream triad GB/s".to_string(),
        format!("{:.1}", c.stream_gbytes_per_second),
    ]);
    match bf16 {
        Some(b) => {
            let mut how = format!("best of {}, spread {:.0} %", b.tries, 100.0 * b.spread);
            if b.disturbed {
                how = "DISTURBED: no clean try, a floor".to_string();
            }
            table.add_row([
                format!(
                    "bf16 GFLOP/s (VDPBF16PS), one core / {} threads ({how})",
                    b.threads
                ),
                format!("{:.1} / {:.1}", b.gflops_core, b.gflops),
            ]);
        }
        None => {
            table.add_row([
                "bf16 GFLOP/s".to_string(),
                "no bf16 units (AVX512_BF16): bf16 runs as FP32 FMAs".to_string(),
            ]);
        }
    }
    if let Some(p) = &known.probe {
        table.add_row([
            format!("this probe: FP32 GFLOP/s, one core / {} threads", p.threads),
            format!("{:.1} / {:.1}", p.gflops_core, p.gflops),
        ]);
    }
    if let Some(d) = device {
        table.add_row([
            format!(
                "libtorch {n}×{n} FP32 matmul GFLOP/s on {} (TF32 off)",
                d.device,
                n = d.size
            ),
            format!("{:.1}", d.fp32_gflops),
        ]);
        if let Some(g) = d.half_gflops {
            table.add_row([
                format!(
                    "libtorch {n}×{n} FP16 matmul GFLOP/s (tensor cores)",
                    n = d.size
                ),
                format!("{g:.1}"),
            ]);
        }
    }
    if let Some((ghz, source)) = peak::reported_clock_ghz() {
        table.add_row([
            format!("FMA bound at {ghz:.2} GHz ({source}), one core"),
            format!("{:.1}", peak::theoretical_gflops(1, ghz, &c.isa)),
        ]);
    }
    format!("{}\n{table}", how_found(known))
}

/// How the ceiling shown was found: cached, probed now, or only a floor
/// because the probe was disturbed.
fn how_found(known: &KnownCeiling) -> String {
    let c = &known.ceiling;
    match (known.source, &known.probe) {
        (PeakSource::Cached, _) => format!(
            "this host's ceiling, cached ({}, {} clean probes; --refresh probes again)",
            c.describe(),
            c.probes
        ),
        (_, Some(p)) if p.disturbed => {
            let mut how = format!(
                "probe DISTURBED: no try had all its cores ({} discarded in {:.2} s); the \
                 figures are a floor, not the ceiling",
                p.discarded, p.seconds,
            );
            // A clean ceiling from earlier is what is shown, not the floor.
            if c.probes > 0 && known.source != PeakSource::Disturbed {
                let _ = write!(
                    how,
                    "; the host's best known ceiling is shown ({})",
                    c.describe()
                );
            }
            how
        }
        (_, Some(p)) => format!(
            "probed in {:.2} s: {} clean tries, {} discarded as disturbed, spread {:.1} %; \
             the host's best ceiling: {}",
            p.seconds,
            p.tries,
            p.discarded,
            100.0 * p.spread,
            c.describe()
        ),
        (_, None) => c.describe(),
    }
}
