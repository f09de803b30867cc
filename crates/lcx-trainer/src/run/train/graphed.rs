//! One network's steps on a GPU with the step captured once as a CUDA graph
//! and replayed (`optimization.cuda_graphs`, decision 0026): the eager
//! loop's batches and steps ([`NetJob::run_resident`]), written so that a
//! replay can take them. A replay runs the captured kernels on the captured
//! memory, so everything a step reads or writes stays where it is for the
//! whole run: the chunk of batches is copied into one set of input buffers,
//! the step picks its batch by a position it advances itself on the device,
//! and its loss and overflow flag go into buffers at a count kept on the
//! device ([`DeviceTally::in_place`]). The graph is made anew each run (an
//! iteration's steps of one network): the batch shape, the iteration that
//! weights the loss and the bias corrections are then fixed within it.

use std::time::Instant;

use tch::Tensor;

use super::{Draws, NetJob, NetResult, TrainError, Trainer};
use crate::nn::graph::CudaGraph;
use crate::nn::optim::{self, DeviceTally, GradScaler, NetTrainer};
use crate::run::mirror::{Batches, DeviceMirror};
use crate::TrainerError;
use lcx_core::cfr::memory::Reservoir;
#[cfg(test)]
use lcx_core::cfr::regret::ACTIONS;

/// Eager steps on the capture stream before the capture: libtorch sets up
/// lazily (cuBLAS handles and workspaces, autograd's per-device state), and
/// none of that may happen inside a capture. PyTorch's own recipe warms up
/// with three. They are real steps, taken in order.
pub const WARM_UP: usize = 3;

/// How the steps after the warm-up run.
pub(super) enum Replay {
    /// Captured on the first step after the warm-up, replayed from then on.
    Graph(CudaGraph),
    /// The same code run eagerly every step: where there is no GPU (the
    /// tests check that this loop takes the eager loop's steps).
    Eager,
}

/// The captured step's inputs: one chunk of batches ([steps, rows, …], as
/// [`Batches`]) and the step's position in it (i64 [1] on the device).
struct Inputs {
    chunk: [Tensor; 4],
    pos: Tensor,
}

impl Inputs {
    /// Buffers holding a copy of the first chunk, at position 0.
    fn of(b: &Batches) -> Result<Self, TrainerError> {
        let chunk = [
            b.x.f_detach_copy()?,
            b.y.f_detach_copy()?,
            b.m.f_detach_copy()?,
            b.it.f_detach_copy()?,
        ];
        let pos = Tensor::f_zeros([1], (tch::Kind::Int64, b.x.device()))?;
        Ok(Self { chunk, pos })
    }

    /// Copies the next chunk's `steps` batches in and rewinds the position.
    fn fill(&mut self, b: &Batches, steps: usize) -> Result<(), TrainerError> {
        for (buffer, src) in self.chunk.iter_mut().zip([&b.x, &b.y, &b.m, &b.it]) {
            buffer.f_narrow(0, 0, steps as i64)?.f_copy_(src)?;
        }
        let _ = self.pos.f_zero_()?;
        Ok(())
    }

    /// The batch (x, y, m, it) at the position, selected on the device.
    fn current(&self) -> Result<(Tensor, Tensor, Tensor, Tensor), TrainerError> {
        let at = |t: &Tensor| t.f_index_select(0, &self.pos)?.f_squeeze_dim(0);
        let [x, y, m, it] = &self.chunk;
        Ok((at(x)?, at(y)?, at(m)?, at(it)?))
    }

    fn advance(&mut self) -> Result<(), TrainerError> {
        let _ = self.pos.f_add_scalar_(1)?;
        Ok(())
    }
}

