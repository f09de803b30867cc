//! lcx's own CPU kernel for the MLP's dense layers: every CPU traversal
//! forward, and the GEMMs of `crate::kernel::native_train`'s training steps.
//!
//! Traversals ask the networks about one info state (recursive scheduler)
//! or a few dozen (interleaved scheduler) at a time. libtorch hands each
//! such forward to MKL, which re-packs all 2.7 MB of weights into its
//! blocked layout on every call (`sgemm_scopy_*` was about a third of the
//! traversal's libtorch time in `perf`) and, at batch 1, runs a
//! matrix-vector product that is slow on this kind of CPU. Here the weights
//! are packed once, when a traversal phase starts, into panels of 16
//! output columns stored k-major, and a 6×16 register-blocked AVX2/FMA
//! micro-kernel (12 accumulators, two weight loads and six broadcasts per
//! 12 FMAs) walks each panel for every block of up to six rows. The panel
//! (K×16 floats, 32 KB at K = 512) stays in L1/L2 across the row blocks.
//! Where the CPU has AVX-512F, an 8×48 micro-kernel ([`micro512`]: three
//! panels at once, one 16-lane register per panel and row) does the same
//! arithmetic at twice the width (see [`wide`]).
//!
//! Every output element is one FMA chain over k = 0..K in order, whatever
//! the batch size or the row's place in the batch, so a row gives the same
//! bits alone or in any batch: the recursive and interleaved schedulers see
//! identical network outputs. Against libtorch the results agree up to
//! float summation order.
//!
//! A [`NativeMlp`] exists only where it computes the eager network: CPU,
//! f32, ReLU, not traced, and a CPU with AVX2 and FMA.

use std::marker::PhantomData;
use std::ops::Range;

use lcx_core::bench::peak::Isa;
use tch::{Device, Kind};

use crate::nn::network::{Activation, Mlp};
use crate::TrainerError;

/// Output columns per weight panel: two 8-lane AVX registers.
pub(super) const PANEL: usize = 16;
/// Rows per micro-kernel call: 6 rows × 2 registers = 12 accumulators,
/// plus two weight registers and one broadcast, fit AVX2's 16 registers.
const MAX_ROWS: usize = 6;
/// Rows per wide micro-kernel call and panels it takes at once: 8 rows × 3
/// registers = 24 accumulators of AVX-512's 32 registers.
const WIDE_ROWS: usize = 8;
const WIDE_GROUP: usize = 3;
/// Rows per cache chunk in [`dense_avx2`]: 48 rows of 512 inputs are 96 KB.
const CHUNK_ROWS: usize = 8 * MAX_ROWS;

/// One dense layer, packed for the micro-kernel: `y = x P + b` where the
/// reduction runs over `inputs` and `P` is `inputs × outputs`. Inference
/// packs a weight matrix as `P = Wᵀ`; training also packs activations and
/// weights in the other orientation (see `crate::kernel::native_train`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Layer {
    inputs: usize,
    outputs: usize,
    /// `ceil(outputs / 16)` panels; panel `p` holds `P[k][p·16 + j]` at
    /// `(p·inputs + k)·16 + j`, zero where `p·16 + j ≥ outputs`.
    panels: Vec<f32>,
    /// The bias, zero-padded to a whole number of panels.
    bias: Vec<f32>,
}

/// A packed right-hand operand as the kernel reads it: the panels and bias
/// of a [`Layer`], or panels kept elsewhere (training keeps each weight
/// matrix in the packed form its input-gradient GEMM reads, and reads it
/// there in place).
#[derive(Debug, Clone, Copy)]
pub(super) struct Panels<'a> {
    inputs: usize,
    outputs: usize,
    panels: &'a [f32],
    bias: &'a [f32],
}

impl<'a> Panels<'a> {
    /// `panels` in [`Layer`]'s layout for an `inputs × outputs` operand,
    /// with `bias` (at least one float per padded output column).
    pub(super) fn new(inputs: usize, outputs: usize, panels: &'a [f32], bias: &'a [f32]) -> Self {
        let padded = outputs.div_ceil(PANEL) * PANEL;
        assert!(panels.len() == padded * inputs && bias.len() >= padded);
        Self {
            inputs,
            outputs,
            panels,
            bias,
        }
    }

    fn panel_count(&self) -> usize {
        self.outputs.div_ceil(PANEL)
    }
}

/// How the kernel finds the left operand `A` (`rows × k`, the reduction
/// index second) in the slice it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Left {
    /// Row-major: `A[r][i]` at `r·k + i`.
    Rows,
    /// `A` in row panels (see [`to_row_panels`]: strips of 16 columns, one
    /// after the other): `A[r][i]` at `((i / 16)·rows + r)·16 + i % 16`.
    /// Training's input-gradient GEMM reads the gradient `g` so, as the
    /// GEMM before it wrote it.
    Strips,
    /// `Aᵀ` in row panels: `A[r][i]` at `((r / 16)·k + i)·16 + r % 16`.
    /// Training's weight-gradient GEMM reads `gᵀ` so: the same buffer as
    /// [`Left::Strips`] reads `g` from, with no transpose in between (one
    /// used to take about 6 % of a step at batch 1,024).
    StripsT,
}

/// The layout of `Layer::pack_rows(rows, cols, m)`'s panels: the row-major
/// `rows × cols` `m` cut into strips of 16 columns (zero-padded), one
/// after the other.
pub(super) fn to_row_panels(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut panels = vec![0.0; cols.div_ceil(PANEL) * PANEL * rows];
    pack_row_panels(m, rows, cols, &mut panels);
    panels
}

/// Writes [`to_row_panels`]`(m, rows, cols)` into `dst` (already that
/// long), padding columns included.
pub(super) fn pack_row_panels(m: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    assert!(m.len() == rows * cols && dst.len() == cols.div_ceil(PANEL) * PANEL * rows);
    for (p, panel) in dst.chunks_exact_mut(rows * PANEL).enumerate() {
        let (c0, c1) = (p * PANEL, ((p + 1) * PANEL).min(cols));
        for (d, row) in panel.chunks_exact_mut(PANEL).zip(m.chunks_exact(cols)) {
            match <&[f32; PANEL]>::try_from(&row[c0..c1]) {
                // A fixed-size copy: two vector moves, not a memcpy call.
                Ok(full) => d.copy_from_slice(full),
                Err(_) => {
                    d[..c1 - c0].copy_from_slice(&row[c0..c1]);
                    d[c1 - c0..].fill(0.0);
                }
            }
        }
    }
}

/// The inverse of [`to_row_panels`] (padding dropped).
pub(super) fn from_row_panels(panels: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    assert_eq!(panels.len(), cols.div_ceil(PANEL) * PANEL * rows);
    let mut m = vec![0.0; rows * cols];
    for (p, strip) in panels.chunks_exact(rows * PANEL).enumerate() {
        let (c0, c1) = (p * PANEL, ((p + 1) * PANEL).min(cols));
        for (row, src) in m.chunks_exact_mut(cols).zip(strip.chunks_exact(PANEL)) {
            row[c0..c1].copy_from_slice(&src[..c1 - c0]);
        }
    }
    m
}

impl Layer {
    /// The packed operand, in the layout the field's comment gives.
    pub(super) fn panels(&self) -> &[f32] {
        &self.panels
    }

