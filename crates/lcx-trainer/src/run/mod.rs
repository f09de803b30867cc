//! A training run: one iteration (`train`: traversals, the three trainings,
//! evaluation), the traversals over the networks (`workers`), a whole run
//! with its directory and metric lines (`session`), checkpoints and
//! evaluation against bots.

pub mod checkpoint;
pub mod eval;
pub(crate) mod mirror;
mod rotate;
pub mod session;
pub mod train;
pub mod workers;
