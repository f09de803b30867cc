//! `lcx system show` / `lcx system check`: what on this machine affects
//! measurements, and which of it will add noise, with the command that
//! fixes each (lcx changes no setting itself). Both read `/proc` and `/sys`
//! (under `--root`, for tests) and `nvidia-smi` where it is installed.

use std::path::PathBuf;
use std::time::Duration;

use crate::args::{formats, Format};
use lcx_core::system::check::{self, Item, State};
use lcx_core::system::snapshot::Snapshot;
use lcx_core::system::Root;

/// How long the foreign CPU is sampled.
const SAMPLE: Duration = Duration::from_secs(1);

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  lcx system show\n  lcx system check")]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// The CPU governor, turbo, SMT, isolated CPUs, load, other programs'
    /// CPU now, memory and swap, GPU clocks.
    Show {
        /// `table` (markdown) or `json`.
        #[arg(long, value_parser = formats(&[(Format::Table, None), (Format::Json, None)]), default_value = "table")]
        format: Format,
        #[command(flatten)]
        root: RootArg,
    },
    /// Which settings will add noise, each with the command that fixes it;
    /// exits 1 when any will, 0 when none (unknown ones do not count).
    Check {
        #[command(flatten)]
        root: RootArg,
    },
}

#[derive(Debug, clap::Args)]
struct RootArg {
    /// Read /proc and /sys under DIR instead of / (a fake tree in tests).
    #[arg(
        long,
        value_name = "DIR",
        env = "LCX_SYSTEM_ROOT",
        hide = true,
        default_value = "/"
    )]
    root: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let root = match &args.command {
        Sub::Show { root, .. } | Sub::Check { root } => &root.root,
    };
    if !root.is_dir() {
        return Err(crate::bad_input(anyhow::anyhow!(
            "--root {}: expected a folder to read proc/ and sys/ under",
            root.display()
        )));
    }
    match args.command {
        Sub::Show { format, root } => {
            let items = read(&root);
            // `--format` offers table and json.
            if format == Format::Json {
                jsonln!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                let mut t = lcx_core::text::markdown_table();
                t.set_header(vec!["Setting", "Value"]);
                for it in &items {
                    t.add_row(vec![it.label, &it.value]);
                }
                outln!("{t}");
            }
            Ok(0)
        }
        Sub::Check { root } => {
            let items = read(&root);
            out!("{}", check_text(&items));
            Ok(u8::from(items.iter().any(|i| i.state == State::Bad)))
        }
    }
}

fn read(root: &RootArg) -> Vec<Item> {
    check::items(&Snapshot::take(&Root::new(&root.root), SAMPLE, true))
}

/// One line per judged setting, the fixes under the bad ones, and a count.
fn check_text(items: &[Item]) -> String {
    let mut out = String::new();
    let judged: Vec<&Item> = items.iter().filter(|i| i.state != State::Info).collect();
    for it in &judged {
        let word = match it.state {
            State::Fine => "fine",
            State::Bad => "BAD",
            State::Unknown | State::Info => "unknown",
        };
        out.push_str(&format!("{word:<8} {}: {}\n", it.label, it.value));
        if let (Some(why), Some(fix)) = (&it.why, &it.fix) {
            out.push_str(&format!("         why: {why}\n         fix: {fix}\n"));
        }
    }
    let count = |state| judged.iter().filter(|i| i.state == state).count();
    let (bad, unknown) = (count(State::Bad), count(State::Unknown));
    out.push('\n');
    out.push_str(&match bad {
        0 => format!("no setting will add noise ({unknown} unknown)\n"),
        n => format!(
            "{n} of {} settings will add noise ({unknown} unknown); lcx changes none itself: \
             run the fix commands above\n",
            judged.len()
        ),
    });
    out
}
