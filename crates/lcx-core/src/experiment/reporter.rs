//! Reporters turn runner events into output on stderr: indicatif progress
//! bars on a terminal, plain log lines otherwise (CI logs, pipes, tests).

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

fn outcome_line(
    cell: &CellInfo,
    status: RunStatus,
    error: Option<&str>,
    lines: u64,
    secs: f64,
) -> String {
    let head = format!("[{}/{}] {}", cell.position, cell.cells, cell_name(cell));
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
            Event::Started {
                experiment_id,
                name,
                cells,
                total_cells,
                resumed,
                planned_cells,
            } => {
                let verb = if *resumed { "resuming" } else { "running" };
                if *planned_cells {
                    self.line(&planned_note(*experiment_id));
                }
                self.line(&format!(
                    "{verb} experiment {experiment_id} `{name}`: {cells} of {total_cells} cells to run"
                ));
            }
            Event::CellSkipped { cell, reason } => {
                self.line(&format!(
                    "[{}/{}] {}: SKIPPED: {reason}",
                    cell.position,
                    cell.cells,
                    cell_name(cell)
                ));
            }
            Event::CellStarted { cell } => {
                self.last_progress = Instant::now();
                let attempt = if cell.attempt > 1 {
                    format!(" (attempt {})", cell.attempt)
                } else {
                    String::new()
                };
                self.line(&format!(
                    "[{}/{}] {}: started{attempt}",
                    cell.position,
                    cell.cells,
                    cell_name(cell)
                ));
            }
            Event::Iteration {
                cell,
                iteration,
                elapsed,
                ..
            } => {
                if self.last_progress.elapsed() >= PLAIN_PROGRESS_EVERY {
                    self.last_progress = Instant::now();
                    self.line(&format!(
                        "[{}/{}] {}: iteration {iteration}/{} ({:.1} s)",
                        cell.position,
                        cell.cells,
                        cell_name(cell),
                        cell.iterations,
                        elapsed.as_secs_f64()
                    ));
                }
            }
            Event::Warning { cell, message } => {
                self.line(&format!("{}: warning: {message}", cell_name(cell)));
            }
            Event::Note { cell, message } => {
                self.line(&format!("{}: {message}", cell_name(cell)));
            }
            Event::CellFinished {
                cell,
                outcome,
                lines,
            } => {
                self.line(&outcome_line(
                    cell,
                    outcome.status,
                    outcome.error.as_deref(),
                    *lines,
                    outcome.wall_seconds,
                ));
                if outcome.status == RunStatus::Failed {
                    for l in failure_tail(outcome.stderr_tail.as_deref()) {
                        let _ = writeln!(self.out, "{}", crate::escape::terminal(&l));
                    }
                }
            }
            Event::Finished { summary, .. } => {
                self.line(&finished_line(summary));
            }
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
}

impl Reporter for ProgressReporter {
    fn report(&mut self, event: &Event<'_>) {
        match event {
            Event::Started {
                experiment_id,
                name,
                cells,
                total_cells,
                resumed,
                planned_cells,
            } => {
                self.name = crate::escape::terminal_line(name).into_owned();
                if *planned_cells {
                    self.note(&planned_note(*experiment_id));
                }
                let verb = if *resumed { "resuming" } else { "running" };
                self.note(&format!(
                    "{verb} experiment {experiment_id} `{name}`: {cells} of {total_cells} cells"
                ));
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
            Event::CellSkipped { cell, reason } => {
                self.note(&format!("{}: skipped: {reason}", cell_name(cell)));
                if let Some(b) = &self.overall {
                    b.inc(1);
                }
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
            Event::Iteration { cell, lines, .. } => {
                if let Some(bar) = &self.cell {
                    if *lines > bar.length().unwrap_or(0) {
                        bar.set_length(*lines);
                    }
                    bar.set_position(*lines);
                }
                let _ = cell;
            }
            Event::Warning { cell, message } => {
                self.note(&format!("{}: warning: {message}", cell_name(cell)));
            }
            Event::Note { cell, message } => {
                self.note(&format!("{}: {message}", cell_name(cell)));
            }
            Event::CellFinished {
                cell,
                outcome,
                lines,
            } => {
                if let Some(bar) = self.cell.take() {
                    bar.finish_and_clear();
                    self.multi.remove(&bar);
                }
                self.note(&outcome_line(
                    cell,
                    outcome.status,
                    outcome.error.as_deref(),
                    *lines,
                    outcome.wall_seconds,
                ));
                if outcome.status == RunStatus::Failed {
                    for l in failure_tail(outcome.stderr_tail.as_deref()) {
                        self.note(&l);
                    }
                }
                if let Some(b) = &self.overall {
                    b.inc(1);
                }
            }
            Event::Finished { summary, .. } => {
                if let Some(b) = self.overall.take() {
                    b.finish_and_clear();
                }
                self.note(&finished_line(summary));
            }
        }
    }
}

/// Records events as text; for tests.
#[derive(Debug, Default)]
pub struct RecordingReporter {
    pub events: Vec<String>,
}

impl Reporter for RecordingReporter {
    fn report(&mut self, event: &Event<'_>) {
        let text = match event {
            Event::Started { cells, .. } => format!("started {cells}"),
            Event::CellSkipped { cell, .. } => format!("skipped {}#{}", cell.arm, cell.repeat),
            Event::CellStarted { cell } => format!("start {}#{}", cell.arm, cell.repeat),
            Event::Iteration { .. } => return,
            Event::Warning { cell, .. } => format!("warning {}", cell.arm),
            Event::Note { cell, .. } => format!("note {}", cell.arm),
            Event::CellFinished { cell, outcome, .. } => {
                format!("{} {}#{}", outcome.status, cell.arm, cell.repeat)
            }
            Event::Finished { summary, .. } => format!("finished {}", summary.status),
        };
        self.events.push(text);
    }
}
