//! `lcx system show` and `check` against fake `/proc` and `/sys` trees
//! (`--root`, `LCX_SYSTEM_ROOT`) and against this host.

use std::path::Path;
use std::process::{Command, Output};

const CPU: &str = "sys/devices/system/cpu";

fn tree(dir: &Path, governor: &str) {
    let files = [
        (
            format!("{CPU}/cpu0/cpufreq/scaling_governor"),
            format!("{governor}\n"),
        ),
        (
            format!("{CPU}/cpu1/cpufreq/scaling_governor"),
            "performance\n".into(),
        ),
        (format!("{CPU}/cpufreq/boost"), "0\n".into()),
        (format!("{CPU}/smt/active"), "0\n".into()),
        (format!("{CPU}/isolated"), "1\n".into()),
        (
            "proc/stat".into(),
            "cpu  10 0 5 100 0 0 0 0 0 0\ncpu0 5 0 2 50 0 0 0 0 0 0\ncpu1 5 0 3 50 0 0 0 0 0 0\n"
                .into(),
        ),
        ("proc/loadavg".into(), "0.12 0.1 0.1 1/99 7\n".into()),
        (
            "proc/meminfo".into(),
            "MemTotal: 8000000 kB\nMemAvailable: 6000000 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n"
                .into(),
        ),
    ];
    for (file, text) in files {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// `lcx system ARGS` with no `nvidia-smi` to find: the GPU is unknown
/// whatever this host has, so the fake tree decides everything.
fn system(args: &[&str], empty_path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lcx"))
        .arg("system")
        .args(args)
        .env("PATH", empty_path)
        .env_remove("LCX_SYSTEM_ROOT")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn check_fails_on_a_bad_governor_with_its_fix_and_passes_a_tuned_tree() {
    let dir = tempfile::tempdir().unwrap();
    let (bad, good, bin) = (
        dir.path().join("bad"),
        dir.path().join("good"),
        dir.path().join("bin"),
    );
    std::fs::create_dir_all(&bin).unwrap();
    tree(&bad, "powersave");
    tree(&good, "performance");

    let out = system(&["check", "--root", bad.to_str().unwrap()], &bin);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("BAD      CPU governor: powersave on 1, performance on 1 of 2 CPUs"),
        "{said}"
    );
    assert!(
        said.contains("fix: sudo cpupower frequency-set -g performance"),
        "{said}"
    );
    assert!(
        said.contains("1 of 8 settings will add noise (1 unknown)"),
        "{said}"
    );

    let out = system(&["check", "--root", good.to_str().unwrap()], &bin);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("fine     Turbo (boost): off"), "{said}");
    assert!(
        said.contains("unknown  GPU clocks: unknown (no GPU: nvidia-smi not found)"),
        "{said}"
    );
    assert!(
        said.contains("no setting will add noise (1 unknown)"),
        "{said}"
    );
    assert!(!said.contains("fix:"), "{said}");

    // The variable stands in for the flag.
    let out = Command::new(env!("CARGO_BIN_EXE_lcx"))
        .args(["system", "show", "--format", "json"])
        .env("LCX_SYSTEM_ROOT", &bad)
        .env("PATH", &bin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let items: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let governor = &items.as_array().unwrap()[0];
    assert_eq!(governor["key"], "governor");
    assert_eq!(governor["state"], "bad");
    assert_eq!(
        governor["fix"],
        "sudo cpupower frequency-set -g performance"
    );
}

#[test]
fn an_empty_tree_is_unknown_throughout_and_never_fails() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let out = system(&["check", "--root", root], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    assert_eq!(said.matches("unknown  ").count(), 8, "{said}");
    assert!(
        said.contains("no setting will add noise (8 unknown)"),
        "{said}"
    );
    let out = system(&["show", "--root", root], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("| Foreign CPU now       | unknown (no /proc/stat)"),
        "{}",
        text(&out)
    );

    let out = system(&["show", "--root", &format!("{root}/missing")], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--root"), "{}", text(&out));
}

#[test]
fn show_and_check_run_on_this_host() {
    let out = Command::new(env!("CARGO_BIN_EXE_lcx"))
        .args(["system", "show"])
        .env_remove("LCX_SYSTEM_ROOT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    for label in [
        "CPU governor",
        "Turbo",
        "SMT",
        "Isolated CPUs",
        "Load average",
        "Foreign CPU now",
        "Memory",
        "Swap",
        "GPU clocks",
    ] {
        assert!(said.contains(label), "{label}: {said}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lcx"))
        .args(["system", "check"])
        .env_remove("LCX_SYSTEM_ROOT")
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
}
