//! How lcx writes a file at a path someone else chose: an output the user
//! named (`lcx export -o`, `lcx report --archive`, `lcx publish DIR`,
//! `--metrics-out`) or a file under a folder every user shares (`/tmp`).
//!
//! - An output never lands on a database: a path that is, or links to, a
//!   database lcx has open (or its `-wal`, `-shm` or `-journal` file), or
//!   any existing file that starts with SQLite's header, is refused before
//!   anything is written ([`check_output`]).
//! - An output is written whole or not at all: into a new temporary file
//!   in the same folder, renamed over the path at the end
//!   ([`Replacement`]); a failed write leaves the old file as it was. The
//!   rename replaces what is at the path: a symbolic link there is replaced
//!   by the file, its target left alone.
//! - Under a shared folder lcx writes only inside a folder of its own
//!   ([`private_dir`]): made with mode 0700, and refused when it is a
//!   symbolic link or another user's.
//!
//! On the bottom floor: the store, the reports, the site, the host lock
//! and the command line all write through it.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The first 16 bytes of every SQLite database file.
pub const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// The files SQLite keeps beside a database, by the suffix of their name.
const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "{flag} {}: is the database lcx has open ({}) or one of its files; name another file",
        path.display(),
        db.display()
    )]
    IsTheDatabase {
        flag: String,
        path: PathBuf,
        db: PathBuf,
    },
    #[error(
        "{flag} {}: is an SQLite database (it starts with \"SQLite format 3\"); lcx writes \
         its output over no database: name another file",
        path.display()
    )]
    IsADatabase { flag: String, path: PathBuf },
    #[error("{flag} {}: is a folder; expected a file", path.display())]
    IsAFolder { flag: String, path: PathBuf },
    #[error("{flag} {}: {source}", path.display())]
    Io {
        flag: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl OutputError {
    /// The user named a path lcx must not write (exit 2); an I/O failure
    /// is not the user's.
    pub fn is_user_input(&self) -> bool {
        !matches!(self, OutputError::Io { .. })
    }

    fn io(flag: &str, path: &Path, source: std::io::Error) -> OutputError {
        OutputError::Io {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            source,
        }
    }
}

/// `path` with every symbolic link followed, as far as the files exist:
/// the file a write through `path` would reach. A missing last part (a new
/// file, a link to one) is joined to its folder's resolved path.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(full) = std::fs::canonicalize(path) {
        return full;
    }
    // A dangling link: follow its text by hand (as the kernel would, up to
    // its own limit of 40 links).
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&at) {
            Ok(target) => {
                at = match at.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                }
            }
            Err(_) => break,
        }
    }
    let dir = match at.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match (std::fs::canonicalize(&dir), at.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => at,
    }
}

/// The paths that are `db`'s file: the database and its side files, both
/// as named (in its folder, resolved) and with every link followed.
fn database_files(db: &Path) -> Vec<PathBuf> {
    let mut mains = vec![resolved(db)];
    let dir = match db.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let (Ok(dir), Some(name)) = (std::fs::canonicalize(dir), db.file_name()) {
        let named = dir.join(name);
        if !mains.contains(&named) {
            mains.push(named);
        }
    }
    mains
        .iter()
        .flat_map(|main| with_side_files(main))
        .collect()
}

/// `db`'s side file of `suffix` (`-wal`, `-shm`, `-journal`).
pub fn side_file(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// `db` and the files SQLite keeps beside it.
pub fn with_side_files(db: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    std::iter::once(db.to_path_buf()).chain(SIDE_FILES.iter().map(|s| side_file(db, s)))
}

/// Whether the file at `path` (links followed) starts with SQLite's header.
pub fn is_sqlite(path: &Path) -> bool {
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == SQLITE_HEADER)
}

