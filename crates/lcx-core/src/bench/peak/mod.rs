//! `lcx bench peak`: what this machine can do, as the ceiling that the
//! trainer's per-phase GFLOP/s are read against.
//!
//! - FP32 throughput: a loop of independent fused multiply-adds on the
//!   widest registers the CPU has (16-wide AVX-512, else 8-wide AVX2: the
//!   widths lcx's CPU kernel runs at), on one core and on every core at
//!   once; a scalar loop where neither is there. The ceiling is the
//!   hardware's, so holding the kernel to AVX2 (`LCX_NATIVE_KERNEL=avx2`)
//!   does not lower it.
//! - bf16 throughput, where the CPU has bf16 units (AVX512_BF16): a loop
//!   of independent `VDPBF16PS` (32 bf16 products summed into 16 f32 per
//!   instruction), the ceiling of an arm that trains in bf16 on lcx's
//!   AVX512-BF16 kernel ([`measure_bf16`]; not cached: it takes a third of
//!   a second).
//! - Memory bandwidth: a streaming triad `a[i] = b[i] + s * c[i]` over
//!   arrays larger than any cache, on every core.
//!
//! A ceiling is a maximum, so one try that another program interrupted
//! must not lower it: each FMA figure is the best of several short tries,
//! and a try in which some thread did not have its core the whole time
//! (its CPU time short of its wall time, [`disturbance`]) is discarded and
//! tried again, within a time budget. What is left says how many tries
//! count and how far apart they lie. [`cache`] keeps the best clean probe
//! per host and boot, so `lcx run` need not probe at all.

use std::time::{Duration, Instant};

pub mod cache;

/// The measured ceiling.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Peak {
    /// `avx512f`, `avx2-fma` or `scalar` (see [`Isa`]).
    pub isa: &'static str,
    /// Threads of the all-core measurements.
    pub threads: usize,
    /// FP32 GFLOP/s of one thread.
    pub gflops_core: f64,
    /// FP32 GFLOP/s of all threads together.
    pub gflops: f64,
    /// Triad bandwidth in GB/s (10^9 bytes), all threads.
    pub stream_gbytes_per_second: f64,
    /// Clean all-core tries the figure is the best of.
    pub tries: usize,
    /// Tries discarded as disturbed (both series).
    pub discarded: usize,
    /// How far the clean all-core tries lie apart: max / min − 1.
    pub spread: f64,
    /// No clean try in a series within its budget: the figures are the
    /// best of disturbed tries, a floor rather than the ceiling.
    pub disturbed: bool,
    /// Wall time of the whole probe.
    pub seconds: f64,
}

/// A thread whose CPU time is below this share of its wall time lost its
/// core to something else for part of the try: on a quiet core the two
/// agree within a fraction of a percent.
pub const HAD_ITS_CORE: f64 = 0.97;

/// One timed try of the FMA loop: its rate and, per thread, the CPU time
/// the thread got and the wall time it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Try {
    pub gflops: f64,
    pub threads: Vec<ThreadTime>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadTime {
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    /// The thread's FLOPs per second of its own CPU time, in GFLOP/s.
    pub gflops_per_cpu_second: f64,
}

/// A thread of an all-core try whose rate per CPU-second is below this
/// share of one core's best shared its core: with the CPU time all its
/// own, only a co-scheduled sibling (another guest's vCPU on the same
/// physical core, a busy hyperthread) halves a thread's rate. Only applied
/// where SMT is off, since with SMT on the probe's own threads pair up.
pub const RAN_AT_FULL_SPEED: f64 = 0.85;

/// Why a try does not measure the ceiling, if it does not: a thread that
/// ran on its core for less than [`HAD_ITS_CORE`] of the try (another
/// process, or the hypervisor, had it meanwhile), or, given one core's
/// best rate `core`, a thread that ran below [`RAN_AT_FULL_SPEED`] of it
/// per second of CPU (its core was shared underneath it).
pub fn disturbance(t: &Try, core: Option<f64>) -> Option<String> {
    t.threads.iter().enumerate().find_map(|(i, th)| {
        let share = th.cpu_seconds / th.wall_seconds;
        if th.wall_seconds > 0.0 && share < HAD_ITS_CORE {
            return Some(format!(
                "thread {i} had its core {:.0} % of the try (below {:.0} %)",
                100.0 * share,
                100.0 * HAD_ITS_CORE
            ));
        }
        let core = core.filter(|&c| th.gflops_per_cpu_second < RAN_AT_FULL_SPEED * c)?;
        Some(format!(
            "thread {i} ran at {:.1} GFLOP/s per CPU-second, below {:.0} % of one core's {core:.1}",
            th.gflops_per_cpu_second,
            100.0 * RAN_AT_FULL_SPEED
        ))
    })
}

