//! The Deep CFR MLP (docs/deep-cfr.md §3.1): `num_layers` × [Linear, activation], then a
//! Linear to the 22 unified actions. Used for the two advantage networks and
//! the strategy network.

use tch::nn::{self, Module};

use crate::TrainerError;

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

    /// Multiply-adds of one row through the linear layers.
    pub fn macs_per_row(&self) -> u64 {
        let mut total = 0u64;
        let mut prev = self.input_dim as u64;
        for _ in 0..self.num_layers {
            total += prev * self.hidden_size as u64;
            prev = self.hidden_size as u64;
        }
        total + prev * self.outputs as u64
    }

    /// FP32 operations of one row's forward: two per multiply-add (biases
    /// and activations, one operation per output, are left out as noise).
    pub fn forward_flops_per_row(&self) -> f64 {
        2.0 * self.macs_per_row() as f64
    }

    /// FP32 operations of one row's training step: the forward, the weight
    /// gradients (as many operations again) and the input gradients of
    /// every layer but the first (nothing needs the gradient of the input).
    pub fn training_flops_per_row(&self) -> f64 {
        let first_out = if self.num_layers > 0 {
            self.hidden_size
        } else {
            self.outputs
        };
        let first = 2.0 * (self.input_dim * first_out) as f64;
        3.0 * self.forward_flops_per_row() - first
    }

    /// FP32 operations of one optimiser step over every parameter:
    /// [`OPTIMIZER_FLOPS_PER_PARAMETER`] each.
    pub fn optimizer_flops_per_step(&self) -> f64 {
        OPTIMIZER_FLOPS_PER_PARAMETER * self.parameter_count() as f64
    }
}

#[cfg(test)]
impl MlpSpec {
    /// 3 inputs -> 4 hidden -> 4 hidden -> 2 outputs: the network whose FLOP
    /// counts the tests work out by hand.
    pub(crate) fn hand_counted() -> MlpSpec {
        MlpSpec {
            input_dim: 3,
            hidden_size: 4,
            num_layers: 2,
            outputs: 2,
            activation: Activation::Relu,
        }
    }
}

/// Operations per parameter of a clipped AdamW step: the gradient's square
/// for the norm (2), the clip scale (1), the first moment (3), the second
/// moment (4), and the update with bias corrections, square root, division
/// and weight decay (6).
pub const OPTIMIZER_FLOPS_PER_PARAMETER: f64 = 16.0;

/// An MLP whose parameters live in the `VarStore` passed to [`Mlp::new`].
#[derive(Debug)]
pub struct Mlp {
    layers: Vec<nn::Linear>,
    activation: Activation,
    /// Set by [`Mlp::trace`] (`network.jit = "trace"`): forwards then run
    /// through this TorchScript module instead of eagerly.
    traced: Option<Traced>,
}

