//! A micro-benchmark of the bf16 GEMMs, run by hand for decision 0028 (no
//! timing is asserted; it only prints):
//!
//! ```text
//! cargo test --release -p lcx-trainer --lib kernel::bf16_bench -- --ignored --nocapture --test-threads=1
//! ```
//!
//! For the trainer's layers (297→512, 512→512, 512→22) at batch 256 and
//! 1,024, each of a training step's three products (forward `x·Wᵀ`, weight
//! gradient `gᵀ·x`, input gradient `g·W`) on 1 and 2 threads: lcx's f32
//! kernel on the operands in the layouts the training step keeps them in,
//! the bf16 kernels this CPU runs on packed operands and with both
//! operands packed from f32 in the timed call, and libtorch's `matmul` in
//! f32 and on `BFloat16` tensors (converted beforehand; its output is
//! bf16). With `LCX_NATIVE_KERNEL=avx2` the f32 column is the f32 kernel
//! held to AVX2, the rate the bf16 AVX2 kernel is compared with.

use std::time::Instant;

use tch::{Device, Kind, Tensor};

use super::bf16::{gemm, Bf16Kernel, MatRef, PackedA, PackedB, Update};
use super::native::{
    dense_into_panels, dense_threads_packed, supported, to_row_panels, Extras, Layer, Left, Panels,
    PANEL,
};

/// Seconds per call: the fastest of 7 rounds, each at least 20 ms of
/// calls, after two calls of warm-up. The fastest, not the median: on a
/// shared 2-core host other work only ever adds time to a round.
fn seconds(mut f: impl FnMut()) -> f64 {
    f();
    f();
    let start = Instant::now();
    f();
    let once = start.elapsed().as_secs_f64().max(1e-7);
    let reps = ((0.02 / once).ceil() as usize).max(1);
    let mut rounds: Vec<f64> = (0..7)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..reps {
                f();
            }
            start.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[0]
}

