//! Optimisation: one network with its AdamW, the shared gradient scaler for
//! mixed precision, and the advantage and strategy losses (docs/deep-cfr.md §8.3–8.5).

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::nn::network::{Mlp, MlpSpec};
use crate::TrainerError;

/// AdamW settings shared by the three networks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    pub learning_rate: f64,
    pub weight_decay: f64,
}

/// AdamW (decoupled weight decay) with PyTorch's update rule, written over
/// tch tensors rather than libtorch's optimiser object so that its moment
/// buffers and step count can be checkpointed and restored (tch exposes no
/// optimiser state).
pub struct AdamW {
    pub lr: f64,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub step: i64,
    /// Per parameter: (first moment, second moment).
    pub moments: Vec<(Tensor, Tensor)>,
}

impl AdamW {
    fn new(params: &[Tensor], cfg: AdamWConfig) -> Result<Self, TrainerError> {
        let moments = params
            .iter()
            .map(|p| Ok((p.f_zeros_like()?, p.f_zeros_like()?)))
            .collect::<Result<Vec<_>, TrainerError>>()?;
        Ok(Self {
            lr: cfg.learning_rate,
            weight_decay: cfg.weight_decay,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            step: 0,
            moments,
        })
    }

    /// One update of `params` from their gradients: PyTorch's single-tensor
    /// AdamW, in place. Two temporaries per parameter (g²·(1−β₂) and the
    /// denominator) instead of one per operation: the update walks each
    /// parameter's memory about half as often, which is a few percent of a
    /// training step at batch 1024.
    pub(crate) fn update(&mut self, params: &[Tensor]) -> Result<(), TrainerError> {
        let _guard = tch::no_grad_guard();
        self.step += 1;
        let bc1 = 1.0 - self.beta1.powi(self.step as i32);
        let bc2 = 1.0 - self.beta2.powi(self.step as i32);
        let step_size = self.lr / bc1;
        for (p, (m, v)) in params.iter().zip(self.moments.iter_mut()) {
            let g = p.grad();
            if !g.defined() {
                continue;
            }
            let mut p = p.shallow_clone();
            if self.weight_decay != 0.0 {
                let _ = p.f_mul_scalar_(1.0 - self.lr * self.weight_decay)?;
            }
            // m ← β₁m + (1−β₁)g;  v ← β₂v + (1−β₂)g².
            let _ = m.f_lerp_(&g, 1.0 - self.beta1)?;
            let _ = v
                .f_mul_scalar_(self.beta2)?
                .f_addcmul_(&g, &g.f_mul_scalar(1.0 - self.beta2)?)?;
            // p ← p − step·m / (√v/√bc₂ + ε), with the −1/step folded into
            // the denominator because tch's addcdiv_ has no `value`.
            let mut denom = v.f_sqrt()?;
            let _ = denom
                .f_div_scalar_(bc2.sqrt())?
                .f_add_scalar_(self.eps)?
                .f_mul_scalar_(-1.0 / step_size)?;
            let _ = p.f_addcdiv_(m, &denom)?;
        }
        Ok(())
    }

    /// [`AdamW::update`] of the flat buffers `flat` from the flat gradient
    /// `g`, where `ok` (a boolean scalar on their device) is true, and
    /// nothing (parameters, moments, step count) where it is false, decided
    /// on the device: the caller never reads `ok` back, so a step costs no
    /// synchronisation, and one pass over the flat buffers launches the
    /// same dozen kernels whatever the number of parameters. The step's
    /// bias corrections come from `corrections` (see [`Corrections`]),
    /// which counts the updates taken.
    fn update_flat_where(
        &self,
        flat: &Flat,
        g: &Tensor,
        ok: &Tensor,
        corrections: &mut Corrections,
    ) -> Result<(), TrainerError> {
        let _guard = tch::no_grad_guard();
        let (neg_inv_step, bc2_sqrt) = corrections.take(ok)?;
        let Flat { params: p, m, v } = flat.handles();
        let m_new = m.f_lerp(g, 1.0 - self.beta1)?;
        // β₂v + (1−β₂)g² as one interpolation towards g².
        let v_new = v.f_lerp(&g.f_square()?, 1.0 - self.beta2)?;
        let denom = v_new
            .f_sqrt()?
            .f_div(&bc2_sqrt)?
            .f_add_scalar(self.eps)?
            .f_mul(&neg_inv_step)?;
        let p_new = if self.weight_decay != 0.0 {
            p.f_mul_scalar(1.0 - self.lr * self.weight_decay)?
                .f_addcdiv(&m_new, &denom)?
        } else {
            p.f_addcdiv(&m_new, &denom)?
        };
        // Each buffer keeps its value where `ok` is false, written in place.
        let _ = m_new.f_where_self_out(&m, ok, &m)?;
        let _ = v_new.f_where_self_out(&v, ok, &v)?;
        let _ = p_new.f_where_self_out(&p, ok, &p)?;
        Ok(())
    }
}

/// AdamW's bias corrections for the updates of one network's steps on a
/// device, worked out on the host for every count they can reach and looked
/// up on the device by the count of updates taken (which only the device
/// knows: a skipped step does not count). One lookup replaces the ten
/// scalar kernels that would compute them from the count each step.
pub(crate) struct Corrections {
    /// Row j: (−bc₁/lr, √bc₂) after j more updates than `base`, in f64.
    table: Tensor,
    /// Updates taken in this run of steps (an i64 on the device, shape [1]).
    taken: Tensor,
    /// The optimiser's count before the first step.
    base: i64,
    /// Steps asked for so far, and the most the table holds.
    steps: usize,
    capacity: usize,
}

