//! `lcx export --format json` as a file another lcx can import. JSON Lines:
//! a header line (`"record": "lcx-export"` with the schema version), the
//! value lines analysts read (`"record": "value"`, the columns of the CSV),
//! then every stored row of the chosen experiments as it is in its table
//! (`"record": "row"`), and an end line with the count of row lines, so a
//! file cut short is told from a whole one. The value lines are derived
//! from the rows and ignored by [`load`]; the rows are the truth.

use std::io::BufRead;
use std::path::Path;

use rusqlite::types::{Value as SqlValue, ValueRef};
use serde_json::{json, Map, Value};

use super::report_read::ExportRow;
use super::{Store, StoreError, LATEST_VERSION};

/// The header's `record`.
pub const HEADER: &str = "lcx-export";

/// Tables in the order rows are written and loaded (a row's references
/// come before it), with the rows of the chosen experiments each holds.
/// `?1` is 0 for every experiment, else `?2` is the JSON list of ids.
const TABLES: [(&str, &str); 8] = [
    ("experiments", "id IN (SELECT id FROM chosen)"),
    ("runs", "experiment_id IN (SELECT id FROM chosen)"),
    ("metrics", "run_id IN (SELECT id FROM chosen_runs)"),
    ("metric_text", "run_id IN (SELECT id FROM chosen_runs)"),
    ("metric_nonfinite", "run_id IN (SELECT id FROM chosen_runs)"),
    ("reports", "experiment_id IN (SELECT id FROM chosen)"),
    // A host's ceilings and the metric vocabulary: all of them (small),
    // since the reports of the chosen experiments read them.
    ("host_peaks", "1"),
    ("metric_info", "1"),
];

/// The chosen experiments and their cells, as common table expressions.
const CHOSEN: &str = "WITH chosen AS (SELECT id FROM experiments \
                          WHERE ?1 = 0 OR id IN (SELECT value FROM json_each(?2))), \
                      chosen_runs AS (SELECT id FROM runs \
                          WHERE experiment_id IN (SELECT id FROM chosen))";

/// A stored value as JSON; `None` for bytes, which no lcx table holds.
fn cell(value: ValueRef<'_>) -> Option<Value> {
    Some(match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        // JSON has no infinities: a non-finite real (a ratio over a zero)
        // travels tagged.
        ValueRef::Real(f) => match serde_json::Number::from_f64(f) {
            Some(n) => Value::Number(n),
            None => json!({ "real": f.to_string() }),
        },
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(_) => return None,
    })
}

/// The header line.
#[derive(serde::Serialize)]
struct Header {
    record: &'static str,
    schema: i64,
    lcx: &'static str,
}

/// A value line: the CSV's columns, after `record`.
#[derive(serde::Serialize)]
struct ValueLine<'a> {
    record: &'static str,
    #[serde(flatten)]
    row: &'a ExportRow,
    /// What the caller adds after the row's fields (a sweep's axes).
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// A stored row with its table.
#[derive(serde::Serialize)]
struct RowLine<'a> {
    record: &'static str,
    table: &'a str,
    row: Map<String, Value>,
}

#[derive(serde::Serialize)]
struct EndLine {
    record: &'static str,
    rows: u64,
}

fn text(line: &impl serde::Serialize) -> String {
    // Plain data: serde_json cannot fail on these.
    serde_json::to_string(line).unwrap_or_default()
}

impl Store {
    /// The JSON export of experiments `ids` (every one when empty), line by
    /// line as JSON text (see the module), handed to `visit` until it
    /// returns false.
    pub fn for_each_dump_line(
        &self,
        ids: &[i64],
        visit: impl FnMut(&str) -> bool,
    ) -> Result<(), StoreError> {
        self.for_each_dump_line_with(ids, |_| Map::new(), visit)
    }

