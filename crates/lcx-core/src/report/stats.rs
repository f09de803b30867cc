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

/// Which way a metric improves: the metric vocabulary's type, named here
/// because every judgement below takes one.
pub use crate::metrics::Direction;

/// The direction of a metric from the vocabulary ([`crate::metrics`]), else
/// from its name (`command` arms), and whether it was recognised (an unknown metric is treated as lower-is-better and the report
/// says so).
pub fn direction_for(metric: &str) -> (Direction, bool) {
    match crate::metrics::lookup(metric).map(|i| i.better) {
        Some(d @ (Direction::Lower | Direction::Higher)) => return (d, true),
        // A count of work has no better side: the name decides, as for a
        // `command` arm's metric (reports show such metrics without judging
        // them; see `report::builder::is_descriptive`).
        Some(Direction::Neither) | None => {}
    }
    let m = metric.to_ascii_lowercase();
    // Throughput names first: `nodes_per_second` must not match `_seconds`.
    let higher = m.ends_with("per_second")
        || m.ends_with("per_sec")
        || m.contains("games_per_s")
        || m.contains("/s_")
        || m.contains("win_rate")
        || m.contains("score_diff");
    if higher {
        return (Direction::Higher, true);
    }
    let lower = m.ends_with("_seconds")
        || m.ends_with("_ms")
        || m.contains("ms_per_")
        || m.contains("us_per_")
        || m.starts_with("loss/");
    if lower {
        return (Direction::Lower, true);
    }
    (Direction::Lower, false)
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
        // Sorted, so that the sums run in one order whatever the input's.
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let (min, max) = (v[0], v[n - 1]);
        let (mean, sd) = crate::sample::mean_sd(&v)?;
        Some(Self {
            n,
            mean,
            median: crate::sample::median_in_place(&mut v),
            sd,
            min,
            max,
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

/// Result of a t-test with Welch–Satterthwaite degrees of freedom: on
/// the log ratio of the means in a [`Comparison`] (the interval's method),
/// on their difference from [`welch`].
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

/// The t-test of "no change" on a speedup's log ratio: t = ln(ratio) /
/// its standard error, on the interval's degrees of freedom. Positive t:
/// the arm is better.
fn log_ratio_test(s: &Speedup) -> Welch {
    if s.log_se <= 0.0 {
        // Both series constant: the ratio is exact.
        let changed = s.ratio != 1.0;
        return Welch {
            t: if changed {
                s.ratio.ln().signum() * f64::INFINITY
            } else {
                0.0
            },
            df: s.df,
            p_value: if changed { 0.0 } else { 1.0 },
        };
    }
    let t = s.ratio.ln() / s.log_se;
    Welch {
        t,
        df: s.df,
        p_value: two_sided_p(t, s.df),
    }
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
        Err(_) => statrs::distribution::Normal::standard().inverse_cdf(p),
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
    /// Standard error of the log ratio (the interval is built on it).
    #[serde(skip)]
    pub log_se: f64,
    /// Its Welch–Satterthwaite degrees of freedom (NaN without an interval).
    #[serde(skip)]
    pub df: f64,
}

/// Speedup of `arm` over `baseline`: baseline mean / arm mean when lower is
/// better, the inverse otherwise. The interval is computed on the log ratio
/// (delta method, Welch–Satterthwaite degrees of freedom), so it stays
/// positive and is symmetric in "2× faster" vs "2× slower".
pub fn speedup(baseline: &Summary, arm: &Summary, direction: Direction) -> Option<Speedup> {
    speedup_at(baseline, arm, direction, 0.05)
}

/// [`speedup`] with a `1 - alpha` interval.
pub fn speedup_at(
    baseline: &Summary,
    arm: &Summary,
    direction: Direction,
    alpha: f64,
) -> Option<Speedup> {
    if baseline.mean <= 0.0 || arm.mean <= 0.0 || !baseline.mean.is_finite() {
        return None;
    }
    let ratio = match direction {
        Direction::Lower | Direction::Neither => baseline.mean / arm.mean,
        Direction::Higher => arm.mean / baseline.mean,
    };
    // Squared relative standard errors of the two means.
    let rb = (baseline.sem() / baseline.mean).powi(2);
    let ra = (arm.sem() / arm.mean).powi(2);
    let rel2 = rb + ra;
    let se = ratio * rel2.sqrt();
    let (ci_low, ci_high, df) = if baseline.n < 2 || arm.n < 2 {
        (f64::NAN, f64::NAN, f64::NAN)
    } else if rel2 <= 0.0 {
        (ratio, ratio, (baseline.n + arm.n - 2) as f64)
    } else {
        let df = rel2.powi(2)
            / (rb.powi(2) / (baseline.n - 1) as f64 + ra.powi(2) / (arm.n - 1) as f64)
                .max(f64::MIN_POSITIVE);
        let half = t_quantile(1.0 - alpha / 2.0, df) * rel2.sqrt();
        (ratio * (-half).exp(), ratio * half.exp(), df)
    };
    Some(Speedup {
        ratio,
        se,
        ci_low,
        ci_high,
        log_se: rel2.sqrt(),
        df,
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

/// An arm's standing against the baseline on one metric (JSON: `improved`,
/// `regressed`, `equivalent`, `inconclusive`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The interval excludes no change and the speedup is beyond the
    /// minimum effect.
    Improved,
    Regressed,
    /// The whole interval lies within the minimum effect either way.
    Equivalent,
    /// Neither (or too few data to form an interval).
    Inconclusive,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Self::Improved => "improved",
            Self::Regressed => "regressed",
            Self::Equivalent => "equivalent",
            Self::Inconclusive => "inconclusive",
        }
    }
}

/// Everything the report says about one arm vs the baseline on one metric.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Comparison {
    /// With the rule's `1 - alpha` interval.
    pub speedup: Option<Speedup>,
    pub welch: Option<Welch>,
    /// (arm mean − baseline mean) / baseline mean.
    pub relative_change: f64,
    pub verdict: Verdict,
    /// For an inconclusive verdict with an interval: roughly how many more
    /// replicates per arm would narrow the interval enough to decide, at
    /// the spread and the speedup seen so far.
    pub more_replicates: Option<usize>,
    /// Judged on this many rounds as pairs ([`compare_paired`]); `None`:
    /// the arms' replicates as independent samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_rounds: Option<usize>,
    /// Rounds both arms completed that were left out of the pairs because
    /// contention fell unevenly on them.
    #[serde(skip_serializing_if = "is_zero")]
    pub uneven_rounds: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The band of speedups the minimum effect `m` counts as no change:
/// `1/(1+m)` to `1+m`, symmetric on the log scale (5 %: 0.952× to 1.05×).
pub fn equivalence_band(min_effect: f64) -> (f64, f64) {
    (1.0 / (1.0 + min_effect), 1.0 + min_effect)
}

/// The one-sided confidence at which an estimate must clear the minimum
/// effect to be called a change: its lower bound at this level (Student's
/// t on the interval's degrees of freedom) must lie beyond the band. At
/// 0.8 a true 3 % change under a 5 % minimum effect is rarely called a 5 %
/// one, and a true 10 % change still is (decision 0018).
pub const CLEAR_LEVEL: f64 = 0.8;

/// How far, in standard errors of the log ratio, an estimate must lie
/// beyond the minimum effect: the [`CLEAR_LEVEL`] quantile of Student's t.
fn clearance(s: &Speedup) -> f64 {
    t_quantile(CLEAR_LEVEL, s.df) * s.log_se
}

/// The four-way verdict on a speedup and its interval (see the README's
/// Statistics section). Improved / regressed need the interval to exclude
/// 1 (significance at `alpha`) *and* the estimate to clear the minimum
/// effect by [`CLEAR_LEVEL`]'s margin: its one-sided 80 % bound lies
/// beyond the band. Asking the whole 95 % interval to clear the band would
/// need far more replicates than a CI run has (at 3 repeats the interval
/// is often ±6 %); asking only the point estimate calls a 3 % change whose
/// estimate lands at 5.1 % a 5 % change. Equivalent needs the whole
/// interval inside the band.
pub fn verdict_of(speedup: Option<&Speedup>, min_effect: f64) -> Verdict {
    let Some(s) = speedup else {
        return Verdict::Inconclusive;
    };
    if !(s.ci_low.is_finite() && s.ci_high.is_finite() && s.ratio > 0.0 && s.ratio.is_finite()) {
        return Verdict::Inconclusive;
    }
    let (low, high) = equivalence_band(min_effect);
    let (center, margin) = (s.ratio.ln(), clearance(s));
    if s.ci_low > 1.0 && center - margin >= high.ln() {
        Verdict::Improved
    } else if s.ci_high < 1.0 && center + margin <= low.ln() {
        Verdict::Regressed
    } else if s.ci_low > low && s.ci_high < high {
        Verdict::Equivalent
    } else {
        Verdict::Inconclusive
    }
}

/// Replicates per arm that would likely decide: the interval's half-width
/// shrinks as 1/√n and has to fall below `distance`, how far its centre
/// lies from the bound it must clear (both on one scale). `None` when the
/// centre sits on the bound (no number of replicates decides).
pub fn replicates_to_reach(half: f64, distance: f64, replicates: usize) -> Option<usize> {
    let distance = distance.abs();
    if replicates == 0 || !(half > 0.0 && half.is_finite()) || distance <= half * 0.05 {
        return None;
    }
    let needed = (replicates as f64 * (half / distance).powi(2)).ceil();
    (needed < 1e6).then(|| (needed as usize).saturating_sub(replicates).max(1))
}

/// Replicates per arm that would likely decide an inconclusive speedup:
/// to show a change, the estimate must clear the band by its
/// [`CLEAR_LEVEL`] margin and the interval exclude 1; to show equivalence,
/// the interval must fit inside the band; whichever the estimate points to.
pub fn replicates_to_decide(s: &Speedup, min_effect: f64, replicates: usize) -> Option<usize> {
    if !(s.ci_low > 0.0 && s.ci_high.is_finite() && s.ratio > 0.0) {
        return None;
    }
    let half = (s.ci_high.ln() - s.ci_low.ln()) / 2.0;
    let center = s.ratio.ln().abs();
    let edge = (1.0 + min_effect).ln();
    if center < edge {
        return replicates_to_reach(half, edge - center, replicates);
    }
    // The change call needs both bounds: whichever needs more data.
    let clear = clearance(s);
    let by_clearance = (clear > 0.0)
        .then(|| replicates_to_reach(clear, center - edge, replicates))
        .flatten();
    let by_interval = replicates_to_reach(half, center, replicates);
    match (by_clearance, by_interval) {
        (Some(a), Some(b)) => Some(a.max(b)),
        // An estimate on the band's edge: no number of replicates decides.
        (None, _) if clear > 0.0 => None,
        (a, b) => a.or(b),
    }
}

/// Compares two summaries (see [`verdict_of`]); the sign and the metric's
/// direction are folded into the speedup, so > 1 is always better.
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
    let speedup = speedup_at(baseline, arm, direction, rule.alpha);
    // The p-value from the interval's own method (the log ratio, its
    // standard error and degrees of freedom), so that p < alpha exactly
    // when the interval excludes no change; Welch's test on the raw
    // difference only where there is no ratio (a mean ≤ 0).
    let welch = match &speedup {
        Some(s) if s.df.is_finite() => Some(log_ratio_test(s)),
        Some(_) => None,
        None => welch(arm, baseline),
    };
    let verdict = verdict_of(speedup.as_ref(), rule.min_effect);
    let more_replicates = match (verdict, &speedup) {
        (Verdict::Inconclusive, Some(s)) => {
            replicates_to_decide(s, rule.min_effect, baseline.n.min(arm.n))
        }
        _ => None,
    };
    Comparison {
        speedup,
        welch,
        relative_change,
        verdict,
        more_replicates,
        paired_rounds: None,
        uneven_rounds: 0,
    }
}

/// The speedup over rounds run as pairs: `pairs` holds (baseline, arm)
/// values, one per round both ran. Each round's log ratio is one
/// replicate, and the interval is the one-sample t interval of their mean
/// (n − 1 degrees of freedom): what the host did to a whole round cancels
/// in its ratio (decision 0030). `None` with fewer than two rounds or a
/// value ≤ 0 (no ratio).
pub fn paired_speedup(pairs: &[(f64, f64)], direction: Direction, alpha: f64) -> Option<Speedup> {
    if pairs.len() < 2 || pairs.iter().any(|&(b, a)| !(b > 0.0 && a > 0.0)) {
        return None;
    }
    let logs: Vec<f64> = pairs
        .iter()
        .map(|&(b, a)| match direction {
            Direction::Lower | Direction::Neither => (b / a).ln(),
            Direction::Higher => (a / b).ln(),
        })
        .collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0);
    // Rounding leaves a spread of ~1e-17 between equal ratios: below
    // 1e-12 of a log the rounds agree exactly.
    let log_se = if var.sqrt() < 1e-12 {
        0.0
    } else {
        (var / n).sqrt()
    };
    let df = n - 1.0;
    let half = if log_se > 0.0 {
        t_quantile(1.0 - alpha / 2.0, df) * log_se
    } else {
        0.0
    };
    let ratio = mean.exp();
    Some(Speedup {
        ratio,
        se: ratio * log_se,
        ci_low: (mean - half).exp(),
        ci_high: (mean + half).exp(),
        log_se,
        df,
    })
}

/// [`compare`] on rounds as pairs ([`paired_speedup`]): the verdict rule
/// is the same, on the paired interval.
pub fn compare_paired(pairs: &[(f64, f64)], direction: Direction, rule: VerdictRule) -> Comparison {
    let n = pairs.len().max(1) as f64;
    let (base, arm) = pairs
        .iter()
        .fold((0.0, 0.0), |(b, a), &(pb, pa)| (b + pb / n, a + pa / n));
    let relative_change = if base != 0.0 {
        (arm - base) / f64::abs(base)
    } else {
        f64::NAN
    };
    let speedup = paired_speedup(pairs, direction, rule.alpha);
    let verdict = verdict_of(speedup.as_ref(), rule.min_effect);
    let more_replicates = match (verdict, &speedup) {
        (Verdict::Inconclusive, Some(s)) => replicates_to_decide(s, rule.min_effect, pairs.len()),
        _ => None,
    };
    Comparison {
        speedup,
        welch: speedup
            .filter(|s| s.df.is_finite())
            .map(|s| log_ratio_test(&s)),
        relative_change,
        verdict,
        more_replicates,
        paired_rounds: Some(pairs.len()),
        uneven_rounds: 0,
    }
}

/// Whether a speedup's interval lies within ±`precision` of its estimate
/// on the log scale (adaptive repeats stop when all do).
pub fn within_precision(s: &Speedup, precision: f64) -> bool {
    let edge = (1.0 + precision).ln();
    s.ci_low > 0.0
        && s.ci_high.is_finite()
        && s.ratio > 0.0
        && (s.ci_high / s.ratio).ln() <= edge
        && (s.ratio / s.ci_low).ln() <= edge
}

/// How a gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Pass,
    Fail,
    /// Too few data to decide, or no data at all (an arm skipped or failed).
    Inconclusive,
}