impl Corrections {
    /// A table for up to `steps` updates after `opt`'s count, on `device`.
    fn new(opt: &AdamW, steps: usize, device: Device) -> Result<Self, TrainerError> {
        let mut rows = Vec::with_capacity(2 * (steps + 1));
        for j in 0..=steps as i64 {
            let t = (opt.step + j).max(1) as i32;
            let bc1 = 1.0 - opt.beta1.powi(t);
            let bc2 = 1.0 - opt.beta2.powi(t);
            rows.extend([-bc1 / opt.lr, bc2.sqrt()]);
        }
        let table = Tensor::f_from_slice(&rows)?
            .f_view([steps as i64 + 1, 2])?
            .f_to_device(device)?;
        Ok(Self {
            table,
            taken: Tensor::f_zeros([1], (Kind::Int64, device))?,
            base: opt.step,
            steps: 0,
            capacity: steps,
        })
    }

    /// Counts a step (an update where `ok`) and returns its corrections
    /// (−1/step size, √bc₂) as double scalars on the device.
    fn take(&mut self, ok: &Tensor) -> Result<(Tensor, Tensor), TrainerError> {
        if self.steps == self.capacity {
            return Err(TrainerError::BadShape(format!(
                "more device steps than the {} the bias corrections were worked out for",
                self.capacity
            )));
        }
        self.steps += 1;
        let _ = self.taken.f_add_(ok)?;
        let row = self.table.f_index_select(0, &self.taken)?.f_select(0, 0)?;
        Ok((row.f_select(0, 0)?, row.f_select(0, 1)?))
    }

    /// The optimiser's count after the steps (one read back).
    fn count(&self) -> Result<i64, TrainerError> {
        Ok(self.base + self.taken.f_int64_value(&[0])?)
    }
}

/// A network, its parameters and its own AdamW optimiser.
pub struct NetTrainer {
    pub vs: VarStore,
    pub net: Mlp,
    pub opt: AdamW,
    /// Set by the first [`step_on_device`]: from then on the parameters and
    /// the moments are views of these buffers.
    flat: Option<Flat>,
}

/// A network's parameters and its AdamW moments, each laid end to end in one
/// flat buffer that the per-parameter tensors (the VarStore's, the layers',
/// `AdamW::moments`) are views of: an update of the buffer is an update of
/// every parameter. A step on a GPU is bound by kernel launches, not by
/// arithmetic (a few microseconds each against 85 µs of FP32 work for a
/// default step on an H200), and per-parameter updates launch a dozen
/// kernels per tensor; the flat buffers launch them once.
#[derive(Debug)]
pub(crate) struct Flat {
    params: Tensor,
    m: Tensor,
    v: Tensor,
}

impl Flat {
    /// Shallow clones: the same buffers.
    fn handles(&self) -> Flat {
        Flat {
            params: self.params.shallow_clone(),
            m: self.m.shallow_clone(),
            v: self.v.shallow_clone(),
        }
    }
}

impl std::fmt::Debug for NetTrainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetTrainer")
            .field("net", &self.net)
            .finish_non_exhaustive()
    }
}

impl NetTrainer {
    /// Builds the network on `device` and an AdamW with betas (0.9, 0.999),
    /// eps 1e-8 and decoupled weight decay. The weights are always drawn on
    /// the CPU from the global torch seed and then copied to `device`: a
    /// device's own generator draws other numbers from the same seed, and a
    /// CUDA arm must start from the weights its CPU baseline starts from
    /// for a paired comparison (a guard on the loss) to mean anything.
    pub fn new(spec: MlpSpec, device: Device, adam: AdamWConfig) -> Result<Self, TrainerError> {
        let cpu = VarStore::new(Device::Cpu);
        let cpu_net = Mlp::new(&cpu.root(), spec)?;
        let (vs, net) = if device == Device::Cpu {
            (cpu, cpu_net)
        } else {
            Mlp::copy_on(spec, &cpu, device)?
        };
        let opt = AdamW::new(&vs.trainable_variables(), adam)?;
        Ok(Self {
            vs,
            net,
            opt,
            flat: None,
        })
    }

    /// Handles to the flat buffers ([`Flat`]), laid out on first use: the parameters
    /// and moments are copied end to end (in [`NetTrainer::params`] order)
    /// and each tensor then points into its buffer (`set_data` keeps every
    /// handle to it, the layers' and the VarStore's, and its autograd
    /// leaf). Checkpoints, the native kernel and the evaluation copy read
    /// and write the per-parameter tensors in place, so they see the same
    /// values either way.
    pub(crate) fn flat(&mut self) -> Result<Flat, TrainerError> {
        if let Some(flat) = &self.flat {
            return Ok(flat.handles());
        }
        let _guard = tch::no_grad_guard();
        let params = self.params();
        let cat = |ts: Vec<&Tensor>| -> Result<Tensor, TrainerError> {
            let rows = ts
                .iter()
                .map(|t| t.f_reshape([-1]))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Tensor::f_cat(&rows, 0)?)
        };
        let flat = Flat {
            params: cat(params.iter().collect())?,
            m: cat(self.opt.moments.iter().map(|(m, _)| m).collect())?,
            v: cat(self.opt.moments.iter().map(|(_, v)| v).collect())?,
        };
        let mut offset = 0;
        for (mut p, (m, v)) in params.into_iter().zip(self.opt.moments.iter_mut()) {
            let shape = p.size();
            let n = p.numel() as i64;
            let view = |buffer: &Tensor| -> Result<Tensor, TrainerError> {
                Ok(buffer.f_narrow(0, offset, n)?.f_view(shape.as_slice())?)
            };
            p.f_set_data(&view(&flat.params)?)?;
            *m = view(&flat.m)?;
            *v = view(&flat.v)?;
            offset += n;
        }
        Ok(self.flat.insert(flat).handles())
    }

    pub fn forward(&self, xs: &Tensor) -> Result<Tensor, TrainerError> {
        Ok(self.net.f_forward(xs)?)
    }

    /// The parameters in creation order (the order of `opt.moments`).
    pub fn params(&self) -> Vec<Tensor> {
        self.vs.trainable_variables()
    }

    fn zero_grad(&self) {
        for p in self.params() {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }
}

