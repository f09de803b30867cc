//! Micro-benchmarks behind `lcx bench`: pure orchestration and reduction of
//! timings; the timed work itself lives in the modules it measures.

pub mod cachegrind;
pub mod engine;
pub mod forward;
pub mod peak;
pub mod peak_line;
pub mod process;
mod run_error;
pub mod trainer;
