//! The Deep CFR MLP (spec §3.1): `num_layers` × [Linear, activation], then a
//! Linear to the 22 unified actions. Used for the two advantage networks and
//! the strategy network.

use tch::nn::{self, Module};

use super::TrainerError;

/// Hidden-layer non-linearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Relu,
    Gelu,
}

/// Shape of an MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlpSpec {
    pub input_dim: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub outputs: usize,
    pub activation: Activation,
}

impl MlpSpec {
    /// Number of trainable parameters (weights and biases).
    pub fn parameter_count(&self) -> usize {
        let mut total = 0;
        let mut prev = self.input_dim;
        for _ in 0..self.num_layers {
            total += prev * self.hidden_size + self.hidden_size;
            prev = self.hidden_size;
        }
        total + prev * self.outputs + self.outputs
    }
}

/// An MLP whose parameters live in the `VarStore` passed to [`Mlp::new`].
#[derive(Debug)]
pub struct Mlp {
    layers: Vec<nn::Linear>,
    activation: Activation,
}

fn as_i64(n: usize, what: &str) -> Result<i64, TrainerError> {
    i64::try_from(n).map_err(|_| TrainerError::BadShape(format!("{what} = {n} is too large")))
}

impl Mlp {
    /// Builds the layers under `path`, named `net.{0,2,4,…}` like the
    /// reference's `nn.Sequential`, with PyTorch's default Linear init
    /// (weights and biases uniform in ±1/√fan_in). tch's own default weight
    /// init differs, hence the explicit configuration.
    pub fn new(path: &nn::Path, spec: MlpSpec) -> Result<Self, TrainerError> {
        if spec.input_dim == 0
            || spec.outputs == 0
            || (spec.num_layers > 0 && spec.hidden_size == 0)
        {
            return Err(TrainerError::BadShape(format!("{spec:?}")));
        }
        let net = path / "net";
        let mut layers = Vec::with_capacity(spec.num_layers + 1);
        let mut prev = spec.input_dim;
        let widths = std::iter::repeat_n(spec.hidden_size, spec.num_layers).chain([spec.outputs]);
        for (i, width) in widths.enumerate() {
            let bound = 1.0 / (prev as f64).sqrt();
            let init = nn::Init::Uniform {
                lo: -bound,
                up: bound,
            };
            let config = nn::LinearConfig {
                ws_init: init,
                bs_init: Some(init),
                bias: true,
            };
            let name = (2 * i).to_string();
            layers.push(nn::linear(
                &net / name.as_str(),
                as_i64(prev, "layer input")?,
                as_i64(width, "layer width")?,
                config,
            ));
            prev = width;
        }
        Ok(Self {
            layers,
            activation: spec.activation,
        })
    }
}

impl Module for Mlp {
    fn forward(&self, xs: &tch::Tensor) -> tch::Tensor {
        let mut h = self.layers[0].forward(xs);
        for layer in &self.layers[1..] {
            h = match self.activation {
                Activation::Relu => h.relu(),
                Activation::Gelu => h.gelu("none"),
            };
            h = layer.forward(&h);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{nn::VarStore, Device, Kind, Tensor};

    fn default_spec() -> MlpSpec {
        MlpSpec {
            input_dim: 297,
            hidden_size: 512,
            num_layers: 3,
            outputs: 22,
            activation: Activation::Relu,
        }
    }

    #[test]
    fn default_network_has_the_reference_parameter_count() {
        assert_eq!(default_spec().parameter_count(), 689_174);
        let vs = VarStore::new(Device::Cpu);
        let _mlp = Mlp::new(&vs.root(), default_spec()).unwrap();
        let counted: i64 = vs
            .trainable_variables()
            .iter()
            .map(Tensor::numel)
            .map(|n| n as i64)
            .sum();
        assert_eq!(counted, 689_174);
        let mut names: Vec<String> = vs.variables().into_keys().collect();
        names.sort();
        assert_eq!(names[0], "net.0.bias");
        assert_eq!(names.last().unwrap(), "net.6.weight");
    }

    #[test]
    fn init_is_uniform_within_one_over_sqrt_fan_in() {
        tch::manual_seed(7);
        let vs = VarStore::new(Device::Cpu);
        let _mlp = Mlp::new(&vs.root(), default_spec()).unwrap();
        let vars = vs.variables();
        for (name, fan_in) in [
            ("net.0.weight", 297.0f64),
            ("net.2.weight", 512.0),
            ("net.6.weight", 512.0),
        ] {
            let t = &vars[name];
            let bound = 1.0 / fan_in.sqrt();
            let max = f64::try_from(t.abs().max()).unwrap();
            assert!(max <= bound, "{name}: max |w| {max} > {bound}");
            // A uniform sample this large reaches close to its bound; tch's
            // kaiming default for weights would too, but its std differs.
            assert!(max > 0.9 * bound, "{name}: max |w| {max} far below {bound}");
            let std = f64::try_from(t.std(true)).unwrap();
            let expected = bound / 3f64.sqrt();
            assert!(
                (std - expected).abs() < 0.05 * expected,
                "{name}: std {std} vs {expected}"
            );
        }
        // Biases share the weights' bound (too few of them for a std check).
        let max = f64::try_from(vars["net.6.bias"].abs().max()).unwrap();
        assert!(max <= 1.0 / 512f64.sqrt() && max > 0.0);
    }

    #[test]
    fn forward_maps_a_batch_to_22_outputs_and_zero_layers_is_linear() {
        let vs = VarStore::new(Device::Cpu);
        let mlp = Mlp::new(&vs.root(), default_spec()).unwrap();
        let x = Tensor::randn([5, 297], (Kind::Float, Device::Cpu));
        assert_eq!(mlp.forward(&x).size(), vec![5, 22]);

        let spec = MlpSpec {
            num_layers: 0,
            ..default_spec()
        };
        assert_eq!(spec.parameter_count(), 297 * 22 + 22);
        let vs = VarStore::new(Device::Cpu);
        let linear = Mlp::new(&vs.root(), spec).unwrap();
        assert_eq!(linear.forward(&x).size(), vec![5, 22]);
    }

    #[test]
    fn gelu_differs_from_relu() {
        let spec = MlpSpec {
            hidden_size: 8,
            num_layers: 1,
            ..default_spec()
        };
        let x = Tensor::randn([4, 297], (Kind::Float, Device::Cpu));
        let mut outputs = Vec::new();
        for activation in [Activation::Relu, Activation::Gelu] {
            // Same seed, same init: only the activation differs.
            tch::manual_seed(1);
            let vs = VarStore::new(Device::Cpu);
            let mlp = Mlp::new(&vs.root(), MlpSpec { activation, ..spec }).unwrap();
            outputs.push(mlp.forward(&x));
        }
        let diff = f64::try_from((&outputs[0] - &outputs[1]).abs().max()).unwrap();
        assert!(diff > 0.0);
    }
}