/// Refuses `path` as the output of `flag`: a path that is, or links to,
/// one of `databases` (or one of their side files), an existing file that
/// starts with SQLite's header, or a folder.
pub fn check_output(flag: &str, path: &Path, databases: &[&Path]) -> Result<(), OutputError> {
    let target = resolved(path);
    for db in databases {
        if database_files(db).contains(&target) {
            return Err(OutputError::IsTheDatabase {
                flag: flag.to_string(),
                path: path.to_path_buf(),
                db: db.to_path_buf(),
            });
        }
    }
    if target.is_dir() {
        return Err(OutputError::IsAFolder {
            flag: flag.to_string(),
            path: path.to_path_buf(),
        });
    }
    if is_sqlite(&target) {
        return Err(OutputError::IsADatabase {
            flag: flag.to_string(),
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// A file written in place of `path`: a new temporary file in `path`'s
/// folder, renamed over `path` by [`Replacement::commit`]. Dropped without
/// a commit (an error on the way), the temporary file is removed and
/// `path` is as it was.
#[derive(Debug)]
pub struct Replacement {
    flag: String,
    path: PathBuf,
    databases: Vec<PathBuf>,
    tmp: tempfile::NamedTempFile,
}

impl Replacement {
    /// Checks `path` ([`check_output`]) and opens its temporary file. The
    /// new file gets the old one's permissions, else the usual ones for a
    /// new file (0666 less the umask).
    pub fn create(flag: &str, path: &Path, databases: &[&Path]) -> Result<Self, OutputError> {
        check_output(flag, path, databases)?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(dir)
            .map_err(|e| OutputError::io(flag, path, e))?;
        if let Ok(old) = std::fs::metadata(path) {
            let mode = old.permissions().mode() & 0o7777;
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(|e| OutputError::io(flag, path, e))?;
        }
        Ok(Replacement {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            databases: databases.iter().map(|d| d.to_path_buf()).collect(),
            tmp,
        })
    }

    /// The path the file will replace.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes the file to disk and renames it over the path, checked
    /// again just before (something may have appeared there meanwhile).
    pub fn commit(self) -> Result<(), OutputError> {
        let (flag, path) = (self.flag.clone(), self.path.clone());
        self.synced()?;
        let databases: Vec<&Path> = self.databases.iter().map(PathBuf::as_path).collect();
        check_output(&flag, &path, &databases)?;
        self.tmp
            .persist(&path)
            .map(drop)
            .map_err(|e| OutputError::io(&flag, &path, e.error))
    }

    /// As [`Replacement::commit`], but only where nothing is at the path:
    /// `Ok(false)`, and nothing written, where something is.
    pub fn commit_new(self) -> Result<bool, OutputError> {
        let (flag, path) = (self.flag.clone(), self.path.clone());
        self.synced()?;
        match self.tmp.persist_noclobber(&path) {
            Ok(_) => Ok(true),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(OutputError::io(&flag, &path, e.error)),
        }
    }

    fn synced(&self) -> Result<(), OutputError> {
        self.tmp
            .as_file()
            .sync_all()
            .map_err(|e| OutputError::io(&self.flag, &self.path, e))
    }
}

impl Write for Replacement {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tmp.as_file_mut().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tmp.as_file_mut().flush()
    }
}

/// Writes `bytes` as the whole of `path` through a [`Replacement`].
pub fn replace(
    flag: &str,
    path: &Path,
    bytes: &[u8],
    databases: &[&Path],
) -> Result<(), OutputError> {
    let mut file = Replacement::create(flag, path, databases)?;
    file.write_all(bytes)
        .map_err(|e| OutputError::io(flag, path, e))?;
    file.commit()
}

/// Writes `bytes` as a new file at `path`, whole or not at all: `Ok(false)`,
/// and nothing written, where something already is at `path`.
pub fn write_new(
    flag: &str,
    path: &Path,
    bytes: &[u8],
    databases: &[&Path],
) -> Result<bool, OutputError> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    let mut file = Replacement::create(flag, path, databases)?;
    file.write_all(bytes)
        .map_err(|e| OutputError::io(flag, path, e))?;
    file.commit_new()
}

/// Whether `rel` is a path inside a folder: relative, of plain names only
/// (no `..`, no root, no `.`), and not empty.
pub fn is_inside(rel: &Path) -> bool {
    rel.components().next().is_some() && rel.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Why a private folder could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    #[error(
        "{} is a symbolic link; lcx keeps its files under a shared folder only in a folder \
         of its own (remove the link)",
        .0.display()
    )]
    Link(PathBuf),
    #[error("{} is not a folder; lcx keeps its files there in a folder of its own", .0.display())]
    NotAFolder(PathBuf),
    #[error(
        "{} belongs to user {owner}, not to this user ({me}); lcx keeps its files under a \
         shared folder only in a folder of its own",
        path.display()
    )]
    NotMine { path: PathBuf, owner: u32, me: u32 },
    #[error("making {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Makes `path` a folder only this user may enter (mode 0700), or holds an
