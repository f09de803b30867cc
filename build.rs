//! Links lcx against the libtorch that torch-sys found, so the binary runs
//! without LD_LIBRARY_PATH and sees CUDA where there is one.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        println!("cargo:rustc-env=LCX_TORCH_VERSION=unknown");
        return;
    };
    let lib = Path::new(&lib);
    // Builds of other lcx revisions (experiment::revision) use this libtorch.
    println!("cargo:rustc-env=LCX_LIBTORCH_LIB={}", lib.display());
    // An rpath to libtorch's own folder; libtorch's libraries carry rpaths to
    // the CUDA libraries that pip installs beside them.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    // torch-sys links libtorch_cuda, but no symbol of it is referenced, so an
    // as-needed linker would drop it and CUDA would never register. Keep it.
    // Only for the targets that use libtorch: the `lcx` front binary must
    // stay free of it (see src/main.rs).
    if lib.join("libtorch_cuda.so").exists() {
        let flags = [
            "-Wl,--no-as-needed".to_string(),
            format!("-L{}", lib.display()),
            "-ltorch_cuda".to_string(),
            "-Wl,--as-needed".to_string(),
        ];
        for flag in &flags {
            println!("cargo:rustc-link-arg-bin=lcx-torch={flag}");
            println!("cargo:rustc-link-arg-tests={flag}");
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
