//! `lcx bench forward`: the cost of one network forward per batch size, the
//! ceiling that a traversal querying a network at every decision can reach.
//!
//! The timing itself happens in lcx-trainer's `probe` (the only place with tch);
//! this module decides how many forwards to time, repeats them and reduces
//! the repetitions to per-batch-size rows.

use std::time::Duration;

use serde::Serialize;

/// Something that can time `iters` forwards at batch size `batch`.
pub trait ForwardTimer {
    type Error;
    fn time_forwards(&self, batch: usize, iters: usize) -> Result<Duration, Self::Error>;
}

/// How to run the benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardOptions {
    pub batch_sizes: Vec<usize>,
    /// Timed repetitions per batch size (each one JSON line).
    pub reps: usize,
    /// Forwards per repetition; `None` calibrates from `warmup_forwards`
    /// more forwards timed after the warm-up, so that a repetition lasts
    /// about `target_rep_seconds`.
    pub iters: Option<usize>,
    /// Untimed forwards before the first repetition of each batch size.
    pub warmup_forwards: usize,
    pub target_rep_seconds: f64,
}

impl Default for ForwardOptions {
    fn default() -> Self {
        Self {
            batch_sizes: vec![1, 4, 16, 64, 256, 1024],
            reps: 10,
            iters: None,
            warmup_forwards: 10,
            target_rep_seconds: 0.1,
        }
    }
}

/// One timed repetition: the JSON line the experiment runner ingests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForwardSample {
    pub iteration: usize,
    pub batch_size: usize,
    pub forwards: usize,
    #[serde(rename = "bench/us_per_call")]
    pub us_per_call: f64,
    #[serde(rename = "bench/us_per_state")]
    pub us_per_state: f64,
}

/// The summary row for one batch size (means over repetitions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForwardRow {
    pub batch_size: usize,
    pub us_per_call: f64,
    pub us_per_state: f64,
    /// µs/state at the first batch size ÷ µs/state here.
    pub speedup_vs_first: f64,
}

/// Times every batch size; `on_sample` sees each repetition as it finishes
/// (so a caller can stream it), and the rows come back at the end.
pub fn run<T: ForwardTimer>(
    timer: &T,
    options: &ForwardOptions,
    mut on_sample: impl FnMut(&ForwardSample),
) -> Result<Vec<ForwardRow>, T::Error> {
    let mut rows: Vec<ForwardRow> = Vec::with_capacity(options.batch_sizes.len());
    let mut iteration = 0;
    for &batch in &options.batch_sizes {
        let warmup = options.warmup_forwards.max(1);
        // The first forwards pay for one-off work (on a GPU: the context,
        // kernel selection, the allocator's first blocks), so they are only
        // a warm-up; a calibration from them would size the repetitions for
        // a device many times slower than the warm one.
        timer.time_forwards(batch, warmup)?;
        let iters = match options.iters {
            Some(n) => n,
            None => calibrate(
                timer.time_forwards(batch, warmup)?,
                warmup,
                options.target_rep_seconds,
            ),
        };
        let mut total_us = 0.0;
        for _ in 0..options.reps {
            let elapsed = timer.time_forwards(batch, iters)?;
            let us_per_call = elapsed.as_secs_f64() * 1e6 / iters as f64;
            iteration += 1;
            let sample = ForwardSample {
                iteration,
                batch_size: batch,
                forwards: iters,
                us_per_call,
                us_per_state: us_per_call / batch as f64,
            };
            on_sample(&sample);
            total_us += us_per_call;
        }
        let us_per_call = total_us / options.reps.max(1) as f64;
        let us_per_state = us_per_call / batch as f64;
        let first = rows.first().map_or(us_per_state, |r| r.us_per_state);
        rows.push(ForwardRow {
            batch_size: batch,
            us_per_call,
            us_per_state,
            speedup_vs_first: first / us_per_state,
        });
    }
    Ok(rows)
}