    pub(super) fn view(&self) -> Panels<'_> {
        Panels {
            inputs: self.inputs,
            outputs: self.outputs,
            panels: &self.panels,
            bias: &self.bias,
        }
    }

    /// Packs a row-major `[outputs][inputs]` weight matrix (libtorch's
    /// layout) and its bias.
    fn pack(inputs: usize, outputs: usize, w: &[f32], b: &[f32]) -> Self {
        let mut layer = Layer::default();
        layer.pack_weights(inputs, outputs, w, Some(b));
        layer
    }

    /// Sizes the buffers for an `inputs × outputs` matrix. Padding (the
    /// columns past `outputs` in the last panel) must be zero; the packing
    /// functions never write it and the kernel's packed store writes the
    /// zeros that zero weights and bias produce there, so the buffers are
    /// zeroed only when the shape changes: training repacks the same
    /// shapes every step.
    fn reset(&mut self, inputs: usize, outputs: usize) {
        let count = outputs.div_ceil(PANEL);
        if self.inputs != inputs
            || self.outputs != outputs
            || self.panels.len() != count * inputs * PANEL
        {
            self.inputs = inputs;
            self.outputs = outputs;
            self.panels.clear();
            self.panels.resize(count * inputs * PANEL, 0.0);
            self.bias.clear();
            self.bias.resize(count * PANEL, 0.0);
        }
    }

    /// Packs `P = Wᵀ` for a row-major `[outputs][inputs]` `w` (libtorch's
    /// Linear layout) and the bias (zero when `None`), reusing the buffers.
    pub(super) fn pack_weights(
        &mut self,
        inputs: usize,
        outputs: usize,
        w: &[f32],
        b: Option<&[f32]>,
    ) {
        assert_eq!(w.len(), inputs * outputs);
        self.reset(inputs, outputs);
        // Each panel is the transpose of its (at most) 16 rows of `w`.
        for p in 0..outputs.div_ceil(PANEL) {
            let (o0, o1) = (p * PANEL, ((p + 1) * PANEL).min(outputs));
            let panel = &mut self.panels[p * inputs * PANEL..(p + 1) * inputs * PANEL];
            transpose(&w[o0 * inputs..o1 * inputs], o1 - o0, inputs, panel, PANEL);
        }
        match b {
            Some(b) => self.bias[..outputs].copy_from_slice(b),
            None => self.bias.fill(0.0),
        }
    }

    /// Sizes the buffers for `pack_rows(inputs, outputs, _)` without
    /// filling them: [`dense_threads_packed`] writes the panels.
    pub(super) fn prepare_rows(&mut self, inputs: usize, outputs: usize) {
        self.reset(inputs, outputs);
        self.bias.fill(0.0);
    }

    /// Packs `P = m` for a row-major `[inputs][outputs]` `m` (reduction
    /// index first) with a zero bias, reusing the buffers.
    pub(super) fn pack_rows(&mut self, inputs: usize, outputs: usize, m: &[f32]) {
        self.reset(inputs, outputs);
        pack_row_panels(m, inputs, outputs, &mut self.panels);
        self.bias.fill(0.0);
    }

    /// Packs `P = Wᵀ` from `W` (`outputs × inputs`) kept in row panels (see
    /// [`to_row_panels`]) and the bias, reusing the buffers.
    pub(super) fn pack_weights_from_row_panels(
        &mut self,
        inputs: usize,
        outputs: usize,
        w: &[f32],
        b: &[f32],
    ) {
        self.reset(inputs, outputs);
        assert_eq!(w.len(), inputs.div_ceil(PANEL) * PANEL * outputs);
        let mut writer = self.strip_writer();
        // `max(1)`: a layer without outputs has no strips (and `w` is empty).
        for (s, strip) in w.chunks_exact((outputs * PANEL).max(1)).enumerate() {
            writer.repack_strip(s, strip);
        }
        self.set_bias(b);
    }

    /// Write access to every row panel's tiles of a layer packed by
    /// [`Layer::pack_weights_from_row_panels`], to be split between tasks
    /// (see [`StripWriter`]).
    pub(super) fn strip_writer(&mut self) -> StripWriter<'_> {
        StripWriter {
            panels: self.panels.as_mut_ptr(),
            len: self.panels.len(),
            inputs: self.inputs,
            outputs: self.outputs,
            strips: 0..self.inputs.div_ceil(PANEL),
            _layer: PhantomData,
        }
    }

    /// Replaces the bias of a layer packed by [`Layer::pack_weights`].
    pub(super) fn set_bias(&mut self, b: &[f32]) {
        self.bias[..self.outputs].copy_from_slice(b);
    }
}

/// Exclusive write access to the part of a forward pack (`P = Wᵀ`, see
/// [`Layer::pack_weights_from_row_panels`]) that row panels `strips` of
/// `W` transpose into. Row panel `s` (16 inputs of every output) lands in
/// rows `16s..16s + 16` of every output panel: one 16 × 16 tile per output
/// panel, interleaved in memory with the other row panels' tiles, so the
/// pack cannot be cut into disjoint slices; a writer owns its strips'
/// tiles instead, and [`StripWriter::split_at`] hands them out so that
/// tasks re-pack disjoint row panels at once (AdamW, see
/// `native_train`).
pub(super) struct StripWriter<'a> {
    panels: *mut f32,
    len: usize,
    inputs: usize,
    outputs: usize,
    strips: Range<usize>,
    _layer: PhantomData<&'a mut [f32]>,
}

// SAFETY: a writer only writes the tiles of its own row panels, and the
// row panels of two writers split from one another are disjoint.
unsafe impl Send for StripWriter<'_> {}

impl<'a> StripWriter<'a> {
    /// The row panels before `s` and those from `s` on.
    pub(super) fn split_at(self, s: usize) -> (Self, Self) {
        assert!(self.strips.start <= s && s <= self.strips.end);
        let head = StripWriter {
            strips: self.strips.start..s,
            ..self
        };
        let tail = StripWriter {
            strips: s..self.strips.end,
            ..self
        };
        (head, tail)
    }

    /// Transposes row panel `s` of `W`, `strip` (its `outputs × 16`
    /// floats), into the pack, one 16 × 16 tile per output panel.
    pub(super) fn repack_strip(&mut self, s: usize, strip: &[f32]) {
        let (inputs, outputs) = (self.inputs, self.outputs);
        assert!(self.strips.contains(&s) && strip.len() == outputs * PANEL);
        let cols = PANEL.min(inputs - s * PANEL);
        for o0 in (0..outputs).step_by(PANEL) {
            let rows = PANEL.min(outputs - o0);
            let start = ((o0 / PANEL) * inputs + s * PANEL) * PANEL;
            assert!(start + cols * PANEL <= self.len);
            // SAFETY: in bounds (asserted), and rows `16s..16s + cols` of
            // an output panel belong to row panel `s`, which this writer
            // owns: no other writer or reference touches them while it
            // lives (it borrows the layer mutably).
            let dst =
                unsafe { std::slice::from_raw_parts_mut(self.panels.add(start), cols * PANEL) };
            transpose_tile(
                &strip[o0 * PANEL..(o0 + rows) * PANEL],
                PANEL,
                dst,
                PANEL,
                rows,
                cols,
            );
        }
    }
}

/// `dst[c·dst_stride + r] = m[r·cols + c]`: the transpose of the
/// row-major `rows × cols` `m`, with `dst_stride` floats between `dst`'s
/// rows, in 16 × 16 tiles so that reads and writes both stay in cache.
pub(super) fn transpose(m: &[f32], rows: usize, cols: usize, dst: &mut [f32], dst_stride: usize) {
    for r0 in (0..rows).step_by(PANEL) {
        for c0 in (0..cols).step_by(PANEL) {
            transpose_tile(
                &m[r0 * cols + c0..],
                cols,
                &mut dst[c0 * dst_stride + r0..],
                dst_stride,
                PANEL.min(rows - r0),
                PANEL.min(cols - c0),
            );
        }
    }
}

/// `dst[c·dst_stride + r] = src[r·src_stride + c]` for `r < rows`,
/// `c < cols`, both at most 16: one tile of [`transpose`].
fn transpose_tile(
    src: &[f32],
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
    rows: usize,
    cols: usize,
) {
    debug_assert!(rows <= PANEL && cols <= PANEL);
    #[cfg(target_arch = "x86_64")]
    if rows == PANEL && cols == PANEL && supported() {
        assert!(src.len() >= 15 * src_stride + PANEL && dst.len() >= 15 * dst_stride + PANEL);
        // SAFETY: AVX2 was detected; the asserts keep all 16 rows of both
        // tiles inside the slices.
        unsafe {
            for (r, c) in [(0, 0), (0, 8), (8, 0), (8, 8)] {
                transpose8_avx2(
                    src.as_ptr().add(r * src_stride + c),
                    src_stride,
                    dst.as_mut_ptr().add(c * dst_stride + r),
                    dst_stride,
                );
            }
        }
        return;
    }
    let mut tile = [[0.0f32; PANEL]; PANEL];
    for (r, t) in tile.iter_mut().enumerate().take(rows) {
        t[..cols].copy_from_slice(&src[r * src_stride..r * src_stride + cols]);
    }
    for c in 0..cols {
        let d = &mut dst[c * dst_stride..c * dst_stride + rows];
        for (r, v) in d.iter_mut().enumerate() {
            *v = tile[r][c];
        }
    }
}

/// An 8 × 8 transpose in registers (the usual unpack / shuffle / permute
/// network).
///
/// # Safety
/// AVX2; `src` has 8 readable rows of 8 floats `ss` apart, `dst` 8
/// writable rows of 8 floats `ds` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose8_avx2(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * ss)));
    for (i, v) in transpose8_registers(r).into_iter().enumerate() {
        _mm256_storeu_ps(dst.add(i * ds), v);
    }
}

/// An 8 × 8 transpose of 32-bit lanes in registers: unpack, shuffle,
/// permute (also the bf16 kernel's, which widens before it transposes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn transpose8_registers(
    r: [std::arch::x86_64::__m256; 8],
) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// A read-only, packed copy of an MLP for CPU inference forwards.
#[derive(Debug, Clone)]
pub struct NativeMlp {
    layers: Vec<Layer>,
    widest: usize,
}

/// Whether the kernel runs here: the CPU has AVX2 and FMA, and
/// `LCX_NATIVE_KERNEL=off` did not turn it off. Turning it off runs
/// libtorch wherever the kernel would have run, on any CPU, which is how
/// the tests cover the path a CPU without AVX2 takes. Read once per
/// process, so that a snapshot and its forwards agree.
pub fn supported() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        let off = std::env::var_os("LCX_NATIVE_KERNEL").is_some_and(|v| v == "off");
        cpu_has_kernel_isa() && !off
    })
}

/// Whether the GEMMs run 512-bit wide: the CPU has AVX-512F and
/// `LCX_NATIVE_KERNEL=avx2` did not hold the kernel to AVX2 (which is how
/// a benchmark compares the two widths on one host). Both widths compute
/// every output with the same FMA chain and every sum in the same order,
/// so they give the same bits (a test holds them to it); the wide one does
/// twice the FLOPs per instruction. Read once per process.
pub fn wide() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        let narrow = std::env::var_os("LCX_NATIVE_KERNEL").is_some_and(|v| v == "avx2");
        supported() && cpu_has_avx512() && !narrow
    })
}