/// The best of a series of tries and what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub best: f64,
    pub clean: usize,
    pub discarded: usize,
    /// max / min − 1 of the clean tries (0 with fewer than two).
    pub spread: f64,
    /// No try was clean: `best` is the best disturbed one.
    pub disturbed: bool,
}

/// Reduces tries to the ceiling they show: the best clean one; the best of
/// all only when none was clean (then flagged).
pub fn reduce(tries: &[Try], core: Option<f64>) -> Series {
    let clean: Vec<f64> = tries
        .iter()
        .filter(|t| disturbance(t, core).is_none())
        .map(|t| t.gflops)
        .collect();
    let max = |v: &mut dyn Iterator<Item = f64>| v.fold(0.0f64, f64::max);
    match clean.is_empty() {
        false => {
            let best = max(&mut clean.iter().copied());
            let low = clean.iter().copied().fold(f64::INFINITY, f64::min);
            Series {
                best,
                clean: clean.len(),
                discarded: tries.len() - clean.len(),
                spread: if clean.len() > 1 && low > 0.0 {
                    best / low - 1.0
                } else {
                    0.0
                },
                disturbed: false,
            }
        }
        true => Series {
            best: max(&mut tries.iter().map(|t| t.gflops)),
            clean: 0,
            discarded: tries.len(),
            spread: 0.0,
            disturbed: true,
        },
    }
}

/// Independent accumulators of the FMA loop: enough to cover the FMA
/// latency (4 cycles) times the ports (2) of current x86 cores.
const LANES: usize = 12;

/// FLOPs one call of [`fma_block`] does for `reps` repetitions: every lane
/// holds 8 floats and an FMA counts as two operations.
fn fma_flops(reps: u64, width: u64) -> f64 {
    (reps * LANES as u64 * width * 2) as f64
}

/// # Safety
/// The CPU must support AVX-512F (checked by the caller).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_block_avx512(reps: u64, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    let a = _mm512_set1_ps(0.999_999);
    let b = _mm512_set1_ps(1e-7);
    let mut acc = [_mm512_set1_ps(seed); LANES];
    for _ in 0..reps {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, a, b);
        }
    }
    let mut sum = _mm512_setzero_ps();
    for x in acc {
        sum = _mm512_add_ps(sum, x);
    }
    _mm512_reduce_add_ps(sum)
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

/// The widest FMA the probe (and lcx's CPU kernel) can use here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Avx512,
    Avx2,
    Scalar,
}

impl Isa {
    /// This CPU's.
    pub fn here() -> Isa {
        #[cfg(target_arch = "x86_64")]
        if has_avx2_fma() && is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if has_avx2_fma() {
            Isa::Avx2
        } else {
            Isa::Scalar
        }
    }

    /// The name a [`Peak`] and a cached ceiling carry.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512f",
            Isa::Avx2 => "avx2-fma",
            Isa::Scalar => "scalar",
        }
    }

    /// f32 lanes per FMA.
    pub fn lanes(self) -> u64 {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2 => 8,
            Isa::Scalar => 1,
        }
    }
}

/// The loop a probe times: the FMA loop at a width, or `VDPBF16PS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loop {
    Fma(Isa),
    DotBf16,
}

impl Loop {
    /// Runs `reps` repetitions; returns the FLOPs done.
    fn work(self, reps: u64) -> f64 {
        match self {
            Loop::Fma(isa) => fma_work(reps, isa),
            Loop::DotBf16 => dot_bf16_work(reps),
        }
    }

