//! Picking the `k`-th set bit of a legal mask — the step every random
//! playout takes once per action — with a portable broadword select and, on
//! x86-64 CPUs that have a fast BMI2 `pdep`, a two-instruction one chosen at
//! run time (the release binary targets baseline x86-64, so it cannot assume
//! BMI2; a `-C target-cpu=x86-64-v3` build was ~40% faster on random games).

#[cfg(target_arch = "x86_64")]
use std::sync::atomic::{AtomicU8, Ordering};

use rand::Rng;

/// `SELECT_IN_BYTE[b][j]` = position of the `j`-th set bit of byte `b`.
static SELECT_IN_BYTE: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let (mut i, mut j) = (0, 0);
        while i < 8 {
            if (b >> i) & 1 == 1 {
                t[b][j] = i as u8;
                j += 1;
            }
            i += 1;
        }
        b += 1;
    }
    t
};

/// Byte `i` of the result = number of set bits in bytes `0..=i` of `mask`,
/// so the top byte is the popcount. Without hardware `popcnt` (baseline
/// x86-64) this costs what `count_ones` costs, and the select needs these
/// prefix sums anyway: one count serves both the random range and the select.
#[inline(always)]
fn byte_prefix_counts(mask: u64) -> u64 {
    let mut s = mask - ((mask >> 1) & 0x5555_5555_5555_5555);
    s = (s & 0x3333_3333_3333_3333) + ((s >> 2) & 0x3333_3333_3333_3333);
    ((s + (s >> 4)) & 0x0f0f_0f0f_0f0f_0f0f).wrapping_mul(0x0101_0101_0101_0101)
}

/// The `k`-th set bit of `mask` given its [`byte_prefix_counts`] `sums`; `k`
/// must be below the popcount.
///
/// Branch-free broadword select (Vigna, "Broadword implementation of
/// rank/select queries", 2008): a loop clearing `k` low bits mispredicts on
/// its random trip count, which showed up as ~15% of a random playout.
#[inline(always)]
fn select_with_counts(mask: u64, sums: u64, k: u32) -> usize {
    const L8: u64 = 0x0101_0101_0101_0101;
    const H8: u64 = 0x8080_8080_8080_8080;
    let kk = (k as u64).wrapping_mul(L8);
    // High bit of each byte set where sums_i <= k: those bytes precede the
    // byte holding the answer; their count × 8 is that byte's bit offset.
    let le = (((kk | H8) - (sums & !H8)) ^ sums ^ kk) & H8;
    let place = (((le >> 7).wrapping_mul(L8) >> 53) & !7) as u32;
    let before = ((sums << 8) >> place) & 0xff;
    let byte = ((mask >> place) & 0xff) as usize;
    // Below 8 whenever k < popcount; the `& 7` only spares a bounds check.
    let rank = (k as usize).wrapping_sub(before as usize) & 7;
    place as usize + SELECT_IN_BYTE[byte][rank] as usize
}

/// The `k`-th set bit of `mask` (0-based, ascending), if there are more than
/// `k` bits set. Portable; see [`random_set_bit`] for the playout step.
#[inline]
pub fn nth_set_bit(mask: u64, k: u32) -> Option<usize> {
    let sums = byte_prefix_counts(mask);
    if k >= (sums >> 56) as u32 {
        return None;
    }
    Some(select_with_counts(mask, sums, k))
}

/// A uniformly random set bit of `mask` (bit i = action id i), or `None` when
/// it is 0. Draws exactly what
/// `nth_set_bit(mask, rng.random_range(0..mask.count_ones()))` draws and
/// returns the same bit, so seeded runs reproduce whichever implementation
/// the CPU gets.
#[inline]
pub fn random_set_bit<R: Rng + ?Sized>(mask: u64, rng: &mut R) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if fast_select_available() {
        // SAFETY: `fast_select_available` checked at run time that this CPU
        // has every feature `random_set_bit_bmi2` is compiled for.
        return unsafe { x86::random_set_bit_bmi2(mask, rng) };
    }
    random_set_bit_portable(mask, rng)
}

