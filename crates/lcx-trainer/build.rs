//! The libtorch version the trainer reports (`LCX_TORCH_VERSION`), the
//! link flags its unit tests need to load libtorch, and the CUDA graph shim
//! (`csrc/cuda_graph.cpp`), compiled against libtorch's headers.
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-env-changed=LCX_CUDA_INCLUDE");
    println!("cargo:rerun-if-changed=csrc/cuda_graph.cpp");
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        println!("cargo:rustc-env=LCX_TORCH_VERSION=unknown");
        shim(None);
        return;
    };
    let lib = Path::new(&lib);
    shim(Some(lib));
    // This crate's own unit tests load libtorch: the same rpath and CUDA
    // registration as lcx-torch (the lcx package's build.rs says why).
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    if lib.join("libtorch_cuda.so").exists() {
        for flag in [
            "-Wl,--no-as-needed".to_string(),
            format!("-L{}", lib.display()),
            "-ltorch_cuda".to_string(),
            "-Wl,--as-needed".to_string(),
        ] {
            println!("cargo:rustc-link-arg={flag}");
        }
    }
    println!("cargo:rustc-env=LCX_TORCH_VERSION={}", torch_version(lib));
}

/// Compiles the CUDA graph shim: with CUDA (`LCX_WITH_CUDA`) when this
/// libtorch has libtorch_cuda and the CUDA runtime headers are found,
/// otherwise its fallback, which says graphs are not built in. The
/// shim's own C++ needs no CUDA runtime library, only libtorch's.
fn shim(lib: Option<&Path>) {
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .file("csrc/cuda_graph.cpp")
        .warnings(false)
        .define("_GLIBCXX_USE_CXX11_ABI", cxx11_abi().as_str());
    let with_cuda = lib.and_then(|lib| {
        let root = lib.parent().unwrap_or(lib);
        let include = root.join("include");
        let cuda = cuda_include(root)?;
        (lib.join("libtorch_cuda.so").exists() && include.join("ATen/cuda/CUDAGraph.h").exists())
            .then_some((lib, include, cuda))
    });
    match with_cuda {
        Some((lib, include, cuda)) => {
            build
                .define("LCX_WITH_CUDA", None)
                .include(&include)
                .include(include.join("torch/csrc/api/include"))
                .include(cuda);
            println!("cargo:rustc-link-search=native={}", lib.display());
            println!("cargo:rustc-link-lib=dylib=c10_cuda");
            println!("cargo:rustc-link-lib=dylib=torch_cuda");
            println!("cargo:rustc-env=LCX_GRAPH_SHIM=cuda");
        }
        None => println!("cargo:rustc-env=LCX_GRAPH_SHIM=none"),
    }
    build.compile("lcx_cuda_graph");
}

/// libtorch's C++ ABI flag, as torch-sys decides it (PyTorch 2.11's
/// wheels use the new ABI).
fn cxx11_abi() -> String {
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".into())
}

/// The folder with `cuda_runtime_api.h` and `crt/host_config.h`: `LCX_CUDA_INCLUDE`, else the CUDA
/// toolkit's, else the one pip installs beside PyTorch (nvidia/cu13 or
/// nvidia/cuda_runtime in the same site-packages).
fn cuda_include(torch: &Path) -> Option<PathBuf> {
    // cuda_runtime.h includes crt/host_config.h, which pip's CUDA 13
    // runtime package leaves out (scripts/provision-libtorch.sh adds it).
    let header =
        |d: &Path| d.join("cuda_runtime_api.h").exists() && d.join("crt/host_config.h").exists();
    if let Ok(dir) = std::env::var("LCX_CUDA_INCLUDE") {
        return Some(PathBuf::from(dir)).filter(|d| header(d));
    }
    let mut candidates = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(dir) = std::env::var(var) {
            candidates.push(PathBuf::from(dir).join("include"));
        }
    }
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    if let Some(site) = std::fs::canonicalize(torch)
        .ok()
        .and_then(|t| t.parent().map(Path::to_path_buf))
    {
        let nvidia = site.join("nvidia");
        candidates.push(nvidia.join("cuda_runtime/include"));
        if let Ok(entries) = std::fs::read_dir(&nvidia) {
            let mut dirs: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path().join("include"))
                .collect();
            dirs.sort();
            candidates.extend(dirs);
        }
    }
    candidates.into_iter().find(|d| header(d))
}

/// Reads the version next to the libtorch lib folder.
fn torch_version(lib: &Path) -> String {
    let Some(root) = lib.parent() else {
        return "unknown".into();
    };
    if let Ok(text) = std::fs::read_to_string(root.join("build-version")) {
        return text.trim().to_string();
    }
    if let Ok(text) = std::fs::read_to_string(root.join("version.py")) {
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("__version__") {
                let value = rest.trim_start_matches([' ', '=', ':']).trim();
                let value = value.trim_start_matches("str").trim();
                return value.trim_matches(['\'', '"']).to_string();
            }
        }
    }
    "unknown".into()
}
