//! `lcx query "SQL"`: read-only SQL against the store, printed as a table,
//! CSV or JSON. The database is opened with `SQLITE_OPEN_READ_ONLY` and
//! `PRAGMA query_only`, and statements that could write are refused.

use lcx_core::report::render::counted;
use lcx_core::report::rows;
use lcx_core::store::Store;

use super::report::user_or_not;
use crate::args::DbArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// One SQL statement (read-only), e.g. "SELECT * FROM arm_metric_stats".
    sql: String,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    #[command(flatten)]
    db: DbArgs,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    // Every StoreError from opening names the path itself.
    let store = Store::open_query_only(&args.db).map_err(user_or_not)?;
    // Any failure of the statement itself (syntax, unknown table, a write)
    // is the user's SQL.
    let result = store.query(&args.sql).map_err(crate::bad_input)?;
    match args.format {
        Format::Table => {
            println!("{}", rows::table(&result));
            eprintln!("({})", counted(result.rows.len() as u64, "row"));
        }
        Format::Csv => println!("{}", rows::csv(&result)),
        Format::Json => println!("{}", rows::json_array(&result)),
    }
    Ok(0)
}
