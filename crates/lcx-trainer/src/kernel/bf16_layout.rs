//! The shapes both halves of lcx's bf16 GEMMs share (decision 0028): the
//! rounding, a matrix read as stored or transposed, the packed `B`, where
//! a product writes, and the cache blocking. bf16.rs packs and
//! dispatches, bf16_x86.rs holds the SIMD kernels; both read these, so the
//! kernels need nothing of the dispatcher.

/// Output columns per panel of a packed `B`: sixteen f32 accumulators, one
/// 512-bit register or two 256-bit ones.
pub const PANEL: usize = 16;

/// The bf16 bits of the f32 bits `u`, as Intel's `convert_fp32_to_bfloat16`
/// defines them: NaN keeps its sign and top payload bits and has its quiet
/// bit set; zero and subnormals become a zero of their sign; everything
/// else rounds to nearest, ties to even (which carries into infinity above
/// the largest bf16). Written with selects and a wrapping add (a NaN's
/// rounded bits, computed and thrown away, wrap) so that loops over it
/// vectorise.
#[inline(always)]
pub fn round_bits(u: u32) -> u16 {
    let abs = u & 0x7FFF_FFFF;
    let rounded = u.wrapping_add(0x7FFF + ((u >> 16) & 1)) >> 16;
    let quiet = (u >> 16) | 0x40;
    let zero = (u >> 16) & 0x8000;
    let bits = if abs > 0x7F80_0000 {
        quiet
    } else if abs < 0x0080_0000 {
        zero
    } else {
        rounded
    };
    bits as u16
}

/// One 32-bit word of two bf16: `lo` (an even k) in the low half, `hi` (the
/// odd k after it) in the high half, the order `VDPBF16PS` pairs them in.
#[inline(always)]
pub(crate) fn pair(lo: f32, hi: f32) -> u32 {
    u32::from(round_bits(lo.to_bits())) | (u32::from(round_bits(hi.to_bits())) << 16)
}

/// A row-major f32 matrix as a GEMM operand, read as stored or transposed
/// (no copy either way: the packing reads it so).
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub(super) data: &'a [f32],
    /// The stored shape: element `(r, c)` at `r·cols + c`.
    rows: usize,
    cols: usize,
    pub(super) transposed: bool,
}

impl<'a> MatRef<'a> {
    /// The `rows × cols` matrix stored row-major in `data`.
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Self {
        assert_eq!(data.len(), rows * cols, "a {rows} × {cols} matrix");
        Self {
            data,
            rows,
            cols,
            transposed: false,
        }
    }

    /// The same storage read as its transpose.
    pub fn t(self) -> Self {
        Self {
            transposed: !self.transposed,
            ..self
        }
    }

    /// Rows of the matrix as read.
    pub fn rows(&self) -> usize {
        if self.transposed {
            self.cols
        } else {
            self.rows
        }
    }

    /// Columns of the matrix as read.
    pub fn cols(&self) -> usize {
        if self.transposed {
            self.rows
        } else {
            self.cols
        }
    }

    /// Element `(r, c)` of the matrix as read.
    #[inline]
    pub fn at(&self, r: usize, c: usize) -> f32 {
        if self.transposed {
            self.data[c * self.cols + r]
        } else {
            self.data[r * self.cols + c]
        }
    }
}

/// Whether a GEMM overwrites `C` or adds its product to it. The product is
/// summed from zero and then added to `C` (one rounding), in every kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    Overwrite,
    Accumulate,
}

/// `B` (`k × n`) rounded to bf16, in `ceil(n / 16)` panels of 16 columns.
/// Panel `p` is `ceil(k / 2)` pair rows of 16 words: word
/// `(p·ceil(k/2) + q)·16 + j` holds `B[2q][16p + j]` in its low half and
/// `B[2q + 1][16p + j]` in its high half, zero past `k` (the pad of an odd
/// `k`, whose zero products add nothing) and past `n`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedB {
    pub(super) k: usize,
    pub(super) n: usize,
    pub(super) words: Vec<u32>,
}

impl PackedB {
    pub fn k(&self) -> usize {
        self.k
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// The packed words, in the layout the type's comment gives.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    pub(super) fn pairs(&self) -> usize {
        self.k.div_ceil(2)
    }

    pub(super) fn panels(&self) -> usize {
        self.n.div_ceil(PANEL)
    }

    /// `B[kk][j]` as the kernels read it.
    pub(super) fn at(&self, kk: usize, j: usize) -> f32 {
        let word = self.words[((j / PANEL) * self.pairs() + kk / 2) * PANEL + j % PANEL];
        f32::from_bits((word >> (16 * (kk % 2))) << 16)
    }
}

/// Rows per cache chunk of the AVX2 kernel (8 tiles of 6 rows): 48 rows of
/// 512 f32 are 96 KB, which stay in L2 while every panel passes over them.
pub(super) const AVX2_CHUNK: usize = 48;
/// Rows per cache chunk of the AVX-512 kernel (8 tiles of 8 rows): 64 rows
/// of 256 words are 64 KB.
pub(super) const AVX512_CHUNK: usize = 64;
/// Panels one AVX-512 tile takes at once.
pub(super) const AVX512_GROUP: usize = 3;

/// Where a GEMM writes: `C`, row-major with `ldc` floats per row.
pub(super) struct Out {
    pub c: *mut f32,
    pub ldc: usize,
}

// SAFETY: tasks sharing an `Out` write disjoint rows or panels of `C`.
unsafe impl Sync for Out {}
