//! Regret matching, the strategy softmax, exploration and sampling
//! (docs/deep-cfr.md §4). All functions work on unified-action vectors of length
//! [`ACTIONS`] with a legal mask given as a bit set (bit `a` = action `a`).

#![expect(
    clippy::needless_range_loop,
    reason = "arrays indexed by the same action id are read side by side; an index loop says that more plainly than zipped iterators"
)]

use super::rng::Lcg;

/// Size of the unified action space of classic Lost Cities.
pub const ACTIONS: usize = 22;

/// What regret matching does when no legal action has positive advantage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// 1/|legal| on every legal action.
    Uniform,
    /// One-hot on a legal action with the largest advantage; ties broken by
    /// reservoir sampling over the tied actions (see [`regret_matching`]).
    ArgmaxTiebreak,
}

/// Diagnostics of one regret-matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegretInfo {
    /// The all-negative fallback fired.
    pub fallback: bool,
    /// Number of legal actions tied at the maximum (argmax fallback only).
    pub tie_size: u32,
    /// Every legal action was tied (argmax fallback only).
    pub full_tie: bool,
}

/// Whether bit `a` (action `a`) of a legal mask is set.
#[inline]
pub fn is_legal(mask: u64, a: usize) -> bool {
    mask >> a & 1 == 1
}

/// σ(a) = A⁺(a) / Σ_legal A⁺ when that sum exceeds `epsilon`; otherwise the
/// fallback. Illegal entries are 0; with no legal action everything is 0.
///
/// Under [`Fallback::ArgmaxTiebreak`] ties are broken the same way by both
/// schedulers (a deliberate change from the reference, docs/deep-cfr.md §0): scanning
/// upward, the k-th tied action replaces the pick when `next_u32() % k == 0`.
/// The RNG is consumed only when there is more than one tied action, and
/// exactly once per tied action after the first.
pub fn regret_matching(
    advantages: &[f32],
    mask: u64,
    epsilon: f64,
    fallback: Fallback,
    rng: &mut Lcg,
    out: &mut [f64],
) -> RegretInfo {
    let n = out.len().min(advantages.len());
    out.iter_mut().for_each(|p| *p = 0.0);
    let mut sum = 0.0f64;
    let mut legal_count = 0u32;
    for a in 0..n {
        if is_legal(mask, a) {
            legal_count += 1;
            sum += f64::from(advantages[a].max(0.0));
        }
    }
    if legal_count == 0 {
        return RegretInfo::default();
    }
    if sum > epsilon {
        for a in 0..n {
            if is_legal(mask, a) {
                out[a] = f64::from(advantages[a].max(0.0)) / sum;
            }
        }
        return RegretInfo::default();
    }
    match fallback {
        Fallback::Uniform => {
            let p = 1.0 / f64::from(legal_count);
            for a in 0..n {
                if is_legal(mask, a) {
                    out[a] = p;
                }
            }
            RegretInfo {
                fallback: true,
                tie_size: 0,
                full_tie: false,
            }
        }
        Fallback::ArgmaxTiebreak => {
            let mut best = f32::NEG_INFINITY;
            for a in 0..n {
                if is_legal(mask, a) && advantages[a] > best {
                    best = advantages[a];
                }
            }
            let mut pick = usize::MAX;
            let mut tied = 0u32;
            for a in 0..n {
                if is_legal(mask, a) && advantages[a] == best {
                    tied += 1;
                    if tied == 1 || rng.next_u32().is_multiple_of(tied) {
                        pick = a;
                    }
                }
            }
            if pick == usize::MAX {
                // Only NaN advantages: fall back to the lowest legal action.
                pick = (0..n).find(|&a| is_legal(mask, a)).unwrap_or(0);
                tied = 1;
            }
            out[pick] = 1.0;
            RegretInfo {
                fallback: true,
                tie_size: tied,
                full_tie: tied == legal_count,
            }
        }
    }
}

