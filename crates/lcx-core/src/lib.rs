//! lcx-core: everything of lcx that needs no libtorch. The Lost Cities
//! engine, the bots, CFR, trainer configs, experiment files and the runner
//! that runs their cells as child processes, the SQLite store, the reports
//! and the engine benches. The trainer (crates/lcx-trainer) builds on it;
//! nothing here can reach tch, because this crate does not depend on it.
//!
//! See ARCHITECTURE.md for the module map and the invariants between modules.

pub mod bench;
pub mod bots;
pub mod cfr;
pub mod config;
pub mod encoding;
pub mod escape;
pub mod experiment;
pub mod files;
pub mod game;
pub mod metrics;
pub mod names;
pub mod publish;
pub mod report;
pub mod sample;
pub mod session;
pub mod store;
pub mod system;
pub mod text;
pub mod toml_read;
