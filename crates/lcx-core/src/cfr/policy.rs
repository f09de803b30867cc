//! How the CFR core reaches networks: a batch of encoded info states in, a
//! batch of 22-vectors out. The trainer implements this over libtorch; tests
//! implement it with tables, so `cfr/` never imports tch.

/// Which network a query is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Net {
    /// Player `p`'s advantage network (predicted regrets).
    Advantage(u8),
    /// The shared strategy network (logits).
    Strategy,
}

impl Net {
    /// Position in the order adv0, adv1, strategy (players above 1 count as
    /// player 1, as everywhere the networks are indexed).
    pub fn index(self) -> usize {
        match self {
            Net::Advantage(p) => usize::from(p).min(1),
            Net::Strategy => 2,
        }
    }
}

/// A network query failed (the message says why, e.g. a libtorch error).
#[derive(Debug, thiserror::Error)]
#[error("policy evaluation failed: {0}")]
pub struct PolicyError(pub String);

/// A batched policy. `states` holds `rows` info states of the encoding's
/// dimension, row-major; `out` receives `rows` × 22 outputs.
pub trait Policy {
    // Every impl (the trainer's TorchPolicy and its Sync wrapper, the tests'
    // tables) writes this signature out again: Rust asks each impl to, so
    // the repeats are not logic to share.
    fn evaluate(
        &self,
        net: Net,
        states: &[f32],
        rows: usize,
        out: &mut [f32],
    ) -> Result<(), PolicyError>;

    /// True when every row's result is the same, to the bit, whatever
    /// batch it comes in. Only then may the batches' makeup depend on
    /// timing (games shared between workers) and results stay
    /// reproducible.
    fn batch_invariant(&self) -> bool {
        false
    }
}