/// The instruction set the kernel runs with here, for a report's
/// provenance: `avx512f`, `avx2-fma`, or `None` where libtorch runs.
pub fn kernel_isa() -> Option<&'static str> {
    supported().then(|| if wide() { Isa::Avx512 } else { Isa::Avx2 }.name())
}

/// AVX-512F (with AVX2 and FMA): the width the peak probe detects too.
fn cpu_has_avx512() -> bool {
    Isa::here() == Isa::Avx512
}

fn cpu_has_kernel_isa() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A tensor's elements, in row-major order, as a vector.
pub(super) fn tensor_values(t: &tch::Tensor) -> Result<Vec<f32>, TrainerError> {
    let n = t.numel();
    let mut v = vec![0.0f32; n];
    t.f_contiguous()?.f_copy_data(&mut v, n)?;
    Ok(v)
}

impl NativeMlp {
    /// Copies and packs `mlp`'s weights; `None` where the kernel does not
    /// apply (see the module comment).
    pub fn snapshot(mlp: &Mlp) -> Result<Option<Self>, TrainerError> {
        if !supported() || mlp.is_traced() || mlp.activation() != Activation::Relu {
            return Ok(None);
        }
        let mut layers: Vec<Layer> = Vec::new();
        let mut widest = 0;
        for (w, b) in mlp.parameters() {
            if w.device() != Device::Cpu || w.kind() != Kind::Float || w.dim() != 2 {
                return Ok(None);
            }
            let size = w.size();
            let (outputs, inputs) = (size[0] as usize, size[1] as usize);
            let wv = tensor_values(w)?;
            let bv = match b {
                Some(b) => tensor_values(b)?,
                None => vec![0.0f32; outputs],
            };
            if let Some(prev) = layers.last().filter(|l| l.outputs != inputs) {
                return Err(TrainerError::BadShape(format!(
                    "layer of {inputs} inputs after one of {} outputs",
                    prev.outputs
                )));
            }
            widest = widest.max(outputs);
            layers.push(Layer::pack(inputs, outputs, &wv, &bv));
        }
        if layers.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self { layers, widest }))
    }

    pub fn input_dim(&self) -> usize {
        self.layers[0].inputs
    }

    pub fn output_dim(&self) -> usize {
        self.layers[self.layers.len() - 1].outputs
    }

    /// One forward of `rows` rows stored back to back: `x` holds
    /// `rows × input_dim` floats, `out` receives `rows × output_dim`. ReLU
    /// between layers, none after the last.
    pub fn forward_rows(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        assert_eq!(
            x.len(),
            rows * self.input_dim(),
            "native forward: input length"
        );
        assert_eq!(
            out.len(),
            rows * self.output_dim(),
            "native forward: output length"
        );
        if rows == 0 {
            return;
        }
        let last = self.layers.len() - 1;
        // Hidden activations ping-pong between two buffers; the first layer
        // reads `x` and the last writes `out` directly.
        let mut bufs = [
            vec![0.0f32; rows * self.widest],
            vec![0.0f32; rows * self.widest],
        ];
        for (i, layer) in self.layers.iter().enumerate() {
            let [a, b] = &mut bufs;
            let (src, dst) = if i % 2 == 0 { (&*b, a) } else { (&*a, b) };
            let input = if i == 0 {
                x
            } else {
                &src[..rows * layer.inputs]
            };
            let output = if i == last {
                &mut *out
            } else {
                &mut dst[..rows * layer.outputs]
            };
            dense(layer, input, rows, output, i < last);
        }
    }
}

/// `y = x P + b` (then ReLU) for `rows` rows, in the calling thread.
pub(super) fn dense(layer: &Layer, x: &[f32], rows: usize, y: &mut [f32], relu: bool) {
    dense_general(
        layer.view(),
        Left::Rows,
        x,
        rows,
        Some(y),
        Extras::default(),
        relu,
        1,
    )
}

/// [`dense`] with the panels (groups of 16 output columns) shared out over
/// `threads` tasks on the current rayon pool, which also writes its output,
/// packed, into `packed`:
/// the panels a [`Layer`] of `rows` inputs and `layer.outputs` outputs
/// would hold after `pack_rows(rows, outputs, y)` (set up with
/// [`Layer::prepare_rows`]). Training's weight-gradient GEMM reads a
/// layer's input in that form; the micro-kernel stores it from the same
/// registers, instead of a second pass copying it out of `y`. Every output
/// element is computed exactly as by [`dense`], so the result is the same
/// to the bit.
pub(super) fn dense_threads_packed(
    layer: &Layer,
    x: &[f32],
    rows: usize,
    y: &mut [f32],
    packed: Option<&mut Layer>,
    relu: bool,
    threads: usize,
) {
    let packed = packed.map(|p| {
        assert!(p.inputs == rows && p.outputs == layer.outputs);
        &mut p.panels[..]
    });
    let extras = Extras {
        packed,
        ..Extras::default()
    };
    dense_general(
        layer.view(),
        Left::Rows,
        x,
        rows,
        Some(y),
        extras,
        relu,
        threads,
    )
}

/// What the kernel writes besides (or instead of) the row-major output,
/// each `None` when not wanted. Every slice is per panel of the layer, in
/// the panels' order, so tasks that share the panels out write disjoint
/// parts.
#[derive(Default)]
pub(super) struct Extras<'a> {
    /// The output in row panels (see [`to_row_panels`]): `rows × 16`
    /// floats per panel.
    pub packed: Option<&'a mut [f32]>,
    /// One f64 per panel: Σ y² over the panel's outputs, padding included,
    /// taken from the kernel's registers as the values are stored.
    pub squares: Option<&'a mut [f64]>,
    /// A ReLU's output in `packed`'s layout: each output is zeroed where
    /// the unit was off (its value here not positive; NaN counts as on)
    /// before it is stored or summed. Training's input gradient passes
    /// through the layer below's ReLU so, in the same registers, rather
    /// than in a pass of its own.
    pub mask: Option<&'a [f32]>,
    /// 16 floats per panel: each column's outputs added up in row order
    /// (in f32, onto what is there): the bias gradient of the layer below,
    /// which otherwise took another pass over the input gradient.
    pub column_sums: Option<&'a mut [f32]>,
}

/// `A P + b` (no ReLU) for the `rows × layer.inputs` `A` that `x` holds
/// in the layout `left`, written only in row panels (`extras.packed`, which
/// must be set), with the other [`Extras`] asked for. Training's backward
/// GEMMs use it: the weight gradient comes out in the layout the weights
/// are kept in, with the squares for the gradient norm (which otherwise
/// needed a pass of its own over every gradient), and the input gradient
/// comes out masked by the ReLU below, in the layout both GEMMs of the
/// layer below read, with its column sums for that layer's bias gradient.
/// Each panel's sums run in a fixed order (row blocks in turn), so they do
/// not depend on `threads`.
pub(super) fn dense_into_panels(
    layer: Panels<'_>,
    left: Left,
    x: &[f32],
    rows: usize,
    extras: Extras<'_>,
    threads: usize,
) {
    assert!(
        extras.packed.is_some(),
        "dense_into_panels writes packed outputs"
    );
    dense_general(layer, left, x, rows, None, extras, false, threads)
}

#[expect(
    clippy::too_many_arguments,
    reason = "the kernel's operands; a struct would be built and torn down per call on the hot path"
)]
fn dense_general(
    layer: Panels<'_>,
    left: Left,
    x: &[f32],
    rows: usize,
    y: Option<&mut [f32]>,
    extras: Extras<'_>,
    relu: bool,
    threads: usize,
) {
    dense_on(layer, left, x, rows, y, extras, relu, threads, wide())
}