impl Decision {
    pub fn word(self) -> &'static str {
        match self {
            Decision::Pass => "PASS",
            Decision::Fail => "FAIL",
            Decision::Inconclusive => "INCONCLUSIVE",
        }
    }

    /// `lcx report --check`'s exit code: 0, 1, 3.
    pub fn exit_code(self) -> u8 {
        match self {
            Decision::Pass => 0,
            Decision::Fail => 1,
            Decision::Inconclusive => 3,
        }
    }

    /// The worst of several: any FAIL fails, else any INCONCLUSIVE.
    pub fn combine(decisions: impl IntoIterator<Item = Decision>) -> Decision {
        let mut out = Decision::Pass;
        for d in decisions {
            match d {
                Decision::Fail => return Decision::Fail,
                Decision::Inconclusive => out = Decision::Inconclusive,
                Decision::Pass => {}
            }
        }
        out
    }
}

/// The one rule of gates and guards: a quantity must be shown to reach
/// `bound` (> 1 is better for a speedup, > 0 for a gain). PASS when the
/// whole `1 - alpha` interval `[low, high]` lies at or above it (shown to
/// reach it, one-sided α/2), FAIL when it lies below (shown short of it),
/// INCONCLUSIVE when it holds the bound or there is no interval: "not
/// shown short" is not "shown to reach". Superiority (`min_speedup > 1`),
/// non-inferiority (`max_slowdown`, `min_speedup ≤ 1`) and guards differ
/// only in the bound.
pub fn against_bound(low: f64, high: f64, bound: f64) -> Decision {
    if !(low.is_finite() && high.is_finite()) {
        Decision::Inconclusive
    } else if low >= bound {
        Decision::Pass
    } else if high < bound {
        Decision::Fail
    } else {
        Decision::Inconclusive
    }
}

