//! `lcx bench peak`: what this machine can do right now, as the ceiling
//! that the trainer's per-phase GFLOP/s are read against.
//!
//! - FP32 throughput: a loop of independent fused multiply-adds on 8-wide
//!   AVX2 registers (the instruction set lcx's CPU kernels use), on one core
//!   and on every core at once; a scalar loop where AVX2/FMA is missing.
//! - Memory bandwidth: a streaming triad `a[i] = b[i] + s * c[i]` over
//!   arrays larger than any cache, on every core.
//!
//! Each figure is the best of a few short repetitions, so the whole probe
//! takes well under a second; the runner records it with the host
//! fingerprint of every experiment.

use std::time::{Duration, Instant};

/// The measured ceiling.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Peak {
    /// `avx2-fma` or `scalar`.
    pub isa: &'static str,
    /// Threads of the all-core measurements.
    pub threads: usize,
    /// FP32 GFLOP/s of one thread.
    pub gflops_core: f64,
    /// FP32 GFLOP/s of all threads together.
    pub gflops: f64,
    /// Triad bandwidth in GB/s (10^9 bytes), all threads.
    pub stream_gbytes_per_second: f64,
    /// Wall time of the whole probe.
    pub seconds: f64,
}

/// Independent accumulators of the FMA loop: enough to cover the FMA
/// latency (4 cycles) times the ports (2) of current x86 cores.
const LANES: usize = 12;

/// FLOPs one call of [`fma_block`] does for `reps` repetitions: every lane
/// holds 8 floats and an FMA counts as two operations.
fn fma_flops(reps: u64, width: u64) -> f64 {
    (reps * LANES as u64 * width * 2) as f64
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
/// # Safety
/// The CPU must support AVX2 and FMA (checked by the caller).
unsafe fn fma_block_avx2(reps: u64, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    let a = _mm256_set1_ps(0.999_999);
    let b = _mm256_set1_ps(1e-7);
    let mut acc = [_mm256_set1_ps(seed); LANES];
    for _ in 0..reps {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, a, b);
        }
    }
    let mut sum = _mm256_setzero_ps();
    for x in acc {
        sum = _mm256_add_ps(sum, x);
    }
    let mut out = [0f32; 8];
    _mm256_storeu_ps(out.as_mut_ptr(), sum);
    out.iter().sum()
}

fn fma_block_scalar(reps: u64, seed: f32) -> f32 {
    let mut acc = [seed; LANES];
    for _ in 0..reps {
        for x in acc.iter_mut() {
            *x = x.mul_add(0.999_999, 1e-7);
        }
    }
    acc.iter().sum()
}

/// Whether the AVX2 FMA loop runs here.
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Runs `reps` repetitions of the FMA loop; returns the FLOPs done.
fn fma_work(reps: u64, avx2: bool) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: the caller checked AVX2 and FMA with has_avx2_fma().
        let r = unsafe { fma_block_avx2(reps, 1.0) };
        std::hint::black_box(r);
        return fma_flops(reps, 8);
    }
    let _ = avx2;
    std::hint::black_box(fma_block_scalar(reps, 1.0));
    fma_flops(reps, 1)
}

/// Best GFLOP/s of `threads` threads running the FMA loop together.
fn fma_gflops(threads: usize, avx2: bool, per_try: Duration, tries: usize) -> f64 {
    // Size one block to about a millisecond, then run blocks until the time
    // is up; a try's rate is all threads' FLOPs over its wall time.
    let block = if avx2 { 200_000 } else { 50_000 };
    let mut best = 0.0f64;
    for _ in 0..tries {
        let start = Instant::now();
        let flops: f64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(move || {
                        let mut done = 0.0;
                        while start.elapsed() < per_try {
                            done += fma_work(block, avx2);
                        }
                        done
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).sum()
        });
        let seconds = start.elapsed().as_secs_f64();
        best = best.max(flops / seconds / 1e9);
    }
    best
}

/// Best triad bandwidth of `threads` threads over `bytes` per array.
fn stream_gbytes(threads: usize, floats: usize, tries: usize) -> f64 {
    let mut a = vec![0f32; floats];
    let b = vec![1f32; floats];
    let c = vec![2f32; floats];
    let chunk = floats.div_ceil(threads.max(1));
    let mut best = 0.0f64;
    // The first pass faults the pages in; it is not timed.
    for attempt in 0..=tries {
        let start = Instant::now();
        std::thread::scope(|s| {
            for ((a, b), c) in a
                .chunks_mut(chunk)
                .zip(b.chunks(chunk))
                .zip(c.chunks(chunk))
            {
                s.spawn(move || {
                    for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
                        *x = y + 3.0 * z;
                    }
                });
            }
        });
        let seconds = start.elapsed().as_secs_f64();
        std::hint::black_box(&a);
        if attempt > 0 {
            // Two arrays read, one written.
            best = best.max((3 * floats * 4) as f64 / seconds / 1e9);
        }
    }
    best
}