/// [`dense_general`] at the width `wide` says (true: AVX-512, which the
/// CPU must have), so that tests can run both widths in one process.
// Its parameter list repeats dense_general's plus `wide`: the operands go
// through by value, as the `expect` below says, rather than in a struct.
// Each optional operand in `extras` is checked and turned into a pointer
// alike, but with its own length, its own pointer kind (`mut` or `const`)
// and, for the squares, a fill: written out per operand, so that each
// check stands next to the operand it guards.
#[expect(
    clippy::too_many_arguments,
    reason = "the kernel's operands; a struct would be built and torn down per call on the hot path"
)]
fn dense_on(
    layer: Panels<'_>,
    left: Left,
    x: &[f32],
    rows: usize,
    y: Option<&mut [f32]>,
    extras: Extras<'_>,
    relu: bool,
    threads: usize,
    wide: bool,
) {
    let k = layer.inputs;
    assert!(!wide || cpu_has_avx512(), "the wide kernel needs AVX-512F");
    assert_eq!(
        x.len(),
        match left {
            Left::Rows => rows * k,
            Left::Strips => k.div_ceil(PANEL) * PANEL * rows,
            Left::StripsT => rows.div_ceil(PANEL) * PANEL * k,
        }
    );
    // The AVX2 code below must never run on a CPU without it; the check is
    // a cached flag.
    assert!(supported(), "lcx's kernel needs AVX2 and FMA");
    let panels = layer.panel_count();
    let y = match y {
        Some(y) => {
            assert_eq!(y.len(), rows * layer.outputs);
            y.as_mut_ptr()
        }
        None => std::ptr::null_mut(),
    };
    let packed = match extras.packed {
        Some(p) => {
            assert_eq!(p.len(), panels * rows * PANEL);
            p.as_mut_ptr()
        }
        None => std::ptr::null_mut(),
    };
    let sums = match extras.squares {
        Some(s) => {
            assert_eq!(s.len(), panels);
            s.fill(0.0);
            s.as_mut_ptr()
        }
        None => std::ptr::null_mut(),
    };
    let mask = match extras.mask {
        Some(m) => {
            assert_eq!(m.len(), panels * rows * PANEL);
            m.as_ptr()
        }
        None => std::ptr::null(),
    };
    let column_sums = match extras.column_sums {
        Some(c) => {
            assert_eq!(c.len(), panels * PANEL);
            c.as_mut_ptr()
        }
        None => std::ptr::null_mut(),
    };
    #[cfg(target_arch = "x86_64")]
    {
        let out = Out {
            y,
            packed,
            sums,
            mask,
            column_sums,
        };
        let layer = &layer;
        if threads <= 1 || panels < 2 {
            // SAFETY: AVX2 and FMA were checked above, as were the slice
            // lengths: `y` (when not null) holds `rows × outputs` floats,
            // `packed` and `mask` (when not null) `rows × 16` per panel,
            // `sums` (when not null) one f64 per panel and `column_sums`
            // (when not null) 16 floats per panel.
            unsafe { dense_x86(layer, left, x, rows, &out, relu, 0..panels, wide) };
            return;
        }
        // The wide kernel takes panels three at a time, so each task gets
        // a multiple of three where it can.
        let unit = if wide { WIDE_GROUP } else { 1 };
        let units = panels.div_ceil(unit);
        let tasks = threads.min(units);
        rayon::scope(|s| {
            for t in 0..tasks {
                let range = (units * t / tasks * unit).min(panels)
                    ..(units * (t + 1) / tasks * unit).min(panels);
                let out = &out;
                s.spawn(move |_| {
                    // SAFETY: as above; the tasks' panel ranges are
                    // disjoint, so no two write the same element or sum.
                    unsafe { dense_x86(layer, left, x, rows, out, relu, range, wide) }
                });
            }
        });
    }
    // Unreachable (`supported()` is false off x86-64), but spelled out: the
    // portable path can only fill `y`.
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (threads, panels, wide);
        assert!(
            !y.is_null()
                && packed.is_null()
                && sums.is_null()
                && mask.is_null()
                && column_sums.is_null()
                && left == Left::Rows,
            "packed operands, packed outputs and sums need the AVX2 kernel"
        );
        // SAFETY: `y` came from a slice of this length just above.
        let y = unsafe { std::slice::from_raw_parts_mut(y, rows * layer.outputs) };
        dense_portable(layer, x, rows, y, relu)
    }
}

/// Where [`dense_avx2`] writes, each pointer null when not wanted: the
/// row-major output and the [`Extras`].
#[cfg(target_arch = "x86_64")]
struct Out {
    y: *mut f32,
    packed: *mut f32,
    sums: *mut f64,
    mask: *const f32,
    column_sums: *mut f32,
}

// SAFETY: tasks sharing an `Out` write disjoint panels' columns and sums,
// and only read `mask`.
#[cfg(target_arch = "x86_64")]
unsafe impl Sync for Out {}

/// The definition the kernel implements, in the kernel's own order (one
/// fused multiply-add chain over k per output), so the two agree to the
/// bit. Used off x86-64 (where no `NativeMlp` is built) and by the tests.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn dense_portable(layer: Panels<'_>, x: &[f32], rows: usize, y: &mut [f32], relu: bool) {
    let k = layer.inputs;
    for r in 0..rows {
        for o in 0..layer.outputs {
            let (p, j) = (o / PANEL, o % PANEL);
            let mut acc = 0.0f32;
            for i in 0..k {
                acc = x[r * k + i].mul_add(layer.panels[(p * k + i) * PANEL + j], acc);
            }
            let v = acc + layer.bias[o];
            // `_mm256_max_ps(0, v)`: 0 where 0 > v, else v, so NaN stays
            // NaN (as in libtorch's ReLU) and -0 stays -0.
            y[r * layer.outputs + o] = if relu && 0.0 > v { 0.0 } else { v };
        }
    }
}

/// The rows `0..rows` cut into blocks of at most [`MAX_ROWS`], as even as
/// possible (26 rows → 6, 5, 5, 5, 5), so no block is a thin remainder.
pub(super) fn row_blocks(rows: usize, max: usize) -> impl Iterator<Item = (usize, usize)> {
    let blocks = rows.div_ceil(max);
    let (base, extra) = (rows / blocks.max(1), rows % blocks.max(1));
    (0..blocks).scan(0, move |start, i| {
        let len = base + usize::from(i < extra);
        let block = (*start, len);
        *start += len;
        Some(block)
    })
}

/// The kernel at the width `wide` asks for (see [`dense_on`]).
///
/// # Safety
/// As [`walk_tiles`]; for `wide`, the CPU must support AVX-512F.
// Its operands pass unchanged to the width's kernel and on to walk_tiles,
// so each of those repeats this parameter list (no struct on the hot path).
#[cfg(target_arch = "x86_64")]
#[expect(
    clippy::too_many_arguments,
    reason = "the kernel's operands, passed through"
)]
unsafe fn dense_x86(
    layer: &Panels<'_>,
    left: Left,
    x: &[f32],
    rows: usize,
    out: &Out,
    relu: bool,
    panels: std::ops::Range<usize>,
    wide: bool,
) {
    if wide {
        dense_avx512(layer, left, x, rows, out, relu, panels)
    } else {
        dense_avx2(layer, left, x, rows, out, relu, panels)
    }
}

/// # Safety
/// As [`walk_tiles`].
// dense_avx2 and dense_avx512 share their parameters and their
// walk_tiles call, and differ in the micro-kernel table: they are two
// functions because each needs its own `target_feature`, which is what
// lets the micro-kernels inline with the right instruction set.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dense_avx2(
    layer: &Panels<'_>,
    left: Left,
    x: &[f32],
    rows: usize,
    out: &Out,
    relu: bool,
    panels: std::ops::Range<usize>,
) {
    walk_tiles(
        layer,
        left,
        x,
        rows,
        out,
        relu,
        panels,
        1,
        MAX_ROWS,
        |t, len, _| {
            if left == Left::StripsT {
                match len {
                    1 => micro::<1, PANEL>(t),
                    2 => micro::<2, PANEL>(t),
                    3 => micro::<3, PANEL>(t),
                    4 => micro::<4, PANEL>(t),
                    5 => micro::<5, PANEL>(t),
                    _ => micro::<6, PANEL>(t),
                }
            } else {
                match len {
                    1 => micro::<1, 1>(t),
                    2 => micro::<2, 1>(t),
                    3 => micro::<3, 1>(t),
                    4 => micro::<4, 1>(t),
                    5 => micro::<5, 1>(t),
                    _ => micro::<6, 1>(t),
                }
            }
        },
    )
}

/// # Safety
/// As [`walk_tiles`], and the CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dense_avx512(
    layer: &Panels<'_>,
    left: Left,
    x: &[f32],
    rows: usize,
    out: &Out,
    relu: bool,
    panels: std::ops::Range<usize>,
) {
    // Three panels per tile: 8 rows × 3 registers of 16 lanes are 24
    // accumulators, each FMA twice an AVX2 one's work, with three panel
    // loads and eight broadcasts per 24 FMAs. One panel per register row
    // would need a broadcast per FMA; on the 2-core Xeon lcx is tuned on,
    // 8 × 3 ran a single-threaded 512 × 512 × 1,024 GEMM at about 84 % of
    // the AVX-512 FMA peak, 6 × 2 at about 78 % and 8 × 2 at 81 %.
    macro_rules! rows {
        ($ks:expr, $np:expr, $t:expr, $len:expr) => {
            match $len {
                1 => micro512::<1, $ks, $np>($t),
                2 => micro512::<2, $ks, $np>($t),
                3 => micro512::<3, $ks, $np>($t),
                4 => micro512::<4, $ks, $np>($t),
                5 => micro512::<5, $ks, $np>($t),
                6 => micro512::<6, $ks, $np>($t),
                7 => micro512::<7, $ks, $np>($t),
                _ => micro512::<8, $ks, $np>($t),
            }
        };
    }
    walk_tiles(
        layer,
        left,
        x,
        rows,
        out,
        relu,
        panels,
        WIDE_GROUP,
        WIDE_ROWS,
        |t, len, np| match (left == Left::StripsT, np) {
            (true, 1) => rows!(PANEL, 1, t, len),
            (true, 2) => rows!(PANEL, 2, t, len),
            (true, _) => rows!(PANEL, 3, t, len),
            (false, 1) => rows!(1, 1, t, len),
            (false, 2) => rows!(1, 2, t, len),
            (false, _) => rows!(1, 3, t, len),
        },
    )
}

