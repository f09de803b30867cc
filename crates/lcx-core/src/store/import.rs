//! `lcx import`: the experiments of another lcx database copied into this
//! one, with their cells, lines, archived reports' records, the hosts'
//! ceilings and the metric vocabulary. An experiment is known by its
//! `uuid` (migration 0014): one this database holds already is skipped when
//! it is the same and refused, by name, when it is not, never overwritten.
//! One transaction per source file: a failure, Ctrl-C or `kill -9` leaves
//! this database as it was before that file.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::{Store, StoreError, LATEST_VERSION};

/// One experiment of a source database and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportedExperiment {
    pub uuid: String,
    pub name: String,
    /// Its id in the source.
    pub source_id: i64,
    /// Its id here: new when added, the existing one when already here
    /// (`None` in a dry run of an experiment that would be added).
    pub id: Option<i64>,
}

/// What one source file brought.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Imported {
    /// Added now (or, in a dry run, that would be).
    pub added: Vec<ImportedExperiment>,
    /// Here already, the same.
    pub present: Vec<ImportedExperiment>,
    /// Still running in the source: left for an import once it has ended.
    pub running: Vec<ImportedExperiment>,
}

/// The source as a file at this lcx's schema: the file itself, or a
/// snapshot of an older one, upgraded in a folder that goes with it.
struct Source {
    path: PathBuf,
    _upgraded: Option<tempfile::TempDir>,
}

/// Opens `path` as a source: an lcx database this lcx can read, refused
/// (with the reason, the file unchanged) when it is not one, is damaged or
/// is newer. An older one is copied (`VACUUM INTO`, its WAL included) and
/// the copy upgraded; the file itself is never written.
fn source(path: &Path) -> Result<Source, StoreError> {
    match Store::open_read_only(path) {
        Ok(store) => {
            drop(store);
            Ok(Source {
                path: path.to_path_buf(),
                _upgraded: None,
            })
        }
        Err(StoreError::TooOld { .. }) => {
            let dir = tempfile::tempdir().map_err(|e| StoreError::Damaged {
                path: path.to_path_buf(),
                why: format!("no folder to upgrade a copy in: {e}"),
            })?;
            let copy = dir.path().join("source.db");
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn =
                Connection::open_with_flags(path, flags).map_err(|source| StoreError::Open {
                    path: path.to_path_buf(),
                    source,
                })?;
            conn.execute("VACUUM INTO ?1", [copy.to_string_lossy().as_ref()])?;
            drop(conn);
            drop(Store::open(&copy)?);
            Ok(Source {
                path: copy,
                _upgraded: Some(dir),
            })
        }
        Err(e) => Err(e),
    }
}

/// The columns of `table` other than `id`, as SQL text.
fn columns(conn: &Connection, table: &str) -> Result<String, StoreError> {
    let mut stmt = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?;
    let names: Vec<String> = stmt
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    Ok(names
        .into_iter()
        .filter(|n| n != "id")
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", "))
}

/// What must agree for two rows of one uuid to be one experiment: its
/// state, its file and plan, and each cell's state and line count.
fn digest(conn: &Connection, schema: &str, id: i64) -> Result<String, StoreError> {
    let sql = format!(
        "SELECT e.status || '|' || coalesce(e.finished_at, '') || '|' || e.file_sha256 || '|'
                || e.plan_json || '|' || coalesce((
                    SELECT group_concat(cell, ',') FROM (
                        SELECT r.arm || '#' || r.repeat || ':' || r.status || ':' || r.attempt
                               || ':' || r.iterations_done || ':' || (
                                   SELECT count(*) FROM {schema}.metrics m WHERE m.run_id = r.id
                               ) AS cell
                        FROM {schema}.runs r WHERE r.experiment_id = e.id
                        ORDER BY r.arm, r.repeat)), '')
         FROM {schema}.experiments e WHERE e.id = ?1"
    );
    Ok(conn.query_row(&sql, [id], |row| row.get(0))?)
}

