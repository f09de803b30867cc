//! lcx's CPU training step in bf16 mixed precision (`run.use_amp = true`
//! on a CPU, decision 0029): the step of [`crate::kernel::native_train`]
//! with every matrix product on [`crate::kernel::bf16`]'s GEMMs.
//!
//! What is bf16 and what stays f32 follows PyTorch's CPU autocast for a
//! linear layer: both operands of each product (forward `x·Wᵀ`, weight
//! gradient `gᵀ·x`, input gradient `g·W`) are rounded to bf16 and the
//! products are summed in f32. The master weights, the AdamW moments, the
//! loss and its gradient, the bias, ReLU, the reductions and the clipping
//! norm are f32. One difference: autocast's linear layer writes a bf16
//! output, here each layer's output stays f32 until the next product
//! rounds it (ReLU commutes with the rounding, so the hidden layers see
//! the same values; the logits keep f32's precision, which the loss can
//! only gain from). bf16 has f32's exponent range, so no loss scaling is
//! needed: a gradient that overflows is skipped and counted, as on the
//! f32 path.
//!
//! The parameters are kept row-major (the f32 step keeps its weights in
//! row panels for its own GEMMs); each weight matrix's two bf16 packs, `Wᵀ`
//! for the forward and `W` for the input gradient, are refreshed right
//! after AdamW updates it.

use crate::kernel::bf16::{gemm, Bf16Kernel, MatRef, PackedA, PackedB, Update};
use crate::kernel::native_train::{
    adamw_block, clip_scale, store_params, take_step, AdamCoefs, Block, Hyper, Loss, NativeTrainer,
    Param, Pass,
};
use crate::nn::optim::{NetTrainer, StepOutcome, Weighting};
use crate::TrainerError;
use lcx_core::cfr::memory::Batch;

/// A network's training state in bf16 mixed precision: f32 master copies
/// of the parameters and moments, bf16 packs of the weights.
#[derive(Debug)]
pub struct Bf16Trainer {
    kernel: Bf16Kernel,
    /// (inputs, outputs) per layer, input side first.
    dims: Vec<(usize, usize)>,
    /// Row-major (outputs × inputs).
    weights: Vec<Param>,
    biases: Vec<Param>,
    hyper: Hyper,
    step: i64,
    threads: usize,
    /// Per layer: `Wᵀ` (inputs × outputs), the forward's `B`.
    forward_packs: Vec<PackedB>,
    /// Per layer: `W` (outputs × inputs), the input gradient's `B`.
    backward_packs: Vec<PackedB>,
    /// Each layer's output: hidden layers after ReLU, the last the logits.
    acts: Vec<Vec<f32>>,
    grad: Vec<f32>,
    grad_next: Vec<f32>,
    /// The packed left operand of the product at hand.
    a: PackedA,
    /// A layer's input packed as the weight gradient's `B`.
    inputs_b: PackedB,
}

impl Bf16Trainer {
    /// Copies `trainer`'s parameters, moments and step count for `kernel`
    /// (which must run here); `None` where lcx's kernel does not compute
    /// this network (see [`NativeTrainer::applies`]).
    pub fn load(
        trainer: &NetTrainer,
        kernel: Bf16Kernel,
        threads: usize,
    ) -> Result<Option<Self>, TrainerError> {
        if !kernel.runs_here() {
            return Ok(None);
        }
        let Some(layout) = NativeTrainer::layout(trainer) else {
            return Ok(None);
        };
        let moments = &trainer.opt.moments;
        let mut dims = Vec::with_capacity(layout.len());
        let mut weights = Vec::with_capacity(layout.len());
        let mut biases = Vec::with_capacity(layout.len());
        for l in layout {
            let ((w, iw), (b, ib)) = (l.weight, l.bias);
            dims.push(l.dims);
            weights.push(Param::load(w, iw, &moments[iw], None)?);
            biases.push(Param::load(b, ib, &moments[ib], None)?);
        }
        let mut t = Bf16Trainer {
            kernel,
            forward_packs: vec![PackedB::default(); dims.len()],
            backward_packs: vec![PackedB::default(); dims.len()],
            acts: vec![Vec::new(); dims.len()],
            dims,
            weights,
            biases,
            hyper: Hyper::of(&trainer.opt),
            step: trainer.opt.step,
            threads: threads.max(1),
            grad: Vec::new(),
            grad_next: Vec::new(),
            a: PackedA::pack(kernel, MatRef::new(&[], 0, 0)),
            inputs_b: PackedB::default(),
        };
        for l in 0..t.dims.len() {
            t.repack(l);
        }
        Ok(Some(t))
    }

