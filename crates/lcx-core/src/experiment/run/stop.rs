//! Stopping a run: a flag shared between the CLI's signal handler and the
//! runner, which also knows the running cell's process group or Slurm job
//! so that a stop reaches the cell at once.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a child has after SIGTERM before its group gets SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(5);

/// A stop request shared between a signal handler and the runner. The
/// child of the running cell is in its own process group (so a terminal's
/// Ctrl-C reaches only the runner); stopping signals that whole group.
#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    child_group: AtomicI32,
    /// The Slurm job of the running cell: stopping cancels it.
    job: std::sync::Mutex<Option<String>>,
}

impl StopSignal {
    pub fn new() -> Arc<StopSignal> {
        Arc::new(StopSignal::default())
    }

    /// Asks the runner to stop: no new cell starts, the running child's
    /// process group gets SIGTERM, and SIGKILL after a grace period.
    pub fn stop(self: &Arc<Self>) {
        self.stopped.store(true, Ordering::SeqCst);
        self.cancel_job();
        let group = self.child_group.load(Ordering::SeqCst);
        if group > 0 {
            signal_group(group, libc::SIGTERM);
            let this = Arc::clone(self);
            std::thread::spawn(move || {
                std::thread::sleep(KILL_GRACE);
                if this.child_group.load(Ordering::SeqCst) == group {
                    signal_group(group, libc::SIGKILL);
                }
            });
        }
    }

    /// Kills the running child's group at once (a second Ctrl-C).
    pub fn force(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.cancel_job();
        let group = self.child_group.load(Ordering::SeqCst);
        if group > 0 {
            signal_group(group, libc::SIGKILL);
        }
    }

    /// A stop signal that Ctrl-C, SIGTERM and SIGHUP raise: the first
    /// stops the running cell (SIGTERM to its group, SIGKILL after a grace
    /// period) and lets the runner record it as interrupted; a second kills
    /// it at once. Installs the process's one handler for them.
    pub fn on_signals() -> Result<Arc<StopSignal>, ctrlc::Error> {
        let stop = StopSignal::new();
        let handler = Arc::clone(&stop);
        let count = std::sync::atomic::AtomicUsize::new(0);
        ctrlc::set_handler(move || {
            if count.fetch_add(1, Ordering::SeqCst) == 0 {
                eprintln!("\nlcx: stopping (press Ctrl-C again to kill the running cell at once)");
                handler.stop();
            } else {
                handler.force();
            }
        })?;
        Ok(stop)
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    pub(crate) fn set_child(self: &Arc<Self>, group: i32) {
        self.child_group.store(group, Ordering::SeqCst);
        // A stop that raced with the spawn still reaches the new child.
        if self.is_stopped() {
            self.stop();
        }
    }

    /// Like [`StopSignal::set_child`], but a stop that came before does not
    /// reach the new child: a cleanup the stopped run still owes runs, and
    /// only a further Ctrl-C stops it.
    pub(crate) fn set_child_after_stop(&self, group: i32) {
        self.child_group.store(group, Ordering::SeqCst);
    }

    pub(crate) fn clear_child(&self) {
        self.child_group.store(0, Ordering::SeqCst);
    }

    fn cancel_job(&self) {
        let job = self.job.lock().ok().and_then(|j| j.clone());
        if let Some(job) = job {
            crate::experiment::slurm::cancel(&job);
        }
    }

    pub(crate) fn set_job(self: &Arc<Self>, job: &str) {
        if let Ok(mut j) = self.job.lock() {
            *j = Some(job.to_string());
        }
        // A stop that raced with the submission still cancels the job.
        if self.is_stopped() {
            self.cancel_job();
        }
    }

    pub(crate) fn clear_job(&self) {
        if let Ok(mut j) = self.job.lock() {
            *j = None;
        }
    }
}

pub(crate) fn signal_group(group: i32, signal: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid
    // addresses the process group we created for the child.
    unsafe {
        libc::kill(-group, signal);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::Command;

    use super::*;

    fn sleeper() -> std::process::Child {
        Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts")
    }

    #[test]
    fn a_stop_that_raced_with_the_spawn_still_reaches_the_child() {
        let stop = StopSignal::new();
        stop.stop();
        let mut child = sleeper();
        stop.set_child(child.id() as i32);
        let status = child.wait().expect("the child is reaped");
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(stop.is_stopped());
    }

    #[test]
    fn force_kills_the_group_at_once_and_a_cleared_child_is_left_alone() {
        let stop = StopSignal::new();
        let mut spared = sleeper();
        stop.set_child(spared.id() as i32);
        stop.clear_child();
        let mut child = sleeper();
        stop.set_child(child.id() as i32);
        stop.force();
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(
            spared.try_wait().unwrap(),
            None,
            "a cleared child is not signalled"
        );
        let _ = spared.kill();
        let _ = spared.wait();
    }
}
