//! The timings behind `lcx bench` that need libtorch: `lcx bench trainer`
//! (docs/deep-cfr.md §12.1), the cost of one advantage pass (both players)
//! plus one strategy pass on synthetic memories, fp32 or AMP, each mode's
//! warm-up and timed calls; and `lcx bench peak --device`'s matrix
//! products. The lines and tables they feed are lcx-core's (`bench::`);
//! nothing here prints.

use std::time::Instant;

use tch::{Device, Kind, Tensor};

use crate::run::train::{TrainError, Trainer};
use crate::{device, TrainerError};
use lcx_core::bench::peak_line::DeviceRates;
use lcx_core::bench::trainer::TrainerSample;
use lcx_core::cfr::memory::SampleRef;
use lcx_core::cfr::regret::ACTIONS;
use lcx_core::config::TrainerConfig;

/// One synthetic sample: info state, target, legal mask bits.
type Row = (Vec<f32>, [f32; ACTIONS], u32);

/// A trainer whose memories hold `batch × updates` synthetic samples each,
/// drawn from a torch generator seeded `run.seed + 909`: inputs ~ N(0, 1),
/// advantage targets ~ N(0, 20²), masks legal with probability 0.75 (one
/// action always legal), strategy targets random distributions over the
/// legal actions, iteration = index + 1.
pub fn synthetic_trainer(mut config: TrainerConfig, amp: bool) -> Result<Trainer, TrainError> {
    config.run.use_amp = amp;
    config.run.max_iterations = Some(1);
    config.evaluation.eval_every = 0;
    config.checkpoint.save_every = 0;
    config.checkpoint.save_latest = false;
    let o = &config.optimization;
    let n_adv =
        (o.advantage_batch_size as usize * o.advantage_updates_per_iteration as usize).max(1);
    let n_str = (o.strategy_batch_size as usize * o.strategy_updates_per_iteration as usize).max(1);
    config.memory.advantage_capacity = config.memory.advantage_capacity.max(n_adv as u64);
    config.memory.strategy_capacity = config.memory.strategy_capacity.max(n_str as u64);
    let seed = config.run.seed as i64 + 909;
    let mut trainer = Trainer::new(config)?;
    let dim = trainer.input_dim();
    tch::manual_seed(seed);
    let fill = |n: usize, strategy: bool| -> Result<Vec<Row>, TrainerError> {
        let opts = (Kind::Float, Device::Cpu);
        let x =
            Vec::<f32>::try_from(Tensor::f_randn([n as i64, dim as i64], opts)?.f_flatten(0, -1)?)?;
        let legal = Tensor::f_rand([n as i64, ACTIONS as i64], opts)?.f_lt(0.75)?;
        let always = Tensor::f_randint(ACTIONS as i64, [n as i64], (Kind::Int64, Device::Cpu))?;
        let legal = legal
            .f_scatter_value(1, &always.f_unsqueeze(1)?, 1)?
            .f_to_kind(Kind::Float)?;
        let y = if strategy {
            let w = Tensor::f_rand([n as i64, ACTIONS as i64], opts)?.f_mul(&legal)?;
            w.f_div(
                &w.f_sum_dim_intlist(1, true, Kind::Float)?
                    .f_clamp_min(1e-12)?,
            )?
        } else {
            Tensor::f_randn([n as i64, ACTIONS as i64], opts)?
                .f_mul_scalar(20.0)?
                .f_mul(&legal)?
        };
        let y = Vec::<f32>::try_from(y.f_flatten(0, -1)?)?;
        let m = Vec::<f32>::try_from(legal.f_flatten(0, -1)?)?;
        let mut rows = Vec::with_capacity(n);
        for i in 0..n {
            let mut target = [0.0f32; ACTIONS];
            target.copy_from_slice(&y[i * ACTIONS..(i + 1) * ACTIONS]);
            let mask = (0..ACTIONS)
                .filter(|&a| m[i * ACTIONS + a] > 0.5)
                .fold(0u32, |acc, a| acc | 1 << a);
            rows.push((x[i * dim..(i + 1) * dim].to_vec(), target, mask));
        }
        Ok(rows)
    };
    for p in 0..2 {
        for (i, (x, y, mask)) in fill(n_adv, false)?.iter().enumerate() {
            trainer.adv_mem[p].add(SampleRef {
                info_state: x,
                target: y,
                mask: *mask,
                iteration: i as u32 + 1,
                player: p as u8,
                is_first_open: false,
            })?;
        }
    }
    for (i, (x, y, mask)) in fill(n_str, true)?.iter().enumerate() {
        trainer.strat_mem.add(SampleRef {
            info_state: x,
            target: y,
            mask: *mask,
            iteration: i as u32 + 1,
            player: 0,
            is_first_open: false,
        })?;
    }
    Ok(trainer)
}

