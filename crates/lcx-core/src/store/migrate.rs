//! Applies `migrations/NNNN_*.sql` in order and records the count in
//! `PRAGMA user_version`.
//!
//! Hand-rolled rather than rusqlite_migration because that crate pins an
//! older rusqlite and opens a deferred transaction: two `lcx run` processes
//! creating one fresh database at the same moment would then race on the
//! read-to-write lock upgrade, which SQLite reports as SQLITE_BUSY without
//! waiting. Here the version is read and the files applied inside one
//! `BEGIN IMMEDIATE`, so the second process waits and then finds nothing to do.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// The migrations, in order; index + 1 is the `user_version` after each.
/// Append only: never edit or reorder a released file.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_initial.sql",
        include_str!("../../../../migrations/0001_initial.sql"),
    ),
    (
        "0002_runner_faults.sql",
        include_str!("../../../../migrations/0002_runner_faults.sql"),
    ),
    (
        "0003_views_count_what_reports_count.sql",
        include_str!("../../../../migrations/0003_views_count_what_reports_count.sql"),
    ),
    (
        "0004_metric_info.sql",
        include_str!("../../../../migrations/0004_metric_info.sql"),
    ),
    (
        "0005_run_revisions.sql",
        include_str!("../../../../migrations/0005_run_revisions.sql"),
    ),
    (
        "0006_run_placement.sql",
        include_str!("../../../../migrations/0006_run_placement.sql"),
    ),
    (
        "0007_cell_nodes_and_detach.sql",
        include_str!("../../../../migrations/0007_cell_nodes_and_detach.sql"),
    ),
    (
        "0008_runner_epoch_and_db_wait.sql",
        include_str!("../../../../migrations/0008_runner_epoch_and_db_wait.sql"),
    ),
    (
        "0009_cell_contention.sql",
        include_str!("../../../../migrations/0009_cell_contention.sql"),
    ),
    (
        "0010_cell_cpus.sql",
        include_str!("../../../../migrations/0010_cell_cpus.sql"),
    ),
    (
        "0011_host_peaks.sql",
        include_str!("../../../../migrations/0011_host_peaks.sql"),
    ),
    (
        "0012_extra_lines.sql",
        include_str!("../../../../migrations/0012_extra_lines.sql"),
    ),
    (
        "0013_runner_stalls.sql",
        include_str!("../../../../migrations/0013_runner_stalls.sql"),
    ),
    (
        "0014_experiment_uuid.sql",
        include_str!("../../../../migrations/0014_experiment_uuid.sql"),
    ),
    (
        "0015_foreign_processes.sql",
        include_str!("../../../../migrations/0015_foreign_processes.sql"),
    ),
];

/// The schema version this lcx writes.
pub const LATEST_VERSION: i64 = MIGRATIONS.len() as i64;

pub(super) fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
}

/// Brings the schema up to [`LATEST_VERSION`].
pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = user_version(&tx)?;
    if found > LATEST_VERSION {
        // Another, newer lcx upgraded the file between our check and now.
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found,
            supported: LATEST_VERSION,
        });
    }
    // In the same transaction as the version: another lcx upgrading the
    // file meanwhile cannot make its new tables look like a mismatch.
    check_consistent(&tx, path, found)?;
    let start = usize::try_from(found).unwrap_or(0);
    for (index, (name, sql)) in MIGRATIONS.iter().enumerate().skip(start) {
        tx.execute_batch(sql)
            .map_err(|source| migration_error(name, source))?;
        // PRAGMA takes no bound parameters; the value is our own integer.
        tx.execute_batch(&format!("PRAGMA user_version = {}", index + 1))
            .map_err(|source| migration_error(name, source))?;
    }
    name_older_experiments(&tx)?;
    write_vocabulary(&tx)?;
    tx.commit()?;
    Ok(())
}

/// SQLite's words for a failed migration, without the SQL it was given.
fn migration_error(name: &'static str, source: rusqlite::Error) -> StoreError {
    let code = source.sqlite_error_code();
    let message = match &source {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        rusqlite::Error::SqliteFailure(e, Some(msg)) => format!("{msg} ({:?})", e.code),
        other => other.to_string(),
    };
    StoreError::Migration {
        name,
        message,
        code,
    }
}

