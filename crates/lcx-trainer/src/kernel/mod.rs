//! lcx's own AVX2/FMA CPU kernel: weights packed into panels, the GEMM
//! micro-kernel and forwards (`native`, decision 0010), whole training
//! steps on plain slices (`native_train`, decision 0012), bf16
//! mixed-precision GEMMs chosen at run time (`bf16`, decision 0028), the
//! training step on them (`bf16_train`, decision 0029), and the one a run
//! holds (`step`).

pub mod bf16;
#[cfg(test)]
mod bf16_bench;
mod bf16_layout;
pub mod bf16_train;
#[cfg(target_arch = "x86_64")]
mod bf16_x86;
pub mod native;
pub mod native_train;
pub mod step;
