//! `lcx train`: end-to-end runs of the smoke config through the binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use lcx_core::metrics::Writers;

use crate::support::succeed;

fn lcx() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lcx"));
    cmd.env("LCX_HOST_LOCK", crate::support::own_host_lock());
    cmd
}

fn smoke() -> String {
    format!("{}/configs/smoke.toml", env!("CARGO_MANIFEST_DIR"))
}

/// `lcx train --config configs/smoke.toml`, further arguments to add.
fn train_smoke() -> Command {
    let mut cmd = lcx();
    cmd.args(["train", "--config", &smoke()]);
    cmd
}

/// Fails on any numeric field of a metric line that the metric vocabulary
/// (`lcx_core::metrics`, the `metric_info` table) does not describe, or does
/// not list as `writer`'s (what a gate on its workload may name).
/// Returns the fields.
fn assert_in_vocabulary(writer: Writers, line: &str) -> Vec<String> {
    use lcx_core::metrics::writes;
    let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
    let mut keys = Vec::new();
    for (key, value) in v.as_object().expect("an object") {
        if key != "iteration" && value.is_number() {
            assert!(
                lcx_core::metrics::lookup(key).is_some(),
                "`{key}` is written but not in lcx-core's metrics.rs: {line}"
            );
            assert!(
                writes(writer, key),
                "`{key}` is written but not listed as {writer:?}'s in metrics.rs: {line}"
            );
            keys.push(key.clone());
        }
    }
    keys
}

/// Fails on a name listed as the trainer's, and picked by `pick`, that no
/// key of `keys` matches: the list must not promise a gate a metric the
/// trainer never writes.
fn assert_listed_names_written(keys: &[String], pick: impl Fn(&str) -> bool) {
    use lcx_core::metrics::written_by;
    for pattern in written_by(Writers::TRAIN).filter(|n| pick(n)) {
        let glob = |key: &str| match pattern.split_once('*') {
            None => key == pattern,
            Some((head, tail)) => {
                key.starts_with(head) && key.ends_with(tail) && key.len() >= head.len() + tail.len()
            }
        };
        assert!(
            keys.iter().any(|k| glob(k)),
            "`{pattern}` is listed as the trainer's in metrics.rs but no line wrote it"
        );
    }
}

fn iterations(jsonl: &str) -> Vec<u64> {
    jsonl
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("each metrics line is JSON");
            v["iteration"].as_u64().expect("iteration is an integer")
        })
        .collect()
}

#[test]
fn train_streams_metrics_and_writes_the_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = train_smoke()
        .args([
            "--set",
            "run.max_iterations=2",
            // Evaluation and a checkpoint, so that their metrics are written
            // (and checked against the vocabulary) too.
            "--set",
            "evaluation.eval_every=1",
            "--set",
            "checkpoint.save_latest=true",
            "--metrics-out",
            "-",
            "--keep",
        ])
        .arg("--runs-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(iterations(&stdout), vec![1, 2]);
    let written: Vec<String> = stdout
        .lines()
        .flat_map(|l| assert_in_vocabulary(Writers::TRAIN, l))
        .collect();
    // All but what other settings write (checked with them below and in
    // `graph_counts_are_written_where_graphs_are_asked_for`) and what only a
    // CUDA device measures (its peaks, memory and queueing time;
    // scripts/gpu-check.sh reads them on a GPU).
    assert_listed_names_written(&written, |name| {
        !(name.starts_with("amp/")
            || name.starts_with("interleaved/")
            || name.starts_with("peak/device_matmul_")
            || name == "peak/bf16_gflops"
            || name.starts_with("gpu/")
            || name == "time/training_queued_seconds"
            || name == "perf/graphed_steps"
            || name == "traversal/graphed_forwards")
    });
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        // The recursive scheduler forwards one state at a time, and says so.
        assert_eq!(v["traversal/forward_batch_max"], 1.0, "{line}");
        for key in [
            "time/iteration_seconds",
            "time/traversal_seconds",
            "traversal/nodes_per_second",
            "loss/advantage",
            "loss/strategy",
        ] {
            assert!(
                v[key].as_f64().is_some_and(f64::is_finite),
                "{key} in {line}"
            );
        }
    }
    let runs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert!(run
        .file_name()
        .unwrap()
        .to_string_lossy()
        .ends_with("_smoke"));
    for f in ["config.toml", "metrics.jsonl", "train.log"] {
        assert!(run.join(f).exists(), "missing {f}");
    }
    let file = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    assert_eq!(
        file, stdout,
        "metrics.jsonl and the stream carry the same lines"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[i=2] Iteration complete"), "{stderr}");
}

