//! `[measurement] rerun_contended`: after the schedule's last cell, the
//! completed cells whose host was busy with other programs run again, each
//! beside a fresh cell of the baseline from the same repeat. This module
//! picks and orders the reruns; each runs as any cell does
//! ([`super::attempt`]), and it never touches a cell that was not
//! completed.

use super::attempt::run_cell;
use super::cell::{CellInfo, Event, Reporter};
use super::executor::Place;
use super::schedule::{Flow, Invocation, Schedule};
use super::RunnerError;
use crate::experiment::plan::Plan;
use crate::store::{Run, RunStatus, Store};

impl Schedule<'_> {
    /// Up to `rerun_contended` rounds, each running again every completed
    /// cell that was contended, beside a fresh cell of the baseline from
    /// the same repeat (so the pair is measured under the same
    /// conditions), in plan order. Each rerun attempt records why it ran.
    pub(super) fn rerun_contended(
        &mut self,
        store: &mut Store,
        reporter: &mut dyn Reporter,
    ) -> Result<(), RunnerError> {
        let Invocation {
            plan,
            experiment_id,
            ..
        } = self.invocation;
        for round in 1..=plan.measurement.rerun_contended {
            let runs = store.runs(experiment_id)?;
            let again = reruns(plan, &runs, round);
            if again.is_empty() {
                break;
            }
            let cells = again.len();
            for (position, (arm_index, run, note)) in again.into_iter().enumerate() {
                let info = CellInfo::of(plan, &plan.arms[arm_index], run, position + 1, cells);
                if self.rerun(store, reporter, arm_index, info, note)? == Flow::Stop {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Runs `info`'s cell again as a new attempt that records `note`.
    fn rerun(
        &mut self,
        store: &mut Store,
        reporter: &mut dyn Reporter,
        arm_index: usize,
        mut info: CellInfo,
        note: String,
    ) -> Result<Flow, RunnerError> {
        let Invocation { plan, options, .. } = self.invocation;
        if options.stop.is_stopped() {
            return Ok(Flow::Stop);
        }
        let Some(_held) = self.hold_host(&info, reporter)? else {
            return Ok(Flow::Stop);
        };
        if let Err(why) = self.hooks.before_cell(arm_index, &info) {
            // The completed attempt stands; the rerun did not happen.
            reporter.report(&Event::Warning {
                cell: &info,
                message: format!("not rerun: {why}"),
            });
            return Ok(Flow::Next);
        }
        info.attempt = store.start_run(info.run_id)?;
        store.set_run_rerun_note(info.run_id, &note)?;
        reporter.report(&Event::Warning {
            cell: &info,
            message: note,
        });
        let place = Place {
            nodelist: None,
            adopt: None,
            after: None,
            node: self.local_node.as_ref(),
        };
        let executor = self.executor.as_ref();
        run_cell(
            store, plan, arm_index, &info, options, reporter, place, executor,
        )?;
        Ok(Flow::Next)
    }
}

/// Round `round`'s reruns among `runs`: every completed cell whose
/// foreign CPU was over the threshold, and the baseline cell of the same
/// repeat beside each contended arm's; in plan order, each with its arm's
/// index and the note its attempt records.
fn reruns<'r>(plan: &Plan, runs: &'r [Run], round: u32) -> Vec<(usize, &'r Run, String)> {
    let contended: Vec<(&Run, f64, f64)> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Completed)
        .filter_map(|r| {
            let cores = r.contention.foreign_cores()?;
            let limit = plan.measurement.threshold(r.contention.host_cpus);
            (cores > limit).then_some((r, cores, limit))
        })
        .collect();
    let mut again: Vec<(usize, &Run, String)> = Vec::new();
    for (run, cores, limit) in &contended {
        let note = format!(
            "rerun {round}: attempt {} was contended ({cores:.2} cores of other programs' \
             CPU, limit {limit:.2})",
            run.attempt
        );
        again.push((0, run, note));
        // In a sweep, the baseline at the contended cell's own point.
        let baseline = plan.baseline_of(&run.arm).unwrap_or(&plan.baseline);
        if run.arm != baseline {
            if let Some(base) = runs
                .iter()
                .find(|b| b.arm == baseline && b.repeat == run.repeat)
            {
                // Stored text, shown as text (escaped) in reports: no
                // markdown of its own.
                let note = format!(
                    "rerun {round}: the baseline beside contended arm {} #{}",
                    run.arm, run.repeat
                );
                again.push((0, base, note));
            }
        }
    }
    for entry in &mut again {
        entry.0 = plan
            .arms
            .iter()
            .position(|a| a.name == entry.1.arm)
            .unwrap_or(0);
    }
    again.sort_by_cached_key(|(arm, run, _)| plan.cell_rank(*arm, run.repeat.max(1) as u32));
    // A contended baseline cell is rerun once, not also as a partner.
    again.dedup_by_key(|(_, run, _)| run.id);
    again
}
