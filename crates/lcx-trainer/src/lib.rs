//! The embedded Deep CFR trainer. This is the only crate that links `tch`;
//! everything else talks to networks through plain slices and traits.

pub mod bench;
pub mod device;
mod error;
pub mod heap;
pub mod kernel;
pub mod nn;
pub mod probe;
pub mod run;

pub use error::TrainerError;

use lcx_core::config::{Activation as ConfigActivation, TrainerConfig};
use nn::network::{Activation, MlpSpec};

/// The MLP shape that `cfg` describes for `input_dim` input features and the
/// rules' unified action space.
pub fn network_spec(cfg: &TrainerConfig, input_dim: usize) -> MlpSpec {
    MlpSpec {
        input_dim,
        hidden_size: cfg.network.hidden_size as usize,
        num_layers: cfg.network.num_layers as usize,
        outputs: cfg.rules.action_size(),
        activation: match cfg.network.activation {
            ConfigActivation::Relu => Activation::Relu,
            ConfigActivation::Gelu => Activation::Gelu,
        },
    }
}

/// `configs/smoke.toml`, the one tiny CPU iteration the unit tests train.
#[cfg(test)]
pub(crate) fn smoke_config() -> TrainerConfig {
    lcx_core::config::from_toml_str(
        include_str!("../../../configs/smoke.toml"),
        "smoke.toml",
        &[],
    )
    .expect("configs/smoke.toml is a valid config")
}