#[test]
fn resume_continues_at_the_next_iteration() {
    let dir = tempfile::tempdir().unwrap();
    succeed(
        train_smoke()
            .args(["--set", "checkpoint.save_latest=true", "--keep"])
            .arg("--runs-dir")
            .arg(dir.path()),
    );
    let run = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let latest = run.join("latest.json");
    assert!(latest.exists() && run.join("latest.safetensors").exists());
    succeed(
        train_smoke()
            .args(["--set", "run.max_iterations=3"])
            .args(["--set", "checkpoint.save_latest=true", "--resume"])
            .arg(&latest),
    );
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    assert_eq!(iterations(&metrics), vec![1, 2, 3]);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&latest).unwrap()).unwrap();
    assert_eq!(meta["iteration"], 3);
}

#[test]
fn bad_config_key_and_missing_checkpoint_exit_2() {
    let out = train_smoke()
        .args(["--set", "traversal.bogus=1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("traversal.bogus"));
    let out = train_smoke()
        .arg("--resume")
        .arg(Path::new("/nonexistent/latest.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `lcx bench trainer` says which code trained: lcx's kernel where the CPU
/// has AVX2 and FMA (the default), libtorch when the config turns it off.
#[test]
fn bench_trainer_names_the_training_backend() {
    let run = |extra: &[&str]| -> String {
        succeed(
            lcx()
                .args(["bench", "trainer", "--config", &smoke()])
                .args(["--runs", "1", "--warmup", "0", "--set", "run.device=cpu"])
                .args(extra),
        )
    };
    #[cfg(target_arch = "x86_64")]
    let kernel = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = false;
    #[cfg(target_arch = "x86_64")]
    let wide = kernel && is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let wide = false;
    let default = run(&[]);
    let want = match (kernel, wide) {
        (true, true) => "| lcx kernel, avx512f |",
        (true, false) => "| lcx kernel, avx2-fma |",
        _ => "| libtorch |",
    };
    assert!(default.contains(want), "{default}");
    // Held to AVX2, the kernel says so.
    let narrow = succeed(
        lcx()
            .args(["bench", "trainer", "--config", &smoke()])
            .args(["--runs", "1", "--warmup", "0", "--set", "run.device=cpu"])
            .env("LCX_NATIVE_KERNEL", "avx2"),
    );
    let want = if kernel {
        "| lcx kernel, avx2-fma |"
    } else {
        "| libtorch |"
    };
    assert!(narrow.contains(want), "{narrow}");
    let off = run(&["--set", "optimization.native_training=false"]);
    assert!(off.contains("| libtorch |"), "{off}");
    // One seed draws one set of initial weights, whichever code trains
    // them (and, in scripts/gpu-check.sh, whichever device); another seed
    // draws others. In processes of their own: tests in one process share
    // libtorch's global generator.
    let digest = |text: &str| -> String {
        let at = text.find("initial weights digest ").expect(text) + 23;
        text[at..at + 16].to_string()
    };
    assert_eq!(digest(&default), digest(&off));
    assert_ne!(
        digest(&default),
        digest(&run(&["--set", "run.seed=2"])),
        "a second seed drew the same weights"
    );
    // The path of a CPU without AVX2/FMA, taken on any CPU: the kernel
    // turned off, the same config trains with libtorch.
    let fallback = succeed(
        lcx()
            .env("LCX_NATIVE_KERNEL", "off")
            .args(["bench", "trainer", "--config", &smoke()])
            .args(["--runs", "1", "--warmup", "0", "--set", "run.device=cpu"]),
    );
    assert!(fallback.contains("| libtorch |"), "{fallback}");
    let dir = tempfile::tempdir().unwrap();
    let trained = succeed(
        train_smoke()
            .env("LCX_NATIVE_KERNEL", "off")
            .args(["--set", "network.native_forward=true", "--metrics-out", "-"])
            .arg("--runs-dir")
            .arg(dir.path()),
    );
    assert_eq!(iterations(&trained), vec![1]);
    // Each metric line names what its steps ran on: libtorch there, lcx's
    // kernel at its width otherwise.
    let kernel_of = |jsonl: &str| -> Vec<String> {
        jsonl
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect(l);
                v["training_kernel"].as_str().expect(l).to_string()
            })
            .collect()
    };
    assert_eq!(kernel_of(&trained), vec!["libtorch"]);
    let trained_by = |env: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = train_smoke();
        if let Some(width) = env {
            cmd.env("LCX_NATIVE_KERNEL", width);
        }
        kernel_of(&succeed(
            cmd.args(["--metrics-out", "-", "--runs-dir"])
                .arg(dir.path()),
        ))
    };
    let widest = match (kernel, wide) {
        (true, true) => "lcx avx512f",
        (true, false) => "lcx avx2-fma",
        _ => "libtorch",
    };
    assert_eq!(trained_by(None), vec![widest]);
    let narrow = if kernel { "lcx avx2-fma" } else { "libtorch" };
    assert_eq!(trained_by(Some("avx2")), vec![narrow]);
    // The forwards of that run: libtorch's with the kernel off, the
    // kernel's otherwise (where the CPU has it).
    let forward = |off: bool| {
        let mut cmd = lcx();
        if off {
            cmd.env("LCX_NATIVE_KERNEL", "off");
        }
        succeed(cmd.args(["bench", "forward", "--config", &smoke()]).args([
            "--batch-sizes",
            "1",
            "--iters",
            "2",
            "--reps",
            "1",
        ]))
    };
    let off = forward(true);
    assert!(off.contains("libtorch, "), "{off}");
    if kernel {
        let on = forward(false);
        assert!(on.contains("lcx kernel, avx"), "{on}");
    }
}

/// #19 items 1 and 2, issue 74: a bench-trainer cell measures one mode,
/// for the iterations asked; an AMP arm on a CPU trains in bf16 on lcx's
/// kernel and is judged against fp32, and one that cannot (lcx's kernel
/// off for it) runs fp32, says why in its lines and in the report, and is
/// not judged as AMP.
#[test]
fn an_amp_cell_on_the_cpu_runs_bf16_or_says_why_not() {
    #[cfg(target_arch = "x86_64")]
    let kernel = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = false;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("amp.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"amp\"\nworkload = \"bench-trainer\"\nconfig = \"{}\"\niterations = 3\n\
             warmup = 1\nset = [\"run.device=cpu\"]\n[[arms]]\nname = \"fp32\"\n\
             [[arms]]\nname = \"amp\"\nlabel = \"AMP\"\nargs = [\"--amp\"]\n\
             [[arms]]\nname = \"amp-libtorch\"\nlabel = \"AMP, libtorch\"\nargs = [\"--amp\"]\n\
             set = [\"optimization.native_training=false\"]\n",
            smoke()
        ),
    )
    .unwrap();
    let db = dir.path().join("x.db");
    let db = db.to_str().unwrap();
    succeed(lcx().args(["run", file.to_str().unwrap(), "--db", db, "--plain"]));
    let store = lcx_core::store::Store::open_read_only(Path::new(db)).unwrap();
    let e = store.find_experiment("amp").unwrap();
    let bf16 = if kernel { "bf16" } else { "fp32" };
    for run in store.runs(e.id).unwrap() {
        assert_eq!(run.iterations_done, 3, "{}: one mode, 3 lines", run.arm);
        let texts = store.run_texts(run.id).unwrap();
        let field = |name: &str| -> Vec<&str> {
            texts
                .iter()
                .filter(|(_, n, _)| n == name)
                .map(|(_, _, v)| v.as_str())
                .collect()
        };
        let (ran, why) = match run.arm.as_str() {
            "fp32" => ("fp32", false),
            "amp" => (bf16, !kernel),
            _ => ("fp32", true),
        };
        assert_eq!(field("precision"), [ran; 3], "{}", run.arm);
        assert_eq!(
            field("precision_reason").len(),
            if why { 3 } else { 0 },
            "{}",
            run.arm
        );
    }
    let report = succeed(lcx().args(["report", "amp", "--db", db]));
    assert!(
        report.contains(
            "AMP, libtorch (AMP requested, ran fp32: AMP on a CPU is lcx's bf16 training step, \
             and optimization.native_training is off"
        ),
        "{report}"
    );
    // fp32 against fp32 says nothing of AMP: not judged as AMP.
    assert!(
        report.contains("Not judged: `amp-libtorch`: AMP requested, ran fp32"),
        "{report}"
    );
    if kernel {
        // The bf16 arm is AMP, judged, and names its kernel.
        assert!(!report.contains("Not judged: `amp`"), "{report}");
        assert!(!report.contains("| AMP (AMP requested"), "{report}");
        assert!(report.contains("lcx bf16-"), "{report}");
    }
    // At a terminal, --both prints a speedup only where the modes differ.
    let both = |extra: &[&str]| {
        succeed(
            lcx()
                .args(["bench", "trainer", "--config", &smoke(), "--both"])
                .args(["--runs", "1", "--warmup", "0", "--set", "run.device=cpu"])
                .args(extra),
        )
    };
    let fp32_only = both(&["--set", "optimization.native_training=false"]);
    assert!(
        fp32_only.contains("no speedup: both modes ran fp32"),
        "{fp32_only}"
    );
    assert!(!fp32_only.contains("\nspeedup:"), "{fp32_only}");
    if kernel {
        let amp = both(&[]);
        assert!(amp.contains("\nspeedup:"), "{amp}");
        assert!(amp.contains("| amp (bf16) | lcx kernel, bf16-"), "{amp}");
    }
}

#[test]
fn bench_peak_prints_the_ceiling_as_a_metric_line() {
    let out = succeed(lcx().args([
        "bench",
        "peak",
        "--device",
        "cpu",
        "--matmul-size",
        "256",
        "--metrics-out",
        "-",
    ]));
    let line: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    for key in [
        "peak/fp32_gflops_core",
        "peak/fp32_gflops",
        "peak/stream_gbytes_per_second",
        "peak/matmul_gflops",
    ] {
        assert!(line[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {line}");
    }
    assert!(line["peak/isa"].is_string(), "{line}");
    assert_in_vocabulary(Writers::BENCH_PEAK, out.trim());
}

/// The interleaved scheduler's and the benches' lines use only names the
/// vocabulary describes (the recursive trainer's are checked above).
#[test]
fn every_metric_lcx_writes_is_in_the_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        succeed(
            train_smoke()
                .args([
                    "--set",
                    "traversal.scheduler=interleaved",
                    "--set",
                    "evaluation.eval_every=1",
                    "--set",
                    "run.use_amp=true",
                    "--metrics-out",
                    "-",
                ])
                .arg("--runs-dir")
                .arg(dir.path()),
        ),
        succeed(
            lcx()
                .args(["bench", "trainer", "--config", &smoke(), "--both"])
                .args(["--runs", "1", "--warmup", "0", "--metrics-out", "-"]),
        ),
        succeed(
            lcx()
                .args(["bench", "forward", "--config", &smoke()])
                .args([
                    "--batch-sizes",
                    "1,2",
                    "--iters",
                    "2",
                    "--reps",
                    "1",
                    "--metrics-out",
                    "-",
                ]),
        ),
        succeed(lcx().args([
            "bench",
            "engine",
            "--games",
            "5",
            "--micro-iters",
            "10",
            "--metrics-out",
            "-",
        ])),
    ];
    let writers = [
        Writers::TRAIN,
        Writers::BENCH_TRAINER,
        Writers::BENCH_FORWARD,
        Writers::BENCH_ENGINE,
    ];
    let mut trained = Vec::new();
    for (out, writer) in lines.iter().zip(writers) {
        assert!(!out.trim().is_empty());
        for line in out.lines() {
            let keys = assert_in_vocabulary(writer, line);
            if writer == Writers::TRAIN {
                trained.extend(keys);
            }
        }
    }
    // That run trains with AMP: in bf16 on a CPU, which reads its phases
    // against the VDPBF16PS ceiling where the CPU has one.
    let bf16_units = lcx_core::bench::peak::has_avx512_bf16();
    assert_listed_names_written(&trained, |name| {
        name.starts_with("amp/")
            || name.starts_with("interleaved/")
            || (name == "peak/bf16_gflops" && bf16_units)
    });
    assert!(
        lines[0].contains("traversal/forward_batch_mean"),
        "{}",
        lines[0]
    );
}

/// A two-iteration train experiment: the runner records the peak with the
/// fingerprint, the trainer its work rates, and the report reads one
/// against the other.
#[test]
fn train_arms_report_their_fraction_of_the_recorded_peak() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"roofline\"\nworkload = \"train\"\nconfig = \"{}\"\niterations = 2\n\
             set = [\"run.device=cpu\"]\n[[arms]]\nname = \"a\"\n",
            smoke()
        ),
    )
    .unwrap();
    let db = dir.path().join("x.db");
    let db = db.to_str().unwrap();
    succeed(
        lcx()
            .args(["run", file.to_str().unwrap(), "--db", db])
            .current_dir(dir.path()),
    );
    let store = lcx_core::store::Store::open_read_only(Path::new(db)).unwrap();
    let e = store.find_experiment("roofline").unwrap();
    let peak = e.fingerprint.peak_fp32_gflops.expect("peak recorded");
    assert!(peak > 0.0 && e.fingerprint.peak_fp32_gflops_core.unwrap() > 0.0);
    let run = &store.runs(e.id).unwrap()[0];
    for metric in [
        "perf/traversal_gflops",
        "perf/traversal_flops",
        "perf/forward_rows",
    ] {
        let series = store.metric_series(run.id, metric).unwrap();
        assert_eq!(series.len(), 2, "{metric}");
        assert!(series.iter().all(|(_, v)| *v > 0.0), "{metric}: {series:?}");
    }
    let md = succeed(lcx().args(["report", "--db", db]));
    assert!(md.contains("| Arm | traversal GFLOP/s | of peak"), "{md}");
    // Which peak the shares are of: a CPU arm's is the host's FMA peak.
    assert!(md.contains("| host FP32 FMA "), "{md}");
    assert!(md.contains("measured peak (lcx bench peak)"), "{md}");
    let history = succeed(lcx().args([
        "history",
        "roofline",
        "--metric",
        "perf/traversal_gflops",
        "--of-peak",
        "--db",
        db,
    ]));
    assert!(
        history.contains("perf/traversal_gflops / peak"),
        "{history}"
    );
}

