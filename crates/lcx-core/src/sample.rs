//! The median, mean and standard deviation of a series of numbers, written
//! once for everything that needs them: the warm-up checks
//! (`experiment::warmup`), the report's summaries and outlier checks
//! (`report::stats`) and its per-arm medians (`report::moments`).
//!
//! Plain arithmetic on `f64` slices. It must not decide what counts as a
//! value (callers leave out non-finite ones where they mean to) and must
//! not depend on anything above it.

/// The median (the mean of the two middle values when the count is even),
/// by selection in O(n), so a long series need not be sorted; `None` for no
/// values. It reorders `values`. Values are ordered by `f64::total_cmp`,
/// the order a sort by it gives, so the result is bit for bit the middle of
/// that sort (a NaN sorts past the numbers rather than breaking the
/// comparison).
pub fn median_in_place(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let (_, &mut upper, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return Some(upper);
    }
    // The lower middle is the largest value left of the upper one.
    let lower = values[..n / 2]
        .iter()
        .copied()
        .max_by(f64::total_cmp)
        .unwrap_or(upper);
    Some((lower + upper) / 2.0)
}

/// The mean and the sample standard deviation (divided by n − 1; 0 for one
/// value) of `values`, summed in the order given; `None` for no values.
pub fn mean_sd(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let sd = if n > 1 {
        (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    Some((mean, sd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_by_selection_matches_sorting() {
        assert_eq!(median_in_place(&mut []), None);
        assert_eq!(median_in_place(&mut [3.0]), Some(3.0));
        assert_eq!(median_in_place(&mut [4.0, 1.0]), Some(2.5));
        assert_eq!(median_in_place(&mut [5.0, 1.0, 9.0, 2.0, 2.0]), Some(2.0));
        assert_eq!(median_in_place(&mut [8.0, 1.0, 9.0, 2.0]), Some(5.0));
        // Against a sort, on a scrambled series with repeats.
        let mut v: Vec<f64> = (0..101).map(|i| ((i * 37) % 23) as f64).collect();
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(median_in_place(&mut v), Some(sorted[50]));
        let mut even: Vec<f64> = sorted[..100].iter().rev().copied().collect();
        let want = (sorted[49] + sorted[50]) / 2.0;
        assert_eq!(median_in_place(&mut even), Some(want));
    }

    #[test]
    fn mean_and_sample_sd() {
        assert_eq!(mean_sd(&[]), None);
        assert_eq!(mean_sd(&[4.0]), Some((4.0, 0.0)));
        assert_eq!(mean_sd(&[1.0, 3.0]), Some((2.0, 2f64.sqrt())));
    }
}
