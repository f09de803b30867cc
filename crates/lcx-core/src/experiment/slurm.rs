//! Cells as Slurm jobs: the job script, `sbatch`, the job's state from
//! `scontrol show job` (no accounting needed), `scancel`, and a follower
//! that reads the job's output file as it grows on the shared filesystem
//! and hands its lines to the runner exactly as a local child's pipe does.
//!
//! Slurm places the job; lcx runs no agent on the nodes. The coordinator
//! (`lcx run`) stays the only process that writes the database.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::plan::SlurmOptions;
use crate::store::RunStatus;

/// How often the coordinator looks at a job and its output file.
const POLL: Duration = Duration::from_millis(200);

/// Polls a requeueable job may stay PREEMPTED or NODE_FAIL before that
/// is its end (about 10 s): Slurm requeues it from there.
pub const REQUEUE_GRACE: u32 = 50;

/// `scontrol` failures in a row after which a job is given up (about a
/// minute of polls).
const SCONTROL_ERRORS: u32 = 300;

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

/// The end of a job as the runner records it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEnd {
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    /// `COMPLETED (exit code 0)`, `TIMEOUT: time limit`, …
    pub how: String,
    /// COMPLETED with exit code 0.
    pub success: bool,
    /// The status Slurm decided, when it outranks the exit code
    /// (CANCELLED → interrupted, TIMEOUT → failed "time limit").
    pub status: Option<(RunStatus, String)>,
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

/// What one cell's job runs.
pub struct JobSpec<'a> {
    pub name: String,
    /// The cell's folder on the shared filesystem: the script, the config
    /// it reads, its stdout (the metric lines) and stderr.
    pub dir: &'a Path,
    pub program: &'a Path,
    pub args: &'a [String],
    pub env: BTreeMap<String, String>,
    pub workdir: PathBuf,
    /// Written to `config.toml` and fed to the job's standard input.
    pub stdin: Option<&'a str>,
    pub options: &'a SlurmOptions,
    pub wants_gpu: bool,
    /// Pin the job to this node (placement).
    pub nodelist: Option<String>,
    /// Start only after this job has ended, however it ended (`--detach`
    /// chains an experiment's cells so they still run one at a time, in
    /// plan order).
    pub after: Option<String>,
}

/// An `#SBATCH` option with its value double-quoted when it holds a
/// space or quote, and `%` doubled (sbatch expands `%j` and friends in
/// file names).
fn sbatch_quoted(option: &str) -> String {
    let Some((flag, value)) = option.split_once('=') else {
        return option.to_string();
    };
    let value = value.replace('%', "%%");
    if value
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '#')
    {
        format!(
            "{flag}=\"{}\"",
            value.replace('\\', "\\\\").replace('"', "\\\"")
        )
    } else {
        format!("{flag}={value}")
    }
}

/// Whether a name can be `export`ed by a POSIX shell.
fn shell_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Single-quotes a word for `sh`.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The job script, kept in the cell's folder for reproducibility: its
/// `#SBATCH` lines carry every option, so `sbatch job.sh` runs the cell
/// again. Around the cell's command it writes three records into the
/// folder, which let a coordinator that attaches later (after Slurm has
/// forgotten the job) still tell how the cell ended: `started` (epoch
/// seconds), `node` (the node's hardware, `key=value` lines) and `exit`
/// (`code end-seconds`, written only when the command returned).
pub fn script(spec: &JobSpec<'_>) -> String {
    let mut s = String::from("#!/bin/sh\n# Written by lcx run: one cell of an experiment.\n");
    for option in sbatch_options(spec) {
        let _ = writeln!(s, "#SBATCH {}", sbatch_quoted(&option));
    }
    let dir = quote(&spec.dir.display().to_string());
    let _ = writeln!(s, "d={dir}");
    let _ = writeln!(
        s,
        "cd {} || exit 1",
        quote(&spec.workdir.display().to_string())
    );
    s.push_str(NODE_RECORD);
    for (k, v) in &spec.env {
        let _ = writeln!(s, "export {k}={}", quote(v));
    }
    let mut line = quote(&spec.program.display().to_string());
    for a in spec.args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    if spec.stdin.is_some() {
        line.push_str(" < \"$d/config.toml\"");
    } else {
        line.push_str(" < /dev/null");
    }
    s.push_str(&line);
    s.push('\n');
    s.push_str(
        "code=$?\n\
         echo \"$code $(date +%s.%N)\" > \"$d/exit.tmp\" && mv \"$d/exit.tmp\" \"$d/exit\"\n\
         exit $code\n",
    );
    s
}

