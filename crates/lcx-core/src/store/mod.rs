//! The run store: one SQLite file (WAL, foreign keys on) that holds every
//! experiment, cell and metric lcx records. This is the only module that
//! imports `rusqlite`; the rest of lcx talks to the database through
//! [`Store`]'s typed functions.
//!
//! The schema lives in `migrations/NNNN_*.sql` (documented there); the files
//! are compiled in and applied in order on open, and `PRAGMA user_version`
//! records how many were applied.

pub mod dump;
pub mod import;
mod liveness;
mod migrate;
mod read;
pub mod report_read;
mod types;
mod write;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

pub use liveness::{Liveness, RunnerIdentity};
pub use migrate::LATEST_VERSION;
pub use read::{QueryResult, SqlValue};

/// The database every command uses without `--db` (or `LCX_DB`).
pub const DEFAULT_DB: &str = "lcx.db";
pub use types::*;

/// How long a writer waits for another lcx process's transaction before it
/// gives up. Transactions are one metric line each, so waits are short; the
/// generous bound only matters when many processes share one file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// An experiment of an imported file that is here already with other
/// content ([`StoreError::ImportConflict`]).
#[derive(Debug)]
pub struct ImportConflict {
    pub path: PathBuf,
    pub name: String,
    /// Its id in the file.
    pub source_id: i64,
    /// Its id here.
    pub id: i64,
    pub uuid: String,
}

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "database {path} has schema version {found}, newer than this lcx understands \
         (up to {supported}); use a newer lcx. The file was not changed."
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "database {path} has schema version {found}, older than this lcx ({supported}); \
         open it once for writing (e.g. `lcx run`) to upgrade it"
    )]
    TooOld {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("no database at {0}")]
    Missing(PathBuf),
    #[error("no space left on device while {doing} {path} ({free} bytes free)")]
    DiskFull {
        path: PathBuf,
        doing: &'static str,
        free: u64,
    },
    #[error("{0} is a directory; --db / LCX_DB names the database file (e.g. {0}/lcx.db)")]
    IsDirectory(PathBuf),
    #[error(
        "cannot create the database {db}: its folder {folder} does not exist (create it, or \
         check --db / LCX_DB)"
    )]
    NoFolder { db: PathBuf, folder: PathBuf },
    #[error("{0} is not an SQLite database; refusing to touch it (check --db / LCX_DB)")]
    NotSqlite(PathBuf),
    #[error(
        "{0} is an empty file, not an lcx database: only `lcx run` makes a database in it \
         (check --db / LCX_DB)"
    )]
    Empty(PathBuf),
    #[error(
        "database {path} is damaged ({why}); lcx did not change it. `sqlite3 {path} \
         .recover` may save what it holds"
    )]
    Damaged { path: PathBuf, why: String },
    #[error(
        "database {path} says schema version {found}, but its tables are not that version's \
         ({detail}); refusing to upgrade it. The file was not changed."
    )]
    Inconsistent {
        path: PathBuf,
        found: i64,
        detail: String,
    },
    #[error(
        "{0} is an SQLite database of another program (it has tables but no lcx schema \
         version); refusing to touch it (check --db / LCX_DB)"
    )]
    Foreign(PathBuf),
    #[error(
        "experiment {id} is being run by lcx {holder}; wait for it to finish or stop it \
         (Ctrl-C there) before resuming"
    )]
    Taken { id: i64, holder: String },
    #[error(
        "experiment {id} was last run by lcx {holder}, which cannot be checked from this host; \
         if that runner is gone, resume with --takeover"
    )]
    TakenElsewhere { id: i64, holder: String },
    #[error(
        "experiment {id} was taken over by lcx {by}; this runner stopped its cells and leaves \
         them to that one"
    )]
    TakenOver { id: i64, by: String },
    #[error("experiment {id} {holder}")]
    StillRunning { id: i64, holder: String },
    #[error(
        "experiment {id} was removed from the database (`lcx rm --force`) while this runner \
         was running it; stopped its cell and recorded nothing more"
    )]
    Removed { id: i64 },
    /// A migration SQLite refused; `message` is SQLite's words without the
    /// migration's SQL text (its comments are not a message).
    #[error("applying migration {name}: {message}")]
    Migration {
        name: &'static str,
        message: String,
        code: Option<rusqlite::ErrorCode>,
    },
    #[error("no experiment matches `{0}` (expected an id, `latest` or an experiment name)")]
    ExperimentNotFound(String),
    #[error(
        "{}: experiment #{} `{}` (uuid {}) is here already, as #{}, with other cells or lines \
         (one copy ran on after the other was made); nothing from {} was imported: remove one \
         of the two (`lcx rm`) to keep the other",
        .0.path.display(), .0.source_id, .0.name, .0.uuid, .0.id, .0.path.display()
    )]
    ImportConflict(Box<ImportConflict>),
    #[error("cannot import {path}: {why}; nothing was imported from it")]
    NotImportable { path: PathBuf, why: String },
    #[error(
        "importing {} into {} failed: {why}; nothing from {} was imported",
        .file.display(), .db.display(), .file.display()
    )]
    ImportFailed {
        file: PathBuf,
        db: PathBuf,
        why: String,
    },
    #[error("database {path}: {why}; it was not changed")]
    Scratch { path: PathBuf, why: String },
    #[error("run {run_id}: iteration {iteration} of `{name}` was already recorded")]
    DuplicateIteration {
        run_id: i64,
        iteration: i64,
        name: String,
    },
    #[error("only read-only statements are allowed here: {0}")]
    NotReadOnly(String),
    /// A statement stopped at its time limit ([`Store::query_within`]): not
    /// the user's input being wrong, so not [`StoreError::is_user_input`].
    #[error("query interrupted after {} s", after.as_secs_f64())]
    Interrupted { after: std::time::Duration },
    #[error("database column {column} holds an unexpected value `{value}`")]
    BadValue { column: &'static str, value: String },
    #[error("JSON column {column}")]
    Json {
        column: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
}

/// SQLite's words for an error, without the error code rusqlite appends
/// when SQLite gave no message of its own ("database or disk is full:
/// Error code 13"), and without the column index of a type mismatch.
pub(crate) fn sqlite_words(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(message)) => message.clone(),
        rusqlite::Error::SqliteFailure(code, None) => {
            rusqlite::ffi::code_to_str(code.extended_code).to_string()
        }
        rusqlite::Error::InvalidColumnType(_, name, kind) => {
            format!("column {name} holds a value of type {kind}")
        }
        other => other.to_string(),
    }
}