/// The names of the tables, views, indexes and triggers the migrations up
/// to `version` make, sorted: what a file that says `version` must hold.
fn schema_names_at(version: i64) -> rusqlite::Result<Vec<String>> {
    schema_names(&schema_at(version)?)
}

/// An empty database in memory with the migrations up to `version` applied.
fn schema_at(version: i64) -> rusqlite::Result<Connection> {
    let conn = Connection::open_in_memory()?;
    let upto = usize::try_from(version).unwrap_or(0).min(MIGRATIONS.len());
    for (_, sql) in &MIGRATIONS[..upto] {
        conn.execute_batch(sql)?;
    }
    Ok(conn)
}

/// The names of `table`'s columns, in table order (`table` is one of
/// lcx's, never text from a file).
pub(super) fn column_names(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
    let names = stmt.query_map([], |row| row.get(0))?.collect();
    names
}

/// The names of `conn`'s own schema objects, sorted.
pub(super) fn schema_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT type || ' ' || name FROM sqlite_master
         WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
    )?;
    let names = stmt.query_map([], |row| row.get(0))?.collect();
    names
}

/// `schema`'s own objects as (`type`, `name`, `sql`), sorted.
fn definitions(conn: &Connection, schema: &str) -> rusqlite::Result<Vec<(String, String, String)>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT type, name, coalesce(sql, '') FROM {schema}.sqlite_master
         WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
    ))?;
    let rows = stmt
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect();
    rows
}

/// A column as `pragma_table_info` has it: name, declared type, NOT NULL,
/// default, primary key.
pub(super) type ColumnInfo = (String, String, bool, Option<String>, i64);

pub(super) fn table_info(
    conn: &Connection,
    schema: &str,
    table: &str,
) -> rusqlite::Result<Vec<ColumnInfo>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT name, type, \"notnull\", dflt_value, pk FROM {schema}.pragma_table_info(?1)"
    ))?;
    let rows = stmt
        .query_map([table], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        })?
        .collect();
    rows
}

/// How table `name` of the file differs from lcx's, column by column
/// (a renamed or dropped column, another type, default or NOT NULL), or
/// `None` when only its constraints do.
fn column_difference(want: &[ColumnInfo], have: &[ColumnInfo]) -> Option<String> {
    let named = |cols: &[ColumnInfo], n: &str| cols.iter().find(|c| c.0 == n).cloned();
    for w in want {
        match named(have, &w.0) {
            None => return Some(format!("no column `{}`", w.0)),
            Some(h) if h != *w => {
                return Some(format!(
                    "column `{}` is declared otherwise ({} there, {} here)",
                    w.0,
                    describe_column(&h),
                    describe_column(w)
                ))
            }
            Some(_) => {}
        }
    }
    have.iter()
        .find(|h| named(want, &h.0).is_none())
        .map(|h| format!("a column `{}` lcx does not make", h.0))
}

fn describe_column(c: &ColumnInfo) -> String {
    let mut words = vec![if c.1.is_empty() {
        "untyped".to_string()
    } else {
        c.1.clone()
    }];
    if c.2 {
        words.push("NOT NULL".into());
    }
    if let Some(d) = &c.3 {
        words.push(format!("DEFAULT {d}"));
    }
    if c.4 > 0 {
        words.push("PRIMARY KEY".into());
    }
    words.join(" ")
}

