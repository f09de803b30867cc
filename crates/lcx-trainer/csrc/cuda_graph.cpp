// lcx's door to libtorch's CUDA graphs (at::cuda::CUDAGraph), which tch does
// not expose. Rust drives it through `src/nn/graph.rs`; every function here
// catches what libtorch throws and hands it back as a malloc'd message (NULL
// on success), because an exception must never unwind into Rust.
//
// Built by build.rs with LCX_WITH_CUDA when the libtorch it links has CUDA
// and the CUDA runtime headers are found; without it every function answers
// that graphs are not built in, and the trainer steps eagerly.
//
// The shim calls libtorch only (c10, c10_cuda, torch_cuda), never the CUDA
// runtime itself: the binaries are built on one host and run on another
// host's PyTorch, whose CUDA runtime may be another major version. Hence
// c10's device-generic guards and events (which reach CUDA through the
// implementation libtorch registers), not c10/cuda/CUDAGuard.h, whose inline
// code calls the CUDA runtime directly.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

namespace {
char* message(const std::string& text) {
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (out != nullptr) {
        std::memcpy(out, text.c_str(), text.size() + 1);
    }
    return out;
}
}  // namespace

#ifdef LCX_WITH_CUDA

#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <optional>

struct LcxGraph {
    c10::DeviceIndex device;
    // The stream the caller queues on, and the side stream that warm-up
    // and capture run on (capture is refused on the default stream).
    c10::cuda::CUDAStream origin;
    c10::cuda::CUDAStream side;
    std::optional<c10::StreamGuard> on_side;
    at::cuda::CUDAGraph graph;
    bool captured = false;

    explicit LcxGraph(c10::DeviceIndex d)  // on a DeviceGuard of `d`
        : device(d),
          origin(c10::cuda::getCurrentCUDAStream(d)),
          side(c10::cuda::getStreamFromPool(false, d)) {}
};

// `to` waits for what is queued on `from` so far (a device-side wait).
static void after(const c10::Stream& from, const c10::Stream& to) {
    c10::Event done(c10::DeviceType::CUDA);
    done.record(from);
    done.block(to);
}

template <typename F>
static char* guarded(F&& body) {
    try {
        body();
        return nullptr;
    } catch (const c10::Error& e) {
        return message(e.what_without_backtrace());
    } catch (const std::exception& e) {
        return message(e.what());
    } catch (...) {
        return message("an unknown C++ exception");
    }
}

extern "C" {

int lcx_graph_built_with_cuda() { return 1; }

char* lcx_graph_new(int device, LcxGraph** out) {
    *out = nullptr;
    return guarded([&] {
        c10::DeviceGuard guard(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
        *out = new LcxGraph(static_cast<c10::DeviceIndex>(device));
    });
}

// From here until lcx_graph_leave, the side stream is the current one; it
// starts after everything queued on the caller's stream.
char* lcx_graph_enter(LcxGraph* g) {
    return guarded([&] {
        if (g->on_side) {
            throw std::runtime_error("lcx_graph_enter: already on the side stream");
        }
        g->origin = c10::cuda::getCurrentCUDAStream(g->device);
        after(g->origin, g->side);
        g->on_side.emplace(g->side.unwrap());
    });
}

char* lcx_graph_leave(LcxGraph* g) {
    return guarded([&] {
        if (!g->on_side) {
            throw std::runtime_error("lcx_graph_leave: not on the side stream");
        }
        g->on_side.reset();
        after(g->side, g->origin);
    });
}

// Capture in thread-local mode: the three networks may capture on three
// threads at once, and another thread's allocation must not end a capture.
char* lcx_graph_begin(LcxGraph* g) {
    return guarded([&] {
        if (!g->on_side) {
            throw std::runtime_error("lcx_graph_begin: capture runs on the side stream (enter first)");
        }
        g->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    });
}

char* lcx_graph_end(LcxGraph* g) {
    return guarded([&] {
        g->graph.capture_end();
        g->captured = true;
    });
}

char* lcx_graph_replay(LcxGraph* g) {
    return guarded([&] {
        if (!g->captured) {
            throw std::runtime_error("lcx_graph_replay: nothing was captured");
        }
        g->graph.replay();
    });
}

// CUDAGraph's destructor warns rather than throws (destructors are
// noexcept): nothing to catch.
void lcx_graph_free(LcxGraph* g) { delete g; }

// Gives the caching allocator's free memory back to the device, the pools
// of dropped graphs included: a dropped graph's private pool is only
// marked freeable, and the allocator frees such pools by itself only when
// an allocation fails outside any capture. Call it where no thread is
// capturing.
char* lcx_graph_release_memory() {
    return guarded([] { c10::cuda::CUDACachingAllocator::emptyCache(); });
}

}  // extern "C"

#else  // LCX_WITH_CUDA

struct LcxGraph;

static const char* const NOT_BUILT =
    "CUDA graphs are not built in: the libtorch lcx was built against has no CUDA "
    "(libtorch_cuda and the CUDA runtime headers)";

extern "C" {
int lcx_graph_built_with_cuda() { return 0; }
char* lcx_graph_new(int, LcxGraph** out) {
    *out = nullptr;
    return message(NOT_BUILT);
}
char* lcx_graph_enter(LcxGraph*) { return message(NOT_BUILT); }
char* lcx_graph_leave(LcxGraph*) { return message(NOT_BUILT); }
char* lcx_graph_begin(LcxGraph*) { return message(NOT_BUILT); }
char* lcx_graph_end(LcxGraph*) { return message(NOT_BUILT); }
char* lcx_graph_replay(LcxGraph*) { return message(NOT_BUILT); }
void lcx_graph_free(LcxGraph*) {}
char* lcx_graph_release_memory() { return nullptr; }
}  // extern "C"

#endif  // LCX_WITH_CUDA

extern "C" void lcx_graph_free_message(char* text) { std::free(text); }