    /// Repetitions of one block, about a millisecond.
    fn block(self) -> u64 {
        match self {
            Loop::Fma(Isa::Scalar) => 50_000,
            _ => 200_000,
        }
    }
}

/// Whether the CPU (and the OS, which must save the ZMM state) runs
/// `VDPBF16PS`.
pub fn has_avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2_fma()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// # Safety
/// The CPU must support AVX-512F and AVX512_BF16 (checked by the caller).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn dot_bf16_block(reps: u64, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    // Pairs of small bf16 values (0.5 and 2⁻²¹): the sums grow slowly and
    // stay normal, so no input or output is a subnormal the unit flushes.
    let a: __m512bh = std::mem::transmute(_mm512_set1_epi32(0x3500_3f00));
    let b: __m512bh = std::mem::transmute(_mm512_set1_epi32(0x3500_3500));
    let mut acc = [_mm512_set1_ps(seed); LANES];
    for _ in 0..reps {
        for x in acc.iter_mut() {
            *x = _mm512_dpbf16_ps(*x, a, b);
        }
    }
    let mut sum = _mm512_setzero_ps();
    for x in acc {
        sum = _mm512_add_ps(sum, x);
    }
    _mm512_reduce_add_ps(sum)
}

/// `reps` repetitions of the `VDPBF16PS` loop; the FLOPs done (each
/// instruction: 32 products and 32 additions).
fn dot_bf16_work(reps: u64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if has_avx512_bf16() {
        // SAFETY: checked just above.
        std::hint::black_box(unsafe { dot_bf16_block(reps, 1.0) });
        return fma_flops(reps, 32);
    }
    let _ = reps;
    0.0
}

/// Runs `reps` repetitions of the FMA loop; returns the FLOPs done.
fn fma_work(reps: u64, isa: Isa) -> f64 {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx512 => {
            // SAFETY: `Isa::here()` detected AVX-512F.
            std::hint::black_box(unsafe { fma_block_avx512(reps, 1.0) });
            return fma_flops(reps, isa.lanes());
        }
        Isa::Avx2 => {
            // SAFETY: `Isa::here()` detected AVX2 and FMA.
            std::hint::black_box(unsafe { fma_block_avx2(reps, 1.0) });
            return fma_flops(reps, isa.lanes());
        }
        Isa::Scalar => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    std::hint::black_box(fma_block_scalar(reps, 1.0));
    fma_flops(reps, 1)
}

/// This thread's CPU time so far.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// One try: `threads` threads running the FMA loop together for `per_try`;
/// its rate is all threads' FLOPs over its wall time.
fn fma_try(threads: usize, probe: Loop, per_try: Duration) -> Try {
    // One block is about a millisecond; blocks run until the time is up.
    let block = probe.block();
    let start = Instant::now();
    let results: Vec<(f64, ThreadTime)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let (wall0, cpu0) = (Instant::now(), thread_cpu_seconds());
                    let mut done = 0.0;
                    while start.elapsed() < per_try {
                        done += probe.work(block);
                    }
                    let cpu_seconds = thread_cpu_seconds() - cpu0;
                    let time = ThreadTime {
                        cpu_seconds,
                        wall_seconds: wall0.elapsed().as_secs_f64(),
                        gflops_per_cpu_second: if cpu_seconds > 0.0 {
                            done / cpu_seconds / 1e9
                        } else {
                            0.0
                        },
                    };
                    (done, time)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let flops: f64 = results.iter().map(|(f, _)| f).sum();
    Try {
        gflops: flops / seconds / 1e9,
        threads: results.into_iter().map(|(_, t)| t).collect(),
    }
}