#[test]
fn bench_engine_writes_a_metric_line() {
    let out = succeed(lcx().args([
        "bench",
        "engine",
        "--games",
        "50",
        "--micro-iters",
        "1000",
        "--metrics-out",
        "-",
    ]));
    let line: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!(line["iteration"], 1);
    assert!(
        line["bench/engine/games_per_second"]
            .as_f64()
            .is_some_and(|v| v > 0.0),
        "{line}"
    );
}

/// A training cell's run directory (config, train.log, checkpoints) goes
/// once the cell completed, stays with `--keep-runs`, and stays, named in
/// the cell's error, when the cell did not complete.
#[test]
fn a_completed_cell_leaves_no_run_directory_behind() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"tidy\"\nworkload = \"train\"\nconfig = \"{}\"\niterations = 2\n\
             set = [\"run.device=cpu\"]\n[[arms]]\nname = \"a\"\n\
             [[arms]]\nname = \"stops-early\"\nset = [\"run.max_minutes=0.000001\"]\n",
            smoke()
        ),
    )
    .unwrap();
    // (lcx run's output, the folders left under runs/tmp/ and whether each
    // holds a train.log); the folders are removed before the next run.
    let cells = |args: &[&str]| -> (std::process::Output, Vec<(PathBuf, bool)>) {
        let out = lcx()
            .args([
                "run",
                file.to_str().unwrap(),
                "--db",
                "x.db",
                "--plain",
                "--arms",
                "a,stops-early",
            ])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let tmp = dir.path().join("runs/tmp");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&tmp)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        found.sort();
        let found = found
            .into_iter()
            .map(|f| {
                let log = walkdir::WalkDir::new(&f)
                    .into_iter()
                    .any(|e| e.is_ok_and(|e| e.file_name() == "train.log"));
                std::fs::remove_dir_all(&f).unwrap();
                (f, log)
            })
            .collect();
        (out, found)
    };
    let (out, left) = cells(&[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "one cell stops after 1 of 2 iterations"
    );
    assert_eq!(
        left.len(),
        1,
        "only the failed cell's folder stays: {left:?}"
    );
    let store = lcx_core::store::Store::open_read_only(&dir.path().join("x.db")).unwrap();
    let runs = store.runs(1).unwrap();
    let failed = runs.iter().find(|r| r.arm == "stops-early").unwrap();
    let error = failed.error.clone().unwrap_or_default();
    let name = left[0].0.file_name().unwrap().to_str().unwrap();
    assert!(
        error.contains("run directory kept") && error.contains(name),
        "{error}"
    );
    drop(store);

    let (_, kept) = cells(&["--keep-runs"]);
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept.iter().all(|(_, log)| *log), "{kept:?}");
}

