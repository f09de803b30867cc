//! The CFR core: regret matching and sampling, the traversal RNG, the
//! traversals and their statistics, and the reservoir memories. No tch here:
//! networks are reached through the batched [`policy::Policy`] trait, so
//! everything can be tested with table policies.

pub mod interleaved;
pub mod memory;
pub mod policy;
pub mod regret;
pub mod rng;
pub mod stats;
pub mod traversal;
pub mod workers;

#[cfg(test)]
mod kuhn;
