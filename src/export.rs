//! `lcx export`: every stored value with its cell, status and warm-up
//! flag, as CSV or JSON, for pandas, polars or R; the JSON also carries
//! every stored row, so `lcx import` takes it on another machine.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use lcx_core::store::report_read::ExportRow;
use lcx_core::store::Store;

use lcx_core::report::words::csv_field as csv;

use crate::args::{formats, DbArgs, Format};
use crate::db::{open_db, user_or_not};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  lcx export --format csv > values.csv\n  lcx export option-b --format json -o option-b.jsonl\n\nColumns: experiment_id, experiment, run_id, arm, repeat, status, iteration, metric, value, warmup, host, date, commit, then one per sweep axis (its short name: the arm's value there, empty for an arm of no sweep).\nhost: the experiment's host name (LCX_HOSTNAME or the machine's); date: when it was created (UTC); commit: its git commit.\nThe reports use rows of completed cells with warmup = false.\n\nJSON: one object per line. Lines with \"record\": \"value\" hold the columns above (pandas: df = pd.read_json(f, lines=True); df = df[df.record == \"value\"]); the others hold every stored row of the experiments, so that `lcx import FILE` brings them into another database."
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
    let axes = Axes::of(&store, &ids).map_err(user_or_not)?;
    if args.format == Format::Csv {
        let mut header = format!("{FIXED_COLUMNS},host,date,commit");
        for name in &axes.names {
            header.push(',');
            header.push_str(&field(name));
        }
        keep(writeln!(out, "{header}"));
    }
    if args.format == Format::Json {
        // `--format` offers csv and json.
        store
            .for_each_dump_line_with(
                &ids,
                |row| {
                    axes.of_row(row)
                        .into_iter()
                        .filter_map(|(name, value)| {
                            Some((name.clone(), serde_json::Value::String(value?.clone())))
                        })
                        .collect()
                },
                |line| keep(writeln!(out, "{}", lcx_core::escape::json_visible(line))),
            )
            .map_err(user_or_not)?;
    } else {
        store
            .for_each_export_row(&ids, |row| {
                let mut extra = String::new();
                for (_, value) in axes.of_row(row) {
                    extra.push(',');
                    extra.push_str(&value.map(|v| field(v)).unwrap_or_default());
                }
                keep(writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{}{extra}",
                    row.experiment_id,
                    field(&row.experiment),
                    row.run_id,
                    field(&row.arm),
                    row.repeat,
                    row.status,
                    row.iteration,
                    field(&row.metric),
                    row.value,
                    row.warmup,
                    row.host.as_deref().map(&field).unwrap_or_default(),
                    field(&row.date),
                    row.commit.as_deref().map(&field).unwrap_or_default(),
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

/// The columns every export starts with.
const FIXED_COLUMNS: &str =
    "experiment_id,experiment,run_id,arm,repeat,status,iteration,metric,value,warmup";

/// The sweep axes of the exported experiments: their columns, and each
/// arm's value on them. The store holds no point but inside the stored
/// plan, so they are read from there.
#[derive(Default)]
struct Axes {
    /// One per axis short name, in the order the experiments name them;
    /// `sweep_NAME` where the name is already a column.
    names: Vec<String>,
    /// (experiment, arm) → (column, value) of each axis of its point.
    points: HashMap<(i64, String), Vec<(usize, String)>>,
}

impl Axes {
    fn of(store: &Store, ids: &[i64]) -> Result<Axes, lcx_core::store::StoreError> {
        let mut axes = Axes::default();
        for e in store.experiments(None)? {
            if !ids.is_empty() && !ids.contains(&e.id) {
                continue;
            }
            // A plan this lcx cannot read has no axes to add: its values
            // are still exported.
            let Ok(plan) = lcx_core::experiment::Plan::from_stored(&e.plan_json) else {
                continue;
            };
            let Some(sweep) = &plan.sweep else {
                continue;
            };
            let columns: Vec<usize> = sweep.axes.iter().map(|a| axes.column(&a.short)).collect();
            for arm in &plan.arms {
                if let Some(point) = &arm.sweep {
                    let values = columns.iter().copied().zip(point.values.iter().cloned());
                    axes.points
                        .insert((e.id, arm.name.clone()), values.collect());
                }
            }
        }
        Ok(axes)
    }

    /// The column of axis `short`, added when new.
    fn column(&mut self, short: &str) -> usize {
        let taken = FIXED_COLUMNS
            .split(',')
            // `record` opens every JSON line.
            .chain(["host", "date", "commit", "record"])
            .any(|c| c == short);
        let name = if taken {
            format!("sweep_{short}")
        } else {
            short.to_string()
        };
        match self.names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                self.names.push(name);
                self.names.len() - 1
            }
        }
    }

    /// Each axis column with `row`'s arm's value there, if any.
    fn of_row(&self, row: &ExportRow) -> Vec<(&String, Option<&String>)> {
        let point = self.points.get(&(row.experiment_id, row.arm.clone()));
        self.names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let value = point.and_then(|p| p.iter().find(|(c, _)| *c == i).map(|(_, v)| v));
                (name, value)
            })
            .collect()
    }
}
