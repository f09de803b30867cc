//! Statistics behind reports: descriptive summaries, Welch's t-test, speedups
//! with an interval, and the improved / regressed / no-change verdict.
//!
//! Everything here is pure arithmetic on `f64` slices or summaries so that it
//! can be tested on synthetic series and fed from SQL aggregates alike.
//! Replicates are iterations when an arm ran once, and per-repeat means when
//! it ran several times (see [`replicates`]): iterations inside one process
//! share warm caches and allocator state, so with repeats the honest unit of
//! independence is the repeat.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Times and costs: smaller is better.
    LowerIsBetter,
    /// Throughputs and win rates: larger is better.
    HigherIsBetter,
}

impl Direction {
    /// Parses the experiment file's spelling (`lower` / `higher`, with a few
    /// common aliases).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "lower" | "lower_is_better" | "lower-is-better" | "down" | "min" => {
                Some(Self::LowerIsBetter)
            }
            "higher" | "higher_is_better" | "higher-is-better" | "up" | "max" => {
                Some(Self::HigherIsBetter)
            }
            _ => None,
        }
    }

    /// Short word for tables and JSON.
    pub fn word(self) -> &'static str {
        match self {
            Self::LowerIsBetter => "lower",
            Self::HigherIsBetter => "higher",
        }
    }
}

/// The direction of a metric from its name, and whether the name was
/// recognised (an unknown metric is treated as lower-is-better and the report
/// says so).
pub fn direction_for(metric: &str) -> (Direction, bool) {
    let m = metric.to_ascii_lowercase();
    // Throughput names first: `nodes_per_second` must not match `_seconds`.
    let higher = m.ends_with("per_second")
        || m.ends_with("per_sec")
        || m.contains("games_per_s")
        || m.contains("/s_")
        || m.contains("win_rate")
        || m.contains("score_diff");
    if higher {
        return (Direction::HigherIsBetter, true);
    }
    let lower = m.ends_with("_seconds")
        || m.ends_with("_ms")
        || m.contains("ms_per_")
        || m.contains("us_per_")
        || m.starts_with("loss/");
    if lower {
        return (Direction::LowerIsBetter, true);
    }
    (Direction::LowerIsBetter, false)
}

/// Descriptive statistics of one series.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// `None` when only moments were available (SQL aggregates).
    pub median: Option<f64>,
    /// Sample standard deviation (n − 1); 0 when n < 2.
    pub sd: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summarises a series; `None` for an empty one. Non-finite values are
    /// ignored, since a NaN from a crashed iteration must not poison a mean.
    pub fn from_values(values: &[f64]) -> Option<Self> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Self {
            n,
            mean,
            median: Some(median),
            sd,
            min: v[0],
            max: v[n - 1],
        })
    }

    /// Builds a summary from moments computed elsewhere (e.g. SQL `COUNT`,
    /// `SUM`, `SUM(x*x)`), using the two-pass-free formula for the variance.
    pub fn from_moments(n: usize, sum: f64, sum_sq: f64, min: f64, max: f64) -> Option<Self> {
        if n == 0 {
            return None;
        }
        let mean = sum / n as f64;
        let var = if n > 1 {
            ((sum_sq - sum * mean) / (n - 1) as f64).max(0.0)
        } else {
            0.0
        };
        Some(Self {
            n,
            mean,
            median: None,
            sd: var.sqrt(),
            min,
            max,
        })
    }

    /// Standard error of the mean.
    pub fn sem(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.sd / (self.n as f64).sqrt()
        }
    }

    /// Coefficient of variation (sd / |mean|), `None` when the mean is 0.
    pub fn cv(&self) -> Option<f64> {
        (self.mean != 0.0).then(|| self.sd / self.mean.abs())
    }
}

