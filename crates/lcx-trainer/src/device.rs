//! Which libtorch we run on and which devices it can reach.

use std::time::Instant;

use tch::Tensor;
/// The device and element types callers name (the CLI links no `tch` of its own).
pub use tch::{Device, Kind};

use crate::TrainerError;

/// The PyTorch/libtorch version lcx was built against, read by `build.rs`
/// from the libtorch folder (`version.py` of a pip install, or
/// `build-version` of a standalone libtorch).
pub fn torch_version() -> &'static str {
    env!("LCX_TORCH_VERSION")
}

/// True when libtorch can see at least one CUDA device. This loads the CUDA
/// runtime (when linked), so it is not free; call it once per process.
pub fn cuda_available() -> bool {
    tch::Cuda::is_available()
}

/// Number of visible CUDA devices (0 without CUDA).
pub fn cuda_device_count() -> usize {
    usize::try_from(tch::Cuda::device_count()).unwrap_or(0)
}

/// libtorch's (intra-op, inter-op) thread counts for this process.
pub fn torch_threads() -> (i32, i32) {
    (tch::get_num_threads(), tch::get_num_interop_threads())
}

/// Sets libtorch's intra-op thread count for this process.
pub fn set_torch_threads(n: usize) {
    tch::set_num_threads(i32::try_from(n.max(1)).unwrap_or(i32::MAX));
}

/// Resolves `auto | cpu | cuda | cuda:N` (case-insensitive) to a device;
/// `auto` is CUDA when available. Asking for CUDA without it is an error.
pub fn resolve(spec: &str) -> Result<tch::Device, TrainerError> {
    let lower = spec.trim().to_ascii_lowercase();
    let index = match lower.as_str() {
        "cpu" => return Ok(tch::Device::Cpu),
        "auto" => {
            return Ok(if cuda_available() {
                tch::Device::Cuda(0)
            } else {
                tch::Device::Cpu
            })
        }
        "cuda" => 0,
        other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(i)) => i,
            _ => return Err(TrainerError::BadDevice(spec.to_string())),
        },
    };
    let available = if cuda_available() {
        cuda_device_count()
    } else {
        0
    };
    if index >= available {
        return Err(TrainerError::CudaUnavailable {
            requested: spec.to_string(),
            available,
        });
    }
    Ok(tch::Device::Cuda(index))
}

/// Waits for queued kernels on `device` so that wall-clock timings are real.
pub fn synchronize(device: tch::Device) {
    if let tch::Device::Cuda(i) = device {
        tch::Cuda::synchronize(i64::try_from(i).unwrap_or(0));
    }
}

/// The best GFLOP/s of `reps` timed `n × n` FP32 matrix products on
/// `device` (after one untimed), with how far the tries lay apart (max /
/// min − 1): a ceiling is the best try, as with the host's FMA probe, and
/// the spread says how steady the device was meanwhile. On a CPU it
/// cross-checks `bench peak`'s FMA loop (libtorch's GEMM may use AVX-512
/// where lcx's kernels use AVX2).
///
/// `kind` is the precision of the product: `Float` is FP32 as libtorch runs
/// it by default (cuBLAS without TF32 tensor cores, libtorch's default), the
/// ceiling of an fp32 arm; `Half` runs on a GPU's FP16 tensor cores, the
/// ceiling of an AMP arm, whose autocast products are FP16.
pub fn matmul_gflops(
    device: Device,
    n: i64,
    reps: usize,
    kind: Kind,
) -> Result<(f64, f64), tch::TchError> {
    let _guard = tch::no_grad_guard();
    let opts = (kind, device);
    let a = Tensor::f_randn([n, n], opts)?;
    let b = Tensor::f_randn([n, n], opts)?;
    let _ = a.f_matmul(&b)?;
    synchronize(device);
    let mut rates = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        let c = a.f_matmul(&b)?;
        synchronize(device);
        let seconds = start.elapsed().as_secs_f64();
        drop(c);
        rates.push(2.0 * (n as f64).powi(3) / seconds / 1e9);
    }
    let best = rates.iter().copied().fold(0.0f64, f64::max);
    let low = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let spread = if low > 0.0 { best / low - 1.0 } else { 0.0 };
    Ok((best, spread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtorch_is_linked_and_computes() {
        // A real tensor op through tch proves libtorch is linked and loads.
        let a = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        let b = tch::Tensor::from_slice(&[4.0f32, 5.0, 6.0]);
        let dot = f64::try_from(a.dot(&b)).expect("a scalar tensor converts to f64");
        assert_eq!(dot, 32.0);
    }

    #[test]
    fn torch_version_is_the_one_tch_pairs_with() {
        assert!(
            torch_version().starts_with("2.11.0"),
            "built against torch {}",
            torch_version()
        );
    }

    #[test]
    fn device_strings_resolve_or_fail_clearly() {
        assert_eq!(resolve("cpu").unwrap(), tch::Device::Cpu);
        assert_eq!(resolve(" CPU ").unwrap(), tch::Device::Cpu);
        let err = resolve("gpu").unwrap_err().to_string();
        assert!(err.contains("`gpu`") && err.contains("cuda:N"), "{err}");
        assert!(matches!(resolve("cuda:x"), Err(TrainerError::BadDevice(_))));
        if !cuda_available() {
            assert_eq!(resolve("auto").unwrap(), tch::Device::Cpu);
            let err = resolve("cuda").unwrap_err().to_string();
            assert!(err.contains("0 CUDA device"), "{err}");
        }
    }
}