/// What happened in one optimisation step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepOutcome {
    /// The (unscaled) loss value; NaN/inf when it was not finite.
    pub loss: f64,
    /// The loss was not finite: gradients were zeroed, nothing was updated.
    pub nonfinite_loss: bool,
    /// The scaler found inf/NaN gradients and skipped the optimiser step.
    pub overflow: bool,
}

/// Dynamic loss scaling for fp16 training, PyTorch's defaults: start at
/// 2¹⁶, double after 2,000 consecutive clean steps, halve on overflow.
/// tch has autocast but no GradScaler; this one uses libtorch's own
/// `_amp_non_finite_check_and_unscale_` and `_amp_update_scale_` kernels,
/// which exist on the CPU too, so it is testable without a GPU.
#[derive(Debug)]
pub struct GradScaler {
    enabled: bool,
    scale: Tensor,
    growth_tracker: Tensor,
    growth_interval: i64,
}

impl GradScaler {
    /// Initial scale 2¹⁶ on `device`; a disabled scaler is the identity and
    /// reports a scale of 1.0.
    pub fn new(enabled: bool, device: Device) -> Result<Self, TrainerError> {
        Ok(Self {
            enabled,
            scale: Tensor::f_full([1], 65_536.0, (Kind::Float, device))?,
            growth_tracker: Tensor::f_zeros([1], (Kind::Int, device))?,
            growth_interval: 2000,
        })
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The current scale (1.0 when disabled).
    pub fn scale_value(&self) -> Result<f64, TrainerError> {
        if !self.enabled {
            return Ok(1.0);
        }
        Ok(f64::try_from(&self.scale)?)
    }

    /// Divides every gradient by the scale in place and returns a one-element
    /// tensor that is 1.0 when any gradient held an inf or NaN.
    fn unscale(&self, params: &[Tensor]) -> Result<Tensor, TrainerError> {
        let grads: Vec<Tensor> = params
            .iter()
            .map(Tensor::grad)
            .filter(Tensor::defined)
            .collect();
        self.unscale_all(grads)
    }

    /// [`GradScaler::unscale`] of `grads` (tensors of the device's
    /// gradients, such as one flat buffer).
    fn unscale_all(&self, grads: Vec<Tensor>) -> Result<Tensor, TrainerError> {
        let mut found_inf = Tensor::f_zeros([1], (Kind::Float, self.scale.device()))?;
        let inv_scale = self.scale.f_reciprocal()?;
        for mut grad in grads {
            grad.f_internal_amp_non_finite_check_and_unscale(&mut found_inf, &inv_scale)?;
        }
        Ok(found_inf)
    }

    /// Grows or backs off the scale after a step, given its `found_inf`.
    fn update(&mut self, found_inf: &Tensor) -> Result<(), TrainerError> {
        let _ = self.scale.f_internal_amp_update_scale_(
            &self.growth_tracker,
            found_inf,
            2.0,
            0.5,
            self.growth_interval,
        )?;
        Ok(())
    }

    /// [`GradScaler::update`] where `finite` (a boolean scalar on the
    /// device) holds; where it does not (the loss itself was not finite)
    /// the scale and its growth count stay as they were, as on the host
    /// path, which returns before the update.
    fn update_where(&mut self, found_inf: &Tensor, finite: &Tensor) -> Result<(), TrainerError> {
        let scale = self.scale.f_detach_copy()?;
        let tracker = self.growth_tracker.f_detach_copy()?;
        self.update(found_inf)?;
        let _ = self.scale.f_where_self_out(&self.scale, finite, &scale)?;
        let _ = self
            .growth_tracker
            .f_where_self_out(&self.growth_tracker, finite, &tracker)?;
        Ok(())
    }
}

/// Scales the flat gradient `g` down so that its L2 norm (the global norm
/// of the parameters' gradients) is at most `max`, without reading the norm
/// back: the factor min(1, max / (norm + 1e-6)) is applied on the device,
/// as a multiplication by `max` and a division by max(norm + 1e-6, max)
/// (below the bound that is ×max/max, which may move a gradient by an ulp).
fn clip_flat_on_device(g: &mut Tensor, max: f64) -> Result<(), TrainerError> {
    let bound = g.f_norm()?.f_add_scalar(1e-6)?.f_clamp_min(max)?;
    let _ = g.f_mul_scalar_(max)?.f_div_(&bound)?;
    Ok(())
}

/// The gradients of `params` (one per parameter, from
/// `Tensor::run_backward`) end to end in one flat tensor, in the layout of
/// [`Flat`]; a parameter the loss did not reach gets zeros.
fn flat_gradient(params: &[Tensor], grads: Vec<Tensor>) -> Result<Tensor, TrainerError> {
    let rows = params
        .iter()
        .zip(grads)
        .map(|(p, g)| {
            let g = if g.defined() { g } else { p.f_zeros_like()? };
            g.f_reshape([-1])
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Tensor::f_cat(&rows, 0)?)
}

/// What one network's steps on a device leave to read: each step's loss and
/// (under AMP) its overflow flag stay on the device as the step made them,
/// and [`DeviceTally::read`] brings them all back at once (one
/// synchronisation) when the network's steps of an iteration are done. A
/// step adds no kernel of its own for its bookkeeping.
pub struct DeviceTally {
    record: Record,
    corrections: Corrections,
}

/// Where a [`DeviceTally`] keeps each step's loss (an f32 scalar, as
/// computed) and, under AMP, the scaler's found-inf flag ([1], f32,
/// counted where the loss was finite).
enum Record {
    /// The tensors each step made, kept: nothing to launch.
    List {
        losses: Vec<Tensor>,
        found_inf: Vec<Tensor>,
    },
    /// Written into two buffers at a count kept on the device, which the
    /// step advances itself: what a step captured as a CUDA graph can do,
    /// since each replay runs the same kernels on the same memory.
    Buffers {
        losses: Tensor,
        found_inf: Tensor,
        next: Tensor,
    },
}

/// What [`DeviceTally::read`] brings back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TallyValues {
    /// Mean loss over steps with a finite loss (NaN when none was).
    pub mean_loss: f64,
    /// The last finite loss.
    pub last: Option<f64>,
    pub finite: u64,
    pub nonfinite: u64,
    pub overflow: u64,
    pub steps: u64,
}

impl DeviceTally {
    /// A tally for up to `steps` steps of `trainer` on `device`, its
    /// optimiser's step count taken over.
    pub fn new(trainer: &NetTrainer, steps: usize, device: Device) -> Result<Self, TrainerError> {
        Ok(Self {
            record: Record::List {
                losses: Vec::with_capacity(steps),
                found_inf: Vec::new(),
            },
            corrections: Corrections::new(&trainer.opt, steps, device)?,
        })
    }

