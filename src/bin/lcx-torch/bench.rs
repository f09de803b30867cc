//! `lcx bench …`: micro-benchmarks of the engine and the networks. This
//! file parses the flags and prints; the timings are lcx-core's `bench`
//! and lcx-trainer's `bench` (whatever needs libtorch), and so are the
//! metric lines, typed where they are defined.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use lcx_cli::{bad_input, metrics_sink};
use lcx_core::bench::forward::{self, ForwardOptions};
use lcx_core::config::{self, TrainerConfig};
use lcx_core::text::markdown_table;
use lcx_trainer::{device, probe::ForwardProbe};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx bench trainer --both\n  lcx bench forward --batch-sizes 1,64,1024\n  lcx bench peak"
)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, clap::Subcommand)]
enum Which {
    /// Time one network forward per batch size (the config's network).
    Forward(ForwardArgs),
    /// Time the rules engine on one thread: random games/s, clone, encode.
    Engine(EngineArgs),
    /// Time one advantage pass (both players) + one strategy pass, fp32 (and AMP).
    Trainer(TrainerArgs),
    /// The machine's FP32 ceiling now: an FMA loop on one and on all cores,
    /// and streaming memory bandwidth (under a second).
    Peak(PeakArgs),
    /// Whether a training step replayed from a CUDA graph takes the eager
    /// step: each network trained twice from the same weights and batches.
    Graphs(GraphsArgs),
}

#[derive(Debug, clap::Args)]
#[command(
    long_about = "Trains each of the three networks `--steps` steps twice, from the same \
weights and the same batches: once on the GPU's eager loop, once with each step after a \
short warm-up replayed from a CUDA graph (optimization.cuda_graphs), and prints how far \
the weights ended apart. Exit 0 when every network agrees within --tolerance, 1 when \
one does not. Without a GPU the graph loop runs its code eagerly (0 graphed steps, said \
so): the check then holds the loop's bookkeeping, not a replay."
)]
struct GraphsArgs {
    /// Trainer config whose network, batch sizes and precision are used
    /// [default: configs/default.toml as shipped].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override a config key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Steps of each network in each run.
    #[arg(long, default_value_t = 64)]
    steps: u32,
    /// The largest difference of a weight allowed between the two runs.
    #[arg(long, default_value_t = 1e-5)]
    tolerance: f64,
    /// auto, cpu, cuda or cuda:N [default: the config's run.device].
    #[arg(long)]
    device: Option<String>,
}

#[derive(Debug, clap::Args)]
struct PeakArgs {
    /// Also time a libtorch matrix product on this device (cpu, cuda,
    /// cuda:N): the ceiling a GPU's phases are read against.
    #[arg(long)]
    device: Option<String>,
    /// Size of the matrix product's square matrices.
    #[arg(long, default_value_t = 2048)]
    matmul_size: i64,
    /// Write the figures as one JSON line to PATH (`-` = stdout; the table
    /// then goes to stderr).
    #[arg(long, value_name = "PATH")]
    metrics_out: Option<PathBuf>,
    /// Probe now even when this host's ceiling of this boot is cached (the
    /// cache still keeps the best value seen).
    #[arg(long)]
    refresh: bool,
}

