//! lcx: declarative speed experiments for an embedded Deep CFR trainer.
//!
//! See ARCHITECTURE.md for the module map and the invariants between modules.

pub mod bench;
pub mod bots;
pub mod cfr;
pub mod cli;
pub mod config;
pub mod encoding;
pub mod experiment;
pub mod game;
pub mod metrics;
pub mod report;
pub mod store;
pub mod trainer;
