//! The Deep CFR training loop (docs/deep-cfr.md §8): traversals for both players,
//! advantage training (warm start), strategy training, evaluation, memory
//! metrics, checkpoints, and one metrics object per iteration.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use tch::{Device, Kind, Tensor};

use crate::kernel::bf16::Bf16Kernel;
use crate::kernel::native_train::{Loss, NativeTrainer};
use crate::kernel::step::LcxStep;
use crate::nn::forward_graphs::ForwardGraphs;
use crate::nn::graph::CudaGraph;
use crate::nn::network::{Mlp, MlpSpec};
use crate::nn::optim::{self, AdamWConfig, GradScaler, NetTrainer, Weighting};
use crate::nn::policy::TorchPolicy;
use crate::run::checkpoint::{self, CheckpointError, CheckpointMeta};
use crate::run::eval::{self, EvalSpec};
use crate::run::mirror::{self, Batches, DeviceMirror};
use crate::{device, TrainerError};
use lcx_core::cfr::memory::{Batch, Reservoir};
use lcx_core::cfr::regret::{Fallback, ACTIONS};
use lcx_core::cfr::stats::Buckets;
use lcx_core::cfr::traversal::{
    Cutoff, Opponent, Sampling, TraversalError, TraversalOutput, TraversalParams,
};
use lcx_core::config::{self as cfg, TrainerConfig};
use lcx_core::encoding::Encoding;
use lcx_core::metrics;

mod graphed;
pub use graphed::{Agreement, WARM_UP as GRAPH_WARM_UP};

