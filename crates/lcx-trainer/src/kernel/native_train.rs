//! lcx's own CPU training step for the MLP: forward, loss, backward,
//! global-norm clipping and AdamW, on plain `f32` slices.
//!
//! On a CPU, libtorch spends a training step of the default network
//! (batch 256, 297→512×3→22) in MKL GEMMs that re-pack both operands on
//! every call, plus a dozen element-wise passes over the 689 k parameters
//! (zeroing gradients, norms, the AdamW update in several ops) and autograd
//! bookkeeping. Here the three GEMMs of each layer (forward `x Wᵀ`, weight
//! gradient `gᵀ a`, input gradient `g W`) run on the packed AVX2/FMA
//! micro-kernel of [`crate::kernel::native`], the loss gradient is written in
//! closed form, and AdamW (with the clipping factor) is one fused pass
//! per parameter that also re-packs the weights for the next step.
//!
//! The network's tensors stay the state of record: [`NativeTrainer::load`]
//! copies the parameters, AdamW moments and step count out of a
//! [`NetTrainer`], and [`NativeTrainer::store`] writes them back, so
//! checkpoints, traversals and evaluation see exactly what the libtorch
//! path would leave. On finite values the two paths agree up to float
//! summation order; a non-finite loss is skipped and counted by both, and
//! so, here, is a finite loss whose gradient overflowed (libtorch would
//! write that gradient into the weights).

use tch::{Device, Kind, Tensor};

use crate::kernel::native::{
    self, dense_into_panels, dense_threads_packed, from_row_panels, pack_row_panels, tensor_values,
    to_row_panels, Extras, Layer, Left, Panels, StripWriter, PANEL,
};
use crate::nn::network::Activation;
use crate::nn::optim::{NetTrainer, StepOutcome, Weighting};
use crate::TrainerError;
use lcx_core::cfr::memory::Batch;
use lcx_core::cfr::regret::{is_legal, ACTIONS};

/// The loss a network is trained on (docs/deep-cfr.md §8.3–8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// Weighted squared error on the legal entries.
    Advantage,
    /// Cross-entropy against the masked log-softmax.
    Strategy,
}

/// One parameter tensor with its AdamW moments and gradient.
#[derive(Debug)]
pub(super) struct Param {
    tensor: Tensor,
    /// Its place in the VarStore's (and the optimiser's) order.
    pub(super) slot: usize,
    /// `Some((outputs, inputs))` for a weight matrix, whose four vectors
    /// are kept in row panels (see [`native::to_row_panels`]): the form
    /// the input-gradient GEMM reads `W` in, which the weight-gradient GEMM
    /// writes its output in, and in which a block of 16 rows is 1 KB
    /// tiles for the forward pack's transposes. AdamW is element-wise, so
    /// the layout does not change it. `None` for a bias (plain order).
    panels: Option<(usize, usize)>,
    pub(super) value: Vec<f32>,
    pub(super) m: Vec<f32>,
    pub(super) v: Vec<f32>,
    pub(super) grad: Vec<f32>,
}

fn copy_into(t: &Tensor, v: &[f32]) -> Result<(), TrainerError> {
    let src = Tensor::f_from_slice(v)?.f_view(t.size().as_slice())?;
    let mut t = t.shallow_clone();
    t.f_copy_(&src)?;
    Ok(())
}

impl Param {
    /// Copies a tensor and its moments; `panels` as in [`Param::panels`].
    pub(super) fn load(
        tensor: &Tensor,
        slot: usize,
        moments: &(Tensor, Tensor),
        panels: Option<(usize, usize)>,
    ) -> Result<Self, TrainerError> {
        let read = |t: &Tensor| -> Result<Vec<f32>, TrainerError> {
            let v = tensor_values(t)?;
            Ok(match panels {
                Some((rows, cols)) => to_row_panels(&v, rows, cols),
                None => v,
            })
        };
        let value = read(tensor)?;
        Ok(Self {
            tensor: tensor.shallow_clone(),
            slot,
            panels,
            grad: vec![0.0; value.len()],
            m: read(&moments.0)?,
            v: read(&moments.1)?,
            value,
        })
    }

    /// `v` (one of this parameter's vectors) in the tensor's row-major
    /// order.
    fn row_major(&self, v: &[f32]) -> Vec<f32> {
        match self.panels {
            Some((rows, cols)) => from_row_panels(v, rows, cols),
            None => v.to_vec(),
        }
    }
}

/// The passes of one training step on lcx's kernel, in whichever
/// precision: [`take_step`] runs them in order.
pub(super) trait Pass {
    /// (inputs, outputs) of the network.
    fn shape(&self) -> (usize, usize);
    fn run_forward(&mut self, x: &[f32], rows: usize);
    /// The last forward's logits, and the buffer their gradient goes in.
    fn logits_and_grad(&mut self) -> (&[f32], &mut Vec<f32>);
    /// Every parameter's gradient from the logits' gradient.
    fn run_backward(&mut self, x: &[f32], rows: usize);
    /// Clips to a global norm of `grad_clip` (when > 0) and takes the
    /// AdamW step; false (and nothing changed) when the gradient norm is
    /// not finite.
    fn clip_and_update(&mut self, grad_clip: f64) -> bool;
}

/// One optimisation step of `p` on `batch`: forward, `loss`, backward,
/// clipping and AdamW. A non-finite loss changes nothing (as on the
/// libtorch path); so does a finite loss whose gradient overflowed inside
/// the network, which is counted like one rather than written into the
/// weights.
pub(super) fn take_step(
    p: &mut impl Pass,
    batch: &Batch,
    loss: Loss,
    weighting: Weighting,
    current: u64,
    grad_clip: f64,
) -> Result<StepOutcome, TrainerError> {
    let rows = batch.rows;
    let (inputs, outputs) = p.shape();
    if batch.dim != inputs
        || batch.states.len() != rows * batch.dim
        || batch.targets.len() != rows * ACTIONS
        || batch.masks.len() != rows
        || batch.iterations.len() != rows
        || outputs != ACTIONS
    {
        return Err(TrainerError::BadShape(format!(
            "a batch of {rows} rows × {} features for a network of {inputs} inputs and {outputs} outputs",
            batch.dim
        )));
    }
    p.run_forward(&batch.states, rows);
    let (logits, grad) = p.logits_and_grad();
    let value = match loss {
        Loss::Advantage => advantage_grad(logits, batch, current, weighting, grad),
        Loss::Strategy => strategy_grad(logits, batch, current, weighting, grad),
    };
    if !value.is_finite() {
        return Ok(StepOutcome {
            loss: value,
            nonfinite_loss: true,
            overflow: false,
        });
    }
    p.run_backward(&batch.states, rows);
    let applied = p.clip_and_update(grad_clip);
    Ok(StepOutcome {
        loss: value,
        nonfinite_loss: !applied,
        overflow: false,
    })
}

