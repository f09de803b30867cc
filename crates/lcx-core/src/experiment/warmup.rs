//! Warm-up detected rather than only declared: how many leading
//! iterations of a cell's series are a start-up transient. Used by the
//! runner for `warmup = "auto"` and by reports to warn when a declared
//! warm-up is too short. Pure arithmetic, no I/O.

/// How much of a cell's series the checks read: the transient is at the
/// start, and a million-iteration cell must not slow a report.
pub const SERIES_HEAD: usize = 2000;

/// Mean and sample standard deviation (0 below two values).
fn moments(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    if values.is_empty() {
        return (f64::NAN, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n;
    let sd = if values.len() > 1 {
        (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    (mean, sd)
}

/// How many leading values of a series are a start-up transient, by the
/// marginal standard error rule (MSER, White 1997): the truncation `d` that
/// minimises the variance of the remaining mean, `Σ (y - ȳ_d)² / (n - d)²`,
/// over `d` up to half the series. Series of 50 values or more are batched
/// in fives (MSER-5). Two guards keep it from truncating noise, which plain
/// MSER does in about half of short stationary series: the last dropped
/// values within 3 standard deviations of the rest are given back (the
/// statistic's minimum drifts late, where few values remain), and what is
/// still dropped must differ from the rest by Welch's |t| > 3. 0 means
/// nothing to drop.
pub fn mser_truncation(values: &[f64]) -> usize {
    let n = values.len();
    if n < 8 || values.iter().any(|x| !x.is_finite()) {
        return 0;
    }
    let batch = if n >= 50 { 5 } else { 1 };
    let means: Vec<f64> = values
        .chunks_exact(batch)
        .map(|c| c.iter().sum::<f64>() / batch as f64)
        .collect();
    let b = means.len();
    // Suffix sums make every candidate O(1).
    let mut sum = vec![0.0; b + 1];
    let mut sq = vec![0.0; b + 1];
    for i in (0..b).rev() {
        sum[i] = sum[i + 1] + means[i];
        sq[i] = sq[i + 1] + means[i] * means[i];
    }
    let stat: Vec<f64> = (0..=b / 2)
        .map(|d| {
            let k = (b - d) as f64;
            let ss = (sq[d] - sum[d] * sum[d] / k).max(0.0);
            ss / (k * k)
        })
        .collect();
    let Some(d) = (0..stat.len()).min_by(|&x, &y| stat[x].total_cmp(&stat[y])) else {
        return 0;
    };
    let mut cut = d * batch;
    if cut == 0 {
        return 0;
    }
    // Give back the last dropped values that look like the rest.
    let (rest_mean, rest_sd) = moments(&values[cut..]);
    while cut > 0 && (values[cut - 1] - rest_mean).abs() <= 3.0 * rest_sd {
        cut -= 1;
    }
    if cut == 0 {
        return 0;
    }
    let (head, rest) = values.split_at(cut);
    let (h, r) = (moments(head), moments(rest));
    let se = if head.len() >= 2 {
        (h.1 * h.1 / head.len() as f64 + r.1 * r.1 / rest.len() as f64).sqrt()
    } else {
        r.1 * (1.0 + 1.0 / rest.len() as f64).sqrt()
    };
    let t = if se > 0.0 {
        (h.0 - r.0).abs() / se
    } else if h.0 != r.0 {
        f64::INFINITY
    } else {
        0.0
    };
    if t > 3.0 {
        cut
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// `n` normal draws around 1 with standard deviation `sd` (Box–Muller).
    fn normal_series(rng: &mut ChaCha8Rng, n: usize, sd: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u1: f64 = rng.random::<f64>().max(1e-300);
                let u2: f64 = rng.random();
                1.0 + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
            })
            .collect()
    }

    /// A series of `n` values around 1 with 5 % noise; the first `slow`
    /// values `amp` higher.
    fn with_transient(rng: &mut ChaCha8Rng, n: usize, slow: usize, amp: f64) -> Vec<f64> {
        normal_series(rng, n, 0.05)
            .into_iter()
            .enumerate()
            .map(|(i, x)| if i < slow { x + amp } else { x })
            .collect()
    }

    #[test]
    fn mser_finds_a_planted_4_iteration_transient_in_at_least_90_percent_of_300_seeds() {
        for n in [10, 20, 40, 100] {
            let mut found = 0;
            for seed in 0..300u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(70_000 + seed);
                // 4 iterations 50 % slow, as a cold cache or a JIT would be.
                let d = mser_truncation(&with_transient(&mut rng, n, 4, 0.5));
                if (4..=n / 2).contains(&d) {
                    found += 1;
                }
            }
            eprintln!("n = {n}: transient found in {found} of 300");
            assert!(found >= 270, "n = {n}: found in {found} of 300");
        }
    }

    #[test]
    fn mser_truncates_nothing_from_stationary_series_in_at_least_90_percent_of_300_seeds() {
        for n in [10, 20, 40, 100] {
            let mut untouched = 0;
            for seed in 0..300u64 {
                let mut rng = ChaCha8Rng::seed_from_u64(80_000 + seed);
                if mser_truncation(&normal_series(&mut rng, n, 0.05)) == 0 {
                    untouched += 1;
                }
            }
            eprintln!("n = {n}: stationary untouched in {untouched} of 300");
            assert!(untouched >= 270, "n = {n}: untouched in {untouched} of 300");
        }
    }
}
