//! Traversal forwards on a GPU replayed from CUDA graphs
//! (`traversal.cuda_graphs`, decision 0026). A forward of a few rows is a
//! copy up, seven kernels (three hidden layers) and a copy back, each
//! costing the host a launch; a graph of the network for the batch's size
//! replaces the seven with one. The interleaved scheduler's batches change
//! size from forward to forward, so there is one graph per network and
//! bucket: rows rounded up to a power of two, the rows past the batch's
//! left as they are (an MLP computes each row by itself, so they touch
//! nothing but their own outputs, which are not read). Graphs are made on a
//! bucket's first forward of an iteration and dropped with the policy: the
//! weights they read are fixed while the traversals run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use tch::{Device, Kind, Tensor};

use crate::nn::graph::CudaGraph;
use crate::nn::network::Mlp;
use crate::TrainerError;
use lcx_core::cfr::regret::ACTIONS;

/// The largest bucket: larger forwards run eagerly (the interleaved
/// scheduler's batches are at most `interleave_max_batch`, 128 by default).
pub const LARGEST_BUCKET: usize = 1024;

/// Eager forwards of a bucket on the capture stream before its capture
/// (cuBLAS sets up lazily, and not inside a capture).
const WARM_UP: usize = 2;

/// One network's graph for one bucket: its fixed input and output.
struct Captured {
    /// [bucket, dim] on the device: the batch is copied into its first rows.
    x: Tensor,
    /// [bucket, ACTIONS] f32, written by each replay.
    y: Tensor,
    /// `None` on a CPU, where the same buffers run an eager forward.
    graph: Option<CudaGraph>,
}

// SAFETY: a captured graph is replayed onto whichever stream is current on
// the calling thread, and libtorch's graph object keeps no thread's state
// once its capture has ended (`CudaGraph` is not `Send` only because a
// capture in progress is tied to its thread, and a `Captured` is built
// whole, capture ended, inside one call). Every use is under the mutex of
// `ForwardGraphs`.
unsafe impl Send for Captured {}

/// The graphs of one traversal phase, per (network, bucket).
pub struct ForwardGraphs {
    device: Device,
    dim: usize,
    cache: Mutex<HashMap<(usize, usize), Captured>>,
    /// Forwards replayed from a graph.
    replayed: AtomicU64,
    /// Set when a graph could not be started: every forward then runs
    /// eagerly.
    off: AtomicBool,
}

impl ForwardGraphs {
    /// Graphs for forwards of `dim` inputs on `device` (on a CPU the same
    /// buffers and buckets, forwarded eagerly: what the tests check).
    pub fn new(device: Device, dim: usize) -> Self {
        Self {
            device,
            dim,
            cache: Mutex::new(HashMap::new()),
            replayed: AtomicU64::new(0),
            off: AtomicBool::new(false),
        }
    }

    /// Forwards replayed from a graph so far.
    pub fn replayed(&self) -> u64 {
        self.replayed.load(Ordering::Relaxed)
    }