/// Tries until `want` are clean or `budget` is spent (at least `want`
/// tries either way), then reduces them; `core` as in [`disturbance`].
fn fma_series(
    threads: usize,
    probe: Loop,
    per_try: Duration,
    want: usize,
    budget: Duration,
    core: Option<f64>,
) -> Series {
    let start = Instant::now();
    let mut tries = Vec::new();
    loop {
        tries.push(fma_try(threads, probe, per_try));
        let clean = tries
            .iter()
            .filter(|t| disturbance(t, core).is_none())
            .count();
        if clean >= want || (tries.len() >= want && start.elapsed() >= budget) {
            break;
        }
    }
    reduce(&tries, core)
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

/// Five clean tries of `probe` of 30 ms on one core, then of 50 ms on
/// every core (read against the one-core rate where SMT is off), each
/// series retrying disturbed tries for up to three times as long: the
/// threads, the one-core series and the all-core one.
fn core_and_all(probe: Loop) -> (usize, Series, Series) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let series = |threads: usize, ms: u64, core: Option<f64>| {
        let per_try = Duration::from_millis(ms);
        fma_series(
            threads,
            probe,
            per_try,
            TRIES,
            per_try * 3 * TRIES as u32,
            core,
        )
    };
    let core = series(1, 30, None);
    // With SMT on, the all-core threads share cores by design: each runs
    // at part of one core's rate, and only the CPU-time test applies.
    let smt = crate::system::Root::default().smt_active();
    let full_speed = (smt != Some(true) && !core.disturbed).then_some(core.best);
    let all = if threads > 1 {
        series(threads, 50, full_speed)
    } else {
        core.clone()
    };
    (threads, core, all)
}

/// Clean tries each FMA figure is the best of.
pub const TRIES: usize = 5;