/// Measures the machine now, in well under a second.
pub fn measure() -> Peak {
    let start = Instant::now();
    let avx2 = has_avx2_fma();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_try = Duration::from_millis(40);
    let gflops_core = fma_gflops(1, avx2, per_try, 3);
    let gflops = if threads > 1 {
        fma_gflops(threads, avx2, per_try, 3)
    } else {
        gflops_core
    };
    // 3 × 32 MiB: past the last-level cache of the machines lcx runs on.
    let stream = stream_gbytes(threads, 8 << 20, 3);
    Peak {
        isa: if avx2 { "avx2-fma" } else { "scalar" },
        threads,
        gflops_core,
        gflops,
        stream_gbytes_per_second: stream,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// The highest clock the OS reports for any CPU, in GHz: cpufreq's maximum
/// where the kernel exposes it, else the largest `cpu MHz` in
/// `/proc/cpuinfo` (on virtual machines often the nominal clock, which
/// turbo can exceed).
pub fn reported_clock_ghz() -> Option<(f64, &'static str)> {
    if let Ok(text) =
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    {
        if let Ok(khz) = text.trim().parse::<f64>() {
            return Some((khz / 1e6, "cpufreq maximum"));
        }
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .reduce(f64::max)
        .map(|mhz| (mhz / 1000.0, "/proc/cpuinfo cpu MHz"))
}

/// The most FP32 GFLOP/s `threads` threads could do at `clock_ghz`: FMA
/// units per core (2 on x86-64 cores with AVX2) × lanes (8, or 1 scalar) ×
/// 2 operations per FMA × clock.
pub fn theoretical_gflops(threads: usize, clock_ghz: f64, isa: &str) -> f64 {
    let lanes = if isa == "avx2-fma" { 8.0 } else { 1.0 };
    threads as f64 * 2.0 * lanes * 2.0 * clock_ghz
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_count_of_the_loop() {
        // 12 accumulators × 8 lanes × 2 operations per repetition.
        assert_eq!(fma_flops(10, 8), 1920.0);
        assert_eq!(fma_flops(10, 1), 240.0);
    }

    #[test]
    fn the_loops_compute_the_recurrence() {
        // x <- 0.999999 x + 1e-7, starting at 1, 1000 times, 12 lanes.
        let mut x = 1.0f32;
        for _ in 0..1000 {
            x = x.mul_add(0.999_999, 1e-7);
        }
        let scalar = fma_block_scalar(1000, 1.0);
        assert!((scalar - 12.0 * x).abs() < 1e-3, "{scalar} vs {}", 12.0 * x);
        if has_avx2_fma() {
            // SAFETY: checked just above.
            let v = unsafe { fma_block_avx2(1000, 1.0) };
            assert!((v - 96.0 * x).abs() < 1e-2, "{v} vs {}", 96.0 * x);
        }
    }

    #[test]
    fn measured_peak_is_positive_and_within_the_theoretical_bound() {
        let peak = measure();
        assert!(peak.gflops_core > 0.0 && peak.gflops >= peak.gflops_core * 0.5);
        assert!(peak.stream_gbytes_per_second > 0.0);
        assert!(peak.seconds < 5.0, "the probe took {} s", peak.seconds);
        if let Some((ghz, source)) = reported_clock_ghz() {
            // The OS's figure is often the nominal clock (always on a VM
            // without cpufreq), which turbo exceeds: this host reports
            // 2.3 GHz and its FMA loop runs at about 2.8. Twice the
            // reported clock still catches a loop that counts its FLOPs
            // twice or eight times over.
            let bound = theoretical_gflops(1, ghz * 2.0, peak.isa);
            assert!(
                peak.gflops_core <= bound,
                "{} GFLOP/s on one core is above 2 FMA units × {} lanes × 2 × 2 × {ghz} GHz ({source})",
                peak.gflops_core,
                if peak.isa == "avx2-fma" { 8 } else { 1 }
            );
            let all = theoretical_gflops(peak.threads, ghz * 2.0, peak.isa);
            assert!(peak.gflops <= all, "{} > {all}", peak.gflops);
        }
    }
}
