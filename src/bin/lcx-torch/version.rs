//! `lcx version [--verbose|--json]` and `lcx --version`: lcx's own version,
//! with `--verbose` what libtorch reports at run time. `--json` is how a
//! runner (which never loads libtorch) learns it for an experiment's
//! fingerprint. (`lcx` itself answers the bare forms without starting this
//! binary: `light::short_version`.)

use lcx_core::experiment::fingerprint::TorchFacts;
use lcx_trainer::device;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  lcx version --verbose\n  lcx version --json")]
pub struct Args {
    /// Also the torch version and whether CUDA is available (loads libtorch).
    #[arg(short, long, conflicts_with = "json")]
    verbose: bool,
    /// Print the facts as one JSON object (the fingerprint's torch fields).
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Args) -> anyhow::Result<u8> {
    if args.json {
        println!("{}", serde_json::to_string(&facts())?);
    } else if args.verbose {
        println!("lcx {}", long_version());
    } else {
        println!("lcx {}", env!("CARGO_PKG_VERSION"));
    }
    Ok(0)
}

/// Asks libtorch; loads the CUDA runtime when it is present, so only call
/// this when the version is asked for.
fn facts() -> TorchFacts {
    let cuda_available = device::cuda_available();
    let (intra, inter) = device::torch_threads();
    TorchFacts {
        lcx_version: env!("CARGO_PKG_VERSION").to_string(),
        torch_version: device::torch_version().to_string(),
        cuda_available,
        cuda_devices: if cuda_available {
            device::cuda_device_count()
        } else {
            0
        },
        torch_intra_threads: intra,
        torch_inter_threads: inter,
    }
}

/// "0.1.0 (torch 2.11.0+cu130, CUDA available: no)".
fn long_version() -> String {
    let facts = facts();
    let cuda = if facts.cuda_available {
        format!("yes, {} device(s)", facts.cuda_devices)
    } else {
        "no".to_string()
    };
    format!(
        "{} (torch {}, CUDA available: {cuda}, CUDA graphs: {})",
        facts.lcx_version,
        facts.torch_version,
        if lcx_trainer::nn::graph::built_with_cuda() {
            "built in"
        } else {
            "not built in (libtorch without CUDA)"
        }
    )
}
