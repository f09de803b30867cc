//! `lcx export`: every stored value with its cell, status and warm-up
//! flag, as CSV or JSON, for pandas, polars or R; the JSON also carries
//! every stored row, so `lcx import` takes it on another machine.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use lcx_core::report::words::csv_field as csv;

use crate::args::{formats, DbArgs, Format};
use crate::db::{open_db, user_or_not};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx export --format csv > values.csv\n  lcx export option-b --format json -o option-b.jsonl\n\nColumns: experiment_id, experiment, run_id, arm, repeat, status, iteration, metric, value, warmup.\nThe reports use rows of completed cells with warmup = false.\n\nJSON: one object per line. Lines with \"record\": \"value\" hold the columns above (pandas: df = pd.read_json(f, lines=True); df = df[df.record == \"value\"]); the others hold every stored row of the experiments, so that `lcx import FILE` brings them into another database."
)]
pub struct Args {
    /// Experiment ids, `latest`, or names (every experiment of that name);
    /// every experiment when none is given.
    experiments: Vec<String>,
    #[arg(long, value_parser = formats(&[(Format::Csv, None), (Format::Json, Some("One JSON object per line (JSON Lines): the values, and the rows `lcx import` reads"))]), default_value = "csv")]
    format: Format,
    /// Write here instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let store = open_db(&args.db)?;
    let ids = crate::rename::resolve_all(&store, &args.experiments)?;
    // Into a new file beside the output, renamed over it once whole: a
    // failed export leaves the old file, and no output lands on a database.
    let mut file = match &args.output {
        Some(path) => Some(
            lcx_core::files::Replacement::create("--output", path, &[&args.db])
                .map_err(crate::errors::output_error)?,
        ),
        None => None,
    };
    let sink: Box<dyn Write + '_> = match &mut file {
        Some(file) => Box::new(file),
        None => Box::new(std::io::stdout().lock()),
    };
    // CSV has no escape for control characters: into a file or a pipe it is
    // data as recorded; onto a terminal, which would obey them, they show.
    let to_terminal = args.output.is_none() && std::io::stdout().is_terminal();
    let field = |text: &str| {
        let quoted = csv(text);
        if to_terminal {
            lcx_core::escape::terminal(&quoted).into_owned()
        } else {
            quoted
        }
    };
    let mut out = std::io::BufWriter::new(sink);
    let mut failed: Option<std::io::Error> = None;
    let mut keep = |r: std::io::Result<()>| match r {
        Ok(()) => true,
        Err(e) => {
            failed = Some(e);
            false
        }
    };
    if args.format == Format::Csv {
        let header =
            "experiment_id,experiment,run_id,arm,repeat,status,iteration,metric,value,warmup";
        keep(writeln!(out, "{header}"));
    }
    if args.format == Format::Json {
        // `--format` offers csv and json.
        store
            .for_each_dump_line(&ids, |line| {
                keep(writeln!(out, "{}", lcx_core::escape::json_visible(line)))
            })
            .map_err(user_or_not)?;
    } else {
        store
            .for_each_export_row(&ids, |row| {
                keep(writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{}",
                    row.experiment_id,
                    field(&row.experiment),
                    row.run_id,
                    field(&row.arm),
                    row.repeat,
                    row.status,
                    row.iteration,
                    field(&row.metric),
                    row.value,
                    row.warmup
                ))
            })
            .map_err(user_or_not)?;
    }
    if failed.is_none() {
        if let Err(e) = out.flush() {
            failed = Some(e);
        }
    }
    drop(out);
    match failed {
        // `lcx export | head` ends quietly, as Unix tools do.
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe && file.is_none() => Ok(0),
        Some(e) => Err(anyhow::Error::new(e).context("writing the export")),
        None => {
            if let Some(file) = file {
                file.commit().map_err(crate::errors::output_error)?;
            }
            Ok(0)
        }
    }
}