    /// [`DeviceTally::new`] whose steps write into buffers on the device
    /// ([`Record::Buffers`]): for steps captured as a CUDA graph.
    pub fn in_place(
        trainer: &NetTrainer,
        steps: usize,
        device: Device,
    ) -> Result<Self, TrainerError> {
        let n = steps as i64;
        Ok(Self {
            record: Record::Buffers {
                losses: Tensor::f_zeros([n], (Kind::Float, device))?,
                found_inf: Tensor::f_zeros([n], (Kind::Float, device))?,
                next: Tensor::f_zeros([1], (Kind::Int64, device))?,
            },
            corrections: Corrections::new(&trainer.opt, steps, device)?,
        })
    }

    /// Keeps a step's loss and (under AMP) its found-inf flag.
    fn add(&mut self, loss: Tensor, found_inf: Option<Tensor>) -> Result<(), TrainerError> {
        match &mut self.record {
            Record::List {
                losses,
                found_inf: flags,
            } => {
                losses.push(loss);
                flags.extend(found_inf);
            }
            Record::Buffers {
                losses,
                found_inf: flags,
                next,
            } => {
                let _ = losses.f_index_copy_(0, next, &loss.f_reshape([1])?)?;
                if let Some(f) = found_inf {
                    let _ = flags.f_index_copy_(0, next, &f.f_reshape([1])?)?;
                }
                let _ = next.f_add_scalar_(1)?;
            }
        }
        Ok(())
    }