/// Times one advantage pass for both players plus one strategy pass, as an
/// iteration runs them (concurrently where it would), with the device
/// synchronised; milliseconds.
pub fn time_training_call(trainer: &mut Trainer) -> Result<f64, TrainError> {
    Ok(timed_training_call(trainer)?.ms)
}

/// [`time_training_call`] with the call's mean losses and its graphed
/// steps. The losses let an experiment guard against a mode (AMP) that is
/// faster but trains worse.
pub fn timed_training_call(trainer: &mut Trainer) -> Result<TimedCall, TrainError> {
    let t = (trainer.adv_mem[0].len() as u64).max(1);
    let graphed = trainer.graphed_steps();
    device::synchronize(trainer.device);
    let start = Instant::now();
    let (losses, _, _) = trainer.train_networks(t)?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let adv: Vec<f64> = losses[..2].iter().flatten().copied().collect();
    let adv = (!adv.is_empty()).then(|| adv.iter().sum::<f64>() / adv.len() as f64);
    Ok(TimedCall {
        ms,
        loss_advantage: adv,
        loss_strategy: losses[2],
        graphed_steps: trainer.graphed_steps() - graphed,
    })
}

/// What [`timed_training_call`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedCall {
    pub ms: f64,
    /// The mean loss of the advantage networks (both players) and the
    /// strategy network's.
    pub loss_advantage: Option<f64>,
    pub loss_strategy: Option<f64>,
    /// Steps replayed from a CUDA graph.
    pub graphed_steps: u64,
}

/// Mean, p50 and p95 (sorted value at index ⌈0.95(n−1)⌉) of `ms`.
pub fn summarize(ms: &[f64]) -> (f64, f64, f64) {
    if ms.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let p50 = v[(0.5 * (v.len() - 1) as f64).ceil() as usize];
    let p95 = v[(0.95 * (v.len() - 1) as f64).ceil() as usize];
    (mean, p50, p95)
}

/// A fingerprint of the three networks' weights (FNV-1a over their f32
/// bits, read back to the host): equal on every device for one seed,
/// because the weights are drawn on the CPU and copied (see
/// `NetTrainer::new`). `lcx bench trainer` prints it, and the GPU check
/// compares a CPU trainer's with a CUDA trainer's.
pub fn weights_digest(trainer: &Trainer) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in crate::run::train::flat_parameters(&trainer.nets) {
        for byte in w.to_bits().to_le_bytes() {
            h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The modes `lcx bench trainer` times, as (requested, AMP on): both with
/// `--both` (fp32 first), else AMP when `--amp` or the config asks for it,
/// else fp32.
pub fn modes(both: bool, amp: bool) -> &'static [(&'static str, bool)] {
    if both {
        &[("fp32", false), ("amp", true)]
    } else if amp {
        &[("amp", true)]
    } else {
        &[("fp32", false)]
    }
}

/// What happens while the modes are timed, for the caller to write or say.
#[derive(Debug)]
pub enum TrainerBenchEvent<'a> {
    /// AMP was asked for where it cannot run: this mode trains in fp32,
    /// for this reason.
    AmpFallsBack(&'a str),
    /// One timed call, as the metric line the runner ingests.
    Sample(&'a TrainerSample<'a>),
}

/// One mode's timings.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeTiming {
    /// What was asked for (`fp32`, `amp`), and what ran.
    pub requested: &'static str,
    pub precision: &'static str,
    /// What the steps ran on, as a table shows it (`lcx kernel, avx2-fma`,
    /// `libtorch`).
    pub backend: String,
    /// Mean, p50 and p95 milliseconds of the timed calls ([`summarize`]).
    pub ms: (f64, f64, f64),
}

/// Every mode's timings, with the initial weights' digest (of the last
/// mode's trainer; one seed draws the same weights in every mode).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainerTimings {
    pub modes: Vec<ModeTiming>,
    pub digest: String,
}

