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

mod digest;
pub mod scratch;
mod values;

use scratch::ScratchDir;
pub use values::TABLES;

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
    /// Still running in the source: left for an import once it has ended
    /// (`id` is its id here when an earlier copy came in).
    pub running: Vec<ImportedExperiment>,
    /// Recorded as running in the source by a runner on this host that
    /// is gone (`lcx list` there says abandoned): left out until it is
    /// resumed or removed there.
    pub abandoned: Vec<ImportedExperiment>,
    /// Archived reports' records added to experiments here already.
    pub reports: usize,
}

/// A file to import, ready: as a database at this lcx's schema (the file
/// itself, or a copy in a scratch folder that goes with it).
pub struct Source {
    /// The file as given.
    given: PathBuf,
    /// The database read.
    database: PathBuf,
    _upgraded: Option<ScratchDir>,
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

/// Why `path` cannot be imported.
fn refused(path: &Path, why: impl Into<String>) -> StoreError {
    StoreError::not_importable(path, why)
}

/// A folder for a copy of the source (an upgraded database, a loaded
/// JSON export), removed with it (see [`scratch`]).
fn scratch(path: &Path) -> Result<ScratchDir, StoreError> {
    ScratchDir::new().map_err(|e| StoreError::NotImportable {
        path: path.to_path_buf(),
        why: format!(
            "no folder for a working copy in {} (TMPDIR): {e}",
            std::env::temp_dir().display()
        ),
    })
}

/// Why a file that is not a regular one is not read: asked of its
/// metadata, never by opening it (opening a FIFO with no writer waits
/// forever, and reading one consumes what the check would need).
fn not_a_file(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("it is a folder")
    } else if kind.is_fifo() {
        Some(
            "it is a pipe (a FIFO, or standard input through one), not a file: lcx reads a \
             source twice (to tell its kind, then its rows), so save it to a file first \
             (`cat > export.jsonl`) and import that",
        )
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("it is a device, not a file: save what it holds to a file and import that")
    } else if kind.is_socket() {
        Some("it is a socket, not a file")
    } else {
        Some("it is not a regular file")
    }
}

/// Why SQLite could not read the database at `path`, in words: a hot
/// rollback journal beside it (a writer stopped in mid-transaction) reads
/// as "attempt to write a readonly database" to a read-only open.
fn unreadable(path: &Path, e: &rusqlite::Error) -> StoreError {
    let journal = crate::files::side_file(path, "-journal");
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly) && journal.exists() {
        return refused(
            path,
            format!(
                "it holds an unfinished write: its rollback journal {} is still there, left by \
                 a writer that stopped in mid-transaction, and a read-only import cannot roll \
                 it back. Open the database once for writing (`sqlite3 {} 'PRAGMA \
                 quick_check'`) and import it again",
                journal.display(),
                path.display()
            ),
        );
    }
    refused(
        path,
        format!("it cannot be read ({})", super::sqlite_words(e)),
    )
}

