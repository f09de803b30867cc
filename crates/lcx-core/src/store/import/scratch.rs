//! The folders an import works in (a JSON export loaded into a database,
//! an older database upgraded in a copy, a dry run's copy of the target):
//! private (mode 0700) under the temporary folder, named
//! `lcx-import-PID-…` so that a later lcx tells one left by a process
//! that died (`kill -9`) and removes it, and listed while they live so
//! that a Ctrl-C or SIGTERM removes them before the process ends.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The start of every scratch folder's name.
const PREFIX: &str = "lcx-import-";

/// The scratch folders this process holds now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Set by [`remove_on_signal`]'s handler before it removes anything.
static SIGNALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a signal is ending this process: the import it interrupted
/// fails (its folder is gone), and its caller must let the handler end
/// the process (exit 130) rather than report that failure as its own.
pub fn signalled() -> bool {
    SIGNALLED.load(std::sync::atomic::Ordering::SeqCst)
}

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while holding the list leaves it usable: it is only paths.
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A scratch folder, removed (and forgotten) when dropped.
pub struct ScratchDir {
    dir: Option<tempfile::TempDir>,
}

impl ScratchDir {
    /// A new scratch folder in the temporary folder.
    pub fn new() -> std::io::Result<ScratchDir> {
        // Created and listed under the list's lock: a signal's handler,
        // which takes it too, sees the folder listed or not yet made.
        let mut listed = live();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .tempdir()?;
        listed.push(dir.path().to_path_buf());
        Ok(ScratchDir { dir: Some(dir) })
    }

    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |d| d.path())
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            live().retain(|p| p != dir.path());
            drop(dir);
        }
    }
}

/// Removes every scratch folder this process holds: for a signal handler,
/// just before the process ends.
pub fn remove_live() {
    for dir in live().drain(..) {
        remove_while_in_use(&dir);
    }
}

/// Removes `dir` while another thread may still be writing in it (an
/// import goes on until the handler ends the process): the folder is
/// first renamed, so that files opened by its old path (SQLite's journal)
/// can no longer be made in it, then removed, again if a file that was
/// being made still appeared. The new name keeps the prefix and the
/// process id, so a later lcx removes it if this one dies first.
fn remove_while_in_use(dir: &Path) {
    let mut doomed = dir.as_os_str().to_owned();
    doomed.push("-removing");
    let doomed = PathBuf::from(doomed);
    let target = if std::fs::rename(dir, &doomed).is_ok() {
        doomed
    } else {
        dir.to_path_buf()
    };
    for _ in 0..50 {
        match std::fs::remove_dir_all(&target) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            _ => return,
        }
    }
}

/// Removes this process's scratch folders on Ctrl-C, SIGTERM or SIGHUP,
/// then ends it (exit 130): an import's transaction not committed is
/// rolled back by SQLite, and nothing of it is left in the temporary
/// folder. For a command that installs no handler of its own.
pub fn remove_on_signal() {
    // Refused only when a handler is set already: that one decides.
    let _ = ctrlc::set_handler(|| {
        SIGNALLED.store(true, std::sync::atomic::Ordering::SeqCst);
        remove_live();
        #[expect(
            clippy::disallowed_methods,
            reason = "the handler's thread ends the process once the copies are gone: no \
                      main is there to return an exit code to, and no destructor is left to run"
        )]
        std::process::exit(130);
    });
}

/// Removes the scratch folders in the temporary folder that processes
/// which are gone left behind (killed before they could remove them):
/// only folders of this user, named as [`ScratchDir`] names them, whose
/// process no longer runs. Their number.
pub fn remove_stale() -> usize {
    remove_stale_in(&std::env::temp_dir())
}

fn remove_stale_in(folder: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(folder) else {
        return 0;
    };
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { libc::getuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // Not followed through a link, and only this user's.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_listed_while_it_lives_and_removed_with_it() {
        let dir = ScratchDir::new().unwrap();
        let path = dir.path().to_path_buf();
        assert!(path.is_dir());
        assert!(live().contains(&path));
        drop(dir);
        assert!(!path.exists());
        assert!(!live().contains(&path));
    }

    #[test]
    fn only_folders_of_processes_that_are_gone_are_removed_as_stale() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid no process has (beyond pid_max), one that runs (this
        // process), a name of another program, and a link.
        let gone = tmp.path().join(format!("{PREFIX}4194999-abc"));
        let mine = tmp
            .path()
            .join(format!("{PREFIX}{}-abc", std::process::id()));
        let other = tmp.path().join("other-4194999-abc");
        std::fs::create_dir(&gone).unwrap();
        std::fs::write(gone.join("export.db"), "x").unwrap();
        std::fs::create_dir(&mine).unwrap();
        std::fs::create_dir(&other).unwrap();
        let target = tempfile::tempdir().unwrap();
        let link = tmp.path().join(format!("{PREFIX}4194998-abc"));
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        assert_eq!(remove_stale_in(tmp.path()), 1);
        assert!(!gone.exists());
        assert!(mine.exists() && other.exists() && target.path().exists());
    }
}
