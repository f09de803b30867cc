//! Reporters turn runner events into output on stderr: indicatif progress
//! bars on a terminal, plain log lines otherwise (CI logs, pipes, tests).
//!
//! What an event says is written once, in [`said`], for both layouts; the
//! reporters only decide where the words go (a log line, a note above the
//! bars) and what else moves (the bars, the plain log's pace). The few
//! places where the two layouts say different things are marked there,
//! with why. They stay as they are: scripts and the integration tests read
//! the plain lines byte for byte, and a refactor changes no one's output.

use std::io::Write;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::run::{CellInfo, Event, Reporter};
use crate::store::RunStatus;

/// How many stderr lines of a failed cell are echoed.
const FAILURE_TAIL_LINES: usize = 8;
/// Plain mode prints iteration progress at most this often per cell.
const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// The reporter for a run on this process's stderr: progress bars on a
/// terminal, plain lines otherwise or when `plain` is asked for.
pub fn for_stderr(plain: bool) -> Box<dyn Reporter> {
    use std::io::IsTerminal;
    if !plain && std::io::stderr().is_terminal() {
        Box::new(ProgressReporter::new())
    } else {
        Box::new(PlainReporter::new(std::io::stderr()))
    }
}

/// Which reporter an event's words are laid out for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Log lines that each stand alone (CI logs, pipes).
    Plain,
    /// Notes printed above progress bars, which show the rest.
    Bars,
}

/// What one event says: its lines, then a failed cell's stderr tail (which
/// a plain log prints without its `lcx: ` prefix).
#[derive(Debug, Default)]
struct Said {
    lines: Vec<String>,
    tail: Vec<String>,
}

/// The words of `event` in `layout`: the one place both reporters take
/// them from.
fn said(event: &Event<'_>, layout: Layout) -> Said {
    let plain = layout == Layout::Plain;
    let mut said = Said::default();
    match event {
        Event::Started {
            experiment_id,
            name,
            cells,
            total_cells,
            resumed,
            planned_cells,
        } => {
            if *planned_cells {
                said.lines.push(planned_note(*experiment_id));
            }
            let verb = if *resumed { "resuming" } else { "running" };
            let mut line = format!(
                "{verb} experiment {experiment_id} `{name}`: {cells} of {total_cells} cells"
            );
            // The plain line says "to run", which scripts and the
            // integration tests look for; the terminal's bar counts the
            // cells below its shorter line.
            if plain {
                line.push_str(" to run");
            }
            said.lines.push(line);
        }
        Event::CellSkipped { cell, reason } => {
            // A plain line stands alone: it says which cell of how many,
            // and shouts SKIPPED as the outcome lines shout FAILED (the
            // integration tests look for it). A terminal note needs no
            // position (the overall bar shows it) and says it in lower case.
            said.lines.push(if plain {
                format!("{}: SKIPPED: {reason}", positioned(cell))
            } else {
                format!("{}: skipped: {reason}", cell_name(cell))
            });
        }
        Event::CellStarted { cell } => {
            // On a terminal the cell's new bar says it started.
            if plain {
                let attempt = if cell.attempt > 1 {
                    format!(" (attempt {})", cell.attempt)
                } else {
                    String::new()
                };
                said.lines
                    .push(format!("{}: started{attempt}", positioned(cell)));
            }
        }
        Event::Iteration {
            cell,
            iteration,
            elapsed,
            ..
        } => {
            // On a terminal the cell's bar moves instead.
            if plain {
                said.lines.push(format!(
                    "{}: iteration {iteration}/{} ({:.1} s)",
                    positioned(cell),
                    cell.iterations,
                    elapsed.as_secs_f64()
                ));
            }
        }
        Event::Warning { cell, message } => {
            said.lines
                .push(format!("{}: warning: {message}", cell_name(cell)));
        }
        Event::Note { cell, message } => {
            said.lines.push(format!("{}: {message}", cell_name(cell)));
        }
        Event::CellFinished {
            cell,
            outcome,
            lines,
        } => {
            said.lines.push(outcome_line(
                cell,
                outcome.status,
                outcome.error.as_deref(),
                *lines,
                outcome.wall_seconds,
            ));
            if outcome.status == RunStatus::Failed {
                said.tail = failure_tail(outcome.stderr_tail.as_deref());
            }
        }
        Event::Finished { summary, .. } => said.lines.push(finished_line(summary)),
    }
    said
}