/// Cuts the GEMM into tiles (up to `max_rows` rows against up to
/// `group` panels) and hands each to `micro(tile, rows, panels)`.
///
/// # Safety
/// `micro` must be a micro-kernel the CPU supports; `x` holds the
/// `rows × layer.inputs` left operand in the layout `left` (its length
/// checked by [`dense_on`]),
/// `out.y` is null or points at `rows · layer.outputs` writable floats,
/// `out.packed` is null or points at `rows · 16` floats per panel,
/// `out.sums` is null or points at one f64 per panel, and `panels` lies
/// within `0..layer.panel_count()`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[expect(
    clippy::too_many_arguments,
    reason = "the kernel's operands, passed through"
)]
unsafe fn walk_tiles(
    layer: &Panels<'_>,
    left: Left,
    x: &[f32],
    rows: usize,
    out: &Out,
    relu: bool,
    panels: std::ops::Range<usize>,
    group: usize,
    max_rows: usize,
    mut micro: impl FnMut(&Tile, usize, usize),
) {
    let (k, n) = (layer.inputs, layer.outputs);
    // Where row `r`'s first k step is, and how the k steps run: `KS`
    // floats apart in runs of `run`, and `jump` floats from one run's
    // start to the next's.
    let (run, jump) = match left {
        Left::Rows | Left::StripsT => (k.max(1), 0),
        Left::Strips => (PANEL, rows * PANEL),
    };
    let row_start = |r: usize| match left {
        Left::Rows => r * k,
        Left::Strips => r * PANEL,
        Left::StripsT => (r / PANEL * k) * PANEL + r % PANEL,
    };
    // Rows go in chunks small enough for their inputs to stay in L2 while
    // every panel passes over them: a batch of 256 rows of 512 floats is
    // all of this CPU's 512 KB L2, and walking each panel over all of it
    // streamed it from L3 once per panel.
    for chunk in (0..rows).step_by(CHUNK_ROWS) {
        let chunk_rows = CHUNK_ROWS.min(rows - chunk);
        for p in panels.clone().step_by(group) {
            let np = group.min(panels.end - p);
            let panel = layer.panels.as_ptr().add(p * k * PANEL);
            let bias = layer.bias.as_ptr().add(p * PANEL);
            let cols = (np * PANEL).min(n - p * PANEL);
            for (start, len) in row_blocks(chunk_rows, max_rows) {
                let start = chunk + start;
                let t = Tile {
                    k,
                    a: std::array::from_fn(|r| x.as_ptr().add(row_start(start + r.min(len - 1)))),
                    run,
                    jump,
                    panel,
                    bias,
                    y: offset(out.y, start * n + p * PANEL),
                    ldy: n,
                    packed: offset(out.packed, (p * rows + start) * PANEL),
                    sum: offset(out.sums, p),
                    mask: if out.mask.is_null() {
                        out.mask
                    } else {
                        out.mask.add((p * rows + start) * PANEL)
                    },
                    column_sums: offset(out.column_sums, p * PANEL),
                    panel_stride: rows * PANEL,
                    cols,
                    relu,
                };
                micro(&t, len, np);
            }
        }
    }
}

/// `p + count`, or null for a null `p` (an output not wanted).
///
/// # Safety
/// A non-null `p` plus `count` stays inside its allocation.
#[cfg(target_arch = "x86_64")]
unsafe fn offset<T>(p: *mut T, count: usize) -> *mut T {
    if p.is_null() {
        p
    } else {
        p.add(count)
    }
}

/// One micro-kernel call: `MR` rows of `x` (stride `k`) against one panel.
#[cfg(target_arch = "x86_64")]
struct Tile {
    k: usize,
    /// Where each row's first k step is (only the first `MR` are read).
    a: [*const f32; WIDE_ROWS],
    /// K steps in a run (consecutive ones `KS` floats apart) and floats
    /// from one run's start to the next's: all K in one run for
    /// [`Left::Rows`] and [`Left::StripsT`], runs of 16 for
    /// [`Left::Strips`].
    run: usize,
    jump: usize,
    panel: *const f32,
    bias: *const f32,
    /// Null, or where the `MR` output rows go (stride `ldy`).
    y: *mut f32,
    ldy: usize,
    /// Null, or where the `MR` output rows go in panel order (16 floats
    /// each, padding columns included: zero weights and bias make them
    /// zero for finite inputs, and every store rewrites them).
    packed: *mut f32,
    /// Null, or the panel's sum of squares, which the tile's outputs are
    /// added to (padding columns included: zero for finite inputs).
    sum: *mut f64,
    /// Null, or the ReLU output that masks the `MR` rows, in `packed`'s
    /// layout.
    mask: *const f32,
    /// Null, or the panel's 16 column sums, which the tile's rows are
    /// added to in order.
    column_sums: *mut f32,
    /// Floats from one panel's `packed` and `mask` rows to the next
    /// panel's (the wide kernel's tiles span up to three panels).
    panel_stride: usize,
    /// Real output columns in the tile's panels (at most 16 per panel).
    cols: usize,
    relu: bool,
}

/// `$body!(r)` for each `r` in `0..$mr` (`$mr` at most 8), each `r` a
/// literal, so that an epilogue indexes its accumulator array only by
/// constants. Written as a loop over the rows, an epilogue too long for
/// LLVM to unroll kept the accumulators in memory, and the k loop stored
/// each one after every FMA: the kernel ran at the store port's pace, a
/// third below its own.
#[cfg(target_arch = "x86_64")]
macro_rules! for_rows {
    ($mr:expr, $body:ident) => {
        for_rows!(@ $mr, $body; 0 1 2 3 4 5 6 7)
    };
    (@ $mr:expr, $body:ident; $($r:literal)*) => {
        $(if $r < $mr {
            $body!($r);
        })*
    };
}

/// The sum of squares of one output row of a panel, given as its two
/// 8-lane halves: each lane's two squares in f32 (`lo² + hi²`, one
/// rounding each), then the eight lane sums in f64 in a fixed order. Both
/// kernels add each row's sum to the panel's f64 total in row order, so
/// the total does not depend on how rows are blocked into tiles, on the
/// vector width, or on the thread count. Expands inside a function with
/// AVX enabled and `std::arch::x86_64::*` in scope.
#[cfg(target_arch = "x86_64")]
macro_rules! row_squares {
    ($lo:expr, $hi:expr) => {{
        let sq = _mm256_fmadd_ps($hi, $hi, _mm256_mul_ps($lo, $lo));
        let quads = _mm256_add_pd(
            _mm256_cvtps_pd(_mm256_castps256_ps128(sq)),
            _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(sq)),
        );
        let pairs = _mm_add_pd(
            _mm256_castpd256_pd128(quads),
            _mm256_extractf128_pd::<1>(quads),
        );
        _mm_cvtsd_f64(pairs) + _mm_cvtsd_f64(_mm_unpackhi_pd(pairs, pairs))
    }};
}

/// # Safety
/// AVX2 and FMA; each of `t.a`'s first `MR` pointers, walked as `t.run`
/// and `t.jump` say with `KS` floats between k steps, reads `t.k` floats
/// of its row; `t.panel` points at `t.k × 16` floats, `t.bias` at 16
/// floats, and `t.y` is null or points at `MR` rows (stride `t.ldy`) with
/// `t.cols` writable floats each.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn micro<const MR: usize, const KS: usize>(t: &Tile) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    let mut rows: [*const f32; MR] = std::array::from_fn(|r| t.a[r]);
    let mut w = t.panel;
    // One k step: two panel loads, MR broadcasts, 2·MR FMAs. Unrolled four
    // times so the loop's own instructions stay off the front end's path
    // (with one step per iteration the loop was about as many
    // instructions as FMAs). Every accumulator still sums in k order.
    macro_rules! step {
        ($i:expr, $w:expr) => {{
            let w0 = _mm256_loadu_ps($w);
            let w1 = _mm256_loadu_ps($w.add(8));
            for (a, x) in acc.iter_mut().zip(rows) {
                let xv = _mm256_broadcast_ss(&*x.add($i * KS));
                a[0] = _mm256_fmadd_ps(xv, w0, a[0]);
                a[1] = _mm256_fmadd_ps(xv, w1, a[1]);
            }
        }};
    }
    let mut done = 0;
    while done < t.k {
        let steps = t.run.min(t.k - done);
        let mut i = 0;
        while i + 4 <= steps {
            step!(i, w);
            step!(i + 1, w.add(PANEL));
            step!(i + 2, w.add(2 * PANEL));
            step!(i + 3, w.add(3 * PANEL));
            w = w.add(4 * PANEL);
            i += 4;
        }
        while i < steps {
            step!(i, w);
            w = w.add(PANEL);
            i += 1;
        }
        done += steps;
        if done < t.k {
            rows = rows.map(|x| x.add(t.jump));
        }
    }
    let b0 = _mm256_loadu_ps(t.bias);
    let b1 = _mm256_loadu_ps(t.bias.add(8));
    let zero = _mm256_setzero_ps();
    let mut squares = if t.sum.is_null() { 0.0 } else { *t.sum };
    let (mut column0, mut column1) = if t.column_sums.is_null() {
        (zero, zero)
    } else {
        (
            _mm256_loadu_ps(t.column_sums),
            _mm256_loadu_ps(t.column_sums.add(8)),
        )
    };
    macro_rules! row {
        ($r:literal) => {{
            let r: usize = $r;
            let a = acc[r];
            let mut v0 = _mm256_add_ps(a[0], b0);
            let mut v1 = _mm256_add_ps(a[1], b1);
            if t.relu {
                // Zero first: max_ps returns its second operand when either is
                // NaN, so a NaN propagates (as through libtorch's ReLU) instead
                // of turning into 0 and hiding a broken input or weight from
                // the training step's non-finite check.
                v0 = _mm256_max_ps(zero, v0);
                v1 = _mm256_max_ps(zero, v1);
            }
            if !t.mask.is_null() {
                // All ones where the unit was off (a ≤ 0; false for NaN).
                let m = t.mask.add(r * PANEL);
                let off0 = _mm256_cmp_ps::<_CMP_LE_OQ>(_mm256_loadu_ps(m), zero);
                let off1 = _mm256_cmp_ps::<_CMP_LE_OQ>(_mm256_loadu_ps(m.add(8)), zero);
                v0 = _mm256_andnot_ps(off0, v0);
                v1 = _mm256_andnot_ps(off1, v1);
            }
            if !t.column_sums.is_null() {
                column0 = _mm256_add_ps(column0, v0);
                column1 = _mm256_add_ps(column1, v1);
            }
            if !t.packed.is_null() {
                _mm256_storeu_ps(t.packed.add(r * PANEL), v0);
                _mm256_storeu_ps(t.packed.add(r * PANEL + 8), v1);
            }
            if !t.sum.is_null() {
                squares += row_squares!(v0, v1);
            }
            if !t.y.is_null() {
                let dst = t.y.add(r * t.ldy);
                if t.cols == PANEL {
                    _mm256_storeu_ps(dst, v0);
                    _mm256_storeu_ps(dst.add(8), v1);
                } else {
                    // The last panel of a layer whose width is not a multiple
                    // of 16: write only the real columns.
                    let mut tmp = [0.0f32; PANEL];
                    _mm256_storeu_ps(tmp.as_mut_ptr(), v0);
                    _mm256_storeu_ps(tmp.as_mut_ptr().add(8), v1);
                    std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, t.cols);
                }
            }
        }};
    }
    for_rows!(MR, row);
    if !t.column_sums.is_null() {
        _mm256_storeu_ps(t.column_sums, column0);
        _mm256_storeu_ps(t.column_sums.add(8), column1);
    }
    if !t.sum.is_null() {
        *t.sum = squares;
    }
}

