//! The CFR core's batched [`Policy`] over libtorch networks.

use std::sync::atomic::{AtomicU64, Ordering};

use tch::{Device, Kind, Tensor};

use crate::kernel::native::NativeMlp;
use crate::nn::forward_graphs::ForwardGraphs;
use crate::nn::network::Mlp;
use crate::TrainerError;
use lcx_core::cfr::policy::{Net, Policy, PolicyError};
use lcx_core::cfr::regret::ACTIONS;

/// Read-only views of the three networks on one device.
pub struct TorchPolicy<'a> {
    pub advantage: [&'a Mlp; 2],
    pub strategy: &'a Mlp,
    pub device: Device,
    pub dim: usize,
    /// Packed copies for lcx's CPU kernel (adv0, adv1, strategy), from
    /// [`TorchPolicy::native_snapshots`]; when present every forward runs
    /// there, `None` runs every forward in libtorch.
    pub native: Option<[NativeMlp; 3]>,
    /// Rows evaluated per network (adv0, adv1, strategy), where the caller
    /// wants the traversal's network work counted.
    pub rows: Option<&'a [AtomicU64; 3]>,
    /// On a GPU with `traversal.cuda_graphs`: forwards replayed from a
    /// graph per network and batch-size bucket (libtorch forwards only).
    pub graphs: Option<&'a ForwardGraphs>,
}

impl<'a> TorchPolicy<'a> {
    /// Copies the three networks for [`NativeMlp`] forwards, when it applies
    /// to all of them.
    pub fn native_snapshots(
        advantage: [&'a Mlp; 2],
        strategy: &'a Mlp,
    ) -> Result<Option<[NativeMlp; 3]>, TrainerError> {
        let a0 = NativeMlp::snapshot(advantage[0])?;
        let a1 = NativeMlp::snapshot(advantage[1])?;
        let s = NativeMlp::snapshot(strategy)?;
        Ok(match (a0, a1, s) {
            (Some(a0), Some(a1), Some(s)) => Some([a0, a1, s]),
            _ => None,
        })
    }
}

fn forward(
    net: &Mlp,
    device: Device,
    dim: usize,
    states: &[f32],
    rows: usize,
    out: &mut [f32],
) -> Result<(), tch::TchError> {
    let _guard = tch::no_grad_guard();
    let x = Tensor::f_from_slice(&states[..rows * dim])?.f_view([rows as i64, dim as i64])?;
    let x = if device == Device::Cpu {
        x
    } else {
        x.f_to_device(device)?
    };
    let y = net.f_forward(&x)?.f_to_kind(Kind::Float)?;
    let y = if device == Device::Cpu {
        y
    } else {
        y.f_to_device(Device::Cpu)?
    };
    y.f_contiguous()?
        .f_copy_data(&mut out[..rows * ACTIONS], rows * ACTIONS)?;
    Ok(())
}

impl Policy for TorchPolicy<'_> {
    fn evaluate(
        &self,
        net: Net,
        states: &[f32],
        rows: usize,
        out: &mut [f32],
    ) -> Result<(), PolicyError> {
        let index = net.index();
        if let Some(counts) = self.rows {
            counts[index].fetch_add(rows as u64, Ordering::Relaxed);
        }
        if let Some(native) = &self.native {
            let n = &native[index];
            let (input, output) = (rows * n.input_dim(), rows * n.output_dim());
            if states.len() < input || out.len() < output {
                return Err(PolicyError(format!(
                    "{rows} row(s) need {input} inputs and {output} outputs, got {} and {}",
                    states.len(),
                    out.len()
                )));
            }
            n.forward_rows(&states[..input], rows, &mut out[..output]);
            return Ok(());
        }
        let model = [self.advantage[0], self.advantage[1], self.strategy][index];
        if let Some(graphs) = self.graphs {
            let done = graphs
                .forward(model, index, states, rows, out)
                .map_err(|e| PolicyError(e.to_string()))?;
            if done {
                return Ok(());
            }
        }
        forward(model, self.device, self.dim, states, rows, out)
            .map_err(|e| PolicyError(e.to_string()))
    }

    /// lcx's kernel computes each row by itself (see `native`); libtorch's
    /// results may depend on the batch.
    fn batch_invariant(&self) -> bool {
        self.native.is_some()
    }
}