/// The values that count as independent replicates of an arm: its iterations
/// when it ran once, the mean of each run when it ran several times. Runs with
/// no values are dropped.
pub fn replicates(runs: &[Vec<f64>]) -> Vec<f64> {
    let non_empty: Vec<&Vec<f64>> = runs.iter().filter(|r| !r.is_empty()).collect();
    match non_empty.as_slice() {
        [] => Vec::new(),
        [only] => only.to_vec(),
        many => many
            .iter()
            .filter_map(|r| Summary::from_values(r))
            .map(|s| s.mean)
            .collect(),
    }
}

/// Result of Welch's unequal-variance t-test.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Welch {
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// Welch's t-test of `a` against `b`; `None` when either has fewer than two
/// values (no variance estimate).
pub fn welch(a: &Summary, b: &Summary) -> Option<Welch> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    let va = a.sd.powi(2) / a.n as f64;
    let vb = b.sd.powi(2) / b.n as f64;
    let diff = a.mean - b.mean;
    let se2 = va + vb;
    if se2 <= 0.0 {
        // Both series are constant: the difference is exact.
        let p_value = if diff == 0.0 { 1.0 } else { 0.0 };
        let t = if diff == 0.0 {
            0.0
        } else {
            diff.signum() * f64::INFINITY
        };
        return Some(Welch {
            t,
            df: (a.n + b.n - 2) as f64,
            p_value,
        });
    }
    let t = diff / se2.sqrt();
    let df = se2.powi(2)
        / (va.powi(2) / (a.n - 1) as f64 + vb.powi(2) / (b.n - 1) as f64).max(f64::MIN_POSITIVE);
    let p_value = two_sided_p(t, df);
    Some(Welch { t, df, p_value })
}

fn two_sided_p(t: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * (1.0 - dist.cdf(t.abs()))).clamp(0.0, 1.0),
        Err(_) => f64::NAN,
    }
}

fn t_quantile(p: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => dist.inverse_cdf(p),
        // df not finite / positive: fall back to the normal quantile.
        Err(_) => 1.959_963_984_540_054,
    }
}

/// How many times better an arm is than the baseline, with a 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Speedup {
    /// > 1 means the arm is better, whichever the metric's direction.
    pub ratio: f64,
    /// Delta-method standard error of `ratio`.
    pub se: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

/// Speedup of `arm` over `baseline`: baseline mean / arm mean when lower is
/// better, the inverse otherwise. The interval is computed on the log ratio
/// (delta method, Welch–Satterthwaite degrees of freedom), so it stays
/// positive and is symmetric in "2× faster" vs "2× slower".
pub fn speedup(baseline: &Summary, arm: &Summary, direction: Direction) -> Option<Speedup> {
    if baseline.mean <= 0.0 || arm.mean <= 0.0 || !baseline.mean.is_finite() {
        return None;
    }
    let ratio = match direction {
        Direction::LowerIsBetter => baseline.mean / arm.mean,
        Direction::HigherIsBetter => arm.mean / baseline.mean,
    };
    // Squared relative standard errors of the two means.
    let rb = (baseline.sem() / baseline.mean).powi(2);
    let ra = (arm.sem() / arm.mean).powi(2);
    let rel2 = rb + ra;
    let se = ratio * rel2.sqrt();
    let (ci_low, ci_high) = if baseline.n < 2 || arm.n < 2 {
        (f64::NAN, f64::NAN)
    } else if rel2 <= 0.0 {
        (ratio, ratio)
    } else {
        let df = rel2.powi(2)
            / (rb.powi(2) / (baseline.n - 1) as f64 + ra.powi(2) / (arm.n - 1) as f64)
                .max(f64::MIN_POSITIVE);
        let half = t_quantile(0.975, df) * rel2.sqrt();
        (ratio * (-half).exp(), ratio * half.exp())
    };
    Some(Speedup {
        ratio,
        se,
        ci_low,
        ci_high,
    })
}

/// The decision rule's knobs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct VerdictRule {
    /// Significance level of the two-sided test.
    pub alpha: f64,
    /// Smallest relative change of the mean that counts (0.05 = 5%).
    pub min_effect: f64,
}