/// Forwards per repetition so that one lasts about `target` seconds, given
/// that `n` warm-up forwards took `elapsed`; at least 1, at most 100,000.
fn calibrate(elapsed: Duration, n: usize, target: f64) -> usize {
    let per_call = elapsed.as_secs_f64() / n.max(1) as f64;
    if per_call <= 0.0 {
        return 100_000;
    }
    ((target / per_call).round() as usize).clamp(1, 100_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A timer whose forward costs 100 µs + 1 µs per row.
    struct LinearCost(RefCell<Vec<(usize, usize)>>);

    impl ForwardTimer for LinearCost {
        type Error = std::convert::Infallible;
        fn time_forwards(&self, batch: usize, iters: usize) -> Result<Duration, Self::Error> {
            self.0.borrow_mut().push((batch, iters));
            Ok(Duration::from_nanos(((100 + batch) * 1000 * iters) as u64))
        }
    }

    #[test]
    fn rows_and_samples_follow_the_timer() {
        let timer = LinearCost(RefCell::new(Vec::new()));
        let options = ForwardOptions {
            batch_sizes: vec![1, 100],
            reps: 3,
            iters: Some(5),
            warmup_forwards: 2,
            target_rep_seconds: 0.1,
        };
        let mut samples = Vec::new();
        let rows = run(&timer, &options, |s| samples.push(s.clone())).unwrap();
        assert_eq!(samples.len(), 6);
        let iterations: Vec<usize> = samples.iter().map(|s| s.iteration).collect();
        assert_eq!(iterations, vec![1, 2, 3, 4, 5, 6]);
        assert!((rows[0].us_per_call - 101.0).abs() < 1e-9);
        assert!((rows[1].us_per_call - 200.0).abs() < 1e-9);
        assert!((rows[1].us_per_state - 2.0).abs() < 1e-9);
        assert!((rows[1].speedup_vs_first - 50.5).abs() < 1e-9);
        assert_eq!(rows[0].speedup_vs_first, 1.0);
        // Warm-up (2 forwards) before the 3 timed repetitions of 5 forwards.
        assert_eq!(timer.0.borrow()[..4], [(1, 2), (1, 5), (1, 5), (1, 5)]);
    }

    /// A timer whose first call is 1,000 times slower than the rest, as a
    /// GPU's first forwards are.
    struct ColdStart(RefCell<Vec<(usize, usize)>>);

    impl ForwardTimer for ColdStart {
        type Error = std::convert::Infallible;
        fn time_forwards(&self, batch: usize, iters: usize) -> Result<Duration, Self::Error> {
            let first = self.0.borrow().is_empty();
            self.0.borrow_mut().push((batch, iters));
            let per_call_us = if first { 1_000_000 } else { 1_000 };
            Ok(Duration::from_micros((per_call_us * iters) as u64))
        }
    }

    #[test]
    fn calibration_comes_after_the_warm_up() {
        let timer = ColdStart(RefCell::new(Vec::new()));
        let options = ForwardOptions {
            batch_sizes: vec![8],
            reps: 1,
            iters: None,
            warmup_forwards: 4,
            target_rep_seconds: 0.1,
        };
        run(&timer, &options, |_| {}).unwrap();
        // Warm-up, then calibration, then one repetition sized from the
        // warm rate (1 ms a forward → 100 forwards for 0.1 s), not from the
        // cold one (which would give 1).
        assert_eq!(*timer.0.borrow(), [(8, 4), (8, 4), (8, 100)]);
    }

    #[test]
    fn calibration_targets_the_repetition_length() {
        assert_eq!(calibrate(Duration::from_millis(10), 10, 0.1), 100);
        assert_eq!(calibrate(Duration::from_secs(10), 1, 0.1), 1);
        assert_eq!(calibrate(Duration::ZERO, 1, 0.1), 100_000);
        let json = serde_json::to_string(&ForwardSample {
            iteration: 1,
            batch_size: 4,
            forwards: 2,
            us_per_call: 8.0,
            us_per_state: 2.0,
        })
        .unwrap();
        assert!(json.contains("\"bench/us_per_state\":2.0"), "{json}");
    }
}