/// Softmax over the legal logits after subtracting the largest legal logit;
/// uniform over the legal actions if the sum is not positive.
pub fn strategy_policy(logits: &[f32], mask: u64, out: &mut [f64]) {
    let n = out.len().min(logits.len());
    out.iter_mut().for_each(|p| *p = 0.0);
    let max = (0..n)
        .filter(|&a| is_legal(mask, a))
        .map(|a| f64::from(logits[a]))
        .fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return;
    }
    let mut sum = 0.0;
    for a in 0..n {
        if is_legal(mask, a) {
            out[a] = (f64::from(logits[a]) - max).exp();
            sum += out[a];
        }
    }
    if sum > 0.0 && sum.is_finite() {
        out[..n].iter_mut().for_each(|p| *p /= sum);
    } else {
        normalize_legal(out, mask);
    }
}

/// Clamps to ≥ 0 and normalises over the legal actions; uniform over them
/// when the total is 0. Illegal entries become 0.
pub fn normalize_legal(weights: &mut [f64], mask: u64) {
    let mut total = 0.0;
    let mut count = 0u32;
    for (a, w) in weights.iter_mut().enumerate() {
        if is_legal(mask, a) {
            *w = w.max(0.0);
            total += *w;
            count += 1;
        } else {
            *w = 0.0;
        }
    }
    if count == 0 {
        return;
    }
    for (a, w) in weights.iter_mut().enumerate() {
        if is_legal(mask, a) {
            *w = if total > 0.0 {
                *w / total
            } else {
                1.0 / f64::from(count)
            };
        }
    }
}

/// q = (1−ε)·σ + ε/|legal| on legal actions, ε clamped to [0, 1]; q = σ
/// when ε = 0.
pub fn explore(sigma: &[f64], mask: u64, epsilon: f64, out: &mut [f64]) {
    let eps = epsilon.clamp(0.0, 1.0);
    let n = out.len().min(sigma.len());
    let legal = (0..n).filter(|&a| is_legal(mask, a)).count();
    for a in 0..n {
        out[a] = if !is_legal(mask, a) {
            0.0
        } else if eps == 0.0 {
            sigma[a]
        } else {
            (1.0 - eps) * sigma[a] + eps / legal as f64
        };
    }
}