    /// Network `index`'s forward of `rows` rows of `states` into `out`
    /// through its bucket's graph; `false` (nothing done) when the forward
    /// is for the eager path: more rows than [`LARGEST_BUCKET`], a traced
    /// network, or graphs that could not start.
    pub fn forward(
        &self,
        net: &Mlp,
        index: usize,
        states: &[f32],
        rows: usize,
        out: &mut [f32],
    ) -> Result<bool, TrainerError> {
        if rows == 0 || rows > LARGEST_BUCKET || net.is_traced() || self.off.load(Ordering::Relaxed)
        {
            return Ok(false);
        }
        let bucket = rows.next_power_of_two();
        let _guard = tch::no_grad_guard();
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| TrainerError::Graph("a forward graph's lock was poisoned".into()))?;
        let c = match cache.entry((index, bucket)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => match self.capture(net, bucket) {
                Ok(c) => v.insert(c),
                Err(Start(e)) => {
                    self.off.store(true, Ordering::Relaxed);
                    crate::nn::graph::warn_eager_once(
                        "traversal.cuda_graphs",
                        "traversal/graphed_forwards",
                        &e,
                    );
                    return Ok(false);
                }
                Err(Failed(TrainerError::Graph(e))) => {
                    return Err(TrainerError::Graph(format!(
                        "{e} (traversal.cuda_graphs = false runs the forwards eagerly)"
                    )))
                }
                Err(Failed(e)) => return Err(e),
            },
        };
        let (r, d) = (rows as i64, self.dim as i64);
        let host = Tensor::f_from_slice(&states[..rows * self.dim])?.f_view([r, d])?;
        c.x.f_narrow(0, 0, r)?.f_copy_(&host)?;
        match &mut c.graph {
            Some(graph) => {
                graph.replay()?;
                self.replayed.fetch_add(1, Ordering::Relaxed);
            }
            None => c.y = forward_f32(net, &c.x)?,
        }
        let y =
            c.y.f_narrow(0, 0, r)?
                .f_to_device(Device::Cpu)?
                .f_contiguous()?;
        y.f_copy_data(&mut out[..rows * ACTIONS], rows * ACTIONS)?;
        Ok(true)
    }

    /// A bucket's buffers and (on a GPU) its graph, captured after the
    /// warm-up on the graph's side stream.
    fn capture(&self, net: &Mlp, bucket: usize) -> Result<Captured, CaptureError> {
        let x = Tensor::f_zeros([bucket as i64, self.dim as i64], (Kind::Float, self.device))
            .map_err(|e| Failed(e.into()))?;
        if self.device == Device::Cpu {
            let y = forward_f32(net, &x).map_err(Failed)?;
            return Ok(Captured { x, y, graph: None });
        }
        let mut graph = CudaGraph::new(self.device).map_err(Start)?;
        graph
            .on_side(|| {
                for _ in 0..WARM_UP {
                    let _ = forward_f32(net, &x)?;
                }
                Ok(())
            })
            .map_err(Failed)?;
        let mut y = None;
        graph
            .capture(|| {
                y = Some(forward_f32(net, &x)?);
                Ok(())
            })
            .map_err(Failed)?;
        let y =
            y.ok_or_else(|| Failed(TrainerError::Graph("the capture made no output".into())))?;
        Ok(Captured {
            x,
            y,
            graph: Some(graph),
        })
    }
}

/// Why a bucket has no graph: none could be started (graphs not built in:
/// the forwards then run eagerly), or its capture failed (an error).
enum CaptureError {
    Start(TrainerError),
    Failed(TrainerError),
}
use CaptureError::{Failed, Start};

fn forward_f32(net: &Mlp, x: &Tensor) -> Result<Tensor, TrainerError> {
    Ok(net.f_forward(x)?.f_to_kind(Kind::Float)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::network::{Activation, MlpSpec};
    use tch::nn::VarStore;

    /// The bucketed path (run eagerly here, no GPU) gives each batch size
    /// the outputs of a forward of exactly its rows, whatever the rows of
    /// a larger batch left in the bucket before it, and sends forwards
    /// larger than the largest bucket to the eager path.
    #[test]
    fn bucketed_forwards_give_each_batch_its_own_outputs() {
        tch::manual_seed(4);
        let vs = VarStore::new(Device::Cpu);
        let spec = MlpSpec {
            input_dim: 6,
            hidden_size: 16,
            num_layers: 2,
            outputs: ACTIONS,
            activation: Activation::Relu,
        };
        let net = Mlp::new(&vs.root(), spec).unwrap();
        let graphs = ForwardGraphs::new(Device::Cpu, 6);
        let states: Vec<f32> = (0..6 * 9)
            .map(|i| ((i * 37) % 11) as f32 / 5.0 - 1.0)
            .collect();
        for rows in [8, 5, 1, 9, 3, 8] {
            let mut out = vec![f32::NAN; rows * ACTIONS];
            assert!(graphs.forward(&net, 1, &states, rows, &mut out).unwrap());
            let x = Tensor::from_slice(&states[..rows * 6]).view([rows as i64, 6]);
            let want = Vec::<f32>::try_from(net.f_forward(&x).unwrap().view([-1])).unwrap();
            for (i, (a, b)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "{rows} rows, [{i}]: {a} vs {b}"
                );
            }
        }
        let buckets: Vec<usize> = graphs.cache.lock().unwrap().keys().map(|k| k.1).collect();
        assert_eq!(buckets.len(), 4, "{buckets:?}");
        assert_eq!(graphs.replayed(), 0);
        let big = LARGEST_BUCKET + 1;
        let mut out = vec![0.0; big * ACTIONS];
        let states = vec![0.0; big * 6];
        assert!(!graphs.forward(&net, 0, &states, big, &mut out).unwrap());
    }
}
