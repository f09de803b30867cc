//! A cell's stdout lines become metric rows: each line is sorted into a
//! row, a log line or a counted problem ([`take_line`]), and the rows read
//! so far are committed in one transaction ([`flush`]). Reading the
//! cell's stream, and deciding when to commit, is [`super::ingest`]'s: this
//! module never waits for a message.

use std::time::Instant;

use super::cell::{CellInfo, Event, Reporter};
use super::line::{parse_line, Line};
use super::output::Tail;
use crate::store::{LineProblems, MetricLine, Store, StoreError};

/// Most lines committed in one transaction.
pub(super) const MAX_BATCH: usize = 4096;

/// What became of a cell's lines so far.
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

impl LineCounts {
    /// The counts of a cell whose first `stored` lines were stored before
    /// this reader (an adopted job's, by an earlier follower).
    pub(super) fn after(stored: u64) -> Self {
        LineCounts {
            stored,
            ..LineCounts::default()
        }
    }
}

/// Commits the pending lines in one transaction. A duplicate iteration
/// aborts that transaction, so the batch is then retried line by line and
/// only the offending lines are dropped (with a warning).
pub(super) fn flush(
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
/// problem, warning once per cell for each kind of problem.
pub(super) fn take_line(
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
