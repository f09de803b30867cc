//! One benchmark per host at a time: an advisory `flock` on one file that
//! every local `lcx run` takes for the duration of each cell, so that two
//! experiments on one machine wait for each other instead of measuring
//! each other. The kernel drops a `flock` when its holder's descriptor
//! closes, a killed holder included, so there is no stale lock to clean up.
//!
//! The holder writes its pid and experiment name into the file once it
//! holds it; a waiter reads them to say whom it waits for.

use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// The environment variable that names the lock file instead of the default.
pub const LOCK_ENV: &str = "LCX_HOST_LOCK";

/// How often a waiter looks at the stop signal (Ctrl-C) while it waits.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The host lock could not be taken for a reason other than another
/// holder: its folder or file cannot be created or locked.
#[derive(Debug, thiserror::Error)]
#[error(
    "the host lock {path}: {doing}: {source} (set {LOCK_ENV} to another file, \
     or run with --no-host-lock to measure without it)"
)]
pub struct LockError {
    pub path: PathBuf,
    doing: &'static str,
    #[source]
    source: std::io::Error,
}

/// Who holds the lock, as the holder wrote it into the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub experiment: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "experiment `{}` (pid {})", self.experiment, self.pid)
    }
}

impl Holder {
    fn to_text(&self) -> String {
        format!("pid {}\nexperiment {}\n", self.pid, self.experiment)
    }

    /// The file's text, or `None` while it is empty or half written.
    fn parse(text: &str) -> Option<Holder> {
        let mut pid = None;
        let mut experiment = None;
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("pid ") {
                pid = p.trim().parse().ok();
            } else if let Some(e) = line.strip_prefix("experiment ") {
                experiment = Some(e.to_string());
            }
        }
        Some(Holder {
            pid: pid?,
            experiment: experiment?,
        })
    }
}

/// Where the lock file is: `$LCX_HOST_LOCK`, else `lcx/host.lock` under
/// the user's runtime folder (`$XDG_RUNTIME_DIR`), else under the cache
/// folder (`$XDG_CACHE_HOME`, `~/.cache`), else `/tmp/lcx-UID/host.lock`.
/// The runtime folder is per user and lives in memory, which is what a
/// lock wants; it is a host lock for one user's benchmarks.
pub fn default_path() -> PathBuf {
    // SAFETY: getuid cannot fail and has no preconditions.
    let uid = unsafe { libc::getuid() };
    path_from(&|name| std::env::var_os(name), uid)
}

/// [`default_path`] over an environment given as a function.
fn path_from(env: &dyn Fn(&str) -> Option<std::ffi::OsString>, uid: u32) -> PathBuf {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(file) = var(LOCK_ENV) {
        return PathBuf::from(file);
    }
    let folder = var("XDG_RUNTIME_DIR")
        .map(|d| PathBuf::from(d).join("lcx"))
        .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("lcx")))
        .or_else(|| var("HOME").map(|d| PathBuf::from(d).join(".cache").join("lcx")))
        .unwrap_or_else(|| shared_fallback(uid));
    folder.join("host.lock")
}

/// The folder of the last resort, under `/tmp`, which every user shares:
/// lcx uses it only as a folder of its own (`crate::files::private_dir`),
/// so that no one else can plant a link at the lock's name.
fn shared_fallback(uid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/lcx-{uid}"))
}

/// The host lock as one runner takes it, cell after cell.
#[derive(Debug)]
pub struct HostLock {
    path: PathBuf,
    me: Holder,
    /// Whether this runner has said it waits, and for whom it last said
    /// so: said once, not before every cell of the same other experiment.
    said: bool,
    announced: Option<Holder>,
}

/// What [`HostLock::acquire`] came to.
#[derive(Debug)]
pub enum Acquired {
    Held(Held),
    /// The stop signal was raised while waiting.
    Stopped,
}

/// The lock, held until dropped.
#[derive(Debug)]
#[must_use = "the host lock is held only while this lives"]
pub struct Held(File);

impl Drop for Held {
    fn drop(&mut self) {
        // Emptied first, so that a waiter never names a holder that has
        // gone; best effort, the unlock is what matters.
        let _ = self.0.set_len(0);
        let _ = flock(&self.0, libc::LOCK_UN);
    }
}

