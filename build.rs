//! Links `lcx-torch` and the integration tests against the libtorch that
//! torch-sys found, so they run without LD_LIBRARY_PATH and see CUDA where
//! there is one. `lcx` gets nothing of it: it must not load libtorch.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        return;
    };
    let lib = Path::new(&lib);
    // Builds of other lcx revisions (lcx_core::experiment::revision) use this libtorch.
    println!("cargo:rustc-env=LCX_LIBTORCH_LIB={}", lib.display());
    // An rpath to libtorch's own folder; libtorch's libraries carry rpaths to
    // the CUDA libraries that pip installs beside them.
    let mut flags = vec![format!("-Wl,-rpath,{}", lib.display())];
    // torch-sys links libtorch_cuda, but no symbol of it is referenced, so an
    // as-needed linker would drop it and CUDA would never register. Keep it.
    if lib.join("libtorch_cuda.so").exists() {
        flags.extend([
            "-Wl,--no-as-needed".to_string(),
            format!("-L{}", lib.display()),
            "-ltorch_cuda".to_string(),
            "-Wl,--as-needed".to_string(),
        ]);
    }
    for flag in &flags {
        println!("cargo:rustc-link-arg-bin=lcx-torch={flag}");
        println!("cargo:rustc-link-arg-tests={flag}");
    }
}
