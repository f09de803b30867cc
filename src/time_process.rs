//! `lcx time-process -- COMMAND…`: the child of a `timing = "process"` cell,
//! which runs the command once per iteration and writes a metric line for
//! each run (`lcx_core::bench::process`). The runner starts it; a report's
//! reproduce line runs it by hand.

use lcx_core::bench::cachegrind;
use lcx_core::bench::process::{time_runs, Measure, TimingError};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx time-process --iterations 10 -- sleep 0.05\n  lcx time-process --iterations 5 --subtract-shell -- sh -c 'sleep 0.05 && true'\n  lcx time-process --iterations 3 --instructions -- awk 'BEGIN{for(i=0;i<1e5;i++)s+=i}'"
)]
pub struct Args {
    /// Runs of the command (default: `LCX_ITERATIONS`, which the runner sets).
    #[arg(long, value_name = "N", value_parser = crate::args::count)]
    iterations: Option<u32>,
    /// The command is `SHELL -c STRING`: take the shell's own start-up
    /// (the mean of 30 runs of `SHELL -c ''`) off each run, as hyperfine does.
    #[arg(long)]
    subtract_shell: bool,
    /// Count each run's instructions and cache misses under valgrind's
    /// cachegrind instead of timing it (`timing = "instructions"`).
    #[arg(long)]
    instructions: bool,
    /// The command and its arguments, after `--`.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let iterations = match args.iterations {
        Some(n) => n,
        None => {
            let text = std::env::var("LCX_ITERATIONS").map_err(|_| {
                crate::errors::bad_input(anyhow::anyhow!(
                    "--iterations: not given, and LCX_ITERATIONS is not set"
                ))
            })?;
            crate::args::count(&text)
                .map_err(|e| crate::errors::bad_input(anyhow::anyhow!("LCX_ITERATIONS: {e}")))?
        }
    };
    // The shell's start-up is measured as `SHELL -c ''`: nothing else
    // says which shell it is.
    if args.subtract_shell && !matches!(args.command.get(1..3), Some([c, _]) if c == "-c") {
        return Err(crate::errors::bad_input(anyhow::anyhow!(
            "--subtract-shell: the command must be SHELL -c STRING (e.g. sh -c 'sleep 1 && true')"
        )));
    }
    let measure = if args.instructions {
        if cachegrind::find_valgrind(std::env::var_os("PATH").as_deref()).is_none() {
            return Err(crate::errors::bad_input(anyhow::anyhow!(
                "--instructions: counts each run under valgrind, and `valgrind` is not on PATH: {}",
                cachegrind::INSTALL_HINT
            )));
        }
        Measure::Instructions
    } else {
        Measure::Time
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match time_runs(
        &args.command,
        iterations,
        args.subtract_shell,
        measure,
        &mut out,
    ) {
        Ok(()) => Ok(0),
        // The command's own failure ends the cell with its code.
        Err(e @ TimingError::Failed { code, .. }) => {
            eprintln!("lcx: {}", lcx_core::escape::terminal(&e.to_string()));
            Ok(u8::try_from(code).unwrap_or(1).max(1))
        }
        Err(e) => Err(e.into()),
    }
}