    /// Reads the steps' values back (waits for the device), sums them in
    /// f64 on the host, and hands the optimiser its step count.
    pub fn read(&self, trainer: &mut NetTrainer) -> Result<TallyValues, TrainerError> {
        trainer.opt.step = self.corrections.count()?;
        let host = |t: Tensor| -> Result<Vec<f64>, TrainerError> {
            let t = t.f_to_kind(Kind::Double)?.f_to_device(Device::Cpu)?;
            Ok(Vec::<f64>::try_from(&t.f_reshape([-1])?)?)
        };
        let stacked = |ts: &[Tensor]| -> Result<Vec<f64>, TrainerError> {
            if ts.is_empty() {
                return Ok(Vec::new());
            }
            host(Tensor::f_stack(ts, 0)?)
        };
        let (losses, found_inf) = match &self.record {
            Record::List { losses, found_inf } => (stacked(losses)?, stacked(found_inf)?),
            Record::Buffers {
                losses,
                found_inf,
                next,
            } => {
                let n = next.f_int64_value(&[0])?;
                (
                    host(losses.f_narrow(0, 0, n)?)?,
                    host(found_inf.f_narrow(0, 0, n)?)?,
                )
            }
        };
        let mut v = TallyValues {
            mean_loss: f64::NAN,
            last: None,
            finite: 0,
            nonfinite: 0,
            overflow: 0,
            steps: losses.len() as u64,
        };
        let mut sum = 0.0;
        for (i, &loss) in losses.iter().enumerate() {
            if loss.is_finite() {
                sum += loss;
                v.finite += 1;
                v.last = Some(loss);
                v.overflow += u64::from(found_inf.get(i).is_some_and(|&f| f != 0.0));
            } else {
                v.nonfinite += 1;
            }
        }
        if v.finite > 0 {
            v.mean_loss = sum / v.finite as f64;
        }
        Ok(v)
    }
}

/// [`step`] without a read back to the host: the non-finite guard, the
/// clipping factor and the scaler's skip are decided on the device, and
/// the loss and the overflow flag go into `tally`. The gradients come back
/// from the backward pass as tensors (nothing accumulates into `.grad`, so
/// nothing is zeroed) and go end to end into one flat gradient, which the
/// scaler, the clip and AdamW each treat with one set of kernels (see
/// [`Flat`]). The same updates as [`step`] (up to float summation order),
/// which a GPU would otherwise wait for two or three times a step.
pub fn step_on_device(
    trainer: &mut NetTrainer,
    scaler: &mut GradScaler,
    loss: &Tensor,
    grad_clip: f64,
    tally: &mut DeviceTally,
) -> Result<(), TrainerError> {
    let value = loss.f_detach()?;
    let finite = value.f_isfinite()?;
    let params = trainer.params();
    let flat = trainer.flat()?;
    let root = if scaler.enabled {
        loss.f_mul(&scaler.scale)?.f_sum(Kind::Float)?
    } else {
        loss.shallow_clone()
    };
    let grads = Tensor::f_run_backward(&[&root], &params, false, false)?;
    let _guard = tch::no_grad_guard();
    let mut g = flat_gradient(&params, grads)?;
    if !scaler.enabled {
        if grad_clip > 0.0 {
            clip_flat_on_device(&mut g, grad_clip)?;
        }
        trainer
            .opt
            .update_flat_where(&flat, &g, &finite, &mut tally.corrections)?;
        return tally.add(value, None);
    }
    let found_inf = scaler.unscale_all(vec![g.shallow_clone()])?;
    if grad_clip > 0.0 {
        clip_flat_on_device(&mut g, grad_clip)?;
    }
    let ok = finite.f_logical_and(&found_inf.f_eq(0.0)?.f_reshape([])?)?;
    trainer
        .opt
        .update_flat_where(&flat, &g, &ok, &mut tally.corrections)?;
    scaler.update_where(&found_inf, &finite)?;
    tally.add(value, Some(found_inf))
}

/// The parameters' defined gradients and their global L2 norm (a scalar
/// on their device); `None` when no parameter has a gradient.
fn grads_and_norm(params: &[Tensor]) -> Result<Option<(Vec<Tensor>, Tensor)>, TrainerError> {
    let grads: Vec<Tensor> = params
        .iter()
        .map(Tensor::grad)
        .filter(Tensor::defined)
        .collect();
    if grads.is_empty() {
        return Ok(None);
    }
    let norms = grads
        .iter()
        .map(|g| g.f_norm())
        .collect::<Result<Vec<_>, _>>()?;
    let total = Tensor::f_stack(&norms, 0)?.f_norm()?;
    Ok(Some((grads, total)))
}

/// Scales the gradients down so that their global L2 norm is at most `max`.
fn clip_grad_norm(params: &[Tensor], max: f64) -> Result<(), TrainerError> {
    let _guard = tch::no_grad_guard();
    let Some((grads, total)) = grads_and_norm(params)? else {
        return Ok(());
    };
    let total = f64::try_from(&total)?;
    let coef = max / (total + 1e-6);
    if coef < 1.0 {
        for mut g in grads {
            let _ = g.f_mul_scalar_(coef)?;
        }
    }
    Ok(())
}

/// One optimisation step of `trainer` on `loss` (already computed from a
/// forward of its network): the non-finite guard, backward on the scaled
/// loss, unscale + global-norm clipping when `grad_clip` > 0, a step the
/// scaler may skip, and the scale update.
pub fn step(
    trainer: &mut NetTrainer,
    scaler: &mut GradScaler,
    loss: &Tensor,
    grad_clip: f64,
) -> Result<StepOutcome, TrainerError> {
    let value = f64::try_from(loss.f_detach()?)?;
    trainer.zero_grad();
    if !value.is_finite() {
        return Ok(StepOutcome {
            loss: value,
            nonfinite_loss: true,
            overflow: false,
        });
    }
    let params = trainer.params();
    if !scaler.enabled {
        loss.f_backward()?;
        if grad_clip > 0.0 {
            clip_grad_norm(&params, grad_clip)?;
        }
        trainer.opt.update(&params)?;
        return Ok(StepOutcome {
            loss: value,
            nonfinite_loss: false,
            overflow: false,
        });
    }
    loss.f_mul(&scaler.scale)?
        .f_sum(Kind::Float)?
        .f_backward()?;
    let found_inf = scaler.unscale(&params)?;
    if grad_clip > 0.0 {
        clip_grad_norm(&params, grad_clip)?;
    }
    let overflow = f64::try_from(&found_inf)? != 0.0;
    if !overflow {
        trainer.opt.update(&params)?;
    }
    scaler.update(&found_inf)?;
    Ok(StepOutcome {
        loss: value,
        nonfinite_loss: false,
        overflow,
    })
}

/// Per-sample LCFR-style weights `clamp(t_i / T, 0, 1)^alpha` with
/// T = max(1, current iteration); an exponent of 0 gives 1 everywhere.
pub fn iteration_weights(
    iterations: &Tensor,
    current: u64,
    alpha: f64,
) -> Result<Tensor, TrainerError> {
    let t = iterations.f_to_kind(Kind::Float)?;
    let ratio = t.f_div_scalar(current.max(1) as f64)?.f_clamp(0.0, 1.0)?;
    if alpha == 0.0 {
        return Ok(ratio.f_ones_like()?);
    }
    Ok(ratio.f_pow_tensor_scalar(alpha)?)
}

/// How samples are weighted by the iteration that produced them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Weighting {
    None,
    /// Weight `(t/T)^alpha`.
    Lcfr {
        alpha: f64,
    },
    /// Advantage: exponent `alpha` where the target ≥ 0, `beta` where < 0;
    /// strategy: exponent `gamma`.
    Dcfr {
        alpha: f64,
        beta: f64,
        gamma: f64,
    },
}

/// One of each weighting, with exponents that make each term matter (the
/// losses' tests here and in `native_train`).
#[cfg(test)]
pub(crate) const TEST_WEIGHTINGS: [Weighting; 3] = [
    Weighting::None,
    Weighting::Lcfr { alpha: 1.0 },
    Weighting::Dcfr {
        alpha: 1.5,
        beta: 0.0,
        gamma: 2.0,
    },
];

