//! Timed forwards of a freshly initialised network, for `lcx bench forward`.

use std::time::{Duration, Instant};

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::kernel::native::NativeMlp;
use crate::nn::network::{Mlp, MlpSpec};
use crate::{device, TrainerError};

/// A network plus the device it runs on, ready to be timed.
#[derive(Debug)]
pub struct ForwardProbe {
    // Owns the parameters `mlp` refers to.
    _vs: VarStore,
    mlp: Mlp,
    spec: MlpSpec,
    device: Device,
    /// The packed copy that traversals would use (`network.native_forward`
    /// on a CPU where the kernel applies); then it is what gets timed.
    native: Option<NativeMlp>,
}

impl ForwardProbe {
    /// Builds the network on `device` from `seed` (parameters as at init),
    /// traced into TorchScript when `traced`; with `native`, forwards run
    /// lcx's CPU kernel where it applies, as in a traversal.
    pub fn new(
        spec: MlpSpec,
        device: Device,
        seed: i64,
        traced: bool,
        native: bool,
    ) -> Result<Self, TrainerError> {
        tch::manual_seed(seed);
        let vs = VarStore::new(device);
        let mut mlp = Mlp::new(&vs.root(), spec)?;
        if traced {
            mlp.trace()?;
        }
        let native = if native {
            NativeMlp::snapshot(&mlp)?
        } else {
            None
        };
        Ok(Self {
            _vs: vs,
            mlp,
            spec,
            device,
            native,
        })
    }

    /// Whether forwards run lcx's CPU kernel rather than libtorch.
    pub fn is_native(&self) -> bool {
        self.native.is_some()
    }

    /// The network's shape.
    pub fn spec(&self) -> MlpSpec {
        self.spec
    }

    /// Runs `iters` inference-mode forwards of one random `batch × input_dim`
    /// input already on the device and returns the wall time, with the device
    /// synchronised before and after so queued GPU work is counted.
    pub fn time_forwards(&self, batch: usize, iters: usize) -> Result<Duration, TrainerError> {
        let _no_grad = tch::no_grad_guard();
        let rows = i64::try_from(batch)
            .map_err(|_| TrainerError::BadShape(format!("batch size {batch}")))?;
        let cols = i64::try_from(self.spec.input_dim)
            .map_err(|_| TrainerError::BadShape(format!("input dim {}", self.spec.input_dim)))?;
        let input = Tensor::f_randn([rows, cols], (Kind::Float, self.device))?;
        if let Some(native) = &self.native {
            let len = batch * self.spec.input_dim;
            let mut x = vec![0.0f32; len];
            input.f_copy_data(&mut x, len)?;
            let mut out = vec![0.0f32; batch * native.output_dim()];
            let start = Instant::now();
            for _ in 0..iters {
                native.forward_rows(std::hint::black_box(&x), batch, &mut out);
                std::hint::black_box(&out);
            }
            return Ok(start.elapsed());
        }
        device::synchronize(self.device);
        let start = Instant::now();
        for _ in 0..iters {
            let out = self.mlp.f_forward(&input)?;
            std::hint::black_box(&out);
        }
        device::synchronize(self.device);
        Ok(start.elapsed())
    }
}

impl lcx_core::bench::forward::ForwardTimer for ForwardProbe {
    type Error = TrainerError;
    fn time_forwards(&self, batch: usize, iters: usize) -> Result<Duration, Self::Error> {
        ForwardProbe::time_forwards(self, batch, iters)
    }
}
