//! `lcx import` fuzzed: a real lcx database and its JSON export, each
//! mutated at random (any value of any type into any column of any row,
//! a schema changed by hand, a JSON field replaced), imported into a
//! database that holds another experiment. Whatever the mutation, the
//! import must not panic or hang, must add all of the file or none of
//! it, and must leave a database that `lcx publish` and `lcx export` can
//! read whole. The suite runs a few cases (`LCX_FUZZ_CASES` asks for
//! more: the closing note of issue 73 gives a run of 2,000).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use lcx_core::store::import::{Source, TABLES};
use lcx_core::store::Store;
use proptest::prelude::*;

use crate::import::{database, import};
use crate::support::{count, lcx, succeed};

/// The files every case starts from: a source database, its export, and
/// a target holding one other experiment (all made once, by `lcx run`).
struct Templates {
    _dir: tempfile::TempDir,
    source: PathBuf,
    export: String,
    target: PathBuf,
}

fn templates() -> &'static Templates {
    static T: OnceLock<Templates> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let live = database(dir.path(), "fuzzed", 3);
        // One file, no WAL beside it: copied as it is for every case.
        let source = dir.path().join("source.db");
        let conn = rusqlite::Connection::open(&live).unwrap();
        conn.execute("VACUUM INTO ?1", [source.to_str().unwrap()])
            .unwrap();
        let export = succeed(
            lcx()
                .args(["export", "--format", "json", "--db"])
                .arg(&live),
        );
        let other = database(dir.path(), "other", 3);
        let history = dir.path().join("history.db");
        assert!(import(&history, &[&other]).status.success());
        let target = dir.path().join("target.db");
        let conn = rusqlite::Connection::open(&history).unwrap();
        conn.execute("VACUUM INTO ?1", [target.to_str().unwrap()])
            .unwrap();
        Templates {
            _dir: dir,
            source,
            export,
            target,
        }
    })
}

/// Changes made by hand to a source's schema.
const SCHEMA: [&str; 6] = [
    "ALTER TABLE experiments RENAME COLUMN created_at TO made_at",
    "ALTER TABLE runs DROP COLUMN rerun_note",
    "ALTER TABLE metrics ADD COLUMN extra REAL",
    "DROP INDEX metrics_live; CREATE INDEX metrics_live ON metrics (run_id, name, iteration)",
    "DROP TRIGGER experiments_uuid_on_insert",
    "DROP VIEW arm_metric_stats; CREATE VIEW arm_metric_stats AS SELECT 1 AS x",
];

#[derive(Debug, Clone)]
enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Real(f) => ToSqlOutput::Borrowed(ValueRef::Real(*f)),
            Value::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

impl Value {
    fn json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Int(i) => serde_json::json!(i),
            Value::Real(f) if f.is_finite() => serde_json::json!(f),
            Value::Real(f) => serde_json::json!({ "real": f.to_string() }),
            Value::Text(t) => serde_json::json!(t),
            Value::Blob(b) => serde_json::json!(b),
        }
    }
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::Int),
        prop_oneof![Just(0i64), Just(-1), Just(1), Just(2), Just(i64::MAX)].prop_map(Value::Int),
        any::<f64>().prop_map(Value::Real),
        prop_oneof![
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(9.3e18),
            Just(-0.0)
        ]
        .prop_map(Value::Real),
        "\\PC{0,12}".prop_map(Value::Text),
        prop_oneof![
            Just("running".to_string()),
            Just("completed".to_string()),
            Just("".to_string()),
            Just("a\nb\u{1b}[31m\u{202e}".to_string()),
            Just("{}".to_string()),
            Just("x".repeat(5000)),
        ]
        .prop_map(Value::Text),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Value::Blob),
        prop::sample::select(&HOSTILE[..]).prop_map(|s| Value::Text(s.to_string())),
    ]
}

/// What an adversary writes into a text column (the hostile-string
/// property test's fragments, in short): whatever of it an import lets in
/// must reach the site escaped.
const HOSTILE: [&str; 8] = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "<a href=\"javascript:alert(1)\">x</a>",
    "\u{1b}]0;owned\u{7}",
    "\u{1b}[2J",
    "| a | b |\n|---|---|",
    "`` ` ``<!--",
];

/// Whether the site's pages hold any of [`HOSTILE`] unescaped.
fn unescaped(site: &Path) -> Option<String> {
    for entry in walkdir::WalkDir::new(site).into_iter().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "html" && e != "svg") {
            continue;
        }
        let page = std::fs::read_to_string(path).ok()?;
        // Tags as tags: `&lt;a href="javascript:…` is text, and harmless.
        for raw in [
            "<script>alert",
            "<img src=x",
            "<a href=\"javascript",
            "\u{1b}",
            "\u{7}",
        ] {
            if page.contains(raw) {
                return Some(format!("{} holds {raw:?}", path.display()));
            }
        }
    }
    None
}