/// `lcx bench graphs` trains each network twice from the same weights and
/// batches, on the eager loop and on the graph loop (run eagerly here: no
/// GPU, and it says so), and prints how far the weights ended apart; bad
/// flags exit 2 naming the flag.
#[test]
fn bench_graphs_compares_the_two_loops_and_refuses_bad_flags() {
    let out = succeed(lcx().args(["bench", "graphs", "--config", &smoke()]).args([
        "--steps",
        "5",
        "--set",
        "run.device=cpu",
    ]));
    for net in ["advantage 0", "advantage 1", "strategy"] {
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("| {net} ")))
            .unwrap_or_else(|| panic!("no row for {net}:\n{out}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!((cells[2], cells[3], cells[7]), ("5", "0", "yes"), "{row}");
        let diff: f64 = cells[4].parse().expect(row);
        assert!(diff <= 1e-5, "{row}");
        assert_eq!(cells[5], cells[6], "the two runs' losses: {row}");
    }
    assert!(out.contains("no step was replayed from a graph"), "{out}");
    for (flag, says) in [
        ("--steps=0", "--steps must be"),
        ("--tolerance=-1", "--tolerance must be"),
    ] {
        let run = lcx()
            .args(["bench", "graphs", "--config", &smoke(), flag])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(says), "{flag}: {stderr}");
    }
}