/// Opens `path` as a source: an lcx database this lcx can read, or an
/// `lcx export --format json` file (loaded into a scratch database); refused
/// (with the reason, the file unchanged) when it is neither, is damaged or
/// is newer. An older database is copied (`VACUUM INTO`, its WAL included)
/// and the copy upgraded; the file itself is never written.
fn source(path: &Path) -> Result<Source, StoreError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refused(path, "there is no such file"))
        }
        Err(e) => return Err(refused(path, format!("it cannot be read ({e})"))),
    };
    if let Some(why) = not_a_file(&meta) {
        return Err(refused(path, why));
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
    let why_not = |e: StoreError| -> StoreError {
        match e {
            StoreError::NotSqlite(_) => refused(
                path,
                "it is neither an lcx database nor an `lcx export --format json` file",
            ),
            StoreError::Foreign(_) => refused(
                path,
                "it is an SQLite database of another program (no lcx schema version)",
            ),
            StoreError::Empty(_) => refused(path, "it is an empty file"),
            StoreError::Open { source, .. } => unreadable(path, &source),
            StoreError::Inconsistent { found, detail, .. } => refused(
                path,
                format!(
                    "it says lcx schema version {found}, but its tables are not that version's \
                 ({detail})"
                ),
            ),
            e => e,
        }
    };
    let (database, scratch) = match Store::open_read_only(path) {
        Ok(store) => {
            drop(store);
            (path.to_path_buf(), None)
        }
        Err(StoreError::TooOld { found: 0, .. }) => {
            return Err(refused(
                path,
                "it is an SQLite database with no tables, not lcx's",
            ))
        }
        Err(StoreError::TooOld { .. }) => {
            let dir = scratch(path)?;
            let copy = dir.path().join("source.db");
            vacuum_into(path, &copy).map_err(|e| {
                refused(
                    path,
                    format!(
                        "it is older than this lcx, and its copy to upgrade (in {}) failed: {e}",
                        dir.path().display()
                    ),
                )
            })?;
            drop(Store::open(&copy).map_err(why_not)?);
            (copy, Some(dir))
        }
        Err(e) => return Err(why_not(e)),
    };
    // Whole and lcx's, checked before anything is written: its pages
    // (`quick_check`) and the tables this lcx reads.
    let conn = read_only(&database).map_err(|e| unreadable(path, &e))?;
    let check: String = match conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0)) {
        Ok(check) => check,
        Err(e) if is_damage(&e) => super::sqlite_words(&e),
        Err(e) => return Err(unreadable(path, &e)),
    };
    if check != "ok" {
        return Err(refused(path, format!("it is damaged ({check})")));
    }
    super::migrate::check_current(&conn, "main", path).map_err(why_not)?;
    drop(conn);
    Ok(Source {
        given: path.to_path_buf(),
        database,
        _upgraded: scratch,
    })
}

/// A read-only connection to `path` that waits for a writer, as every
/// store connection does.
fn read_only(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(super::BUSY_TIMEOUT)?;
    Ok(conn)
}

/// `VACUUM INTO copy` of the database at `path`, read-only: its WAL's
/// frames included, the file itself untouched.
fn vacuum_into(path: &Path, copy: &Path) -> rusqlite::Result<()> {
    read_only(path)?.execute("VACUUM INTO ?1", [copy.to_string_lossy().as_ref()])?;
    Ok(())
}

/// Whether SQLite's error says the file is damaged (not busy, not full).
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

/// Whether `a` and `b` are one file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
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

/// The tables of a cell's lines, each row keyed by `run_id`.
const LINE_TABLES: [&str; 3] = ["metrics", "metric_text", "metric_nonfinite"];

/// The columns of `table` but those in `leave_out`, quoted, in table order.
fn columns(conn: &Connection, table: &str, leave_out: &[&str]) -> Result<Vec<String>, StoreError> {
    Ok(super::migrate::column_names(conn, table)?
        .into_iter()
        .filter(|n| !leave_out.contains(&n.as_str()))
        .map(|n| format!("\"{n}\""))
        .collect())
}

