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
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/lcx-{uid}")));
    folder.join("host.lock")
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
        // SAFETY: flock only reads the descriptor, which `self.0` keeps open.
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN);
        }
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
            std::fs::create_dir_all(folder).map_err(|e| self.error("creating its folder", e))?;
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

fn flock(file: &File, how: libc::c_int) -> std::io::Result<()> {
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
mod tests {
    use super::*;

    fn never() -> bool {
        false
    }

    fn take(lock: &mut HostLock) -> Held {
        match lock.acquire(&never, &mut |_| {}).unwrap() {
            Acquired::Held(held) => held,
            Acquired::Stopped => panic!("stopped without a stop"),
        }
    }

    #[test]
    fn a_second_taker_names_the_holder_waits_and_gets_the_lock_when_it_is_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep/er/host.lock");
        let mut first = HostLock::new(&path, "quiet-one");
        let held = take(&mut first);
        assert_eq!(
            first.holder(),
            Some(Holder {
                pid: std::process::id(),
                experiment: "quiet-one".into()
            })
        );
        let (told_tx, told_rx) = mpsc::channel();
        let (got_tx, got_rx) = mpsc::channel();
        let waiter_path = path.clone();
        let waiter = std::thread::spawn(move || {
            let mut second = HostLock::new(waiter_path, "second");
            let taken = second.acquire(&never, &mut |h| {
                let _ = told_tx.send(h.cloned());
            });
            let _ = got_tx.send(matches!(taken, Ok(Acquired::Held(_))));
        });
        let told = told_rx.recv().unwrap();
        assert_eq!(
            told.map(|h| h.to_string()),
            Some(format!(
                "experiment `quiet-one` (pid {})",
                std::process::id()
            ))
        );
        // Still waiting: the first holds it.
        assert!(got_rx.try_recv().is_err());
        drop(held);
        assert!(got_rx.recv().unwrap(), "the waiter got the lock");
        waiter.join().unwrap();
        // Let go, the file names nobody.
        assert_eq!(first.holder(), None);
    }

    #[test]
    fn a_stop_ends_the_wait_and_the_abandoned_wait_does_not_keep_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.lock");
        let held = take(&mut HostLock::new(&path, "holder"));
        let mut told = 0;
        let stop = || true;
        let got = HostLock::new(&path, "stopped")
            .acquire(&stop, &mut |_| told += 1)
            .unwrap();
        assert!(matches!(got, Acquired::Stopped));
        assert_eq!(told, 1);
        drop(held);
        // The stopped waiter's thread may take the lock when it is let
        // go; it lets go at once, so a third taker gets it.
        let _third = take(&mut HostLock::new(&path, "third"));
    }

    #[test]
    fn the_same_holder_is_announced_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.lock");
        let mut waiter = HostLock::new(&path, "w");
        let mut told = Vec::new();
        for _ in 0..2 {
            let held = take(&mut HostLock::new(&path, "busy"));
            let stop = || true;
            let _ = waiter
                .acquire(&stop, &mut |h| told.push(h.cloned()))
                .unwrap();
            drop(held);
        }
        assert_eq!(told.len(), 1, "{told:?}");
    }

    #[test]
    fn a_lock_that_cannot_be_made_names_its_file_and_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("a-file");
        std::fs::write(&blocker, "").unwrap();
        let err = HostLock::new(blocker.join("host.lock"), "x")
            .acquire(&never, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("a-file/host.lock"), "{err}");
        assert!(
            err.contains("--no-host-lock") && err.contains(LOCK_ENV),
            "{err}"
        );
    }

    #[test]
    fn the_file_is_named_by_the_variable_else_the_runtime_cache_or_tmp_folder() {
        let all = [
            (LOCK_ENV, "/x/my.lock"),
            ("XDG_RUNTIME_DIR", "/run/user/7"),
            ("XDG_CACHE_HOME", "/c"),
            ("HOME", "/home/u"),
        ];
        let cases: [(&[(&str, &str)], &str); 6] = [
            (&all, "/x/my.lock"),
            (&all[1..], "/run/user/7/lcx/host.lock"),
            (&all[2..], "/c/lcx/host.lock"),
            (&all[3..], "/home/u/.cache/lcx/host.lock"),
            (&[], "/tmp/lcx-7/host.lock"),
            // Set but empty is unset.
            (&[(LOCK_ENV, ""), ("HOME", "/h")], "/h/.cache/lcx/host.lock"),
        ];
        for (pairs, want) in cases {
            let env = |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            };
            assert_eq!(path_from(&env, 7), PathBuf::from(want), "{pairs:?}");
        }
    }

    #[test]
    fn a_half_written_holder_is_nobody() {
        assert_eq!(Holder::parse(""), None);
        assert_eq!(Holder::parse("pid 12\n"), None);
        assert_eq!(
            Holder::parse("pid 12\nexperiment a b\n"),
            Some(Holder {
                pid: 12,
                experiment: "a b".into()
            })
        );
    }
}
