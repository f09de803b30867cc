//! The traversal's random numbers: a 32-bit linear congruential generator
//! (docs/deep-cfr.md §5.1). It is deliberately tiny and fully specified so that the
//! recursive and interleaved schedulers can consume exactly the same draws in
//! the same order and therefore produce identical samples.

/// `s ← s·1664525 + 1013904223 (mod 2³²)`; a zero seed becomes 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lcg {
    state: u32,
}

impl Lcg {
    /// Seeds from the low 32 bits of `seed` (0 → 1).
    pub fn new(seed: u64) -> Self {
        let s = seed as u32; // truncation intended: the generator is 32-bit
        Self {
            state: if s == 0 { 1 } else { s },
        }
    }

    /// Advances and returns the new state.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.state = self
            .state
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        self.state
    }

    /// A double in [0, 1): the next state divided by 2³².
    #[inline]
    pub fn next_double(&mut self) -> f64 {
        f64::from(self.next_u32()) / 4_294_967_296.0
    }

    /// A uniform index below `n` (`n` > 0) by modulo, as the spec draws it.
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        self.next_u32() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_recurrence_and_maps_zero_to_one() {
        let mut a = Lcg::new(0);
        let mut b = Lcg::new(1);
        assert_eq!(a, b);
        assert_eq!(a.next_u32(), 1_664_525u32.wrapping_add(1_013_904_223));
        b.next_u32();
        let expected = b.state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        assert_eq!(b.next_u32(), expected);
        let mut c = Lcg::new(12345);
        for _ in 0..1000 {
            let d = c.next_double();
            assert!((0.0..1.0).contains(&d));
        }
        // Only the low 32 bits seed the generator.
        assert_eq!(Lcg::new(7), Lcg::new(7 + (1u64 << 32)));
    }
}