/// A gate's hypothesis test on a speedup (> 1 is better).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum GateTest {
    /// `min_speedup > 1`: the arm must be shown faster by at least it.
    Superiority { min_speedup: f64 },
    /// `min_speedup ≤ 1` or `max_slowdown`: the arm must be shown no
    /// slower than the margin.
    NonInferiority { margin: f64 },
}

impl GateTest {
    /// From the gate's `min_speedup` (a file's `max_slowdown = x` is stored
    /// as `min_speedup = 1/(1+x)`).
    pub fn from_min_speedup(min_speedup: f64) -> GateTest {
        if min_speedup > 1.0 {
            GateTest::Superiority { min_speedup }
        } else {
            GateTest::NonInferiority {
                margin: min_speedup,
            }
        }
    }

    /// The threshold the speedup is compared with.
    pub fn threshold(self) -> f64 {
        match self {
            GateTest::Superiority { min_speedup } => min_speedup,
            GateTest::NonInferiority { margin } => margin,
        }
    }

    /// The rule in one line, with its error rate.
    pub fn describe(self, alpha: f64) -> String {
        let one_sided = trim(alpha / 2.0);
        let level = trim(100.0 * (1.0 - alpha));
        let (kind, t, shown) = match self {
            GateTest::Superiority { min_speedup } => (
                "superiority",
                format!("{min_speedup:.2}×"),
                "shown faster by at least it",
            ),
            GateTest::NonInferiority { margin } => (
                "non-inferiority",
                format!("{margin:.3}×"),
                "shown no slower than the margin",
            ),
        };
        format!(
            "{kind}: PASS when the {level} % interval's lower end is at least {t} (the arm \
             {shown}, one-sided α = {one_sided}), FAIL when its upper end is below {t}, \
             INCONCLUSIVE in between"
        )
    }

    /// The decision on `speedup` (`None` or no interval: INCONCLUSIVE), by
    /// [`against_bound`]; `replicates` (per arm, the fewer of the two) lets
    /// an inconclusive decision say how many more would likely decide.
    pub fn decide(
        self,
        speedup: Option<&Speedup>,
        replicates: usize,
    ) -> (Decision, Option<String>) {
        let Some(s) = speedup else {
            return (Decision::Inconclusive, Some("no speedup to judge".into()));
        };
        if !(s.ci_low.is_finite() && s.ci_high.is_finite()) {
            return (
                Decision::Inconclusive,
                Some("one replicate: no interval".into()),
            );
        }
        let t = self.threshold();
        let (low, high) = (s.ci_low, s.ci_high);
        // A margin near 1 (0.971×) needs the third digit; a speedup does not.
        let p = match self {
            GateTest::Superiority { .. } => 2,
            GateTest::NonInferiority { .. } => 3,
        };
        match against_bound(low, high, t) {
            Decision::Pass => (Decision::Pass, None),
            Decision::Fail => (
                Decision::Fail,
                Some(format!("interval {low:.p$}–{high:.p$}× below {t:.p$}×")),
            ),
            Decision::Inconclusive => {
                let half = (high.ln() - low.ln()) / 2.0;
                let distance = s.ratio.ln() - t.ln();
                // A bound of 1× (no margin) is where an arm as fast as its
                // baseline sits: an estimate within a standard error of it is
                // that arm as likely as any, and no number of replicates is
                // sure to move the interval off the bound. (With a margin,
                // equal arms lie the margin away, and the projection holds.)
                let more = if t == 1.0 && distance.abs() <= s.log_se {
                    "; the estimate sits within a standard error of a bound with no margin, \
                     where more replicates narrow the interval without deciding"
                        .to_string()
                } else {
                    replicates_to_reach(half, distance, replicates)
                        .map(|k| format!("; about {k} more replicates per arm would likely decide"))
                        .unwrap_or_default()
                };
                (
                    Decision::Inconclusive,
                    Some(format!(
                        "interval {low:.p$}–{high:.p$}× holds {t:.p$}×: neither shown to reach \
                         it nor shown short of it{more}"
                    )),
                )
            }
        }
    }
}

/// A guard's judgement of one arm: how much better (> 0) or worse (< 0)
/// than the baseline the arm is on the guarded metric, with its interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GuardTest {
    /// Arm minus baseline, sign flipped for lower-is-better: > 0 is better.
    pub gain: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub decision: Decision,
}

