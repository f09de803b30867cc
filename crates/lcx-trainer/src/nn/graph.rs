//! CUDA graphs: a run of libtorch calls captured once and replayed as one
//! launch (libtorch's `at::cuda::CUDAGraph`, through the C++ shim in
//! `csrc/cuda_graph.cpp`; tch does not expose it). A training step on a GPU
//! is bound by the host's kernel launches (decision 0020); a replay queues
//! the step's forty-odd kernels at the cost of one.
//!
//! What a capture records is the kernels and the device addresses they
//! read and write, not the host code that queued them: every tensor the
//! captured calls read must keep its storage until the graph is dropped
//! (inputs are refilled in place between replays), and what the captured
//! calls allocate lives in the graph's own memory pool, overwritten by each
//! replay. Nothing captured may wait for the device (no `.item()`, no copy
//! to the host): the capture fails if it does.

use std::ffi::{c_char, c_int, CStr};
use std::ptr::NonNull;

use tch::Device;

use crate::TrainerError;

/// The shim's graph, opaque here.
#[repr(C)]
struct RawGraph {
    _private: [u8; 0],
}

extern "C" {
    fn lcx_graph_built_with_cuda() -> c_int;
    fn lcx_graph_new(device: c_int, out: *mut *mut RawGraph) -> *mut c_char;
    fn lcx_graph_enter(g: *mut RawGraph) -> *mut c_char;
    fn lcx_graph_leave(g: *mut RawGraph) -> *mut c_char;
    fn lcx_graph_begin(g: *mut RawGraph) -> *mut c_char;
    fn lcx_graph_end(g: *mut RawGraph) -> *mut c_char;
    fn lcx_graph_replay(g: *mut RawGraph) -> *mut c_char;
    fn lcx_graph_free(g: *mut RawGraph);
    fn lcx_graph_release_memory() -> *mut c_char;
    fn lcx_graph_free_message(text: *mut c_char);
}

/// Gives the memory libtorch's allocator holds free back to the device,
/// the private pools of dropped graphs included (the allocator frees those
/// by itself only after an allocation fails, and never while a capture is
/// under way). Call it where no thread is capturing; it does nothing in a
/// shim built without CUDA.
pub fn release_memory() -> Result<(), TrainerError> {
    // SAFETY: no arguments; the shim returns null or its message.
    checked("releasing cached device memory", unsafe {
        lcx_graph_release_memory()
    })
}

/// Says on stderr, once per process and config key, that the graphs `key`
/// asks for cannot start and that the work runs eagerly, why, and which
/// metric counts what graphs took. The trainer makes its graphs anew each
/// iteration; the reason does not change between them.
pub fn warn_eager_once(key: &'static str, counted_by: &str, e: &TrainerError) {
    static SAID: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !said.contains(&key) {
        said.push(key);
        eprintln!("lcx: {key} is set, but lcx runs without graphs: {e} ({counted_by} counts what graphs took)");
    }
}

/// Leaves the side stream when dropped unless disarmed: a panic inside
/// [`CudaGraph::on_side`] must not leave the thread on it.
struct Leave {
    raw: *mut RawGraph,
    armed: bool,
}

impl Drop for Leave {
    fn drop(&mut self) {
        if self.armed {
            // SAFETY: a live graph whose enter succeeded; the message, if
            // any, is freed (a panic is already under way).
            unsafe {
                let message = lcx_graph_leave(self.raw);
                if !message.is_null() {
                    lcx_graph_free_message(message);
                }
            }
        }
    }
}

/// Whether the shim was compiled with CUDA (the libtorch lcx was built
/// against has libtorch_cuda and its CUDA headers were found); without it
/// every graph fails to start and the trainer steps eagerly.
pub fn built_with_cuda() -> bool {
    // SAFETY: a function of no arguments that returns a constant.
    unsafe { lcx_graph_built_with_cuda() != 0 }
}

/// What the shim returned: `Ok` for a null pointer, else its message (which
/// this frees).
fn checked(what: &str, message: *mut c_char) -> Result<(), TrainerError> {
    if message.is_null() {
        return Ok(());
    }
    // SAFETY: the shim returns either null or a NUL-terminated string it
    // allocated with malloc, which lcx_graph_free_message releases.
    let text = unsafe {
        let text = CStr::from_ptr(message).to_string_lossy().into_owned();
        lcx_graph_free_message(message);
        text
    };
    Err(TrainerError::Graph(format!("{what}: {text}")))
}

/// One CUDA graph on one device, with the side stream it is captured on.
/// Used by the thread that made it (it is not `Send`: libtorch's current
/// stream is per thread).
#[derive(Debug)]
pub struct CudaGraph {
    raw: NonNull<RawGraph>,
    captured: bool,
}

