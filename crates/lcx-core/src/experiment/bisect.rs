//! `lcx bisect`: which commit of `good..bad` made an arm slower. Each probe
//! is an ordinary two-arm experiment (the good revision against the commit
//! probed, interleaved); this module holds the search and the commit list,
//! `session::bisect` runs the experiments and decides what each one means.

use std::path::Path;

use super::revision::git_text;

/// One commit of the searched range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub sha: String,
    pub subject: String,
}

/// The commits after `good` up to and including `bad`, oldest first, on
/// `bad`'s first-parent line (a merge counts as one commit).
pub fn range(repo: &Path, good: &str, bad: &str) -> Result<Vec<Commit>, String> {
    let log = git_text(
        repo,
        &[
            "log",
            "--reverse",
            // The mainline only: a side branch's commits may lack the
            // change, and would break the search's premise that once bad,
            // every later commit is bad.
            "--first-parent",
            "--format=%H %s",
            &format!("{good}..{bad}"),
        ],
    )?;
    Ok(log
        .lines()
        .filter_map(|line| {
            let (sha, subject) = line.split_once(' ').unwrap_or((line, ""));
            (!sha.is_empty()).then(|| Commit {
                sha: sha.to_string(),
                subject: subject.to_string(),
            })
        })
        .collect())
}

/// The commit sha `rev` names in `repo`.
pub fn resolve(repo: &Path, rev: &str) -> Result<String, String> {
    git_text(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .ok()
    .filter(|sha| !sha.is_empty())
    .ok_or_else(|| format!("`{rev}` is not a commit of {}", repo.display()))
}

/// What one probe found of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    Good,
    Bad,
    /// It could not be judged (it does not build): as `git bisect skip`,
    /// the search goes on with a neighbour.
    Skip,
}

/// Where a search ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The first bad index.
    One(usize),
    /// Skipped indices kept the search from narrowing to one: the first bad
    /// index is one of these, ascending; every one but the last was
    /// skipped, the last is bad.
    OneOf(Vec<usize>),
}

/// The first index in `0..n` for which `probe` finds `Bad`, given that index
/// `n - 1` is bad and that badness, once it appears, stays (the usual
/// bisection premise). Probes about log2(n) indices, never `n - 1`. An index
/// found `Skip` is never probed again; the search probes the untried index
/// nearest the middle instead, and ends with [`Found::OneOf`] when only
/// skipped indices lie between the last good and the first bad.
pub fn first_bad<E>(
    n: usize,
    mut probe: impl FnMut(usize) -> Result<Probe, E>,
) -> Result<Found, E> {
    // Invariant: everything at or before `good` is good (-1: none probed),
    // `bad` is bad.
    let (mut good, mut bad) = (-1_isize, n as isize - 1);
    let mut skipped = std::collections::BTreeSet::new();
    while let Some(i) = next_probe(good, bad, &skipped) {
        match probe(i as usize)? {
            Probe::Bad => bad = i,
            Probe::Good => good = i,
            Probe::Skip => {
                skipped.insert(i);
            }
        }
    }
    let bad = bad.max(0) as usize;
    Ok(if bad as isize - good == 1 {
        Found::One(bad)
    } else {
        Found::OneOf(((good + 1) as usize..=bad).collect())
    })
}

/// The index strictly between `good` and `bad` nearest their middle that
/// has not been skipped (the lower of two at one distance); `None` when
/// every one has.
fn next_probe(
    good: isize,
    bad: isize,
    skipped: &std::collections::BTreeSet<isize>,
) -> Option<isize> {
    let mid = good + (bad - good) / 2;
    (0..bad - good)
        .flat_map(|d| [mid - d, mid + d])
        .find(|i| good < *i && *i < bad && !skipped.contains(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(planted: usize) -> impl Fn(usize) -> Probe {
        move |i| {
            if i >= planted {
                Probe::Bad
            } else {
                Probe::Good
            }
        }
    }

    #[test]
    fn finds_every_planted_index_in_about_log2_probes() {
        for n in 1..40 {
            for planted in 0..n {
                let mut probes = Vec::new();
                let found = first_bad::<()>(n, |i| {
                    probes.push(i);
                    Ok(judge(planted)(i))
                })
                .unwrap();
                assert_eq!(found, Found::One(planted), "n {n}");
                assert!(
                    !probes.contains(&(n - 1)),
                    "the known-bad end is not probed again"
                );
                let bound = (n as f64).log2().ceil() as usize;
                assert!(probes.len() <= bound, "n {n}: {} probes", probes.len());
            }
        }
    }

    #[test]
    fn skipped_indices_are_stepped_around_and_bound_the_answer() {
        // Every planted index and every set of unjudgeable indices below
        // the known-bad end, for small ranges.
        for n in 1..=9_usize {
            for planted in 0..n {
                for mask in 0..(1_u32 << (n - 1)) {
                    let unjudgeable = |i: usize| mask & (1 << i) != 0;
                    let mut probes = Vec::new();
                    let found = first_bad::<()>(n, |i| {
                        assert!(!probes.contains(&i), "{i} probed twice");
                        probes.push(i);
                        Ok(if unjudgeable(i) {
                            Probe::Skip
                        } else {
                            judge(planted)(i)
                        })
                    })
                    .unwrap();
                    assert!(!probes.contains(&(n - 1)));
                    match &found {
                        Found::One(i) => assert_eq!(*i, planted, "n {n} mask {mask:b}"),
                        Found::OneOf(range) => {
                            assert!(range.len() >= 2, "{range:?}");
                            assert!(range.contains(&planted), "n {n} mask {mask:b}: {range:?}");
                            let (last, rest) = range.split_last().unwrap();
                            assert!(*last >= planted);
                            // Only skipped commits stand between.
                            assert!(rest.iter().all(|i| unjudgeable(*i) && probes.contains(i)));
                            assert!(range.windows(2).all(|w| w[1] == w[0] + 1));
                        }
                    }
                    // The answer is exact whenever the planted commit and
                    // the one before it (if any) could be judged.
                    if !unjudgeable(planted) && (planted == 0 || !unjudgeable(planted - 1)) {
                        assert_eq!(found, Found::One(planted), "n {n} mask {mask:b}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_skipped_first_bad_commit_leaves_it_and_the_next_judged_bad_one() {
        // 0..=4 good, 5 bad but skipped, 6.. bad.
        let found = first_bad::<()>(9, |i| {
            Ok(match i {
                5 => Probe::Skip,
                i => judge(5)(i),
            })
        });
        assert_eq!(found, Ok(Found::OneOf(vec![5, 6])));
    }

    #[test]
    fn an_error_stops_the_search() {
        let got = first_bad(8, |i| if i == 3 { Err("boom") } else { Ok(judge(6)(i)) });
        assert_eq!(got, Err("boom"));
    }
}