/// [`NetJob::run_resident`] with each step after the warm-up replayed from
/// `replay`'s graph.
pub(super) fn run(
    job: &NetJob,
    trainer: &mut NetTrainer,
    mem: &mut Reservoir,
    mirror: &mut DeviceMirror,
    scaler: &mut GradScaler,
    t: u64,
    mut replay: Replay,
) -> Result<NetResult, TrainError> {
    let start = Instant::now();
    let updates = job.updates as usize;
    let mut tally = DeviceTally::in_place(trainer, updates, job.device)?;
    // The flat buffers are laid out on a network's first device step; made
    // inside a capture, they would live in the graph's memory pool.
    trainer.flat()?;
    let rows = job.batch.min(mem.len());
    let per_upload = job.steps_per_upload(rows);
    if job.on_device {
        mirror.sync(mem)?;
    }
    let mut draws = Draws::default();
    let mut inputs: Option<Inputs> = None;
    let (mut done, mut graphed) = (0, 0);
    while done < updates {
        let steps = (updates - done).min(per_upload);
        let batches = job.chunk(mem, mirror, steps, rows, &mut draws)?;
        let inputs = match &mut inputs {
            Some(inputs) => {
                inputs.fill(&batches, steps)?;
                inputs
            }
            None => inputs.insert(Inputs::of(&batches)?),
        };
        for _ in 0..steps {
            let mut body = || -> Result<(), TrainError> {
                let loss = job.loss(trainer, scaler, inputs.current()?, t)?;
                optim::step_on_device(trainer, scaler, &loss, job.grad_clip, &mut tally)?;
                Ok(inputs.advance()?)
            };
            match &mut replay {
                Replay::Graph(graph) if done >= WARM_UP => {
                    if !graph.captured() {
                        graph.capture(body).map_err(|e| {
                            TrainError::Unsupported(format!(
                                "{e} (optimization.cuda_graphs = false trains eagerly)"
                            ))
                        })?;
                    }
                    graph.replay()?;
                    graphed += 1;
                }
                Replay::Graph(graph) => graph.on_side(body)?,
                Replay::Eager => body()?,
            }
            done += 1;
        }
    }
    let queued = start.elapsed().as_secs_f64();
    let v = tally.read(trainer)?;
    Ok(NetResult::of_device(
        v,
        (rows * updates) as u64,
        queued,
        graphed,
    ))
}

/// A network's parameters, then its AdamW moments, copied, and its step
/// count.
type Saved = (Vec<Tensor>, i64);

fn state(n: &NetTrainer) -> Result<Saved, TrainerError> {
    let mut out = n
        .params()
        .iter()
        .map(|p| p.f_detach_copy())
        .collect::<Result<Vec<_>, _>>()?;
    for (m, v) in &n.opt.moments {
        out.extend([m.f_detach_copy()?, v.f_detach_copy()?]);
    }
    Ok((out, n.opt.step))
}

fn restore(n: &mut NetTrainer, (saved, step): &Saved) -> Result<(), TrainerError> {
    let _guard = tch::no_grad_guard();
    let mut targets: Vec<Tensor> = n.params();
    let moments = n.opt.moments.iter().flat_map(|(m, v)| [m, v]);
    targets.extend(moments.map(Tensor::shallow_clone));
    for (mut t, s) in targets.into_iter().zip(saved) {
        t.f_copy_(s)?;
    }
    n.opt.step = *step;
    Ok(())
}

/// What [`Trainer::graph_agreement`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Agreement {
    pub steps: u64,
    /// Steps the graph loop replayed from a CUDA graph (0 without a GPU:
    /// the loop then ran eagerly).
    pub graphed: u64,
    /// The largest difference of a parameter between the two runs.
    pub max_abs_diff: f64,
    /// The mean losses of the eager and the graph run.
    pub loss_eager: Option<f64>,
    pub loss_graph: Option<f64>,
}

