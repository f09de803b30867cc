//! Every value an import copies, checked before its transaction commits.
//! SQLite keeps any value in any column (a text in a REAL column, a real
//! past 2^63 in an INTEGER one), so a source whose schema is lcx's can
//! still hold rows no lcx wrote, and one such row would break every
//! later read of the target (`lcx publish`, `lcx export` read them all).
//! Each column is held to its declared type, reals to finite values,
//! counts and statuses to what lcx writes, names to `crate::names`. One
//! bad value refuses the whole file, with its table, column, row and
//! value named.

use std::path::Path;

use rusqlite::Connection;

use super::refused;
use crate::store::StoreError;

/// The source experiments an import copies, by their id there: the
/// temporary table the checks and the copy read.
pub(super) const PICKED: &str = "temp.import_pick";

/// Which rows of a source table this import copies: those of the picked
/// experiments, and every row of the small tables shared by all
/// (`reports`, `host_peaks`, `metric_info`).
fn scope(table: &str) -> String {
    match table {
        "experiments" => format!("id IN (SELECT old FROM {PICKED})"),
        "runs" => format!("experiment_id IN (SELECT old FROM {PICKED})"),
        "metrics" | "metric_text" | "metric_nonfinite" => format!(
            "run_id IN (SELECT id FROM src.runs WHERE experiment_id IN (SELECT old FROM {PICKED}))"
        ),
        _ => "1".into(),
    }
}

/// What a value must be beyond its declared type, as an SQL condition on
/// `{c}` (the column), with what is expected in words. Each mirrors how
/// lcx writes the column (the statuses and directions also the tables'
/// CHECK constraints, which a writer may have switched off).
const RULES: &[(&str, &str, &str, &str)] = &[
    (
        "experiments",
        "status",
        "{c} IN ('running', 'completed', 'failed', 'interrupted')",
        "running, completed, failed or interrupted",
    ),
    (
        "experiments",
        "iterations",
        "{c} >= 1",
        "a count of at least 1",
    ),
    ("experiments", "warmup", "{c} >= 0", "a count"),
    (
        "experiments",
        "repeats",
        "{c} >= 1",
        "a count of at least 1",
    ),
    (
        "experiments",
        "uuid",
        "length({c}) BETWEEN 1 AND 64 AND {c} NOT GLOB '*[^0-9a-f-]*'",
        "a uuid (hexadecimal digits and dashes)",
    ),
    (
        "experiments",
        "plan_json",
        "CASE WHEN json_valid({c}) THEN json_type({c}) END = 'object'",
        "a JSON object",
    ),
    (
        "experiments",
        "fingerprint_json",
        "CASE WHEN json_valid({c}) THEN json_type({c}) END = 'object'",
        "a JSON object",
    ),
    (
        "experiments",
        "command_line",
        "CASE WHEN json_valid({c}) THEN json_type({c}) END = 'array'",
        "a JSON list",
    ),
    ("experiments", "git_dirty", "{c} IN (0, 1)", "0 or 1"),
    ("experiments", "cuda_available", "{c} IN (0, 1)", "0 or 1"),
    (
        "runs",
        "status",
        "{c} IN ('pending', 'running', 'completed', 'failed', 'interrupted', 'skipped')",
        "pending, running, completed, failed, interrupted or skipped",
    ),
    (
        "runs",
        "command_json",
        "CASE WHEN json_valid({c}) THEN json_type({c}) END = 'array'",
        "a JSON list",
    ),
    (
        "runs",
        "env_json",
        "CASE WHEN json_valid({c}) THEN json_type({c}) END = 'object'",
        "a JSON object",
    ),
    (
        "runs",
        "node_json",
        "CASE WHEN json_valid({c}) THEN json_type({c}) END = 'object'",
        "a JSON object",
    ),
    ("runs", "repeat", "{c} >= 1", "a count of at least 1"),
    ("runs", "attempt", "{c} >= 1", "a count of at least 1"),
    ("runs", "arm_index", "{c} >= 0", "a position (0 or more)"),
    ("runs", "iterations_done", "{c} >= 0", "a count"),
    ("runs", "warmup", "{c} >= 0", "a count"),
    (
        "metrics",
        "iteration",
        "{c} >= 1",
        "an iteration (1 or more)",
    ),
    ("metrics", "attempt", "{c} >= 1", "an attempt (1 or more)"),
    ("metrics", "superseded", "{c} IN (0, 1)", "0 or 1"),
    (
        "metric_text",
        "iteration",
        "{c} >= 1",
        "an iteration (1 or more)",
    ),
    (
        "metric_text",
        "attempt",
        "{c} >= 1",
        "an attempt (1 or more)",
    ),
    ("metric_text", "superseded", "{c} IN (0, 1)", "0 or 1"),
    (
        "metric_nonfinite",
        "iteration",
        "{c} >= 1",
        "an iteration (1 or more)",
    ),
    (
        "metric_nonfinite",
        "attempt",
        "{c} >= 1",
        "an attempt (1 or more)",
    ),
    ("metric_nonfinite", "superseded", "{c} IN (0, 1)", "0 or 1"),
    (
        "metric_nonfinite",
        "value",
        "{c} IN ('NaN', 'Infinity', '-Infinity')",
        "NaN, Infinity or -Infinity",
    ),
    (
        "metric_info",
        "direction",
        "{c} IN ('lower', 'higher', 'none')",
        "lower, higher or none",
    ),
];

