//! The x86-64 kernels of [`crate::kernel::bf16`]: the AVX2/FMA kernel,
//! which widens bf16 to f32 in registers, and the AVX512_BF16 kernel on
//! `VDPBF16PS`, with the packings that use AVX-512 instructions.
//!
//! Both walk `C` like the f32 kernel (decisions 0010 and 0022): rows in
//! cache chunks, each panel (or group of three) of `B` passing over a
//! chunk in tiles of a few rows whose accumulators stay in registers, the
//! whole k loop in one pass (k-blocking measured slower for the f32
//! kernel, decision 0012).

use std::arch::x86_64::*;
use std::ops::Range;

use super::bf16_layout::{
    pair, round_bits, MatRef, Out, PackedB, Update, AVX2_CHUNK, AVX512_CHUNK, AVX512_GROUP, PANEL,
};
use super::native::{row_blocks, transpose8_registers as transpose8};

/// Rows per AVX2 tile: 6 rows × 2 registers = 12 accumulators, plus the
/// two widened `B` registers, the broadcast and the high-half mask, fill
/// AVX2's 16 registers.
const AVX2_ROWS: usize = 6;
/// Rows per AVX-512 tile: 8 rows × 3 panels = 24 accumulators of the 32
/// registers, three `B` registers and a broadcast; per pair of k, three
/// loads and eight broadcasts per 24 `VDPBF16PS` (the f32 kernel's 8 × 48
/// tile, which reached 84 % of the FMA peak).
const AVX512_ROWS: usize = 8;

/// Eight f32 rounded to bf16 as `round_bits` does, each result in the
/// high half of its lane (low half zero): the f32 of the bf16.
#[target_feature(enable = "avx2")]
#[inline]
fn round8(x: __m256) -> __m256i {
    let u = _mm256_castps_si256(x);
    let high = _mm256_set1_epi32(0xFFFF_0000u32 as i32);
    let abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFF_FFFF));
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(u), _mm256_set1_epi32(1));
    let bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF));
    let rounded = _mm256_and_si256(_mm256_add_epi32(u, bias), high);
    let quiet = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x0040_0000)), high);
    let zero = _mm256_and_si256(u, _mm256_set1_epi32(0x8000_0000u32 as i32));
    // `abs` has its sign bit clear, so the signed compares are unsigned.
    let nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F80_0000));
    let tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x0080_0000), abs);
    _mm256_blendv_epi8(_mm256_blendv_epi8(rounded, quiet, nan), zero, tiny)
}

/// `dst[i] = round(src[i])`, widened back (the AVX2 kernel's `A` as
/// stored: one pass, rather than a copy and then a pass over the copy).
///
/// # Safety
/// AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn round_into_avx2(src: &[f32], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len());
    let whole = src.len() / 8 * 8;
    for i in (0..whole).step_by(8) {
        let r = round8(_mm256_loadu_ps(src.as_ptr().add(i)));
        _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), r);
    }
    for (d, x) in dst[whole..].iter_mut().zip(&src[whole..]) {
        *d = f32::from_bits(u32::from(round_bits(x.to_bits())) << 16);
    }
}

/// `dst[r·k + kk] = round(s[kk·m + r])`: the transposed `A` (`s` stored
/// `k × m`) widened for the AVX2 kernel. Blocks of 8 output rows walk
/// the whole k range, so each output row is written in order, a line at
/// a time; a 16 × 16 blocking wrote 16 lines 4 KB apart at once (rows of
/// 1,024 k), more than an L1 set holds, and ran 5 × slower.
///
/// # Safety
/// AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn widened_transposed_avx2(s: &[f32], k: usize, m: usize, dst: &mut [f32]) {
    assert!(s.len() == k * m && dst.len() == m * k);
    let (m8, k8) = (m / 8 * 8, k / 8 * 8);
    for r0 in (0..m8).step_by(8) {
        for k0 in (0..k8).step_by(8) {
            let rows: [__m256; 8] = std::array::from_fn(|i| {
                _mm256_castsi256_ps(round8(_mm256_loadu_ps(s.as_ptr().add((k0 + i) * m + r0))))
            });
            for (i, v) in transpose8(rows).into_iter().enumerate() {
                _mm256_storeu_ps(dst.as_mut_ptr().add((r0 + i) * k + k0), v);
            }
        }
    }
    // The edges: rows past the last whole block of 8, then k likewise.
    let one = |x: f32| f32::from_bits(u32::from(round_bits(x.to_bits())) << 16);
    for r in 0..m {
        let from = if r < m8 { k8 } else { 0 };
        for kk in from..k {
            dst[r * k + kk] = one(s[kk * m + r]);
        }
    }
}

