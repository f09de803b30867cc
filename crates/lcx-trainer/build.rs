//! The libtorch version the trainer reports (`LCX_TORCH_VERSION`), and the
//! link flags its unit tests need to load libtorch.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        println!("cargo:rustc-env=LCX_TORCH_VERSION=unknown");
        return;
    };
    let lib = Path::new(&lib);
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