/// Bytes available to this user on the filesystem that holds `path` (0 when
/// it cannot be asked).
fn free_bytes(path: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => dir,
        None => Path::new("."),
    };
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return 0;
    };
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `stat` a buffer statvfs fills.
    if unsafe { libc::statvfs(c.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return 0;
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let stat = unsafe { stat.assume_init() };
    #[allow(
        clippy::unnecessary_cast,
        reason = "u64 on Linux x86-64, narrower types on 32-bit targets"
    )]
    (stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64)
}

impl StoreError {
    /// Whether SQLite ran out of space (`SQLITE_FULL`).
    pub fn is_disk_full(&self) -> bool {
        let sql = match self {
            StoreError::Open { source, .. } => source,
            StoreError::Migration { code, .. } => {
                return *code == Some(rusqlite::ErrorCode::DiskFull)
            }
            StoreError::Sql(source) => source,
            StoreError::DiskFull { .. } => return true,
            _ => return false,
        };
        sql.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
    }

    /// Whether SQLite found the file damaged or not a database
    /// (`SQLITE_CORRUPT`, `SQLITE_NOTADB`), or lcx did first.
    pub fn is_damaged(&self) -> bool {
        let sql = match self {
            StoreError::Open { source, .. } | StoreError::Sql(source) => source,
            StoreError::Damaged { .. } | StoreError::NotSqlite(_) => return true,
            StoreError::Migration { code, .. } => {
                return matches!(
                    code,
                    Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
                )
            }
            _ => return false,
        };
        matches!(
            sql.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
    }

    /// Whether the error is about what the user pointed lcx at (a path, a
    /// file of the wrong kind or version, a selector) rather than a failure
    /// while working: the command line exits 2 for these.
    /// `path` cannot be imported, and `why` (`lcx import`, from a
    /// database or an export).
    pub(super) fn not_importable(path: &Path, why: impl Into<String>) -> StoreError {
        StoreError::NotImportable {
            path: path.to_path_buf(),
            why: why.into(),
        }
    }

    pub fn is_user_input(&self) -> bool {
        matches!(
            self,
            StoreError::TooNew { .. }
                | StoreError::TooOld { .. }
                | StoreError::Missing(_)
                | StoreError::IsDirectory(_)
                | StoreError::NoFolder { .. }
                | StoreError::NotSqlite(_)
                | StoreError::Empty(_)
                | StoreError::Damaged { .. }
                | StoreError::Inconsistent { .. }
                | StoreError::Foreign(_)
                | StoreError::ExperimentNotFound(_)
                | StoreError::ImportConflict(_)
                | StoreError::NotImportable { .. }
                | StoreError::NotReadOnly(_)
        ) || self.is_damaged()
    }
}

/// An open run store.
pub struct Store {
    conn: Connection,
    path: Option<PathBuf>,
    /// The claim this process holds on an experiment, checked by every
    /// write for it (see [`Store::claim_experiment`]).
    fence: Option<write::Fence>,
    /// Time spent waiting for the write lock, summed over every write.
    lock_wait: Duration,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path` for reading and
    /// writing, and brings its schema up to date. A file that is not an lcx
    /// database, or has a newer schema than this lcx knows, is refused
    /// before anything is written: it stays byte-identical, with no `-wal`
    /// or `-shm` beside it.
    ///
    /// An empty file is taken as a new database (`--db "$(mktemp)"`): it
    /// holds nothing to lose, and SQLite would read it as an empty database.
    /// Only the commands that run (`lcx run`, `lcx bisect`'s runs) make a
    /// database this way; the others refuse an empty file
    /// ([`Store::open_existing`], [`Store::open_read_only`]), and `report
    /// --archive` opens so only a file a read-only open already accepted.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, true)
    }