    /// [`Store::for_each_dump_line`], each value line also carrying the
    /// fields `extra` gives for its row (the store knows no plan: `lcx
    /// export` adds a sweep's axes so). Keys that repeat a row's field are
    /// the caller's to avoid.
    pub fn for_each_dump_line_with(
        &self,
        ids: &[i64],
        mut extra: impl FnMut(&ExportRow) -> Map<String, Value>,
        mut visit: impl FnMut(&str) -> bool,
    ) -> Result<(), StoreError> {
        let header = Header {
            record: HEADER,
            schema: LATEST_VERSION,
            lcx: env!("CARGO_PKG_VERSION"),
        };
        // One snapshot: a runner writing meanwhile changes none of it.
        let _snapshot = self.conn.unchecked_transaction()?;
        if !visit(&text(&header)) {
            return Ok(());
        }
        let mut go_on = true;
        self.for_each_export_row(ids, |row| {
            go_on = visit(&text(&ValueLine {
                record: "value",
                row,
                extra: extra(row),
            }));
            go_on
        })?;
        if !go_on {
            return Ok(());
        }
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        let mut rows = 0u64;
        for (table, which) in TABLES {
            let mut stmt = self.conn.prepare(&format!(
                "{CHOSEN} SELECT * FROM {table} WHERE {which} ORDER BY rowid"
            ))?;
            let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
            let mut found = stmt.query(rusqlite::params![ids.len() as i64, list])?;
            while let Some(r) = found.next()? {
                let mut row = Map::new();
                for (i, name) in names.iter().enumerate() {
                    let Some(value) = cell(r.get_ref(i)?) else {
                        return Err(StoreError::Damaged {
                            path: self.path().map(Path::to_path_buf).unwrap_or_default(),
                            why: format!("{table}.{name} holds a value JSON cannot carry"),
                        });
                    };
                    row.insert(name.clone(), value);
                }
                rows += 1;
                let line = RowLine {
                    record: "row",
                    table,
                    row,
                };
                if !visit(&text(&line)) {
                    return Ok(());
                }
            }
        }
        visit(&text(&EndLine {
            record: "end",
            rows,
        }));
        Ok(())
    }
}

/// Whether the file at `path` starts as a JSON export does (its first
/// non-blank byte is `{`), rather than as an SQLite file.
pub(super) fn looks_like_json(path: &Path) -> bool {
    use std::io::Read;
    let mut start = [0u8; 64];
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let n = file.read(&mut start).unwrap_or(0);
    start[..n]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{')
}

fn refused(path: &Path, why: impl Into<String>) -> StoreError {
    StoreError::not_importable(path, why)
}

/// A JSON value as SQLite stores it.
fn sql_value(value: &Value) -> Option<SqlValue> {
    Some(match value {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64()?),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Object(o) if o.len() == 1 => match o.get("real")?.as_str()? {
            "inf" => SqlValue::Real(f64::INFINITY),
            "-inf" => SqlValue::Real(f64::NEG_INFINITY),
            "NaN" => SqlValue::Real(f64::NAN),
            _ => return None,
        },
        Value::Array(_) | Value::Object(_) => return None,
    })
}

/// The non-blank lines of a JSON export as JSON values, numbered.
struct Lines<'a, R> {
    path: &'a Path,
    lines: std::io::Lines<R>,
    number: usize,
}

impl<R: BufRead> Lines<'_, R> {
    fn next_value(&mut self) -> Result<Option<Value>, StoreError> {
        loop {
            self.number += 1;
            let Some(line) = self.lines.next() else {
                return Ok(None);
            };
            let at = self.number;
            let line = line.map_err(|e| refused(self.path, format!("line {at}: {e}")))?;
            if line.trim().is_empty() {
                continue;
            }
            // Value lines, as lcx writes them, are not read: they are
            // derived from the rows (half of a file, and of its parsing).
            if line.starts_with(r#"{"record":"value","#) {
                return Ok(Some(json!({"record": "value"})));
            }
            return serde_json::from_str(&line)
                .map(Some)
                .map_err(|e| refused(self.path, format!("line {at} is not JSON ({e})")));
        }
    }
}

/// Why line `at` of the export could not be loaded into the scratch
/// database `db`: the scratch folder full (not the file's fault, and said
/// so), or the row refused by this lcx's schema, in SQLite's words.
fn not_loaded(path: &Path, db: &Path, at: usize, table: &str, e: &rusqlite::Error) -> StoreError {
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
        return StoreError::DiskFull {
            free: super::free_bytes(db),
            path: db.to_path_buf(),
            doing: "loading an export into its working copy (TMPDIR)",
        };
    }
    refused(
        path,
        format!(
            "line {at}: a row of {table} lcx cannot store ({})",
            super::sqlite_words(e)
        ),
    )
}

