//! `lcx query "SQL"`: read-only SQL against the store, printed as a table,
//! CSV or JSON. The database is opened with `SQLITE_OPEN_READ_ONLY` and
//! `PRAGMA query_only`, and statements that could write are refused.

use std::path::PathBuf;

use comfy_table::{presets::ASCII_MARKDOWN, Table};

use crate::report::render::csv_field;
use crate::store::{SqlValue, Store};

use super::report::user_or_not;

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
    /// The SQLite database.
    #[arg(long, env = "LCX_DB", default_value = crate::store::DEFAULT_DB)]
    db: PathBuf,
}

fn text(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => String::new(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => f.to_string(),
        SqlValue::Text(t) => t.clone(),
        SqlValue::Blob(b) => format!("<blob {} bytes>", b.len()),
    }
}

fn json(v: &SqlValue) -> serde_json::Value {
    match v {
        SqlValue::Null => serde_json::Value::Null,
        SqlValue::Integer(i) => (*i).into(),
        SqlValue::Real(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        SqlValue::Text(t) => t.clone().into(),
        SqlValue::Blob(b) => format!("<blob {} bytes>", b.len()).into(),
    }
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    // Every StoreError from opening names the path itself.
    let store = Store::open_query_only(&args.db).map_err(user_or_not)?;
    // Any failure of the statement itself (syntax, unknown table, a write)
    // is the user's SQL.
    let result = store.query(&args.sql).map_err(crate::cli::bad_input)?;
    match args.format {
        Format::Table => {
            let mut t = Table::new();
            t.load_preset(ASCII_MARKDOWN);
            t.set_header(result.columns.clone());
            for row in &result.rows {
                t.add_row(row.iter().map(text).collect::<Vec<_>>());
            }
            println!("{t}");
            eprintln!(
                "({} row{})",
                result.rows.len(),
                if result.rows.len() == 1 { "" } else { "s" }
            );
        }
        Format::Csv => {
            let header: Vec<String> = result.columns.iter().map(|c| csv_field(c)).collect();
            println!("{}", header.join(","));
            for row in &result.rows {
                let cells: Vec<String> = row.iter().map(|v| csv_field(&text(v))).collect();
                println!("{}", cells.join(","));
            }
        }
        Format::Json => {
            let rows: Vec<serde_json::Value> = result
                .rows
                .iter()
                .map(|row| {
                    let obj: serde_json::Map<String, serde_json::Value> = result
                        .columns
                        .iter()
                        .cloned()
                        .zip(row.iter().map(json))
                        .collect();
                    serde_json::Value::Object(obj)
                })
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&rows).unwrap_or_default()
            );
        }
    }
    Ok(0)
}
