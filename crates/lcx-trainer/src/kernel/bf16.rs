//! bf16 mixed-precision GEMMs for lcx's CPU kernel (decision 0028): the
//! first part of training with `run.use_amp = true` on a CPU.
//!
//! The numerics are PyTorch CPU autocast's for a matrix product: both
//! operands rounded from f32 to bf16 (round to nearest, ties to even; NaN
//! kept and made quiet; f32 subnormals to a zero of their sign, which is
//! what the hardware's `VCVTNE2PS2BF16` does to every one of the 2³² f32
//! inputs on the Zen 5 this was written on), products accumulated in f32,
//! an f32 result. The product of two bf16 values (8-bit significands) is
//! exact in f32 unless it underflows, so the kernels differ only in the
//! order they add the products in:
//!
//! - [`Bf16Kernel::Scalar`] and [`Bf16Kernel::Avx2`] add them in k order,
//!   one FMA chain per output, and give the bits of [`gemm_reference`];
//! - [`Bf16Kernel::Avx512Bf16`] runs `VDPBF16PS`, which adds each pair's
//!   odd product and then its even one (each rounded), treats bf16
//!   subnormals as zero and flushes subnormal results: within f32
//!   summation-order tolerance of the reference, and the same bits on any
//!   tiling and thread count.
//!
//! Each output is computed whole by one task, so no kernel's result
//! depends on the thread count.
//!
//! `B` (the `k × n` right operand) is packed once into the layout
//! `VDPBF16PS` wants, pairs of consecutive k for each column ([`PackedB`]),
//! which the AVX2 kernel reads too: one 32-bit word holds `B[2q][j]` in its
//! low half and `B[2q + 1][j]` in its high half, and a shift or an AND
//! turns a register of words into eight f32 of either row. The weights,
//! the big operand of every product of a training step, are so read at two
//! bytes an element. `A` is packed per kernel ([`PackedA`]).
//!
//! The training step's three products of a layer (see
//! `crate::kernel::native_train`) are forward `x·Wᵀ` (`B` is `W` read
//! transposed), weight gradient `gᵀ·x` (`A` is `g` read transposed) and
//! input gradient `g·W`; a [`MatRef`] reads a row-major matrix either way.

use std::sync::OnceLock;

use super::bf16_layout::{pair, Out, AVX2_CHUNK, AVX512_CHUNK, AVX512_GROUP};
pub use super::bf16_layout::{round_bits, MatRef, PackedB, Update, PANEL};

/// A bfloat16 value: the top 16 bits of an f32 (sign, 8-bit exponent, 7
/// stored significand bits).
///
/// Not the `half` crate's `bf16`: its `from_f32` rounds f32 subnormals to
/// bf16 subnormals where `VCVTNE2PS2BF16` makes them zero (16,711,678 of
/// the 2³² inputs differ), and lcx's packing must give the bits the
/// hardware gives, whichever path packed an operand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Bf16(u16);

impl Bf16 {
    pub const fn from_bits(bits: u16) -> Self {
        Bf16(bits)
    }

    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// `x` rounded as `VCVTNE2PS2BF16` rounds it (see [`round_bits`]).
    #[inline]
    pub fn from_f32(x: f32) -> Self {
        Bf16(round_bits(x.to_bits()))
    }

    /// The exact f32 of this value.
    #[inline]
    pub fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}

/// `x` rounded to bf16 and widened back: the f32 the kernels multiply.
#[inline(always)]
fn round_f32(x: f32) -> f32 {
    f32::from_bits(u32::from(round_bits(x.to_bits())) << 16)
}

/// Which bf16 GEMM runs: the widest the CPU has unless `LCX_NATIVE_KERNEL`
/// holds it to a narrower one (see [`Bf16Kernel::selected`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bf16Kernel {
    /// Plain Rust, any CPU: the reference's arithmetic over packed
    /// operands.
    Scalar,
    /// AVX2 and FMA: bf16 widened to f32 in registers, 8-wide f32 FMAs.
    Avx2,
    /// AVX-512F and AVX512_BF16: `VDPBF16PS`, 32 products per instruction.
    Avx512Bf16,
}

impl Bf16Kernel {
    /// Every kernel, narrowest first.
    pub const ALL: [Bf16Kernel; 3] = [Bf16Kernel::Scalar, Bf16Kernel::Avx2, Bf16Kernel::Avx512Bf16];