/// The refusal for a file that is one JSON document over many lines (an
/// `lcx export` is one JSON value a line, its first the header), or `None`
/// where it is no JSON at all.
fn whole_document(path: &Path) -> Option<StoreError> {
    let file = std::fs::File::open(path).ok()?;
    let value: Value = serde_json::from_reader(std::io::BufReader::new(file)).ok()?;
    Some(refused(path, not_an_export(&value)))
}

/// Why a JSON value is no `lcx export`: the tool that wrote it, where its
/// shape says so, and what lcx imports.
fn not_an_export(value: &Value) -> String {
    const READS: &str = "lcx imports lcx databases and `lcx export --format json` files";
    match other_tool(value) {
        Some(tool) => format!("it is {tool}, which lcx does not import ({READS})"),
        None => format!(
            "it is JSON that is none of what lcx imports: an lcx database or an `lcx export \
             --format json` file ({READS})"
        ),
    }
}

/// The benchmarking tool whose JSON export `value` looks like, by its
/// shape (never by the file's name).
fn other_tool(value: &Value) -> Option<&'static str> {
    let benchmarks = value["benchmarks"].is_array();
    let first = &value["results"][0];
    if first.get("command").is_some()
        && (first.get("times").is_some() || first.get("mean").is_some())
    {
        Some("a hyperfine `--export-json` file")
    } else if benchmarks && value["machine_info"].is_object() {
        Some("a pytest-benchmark `--benchmark-json` file")
    } else if benchmarks && value["context"].is_object() {
        Some("a Google Benchmark `--benchmark_format=json` file")
    } else if benchmarks && (value.get("version").is_some() || value["metadata"].is_object()) {
        Some("a pyperf JSON file")
    } else {
        None
    }
}

/// Loads the JSON export at `path` into a new database at `db` (this lcx's
/// schema, ids kept), refusing, with the line, a file that is not one, is
/// cut short or comes from a newer lcx. Experiments exported without a
/// uuid get the one migration 0014 would give them.
pub(super) fn load(path: &Path, db: &Path) -> Result<(), StoreError> {
    load_rows(path, db).map_err(|e| {
        if e.is_disk_full() {
            return StoreError::DiskFull {
                free: super::free_bytes(db),
                path: db.to_path_buf(),
                doing: "loading an export into its working copy (TMPDIR)",
            };
        }
        match e {
            StoreError::Sql(e) => refused(
                path,
                format!(
                    "its working copy {} could not be written ({})",
                    db.display(),
                    super::sqlite_words(&e)
                ),
            ),
            e => e,
        }
    })
}