    fn open_with(path: &Path, allow_empty: bool) -> Result<Store, StoreError> {
        let existed = path.exists();
        // SQLite's own word for it is "unable to open database file".
        if let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) {
            if !existed && !folder.is_dir() {
                return Err(StoreError::NoFolder {
                    db: path.to_path_buf(),
                    folder: folder.to_path_buf(),
                });
            }
        }
        // Several processes opening a new file at once: the one switching it
        // to WAL holds a lock that SQLite reports as busy without calling the
        // busy handler, so the open is retried until the busy timeout.
        let start = std::time::Instant::now();
        loop {
            match Store::open_once(path, allow_empty) {
                Err(StoreError::Open { source, .. })
                    if source.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && start.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) if e.is_disk_full() => {
                    if !existed {
                        // A half-made file would only be refused later.
                        for side in ["", "-wal", "-shm", "-journal"] {
                            let mut p = path.as_os_str().to_owned();
                            p.push(side);
                            let _ = std::fs::remove_file(p);
                        }
                    }
                    return Err(StoreError::DiskFull {
                        path: path.to_path_buf(),
                        doing: if existed { "upgrading" } else { "creating" },
                        free: free_bytes(path),
                    });
                }
                other => return other,
            }
        }
    }

    fn open_once(path: &Path, allow_empty: bool) -> Result<Store, StoreError> {
        check_header(path, allow_empty)?;
        let open_err = |source| open_error(path, source);
        let conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // Read the version before anything writes (a migration, or
        // journal_mode=WAL, which rewrites the header), so a refused file
        // stays byte-for-byte intact; `migrate` checks, in its transaction,
        // that the tables are that version's before it changes them.
        check_schema(&conn, path)?;
        configure(&conn).map_err(open_err)?;
        let mut store = Store {
            conn,
            path: Some(path.to_path_buf()),
            fence: None,
            lock_wait: Duration::ZERO,
        };
        migrate::migrate(&mut store.conn, path)?;
        store
            .conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
            .map_err(open_err)?;
        Ok(store)
    }

    /// Like [`Store::open`], but a missing file is an error instead of a new
    /// database (`lcx run --resume` has nothing to resume in a new file).
    /// An empty file is refused too: it holds no experiment to change.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        Store::open_with(path, false)
    }

    /// Opens an existing database for reading only (reports, queries): never
    /// creates the file, never migrates, refuses other schema versions.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        check_header(path, false)?;
        let open_err = |source| open_error(path, source);
        // SQLite makes `-wal` and `-shm` beside a WAL file even to read it;
        // a refused file must not keep them.
        let sides = SideFiles::note(path);
        let opened = (|| {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
            conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
            let found = check_schema(&conn, path)?;
            if found < LATEST_VERSION {
                return Err(StoreError::TooOld {
                    path: path.to_path_buf(),
                    found,
                    supported: LATEST_VERSION,
                });
            }
            Ok(conn)
        })();
        let conn = match opened {
            Ok(conn) => conn,
            Err(e) => {
                // Only a damaged file's: no writer uses it. A file refused
                // for its version may be being upgraded by a writer whose
                // side files these now are.
                if e.is_damaged() {
                    sides.remove_new();
                }
                return Err(e);
            }
        };
        Ok(Store {
            conn,
            path: Some(path.to_path_buf()),
            fence: None,
            lock_wait: Duration::ZERO,
        })
    }

    /// A fresh in-memory database with the current schema (tests, dry runs).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory()?;
        configure(&conn)?;
        let mut store = Store {
            conn,
            path: None,
            fence: None,
            lock_wait: Duration::ZERO,
        };
        migrate::migrate(&mut store.conn, Path::new(":memory:"))?;
        Ok(store)
    }

    /// The file this store was opened from (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The schema version recorded in the file (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        Ok(migrate::user_version(&self.conn)?)
    }

    /// `PRAGMA integrity_check`; `"ok"` for a healthy file.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))?)
    }
}