/// [`micro`] 16 lanes wide, over `NP` (1 to 3) adjacent panels: the same
/// FMA chain per output, the same epilogue and the same order of every
/// sum (the squares go through 8-lane halves in the AVX2 kernel's order),
/// so its bits are [`micro`]'s.
// Its k loop is micro's written out again on purpose: the same unrolled
// walk expands a different `step!` (512-bit registers, `NP` panels, one
// accumulator array per panel, see below), and each kernel's loop is kept
// as measured rather than routed through a shared macro.
///
/// # Safety
/// AVX-512F, and [`micro`]'s conditions for each of the `NP` panels
/// (`t.panel` then holds `NP` panels of `t.k × 16` floats back to back,
/// `t.bias` `NP × 16` floats, and `t.y`'s rows `t.cols` writable floats).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn micro512<const MR: usize, const KS: usize, const NP: usize>(t: &Tile) {
    use std::arch::x86_64::*;
    // One accumulator array per panel, indexed only by constants and the
    // row: with `[[__m512; NP]; MR]` indexed by a panel loop, LLVM kept
    // the accumulators on the stack and stored one after every FMA, which
    // held the kernel to the store port's pace (about a third of peak).
    let mut acc0 = [_mm512_setzero_ps(); MR];
    let mut acc1 = [_mm512_setzero_ps(); MR];
    let mut acc2 = [_mm512_setzero_ps(); MR];
    let mut rows: [*const f32; MR] = std::array::from_fn(|r| t.a[r]);
    let mut w = t.panel;
    // Floats from a k step in one panel to the same step in the next.
    let next = t.k * PANEL;
    macro_rules! step {
        ($i:expr, $w:expr) => {{
            let w0 = _mm512_loadu_ps($w);
            let w1 = if NP >= 2 {
                _mm512_loadu_ps($w.add(next))
            } else {
                w0
            };
            let w2 = if NP >= 3 {
                _mm512_loadu_ps($w.add(2 * next))
            } else {
                w0
            };
            for r in 0..MR {
                let xv = _mm512_set1_ps(*rows[r].add($i * KS));
                acc0[r] = _mm512_fmadd_ps(xv, w0, acc0[r]);
                if NP >= 2 {
                    acc1[r] = _mm512_fmadd_ps(xv, w1, acc1[r]);
                }
                if NP >= 3 {
                    acc2[r] = _mm512_fmadd_ps(xv, w2, acc2[r]);
                }
            }
        }};
    }
    let mut done = 0;
    while done < t.k {
        let steps = t.run.min(t.k - done);
        let mut i = 0;
        while i + 4 <= steps {
            step!(i, w);
            step!(i + 1, w.add(PANEL));
            step!(i + 2, w.add(2 * PANEL));
            step!(i + 3, w.add(3 * PANEL));
            w = w.add(4 * PANEL);
            i += 4;
        }
        while i < steps {
            step!(i, w);
            w = w.add(PANEL);
            i += 1;
        }
        done += steps;
        if done < t.k {
            rows = rows.map(|x| x.add(t.jump));
        }
    }
    let zero = _mm512_setzero_ps();
    // The epilogue of panel `$j` (a constant) from its accumulators.
    macro_rules! finish {
        ($j:expr, $acc:expr) => {{
            let j: usize = $j;
            let bias = _mm512_loadu_ps(t.bias.add(j * PANEL));
            let mut squares = if t.sum.is_null() { 0.0 } else { *t.sum.add(j) };
            let mut column = if t.column_sums.is_null() {
                zero
            } else {
                _mm512_loadu_ps(t.column_sums.add(j * PANEL))
            };
            let cols = t.cols.saturating_sub(j * PANEL).min(PANEL);
            macro_rules! row {
                ($r:literal) => {{
                    let r: usize = $r;
                    let mut v = _mm512_add_ps($acc[r], bias);
                    if t.relu {
                        // As in `micro`: a NaN stays NaN.
                        v = _mm512_max_ps(zero, v);
                    }
                    if !t.mask.is_null() {
                        let m = t.mask.add(j * t.panel_stride + r * PANEL);
                        let off = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(_mm512_loadu_ps(m), zero);
                        v = _mm512_maskz_mov_ps(!off, v);
                    }
                    if !t.column_sums.is_null() {
                        column = _mm512_add_ps(column, v);
                    }
                    if !t.packed.is_null() {
                        _mm512_storeu_ps(t.packed.add(j * t.panel_stride + r * PANEL), v);
                    }
                    if !t.sum.is_null() {
                        // Through 8-lane halves, as in `micro`.
                        let lo = _mm512_castps512_ps256(v);
                        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
                        squares += row_squares!(lo, hi);
                    }
                    if !t.y.is_null() && cols > 0 {
                        let dst = t.y.add(r * t.ldy + j * PANEL);
                        if cols == PANEL {
                            _mm512_storeu_ps(dst, v);
                        } else {
                            // The last panel of a layer whose width is not a
                            // multiple of 16: write only the real columns.
                            _mm512_mask_storeu_ps(dst, ((1u32 << cols) - 1) as __mmask16, v);
                        }
                    }
                }};
            }
            for_rows!(MR, row);
            if !t.column_sums.is_null() {
                _mm512_storeu_ps(t.column_sums.add(j * PANEL), column);
            }
            if !t.sum.is_null() {
                *t.sum.add(j) = squares;
            }
        }};
    }
    finish!(0, acc0);
    if NP >= 2 {
        finish!(1, acc1);
    }
    if NP >= 3 {
        finish!(2, acc2);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use tch::nn::VarStore;
    use tch::Tensor;

    use super::*;
    use crate::nn::network::MlpSpec;

    /// For tests of the kernel: `true` where it runs. Where it does not,
    /// the test has nothing to compare, so this checks the fallback
    /// instead (a snapshot declines, so callers take libtorch) and says on
    /// stderr that the kernel test was skipped.
    pub(crate) fn kernel_here(test: &str) -> bool {
        if supported() {
            return true;
        }
        let vs = VarStore::new(Device::Cpu);
        assert!(
            NativeMlp::snapshot(&mlp(&vs, 9, 8, Activation::Relu))
                .unwrap()
                .is_none(),
            "without the kernel a snapshot must decline, so that libtorch runs"
        );
        eprintln!(
            "{test}: SKIPPED, the kernel does not run here (no AVX2/FMA, or \
             LCX_NATIVE_KERNEL=off); checked that it declines instead"
        );
        false
    }

    fn mlp(vs: &VarStore, input_dim: usize, hidden: usize, activation: Activation) -> Mlp {
        Mlp::new(
            &vs.root(),
            MlpSpec {
                input_dim,
                hidden_size: hidden,
                num_layers: 3,
                outputs: 22,
                activation,
            },
        )
        .unwrap()
    }

    fn portable_forward(native: &NativeMlp, x: &[f32], rows: usize) -> Vec<f32> {
        let mut h = x.to_vec();
        for (i, layer) in native.layers.iter().enumerate() {
            let mut y = vec![0.0; rows * layer.outputs];
            dense_portable(layer.view(), &h, rows, &mut y, i + 1 < native.layers.len());
            h = y;
        }
        h
    }

    #[test]
    fn row_blocks_are_even_and_cover_every_row() {
        for rows in 0..100 {
            let blocks: Vec<_> = row_blocks(rows, MAX_ROWS).collect();
            assert_eq!(blocks.iter().map(|b| b.1).sum::<usize>(), rows);
            assert_eq!(blocks.len(), rows.div_ceil(MAX_ROWS));
            let mut next = 0;
            for &(start, len) in &blocks {
                assert_eq!(start, next);
                assert!((1..=MAX_ROWS).contains(&len));
                next += len;
            }
            let (lo, hi) = (
                blocks.iter().map(|b| b.1).min(),
                blocks.iter().map(|b| b.1).max(),
            );
            if let (Some(lo), Some(hi)) = (lo, hi) {
                assert!(hi - lo <= 1, "{rows}: {blocks:?}");
            }
        }
        assert_eq!(
            row_blocks(26, MAX_ROWS).map(|b| b.1).collect::<Vec<_>>(),
            [6, 5, 5, 5, 5]
        );
    }

    /// Batches of 1–14 rows (every micro-kernel height, and blocks of
    /// uneven heights), 297 and 37 inputs (not multiples of 8 or 16), 22
    /// outputs (a partial last panel): the kernel equals libtorch within
    /// float tolerance, equals its portable definition to the bit, and a
    /// row gives the same bits alone as inside any batch.
    #[test]
    fn native_batches_match_libtorch_and_single_rows_exactly() {
        if !kernel_here("native_batches_match_libtorch_and_single_rows_exactly") {
            return;
        }
        for (input_dim, hidden) in [(297, 512), (37, 30)] {
            let vs = VarStore::new(Device::Cpu);
            let net = mlp(&vs, input_dim, hidden, Activation::Relu);
            let native = NativeMlp::snapshot(&net).unwrap().expect("applies");
            assert_eq!((native.input_dim(), native.output_dim()), (input_dim, 22));
            for rows in 1..=14usize {
                tch::manual_seed(rows as i64);
                let x = Tensor::randn([rows as i64, input_dim as i64], (Kind::Float, Device::Cpu));
                let want: Vec<f32> =
                    Vec::try_from(net.f_forward(&x).unwrap().flatten(0, -1)).unwrap();
                let xs: Vec<f32> = Vec::try_from(x.flatten(0, -1)).unwrap();
                let mut got = vec![0.0f32; rows * 22];
                native.forward_rows(&xs, rows, &mut got);
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
                }
                assert_eq!(got, portable_forward(&native, &xs, rows), "rows {rows}");
                for r in 0..rows {
                    let mut one = [0.0f32; 22];
                    native.forward_rows(&xs[r * input_dim..(r + 1) * input_dim], 1, &mut one);
                    assert_eq!(one[..], got[r * 22..(r + 1) * 22], "row {r} of {rows}");
                }
            }
        }
    }

    /// The AVX-512 kernel gives the AVX2 kernel's bits, and neither
    /// depends on the thread count: every output, packed output, sum of
    /// squares and column sum, for each layout of the left operand, with
    /// ReLU and a mask, partial last panels, odd panel counts (the wide
    /// kernel's lone panel) and row counts that block differently at 6 and
    /// 8 rows per tile.
    #[test]
    fn both_widths_give_the_same_bits() {
        if !kernel_here("both_widths_give_the_same_bits") {
            return;
        }
        if !cpu_has_avx512() {
            eprintln!("both_widths_give_the_same_bits: SKIPPED, no AVX-512F on this CPU");
            return;
        }
        let value = |i: usize, m: usize| ((i * 7919 + m) % 211) as f32 / 100.0 - 1.0;
        for (rows, k, n) in [
            (1, 37, 22),
            (7, 64, 40),
            (53, 130, 77),
            (100, 33, 16),
            (17, 512, 96),
        ] {
            let x: Vec<f32> = (0..rows * k).map(|i| value(i, 1)).collect();
            let w: Vec<f32> = (0..n * k).map(|i| value(i, 2)).collect();
            let b: Vec<f32> = (0..n).map(|i| value(i, 3)).collect();
            let m: Vec<f32> = (0..rows * n).map(|i| value(i, 4)).collect();
            let layer = Layer::pack(k, n, &w, &b);
            let panels = n.div_ceil(PANEL);
            let mask = to_row_panels(&m, rows, n);
            let mut xt = vec![0.0; rows * k];
            transpose(&x, rows, k, &mut xt, rows);
            let lefts = [
                (Left::Rows, x.clone()),
                (Left::Strips, to_row_panels(&x, rows, k)),
                (Left::StripsT, to_row_panels(&xt, k, rows)),
            ];
            for (left, operand) in &lefts {
                let mut first: Option<Vec<Vec<u64>>> = None;
                for wide in [false, true] {
                    for threads in [1, 2, 3] {
                        let mut y = vec![f32::NAN; rows * n];
                        let mut packed = vec![f32::NAN; panels * rows * PANEL];
                        let mut squares = vec![f64::NAN; panels];
                        let mut columns = vec![0.25f32; panels * PANEL];
                        let extras = Extras {
                            packed: Some(&mut packed),
                            squares: Some(&mut squares),
                            mask: Some(&mask),
                            column_sums: Some(&mut columns),
                        };
                        dense_on(
                            layer.view(),
                            *left,
                            operand,
                            rows,
                            Some(&mut y),
                            extras,
                            true,
                            threads,
                            wide,
                        );
                        let bits32 = |v: &[f32]| v.iter().map(|f| u64::from(f.to_bits())).collect();
                        let got: Vec<Vec<u64>> = vec![
                            bits32(&y),
                            bits32(&packed),
                            squares.iter().map(|f| f.to_bits()).collect(),
                            bits32(&columns),
                        ];
                        assert!(squares.iter().all(|s| s.is_finite()));
                        match &first {
                            None => first = Some(got),
                            Some(want) => assert!(
                                &got == want,
                                "{rows}×{k}×{n} {left:?}: wide {wide}, {threads} threads differ"
                            ),
                        }
                    }
                }
            }
        }
    }

    /// The packed copy the kernel stores alongside its output is exactly
    /// what packing that output afterwards gives (padding included), on one
    /// task or several; `transpose` and `pack_weights` agree with the
    /// element-by-element definition.
    #[test]
    fn packed_outputs_and_packings_match_their_definitions() {
        if !kernel_here("packed_outputs_and_packings_match_their_definitions") {
            return;
        }
        let (inputs, outputs, rows) = (37, 40, 61);
        let w: Vec<f32> = (0..outputs * inputs)
            .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let b: Vec<f32> = (0..outputs).map(|i| i as f32 / 40.0 - 0.5).collect();
        let x: Vec<f32> = (0..rows * inputs)
            .map(|i| ((i * 104729) % 97) as f32 / 48.0 - 1.0)
            .collect();
        let mut layer = Layer::default();
        layer.pack_weights(inputs, outputs, &w, Some(&b));
        assert_eq!(layer.panels, Layer::pack(inputs, outputs, &w, &b).panels);
        for o in 0..outputs {
            for k in 0..inputs {
                assert_eq!(
                    layer.panels[((o / PANEL) * inputs + k) * PANEL + o % PANEL],
                    w[o * inputs + k]
                );
            }
        }
        packed_copy_matches_packing_the_output(&layer, &x, rows, outputs);
        row_panels_hold_the_outputs_and_their_squares(&layer, &x, rows, outputs);
        let (by_rows, strips) = strips_give_the_bits_of_rows(&layer, &x, rows, inputs);
        a_relu_mask_and_column_sums_match_a_loop(&layer, &strips, &by_rows, rows);
        an_overflowing_square_makes_its_panel_sum_infinite(&layer, &x, rows);
        transpose_matches_its_definition();
    }

    /// `packed_outputs_and_packings_match_their_definitions`: the packed
    /// copy stored beside the output is what packing the output gives, and
    /// the output is `dense`'s, on one task or several.
    fn packed_copy_matches_packing_the_output(
        layer: &Layer,
        x: &[f32],
        rows: usize,
        outputs: usize,
    ) {
        for threads in [1, 3] {
            let mut y = vec![0.0f32; rows * outputs];
            let mut packed = Layer::default();
            packed.prepare_rows(rows, outputs);
            dense_threads_packed(layer, x, rows, &mut y, Some(&mut packed), true, threads);
            let mut want = Layer::default();
            want.pack_rows(rows, outputs, &y);
            assert_eq!(packed.panels, want.panels, "{threads} threads");
            assert_eq!(want.panels.len(), 3 * rows * PANEL);
            let mut plain = vec![0.0f32; rows * outputs];
            dense(layer, x, rows, &mut plain, true);
            assert_eq!(y, plain);
        }
    }

    /// Outputs in row panels only, with sums of squares per panel: the
    /// values `dense` writes, the sums of their squares, and the same
    /// bits on one task or several.
    fn row_panels_hold_the_outputs_and_their_squares(
        layer: &Layer,
        x: &[f32],
        rows: usize,
        outputs: usize,
    ) {
        let mut sums_one_task = Vec::new();
        for threads in [1, 3] {
            let mut packed = vec![f32::NAN; 3 * rows * PANEL];
            let mut sums = vec![f64::NAN; 3];
            let extras = Extras {
                packed: Some(&mut packed),
                squares: Some(&mut sums),
                ..Extras::default()
            };
            dense_into_panels(layer.view(), Left::Rows, x, rows, extras, threads);
            let mut plain = vec![0.0f32; rows * outputs];
            dense(layer, x, rows, &mut plain, false);
            assert_eq!(packed, to_row_panels(&plain, rows, outputs));
            assert_eq!(from_row_panels(&packed, rows, outputs), plain);
            for (p, &got) in sums.iter().enumerate() {
                let want: f64 = plain
                    .chunks_exact(outputs)
                    .flat_map(|row| &row[p * PANEL..((p + 1) * PANEL).min(outputs)])
                    .map(|&v| f64::from(v) * f64::from(v))
                    .sum();
                assert!(
                    (got - want).abs() <= 1e-5 * want,
                    "panel {p}: {got} vs {want}"
                );
            }
            if threads == 1 {
                sums_one_task = sums;
            } else {
                assert_eq!(sums, sums_one_task);
            }
        }
    }

    /// The left operand read from row panels, or from the row panels of
    /// its transpose, gives the same bits as read by rows: the same
    /// FMA chains in the same k order. 61 rows and 37 inputs leave
    /// partial strips on both sides. Returns the output by rows and the
    /// left operand's row panels.
    fn strips_give_the_bits_of_rows(
        layer: &Layer,
        x: &[f32],
        rows: usize,
        inputs: usize,
    ) -> (Vec<f32>, Vec<f32>) {
        let mut by_rows = vec![0.0f32; 3 * rows * PANEL];
        let extras = Extras {
            packed: Some(&mut by_rows),
            ..Extras::default()
        };
        dense_into_panels(layer.view(), Left::Rows, x, rows, extras, 1);
        let strips = to_row_panels(x, rows, inputs);
        let mut xt = vec![0.0f32; rows * inputs];
        transpose(x, rows, inputs, &mut xt, rows);
        let strips_t = to_row_panels(&xt, inputs, rows);
        for threads in [1, 3] {
            for (left, a) in [(Left::Strips, &strips), (Left::StripsT, &strips_t)] {
                let mut got = vec![f32::NAN; 3 * rows * PANEL];
                let extras = Extras {
                    packed: Some(&mut got),
                    ..Extras::default()
                };
                dense_into_panels(layer.view(), left, a, rows, extras, threads);
                assert_eq!(got, by_rows, "{left:?}, {threads} threads");
            }
        }
        (by_rows, strips)
    }

    /// Masked by a ReLU's output (off where it is ≤ 0, on where it is
    /// NaN), with column sums added in row order onto what was there:
    /// the masked values, and the sums a loop over the rows gives, to
    /// the bit, on one task or several.
    fn a_relu_mask_and_column_sums_match_a_loop(
        layer: &Layer,
        strips: &[f32],
        by_rows: &[f32],
        rows: usize,
    ) {
        let relu_out: Vec<f32> = (0..3 * rows * PANEL)
            .map(|i| match i % 7 {
                0 => 0.0,
                1 => -1.0,
                2 => f32::NAN,
                _ => 0.5,
            })
            .collect();
        let want: Vec<f32> = by_rows
            .iter()
            .zip(&relu_out)
            .map(|(&v, &a)| if a <= 0.0 { 0.0 } else { v })
            .collect();
        let mut want_sums = vec![0.25f32; 3 * PANEL];
        for (p, strip) in want.chunks_exact(rows * PANEL).enumerate() {
            for row in strip.chunks_exact(PANEL) {
                for (s, &v) in want_sums[p * PANEL..(p + 1) * PANEL].iter_mut().zip(row) {
                    *s += v;
                }
            }
        }
        for threads in [1, 3] {
            let mut got = vec![f32::NAN; 3 * rows * PANEL];
            let mut sums = vec![0.25f32; 3 * PANEL];
            let extras = Extras {
                packed: Some(&mut got),
                mask: Some(&relu_out),
                column_sums: Some(&mut sums),
                ..Extras::default()
            };
            dense_into_panels(layer.view(), Left::Strips, strips, rows, extras, threads);
            assert_eq!(got, want, "{threads} threads");
            assert_eq!(sums, want_sums, "{threads} threads");
        }
    }

    /// An output whose square overflows f32 makes its panel's sum
    /// infinite (training takes that as a non-finite gradient norm).
    fn an_overflowing_square_makes_its_panel_sum_infinite(layer: &Layer, x: &[f32], rows: usize) {
        let mut huge = x.to_vec();
        huge[3] = 1e30;
        let mut packed = vec![0.0f32; 3 * rows * PANEL];
        let mut sums = vec![0.0; 3];
        let extras = Extras {
            packed: Some(&mut packed),
            squares: Some(&mut sums),
            ..Extras::default()
        };
        dense_into_panels(layer.view(), Left::Rows, &huge, rows, extras, 1);
        assert!(sums.iter().all(|s| s.is_infinite()), "{sums:?}");
    }

    /// Whole 16 × 16 tiles (the AVX2 path) and partial ones, into a
    /// destination with and without padding between its rows.
    fn transpose_matches_its_definition() {
        for (rows, cols, dst_stride) in [(20, 37, 20), (13, 21, 13), (20, 37, 24)] {
            let m: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let mut t = vec![-1.0f32; cols * dst_stride];
            transpose(&m, rows, cols, &mut t, dst_stride);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(t[c * dst_stride + r], m[r * cols + c], "({r}, {c})");
                }
            }
        }
    }

    /// Packing `Wᵀ` from `W` in row panels, whole or one tile at a time
    /// (whole and partial tiles: 37 inputs and 40 outputs are not
    /// multiples of 16), gives what packing the row-major `W` gives; the
    /// row panels are `pack_rows`'s, and convert back without loss.
    #[test]
    fn packing_from_row_panels_matches_a_fresh_pack() {
        let (inputs, outputs) = (37, 40);
        let w0: Vec<f32> = (0..outputs * inputs).map(|i| i as f32).collect();
        let w1: Vec<f32> = w0.iter().map(|v| -v - 0.5).collect();
        let b: Vec<f32> = (0..outputs).map(|i| i as f32 / 8.0).collect();
        let strips0 = to_row_panels(&w0, outputs, inputs);
        let strips1 = to_row_panels(&w1, outputs, inputs);
        assert_eq!(from_row_panels(&strips1, outputs, inputs), w1);
        let mut rows = Layer::default();
        rows.pack_rows(outputs, inputs, &w1);
        assert_eq!(rows.panels, strips1);
        let mut forward = Layer::default();
        forward.pack_weights_from_row_panels(inputs, outputs, &strips0, &b);
        let mut want = Layer::default();
        want.pack_weights(inputs, outputs, &w0, Some(&b));
        assert!(forward == want);
        // Re-packed by two writers, the later row panels first.
        let (mut head, mut tail) = forward.strip_writer().split_at(2);
        for (s, strip) in strips1.chunks_exact(outputs * PANEL).enumerate().rev() {
            let writer = if s < 2 { &mut head } else { &mut tail };
            writer.repack_strip(s, strip);
        }
        want.pack_weights(inputs, outputs, &w1, Some(&b));
        assert!(forward == want);
    }

    /// A writer re-packs only the row panels it was split off with: the
    /// safety of splitting rests on it.
    #[test]
    #[should_panic]
    fn a_strip_writer_refuses_a_row_panel_it_does_not_own() {
        let (inputs, outputs) = (37, 40);
        let strips = to_row_panels(&vec![1.0; outputs * inputs], outputs, inputs);
        let mut forward = Layer::default();
        forward.pack_weights_from_row_panels(inputs, outputs, &strips, &[0.0; 40]);
        let (mut head, _tail) = forward.strip_writer().split_at(2);
        head.repack_strip(2, &strips[2 * outputs * PANEL..3 * outputs * PANEL]);
    }

    #[test]
    fn an_empty_batch_writes_nothing() {
        if !kernel_here("an_empty_batch_writes_nothing") {
            return;
        }
        let vs = VarStore::new(Device::Cpu);
        let native = NativeMlp::snapshot(&mlp(&vs, 9, 8, Activation::Relu))
            .unwrap()
            .expect("applies");
        // Zero rows: no input read, no output written, no panic on the
        // empty slices (a traversal round can have no requests).
        let mut out: Vec<f32> = Vec::new();
        native.forward_rows(&[], 0, &mut out);
        assert!(out.is_empty());
        // And a batch after it is unaffected by the empty call.
        let x = [0.5f32; 9];
        let mut one = [f32::NAN; 22];
        native.forward_rows(&x, 1, &mut one);
        let mut again = [f32::NAN; 22];
        native.forward_rows(&[], 0, &mut []);
        native.forward_rows(&x, 1, &mut again);
        assert!(one.iter().all(|v| v.is_finite()), "{one:?}");
        assert_eq!(one, again);
    }

    #[test]
    fn snapshot_declines_what_it_cannot_compute() {
        let vs = VarStore::new(Device::Cpu);
        assert!(NativeMlp::snapshot(&mlp(&vs, 9, 8, Activation::Gelu))
            .unwrap()
            .is_none());
        let mut traced = mlp(&vs, 9, 8, Activation::Relu);
        traced.trace().unwrap();
        assert!(NativeMlp::snapshot(&traced).unwrap().is_none());
    }
}