fn load_rows(path: &Path, db: &Path) -> Result<(), StoreError> {
    let file = std::fs::File::open(path).map_err(|e| refused(path, e.to_string()))?;
    let mut lines = Lines {
        path,
        lines: std::io::BufReader::new(file).lines(),
        number: 0,
    };
    // A file whose first line is no JSON may still be one JSON document
    // written over many lines (another tool's export): say what it is
    // rather than "line 1 is not JSON" about valid JSON.
    let header = match lines.next_value() {
        Ok(header) => header.unwrap_or(Value::Null),
        Err(e) => return Err(whole_document(path).unwrap_or(e)),
    };
    if header["record"] != HEADER {
        let why = if header.get("experiment_id").is_some() {
            "it holds values only (an `lcx export --format json` from before import): \
             export it again with this lcx, or import the database itself"
                .to_string()
        } else {
            not_an_export(&header)
        };
        return Err(refused(path, why));
    }
    let Some(schema) = header["schema"].as_i64() else {
        return Err(refused(path, "its header has no schema version"));
    };
    if schema > LATEST_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: schema,
            supported: LATEST_VERSION,
        });
    }
    drop(Store::open(db)?);
    let mut conn = rusqlite::Connection::open(db)?;
    // Exported rows keep their uuid; one without (an older export) is
    // named below as the migration names older rows, never at random.
    // A scratch copy: nothing to keep through a crash.
    conn.execute_batch(
        "DROP TRIGGER IF EXISTS experiments_uuid_on_insert;
         PRAGMA synchronous = OFF;",
    )?;
    let tx = conn.transaction()?;
    let mut known: Vec<(&str, Vec<String>)> = Vec::new();
    for (table, _) in TABLES {
        known.push((table, super::migrate::column_names(&tx, table)?));
    }
    let mut rows = 0u64;
    loop {
        let Some(line) = lines.next_value()? else {
            return Err(refused(
                path,
                format!(
                    "it is cut short after line {} (no end line)",
                    lines.number - 1
                ),
            ));
        };
        let at = lines.number;
        match line["record"].as_str() {
            Some("value") => {}
            Some("end") => {
                if line["rows"].as_u64() != Some(rows) {
                    return Err(refused(
                        path,
                        format!(
                            "its end line (line {at}) counts {} rows, but {rows} came before it",
                            line["rows"]
                        ),
                    ));
                }
                if lines.next_value()?.is_some() {
                    return Err(refused(
                        path,
                        format!(
                            "more follows its end line (line {at}): two exports in one file? \
                             import each file by itself"
                        ),
                    ));
                }
                break;
            }
            Some("row") => {
                let table = line["table"].as_str().unwrap_or_default();
                let Some((table, columns)) = known.iter().find(|(t, _)| *t == table) else {
                    return Err(refused(path, format!("line {at}: no table `{table}`")));
                };
                let Some(row) = line["row"].as_object() else {
                    return Err(refused(path, format!("line {at}: `row` is not an object")));
                };
                let mut names = Vec::new();
                let mut values = Vec::new();
                for (name, value) in row {
                    if !columns.contains(name) {
                        return Err(refused(
                            path,
                            format!("line {at}: table `{table}` has no column `{name}`"),
                        ));
                    }
                    let Some(v) = sql_value(value) else {
                        return Err(refused(
                            path,
                            format!("line {at}: {table}.{name} is not a single value"),
                        ));
                    };
                    names.push(format!("\"{name}\""));
                    values.push(v);
                }
                let marks = vec!["?"; values.len()].join(", ");
                // The scratch database has this lcx's vocabulary; the
                // file's own descriptions are the ones its reports used.
                let verb = if *table == "metric_info" {
                    "INSERT OR REPLACE"
                } else {
                    "INSERT"
                };
                // A non-finite value goes where the runner puts one it
                // reads: `metric_nonfinite`, counted on its cell, never
                // into the statistics.
                let nonfinite = (*table == "metrics")
                    .then(|| names.iter().position(|n| n == "\"value\""))
                    .flatten()
                    .and_then(|i| match &values[i] {
                        SqlValue::Real(f) => super::NonFinite::of(*f).map(|word| (i, word)),
                        _ => None,
                    });
                let table = match nonfinite {
                    Some((i, word)) => {
                        values[i] = SqlValue::Text(word.as_str().into());
                        "metric_nonfinite"
                    }
                    None => table,
                };
                // One statement per table and column list, prepared once.
                let sql = format!(
                    "{verb} INTO {table} ({}) VALUES ({marks})",
                    names.join(", ")
                );
                tx.prepare_cached(&sql)
                    .and_then(|mut insert| insert.execute(rusqlite::params_from_iter(values)))
                    .map_err(|e| not_loaded(path, db, at, table, &e))?;
                if nonfinite.is_some() {
                    let run = row.get("run_id").and_then(Value::as_i64);
                    tx.execute(
                        "UPDATE runs SET nonfinite_values = nonfinite_values + 1 WHERE id = ?1",
                        [run],
                    )
                    .map_err(|e| not_loaded(path, db, at, table, &e))?;
                }
                rows += 1;
            }
            _ => {
                return Err(refused(
                    path,
                    format!("line {at} is no record of an lcx export"),
                ))
            }
        }
    }
    super::migrate::name_older_experiments(&tx)?;
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_numbers_keep_their_sqlite_type() {
        assert_eq!(sql_value(&json!(3)), Some(SqlValue::Integer(3)));
        assert_eq!(sql_value(&json!(3.0)), Some(SqlValue::Real(3.0)));
        assert_eq!(sql_value(&json!(0.1)), Some(SqlValue::Real(0.1)));
        assert_eq!(sql_value(&json!(null)), Some(SqlValue::Null));
        assert_eq!(sql_value(&json!([1])), None);
        // Non-finite reals, tagged as `cell` writes them.
        for f in [f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(
                sql_value(&cell(ValueRef::Real(f)).unwrap()),
                Some(SqlValue::Real(f))
            );
        }
        assert!(matches!(
            sql_value(&cell(ValueRef::Real(f64::NAN)).unwrap()),
            Some(SqlValue::Real(x)) if x.is_nan()
        ));
        assert_eq!(sql_value(&json!({"real": "lots"})), None);
    }
}
