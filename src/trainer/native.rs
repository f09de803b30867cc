//! lcx's own CPU kernel for single-row forwards of the MLP.
//!
//! The recursive scheduler asks the network about one info state at a time.
//! At batch 1 a forward is a matrix-vector product per layer: it reads every
//! weight once (2.7 MB for the default 297→512×3→22 network) and does
//! little arithmetic per byte, and libtorch spends about 140 µs on it here
//! (`lcx bench forward --batch-sizes 1 --threads 1`) against about 60 µs for
//! a plain AVX2/FMA loop that streams four weight rows against the input at
//! once. Larger batches are matrix products, where libtorch (MKL) wins, so
//! only single rows come here.
//!
//! A [`NativeMlp`] is a snapshot of an [`Mlp`]'s weights taken when a
//! traversal phase starts (the weights do not change until it ends), about
//! 1 ms per network. It exists only where it computes exactly the eager
//! network up to float summation order: CPU, f32, ReLU, not traced, and a
//! CPU with AVX2 and FMA.

use tch::{Device, Kind};

use super::network::{Activation, Mlp};
use super::TrainerError;

/// One dense layer, weights row-major `[outputs][inputs]` as libtorch keeps
/// them.
#[derive(Debug, Clone)]
struct Layer {
    inputs: usize,
    outputs: usize,
    w: Vec<f32>,
    b: Vec<f32>,
}

/// A read-only copy of an MLP for single-row CPU forwards.
#[derive(Debug, Clone)]
pub struct NativeMlp {
    layers: Vec<Layer>,
    widest: usize,
}

/// Whether this CPU can run the kernel.
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl NativeMlp {
    /// Copies `mlp`'s weights; `None` where the kernel does not apply (see
    /// the module comment).
    pub fn snapshot(mlp: &Mlp) -> Result<Option<Self>, TrainerError> {
        if !supported() || mlp.is_traced() || mlp.activation() != Activation::Relu {
            return Ok(None);
        }
        let mut layers = Vec::new();
        let mut widest = 0;
        for (w, b) in mlp.parameters() {
            if w.device() != Device::Cpu || w.kind() != Kind::Float || w.dim() != 2 {
                return Ok(None);
            }
            let size = w.size();
            let (outputs, inputs) = (size[0] as usize, size[1] as usize);
            let mut wv = vec![0.0f32; outputs * inputs];
            w.f_contiguous()?.f_copy_data(&mut wv, outputs * inputs)?;
            let mut bv = vec![0.0f32; outputs];
            if let Some(b) = b {
                b.f_contiguous()?.f_copy_data(&mut bv, outputs)?;
            }
            if let Some(prev) = layers.last().filter(|l: &&Layer| l.outputs != inputs) {
                return Err(TrainerError::BadShape(format!(
                    "layer of {inputs} inputs after one of {} outputs",
                    prev.outputs
                )));
            }
            widest = widest.max(inputs).max(outputs);
            layers.push(Layer {
                inputs,
                outputs,
                w: wv,
                b: bv,
            });
        }
        if layers.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self { layers, widest }))
    }

    pub fn input_dim(&self) -> usize {
        self.layers[0].inputs
    }

    pub fn output_dim(&self) -> usize {
        self.layers[self.layers.len() - 1].outputs
    }

    /// One forward: `x` (input_dim floats) → `out` (output_dim floats), ReLU
    /// between layers.
    pub fn forward_row(&self, x: &[f32], out: &mut [f32]) {
        assert_eq!(x.len(), self.input_dim(), "native forward: input length");
        assert_eq!(
            out.len(),
            self.output_dim(),
            "native forward: output length"
        );
        let mut a = vec![0.0f32; self.widest];
        let mut b = vec![0.0f32; self.widest];
        a[..x.len()].copy_from_slice(x);
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            let (input, output) = (&a[..layer.inputs], &mut b[..layer.outputs]);
            // SAFETY: `snapshot` returns a NativeMlp only when `supported()`
            // found AVX2 and FMA; the slices have the layer's lengths.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                dense_avx2(layer, input, output, i < last)
            };
            #[cfg(not(target_arch = "x86_64"))]
            dense_portable(layer, input, output, i < last);
            std::mem::swap(&mut a, &mut b);
        }
        out.copy_from_slice(&a[..out.len()]);
    }
}

/// The reference definition (tests compare the kernel with it).
#[cfg(any(test, not(target_arch = "x86_64")))]
fn dense_portable(layer: &Layer, x: &[f32], y: &mut [f32], relu: bool) {
    for (o, yo) in y.iter_mut().enumerate() {
        let row = &layer.w[o * layer.inputs..(o + 1) * layer.inputs];
        let v = row.iter().zip(x).map(|(w, x)| w * x).sum::<f32>() + layer.b[o];
        *yo = if relu { v.max(0.0) } else { v };
    }
}