    /// The name `LCX_NATIVE_KERNEL` takes and a report prints.
    pub fn name(self) -> &'static str {
        match self {
            Bf16Kernel::Scalar => "scalar",
            Bf16Kernel::Avx2 => "avx2",
            Bf16Kernel::Avx512Bf16 => "avx512-bf16",
        }
    }

    /// The kernel's name in a run's `training_kernel` field (after
    /// `lcx `): `bf16-avx512`, `bf16-avx2` or `bf16-scalar`.
    pub fn training_name(self) -> &'static str {
        match self {
            Bf16Kernel::Scalar => "bf16-scalar",
            Bf16Kernel::Avx2 => "bf16-avx2",
            Bf16Kernel::Avx512Bf16 => "bf16-avx512",
        }
    }

    /// `None` where this kernel runs here, else what the CPU (or the
    /// operating system, which must save the ZMM registers) lacks.
    /// `is_x86_feature_detected!` reports an AVX-512 feature only where
    /// XGETBV says the OS saves the opmask and ZMM state, so the CPUID bit
    /// (leaf 7, subleaf 1, EAX bit 5 for AVX512_BF16) alone never selects
    /// a kernel that would fault.
    pub fn missing(self) -> Option<&'static str> {
        match self {
            Bf16Kernel::Scalar => None,
            #[cfg(target_arch = "x86_64")]
            Bf16Kernel::Avx2 => (!has_avx2_fma()).then_some("AVX2 and FMA"),
            #[cfg(target_arch = "x86_64")]
            Bf16Kernel::Avx512Bf16 => (!(has_avx2_fma()
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bf16")))
            .then_some("AVX-512F and AVX512_BF16 (with the OS saving ZMM state)"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => Some("an x86-64 CPU"),
        }
    }

    pub fn runs_here(self) -> bool {
        self.missing().is_none()
    }

    /// Panics unless this kernel runs here: its packers and GEMMs use its
    /// instructions, and a pack built elsewhere could carry any kernel.
    fn assert_runs_here(self) {
        assert!(
            self.runs_here(),
            "the {} kernel does not run here",
            self.name()
        );
    }

    /// The widest kernel this CPU runs.
    pub fn widest_here() -> Bf16Kernel {
        Self::choose(None, Self::runs_here).unwrap_or(Bf16Kernel::Scalar)
    }

    /// The kernel bf16 GEMMs use in this process, read once: the widest
    /// the CPU runs, held to a narrower one by `LCX_NATIVE_KERNEL=scalar`
    /// or `=avx2`; `=avx512-bf16` asks for the widest (the default);
    /// `None` for `=off`, which turns lcx's kernels off (libtorch runs).
    /// A kernel asked for that the CPU lacks gives the widest below it
    /// that it has, never one that would fault. The f32 kernel
    /// (`crate::kernel::native`) reads the same variable: `avx2` holds it
    /// to AVX2 as well, `off` turns it off, and the bf16 names leave it at
    /// its widest.
    pub fn selected() -> Option<Bf16Kernel> {
        static CHOICE: OnceLock<Option<Bf16Kernel>> = OnceLock::new();
        *CHOICE.get_or_init(|| {
            let env = std::env::var("LCX_NATIVE_KERNEL").ok();
            Self::choose(env.as_deref(), Self::runs_here)
        })
    }

    /// [`Bf16Kernel::selected`]'s rule for the variable's value `env`,
    /// with `runs` saying which kernels the CPU has.
    fn choose(env: Option<&str>, runs: impl Fn(Bf16Kernel) -> bool) -> Option<Bf16Kernel> {
        let ceiling = match env {
            Some("off") => return None,
            Some("scalar") => Bf16Kernel::Scalar,
            Some("avx2") => Bf16Kernel::Avx2,
            _ => Bf16Kernel::Avx512Bf16,
        };
        Self::ALL
            .into_iter()
            .rev()
            .find(|&k| k <= ceiling && runs(k))
            .or(Some(Bf16Kernel::Scalar))
    }
}

#[cfg(target_arch = "x86_64")]
fn has_avx2_fma() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

impl PackedB {
    /// `b` packed with `kernel`'s instructions (which must run here). The
    /// layout is the same for every kernel, and so are the bits: any
    /// kernel reads a `B` any kernel packed.
    pub fn pack(kernel: Bf16Kernel, b: MatRef<'_>) -> Self {
        let mut packed = PackedB::default();
        packed.repack(kernel, b);
        packed
    }

    /// Packs `b` with `kernel`'s instructions, reusing the buffer (a
    /// training step packs the same shapes every step).
    pub fn repack(&mut self, kernel: Bf16Kernel, b: MatRef<'_>) {
        kernel.assert_runs_here();
        let (k, n) = (b.rows(), b.cols());
        self.k = k;
        self.n = n;
        // Every packer writes every word, padding included: the buffer is
        // only sized, not zeroed (a memset of 1 MB cost about as much as
        // packing a 512 × 512 `Wᵀ`).
        self.words
            .resize(n.div_ceil(PANEL) * k.div_ceil(2) * PANEL, 0);
        match kernel {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX-512F and AVX512_BF16 (asserted
            // above); `words` has the size this layout needs.
            Bf16Kernel::Avx512Bf16 => unsafe { super::bf16_x86::pack_b_avx512(b, &mut self.words) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX2 (asserted above); as above.
            Bf16Kernel::Avx2 => unsafe { super::bf16_x86::pack_b_avx2(b, &mut self.words) },
            _ => pack_b_portable(b, &mut self.words),
        }
    }
}

/// [`PackedB::repack`]'s layout in plain Rust (any CPU; the AVX-512 host's
/// packing must give the same words, which a test checks).
pub(super) fn pack_b_portable(b: MatRef<'_>, words: &mut [u32]) {
    let (k, n) = (b.rows(), b.cols());
    let kq = k.div_ceil(2);
    let at = |kk: usize, j: usize| if kk < k { b.at(kk, j) } else { 0.0 };
    for (p, panel) in words.chunks_exact_mut(kq * PANEL).enumerate() {
        for (q, row) in panel.chunks_exact_mut(PANEL).enumerate() {
            for (jj, w) in row.iter_mut().enumerate() {
                let j = p * PANEL + jj;
                *w = if j < n {
                    pair(at(2 * q, j), at(2 * q + 1, j))
                } else {
                    0
                };
            }
        }
    }
}

/// `A` (`m × k`) rounded to bf16 in the form one kernel reads, row by row.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedA {
    kernel: Bf16Kernel,
    m: usize,
    k: usize,
    form: FormA,
}

#[derive(Clone, Debug, PartialEq)]
enum FormA {
    /// Scalar and AVX-512: row `r` is `ceil(k / 2)` words of two bf16
    /// (`A[r][2q]` low, `A[r][2q + 1]` high, zero past `k`), which
    /// `VDPBF16PS` takes broadcast as one 32-bit element.
    Pairs(Vec<u32>),
    /// AVX2: row `r` is `k` f32, each exactly a bf16 value. The kernel
    /// broadcasts every element of `A` on its own, and broadcasting an
    /// f32 from memory is one load where widening a bf16 first is three
    /// more instructions per broadcast.
    Widened(Vec<f32>),
}

impl PackedA {
    /// `a` packed for `kernel`, which must run here (its packing may use
    /// its instructions).
    pub fn pack(kernel: Bf16Kernel, a: MatRef<'_>) -> Self {
        let mut packed = PackedA {
            kernel,
            m: 0,
            k: 0,
            form: FormA::Pairs(Vec::new()),
        };
        packed.repack(kernel, a);
        packed
    }

    /// Packs `a` for `kernel`, reusing the buffer where the form is the same.
    pub fn repack(&mut self, kernel: Bf16Kernel, a: MatRef<'_>) {
        kernel.assert_runs_here();
        let (m, k) = (a.rows(), a.cols());
        self.kernel = kernel;
        self.m = m;
        self.k = k;
        match kernel {
            Bf16Kernel::Avx2 => {
                let mut v = match std::mem::replace(&mut self.form, FormA::Pairs(Vec::new())) {
                    FormA::Widened(v) => v,
                    FormA::Pairs(_) => Vec::new(),
                };
                // Every packer writes every element: sized, not zeroed.
                v.resize(m * k, 0.0);
                pack_a_widened(a, &mut v);
                self.form = FormA::Widened(v);
            }
            Bf16Kernel::Scalar | Bf16Kernel::Avx512Bf16 => {
                let mut v = match std::mem::replace(&mut self.form, FormA::Pairs(Vec::new())) {
                    FormA::Pairs(v) => v,
                    FormA::Widened(_) => Vec::new(),
                };
                v.resize(m * k.div_ceil(2), 0);
                pack_a_pairs(kernel, a, &mut v);
                self.form = FormA::Pairs(v);
            }
        }
    }

    pub fn kernel(&self) -> Bf16Kernel {
        self.kernel
    }

    pub fn m(&self) -> usize {
        self.m
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// `A[r][kk]` as the kernels read it.
    fn at(&self, r: usize, kk: usize) -> f32 {
        match &self.form {
            FormA::Pairs(v) => {
                let word = v[r * self.k.div_ceil(2) + kk / 2];
                f32::from_bits((word >> (16 * (kk % 2))) << 16)
            }
            FormA::Widened(v) => v[r * self.k + kk],
        }
    }
}

/// `A`'s rows as pairs of bf16 (see [`FormA::Pairs`]).
fn pack_a_pairs(kernel: Bf16Kernel, a: MatRef<'_>, words: &mut [u32]) {
    let (m, k) = (a.rows(), a.cols());
    let kq = k.div_ceil(2);
    #[cfg(target_arch = "x86_64")]
    if kernel == Bf16Kernel::Avx512Bf16 {
        if a.transposed {
            // SAFETY: this kernel runs here (`PackedA::repack` asserted
            // it): AVX-512F and AVX512_BF16. `words` is `m · ceil(k / 2)`
            // words and the stored matrix `k × m` floats.
            unsafe { super::bf16_x86::pairs_transposed_avx512(a.data, k, m, words) };
        } else {
            for (r, row) in words.chunks_exact_mut(kq.max(1)).enumerate() {
                // SAFETY: as above; `row` is `ceil(k / 2)` words.
                unsafe { super::bf16_x86::pairs_avx512(&a.data[r * k..(r + 1) * k], row) };
            }
        }
        return;
    }
    // The scalar kernel's packing, and any kernel's off x86-64.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = kernel;
    if a.transposed {
        // `A[r][kk]` is the stored `S[kk][r]`: walk the stored rows two at
        // a time (both read in order) and write one word per output row.
        let s = a.data;
        for q in 0..kq {
            let even = &s[2 * q * m..(2 * q + 1) * m];
            let odd = if 2 * q + 1 < k {
                &s[(2 * q + 1) * m..(2 * q + 2) * m]
            } else {
                &[][..]
            };
            for r in 0..m {
                words[r * kq + q] = pair(even[r], odd.get(r).copied().unwrap_or(0.0));
            }
        }
        return;
    }
    for (row, src) in words
        .chunks_exact_mut(kq.max(1))
        .zip(a.data.chunks_exact(k.max(1)))
    {
        let mut pairs = src.chunks_exact(2);
        for (w, p) in row.iter_mut().zip(&mut pairs) {
            *w = pair(p[0], p[1]);
        }
        if let [last] = pairs.remainder() {
            row[kq - 1] = pair(*last, 0.0);
        }
    }
}

/// `A`'s rows as f32 holding bf16 values (see [`FormA::Widened`]).
fn pack_a_widened(a: MatRef<'_>, v: &mut [f32]) {
    let (m, k) = (a.rows(), a.cols());
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: only the AVX2 kernel's packing comes here, and
        // `PackedA::repack` asserted that it runs here; `v` holds `m × k`
        // floats, as does the stored matrix.
        unsafe {
            if a.transposed {
                super::bf16_x86::widened_transposed_avx2(a.data, k, m, v);
            } else {
                super::bf16_x86::round_into_avx2(a.data, v);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (i, x) in v.iter_mut().enumerate() {
        *x = round_f32(a.at(i / k, i % k));
    }
}

/// `C = A·B` (or `C += A·B`, see [`Update`]) with `A` and `B` rounded to
/// bf16 and the products summed in f32, on `a.kernel()`; `C` is `m × n`,
/// row-major. The rows or the panels of 16 columns are shared out over
/// `threads` tasks on the current rayon pool; every output is computed by
/// one task, in the same order whatever the split.
pub fn gemm(a: &PackedA, b: &PackedB, c: &mut [f32], update: Update, threads: usize) {
    let (m, k, n) = (a.m, a.k, b.n);
    assert_eq!(b.k, k, "A is {m} × {k} but B is {} × {n}", b.k);
    assert_eq!(c.len(), m * n, "C is {m} × {n}");
    let kernel = a.kernel;
    // The SIMD kernels must never run on a CPU without their instructions
    // (a pack built elsewhere could carry any kernel).
    kernel.assert_runs_here();
    if m == 0 || n == 0 {
        return;
    }
    let out = Out {
        c: c.as_mut_ptr(),
        ldc: n,
    };
    let (rows_per_unit, panels_per_unit) = match kernel {
        Bf16Kernel::Scalar => (1, 1),
        Bf16Kernel::Avx2 => (AVX2_CHUNK, 1),
        Bf16Kernel::Avx512Bf16 => (AVX512_CHUNK, AVX512_GROUP),
    };
    let panels = b.panels();
    let row_units = m.div_ceil(rows_per_unit);
    let panel_units = panels.div_ceil(panels_per_unit);
    let tasks = threads.max(1).min(row_units.max(panel_units));
    if tasks <= 1 {
        // SAFETY: `kernel` runs here (asserted), `out.c` holds `m × n`
        // floats (asserted), and the ranges are the whole product.
        unsafe { block(a, b, &out, update, 0..m, 0..panels) };
        return;
    }
    // Split whichever way has more units: each task then reads all of the
    // other operand.
    let by_rows = row_units >= panel_units;
    let out = &out;
    rayon::scope(|s| {
        for t in 0..tasks {
            let (rows, cols) = if by_rows {
                let r = |t: usize| (row_units * t / tasks * rows_per_unit).min(m);
                (r(t)..r(t + 1), 0..panels)
            } else {
                let p = |t: usize| (panel_units * t / tasks * panels_per_unit).min(panels);
                (0..m, p(t)..p(t + 1))
            };
            s.spawn(move |_| {
                // SAFETY: as above; the tasks' row or panel ranges are
                // disjoint, so no two write the same element of `C`.
                unsafe { block(a, b, out, update, rows, cols) }
            });
        }
    });
}

/// Packs `a` and `b` for `kernel` and runs [`gemm`]: the whole product
/// from f32 operands, packing included.
pub fn gemm_f32(
    kernel: Bf16Kernel,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    update: Update,
    threads: usize,
) {
    gemm(
        &PackedA::pack(kernel, a),
        &PackedB::pack(kernel, b),
        c,
        update,
        threads,
    )
}

/// The definition: `C (+)= round(A)·round(B)`, each output one FMA chain
/// over k in order from zero, then added to `C` for [`Update::Accumulate`].
pub fn gemm_reference(a: MatRef<'_>, b: MatRef<'_>, c: &mut [f32], update: Update) {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    assert_eq!(b.rows(), k);
    assert_eq!(c.len(), m * n);
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for kk in 0..k {
                acc = round_f32(a.at(i, kk)).mul_add(round_f32(b.at(kk, j)), acc);
            }
            let dst = &mut c[i * n + j];
            *dst = match update {
                Update::Overwrite => acc,
                Update::Accumulate => *dst + acc,
            };
        }
    }
}

/// Rows `rows` by panels `panels` of `C`, on `a.kernel`.
///
/// # Safety
/// `a.kernel` runs here; `out.c` holds `a.m × b.n` floats, no other task
/// writes this block, and the ranges lie within the product.
unsafe fn block(
    a: &PackedA,
    b: &PackedB,
    out: &Out,
    update: Update,
    rows: std::ops::Range<usize>,
    panels: std::ops::Range<usize>,
) {
    match (&a.form, a.kernel) {
        #[cfg(target_arch = "x86_64")]
        (FormA::Widened(v), Bf16Kernel::Avx2) => {
            super::bf16_x86::block_avx2(v, a.k, b, out, update, rows, panels)
        }
        #[cfg(target_arch = "x86_64")]
        (FormA::Pairs(v), Bf16Kernel::Avx512Bf16) => {
            super::bf16_x86::block_avx512(v, a.k, b, out, update, rows, panels)
        }
        _ => block_scalar(a, b, out, update, rows, panels),
    }
}

/// The scalar kernel: [`gemm_reference`]'s arithmetic on the packed
/// operands.
///
/// # Safety
/// As [`block`].
unsafe fn block_scalar(
    a: &PackedA,
    b: &PackedB,
    out: &Out,
    update: Update,
    rows: std::ops::Range<usize>,
    panels: std::ops::Range<usize>,
) {
    let n = b.n;
    for i in rows {
        for j in panels.start * PANEL..(panels.end * PANEL).min(n) {
            let mut acc = 0.0f32;
            for kk in 0..a.k {
                acc = a.at(i, kk).mul_add(b.at(kk, j), acc);
            }
            let dst = out.c.add(i * out.ldc + j);
            *dst = match update {
                Update::Overwrite => acc,
                Update::Accumulate => *dst + acc,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known roundings: ties to even both ways, the carry into the next
    /// binade and into infinity, subnormals to a signed zero (as the
    /// hardware does), infinities kept, NaN made quiet with its sign and
    /// top payload kept.
    #[test]
    fn rounding_matches_a_table_of_known_bf16_values() {
        let table: [(u32, u16, &str); 22] = [
            (0x0000_0000, 0x0000, "+0"),
            (0x8000_0000, 0x8000, "-0"),
            (0x3F80_0000, 0x3F80, "1"),
            (0xBF80_0000, 0xBF80, "-1"),
            (0x3F80_8000, 0x3F80, "1 + half an ulp: tie to the even 1"),
            (0x3F81_8000, 0x3F82, "tie with an odd lsb: up to even"),
            (0x3F80_8001, 0x3F81, "just above the tie: up"),
            (0x3F80_7FFF, 0x3F80, "just below the tie: down"),
            (0x3FFF_FFFF, 0x4000, "carry into the next binade"),
            (0x7F7F_FFFF, 0x7F80, "largest f32: rounds up to +inf"),
            (0x7F7F_7FFF, 0x7F7F, "largest bf16 stays"),
            (0x7F80_0000, 0x7F80, "+inf"),
            (0xFF80_0000, 0xFF80, "-inf"),
            (0x7FC0_0000, 0x7FC0, "quiet NaN"),
            (0x7F80_0001, 0x7FC0, "signalling NaN, low payload: quieted"),
            (0x7FA0_0000, 0x7FE0, "signalling NaN, high payload kept"),
            (
                0xFF81_2345,
                0xFFC1,
                "negative NaN: sign and top payload kept",
            ),
            (0x0000_0001, 0x0000, "smallest subnormal: +0"),
            (0x807F_FFFF, 0x8000, "largest negative subnormal: -0"),
            (0x0040_0000, 0x0000, "subnormal that would round to one: +0"),
            (0x0080_0000, 0x0080, "smallest normal stays"),
            (0x0080_8000, 0x0080, "smallest normal + a tie: even"),
        ];
        for (f, want, what) in table {
            let got = Bf16::from_f32(f32::from_bits(f)).to_bits();
            assert_eq!(
                got, want,
                "{what}: {f:#010x} gave {got:#06x}, want {want:#06x}"
            );
        }
        assert_eq!(Bf16::from_bits(0x3F80).to_f32(), 1.0);
        assert_eq!(Bf16::from_f32(-2.5).to_f32(), -2.5);
    }

    /// On a CPU with AVX512_BF16, the rounding is the hardware's to the
    /// bit, over a sweep of every exponent with varied significands (the
    /// whole 2³² range was checked by hand, in a release build).
    #[test]
    fn rounding_is_the_hardware_s() {
        if !Bf16Kernel::Avx512Bf16.runs_here() {
            eprintln!("rounding_is_the_hardware_s: SKIPPED, no AVX512_BF16 here");
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let inputs: Vec<f32> = (0..1u32 << 20)
                .map(|i| f32::from_bits(i.wrapping_mul(0x9E37_79B9) ^ (i << 12)))
                .chain([f32::NAN, -f32::NAN, f32::INFINITY, f32::MIN_POSITIVE])
                .collect();
            let hardware = crate::kernel::bf16_x86::tests::hardware_rounding(&inputs);
            for (x, h) in inputs.iter().zip(hardware) {
                assert_eq!(Bf16::from_f32(*x).to_bits(), h, "{:#010x}", x.to_bits());
            }
        }
    }

    #[test]
    fn the_environment_picks_a_kernel_the_cpu_has() {
        use Bf16Kernel::*;
        let all = |_: Bf16Kernel| true;
        let avx2_host = |k: Bf16Kernel| k <= Avx2;
        let bare = |k: Bf16Kernel| k == Scalar;
        assert_eq!(Bf16Kernel::choose(None, all), Some(Avx512Bf16));
        assert_eq!(Bf16Kernel::choose(Some("avx2"), all), Some(Avx2));
        assert_eq!(Bf16Kernel::choose(Some("scalar"), all), Some(Scalar));
        assert_eq!(Bf16Kernel::choose(Some("off"), all), None);
        assert_eq!(
            Bf16Kernel::choose(Some("avx512-bf16"), avx2_host),
            Some(Avx2)
        );
        assert_eq!(Bf16Kernel::choose(None, avx2_host), Some(Avx2));
        assert_eq!(Bf16Kernel::choose(Some("avx2"), bare), Some(Scalar));
        assert!(Bf16Kernel::widest_here().runs_here());
        if let Some(k) = Bf16Kernel::selected() {
            assert!(k.runs_here());
        }
    }

    /// Values with a spread of magnitudes and signs, some not exact in
    /// bf16, a few zeros.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                if i % 97 == 5 {
                    0.0
                } else {
                    ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
                }
            })
            .collect()
    }

    /// The shapes: K odd (297) and even, rows not a multiple of the tile
    /// height or chunk, one row, n = 22 (a partial panel) and 512; the
    /// three layouts the training step needs (`x·Wᵀ`, `gᵀ·x`, `g·W`) and
    /// the fourth.
    fn shapes() -> Vec<(usize, usize, usize)> {
        vec![
            (1, 297, 22),
            (1, 297, 512),
            (37, 297, 22),
            (37, 297, 512),
            (71, 512, 22),
            (13, 22, 512),
            (9, 1, 5),
            (70, 3, 40),
        ]
    }

    /// `m × k` `A` and `k × n` `B`, each stored as the layout reads it.
    struct Case {
        m: usize,
        k: usize,
        n: usize,
        a: Vec<f32>,
        b: Vec<f32>,
        ta: bool,
        tb: bool,
    }

    impl Case {
        fn new(m: usize, k: usize, n: usize, ta: bool, tb: bool) -> Self {
            Case {
                m,
                k,
                n,
                a: values(m * k, (m * 31 + k) as u64),
                b: values(k * n, (k * 17 + n) as u64),
                ta,
                tb,
            }
        }

        fn a(&self) -> MatRef<'_> {
            if self.ta {
                MatRef::new(&self.a, self.k, self.m).t()
            } else {
                MatRef::new(&self.a, self.m, self.k)
            }
        }

        fn b(&self) -> MatRef<'_> {
            if self.tb {
                MatRef::new(&self.b, self.n, self.k).t()
            } else {
                MatRef::new(&self.b, self.k, self.n)
            }
        }

        /// A start for `C` that accumulation adds onto.
        fn c0(&self) -> Vec<f32> {
            values(self.m * self.n, 7)
        }
    }

    fn cases() -> impl Iterator<Item = Case> {
        shapes().into_iter().flat_map(|(m, k, n)| {
            [(false, true), (true, false), (false, false), (true, true)]
                .into_iter()
                .map(move |(ta, tb)| Case::new(m, k, n, ta, tb))
        })
    }

    fn runnable(test: &str) -> Vec<Bf16Kernel> {
        Bf16Kernel::ALL
            .into_iter()
            .filter(|k| match k.missing() {
                None => true,
                Some(why) => {
                    eprintln!("{test}: {} SKIPPED, the CPU lacks {why}", k.name());
                    false
                }
            })
            .collect()
    }

    /// Every kernel this CPU runs against the reference, on every shape
    /// and layout, overwriting and accumulating: the scalar and AVX2
    /// kernels to the bit (the same FMA chain in k order), the AVX-512
    /// kernel within the bound of a different summation order (both sum
    /// the same exact products), and to the bit with its own order's
    /// model. Each on 1 and 2 threads, with the same bits.
    #[test]
    fn every_kernel_here_matches_the_reference() {
        for kernel in runnable("every_kernel_here_matches_the_reference") {
            for case in cases() {
                let (m, k, n) = (case.m, case.k, case.n);
                let what = format!(
                    "{} {m}×{k}×{n} ta {} tb {}",
                    kernel.name(),
                    case.ta,
                    case.tb
                );
                for update in [Update::Overwrite, Update::Accumulate] {
                    let mut want = case.c0();
                    gemm_reference(case.a(), case.b(), &mut want, update);
                    let mut by_threads = Vec::new();
                    for threads in [1, 2] {
                        let mut got = case.c0();
                        gemm_f32(kernel, case.a(), case.b(), &mut got, update, threads);
                        by_threads.push(got);
                    }
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&by_threads[0]),
                        bits(&by_threads[1]),
                        "{what}: 1 and 2 threads differ"
                    );
                    let got = &by_threads[0];
                    if kernel == Bf16Kernel::Avx512Bf16 {
                        let mut model = case.c0();
                        pairwise_model(case.a(), case.b(), &mut model, update);
                        assert_eq!(bits(got), bits(&model), "{what} {update:?}: not its model");
                        let c0 = case.c0();
                        for i in 0..m {
                            for j in 0..n {
                                // Σ|products|: each order's error is at
                                // most k ulps of it.
                                let magnitude: f32 = (0..k)
                                    .map(|kk| {
                                        (round_f32(case.a().at(i, kk))
                                            * round_f32(case.b().at(kk, j)))
                                        .abs()
                                    })
                                    .sum::<f32>()
                                    + match update {
                                        Update::Overwrite => 0.0,
                                        Update::Accumulate => c0[i * n + j].abs(),
                                    };
                                let tolerance = 2.0 * (k + 1) as f32 * f32::EPSILON * magnitude;
                                let (g, w) = (got[i * n + j], want[i * n + j]);
                                assert!(
                                    (g - w).abs() <= tolerance,
                                    "{what} {update:?} ({i}, {j}): {g} vs {w} (± {tolerance})"
                                );
                            }
                        }
                    } else {
                        assert_eq!(bits(got), bits(&want), "{what} {update:?}");
                    }
                }
            }
        }
    }

    /// `VDPBF16PS`'s order: per pair of k, the odd product added first,
    /// then the even one, each rounded (the products are exact: these
    /// values neither underflow nor overflow).
    fn pairwise_model(a: MatRef<'_>, b: MatRef<'_>, c: &mut [f32], update: Update) {
        let (m, k, n) = (a.rows(), a.cols(), b.cols());
        let at = |x: &MatRef<'_>, r: usize, col: usize, len: usize| {
            if col < len {
                round_f32(x.at(r, col))
            } else {
                0.0
            }
        };
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f32;
                for q in 0..k.div_ceil(2) {
                    let (e, o) = (2 * q, 2 * q + 1);
                    let odd = at(&a, i, o, k) * if o < k { round_f32(b.at(o, j)) } else { 0.0 };
                    acc += odd;
                    acc += at(&a, i, e, k) * round_f32(b.at(e, j));
                }
                let dst = &mut c[i * n + j];
                *dst = match update {
                    Update::Overwrite => acc,
                    Update::Accumulate => *dst + acc,
                };
            }
        }
    }

    /// Every packing path gives the portable layout's words: the AVX-512
    /// packer where it runs, both orientations, odd and even k, partial
    /// panels.
    #[test]
    fn packings_match_their_definitions() {
        for case in cases() {
            let b = case.b();
            for kernel in runnable("packings_match_their_definitions") {
                let packed = PackedB::pack(kernel, b);
                let mut want = vec![0u32; packed.words.len()];
                pack_b_portable(b, &mut want);
                let what = format!("{} {}×{} tb {}", kernel.name(), case.k, case.n, case.tb);
                assert_eq!(packed.words, want, "{what}");
                // Repacked over a buffer of the same size full of NaN
                // words: every word is written again, padding included.
                let nan = vec![f32::NAN; case.k * case.n];
                let mut reused = PackedB::pack(kernel, MatRef::new(&nan, case.k, case.n));
                reused.repack(kernel, b);
                assert_eq!(reused, packed, "{what}: repacked");
                for kk in 0..case.k {
                    for j in 0..case.n {
                        assert_eq!(packed.at(kk, j), round_f32(b.at(kk, j)), "{what}");
                    }
                }
                let a = PackedA::pack(kernel, case.a());
                let nan = vec![f32::NAN; case.m * case.k];
                let mut reused = PackedA::pack(kernel, MatRef::new(&nan, case.m, case.k));
                reused.repack(kernel, case.a());
                assert_eq!(
                    reused.form,
                    a.form,
                    "{} ta {}: repacked",
                    kernel.name(),
                    case.ta
                );
                for r in 0..case.m {
                    for kk in 0..case.k {
                        assert_eq!(
                            a.at(r, kk).to_bits(),
                            round_f32(case.a().at(r, kk)).to_bits(),
                            "{} ta {}",
                            kernel.name(),
                            case.ta
                        );
                    }
                }
            }
        }
    }

    /// Every packer (each kernel's, both orientations, `A` and `B`)
    /// rounds special values as [`round_bits`] does: the vector paths
    /// (AVX2's integer rounding, the hardware's conversion) included.
    #[test]
    fn every_packer_rounds_special_values_like_the_definition() {
        let special = [
            0x0000_0000u32,
            0x8000_0000,
            0x3F80_8000,
            0x3F81_8000,
            0x3F80_7FFF,
            0x7F7F_FFFF,
            0x7F80_0000,
            0xFF80_0000,
            0x7FC0_0000,
            0x7F80_0001,
            0xFF81_2345,
            0x0000_0001,
            0x807F_FFFF,
            0x0080_0000,
            0x0080_8000,
        ];
        let (rows, cols) = (35, 41);
        let v: Vec<f32> = (0..rows * cols)
            .map(|i| {
                let bits = if i % 3 == 0 {
                    special[i / 3 % special.len()]
                } else {
                    (i as u32).wrapping_mul(0x9E37_79B9)
                };
                f32::from_bits(bits)
            })
            .collect();
        let stored = MatRef::new(&v, rows, cols);
        for kernel in runnable("every_packer_rounds_special_values_like_the_definition") {
            for m in [stored, stored.t()] {
                let a = PackedA::pack(kernel, m);
                let b = PackedB::pack(kernel, m);
                for r in 0..m.rows() {
                    for c in 0..m.cols() {
                        let want = round_f32(m.at(r, c)).to_bits();
                        let what = format!(
                            "{} ({r}, {c}) of {:#010x}",
                            kernel.name(),
                            m.at(r, c).to_bits()
                        );
                        assert_eq!(a.at(r, c).to_bits(), want, "A {what}");
                        assert_eq!(b.at(r, c).to_bits(), want, "B {what}");
                    }
                }
            }
        }
    }

    /// Inputs that are not finite come through as the definition says on
    /// the kernels that sum in k order, and as NaN or infinity (not a
    /// finite number) on every kernel.
    #[test]
    fn non_finite_inputs_stay_non_finite() {
        let (m, k, n) = (9, 33, 20);
        let mut a = values(m * k, 3);
        let b = values(k * n, 4);
        a[5] = f32::NAN;
        a[k + 2] = f32::INFINITY;
        for kernel in runnable("non_finite_inputs_stay_non_finite") {
            let mut got = vec![0.0; m * n];
            let (am, bm) = (MatRef::new(&a, m, k), MatRef::new(&b, k, n));
            gemm_f32(kernel, am, bm, &mut got, Update::Overwrite, 1);
            let mut want = vec![0.0; m * n];
            gemm_reference(am, bm, &mut want, Update::Overwrite);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.is_finite(), w.is_finite(), "{} {i}", kernel.name());
                assert_eq!(g.is_nan(), w.is_nan(), "{} {i}", kernel.name());
            }
        }
    }
}