/// An error of SQLite's while opening: a damaged file is said so.
fn open_error(path: &Path, source: rusqlite::Error) -> StoreError {
    match source.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            StoreError::Damaged {
                path: path.to_path_buf(),
                why: source.to_string(),
            }
        }
        _ => StoreError::Open {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Which of a database's side files (`-wal`, `-shm`) existed before a
/// read-only open, so that a refused open removes only what it made.
struct SideFiles {
    made: Vec<PathBuf>,
}

impl SideFiles {
    fn note(path: &Path) -> SideFiles {
        let made = ["-wal", "-shm"]
            .iter()
            .map(|suffix| {
                let mut p = path.as_os_str().to_owned();
                p.push(suffix);
                PathBuf::from(p)
            })
            .filter(|p| !p.exists())
            .collect();
        SideFiles { made }
    }

    /// Removes the side files that did not exist before.
    fn remove_new(&self) {
        for p in &self.made {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The 100-byte SQLite header, read as plain bytes before SQLite opens the
/// file (opening a WAL-mode file creates `-wal` and `-shm` beside it, even
/// read-only). Refuses what is not SQLite (any file of 1 to 99 bytes, which
/// SQLite would overwrite with a new database), an empty file unless
/// `allow_empty` (`lcx run` making a database in it), a file shorter than
/// its header says (truncated), what a newer lcx wrote, and another
/// program's database. A missing file passes (SQLite creates it), and so
/// does a busy one (a `-wal` or `-journal` beside it) whose first 100 bytes
/// are not yet SQLite's, which SQLite reads under its locks. The header of
/// a WAL-mode file can lag behind its `-wal`; [`check_schema`] repeats the
/// checks through SQLite.
fn check_header(path: &Path, allow_empty: bool) -> Result<(), StoreError> {
    use std::io::Read;
    // SQLite's own error for a folder ("unable to open database file")
    // names neither the path nor the mistake.
    if path.is_dir() {
        return Err(StoreError::IsDirectory(path.to_path_buf()));
    }
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        // Let SQLite report what it makes of an unreadable path.
        Err(_) => return Ok(()),
    };
    let mut header = [0u8; 100];
    let mut filled = 0;
    while filled < header.len() {
        match file.read(&mut header[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(_) => return Ok(()),
        }
    }
    // A file another process is creating or writing right now (a partial
    // first page, an open -wal or -journal) is left to SQLite, whose locks
    // make it consistent; the header of an idle file is authoritative.
    let side = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        Path::new(&p).exists()
    };
    let busy = side("-wal") || side("-journal");
    if filled == 0 {
        return if allow_empty {
            Ok(())
        } else {
            Err(StoreError::Empty(path.to_path_buf()))
        };
    }
    // No SQLite file is shorter than its header: SQLite writes a new file's
    // first page whole.
    if filled < header.len() {
        return Err(StoreError::NotSqlite(path.to_path_buf()));
    }
    if &header[..16] != b"SQLite format 3\0" {
        return if busy {
            Ok(())
        } else {
            Err(StoreError::NotSqlite(path.to_path_buf()))
        };
    }
    let be32 = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    // The page size (1 stands for 65536) and, when the header's count is
    // valid (its change counter at 24 matches the one at 92), the pages the
    // file holds: a file cut short is damaged, and SQLite would only find
    // out part-way through a report.
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536,
        n => u64::from(n),
    };
    if !(512..=65_536).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(StoreError::Damaged {
            path: path.to_path_buf(),
            why: format!("its header gives a page size of {page_size} bytes"),
        });
    }
    let pages = u64::from(be32(28));
    let counted = pages > 0 && be32(24) == be32(92);
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if counted && !busy && len < pages * page_size {
        return Err(StoreError::Damaged {
            path: path.to_path_buf(),
            why: format!(
                "{len} bytes, though its header counts {pages} pages of {page_size}: cut short"
            ),
        });
    }
    let schema_cookie = be32(40);
    // user_version is a signed 32-bit integer.
    let user_version = i64::from(be32(60) as i32);
    if user_version > LATEST_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: user_version,
            supported: LATEST_VERSION,
        });
    }
    if user_version == 0 && schema_cookie != 0 && !busy {
        return Err(StoreError::Foreign(path.to_path_buf()));
    }
    Ok(())
}

/// The same checks as [`check_header`] through SQLite, before anything is
/// written; returns the schema version.
fn check_schema(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    let open_err = |source| open_error(path, source);
    let found = migrate::user_version(conn).map_err(open_err)?;
    if found > LATEST_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found,
            supported: LATEST_VERSION,
        });
    }
    if found == 0 {
        let tables: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(open_err)?;
        if tables > 0 {
            return Err(StoreError::Foreign(path.to_path_buf()));
        }
    }
    Ok(found)
}

/// Per-connection settings. synchronous=NORMAL under WAL keeps commits
/// durable against process crashes (only an OS crash can lose the last
/// transactions) while making a commit per metric line cheap.
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // 32 MiB of page cache (default 2 MiB) keeps the metrics index hot
    // during large ingests; a fixed bound, so memory stays flat.
    conn.pragma_update(None, "cache_size", -32768)?;
    Ok(())
}

#[cfg(test)]
mod tests;