/// Non-inferiority on a difference: PASS when the whole `1 - alpha`
/// interval of the gain lies above `-margin` (the arm shown no worse than
/// allowed, one-sided α/2), FAIL when it lies below (shown worse),
/// INCONCLUSIVE when it straddles `-margin` or there is no interval. An
/// interval too wide to decide is not a pass: "not shown worse" is not
/// "shown not worse".
pub fn guard_test(
    baseline: &Summary,
    arm: &Summary,
    direction: Direction,
    margin: f64,
    alpha: f64,
) -> GuardTest {
    let gain = direction.gain(arm.mean, baseline.mean);
    if arm.n < 2 || baseline.n < 2 {
        return GuardTest {
            gain,
            ci_low: f64::NAN,
            ci_high: f64::NAN,
            decision: Decision::Inconclusive,
        };
    }
    let (va, vb) = (
        arm.sd.powi(2) / arm.n as f64,
        baseline.sd.powi(2) / baseline.n as f64,
    );
    let se = (va + vb).sqrt();
    let df = if se > 0.0 {
        (va + vb).powi(2)
            / (va.powi(2) / (arm.n - 1) as f64 + vb.powi(2) / (baseline.n - 1) as f64)
                .max(f64::MIN_POSITIVE)
    } else {
        (arm.n + baseline.n - 2) as f64
    };
    let half = t_quantile(1.0 - alpha / 2.0, df) * se;
    judged(gain, half, margin)
}

