//! Errors of the trainer and of everything that touches libtorch.

/// What can go wrong while building or running networks.
#[derive(Debug, thiserror::Error)]
pub enum TrainerError {
    /// A device string that is not `auto`, `cpu`, `cuda` or `cuda:N`.
    #[error("unknown device `{0}` (expected auto, cpu, cuda or cuda:N)")]
    BadDevice(String),
    /// CUDA was asked for but libtorch sees no (or not that) GPU.
    #[error("device `{requested}` asked for, but {available} CUDA device(s) are available")]
    CudaUnavailable { requested: String, available: usize },
    /// A libtorch call failed (shape mismatch, out of memory, ...).
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// A network shape that cannot be built.
    #[error("invalid network shape: {0}")]
    BadShape(String),
    /// A CUDA graph could not be started, captured or replayed.
    #[error("CUDA graph: {0}")]
    Graph(String),
}