/// `columns` as an SQL list, each name after `prefix` (`s.`, `excluded.`).
fn list(columns: &[String], prefix: &str) -> String {
    columns
        .iter()
        .map(|c| format!("{prefix}{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Copies source experiment `old` (attached as `src`) and its cells into
/// this database, noting each cell's new id in `temp.import_runs` for
/// [`copy_lines`]; its new id.
fn copy_experiment(tx: &rusqlite::Transaction<'_>, old: i64) -> Result<i64, StoreError> {
    let experiment = list(&columns(tx, "experiments", &["id"])?, "");
    tx.execute(
        &format!(
            "INSERT INTO main.experiments ({experiment}) SELECT {experiment}
             FROM src.experiments WHERE id = ?1"
        ),
        [old],
    )?;
    let id = tx.last_insert_rowid();
    let others = list(&columns(tx, "runs", &["id", "experiment_id"])?, "");
    let runs: Vec<i64> = {
        let mut stmt =
            tx.prepare("SELECT id FROM src.runs WHERE experiment_id = ?1 ORDER BY id")?;
        let ids = stmt
            .query_map([old], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        ids
    };
    let mut insert = tx.prepare(&format!(
        "INSERT INTO main.runs (\"experiment_id\", {others}) SELECT ?1, {others}
         FROM src.runs WHERE id = ?2"
    ))?;
    for run in runs {
        insert.execute([id, run])?;
        tx.execute(
            "INSERT INTO temp.import_runs (old, new) VALUES (?1, ?2)",
            [run, tx.last_insert_rowid()],
        )?;
    }
    copy_reports(tx, old, id, false)?;
    Ok(id)
}

/// The lines of every cell [`copy_experiment`] copied: one statement per
/// table for the whole file (one pass over each of the source's tables).
fn copy_lines(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    for table in LINE_TABLES {
        let names = columns(tx, table, &["run_id"])?;
        let (cols, picked) = (list(&names, ""), list(&names, "s."));
        tx.execute(
            &format!(
                "INSERT INTO main.{table} (\"run_id\", {cols}) SELECT m.new, {picked}
                 FROM src.{table} s JOIN temp.import_runs m ON s.run_id = m.old"
            ),
            [],
        )?;
    }
    Ok(())
}

/// The archived reports' records of source experiment `old` that
/// experiment `id` here lacks (the same path and hash): all of them for a
/// new experiment, those archived since for one here already. Their number.
/// With `dry_run`, only counted.
fn copy_reports(
    tx: &rusqlite::Transaction<'_>,
    old: i64,
    id: i64,
    dry_run: bool,
) -> Result<usize, StoreError> {
    let missing = "FROM src.reports s WHERE s.experiment_id = ?2 AND NOT EXISTS (
                       SELECT 1 FROM main.reports r
                       WHERE r.experiment_id = ?1 AND r.path = s.path AND r.sha256 = s.sha256)";
    if dry_run {
        let n: i64 = tx.query_row(&format!("SELECT count(*) {missing}"), [id, old], |r| {
            r.get(0)
        })?;
        return Ok(usize::try_from(n).unwrap_or_default());
    }
    let report = list(&columns(tx, "reports", &["id", "experiment_id"])?, "");
    Ok(tx.execute(
        &format!(
            "INSERT INTO main.reports (\"experiment_id\", {report}) SELECT ?1, {report}
             {missing} ORDER BY s.id"
        ),
        [id, old],
    )?)
}

/// A host's ceilings and the metric vocabulary. A ceiling keeps the
/// higher of the two probes of one host key (a probe reads low when
/// disturbed, never high); the vocabulary keeps this database's words.
fn merge_hosts_and_vocabulary(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let names = columns(tx, "host_peaks", &[])?;
    let (cols, excluded) = (list(&names, ""), list(&names, "excluded."));
    tx.execute_batch(&format!(
        "INSERT INTO main.host_peaks ({cols}) SELECT {cols} FROM src.host_peaks WHERE true
         ON CONFLICT (hostname, boot_id, governor, cpu_model, cpus)
         DO UPDATE SET ({cols}) = ({excluded})
         WHERE excluded.fp32_gflops > host_peaks.fp32_gflops;
         INSERT OR IGNORE INTO main.metric_info SELECT * FROM src.metric_info;"
    ))?;
    Ok(())
}

/// A copy of a database in a scratch folder, at this lcx's schema, removed
/// with it: what `lcx import --dry-run` imports into, so that it says
/// exactly what would come in (each file judged against what the files
/// before it would add) and writes nothing to the database itself.
pub struct Scratch {
    store: Store,
    /// The database it is a copy of.
    origin: PathBuf,
    _dir: ScratchDir,
}

impl Scratch {
    /// A copy of the database at `path`: a new one when there is none (or
    /// an empty file), in a folder that must exist, as `Store::open`
    /// would have it.
    pub fn of(path: &Path) -> Result<Scratch, StoreError> {
        let failed = |e: &dyn std::fmt::Display, dir: &Path| StoreError::Scratch {
            path: path.to_path_buf(),
            why: format!("its copy in {} for --dry-run failed: {e}", dir.display()),
        };
        let dir = scratch(path)?;
        let copy = dir.path().join("dry-run.db");
        let has_rows = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
        if has_rows {
            match Store::open_read_only(path) {
                Ok(store) => drop(store),
                // An older one: copied as it is, upgraded in the copy.
                Err(StoreError::TooOld { .. }) => {}
                Err(e) => return Err(e),
            }
            vacuum_into(path, &copy).map_err(|e| failed(&e, dir.path()))?;
        } else {
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
            if let Some(folder) = folder.filter(|f| !f.is_dir()) {
                return Err(StoreError::NoFolder {
                    db: path.to_path_buf(),
                    folder: folder.to_path_buf(),
                });
            }
        }
        let store = Store::open(&copy).map_err(|e| failed(&e, dir.path()))?;
        Ok(Scratch {
            store,
            origin: path.to_path_buf(),
            _dir: dir,
        })
    }

    /// [`Store::import_source`] into the copy: what the import into the
    /// database itself would do (a file that is that database: all here).
    pub fn import_source(&mut self, src: &Source) -> Result<Imported, StoreError> {
        if same_file(src.path(), &self.origin) {
            return self.store.itself();
        }
        self.store.import_source(src, false)
    }
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
        if self.path().is_some_and(|here| same_file(here, source_path)) {
            return self.itself();
        }
        let failed = |e: StoreError| self.failed(source_path, e);
        self.conn
            .execute("ATTACH DATABASE ?1 AS src", [read_only_uri(&src.database)])
            .map_err(|e| failed(e.into()))?;
        let result = self.import_attached(source_path, dry_run);
        let detached = self.conn.execute("DETACH DATABASE src", []);
        let out = result.map_err(|e| self.failed(source_path, e))?;
        detached.map_err(|e| self.failed(source_path, e.into()))?;
        Ok(out)
    }

    /// An import's failure in words that name both files: SQLite's own
    /// errors (a full disk, a lock) carry neither, nor should they carry
    /// an error code or a column index.
    fn failed(&self, source: &Path, e: StoreError) -> StoreError {
        let StoreError::Sql(e) = e else {
            return e;
        };
        let db = self.path().map(Path::to_path_buf).unwrap_or_default();
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
            return StoreError::DiskFull {
                free: super::free_bytes(&db),
                path: db,
                doing: "importing into",
            };
        }
        StoreError::ImportFailed {
            file: source.to_path_buf(),
            db,
            why: super::sqlite_words(&e),
        }
    }

    /// The import of this database into itself: everything here already.
    fn itself(&self) -> Result<Imported, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, uuid, name FROM experiments ORDER BY id")?;
        let present = stmt
            .query_map([], |row| {
                Ok(ImportedExperiment {
                    source_id: row.get(0)?,
                    id: Some(row.get(0)?),
                    uuid: row.get(1)?,
                    name: row.get(2)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(Imported {
            present,
            ..Imported::default()
        })
    }

    /// [`Store::import`] with the source attached as `src`.
    fn import_attached(&self, source: &Path, dry_run: bool) -> Result<Imported, StoreError> {
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
        // A dry run takes no write lock: it may look at a database it
        // cannot write.
        let behavior = if dry_run {
            TransactionBehavior::Deferred
        } else {
            TransactionBehavior::Immediate
        };
        // Unchecked: the rows copied are read back through this store's
        // own readers inside the transaction, before it commits.
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, behavior)?;
        // Every experiment row checked before one is read as a type.
        values::check(&tx, "experiments", true, source)?;
        let experiments: Vec<SourceExperiment> = {
            let mut stmt = tx.prepare(
                "SELECT id, uuid, name, status, runner_pid, runner_host, runner_boot_id,
                        runner_start_ticks, detached_at IS NOT NULL
                 FROM src.experiments ORDER BY id",
            )?;
            let rows = stmt
                .query_map([], |row| {
                    Ok(SourceExperiment {
                        id: row.get(0)?,
                        uuid: row.get::<_, Option<String>>(1)?,
                        name: row.get(2)?,
                        status: row.get(3)?,
                        runner: super::read::runner_identity(
                            row.get(4)?,
                            row.get(5)?,
                            row.get(6)?,
                            row.get(7)?,
                        ),
                        detached: row.get(8)?,
                    })
                })?
                .collect::<Result<_, _>>()?;
            rows
        };
        tx.execute_batch(&format!(
            "CREATE TEMP TABLE IF NOT EXISTS import_runs (old INTEGER PRIMARY KEY, new INTEGER);
             DELETE FROM temp.import_runs;
             CREATE TEMP TABLE IF NOT EXISTS import_pick (old INTEGER PRIMARY KEY);
             DELETE FROM {};",
            values::PICKED
        ))?;
        let mut out = Imported::default();
        for e in experiments {
            let Some(uuid) = e.uuid.clone() else {
                return Err(refused(
                    source,
                    format!(
                        "experiment #{} `{}` has no uuid (experiments.uuid is NULL), so it \
                         cannot be told from a copy of it",
                        e.id,
                        values::short(&e.name)
                    ),
                ));
            };
            let here: Option<i64> = tx
                .query_row(
                    "SELECT id FROM main.experiments WHERE uuid = ?1",
                    [&uuid],
                    |row| row.get(0),
                )
                .optional()?;
            let entry = ImportedExperiment {
                uuid: uuid.clone(),
                name: e.name.clone(),
                source_id: e.id,
                id: here,
            };
            // Not ended there: it will differ once it ends, so it is
            // neither judged nor copied now.
            if e.status == "running" {
                let gone = e
                    .runner
                    .as_ref()
                    .is_some_and(|r| r.liveness() == super::liveness::Liveness::Gone);
                if gone && !e.detached {
                    out.abandoned.push(entry);
                } else {
                    out.running.push(entry);
                }
                continue;
            }
            match here {
                Some(id) => {
                    if digest::digest(&tx, "main", id)? != digest::digest(&tx, "src", e.id)? {
                        return Err(StoreError::ImportConflict(Box::new(
                            super::ImportConflict {
                                path: source.to_path_buf(),
                                name: e.name,
                                source_id: e.id,
                                id,
                                uuid,
                            },
                        )));
                    }
                    out.present.push(entry);
                }
                None => {
                    tx.execute(
                        &format!("INSERT INTO {} (old) VALUES (?1)", values::PICKED),
                        [e.id],
                    )?;
                    out.added.push(entry);
                }
            }
        }
        // Every value of what would be copied, checked before any row is:
        // a dry run refuses what the import would.
        for table in &values::TABLES[1..] {
            values::check(&tx, table, false, source)?;
        }
        for entry in &out.present {
            if let Some(id) = entry.id {
                out.reports += copy_reports(&tx, entry.source_id, id, dry_run)?;
            }
        }
        if dry_run {
            return Ok(out);
        }
        for entry in &mut out.added {
            entry.id = Some(copy_experiment(&tx, entry.source_id)?);
        }
        // Nothing added, nothing to copy: no pass over the source's lines.
        if !out.added.is_empty() {
            copy_lines(&tx)?;
        }
        merge_hosts_and_vocabulary(&tx)?;
        // What every command will read of them, read once now: a value
        // the checks let through that lcx's readers cannot take (a JSON
        // column of another shape) refuses the file here, not every
        // later `lcx publish`.
        for entry in &out.added {
            let Some(id) = entry.id else { continue };
            if let Err(e) = self.experiment(id).and_then(|_| self.runs(id)) {
                return Err(refused(
                    source,
                    format!(
                        "experiment #{} `{}` cannot be read as lcx stores it ({})",
                        entry.source_id,
                        values::short(&entry.name),
                        values::short(&e.to_string())
                    ),
                ));
            }
        }
        tx.commit()?;
        Ok(out)
    }
}

/// An experiment of the source, as the import sorts it.
struct SourceExperiment {
    id: i64,
    uuid: Option<String>,
    name: String,
    status: String,
    runner: Option<super::liveness::RunnerIdentity>,
    detached: bool,
}