    /// The kernel its products run on.
    pub fn kernel(&self) -> Bf16Kernel {
        self.kernel
    }

    /// Writes the parameters, moments and step count back into the tensors
    /// they were loaded from (`trainer` must be the one passed to `load`).
    pub fn store(&self, trainer: &mut NetTrainer) -> Result<(), TrainerError> {
        store_params(self.weights.iter().chain(&self.biases), self.step, trainer)
    }

    /// Layer `l`'s two weight packs, from its f32 master weights.
    fn repack(&mut self, l: usize) {
        let (inputs, outputs) = self.dims[l];
        let w = MatRef::new(&self.weights[l].value, outputs, inputs);
        self.forward_packs[l].repack(self.kernel, w.t());
        self.backward_packs[l].repack(self.kernel, w);
    }

    /// One optimisation step, as [`NativeTrainer::step`] (see
    /// [`take_step`]).
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

    fn forward(&mut self, x: &[f32], rows: usize) {
        let last = self.dims.len() - 1;
        for l in 0..self.dims.len() {
            let (inputs, outputs) = self.dims[l];
            let (done, rest) = self.acts.split_at_mut(l);
            let input = if l == 0 { x } else { &done[l - 1][..] };
            self.a.repack(self.kernel, MatRef::new(input, rows, inputs));
            let out = &mut rest[0];
            out.resize(rows * outputs, 0.0);
            gemm(
                &self.a,
                &self.forward_packs[l],
                out,
                Update::Overwrite,
                self.threads,
            );
            let bias = &self.biases[l].value;
            for row in out.chunks_exact_mut(outputs) {
                for (o, &b) in row.iter_mut().zip(bias) {
                    let v = *o + b;
                    *o = if l < last { v.max(0.0) } else { v };
                }
            }
        }
    }

    /// Gradients of every parameter from `self.grad` (the loss's gradient
    /// with respect to the logits, row-major).
    fn backward(&mut self, x: &[f32], rows: usize) {
        for l in (0..self.dims.len()).rev() {
            let (inputs, outputs) = self.dims[l];
            let g = &self.grad[..rows * outputs];
            let input = if l == 0 { x } else { &self.acts[l - 1][..] };
            // Weight: gᵀ (outputs × rows) · the layer's input (rows × inputs).
            self.a
                .repack(self.kernel, MatRef::new(g, rows, outputs).t());
            self.inputs_b
                .repack(self.kernel, MatRef::new(input, rows, inputs));
            let gw = &mut self.weights[l].grad;
            gemm(&self.a, &self.inputs_b, gw, Update::Overwrite, self.threads);
            // Bias: the column sums of g, rows in order.
            let gb = &mut self.biases[l].grad;
            gb.fill(0.0);
            for row in g.chunks_exact(outputs) {
                for (s, &v) in gb.iter_mut().zip(row) {
                    *s += v;
                }
            }
            if l == 0 {
                break;
            }
            // Input: g (rows × outputs) · W (outputs × inputs), through the
            // ReLU below (its output is zero exactly where it was off).
            self.a.repack(self.kernel, MatRef::new(g, rows, outputs));
            self.grad_next.resize(rows * inputs, 0.0);
            gemm(
                &self.a,
                &self.backward_packs[l],
                &mut self.grad_next,
                Update::Overwrite,
                self.threads,
            );
            // A select rather than a conditional store: it vectorises.
            for (g, &a) in self.grad_next.iter_mut().zip(input) {
                *g = if a > 0.0 { *g } else { 0.0 };
            }
            std::mem::swap(&mut self.grad, &mut self.grad_next);
        }
    }

    /// The global L2 norm of every gradient of the last backward pass.
    fn grad_norm(&self) -> f64 {
        self.weights
            .iter()
            .chain(&self.biases)
            .map(|p| squares(&p.grad))
            .sum::<f64>()
            .sqrt()
    }

    /// AdamW on every parameter (f32, as on the f32 path), then each
    /// weight matrix's packs from its new values.
    fn adamw(&mut self, scale: Option<f32>) {
        self.step += 1;
        let c = AdamCoefs::of(&self.hyper, self.step);
        for p in self.weights.iter_mut().chain(self.biases.iter_mut()) {
            adamw_block(
                &c,
                scale,
                Block {
                    value: &mut p.value,
                    m: &mut p.m,
                    v: &mut p.v,
                    grad: &p.grad,
                },
            );
        }
        for l in 0..self.dims.len() {
            self.repack(l);
        }
    }
}

