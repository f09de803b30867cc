//! How the report writes numbers and small words: three significant
//! digits, spreads, speedups, p-values, CSV fields. The builder's remarks
//! and every renderer (markdown, CSV, plots, the site) print numbers
//! through these, so that a value reads the same wherever it appears.
//!
//! This sits below both the model builder and the renderers: it knows the
//! statistics' small types ([`Summary`], [`Speedup`]) and nothing of a
//! `Report`, and it must not reach up into `builder` or `render`.

use super::stats::{Speedup, Summary};

/// Decimals that show three significant digits of `x` (the precision of
/// the hand-written records these reports replace).
fn decimals_for(x: f64) -> usize {
    let a = x.abs();
    if !a.is_finite() || a == 0.0 {
        return 2;
    }
    // The nudge keeps 0.99999999 (a mean of values around 1) at 1's precision.
    let mag = (a * (1.0 + 1e-9)).log10().floor() as i32;
    (2 - mag).clamp(0, 9) as usize
}

/// Large values as `17.6k` / `2.31M` / `4.50G` / `1.20T`: the divisor and
/// its suffix, from the value as it will print (rounded to three
/// significant digits, so 9999.7 is `10.0k`, not `10.00k`).
fn scale_for(x: f64) -> (f64, &'static str) {
    let a = round_sig(x).abs();
    if a >= 1e12 {
        (1e12, "T")
    } else if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e4 {
        (1e3, "k")
    } else {
        (1.0, "")
    }
}

/// `x` rounded to three significant digits (finite `x`).
fn round_sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let factor = 10f64.powi(2 - x.abs().log10().floor() as i32);
    (x * factor).round() / factor
}

/// A whole number (a count, a batch size) prints without decimals.
fn is_whole(x: f64) -> bool {
    x.fract() == 0.0 && x.abs() < 1e15
}

/// `inf`, `-inf` and `—` (NaN) for what has no digits.
fn non_finite(x: f64) -> Option<String> {
    if x.is_nan() {
        Some("—".into())
    } else if x.is_infinite() {
        Some(if x > 0.0 { "inf" } else { "-inf" }.into())
    } else {
        None
    }
}

/// How finite `x` prints: its divisor, the value to format, its decimals
/// and its suffix. Three significant digits, except that 1000 to 9999 keep
/// their fourth digit rather than print `1230`.
fn layout(x: f64) -> (f64, f64, usize, &'static str) {
    let (div, suffix) = scale_for(x);
    if suffix.is_empty() && x.abs() >= 999.5 {
        return (1.0, x, 0, "");
    }
    let v = round_sig(x) / div;
    (div, v, decimals_for(v), suffix)
}

/// `x` as [`layout`] lays it out.
fn scaled(x: f64) -> String {
    let (_, v, d, suffix) = layout(x);
    format!("{v:.d$}{suffix}")
}

/// A number with three significant digits: `0.0123`, `2.50`, `123`,
/// `17.6k`; a whole number below 10 000 as itself (`40`, `1235`).
pub fn num(x: f64) -> String {
    if let Some(t) = non_finite(x) {
        return t;
    }
    if scale_for(x).1.is_empty() && is_whole(x) {
        return format!("{x:.0}");
    }
    scaled(x)
}

/// An axis tick: three significant digits like [`num`], but a whole
/// number keeps the decimals of its neighbours (`1.80`, `2.00`, `2.20`);
/// zero is `0`.
pub fn tick(x: f64) -> String {
    if let Some(t) = non_finite(x) {
        return t;
    }
    if x == 0.0 {
        return "0".into();
    }
    scaled(x)
}