/// Errors of a training run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Torch(#[from] TrainerError),
    #[error("traversal: {0}")]
    Traversal(#[from] TraversalError),
    #[error("memory: {0}")]
    Memory(#[from] lcx_core::cfr::memory::MemoryError),
    #[error("checkpoint {0}")]
    Checkpoint(#[from] CheckpointError),
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Workers(#[from] crate::run::workers::WorkerError),
}

/// One iteration's metrics, keyed by the names of `lcx_core::metrics`.
pub type Metrics = BTreeMap<String, f64>;

/// Resolves the traversal settings of a trainer config.
pub fn traversal_params(c: &TrainerConfig) -> TraversalParams {
    let t = &c.traversal;
    TraversalParams {
        sampling: match t.sampling_mode {
            cfg::SamplingMode::Outcome => Sampling::Outcome,
            cfg::SamplingMode::External => Sampling::External,
        },
        max_depth: t.max_depth.map(u64::from),
        max_nodes: t.max_nodes_per_traversal,
        rm_epsilon: t.regret_matching_epsilon,
        explore_epsilon: t.outcome_sampling_epsilon,
        value_clip: t.outcome_sampling_value_clip,
        unsampled_zero: t.outcome_unsampled_regret == cfg::UnsampledRegret::Zero,
        cutoff: match t.cutoff_value_mode {
            cfg::CutoffValueMode::ScoreDiff => Cutoff::ScoreDiff,
            cfg::CutoffValueMode::RandomRollout => Cutoff::Rollout {
                rollouts: t.cutoff_rollouts,
                heuristic: t.cutoff_rollout_policy == cfg::RolloutPolicy::HeuristicBalanced,
                max_steps: t.cutoff_rollout_max_steps,
            },
        },
        opponent: match t.opponent_policy {
            cfg::OpponentPolicy::Network => Opponent::Network,
            cfg::OpponentPolicy::AverageStrategy => Opponent::AverageStrategy,
            cfg::OpponentPolicy::DiscardOnly => Opponent::DiscardOnly,
            cfg::OpponentPolicy::HeuristicBalanced => Opponent::Heuristic,
        },
        strategy_interval: u64::from(t.strategy_sample_interval),
        store_traverser: t.store_strategy_on_traverser_nodes,
        store_opponent: t.store_strategy_on_opponent_nodes,
        fallback: match c.regret_matching.all_negative_fallback {
            cfg::AllNegativeFallback::Uniform => Fallback::Uniform,
            cfg::AllNegativeFallback::ArgmaxTiebreak => Fallback::ArgmaxTiebreak,
        },
        encoding: Encoding::from(&c.encoding),
        buckets: Buckets {
            width: u64::from(t.endpoint_depth_bucket_width),
            max: u64::from(t.endpoint_depth_bucket_max),
        },
    }
}

fn weighting(c: &TrainerConfig) -> (Weighting, Weighting) {
    let w = &c.training_weighting;
    match w.mode {
        cfg::WeightingMode::None => (Weighting::None, Weighting::None),
        cfg::WeightingMode::Lcfr => {
            let l = Weighting::Lcfr {
                alpha: w.lcfr_alpha,
            };
            (l, l)
        }
        cfg::WeightingMode::Dcfr => {
            let d = Weighting::Dcfr {
                alpha: w.dcfr_alpha,
                beta: w.dcfr_beta,
                gamma: w.dcfr_gamma,
            };
            (d, d)
        }
    }
}

/// One network's share of an iteration's training: everything it reads,
/// copied out of the trainer so the three can run on threads of their own.
#[derive(Debug, Clone, Copy)]
struct NetJob {
    advantage: bool,
    updates: u32,
    batch: usize,
    grad_clip: f64,
    weighting: Weighting,
    dim: usize,
    device: Device,
    /// Train on lcx's kernel (`crate::kernel::native_train`) where it applies.
    native: bool,
    /// On lcx's kernel: train in bf16 on this kernel (AMP on a CPU,
    /// `crate::kernel::bf16_train`) rather than in f32.
    bf16: Option<Bf16Kernel>,
    /// Tasks each of the kernel's GEMMs is split into.
    threads: usize,
    /// On a GPU: bytes of batches per chunk of steps ([`UPLOAD_BYTES`]).
    upload_bytes: usize,
    /// On a GPU: gather the batches from the memory's device copy
    /// (`memory.on_device`) rather than copy them from the host.
    on_device: bool,
    /// On a GPU: capture the step as a CUDA graph and replay it
    /// (`optimization.cuda_graphs`, an eager network).
    graphs: bool,
}

/// The FP32 work of one iteration, counted from what ran: the rows every
/// traversal forward evaluated, and the steps and rows every network
/// trained on (see [`MlpSpec`]'s FLOP conventions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    pub forward_rows: u64,
    pub traversal_flops: f64,
    pub training_flops: f64,
}

impl Work {
    pub fn of(spec: &MlpSpec, forward_rows: [u64; 3], trained: [(u64, u64); 3]) -> Work {
        let rows: u64 = forward_rows.iter().sum();
        let training = trained
            .iter()
            .map(|&(steps, rows)| {
                rows as f64 * spec.training_flops_per_row()
                    + steps as f64 * spec.optimizer_flops_per_step()
            })
            .sum();
        Work {
            forward_rows: rows,
            traversal_flops: rows as f64 * spec.forward_flops_per_row(),
            training_flops: training,
        }
    }

    /// The work's `perf/` metrics, into `m`: the counts, and the rates over
    /// the phases' seconds where those (and, for training, its work) are
    /// not zero.
    fn insert_metrics(&self, traversal_seconds: f64, training_seconds: f64, m: &mut Metrics) {
        m.insert("perf/forward_rows".into(), self.forward_rows as f64);
        m.insert("perf/traversal_flops".into(), self.traversal_flops);
        m.insert("perf/training_flops".into(), self.training_flops);
        if traversal_seconds > 0.0 {
            m.insert(
                "perf/traversal_gflops".into(),
                self.traversal_flops / traversal_seconds / 1e9,
            );
        }
        if training_seconds > 0.0 && self.training_flops > 0.0 {
            m.insert(
                "perf/training_gflops".into(),
                self.training_flops / training_seconds / 1e9,
            );
        }
    }
}

/// What [`Trainer::train_networks`] returns: the losses (adv0, adv1,
/// strategy) and the seconds until the advantage networks and the strategy
/// network were done.
type Trained = ([Option<f64>; 3], f64, f64);

/// What [`NetJob::run`] returns.
#[derive(Debug, Clone, Copy)]
struct NetResult {
    /// Mean loss over steps with a finite loss (NaN when none was); None
    /// when the memory was empty or no update was asked for.
    loss: Option<f64>,
    /// The loss of the last step whose loss was finite: what the reference
    /// reports as its strategy loss.
    last: Option<f64>,
    nonfinite: u64,
    /// Steps the grad scaler skipped (inf/NaN gradients under AMP).
    overflow: u64,
    /// Steps taken and rows they trained on (for the FLOP count).
    steps: u64,
    rows: u64,
    /// On a GPU: the seconds until the host had queued every step, before
    /// waiting for the device to finish them.
    queued_seconds: Option<f64>,
    /// Steps replayed from a CUDA graph.
    graphed: u64,
}

impl NetResult {
    /// The steps on a device, as their tally read back: `rows` trained on,
    /// `queued` seconds until the last was queued, `graphed` replayed from
    /// a CUDA graph.
    fn of_device(v: optim::TallyValues, rows: u64, queued: f64, graphed: u64) -> Self {
        NetResult {
            loss: Some(v.mean_loss),
            last: v.last,
            nonfinite: v.nonfinite,
            overflow: v.overflow,
            steps: v.steps,
            rows,
            queued_seconds: Some(queued),
            graphed,
        }
    }

    /// No step taken: an empty memory, or no update asked for.
    fn untrained() -> Self {
        NetResult {
            loss: None,
            last: None,
            nonfinite: 0,
            overflow: 0,
            steps: 0,
            rows: 0,
            queued_seconds: None,
            graphed: 0,
        }
    }
}

/// The host's buffers for drawing a chunk of batches ([`NetJob::chunk`]).
#[derive(Default)]
struct Draws {
    slots: Vec<u32>,
    host: Batch,
}

/// Bytes of the batches a GPU gathers (or is sent) at once: large enough
/// that the per-chunk work vanishes (64 steps of the default 1,024-row
/// batches), small enough to be no burden on either memory.
const UPLOAD_BYTES: usize = 64 << 20;

impl NetJob {
    /// Steps whose batches one upload carries: as many as fit in
    /// `upload_bytes`, at least one.
    fn steps_per_upload(&self, rows: usize) -> usize {
        // states, targets and an expanded mask in f32, the iteration in i64
        let row_bytes = 4 * (self.dim + 2 * ACTIONS) + 8;
        (self.upload_bytes / (rows.max(1) * row_bytes)).max(1)
    }

    /// `updates` steps on `trainer` from batches of `mem` (on a GPU with
    /// `memory.on_device`, gathered from its copy `mirror`).
    fn run(
        &self,
        trainer: &mut NetTrainer,
        mem: &mut Reservoir,
        mirror: &mut DeviceMirror,
        scaler: &mut GradScaler,
        t: u64,
    ) -> Result<NetResult, TrainError> {
        if mem.is_empty() || self.updates == 0 {
            return Ok(NetResult::untrained());
        }
        if self.native {
            if let Some(native) = LcxStep::load(trainer, self.bf16, self.threads)? {
                return self.run_native(native, trainer, mem, t);
            }
        }
        if self.device != Device::Cpu {
            return self.run_resident(trainer, mem, mirror, scaler, t);
        }
        let mut tally = Tally::default();
        let mut b = Batch::default();
        for _ in 0..self.updates {
            mem.sample_into(self.batch, &mut b)?;
            tally.rows += b.rows as u64;
            let batch = mirror::upload_batches(&b, 1, b.rows, self.device)?.step(0)?;
            let loss = self.loss(trainer, scaler, batch, t)?;
            tally.add(optim::step(trainer, scaler, &loss, self.grad_clip)?);
        }
        Ok(tally.result())
    }

    /// The forward of a batch (x, y, m, it) and its loss.
    fn loss(
        &self,
        trainer: &NetTrainer,
        scaler: &GradScaler,
        (x, y, m, it): (Tensor, Tensor, Tensor, Tensor),
        t: u64,
    ) -> Result<Tensor, TrainError> {
        // AMP: the forward autocast would run (see `Mlp::f_forward_half`).
        let out = if scaler.enabled() {
            trainer.net.f_forward_half(&x).map_err(TrainerError::from)?
        } else {
            trainer.forward(&x)?
        };
        Ok(if self.advantage {
            optim::advantage_loss(&out, &y, &m, &it, t, self.weighting)?
        } else {
            optim::strategy_loss(&out, &y, &m, &it, t, self.weighting)?
        })
    }

    /// [`NetJob::run`] on a GPU: the batches are drawn as on the CPU, a
    /// chunk of steps at a time, and gathered on the device from `mirror`
    /// (`memory.on_device`) or copied there from the host; every step is
    /// queued without waiting for the device (see
    /// [`optim::step_on_device`]), and the losses and counts are read back
    /// once, after the last step.
    // Takes run's parameters as they are: it is run's GPU branch, split
    // out, not a second way to call it.
    fn run_resident(
        &self,
        trainer: &mut NetTrainer,
        mem: &mut Reservoir,
        mirror: &mut DeviceMirror,
        scaler: &mut GradScaler,
        t: u64,
    ) -> Result<NetResult, TrainError> {
        if self.graphs && self.updates as usize > graphed::WARM_UP {
            match CudaGraph::new(self.device) {
                Ok(graph) => {
                    let replay = graphed::Replay::Graph(graph);
                    return graphed::run(self, trainer, mem, mirror, scaler, t, replay);
                }
                Err(e) => {
                    crate::nn::graph::warn_eager_once(
                        "optimization.cuda_graphs",
                        "perf/graphed_steps",
                        &e,
                    );
                }
            }
        }
        let start = Instant::now();
        let mut tally = optim::DeviceTally::new(trainer, self.updates as usize, self.device)?;
        let rows = self.batch.min(mem.len());
        let per_upload = self.steps_per_upload(rows);
        if self.on_device {
            mirror.sync(mem)?;
        }
        let mut draws = Draws::default();
        let mut left = self.updates as usize;
        while left > 0 {
            let steps = left.min(per_upload);
            let batches = self.chunk(mem, mirror, steps, rows, &mut draws)?;
            for s in 0..steps {
                let loss = self.loss(trainer, scaler, batches.step(s as i64)?, t)?;
                optim::step_on_device(trainer, scaler, &loss, self.grad_clip, &mut tally)?;
            }
            left -= steps;
        }
        let rows = (rows * self.updates as usize) as u64;
        let queued = start.elapsed().as_secs_f64();
        let v = tally.read(trainer)?;
        Ok(NetResult::of_device(v, rows, queued, 0))
    }

    /// The batches of the next `steps` steps of `rows` rows on the device:
    /// drawn as on the CPU, then gathered from `mirror` (`memory.on_device`)
    /// or copied there from the host.
    fn chunk(
        &self,
        mem: &mut Reservoir,
        mirror: &DeviceMirror,
        steps: usize,
        rows: usize,
        draws: &mut Draws,
    ) -> Result<Batches, TrainError> {
        Ok(if self.on_device {
            draws.slots.clear();
            for _ in 0..steps {
                mem.draw_slots(self.batch, &mut draws.slots)?;
            }
            mirror.gather(&draws.slots, steps, rows)?
        } else {
            draws.host.clear();
            for _ in 0..steps {
                mem.sample_append(self.batch, &mut draws.host)?;
            }
            mirror::upload_batches(&draws.host, steps, rows, self.device)?
        })
    }

    /// [`NetJob::run`] on lcx's kernel: the same batches, the same steps,
    /// with the state written back into `trainer`'s tensors at the end.
    fn run_native(
        &self,
        native: LcxStep,
        trainer: &mut NetTrainer,
        mem: &mut Reservoir,
        t: u64,
    ) -> Result<NetResult, TrainError> {
        let mut run = NativeRun::new(*self, native, trainer, mem);
        while run.left > 0 {
            run.step(t);
        }
        run.finish()
    }
}

/// One network's steps on lcx's kernel, taken one at a time so that any
/// free thread can take the next (see [`Trainer::train_rotating`]).
struct NativeRun<'a> {
    job: NetJob,
    loss: Loss,
    native: LcxStep,
    trainer: &'a mut NetTrainer,
    mem: &'a mut Reservoir,
    batch: Batch,
    tally: Tally,
    /// Steps still to take (0 after a failure).
    left: u32,
    failure: Option<TrainError>,
}

impl<'a> NativeRun<'a> {
    fn new(
        job: NetJob,
        native: LcxStep,
        trainer: &'a mut NetTrainer,
        mem: &'a mut Reservoir,
    ) -> Self {
        NativeRun {
            loss: if job.advantage {
                Loss::Advantage
            } else {
                Loss::Strategy
            },
            left: if mem.is_empty() { 0 } else { job.updates },
            job,
            native,
            trainer,
            mem,
            batch: Batch::default(),
            tally: Tally::default(),
            failure: None,
        }
    }

    /// Rows still to train on.
    fn work_left(&self) -> u64 {
        u64::from(self.left) * self.job.batch as u64
    }

    fn step(&mut self, t: u64) {
        let j = &self.job;
        let b = &mut self.batch;
        let native = &mut self.native;
        let step = self
            .mem
            .sample_into(j.batch, b)
            .map_err(TrainError::from)
            .and_then(|()| Ok(native.step(b, self.loss, j.weighting, t, j.grad_clip)?));
        match step {
            Ok(outcome) => {
                self.tally.rows += b.rows as u64;
                self.tally.add(outcome);
                self.left -= 1;
            }
            Err(e) => {
                self.failure = Some(e);
                self.left = 0;
            }
        }
    }

    /// Writes the parameters back and reports the steps. The steps taken
    /// are kept even when one failed, as on the libtorch path (which
    /// updates the tensors in place).
    fn finish(self) -> Result<NetResult, TrainError> {
        self.native.store(self.trainer)?;
        match self.failure {
            Some(e) => Err(e),
            None if self.tally.steps == 0 => Ok(NetResult::untrained()),
            None => Ok(self.tally.result()),
        }
    }
}

/// The losses of one network's steps, as [`NetResult`] reports them.
#[derive(Debug, Default)]
struct Tally {
    sum: f64,
    last: Option<f64>,
    finite: u32,
    nonfinite: u64,
    overflow: u64,
    steps: u64,
    rows: u64,
}

impl Tally {
    fn add(&mut self, outcome: optim::StepOutcome) {
        self.steps += 1;
        self.overflow += u64::from(outcome.overflow);
        if outcome.nonfinite_loss {
            self.nonfinite += 1;
        } else {
            self.sum += outcome.loss;
            self.last = Some(outcome.loss);
            self.finite += 1;
        }
    }

    /// The mean loss over steps with a finite loss (NaN when none was).
    fn result(&self) -> NetResult {
        NetResult {
            loss: Some(if self.finite > 0 {
                self.sum / f64::from(self.finite)
            } else {
                f64::NAN
            }),
            last: self.last,
            nonfinite: self.nonfinite,
            overflow: self.overflow,
            steps: self.steps,
            rows: self.rows,
            queued_seconds: None,
            graphed: 0,
        }
    }
}

/// A trainer: networks, optimisers, memories and the iteration counter.
pub struct Trainer {
    pub config: TrainerConfig,
    pub device: Device,
    encoding: Encoding,
    dim: usize,
    params: TraversalParams,
    pub nets: [NetTrainer; 3],
    scaler: GradScaler,
    pub(crate) adv_mem: [Reservoir; 2],
    pub(crate) strat_mem: Reservoir,
    /// On a GPU with `memory.on_device`: the memories' device copies
    /// (adv0, adv1, strategy), empty until the first training.
    mirrors: [DeviceMirror; 3],
    /// The last completed iteration (0 before the first).
    pub iteration: u64,
    nonfinite_losses: u64,
    amp_warned: bool,
    /// The networks' shape (all three share it), for FLOP counts.
    spec: MlpSpec,
    /// This iteration's training work: (steps, rows) per network.
    trained: [(u64, u64); 3],
    /// This iteration's last finite step loss per network.
    last_loss: [Option<f64>; 3],
    /// On a GPU: its measured FP32 matrix-product ceiling (taken once,
    /// before the first iteration, best of five), the peak its phases are
    /// read against, and how far its tries lay apart.
    device_peak: Option<(f64, f64)>,
    /// On a GPU with AMP: the half-precision (tensor-core) matrix-product
    /// ceiling, the peak an AMP arm's phases are read against.
    device_half_peak: Option<f64>,
    /// Training in bf16 on lcx's AVX512-BF16 kernel: the host's
    /// `VDPBF16PS` ceiling (all cores, probed once before the first
    /// iteration), the peak its phases are read against. `Some(None)`
    /// once probed where the CPU has none.
    bf16_peak: Option<Option<f64>>,
    /// Where evaluation games run (`evaluation.device`; `trainer` is
    /// [`Trainer::device`]).
    eval_device: Device,
    /// Steps the grad scaler skipped this iteration (inf/NaN gradients).
    overflow_steps: u64,
    /// On a GPU, this iteration's seconds until the host had queued every
    /// training step (before waiting for the device).
    queued_seconds: f64,
    /// This iteration's training steps replayed from a CUDA graph.
    graphed_steps: u64,
}

impl Trainer {
    /// Builds networks (seeded from `run.seed`, in the order adv0, adv1,
    /// strategy) on the configured device.
    pub fn new(config: TrainerConfig) -> Result<Self, TrainError> {
        let device = device::resolve(&config.run.device.to_string())?;
        let eval_device = match config.evaluation.device {
            cfg::EvalDevice::Trainer => device,
            cfg::EvalDevice::Device(spec) => device::resolve(&spec.to_string())?,
        };
        if config.run.keep_freed_memory {
            // Before the traversal and training threads allocate anything.
            crate::heap::keep_freed_memory();
        }
        let encoding = Encoding::from(&config.encoding);
        let dim = encoding.input_dim(&config.rules);
        let spec: MlpSpec = crate::network_spec(&config, dim);
        let adam = AdamWConfig {
            learning_rate: config.optimization.learning_rate,
            weight_decay: config.optimization.weight_decay,
        };
        tch::manual_seed(config.run.seed as i64);
        let mut nets = [
            NetTrainer::new(spec, device, adam)?,
            NetTrainer::new(spec, device, adam)?,
            NetTrainer::new(spec, device, adam)?,
        ];
        if config.network.jit == cfg::JitMode::Trace {
            // Parameters are graph inputs, so this happens once: optimiser
            // steps and checkpoint loads (in-place copies) need no re-trace.
            for net in &mut nets {
                net.net.trace()?;
            }
        }
        let use_scaler = config.run.use_amp && device != Device::Cpu;
        let mem_seed = config.run.seed + 101;
        let adv_cap = config.memory.advantage_capacity as usize;
        Ok(Self {
            params: traversal_params(&config),
            scaler: GradScaler::new(use_scaler, device)?,
            adv_mem: [
                Reservoir::new(dim, adv_cap, mem_seed),
                Reservoir::new(dim, adv_cap, mem_seed + 1),
            ],
            strat_mem: Reservoir::new(dim, config.memory.strategy_capacity as usize, mem_seed + 2),
            mirrors: [
                DeviceMirror::new(dim, device)?,
                DeviceMirror::new(dim, device)?,
                DeviceMirror::new(dim, device)?,
            ],
            encoding,
            dim,
            device,
            nets,
            config,
            iteration: 0,
            nonfinite_losses: 0,
            amp_warned: false,
            spec,
            trained: [(0, 0); 3],
            last_loss: [None; 3],
            device_peak: None,
            device_half_peak: None,
            bf16_peak: None,
            eval_device,
            overflow_steps: 0,
            queued_seconds: 0.0,
            graphed_steps: 0,
        })
    }

    /// The device evaluation games run on (`evaluation.device`).
    pub fn eval_device(&self) -> Device {
        self.eval_device
    }

    /// Input features per info state.
    pub fn input_dim(&self) -> usize {
        self.dim
    }

    /// The precision the training steps really run in: `"amp"` when the
    /// grad scaler is on (AMP asked for, on CUDA: fp16 autocast), `"bf16"`
    /// for AMP on a CPU (lcx's bf16 step, see [`Trainer::bf16_kernel`]),
    /// `"fp32"` otherwise.
    pub fn precision(&self) -> &'static str {
        if self.scaler.enabled() {
            "amp"
        } else if self.bf16_kernel().is_some() {
            "bf16"
        } else {
            "fp32"
        }
    }

    /// The bf16 kernel the training steps run on: `run.use_amp` on a CPU,
    /// where lcx's kernel trains this network (`None` elsewhere).
    pub fn bf16_kernel(&self) -> Option<Bf16Kernel> {
        let c = &self.config;
        (c.run.use_amp
            && self.device == Device::Cpu
            && c.optimization.native_training
            && NativeTrainer::applies(&self.nets[0]))
        .then(Bf16Kernel::selected)
        .flatten()
    }

    /// Why AMP, asked for, runs fp32 here; `None` where it runs (or was
    /// not asked for).
    pub fn amp_fallback_reason(&self) -> Option<String> {
        let c = &self.config;
        if !c.run.use_amp || self.precision() != "fp32" {
            return None;
        }
        Some(if self.device != Device::Cpu {
            format!("AMP needs CUDA or a CPU, and {:?} is neither", self.device)
        } else {
            lcx_core::config::amp::cpu_amp_blocker(c).unwrap_or_else(|| {
                "lcx's bf16 training step does not compute this network".to_string()
            })
        })
    }

    /// The precision the config asks for (`run.use_amp`).
    pub fn precision_requested(&self) -> &'static str {
        if self.config.run.use_amp {
            "amp"
        } else {
            "fp32"
        }
    }

    /// Why AMP, asked for, runs fp32 here, the first time it is asked
    /// (the caller says so once).
    pub fn amp_falls_back_to_fp32(&mut self) -> Option<String> {
        let reason = self.amp_fallback_reason().filter(|_| !self.amp_warned);
        self.amp_warned = true;
        reason
    }

    /// Runs iteration `t`'s traversals for both players with the configured
    /// scheduler and workers (see `crate::run::workers`); the batching metrics
    /// come back for the interleaved scheduler. Also returns the rows each
    /// network evaluated, and the forwards replayed from a CUDA graph
    /// (`traversal.cuda_graphs`).
    fn traverse(
        &self,
        t: u64,
    ) -> Result<(crate::run::workers::TraversalResult, [u64; 3], u64), TrainError> {
        let advantage = [&self.nets[0].net, &self.nets[1].net];
        let strategy = &self.nets[2].net;
        let native = if self.config.network.native_forward {
            TorchPolicy::native_snapshots(advantage, strategy)?
        } else {
            None
        };
        let rows = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
        let graphs = (self.config.traversal.cuda_graphs && self.device != Device::Cpu)
            .then(|| ForwardGraphs::new(self.device, self.dim));
        let policy = TorchPolicy {
            advantage,
            strategy,
            device: self.device,
            dim: self.dim,
            native,
            rows: Some(&rows),
            graphs: graphs.as_ref(),
        };
        let result =
            crate::run::workers::run_traversals(&self.config, &self.params, policy, self.dim, t)?;
        let graphed = graphs.as_ref().map_or(0, ForwardGraphs::replayed);
        Ok((result, rows.map(AtomicU64::into_inner), graphed))
    }

    /// What training network `net` (0, 1: advantage; 2: strategy) needs.
    fn net_job(&self, net: usize) -> NetJob {
        let o = &self.config.optimization;
        let (adv_w, strat_w) = weighting(&self.config);
        let advantage = net < 2;
        NetJob {
            advantage,
            updates: if advantage {
                o.advantage_updates_per_iteration
            } else {
                o.strategy_updates_per_iteration
            },
            batch: if advantage {
                o.advantage_batch_size
            } else {
                o.strategy_batch_size
            } as usize,
            grad_clip: o.grad_clip,
            weighting: if advantage { adv_w } else { strat_w },
            dim: self.dim,
            device: self.device,
            native: o.native_training && self.device == Device::Cpu && !self.scaler.enabled(),
            bf16: self.bf16_kernel(),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            upload_bytes: UPLOAD_BYTES,
            on_device: self.config.memory.on_device,
            graphs: o.cuda_graphs && self.device != Device::Cpu && !self.nets[net].net.is_traced(),
        }
    }

    /// `updates` steps on network `net` from its memory; the mean loss over
    /// steps with a finite loss, or None when the memory is empty.
    pub(crate) fn train_net(&mut self, net: usize, t: u64) -> Result<Option<f64>, TrainError> {
        let job = self.net_job(net);
        let mem = if net < 2 {
            &mut self.adv_mem[net]
        } else {
            &mut self.strat_mem
        };
        let r = job.run(
            &mut self.nets[net],
            mem,
            &mut self.mirrors[net],
            &mut self.scaler,
            t,
        )?;
        Ok(self.record(net, &r))
    }

    /// Adds network `net`'s share of the iteration to the trainer's counts
    /// (sequential and concurrent training alike) and returns its loss.
    fn record(&mut self, net: usize, r: &NetResult) -> Option<f64> {
        self.nonfinite_losses += r.nonfinite;
        self.overflow_steps += r.overflow;
        self.queued_seconds += r.queued_seconds.unwrap_or(0.0);
        self.graphed_steps += r.graphed;
        self.trained[net].0 += r.steps;
        self.trained[net].1 += r.rows;
        self.last_loss[net] = r.last;
        r.loss
    }

    /// Trains the three networks, one after the other or at once (see
    /// [`Trainer::trains_concurrently`]); returns the losses (adv0, adv1,
    /// strategy) and the seconds until the advantage networks and the
    /// strategy network were done, each counted from the phase's start.
    pub(crate) fn train_networks(&mut self, t: u64) -> Result<Trained, TrainError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let trained = self.train_networks_on(t, cpus)?;
        // The graphs of this iteration (its forwards' and its steps') are
        // dropped and no thread captures: their memory pools go back to
        // the device, else each iteration's would stay reserved.
        let c = &self.config;
        if self.device != Device::Cpu && (c.optimization.cuda_graphs || c.traversal.cuda_graphs) {
            crate::nn::graph::release_memory()?;
        }
        Ok(trained)
    }

    /// [`Trainer::train_networks`] as on a host of `cpus` cores.
    fn train_networks_on(&mut self, t: u64, cpus: usize) -> Result<Trained, TrainError> {
        let start = Instant::now();
        if !self.trains_concurrently() {
            let a0 = self.train_net(0, t)?;
            let a1 = self.train_net(1, t)?;
            device::synchronize(self.device);
            let adv_seconds = start.elapsed().as_secs_f64();
            let strat_start = Instant::now();
            let s = self.train_net(2, t)?;
            device::synchronize(self.device);
            return Ok((
                [a0, a1, s],
                adv_seconds,
                strat_start.elapsed().as_secs_f64(),
            ));
        }
        if cpus < 3 {
            if let Some(done) = self.train_rotating(t, cpus, start)? {
                return Ok(done);
            }
        }
        // Each network's steps are a chain of small GEMMs (256 × 512 ×
        // 512 at the default sizes); split over all cores they spend much of
        // their time in synchronisation (libtorch's OpenMP barriers, or
        // lcx's kernel waiting on its slowest task), so each network gets
        // its own share: libtorch threads, or tasks on the rayon pool.
        let per_net = (cpus / 3).max(1);
        let jobs = [0, 1, 2].map(|i| NetJob {
            threads: per_net,
            ..self.net_job(i)
        });
        let _restore = crate::run::workers::RestoreTorchThreads(tch::get_num_threads());
        let [n0, n1, n2] = &mut self.nets;
        let [m0, m1] = &mut self.adv_mem;
        let [c0, c1, c2] = &mut self.mirrors;
        let work = [(n0, m0, c0), (n1, m1, c1), (n2, &mut self.strat_mem, c2)];
        let results: Vec<Result<(NetResult, f64), TrainError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = work
                .into_iter()
                .zip(jobs)
                .map(|((net, mem, mirror), job)| {
                    std::thread::Builder::new()
                        .name("lcx-train".into())
                        .spawn_scoped(scope, move || {
                            device::set_torch_threads(per_net);
                            // AMP is off wherever this path runs, so a
                            // scaler of this thread's own is the identity.
                            let mut scaler = GradScaler::new(false, job.device)?;
                            let r = job.run(net, mem, mirror, &mut scaler, t)?;
                            Ok((r, start.elapsed().as_secs_f64()))
                        })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().unwrap_or_else(|_| {
                        Err(TrainError::Unsupported("a training thread panicked".into()))
                    }),
                    Err(e) => Err(TrainError::Unsupported(format!(
                        "could not start a training thread: {e}"
                    ))),
                })
                .collect()
        });
        let mut losses = [None; 3];
        let mut done = [0.0; 3];
        for (i, r) in results.into_iter().enumerate() {
            let (r, seconds) = r?;
            losses[i] = self.record(i, &r);
            done[i] = seconds;
        }
        Ok((losses, done[0].max(done[1]), done[2]))
    }

    /// [`Trainer::train_networks`] on fewer cores than networks, where all
    /// three train on lcx's kernel: `cpus` threads take the networks'
    /// steps in turn (see [`crate::run::rotate`]), each GEMM on the thread
    /// that runs its step. `None` (nothing trained) where the kernel does
    /// not apply.
    fn train_rotating(
        &mut self,
        t: u64,
        cpus: usize,
        start: Instant,
    ) -> Result<Option<Trained>, TrainError> {
        let jobs = [0, 1, 2].map(|i| NetJob {
            threads: 1,
            ..self.net_job(i)
        });
        if !jobs.iter().all(|j| j.native) {
            return Ok(None);
        }
        let [n0, n1, n2] = &mut self.nets;
        let [m0, m1] = &mut self.adv_mem;
        let mut runs = Vec::with_capacity(3);
        for ((net, mem), job) in [(n0, m0), (n1, m1), (n2, &mut self.strat_mem)]
            .into_iter()
            .zip(jobs)
        {
            match LcxStep::load(net, job.bf16, 1)? {
                Some(native) => runs.push(NativeRun::new(job, native, net, mem)),
                // Nothing has changed yet: the threads of the general path
                // take all three.
                None => return Ok(None),
            }
        }
        let runs =
            crate::run::rotate::rotate(runs, cpus, start, NativeRun::work_left, |run| run.step(t))
                .map_err(TrainError::Unsupported)?;
        let mut results = Vec::with_capacity(3);
        for (run, seconds) in runs {
            results.push((run.finish(), seconds));
        }
        let mut losses = [None; 3];
        let mut done = [0.0; 3];
        for (i, (r, seconds)) in results.into_iter().enumerate() {
            losses[i] = self.record(i, &r?);
            done[i] = seconds;
        }
        Ok(Some((losses, done[0].max(done[1]), done[2])))
    }

    /// Whether training steps run on lcx's kernel
    /// (`optimization.native_training` where it applies: a CPU without
    /// AMP, an eager ReLU network, AVX2 and FMA) rather than libtorch.
    pub fn trains_natively(&self) -> bool {
        self.net_job(0).native && NativeTrainer::applies(&self.nets[0])
    }

    /// What the training steps run on, for the `training_kernel` text
    /// field and `lcx bench trainer`: `lcx <width>` (lcx's kernel, at the
    /// width it picked on this CPU: `avx512f` or `avx2-fma`) or `libtorch`.
    /// The same host trains at two speeds with and without
    /// `LCX_NATIVE_KERNEL=avx2`, so a run says which it was.
    pub fn training_kernel(&self) -> String {
        if let Some(k) = self.bf16_kernel() {
            return format!("lcx {}", k.training_name());
        }
        match crate::kernel::native::kernel_isa() {
            Some(isa) if self.trains_natively() => format!("lcx {isa}"),
            _ => "libtorch".to_string(),
        }
    }

    /// Training steps replayed from a CUDA graph since the iteration began
    /// (`perf/graphed_steps`).
    pub fn graphed_steps(&self) -> u64 {
        self.graphed_steps
    }

    /// Whether the three networks train at once, each on its own thread:
    /// `optimization.concurrent_networks` without loss scaling (the three
    /// networks share the grad scaler, whose scale each step reads and
    /// writes). On a CPU each thread gets a third of the cores; on a GPU,
    /// where a step is bound by the host's kernel launches, three threads
    /// queue the three networks' kernels at once.
    pub fn trains_concurrently(&self) -> bool {
        self.config.optimization.concurrent_networks && !self.scaler.enabled()
    }

    /// The device's matmul ceilings, measured once, on the first iteration
    /// on a GPU: 4096² is large enough to keep a datacenter GPU's tensor
    /// cores busy, small enough for any GPU lcx trains on.
    fn measure_device_peaks(&mut self) -> Result<(), TrainError> {
        if self.bf16_peak.is_none() && self.bf16_kernel() == Some(Bf16Kernel::Avx512Bf16) {
            // Its products run on VDPBF16PS: an FP32 ceiling would
            // flatter them about twice.
            self.bf16_peak = Some(lcx_core::bench::peak::measure_bf16().map(|p| p.gflops));
        }
        if self.device == Device::Cpu || self.device_peak.is_some() {
            return Ok(());
        }
        let peak = crate::device::matmul_gflops(self.device, 4096, 5, Kind::Float)
            .map_err(TrainerError::from)?;
        self.device_peak = Some(peak);
        if self.scaler.enabled() {
            // AMP's matrix products run in half precision on tensor
            // cores: an FP32 ceiling would flatter them several times.
            let half = crate::device::matmul_gflops(self.device, 4096, 5, Kind::Half)
                .map_err(TrainerError::from)?;
            self.device_half_peak = Some(half.0);
        }
        Ok(())
    }

    /// Adds the traversals' samples to the reservoirs: each advantage
    /// sample to its player's (players above 1 count as player 1).
    fn add_samples(&mut self, out: &TraversalOutput) -> Result<(), TrainError> {
        for i in 0..out.advantage.len() {
            let s = out.advantage.get(i);
            self.adv_mem[usize::from(s.player).min(1)].add(s)?;
        }
        for i in 0..out.strategy.len() {
            self.strat_mem.add(out.strategy.get(i))?;
        }
        Ok(())
    }

    /// Plays iteration `t`'s evaluation games, if it has any, into `m`:
    /// each opponent's results and the time they took.
    fn run_evaluation(&self, t: u64, m: &mut Metrics) -> Result<(), TrainError> {
        let eval_start = Instant::now();
        let ev = &self.config.evaluation;
        let opponents = ev.opponents_for_iteration(t);
        let eval_spec = EvalSpec {
            games: ev.games as usize,
            base_seed: self.config.run.seed + 1000 * t,
            max_steps: u64::from(ev.max_steps),
            batch_size: ev.batch_size as usize,
        };
        // Evaluation on another device than training's (commonly the CPU
        // beside a GPU) plays a copy of the strategy network made there.
        let eval_copy = if opponents.is_empty() || self.eval_device == self.device {
            None
        } else {
            Some(Mlp::copy_on(self.spec, &self.nets[2].vs, self.eval_device)?)
        };
        let eval_net = eval_copy.as_ref().map_or(&self.nets[2].net, |c| &c.1);
        for opp in &opponents {
            let name = opp.to_string();
            let r = eval::evaluate(
                eval_net,
                self.eval_device,
                &self.config.rules,
                self.encoding,
                &name,
                &eval_spec,
            )?;
            m.extend(r.metrics(&name));
        }
        if !opponents.is_empty() {
            m.insert(
                "time/evaluation_seconds".into(),
                eval_start.elapsed().as_secs_f64(),
            );
        }
        Ok(())
    }

    /// The reservoirs' sizes (what they hold) and how many samples each
    /// has seen, into `m`.
    fn memory_metrics(&self, m: &mut Metrics) {
        let sizes = [self.adv_mem[0].len(), self.adv_mem[1].len()];
        m.insert("samples/advantage".into(), (sizes[0] + sizes[1]) as f64);
        m.insert("samples/strategy".into(), self.strat_mem.len() as f64);
        for (p, size) in sizes.iter().enumerate() {
            m.insert(format!("samples/advantage_player_{p}"), *size as f64);
            m.insert(
                format!("samples/advantage_player_{p}_first_open"),
                self.adv_mem[p].first_open_count() as f64,
            );
            m.insert(
                format!("memory/advantage_player_{p}"),
                self.adv_mem[p].seen() as f64,
            );
        }
        m.insert(
            "memory/advantage".into(),
            (self.adv_mem[0].seen() + self.adv_mem[1].seen()) as f64,
        );
        m.insert("memory/strategy".into(), self.strat_mem.seen() as f64);
    }

    /// Runs iteration `self.iteration + 1` and returns its metrics (the
    /// caller adds checkpoint time and writes them).
    pub fn run_iteration(&mut self) -> Result<Metrics, TrainError> {
        let t = self.iteration + 1;
        // Before the iteration's clock starts.
        self.measure_device_peaks()?;
        let start = Instant::now();
        let mut m = Metrics::new();
        m.insert("iteration".into(), t as f64);
        if let Some((peak, spread)) = self.device_peak {
            m.insert("peak/device_matmul_gflops".into(), peak);
            m.insert("peak/device_matmul_spread".into(), spread);
        }
        if let Some(half) = self.device_half_peak {
            m.insert("peak/device_matmul_half_gflops".into(), half);
        }
        if let Some(Some(bf16)) = self.bf16_peak {
            m.insert("peak/bf16_gflops".into(), bf16);
        }

        let trav_start = Instant::now();
        let (traversal, forward_rows, graphed_forwards) = self.traverse(t)?;
        let out = traversal.output;
        let traversal_seconds = trav_start.elapsed().as_secs_f64();

        let add_start = Instant::now();
        self.add_samples(&out)?;
        let add_seconds = add_start.elapsed().as_secs_f64();

        let train_start = Instant::now();
        self.trained = [(0, 0); 3];
        self.last_loss = [None; 3];
        self.overflow_steps = 0;
        self.queued_seconds = 0.0;
        self.graphed_steps = 0;
        let (losses, adv_seconds, strat_seconds) = self.train_networks(t)?;
        let training_seconds = train_start.elapsed().as_secs_f64();
        let work = Work::of(&self.spec, forward_rows, self.trained);
        work.insert_metrics(traversal_seconds, training_seconds, &mut m);
        let adv_losses: Vec<f64> = losses[..2].iter().flatten().copied().collect();
        let strat_loss = losses[2];

        self.run_evaluation(t, &mut m)?;

        let nodes = out.stats.nodes as f64;
        m.insert(metrics::TRAVERSAL_SECONDS.into(), traversal_seconds);
        m.insert("time/memory_add_seconds".into(), add_seconds);
        m.insert("time/advantage_train_seconds".into(), adv_seconds);
        m.insert("time/strategy_train_seconds".into(), strat_seconds);
        // The whole phase: with concurrent networks the two above overlap.
        m.insert("time/training_seconds".into(), training_seconds);
        if self.device != Device::Cpu {
            // Host time to queue the steps, beside the phase's time on the
            // device: when the two are close, the host is what limits.
            m.insert("time/training_queued_seconds".into(), self.queued_seconds);
        }
        // Where graphs were asked for, how many steps a graph took: 0 on a
        // CPU, so that an arm that asked is not read as graphed.
        if self.device != Device::Cpu || self.config.optimization.cuda_graphs {
            m.insert("perf/graphed_steps".into(), self.graphed_steps as f64);
        }
        if self.device != Device::Cpu || self.config.traversal.cuda_graphs {
            m.insert("traversal/graphed_forwards".into(), graphed_forwards as f64);
        }
        m.insert(
            metrics::NODES_PER_TRAVERSAL_SECOND.into(),
            per_second(nodes, traversal_seconds),
        );
        m.extend(out.stats.metrics(self.params.buckets));
        // One batch figure for both schedulers, so an A/B table has it in
        // both rows: the recursive scheduler forwards one state at a time.
        let batch = match &traversal.scheduler {
            Some(sched) => Some((sched.avg_batch_size(), sched.max_batch_size as f64)),
            None if work.forward_rows > 0 => Some((1.0, 1.0)),
            None => None,
        };
        if let Some((mean, max)) = batch {
            m.insert(metrics::FORWARD_BATCH_MEAN.into(), mean);
            m.insert(metrics::FORWARD_BATCH_MAX.into(), max);
        }
        if let Some(sched) = traversal.scheduler {
            m.extend(sched.metrics());
        }
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        m.insert("loss/advantage".into(), mean(&adv_losses));
        m.insert("loss/strategy".into(), strat_loss.unwrap_or(0.0));
        // The reference reports the last step's strategy loss; this is
        // that quantity, so the two trainers can be compared on it.
        if let Some(last) = self.last_loss[2] {
            m.insert("loss/strategy_last".into(), last);
        }
        self.memory_metrics(&mut m);
        if self.config.run.use_amp {
            m.insert("amp/grad_scale".into(), self.scaler.scale_value()?);
            m.insert(
                "amp/nonfinite_loss_count".into(),
                self.nonfinite_losses as f64,
            );
            m.insert("amp/overflow_steps".into(), self.overflow_steps as f64);
        }
        let iteration_seconds = start.elapsed().as_secs_f64();
        m.insert(metrics::ITERATION_SECONDS.into(), iteration_seconds);
        if let Device::Cuda(index) = self.device {
            // After the clock: nvidia-smi takes tens of milliseconds.
            if let Some(mib) = lcx_core::system::gpu::memory_used_mib(index) {
                m.insert("gpu/memory_used_mib".into(), mib);
            }
        }
        m.insert(
            metrics::NODES_PER_ITERATION_SECOND.into(),
            per_second(nodes, iteration_seconds),
        );
        self.iteration = t;
        Ok(m)
    }

    /// Writes checkpoint `stem` in `dir` for the current iteration.
    pub fn save_checkpoint(&self, dir: &std::path::Path, stem: &str) -> Result<(), TrainError> {
        let meta = CheckpointMeta {
            iteration: self.iteration,
            input_dim: self.dim,
            action_size: ACTIONS,
            resume_semantics: "networks_optimizers_iteration_only".into(),
            config: self.config.to_toml(),
            lcx_version: env!("CARGO_PKG_VERSION").into(),
        };
        checkpoint::save(
            dir,
            stem,
            [&self.nets[0], &self.nets[1], &self.nets[2]],
            &meta,
        )?;
        Ok(())
    }

    /// Restores networks, optimiser states and the iteration from a
    /// checkpoint; memories, RNGs and the scaler start fresh.
    pub fn load_checkpoint(&mut self, path: &std::path::Path) -> Result<u64, TrainError> {
        let (meta, weights) = checkpoint::read_meta(path)?;
        let [a, b, c] = &mut self.nets;
        checkpoint::load_into(&weights, [a, b, c])?;
        self.iteration = meta.iteration;
        Ok(meta.iteration)
    }
}