/// The MLP's forward as a TorchScript graph whose inputs are the batch *and*
/// every weight and bias (not constants baked in at tracing time). So the
/// graph always sees the current parameters (no re-tracing after an
/// optimiser step or a checkpoint load), and autograd reaches them through
/// the module: training runs through TorchScript too.
#[derive(Debug)]
struct Traced {
    module: tch::CModule,
    /// Shallow clones of the layers' tensors, in the graph's input order
    /// after the batch: w0, b0, w1, b1, ...
    params: Vec<tch::Tensor>,
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
            traced: None,
        })
    }

    /// A copy, on `device`, of the network whose variables are in `from`:
    /// its own `VarStore` (returned beside it: it owns the tensors) and an
    /// eager forward. The copy's first draw, overwritten at once, uses
    /// `device`'s generator.
    pub fn copy_on(
        spec: MlpSpec,
        from: &nn::VarStore,
        device: tch::Device,
    ) -> Result<(nn::VarStore, Self), TrainerError> {
        let mut vs = nn::VarStore::new(device);
        let net = Self::new(&vs.root(), spec)?;
        vs.copy(from)?;
        Ok((vs, net))
    }

    /// Traces the forward into TorchScript (libtorch's tracer, one forward of
    /// a zero batch) and runs every later forward through it.
    pub fn trace(&mut self) -> Result<(), TrainerError> {
        let mut params = Vec::with_capacity(2 * self.layers.len());
        for layer in &self.layers {
            params.push(layer.ws.shallow_clone());
            let bias = layer.bs.as_ref().ok_or_else(|| {
                TrainerError::BadShape("a traced MLP needs biases on every layer".into())
            })?;
            params.push(bias.shallow_clone());
        }
        let first = &self.layers[0].ws;
        let example = tch::Tensor::f_zeros([2, first.size()[1]], (first.kind(), first.device()))?;
        let mut inputs = vec![example];
        inputs.extend(params.iter().map(tch::Tensor::shallow_clone));
        let activation = self.activation;
        let mut failure = None;
        let module = {
            let _no_grad = tch::no_grad_guard();
            tch::CModule::create_by_tracing("lcx_mlp", "forward", &inputs, &mut |xs| {
                let pairs = xs[1..].chunks(2).map(|wb| (&wb[0], wb.get(1)));
                match forward_layers(activation, &xs[0], pairs) {
                    Ok(y) => vec![y],
                    Err(e) => {
                        failure = Some(e);
                        vec![xs[0].shallow_clone()]
                    }
                }
            })?
        };
        if let Some(e) = failure {
            return Err(e.into());
        }
        self.traced = Some(Traced { module, params });
        Ok(())
    }

    pub fn activation(&self) -> Activation {
        self.activation
    }

    /// (weight, bias) per layer, input side first.
    pub fn parameters(&self) -> impl Iterator<Item = (&tch::Tensor, Option<&tch::Tensor>)> {
        self.layers.iter().map(|l| (&l.ws, l.bs.as_ref()))
    }

    /// Whether forwards run through a traced TorchScript module.
    pub fn is_traced(&self) -> bool {
        self.traced.is_some()
    }

    /// The forward pass, eager or traced; errors instead of panicking.
    pub fn f_forward(&self, xs: &tch::Tensor) -> Result<tch::Tensor, tch::TchError> {
        match &self.traced {
            Some(t) => {
                let mut inputs: Vec<&tch::Tensor> = Vec::with_capacity(1 + t.params.len());
                inputs.push(xs);
                inputs.extend(t.params.iter());
                t.module.forward_ts(&inputs)
            }
            None => forward_layers(self.activation, xs, self.parameters()),
        }
    }

    /// The forward in half precision, as CUDA autocast runs this network:
    /// the batch, the weights and the biases cast to fp16 at every call (the
    /// gradients flow back through the casts to the fp32 parameters), the
    /// layers and activations in fp16, an fp16 result. lcx's AMP forward:
    /// tch's `autocast` reaches libtorch through calls that 2.11 deprecates,
    /// with a warning per call.
    pub fn f_forward_half(&self, xs: &tch::Tensor) -> Result<tch::Tensor, tch::TchError> {
        let half = |t: &tch::Tensor| t.f_to_kind(tch::Kind::Half);
        let xs = half(xs)?;
        match &self.traced {
            Some(t) => {
                let params = t.params.iter().map(half).collect::<Result<Vec<_>, _>>()?;
                let mut inputs: Vec<&tch::Tensor> = Vec::with_capacity(1 + params.len());
                inputs.push(&xs);
                inputs.extend(params.iter());
                t.module.forward_ts(&inputs)
            }
            None => {
                let layers = self
                    .parameters()
                    .map(|(w, b)| Ok((half(w)?, b.map(half).transpose()?)))
                    .collect::<Result<Vec<_>, tch::TchError>>()?;
                forward_layers(
                    self.activation,
                    &xs,
                    layers.iter().map(|(w, b)| (w, b.as_ref())),
                )
            }
        }
    }
}

fn activate(activation: Activation, h: &tch::Tensor) -> Result<tch::Tensor, tch::TchError> {
    match activation {
        Activation::Relu => h.f_relu(),
        Activation::Gelu => h.f_gelu("none"),
    }
}

/// The MLP over (weight, bias) pairs, input side first, with the activation
/// between layers: the eager forward over the layers' own tensors, and what
/// the tracer records over the graph's inputs.
fn forward_layers<'a>(
    activation: Activation,
    xs: &tch::Tensor,
    mut layers: impl Iterator<Item = (&'a tch::Tensor, Option<&'a tch::Tensor>)>,
) -> Result<tch::Tensor, tch::TchError> {
    let (w, b) = layers
        .next()
        .ok_or_else(|| tch::TchError::Shape("an MLP needs at least one layer".into()))?;
    let mut h = xs.f_linear(w, b)?;
    for (w, b) in layers {
        h = activate(activation, &h)?;
        h = h.f_linear(w, b)?;
    }
    Ok(h)
}