impl Trainer {
    /// `steps` steps of network `net` twice from its current weights and
    /// memory, with the same batches: on the device's eager loop, then on
    /// the graph loop (captured and replayed on a GPU, eager elsewhere);
    /// how far the weights ended apart. The network is left as the graph
    /// run left it. The GPU check's proof that a replay takes the eager
    /// step.
    pub fn graph_agreement(&mut self, net: usize, steps: u32) -> Result<Agreement, TrainError> {
        let mut job = self.net_job(net);
        job.updates = steps;
        job.native = false;
        job.graphs = false;
        let device = self.device;
        let amp = self.scaler.enabled();
        let mem = if net < 2 {
            &self.adv_mem[net]
        } else {
            &self.strat_mem
        };
        let trainer = &mut self.nets[net];
        let start = state(trainer)?;
        let mut runs = Vec::with_capacity(2);
        for graph_loop in [false, true] {
            restore(trainer, &start)?;
            let mut mem = mem.clone();
            let mut mirror = DeviceMirror::new(job.dim, device)?;
            let mut scaler = GradScaler::new(amp, device)?;
            let r = if !graph_loop {
                job.run_resident(
                    trainer,
                    &mut mem,
                    &mut mirror,
                    &mut scaler,
                    self.iteration.max(1),
                )?
            } else {
                let replay = if device == tch::Device::Cpu {
                    Replay::Eager
                } else {
                    Replay::Graph(CudaGraph::new(device)?)
                };
                run(
                    &job,
                    trainer,
                    &mut mem,
                    &mut mirror,
                    &mut scaler,
                    self.iteration.max(1),
                    replay,
                )?
            };
            runs.push((r, state(trainer)?));
        }
        let mut max_abs_diff = 0.0f64;
        let params = trainer.params().len();
        for (a, b) in runs[0].1 .0.iter().zip(&runs[1].1 .0).take(params) {
            let diff = a.f_sub(b).and_then(|d| d.f_abs()).and_then(|d| d.f_max());
            let d = diff.and_then(f64::try_from).map_err(TrainerError::from)?;
            max_abs_diff = max_abs_diff.max(d);
        }
        Ok(Agreement {
            steps: runs[1].0.steps,
            graphed: runs[1].0.graphed,
            max_abs_diff,
            loss_eager: runs[0].0.loss,
            loss_graph: runs[1].0.loss,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// The loop written for a graph, run eagerly here (no GPU), takes the
    /// eager device loop's steps: the same batches from the input buffers
    /// over three chunks (the last one short), the same losses, counts and
    /// weights, with and without AMP's scaler and a binding clip, and the
    /// losses and overflow flags read back from the device's buffers.
    #[test]
    fn the_loop_written_for_a_graph_takes_the_eager_loops_steps() {
        let mut c = crate::smoke_config();
        c.optimization.native_training = false;
        c.optimization.concurrent_networks = false;
        c.optimization.grad_clip = 0.05;
        let mut trainer = Trainer::new(c).unwrap();
        trainer.run_iteration().unwrap();
        trainer.run_iteration().unwrap();
        for amp in [false, true] {
            let mut job = trainer.net_job(2);
            job.updates = 7;
            let rows = job.batch.min(trainer.strat_mem.len());
            job.upload_bytes = 3 * rows * (4 * (job.dim + 2 * ACTIONS) + 8);
            assert_eq!(job.steps_per_upload(rows), 3);
            let net = &mut trainer.nets[2];
            let start = state(net).unwrap();
            let mut outcomes = Vec::new();
            let mut ends = Vec::new();
            for (graph_loop, on_device) in [(false, true), (true, true), (true, false)] {
                restore(net, &start).unwrap();
                job.on_device = on_device;
                let mut mem = trainer.strat_mem.clone();
                let mut mirror = DeviceMirror::new(job.dim, Device::Cpu).unwrap();
                let mut scaler = GradScaler::new(amp, Device::Cpu).unwrap();
                let r = if graph_loop {
                    run(
                        &job,
                        net,
                        &mut mem,
                        &mut mirror,
                        &mut scaler,
                        3,
                        Replay::Eager,
                    )
                } else {
                    job.run_resident(net, &mut mem, &mut mirror, &mut scaler, 3)
                }
                .unwrap();
                assert_eq!((r.steps, r.graphed), (7, 0));
                outcomes.push((r.loss, r.last, r.nonfinite, r.overflow, r.rows));
                ends.push((state(net).unwrap(), scaler.scale_value().unwrap()));
            }
            assert!(outcomes[0].0.is_some_and(f64::is_finite), "{outcomes:?}");
            for (i, o) in outcomes.iter().enumerate().skip(1) {
                assert_eq!(*o, outcomes[0], "amp {amp}, loop {i}");
                assert_eq!(ends[i].0 .1, ends[0].0 .1, "amp {amp}: step counts");
                assert_eq!(ends[i].1, ends[0].1, "amp {amp}: loss scale");
                for (x, y) in ends[i].0 .0.iter().zip(&ends[0].0 .0) {
                    assert!(x.equal(y), "amp {amp}, loop {i}: the weights differ");
                }
            }
        }
    }
}