/// [`guard_test`] on paired cells: `cells` holds (arm, baseline) values,
/// one pair per repeat that ran in both arms from one seed. The interval
/// is the one-sample t interval of the mean gain (n − 1 degrees of
/// freedom): what the seeds share cancels in each difference. Cells that
/// agree value for value give a zero-width interval at zero, which passes
/// any margin.
pub fn paired_guard_test(
    cells: &[(f64, f64)],
    direction: Direction,
    margin: f64,
    alpha: f64,
) -> GuardTest {
    let gains: Vec<f64> = cells.iter().map(|&(a, b)| direction.gain(a, b)).collect();
    let n = gains.len();
    let gain = gains.iter().sum::<f64>() / n.max(1) as f64;
    if n < 2 {
        return GuardTest {
            gain: if n == 0 { f64::NAN } else { gain },
            ci_low: f64::NAN,
            ci_high: f64::NAN,
            decision: Decision::Inconclusive,
        };
    }
    let var = gains.iter().map(|g| (g - gain).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_quantile(1.0 - alpha / 2.0, (n - 1) as f64) * (var / n as f64).sqrt();
    judged(gain, half, margin)
}

/// The non-inferiority decision on `gain ± half` against `-margin`.
fn judged(gain: f64, half: f64, margin: f64) -> GuardTest {
    // `+ 0.0` turns a -0 (from means that are themselves -0) into 0, so
    // no gain of nothing prints as a loss.
    let gain = gain + 0.0;
    let (ci_low, ci_high) = (gain - half, gain + half);
    GuardTest {
        gain,
        ci_low,
        ci_high,
        decision: against_bound(ci_low, ci_high, -margin),
    }
}

fn trim(x: f64) -> String {
    let t = format!("{x:.4}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The modified z-score beyond which one of `n` values is named an
/// outlier: the normal quantile that `n` Gaussian values all stay within
/// with probability 0.9875 (Bonferroni), widened by `1 + 7.5/n` for the
/// noise of a median and MAD taken from few values, and never below
/// hyperfine's 3.5. Plain Gaussian cells of 8 to 200 iterations get a
/// note 2–3 % of the time (400 seeds each, tests below; 3.5 alone noted
/// 9–13 % in a simulation of the same cells).
pub fn outlier_threshold(n: usize) -> f64 {
    let n = n.max(1) as f64;
    let z = statrs::distribution::Normal::standard().inverse_cdf(1.0 - 0.0125 / n);
    (z * (1.0 + 7.5 / n)).max(3.5)
}

/// Positions of outliers by the modified z-score on the median absolute
/// deviation (Iglewicz and Hoaglin, as hyperfine flags them): values whose
/// `0.6745 (x - median) / MAD` exceeds [`outlier_threshold`] in magnitude.
/// Nothing is flagged in fewer than 8 values or when the MAD is 0.
pub fn outliers(values: &[f64]) -> Vec<(usize, f64)> {
    if values.len() < 8 {
        return Vec::new();
    }
    let median_of = |mut v: Vec<f64>| crate::sample::median_in_place(&mut v);
    let Some(median) = median_of(values.to_vec()) else {
        return Vec::new();
    };
    let Some(mad) = median_of(values.iter().map(|x| (x - median).abs()).collect()) else {
        return Vec::new();
    };
    if mad <= 0.0 || !mad.is_finite() {
        return Vec::new();
    }
    let bound = outlier_threshold(values.len());
    values
        .iter()
        .enumerate()
        .map(|(i, x)| (i, 0.6745 * (x - median) / mad))
        .filter(|(_, z)| z.abs() > bound)
        .collect()
}

/// A linear trend in a series: the least-squares slope relative to the
/// mean (per value) and its two-sided p-value; `None` below 5 values or
/// without spread.
pub fn trend(values: &[f64]) -> Option<(f64, f64)> {
    let n = values.len();
    if n < 5 {
        return None;
    }
    let nf = n as f64;
    let mean_x = (nf - 1.0) / 2.0;
    let mean_y = values.iter().sum::<f64>() / nf;
    let sxx: f64 = (0..n).map(|i| (i as f64 - mean_x).powi(2)).sum();
    let sxy: f64 = values
        .iter()
        .enumerate()
        .map(|(i, y)| (i as f64 - mean_x) * (y - mean_y))
        .sum();
    let slope = sxy / sxx;
    let residual: f64 = values
        .iter()
        .enumerate()
        .map(|(i, y)| (y - mean_y - slope * (i as f64 - mean_x)).powi(2))
        .sum();
    let se = (residual / (nf - 2.0) / sxx).sqrt();
    if mean_y == 0.0 || !se.is_finite() {
        return None;
    }
    let p = if se > 0.0 {
        two_sided_p(slope / se, nf - 2.0)
    } else if slope == 0.0 {
        1.0
    } else {
        0.0
    };
    Some((slope / mean_y.abs(), p))
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
    /// Issue 78, point 6: the p-value and the interval come from one
    /// method, so p < 0.05 exactly when the 95 % interval excludes 1×, on
    /// every shape of data (here 2,000 pseudo-random pairs of series).
    #[test]
    fn p_is_below_alpha_exactly_when_the_interval_excludes_no_change() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let rule = VerdictRule::default();
        let mut both = [0usize; 2];
        for _ in 0..2000 {
            let n = |u: f64| 2 + (u * 8.0) as usize;
            let series = |n: usize, mean: f64, sd: f64, next: &mut dyn FnMut() -> f64| {
                let v: Vec<f64> = (0..n).map(|_| mean + sd * (next() - 0.5)).collect();
                Summary::from_values(&v).unwrap()
            };
            let (na, nb) = (n(next()), n(next()));
            let b = series(nb, 10.0, 4.0 * next(), &mut next);
            let a = series(na, 10.0 * (0.7 + 0.6 * next()), 4.0 * next(), &mut next);
            for direction in [Direction::Lower, Direction::Higher] {
                let c = compare(&b, &a, direction, rule);
                let (Some(s), Some(w)) = (c.speedup, c.welch) else {
                    panic!("no test for {b:?} {a:?}");
                };
                let excludes = s.ci_low > 1.0 || s.ci_high < 1.0;
                let significant = w.p_value < rule.alpha;
                assert_eq!(
                    excludes, significant,
                    "p = {} with CI {}–{} ({b:?} vs {a:?})",
                    w.p_value, s.ci_low, s.ci_high
                );
                both[usize::from(excludes)] += 1;
            }
        }
        // Both outcomes were tried.
        assert!(both[0] > 100 && both[1] > 100, "{both:?}");
    }

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
        let cmp = compare(&c1, &c2, Direction::Lower, VerdictRule::default());
        assert_eq!(cmp.verdict, Verdict::Improved);
        assert_eq!(cmp.speedup.unwrap().ratio, 2.0);
    }

    #[test]
    fn speedup_direction_and_interval() {
        let base = Summary::from_values(&[2.0, 2.1, 1.9, 2.0]).unwrap();
        let fast = Summary::from_values(&[1.0, 1.05, 0.95, 1.0]).unwrap();
        let s = speedup(&base, &fast, Direction::Lower).unwrap();
        assert!((s.ratio - 2.0).abs() < 1e-12);
        assert!(s.ci_low < 2.0 && s.ci_high > 2.0);
        assert!(s.se > 0.0);
        let h = speedup(&base, &fast, Direction::Higher).unwrap();
        assert!((h.ratio - 0.5).abs() < 1e-12);
        assert!(speedup(
            &base,
            &Summary::from_values(&[0.0]).unwrap(),
            Direction::Lower
        )
        .is_none());
    }

    #[test]
    fn direction_table() {
        use Direction::*;
        assert_eq!(direction_for("time/iteration_seconds"), (Lower, true));
        assert_eq!(direction_for("time/traversal_seconds"), (Lower, true));
        assert_eq!(direction_for("traversal/nodes_per_second"), (Higher, true));
        assert_eq!(direction_for("bench/us_per_call"), (Lower, true));
        assert_eq!(direction_for("bench/us_per_state"), (Lower, true));
        assert_eq!(direction_for("bench/ms_per_step"), (Lower, true));
        assert_eq!(direction_for("eval/random/win_rate0"), (Higher, true));
        // The vocabulary decides for lcx's own names…
        assert_eq!(direction_for("interleaved/forward_seconds"), (Lower, true));
        // …a count of work has no better side, and a command arm's name
        // without a telling suffix is unknown.
        assert_eq!(direction_for("traversal/nodes"), (Lower, false));
        assert_eq!(direction_for("mine/batch"), (Lower, false));
        assert_eq!(Direction::parse("higher"), Some(Higher));
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
            let c = compare_values(&a, &b, Direction::Lower, rule).unwrap();
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
            let c = compare_values(&base, &arm, Direction::Lower, VerdictRule::default()).unwrap();
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
        let c = compare_values(&base, &arm, Direction::Higher, VerdictRule::default()).unwrap();
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
            let s = speedup(&base, &arm, Direction::Lower).unwrap();
            if s.ci_low <= 2.0 && 2.0 <= s.ci_high {
                covered += 1;
            }
        }
        // Nominal 95%; allow sampling slack either way.
        assert!((360..=396).contains(&covered), "covered {covered}/400");
    }

    #[test]
    fn small_shift_below_min_effect_is_equivalent() {
        // Very precise data, 2% shift: significant but below the 5% floor.
        let base: Vec<f64> = (0..50).map(|i| 1.0 + (i % 5) as f64 * 1e-4).collect();
        let arm: Vec<f64> = base.iter().map(|x| x * 0.98).collect();
        let c = compare_values(&base, &arm, Direction::Lower, VerdictRule::default()).unwrap();
        assert!(c.welch.unwrap().p_value < 0.001);
        assert_eq!(c.verdict, Verdict::Equivalent);
    }

    /// One arm of a synthetic experiment: `repeats` processes of `n`
    /// iterations each, times around `mean` with a per-process offset of
    /// `process_cv` and iteration noise of `iteration_cv`; returns the
    /// replicates the report tests (the repeat means).
    fn arm_replicates(
        rng: &mut ChaCha8Rng,
        mean: f64,
        repeats: usize,
        n: usize,
        process_cv: f64,
        iteration_cv: f64,
    ) -> Summary {
        let runs: Vec<Vec<f64>> = (0..repeats)
            .map(|_| {
                let offset = normal_series(rng, 1, 1.0, process_cv)[0];
                normal_series(rng, n, mean * offset, mean * offset * iteration_cv)
            })
            .collect();
        Summary::from_values(&replicates(&runs)).unwrap()
    }

    /// Verdict counts over `seeds` experiments of 3 repeats × 10 iterations
    /// per arm (1 % per-process spread, 4 % per-iteration noise: repeat
    /// means vary by about 1.6 %, the interval of the speedup is about
    /// ±5 %), the arm's true time `ratio` × the baseline's.
    fn verdicts(seeds: u64, ratio: f64, rule: VerdictRule) -> [usize; 4] {
        verdict_counts(50_000, seeds, ratio, rule, (3, 10, 0.01, 0.04))
    }

    /// Verdict counts over `seeds` experiments seeded from `first`:
    /// `repeats` × `n` iterations per arm, `process` spread between
    /// processes and `sd` between iterations.
    fn verdict_counts(
        first: u64,
        seeds: u64,
        ratio: f64,
        rule: VerdictRule,
        (repeats, n, process, sd): (usize, usize, f64, f64),
    ) -> [usize; 4] {
        let mut out = [0; 4];
        for seed in 0..seeds {
            let mut rng = ChaCha8Rng::seed_from_u64(first + seed);
            let base = arm_replicates(&mut rng, 1.0, repeats, n, process, sd);
            let arm = arm_replicates(&mut rng, ratio, repeats, n, process, sd);
            let c = compare(&base, &arm, Direction::Lower, rule);
            out[match c.verdict {
                Verdict::Improved => 0,
                Verdict::Regressed => 1,
                Verdict::Equivalent => 2,
                Verdict::Inconclusive => 3,
            }] += 1;
        }
        out
    }

    #[test]
    fn aa_verdicts_are_equivalent_or_inconclusive_in_at_least_99_percent_of_400_seeds() {
        let [improved, regressed, equivalent, inconclusive] =
            verdicts(400, 1.0, VerdictRule::default());
        eprintln!(
            "A/A over 400 seeds: improved {improved}, regressed {regressed}, equivalent \
             {equivalent}, inconclusive {inconclusive}"
        );
        assert!(
            improved + regressed <= 4,
            "A/A called changed {} of 400 times",
            improved + regressed
        );
        assert!(
            equivalent > inconclusive,
            "A/A should mostly read equivalent"
        );
    }

    #[test]
    fn a_10_percent_slowdown_at_3_repeats_is_regressed_in_at_least_95_percent_of_400_seeds() {
        let [improved, regressed, ..] = verdicts(400, 1.10, VerdictRule::default());
        eprintln!("10 % slower over 400 seeds: regressed {regressed}");
        assert_eq!(improved, 0);
        assert!(regressed >= 380, "regressed {regressed} of 400");
    }

    /// Verdict counts when every iteration varies by `sd` (no spread of
    /// its own between processes): the setting, 10 iterations ×
    /// 3 repeats at 5 %.
    fn verdicts_at(seeds: u64, ratio: f64, repeats: usize, n: usize, sd: f64) -> [usize; 4] {
        verdict_counts(
            55_000,
            seeds,
            ratio,
            VerdictRule::default(),
            (repeats, n, 0.0, sd),
        )
    }

    #[test]
    fn a_3_percent_change_under_a_5_percent_minimum_effect_is_regressed_at_most_2_percent() {
        // Below the minimum effect: an estimate that lands just past 5 %
        // is not enough, it must clear 5 % by its one-sided 80 % margin.
        for (label, [_, regressed, equivalent, inconclusive]) in [
            (
                "1 % between processes, 4 % iterations",
                verdicts(400, 1.03, VerdictRule::default()),
            ),
            ("5 % iterations", verdicts_at(400, 1.03, 3, 10, 0.05)),
        ] {
            eprintln!(
                "3 % slower, {label}, 400 seeds: regressed {regressed}, equivalent \
                 {equivalent}, inconclusive {inconclusive}"
            );
            assert!(
                regressed <= 8,
                "{label}: a 3 % change was called regressed {regressed} of 400 times (> 2 %)"
            );
        }
        // And a true 10 % slowdown in the same setting still is.
        let [improved, regressed, ..] = verdicts_at(400, 1.10, 3, 10, 0.05);
        eprintln!("10 % slower, 5 % iterations, 400 seeds: regressed {regressed}");
        assert_eq!(improved, 0);
        assert!(
            regressed >= 380,
            "a 10 % slowdown regressed {regressed} of 400 (< 95 %)"
        );
    }

    /// Gate decisions over `seeds` experiments: `repeats` × `n` iterations
    /// per arm, iteration noise `sd` (and 1 % between processes when
    /// `process`), the arm's true time `ratio` × the baseline's.
    fn gate_decisions_at(
        seeds: u64,
        ratio: f64,
        test: GateTest,
        (repeats, n, sd, process): (usize, usize, f64, f64),
    ) -> [usize; 3] {
        let mut out = [0; 3];
        for seed in 0..seeds {
            let mut rng = ChaCha8Rng::seed_from_u64(90_000 + seed);
            let base = arm_replicates(&mut rng, 1.0, repeats, n, process, sd);
            let arm = arm_replicates(&mut rng, ratio, repeats, n, process, sd);
            let c = compare(&base, &arm, Direction::Lower, VerdictRule::default());
            out[match test.decide(c.speedup.as_ref(), repeats).0 {
                Decision::Pass => 0,
                Decision::Fail => 1,
                Decision::Inconclusive => 2,
            }] += 1;
        }
        out
    }

    fn gate_decisions(seeds: u64, ratio: f64, test: GateTest) -> [usize; 3] {
        gate_decisions_at(seeds, ratio, test, (3, 10, 0.04, 0.01))
    }

    #[test]
    fn max_slowdown_passes_only_when_the_data_show_the_arm_within_the_margin() {
        let margin = GateTest::from_min_speedup(1.0 / 1.05);
        // A/A with enough data: 10 iterations × 5 repeats, 5 % noise.
        let [pass, fail, inconclusive] = gate_decisions_at(400, 1.0, margin, (5, 10, 0.05, 0.0));
        eprintln!(
            "A/A, max_slowdown = 0.05, 5 × 10 at 5 %, 400 seeds: pass {pass}, fail {fail}, \
             inconclusive {inconclusive}"
        );
        assert!(pass >= 380, "A/A passed {pass} of 400 (< 95 %)");
        assert_eq!(fail, 0);
        // A true 10 % slowdown, 15 % noise, 3 repeats: never shown within
        // 5 %; either shown beyond it or undecided.
        let [pass, fail, inconclusive] = gate_decisions_at(400, 1.10, margin, (3, 10, 0.15, 0.0));
        eprintln!(
            "10 % slower, max_slowdown = 0.05, 3 × 10 at 15 %, 400 seeds: pass {pass}, fail \
             {fail}, inconclusive {inconclusive}"
        );
        assert!(pass <= 20, "a 10 % slowdown passed {pass} of 400 (> 5 %)");
        // The same rule as superiority: an arm exactly at the margin passes
        // about the one-sided α (10 of 400), with room for sampling noise.
        let [pass, ..] = gate_decisions_at(400, 1.05, margin, (5, 10, 0.05, 0.0));
        eprintln!("at the margin (5 % slower): passed {pass} of 400");
        assert!(pass <= 16, "an arm at the margin passed {pass} of 400");
    }

    #[test]
    fn aa_passes_a_superiority_gate_at_most_at_its_one_sided_alpha_over_400_seeds() {
        let test = GateTest::from_min_speedup(1.02);
        let [pass, ..] = gate_decisions(400, 1.0, test);
        eprintln!("A/A vs a 1.02× superiority gate: passed {pass} of 400");
        assert!(
            pass <= 10,
            "A/A passed a 1.02× superiority gate {pass} of 400 times"
        );
        // A true 1.25× speedup passes it.
        let [pass, ..] = gate_decisions(400, 0.8, test);
        eprintln!("1.25× vs a 1.02× superiority gate: passed {pass} of 400");
        assert!(pass >= 380, "1.25× passed {pass} of 400");
    }

    #[test]
    fn gate_decisions_on_missing_intervals_are_inconclusive() {
        let test = GateTest::from_min_speedup(1.5);
        assert_eq!(test.decide(None, 0).0, Decision::Inconclusive);
        let no_interval = Speedup {
            ratio: 2.0,
            se: f64::NAN,
            ci_low: f64::NAN,
            ci_high: f64::NAN,
            log_se: f64::NAN,
            df: f64::NAN,
        };
        assert_eq!(test.decide(Some(&no_interval), 1).0, Decision::Inconclusive);
        assert_eq!(
            Decision::combine([Decision::Pass, Decision::Inconclusive]),
            Decision::Inconclusive
        );
        assert_eq!(
            Decision::combine([Decision::Inconclusive, Decision::Fail]),
            Decision::Fail
        );
        assert_eq!(Decision::combine([]), Decision::Pass);
        assert_eq!(
            [Decision::Pass, Decision::Fail, Decision::Inconclusive].map(Decision::exit_code),
            [0, 1, 3]
        );
    }

    #[test]
    fn a_zero_margin_gate_promises_no_decision_for_an_arm_at_its_bound() {
        // An arm as fast as its baseline under `min_speedup = 1.0`: the
        // estimate lands within a standard error of the bound.
        let at_bound = |ratio: f64| Speedup {
            ratio,
            se: 0.02,
            ci_low: ratio / 1.08,
            ci_high: ratio * 1.08,
            log_se: 0.02,
            df: 4.0,
        };
        let test = GateTest::from_min_speedup(1.0);
        let (decision, why) = test.decide(Some(&at_bound(1.006)), 5);
        assert_eq!(decision, Decision::Inconclusive);
        let why = why.unwrap();
        assert!(
            why.contains("within a standard error of a bound with no margin")
                && !why.contains("would likely"),
            "{why}"
        );
        // Two standard errors off, the estimate still says how many.
        let (_, why) = test.decide(Some(&at_bound(1.04)), 5);
        assert!(why
            .unwrap()
            .contains("more replicates per arm would likely decide"));
    }

    #[test]
    fn inconclusive_verdicts_say_how_many_replicates_would_decide() {
        // A 2 % difference with a ±6 % interval on 3 replicates: equivalence
        // needs the half-width under 3 %, so about four times the data.
        let s = Speedup {
            ratio: 1.02,
            se: 0.03,
            ci_low: 1.02 / 1.06,
            ci_high: 1.02 * 1.06,
            log_se: 0.06f64.ln_1p() / 4.3,
            df: 2.0,
        };
        assert_eq!(verdict_of(Some(&s), 0.05), Verdict::Inconclusive);
        let more = replicates_to_decide(&s, 0.05, 3).unwrap();
        assert!((8..=14).contains(&more), "{more}");
    }

    #[test]
    fn outliers_by_the_modified_z_score() {
        let mut v = vec![1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99];
        assert!(outliers(&v).is_empty());
        v.push(1.5);
        let o = outliers(&v);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].0, 8);
        assert!(o[0].1 > outlier_threshold(9));
        assert!(
            outliers(&[1.0; 9].iter().chain(&[9.0]).copied().collect::<Vec<_>>()).is_empty(),
            "MAD 0"
        );
        assert!(
            outliers(&[1.0, 1.01, 0.99, 1.02, 9.0]).is_empty(),
            "fewer than 8 values"
        );
    }

    #[test]
    fn outlier_notes_are_rare_on_gaussian_cells_and_catch_a_planted_5x_iteration() {
        for n in [8, 10, 14, 20, 50, 200] {
            let (mut noted, mut caught) = (0, 0);
            for seed in 0..400u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(230_000 + seed);
                let mut cell = normal_series(&mut rng, n, 1.0, 0.05);
                if !outliers(&cell).is_empty() {
                    noted += 1;
                }
                let at = seed as usize % n;
                cell[at] *= 5.0;
                if outliers(&cell).iter().any(|(i, _)| *i == at) {
                    caught += 1;
                }
            }
            eprintln!(
                "n = {n}: outlier note on {noted} of 400 Gaussian cells; planted 5× caught in \
                 {caught} of 400"
            );
            assert!(
                noted <= 20,
                "n = {n}: {noted} of 400 Gaussian cells noted (> 5 %)"
            );
            assert_eq!(caught, 400, "n = {n}: a 5× iteration missed");
        }
    }

    #[test]
    fn trend_of_a_rising_and_a_flat_series() {
        let rising: Vec<f64> = (0..20).map(|i| 1.0 + 0.01 * i as f64).collect();
        let (slope, p) = trend(&rising).unwrap();
        assert!((slope - 0.01 / 1.095).abs() < 1e-9, "{slope}");
        assert_eq!(p, 0.0);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let flat = normal_series(&mut rng, 30, 1.0, 0.05);
        let (_, p) = trend(&flat).unwrap();
        assert!(p > 0.01, "{p}");
        assert!(trend(&[1.0, 2.0]).is_none());
    }

    #[test]
    fn guards_pass_only_shown_not_worse_and_fail_only_shown_worse_over_400_seeds() {
        // [pass, fail, inconclusive] over 400 seeds of `repeats` replicates.
        let run = |shift: f64, repeats: usize| {
            let mut out = [0; 3];
            for seed in 0..400u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(120_000 + seed);
                // A win rate of 0.80 measured with ±0.02 noise.
                let base =
                    Summary::from_values(&normal_series(&mut rng, repeats, 0.80, 0.02)).unwrap();
                let arm =
                    Summary::from_values(&normal_series(&mut rng, repeats, 0.80 + shift, 0.02))
                        .unwrap();
                let g = guard_test(&base, &arm, Direction::Higher, 0.05, 0.05);
                out[match g.decision {
                    Decision::Pass => 0,
                    Decision::Fail => 1,
                    Decision::Inconclusive => 2,
                }] += 1;
            }
            out
        };
        let aa = run(0.0, 3);
        let aa5 = run(0.0, 5);
        let at_margin = run(-0.05, 5);
        let worse = run(-0.15, 3);
        eprintln!(
            "guard, margin 0.05, [pass, fail, inconclusive] of 400: A/A {aa:?} (3 repeats), \
             {aa5:?} (5); at the margin {at_margin:?} (5); 0.15 worse {worse:?} (3)"
        );
        assert!(aa[1] <= 4, "A/A failed the guard: {aa:?}");
        assert!(
            aa5[0] >= 360,
            "A/A at 5 repeats rarely shown within the margin: {aa5:?}"
        );
        // An arm exactly at the margin passes at most α/2 of the time.
        assert!(
            at_margin[0] <= 20,
            "an arm at the margin passed: {at_margin:?}"
        );
        assert_eq!(worse[0], 0, "a 0.15 drop passed: {worse:?}");
        assert!(worse[1] >= 300, "a 0.15 drop rarely failed: {worse:?}");
    }

    /// Rounds whose host slowed them by a shared factor (±15 %, a load
    /// switching on and off), each cell adding ±1 % of its own: judged as
    /// pairs, the shared factor cancels in each round's ratio. A/A is
    /// called changed in at most 5 % of 400 seeds and a 10 % slowdown
    /// regressed in at least 90 % at 5 rounds; judged as independent
    /// samples, the same data rarely decide.
    #[test]
    fn paired_rounds_cancel_what_the_host_does_to_a_whole_round() {
        let rule = VerdictRule {
            alpha: 0.05,
            min_effect: 0.05,
        };
        // [changed or regressed, equivalent] paired and unpaired.
        let run = |slowdown: f64| {
            let (mut paired, mut unpaired) = ([0; 4], [0; 4]);
            for seed in 0..400u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(210_000 + seed);
                let host = normal_series(&mut rng, 5, 0.0, 0.15);
                let cell = |rng: &mut ChaCha8Rng, h: f64, k: f64| {
                    k * (h + normal_series(rng, 1, 0.0, 0.01)[0]).exp()
                };
                let pairs: Vec<(f64, f64)> = host
                    .iter()
                    .map(|&h| (cell(&mut rng, h, 1.0), cell(&mut rng, h, slowdown)))
                    .collect();
                let index = |v: Verdict| match v {
                    Verdict::Improved => 0,
                    Verdict::Regressed => 1,
                    Verdict::Equivalent => 2,
                    Verdict::Inconclusive => 3,
                };
                let c = compare_paired(&pairs, Direction::Lower, rule);
                assert_eq!(c.paired_rounds, Some(5));
                paired[index(c.verdict)] += 1;
                let (b, a): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
                let (b, a) = (
                    Summary::from_values(&b).unwrap(),
                    Summary::from_values(&a).unwrap(),
                );
                unpaired[index(compare(&b, &a, Direction::Lower, rule).verdict)] += 1;
            }
            (paired, unpaired)
        };
        let (aa, aa_unpaired) = run(1.0);
        let (slow, slow_unpaired) = run(1.10);
        eprintln!(
            "[improved, regressed, equivalent, inconclusive] of 400, 5 rounds: A/A paired \
             {aa:?}, unpaired {aa_unpaired:?}; 10 % slower paired {slow:?}, unpaired \
             {slow_unpaired:?}"
        );
        assert!(aa[0] + aa[1] <= 20, "A/A called changed: {aa:?}");
        assert!(aa[2] >= 360, "A/A rarely shown equivalent: {aa:?}");
        assert!(slow[1] >= 360, "a 10 % slowdown rarely regressed: {slow:?}");
        assert!(slow_unpaired[1] < slow[1] / 2, "{slow_unpaired:?}");
    }

    /// Counts that repeat exactly (cachegrind's) have no spread: the ratio
    /// is the interval, equal counts are equivalent and a 0.5 % change is
    /// a change beyond a 0.1 % minimum effect, paired or not.
    #[test]
    fn zero_variance_verdicts_are_exact() {
        let rule = VerdictRule {
            alpha: 0.05,
            min_effect: 0.001,
        };
        let same = [(61_912_345.0, 61_912_345.0); 3];
        let c = compare_paired(&same, Direction::Lower, rule);
        assert_eq!(c.verdict, Verdict::Equivalent, "{c:?}");
        let more: Vec<(f64, f64)> = same.iter().map(|&(b, a)| (b, a * 1.005)).collect();
        let c = compare_paired(&more, Direction::Lower, rule);
        assert_eq!(c.verdict, Verdict::Regressed, "{c:?}");
        let s = c.speedup.unwrap();
        assert!((s.ci_low - s.ci_high).abs() < 1e-12 && (s.ratio - 1.0 / 1.005).abs() < 1e-12);
        // Unpaired, through the moments the report folds.
        let summary = |x: f64| Summary::from_moments(3, 3.0 * x, 3.0 * x * x, x, x).unwrap();
        let b = summary(61_912_345.0);
        for (a, expected) in [
            (61_912_345.0, Verdict::Equivalent),
            (61_912_345.0 * 1.005, Verdict::Regressed),
            (61_912_345.0 / 1.005, Verdict::Improved),
        ] {
            let c = compare(&b, &summary(a), Direction::Lower, rule);
            assert_eq!(c.verdict, expected, "{a}: {c:?}");
        }
    }

    #[test]
    fn paired_guards_cancel_the_spread_the_seeds_share() {
        // Win rates whose seeds spread them by ±0.15 (as 120 iterations of
        // the learning config do), each arm adding ±0.02 of its own.
        let run = |shift: f64, repeats: usize| {
            let (mut paired, mut unpaired) = ([0; 3], [0; 3]);
            for seed in 0..400u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(170_000 + seed);
                let seeds = normal_series(&mut rng, repeats, 0.65, 0.15);
                let noise = |rng: &mut ChaCha8Rng| normal_series(rng, repeats, 0.0, 0.02);
                let base: Vec<f64> = seeds
                    .iter()
                    .zip(noise(&mut rng))
                    .map(|(s, e)| s + e)
                    .collect();
                let arm: Vec<f64> = seeds
                    .iter()
                    .zip(noise(&mut rng))
                    .map(|(s, e)| s + e + shift)
                    .collect();
                let cells: Vec<(f64, f64)> =
                    arm.iter().copied().zip(base.iter().copied()).collect();
                let slot = |d: Decision| match d {
                    Decision::Pass => 0,
                    Decision::Fail => 1,
                    Decision::Inconclusive => 2,
                };
                let higher = Direction::Higher;
                paired[slot(paired_guard_test(&cells, higher, 0.05, 0.05).decision)] += 1;
                let (b, a) = (
                    Summary::from_values(&base).unwrap(),
                    Summary::from_values(&arm).unwrap(),
                );
                unpaired[slot(guard_test(&b, &a, Direction::Higher, 0.05, 0.05).decision)] += 1;
            }
            (paired, unpaired)
        };
        let (aa, aa_unpaired) = run(0.0, 5);
        let (worse, _) = run(-0.15, 5);
        let (at_margin, _) = run(-0.05, 5);
        eprintln!(
            "paired guard, margin 0.05, seeds ±0.15, [pass, fail, inconclusive] of 400 at 5 \
             repeats: A/A {aa:?} (unpaired {aa_unpaired:?}); at the margin {at_margin:?}; \
             0.15 worse {worse:?}"
        );
        assert!(aa[0] >= 300, "paired A/A rarely passed: {aa:?}");
        assert!(aa_unpaired[0] <= 20, "unpaired A/A passed: {aa_unpaired:?}");
        assert!(
            at_margin[0] <= 20,
            "an arm at the margin passed: {at_margin:?}"
        );
        assert!(worse[1] >= 380 && worse[0] == 0, "a 0.15 drop: {worse:?}");

        // Cells equal value for value: a zero-width interval at 0, a pass.
        // Lower-is-better: a sign flip of an equal pair must not give -0.
        let same = paired_guard_test(
            &[(0.3, 0.3), (0.5, 0.5), (0.7, 0.7)],
            Direction::Lower,
            0.05,
            0.05,
        );
        assert_eq!(same.decision, Decision::Pass);
        assert_eq!((same.gain, same.ci_low, same.ci_high), (0.0, 0.0, 0.0));
        assert!(same.gain.is_sign_positive(), "-0 shown as a loss");
        // One pair: no interval.
        let one = paired_guard_test(&[(0.6, 0.5)], Direction::Higher, 0.05, 0.05);
        assert_eq!(one.decision, Decision::Inconclusive);
        assert!(one.ci_low.is_nan());
    }

    /// Adaptive rounds on synthetic arms (1 % process spread, 4 % iteration
    /// noise): at least 3 rounds, at most 12, stopping once the interval is
    /// within ±`precision`; returns the verdict counts and mean rounds.
    fn adaptive_verdicts(seeds: u64, ratio: f64, precision: f64) -> ([usize; 4], f64) {
        let mut out = [0; 4];
        let mut rounds_total = 0;
        for seed in 0..seeds {
            let mut rng = ChaCha8Rng::seed_from_u64(150_000 + seed);
            let mut base_runs: Vec<Vec<f64>> = Vec::new();
            let mut arm_runs: Vec<Vec<f64>> = Vec::new();
            let mut last = None;
            for round in 1..=12 {
                for (runs, mean) in [(&mut base_runs, 1.0), (&mut arm_runs, ratio)] {
                    let offset = normal_series(&mut rng, 1, 1.0, 0.01)[0];
                    runs.push(normal_series(
                        &mut rng,
                        10,
                        mean * offset,
                        mean * offset * 0.04,
                    ));
                }
                if round < 3 {
                    continue;
                }
                let b = Summary::from_values(&replicates(&base_runs)).unwrap();
                let a = Summary::from_values(&replicates(&arm_runs)).unwrap();
                let c = compare(&b, &a, Direction::Lower, VerdictRule::default());
                last = Some(c.verdict);
                rounds_total += 1;
                if c.speedup.is_some_and(|s| within_precision(&s, precision)) {
                    break;
                }
            }
            out[match last.unwrap() {
                Verdict::Improved => 0,
                Verdict::Regressed => 1,
                Verdict::Equivalent => 2,
                Verdict::Inconclusive => 3,
            }] += 1;
        }
        (out, 2.0 + rounds_total as f64 / seeds as f64)
    }

    #[test]
    fn adaptive_repeats_settle_a_3_percent_change_and_keep_aa_clean_over_400_seeds() {
        let ([_, regressed, equivalent, inconclusive], rounds) =
            adaptive_verdicts(400, 1.03, 0.015);
        eprintln!(
            "adaptive (3-12 rounds, ±1.5 %), 3 % slower: regressed {regressed}, equivalent \
             {equivalent}, inconclusive {inconclusive}, {rounds:.1} rounds on average"
        );
        assert!(regressed <= 8, "regressed {regressed} of 400");
        let ([improved, regressed, ..], rounds) = adaptive_verdicts(400, 1.0, 0.015);
        eprintln!("adaptive A/A: improved {improved}, regressed {regressed}, {rounds:.1} rounds");
        assert!(
            improved + regressed <= 20,
            "A/A called changed {} of 400",
            improved + regressed
        );
        let ([_, regressed, ..], _) = adaptive_verdicts(400, 1.10, 0.015);
        assert!(regressed >= 390, "10 % slower regressed {regressed} of 400");
    }
}