/// Sixteen f32 as sixteen bf16 in order, as one 256-bit vector (the
/// words of eight pairs).
#[target_feature(enable = "avx2")]
#[inline]
fn bf16x16_avx2(lo: __m256, hi: __m256) -> __m256i {
    let a = _mm256_srli_epi32::<16>(round8(lo));
    let b = _mm256_srli_epi32::<16>(round8(hi));
    // Packs per 128-bit half (a's four, b's four, a's next four, b's
    // next four); the permute puts the halves in order.
    _mm256_permute4x64_epi64::<0xD8>(_mm256_packus_epi32(a, b))
}

/// [`PackedB`]'s layout for `b` with AVX2 (hosts without
/// AVX512_BF16), every word written (padding included); `words` is sized
/// for it.
///
/// # Safety
/// AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn pack_b_avx2(b: MatRef<'_>, words: &mut [u32]) {
    let (k, n) = (b.rows(), b.cols());
    let kq = k.div_ceil(2);
    assert_eq!(words.len(), n.div_ceil(PANEL) * kq * PANEL);
    let data = b.data;
    let tail = |p: usize, q: usize, words: &mut [u32]| {
        // One pair row of one panel in plain Rust, for the edges, its
        // padding columns included (the buffer is not zeroed first).
        for jj in 0..PANEL {
            let j = p * PANEL + jj;
            let at = |kk: usize| if kk < k && j < n { b.at(kk, j) } else { 0.0 };
            words[(p * kq + q) * PANEL + jj] = pair(at(2 * q), at(2 * q + 1));
        }
    };
    if b.transposed {
        // `B[kk][j]` is the stored `W[j][kk]`: 16 floats of a row of `W`
        // are the words of eight pair rows of its column; two 8 × 8
        // transposes turn 16 rows' of them into eight pair rows of a panel.
        for p in 0..n / PANEL {
            let mut q0 = 0;
            while 2 * q0 + 16 <= k {
                let mut v = [[_mm256_setzero_ps(); 8]; 2];
                for jj in 0..PANEL {
                    let src = data.as_ptr().add((p * PANEL + jj) * k + 2 * q0);
                    let w = bf16x16_avx2(_mm256_loadu_ps(src), _mm256_loadu_ps(src.add(8)));
                    v[jj / 8][jj % 8] = _mm256_castsi256_ps(w);
                }
                let (t0, t1) = (transpose8(v[0]), transpose8(v[1]));
                for qq in 0..8 {
                    let dst = words.as_mut_ptr().add((p * kq + q0 + qq) * PANEL);
                    _mm256_storeu_ps(dst.cast(), t0[qq]);
                    _mm256_storeu_ps(dst.add(8).cast(), t1[qq]);
                }
                q0 += 8;
            }
            for q in q0..kq {
                tail(p, q, words);
            }
        }
        if n % PANEL != 0 {
            for q in 0..kq {
                tail(n / PANEL, q, words);
            }
        }
        return;
    }
    // Stored as read: stored rows `2q` and `2q + 1` give pair row `q`.
    // Blocks of pair rows ([`PAIR_BLOCK`]) go over every panel, so the
    // stored rows are read in order and each panel gets a run of
    // consecutive pair rows.
    for q0 in (0..k / 2).step_by(PAIR_BLOCK) {
        for p in 0..n / PANEL {
            for q in q0..(q0 + PAIR_BLOCK).min(k / 2) {
                let even = data.as_ptr().add(2 * q * n + p * PANEL);
                let odd = even.add(n);
                let dst = words.as_mut_ptr().add((p * kq + q) * PANEL);
                for h in 0..2 {
                    let e = _mm256_srli_epi32::<16>(round8(_mm256_loadu_ps(even.add(8 * h))));
                    let o = round8(_mm256_loadu_ps(odd.add(8 * h)));
                    _mm256_storeu_si256(dst.add(8 * h).cast(), _mm256_or_si256(e, o));
                }
            }
        }
    }
    for p in 0..n / PANEL {
        if k % 2 == 1 {
            tail(p, k / 2, words);
        }
    }
    if n % PANEL != 0 {
        for q in 0..kq {
            tail(n / PANEL, q, words);
        }
    }
}