/// Copies source experiment `old` (attached as `src`) into this database;
/// its new id.
fn copy_experiment(tx: &rusqlite::Transaction<'_>, old: i64) -> Result<i64, StoreError> {
    let experiment = columns(tx, "experiments")?;
    tx.execute(
        &format!(
            "INSERT INTO main.experiments ({experiment}) SELECT {experiment}
             FROM src.experiments WHERE id = ?1"
        ),
        [old],
    )?;
    let id = tx.last_insert_rowid();
    tx.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS import_runs (old INTEGER PRIMARY KEY, new INTEGER);
         DELETE FROM temp.import_runs;",
    )?;
    let run_columns = columns(tx, "runs")?;
    let others = run_columns.replace("\"experiment_id\", ", "");
    let runs: Vec<i64> = {
        let mut stmt =
            tx.prepare("SELECT id FROM src.runs WHERE experiment_id = ?1 ORDER BY id")?;
        let ids = stmt
            .query_map([old], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        ids
    };
    for run in runs {
        tx.execute(
            &format!(
                "INSERT INTO main.runs (\"experiment_id\", {others}) SELECT ?1, {others}
                 FROM src.runs WHERE id = ?2"
            ),
            [id, run],
        )?;
        tx.execute(
            "INSERT INTO temp.import_runs (old, new) VALUES (?1, ?2)",
            [run, tx.last_insert_rowid()],
        )?;
    }
    for table in ["metrics", "metric_text", "metric_nonfinite"] {
        let cols = columns(tx, table)?.replace("\"run_id\", ", "");
        let picked = cols
            .split(", ")
            .map(|c| format!("s.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        tx.execute(
            &format!(
                "INSERT INTO main.{table} (\"run_id\", {cols}) SELECT m.new, {picked}
                 FROM src.{table} s JOIN temp.import_runs m ON s.run_id = m.old"
            ),
            [],
        )?;
    }
    let report = columns(tx, "reports")?.replace("\"experiment_id\", ", "");
    tx.execute(
        &format!(
            "INSERT INTO main.reports (\"experiment_id\", {report}) SELECT ?1, {report}
             FROM src.reports WHERE experiment_id = ?2"
        ),
        [id, old],
    )?;
    Ok(id)
}

impl Store {
    /// Imports the experiments of the lcx database at `source` (see the
    /// module): in one transaction, or none at all with `dry_run`.
    pub fn import(&mut self, source_path: &Path, dry_run: bool) -> Result<Imported, StoreError> {
        let src = source(source_path)?;
        let same_file = match (self.path(), std::fs::canonicalize(source_path)) {
            (Some(here), Ok(there)) => std::fs::canonicalize(here).is_ok_and(|h| h == there),
            _ => false,
        };
        if same_file {
            // Everything in it is here: itself.
            let mut out = Imported::default();
            let mut stmt = self
                .conn
                .prepare("SELECT id, uuid, name FROM experiments ORDER BY id")?;
            out.present = stmt
                .query_map([], |row| {
                    Ok(ImportedExperiment {
                        source_id: row.get(0)?,
                        id: Some(row.get(0)?),
                        uuid: row.get(1)?,
                        name: row.get(2)?,
                    })
                })?
                .collect::<Result<_, _>>()?;
            return Ok(out);
        }
        self.conn.execute(
            "ATTACH DATABASE ?1 AS src",
            [src.path.to_string_lossy().as_ref()],
        )?;
        let result = self.import_attached(source_path, dry_run);
        let detached = self.conn.execute("DETACH DATABASE src", []);
        let out = result?;
        detached?;
        Ok(out)
    }

    /// [`Store::import`] with the source attached as `src`.
    fn import_attached(&mut self, source: &Path, dry_run: bool) -> Result<Imported, StoreError> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA src.user_version", [], |row| row.get(0))?;
        if version != LATEST_VERSION {
            return Err(StoreError::TooNew {
                path: source.to_path_buf(),
                found: version,
                supported: LATEST_VERSION,
            });
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let experiments: Vec<(i64, String, String, String)> = {
            let mut stmt =
                tx.prepare("SELECT id, uuid, name, status FROM src.experiments ORDER BY id")?;
            let rows = stmt
                .query_map([], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })?
                .collect::<Result<_, _>>()?;
            rows
        };
        let mut out = Imported::default();
        for (old, uuid, name, status) in experiments {
            let mut entry = ImportedExperiment {
                uuid: uuid.clone(),
                name: name.clone(),
                source_id: old,
                id: None,
            };
            let here: Option<i64> = tx
                .query_row(
                    "SELECT id FROM main.experiments WHERE uuid = ?1",
                    [&uuid],
                    |row| row.get(0),
                )
                .optional()?;
            if let Some(id) = here {
                if digest(&tx, "main", id)? != digest(&tx, "src", old)? {
                    return Err(StoreError::ImportConflict {
                        path: source.to_path_buf(),
                        name,
                        source_id: old,
                        id,
                        uuid,
                    });
                }
                entry.id = Some(id);
                out.present.push(entry);
            } else if status == "running" {
                out.running.push(entry);
            } else {
                if !dry_run {
                    entry.id = Some(copy_experiment(&tx, old)?);
                }
                out.added.push(entry);
            }
        }
        if dry_run {
            return Ok(out);
        }
        // A host's ceilings and the metric vocabulary: the rows this
        // database lacks (its own stay as they are).
        tx.execute_batch(
            "INSERT OR IGNORE INTO main.host_peaks SELECT * FROM src.host_peaks;
             INSERT OR IGNORE INTO main.metric_info SELECT * FROM src.metric_info;",
        )?;
        tx.commit()?;
        Ok(out)
    }
}