/// A run that asks for CUDA graphs says how many steps and forwards a graph
/// took, in the trainer's vocabulary: none on a CPU, where graphs do not
/// apply.
#[test]
fn graph_counts_are_written_where_graphs_are_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out = succeed(
        train_smoke()
            .args(["--set", "optimization.cuda_graphs=true"])
            .args(["--set", "traversal.cuda_graphs=true"])
            .args(["--metrics-out", "-", "--runs-dir"])
            .arg(dir.path()),
    );
    for line in out.lines() {
        let keys = assert_in_vocabulary(Writers::TRAIN, line);
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in ["perf/graphed_steps", "traversal/graphed_forwards"] {
            assert!(keys.iter().any(|k| k == key), "{key}: {line}");
            assert_eq!(v[key], 0.0, "{line}");
        }
    }
}

/// Issue 78, point 9: `--dry-run` says up front what this host will skip
/// or run in another precision, and why, without the resolved configs;
/// `--verbose` adds them.
#[test]
fn a_dry_run_summarises_what_this_host_runs_and_verbose_adds_the_configs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("amp.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"amp\"\nworkload = \"bench-trainer\"\nconfig = \"{}\"\niterations = 3\n\
             set = [\"run.device=cpu\"]\n[[arms]]\nname = \"fp32\"\n\
             [[arms]]\nname = \"gpu\"\nrequires = \"cuda\"\n\
             [[arms]]\nname = \"amp\"\nargs = [\"--amp\"]\n\
             [[arms]]\nname = \"amp-libtorch\"\nargs = [\"--amp\"]\n\
             set = [\"optimization.native_training=false\"]\n",
            smoke()
        ),
    )
    .unwrap();
    let dry = |extra: &[&str]| {
        succeed(
            lcx()
                .args(["run", file.to_str().unwrap(), "--dry-run"])
                .args(extra),
        )
    };
    let text = dry(&[]);
    let cuda = text.contains("`gpu`: skipped") as usize;
    let head = text.lines().nth(1).unwrap();
    assert!(head.starts_with("on this host: 4 cells, "), "{text}");
    assert!(head.contains("1 in fp32 where AMP was asked for"), "{text}");
    assert!(
        text.contains(
            "  - `amp-libtorch`: AMP requested, runs fp32: AMP on a CPU is lcx's bf16 training \
             step, and optimization.native_training is off"
        ),
        "{text}"
    );
    if lcx_core::bench::peak::has_avx2_fma() {
        assert!(
            text.contains("  - `amp`: AMP on the CPU: bf16 on lcx's kernel (decision 0029)"),
            "{text}"
        );
    }
    if cuda == 1 {
        assert!(head.contains(", 1 skipped"), "{text}");
    }
    assert!(!text.contains("# resolved config of arm"), "{text}");
    assert!(
        text.contains("(the resolved configs of 4 arms: add --verbose)"),
        "{text}"
    );
    let verbose = dry(&["--verbose"]);
    assert!(
        verbose.contains("# resolved config of arm `amp-libtorch`"),
        "{verbose}"
    );
    assert!(verbose.lines().count() > text.lines().count() + 100);
    // --verbose means nothing without --dry-run: refused, nothing run.
    let out = lcx()
        .args(["run", file.to_str().unwrap(), "--verbose"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