/// Pair rows per block of a packing that reads `B` as stored: 16 pair
/// rows are 32 stored rows (64 KB at 512 columns), and each panel gets
/// 1 KB of consecutive words per block. Walking every stored row once per
/// panel instead (a 2 KB stride) took twice as long.
const PAIR_BLOCK: usize = 16;

/// Sixteen words of two bf16 from two rows of 16 floats: `even[j]` in the
/// low half, `odd[j]` in the high half, each rounded by the hardware.
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
fn interleave(even: __m512, odd: __m512) -> __m512i {
    // SAFETY: `__m256bh` and `__m256i` are both 32 bytes of plain data;
    // every bit pattern is valid for both.
    let lo: __m256i = unsafe { std::mem::transmute(_mm512_cvtneps_pbh(even)) };
    // SAFETY: as above.
    let hi: __m256i = unsafe { std::mem::transmute(_mm512_cvtneps_pbh(odd)) };
    _mm512_or_si512(
        _mm512_cvtepu16_epi32(lo),
        _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(hi)),
    )
}

/// Thirty-two consecutive floats (zero past `count`) as sixteen words of
/// two bf16, rounded by the hardware.
///
/// # Safety
/// AVX-512F and AVX512_BF16; `p` points at `count` readable floats.
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
unsafe fn words16(p: *const f32, count: usize) -> __m512i {
    let lo = load_first(p, count);
    let hi = if count > 16 {
        load_first(p.add(16), count - 16)
    } else {
        _mm512_setzero_ps()
    };
    // The low half of the result comes from the second operand.
    std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo))
}

/// A 16 × 16 transpose of 32-bit lanes in registers: 32-bit and 64-bit
/// unpacks make 4 × 4 blocks inside each 128-bit lane, and two rounds of
/// 128-bit lane shuffles put the blocks in place (64 shuffles).
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose16(r: [__m512i; 16]) -> [__m512i; 16] {
    let mut a = [_mm512_setzero_si512(); 16];
    for i in (0..16).step_by(2) {
        a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    // b[4g + c], lane L: column 4L + c of rows 4g..4g + 4.
    let mut b = [_mm512_setzero_si512(); 16];
    for g in (0..16).step_by(4) {
        b[g] = _mm512_unpacklo_epi64(a[g], a[g + 2]);
        b[g + 1] = _mm512_unpackhi_epi64(a[g], a[g + 2]);
        b[g + 2] = _mm512_unpacklo_epi64(a[g + 1], a[g + 3]);
        b[g + 3] = _mm512_unpackhi_epi64(a[g + 1], a[g + 3]);
    }
    // Output row 4L + c is lane L of b[c], b[4 + c], b[8 + c], b[12 + c].
    let mut out = [_mm512_setzero_si512(); 16];
    for c in 0..4 {
        let s0 = _mm512_shuffle_i32x4::<0x44>(b[c], b[4 + c]);
        let s1 = _mm512_shuffle_i32x4::<0xEE>(b[c], b[4 + c]);
        let s2 = _mm512_shuffle_i32x4::<0x44>(b[8 + c], b[12 + c]);
        let s3 = _mm512_shuffle_i32x4::<0xEE>(b[8 + c], b[12 + c]);
        out[c] = _mm512_shuffle_i32x4::<0x88>(s0, s2);
        out[4 + c] = _mm512_shuffle_i32x4::<0xDD>(s0, s2);
        out[8 + c] = _mm512_shuffle_i32x4::<0x88>(s1, s3);
        out[12 + c] = _mm512_shuffle_i32x4::<0xDD>(s1, s3);
    }
    out
}

/// The first `count` (at most 16) floats at `p`, zero after them.
///
/// # Safety
/// AVX-512F; `p` points at `count` readable floats.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn load_first(p: *const f32, count: usize) -> __m512 {
    if count >= 16 {
        _mm512_loadu_ps(p)
    } else {
        _mm512_maskz_loadu_ps(((1u32 << count) - 1) as __mmask16, p)
    }
}

/// Stores the first `count` (at most 16) words of `v` at `p`.
///
/// # Safety
/// AVX-512F; `p` points at `count` writable words.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_first(p: *mut u32, count: usize, v: __m512i) {
    if count >= 16 {
        _mm512_storeu_si512(p.cast(), v);
    } else {
        _mm512_mask_storeu_epi32(p.cast(), ((1u32 << count) - 1) as __mmask16, v);
    }
}