fn planned_note(experiment_id: i64) -> String {
    format!(
        "experiment {experiment_id} had no cells recorded (its runner was killed while \
         creating it); they are planned from its stored plan"
    )
}

/// A cell as one line of a terminal (a progress bar's prefix is not
/// passed through [`crate::escape::terminal`] by the note functions).
fn cell_name(cell: &CellInfo) -> String {
    let arm = crate::escape::terminal_line(&cell.arm);
    if cell.repeats > 1 {
        format!("{arm} #{}/{}", cell.repeat, cell.repeats)
    } else {
        arm.into_owned()
    }
}

/// A cell with its place among this invocation's cells: `[2/6] a #1/3`.
fn positioned(cell: &CellInfo) -> String {
    format!("[{}/{}] {}", cell.position, cell.cells, cell_name(cell))
}

fn outcome_line(
    cell: &CellInfo,
    status: RunStatus,
    error: Option<&str>,
    lines: u64,
    secs: f64,
) -> String {
    let head = positioned(cell);
    let lines = crate::text::counted(lines, "line");
    match status {
        RunStatus::Completed => format!("{head}: completed, {lines} in {secs:.2} s"),
        RunStatus::Interrupted => format!("{head}: INTERRUPTED after {lines} ({secs:.2} s)"),
        _ => format!(
            "{head}: FAILED after {lines} ({secs:.2} s): {}",
            error.unwrap_or("unknown error")
        ),
    }
}

fn failure_tail(tail: Option<&str>) -> Vec<String> {
    let Some(tail) = tail else {
        return Vec::new();
    };
    let lines: Vec<&str> = tail.lines().collect();
    let start = lines.len().saturating_sub(FAILURE_TAIL_LINES);
    lines[start..]
        .iter()
        .map(|l| format!("    | {l}"))
        .collect()
}

fn finished_line(s: &super::run::Summary) -> String {
    format!(
        "experiment {} {}: {} completed, {} failed, {} interrupted, {} skipped, {} not run ({:.1} s)",
        s.experiment_id,
        s.status,
        s.completed,
        s.failed,
        s.interrupted,
        s.skipped,
        s.pending,
        s.wall_seconds
    )
}

/// Plain log lines, one per notable event.
pub struct PlainReporter<W: Write> {
    out: W,
    last_progress: Instant,
}

impl<W: Write> PlainReporter<W> {
    pub fn new(out: W) -> Self {
        PlainReporter {
            out,
            last_progress: Instant::now(),
        }
    }

    fn line(&mut self, text: &str) {
        // A closed stderr must not stop the experiment. Names, labels and a
        // child's stderr are quoted here: the terminal rule shows their
        // control characters rather than obeying them.
        let _ = writeln!(self.out, "lcx: {}", crate::escape::terminal(text));
    }
}

impl<W: Write> Reporter for PlainReporter<W> {
    fn report(&mut self, event: &Event<'_>) {
        match event {
            Event::CellStarted { .. } => self.last_progress = Instant::now(),
            Event::Iteration { .. } => {
                // A log gets a cell's progress now and then, not per line.
                if self.last_progress.elapsed() < PLAIN_PROGRESS_EVERY {
                    return;
                }
                self.last_progress = Instant::now();
            }
            _ => {}
        }
        let said = said(event, Layout::Plain);
        for line in &said.lines {
            self.line(line);
        }
        for line in &said.tail {
            let _ = writeln!(self.out, "{}", crate::escape::terminal(line));
        }
    }
}

/// Progress bars for a terminal: one for the experiment (cells), one for
/// the running cell (iterations, ETA). Notes print above the bars.
pub struct ProgressReporter {
    multi: MultiProgress,
    overall: Option<ProgressBar>,
    cell: Option<ProgressBar>,
    name: String,
}