/// The advantage loss (docs/deep-cfr.md §8.3), computed in f32: squared error on the
/// legal entries, normalised by the (weighted) number of legal entries.
/// `mask` is 0/1 floats of shape [B, 22], `iterations` [B].
pub fn advantage_loss(
    pred: &Tensor,
    target: &Tensor,
    mask: &Tensor,
    iterations: &Tensor,
    current: u64,
    weighting: Weighting,
) -> Result<Tensor, TrainerError> {
    let pred = pred.f_to_kind(Kind::Float)?;
    let err = pred.f_sub(target)?.f_mul(mask)?;
    let sq = err.f_mul(&err)?;
    match weighting {
        Weighting::None => {
            let legal = mask.f_sum(Kind::Float)?.f_clamp_min(1.0)?;
            Ok(sq.f_sum(Kind::Float)?.f_div(&legal)?)
        }
        Weighting::Lcfr { alpha } => {
            let w = iteration_weights(iterations, current, alpha)?.f_unsqueeze(1)?;
            let wm = mask.f_mul(&w)?;
            let denom = wm.f_sum(Kind::Float)?.f_clamp_min(1e-12)?;
            Ok(sq.f_mul(&w)?.f_sum(Kind::Float)?.f_div(&denom)?)
        }
        Weighting::Dcfr { alpha, beta, .. } => {
            let wa = iteration_weights(iterations, current, alpha)?.f_unsqueeze(1)?;
            let wb = iteration_weights(iterations, current, beta)?.f_unsqueeze(1)?;
            let positive = target.f_ge(0.0)?;
            let w = wa
                .f_expand_as(target)?
                .f_where_self(&positive, &wb.f_expand_as(target)?)?;
            let wm = mask.f_mul(&w)?;
            let denom = wm.f_sum(Kind::Float)?.f_clamp_min(1e-12)?;
            Ok(sq.f_mul(&wm)?.f_sum(Kind::Float)?.f_div(&denom)?)
        }
    }
}

