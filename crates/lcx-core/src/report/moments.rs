//! The cells' stored values folded into what the statistics test:
//! warm-up-excluded moments per (cell, metric) and the median per (arm,
//! metric). The store hands over the series ([`Store::for_each_series`]);
//! the arithmetic lives here, beside the statistics that use it.

use std::collections::BTreeMap;

use super::stats::{replicates, Summary};
use crate::experiment::Fold;
use crate::store::report_read::{CellSeries, HistoryRun, RunMoments};
use crate::store::{Store, StoreError};

/// The summary behind every `mean ± sd` lcx prints (report, history,
/// compare): every post-warm-up iteration of the given cells, pooled over
/// their repeats. [`SPREAD_LEGEND`] says so in each.
pub fn shown_summary(moments: &[&RunMoments]) -> Option<Summary> {
    let n: i64 = moments.iter().map(|m| m.n).sum();
    if n <= 0 {
        return None;
    }
    let sum: f64 = moments.iter().map(|m| m.sum).sum();
    let sum_sq: f64 = moments.iter().map(|m| m.sum_sq).sum();
    let min = moments.iter().map(|m| m.min).fold(f64::INFINITY, f64::min);
    let max = moments
        .iter()
        .map(|m| m.max)
        .fold(f64::NEG_INFINITY, f64::max);
    Summary::from_moments(n as usize, sum, sum_sq, min, max)
}

/// What the tests (verdicts, gates, history's changes) take as the
/// replicates of some cells: each iteration with one cell, each cell's
/// mean with several; with the count and its unit (`iterations` or
/// `repeats`).
pub fn replicate_summary(moments: &[&RunMoments]) -> Option<(Summary, usize, &'static str)> {
    let with: Vec<&RunMoments> = moments.iter().copied().filter(|m| m.n > 0).collect();
    if with.len() > 1 {
        let means: Vec<Vec<f64>> = with.iter().map(|m| vec![m.mean()]).collect();
        let values = replicates(&means);
        if let Some(s) = Summary::from_values(&values) {
            return Some((s, values.len(), "repeats"));
        }
    }
    shown_summary(&with).map(|s| (s, s.n, "iterations"))
}

/// The one sentence that says what a ± beside a mean is, wherever lcx
/// prints one.
pub const SPREAD_LEGEND: &str = "± is the standard deviation of every post-warm-up \
    iteration of the cells shown, pooled over their repeats";

/// What a report needs from the metric rows of some cells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summaries {
    /// Per (cell, metric), in plan order.
    pub moments: Vec<RunMoments>,
    /// (arm, metric, warm-up-excluded median), sorted by arm then metric.
    pub medians: Vec<(String, String, f64)>,
    /// Per (cell, metric) folded to its median or minimum, the moments of
    /// every run before the fold (for a range over runs, as hyperfine's).
    pub unfolded: Vec<RunMoments>,
}

/// Moments and medians of `names` over cells `runs` (every cell of the
/// experiment when empty). A metric in `folds` as `Fold::Last` counts each
/// cell's last post-warm-up value only, and as `Fold::Median` each cell's
/// median, so a cell is one value of it.
pub fn summaries(
    store: &Store,
    experiment_id: i64,
    names: &[String],
    runs: &[i64],
    folds: &[(String, Fold)],
) -> Result<Summaries, StoreError> {
    let mut out = Summaries::default();
    // Post-warm-up values per (arm, metric), for the medians.
    let mut pooled: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    store.for_each_series(experiment_id, names, runs, |c| {
        let how = folds
            .iter()
            .find(|(n, _)| n == c.name)
            .map_or(Fold::Mean, |(_, f)| *f);
        let mut sorted = Vec::new();
        let one;
        let c = match how {
            Fold::Mean => c,
            Fold::Last => only_last(c),
            Fold::Median | Fold::Min => {
                // The unfolded moments hold the minimum already; only the
                // median needs the values sorted.
                let unfolded = fold(&c);
                one = match how {
                    Fold::Min => (unfolded.n > 0).then_some(unfolded.min),
                    _ => {
                        sorted.extend_from_slice(c.values);
                        crate::sample::median_in_place(&mut sorted)
                    }
                };
                out.unfolded.push(unfolded);
                let values = match &one {
                    Some(v) => std::slice::from_ref(v),
                    None => &[],
                };
                CellSeries { values, ..c }
            }
        };
        let m = fold(&c);
        pooled
            .entry((m.arm.clone(), m.name.clone()))
            .or_default()
            .extend_from_slice(c.values);
        out.moments.push(m);
    })?;
    for ((arm, name), mut values) in pooled {
        if let Some(median) = crate::sample::median_in_place(&mut values) {
            out.medians.push((arm, name, median));
        }
    }
    Ok(out)
}