/// `src` (one row of `k` floats) as `ceil(k / 2)` words of two bf16, the
/// last one's high half zero for an odd `k`: `VCVTNE2PS2BF16` writes the
/// bf16 of consecutive floats next to each other, which is that layout.
///
/// # Safety
/// AVX-512F and AVX512_BF16; `dst` holds `ceil(src.len() / 2)` words.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn pairs_avx512(src: &[f32], dst: &mut [u32]) {
    let k = src.len();
    assert_eq!(dst.len(), k.div_ceil(2));
    for i in (0..k).step_by(32) {
        let v = words16(src.as_ptr().add(i), k - i);
        store_first(dst.as_mut_ptr().add(i / 2), (k - i).min(32).div_ceil(2), v);
    }
}

/// [`PackedB`]'s layout for `b` (`k × n`), with the
/// hardware's rounding, every word written (padding included); `words` is
/// sized for it.
///
/// # Safety
/// AVX-512F and AVX512_BF16.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn pack_b_avx512(b: MatRef<'_>, words: &mut [u32]) {
    let (k, n) = (b.rows(), b.cols());
    let kq = k.div_ceil(2);
    let panels = n.div_ceil(PANEL);
    assert_eq!(words.len(), panels * kq * PANEL);
    let data = b.data;
    if b.transposed {
        // `B[kk][j]` is the stored `W[j][kk]`: 32 floats of a row of `W`
        // are the words of 16 pair rows of its column, and a 16 × 16
        // transpose turns a panel's 16 rows of them into 16 pair rows.
        for p in 0..panels {
            let rows = (n - p * PANEL).min(PANEL);
            for q0 in (0..kq).step_by(PANEL) {
                let v: [__m512i; 16] = std::array::from_fn(|jj| {
                    if jj < rows {
                        let start = (p * PANEL + jj) * k + 2 * q0;
                        words16(data.as_ptr().add(start), k - 2 * q0)
                    } else {
                        _mm512_setzero_si512()
                    }
                });
                for (qq, t) in transpose16(v).into_iter().enumerate().take(kq - q0) {
                    _mm512_storeu_si512(
                        words.as_mut_ptr().add((p * kq + q0 + qq) * PANEL).cast(),
                        t,
                    );
                }
            }
        }
        return;
    }
    // Stored as read (`k × n`): pair row `q` of a panel comes from stored
    // rows `2q` and `2q + 1`, in blocks as in [`pack_b_avx2`].
    for q0 in (0..kq).step_by(PAIR_BLOCK) {
        for p in 0..panels {
            let count = (n - p * PANEL).min(PANEL);
            for q in q0..(q0 + PAIR_BLOCK).min(kq) {
                let e = load_first(data.as_ptr().add(2 * q * n + p * PANEL), count);
                let o = if 2 * q + 1 < k {
                    load_first(data.as_ptr().add((2 * q + 1) * n + p * PANEL), count)
                } else {
                    _mm512_setzero_ps()
                };
                let dst = words.as_mut_ptr().add((p * kq + q) * PANEL);
                _mm512_storeu_si512(dst.cast(), interleave(e, o));
            }
        }
    }
}

/// The transposed `A` (`A[r][kk]` the stored `S[kk][r]`, `S` being
/// `k × m`) as rows of words of two bf16, with the hardware's rounding:
/// stored rows `2q` and `2q + 1` give word `q` of 16 output rows, and a
/// 16 × 16 transpose turns 16 such words into 16 words of each of the 16
/// rows. Blocks of 16 output rows walk the whole k range, so each output
/// row is written in order.
///
/// # Safety
/// AVX-512F and AVX512_BF16; `words` holds `m · ceil(k / 2)` words.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn pairs_transposed_avx512(s: &[f32], k: usize, m: usize, words: &mut [u32]) {
    let kq = k.div_ceil(2);
    assert!(s.len() == k * m && words.len() == m * kq);
    for r0 in (0..m).step_by(PANEL) {
        let count = (m - r0).min(PANEL);
        for q0 in (0..kq).step_by(PANEL) {
            let v: [__m512i; 16] = std::array::from_fn(|qq| {
                let q = q0 + qq;
                if q >= kq {
                    return _mm512_setzero_si512();
                }
                let e = load_first(s.as_ptr().add(2 * q * m + r0), count);
                let o = if 2 * q + 1 < k {
                    load_first(s.as_ptr().add((2 * q + 1) * m + r0), count)
                } else {
                    _mm512_setzero_ps()
                };
                interleave(e, o)
            });
            for (i, t) in transpose16(v).into_iter().enumerate().take(count) {
                store_first(words.as_mut_ptr().add((r0 + i) * kq + q0), kq - q0, t);
            }
        }
    }
}