impl Default for VerdictRule {
    fn default() -> Self {
        Self {
            alpha: 0.05,
            min_effect: 0.05,
        }
    }
}

/// An arm's standing against the baseline on one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improved,
    Regressed,
    NoSignificantChange,
    /// Too few replicates (or no data) to test.
    Inconclusive,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Self::Improved => "improved",
            Self::Regressed => "regressed",
            Self::NoSignificantChange => "no significant change",
            Self::Inconclusive => "inconclusive",
        }
    }
}

/// Everything the report says about one arm vs the baseline on one metric.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Comparison {
    pub speedup: Option<Speedup>,
    pub welch: Option<Welch>,
    /// (arm mean − baseline mean) / baseline mean.
    pub relative_change: f64,
    pub verdict: Verdict,
}

/// Compares two summaries: significant (p < alpha) AND the mean moved by at
/// least `min_effect` of the baseline mean; the sign and the metric's
/// direction say whether that is an improvement.
pub fn compare(
    baseline: &Summary,
    arm: &Summary,
    direction: Direction,
    rule: VerdictRule,
) -> Comparison {
    let relative_change = if baseline.mean != 0.0 {
        (arm.mean - baseline.mean) / baseline.mean.abs()
    } else {
        f64::NAN
    };
    let welch = welch(arm, baseline);
    let verdict = match welch {
        None => Verdict::Inconclusive,
        Some(w) if w.p_value.is_nan() || relative_change.is_nan() => Verdict::Inconclusive,
        Some(w) => {
            if w.p_value < rule.alpha && relative_change.abs() >= rule.min_effect {
                let arm_is_bigger = relative_change > 0.0;
                match (direction, arm_is_bigger) {
                    (Direction::LowerIsBetter, false) | (Direction::HigherIsBetter, true) => {
                        Verdict::Improved
                    }
                    _ => Verdict::Regressed,
                }
            } else {
                Verdict::NoSignificantChange
            }
        }
    };
    Comparison {
        speedup: speedup(baseline, arm, direction),
        welch,
        relative_change,
        verdict,
    }
}

