//! A cell's output becomes rows: the executor's stream of messages is read
//! to its end, every JSON line is committed to the store as soon as it has
//! arrived. A line gets its own transaction unless further complete lines
//! were already waiting, in which case that burst shares one (up to
//! [`MAX_BATCH`] lines, see [`super::rows`]): a trainer that prints once per iteration gets a
//! transaction per line, while a child printing a million lines does not
//! pay a million commits. A crash of the runner loses at most lines that
//! had arrived but were not yet committed.

use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use super::cell::{CellInfo, End, Event, Reporter};
use super::executor::{Launched, Msg};
use super::output::{overlong_note, Tail, MAX_LINE};
use super::rows::{flush, take_line, LineCounts, MAX_BATCH};
use super::stop::KILL_GRACE;
use crate::store::{MetricLine, Store, StoreError};

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
    let mut reader = Reader {
        store,
        launched,
        job_dir,
        reporter,
        clock,
        counts: LineCounts::after(stored_before),
        skip: stored_before,
        current: info.clone(),
        batch: Vec::new(),
        stdout_log: Tail::default(),
        waiting: None,
        eof: false,
        exit: None,
        abandoned_pipe: false,
        timed_out: None,
        store_error: None,
    };
    while !(reader.eof && reader.exit.is_some()) {
        reader.stop_if_overdue();
        let msg = match reader.next() {
            Ok(Next::Msg(msg)) => msg,
            Ok(Next::Poll) => continue,
            Ok(Next::Done) => break,
            Err(e) => {
                reader.fail(e);
                break;
            }
        };
        if let Err(e) = reader.take(msg) {
            reader.fail(e);
            break;
        }
    }
    reader.await_killed();
    reader.finish()
}

/// What the reader does after waiting for the stream.
enum Next {
    Msg(Msg),
    /// Nothing came within a poll: look at the clock and wait again.
    Poll,
    /// The stream is over (closed, or given up after the exit).
    Done,
}

/// One cell's stream being read: where its lines go, and what has been
/// seen of it so far.
struct Reader<'a> {
    store: &'a mut Store,
    launched: &'a Launched,
    job_dir: Option<&'a Path>,
    reporter: &'a mut dyn Reporter,
    clock: CellClock,
    counts: LineCounts,
    /// Metric lines still to drop: an adopted job's, already stored.
    skip: u64,
    /// The attempt the lines belong to: a job Slurm requeues starts a new one.
    current: CellInfo,
    /// Lines read but not yet committed.
    batch: Vec<MetricLine>,
    stdout_log: Tail,
    /// A message taken while draining a burst of lines, handled next.
    waiting: Option<Msg>,
    eof: bool,
    exit: Option<(Result<End, String>, Instant)>,
    abandoned_pipe: bool,
    timed_out: Option<Duration>,
    store_error: Option<StoreError>,
}