/// One AVX2 tile: up to 6 rows of `A` against one panel of `B`.
struct Avx2Tile {
    /// Each row's first element in the widened `A` (only the first `MR`
    /// are read).
    a: [*const f32; AVX2_ROWS],
    k: usize,
    /// The panel's first pair row.
    b: *const u32,
    /// The tile's first element of `C`, rows `ldc` floats apart.
    c: *mut f32,
    ldc: usize,
    /// Real columns in the panel (at most 16).
    cols: usize,
    accumulate: bool,
}

/// Rows `rows` by panels `panels` of `C` on the AVX2 kernel, `a` being the
/// widened `A` (`k` floats a row).
///
/// # Safety
/// AVX2 and FMA; `out.c` holds the product's `m × b.n()` floats, of which
/// this block's are written by no other task; the ranges lie within the
/// product and `a` holds its `m × k` floats.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn block_avx2(
    a: &[f32],
    k: usize,
    b: &PackedB,
    out: &Out,
    update: Update,
    rows: Range<usize>,
    panels: Range<usize>,
) {
    let (n, kq) = (b.n(), k.div_ceil(2));
    assert!(a.len() >= rows.end * k && b.words().len() >= panels.end * kq * PANEL);
    for chunk in rows.clone().step_by(AVX2_CHUNK) {
        let chunk_rows = AVX2_CHUNK.min(rows.end - chunk);
        for p in panels.clone() {
            for (start, len) in row_blocks(chunk_rows, AVX2_ROWS) {
                let start = chunk + start;
                let t = Avx2Tile {
                    a: std::array::from_fn(|r| a.as_ptr().add((start + r.min(len - 1)) * k)),
                    k,
                    b: b.words().as_ptr().add(p * kq * PANEL),
                    c: out.c.add(start * out.ldc + p * PANEL),
                    ldc: out.ldc,
                    cols: (n - p * PANEL).min(PANEL),
                    accumulate: update == Update::Accumulate,
                };
                match len {
                    1 => micro_avx2::<1>(&t),
                    2 => micro_avx2::<2>(&t),
                    3 => micro_avx2::<3>(&t),
                    4 => micro_avx2::<4>(&t),
                    5 => micro_avx2::<5>(&t),
                    _ => micro_avx2::<6>(&t),
                }
            }
        }
    }
}