/// The hardware and start records of a job script (`$d` is its folder).
/// Every probe may fail on a node that lacks it; the line is then absent.
/// `started` comes last, just before the command, and whole (`mv`): a
/// follower never sees it half written, and a cell's time is its
/// command's.
const NODE_RECORD: &str = r#"rm -f "$d/exit"
{
  echo "hostname=$(hostname)"
  sed -n 's/^model name[[:space:]]*:[[:space:]]*/cpu_model=/p' /proc/cpuinfo | head -n 1
  echo "cpus=$(nproc)"
  sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\) kB/memory_kib=\1/p' /proc/meminfo
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 | sed 's/^/gpu=/'
} > "$d/node" 2>/dev/null
date +%s.%N > "$d/started.tmp" && mv "$d/started.tmp" "$d/started"
"#;

/// The node record a job script wrote, when it did.
pub fn node_record(dir: &Path) -> Option<crate::store::NodeInfo> {
    let text = std::fs::read_to_string(dir.join("node")).ok()?;
    Some(parse_node(&text))
}

fn parse_node(text: &str) -> crate::store::NodeInfo {
    let mut node = crate::store::NodeInfo::default();
    let nonempty = |v: &str| Some(v.trim().to_string()).filter(|v| !v.is_empty());
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key {
            "hostname" => node.hostname = nonempty(value),
            "cpu_model" => node.cpu_model = nonempty(value),
            "cpus" => node.cpus = value.trim().parse().ok(),
            "memory_kib" => node.memory_bytes = value.trim().parse::<i64>().ok().map(|k| k * 1024),
            "gpu" => {
                let mut fields = value.split(',');
                node.gpu_name = fields.next().and_then(nonempty);
                node.gpu_driver = fields.next().and_then(nonempty);
            }
            _ => {}
        }
    }
    node
}

/// `(exit code, end time)` from the job script's `exit` record.
fn exit_record(dir: &Path) -> Option<(i64, f64)> {
    let text = std::fs::read_to_string(dir.join("exit")).ok()?;
    let mut words = text.split_whitespace();
    let code = words.next()?.parse().ok()?;
    let end = words.next()?.parse().ok()?;
    Some((code, end))
}

