//! The two binaries: `lcx` runs the torch-free commands without loading
//! libtorch and hands the others to `lcx-torch`.

use std::process::Command;

const LCX: &str = env!("CARGO_BIN_EXE_lcx");

#[test]
fn lcx_itself_does_not_link_libtorch() {
    let bytes = std::fs::read(LCX).expect("reading the lcx binary");
    let needs = |name: &[u8]| bytes.windows(name.len()).any(|w| w == name);
    // The dynamic section names every library the loader must map; libtorch's
    // would cost every `lcx report` its static initialisers.
    assert!(!needs(b"libtorch_cpu.so"), "lcx links libtorch_cpu");
    assert!(!needs(b"libc10.so"), "lcx links libc10");
    let torch = std::fs::read(env!("CARGO_BIN_EXE_lcx-torch")).expect("reading lcx-torch");
    assert!(torch.windows(15).any(|w| w == b"libtorch_cpu.so"));
}

#[test]
fn torch_commands_go_through_lcx_torch() {
    let out = Command::new(LCX)
        .args(["version", "--verbose"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("torch 2.11"), "{text}");
    // Usage messages name the program the user ran, not lcx-torch.
    let out = Command::new(LCX).arg("tarin").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Usage: lcx") && !err.contains("lcx-torch"),
        "{err}"
    );
}

#[test]
fn a_missing_lcx_torch_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("lcx");
    std::fs::copy(LCX, &lone).unwrap();
    let out = Command::new(&lone)
        .args(["train", "--config", "configs/smoke.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lcx-torch is missing"), "{err}");
    // The version and the torch-free commands work on their own; the bare
    // version is one line, whichever binary prints it.
    let short = format!("lcx {}\n", env!("CARGO_PKG_VERSION"));
    for args in [&["--version"][..], &["-V"], &["version"]] {
        let out = Command::new(&lone).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), short, "{args:?}");
        let out = Command::new(env!("CARGO_BIN_EXE_lcx-torch"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            short,
            "lcx-torch {args:?}"
        );
    }
    let out = Command::new(&lone)
        .args(["version", "--verbose"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lcx-torch is missing"));
    let out = Command::new(&lone)
        .args(["play", "--p0", "random", "--p1", "random", "--games", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `lcx --help` (and `-h`, `help`, no arguments) is answered by `lcx`
/// itself, without loading libtorch, and says what `lcx-torch` would:
/// the same text, the same stream, the same exit code; it works without
/// `lcx-torch` beside it.
#[test]
fn top_level_help_is_lcx_torchs_without_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("lcx");
    std::fs::copy(LCX, &lone).unwrap();
    for args in [&["--help"][..], &["-h"], &["help"], &[]] {
        let light = Command::new(&lone).args(args).output().unwrap();
        let torch = Command::new(env!("CARGO_BIN_EXE_lcx-torch"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(light.status.code(), torch.status.code(), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&light.stdout),
            String::from_utf8_lossy(&torch.stdout),
            "{args:?}"
        );
        assert_eq!(light.stderr, torch.stderr, "{args:?}");
    }
    let help = Command::new(&lone).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    // Listed by use: the experiment commands first, train and bench among them.
    let order: Vec<usize> = [
        "  run ",
        "  report ",
        "  history ",
        "  train ",
        "  bench ",
        "  version ",
    ]
    .iter()
    .map(|name| {
        text.find(name)
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
}

/// `./lcx` runs the binary where cargo built it: `$CARGO_TARGET_DIR` when
/// set (absolute, or relative to the checkout), else `target/`. A stand-in
/// `cargo` and provisioning script keep this test from building anything.
#[test]
fn the_wrapper_runs_the_binary_cargo_built() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("checkout");
    let script = |path: &std::path::Path, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let wrapper =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lcx"))
            .unwrap();
    script(&root.join("lcx"), &wrapper);
    script(
        &root.join("scripts/provision-libtorch.sh"),
        "#!/bin/sh\nexit 0\n",
    );
    script(&dir.path().join("bin/cargo"), "#!/bin/sh\nexit 0\n");
    for (target, at) in [
        (None, root.join("target")),
        (
            Some(dir.path().join("elsewhere")),
            dir.path().join("elsewhere"),
        ),
        (Some(std::path::PathBuf::from("build")), root.join("build")),
    ] {
        script(
            &at.join("release/lcx"),
            &format!("#!/bin/sh\necho \"{} $*\"\n", at.display()),
        );
        let mut cmd = Command::new(root.join("lcx"));
        cmd.arg("--version").env(
            "PATH",
            format!(
                "{}:{}",
                dir.path().join("bin").display(),
                std::env::var("PATH").unwrap()
            ),
        );
        match &target {
            Some(t) => cmd.env("CARGO_TARGET_DIR", t),
            None => cmd.env_remove("CARGO_TARGET_DIR"),
        };
        let out = cmd.current_dir(dir.path()).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            said.trim(),
            format!("{} --version", at.display()),
            "{target:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