/// `MR` rows against one panel: for each pair row of `B`, a shift makes
/// its even-k bf16 eight f32 per register and an AND its odd-k ones, and
/// each row's element is broadcast and FMA'd in k order, so every output
/// is the reference GEMM's FMA chain (`gemm_reference` in bf16.rs) to
/// the bit.
///
/// # Safety
/// As [`block_avx2`], for the tile `t` describes.
// Not inlined: inlined into the tile walk, LLVM rebuilt each row's
// pointer from the tile's start (a compare, a move and a multiply per
// row) inside the k loop rather than keep the six pointers in registers;
// called, it reads them from the tile once.
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn micro_avx2<const MR: usize>(t: &Avx2Tile) {
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    let rows: [*const f32; MR] = std::array::from_fn(|r| t.a[r]);
    let high = _mm256_set1_epi32(0xFFFF_0000u32 as i32);
    macro_rules! k_step {
        ($w0:expr, $w1:expr, $kk:expr) => {{
            let (w0, w1) = ($w0, $w1);
            for (a, x) in acc.iter_mut().zip(rows) {
                let xv = _mm256_broadcast_ss(&*x.add($kk));
                a[0] = _mm256_fmadd_ps(xv, w0, a[0]);
                a[1] = _mm256_fmadd_ps(xv, w1, a[1]);
            }
        }};
    }
    let mut w = t.b;
    for q in 0..t.k / 2 {
        let v0 = _mm256_loadu_si256(w.cast());
        let v1 = _mm256_loadu_si256(w.add(8).cast());
        k_step!(
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v0)),
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v1)),
            2 * q
        );
        // Loaded again rather than kept: 12 accumulators, two operands,
        // the broadcast and the mask already fill the 16 registers, and
        // the AND takes its operand from memory.
        k_step!(
            _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(w.cast()), high)),
            _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(w.add(8).cast()), high)),
            2 * q + 1
        );
        w = w.add(PANEL);
    }
    if t.k % 2 == 1 {
        // The last k of an odd K: its pair row's high halves are the pad.
        k_step!(
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_loadu_si256(w.cast()))),
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_loadu_si256(w.add(8).cast()))),
            t.k - 1
        );
    }
    for (r, a) in acc.iter().enumerate() {
        let dst = t.c.add(r * t.ldc);
        let (mut v0, mut v1) = (a[0], a[1]);
        if t.cols == PANEL {
            if t.accumulate {
                v0 = _mm256_add_ps(_mm256_loadu_ps(dst), v0);
                v1 = _mm256_add_ps(_mm256_loadu_ps(dst.add(8)), v1);
            }
            _mm256_storeu_ps(dst, v0);
            _mm256_storeu_ps(dst.add(8), v1);
        } else {
            // The last panel of a width that is not a multiple of 16: only
            // the real columns are read and written.
            let mut tmp = [0.0f32; PANEL];
            if t.accumulate {
                std::ptr::copy_nonoverlapping(dst, tmp.as_mut_ptr(), t.cols);
                v0 = _mm256_add_ps(_mm256_loadu_ps(tmp.as_ptr()), v0);
                v1 = _mm256_add_ps(_mm256_loadu_ps(tmp.as_ptr().add(8)), v1);
            }
            _mm256_storeu_ps(tmp.as_mut_ptr(), v0);
            _mm256_storeu_ps(tmp.as_mut_ptr().add(8), v1);
            std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, t.cols);
        }
    }
}

/// One AVX-512 tile: up to 8 rows of `A` against up to 3 adjacent panels.
struct Avx512Tile {
    /// Each row's first word in the paired `A` (only the first `MR` are
    /// read).
    a: [*const u32; AVX512_ROWS],
    /// Pair rows (`ceil(k / 2)`).
    kq: usize,
    /// The first panel's first pair row; the next panel's is `kq · 16`
    /// words on.
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    /// Real columns in the tile's panels (at most 16 per panel).
    cols: usize,
    accumulate: bool,
}

/// Rows `rows` by panels `panels` of `C` on the AVX512_BF16 kernel, `a`
/// being the paired `A` (`ceil(k / 2)` words a row).
///
/// # Safety
/// AVX-512F and AVX512_BF16, and [`block_avx2`]'s conditions on the
/// operands.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn block_avx512(
    a: &[u32],
    k: usize,
    b: &PackedB,
    out: &Out,
    update: Update,
    rows: Range<usize>,
    panels: Range<usize>,
) {
    let (n, kq) = (b.n(), k.div_ceil(2));
    assert!(a.len() >= rows.end * kq && b.words().len() >= panels.end * kq * PANEL);
    macro_rules! rows {
        ($np:expr, $t:expr, $len:expr) => {
            match $len {
                1 => micro_avx512::<1, $np>($t),
                2 => micro_avx512::<2, $np>($t),
                3 => micro_avx512::<3, $np>($t),
                4 => micro_avx512::<4, $np>($t),
                5 => micro_avx512::<5, $np>($t),
                6 => micro_avx512::<6, $np>($t),
                7 => micro_avx512::<7, $np>($t),
                _ => micro_avx512::<8, $np>($t),
            }
        };
    }
    for chunk in rows.clone().step_by(AVX512_CHUNK) {
        let chunk_rows = AVX512_CHUNK.min(rows.end - chunk);
        for p in panels.clone().step_by(AVX512_GROUP) {
            let np = AVX512_GROUP.min(panels.end - p);
            for (start, len) in row_blocks(chunk_rows, AVX512_ROWS) {
                let start = chunk + start;
                let t = Avx512Tile {
                    a: std::array::from_fn(|r| a.as_ptr().add((start + r.min(len - 1)) * kq)),
                    kq,
                    b: b.words().as_ptr().add(p * kq * PANEL),
                    c: out.c.add(start * out.ldc + p * PANEL),
                    ldc: out.ldc,
                    cols: (n - p * PANEL).min(np * PANEL),
                    accumulate: update == Update::Accumulate,
                };
                match np {
                    1 => rows!(1, &t, len),
                    2 => rows!(2, &t, len),
                    _ => rows!(3, &t, len),
                }
            }
        }
    }
}