/// The seconds the cell's command ran on its node, from the job script's
/// records: queueing and the coordinator's polling are not in it.
pub fn ran_seconds(dir: &Path) -> Option<f64> {
    let started: f64 = std::fs::read_to_string(dir.join("started"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let (_, end) = exit_record(dir)?;
    (end >= started).then_some(end - started)
}

/// A job's end read from its `exit` record, for a job Slurm no longer
/// lists (it ended more than `MinJobAge` ago, before anyone followed it).
fn end_from_record(dir: &Path) -> Option<JobEnd> {
    let (code, _) = exit_record(dir)?;
    // A shell reports a command killed by signal N as 128 + N.
    let (exit_code, signal) = if code > 128 {
        (None, Some(code - 128))
    } else {
        (Some(code), None)
    };
    Some(JobEnd {
        exit_code,
        signal,
        how: format!(
            "exit code {code}, from the job's exit record (Slurm no longer lists the job)"
        ),
        success: code == 0,
        status: None,
    })
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

/// The `sbatch` options of a cell, as its script's `#SBATCH` lines.
pub fn sbatch_options(spec: &JobSpec<'_>) -> Vec<String> {
    let o = spec.options;
    let mut args = vec![
        format!("--job-name={}", spec.name),
        format!("--output={}", spec.dir.join("stdout").display()),
        format!("--error={}", spec.dir.join("stderr").display()),
        format!("--chdir={}", spec.workdir.display()),
        // A requeued job starts its output file again; the follower then
        // starts the cell again (`requeue = true`). Without it, a node
        // failure or preemption ends the cell.
        if spec.options.requeue {
            "--requeue"
        } else {
            "--no-requeue"
        }
        .to_string(),
        // A restarted run must start its output file again, whatever the
        // cluster's `JobFileAppend`: the follower reads it from the start.
        "--open-mode=truncate".to_string(),
    ];
    if o.gres.is_none() && spec.wants_gpu {
        args.push("--gres=gpu:1".to_string());
    }
    if let Some(node) = &spec.nodelist {
        args.push(format!("--nodelist={node}"));
    }
    if let Some(job) = &spec.after {
        args.push(format!("--dependency=afterany:{job}"));
    }
    args.extend(o.flags());
    args
}

/// Writes the script (and config) and submits the job; returns its id.
pub fn submit(spec: &JobSpec<'_>) -> Result<String, String> {
    if let Some(bad) = spec.env.keys().find(|k| !shell_name(k)) {
        return Err(format!(
            "environment variable `{bad}` cannot be exported by a job script \
             (a Slurm cell's names are letters, digits and `_`)"
        ));
    }
    std::fs::create_dir_all(spec.dir)
        .map_err(|e| format!("creating {}: {e}", spec.dir.display()))?;
    if let Some(text) = spec.stdin {
        let path = spec.dir.join("config.toml");
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let path = spec.dir.join("job.sh");
    std::fs::write(&path, script(spec)).map_err(|e| format!("writing {}: {e}", path.display()))?;
    // Output files and records from an earlier attempt must not be read
    // as this one's.
    for name in [
        "stdout",
        "stderr",
        "started",
        "node",
        "exit",
        "started.tmp",
        "exit.tmp",
    ] {
        let _ = std::fs::remove_file(spec.dir.join(name));
    }
    // The options go on the command line as well: `SBATCH_*` variables in
    // the user's environment outrank `#SBATCH` lines, not the command line.
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(sbatch_options(spec))
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run sbatch: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sbatch refused the job: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // `--parsable` prints `id` or `id;cluster`.
    let id = text.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return Err(format!("sbatch printed no job id: {:?}", text.trim()));
    }
    Ok(id)
}

/// What the follower hands the runner.
pub enum Event {
    /// A complete line of the job's stdout.
    Line(Vec<u8>),
    /// A line over the cap: its head and length.
    Overlong { head: Vec<u8>, bytes: usize },
    /// Slurm placed the job on this node.
    Placed(String),
    /// A run of the job began: its `started` record (kept by the runner,
    /// so that a later follower can tell a run it has not seen).
    RunStarted(String),
    /// The job started again (Slurm requeued it): what follows is its new
    /// run's output, from the start of the file.
    Restarted,
    /// The job ended and its output was read to the end.
    Ended(Result<JobEnd, String>),
}

/// Where the follower is in a job's stdout file.
#[derive(Default)]
struct Reading {
    offset: u64,
    /// The start of a line whose end has not been written yet.
    partial: Vec<u8>,
    /// A line over the cap: its head and length so far.
    overlong: Option<(Vec<u8>, usize)>,
}

/// Follows a job until it ends: new complete lines of its stdout file (in
/// the job's folder `dir`) as they appear, from the file's start, its state
/// every [`POLL`]. Lines longer than `max_line` are cut to their head.
/// Returns when the job ended (or `send` refused). With `requeue`, a
/// preempted or node-failed job is given [`REQUEUE_GRACE`] polls to come
/// back pending before that state ends the cell, and a new `started`
/// record (a run other than `known_run`, the one whose lines the cell
/// holds) restarts the reading.
pub fn follow(
    job: &str,
    dir: &Path,
    max_line: usize,
    requeue: bool,
    known_run: Option<String>,
    mut send: impl FnMut(Event) -> bool,
) {
    let stdout = dir.join("stdout");
    let stdout = stdout.as_path();
    let mut reading = Reading::default();
    let mut last: Option<JobState> = None;
    let mut placed = false;
    // Polls that found the job still going.
    let mut polls = 0u32;
    // Polls a requeueable job has sat in PREEMPTED or NODE_FAIL.
    let mut held = 0u32;
    // `scontrol` failures in a row; a controller that stays unreachable
    // ends the cell rather than holding it for ever.
    let mut errors = 0u32;
    let read_new = |r: &mut Reading, send: &mut dyn FnMut(Event) -> bool| -> bool {
        let Reading {
            offset,
            partial,
            overlong,
        } = r;
        let Ok(mut file) = std::fs::File::open(stdout) else {
            return true;
        };
        if file.seek(SeekFrom::Start(*offset)).is_err() {
            return true;
        }
        let mut reader = BufReader::new(&mut file);
        loop {
            let mut chunk = Vec::new();
            let Ok(n) = reader
                .by_ref()
                .take(64 * 1024)
                .read_until(b'\n', &mut chunk)
            else {
                return true;
            };
            if n == 0 {
                return true;
            }
            *offset += n as u64;
            let ends = chunk.last() == Some(&b'\n');
            if let Some((_, bytes)) = overlong.as_mut() {
                *bytes += chunk.len();
                if ends {
                    let (head, bytes) = overlong.take().unwrap_or_default();
                    if !send(Event::Overlong { head, bytes }) {
                        return false;
                    }
                }
                continue;
            }
            partial.extend_from_slice(&chunk);
            if partial.len() > max_line {
                let head: Vec<u8> = partial.iter().take(512).copied().collect();
                *overlong = Some((head, partial.len()));
                partial.clear();
                if ends {
                    let (head, bytes) = overlong.take().unwrap_or_default();
                    if !send(Event::Overlong { head, bytes }) {
                        return false;
                    }
                }
                continue;
            }
            if ends {
                partial.pop();
                if partial.last() == Some(&b'\r') {
                    partial.pop();
                }
                if !send(Event::Line(std::mem::take(partial))) {
                    return false;
                }
            }
        }
    };
    // The run of the job being read, by its `started` record: a requeued
    // job writes a new one before any output, so a change seen before a
    // read means the file now holds the new run's lines.
    let mut run_started: Option<String> = known_run;
    // Whether the file being read is the run the cell holds lines of.
    let mut check_run =
        |reading: &mut Reading, placed: &mut bool, send: &mut dyn FnMut(Event) -> bool| -> bool {
            let Some(now) = std::fs::read_to_string(dir.join("started"))
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
            else {
                return true;
            };
            if run_started.as_deref() == Some(now.as_str()) {
                return true;
            }
            if requeue && run_started.is_some() {
                *reading = Reading::default();
                *placed = false;
                if !send(Event::Restarted) {
                    return false;
                }
            }
            run_started = Some(now.clone());
            send(Event::RunStarted(now))
        };
    loop {
        if !check_run(&mut reading, &mut placed, &mut send) {
            return;
        }
        if !read_new(&mut reading, &mut send) {
            return;
        }
        let state = job_state(job);
        if let Ok(Some(JobState {
            node: Some(node),
            state,
            ..
        })) = &state
        {
            if !placed && state != "PENDING" {
                placed = true;
                if !send(Event::Placed(node.clone())) {
                    return;
                }
            }
        }
        if state.is_ok() {
            errors = 0;
        }
        let requeueing =
            |s: &JobState| requeue && matches!(s.state.as_str(), "PREEMPTED" | "NODE_FAIL");
        let ended = match state {
            Ok(Some(s)) if s.is_final() && requeueing(&s) && held < REQUEUE_GRACE => {
                held += 1;
                last = Some(s);
                None
            }
            Ok(Some(s)) if s.is_final() => {
                if requeueing(&s) {
                    // Its grace is over: Slurm must not run it again
                    // unobserved.
                    cancel(job);
                }
                Some(Ok(s.end()))
            }
            Ok(Some(s)) => {
                held = 0;
                last = Some(s);
                None
            }
            Ok(None) => Some(match (&last, end_from_record(dir)) {
                (Some(s), _) if s.is_final() => Ok(s.end()),
                (_, Some(end)) => Ok(end),
                _ => Err(format!(
                    "job {job} left Slurm's records without an end state, and its script \
                     wrote no exit record (last seen: {})",
                    last.as_ref().map_or("never", |s| s.state.as_str())
                )),
            }),
            // A slow or restarting controller is not the job's end: ask
            // again at the next poll, for up to about a minute.
            Err(e) => {
                errors += 1;
                (errors >= SCONTROL_ERRORS).then(|| {
                    cancel(job);
                    Err(format!(
                        "gave up on job {job} after {errors} failed queries: {e}"
                    ))
                })
            }
        };
        if let Some(end) = ended {
            // The file may have grown between the last read and the end;
            // a job whose exit record is seconds old when it is first looked
            // at (an `--attach` long after) has long been flushed.
            let settled = exit_record(dir).is_some_and(|(_, at)| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .is_ok_and(|now| now.as_secs_f64() - at > 5.0)
            });
            if polls > 0 || !settled {
                std::thread::sleep(POLL);
            }
            if !check_run(&mut reading, &mut placed, &mut send) {
                return;
            }
            if !read_new(&mut reading, &mut send) {
                return;
            }
            if !reading.partial.is_empty() {
                let _ = send(Event::Line(std::mem::take(&mut reading.partial)));
            }
            let _ = send(Event::Ended(end));
            return;
        }
        polls += 1;
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

    #[test]
    fn sbatch_values_with_spaces_or_percent_are_quoted() {
        assert_eq!(
            sbatch_quoted("--job-name=lcx-a b-5"),
            "--job-name=\"lcx-a b-5\""
        );
        assert_eq!(sbatch_quoted("--output=/x/%j/out"), "--output=/x/%%j/out");
        assert_eq!(sbatch_quoted("--no-requeue"), "--no-requeue");
        assert!(shell_name("LCX_ARM") && shell_name("_x1"));
        assert!(!shell_name("A B") && !shell_name("1X") && !shell_name("a;b") && !shell_name(""));
    }

    #[test]
    fn the_job_script_quotes_and_feeds_the_config() {
        let dir = Path::new("/shared/runs/slurm/3/run-5-1");
        let options = SlurmOptions {
            partition: Some("gpu".into()),
            time: Some("10".into()),
            extra: vec!["--exclusive".into()],
            ..SlurmOptions::default()
        };
        let args = vec!["train".to_string(), "it's".to_string()];
        let spec = JobSpec {
            name: "lcx-3-5".into(),
            dir,
            program: Path::new("/opt/lcx"),
            args: &args,
            env: BTreeMap::from([("LCX_ARM".to_string(), "a b".to_string())]),
            workdir: PathBuf::from("/shared/work"),
            stdin: Some("x = 1"),
            options: &options,
            wants_gpu: true,
            nodelist: Some("node7".into()),
            after: Some("41".into()),
        };
        let s = script(&spec);
        assert!(s.contains("cd '/shared/work' || exit 1"), "{s}");
        assert!(s.contains("d='/shared/runs/slurm/3/run-5-1'\n"), "{s}");
        assert!(s.contains("export LCX_ARM='a b'"), "{s}");
        assert!(
            s.contains("\n'/opt/lcx' 'train' 'it'\\''s' < \"$d/config.toml\"\ncode=$?\n"),
            "{s}"
        );
        assert!(s.ends_with("exit $code\n"), "{s}");
        let requeued = SlurmOptions {
            requeue: true,
            ..options.clone()
        };
        let with_requeue = script(&JobSpec {
            options: &requeued,
            ..spec_clone(&spec)
        });
        assert!(
            with_requeue.contains("\n#SBATCH --requeue\n"),
            "{with_requeue}"
        );
        assert!(!with_requeue.contains("--no-requeue"), "{with_requeue}");
        for want in [
            "--partition=gpu",
            "--time=10",
            "--gres=gpu:1",
            "--exclusive",
            "--nodelist=node7",
            "--dependency=afterany:41",
            "--no-requeue",
            "--output=/shared/runs/slurm/3/run-5-1/stdout",
        ] {
            assert!(s.contains(&format!("\n#SBATCH {want}\n")), "{want}: {s}");
        }
    }

    fn spec_clone<'a>(spec: &JobSpec<'a>) -> JobSpec<'a> {
        JobSpec {
            name: spec.name.clone(),
            dir: spec.dir,
            program: spec.program,
            args: spec.args,
            env: spec.env.clone(),
            workdir: spec.workdir.clone(),
            stdin: spec.stdin,
            options: spec.options,
            wants_gpu: spec.wants_gpu,
            nodelist: spec.nodelist.clone(),
            after: spec.after.clone(),
        }
    }

    /// The job script is a plain shell script (its `#SBATCH` lines are
    /// comments to `sh`): run it here and read the records it leaves.
    #[test]
    fn the_job_script_records_its_start_node_and_exit() {
        let dir = tempfile::tempdir().unwrap();
        let options = SlurmOptions::default();
        let args = vec!["-c".to_string(), "read x; echo \"$x\"; exit 3".to_string()];
        let spec = JobSpec {
            name: "lcx-t-1".into(),
            dir: dir.path(),
            program: Path::new("/bin/sh"),
            args: &args,
            env: BTreeMap::new(),
            workdir: dir.path().to_path_buf(),
            stdin: Some("fed"),
            options: &options,
            wants_gpu: false,
            nodelist: None,
            after: None,
        };
        std::fs::write(dir.path().join("config.toml"), "fed\n").unwrap();
        std::fs::write(dir.path().join("job.sh"), script(&spec)).unwrap();
        let out = Command::new("sh")
            .arg(dir.path().join("job.sh"))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "the command's exit code is the job's"
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "fed\n");
        let node = node_record(dir.path()).expect("a node record");
        assert_eq!(node.hostname, crate::store::hostname());
        assert!(node.cpus.is_some_and(|n| n >= 1), "{node:?}");
        assert!(node.memory_bytes.is_some_and(|b| b > 0), "{node:?}");
        let end = end_from_record(dir.path()).expect("an exit record");
        assert_eq!((end.exit_code, end.success), (Some(3), false));
        assert!(ran_seconds(dir.path()).is_some_and(|s| (0.0..60.0).contains(&s)));
    }

    #[test]
    fn node_and_exit_records_parse() {
        let node = parse_node(
            "hostname=n7\ncpu_model=AMD EPYC 9654 96-Core Processor\ncpus=16\n\
             memory_kib=1024\ngpu=NVIDIA H200, 570.86.15\njunk\n",
        );
        assert_eq!(node.hostname.as_deref(), Some("n7"));
        assert_eq!(node.cpus, Some(16));
        assert_eq!(node.memory_bytes, Some(1024 * 1024));
        assert_eq!(node.gpu_name.as_deref(), Some("NVIDIA H200"));
        assert_eq!(node.gpu_driver.as_deref(), Some("570.86.15"));
        assert_eq!(
            node.hardware().as_deref(),
            Some("AMD EPYC 9654 96-Core Processor, 16 CPUs, NVIDIA H200 (driver 570.86.15)")
        );
        let dir = tempfile::tempdir().unwrap();
        assert!(end_from_record(dir.path()).is_none());
        std::fs::write(dir.path().join("exit"), "0 100.5\n").unwrap();
        std::fs::write(dir.path().join("started"), "90.25\n").unwrap();
        let end = end_from_record(dir.path()).unwrap();
        assert!(end.success && end.status.is_none());
        assert_eq!(ran_seconds(dir.path()), Some(10.25));
        std::fs::write(dir.path().join("exit"), "137 100.5\n").unwrap();
        let killed = end_from_record(dir.path()).unwrap();
        assert_eq!((killed.exit_code, killed.signal), (None, Some(9)));
    }
}
