//! A cell's output becomes rows: the executor's stream of messages is read
//! to its end, every JSON line is committed to the store as soon as it has
//! arrived. A line gets its own transaction unless further complete lines
//! were already waiting, in which case that burst shares one (up to
//! [`MAX_BATCH`] lines): a trainer that prints once per iteration gets a
//! transaction per line, while a child printing a million lines does not
//! pay a million commits. A crash of the runner loses at most lines that
//! had arrived but were not yet committed.

use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use super::cell::{CellInfo, End, Event, Reporter};
use super::executor::{Launched, Msg};
use super::line::{parse_line, Line};
use super::output::{overlong_note, Tail, MAX_LINE};
use super::stop::KILL_GRACE;
use crate::store::{LineProblems, MetricLine, Store, StoreError};

/// Most lines committed in one transaction.
const MAX_BATCH: usize = 4096;

/// How often a runner whose cell prints nothing checks that it still holds
/// the experiment (see [`Store::check_claim`]).
const CLAIM_POLL: Duration = Duration::from_secs(1);

/// Stops the cell after its store write failed. A runner that was taken
/// over leaves a Slurm job alone: it belongs to the experiment, and the
/// runner that took over follows or cancels it.
fn stop_for(error: &StoreError, launched: &Launched) {
    if !(matches!(error, StoreError::TakenOver { .. }) && launched.job.is_some()) {
        (launched.kill)();
    }
}

/// How long the runner keeps reading a cell's stdout after the child has
/// exited and its process group was killed: a process that left the group
/// (`setsid`) may still hold the pipe, and the cell must not wait for it.
pub(crate) const STDOUT_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
pub(crate) struct LineCounts {
    /// JSON object lines seen (numbers lines without `iteration`).
    json_lines: u64,
    /// Lines stored.
    pub stored: u64,
    /// Lines refused because their iteration was already recorded.
    pub duplicates: u64,
    pub problems: LineProblems,
}

