//! `lcx bisect`: which commit of `good..bad` made an arm slower. Each probe
//! is an ordinary two-arm experiment (the good revision against the commit
//! probed, interleaved); this module holds the search and the commit list,
//! the command line's `bisect.rs` runs the experiments.

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

/// The first index in `0..n` for which `is_bad` holds, given that index
/// `n - 1` is bad and that badness, once it appears, stays (the usual
/// bisection premise). Probes about log2(n) indices, never `n - 1`.
pub fn first_bad<E>(
    n: usize,
    mut is_bad: impl FnMut(usize) -> Result<bool, E>,
) -> Result<usize, E> {
    // Invariant: everything at or before `good` is good (-1: none probed),
    // `bad` is bad.
    let (mut good, mut bad) = (-1_isize, n as isize - 1);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if is_bad(mid as usize)? {
            bad = mid;
        } else {
            good = mid;
        }
    }
    Ok(bad.max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_planted_index_in_about_log2_probes() {
        for n in 1..40 {
            for planted in 0..n {
                let mut probes = Vec::new();
                let found = first_bad::<()>(n, |i| {
                    probes.push(i);
                    Ok(i >= planted)
                })
                .unwrap();
                assert_eq!(found, planted, "n {n}");
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
    fn an_error_stops_the_search() {
        let got = first_bad(8, |i| if i == 3 { Err("boom") } else { Ok(i > 5) });
        assert_eq!(got, Err("boom"));
    }
}
