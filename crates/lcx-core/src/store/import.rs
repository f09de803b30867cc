//! `lcx import`: the experiments of another lcx database copied into this
//! one (or those of an `lcx export --format json` file, `super::dump`),
//! with their cells, lines, archived reports' records, the hosts'
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

/// A file to import, ready: as a database at this lcx's schema (the file
/// itself, or a copy in a scratch folder that goes with it).
pub struct Source {
    /// The file as given.
    given: PathBuf,
    /// The database read.
    database: PathBuf,
    _upgraded: Option<tempfile::TempDir>,
}

impl Source {
    /// Checks and prepares `path` for [`Store::import_source`]: refused,
    /// with the reason, when it is not something lcx imports. Opening
    /// every source first lets `lcx import` refuse a bad one before it
    /// touches (or creates) its database.
    pub fn open(path: &Path) -> Result<Source, StoreError> {
        source(path)
    }

    /// The file as given.
    pub fn path(&self) -> &Path {
        &self.given
    }
}

/// A folder for a copy of the source (an upgraded database, a loaded
/// JSON export), removed with it.
fn scratch(path: &Path) -> Result<tempfile::TempDir, StoreError> {
    tempfile::tempdir().map_err(|e| StoreError::NotImportable {
        path: path.to_path_buf(),
        why: format!("no folder for a working copy: {e}"),
    })
}

/// Opens `path` as a source: an lcx database this lcx can read, or an
/// `lcx export --format json` file (loaded into a scratch database); refused
/// (with the reason, the file unchanged) when it is neither, is damaged or
/// is newer. An older database is copied (`VACUUM INTO`, its WAL included)
/// and the copy upgraded; the file itself is never written.
fn source(path: &Path) -> Result<Source, StoreError> {
    let refused = |why: &str| StoreError::NotImportable {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    if path.is_dir() {
        return Err(refused("it is a folder"));
    }
    if !path.exists() {
        return Err(refused("there is no such file"));
    }
    if super::dump::looks_like_json(path) {
        let dir = scratch(path)?;
        let copy = dir.path().join("export.db");
        super::dump::load(path, &copy)?;
        return Ok(Source {
            given: path.to_path_buf(),
            database: copy,
            _upgraded: Some(dir),
        });
    }
    match Store::open_read_only(path) {
        Ok(store) => {
            drop(store);
            Ok(Source {
                given: path.to_path_buf(),
                database: path.to_path_buf(),
                _upgraded: None,
            })
        }
        Err(StoreError::TooOld { .. }) => {
            let dir = scratch(path)?;
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
                given: path.to_path_buf(),
                database: copy,
                _upgraded: Some(dir),
            })
        }
        Err(StoreError::NotSqlite(_)) => Err(refused(
            "it is neither an lcx database nor an `lcx export --format json` file",
        )),
        Err(StoreError::Foreign(_)) => Err(refused(
            "it is an SQLite database of another program (no lcx schema version)",
        )),
        Err(StoreError::Empty(_)) => Err(refused("it is an empty file")),
        Err(e) => Err(e),
    }
}

/// `path` as an SQLite URI that opens it read-only: attached so, the source
/// is never written, not even by the checkpoint that the close of a WAL
/// file's last writable connection makes.
fn read_only_uri(path: &Path) -> String {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '%' | '?' | '#' => uri.push_str(&format!("%{:02X}", c as u32)),
            c => uri.push(c),
        }
    }
    uri.push_str("?mode=ro");
    uri
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
        self.import_source(&Source::open(source_path)?, dry_run)
    }

    /// [`Store::import`] of a source opened already.
    pub fn import_source(&mut self, src: &Source, dry_run: bool) -> Result<Imported, StoreError> {
        let source_path = src.path();
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
        self.conn
            .execute("ATTACH DATABASE ?1 AS src", [read_only_uri(&src.database)])?;
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
                    return Err(StoreError::ImportConflict(Box::new(
                        super::ImportConflict {
                            path: source.to_path_buf(),
                            name,
                            source_id: old,
                            id,
                            uuid,
                        },
                    )));
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