/// Samples an action from `probs` with the uniform draw `u`: u is clamped to
/// [0, 1−2⁻⁵³], legal actions are scanned in ascending id accumulating the
/// positive probabilities, and the first action with u < cumulative wins. If
/// none does (rounding), the last legal action with positive probability is
/// returned; `None` when there is no such action.
pub fn sample_action(probs: &[f64], mask: u64, u: f64) -> Option<usize> {
    let u = u.clamp(0.0, 1.0 - f64::EPSILON / 2.0);
    let mut cumulative = 0.0;
    let mut last_positive = None;
    for (a, &p) in probs.iter().enumerate() {
        if is_legal(mask, a) && p > 0.0 {
            cumulative += p;
            last_positive = Some(a);
            if u < cumulative {
                return Some(a);
            }
        }
    }
    last_positive
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask_of(bits: &[bool]) -> u64 {
        bits.iter()
            .enumerate()
            .fold(0, |m, (i, &b)| if b { m | 1 << i } else { m })
    }

    #[test]
    fn positive_regrets_are_normalised_over_legal_actions() {
        let mut out = [0.0; 4];
        let mut rng = Lcg::new(1);
        let mask = mask_of(&[true, true, false, true]);
        let info = regret_matching(
            &[1.0, -2.0, 3.0, 5.0],
            mask,
            1e-8,
            Fallback::Uniform,
            &mut rng,
            &mut out,
        );
        assert!(!info.fallback);
        let expected = [1.0 / 6.0, 0.0, 0.0, 5.0 / 6.0];
        for (o, e) in out.iter().zip(expected) {
            assert!((o - e).abs() < 1e-12, "{out:?}");
        }
    }

    #[test]
    fn uniform_fallback_and_no_legal_actions() {
        let mut out = [0.0; 4];
        let mut rng = Lcg::new(1);
        let mask = mask_of(&[true, true, false, false]);
        let info = regret_matching(
            &[-1.0, -2.0, 3.0, 5.0],
            mask,
            1e-8,
            Fallback::Uniform,
            &mut rng,
            &mut out,
        );
        assert!(info.fallback);
        assert_eq!(out, [0.5, 0.5, 0.0, 0.0]);
        let info = regret_matching(&[1.0; 4], 0, 1e-8, Fallback::Uniform, &mut rng, &mut out);
        assert_eq!(out, [0.0; 4]);
        assert!(!info.fallback);
    }

    #[test]
    fn argmax_fallback_reports_ties_and_picks_a_tied_action() {
        let adv = [-1.0, -0.5, -0.5, -2.0, -0.5];
        let mask = mask_of(&[true; 5]);
        let mut seen = [0u32; 5];
        let mut rng = Lcg::new(3);
        for _ in 0..300 {
            let mut out = [0.0; 5];
            let info = regret_matching(
                &adv,
                mask,
                1e-8,
                Fallback::ArgmaxTiebreak,
                &mut rng,
                &mut out,
            );
            assert!(info.fallback);
            assert_eq!(info.tie_size, 3);
            assert!(!info.full_tie);
            let pick = out.iter().position(|&p| p == 1.0).unwrap();
            assert!([1, 2, 4].contains(&pick), "picked {pick}");
            assert_eq!(out.iter().sum::<f64>(), 1.0);
            seen[pick] += 1;
        }
        // The LCG's low bits are weak (bit 0 alternates), so `% k` does not
        // reach every tied action with this generator; it must still vary.
        assert!(seen.iter().filter(|&&n| n > 0).count() >= 2, "{seen:?}");
        // A single maximum consumes no random numbers.
        let mut rng = Lcg::new(9);
        let before = rng;
        let mut out = [0.0; 5];
        let info = regret_matching(
            &[-3.0, -1.0, -2.0, -4.0, -5.0],
            mask,
            1e-8,
            Fallback::ArgmaxTiebreak,
            &mut rng,
            &mut out,
        );
        assert_eq!(out[1], 1.0);
        assert_eq!(info.tie_size, 1);
        assert_eq!(rng, before);
        // All legal actions tied is a full tie.
        let info = regret_matching(
            &[0.0; 5],
            mask,
            1e-8,
            Fallback::ArgmaxTiebreak,
            &mut rng,
            &mut out,
        );
        assert!(info.full_tie && info.tie_size == 5);
    }

    #[test]
    fn sampling_boundaries() {
        let probs = [0.2, 0.3, 0.5];
        let mask = 0b111;
        assert_eq!(sample_action(&probs, mask, 0.0), Some(0));
        assert_eq!(sample_action(&probs, mask, 0.21), Some(1));
        assert_eq!(sample_action(&probs, mask, 0.51), Some(2));
        assert_eq!(sample_action(&probs, mask, 0.999), Some(2));
        assert_eq!(sample_action(&probs, mask, 1.0), Some(2));
        assert_eq!(sample_action(&probs, mask, -3.0), Some(0));
        // Probabilities that do not reach u: the last positive action.
        assert_eq!(sample_action(&[0.1, 0.2, 0.0], 0b111, 0.9), Some(1));
        assert_eq!(sample_action(&[0.0, 0.0], 0b11, 0.5), None);
        // Illegal actions are skipped even with probability mass.
        assert_eq!(sample_action(&[0.9, 0.1], 0b10, 0.0), Some(1));
    }

    #[test]
    fn strategy_softmax_exploration_and_normalisation() {
        let mut out = [0.0; 3];
        strategy_policy(&[1.0, 1000.0, 1.0], 0b101, &mut out);
        assert_eq!(out, [0.5, 0.0, 0.5]);
        strategy_policy(&[0.0, f32::NEG_INFINITY, 0.0], 0b111, &mut out);
        assert!((out[0] - 0.5).abs() < 1e-12 && out[1] == 0.0);
        let mut q = [0.0; 3];
        explore(&[1.0, 0.0, 0.0], 0b011, 0.5, &mut q);
        assert_eq!(q, [0.75, 0.25, 0.0]);
        explore(&[1.0, 0.0, 0.0], 0b011, 0.0, &mut q);
        assert_eq!(q, [1.0, 0.0, 0.0]);
        explore(&[1.0, 0.0, 0.0], 0b011, 7.0, &mut q);
        assert_eq!(q, [0.5, 0.5, 0.0]);
        let mut w = [-1.0, 2.0, 6.0];
        normalize_legal(&mut w, 0b011);
        assert_eq!(w, [0.0, 1.0, 0.0]);
        let mut w = [-1.0, 0.0, 6.0];
        normalize_legal(&mut w, 0b011);
        assert_eq!(w, [0.5, 0.5, 0.0]);
    }
}