/// [`random_set_bit`] without run-time dispatch (every architecture).
#[inline]
pub fn random_set_bit_portable<R: Rng + ?Sized>(mask: u64, rng: &mut R) -> Option<usize> {
    let sums = byte_prefix_counts(mask);
    let n = (sums >> 56) as u32;
    if n == 0 {
        return None;
    }
    let k = rng.random_range(0..n);
    Some(select_with_counts(mask, sums, k))
}

/// Whether [`random_set_bit`] uses the BMI2 path: the CPU has BMI1, BMI2,
/// POPCNT and LZCNT, and its `pdep` is not the microcoded one of AMD CPUs before Zen 3
/// (family < 0x19, incl. Hygon), whose latency grows with the mask's set bits
/// to well above the portable select's. Detected once, then one relaxed load.
/// Always `false` off x86-64.
#[inline]
pub fn fast_select_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // 0 = not probed yet, 1 = no, 2 = yes.
        static CACHE: AtomicU8 = AtomicU8::new(0);
        match CACHE.load(Ordering::Relaxed) {
            0 => {
                let yes = x86::detect_fast_pdep();
                CACHE.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
                yes
            }
            v => v == 2,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    //! The BMI2 variants. Each is a `#[target_feature]` function: callers
    //! must have checked [`super::fast_select_available`] (or be compiled
    //! with the same features), which is what makes calling them sound.

    use std::arch::x86_64::{__cpuid, _pdep_u64};

    use rand::Rng;

    /// Checks the features the functions below are compiled for, then
    /// rules out the slow microcoded `pdep` of AMD before Zen 3.
    #[cold]
    pub(super) fn detect_fast_pdep() -> bool {
        if !(is_x86_feature_detected!("bmi1")
            && is_x86_feature_detected!("bmi2")
            && is_x86_feature_detected!("popcnt")
            && is_x86_feature_detected!("lzcnt"))
        {
            return false;
        }
        // Vendor string (EBX, EDX, ECX of leaf 0) and display family.
        let v = __cpuid(0);
        let amd_like = matches!(
            (v.ebx, v.edx, v.ecx),
            // "AuthenticAMD", "HygonGenuine"
            (0x6874_7541, 0x6974_6e65, 0x444d_4163) | (0x6f67_7948, 0x6e65_476e, 0x656e_6975)
        );
        if !amd_like {
            return true;
        }
        let eax = __cpuid(1).eax;
        let base = (eax >> 8) & 0xf;
        let family = if base == 0xf {
            base + ((eax >> 20) & 0xff)
        } else {
            base
        };
        family >= 0x19
    }

    /// The `k`-th set bit of `mask` (`k` below its popcount) with `pdep` +
    /// `tzcnt`: deposit a single bit at the `k`-th set position of `mask`.
    #[target_feature(enable = "bmi1,bmi2,popcnt,lzcnt")]
    #[inline]
    pub(crate) fn select_bmi2(mask: u64, k: u32) -> usize {
        _pdep_u64(1u64 << k, mask).trailing_zeros() as usize
    }

    /// [`super::random_set_bit`]'s BMI2 path: same draws, same result.
    /// Called from a function compiled with the same features it is safe
    /// (and inlined); see `bench::engine::play_random_game`.
    ///
    /// # Safety
    ///
    /// Elsewhere the CPU must support BMI1, BMI2, POPCNT and LZCNT — check
    /// [`super::fast_select_available`] (or `is_x86_feature_detected!`) first.
    #[target_feature(enable = "bmi1,bmi2,popcnt,lzcnt")]
    #[inline]
    pub fn random_set_bit_bmi2<R: Rng + ?Sized>(mask: u64, rng: &mut R) -> Option<usize> {
        let n = mask.count_ones();
        if n == 0 {
            return None;
        }
        let k = rng.random_range(0..n);
        Some(select_bmi2(mask, k))
    }
}