impl Pass for NativeTrainer {
    fn shape(&self) -> (usize, usize) {
        (self.dims[0].0, self.dims[self.dims.len() - 1].1)
    }

    fn run_forward(&mut self, x: &[f32], rows: usize) {
        self.forward(x, rows);
    }

    fn logits_and_grad(&mut self) -> (&[f32], &mut Vec<f32>) {
        (&self.acts[self.acts.len() - 1], &mut self.grad)
    }

    fn run_backward(&mut self, x: &[f32], rows: usize) {
        self.backward(x, rows);
    }

    fn clip_and_update(&mut self, grad_clip: f64) -> bool {
        self.apply_gradients(grad_clip)
    }
}

/// Writes `params` (values and moments) and the step count back into the
/// tensors they were loaded from.
pub(super) fn store_params<'p>(
    params: impl Iterator<Item = &'p Param>,
    step: i64,
    trainer: &mut NetTrainer,
) -> Result<(), TrainerError> {
    let _guard = tch::no_grad_guard();
    let moments = &trainer.opt.moments;
    for p in params {
        copy_into(&p.tensor, &p.row_major(&p.value))?;
        copy_into(&moments[p.slot].0, &p.row_major(&p.m))?;
        copy_into(&moments[p.slot].1, &p.row_major(&p.v))?;
    }
    trainer.opt.step = step;
    Ok(())
}

