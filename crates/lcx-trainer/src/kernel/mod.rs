//! lcx's own AVX2/FMA CPU kernel: weights packed into panels, the GEMM
//! micro-kernel and forwards (`native`, decision 0010), and whole training
//! steps on plain slices (`native_train`, decision 0012).

pub mod native;
pub mod native_train;