impl CudaGraph {
    /// A graph for `device`, which must be a CUDA device.
    pub fn new(device: Device) -> Result<Self, TrainerError> {
        let Device::Cuda(index) = device else {
            return Err(TrainerError::Graph(format!(
                "CUDA graphs need a CUDA device, not {device:?}"
            )));
        };
        let index = c_int::try_from(index)
            .map_err(|_| TrainerError::Graph(format!("CUDA device {index} out of range")))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out pointer; the shim sets it only on success.
        checked("starting a CUDA graph", unsafe {
            lcx_graph_new(index, &mut raw)
        })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| TrainerError::Graph("the shim returned no graph".into()))?;
        Ok(Self {
            raw,
            captured: false,
        })
    }

    /// Whether [`CudaGraph::capture`] has recorded the graph.
    pub fn captured(&self) -> bool {
        self.captured
    }

    /// Runs `f` with the graph's side stream as the current stream, after
    /// what the caller's stream had queued and before what it queues next:
    /// libtorch captures only off the default stream, and wants the steps
    /// before a capture (its warm-up) on the capturing stream.
    pub fn on_side<T, E: From<TrainerError>>(
        &mut self,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        // SAFETY: `raw` is a live graph of this thread.
        checked("moving to the capture stream", unsafe {
            lcx_graph_enter(self.raw.as_ptr())
        })?;
        let mut guard = Leave {
            raw: self.raw.as_ptr(),
            armed: true,
        };
        let out = f();
        guard.armed = false;
        // SAFETY: as above; leave pairs with the enter that succeeded.
        let left = checked("leaving the capture stream", unsafe {
            lcx_graph_leave(self.raw.as_ptr())
        });
        let out = out?;
        left?;
        Ok(out)
    }

    /// Records the kernels that `body` queues (on the side stream) as the
    /// graph, without running them. The capture is ended even when `body`
    /// fails, and that failure is returned.
    pub fn capture<E: From<TrainerError>>(
        &mut self,
        body: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), E> {
        if self.captured {
            return Err(TrainerError::Graph("the graph is already captured".into()).into());
        }
        let raw = self.raw.as_ptr();
        self.on_side(|| {
            // SAFETY: a live graph, on its side stream (on_side).
            checked("beginning the capture", unsafe { lcx_graph_begin(raw) })?;
            let out = body();
            // SAFETY: pairs with the begin above.
            let ended = checked("ending the capture", unsafe { lcx_graph_end(raw) });
            out?;
            ended.map_err(E::from)
        })?;
        self.captured = true;
        Ok(())
    }

    /// Queues the recorded kernels once on the current stream.
    pub fn replay(&mut self) -> Result<(), TrainerError> {
        // SAFETY: a live graph; the shim refuses one not captured.
        checked("replaying the graph", unsafe {
            lcx_graph_replay(self.raw.as_ptr())
        })
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: `raw` came from lcx_graph_new and is freed once.
        unsafe { lcx_graph_free(self.raw.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This host builds the shim with CUDA when its libtorch has it, and
    /// has no GPU: a graph then fails to start with libtorch's reason, as
    /// an error, never a crash; a CPU device is refused before the shim.
    #[test]
    fn a_graph_without_a_gpu_is_an_error_that_says_why() {
        let cpu = CudaGraph::new(Device::Cpu).unwrap_err().to_string();
        assert!(cpu.contains("need a CUDA device"), "{cpu}");
        if tch::Cuda::is_available() {
            return;
        }
        let err = CudaGraph::new(Device::Cuda(0)).unwrap_err().to_string();
        assert!(
            err.starts_with("CUDA graph: starting a CUDA graph: "),
            "{err}"
        );
        if built_with_cuda() {
            assert!(!err.contains("not built in"), "{err}");
        } else {
            assert!(err.contains("not built in"), "{err}");
        }
    }

    /// Releasing the allocator's memory where CUDA never started is
    /// harmless: nothing to give back, no error.
    #[test]
    fn releasing_memory_without_a_gpu_does_nothing() {
        release_memory().unwrap();
    }

    /// The shim's fallback (no CUDA) compiles with only the C++ standard
    /// library: the build a CPU-only libtorch gets.
    #[test]
    fn the_shim_compiles_without_cuda() {
        let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/csrc/cuda_graph.cpp");
        // The build compiled the shim, so the compiler is there.
        let out = std::process::Command::new(&compiler)
            .args(["-std=c++17", "-fsyntax-only", "-Wall", "-Werror", source])
            .output()
            .expect("the C++ compiler that built the shim");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The shim calls no CUDA runtime function itself (ARCHITECTURE.md's
    /// invariant): its archive leaves no `cuda…` symbol for the linker to
    /// find in a libcudart, whose version the host that runs lcx decides.
    #[test]
    fn the_shim_calls_the_cuda_runtime_only_through_libtorch() {
        let archive = concat!(env!("OUT_DIR"), "/liblcx_cuda_graph.a");
        let out = std::process::Command::new("nm")
            .args(["-u", archive])
            .output()
            .expect("nm (binutils), beside the linker");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let runtime: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("U "))
            .filter(|s| s.starts_with("cuda") && s[4..].starts_with(char::is_uppercase))
            .collect();
        assert!(runtime.is_empty(), "the shim calls {runtime:?}");
        assert_eq!(text.contains("CUDAGraph"), built_with_cuda(), "{text}");
    }

    #[test]
    fn the_build_says_whether_the_shim_has_cuda() {
        assert_eq!(env!("LCX_GRAPH_SHIM") == "cuda", built_with_cuda());
    }
}