/// One of `crate::names`'s rules: why a name is refused.
type NameRule = fn(&str) -> Result<(), String>;

/// The names an import holds to `crate::names`: (table, column, rule).
/// Metric names are not among them: they are whatever keys a command
/// printed, stored as printed and escaped wherever they are shown.
const NAMES: &[(&str, &str, NameRule)] = &[
    ("experiments", "name", crate::names::check_name),
    ("experiments", "hostname", crate::names::check_name),
    ("runs", "arm", crate::names::check_arm_name),
    ("runs", "arm_label", crate::names::check_visible),
];

/// The tables an import copies rows of, experiments first.
pub const TABLES: [&str; 8] = [
    "experiments",
    "runs",
    "metrics",
    "metric_text",
    "metric_nonfinite",
    "reports",
    "host_peaks",
    "metric_info",
];

/// A column's declared type and whether it takes NULL.
struct Column {
    name: String,
    declared: String,
    nullable: bool,
}

fn columns(conn: &Connection, table: &str) -> Result<Vec<Column>, StoreError> {
    // The source's schema was found identical to this database's, so
    // this database's declarations are the source's.
    Ok(crate::store::migrate::table_info(conn, "main", table)?
        .into_iter()
        .map(|(name, declared, not_null, _, _)| Column {
            name,
            declared,
            nullable: !not_null,
        })
        .collect())
}

/// The SQL condition a value of `column` in `table` meets, and what is
/// expected in words.
fn condition(table: &str, column: &Column) -> (String, String) {
    let c = format!("\"{}\"", column.name);
    let (typed, mut words) = match column.declared.as_str() {
        "INTEGER" => (format!("typeof({c}) = 'integer'"), "an integer".to_string()),
        // A REAL column stores an integer as written; both are numbers.
        // No infinity: lcx keeps non-finite values in `metric_nonfinite`.
        "REAL" => (
            format!("typeof({c}) IN ('real', 'integer') AND abs({c}) <= 1.7976931348623157e308"),
            "a finite number (lcx keeps non-finite values in metric_nonfinite)".to_string(),
        ),
        _ => (format!("typeof({c}) = 'text'"), "text".to_string()),
    };
    let mut sql = typed;
    if let Some((_, _, rule, what)) = RULES
        .iter()
        .find(|(t, col, _, _)| *t == table && *col == column.name)
    {
        sql = format!("{sql} AND ({})", rule.replace("{c}", &c));
        words = format!("{words}: {what}");
    }
    if column.nullable {
        sql = format!("{c} IS NULL OR ({sql})");
        words = format!("{words}, or NULL");
    }
    // NULL (a comparison with NULL, a JSON test of text that is no JSON)
    // is a failed condition, never an unknown one that `NOT` lets by.
    (format!("coalesce(({sql}), 0)"), words)
}

