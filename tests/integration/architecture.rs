//! ARCHITECTURE.md's rules about what may depend on what, checked against
//! the manifests and the sources: each test fails when a change breaks the
//! rule it names.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The names of a manifest's `[dependencies]` (not dev- or build-).
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    doc.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

/// The Rust files under `dir` (relative to the repository) whose text
/// contains `needle`, leaving out `except` (a folder inside `dir`).
fn files_naming(dir: &str, needle: &str, except: Option<&str>) -> Vec<String> {
    let root = root();
    let except = except.map(|e| root.join(e));
    walkdir::WalkDir::new(root.join(dir))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .filter(|e| except.as_ref().is_none_or(|x| !e.path().starts_with(x)))
        .filter(|e| names(&std::fs::read_to_string(e.path()).unwrap(), needle))
        .map(|e| e.path().strip_prefix(&root).unwrap().display().to_string())
        .collect()
}

/// Whether `text` has `needle` at the start of a name (`tch::` in
/// `use tch::Tensor`, not in `Batch::default`).
fn names(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn a_name_is_found_only_at_its_start() {
    assert!(names("use tch::Tensor;", "tch::"));
    assert!(names("tch::Kind", "tch::"));
    assert!(!names("let b = Batch::default();", "tch::"));
}

#[test]
fn no_libtorch_and_no_clap_in_lcx_core() {
    let deps = dependencies(&root().join("crates/lcx-core/Cargo.toml"));
    for banned in ["tch", "torch-sys", "lcx-trainer", "clap"] {
        assert!(
            !deps.contains(&banned.to_string()),
            "lcx-core depends on {banned}"
        );
    }
}

#[test]
fn no_clap_in_the_trainer() {
    let deps = dependencies(&root().join("crates/lcx-trainer/Cargo.toml"));
    assert!(
        deps.contains(&"tch".to_string()),
        "the trainer is the crate on tch"
    );
    assert!(
        !deps.contains(&"clap".to_string()),
        "lcx-trainer depends on clap"
    );
}

/// The command line's package depends on the trainer (for `lcx-torch`),
/// so its library could call it: only `src/bin/lcx-torch/` may.
#[test]
fn only_lcx_torch_names_the_trainer_or_tch() {
    for needle in ["lcx_trainer", "tch::"] {
        assert_eq!(
            files_naming("src", needle, Some("src/bin/lcx-torch")),
            Vec::<String>::new(),
            "files outside src/bin/lcx-torch naming `{needle}`"
        );
    }
    assert_eq!(
        files_naming("crates/lcx-core/src", "tch::", None),
        Vec::<String>::new()
    );
}

#[test]
fn no_sql_outside_the_store() {
    assert_eq!(
        files_naming(
            "crates/lcx-core/src",
            "rusqlite",
            Some("crates/lcx-core/src/store")
        ),
        Vec::<String>::new()
    );
    for dir in ["src", "crates/lcx-trainer/src"] {
        assert_eq!(
            files_naming(dir, "rusqlite", None),
            Vec::<String>::new(),
            "{dir}"
        );
    }
}

/// The machine's facts (`system/`: the host's name, boot, CPUs, load) and
/// its ceiling (`bench/peak/`) sit below the experiment, its records and
/// its reports: they name none of them (a host key made from the store's
/// host name once closed a circle through the store and the fingerprint).
#[test]
fn the_host_and_its_ceiling_name_nothing_above_them() {
    for dir in [
        "crates/lcx-core/src/system",
        "crates/lcx-core/src/bench/peak",
    ] {
        for above in [
            "crate::store",
            "crate::experiment",
            "crate::report",
            "crate::session",
            "crate::publish",
        ] {
            assert_eq!(
                files_naming(dir, above, None),
                Vec::<String>::new(),
                "{dir} names {above}"
            );
        }
    }
}

#[test]
fn no_io_in_the_renderers() {
    for needle in [
        "std::fs",
        "File::",
        "std::io::stdout",
        "println!",
        "eprintln!",
    ] {
        assert_eq!(
            files_naming("crates/lcx-core/src/report/render.rs", needle, None),
            Vec::<String>::new(),
            "`{needle}` in the renderer"
        );
    }
}