impl HostLock {
    /// The lock at `path`, to be held on behalf of `experiment` by this
    /// process.
    pub fn new(path: impl Into<PathBuf>, experiment: &str) -> HostLock {
        HostLock {
            path: path.into(),
            me: Holder {
                pid: std::process::id(),
                experiment: experiment.to_string(),
            },
            said: false,
            announced: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the lock, waiting for its holder if there is one. Before it
    /// waits, `waiting` is told whom for (`None`: a holder that has not
    /// written its name yet): the first time, and then only for a holder
    /// other than the one it was last told about. `stopped` is asked while waiting; once it says yes,
    /// the wait ends with [`Acquired::Stopped`].
    pub fn acquire(
        &mut self,
        stopped: &dyn Fn() -> bool,
        waiting: &mut dyn FnMut(Option<&Holder>),
    ) -> Result<Acquired, LockError> {
        loop {
            let file = self.open()?;
            let file = match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
                Ok(()) => file,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let holder = self.holder();
                    // A holder that has not named itself yet (or has just
                    // let go) is news only the first time.
                    if !self.said || (holder.is_some() && holder != self.announced) {
                        waiting(holder.as_ref());
                        self.said = true;
                        self.announced = holder;
                    }
                    match wait(file, stopped).map_err(|e| self.error("locking", e))? {
                        Some(file) => file,
                        None => return Ok(Acquired::Stopped),
                    }
                }
                Err(e) => return Err(self.error("locking", e)),
            };
            // A lock on a file that was deleted and made again at the path
            // (a cleaner of /tmp, a logout emptying the runtime folder)
            // guards nothing: take it again on the file there now.
            if !self.is_at_path(&file) {
                continue;
            }
            // Whom the lock's waiters name; a lock without it still works.
            let text = self.me.to_text();
            let _ = file.set_len(0);
            let _ = file.write_all_at(text.as_bytes(), 0);
            return Ok(Acquired::Held(Held(file)));
        }
    }

    /// Who holds the lock now, as far as the file says.
    pub fn holder(&self) -> Option<Holder> {
        Holder::parse(&std::fs::read_to_string(&self.path).ok()?)
    }

    fn open(&self) -> Result<File, LockError> {
        if let Some(folder) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            // SAFETY: getuid cannot fail and has no preconditions.
            if folder == shared_fallback(unsafe { libc::getuid() }) {
                crate::files::private_dir(folder).map_err(|e| {
                    self.error(
                        "making its folder, one of its own",
                        std::io::Error::other(e),
                    )
                })?;
            } else {
                std::fs::create_dir_all(folder)
                    .map_err(|e| self.error("creating its folder", e))?;
            }
        }
        // Opened for writing (to name the holder) without truncating: the
        // holder's name stays readable until it lets go.
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.path)
            .map_err(|e| self.error("opening", e))
    }

    fn is_at_path(&self, file: &File) -> bool {
        let held = file.metadata().map(|m| (m.dev(), m.ino()));
        let now = std::fs::metadata(&self.path).map(|m| (m.dev(), m.ino()));
        matches!((held, now), (Ok(a), Ok(b)) if a == b)
    }

    fn error(&self, doing: &'static str, source: std::io::Error) -> LockError {
        LockError {
            path: self.path.clone(),
            doing,
            source,
        }
    }
}

/// `flock(2)` on `file` (`LOCK_EX`, `LOCK_SH`, with `LOCK_NB`, `LOCK_UN`):
/// the one wrapper the host lock, the revision cache's locks and the peak
/// cache's probe lock share.
pub(crate) fn flock(file: &File, how: libc::c_int) -> std::io::Result<()> {
    // SAFETY: flock only reads the descriptor, which `file` keeps open.
    if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A blocking `flock`, which the kernel hands over as soon as the holder
/// lets go, on a thread of its own so that the runner can still see a
/// Ctrl-C. `None` when `stopped` said yes first: the thread is left
/// blocked, and should it get the lock later it closes the file at once
/// (its send finds no receiver), which releases it.
fn wait(file: File, stopped: &dyn Fn() -> bool) -> std::io::Result<Option<File>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let taken = flock(&file, libc::LOCK_EX).map(|()| file);
        let _ = tx.send(taken);
    });
    loop {
        match rx.recv_timeout(STOP_POLL) {
            Ok(taken) => return taken.map(Some),
            Err(mpsc::RecvTimeoutError::Timeout) if stopped() => return Ok(None),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(std::io::Error::other("the waiting thread ended"))
            }
        }
    }
}

#[cfg(test)]
mod tests;