/// existing one to it: a real folder (not a symbolic link), owned by this
/// user; its mode is narrowed to 0700. Its parent must exist.
pub fn private_dir(path: &Path) -> Result<(), PrivateDirError> {
    let io = |source| PrivateDirError::Io {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    if meta.file_type().is_symlink() {
        return Err(PrivateDirError::Link(path.to_path_buf()));
    }
    if !meta.is_dir() {
        return Err(PrivateDirError::NotAFolder(path.to_path_buf()));
    }
    let me = effective_uid();
    if meta.uid() != me {
        return Err(PrivateDirError::NotMine {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    }
    Ok(())
}

/// `NAME-UID` under the system's temporary folder (`$TMPDIR`, else
/// `/tmp`), made private ([`private_dir`]): where lcx keeps files of its
/// own under that shared folder.
pub fn private_temp_dir(name: &str) -> Result<PathBuf, PrivateDirError> {
    let dir = std::env::temp_dir().join(format!("{name}-{}", effective_uid()));
    private_dir(&dir)?;
    Ok(dir)
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite_file(path: &Path) {
        let mut bytes = SQLITE_HEADER.to_vec();
        bytes.extend_from_slice(&[7u8; 100]);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn the_database_its_side_files_and_links_to_them_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        sqlite_file(&db);
        let before = std::fs::read(&db).unwrap();
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&db, &link).unwrap();
        // A dangling link to the WAL file, which does not exist yet.
        let wal_link = dir.path().join("wal.csv");
        std::os::unix::fs::symlink("x.db-wal", &wal_link).unwrap();
        let dotted = dir.path().join(".").join("x.db");
        for (path, is_the_db) in [
            (db.clone(), true),
            (link.clone(), true),
            (wal_link.clone(), true),
            (dotted, true),
            (dir.path().join("x.db-shm"), true),
            (dir.path().join("x.db-journal"), true),
        ] {
            let e = replace("-o", &path, b"{}\n", &[&db]).unwrap_err();
            assert!(e.is_user_input(), "{e}");
            assert_eq!(
                matches!(e, OutputError::IsTheDatabase { .. }),
                is_the_db,
                "{e}"
            );
            assert!(e.to_string().starts_with("-o "), "{e}");
        }
        assert_eq!(std::fs::read(&db).unwrap(), before);
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        // Nothing else was left in the folder (no temporary file).
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    #[test]
    fn any_sqlite_file_and_a_folder_are_refused_as_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other.sqlite");
        sqlite_file(&other);
        let e = replace("--output", &other, b"x", &[]).unwrap_err();
        assert!(matches!(e, OutputError::IsADatabase { .. }), "{e}");
        let e = replace("--output", dir.path(), b"x", &[]).unwrap_err();
        assert!(matches!(e, OutputError::IsAFolder { .. }), "{e}");
        assert!(is_sqlite(&other));
    }

    #[test]
    fn a_replacement_is_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.csv");
        std::fs::write(&out, "old\n").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
        // Dropped before its commit: the old file stays, no temporary left.
        let mut file = Replacement::create("-o", &out, &[]).unwrap();
        file.write_all(b"half").unwrap();
        drop(file);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        replace("-o", &out, b"new\n", &[]).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new\n");
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // A link at the path is replaced, its target left alone.
        let target = dir.path().join("target.txt");
        std::fs::write(&target, "kept\n").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        replace("-o", &link, b"new\n", &[]).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n");
        assert!(!std::fs::symlink_metadata(&link).unwrap().is_symlink());
        // A new file only where nothing is.
        let fresh = dir.path().join("fresh.md");
        assert!(write_new("--archive-dir", &fresh, b"1", &[]).unwrap());
        assert!(!write_new("--archive-dir", &fresh, b"2", &[]).unwrap());
        assert!(!write_new("--archive-dir", &link, b"2", &[]).unwrap());
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "1");
    }

    #[test]
    fn a_path_inside_a_folder_is_relative_and_plain() {
        assert!(is_inside(Path::new("e/1.html")));
        assert!(is_inside(Path::new("index.html")));
        for bad in ["", "../x.db", "e/../../x.db", "/etc/passwd", "./x"] {
            assert!(!is_inside(Path::new(bad)), "{bad}");
        }
    }

    #[test]
    fn a_private_folder_is_mine_and_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("lcx-me");
        private_dir(&private).unwrap();
        let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // Again: the same folder is fine; a wider one is narrowed.
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o777)).unwrap();
        private_dir(&private).unwrap();
        let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // A planted link, even to a folder of mine, is refused.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let link = dir.path().join("lcx-link");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(matches!(private_dir(&link), Err(PrivateDirError::Link(_))));
        let file = dir.path().join("lcx-file");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            private_dir(&file),
            Err(PrivateDirError::NotAFolder(_))
        ));
        // Another user's folder (only root can make one to test with).
        if effective_uid() == 0 {
            let theirs = dir.path().join("lcx-theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(4242), None).unwrap();
            let e = private_dir(&theirs).unwrap_err();
            assert!(
                matches!(e, PrivateDirError::NotMine { owner: 4242, .. }),
                "{e}"
            );
        }
    }
}
