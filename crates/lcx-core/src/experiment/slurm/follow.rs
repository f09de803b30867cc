//! The follower: reads a job's stdout file on the shared filesystem as it
//! grows and hands its lines, its placement, a requeue's restart and its
//! end to the runner, polling `scontrol` until the job has ended.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::script::{end_from_record, exit_record};
use super::state::{cancel, job_state, JobState};
use super::{JobEnd, POLL, SCONTROL_ERRORS};

/// Polls a requeueable job may stay PREEMPTED or NODE_FAIL before that
/// is its end (about 10 s): Slurm requeues it from there.
pub const REQUEUE_GRACE: u32 = 50;

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