/// `MR` rows against `NP` (1 to 3) panels: per pair row, one `VDPBF16PS`
/// per row and panel, the row's word broadcast. The accumulators are three
/// arrays indexed only by constants and the row, as in the f32 kernel's
/// `micro512` (an array indexed by a panel loop kept them on the stack).
///
/// # Safety
/// As [`block_avx512`], for the tile `t` describes.
// Not inlined, as `micro_avx2`.
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline(never)]
unsafe fn micro_avx512<const MR: usize, const NP: usize>(t: &Avx512Tile) {
    let mut acc0 = [_mm512_setzero_ps(); MR];
    let mut acc1 = [_mm512_setzero_ps(); MR];
    let mut acc2 = [_mm512_setzero_ps(); MR];
    let rows: [*const u32; MR] = std::array::from_fn(|r| t.a[r]);
    let next = t.kq * PANEL;
    let bh = |v: __m512i| -> __m512bh {
        // SAFETY: both are 64 bytes of plain data; every bit pattern is
        // valid for both.
        unsafe { std::mem::transmute(v) }
    };
    let mut w = t.b;
    for q in 0..t.kq {
        let w0 = bh(_mm512_loadu_si512(w.cast()));
        let w1 = if NP >= 2 {
            bh(_mm512_loadu_si512(w.add(next).cast()))
        } else {
            w0
        };
        let w2 = if NP >= 3 {
            bh(_mm512_loadu_si512(w.add(2 * next).cast()))
        } else {
            w0
        };
        for r in 0..MR {
            let x = bh(_mm512_set1_epi32(*rows[r].add(q) as i32));
            acc0[r] = _mm512_dpbf16_ps(acc0[r], x, w0);
            if NP >= 2 {
                acc1[r] = _mm512_dpbf16_ps(acc1[r], x, w1);
            }
            if NP >= 3 {
                acc2[r] = _mm512_dpbf16_ps(acc2[r], x, w2);
            }
        }
        w = w.add(PANEL);
    }
    macro_rules! finish {
        ($j:expr, $acc:expr) => {{
            let j: usize = $j;
            let cols = t.cols.saturating_sub(j * PANEL).min(PANEL);
            let mask = ((1u32 << cols) - 1) as __mmask16;
            for r in 0..MR {
                let dst = t.c.add(r * t.ldc + j * PANEL);
                let mut v = $acc[r];
                if t.accumulate {
                    v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, dst), v);
                }
                _mm512_mask_storeu_ps(dst, mask, v);
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
    use super::*;

    /// `VCVTNE2PS2BF16`'s bf16 of each of `xs` (the CPU must have
    /// AVX512_BF16).
    pub(crate) fn hardware_rounding(xs: &[f32]) -> Vec<u16> {
        assert!(std::is_x86_feature_detected!("avx512bf16"));
        let mut out = Vec::with_capacity(xs.len());
        for chunk in xs.chunks(32) {
            let mut buf = [0.0f32; 32];
            buf[..chunk.len()].copy_from_slice(chunk);
            // SAFETY: AVX-512F and AVX512_BF16 (asserted); the transmute
            // is between two 64-byte plain-data types.
            let bits: [u16; 32] = unsafe { convert(&buf) };
            out.extend_from_slice(&bits[..chunk.len()]);
        }
        out
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn convert(buf: &[f32; 32]) -> [u16; 32] {
        let lo = _mm512_loadu_ps(buf.as_ptr());
        let hi = _mm512_loadu_ps(buf.as_ptr().add(16));
        std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo))
    }

    #[test]
    fn row_blocks_are_even_and_cover_every_row() {
        for max in [AVX2_ROWS, AVX512_ROWS] {
            for rows in 0..100 {
                let blocks: Vec<_> = row_blocks(rows, max).collect();
                assert_eq!(blocks.iter().map(|b| b.1).sum::<usize>(), rows);
                let mut next = 0;
                for &(start, len) in &blocks {
                    assert_eq!(start, next);
                    assert!((1..=max).contains(&len));
                    next += len;
                }
            }
        }
    }
}