/// Convenience over raw series.
pub fn compare_values(
    baseline: &[f64],
    arm: &[f64],
    direction: Direction,
    rule: VerdictRule,
) -> Option<Comparison> {
    let b = Summary::from_values(baseline)?;
    let a = Summary::from_values(arm)?;
    Some(compare(&b, &a, direction, rule))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Normal draws by Box–Muller: the crate set has no rand_distr, and this
    /// is test-only.
    fn normal_series(rng: &mut ChaCha8Rng, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u1: f64 = rng.random::<f64>().max(1e-300);
                let u2: f64 = rng.random();
                mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
            })
            .collect()
    }

    #[test]
    fn summary_of_known_series() {
        let s = Summary::from_values(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!((s.mean - 5.0).abs() < 1e-12);
        assert_eq!(s.median, Some(4.5));
        // Sample sd: sqrt(32 / 7).
        assert!((s.sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        let odd = Summary::from_values(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(odd.median, Some(2.0));
        assert!(Summary::from_values(&[]).is_none());
        assert!(Summary::from_values(&[f64::NAN]).is_none());
    }

    #[test]
    fn moments_match_values() {
        let v = [1.5, 2.5, 2.0, 3.25, 0.75];
        let a = Summary::from_values(&v).unwrap();
        let sum: f64 = v.iter().sum();
        let sq: f64 = v.iter().map(|x| x * x).sum();
        let b = Summary::from_moments(5, sum, sq, 0.75, 3.25).unwrap();
        assert!((a.mean - b.mean).abs() < 1e-12);
        assert!((a.sd - b.sd).abs() < 1e-12);
        assert_eq!(b.median, None);
    }

    #[test]
    fn welch_matches_reference_value() {
        // Worked by hand: means 10.9 and 13.0, variances 0.55 and 0.875,
        // t = -2.1 / sqrt(0.285) = -3.934, df = 0.285² / 0.010681 = 7.604.
        let a = Summary::from_values(&[10.0, 11.0, 12.0, 11.0, 10.5]).unwrap();
        let b = Summary::from_values(&[12.0, 13.0, 14.5, 12.5, 13.0]).unwrap();
        let w = welch(&a, &b).unwrap();
        let se = (a.sd.powi(2) / 5.0 + b.sd.powi(2) / 5.0).sqrt();
        assert!((w.t - (a.mean - b.mean) / se).abs() < 1e-12);
        assert!((w.t + 3.934).abs() < 1e-3, "t = {}", w.t);
        assert!((w.df - 7.604).abs() < 1e-3, "df = {}", w.df);
        assert!(w.p_value < 0.02 && w.p_value > 0.001, "p = {}", w.p_value);
    }

    #[test]
    fn welch_needs_two_values_and_handles_constants() {
        let one = Summary::from_values(&[1.0]).unwrap();
        let two = Summary::from_values(&[1.0, 2.0]).unwrap();
        assert!(welch(&one, &two).is_none());
        let c1 = Summary::from_values(&[2.0, 2.0, 2.0]).unwrap();
        let c2 = Summary::from_values(&[1.0, 1.0, 1.0]).unwrap();
        assert_eq!(welch(&c1, &c1).unwrap().p_value, 1.0);
        assert_eq!(welch(&c1, &c2).unwrap().p_value, 0.0);
        let cmp = compare(&c1, &c2, Direction::LowerIsBetter, VerdictRule::default());
        assert_eq!(cmp.verdict, Verdict::Improved);
        assert_eq!(cmp.speedup.unwrap().ratio, 2.0);
    }

    #[test]
    fn speedup_direction_and_interval() {
        let base = Summary::from_values(&[2.0, 2.1, 1.9, 2.0]).unwrap();
        let fast = Summary::from_values(&[1.0, 1.05, 0.95, 1.0]).unwrap();
        let s = speedup(&base, &fast, Direction::LowerIsBetter).unwrap();
        assert!((s.ratio - 2.0).abs() < 1e-12);
        assert!(s.ci_low < 2.0 && s.ci_high > 2.0);
        assert!(s.se > 0.0);
        let h = speedup(&base, &fast, Direction::HigherIsBetter).unwrap();
        assert!((h.ratio - 0.5).abs() < 1e-12);
        assert!(speedup(
            &base,
            &Summary::from_values(&[0.0]).unwrap(),
            Direction::LowerIsBetter
        )
        .is_none());
    }

    #[test]
    fn direction_table() {
        use Direction::*;
        assert_eq!(
            direction_for("time/iteration_seconds"),
            (LowerIsBetter, true)
        );
        assert_eq!(
            direction_for("time/traversal_seconds"),
            (LowerIsBetter, true)
        );
        assert_eq!(
            direction_for("traversal/nodes_per_second"),
            (HigherIsBetter, true)
        );
        assert_eq!(direction_for("bench/us_per_call"), (LowerIsBetter, true));
        assert_eq!(direction_for("bench/us_per_state"), (LowerIsBetter, true));
        assert_eq!(direction_for("bench/ms_per_step"), (LowerIsBetter, true));
        assert_eq!(
            direction_for("eval/random/win_rate0"),
            (HigherIsBetter, true)
        );
        assert_eq!(
            direction_for("interleaved/avg_batch_size"),
            (LowerIsBetter, false)
        );
        assert_eq!(Direction::parse("higher"), Some(HigherIsBetter));
        assert_eq!(Direction::parse("sideways"), None);
    }

    #[test]
    fn replicates_are_iterations_or_repeat_means() {
        assert_eq!(replicates(&[vec![1.0, 2.0, 3.0]]), vec![1.0, 2.0, 3.0]);
        assert_eq!(
            replicates(&[vec![1.0, 3.0], vec![4.0, 6.0], vec![]]),
            vec![2.0, 5.0]
        );
        assert!(replicates(&[]).is_empty());
    }

    /// Fraction of A/A comparisons (same distribution, 3% CV, n = 8) called
    /// changed, over 500 seeds.
    fn aa_false_positive_rate(rule: VerdictRule) -> f64 {
        let mut changed = 0;
        for seed in 0..500u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let a = normal_series(&mut rng, 8, 1.0, 0.03);
            let b = normal_series(&mut rng, 8, 1.0, 0.03);
            let c = compare_values(&a, &b, Direction::LowerIsBetter, rule).unwrap();
            if matches!(c.verdict, Verdict::Improved | Verdict::Regressed) {
                changed += 1;
            }
        }
        changed as f64 / 500.0
    }

    #[test]
    fn aa_data_is_rarely_called_changed() {
        // Significance alone: the test's own false-positive rate (~alpha).
        let pure = aa_false_positive_rate(VerdictRule {
            alpha: 0.05,
            min_effect: 0.0,
        });
        assert!(
            pure < 0.10,
            "A/A false-positive rate without min effect: {pure}"
        );
        // The default rule adds the 5% minimum effect.
        let default = aa_false_positive_rate(VerdictRule::default());
        assert!(default <= pure, "{default} > {pure}");
        assert!(default < 0.10, "A/A false-positive rate: {default}");
        eprintln!("A/A false-positive rate: {pure} (alpha only), {default} (default rule)");
    }

    #[test]
    fn ten_percent_shift_is_detected() {
        let mut detected = 0;
        let mut wrong_way = 0;
        for seed in 0..200u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(10_000 + seed);
            let base = normal_series(&mut rng, 8, 1.0, 0.03);
            // The arm is 10% faster (lower time).
            let arm = normal_series(&mut rng, 8, 0.9, 0.027);
            let c = compare_values(
                &base,
                &arm,
                Direction::LowerIsBetter,
                VerdictRule::default(),
            )
            .unwrap();
            match c.verdict {
                Verdict::Improved => detected += 1,
                Verdict::Regressed => wrong_way += 1,
                _ => {}
            }
        }
        assert_eq!(wrong_way, 0);
        assert!(detected >= 190, "detected {detected}/200");
        // The same shift on a throughput metric reads as a regression.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let base = normal_series(&mut rng, 8, 100.0, 3.0);
        let arm = normal_series(&mut rng, 8, 90.0, 2.7);
        let c = compare_values(
            &base,
            &arm,
            Direction::HigherIsBetter,
            VerdictRule::default(),
        )
        .unwrap();
        assert_eq!(c.verdict, Verdict::Regressed);
        assert!(c.speedup.unwrap().ratio < 1.0);
    }

    #[test]
    fn interval_covers_true_ratio_about_95_percent() {
        let mut covered = 0;
        for seed in 0..400u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(50_000 + seed);
            let base = Summary::from_values(&normal_series(&mut rng, 8, 2.0, 0.06)).unwrap();
            let arm = Summary::from_values(&normal_series(&mut rng, 8, 1.0, 0.03)).unwrap();
            let s = speedup(&base, &arm, Direction::LowerIsBetter).unwrap();
            if s.ci_low <= 2.0 && 2.0 <= s.ci_high {
                covered += 1;
            }
        }
        // Nominal 95%; allow sampling slack either way.
        assert!((360..=396).contains(&covered), "covered {covered}/400");
    }

    #[test]
    fn small_shift_below_min_effect_is_no_change() {
        // Very precise data, 2% shift: significant but below the 5% floor.
        let base: Vec<f64> = (0..50).map(|i| 1.0 + (i % 5) as f64 * 1e-4).collect();
        let arm: Vec<f64> = base.iter().map(|x| x * 0.98).collect();
        let c = compare_values(
            &base,
            &arm,
            Direction::LowerIsBetter,
            VerdictRule::default(),
        )
        .unwrap();
        assert!(c.welch.unwrap().p_value < 0.001);
        assert_eq!(c.verdict, Verdict::NoSignificantChange);
    }
}
