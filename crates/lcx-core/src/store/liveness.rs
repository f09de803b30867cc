//! Who is running an experiment, and whether that process still lives.
//!
//! A runner records its [`RunnerIdentity`] on the experiment row when it
//! creates or resumes it. A runner killed by SIGKILL (or stopped by a full
//! disk) cannot say it is gone, so readers decide from the identity: on the
//! same host and boot, the process is alive exactly when `/proc/<pid>`
//! exists with the same start time (a reused pid has another one). On
//! another host nothing can be checked from here, and the row is reported
//! as it stands.

use serde::{Deserialize, Serialize};

use crate::system::{host::hostname, Root};

/// The process that holds an experiment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerIdentity {
    pub pid: i64,
    pub host: Option<String>,
    /// `/proc/sys/kernel/random/boot_id`: tells a reboot from a live host.
    pub boot_id: Option<String>,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks since boot): tells the
    /// recorded process from a later one that got the same pid.
    pub start_ticks: Option<String>,
}

/// What can be known about a recorded runner from this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// Gone: the experiment's `running` state is stale.
    Gone,
    /// Recorded on another host, or by an lcx that did not record enough
    /// to tell; the row's status is all there is.
    Unknown,
}

impl RunnerIdentity {
    /// This process.
    pub fn current() -> RunnerIdentity {
        let pid = i64::from(std::process::id());
        RunnerIdentity {
            pid,
            host: hostname(),
            boot_id: Root::default().boot_id(),
            start_ticks: start_ticks(pid),
        }
    }

    /// Whether the recorded process still runs.
    pub fn liveness(&self) -> Liveness {
        let (Some(host), Some(boot), Some(ticks)) = (&self.host, &self.boot_id, &self.start_ticks)
        else {
            return Liveness::Unknown;
        };
        if hostname().as_ref() != Some(host) {
            return Liveness::Unknown;
        }
        if Root::default().boot_id().as_ref() != Some(boot) {
            // Same host, rebooted since: nothing of that boot runs.
            return Liveness::Gone;
        }
        match start_ticks(self.pid) {
            Some(now) if &now == ticks => Liveness::Alive,
            _ => Liveness::Gone,
        }
    }

    /// `pid 123 on host h`, for messages.
    pub fn describe(&self) -> String {
        match &self.host {
            Some(h) => format!("pid {} on host {h}", self.pid),
            None => format!("pid {}", self.pid),
        }
    }
}

/// A process's start time, read under the real root.
fn start_ticks(pid: i64) -> Option<String> {
    crate::system::Root::default().process_start_ticks(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = RunnerIdentity::current();
        if me.start_ticks.is_none() {
            // No /proc (not Linux): nothing can be told.
            assert_eq!(me.liveness(), Liveness::Unknown);
            return;
        }
        assert_eq!(me.liveness(), Liveness::Alive);
        let reused = RunnerIdentity {
            start_ticks: Some("1".into()),
            ..me.clone()
        };
        assert_eq!(reused.liveness(), Liveness::Gone, "a reused pid");
        let rebooted = RunnerIdentity {
            boot_id: Some("another-boot".into()),
            ..me.clone()
        };
        assert_eq!(rebooted.liveness(), Liveness::Gone);
        let elsewhere = RunnerIdentity {
            host: Some("some-other-host.invalid".into()),
            ..me.clone()
        };
        assert_eq!(elsewhere.liveness(), Liveness::Unknown);
        let old_row = RunnerIdentity {
            pid: me.pid,
            host: None,
            boot_id: None,
            start_ticks: None,
        };
        assert_eq!(old_row.liveness(), Liveness::Unknown);
    }

    #[test]
    fn a_child_is_alive_until_it_is_reaped() {
        if RunnerIdentity::current().start_ticks.is_none() {
            return;
        }
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i64::from(child.id());
        let identity = RunnerIdentity {
            pid,
            start_ticks: start_ticks(pid),
            ..RunnerIdentity::current()
        };
        assert_eq!(identity.liveness(), Liveness::Alive);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(identity.liveness(), Liveness::Gone);
    }
}