fn values(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| {
            ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32
                / (1u32 << 24) as f32
                - 0.5
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Product {
    Forward,
    WeightGrad,
    InputGrad,
}

#[test]
#[ignore = "a benchmark, run by hand in a release build (see the module comment)"]
fn bf16_gemm_benchmark() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("load average before: {}", load.trim());
    for k in Bf16Kernel::ALL {
        eprintln!("{}: {}", k.name(), k.missing().unwrap_or("runs here"));
    }
    let bf16_kernels: Vec<Bf16Kernel> = [Bf16Kernel::Avx2, Bf16Kernel::Avx512Bf16]
        .into_iter()
        .filter(|k| k.runs_here())
        .collect();
    println!(
        "| batch | product | m × k × n | threads | lcx f32 | {}torch f32 | torch bf16 |",
        bf16_kernels
            .iter()
            .map(|k| format!("lcx {0} | lcx {0} +pack | ", k.name()))
            .collect::<String>()
    );
    println!("|{}", "---|".repeat(8 + 2 * bf16_kernels.len()));
    for rows in [256usize, 1024] {
        for (inputs, outputs) in [(297usize, 512usize), (512, 512), (512, 22)] {
            let x = values(rows * inputs, 1);
            let w = values(outputs * inputs, 2);
            let g = values(rows * outputs, 3);
            for product in [Product::Forward, Product::WeightGrad, Product::InputGrad] {
                for threads in [1usize, 2] {
                    let (m, k, n, a, b) = match product {
                        Product::Forward => (
                            rows,
                            inputs,
                            outputs,
                            MatRef::new(&x, rows, inputs),
                            MatRef::new(&w, outputs, inputs).t(),
                        ),
                        Product::WeightGrad => (
                            outputs,
                            rows,
                            inputs,
                            MatRef::new(&g, rows, outputs).t(),
                            MatRef::new(&x, rows, inputs),
                        ),
                        Product::InputGrad => (
                            rows,
                            outputs,
                            inputs,
                            MatRef::new(&g, rows, outputs),
                            MatRef::new(&w, outputs, inputs),
                        ),
                    };
                    let flops = 2.0 * (m * k * n) as f64;
                    let rate = |s: f64| format!("{:.0}", flops / s / 1e9);
                    let mut cells = vec![if supported() {
                        rate(f32_lcx(product, rows, inputs, outputs, &x, &w, &g, threads))
                    } else {
                        "n/a".into()
                    }];
                    let mut c = vec![0.0f32; m * n];
                    for &kernel in &bf16_kernels {
                        let mut pa = PackedA::pack(kernel, a);
                        let mut pb = PackedB::pack(kernel, b);
                        let packed = seconds(|| gemm(&pa, &pb, &mut c, Update::Overwrite, threads));
                        let whole = seconds(|| {
                            pa.repack(kernel, a);
                            pb.repack(kernel, b);
                            gemm(&pa, &pb, &mut c, Update::Overwrite, threads)
                        });
                        cells.push(rate(packed));
                        cells.push(rate(whole));
                    }
                    for kind in [Kind::Float, Kind::BFloat16] {
                        cells.push(rate(torch(
                            product, rows, inputs, outputs, &x, &w, &g, kind, threads,
                        )));
                    }
                    println!(
                        "| {rows} | {product:?} {inputs}→{outputs} | {m} × {k} × {n} | {threads} | {} |",
                        cells.join(" | ")
                    );
                }
            }
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("load average after: {}", load.trim());
}

/// lcx's f32 kernel on one product, its operands in the layouts
/// `native_train` keeps them in (as its calls do).
#[expect(clippy::too_many_arguments, reason = "a benchmark's operands")]
fn f32_lcx(
    product: Product,
    rows: usize,
    inputs: usize,
    outputs: usize,
    x: &[f32],
    w: &[f32],
    g: &[f32],
    threads: usize,
) -> f64 {
    let g_strips = to_row_panels(g, rows, outputs);
    match product {
        Product::Forward => {
            let mut layer = Layer::default();
            layer.pack_weights(inputs, outputs, w, None);
            let mut y = vec![0.0f32; rows * outputs];
            seconds(|| dense_threads_packed(&layer, x, rows, &mut y, None, false, threads))
        }
        Product::WeightGrad => {
            let mut dw = Layer::default();
            dw.pack_rows(rows, inputs, x);
            let mut out = vec![0.0f32; inputs.div_ceil(PANEL) * PANEL * outputs];
            seconds(|| {
                let extras = Extras {
                    packed: Some(&mut out),
                    ..Extras::default()
                };
                dense_into_panels(
                    dw.view(),
                    Left::StripsT,
                    &g_strips,
                    outputs,
                    extras,
                    threads,
                )
            })
        }
        Product::InputGrad => {
            let w_strips = to_row_panels(w, outputs, inputs);
            let zero = vec![0.0f32; inputs.div_ceil(PANEL) * PANEL];
            let panels = Panels::new(outputs, inputs, &w_strips, &zero);
            let mut out = vec![0.0f32; inputs.div_ceil(PANEL) * PANEL * rows];
            seconds(|| {
                let extras = Extras {
                    packed: Some(&mut out),
                    ..Extras::default()
                };
                dense_into_panels(panels, Left::Strips, &g_strips, rows, extras, threads)
            })
        }
    }
}

/// libtorch's `matmul` on one product, in `kind` (operands converted
/// before the clock starts).
#[expect(clippy::too_many_arguments, reason = "a benchmark's operands")]
fn torch(
    product: Product,
    rows: usize,
    inputs: usize,
    outputs: usize,
    x: &[f32],
    w: &[f32],
    g: &[f32],
    kind: Kind,
    threads: usize,
) -> f64 {
    tch::set_num_threads(threads as i32);
    let t = |v: &[f32], r: usize, c: usize| {
        Tensor::from_slice(v)
            .view([r as i64, c as i64])
            .to_device(Device::Cpu)
            .to_kind(kind)
    };
    let (x, w, g) = (
        t(x, rows, inputs),
        t(w, outputs, inputs),
        t(g, rows, outputs),
    );
    let _guard = tch::no_grad_guard();
    match product {
        Product::Forward => seconds(|| drop(x.matmul(&w.tr()))),
        Product::WeightGrad => seconds(|| drop(g.tr().matmul(&x))),
        Product::InputGrad => seconds(|| drop(g.matmul(&w))),
    }
}

/// The packings alone, in µs per call, on one thread: what the "+pack"
/// columns of [`bf16_gemm_benchmark`] add to the product.
#[test]
#[ignore = "a benchmark, run by hand in a release build (see the module comment)"]
fn bf16_packing_benchmark() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("load average before: {}", load.trim());
    println!("| kernel | operand | stored | read as | µs |");
    println!("|---|---|---|---|---|");
    for kernel in Bf16Kernel::ALL.into_iter().filter(|k| k.runs_here()) {
        for (rows, cols) in [(256usize, 512usize), (1024, 512), (512, 297), (256, 297)] {
            let v = values(rows * cols, 9);
            let m = MatRef::new(&v, rows, cols);
            for (what, read) in [("as stored", m), ("transposed", m.t())] {
                let mut pa = PackedA::pack(kernel, read);
                let a = seconds(|| pa.repack(kernel, read));
                println!(
                    "| {} | A | {rows} × {cols} | {what} | {:.1} |",
                    kernel.name(),
                    a * 1e6
                );
            }
        }
    }
    for kernel in Bf16Kernel::ALL.into_iter().filter(|k| k.runs_here()) {
        for (rows, cols) in [(256usize, 512usize), (1024, 512), (512, 297), (512, 512)] {
            let v = values(rows * cols, 9);
            let m = MatRef::new(&v, rows, cols);
            for (what, read) in [("as stored", m), ("transposed", m.t())] {
                let mut pb = PackedB::pack(kernel, read);
                let b = seconds(|| pb.repack(kernel, read));
                println!(
                    "| {} | B | {rows} × {cols} | {what} | {:.1} |",
                    kernel.name(),
                    b * 1e6
                );
            }
        }
    }
}