/// `count` per second of `seconds`; 0 when no time was measured, so that
/// a rate is never infinite or NaN in the metric lines.
fn per_second(count: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count / seconds
    } else {
        0.0
    }
}

/// Parameters of every network, flattened (for tests comparing weights).
pub fn flat_parameters(nets: &[NetTrainer; 3]) -> Vec<f32> {
    let mut out = Vec::new();
    for n in nets {
        let mut vars: Vec<(String, Tensor)> = n.vs.variables().into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, v) in vars {
            let flat = v
                .detach()
                .to_kind(Kind::Float)
                .to_device(Device::Cpu)
                .flatten(0, -1);
            out.extend(Vec::<f32>::try_from(&flat).unwrap_or_default());
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn work_counts_forward_and_training_flops_from_what_ran() {
        // 3 -> 4 -> 4 -> 2: 72 forward FLOPs a row, 192 per trained row,
        // 736 per optimiser step (see MlpSpec's test).
        let spec = super::MlpSpec::hand_counted();
        let w = super::Work::of(&spec, [1, 2, 3], [(1, 10), (0, 0), (2, 5)]);
        assert_eq!(w.forward_rows, 6);
        assert_eq!(w.traversal_flops, 6.0 * 72.0);
        assert_eq!(w.training_flops, 15.0 * 192.0 + 3.0 * 736.0);
    }
    use super::*;

    fn smoke() -> TrainerConfig {
        crate::smoke_config()
    }

    #[test]
    fn smoke_config_trains_with_finite_losses_and_every_metric() {
        let mut c = smoke();
        c.run.max_iterations = Some(2);
        let mut trainer = Trainer::new(c).unwrap();
        let m1 = trainer.run_iteration().unwrap();
        let m2 = trainer.run_iteration().unwrap();
        for key in [
            "iteration",
            "time/iteration_seconds",
            "time/traversal_seconds",
            "time/advantage_train_seconds",
            "time/strategy_train_seconds",
            "time/training_seconds",
            "traversal/nodes",
            "traversal/nodes_per_second",
            "loss/advantage",
            "loss/strategy",
            "samples/advantage",
            "samples/strategy",
        ] {
            assert!(m2.contains_key(key), "missing {key}");
            assert!(m2[key].is_finite(), "{key} = {}", m2[key]);
        }
        assert_eq!(m1["iteration"], 1.0);
        assert_eq!(m2["iteration"], 2.0);
        assert!(m2["traversal/nodes"] > 0.0);
        assert!(m2["samples/advantage"] >= m1["samples/advantage"]);
    }

    /// On a CPU graphs do not apply: an iteration that asked for them says
    /// 0 graphed steps or forwards; one that did not ask says nothing of
    /// graphs.
    #[test]
    fn graphs_asked_for_on_a_cpu_are_counted_as_none() {
        let mut c = smoke();
        c.optimization.cuda_graphs = true;
        c.traversal.cuda_graphs = true;
        let m = Trainer::new(c).unwrap().run_iteration().unwrap();
        assert_eq!(m["perf/graphed_steps"], 0.0);
        assert_eq!(m["traversal/graphed_forwards"], 0.0);
        let m = Trainer::new(smoke()).unwrap().run_iteration().unwrap();
        assert!(!m.contains_key("perf/graphed_steps"), "{m:?}");
        assert!(!m.contains_key("traversal/graphed_forwards"), "{m:?}");
    }

    /// AMP on a CPU trains in bf16 on lcx's kernel, without a grad scaler
    /// (bf16 has f32's exponent range), and says which kernel ran.
    #[test]
    fn amp_on_cpu_trains_in_bf16_with_scale_one() {
        let mut c = smoke();
        c.run.use_amp = true;
        let mut trainer = Trainer::new(c).unwrap();
        if !crate::kernel::native::tests::kernel_here("amp_on_cpu_trains_in_bf16_with_scale_one") {
            return;
        }
        assert_eq!(trainer.amp_falls_back_to_fp32(), None);
        assert_eq!(trainer.precision(), "bf16");
        let kernel = Bf16Kernel::selected().unwrap();
        assert_eq!(
            trainer.training_kernel(),
            format!("lcx {}", kernel.training_name())
        );
        let before = flat_parameters(&trainer.nets);
        let m = trainer.run_iteration().unwrap();
        assert_ne!(before, flat_parameters(&trainer.nets), "the steps ran");
        assert_eq!(m["amp/grad_scale"], 1.0);
        assert_eq!(m["amp/nonfinite_loss_count"], 0.0);
        assert_eq!(m["amp/overflow_steps"], 0.0);
        assert!(m["loss/advantage"].is_finite());
    }

    /// Where lcx's bf16 step cannot train the network, AMP on a CPU runs
    /// fp32 and says why, once.
    #[test]
    fn amp_on_cpu_without_lcx_kernel_trains_in_fp32_and_says_why() {
        let mut c = smoke();
        c.run.use_amp = true;
        c.optimization.native_training = false;
        let mut trainer = Trainer::new(c).unwrap();
        let why = trainer.amp_falls_back_to_fp32().expect("a reason");
        assert!(why.contains("optimization.native_training"), "{why}");
        assert_eq!(trainer.amp_falls_back_to_fp32(), None, "said once");
        assert_eq!(trainer.precision(), "fp32");
        assert_eq!(trainer.training_kernel(), "libtorch");
        let m = trainer.run_iteration().unwrap();
        assert_eq!(m["amp/grad_scale"], 1.0);
    }

    #[test]
    fn evaluation_device_is_honoured() {
        use lcx_core::config::{DeviceSpec, EvalDevice};
        let mut c = smoke();
        c.evaluation.device = EvalDevice::Device(DeviceSpec::Cpu);
        let trainer = Trainer::new(c.clone()).unwrap();
        assert_eq!(trainer.eval_device(), Device::Cpu);
        // Evaluating elsewhere plays a copy: the same greedy games as the
        // network itself.
        let (_vs, copy) = Mlp::copy_on(trainer.spec, &trainer.nets[2].vs, Device::Cpu).unwrap();
        let x = Tensor::randn([5, trainer.input_dim() as i64], (Kind::Float, Device::Cpu));
        let (a, b) = (
            trainer.nets[2].net.f_forward(&x).unwrap(),
            copy.f_forward(&x).unwrap(),
        );
        assert!(a.equal(&b));
        let spec = EvalSpec {
            games: 4,
            base_seed: 7,
            max_steps: 10_000,
            batch_size: 4,
        };
        let play = |net: &Mlp| {
            eval::evaluate(
                net,
                Device::Cpu,
                &c.rules,
                trainer.encoding,
                "random",
                &spec,
            )
            .unwrap()
        };
        let (own, copied) = (play(&trainer.nets[2].net), play(&copy));
        assert_eq!(
            (own.wins0, own.score0, own.length),
            (copied.wins0, copied.score0, copied.length)
        );
        // A device the host lacks is refused at the start, not ignored.
        if !device::cuda_available() {
            let mut c = smoke();
            c.evaluation.device = EvalDevice::Device(DeviceSpec::Cuda);
            let err = Trainer::new(c).err().expect("evaluation on a missing GPU");
            assert!(err.to_string().contains("CUDA"), "{err}");
        }
    }

    /// Gives `b` `a`'s weights (through a checkpoint) and returns them. Other
    /// tests reseed libtorch's global generator concurrently, so two inits
    /// from one seed need not match.
    fn same_start(a: &Trainer, b: &mut Trainer) -> Vec<f32> {
        let dir = tempfile::tempdir().unwrap();
        a.save_checkpoint(dir.path(), "init").unwrap();
        b.load_checkpoint(&dir.path().join("init.json")).unwrap();
        let start = flat_parameters(&a.nets);
        assert_eq!(flat_parameters(&b.nets), start);
        start
    }

    /// The largest weight difference between `a` and `b`, after checking
    /// that training moved `a` away from `start`.
    fn drift(start: &[f32], a: &Trainer, b: &Trainer) -> f32 {
        let (a, b) = (flat_parameters(&a.nets), flat_parameters(&b.nets));
        assert_ne!(a, start, "training changed nothing");
        a.iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max)
    }

    #[test]
    fn traced_networks_train_like_eager_ones() {
        // Same weights, same samples: TorchScript only changes how forward
        // and backward run, so after two iterations the weights agree up to
        // float reassociation.
        let mut eager = Trainer::new(smoke()).unwrap();
        let mut c = smoke();
        c.network.jit = cfg::JitMode::Trace;
        let mut traced = Trainer::new(c).unwrap();
        assert!(traced.nets.iter().all(|n| n.net.is_traced()));
        assert!(!eager.nets[0].net.is_traced());
        // This also loads a checkpoint into traced networks (in place).
        let start = same_start(&eager, &mut traced);
        for _ in 0..2 {
            eager.run_iteration().unwrap();
            traced.run_iteration().unwrap();
        }
        let worst = drift(&start, &eager, &traced);
        assert!(worst < 1e-4, "traced training drifted by {worst}");
    }

    #[test]
    fn concurrent_networks_train_like_sequential_ones() {
        // Each network sees the same batches (every memory has its own
        // sampler) and takes the same steps on its own thread; only the
        // GEMMs' thread count differs, so the weights agree up to rounding.
        let mut c = smoke();
        c.optimization.concurrent_networks = false;
        let mut one_by_one = Trainer::new(c).unwrap();
        let mut at_once = Trainer::new(smoke()).unwrap();
        assert!(at_once.trains_concurrently() && !one_by_one.trains_concurrently());
        let start = same_start(&one_by_one, &mut at_once);
        for _ in 0..2 {
            let a = one_by_one.run_iteration().unwrap();
            let b = at_once.run_iteration().unwrap();
            for key in ["loss/advantage", "loss/strategy"] {
                assert!(
                    (a[key] - b[key]).abs() <= 1e-4 * (1.0 + a[key].abs()),
                    "{key}"
                );
            }
            assert!(b["time/advantage_train_seconds"] > 0.0);
            assert!(b["time/strategy_train_seconds"] > 0.0);
            assert!(b["time/training_seconds"] >= b["time/strategy_train_seconds"]);
        }
        let worst = drift(&start, &one_by_one, &at_once);
        assert!(worst < 1e-4, "concurrent training drifted by {worst}");
    }

    /// On fewer cores than networks the threads take the networks' steps in
    /// turn (decision 0021); each network still takes its own steps in
    /// order on the single-task kernel, so the weights are those of one
    /// thread per network, to the bit.
    #[test]
    fn rotating_steps_train_like_one_thread_per_network() {
        if !crate::kernel::native::tests::kernel_here(
            "rotating_steps_train_like_one_thread_per_network",
        ) {
            return;
        }
        for cpus in [2, 1] {
            let mut threads = Trainer::new(smoke()).unwrap();
            let mut rotating = Trainer::new(smoke()).unwrap();
            let start = same_start(&threads, &mut rotating);
            // Memories filled alike by one iteration each.
            threads.run_iteration().unwrap();
            rotating.run_iteration().unwrap();
            assert_eq!(
                flat_parameters(&threads.nets),
                flat_parameters(&rotating.nets)
            );
            let t = threads.iteration;
            let (a, ..) = threads.train_networks_on(t, 3).unwrap();
            let (b, ..) = rotating.train_networks_on(t, cpus).unwrap();
            assert!(a[0].is_some() && a[2].is_some(), "{a:?}");
            assert_eq!(a, b, "losses on {cpus} core(s)");
            assert_eq!(drift(&start, &threads, &rotating), 0.0, "{cpus} core(s)");
        }
    }

    /// The GPU's loop (batches gathered from the memory's device copy, or
    /// copied from the host, a chunk of steps at a time; steps decided on
    /// the device), run here on the CPU, trains on the batches the host
    /// loop draws and takes the same steps: the same rows, losses and
    /// weights up to float summation order.
    #[test]
    fn the_device_loop_takes_the_host_loops_steps() {
        let mut c = smoke();
        c.optimization.native_training = false;
        c.optimization.concurrent_networks = false;
        c.optimization.grad_clip = 0.5;
        let mut trainer = Trainer::new(c).unwrap();
        trainer.run_iteration().unwrap();
        let mut job = trainer.net_job(0);
        job.updates = 5;
        // Two steps' batches per chunk: chunks of 2, 2 and 1.
        let rows = job.batch.min(trainer.adv_mem[0].len());
        job.upload_bytes = 2 * rows * (4 * (job.dim + 2 * ACTIONS) + 8);
        assert_eq!(job.steps_per_upload(rows), 2);
        // The masks expanded from their bits on the device are the host's.
        let mut b = trainer.adv_mem[0].clone().sample(rows).unwrap();
        b.masks[0] = 0b11 | 1 << (ACTIONS - 1);
        let (.., m, _) = mirror::upload_batches(&b, 1, rows, Device::Cpu)
            .unwrap()
            .step(0)
            .unwrap();
        for r in 0..rows {
            let row = Vec::<f32>::try_from(m.get(r as i64)).unwrap();
            assert_eq!(row, b.mask_row_f32(r), "row {r}");
        }
        let net = &mut trainer.nets[0];
        let saved = |n: &NetTrainer| -> (Vec<Tensor>, Vec<Tensor>, i64) {
            let moments = n.opt.moments.iter().flat_map(|(m, v)| [m.copy(), v.copy()]);
            (
                n.params().iter().map(|p| p.detach().copy()).collect(),
                moments.collect(),
                n.opt.step,
            )
        };
        let start = saved(net);
        let restore = |net: &mut NetTrainer| {
            let _guard = tch::no_grad_guard();
            for (mut p, s) in net.params().into_iter().zip(&start.0) {
                p.copy_(s);
            }
            let moments = net.opt.moments.iter_mut().flat_map(|(m, v)| [m, v]);
            for (m, s) in moments.zip(&start.1) {
                m.copy_(s);
            }
            net.opt.step = start.2;
        };
        let mut scaler = GradScaler::new(false, Device::Cpu).unwrap();
        let mut unused = DeviceMirror::new(job.dim, Device::Cpu).unwrap();
        let mut mem = trainer.adv_mem[0].clone();
        let host = job.run(net, &mut mem, &mut unused, &mut scaler, 2).unwrap();
        let after_host = saved(net);
        assert_eq!(host.steps, 5);
        for on_device in [false, true] {
            restore(net);
            job.on_device = on_device;
            let mut mem = trainer.adv_mem[0].clone();
            let mut mirror = DeviceMirror::new(job.dim, Device::Cpu).unwrap();
            let dev = job
                .run_resident(net, &mut mem, &mut mirror, &mut scaler, 2)
                .unwrap();
            let after_dev = saved(net);
            assert_eq!((dev.steps, dev.rows), (host.steps, host.rows));
            let (a, b) = (host.loss.unwrap(), dev.loss.unwrap());
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + a.abs()),
                "on_device {on_device}: losses {a} and {b}"
            );
            assert_eq!(after_dev.2, after_host.2);
            let pairs = after_host
                .0
                .iter()
                .chain(&after_host.1)
                .zip(after_dev.0.iter().chain(&after_dev.1));
            for (x, y) in pairs {
                let diff = f64::try_from((x - y).abs().max()).unwrap();
                assert!(diff < 1e-5, "on_device {on_device}: drifted by {diff}");
            }
        }
    }

    #[test]
    fn checkpoint_resume_restores_weights_and_iteration() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Trainer::new(smoke()).unwrap();
        a.run_iteration().unwrap();
        a.save_checkpoint(dir.path(), "latest").unwrap();
        let mut c = smoke();
        c.run.seed = 999; // different init: everything must come from the file
        let mut b = Trainer::new(c).unwrap();
        assert_ne!(flat_parameters(&a.nets), flat_parameters(&b.nets));
        let it = b.load_checkpoint(&dir.path().join("latest.json")).unwrap();
        assert_eq!(it, 1);
        assert_eq!(flat_parameters(&a.nets), flat_parameters(&b.nets));
        assert_eq!(a.nets[0].opt.step, b.nets[0].opt.step);
        let m = b.run_iteration().unwrap();
        assert_eq!(m["iteration"], 2.0);
    }
}