/// `5` for 5.0, `2.5` for 2.5.
pub(super) fn trim_number(x: f64) -> String {
    let t = format!("{x:.3}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A spread (sd, standard error) printed beside a value shown with `d`
/// decimals: at those decimals, or, where it would round to zero there,
/// with just enough decimals for its first significant digit (`0.0004`,
/// never `0.000` or `4.0e-4`). One rule for every ± lcx prints.
pub fn spread(x: f64, d: usize) -> String {
    let shown = 0.5 * 10f64.powi(-(d as i32));
    if x.is_finite() && x > 0.0 && x < shown {
        // The fewest decimals at which it rounds to a digit other than 0
        // (0.00096 shows as 0.001, 0.00021 as 0.0002).
        let first = (-x.log10()).ceil().max(0.0) as usize;
        let d = (first.saturating_sub(1)..=first)
            .find(|&k| (x * 10f64.powi(k as i32)).round() >= 1.0)
            .unwrap_or(first);
        return format!("{x:.d$}");
    }
    format!("{x:.d$}")
}

/// `mean ± sd`, both at the mean's precision and scale (`17.6k ± 0.4k`),
/// the sd as [`spread`] prints it; the mean alone for one value or a
/// constant (`40`, never `40 ± 0.00`). An sd under a ten-millionth of the
/// mean is the rounding of the pooled sums, not a spread of the values
/// (a value every line of a cell repeats, such as `process/shell_seconds`).
pub fn mean_sd(s: &Summary) -> String {
    if s.n < 2 || s.sd <= 1e-7 * s.mean.abs() {
        return num(s.mean);
    }
    if let Some(t) = non_finite(s.mean) {
        return t;
    }
    let (div, m, d, suffix) = layout(s.mean);
    let sd = spread(s.sd / div, d);
    format!("{m:.d$}{suffix} ± {sd}{suffix}")
}

/// `3.20× ± 0.10`.
pub fn speedup_text(s: &Speedup) -> String {
    // Two decimals below 10× (`3.18×`), three significant digits above.
    let d: usize = match s.ratio.abs() {
        r if r >= 99.95 => 0,
        r if r >= 9.995 => 1,
        _ => 2,
    };
    // A standard error under a ten-millionth of the ratio is the rounding
    // of identical replicates, not a spread (as in `mean_sd`).
    if s.se.is_finite() && s.se > 1e-7 * s.ratio.abs() {
        format!("{:.d$}× ± {}", s.ratio, spread(s.se, d))
    } else {
        format!("{:.d$}×", s.ratio)
    }
}

/// `p < 0.001` / `p = 0.034`.
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else {
        format!("p = {p:.3}")
    }
}

/// Quotes a CSV field when needed (RFC 4180).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::counted;

    #[test]
    fn number_formats() {
        assert_eq!(num(1234.5678), "1235");
        assert_eq!(num(123.456), "123");
        assert_eq!(num(2.5), "2.50");
        assert_eq!(num(40.0), "40");
        assert_eq!(num(0.0123456), "0.0123");
        assert_eq!(num(17_612.0), "17.6k");
        assert_eq!(num(2_310_000.0), "2.31M");
        assert_eq!(num(312_400.0), "312k");
        assert_eq!(num(23_100_000.0), "23.1M");
        assert_eq!(num(f64::NAN), "—");
        // Rounding decides the digits and the suffix.
        assert_eq!(num(9999.7), "10.0k");
        assert_eq!(num(99_950.0), "100k");
        assert_eq!(num(999_600.0), "1.00M");
        assert_eq!(num(9.996), "10.0");
        assert_eq!(num(-17_612.0), "-17.6k");
        assert_eq!(num(3.2e12), "3.20T");
        assert_eq!(num(f64::INFINITY), "inf");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(2.0), "2.00");
        let sp = |ratio, se| Speedup {
            ratio,
            se,
            ci_low: f64::NAN,
            ci_high: f64::NAN,
            log_se: f64::NAN,
            df: f64::NAN,
        };
        assert_eq!(speedup_text(&sp(3.18, 0.12)), "3.18× ± 0.12");
        assert_eq!(speedup_text(&sp(23.05, 1.32)), "23.1× ± 1.3");
        assert_eq!(speedup_text(&sp(23.05, 0.02)), "23.1× ± 0.02");
        assert_eq!(speedup_text(&sp(1.0, 0.00029)), "1.00× ± 0.0003");
        assert_eq!(spread(0.00096, 2), "0.001");
        assert_eq!(spread(0.0, 2), "0.00");
        assert_eq!(speedup_text(&sp(123.4, 4.0)), "123× ± 4");
        let summary = |n, mean, sd| Summary {
            n,
            mean,
            median: None,
            sd,
            min: mean - sd,
            max: mean + sd,
        };
        assert_eq!(mean_sd(&summary(5, 40.0, 0.0)), "40", "a constant");
        // The pooled sums' rounding is no spread.
        assert_eq!(mean_sd(&summary(30, 0.000878, 1e-11)), "0.000878");
        assert_eq!(mean_sd(&summary(1, 0.5, 0.0)), "0.500");
        assert_eq!(mean_sd(&summary(8, 17_612.0, 421.0)), "17.6k ± 0.4k");
        assert_eq!(mean_sd(&summary(8, 4.0, 0.066)), "4.00 ± 0.07");
        assert_eq!(mean_sd(&summary(8, 1145.3, 94.2)), "1145 ± 94");
        // A spread below the mean's last digit keeps one digit of its own.
        assert_eq!(mean_sd(&summary(8, 0.811, 0.00021)), "0.811 ± 0.0002");
        assert_eq!(p_text(0.0001), "p < 0.001");
        assert_eq!(p_text(0.0345), "p = 0.035");
        assert_eq!(counted(1, "line"), "1 line");
        assert_eq!(counted(0, "line"), "0 lines");
        assert_eq!(counted(3, "repeat"), "3 repeats");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