/// Commits the pending lines in one transaction. A duplicate iteration
/// aborts that transaction, so the batch is then retried line by line and
/// only the offending lines are dropped (with a warning).
fn flush(
    store: &mut Store,
    info: &CellInfo,
    batch: &mut Vec<MetricLine>,
    counts: &mut LineCounts,
    reporter: &mut dyn Reporter,
    started: Instant,
) -> Result<(), StoreError> {
    if batch.is_empty() {
        return Ok(());
    }
    match store.insert_lines(info.run_id, info.attempt, batch) {
        Ok(()) => counts.stored += batch.len() as u64,
        Err(StoreError::DuplicateIteration { .. }) => {
            for line in batch.iter() {
                match store.insert_lines(info.run_id, info.attempt, std::slice::from_ref(line)) {
                    Ok(()) => counts.stored += 1,
                    Err(StoreError::DuplicateIteration { name, .. }) => {
                        counts.duplicates += 1;
                        if counts.duplicates <= 3 {
                            reporter.report(&Event::Warning {
                                cell: info,
                                message: format!(
                                    "iteration {} of `{name}` was already recorded; line ignored",
                                    line.iteration
                                ),
                            });
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Err(e) => return Err(e),
    }
    if let Some(last) = batch.last() {
        reporter.report(&Event::Iteration {
            cell: info,
            iteration: last.iteration,
            lines: counts.stored,
            elapsed: started.elapsed(),
        });
    }
    batch.clear();
    Ok(())
}

/// Turns one stdout line into a stored line, a log line or a counted
/// Turns one stdout line into a stored line, a log line or a counted
/// problem, warning once per cell for each kind of problem.
fn take_line(
    bytes: &[u8],
    info: &CellInfo,
    batch: &mut Vec<MetricLine>,
    counts: &mut LineCounts,
    stdout_log: &mut Tail,
    reporter: &mut dyn Reporter,
) {
    let text = String::from_utf8_lossy(bytes);
    match parse_line(&text) {
        Line::Log(line) => {
            if !line.trim().is_empty() {
                stdout_log.push(&line);
            }
        }
        Line::Malformed { line, reason } => {
            counts.problems.malformed += 1;
            stdout_log.push(&line);
            if counts.problems.malformed == 1 {
                reporter.report(&Event::Warning {
                    cell: info,
                    message: format!(
                        "a metric line was not stored ({reason}); such lines are counted \
                         on the cell and kept in its log"
                    ),
                });
            }
        }
        Line::Metrics {
            iteration,
            numbers,
            texts,
            nonfinite,
        } => {
            counts.json_lines += 1;
            let iteration = iteration.unwrap_or(counts.json_lines as i64);
            if !info.variable_iterations && iteration > i64::from(info.iterations) {
                // A command that does not read LCX_ITERATIONS: the cell is
                // the first `iterations` lines, as its report says.
                counts.problems.extra += 1;
                if counts.problems.extra == 1 {
                    reporter.report(&Event::Warning {
                        cell: info,
                        message: format!(
                            "printed a metric line for iteration {iteration}, past the {} \
                             asked for: such lines are counted, not stored (read \
                             LCX_ITERATIONS, or set variable_iterations = true)",
                            info.iterations
                        ),
                    });
                }
                return;
            }
            if !nonfinite.is_empty() {
                if counts.problems.nonfinite == 0 {
                    let (name, value) = &nonfinite[0];
                    reporter.report(&Event::Warning {
                        cell: info,
                        message: format!(
                            "`{name}` is {} at iteration {iteration}; non-finite values are \
                             stored apart and shown in the report",
                            value.as_str()
                        ),
                    });
                }
                counts.problems.nonfinite += nonfinite.len() as i64;
            }
            batch.push(MetricLine {
                iteration,
                numbers,
                texts,
                nonfinite,
            });
        }
    }
}

/// When a cell started, and how long it may run (its arm's `timeout`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CellClock {
    pub started: Instant,
    pub timeout: Option<Duration>,
}

/// What reading a cell's stream to its end left.
pub(crate) struct Ingested {
    pub counts: LineCounts,
    /// Non-JSON stdout lines (and problem lines), kept for the record.
    pub stdout_log: Tail,
    /// The cell as its lines were recorded (a requeued job's new attempt).
    pub current: CellInfo,
    /// How the process ended, and when that was seen.
    pub exit: Option<(Result<End, String>, Instant)>,
    /// The child ended but something it started still held stdout.
    pub abandoned_pipe: bool,
    /// The store failed: the cell was killed and cannot be recorded.
    pub store_error: Option<StoreError>,
    /// The cell ran past its `timeout` (this long) and was stopped.
    pub timed_out: Option<Duration>,
}

/// Reads `launched`'s stream until the process ended and its stdout is
/// read (or given up after [`STDOUT_GRACE`]), committing its lines.
/// `stored_before` lines of an adopted job were stored by an earlier
/// follower: they are the first metric lines of its stdout, skipped here.
pub(crate) fn ingest(
    store: &mut Store,
    launched: &Launched,
    info: &CellInfo,
    stored_before: u64,
    job_dir: Option<&Path>,
    reporter: &mut dyn Reporter,
    clock: CellClock,
) -> Ingested {
    let CellClock { started, timeout } = clock;
    let Launched {
        rx, on_end, job, ..
    } = launched;
    let job = job.as_deref();
    let mut stdout_log = Tail::default();
    let mut counts = LineCounts {
        stored: stored_before,
        ..LineCounts::default()
    };
    let mut skip = stored_before;
    // The attempt the lines belong to: a job Slurm requeues starts a new one.
    let mut current = info.clone();
    let mut store_error = None;
    let mut batch: Vec<MetricLine> = Vec::new();
    let mut exit: Option<(Result<End, String>, Instant)> = None;
    let mut eof = false;
    let mut abandoned_pipe = false;
    let mut waiting: Option<Msg> = None;
    let mut timed_out = None;
    while !(eof && exit.is_some()) {
        // Past its timeout the cell is stopped, once, as a failing store
        // stops it (`kill`: SIGKILL to a local cell's process group, scancel
        // for a Slurm job); its exit then ends the loop.
        if let Some(limit) = timeout.filter(|&l| exit.is_none() && started.elapsed() >= l) {
            if timed_out.is_none() {
                timed_out = Some(limit);
                reporter.report(&Event::Warning {
                    cell: &current,
                    message: format!(
                        "ran past its timeout of {}; stopping it",
                        crate::text::duration_words(limit)
                    ),
                });
                (launched.kill)();
            }
        }
        let msg = match waiting.take() {
            Some(msg) => msg,
            None => match &exit {
                None => match rx.recv_timeout(match timeout {
                    // Wake for the timeout as well as for a takeover.
                    Some(limit) if timed_out.is_none() => {
                        CLAIM_POLL.min(limit.saturating_sub(started.elapsed()))
                    }
                    _ => CLAIM_POLL,
                }) {
                    Ok(msg) => msg,
                    Err(RecvTimeoutError::Timeout) => {
                        // A silent cell still notices a takeover within
                        // a poll; a chatty one at its next line's write.
                        if let Err(e) = store.check_claim() {
                            stop_for(&e, launched);
                            store_error = Some(e);
                            break;
                        }
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                Some((_, at)) => {
                    let left = STDOUT_GRACE.saturating_sub(at.elapsed());
                    match rx.recv_timeout(left) {
                        Ok(msg) => msg,
                        Err(_) => {
                            abandoned_pipe = true;
                            break;
                        }
                    }
                }
            },
        };
        match msg {
            Msg::Line(first) => {
                // Commit as soon as no further line is already waiting: a
                // child printing one line per iteration gets one transaction
                // per line; a burst that arrived together shares one.
                let mut next = Some(first);
                while let Some(bytes) = next.take() {
                    let before = batch.len();
                    take_line(
                        &bytes,
                        &current,
                        &mut batch,
                        &mut counts,
                        &mut stdout_log,
                        reporter,
                    );
                    if skip > 0 && batch.len() > before {
                        batch.pop();
                        skip -= 1;
                    }
                    if batch.len() >= MAX_BATCH {
                        break;
                    }
                    match rx.try_recv() {
                        Ok(Msg::Line(bytes)) => next = Some(bytes),
                        Ok(other) => waiting = Some(other),
                        Err(_) => {}
                    }
                }
                if let Err(e) = flush(store, &current, &mut batch, &mut counts, reporter, started) {
                    // The store is unusable: stop the child, record what we
                    // can, and give up.
                    stop_for(&e, launched);
                    store_error = Some(e);
                    break;
                }
            }
            Msg::Overlong { head, bytes } => {
                counts.problems.overlong += 1;
                stdout_log.push(&overlong_note(&head, bytes));
                if counts.problems.overlong == 1 {
                    reporter.report(&Event::Warning {
                        cell: &current,
                        message: format!(
                            "a stdout line of {bytes} bytes is over the {} MiB line cap; \
                             its head is kept in the cell's log",
                            MAX_LINE / (1024 * 1024)
                        ),
                    });
                }
            }
            Msg::Eof => eof = true,
            Msg::RunStarted(started) => {
                if let Err(e) = store.set_run_slurm_run(current.run_id, &started) {
                    stop_for(&e, launched);
                    store_error = Some(e);
                    break;
                }
            }
            Msg::Restarted => {
                // Slurm requeued the job: what its earlier run printed is
                // superseded, and the cell starts again as a new attempt.
                let restarted = flush(store, &current, &mut batch, &mut counts, reporter, started)
                    .and_then(|()| store.start_run(current.run_id))
                    .and_then(|attempt| {
                        current.attempt = attempt;
                        store.set_run_placement(current.run_id, None, job)?;
                        match job_dir {
                            Some(dir) => {
                                store.set_run_slurm_dir(current.run_id, &dir.display().to_string())
                            }
                            None => Ok(()),
                        }
                    });
                if let Err(e) = restarted {
                    stop_for(&e, launched);
                    store_error = Some(e);
                    break;
                }
                counts = LineCounts::default();
                skip = 0;
                reporter.report(&Event::Warning {
                    cell: &current,
                    message: format!(
                        "Slurm requeued the job; its earlier lines are superseded and it runs \
                         again as attempt {}",
                        current.attempt
                    ),
                });
            }
            Msg::Placed(node) => {
                if let Err(e) = store.set_run_placement(current.run_id, Some(&node), None) {
                    stop_for(&e, launched);
                    store_error = Some(e);
                    break;
                }
            }
            Msg::Ended { end, at } => {
                // The cell is the child: whatever it left running in its
                // group goes with it (and so does a grandchild's hold on
                // the stdout pipe).
                on_end();
                exit = Some((end, at));
            }
        }
    }
    let left_to_other = matches!(store_error, Some(StoreError::TakenOver { .. })) && job.is_some();
    if store_error.is_some() && exit.is_none() && !left_to_other {
        // Wait for the killed child so its exit is what gets recorded.
        while let Ok(msg) = rx.recv_timeout(KILL_GRACE) {
            if let Msg::Ended { end, at } = msg {
                exit = Some((end, at));
                break;
            }
        }
    }
    Ingested {
        counts,
        stdout_log,
        current,
        exit,
        abandoned_pipe,
        store_error,
        timed_out,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::experiment::run::executor::StderrSource;
    use crate::experiment::run::testkit::{self, Recorder};

    fn line(text: &str) -> Msg {
        Msg::Line(format!("{text}\n").into_bytes())
    }

    fn exited(code: i64) -> Msg {
        Msg::Ended {
            end: Ok(End::exited(code)),
            at: Instant::now(),
        }
    }

    /// A launched cell whose stream is `msgs`; the sender is returned so
    /// that a test decides when the stream closes.
    fn launched(msgs: Vec<Msg>) -> (Launched, mpsc::SyncSender<Msg>) {
        let (tx, rx) = mpsc::sync_channel(64);
        for msg in msgs {
            tx.send(msg).unwrap();
        }
        let launched = Launched {
            rx,
            kill: Box::new(|| {}),
            on_end: Box::new(|| {}),
            stderr: StderrSource::Pipe(Default::default(), None),
            finish: Box::new(|| {}),
            cpus: None,
            host: None,
            job: None,
        };
        (launched, tx)
    }

    /// A started cell of a one-arm, three-iteration experiment.
    fn started() -> (Store, CellInfo) {
        let plan = testkit::plan("iterations = 3\n[[arms]]\nname = \"a\"\ncommand = \"true\"");
        let (mut store, id) = testkit::recorded(&plan);
        let run = store.runs(id).unwrap().remove(0);
        let attempt = store.start_run(run.id).unwrap();
        let info = CellInfo {
            attempt,
            ..CellInfo::of(&plan, &plan.arms[0], &run, 1, 1)
        };
        (store, info)
    }

    fn values(store: &Store, info: &CellInfo) -> Vec<(i64, f64)> {
        store.metric_head(info.run_id, "x", 100).unwrap()
    }

    #[test]
    fn metric_lines_become_rows_and_the_rest_is_counted_or_logged() {
        let (mut store, info) = started();
        let (launched, tx) = launched(vec![
            line(r#"{"iteration": 1, "x": 1.5}"#),
            line("plain text"),
            line(r#"{"iteration": 1, "x": 9}"#),
            line(r#"{"iteration": "two"}"#),
            Msg::Overlong {
                head: b"{\"x\"".to_vec(),
                bytes: 5 << 20,
            },
            line(r#"{"x": 2.5}"#),
            Msg::Eof,
            exited(0),
        ]);
        drop(tx);
        let mut rec = Recorder::default();
        let got = ingest(
            &mut store,
            &launched,
            &info,
            0,
            None,
            &mut rec,
            CellClock {
                started: Instant::now(),
                timeout: None,
            },
        );
        assert!(got.store_error.is_none() && !got.abandoned_pipe);
        assert!(matches!(got.exit, Some((Ok(ref e), _)) if e.success));
        // The repeated iteration 1 is dropped; a line without `iteration`
        // takes its position among the usable JSON lines (the third: the
        // malformed one is not counted).
        assert_eq!(values(&store, &info), [(1, 1.5), (3, 2.5)]);
        assert_eq!((got.counts.stored, got.counts.duplicates), (2, 1));
        assert_eq!(got.counts.problems.malformed, 1);
        assert_eq!(got.counts.problems.overlong, 1);
        let log = got.stdout_log.text();
        assert!(
            log.contains("plain text") && log.contains("line of 5242880 bytes cut"),
            "{log}"
        );
        let warnings: Vec<_> = rec.0.iter().filter(|l| l.starts_with("warning")).collect();
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("iteration 1 of `x` was already recorded")),
            "{warnings:?}"
        );
    }

    #[test]
    fn an_adopted_jobs_lines_already_stored_are_skipped() {
        let (mut store, info) = started();
        let first = |i: i64| MetricLine {
            iteration: i,
            numbers: vec![("x".into(), i as f64)],
            texts: vec![],
            nonfinite: vec![],
        };
        store
            .insert_lines(info.run_id, info.attempt, &[first(1), first(2)])
            .unwrap();
        // The job's stdout is read from its start: lines 1 and 2 again.
        let (launched, tx) = launched(vec![
            line(r#"{"iteration": 1, "x": 1}"#),
            line(r#"{"iteration": 2, "x": 2}"#),
            line(r#"{"iteration": 3, "x": 3}"#),
            Msg::Eof,
            exited(0),
        ]);
        drop(tx);
        let mut rec = Recorder::default();
        let got = ingest(
            &mut store,
            &launched,
            &info,
            2,
            None,
            &mut rec,
            CellClock {
                started: Instant::now(),
                timeout: None,
            },
        );
        assert_eq!((got.counts.stored, got.counts.duplicates), (3, 0));
        assert_eq!(values(&store, &info), [(1, 1.0), (2, 2.0), (3, 3.0)]);
        assert!(rec.0.is_empty(), "{:?}", rec.0);
    }

    #[test]
    fn a_stdout_held_open_after_the_exit_is_given_up() {
        let (mut store, info) = started();
        // Ended, but no end of stdout: something outside the group holds it.
        let (launched, tx) = launched(vec![line(r#"{"iteration": 1, "x": 1}"#), exited(0)]);
        let mut rec = Recorder::default();
        let got = ingest(
            &mut store,
            &launched,
            &info,
            0,
            None,
            &mut rec,
            CellClock {
                started: Instant::now(),
                timeout: None,
            },
        );
        assert!(got.abandoned_pipe);
        assert_eq!(got.counts.stored, 1);
        drop(tx);
    }

    #[test]
    fn a_requeued_job_starts_a_new_attempt_and_its_old_lines_are_superseded() {
        let (mut store, info) = started();
        let (launched, tx) = launched(vec![
            line(r#"{"iteration": 1, "x": 1}"#),
            Msg::Restarted,
            line(r#"{"iteration": 1, "x": 7}"#),
            Msg::Eof,
            exited(0),
        ]);
        drop(tx);
        let mut rec = Recorder::default();
        let got = ingest(
            &mut store,
            &launched,
            &info,
            0,
            None,
            &mut rec,
            CellClock {
                started: Instant::now(),
                timeout: None,
            },
        );
        assert_eq!(got.current.attempt, info.attempt + 1);
        assert_eq!(got.counts.stored, 1);
        assert_eq!(values(&store, &info), [(1, 7.0)]);
        assert!(
            rec.0.iter().any(|l| l.contains("Slurm requeued the job")),
            "{:?}",
            rec.0
        );
    }
}