/// Measures the machine now: five clean tries of 30 ms on one core and of
/// 50 ms on every core (about half a second on a quiet host), retrying
/// disturbed tries for up to three times as long.
pub fn measure() -> Peak {
    let start = Instant::now();
    let isa = Isa::here();
    let (threads, core, all) = core_and_all(Loop::Fma(isa));
    // 3 × 32 MiB: past the last-level cache of the machines lcx runs on.
    let stream = stream_gbytes(threads, 8 << 20, 3);
    Peak {
        isa: isa.name(),
        threads,
        gflops_core: core.best,
        gflops: all.best,
        stream_gbytes_per_second: stream,
        tries: all.clean,
        discarded: if threads > 1 {
            core.discarded + all.discarded
        } else {
            core.discarded
        },
        spread: all.spread,
        disturbed: core.disturbed || all.disturbed,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// The bf16 ceiling of a CPU with AVX512_BF16 ([`measure_bf16`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Bf16Peak {
    /// GFLOP/s of one thread and of all threads (a `VDPBF16PS` is 64
    /// FLOPs: 32 products, 32 additions).
    pub gflops_core: f64,
    pub gflops: f64,
    pub threads: usize,
    /// Clean all-core tries, and how far they lay apart.
    pub tries: usize,
    pub spread: f64,
    /// No clean try: a floor rather than the ceiling.
    pub disturbed: bool,
}

/// The `VDPBF16PS` ceiling, by [`measure`]'s rules (five clean tries of
/// 30 ms on one core and of 50 ms on all, disturbed ones retried); `None`
/// where the CPU has no AVX512_BF16 (bf16 then runs as f32 FMAs, whose
/// ceiling is [`measure`]'s).
pub fn measure_bf16() -> Option<Bf16Peak> {
    if !has_avx512_bf16() {
        return None;
    }
    let (threads, core, all) = core_and_all(Loop::DotBf16);
    Some(Bf16Peak {
        gflops_core: core.best,
        gflops: all.best,
        threads,
        tries: all.clean,
        spread: all.spread,
        disturbed: core.disturbed || all.disturbed,
    })
}

/// The highest clock the OS reports for any CPU, in GHz, and where it was
/// read ([`Root::max_clock_ghz`](crate::system::Root::max_clock_ghz)).
pub fn reported_clock_ghz() -> Option<(f64, &'static str)> {
    crate::system::Root::default().max_clock_ghz()
}

/// The most FP32 GFLOP/s `threads` threads could do at `clock_ghz`: FMA
/// units per core (2 on x86-64 cores with AVX2 or AVX-512: server parts
/// with one 512-bit unit make this twice what they can do) × lanes (16, 8,
/// or 1 scalar) × 2 operations per FMA × clock.
pub fn theoretical_gflops(threads: usize, clock_ghz: f64, isa: &str) -> f64 {
    let lanes = match isa {
        "avx512f" => 16.0,
        "avx2-fma" => 8.0,
        _ => 1.0,
    };
    threads as f64 * 2.0 * lanes * 2.0 * clock_ghz
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bf16_ceiling_is_probed_only_where_the_cpu_has_bf16_units() {
        // 64 FLOPs per VDPBF16PS, 12 independent chains a repetition.
        if has_avx512_bf16() {
            assert_eq!(dot_bf16_work(10), (10 * 12 * 64) as f64);
        } else {
            assert_eq!(dot_bf16_work(10), 0.0);
        }
        match measure_bf16() {
            None => assert!(!has_avx512_bf16()),
            Some(p) => {
                assert!(has_avx512_bf16());
                assert!(p.gflops_core > 0.0 && p.gflops > 0.0, "{p:?}");
                assert!(p.tries > 0 || p.disturbed, "{p:?}");
            }
        }
    }

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
        if Isa::here() == Isa::Avx512 {
            // SAFETY: detected just above.
            let v = unsafe { fma_block_avx512(1000, 1.0) };
            assert!((v - 192.0 * x).abs() < 2e-2, "{v} vs {}", 192.0 * x);
        }
    }

    fn try_of(gflops: f64, shares: &[f64]) -> Try {
        Try {
            gflops,
            threads: shares
                .iter()
                .map(|&s| ThreadTime {
                    cpu_seconds: 0.05 * s,
                    wall_seconds: 0.05,
                    gflops_per_cpu_second: gflops / shares.len() as f64 / s,
                })
                .collect(),
        }
    }

    #[test]
    fn a_try_whose_thread_lost_its_core_is_discarded() {
        // The ten probes: one read half the ceiling because another
        // process took a core; another lost 6 %.
        let tries = [
            try_of(178.0, &[1.0, 0.999]),
            try_of(90.0, &[1.0, 0.5]),
            try_of(180.0, &[0.998, 1.0]),
            try_of(168.0, &[0.94, 1.0]),
            try_of(176.0, &[1.0, 1.0]),
        ];
        assert_eq!(disturbance(&tries[0], None), None);
        let why = disturbance(&tries[1], None).unwrap();
        assert!(why.contains("thread 1 had its core 50 %"), "{why}");
        assert!(disturbance(&tries[3], None).is_some());
        let s = reduce(&tries, None);
        assert_eq!(
            (s.best, s.clean, s.discarded, s.disturbed),
            (180.0, 3, 2, false)
        );
        assert!((s.spread - (180.0 / 176.0 - 1.0)).abs() < 1e-12);
        // A disturbed try that reads high is still left out: a thread that
        // lost its core makes the try's rate no ceiling either way.
        let high = [try_of(170.0, &[1.0, 1.0]), try_of(300.0, &[0.6, 1.0])];
        assert_eq!(reduce(&high, None).best, 170.0);
        // Nothing clean: the best disturbed try, flagged.
        let busy = [try_of(63.0, &[0.6, 1.0]), try_of(90.0, &[0.7, 1.0])];
        let s = reduce(&busy, None);
        assert_eq!(
            (s.best, s.clean, s.discarded, s.disturbed),
            (90.0, 0, 2, true)
        );
    }

    #[test]
    fn a_real_try_reports_each_threads_cpu_and_wall_time() {
        let t = fma_try(2, Loop::Fma(Isa::here()), Duration::from_millis(20));
        assert_eq!(t.threads.len(), 2);
        for th in &t.threads {
            assert!(th.gflops_per_cpu_second > 0.0, "{th:?}");
            assert!(th.wall_seconds > 0.0 && th.wall_seconds < 5.0, "{th:?}");
            assert!(
                th.cpu_seconds > 0.0 && th.cpu_seconds <= th.wall_seconds * 1.01,
                "{th:?}"
            );
        }
        assert!(t.gflops > 0.0);
    }

    #[test]
    fn measured_peak_is_positive_and_within_the_theoretical_bound() {
        let peak = measure();
        assert!(peak.gflops_core > 0.0 && peak.gflops >= peak.gflops_core * 0.5);
        assert!(peak.stream_gbytes_per_second > 0.0);
        assert!(peak.seconds < 10.0, "the probe took {} s", peak.seconds);
        assert!(peak.tries <= TRIES && (peak.tries > 0 || peak.disturbed));
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