/// `y = W x + b` (then ReLU), four weight rows per pass over `x`, eight
/// lanes per FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `x.len() == layer.inputs` and
/// `y.len() == layer.outputs`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dense_avx2(layer: &Layer, x: &[f32], y: &mut [f32], relu: bool) {
    use std::arch::x86_64::*;
    let n = layer.inputs;
    debug_assert!(x.len() == n && y.len() == layer.outputs);
    debug_assert!(layer.w.len() == n * layer.outputs);
    let full = n / 8 * 8;
    let w = layer.w.as_ptr();
    let xp = x.as_ptr();
    let finish = |v: f32| if relu { v.max(0.0) } else { v };
    let mut o = 0;
    while o + 4 <= layer.outputs {
        let rows = [
            w.add(o * n),
            w.add((o + 1) * n),
            w.add((o + 2) * n),
            w.add((o + 3) * n),
        ];
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i < full {
            let xv = _mm256_loadu_ps(xp.add(i));
            for r in 0..4 {
                acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(rows[r].add(i)), xv, acc[r]);
            }
            i += 8;
        }
        for r in 0..4 {
            let mut v = hsum(acc[r]);
            for k in full..n {
                v += *rows[r].add(k) * *xp.add(k);
            }
            y[o + r] = finish(v + layer.b[o + r]);
        }
        o += 4;
    }
    while o < layer.outputs {
        let row = w.add(o * n);
        let mut acc = _mm256_setzero_ps();
        let mut i = 0;
        while i < full {
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(row.add(i)), _mm256_loadu_ps(xp.add(i)), acc);
            i += 8;
        }
        let mut v = hsum(acc);
        for k in full..n {
            v += *row.add(k) * *xp.add(k);
        }
        y[o] = finish(v + layer.b[o]);
        o += 1;
    }
}

/// Sum of the eight lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn hsum(v: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    _mm_cvtss_f32(s)
}

#[cfg(test)]
mod tests {
    use tch::nn::VarStore;
    use tch::Tensor;

    use super::*;
    use crate::trainer::network::MlpSpec;

    fn mlp(vs: &VarStore, input_dim: usize, hidden: usize, activation: Activation) -> Mlp {
        Mlp::new(
            &vs.root(),
            MlpSpec {
                input_dim,
                hidden_size: hidden,
                num_layers: 3,
                outputs: 22,
                activation,
            },
        )
        .unwrap()
    }

    #[test]
    fn native_rows_match_libtorch() {
        if !supported() {
            eprintln!("no AVX2/FMA here: the kernel is not used, nothing to compare");
            return;
        }
        // 297 and 37 inputs exercise the scalar tail after the 8-lane loop;
        // 22 outputs exercise the rows left after blocks of four.
        for (input_dim, hidden) in [(297, 512), (37, 30)] {
            let vs = VarStore::new(Device::Cpu);
            let net = mlp(&vs, input_dim, hidden, Activation::Relu);
            let native = NativeMlp::snapshot(&net).unwrap().expect("applies");
            assert_eq!((native.input_dim(), native.output_dim()), (input_dim, 22));
            for seed in 0..8 {
                tch::manual_seed(seed);
                let x = Tensor::randn([1, input_dim as i64], (Kind::Float, Device::Cpu));
                let want: Vec<f32> =
                    Vec::try_from(net.f_forward(&x).unwrap().flatten(0, -1)).unwrap();
                let xs: Vec<f32> = Vec::try_from(x.flatten(0, -1)).unwrap();
                let mut got = [0.0f32; 22];
                native.forward_row(&xs, &mut got);
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
                }
                // The AVX2 kernel and the plain definition agree too.
                let mut h = xs.clone();
                for (i, layer) in native.layers.iter().enumerate() {
                    let mut y = vec![0.0; layer.outputs];
                    dense_portable(layer, &h, &mut y, i + 1 < native.layers.len());
                    h = y;
                }
                for (a, b) in got.iter().zip(&h) {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn snapshot_declines_what_it_cannot_compute() {
        let vs = VarStore::new(Device::Cpu);
        assert!(NativeMlp::snapshot(&mlp(&vs, 9, 8, Activation::Gelu))
            .unwrap()
            .is_none());
        let mut traced = mlp(&vs, 9, 8, Activation::Relu);
        traced.trace().unwrap();
        assert!(NativeMlp::snapshot(&traced).unwrap().is_none());
    }
}