/// A stored value as SQL would write it, short and safe to print.
fn shown(conn: &Connection, table: &str, column: &str, rowid: i64) -> String {
    let quoted: String = conn
        .query_row(
            &format!("SELECT quote(\"{column}\") FROM src.{table} WHERE rowid = ?1"),
            [rowid],
            |row| row.get(0),
        )
        .unwrap_or_else(|_| "?".into());
    short(&quoted)
}

/// `text` on one line, escaped for a terminal, at most 80 characters.
pub(super) fn short(text: &str) -> String {
    let shown = crate::escape::terminal_short(text, 80);
    if crate::escape::terminal_line(text).chars().count() > 80 {
        format!("{shown} ({} characters)", text.chars().count())
    } else {
        shown
    }
}

/// Checks every value of source `table` (attached as `src`) an import of
/// the picked experiments copies; `all` checks every row of it instead
/// (the experiments table, before any is picked).
pub(super) fn check(
    conn: &Connection,
    table: &str,
    all: bool,
    source: &Path,
) -> Result<(), StoreError> {
    let scope = if all { "1".to_string() } else { scope(table) };
    let columns = columns(conn, table)?;
    let conditions: Vec<(String, String)> = columns.iter().map(|c| condition(table, c)).collect();
    let flags = conditions
        .iter()
        .map(|(sql, _)| sql.as_str())
        .collect::<Vec<_>>();
    let sql = format!(
        "SELECT rowid, {} FROM src.{table} WHERE ({scope}) AND NOT ({}) LIMIT 1",
        flags.join(", "),
        flags.join(" AND ")
    );
    let bad: Option<(i64, usize)> = {
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        match rows.next()? {
            None => None,
            Some(row) => {
                let rowid: i64 = row.get(0)?;
                let mut first = 0;
                for i in 0..conditions.len() {
                    if !row.get::<_, bool>(i + 1)? {
                        first = i;
                        break;
                    }
                }
                Some((rowid, first))
            }
        }
    };
    if let Some((rowid, i)) = bad {
        let column = &columns[i].name;
        return Err(refused(
            source,
            format!(
                "{table}.{column} of row {rowid} holds {}, where lcx expects {}",
                shown(conn, table, column, rowid),
                conditions[i].1
            ),
        ));
    }
    for (t, column, rule) in NAMES.iter().filter(|(t, _, _)| *t == table) {
        let mut stmt = conn.prepare(&format!(
            "SELECT DISTINCT \"{column}\" FROM src.{t} WHERE ({scope}) AND \"{column}\" IS NOT NULL"
        ))?;
        let names: Vec<String> = stmt
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        for name in names {
            if let Err(why) = rule(&name) {
                let rowid: i64 = conn.query_row(
                    &format!(
                        "SELECT rowid FROM src.{t} WHERE ({scope}) AND \"{column}\" = ?1 LIMIT 1"
                    ),
                    [&name],
                    |row| row.get(0),
                )?;
                return Err(refused(
                    source,
                    format!(
                        "{t}.{column} of row {rowid} is not a name lcx accepts: `{}` {}",
                        short(&name),
                        short(&why)
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_names_a_column_of_its_table() {
        let store = crate::store::Store::open_in_memory().unwrap();
        let conn = &store.conn;
        for (table, column, _, _) in RULES {
            let cols = columns(conn, table).unwrap();
            assert!(cols.iter().any(|c| c.name == *column), "{table}.{column}");
        }
        for (table, column, _) in NAMES {
            let cols = columns(conn, table).unwrap();
            assert!(cols.iter().any(|c| c.name == *column), "{table}.{column}");
        }
    }

    #[test]
    fn long_and_hostile_values_print_short_and_escaped() {
        assert_eq!(short("'abc'"), "'abc'");
        let long = "x".repeat(500);
        assert!(short(&long).ends_with("… (500 characters)"));
        assert!(!short("a\nb\u{1b}[31m").contains('\n'));
    }
}