/// One layer's tensors as [`NativeTrainer::layout`] finds them.
pub(super) struct LayerSlots<'a> {
    pub(super) weight: (&'a Tensor, usize),
    pub(super) bias: (&'a Tensor, usize),
    /// (inputs, outputs).
    pub(super) dims: (usize, usize),
}

/// A network's training state, copied out of its tensors, and the buffers
/// a step reuses.
#[derive(Debug)]
pub struct NativeTrainer {
    /// (inputs, outputs) per layer, input side first.
    dims: Vec<(usize, usize)>,
    weights: Vec<Param>,
    biases: Vec<Param>,
    hyper: Hyper,
    step: i64,
    /// Tasks each GEMM is split into (1: the calling thread only).
    threads: usize,
    /// Each layer's output: hidden layers after ReLU, the last the logits.
    acts: Vec<Vec<f32>>,
    grad: Vec<f32>,
    grad_next: Vec<f32>,
    /// Σ g² over every weight gradient of the last backward pass, added up
    /// by the weight-gradient GEMMs as they store (one slot per panel).
    weight_squares: f64,
    panel_squares: Vec<f64>,
    /// The input-gradient GEMM's column sums: the bias gradient below.
    column_sums: Vec<f32>,
    /// Per layer, the packed operands of its forward (`Wᵀ` and the bias)
    /// and weight-gradient (the layer's input) GEMMs, kept apart so that
    /// each keeps its shape (and zero padding) across steps. The input
    /// gradient reads `W` where it is kept (see [`Param::panels`]). The
    /// forward pack always holds the current parameters: packed once by
    /// `load`, then refreshed by [`NativeTrainer::adamw`] strip by strip
    /// right after it updates each strip.
    packs: Vec<[Layer; 2]>,
    /// The input-gradient GEMMs' (zero) bias: as many floats as the widest
    /// layer input, padded.
    zero_bias: Vec<f32>,
}

impl NativeTrainer {
    /// Whether this path computes `trainer`'s network: a CPU with AVX2 and
    /// FMA, an eager ReLU network whose parameters are CPU f32 (weight,
    /// bias) pairs that chain. Nothing is copied.
    pub fn applies(trainer: &NetTrainer) -> bool {
        Self::layout(trainer).is_some()
    }

    /// Per layer: its weight and bias tensors, their places in the
    /// VarStore's (and the optimiser's) order, and (inputs, outputs);
    /// `None` where [`NativeTrainer::applies`] is false.
    pub(super) fn layout(trainer: &NetTrainer) -> Option<Vec<LayerSlots<'_>>> {
        let net = &trainer.net;
        if !native::supported() || net.is_traced() || net.activation() != Activation::Relu {
            return None;
        }
        let params = trainer.params();
        let layers: Vec<_> = net.parameters().collect();
        if layers.is_empty()
            || params.len() != 2 * layers.len()
            || trainer.opt.moments.len() != params.len()
        {
            return None;
        }
        // The optimiser's moments follow the VarStore's order; find each
        // layer's tensors in it by identity rather than assume an order.
        let slot = |t: &Tensor| params.iter().position(|p| p.data_ptr() == t.data_ptr());
        let usable = |t: &Tensor| t.device() == Device::Cpu && t.kind() == Kind::Float;
        let mut out: Vec<LayerSlots<'_>> = Vec::with_capacity(layers.len());
        for (w, b) in layers {
            let b = b?;
            if !usable(w) || !usable(b) || w.dim() != 2 {
                return None;
            }
            let size = w.size();
            let dims = (size[1] as usize, size[0] as usize);
            if out.last().is_some_and(|prev| prev.dims.1 != dims.0) {
                return None;
            }
            out.push(LayerSlots {
                weight: (w, slot(w)?),
                bias: (b, slot(b)?),
                dims,
            });
        }
        Some(out)
    }

    /// Copies `trainer`'s parameters, moments and step count; `None` where
    /// this path does not compute the same network (see
    /// [`NativeTrainer::applies`]).
    pub fn load(trainer: &NetTrainer, threads: usize) -> Result<Option<Self>, TrainerError> {
        let Some(layout) = Self::layout(trainer) else {
            return Ok(None);
        };
        let moments = &trainer.opt.moments;
        let mut dims = Vec::with_capacity(layout.len());
        let mut weights = Vec::with_capacity(layout.len());
        let mut biases = Vec::with_capacity(layout.len());
        for l in layout {
            let ((w, iw), (b, ib)) = (l.weight, l.bias);
            dims.push(l.dims);
            weights.push(Param::load(
                w,
                iw,
                &moments[iw],
                Some((l.dims.1, l.dims.0)),
            )?);
            biases.push(Param::load(b, ib, &moments[ib], None)?);
        }
        let opt = &trainer.opt;
        let packs = dims
            .iter()
            .zip(&weights)
            .zip(&biases)
            .map(|((&(inputs, outputs), w), b)| {
                let mut packs: [Layer; 2] = Default::default();
                packs[0].pack_weights_from_row_panels(inputs, outputs, &w.value, &b.value);
                packs
            })
            .collect();
        let widest = dims.iter().map(|d| d.0).max().unwrap_or(0);
        Ok(Some(Self {
            acts: vec![Vec::new(); dims.len()],
            packs,
            dims,
            weights,
            biases,
            hyper: Hyper::of(opt),
            step: opt.step,
            threads: threads.max(1),
            grad: Vec::new(),
            grad_next: Vec::new(),
            weight_squares: 0.0,
            panel_squares: Vec::new(),
            column_sums: Vec::new(),
            zero_bias: vec![0.0; widest.div_ceil(PANEL) * PANEL],
        }))
    }

    /// Writes the parameters, moments and step count back into the tensors
    /// they were loaded from (`trainer` must be the one passed to `load`).
    pub fn store(&self, trainer: &mut NetTrainer) -> Result<(), TrainerError> {
        store_params(self.weights.iter().chain(&self.biases), self.step, trainer)
    }

    /// One optimisation step on `batch`: forward, `loss`, backward, clipping
    /// to a global norm of `grad_clip` (when > 0) and AdamW. A non-finite
    /// loss changes nothing (as on the libtorch path).
    pub fn step(
        &mut self,
        batch: &Batch,
        loss: Loss,
        weighting: Weighting,
        current: u64,
        grad_clip: f64,
    ) -> Result<StepOutcome, TrainerError> {
        take_step(self, batch, loss, weighting, current, grad_clip)
    }

    /// Clips the gradients to a global norm of `grad_clip` (when > 0) and
    /// takes the AdamW step; false (and nothing changed) when the gradient
    /// norm is not finite.
    fn apply_gradients(&mut self, grad_clip: f64) -> bool {
        let norm = self.grad_norm();
        if !norm.is_finite() {
            return false;
        }
        self.adamw(clip_scale(norm, grad_clip));
        true
    }

    fn forward(&mut self, x: &[f32], rows: usize) {
        let last = self.dims.len() - 1;
        for (l, &(_, outputs)) in self.dims.iter().enumerate() {
            let (this, after) = self.packs.split_at_mut(l + 1);
            let pack = &this[l][0];
            let (done, rest) = self.acts.split_at_mut(l);
            let input = if l == 0 { x } else { &done[l - 1][..] };
            let out = &mut rest[0];
            // Every element is written by the kernel: no need to zero.
            out.resize(rows * outputs, 0.0);
            // A hidden layer's output is the next layer's input: the kernel
            // also stores it packed for that layer's weight gradient.
            let packed = match after.first_mut() {
                Some([_, dw]) if l < last => {
                    dw.prepare_rows(rows, outputs);
                    Some(dw)
                }
                _ => None,
            };
            dense_threads_packed(pack, input, rows, out, packed, l < last, self.threads);
        }
    }

    /// Gradients of every parameter from `self.grad` (the loss's gradient
    /// with respect to the logits, row-major).
    ///
    /// The gradient flowing down is kept in row panels (see
    /// [`native::to_row_panels`]), the one layout both GEMMs of a layer
    /// read it in: the input gradient reads `g` from it ([`Left::Strips`])
    /// and writes the next `g` in it, and the weight gradient reads `gᵀ`
    /// from the same buffer ([`Left::StripsT`]), so no pass transposes it.
    /// The input-gradient GEMM also applies the ReLU below and adds up the
    /// bias gradient below as it stores.
    fn backward(&mut self, x: &[f32], rows: usize) {
        self.weight_squares = 0.0;
        let top = self.dims.len() - 1;
        let last = self.dims[top].1;
        self.grad_next
            .resize(last.div_ceil(PANEL) * PANEL * rows, 0.0);
        pack_row_panels(&self.grad, rows, last, &mut self.grad_next);
        std::mem::swap(&mut self.grad, &mut self.grad_next);
        // The top layer's bias gradient: the column sums of the loss
        // gradient, a strip at a time, rows in order.
        let gb = &mut self.biases[top].grad;
        gb.fill(0.0);
        for (s, strip) in self.grad.chunks_exact(rows * PANEL).enumerate() {
            let sums = &mut gb[s * PANEL..((s + 1) * PANEL).min(last)];
            for row in strip.chunks_exact(PANEL) {
                for (s, &v) in sums.iter_mut().zip(row) {
                    *s += v;
                }
            }
        }
        for l in (0..self.dims.len()).rev() {
            let (inputs, outputs) = self.dims[l];
            let g = &self.grad;
            // Weight: gᵀ (outputs × rows) times the layer's input (rows ×
            // inputs), written in the weights' row panels.
            let [_, dw] = &mut self.packs[l];
            if l == 0 {
                // The batch itself; deeper layers' inputs were packed by the
                // forward.
                dw.pack_rows(rows, inputs, x);
            }
            self.panel_squares.resize(inputs.div_ceil(PANEL), 0.0);
            let extras = Extras {
                packed: Some(&mut self.weights[l].grad),
                squares: Some(&mut self.panel_squares),
                ..Extras::default()
            };
            dense_into_panels(dw.view(), Left::StripsT, g, outputs, extras, self.threads);
            self.weight_squares += self.panel_squares.iter().sum::<f64>();
            if l == 0 {
                break;
            }
            // Input: g W (rows × inputs), through the ReLU below (its
            // output, which the forward kept in row panels for this
            // layer's weight gradient, is zero exactly where the unit was
            // off), and the bias gradient below from the same registers.
            // `W` is kept in the kernel's packed form already.
            self.grad_next
                .resize(inputs.div_ceil(PANEL) * PANEL * rows, 0.0);
            self.column_sums.clear();
            self.column_sums.resize(inputs.div_ceil(PANEL) * PANEL, 0.0);
            let w = Panels::new(outputs, inputs, &self.weights[l].value, &self.zero_bias);
            let extras = Extras {
                packed: Some(&mut self.grad_next),
                mask: Some(self.packs[l][1].panels()),
                column_sums: Some(&mut self.column_sums),
                ..Extras::default()
            };
            dense_into_panels(w, Left::Strips, g, rows, extras, self.threads);
            self.biases[l - 1]
                .grad
                .copy_from_slice(&self.column_sums[..inputs]);
            std::mem::swap(&mut self.grad, &mut self.grad_next);
        }
    }

    #[cfg(test)]
    fn params(&self) -> impl Iterator<Item = &Param> {
        self.weights.iter().chain(&self.biases)
    }

    /// The global L2 norm of every gradient of the last backward pass: the
    /// weights' squares were summed as their GEMMs stored them.
    fn grad_norm(&self) -> f64 {
        let biases: f64 = self.biases.iter().map(|p| sum_of_squares(&p.grad)).sum();
        (self.weight_squares + biases).sqrt()
    }

    /// PyTorch's AdamW, element by element in the order of its tensor ops
    /// (see `optim::AdamW::update`), on the gradients times `scale` (the
    /// clipping coefficient, when clipping applies): one pass per
    /// parameter. Each weight row panel is transposed into the next step's
    /// forward pack right after its update, while it is still in cache,
    /// instead of by a pass of its own over every weight (from L3, with
    /// three networks training at once) at the start of the next step; the
    /// input-gradient GEMM reads the weights where they are.
    ///
    /// The weights' row panels of all layers are cut into `threads` runs of
    /// about as many weights each, updated at once: AdamW streams 28 bytes
    /// per parameter, and on one thread its share of a step left the other
    /// core idle for a quarter of it. Element-wise, so the cut does not
    /// change a bit.
    fn adamw(&mut self, scale: Option<f32>) {
        self.step += 1;
        let c = AdamCoefs::of(&self.hyper, self.step);
        let tasks = self.threads.max(1);
        let total: usize = self
            .weights
            .iter()
            .map(|w| w.value.len())
            .sum::<usize>()
            .max(1);
        let mut runs: Vec<Vec<Strips<'_>>> = (0..tasks).map(|_| Vec::new()).collect();
        let mut assigned = 0;
        for (w, [forward, _]) in self.weights.iter_mut().zip(self.packs.iter_mut()) {
            let Some((outputs, _)) = w.panels else {
                unreachable!("weights are kept in row panels")
            };
            let strip = outputs * PANEL;
            let mut rest = Strips {
                first: 0,
                strip,
                block: Block {
                    value: &mut w.value,
                    m: &mut w.m,
                    v: &mut w.v,
                    grad: &w.grad,
                },
                writer: forward.strip_writer(),
            };
            while !rest.block.value.is_empty() {
                // The run the next row panel falls in, and how many row
                // panels that run still takes.
                let t = (assigned * tasks / total).min(tasks - 1);
                let end = total * (t + 1) / tasks;
                let count = end.saturating_sub(assigned).div_ceil(strip).max(1);
                let left = rest.block.value.len() / strip;
                let (head, tail) = rest.split(count.min(left));
                assigned += head.block.value.len();
                runs[t].push(head);
                rest = tail;
            }
        }
        let c = &c;
        let update = move |run: Vec<Strips<'_>>| {
            for strips in run {
                strips.update(c, scale);
            }
        };
        let mut runs = runs.into_iter();
        let first = runs.next().unwrap_or_default();
        if tasks == 1 {
            // On the calling thread, where the gradients are in cache:
            // `rayon::scope` from outside the pool would run it on a pool
            // thread (the rotation of decision 0021 steps on one thread).
            update(first);
        } else {
            rayon::scope(|s| {
                for run in runs {
                    s.spawn(move |_| update(run));
                }
                update(first);
            });
        }
        for (b, [forward, _]) in self.biases.iter_mut().zip(self.packs.iter_mut()) {
            adamw_block(
                c,
                scale,
                Block {
                    value: &mut b.value,
                    m: &mut b.m,
                    v: &mut b.v,
                    grad: &b.grad,
                },
            );
            forward.set_bias(&b.value);
        }
    }
}

