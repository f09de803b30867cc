//! `lcx query "SQL"`: read-only SQL against the store, printed as a table,
//! CSV or JSON. The database is opened with `SQLITE_OPEN_READ_ONLY` and
//! `PRAGMA query_only`, and statements that could write are refused. A
//! statement runs at most `--timeout` seconds (30 by default, 0: no limit),
//! whatever the format: one typed by hand can run for ever (a recursive CTE
//! without an end), and nothing else would stop it but a signal.

use std::time::Duration;

use lcx_core::report::rows;
use lcx_core::store::{Store, StoreError};
use lcx_core::text::counted;

use crate::args::{formats, DbArgs, Format};
use crate::db::user_or_not;

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  lcx query 'SELECT name, status FROM experiments' --format csv")]
pub struct Args {
    /// One SQL statement (read-only), e.g. "SELECT * FROM arm_metric_stats".
    sql: String,
    #[arg(long, value_parser = formats(&[(Format::Table, None), (Format::Csv, None), (Format::Json, None)]), default_value = "table")]
    format: Format,
    /// Interrupt the statement after this many seconds (exit 1); 0: no limit.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    timeout: u64,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    // Every StoreError from opening names the path itself.
    let mut store = Store::open_query_only(&args.db).map_err(user_or_not)?;
    let limit = (args.timeout > 0).then(|| Duration::from_secs(args.timeout));
    let result = store.query_within(&args.sql, limit).map_err(|e| match e {
        // The statement was fine; it ran out of time. Not a usage error
        // (exit 1), so a script can tell it from bad SQL (exit 2).
        StoreError::Interrupted { .. } => anyhow::anyhow!(
            "query interrupted after {} s (--timeout); give a larger --timeout, or \
             --timeout 0 for no limit",
            args.timeout
        ),
        // Any other failure of the statement itself (syntax, unknown
        // table, a write) is the user's SQL.
        other => crate::bad_input(other),
    })?;
    match args.format {
        // `--format` offers table, csv and json; a table is markdown (and
        // the parser refuses comment, a report's alone).
        Format::Table | Format::Markdown | Format::Comment => {
            println!("{}", rows::table(&result));
            eprintln!("({})", counted(result.rows.len() as u64, "row"));
        }
        Format::Csv => println!("{}", crate::data_for_stdout(&rows::csv(&result))),
        Format::Json => println!("{}", rows::json_array(&result)),
    }
    Ok(0)
}