impl Default for ProgressReporter {
    fn default() -> Self {
        Self::new()
    }
}

impl ProgressReporter {
    pub fn new() -> Self {
        ProgressReporter {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            overall: None,
            cell: None,
            name: String::new(),
        }
    }

    fn note(&self, text: &str) {
        let _ = self.multi.println(crate::escape::terminal(text));
    }

    /// Takes down the bars an event ends, before its notes print, so that
    /// the notes are not drawn beside a finished bar.
    fn clear_bars(&mut self, event: &Event<'_>) {
        match event {
            Event::CellFinished { .. } => {
                if let Some(bar) = self.cell.take() {
                    bar.finish_and_clear();
                    self.multi.remove(&bar);
                }
            }
            Event::Finished { .. } => {
                if let Some(b) = self.overall.take() {
                    b.finish_and_clear();
                }
            }
            _ => {}
        }
    }

    /// Puts up or moves the bars an event starts or advances, after its
    /// notes.
    fn draw_bars(&mut self, event: &Event<'_>) {
        match event {
            Event::Started { name, cells, .. } => {
                self.name = crate::escape::terminal_line(name).into_owned();
                let bar = self.multi.add(ProgressBar::new(*cells as u64));
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix:.bold} cells {pos}/{len} [{elapsed_precise}] {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar.set_prefix(self.name.clone());
                self.overall = Some(bar);
            }
            Event::CellStarted { cell } => {
                let bar = self.multi.add(ProgressBar::new(u64::from(cell.iterations)));
                bar.set_style(
                    ProgressStyle::with_template(
                        "  {prefix} [{bar:30.cyan/blue}] {pos}/{len} it  {per_sec}  ETA {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                bar.set_prefix(format!("{} · {}", self.name, cell_name(cell)));
                bar.enable_steady_tick(Duration::from_millis(250));
                self.cell = Some(bar);
            }
            Event::Iteration { lines, .. } => {
                if let Some(bar) = &self.cell {
                    if *lines > bar.length().unwrap_or(0) {
                        bar.set_length(*lines);
                    }
                    bar.set_position(*lines);
                }
            }
            Event::CellSkipped { .. } | Event::CellFinished { .. } => {
                if let Some(b) = &self.overall {
                    b.inc(1);
                }
            }
            Event::Warning { .. } | Event::Note { .. } | Event::Finished { .. } => {}
        }
    }
}

impl Reporter for ProgressReporter {
    fn report(&mut self, event: &Event<'_>) {
        self.clear_bars(event);
        let said = said(event, Layout::Bars);
        for line in said.lines.iter().chain(&said.tail) {
            self.note(line);
        }
        self.draw_bars(event);
    }
}

/// An event as a test names it, briefly: `start a#1`, `skipped a#1`,
/// `completed a#1`, `warning a`; `None` for an iteration. The library's
/// [`RecordingReporter`] keeps exactly these; the runner's unit tests add
/// the event's reason or message.
pub(crate) fn recorded(event: &Event<'_>) -> Option<String> {
    let key = |cell: &CellInfo| format!("{}#{}", cell.arm, cell.repeat);
    Some(match event {
        Event::Started { cells, .. } => format!("started {cells}"),
        Event::CellSkipped { cell, .. } => format!("skipped {}", key(cell)),
        Event::CellStarted { cell } => format!("start {}", key(cell)),
        Event::Iteration { .. } => return None,
        Event::Warning { cell, .. } => format!("warning {}", cell.arm),
        Event::Note { cell, .. } => format!("note {}", cell.arm),
        Event::CellFinished { cell, outcome, .. } => format!("{} {}", outcome.status, key(cell)),
        Event::Finished { summary, .. } => format!("finished {}", summary.status),
    })
}

/// Records events as text; for tests.
#[derive(Debug, Default)]
pub struct RecordingReporter {
    pub events: Vec<String>,
}

impl Reporter for RecordingReporter {
    fn report(&mut self, event: &Event<'_>) {
        self.events.extend(recorded(event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::run::Summary;
    use crate::store::{ExperimentStatus, LineProblems, RunOutcome};

    fn cell(arm: &str, repeat: u32, position: usize, attempt: i64) -> CellInfo {
        CellInfo {
            run_id: 1,
            arm: arm.into(),
            label: arm.into(),
            repeat,
            repeats: 2,
            position,
            cells: 2,
            iterations: 10,
            variable_iterations: false,
            attempt,
        }
    }

    /// One of each event, in a run's order; `each` gets every one.
    fn a_run(each: &mut dyn FnMut(&Event<'_>)) {
        let (a, b) = (cell("a", 1, 1, 1), cell("b", 2, 2, 2));
        let outcome = RunOutcome {
            status: RunStatus::Failed,
            exit_code: Some(1),
            signal: None,
            error: Some("exit 1".into()),
            stderr_tail: Some("e1\ne2".into()),
            wall_seconds: 0.5,
            db_wait_seconds: None,
            problems: LineProblems::default(),
        };
        let summary = Summary {
            experiment_id: 7,
            status: ExperimentStatus::Failed,
            completed: 0,
            failed: 1,
            skipped: 1,
            interrupted: 0,
            pending: 2,
            wall_seconds: 1.5,
        };
        let events = [
            Event::Started {
                experiment_id: 7,
                name: "demo",
                cells: 2,
                total_cells: 4,
                resumed: true,
                planned_cells: true,
            },
            Event::CellSkipped {
                cell: &a,
                reason: "requires CUDA",
            },
            Event::CellStarted { cell: &b },
            Event::Iteration {
                cell: &b,
                iteration: 3,
                lines: 3,
                elapsed: Duration::from_millis(1500),
            },
            Event::Warning {
                cell: &b,
                message: "slow".into(),
            },
            Event::Note {
                cell: &b,
                message: "job 12".into(),
            },
            Event::CellFinished {
                cell: &b,
                outcome: &outcome,
                lines: 1,
            },
            Event::Finished {
                experiment_id: 7,
                summary: &summary,
            },
        ];
        for event in &events {
            each(event);
        }
    }

    #[test]
    fn the_plain_log_says_each_event_on_its_own_line() {
        let mut out = Vec::new();
        let mut plain = PlainReporter::new(&mut out);
        a_run(&mut |event| plain.report(event));
        // The iteration came right after the start: a log is not told.
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "lcx: experiment 7 had no cells recorded (its runner was killed while creating it); \
             they are planned from its stored plan\n\
             lcx: resuming experiment 7 `demo`: 2 of 4 cells to run\n\
             lcx: [1/2] a #1/2: SKIPPED: requires CUDA\n\
             lcx: [2/2] b #2/2: started (attempt 2)\n\
             lcx: b #2/2: warning: slow\n\
             lcx: b #2/2: job 12\n\
             lcx: [2/2] b #2/2: FAILED after 1 line (0.50 s): exit 1\n    | e1\n    | e2\n\
             lcx: experiment 7 failed: 0 completed, 1 failed, 0 interrupted, 1 skipped, 2 not \
             run (1.5 s)\n"
        );
    }

    #[test]
    fn the_notes_above_the_bars_say_less_where_a_bar_shows_it() {
        let mut notes = Vec::new();
        a_run(&mut |event| {
            let said = said(event, Layout::Bars);
            notes.extend(said.lines.into_iter().chain(said.tail));
        });
        assert_eq!(
            notes[1..3],
            [
                "resuming experiment 7 `demo`: 2 of 4 cells",
                "a #1/2: skipped: requires CUDA",
            ]
        );
        assert_eq!(notes[3], "b #2/2: warning: slow");
        assert_eq!(notes.len(), 9, "{notes:#?}");
    }

    #[test]
    fn a_test_recorder_names_each_event_briefly() {
        let mut recorder = RecordingReporter::default();
        a_run(&mut |event| recorder.report(event));
        assert_eq!(
            recorder.events,
            [
                "started 2",
                "skipped a#1",
                "start b#2",
                "warning b",
                "note b",
                "failed b#2",
                "finished failed",
            ]
        );
    }
}