/// Row panels `first..` of one weight matrix (each `strip` floats of each
/// of its vectors), with the part of its layer's forward pack they
/// transpose into: the unit [`NativeTrainer::adamw`] hands to a task.
struct Strips<'a> {
    first: usize,
    strip: usize,
    block: Block<'a>,
    writer: StripWriter<'a>,
}

impl<'a> Strips<'a> {
    /// The first `count` row panels and the rest.
    fn split(self, count: usize) -> (Self, Self) {
        let (b0, b1) = self.block.split_at(count * self.strip);
        let (w0, w1) = self.writer.split_at(self.first + count);
        let head = Strips {
            first: self.first,
            strip: self.strip,
            block: b0,
            writer: w0,
        };
        let tail = Strips {
            first: self.first + count,
            strip: self.strip,
            block: b1,
            writer: w1,
        };
        (head, tail)
    }

    /// AdamW on these row panels, each re-packed right after its update.
    fn update(mut self, c: &AdamCoefs, scale: Option<f32>) {
        let Block { value, m, v, grad } = self.block;
        let n = self.strip;
        for (s, (((value, m), v), grad)) in value
            .chunks_exact_mut(n)
            .zip(m.chunks_exact_mut(n))
            .zip(v.chunks_exact_mut(n))
            .zip(grad.chunks_exact(n))
            .enumerate()
        {
            adamw_block(c, scale, Block { value, m, v, grad });
            self.writer.repack_strip(self.first + s, value);
        }
    }
}

/// AdamW's settings, as the optimiser holds them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hyper {
    pub(super) lr: f64,
    pub(super) weight_decay: f64,
    pub(super) beta1: f64,
    pub(super) beta2: f64,
    pub(super) eps: f64,
}

impl Hyper {
    pub(super) fn of(opt: &crate::nn::optim::AdamW) -> Self {
        Hyper {
            lr: opt.lr,
            weight_decay: opt.weight_decay,
            beta1: opt.beta1,
            beta2: opt.beta2,
            eps: opt.eps,
        }
    }
}

impl AdamCoefs {
    /// The scalars of step `step` (counted from 1).
    pub(super) fn of(h: &Hyper, step: i64) -> Self {
        let step = step as i32;
        let bc1 = 1.0 - h.beta1.powi(step);
        let bc2 = 1.0 - h.beta2.powi(step);
        let step_size = h.lr / bc1;
        AdamCoefs {
            decay: if h.weight_decay != 0.0 {
                (1.0 - h.lr * h.weight_decay) as f32
            } else {
                1.0
            },
            w1: (1.0 - h.beta1) as f32,
            b2: h.beta2 as f32,
            w2: (1.0 - h.beta2) as f32,
            sqrt_bc2: bc2.sqrt() as f32,
            eps: h.eps as f32,
            neg_inv_step: (-1.0 / step_size) as f32,
        }
    }
}

/// The scalars of one AdamW step, as f32 (libtorch applies its scalar
/// arguments to f32 tensors in f32).
pub(super) struct AdamCoefs {
    /// 1 − lr·weight_decay (1 without decay: multiplying by 1 is exact).
    decay: f32,
    w1: f32,
    b2: f32,
    w2: f32,
    sqrt_bc2: f32,
    eps: f32,
    neg_inv_step: f32,
}

/// libtorch's `clip_grad_norm_` coefficient for gradients of global norm
/// `norm`, where it applies (as there, only when clipping is on and the
/// coefficient shrinks them).
pub(super) fn clip_scale(norm: f64, grad_clip: f64) -> Option<f32> {
    let coef = grad_clip / (norm + 1e-6);
    (grad_clip > 0.0 && coef < 1.0).then_some(coef as f32)
}

/// The same elements of a parameter, its two moments and its gradient.
pub(super) struct Block<'a> {
    pub(super) value: &'a mut [f32],
    pub(super) m: &'a mut [f32],
    pub(super) v: &'a mut [f32],
    pub(super) grad: &'a [f32],
}

impl<'a> Block<'a> {
    /// The first `at` elements of each of the four and the rest.
    fn split_at(self, at: usize) -> (Self, Self) {
        let (value0, value1) = self.value.split_at_mut(at);
        let (m0, m1) = self.m.split_at_mut(at);
        let (v0, v1) = self.v.split_at_mut(at);
        let (grad0, grad1) = self.grad.split_at(at);
        (
            Block {
                value: value0,
                m: m0,
                v: v0,
                grad: grad0,
            },
            Block {
                value: value1,
                m: m1,
                v: v1,
                grad: grad1,
            },
        )
    }
}