/// Times each of `modes` on a fresh [`synthetic_trainer`] of `config`:
/// `warmup` untimed calls, then `runs` timed ones, each reported to `on`
/// as it is measured (iterations numbered across modes from 1). An error
/// `on` returns stops the timing.
pub fn time_modes<E: From<TrainError>>(
    config: &TrainerConfig,
    modes: &[(&'static str, bool)],
    warmup: usize,
    runs: usize,
    mut on: impl FnMut(TrainerBenchEvent<'_>) -> Result<(), E>,
) -> Result<TrainerTimings, E> {
    let mut timings = TrainerTimings {
        modes: Vec::with_capacity(modes.len()),
        digest: String::new(),
    };
    let mut iteration = 0;
    let o = &config.optimization;
    let steps = (2 * o.advantage_updates_per_iteration + o.strategy_updates_per_iteration).max(1);
    for &(requested, amp) in modes {
        let mut t = synthetic_trainer(config.clone(), amp)?;
        timings.digest = weights_digest(&t);
        // The kernel's width too (see `Trainer::training_kernel`).
        let kernel = t.training_kernel();
        let reason = if amp {
            t.amp_falls_back_to_fp32()
        } else {
            None
        };
        if let Some(why) = &reason {
            on(TrainerBenchEvent::AmpFallsBack(why))?;
        }
        let precision = t.precision();
        for _ in 0..warmup {
            time_training_call(&mut t)?;
        }
        let mut ms = Vec::with_capacity(runs);
        let mut graphed = 0;
        for _ in 0..runs {
            let call = timed_training_call(&mut t)?;
            iteration += 1;
            graphed += call.graphed_steps;
            let kernel = if call.graphed_steps > 0 {
                format!("{kernel}, CUDA graphs")
            } else {
                kernel.clone()
            };
            on(TrainerBenchEvent::Sample(&TrainerSample {
                iteration,
                precision,
                precision_requested: requested,
                precision_reason: reason.as_deref(),
                training_kernel: &kernel,
                ms_per_call: call.ms,
                ms_per_step: call.ms / steps as f64,
                graphed_steps: call.graphed_steps,
                loss_advantage: call.loss_advantage,
                loss_strategy: call.loss_strategy,
            }))?;
            ms.push(call.ms);
        }
        let mut backend = kernel.replacen("lcx ", "lcx kernel, ", 1);
        if graphed > 0 {
            backend.push_str(&format!(", CUDA graphs ({graphed} steps)"));
        }
        timings.modes.push(ModeTiming {
            requested,
            precision,
            backend,
            ms: summarize(&ms),
        });
    }
    Ok(timings)
}

/// Why `lcx bench peak --device` could not time its matrix products.
#[derive(Debug, thiserror::Error)]
pub enum RatesError {
    #[error("timing the matrix product")]
    Fp32(#[source] tch::TchError),
    #[error("timing the FP16 matrix product")]
    Half(#[source] tch::TchError),
}

/// `target`'s matrix-product ceilings, the best of 5 products of `size`²
/// matrices: FP32 always, and on a GPU FP16 too, the tensor-core ceiling
/// an AMP arm is read against (on a CPU, FP16 products are no faster and
/// not what AMP runs).
pub fn device_rates(target: Device, size: i64) -> Result<DeviceRates, RatesError> {
    let fp32_gflops = device::matmul_gflops(target, size, 5, Kind::Float)
        .map_err(RatesError::Fp32)?
        .0;
    let half_gflops = match target {
        Device::Cuda(_) => Some(
            device::matmul_gflops(target, size, 5, Kind::Half)
                .map_err(RatesError::Half)?
                .0,
        ),
        _ => None,
    };
    Ok(DeviceRates {
        device: format!("{target:?}"),
        size,
        fp32_gflops,
        half_gflops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_memories_are_full_and_a_call_trains() {
        let c = crate::smoke_config();
        let mut t = synthetic_trainer(c, false).unwrap();
        assert_eq!(t.adv_mem[0].len(), 2);
        assert_eq!(t.strat_mem.len(), 2);
        let s = t.strat_mem.get(0).unwrap();
        let sum: f32 = s.target.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5 && s.mask != 0);
        let before = crate::run::train::flat_parameters(&t.nets);
        let ms = time_training_call(&mut t).unwrap();
        assert!(ms > 0.0);
        assert_ne!(before, crate::run::train::flat_parameters(&t.nets));
        assert_eq!(summarize(&[3.0, 1.0, 2.0, 10.0]), (4.0, 3.0, 10.0));
    }

    #[test]
    fn every_mode_is_timed_and_its_calls_numbered_across_modes() {
        let mut events = Vec::new();
        let timings =
            time_modes::<TrainError>(&crate::smoke_config(), modes(true, false), 1, 2, |event| {
                events.push(match event {
                    TrainerBenchEvent::AmpFallsBack(_) => "amp falls back".to_string(),
                    TrainerBenchEvent::Sample(s) => {
                        format!("{} {}", s.iteration, s.precision_requested)
                    }
                });
                Ok(())
            })
            .unwrap();
        let requested: Vec<&str> = timings.modes.iter().map(|m| m.requested).collect();
        assert_eq!(requested, ["fp32", "amp"]);
        let mut expected = vec!["1 fp32", "2 fp32"];
        // AMP runs on CUDA, and on a CPU as lcx's bf16 step where lcx's
        // kernel runs; elsewhere it is said before the mode's first call,
        // once.
        if !device::cuda_available() && !crate::kernel::native::supported() {
            expected.push("amp falls back");
        }
        expected.extend(["3 amp", "4 amp"]);
        assert_eq!(events, expected);
        assert!(timings.modes.iter().all(|m| m.ms.0 > 0.0));
        assert_eq!(modes(false, true), [("amp", true)]);
        assert_eq!(modes(false, false), [("fp32", false)]);
    }
}