/// The strategy loss (docs/deep-cfr.md §8.4), in f32: cross-entropy of the target
/// distribution against the masked log-softmax of the logits.
// Same parameters as advantage_loss, so that the training step can call
// either alike; the losses themselves share nothing.
pub fn strategy_loss(
    logits: &Tensor,
    target: &Tensor,
    mask: &Tensor,
    iterations: &Tensor,
    current: u64,
    weighting: Weighting,
) -> Result<Tensor, TrainerError> {
    let logits = logits.f_to_kind(Kind::Float)?;
    let legal = mask.f_gt(0.5)?;
    let masked = logits.f_masked_fill(&legal.f_logical_not()?, f64::from(f32::MIN))?;
    let logp = masked.f_log_softmax(1, Kind::Float)?.f_mul(mask)?;
    let ce = target
        .f_mul(&logp)?
        .f_sum_dim_intlist(1, false, Kind::Float)?
        .f_neg()?;
    let alpha = match weighting {
        Weighting::None => return Ok(ce.f_mean(Kind::Float)?),
        Weighting::Lcfr { alpha } => alpha,
        Weighting::Dcfr { gamma, .. } => gamma,
    };
    let w = iteration_weights(iterations, current, alpha)?;
    let denom = w.f_sum(Kind::Float)?.f_clamp_min(1e-12)?;
    Ok(ce.f_mul(&w)?.f_sum(Kind::Float)?.f_div(&denom)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::network::Activation;

    fn tiny() -> NetTrainer {
        tch::manual_seed(3);
        let spec = MlpSpec {
            input_dim: 4,
            hidden_size: 8,
            num_layers: 1,
            outputs: 22,
            activation: Activation::Relu,
        };
        NetTrainer::new(
            spec,
            Device::Cpu,
            AdamWConfig {
                learning_rate: 1e-3,
                weight_decay: 1e-4,
            },
        )
        .unwrap()
    }

    /// Two trainers with the same weights. Other tests reseed and draw from
    /// libtorch's global generator concurrently, so two `tiny()` calls can
    /// start from different weights; the second copies the first's.
    fn tiny_pair() -> (NetTrainer, NetTrainer) {
        let (a, b) = (tiny(), tiny());
        tch::no_grad(|| {
            for (p, q) in b.params().iter().zip(a.params()) {
                p.shallow_clone().copy_(&q);
            }
        });
        (a, b)
    }

    fn snapshot(t: &NetTrainer) -> Vec<Tensor> {
        t.params().iter().map(|p| p.detach().copy()).collect()
    }

    fn same(a: &[Tensor], b: &[Tensor]) -> bool {
        a.iter().zip(b).all(|(x, y)| x.equal(y))
    }

    fn mse(t: &NetTrainer, x: &Tensor) -> Tensor {
        t.forward(x).unwrap().square().mean(Kind::Float)
    }

    #[test]
    fn lcfr_weights_follow_the_iteration_ratio() {
        let its = Tensor::from_slice(&[1i64, 5, 10, 20]);
        let w = iteration_weights(&its, 10, 1.0).unwrap();
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), vec![0.1, 0.5, 1.0, 1.0]);
        let w = iteration_weights(&its, 10, 0.0).unwrap();
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), vec![1.0; 4]);
    }

    #[test]
    fn losses_are_non_negative_and_ignore_illegal_entries() {
        tch::manual_seed(5);
        let pred = Tensor::randn([6, 22], (Kind::Float, Device::Cpu));
        let target = Tensor::randn([6, 22], (Kind::Float, Device::Cpu)) * 20.0;
        let mask = Tensor::rand([6, 22], (Kind::Float, Device::Cpu))
            .gt(0.3)
            .to_kind(Kind::Float);
        let its = Tensor::from_slice(&[1i64, 2, 3, 4, 5, 6]);
        for w in TEST_WEIGHTINGS {
            let l =
                f64::try_from(advantage_loss(&pred, &target, &mask, &its, 6, w).unwrap()).unwrap();
            assert!(l >= 0.0 && l.is_finite(), "{w:?}: {l}");
            // Changing predictions on illegal entries changes nothing.
            let noisy = &pred + (1.0 - &mask) * 1000.0;
            let l2 =
                f64::try_from(advantage_loss(&noisy, &target, &mask, &its, 6, w).unwrap()).unwrap();
            assert!((l - l2).abs() < 1e-6 * l.max(1.0));
            let probs =
                (Tensor::rand([6, 22], (Kind::Float, Device::Cpu)) * &mask).clamp_min(1e-6) * &mask;
            let probs = &probs / probs.sum_dim_intlist(1, true, Kind::Float);
            let s =
                f64::try_from(strategy_loss(&pred, &probs, &mask, &its, 6, w).unwrap()).unwrap();
            assert!(s >= 0.0 && s.is_finite(), "{w:?}: {s}");
        }
        // none: Σe² over legal entries / number of legal entries.
        let pred = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).view([1, 3]);
        let target = Tensor::from_slice(&[0.0f32, 0.0, 0.0]).view([1, 3]);
        let mask = Tensor::from_slice(&[1.0f32, 0.0, 1.0]).view([1, 3]);
        let its = Tensor::from_slice(&[1i64]);
        let l =
            f64::try_from(advantage_loss(&pred, &target, &mask, &its, 1, Weighting::None).unwrap())
                .unwrap();
        assert_eq!(l, 5.0);
    }

    #[test]
    fn disabled_scaler_matches_libtorch_adamw() {
        use tch::nn::OptimizerConfig;
        let x = Tensor::randn([8, 4], (Kind::Float, Device::Cpu));
        let (mut a, b) = tiny_pair();
        // libtorch's own AdamW over the same parameters is the reference.
        let mut reference = tch::nn::AdamW {
            beta1: 0.9,
            beta2: 0.999,
            wd: 1e-4,
            eps: 1e-8,
            amsgrad: false,
        }
        .build(&b.vs, 1e-3)
        .unwrap();
        let mut scaler = GradScaler::new(false, Device::Cpu).unwrap();
        for _ in 0..5 {
            let loss = mse(&a, &x);
            step(&mut a, &mut scaler, &loss, 1.0).unwrap();
            let loss = mse(&b, &x);
            reference.zero_grad();
            loss.backward();
            clip_grad_norm(&b.params(), 1.0).unwrap();
            reference.step();
        }
        for (p, q) in snapshot(&a).iter().zip(snapshot(&b)) {
            let diff = f64::try_from((p - q).abs().max()).unwrap();
            assert!(diff < 1e-6, "parameters differ by {diff}");
        }
        assert_eq!(scaler.scale_value().unwrap(), 1.0);
        assert_eq!(a.opt.step, 5);
    }

    #[test]
    fn inf_gradient_skips_the_step_and_halves_the_scale() {
        let mut t = tiny();
        let mut scaler = GradScaler::new(true, Device::Cpu).unwrap();
        let before = snapshot(&t);
        // A finite loss (0) whose gradient is not: d√u/du is infinite at 0.
        let x = Tensor::randn([2, 4], (Kind::Float, Device::Cpu));
        let s = t.forward(&x).unwrap().sum(Kind::Float);
        let loss = (&s - s.detach()).sqrt();
        assert_eq!(f64::try_from(&loss).unwrap(), 0.0);
        let outcome = step(&mut t, &mut scaler, &loss, 1.0).unwrap();
        assert!(outcome.overflow, "{outcome:?}");
        assert!(same(&before, &snapshot(&t)));
        assert_eq!(scaler.scale_value().unwrap(), 32_768.0);
    }

    #[test]
    fn clean_steps_double_the_scale_after_2000() {
        let mut t = tiny();
        let mut scaler = GradScaler::new(true, Device::Cpu).unwrap();
        let x = Tensor::randn([2, 4], (Kind::Float, Device::Cpu));
        for i in 0..2000 {
            let loss = mse(&t, &x);
            let outcome = step(&mut t, &mut scaler, &loss, 0.0).unwrap();
            assert!(!outcome.overflow, "step {i}");
            let expected = if i < 1999 { 65_536.0 } else { 131_072.0 };
            if i >= 1998 {
                assert_eq!(scaler.scale_value().unwrap(), expected, "after step {i}");
            }
        }
    }

    /// The losses of a sequence that holds every case a step decides:
    /// clean steps, a non-finite loss, and (under AMP) a finite loss whose
    /// gradient is not.
    fn case_loss(t: &NetTrainer, case: usize, x: &Tensor, amp: bool) -> Tensor {
        match case {
            3 => mse(
                t,
                &Tensor::from_slice(&[f32::NAN, 0.0, 0.0, 0.0]).view([1, 4]),
            ),
            // Without a scaler nothing catches an infinite gradient.
            5 if amp => {
                let s = t.forward(x).unwrap().sum(Kind::Float);
                (&s - s.detach()).sqrt()
            }
            _ => mse(t, x) * 50.0,
        }
    }

    #[test]
    fn the_step_that_stays_on_the_device_takes_the_host_steps_decisions() {
        tch::manual_seed(11);
        let x = Tensor::randn([3, 4], (Kind::Float, Device::Cpu));
        // In place: the tally a step captured as a CUDA graph writes.
        for (amp, in_place) in [(false, false), (true, false), (false, true), (true, true)] {
            let (mut host, mut dev) = tiny_pair();
            let mut host_scaler = GradScaler::new(amp, Device::Cpu).unwrap();
            let mut dev_scaler = GradScaler::new(amp, Device::Cpu).unwrap();
            let mut tally = if in_place {
                DeviceTally::in_place(&dev, 8, Device::Cpu).unwrap()
            } else {
                DeviceTally::new(&dev, 8, Device::Cpu).unwrap()
            };
            let (mut sum, mut finite, mut nonfinite, mut overflow, mut last) =
                (0.0, 0u64, 0u64, 0u64, None);
            for case in 0..8 {
                // Clipping at 0.05 binds for these losses, so the device's
                // clipping factor is exercised below 1 as well as at 1.
                let clip = if case % 2 == 0 { 0.05 } else { 0.0 };
                let loss = case_loss(&host, case, &x, amp);
                let o = step(&mut host, &mut host_scaler, &loss, clip).unwrap();
                let loss = case_loss(&dev, case, &x, amp);
                step_on_device(&mut dev, &mut dev_scaler, &loss, clip, &mut tally).unwrap();
                if o.nonfinite_loss {
                    nonfinite += 1;
                } else {
                    sum += o.loss;
                    finite += 1;
                    last = Some(o.loss);
                }
                overflow += u64::from(o.overflow);
            }
            let v = tally.read(&mut dev).unwrap();
            assert_eq!(
                (v.finite, v.nonfinite, v.overflow, v.steps),
                (finite, nonfinite, overflow, 8)
            );
            assert_eq!(nonfinite, 1, "amp {amp}");
            assert_eq!(overflow, u64::from(amp), "amp {amp}");
            assert!((v.mean_loss - sum / finite as f64).abs() < 1e-9 * sum.abs().max(1.0));
            assert_eq!(v.last.map(|l| l as f32), last.map(|l| l as f32));
            assert_eq!(dev.opt.step, host.opt.step, "amp {amp}");
            assert_eq!(host.opt.step, 8 - 1 - i64::from(amp));
            assert_eq!(
                dev_scaler.scale_value().unwrap(),
                host_scaler.scale_value().unwrap()
            );
            for (p, q) in snapshot(&host).iter().zip(snapshot(&dev)) {
                let diff = f64::try_from((p - q).abs().max()).unwrap();
                assert!(diff < 1e-6, "amp {amp}: parameters differ by {diff}");
            }
            for ((m, v), (dm, dv)) in host.opt.moments.iter().zip(&dev.opt.moments) {
                for (a, b) in [(m, dm), (v, dv)] {
                    let diff = f64::try_from((a - b).abs().max()).unwrap();
                    assert!(diff < 1e-6, "amp {amp}: moments differ by {diff}");
                }
            }
        }
    }

    /// After the first device step the parameters, the layers' weights and
    /// the moments are views of the flat buffers: what a checkpoint load
    /// copies into a parameter is what the next flat update starts from,
    /// and what the update writes is what the next forward uses.
    #[test]
    fn flat_buffers_are_the_parameters_and_the_moments() {
        tch::manual_seed(5);
        let x = Tensor::randn([3, 4], (Kind::Float, Device::Cpu));
        let mut t = tiny();
        let mut scaler = GradScaler::new(false, Device::Cpu).unwrap();
        let mut tally = DeviceTally::new(&t, 1, Device::Cpu).unwrap();
        let loss = mse(&t, &x);
        step_on_device(&mut t, &mut scaler, &loss, 0.0, &mut tally).unwrap();
        let flat = t.flat().unwrap();
        let _guard = tch::no_grad_guard();
        for (i, (_, mut p)) in t.vs.variables().into_iter().enumerate() {
            let _ = p.f_fill_(i as f64 + 1.0).unwrap();
        }
        for (m, v) in &mut t.opt.moments {
            let _ = m.f_fill_(-1.0).unwrap();
            let _ = v.f_fill_(-2.0).unwrap();
        }
        let total = flat.params.numel();
        let numels: usize = t.params().iter().map(Tensor::numel).sum();
        assert_eq!(total, numels);
        let written = |b: &Tensor, value: f64| f64::try_from(b.eq(value).sum(Kind::Float)).unwrap();
        assert_eq!(written(&flat.m, -1.0), total as f64);
        assert_eq!(written(&flat.v, -2.0), total as f64);
        let filled: f64 = (1..=t.params().len())
            .map(|i| written(&flat.params, i as f64))
            .sum();
        assert_eq!(filled, total as f64);
        // The forward reads the same storage: zeroing the flat parameters
        // zeroes every output.
        let _ = flat.params.shallow_clone().f_fill_(0.0).unwrap();
        let out = t.forward(&x).unwrap();
        assert_eq!(f64::try_from(out.abs().sum(Kind::Float)).unwrap(), 0.0);
    }

    #[test]
    fn nonfinite_loss_is_counted_and_skipped() {
        let mut t = tiny();
        for enabled in [false, true] {
            let mut scaler = GradScaler::new(enabled, Device::Cpu).unwrap();
            let before = snapshot(&t);
            let x = Tensor::from_slice(&[f32::NAN, 0.0, 0.0, 0.0]).view([1, 4]);
            let loss = mse(&t, &x);
            let outcome = step(&mut t, &mut scaler, &loss, 1.0).unwrap();
            assert!(outcome.nonfinite_loss && !outcome.overflow);
            assert!(same(&before, &snapshot(&t)));
        }
    }
}