impl Pass for Bf16Trainer {
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
        let norm = self.grad_norm();
        if !norm.is_finite() {
            return false;
        }
        self.adamw(clip_scale(norm, grad_clip));
        true
    }
}

/// `Σ v²`: blocks of 256 squares summed in f32 across 8 lanes (which the
/// compiler vectorises), the blocks added in f64. A weight gradient has
/// up to 262,144 values; summing each in f64 one at a time took a tenth
/// of a bf16 step.
fn squares(v: &[f32]) -> f64 {
    let mut total = 0.0f64;
    for block in v.chunks(256) {
        let mut lanes = [0.0f32; 8];
        let mut it = block.chunks_exact(8);
        for c in &mut it {
            for (l, &x) in lanes.iter_mut().zip(c) {
                *l += x * x;
            }
        }
        let tail: f32 = it.remainder().iter().map(|&x| x * x).sum();
        total += f64::from(lanes.iter().sum::<f32>() + tail);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::native_train::tests::{batch, flat, spec, torch_step, twins};
    use crate::nn::network::Activation;
    use crate::nn::optim::TEST_WEIGHTINGS;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use tch::Tensor;

    /// The kernels this host runs; each one it lacks is said, with why.
    fn kernels_here(test: &str) -> Vec<Bf16Kernel> {
        if !crate::kernel::native::tests::kernel_here(test) {
            return Vec::new();
        }
        Bf16Kernel::ALL
            .into_iter()
            .filter(|k| match k.missing() {
                None => true,
                Some(lacks) => {
                    eprintln!(
                        "{test}: {} kernel SKIPPED, this CPU lacks {lacks}",
                        k.name()
                    );
                    false
                }
            })
            .collect()
    }

    /// Every value the step keeps: parameters, moments, last gradients.
    fn state(t: &Bf16Trainer) -> Vec<f32> {
        let mut v = Vec::new();
        for p in t.weights.iter().chain(&t.biases) {
            v.extend(&p.value);
            v.extend(&p.m);
            v.extend(&p.v);
            v.extend(&p.grad);
        }
        v
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Steps on odd shapes (297 inputs, 13 rows, one row, 37 rows), both
    /// losses, clipping active: the AVX2 kernel gives the scalar
    /// reference's bits, AVX512-BF16 (which adds each pair's products in
    /// its own order) stays within summation-order tolerance, and every
    /// kernel gives the same bits on one thread and two.
    #[test]
    fn every_kernel_here_takes_the_reference_step() {
        let kernels = kernels_here("every_kernel_here_takes_the_reference_step");
        if kernels.is_empty() {
            return;
        }
        let lr = 1e-3;
        for loss in [Loss::Advantage, Loss::Strategy] {
            let (t, _) = twins(spec(297, 40, Activation::Relu), lr);
            let load = |k, threads| Bf16Trainer::load(&t, k, threads).unwrap().expect("applies");
            let mut reference = load(Bf16Kernel::Scalar, 1);
            let mut others: Vec<(Bf16Kernel, usize, Bf16Trainer)> = kernels
                .iter()
                .flat_map(|&k| [(k, 1), (k, 2)])
                .map(|(k, threads)| (k, threads, load(k, threads)))
                .collect();
            for (s, rows) in [13usize, 1, 37].into_iter().enumerate() {
                let b = batch(rows, 297, s as u64);
                let w = TEST_WEIGHTINGS[s % TEST_WEIGHTINGS.len()];
                let want = reference.step(&b, loss, w, 6, 0.05).unwrap();
                assert!(want.loss.is_finite() && !want.nonfinite_loss);
                for (k, threads, t) in &mut others {
                    let what = format!("{loss:?} step {s} on {} × {threads}", k.name());
                    let got = t.step(&b, loss, w, 6, 0.05).unwrap();
                    if *k == Bf16Kernel::Avx512Bf16 {
                        assert!(
                            (got.loss - want.loss).abs() <= 1e-4 * (1.0 + want.loss.abs()),
                            "{what}: loss {} vs {}",
                            got.loss,
                            want.loss
                        );
                        // Adam moves each parameter by at most about one
                        // learning rate a step, whatever float noise the
                        // gradients carry.
                        let bound = 1.01 * lr as f32 * (s + 1) as f32;
                        for (l, (a, b)) in t.weights.iter().zip(&reference.weights).enumerate() {
                            for (i, (x, y)) in a.value.iter().zip(&b.value).enumerate() {
                                assert!(
                                    (x - y).abs() <= bound,
                                    "{what}: layer {l} weight {i}: {x} vs {y}"
                                );
                            }
                        }
                    } else {
                        assert_eq!(got.loss.to_bits(), want.loss.to_bits(), "{what}: loss");
                        assert!(bits(&state(t)) == bits(&state(&reference)), "{what}: state");
                    }
                }
                // One thread and two: the same bits, on every kernel.
                for pair in others.chunks_exact(2) {
                    assert!(
                        bits(&state(&pair[0].2)) == bits(&state(&pair[1].2)),
                        "{loss:?} step {s}: {} differs on 1 and 2 threads",
                        pair[0].0.name()
                    );
                }
            }
        }
    }

    /// The bf16 step against libtorch's f32 step from the same state: the
    /// loss within bf16's rounding, and the gradient pointing the same way
    /// with the same length (bf16 operands carry 8 significant bits, so a
    /// product is off by a few parts in a thousand).
    #[test]
    fn the_bf16_step_follows_the_f32_step() {
        if kernels_here("the_bf16_step_follows_the_f32_step").is_empty() {
            return;
        }
        let kernel = Bf16Kernel::widest_here();
        for loss in [Loss::Advantage, Loss::Strategy] {
            let (mut torch, mut lcx) = twins(spec(297, 64, Activation::Relu), 1e-3);
            // Weights of its own seed: tests beside this one reseed
            // libtorch's global generator, and the bound below is for
            // these weights.
            let mut rng = ChaCha8Rng::seed_from_u64(74);
            for (a, b) in torch.params().iter().zip(lcx.params()) {
                let fan_in = *a.size().last().unwrap_or(&1) as f32;
                let bound = 1.0 / fan_in.sqrt();
                let n = a.numel();
                let v: Vec<f32> = (0..n).map(|_| rng.random_range(-bound..bound)).collect();
                let v = Tensor::from_slice(&v).view(a.size().as_slice());
                let _guard = tch::no_grad_guard();
                a.shallow_clone().copy_(&v);
                b.shallow_clone().copy_(&v);
            }
            let b = batch(50, 297, 9);
            let w = TEST_WEIGHTINGS[0];
            let want = torch_step(&mut torch, &b, loss, w, 6, 0.0);
            let mut n = Bf16Trainer::load(&lcx, kernel, 1)
                .unwrap()
                .expect("applies");
            let got = n.step(&b, loss, w, 6, 0.0).unwrap();
            assert!(
                (got.loss - want.loss).abs() <= 1e-2 * want.loss.abs(),
                "{loss:?}: loss {} vs f32's {}",
                got.loss,
                want.loss
            );
            let mut params: Vec<&Param> = n.weights.iter().chain(&n.biases).collect();
            params.sort_by_key(|p| p.slot);
            let ours: Vec<f64> = params
                .iter()
                .flat_map(|p| p.grad.iter().map(|&g| f64::from(g)))
                .collect();
            let theirs: Vec<f64> =
                flat(&torch.params().iter().map(Tensor::grad).collect::<Vec<_>>())
                    .into_iter()
                    .map(f64::from)
                    .collect();
            let dot: f64 = ours.iter().zip(&theirs).map(|(a, b)| a * b).sum();
            let (na, nb) = (
                ours.iter().map(|a| a * a).sum::<f64>().sqrt(),
                theirs.iter().map(|b| b * b).sum::<f64>().sqrt(),
            );
            assert!(nb > 0.0, "{loss:?}: no gradient");
            assert!(
                dot / (na * nb) > 0.999,
                "{loss:?}: cosine {}",
                dot / (na * nb)
            );
            assert!((na / nb - 1.0).abs() < 0.02, "{loss:?}: norm {na} vs {nb}");
            // Stored back, the step count and the tensors move.
            n.store(&mut lcx).unwrap();
            assert_eq!(lcx.opt.step, torch.opt.step);
        }
    }

    #[test]
    fn squares_adds_every_value() {
        for n in [0, 1, 7, 8, 9, 255, 256, 257, 1000] {
            let v: Vec<f32> = (0..n).map(|i| (i % 4) as f32 - 1.5).collect();
            let exact: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
            assert_eq!(squares(&v), exact, "{n} values");
        }
    }
}