/// [`adamw_slices`] on one block of a parameter, on AVX2 where there is
/// one, with or without the clipping coefficient `scale`.
pub(super) fn adamw_block(c: &AdamCoefs, scale: Option<f32>, b: Block<'_>) {
    let n = b.value.len();
    assert!(b.m.len() == n && b.v.len() == n && b.grad.len() == n);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a `NativeTrainer` exists only where `native::supported()`
    // found AVX2 (see `load`).
    unsafe {
        match scale {
            Some(s) => adamw_avx2::<true>(c, s, b),
            None => adamw_avx2::<false>(c, 1.0, b),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    match scale {
        Some(s) => adamw_slices::<true>(c, s, b),
        None => adamw_slices::<false>(c, 1.0, b),
    }
}

/// One AdamW update of (part of) a parameter, element by element in the
/// order of `optim::AdamW::update`'s tensor ops: decay, `m.lerp_(g, 1−β₁)`,
/// `v·β₂ + g·(g·(1−β₂))`, then `p += m / ((√v/√bc₂ + ε)·(−1/step))`, where
/// `g` is the gradient times `scale` when `SCALED` (the same product the
/// clipping pass of `clip_grad_norm_` would have stored).
#[inline(always)]
fn adamw_slices<const SCALED: bool>(c: &AdamCoefs, scale: f32, b: Block<'_>) {
    let Block { value, m, v, grad } = b;
    for (((p, m), v), &g) in value
        .iter_mut()
        .zip(m.iter_mut())
        .zip(v.iter_mut())
        .zip(grad.iter())
    {
        let g = if SCALED { g * scale } else { g };
        *p *= c.decay;
        *m += c.w1 * (g - *m);
        *v = *v * c.b2 + g * (g * c.w2);
        let denom = (v.sqrt() / c.sqrt_bc2 + c.eps) * c.neg_inv_step;
        *p += *m / denom;
    }
}

/// [`adamw_slices`] compiled for AVX2 (eight lanes for the square roots
/// and divisions). Rust does not fuse multiplies and adds, so the result
/// is the same to the bit.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn adamw_avx2<const SCALED: bool>(c: &AdamCoefs, scale: f32, b: Block<'_>) {
    adamw_slices::<SCALED>(c, scale, b)
}

/// `Σ v²`, added up in f64. Only the bias gradients (a few thousand
/// values per step) come here: the weight gradients' squares are summed by
/// their GEMMs (see [`NativeTrainer::backward`]).
pub(super) fn sum_of_squares(v: &[f32]) -> f64 {
    v.iter().map(|&x| f64::from(x) * f64::from(x)).sum()
}

/// `clamp(t/T, 0, 1)^alpha` with T = max(1, current); 1 when alpha is 0
/// (as `optim::iteration_weights`).
fn iteration_weight(iteration: u32, current: u64, alpha: f64) -> f32 {
    if alpha == 0.0 {
        return 1.0;
    }
    let ratio = (iteration as f32 / current.max(1) as f32).clamp(0.0, 1.0);
    if alpha == 1.0 {
        ratio
    } else {
        ratio.powf(alpha as f32)
    }
}

/// The advantage loss of `optim::advantage_loss` and its gradient with
/// respect to `pred` (written into `grad`).
pub(super) fn advantage_grad(
    pred: &[f32],
    batch: &Batch,
    current: u64,
    weighting: Weighting,
    grad: &mut Vec<f32>,
) -> f64 {
    grad.clear();
    grad.resize(pred.len(), 0.0);
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for r in 0..batch.rows {
        let (wa, wb) = match weighting {
            Weighting::None => (1.0, 1.0),
            Weighting::Lcfr { alpha } => {
                let w = iteration_weight(batch.iterations[r], current, alpha);
                (w, w)
            }
            Weighting::Dcfr { alpha, beta, .. } => (
                iteration_weight(batch.iterations[r], current, alpha),
                iteration_weight(batch.iterations[r], current, beta),
            ),
        };
        let mask = batch.mask_row_f32(r);
        for (a, &m) in mask.iter().enumerate() {
            let i = r * ACTIONS + a;
            let y = batch.targets[i];
            let w = if y >= 0.0 { wa } else { wb };
            let err = (pred[i] - y) * m;
            num += f64::from(err * err * w);
            den += f64::from(m * w);
            grad[i] = 2.0 * err * m * w;
        }
    }
    let den = match weighting {
        Weighting::None => den.max(1.0),
        _ => den.max(1e-12),
    };
    let scale = (1.0 / den) as f32;
    grad.iter_mut().for_each(|g| *g *= scale);
    num / den
}

/// The strategy loss of `optim::strategy_loss` and its gradient with
/// respect to the logits (written into `grad`).
// Same parameters as advantage_grad (the trainer calls either on a
// batch), but another loss: only the signature is shared.
pub(super) fn strategy_grad(
    logits: &[f32],
    batch: &Batch,
    current: u64,
    weighting: Weighting,
    grad: &mut Vec<f32>,
) -> f64 {
    grad.clear();
    grad.resize(logits.len(), 0.0);
    let alpha = match weighting {
        Weighting::None => None,
        Weighting::Lcfr { alpha } => Some(alpha),
        Weighting::Dcfr { gamma, .. } => Some(gamma),
    };
    let weights: Vec<f32> = (0..batch.rows)
        .map(|r| alpha.map_or(1.0, |a| iteration_weight(batch.iterations[r], current, a)))
        .collect();
    let denom = match alpha {
        None => batch.rows as f64,
        Some(_) => weights
            .iter()
            .map(|&w| f64::from(w))
            .sum::<f64>()
            .max(1e-12),
    };
    let mut total = 0.0f64;
    for r in 0..batch.rows {
        let z = &logits[r * ACTIONS..(r + 1) * ACTIONS];
        let y = &batch.targets[r * ACTIONS..(r + 1) * ACTIONS];
        let mask = u64::from(batch.masks[r]);
        // The masked log-softmax: illegal logits are f32::MIN, so they
        // take no probability whenever a legal action exists.
        let masked: [f32; ACTIONS] =
            std::array::from_fn(|a| if is_legal(mask, a) { z[a] } else { f32::MIN });
        let max = masked.iter().copied().fold(f32::MIN, f32::max);
        let sum: f64 = masked
            .iter()
            .map(|&v| (f64::from(v) - f64::from(max)).exp())
            .sum();
        let lse = f64::from(max) + sum.ln();
        let c = f64::from(weights[r]) / denom;
        let (mut ce, mut legal_target) = (0.0f64, 0.0f64);
        for a in 0..ACTIONS {
            if is_legal(mask, a) {
                ce -= f64::from(y[a]) * (f64::from(masked[a]) - lse);
                legal_target += f64::from(y[a]);
            } else {
                // libtorch multiplies every target by its masked log-prob,
                // 0 here: an inf/NaN target on an illegal action still
                // makes the loss NaN.
                ce -= f64::from(y[a]) * 0.0;
            }
        }
        total += c * ce;
        for a in 0..ACTIONS {
            if is_legal(mask, a) {
                let p = (f64::from(masked[a]) - lse).exp();
                grad[r * ACTIONS + a] = (c * (p * legal_target - f64::from(y[a]))) as f32;
            }
        }
    }
    total
}

#[cfg(test)]
pub(super) mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::nn::network::MlpSpec;
    use crate::nn::optim::{self, AdamWConfig, GradScaler};

    #[test]
    fn sum_of_squares_adds_every_value() {
        // Lengths around powers of two, and odd ones. The values are
        // (2k − 3) / 2 for k = i mod 4, so the exact sum is counted in
        // integers: (2k − 3)² quarters per value.
        for n in [0usize, 1, 31, 32, 255, 256, 257, 511, 1000, 4099] {
            let v: Vec<f32> = (0..n)
                .map(|i| (2 * (i % 4) as i32 - 3) as f32 / 2.0)
                .collect();
            let quarters: i64 = (0..n).map(|i| (2 * (i % 4) as i64 - 3).pow(2)).sum();
            let exact = quarters as f64 / 4.0;
            let got = sum_of_squares(&v);
            assert!(
                (got - exact).abs() <= 1e-6 * exact.max(1.0),
                "n = {n}: {got} vs {exact}"
            );
        }
    }

    pub(in crate::kernel) fn spec(
        input_dim: usize,
        hidden: usize,
        activation: Activation,
    ) -> MlpSpec {
        MlpSpec {
            input_dim,
            hidden_size: hidden,
            num_layers: 3,
            outputs: ACTIONS,
            activation,
        }
    }

    /// Two trainers with the same weights (copied, so tests that reseed
    /// libtorch's global generator at the same time cannot interfere).
    pub(in crate::kernel) fn twins(spec: MlpSpec, lr: f64) -> (NetTrainer, NetTrainer) {
        let adam = AdamWConfig {
            learning_rate: lr,
            weight_decay: 1e-2,
        };
        let a = NetTrainer::new(spec, Device::Cpu, adam).unwrap();
        let b = NetTrainer::new(spec, Device::Cpu, adam).unwrap();
        let _guard = tch::no_grad_guard();
        for (pa, pb) in a.params().iter().zip(b.params()) {
            let mut pb = pb;
            pb.copy_(pa);
        }
        (a, b)
    }

    pub(in crate::kernel) fn batch(rows: usize, dim: usize, seed: u64) -> Batch {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut masks = Vec::with_capacity(rows);
        let mut targets = Vec::with_capacity(rows * ACTIONS);
        for _ in 0..rows {
            let mask = rng.random_range(1u32..1 << ACTIONS);
            masks.push(mask);
            // Targets for both losses: signed values (advantages), and
            // non-negative entries summing to 1 over the legal actions
            // would be a distribution; the cross-entropy is defined for
            // any targets, so signed values test it too.
            targets.extend((0..ACTIONS).map(|_| rng.random_range(-2.0f32..2.0)));
        }
        Batch {
            rows,
            dim,
            states: (0..rows * dim)
                .map(|_| rng.random_range(-1.0f32..1.5))
                .collect(),
            targets,
            masks,
            iterations: (0..rows).map(|_| rng.random_range(1..=6)).collect(),
        }
    }

    /// The same step on the libtorch path.
    pub(in crate::kernel) fn torch_step(
        t: &mut NetTrainer,
        b: &Batch,
        loss: Loss,
        weighting: Weighting,
        current: u64,
        clip: f64,
    ) -> StepOutcome {
        let rows = b.rows as i64;
        let x = Tensor::from_slice(&b.states).view([rows, b.dim as i64]);
        let y = Tensor::from_slice(&b.targets).view([rows, ACTIONS as i64]);
        let mask: Vec<f32> = (0..b.rows).flat_map(|r| b.mask_row_f32(r)).collect();
        let m = Tensor::from_slice(&mask).view([rows, ACTIONS as i64]);
        let its: Vec<i64> = b.iterations.iter().map(|&i| i64::from(i)).collect();
        let it = Tensor::from_slice(&its);
        let out = t.forward(&x).unwrap();
        let l = match loss {
            Loss::Advantage => optim::advantage_loss(&out, &y, &m, &it, current, weighting),
            Loss::Strategy => optim::strategy_loss(&out, &y, &m, &it, current, weighting),
        }
        .unwrap();
        let mut scaler = GradScaler::new(false, Device::Cpu).unwrap();
        optim::step(t, &mut scaler, &l, clip).unwrap()
    }

    pub(in crate::kernel) fn flat(ts: &[Tensor]) -> Vec<f32> {
        ts.iter().flat_map(|t| tensor_values(t).unwrap()).collect()
    }

    /// Every element within `rel·|want| + abs_frac·max|want|`: float
    /// summation order shows as relative error on large values and as
    /// absolute error, relative to the largest, on values that come out of
    /// cancellation.
    fn assert_close(what: &str, got: &[f32], want: &[f32], rel: f32, abs_frac: f32) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        let abs = abs_frac * want.iter().fold(0.0f32, |m, w| m.max(w.abs()));
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= abs + rel * b.abs(),
                "{what}: element {i}: {a} vs {b}"
            );
        }
    }

    /// The native step's clipped gradients (as AdamW used them), in the
    /// VarStore's order.
    fn native_grads(n: &NativeTrainer, grad_clip: f64) -> Vec<f32> {
        let mut params: Vec<&Param> = n.params().collect();
        params.sort_by_key(|p| p.slot);
        let clip = clip_scale(n.grad_norm(), grad_clip);
        let scale = |g: f32| clip.map_or(g, |s| g * s);
        params
            .iter()
            .flat_map(|p| p.row_major(&p.grad).into_iter().map(scale))
            .collect()
    }

    /// The forward packs the next step's GEMMs read hold exactly the
    /// current parameters (as a fresh pack of them would).
    fn assert_packs_current(n: &NativeTrainer) {
        for (l, &(inputs, outputs)) in n.dims.iter().enumerate() {
            let w = n.weights[l].row_major(&n.weights[l].value);
            let mut forward = Layer::default();
            forward.pack_weights(inputs, outputs, &w, Some(&n.biases[l].value));
            assert!(n.packs[l][0] == forward, "layer {l}: forward pack is stale");
        }
    }

    fn torch_grads(t: &NetTrainer) -> Vec<f32> {
        flat(&t.params().iter().map(Tensor::grad).collect::<Vec<_>>())
    }

    fn moments(t: &NetTrainer, second: bool) -> Vec<f32> {
        let ts: Vec<Tensor> = t
            .opt
            .moments
            .iter()
            .map(|m| if second { &m.1 } else { &m.0 }.shallow_clone())
            .collect();
        flat(&ts)
    }

    /// One step of each path from the same state: the loss, the clipped
    /// gradients and both moments agree closely. The parameters are checked
    /// to within a quarter of a learning-rate step per step taken, except
    /// where the gradients cancel to a few thousand ε: Adam's update there
    /// is g/(|g| + ε) of float noise, bounded only by the step itself.
    fn compare_step(
        torch: &mut NetTrainer,
        lcx: &mut NetTrainer,
        b: &Batch,
        (loss, weighting, clip): (Loss, Weighting, f64),
        what: &str,
    ) {
        let want = torch_step(torch, b, loss, weighting, 6, clip);
        let mut n = NativeTrainer::load(lcx, 1).unwrap().expect("applies");
        let got = n.step(b, loss, weighting, 6, clip).unwrap();
        assert_packs_current(&n);
        n.store(lcx).unwrap();
        assert!(
            (got.loss - want.loss).abs() <= 1e-5 * (1.0 + want.loss.abs()),
            "{what}: loss {} vs {}",
            got.loss,
            want.loss
        );
        assert!(!got.nonfinite_loss && !want.nonfinite_loss);
        let grads = torch_grads(torch);
        assert!(grads.iter().any(|&g| g != 0.0), "{what}: no gradient");
        for (part, got, want, rel, abs_frac) in [
            ("gradients", native_grads(&n, clip), grads, 1e-4, 1e-5),
            (
                "first moments",
                moments(lcx, false),
                moments(torch, false),
                1e-4,
                1e-5,
            ),
            (
                "second moments",
                moments(lcx, true),
                moments(torch, true),
                1e-3,
                1e-8,
            ),
        ] {
            assert_close(&format!("{what} {part}"), &got, &want, rel, abs_frac);
        }
        let step = (torch.opt.lr * torch.opt.step as f64) as f32;
        // Where the second moment is within a few thousand ε, Adam's step
        // m̂/(√v̂ + ε) turns the gradients' float noise into a visible
        // fraction of a step (and which libtorch threads summed them
        // changes that noise): there, only Adam's bound of one learning
        // rate per step taken holds.
        let v = moments(torch, true);
        let bias2 = 1.0 - torch.opt.beta2.powi(torch.opt.step as i32);
        let noisy = |i: usize| f64::from(v[i]) / bias2 < (3e3 * torch.opt.eps).powi(2);
        let (p, q) = (flat(&lcx.params()), flat(&torch.params()));
        for (i, (a, b)) in p.iter().zip(&q).enumerate() {
            let tolerance = if noisy(i) { 1.01 * step } else { 0.25 * step };
            assert!(
                (a - b).abs() <= tolerance,
                "{what} parameter {i}: {a} vs {b} (√v̂ = {:e})",
                (f64::from(v[i]) / bias2).sqrt()
            );
        }
        assert_eq!(lcx.opt.step, torch.opt.step);
    }

    /// Both losses, every weighting, clipping off / inactive / active, a
    /// few steps each.
    #[test]
    fn steps_match_libtorch() {
        if !crate::kernel::native::tests::kernel_here("steps_match_libtorch") {
            return;
        }
        for loss in [Loss::Advantage, Loss::Strategy] {
            for weighting in optim::TEST_WEIGHTINGS {
                for clip in [0.0, 1e3, 0.05] {
                    let (mut torch, mut lcx) = twins(spec(37, 40, Activation::Relu), 1e-3);
                    for s in 0..3u64 {
                        let what = format!("{loss:?} {weighting:?} clip {clip} step {s}");
                        let b = batch(13, 37, s);
                        compare_step(&mut torch, &mut lcx, &b, (loss, weighting, clip), &what);
                    }
                }
            }
        }
    }

    /// The default network's shapes (full 16-column panels, 297 inputs,
    /// 22 outputs) over a batch bigger than one row chunk.
    #[test]
    fn default_sized_network_matches_libtorch() {
        if !crate::kernel::native::tests::kernel_here("default_sized_network_matches_libtorch") {
            return;
        }
        let (mut torch, mut lcx) = twins(spec(297, 512, Activation::Relu), 1e-4);
        let case = (Loss::Advantage, Weighting::Lcfr { alpha: 1.0 }, 1.0);
        compare_step(
            &mut torch,
            &mut lcx,
            &batch(53, 297, 9),
            case,
            "default net",
        );
    }

    /// One hidden layer, and batches of 1–5 rows (one partial row block).
    #[test]
    fn shallow_networks_and_small_batches_match_libtorch() {
        if !crate::kernel::native::tests::kernel_here(
            "shallow_networks_and_small_batches_match_libtorch",
        ) {
            return;
        }
        let shallow = MlpSpec {
            num_layers: 1,
            ..spec(37, 24, Activation::Relu)
        };
        let (mut torch, mut lcx) = twins(shallow, 1e-3);
        for rows in 1..=5 {
            let case = (Loss::Strategy, Weighting::Lcfr { alpha: 1.0 }, 0.5);
            let what = format!("1 hidden layer, {rows} rows");
            compare_step(
                &mut torch,
                &mut lcx,
                &batch(rows, 37, rows as u64),
                case,
                &what,
            );
        }
    }

    /// The fused AdamW against `optim::AdamW::update` on the same hand-set
    /// gradients, with a weight decay large enough to matter: parameters
    /// and moments to within float rounding over several steps.
    #[test]
    fn fused_adamw_matches_the_tensor_update() {
        if !crate::kernel::native::tests::kernel_here("fused_adamw_matches_the_tensor_update") {
            return;
        }
        let adam = AdamWConfig {
            learning_rate: 1e-2,
            weight_decay: 0.5,
        };
        let small = spec(9, 8, Activation::Relu);
        let mut torch = NetTrainer::new(small, Device::Cpu, adam).unwrap();
        let lcx = NetTrainer::new(small, Device::Cpu, adam).unwrap();
        {
            let _guard = tch::no_grad_guard();
            for (pa, mut pb) in torch.params().iter().zip(lcx.params()) {
                pb.copy_(pa);
            }
        }
        let mut n = NativeTrainer::load(&lcx, 1).unwrap().expect("applies");
        // One backward so that every parameter has a gradient tensor to
        // overwrite.
        torch
            .forward(&Tensor::zeros([1, 9], (Kind::Float, Device::Cpu)))
            .unwrap()
            .sum(Kind::Float)
            .backward();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..4 {
            let mut grads = Vec::new();
            for p in torch.params() {
                let g: Vec<f32> = (0..p.numel())
                    .map(|_| rng.random_range(-1.0f32..1.0))
                    .collect();
                p.grad()
                    .copy_(&Tensor::from_slice(&g).view(p.size().as_slice()));
                grads.push(g);
            }
            let params = torch.params();
            torch.opt.update(&params).unwrap();
            for q in n.weights.iter_mut().chain(n.biases.iter_mut()) {
                q.grad = match q.panels {
                    Some((rows, cols)) => to_row_panels(&grads[q.slot], rows, cols),
                    None => grads[q.slot].clone(),
                };
            }
            n.adamw(None);
            assert_packs_current(&n);
        }
        let mut lcx = lcx;
        n.store(&mut lcx).unwrap();
        assert_eq!(lcx.opt.step, 4);
        for (what, got, want) in [
            ("parameters", flat(&lcx.params()), flat(&torch.params())),
            (
                "first moments",
                moments(&lcx, false),
                moments(&torch, false),
            ),
            ("second moments", moments(&lcx, true), moments(&torch, true)),
        ] {
            for (a, b) in got.iter().zip(&want) {
                assert!(
                    (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                    "{what}: {a} vs {b}"
                );
            }
        }
    }

    /// Splitting the GEMMs over tasks changes no bit.
    #[test]
    fn threads_give_the_same_bits() {
        if !crate::kernel::native::tests::kernel_here("threads_give_the_same_bits") {
            return;
        }
        let (a, b) = twins(spec(37, 70, Activation::Relu), 1e-3);
        let mut one = NativeTrainer::load(&a, 1).unwrap().expect("applies");
        let mut three = NativeTrainer::load(&b, 3).unwrap().expect("applies");
        for s in 0..2 {
            let b = batch(20, 37, s);
            let w = Weighting::Lcfr { alpha: 1.0 };
            one.step(&b, Loss::Strategy, w, 3, 1.0).unwrap();
            three.step(&b, Loss::Strategy, w, 3, 1.0).unwrap();
        }
        for (p, q) in one.weights.iter().zip(&three.weights) {
            assert_eq!(p.value, q.value);
        }
        for (p, q) in one.biases.iter().zip(&three.biases) {
            assert_eq!(p.value, q.value);
        }
        // AdamW's three runs re-packed every row panel they updated.
        assert_packs_current(&three);
    }

    /// A NaN in an input feature reaches the loss (the kernel's ReLU lets
    /// NaN through, as libtorch's does): both paths skip and count the step.
    #[test]
    fn a_nan_input_is_a_nonfinite_loss_on_both_paths() {
        if !crate::kernel::native::tests::kernel_here(
            "a_nan_input_is_a_nonfinite_loss_on_both_paths",
        ) {
            return;
        }
        let (mut torch, lcx) = twins(spec(9, 8, Activation::Relu), 1e-3);
        let before = flat(&lcx.params());
        let mut b = batch(4, 9, 2);
        b.states[9 + 3] = f32::NAN;
        for loss in [Loss::Advantage, Loss::Strategy] {
            let want = torch_step(&mut torch, &b, loss, Weighting::None, 1, 1.0);
            assert!(want.nonfinite_loss, "{loss:?}: libtorch");
            let mut n = NativeTrainer::load(&lcx, 1).unwrap().expect("applies");
            let got = n.step(&b, loss, Weighting::None, 1, 1.0).unwrap();
            assert!(got.nonfinite_loss && got.loss.is_nan(), "{loss:?}: {got:?}");
            assert_eq!(n.step, 0);
        }
        assert_eq!(flat(&lcx.params()), before);
    }

    /// An inf gradient behind a finite loss: nothing is updated, moments
    /// and step count included.
    #[test]
    fn an_infinite_gradient_changes_nothing() {
        if !crate::kernel::native::tests::kernel_here("an_infinite_gradient_changes_nothing") {
            return;
        }
        let (a, _) = twins(spec(9, 8, Activation::Relu), 1e-3);
        let mut n = NativeTrainer::load(&a, 1).unwrap().expect("applies");
        n.step(&batch(4, 9, 3), Loss::Advantage, Weighting::None, 1, 1.0)
            .unwrap();
        let values = |n: &NativeTrainer| -> Vec<f32> {
            n.weights
                .iter()
                .chain(&n.biases)
                .flat_map(|p| p.value.iter().chain(&p.m).chain(&p.v).copied())
                .collect()
        };
        let before = values(&n);
        // An overflow in a bias gradient, then in a weight gradient: the
        // weight-gradient GEMMs report it through their sums of squares
        // (an infinite output makes its panel's sum infinite: see
        // `native::tests::packed_outputs_and_packings_match_their_definitions`).
        let (weight_squares, bias) = (n.weight_squares, n.biases[0].grad[0]);
        for overflow in ["bias", "weight"] {
            match overflow {
                "bias" => n.biases[0].grad[0] = f32::INFINITY,
                _ => {
                    n.biases[0].grad[0] = bias;
                    n.weight_squares = f64::INFINITY;
                }
            }
            assert!(!n.apply_gradients(1.0), "{overflow}");
            assert_eq!(values(&n), before, "{overflow}");
            assert_packs_current(&n);
            assert_eq!(n.step, 1, "{overflow}");
        }
        n.weight_squares = weight_squares;
        assert!(n.apply_gradients(1.0));
        assert_eq!(n.step, 2);
    }

    /// A NaN target on a legal action makes the loss non-finite: the step
    /// is reported and skipped, nothing changes.
    #[test]
    fn a_nonfinite_loss_changes_nothing() {
        if !crate::kernel::native::tests::kernel_here("a_nonfinite_loss_changes_nothing") {
            return;
        }
        let (a, _) = twins(spec(9, 8, Activation::Relu), 1e-3);
        let before = flat(&a.params());
        let mut b = batch(4, 9, 1);
        b.masks[2] |= 1;
        b.targets[2 * ACTIONS] = f32::NAN;
        let mut n = NativeTrainer::load(&a, 1).unwrap().expect("applies");
        let out = n
            .step(&b, Loss::Advantage, Weighting::None, 1, 1.0)
            .unwrap();
        assert!(out.nonfinite_loss && out.loss.is_nan());
        assert_eq!(n.step, 0);
        let moments_before = (moments(&a, false), moments(&a, true));
        let mut a = a;
        n.store(&mut a).unwrap();
        assert_eq!(flat(&a.params()), before);
        assert_eq!((moments(&a, false), moments(&a, true)), moments_before);
        assert_eq!(a.opt.step, 0);
    }

    #[test]
    fn a_batch_of_the_wrong_width_is_an_error() {
        if !crate::kernel::native::tests::kernel_here("a_batch_of_the_wrong_width_is_an_error") {
            return;
        }
        let (a, _) = twins(spec(9, 8, Activation::Relu), 1e-3);
        let mut n = NativeTrainer::load(&a, 1).unwrap().expect("applies");
        let err = n
            .step(&batch(4, 10, 1), Loss::Advantage, Weighting::None, 1, 0.0)
            .unwrap_err();
        assert!(err.to_string().contains("10 features"), "{err}");
    }

    #[test]
    fn load_declines_what_it_cannot_compute() {
        let (gelu, _) = twins(spec(9, 8, Activation::Gelu), 1e-3);
        assert!(NativeTrainer::load(&gelu, 1).unwrap().is_none());
        assert!(!NativeTrainer::applies(&gelu));
        let (mut traced, _) = twins(spec(9, 8, Activation::Relu), 1e-3);
        traced.net.trace().unwrap();
        assert!(NativeTrainer::load(&traced, 1).unwrap().is_none());
        assert!(!NativeTrainer::applies(&traced));
    }
}