/// The series cut to its last value (the store hands values in iteration
/// order); the values before it count as neither used nor warm-up.
fn only_last(c: CellSeries<'_>) -> CellSeries<'_> {
    let values = match c.values.len() {
        0 => c.values,
        n => &c.values[n - 1..],
    };
    CellSeries { values, ..c }
}

/// One cell's moments of one metric, from its post-warm-up values.
fn fold(c: &CellSeries<'_>) -> RunMoments {
    let mut m = RunMoments {
        run_id: c.run_id,
        arm: c.arm.to_string(),
        repeat: c.repeat,
        name: c.name.to_string(),
        n: c.values.len() as i64,
        sum: 0.0,
        sum_sq: 0.0,
        min: f64::NAN,
        max: f64::NAN,
        excluded: c.excluded,
    };
    for &v in c.values {
        m.sum += v;
        m.sum_sq += v * v;
        // f64::min/max skip the NaN start value.
        m.min = m.min.min(v);
        m.max = m.max.max(v);
    }
    m
}

/// Fills the warm-up-excluded moments of `metric` of every run that
/// [`Store::history_runs`] listed, from the runs' series, one experiment at
/// a time; a run without a post-warm-up value keeps `None`.
///
/// Folded here rather than aggregated in SQL: the GROUP BY over the joined
/// rows needs a sorter, 1.2 s for a run of 10^6 iterations against 0.37 s
/// for the index scan that streams the same series.
pub fn history_moments(
    store: &Store,
    runs: &mut [HistoryRun],
    metric: &str,
) -> Result<(), StoreError> {
    let mut by_experiment: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for run in runs.iter() {
        by_experiment
            .entry(run.experiment_id)
            .or_default()
            .push(run.run_id);
    }
    let names = [metric.to_string()];
    let mut folded: BTreeMap<i64, RunMoments> = BTreeMap::new();
    for (experiment_id, ids) in &by_experiment {
        store.for_each_series(*experiment_id, &names, ids, |c| {
            let m = fold(&c);
            if m.n > 0 {
                folded.insert(m.run_id, m);
            }
        })?;
    }
    for run in runs.iter_mut() {
        run.moments = folded.remove(&run.run_id);
    }
    Ok(())
}

/// The moments half of [`summaries`].
pub fn run_moments(
    store: &Store,
    experiment_id: i64,
    names: &[String],
    runs: &[i64],
) -> Result<Vec<RunMoments>, StoreError> {
    Ok(summaries(store, experiment_id, names, runs, &[])?.moments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded() -> (Store, i64, Vec<i64>) {
        let mut store = Store::open_in_memory().unwrap();
        let (id, runs) = crate::store::report_read::seed_three_cells(&mut store);
        (store, id, runs)
    }

    #[test]
    fn moments_and_medians_exclude_the_warmup() {
        let (store, id, runs) = seeded();
        let names = vec!["t".to_string()];
        let m = run_moments(&store, id, &names, &[]).unwrap();
        assert_eq!(m.len(), 3);
        // Plan order: a#1, a#2, b#1.
        assert_eq!(
            (m[0].run_id, m[1].run_id, m[2].run_id),
            (runs[0], runs[2], runs[1])
        );
        // Run a#1: values 2, 3, 4 after warm-up.
        assert_eq!((m[0].n, m[0].sum, m[0].sum_sq), (3, 9.0, 29.0));
        assert_eq!((m[0].min, m[0].max, m[0].excluded), (2.0, 4.0, 1));
        let only = run_moments(&store, id, &names, &[runs[1]]).unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].arm, "b");

        let med = summaries(&store, id, &names, &[], &[]).unwrap().medians;
        // Arm a: {2,3,4} ∪ {6,9,12} → median (4 + 6) / 2; arm b: {4,6,8} → 6.
        assert_eq!(med[0], ("a".into(), "t".into(), 5.0));
        assert_eq!(med[1], ("b".into(), "t".into(), 6.0));
        let first_only = summaries(&store, id, &names, &[runs[0]], &[])
            .unwrap()
            .medians;
        assert_eq!(first_only, vec![("a".into(), "t".into(), 3.0)]);

        // Folded to the last value: each cell is its final iteration's.
        let folds: Vec<(String, Fold)> = names.iter().map(|n| (n.clone(), Fold::Last)).collect();
        let last = summaries(&store, id, &names, &[], &folds).unwrap();
        let m = &last.moments;
        assert_eq!((m[0].n, m[0].sum, m[0].min, m[0].max), (1, 4.0, 4.0, 4.0));
        assert_eq!((m[1].n, m[1].sum), (1, 12.0));
        assert_eq!((m[2].n, m[2].sum), (1, 8.0));
        // Arm a: {4, 12} → 8; arm b: {8}.
        assert_eq!(last.medians[0], ("a".into(), "t".into(), 8.0));
        assert_eq!(last.medians[1], ("b".into(), "t".into(), 8.0));

        // Folded to the median: each cell is its post-warm-up median.
        let folds: Vec<(String, Fold)> = names.iter().map(|n| (n.clone(), Fold::Median)).collect();
        let median = summaries(&store, id, &names, &[], &folds).unwrap();
        let m = &median.moments;
        assert_eq!((m[0].n, m[0].sum), (1, 3.0));
        assert_eq!((m[1].n, m[1].sum), (1, 9.0));
        assert_eq!((m[2].n, m[2].sum, m[2].excluded), (1, 6.0, 1));
    }
}