#[derive(Debug, Clone)]
enum Mutation {
    /// `value` into column `column` (modulo the table's) of row `row`
    /// (modulo its rows) of `table`, in the database.
    Cell {
        table: usize,
        column: usize,
        row: usize,
        value: Value,
    },
    /// A change of the schema, in the database.
    Schema(usize),
    /// `value` into field `column` of row line `line` of the export.
    Json {
        line: usize,
        column: usize,
        value: Value,
    },
    /// Row line `line` of the export dropped (its end line then miscounts).
    DropLine(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (0..TABLES.len(), any::<usize>(), any::<usize>(), value()).prop_map(
            |(table, column, row, value)| Mutation::Cell { table, column, row, value }
        ),
        1 => (0..SCHEMA.len()).prop_map(Mutation::Schema),
        4 => (any::<usize>(), any::<usize>(), value())
            .prop_map(|(line, column, value)| Mutation::Json { line, column, value }),
        1 => any::<usize>().prop_map(Mutation::DropLine),
    ]
}

/// The source file a mutation makes in `dir`.
fn source(dir: &Path, m: &Mutation) -> PathBuf {
    let t = templates();
    match m {
        Mutation::Cell { .. } | Mutation::Schema(_) => {
            let file = dir.join("source.db");
            std::fs::copy(&t.source, &file).unwrap();
            let conn = rusqlite::Connection::open(&file).unwrap();
            conn.execute_batch("PRAGMA ignore_check_constraints = ON")
                .unwrap();
            // A change SQLite refuses (NOT NULL, UNIQUE) leaves the file
            // as it was: the case then imports a good file.
            let _ = match m {
                Mutation::Schema(i) => conn.execute_batch(SCHEMA[*i]),
                Mutation::Cell {
                    table,
                    column,
                    row,
                    value,
                } => {
                    let table = TABLES[*table];
                    let columns: Vec<String> = conn
                        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
                        .unwrap()
                        .query_map([], |r| r.get(0))
                        .unwrap()
                        .map(Result::unwrap)
                        .collect();
                    let rows: i64 = conn
                        .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                        .unwrap();
                    if rows == 0 {
                        Ok(())
                    } else {
                        let column = &columns[column % columns.len()];
                        let offset = (*row as i64).rem_euclid(rows);
                        conn.execute(
                            &format!(
                                "UPDATE {table} SET \"{column}\" = ?1 WHERE rowid = \
                                 (SELECT rowid FROM {table} ORDER BY rowid LIMIT 1 OFFSET ?2)"
                            ),
                            rusqlite::params![value, offset],
                        )
                        .map(|_| ())
                    }
                }
                _ => Ok(()),
            };
            file
        }
        Mutation::Json { .. } | Mutation::DropLine(_) => {
            let mut lines: Vec<String> = t.export.lines().map(str::to_string).collect();
            let rows: Vec<usize> = (0..lines.len())
                .filter(|&i| lines[i].contains(r#""record":"row""#))
                .collect();
            match m {
                Mutation::Json {
                    line,
                    column,
                    value,
                } => {
                    let at = rows[line % rows.len()];
                    let mut v: serde_json::Value = serde_json::from_str(&lines[at]).unwrap();
                    let row = v["row"].as_object_mut().unwrap();
                    let key = row.keys().nth(column % row.len()).unwrap().clone();
                    row.insert(key, value.json());
                    lines[at] = v.to_string();
                }
                Mutation::DropLine(line) => {
                    lines.remove(rows[line % rows.len()]);
                }
                _ => {}
            }
            let file = dir.join("source.jsonl");
            std::fs::write(&file, lines.join("\n") + "\n").unwrap();
            file
        }
    }
}

/// Row counts of the tables an import fills.
fn counts(store: &Store) -> Vec<i64> {
    TABLES
        .iter()
        .map(|t| count(store, &format!("SELECT count(*) FROM {t}")))
        .collect()
}

fn cases() -> u32 {
    std::env::var("LCX_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_mutated_source_imports_whole_or_not_at_all_and_leaves_a_readable_database(
        m in mutation()
    ) {
        let dir = tempfile::tempdir().unwrap();
        let file = source(dir.path(), &m);
        let target = dir.path().join("target.db");
        std::fs::copy(&templates().target, &target).unwrap();
        let mut store = Store::open(&target).unwrap();
        let before = counts(&store);
        let result = Source::open(&file).and_then(|src| store.import_source(&src, false));
        match &result {
            Ok(imported) => {
                let after = counts(&store);
                prop_assert!(imported.added.len() <= 1);
                if imported.added.is_empty() {
                    prop_assert_eq!(&after, &before);
                } else {
                    prop_assert_eq!(after[0], before[0] + 1);
                }
            }
            Err(e) => {
                prop_assert_eq!(counts(&store), before.clone(), "{}", e);
                let words = e.to_string();
                prop_assert!(!words.contains("Error code"), "{}", words);
                prop_assert!(!words.contains("at index"), "{}", words);
            }
        }
        // Read whole afterwards: every experiment's report, page and rows.
        let site = dir.path().join("site");
        let published = lcx_core::publish::publish(&store, &site);
        prop_assert!(published.is_ok(), "{:?} after {:?}", published.err(), result);
        let leak = unescaped(&site);
        prop_assert!(leak.is_none(), "{:?} after {:?}", leak, result);
        let dumped = store.for_each_dump_line(&[], |_| true);
        prop_assert!(dumped.is_ok(), "{:?} after {:?}", dumped.err(), result);
        let exported = store.for_each_export_row(&[], |_| true);
        prop_assert!(exported.is_ok(), "{:?} after {:?}", exported.err(), result);
    }
}
