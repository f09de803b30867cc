//! `lcx --version`: lcx's own version plus what libtorch reports at run time.

/// "0.1.0 (torch 2.11.0+cu130, CUDA available: no)". Asking libtorch about
/// CUDA loads the CUDA runtime when it is present, so only call this when the
/// version is asked for.
pub fn long_version() -> String {
    let cuda = if crate::trainer::device::cuda_available() {
        format!(
            "yes, {} device(s)",
            crate::trainer::device::cuda_device_count()
        )
    } else {
        "no".to_string()
    };
    format!(
        "{} (torch {}, CUDA available: {cuda})",
        env!("CARGO_PKG_VERSION"),
        crate::trainer::device::torch_version(),
    )
}
