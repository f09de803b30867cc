//! `scripts/gpu-check.sh --dry-run-cpu`: every step of the GPU check, on the
//! CPU at its smallest sizes, so that the script that runs in the few
//! minutes a GPU host is lent cannot rot in between.

use std::path::Path;
use std::process::Command;

fn gpu_check(out: &Path, extra: &[&str]) -> std::process::Output {
    crate::support::check_script("gpu-check.sh", out, extra)
}

#[test]
fn the_gpu_check_runs_every_step_on_the_cpu_and_writes_its_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gpu-out");
    let run = gpu_check(&out, &["--dry-run-cpu", "--budget", "120"]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    // Every step ran to its end with exit 0, none was cut by the budget.
    for step in [
        "peak",
        "forward",
        "trainer",
        "trainer-sequential",
        "weights-cpu",
        "graphs",
        "trainer-graphed",
        "trainer-graphed-sequential",
        "torch-yardstick",
        "cuda-graphs",
        "cuda-graphs-report",
        "amp-crossover-cuda",
        "amp-crossover-cuda-report",
        "cuda-vs-workers",
        "cuda-vs-workers-report",
        "amp",
        "amp-report",
        "option-b",
        "option-b-report",
        "train",
        "resume",
    ] {
        assert!(
            summary.contains(&format!("| {step} | exit 0 |")),
            "step {step} did not end with exit 0:\n{summary}"
        );
    }
    assert!(summary.contains("Dry run on the CPU"), "{summary}");
    assert!(summary.contains("CUDA graphs: "), "{summary}");
    // The figures the summary reads out of the steps' JSON lines are there
    // (a number, not "-" or nothing), for what a CPU can measure.
    for row in [
        "| host FP32 FMA peak, all cores | ",
        "| cpu FP32 matmul 256² | ",
        "| bench trainer ms/step, fp32, networks at once (6 steps a call) | ",
        "| bench trainer ms/step, fp32, networks one after the other | ",
        "| bench trainer ms/step, AMP requested ",
        "| training GFLOP/s, train (mean) | ",
        "| PyTorch eager ms/step, same network and batch, fp32, fused AdamW | ",
        "| bench trainer ms/step, fp32 graphed, networks at once | ",
        "| bench trainer ms/step, fp32 graphed, networks one after the other | ",
    ] {
        let line = summary
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row:?}:\n{summary}"));
        let value = line
            .trim_end_matches(" |")
            .rsplit("| ")
            .next()
            .unwrap_or("");
        assert!(value.parse::<f64>().is_ok_and(|v| v > 0.0), "{line}");
    }
    // A CPU trainer and the device's (here the CPU again) drew the same
    // initial weights for one seed.
    assert!(
        summary.contains("| initial weights, CPU and cpu trainers of one seed | the same ("),
        "{summary}"
    );
    assert!(
        summary.contains("| final loss scale, train | 1.0 |"),
        "{summary}"
    );
    // AMP on the CPU of a dry run: bf16 on lcx's kernel where it runs.
    #[cfg(target_arch = "x86_64")]
    let kernel = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = false;
    let amp_ran = if kernel { "bf16" } else { "fp32" };
    assert!(
        summary.contains(&format!("| precision the AMP steps ran in | {amp_ran} ")),
        "{summary}"
    );
    // The experiments ran as their files are, the CUDA arms skipped by lcx
    // and the CPU arms completed with the sizes the script gave them.
    // The graph check compared each network's two runs (eagerly here: no
    // step was replayed, and the graphed bench said so in its lines).
    for net in ["advantage 0", "advantage 1", "strategy"] {
        let row = summary
            .lines()
            .find(|l| l.starts_with(&format!("| {net} ")))
            .unwrap_or_else(|| panic!("no graph check row for {net}:\n{summary}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!((cells[2], cells[3], cells[7]), ("4", "0", "yes"), "{row}");
    }
    let graphed = std::fs::read_to_string(out.join("trainer-graphed.jsonl")).unwrap();
    assert!(graphed.contains(r#""bench/graphed_steps":0"#), "{graphed}");
    assert!(!graphed.contains("CUDA graphs"), "{graphed}");
    for (experiment, arm) in [
        ("amp", "fp32-cpu"),
        ("option-b", "recursive"),
        ("cuda-vs-workers", "interleaved-workers"),
    ] {
        assert!(
            summary.contains(&format!("| {experiment} | {arm} | completed |")),
            "{experiment}/{arm} not completed:\n{summary}"
        );
    }
    for (experiment, arm) in [
        ("amp", "amp-cuda"),
        ("option-b", "interleaved-cuda"),
        ("cuda-vs-workers", "interleaved-cuda"),
        ("cuda-graphs", "graphed-all"),
        (
            "amp-crossover-cuda",
            "amp-hidden-size-4096_num-layers-6_cuda-graphs-true",
        ),
    ] {
        assert!(
            summary.contains(&format!("| {experiment} | {arm} | skipped |")),
            "{experiment}/{arm} not skipped:\n{summary}"
        );
    }
    let amp_report = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-amp-report.md"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .expect("the amp report step's file");
    assert!(amp_report.contains("INCONCLUSIVE"), "{amp_report}");
    // The trainer bench timed both modes and said AMP ran in fp32 here.
    let trainer = std::fs::read_to_string(out.join("trainer.jsonl")).unwrap();
    assert!(
        trainer.contains(r#""precision_requested":"amp""#),
        "{trainer}"
    );
    assert!(!trainer.contains(r#""precision":"amp""#), "{trainer}");
    // The train step evaluated (on the CPU) and the resume continued it.
    let train = std::fs::read_to_string(out.join("train.jsonl")).unwrap();
    assert!(train.contains("eval/random/games"), "{train}");
    let resume = std::fs::read_to_string(out.join("resume.jsonl")).unwrap();
    assert!(resume.contains(r#""iteration":3"#), "{resume}");
    assert!(out.join("lcx-gpu.db").exists());
    assert!(stdout.contains("preflight:"), "{stdout}");
}

#[test]
fn the_gpu_check_refuses_bad_arguments_before_doing_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gpu-out");
    for (args, says) in [
        (&["--budget", "soon"][..], "--budget must be a whole number"),
        (&["--budget", "10"][..], "too short"),
        (&["--frobnicate"][..], "unknown argument '--frobnicate'"),
    ] {
        let run = gpu_check(&out, args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

#[test]
fn the_gpu_check_without_a_gpu_stops_in_its_preflight() {
    // Not a dry run, on a host without CUDA: one line, and no step after it.
    if Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("skipped: this host has a GPU, so the preflight passes");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gpu-out");
    let run = gpu_check(&out, &["--budget", "60"]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("FAILED at preflight"))
        .collect();
    assert_eq!(failed.len(), 1, "{stdout}");
    // Nothing after the preflight ran: no step wrote its file.
    let written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .collect();
    assert!(written.is_empty(), "{written:?}\n{stdout}");
}
