//! The CFR core's batched [`Policy`] over libtorch networks.

use tch::{Device, Kind, Tensor};

use super::network::Mlp;
use crate::cfr::policy::{Net, Policy, PolicyError};
use crate::cfr::regret::ACTIONS;

/// Read-only views of the three networks on one device.
pub struct TorchPolicy<'a> {
    pub advantage: [&'a Mlp; 2],
    pub strategy: &'a Mlp,
    pub device: Device,
    pub dim: usize,
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
        let model = match net {
            Net::Advantage(p) => self.advantage[usize::from(p).min(1)],
            Net::Strategy => self.strategy,
        };
        forward(model, self.device, self.dim, states, rows, out)
            .map_err(|e| PolicyError(e.to_string()))
    }
}