#[derive(Debug, clap::Args)]
struct EngineArgs {
    /// Timed uniformly random full games.
    #[arg(long, default_value_t = 20_000)]
    games: u64,
    /// Repetitions of each micro-measurement (clone, apply+undo, encode).
    #[arg(long, default_value_t = 2_000_000)]
    micro_iters: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// table or json.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    format: String,
    /// Write the figures as one JSON metric line to PATH (`-` = stdout; the
    /// table then goes to stderr).
    #[arg(long, value_name = "PATH")]
    metrics_out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct TrainerArgs {
    /// Trainer config whose update counts, batch sizes and network are used
    /// [default: configs/default.toml as shipped].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override a config key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Time the AMP (fp16 autocast + grad scaler) trainer instead of fp32.
    /// Where AMP cannot run (no CUDA) the steps run in fp32 and each line
    /// says so (`precision: "fp32"`, `precision_requested: "amp"`).
    #[arg(long, conflicts_with = "both")]
    amp: bool,
    /// Time fp32, then AMP, and print the speedup (when AMP really ran).
    /// For reading at a terminal: an experiment's cell measures one mode,
    /// so `lcx run` refuses it.
    #[arg(long)]
    both: bool,
    /// Timed runs per mode.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// auto, cpu, cuda or cuda:N [default: the config's run.device].
    #[arg(long)]
    device: Option<String>,
    /// Write one JSON object per timed run to PATH (`-` = stdout).
    #[arg(long, value_name = "PATH")]
    metrics_out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct ForwardArgs {
    /// Trainer config whose network is timed [default: configs/default.toml as shipped].
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override a config key, e.g. `--set network.hidden_size=256` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Comma-separated batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256,1024")]
    batch_sizes: Vec<usize>,
    /// auto, cpu, cuda or cuda:N [default: the config's run.device].
    #[arg(long)]
    device: Option<String>,
    /// libtorch intra-op threads [default: libtorch's choice].
    #[arg(long)]
    threads: Option<usize>,
    /// Forwards per timed repetition [default: calibrated to ~0.1 s].
    #[arg(long)]
    iters: Option<usize>,
    /// Timed repetitions per batch size (one JSON line each).
    #[arg(long, default_value_t = 10)]
    reps: usize,
    /// Write one JSON object per timed repetition to PATH (`-` = stdout; the
    /// table then goes to stderr).
    #[arg(long, value_name = "PATH")]
    metrics_out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.which {
        Which::Forward(a) => forward(a),
        Which::Engine(a) => engine(a),
        Which::Trainer(a) => trainer(a),
        Which::Peak(a) => peak(a),
        Which::Graphs(a) => graphs(a),
    }
}

fn graphs(args: GraphsArgs) -> anyhow::Result<u8> {
    if args.steps == 0 {
        return Err(bad_input(anyhow::anyhow!("--steps must be ≥ 1")));
    }
    if args.tolerance.is_nan() || args.tolerance < 0.0 {
        return Err(bad_input(anyhow::anyhow!(
            "--tolerance must be a number ≥ 0, got {}",
            args.tolerance
        )));
    }
    let (mut cfg, device) = config_on(args.config.as_deref(), &args.sets, args.device.as_deref())?;
    cfg.optimization.advantage_updates_per_iteration = args.steps;
    cfg.optimization.strategy_updates_per_iteration = args.steps;
    let amp = cfg.run.use_amp;
    let mut trainer = lcx_trainer::bench::synthetic_trainer(cfg, amp)?;
    let mut table = markdown_table();
    table.set_header([
        "network",
        "steps",
        "graphed steps",
        "max abs Δ weight",
        "loss eager",
        "loss graphed",
        "agrees",
    ]);
    let (mut all, mut graphed) = (true, 0);
    let loss = |l: Option<f64>| l.map_or("-".into(), |l| format!("{l:.6}"));
    for (net, name) in ["advantage 0", "advantage 1", "strategy"]
        .iter()
        .enumerate()
    {
        let a = trainer
            .graph_agreement(net, args.steps)
            .with_context(|| format!("the {name} network"))?;
        let agrees = a.max_abs_diff <= args.tolerance;
        graphed += a.graphed;
        all &= agrees;
        table.add_row([
            name.to_string(),
            a.steps.to_string(),
            a.graphed.to_string(),
            format!("{:.3e}", a.max_abs_diff),
            loss(a.loss_eager),
            loss(a.loss_graph),
            if agrees { "yes" } else { "NO" }.to_string(),
        ]);
    }
    println!(
        "device {device:?}, {}, tolerance {:e}\n{table}",
        trainer.precision(),
        args.tolerance
    );
    if graphed == 0 {
        println!(
            "no step was replayed from a graph: without a GPU the graph loop runs its code \
             eagerly, and on one the first {} steps are its eager warm-up",
            lcx_trainer::run::train::GRAPH_WARM_UP
        );
    }
    Ok(if all { 0 } else { 1 })
}

fn peak(args: PeakArgs) -> anyhow::Result<u8> {
    use lcx_core::bench::peak_line::{peak_text, PeakLine};
    if args.matmul_size < 1 {
        return Err(bad_input(anyhow::anyhow!("--matmul-size must be ≥ 1")));
    }
    let device = match &args.device {
        None => None,
        Some(d) => Some(
            device::resolve(d).map_err(|e| bad_input(anyhow::Error::new(e).context("--device")))?,
        ),
    };
    // Opened (and a bad path refused) before the probe, not after.
    let mut sink = metrics_sink(args.metrics_out.as_ref())?;
    let known = lcx_core::experiment::fingerprint::known_ceiling(None, args.refresh);
    let rates = device
        .map(|d| lcx_trainer::bench::device_rates(d, args.matmul_size))
        .transpose()?;
    let bf16 = lcx_core::bench::peak::measure_bf16();
    if let Some(out) = sink.as_mut() {
        let line = PeakLine::new(&known, rates.as_ref(), bf16.as_ref()).to_json();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .context("writing --metrics-out")?;
    }
    let text = peak_text(&known, rates.as_ref(), bf16.as_ref());
    if args
        .metrics_out
        .as_ref()
        .is_some_and(|p| p.as_os_str() == "-")
    {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
    Ok(0)
}

/// Without `--config`, configs/default.toml as shipped, so that a bench
/// works from any directory.
fn load_config(path: Option<&std::path::Path>, sets: &[String]) -> anyhow::Result<TrainerConfig> {
    config::load_bench(path, sets).map_err(bad_input)
}

/// The config with `--device` (when given) as its `run.device`, and that
/// device resolved; a bad device is the user's error (exit 2).
fn config_on(
    path: Option<&std::path::Path>,
    sets: &[String],
    device: Option<&str>,
) -> anyhow::Result<(TrainerConfig, device::Device)> {
    let mut cfg = load_config(path, sets)?;
    if let Some(d) = device {
        cfg.run.device = d
            .parse()
            .map_err(|e: String| bad_input(anyhow::anyhow!("--device {d}: {e}")))?;
    }
    let device = device::resolve(&cfg.run.device.to_string())
        .map_err(|e| bad_input(anyhow::Error::new(e).context("--device")))?;
    Ok((cfg, device))
}

fn forward(args: ForwardArgs) -> anyhow::Result<u8> {
    if args.batch_sizes.is_empty() || args.batch_sizes.contains(&0) {
        return Err(bad_input(anyhow::anyhow!(
            "--batch-sizes must be a comma-separated list of sizes ≥ 1"
        )));
    }
    if args.reps == 0 || args.iters == Some(0) || args.threads == Some(0) {
        return Err(bad_input(anyhow::anyhow!(
            "--reps, --iters and --threads must be ≥ 1"
        )));
    }
    let cfg = load_config(args.config.as_deref(), &args.sets)?;
    let device_spec = args.device.unwrap_or_else(|| cfg.run.device.to_string());
    let device = device::resolve(&device_spec)
        .map_err(|e| bad_input(anyhow::Error::new(e).context("--device")))?;
    if let Some(n) = args.threads {
        device::set_torch_threads(n);
    }
    let input_dim = lcx_core::encoding::input_dim_for(&cfg);
    let spec = lcx_trainer::network_spec(&cfg, input_dim);
    let traced = cfg.network.jit == lcx_core::config::JitMode::Trace;
    let probe = ForwardProbe::new(
        spec,
        device,
        i64::try_from(cfg.run.seed).unwrap_or(0),
        traced,
        cfg.network.native_forward,
    )?;
    let options = ForwardOptions {
        batch_sizes: args.batch_sizes,
        reps: args.reps,
        iters: args.iters,
        ..ForwardOptions::default()
    };
    let mut sink = metrics_sink(args.metrics_out.as_ref())?;
    let to_stdout = args
        .metrics_out
        .as_ref()
        .is_some_and(|p| p.as_os_str() == "-");
    let (intra, _) = device::torch_threads();
    let backend = if probe.is_native() {
        // The kernel is single-threaded: a traversal worker runs one.
        format!(
            "lcx kernel, {} (network.native_forward), 1 thread",
            lcx_trainer::kernel::native::kernel_isa().unwrap_or("?")
        )
    } else {
        format!("libtorch, {intra} intra-op thread(s)")
    };
    let header = format!(
        "network {}→{}×{}→{} ({} parameters, {:?}{}), device {device:?}, {backend}",
        spec.input_dim,
        spec.hidden_size,
        spec.num_layers,
        spec.outputs,
        spec.parameter_count(),
        spec.activation,
        if traced { ", TorchScript-traced" } else { "" },
    );
    if probe.is_native() && args.threads.is_some_and(|n| n > 1) {
        eprintln!(
            "note: --threads sets libtorch's threads; the lcx kernel runs on one \
             (add --set network.native_forward=false to time libtorch)"
        );
    }
    let mut write_err = None;
    let rows = forward::run(&probe, &options, |sample| {
        if let Some(out) = sink.as_mut() {
            let line = serde_json::to_string(sample).unwrap_or_default();
            if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
                write_err.get_or_insert(e);
            }
        }
    })?;
    if let Some(e) = write_err {
        return Err(anyhow::Error::new(e).context("writing --metrics-out"));
    }
    let mut table = markdown_table();
    table.set_header(["batch", "µs/call", "µs/state", "speedup vs bs 1"]);
    for row in &rows {
        table.add_row([
            row.batch_size.to_string(),
            format!("{:.1}", row.us_per_call),
            format!("{:.2}", row.us_per_state),
            format!("{:.2}×", row.speedup_vs_first),
        ]);
    }
    let text = format!("{header}\n{table}");
    if to_stdout {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
    Ok(0)
}

fn engine(args: EngineArgs) -> anyhow::Result<u8> {
    if args.games == 0 || args.micro_iters == 0 {
        return Err(bad_input(anyhow::anyhow!(
            "--games and --micro-iters must be ≥ 1"
        )));
    }
    let options = lcx_core::bench::engine::EngineBenchOptions {
        games: args.games,
        micro_iters: args.micro_iters,
        seed: args.seed,
        ..Default::default()
    };
    // Opened (and a bad path refused) before the bench, not after.
    let mut sink = metrics_sink(args.metrics_out.as_ref())?;
    let r = lcx_core::bench::engine::run(&options)?;
    if let Some(out) = sink.as_mut() {
        let line = r.metric_line();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .context("writing --metrics-out")?;
    }
    let to_stdout = args
        .metrics_out
        .as_ref()
        .is_some_and(|p| p.as_os_str() == "-");
    if args.format == "json" && !to_stdout {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(0);
    }
    let mut table = markdown_table();
    table.set_header(["measure", "value"]);
    table.add_row([
        "random full games/s (one thread)".to_string(),
        format!("{:.0}", r.games_per_second),
    ]);
    table.add_row([
        "actions/s".to_string(),
        format!("{:.0}", r.actions_per_second),
    ]);
    table.add_row([
        "mean actions/game".to_string(),
        format!("{:.1}", r.mean_actions_per_game),
    ]);
    table.add_row(["ns/action".to_string(), format!("{:.1}", r.ns_per_action)]);
    table.add_row([
        format!("clone ns ({} bytes)", r.state_bytes),
        format!("{:.1}", r.clone_ns),
    ]);
    table.add_row([
        "apply+undo ns".to_string(),
        format!("{:.1}", r.apply_undo_ns),
    ]);
    table.add_row([
        format!("encode µs ({} floats)", r.encode_dim),
        format!("{:.3}", r.encode_ns / 1000.0),
    ]);
    let text = format!("{} games, {:.2} s\n{table}", r.games, r.seconds);
    if to_stdout {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
    Ok(0)
}

fn trainer(args: TrainerArgs) -> anyhow::Result<u8> {
    use lcx_trainer::bench::{modes, time_modes, TrainerBenchEvent};
    if args.runs == 0 {
        return Err(bad_input(anyhow::anyhow!("--runs must be ≥ 1")));
    }
    let (cfg, device) = config_on(args.config.as_deref(), &args.sets, args.device.as_deref())?;
    let mut sink = metrics_sink(args.metrics_out.as_ref())?;
    let to_stdout = args
        .metrics_out
        .as_ref()
        .is_some_and(|p| p.as_os_str() == "-");
    let modes = modes(args.both, args.amp || cfg.run.use_amp);
    let timings = time_modes(&cfg, modes, args.warmup, args.runs, |event| {
        match event {
            TrainerBenchEvent::AmpFallsBack(why) => {
                eprintln!("note: the amp mode on {device:?} trains in fp32: {why}");
            }
            TrainerBenchEvent::Sample(sample) => {
                if let Some(out) = sink.as_mut() {
                    let line = serde_json::to_string(sample).context("writing --metrics-out")?;
                    writeln!(out, "{line}")
                        .and_then(|()| out.flush())
                        .context("writing --metrics-out")?;
                }
            }
        }
        anyhow::Ok(())
    })?;
    let o = &cfg.optimization;
    let mut table = markdown_table();
    table.set_header(["mode", "training", "mean ms", "p50 ms", "p95 ms"]);
    for m in &timings.modes {
        let (mean, p50, p95) = m.ms;
        let shown = if m.precision == m.requested {
            m.requested.to_string()
        } else if lcx_core::bench::trainer::ran_as_asked(m.requested, m.precision) {
            format!("{} ({})", m.requested, m.precision)
        } else {
            // The report's words for the same mismatch (report/builder/);
            // the reason was said above the table.
            format!(
                "{} requested, ran {}",
                m.requested.to_uppercase(),
                m.precision
            )
        };
        table.add_row([
            shown,
            m.backend.clone(),
            format!("{mean:.2}"),
            format!("{p50:.2}"),
            format!("{p95:.2}"),
        ]);
    }
    let mut text = format!(
        "device {device:?}, {} runs after {} warm-up; per run: advantage {}×{} (both players) + strategy {}×{}; initial weights digest {}\n{table}",
        args.runs, args.warmup, o.advantage_updates_per_iteration, o.advantage_batch_size,
        o.strategy_updates_per_iteration, o.strategy_batch_size, timings.digest,
    );
    // A speedup of fp32 over fp32 would be noise with a label on it.
    if let [a, b] = timings.modes.as_slice() {
        if a.precision != b.precision {
            text.push_str(&format!("\nspeedup: {:.2}x", a.ms.0 / b.ms.0));
        } else {
            text.push_str(&format!("\nno speedup: both modes ran {}", a.precision));
        }
    }
    if to_stdout {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
    Ok(0)
}