impl Module for Mlp {
    /// Panics where tch's own modules would (a shape or device mismatch);
    /// fallible callers use [`Mlp::f_forward`].
    fn forward(&self, xs: &tch::Tensor) -> tch::Tensor {
        match self.f_forward(xs) {
            Ok(y) => y,
            Err(e) => panic!("MLP forward failed: {e}"),
        }
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

    /// The half-precision forward is the fp32 forward to fp16's precision,
    /// in fp16, eager and traced alike, and its gradient reaches the fp32
    /// weights.
    #[test]
    fn the_half_forward_is_the_forward_in_fp16() {
        let spec = MlpSpec {
            input_dim: 6,
            hidden_size: 16,
            num_layers: 2,
            outputs: 22,
            activation: Activation::Relu,
        };
        let vs = VarStore::new(Device::Cpu);
        let mut net = Mlp::new(&vs.root(), spec).unwrap();
        let x = Tensor::randn([5, 6], (Kind::Float, Device::Cpu));
        for traced in [false, true] {
            if traced {
                net.trace().unwrap();
            }
            let full = net.f_forward(&x).unwrap();
            let half = net.f_forward_half(&x).unwrap();
            assert_eq!(half.kind(), Kind::Half, "traced {traced}");
            let diff = f64::try_from((half.to_kind(Kind::Float) - &full).abs().max()).unwrap();
            let scale = f64::try_from(full.abs().max()).unwrap();
            assert!(diff <= 1e-2 * scale.max(1.0), "traced {traced}: {diff}");
            let w = &vs.trainable_variables()[0];
            let grads = Tensor::run_backward(
                &[half.to_kind(Kind::Float).sum(Kind::Float)],
                &[w],
                false,
                false,
            );
            assert_eq!(grads[0].kind(), Kind::Float);
            assert!(f64::try_from(grads[0].abs().sum(Kind::Float)).unwrap() > 0.0);
        }
    }

    #[test]
    fn flop_counts_of_small_networks_by_hand() {
        let spec = MlpSpec::hand_counted();
        // Multiply-adds: 3·4 + 4·4 + 4·2 = 36.
        assert_eq!(spec.macs_per_row(), 36);
        assert_eq!(spec.forward_flops_per_row(), 72.0);
        // Forward 72 + weight gradients 72 + input gradients of layers 2
        // and 3 (2·(16 + 8) = 48) = 192.
        assert_eq!(spec.training_flops_per_row(), 192.0);
        // Parameters: 3·4+4 + 4·4+4 + 4·2+2 = 46, 16 operations each.
        assert_eq!(spec.parameter_count(), 46);
        assert_eq!(spec.optimizer_flops_per_step(), 736.0);
        // No hidden layer: one linear map, no input gradient at all.
        let linear = MlpSpec {
            num_layers: 0,
            ..spec
        };
        assert_eq!(linear.macs_per_row(), 6);
        assert_eq!(linear.training_flops_per_row(), 24.0);
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
    fn traced_forward_and_gradients_match_eager() {
        tch::manual_seed(11);
        let spec = MlpSpec {
            input_dim: 9,
            hidden_size: 16,
            num_layers: 2,
            outputs: 22,
            activation: Activation::Gelu,
        };
        let vs = VarStore::new(Device::Cpu);
        let eager = Mlp::new(&vs.root(), spec).unwrap();
        // The same parameters (a second Mlp over the same VarStore tensors
        // would re-initialise them), traced.
        let mut traced = Mlp {
            layers: eager
                .layers
                .iter()
                .map(|l| nn::Linear {
                    ws: l.ws.shallow_clone(),
                    bs: l.bs.as_ref().map(Tensor::shallow_clone),
                })
                .collect(),
            activation: eager.activation,
            traced: None,
        };
        traced.trace().unwrap();
        assert!(traced.is_traced() && !eager.is_traced());
        let max_diff = |a: &Tensor, b: &Tensor| f64::try_from((a - b).abs().max()).unwrap();
        for rows in [1, 5, 64] {
            let x = Tensor::randn([rows, 9], (Kind::Float, Device::Cpu));
            let (e, t) = (eager.f_forward(&x).unwrap(), traced.f_forward(&x).unwrap());
            assert_eq!(t.size(), vec![rows, 22]);
            assert!(max_diff(&e, &t) < 1e-5, "batch {rows}");
        }
        // An in-place parameter update is seen without re-tracing.
        tch::no_grad(|| {
            let _ = eager.layers[0]
                .ws
                .shallow_clone()
                .f_mul_scalar_(1.5)
                .unwrap();
        });
        let x = Tensor::randn([7, 9], (Kind::Float, Device::Cpu));
        assert!(max_diff(&eager.forward(&x), &traced.forward(&x)) < 1e-5);
        // Gradients reach the parameters through the TorchScript graph.
        let grads = |m: &Mlp| {
            for v in vs.trainable_variables() {
                let mut g = v.grad();
                if g.defined() {
                    let _ = g.zero_();
                }
            }
            m.forward(&x).square().sum(Kind::Float).backward();
            vs.trainable_variables()
                .iter()
                .map(|v| v.grad().copy())
                .collect::<Vec<_>>()
        };
        let (ge, gt) = (grads(&eager), grads(&traced));
        for (a, b) in ge.iter().zip(&gt) {
            assert!(a.defined() && b.defined());
            assert!(max_diff(a, b) < 1e-4);
        }
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
