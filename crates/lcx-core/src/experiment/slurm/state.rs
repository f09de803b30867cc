//! A job in Slurm's queue: its state from `scontrol show job` and what a
//! final state means for the cell, `scancel`, and waiting until the job is
//! placed on a node.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use super::{JobEnd, POLL, SCONTROL_ERRORS};
use crate::store::RunStatus;

/// A job's state as `scontrol show job` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    /// `PENDING`, `RUNNING`, `COMPLETED`, `TIMEOUT`, …
    pub state: String,
    pub reason: Option<String>,
    /// `ExitCode=code:signal`.
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub node: Option<String>,
}

impl JobState {
    /// Whether the job has ended: one of Slurm's terminal states. Any
    /// other (pending, running, held, requeued, a state this lcx does not
    /// know) is followed further.
    pub fn is_final(&self) -> bool {
        matches!(
            self.state.as_str(),
            "BOOT_FAIL"
                | "CANCELLED"
                | "COMPLETED"
                | "DEADLINE"
                | "FAILED"
                | "NODE_FAIL"
                | "OUT_OF_MEMORY"
                | "PREEMPTED"
                | "TIMEOUT"
        )
    }

    /// What a final state means for the cell.
    pub fn end(&self) -> JobEnd {
        // The job script's shell exits 128 + N for a command killed by
        // signal N, and Slurm reports that as an exit code: read it as the
        // signal, as the job's exit record is read.
        let (exit_code, signal) = match (self.exit_code, self.signal) {
            (Some(c), None | Some(0)) if c > 128 => (None, Some(c - 128)),
            other => other,
        };
        let code = match (exit_code, signal) {
            (_, Some(s)) if s > 0 => format!("signal {s}"),
            (Some(c), _) => format!("exit code {c}"),
            _ => "no exit code".to_string(),
        };
        let failed = |why: &str| Some((RunStatus::Failed, why.to_string()));
        let (status, how) = match self.state.as_str() {
            "COMPLETED" => (None, format!("COMPLETED ({code})")),
            "FAILED" => (None, format!("FAILED ({code})")),
            "TIMEOUT" => (failed("time limit"), "TIMEOUT: time limit".into()),
            "OUT_OF_MEMORY" => (failed("out of memory"), "OUT_OF_MEMORY".into()),
            "NODE_FAIL" => (failed("node failure"), "NODE_FAIL: node failure".into()),
            "PREEMPTED" => (failed("preempted"), "PREEMPTED".into()),
            "CANCELLED" => (
                Some((RunStatus::Interrupted, "job cancelled".to_string())),
                "CANCELLED".into(),
            ),
            other => (
                Some((RunStatus::Failed, format!("job ended {other}"))),
                other.to_string(),
            ),
        };
        let how = match &self.reason {
            Some(r) if r != "None" => format!("{how} [{r}]"),
            _ => how,
        };
        JobEnd {
            exit_code,
            signal: signal.filter(|s| *s > 0),
            success: self.state == "COMPLETED" && exit_code == Some(0),
            how,
            status,
        }
    }
}

/// Parses one job of `scontrol show job -o`.
pub fn parse_job(text: &str) -> Option<JobState> {
    let mut fields = BTreeMap::new();
    for word in text.split_whitespace() {
        if let Some((k, v)) = word.split_once('=') {
            fields.entry(k).or_insert(v);
        }
    }
    let state = fields.get("JobState")?.to_string();
    let (exit_code, signal) = match fields.get("ExitCode").and_then(|e| e.split_once(':')) {
        Some((c, s)) => (c.parse().ok(), s.parse().ok()),
        None => (None, None),
    };
    Some(JobState {
        state,
        reason: fields.get("Reason").map(|r| r.to_string()),
        exit_code,
        signal,
        node: fields
            .get("BatchHost")
            .or(fields.get("NodeList"))
            .filter(|n| **n != "(null)")
            .map(|n| n.to_string()),
    })
}

/// The job's current state; `Ok(None)` once Slurm has forgotten it
/// (`MinJobAge` after it ended).
pub fn job_state(job: &str) -> Result<Option<JobState>, String> {
    let out = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run scontrol: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("Invalid job id") {
            return Ok(None);
        }
        return Err(format!("scontrol show job {job}: {}", err.trim()));
    }
    Ok(parse_job(&text))
}

/// Cancels a job (best effort: it may have ended already).
pub fn cancel(job: &str) {
    let _ = Command::new("scancel")
        .arg(job)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Waits until Slurm has placed `job` on a node and returns the node;
/// `Ok(None)` when the job ended unplaced or `stopped` says to give up.
pub fn wait_placed(job: &str, stopped: &dyn Fn() -> bool) -> Result<Option<String>, String> {
    let mut errors = 0u32;
    loop {
        if stopped() {
            return Ok(None);
        }
        match job_state(job) {
            Ok(Some(s)) if s.state != "PENDING" && s.node.is_some() => return Ok(s.node),
            Ok(Some(s)) if s.is_final() => return Ok(None),
            Ok(Some(_)) => errors = 0,
            Ok(None) => return Ok(None),
            Err(e) => {
                errors += 1;
                if errors >= SCONTROL_ERRORS {
                    return Err(e);
                }
            }
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scontrol_lines_parse_into_states_and_ends() {
        let line = "JobId=7 JobName=lcx-1-3 UserId=root(0) JobState=TIMEOUT Reason=TimeLimit \
                    Dependency=(null) ExitCode=0:15 RunTime=00:01:24 NodeList=vm BatchHost=vm";
        let s = parse_job(line).unwrap();
        assert_eq!(s.state, "TIMEOUT");
        assert!(s.is_final());
        assert_eq!((s.exit_code, s.signal), (Some(0), Some(15)));
        assert_eq!(s.node.as_deref(), Some("vm"));
        let end = s.end();
        assert_eq!(end.status, Some((RunStatus::Failed, "time limit".into())));
        assert!(!end.success);
        assert!(
            end.how.contains("TIMEOUT") && end.how.contains("TimeLimit"),
            "{}",
            end.how
        );

        let done = parse_job("JobId=8 JobState=COMPLETED Reason=None ExitCode=0:0").unwrap();
        assert!(done.end().success && done.end().status.is_none());
        let failed =
            parse_job("JobId=9 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0").unwrap();
        assert_eq!(failed.end().exit_code, Some(3));
        assert!(!failed.end().success && failed.end().status.is_none());
        let cancelled = parse_job("JobId=10 JobState=CANCELLED Reason=None ExitCode=0:15").unwrap();
        assert_eq!(cancelled.end().status.unwrap().0, RunStatus::Interrupted);
        let node = parse_job("JobId=11 JobState=NODE_FAIL Reason=NodeDown ExitCode=0:0").unwrap();
        assert_eq!(node.end().status.unwrap().1, "node failure");
        for running in [
            "PENDING",
            "RUNNING",
            "REQUEUED",
            "COMPLETING",
            "RESV_DEL_HOLD",
        ] {
            let s = parse_job(&format!("JobId=1 JobState={running}")).unwrap();
            assert!(!s.is_final(), "{running}");
        }
        let preempted = parse_job("JobId=12 JobState=PREEMPTED Reason=None ExitCode=0:15").unwrap();
        assert!(preempted.is_final());
        assert_eq!(
            preempted.end().status.unwrap(),
            (RunStatus::Failed, "preempted".into())
        );
        assert!(parse_job("no job here").is_none());
    }
}