impl Reader<'_> {
    /// Past its timeout the cell is stopped, once, as a failing store
    /// stops it (`kill`: SIGKILL to a local cell's process group, scancel
    /// for a Slurm job); its exit then ends the loop.
    fn stop_if_overdue(&mut self) {
        let CellClock { started, timeout } = self.clock;
        let overdue = timeout.filter(|&l| self.exit.is_none() && started.elapsed() >= l);
        let (Some(limit), None) = (overdue, self.timed_out) else {
            return;
        };
        self.timed_out = Some(limit);
        self.reporter.report(&Event::Warning {
            cell: &self.current,
            message: format!(
                "ran past its timeout of {}; stopping it",
                crate::text::duration_words(limit)
            ),
        });
        (self.launched.kill)();
    }

    /// Waits for the next message: a poll at a time while the child runs
    /// (so that a takeover or the timeout is noticed), then at most
    /// [`STDOUT_GRACE`] after its exit.
    fn next(&mut self) -> Result<Next, StoreError> {
        if let Some(msg) = self.waiting.take() {
            return Ok(Next::Msg(msg));
        }
        let rx = &self.launched.rx;
        if let Some((_, at)) = &self.exit {
            let left = STDOUT_GRACE.saturating_sub(at.elapsed());
            return Ok(match rx.recv_timeout(left) {
                Ok(msg) => Next::Msg(msg),
                Err(_) => {
                    self.abandoned_pipe = true;
                    Next::Done
                }
            });
        }
        let wait = match self.clock.timeout {
            // Wake for the timeout as well as for a takeover.
            Some(limit) if self.timed_out.is_none() => {
                CLAIM_POLL.min(limit.saturating_sub(self.clock.started.elapsed()))
            }
            _ => CLAIM_POLL,
        };
        match rx.recv_timeout(wait) {
            Ok(msg) => Ok(Next::Msg(msg)),
            Err(RecvTimeoutError::Timeout) => {
                // A silent cell still notices a takeover within a poll; a
                // chatty one at its next line's write.
                self.store.check_claim()?;
                Ok(Next::Poll)
            }
            Err(RecvTimeoutError::Disconnected) => Ok(Next::Done),
        }
    }

    /// Handles one message; an error is the store's, and ends the cell.
    fn take(&mut self, msg: Msg) -> Result<(), StoreError> {
        let run_id = self.current.run_id;
        match msg {
            Msg::Line(first) => self.lines(first)?,
            Msg::Overlong { head, bytes } => {
                self.counts.problems.overlong += 1;
                self.stdout_log.push(&overlong_note(&head, bytes));
                if self.counts.problems.overlong == 1 {
                    self.reporter.report(&Event::Warning {
                        cell: &self.current,
                        message: format!(
                            "a stdout line of {bytes} bytes is over the {} MiB line cap; \
                             its head is kept in the cell's log",
                            MAX_LINE / (1024 * 1024)
                        ),
                    });
                }
            }
            Msg::Eof => self.eof = true,
            Msg::RunStarted(started) => self.store.set_run_slurm_run(run_id, &started)?,
            Msg::Restarted => self.restart()?,
            Msg::Placed(node) => self.store.set_run_placement(run_id, Some(&node), None)?,
            Msg::Ended { end, at } => {
                // The cell is the child: whatever it left running in its
                // group goes with it (and so does a grandchild's hold on
                // the stdout pipe).
                (self.launched.on_end)();
                self.exit = Some((end, at));
            }
        }
        Ok(())
    }

    /// Takes `first` and every further line already waiting (up to
    /// [`MAX_BATCH`]), then commits them: a child printing one line per
    /// iteration gets one transaction per line; a burst that arrived
    /// together shares one.
    fn lines(&mut self, first: Vec<u8>) -> Result<(), StoreError> {
        let mut next = Some(first);
        while let Some(bytes) = next.take() {
            let before = self.batch.len();
            take_line(
                &bytes,
                &self.current,
                &mut self.batch,
                &mut self.counts,
                &mut self.stdout_log,
                self.reporter,
            );
            if self.skip > 0 && self.batch.len() > before {
                self.batch.pop();
                self.skip -= 1;
            }
            if self.batch.len() >= MAX_BATCH {
                break;
            }
            match self.launched.rx.try_recv() {
                Ok(Msg::Line(bytes)) => next = Some(bytes),
                Ok(other) => self.waiting = Some(other),
                Err(_) => {}
            }
        }
        self.commit()
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        flush(
            self.store,
            &self.current,
            &mut self.batch,
            &mut self.counts,
            self.reporter,
            self.clock.started,
        )
    }

    /// Slurm requeued the job: what its earlier run printed is superseded,
    /// and the cell starts again as a new attempt.
    fn restart(&mut self) -> Result<(), StoreError> {
        self.commit()?;
        let run_id = self.current.run_id;
        self.current.attempt = self.store.start_run(run_id)?;
        self.store
            .set_run_placement(run_id, None, self.launched.job.as_deref())?;
        if let Some(dir) = self.job_dir {
            self.store
                .set_run_slurm_dir(run_id, &dir.display().to_string())?;
        }
        self.counts = LineCounts::default();
        self.skip = 0;
        self.reporter.report(&Event::Warning {
            cell: &self.current,
            message: format!(
                "Slurm requeued the job; its earlier lines are superseded and it runs again as \
                 attempt {}",
                self.current.attempt
            ),
        });
        Ok(())
    }

    /// The store is unusable: stop the child, record what we can, and give
    /// up.
    fn fail(&mut self, error: StoreError) {
        stop_for(&error, self.launched);
        self.store_error = Some(error);
    }

    /// After a store failure, waits for the killed child so that its exit
    /// is what gets recorded; not for a job left to the runner that took
    /// the experiment over.
    fn await_killed(&mut self) {
        let left_to_other = matches!(self.store_error, Some(StoreError::TakenOver { .. }))
            && self.launched.job.is_some();
        if self.store_error.is_none() || self.exit.is_some() || left_to_other {
            return;
        }
        while let Ok(msg) = self.launched.rx.recv_timeout(KILL_GRACE) {
            if let Msg::Ended { end, at } = msg {
                self.exit = Some((end, at));
                break;
            }
        }
    }

    fn finish(self) -> Ingested {
        Ingested {
            counts: self.counts,
            stdout_log: self.stdout_log,
            current: self.current,
            exit: self.exit,
            abandoned_pipe: self.abandoned_pipe,
            store_error: self.store_error,
            timed_out: self.timed_out,
        }
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