/// Refuses a file at this lcx's version whose schema is not, object for
/// object, the one this lcx's migrations make: a table, view, index or
/// trigger missing or defined otherwise (a column renamed, dropped or
/// retyped, a constraint dropped, an index no longer unique). SQLite keeps
/// any value in any column and reads an unknown double-quoted name as a
/// string, so rows copied by column name from such a file would store the
/// names themselves. Extra objects (a user's own views) pass.
pub(super) fn check_current(
    conn: &Connection,
    schema: &str,
    path: &Path,
) -> Result<(), StoreError> {
    let have = definitions(conn, schema)?;
    let reference = schema_at(LATEST_VERSION)?;
    let mut problems = Vec::new();
    for (kind, name, sql) in definitions(&reference, "main")? {
        let found = have.iter().find(|(k, n, _)| *k == kind && *n == name);
        match found {
            None => problems.push(format!("missing {kind} {name}")),
            Some((_, _, theirs)) if *theirs == sql => {}
            Some(_) if kind == "table" => {
                let want = table_info(&reference, "main", &name)?;
                let detail = column_difference(&want, &table_info(conn, schema, &name)?)
                    .unwrap_or_else(|| "its constraints differ from lcx's".into());
                problems.push(format!("table {name}: {detail}"));
            }
            Some(_) => problems.push(format!("{kind} {name} is defined otherwise than lcx's")),
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(StoreError::Inconsistent {
        path: path.to_path_buf(),
        found: LATEST_VERSION,
        detail: problems.into_iter().take(3).collect::<Vec<_>>().join("; "),
    })
}

/// Refuses a file whose schema is not the one its `user_version` says
/// (the version edited by hand, or a file half-made by another program):
/// migrating it would fail half-way, or worse, succeed on the wrong
/// tables. Checked before anything is written.
fn check_consistent(conn: &Connection, path: &Path, found: i64) -> Result<(), StoreError> {
    // A new file has nothing to check; a current one is not migrated (and
    // every open of it stays as cheap as before).
    if found <= 0 || found >= LATEST_VERSION {
        return Ok(());
    }
    let have = schema_names(conn)?;
    let want = schema_names_at(found)?;
    if have == want {
        return Ok(());
    }
    let missing: Vec<&str> = want
        .iter()
        .filter(|n| !have.contains(n))
        .map(String::as_str)
        .take(3)
        .collect();
    let extra: Vec<&str> = have
        .iter()
        .filter(|n| !want.contains(n))
        .map(String::as_str)
        .take(3)
        .collect();
    let mut detail = Vec::new();
    if !missing.is_empty() {
        detail.push(format!("missing {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        detail.push(format!("not expected {}", extra.join(", ")));
    }
    Err(StoreError::Inconsistent {
        path: path.to_path_buf(),
        found,
        detail: detail.join("; "),
    })
}

/// Gives each experiment recorded before migration 0014 its uuid, from
/// what it is: its id, name, creation time, host and file. Two copies of
/// one database upgraded apart (a CI artifact, a laptop's copy) then name
/// each experiment alike, and `lcx import` of both adds it once. Shaped as
/// an RFC 9562 version-8 UUID (its bits are ours to choose).
pub(super) fn name_older_experiments(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    use sha2::{Digest, Sha256};
    let rows: Vec<(i64, String)> = {
        let mut stmt = tx.prepare(
            "SELECT id, id || char(31) || name || char(31) || created_at || char(31)
                    || coalesce(hostname, '') || char(31) || file_sha256
             FROM experiments WHERE uuid IS NULL",
        )?;
        let rows = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        rows
    };
    for (id, what) in rows {
        let hex: String = Sha256::digest(what.as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        let uuid = format!(
            "{}-{}-8{}-{}{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[13..16],
            ["8", "9", "a", "b"][usize::from(hex.as_bytes()[16] % 4)],
            &hex[17..20],
            &hex[20..32]
        );
        tx.execute("UPDATE experiments SET uuid = ?1 WHERE id = ?2", (uuid, id))?;
    }
    Ok(())
}

/// Writes this lcx's metric vocabulary into `metric_info`, replacing the rows
/// it names (an older lcx's extra names stay: they describe its rows).
fn write_vocabulary(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let mut upsert = tx.prepare_cached(
        "INSERT INTO metric_info (name, unit, direction, description) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (name) DO UPDATE SET unit = excluded.unit,
             direction = excluded.direction, description = excluded.description
         WHERE (unit, direction, description)
             IS NOT (excluded.unit, excluded.direction, excluded.description)",
    )?;
    for info in crate::metrics::VOCABULARY {
        upsert.execute((info.name, info.unit, info.better.word(), info.description))?;
    }
    Ok(())
}
