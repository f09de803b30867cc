//! The three networks' training steps shared out over fewer threads than
//! networks, a step at a time.
//!
//! Each network's steps form a chain (a step reads the weights the one
//! before wrote), so a network is never on two threads at once. With one
//! thread per network on a two-core host the OS time-slices three threads
//! over two cores: each slice switch refills the cache with another
//! network's operands, and `lcx bench trainer` showed the kernel's GEMMs
//! about 5 % slower than with two threads on two cores (decision 0021).
//! Here `workers` threads each take the idle network with the most work
//! left, run one step, hand it back and take again: no thread ever waits
//! while a network has a step to take, and no two threads share a core.

use std::cmp::Reverse;
use std::sync::Mutex;
use std::time::Instant;

/// Runs every job in `jobs` until `work_left` says 0, calling `step` on one
/// job at a time per thread, on `workers` threads (at least one, at most
/// one per job). Returns the jobs in their order, each with the seconds
/// from `start` to its last step (0 for a job that had nothing to do), or
/// an error when a thread panicked.
pub(crate) fn rotate<J: Send>(
    jobs: Vec<J>,
    workers: usize,
    start: Instant,
    work_left: impl Fn(&J) -> u64 + Sync,
    step: impl Fn(&mut J) + Sync,
) -> Result<Vec<(J, f64)>, String> {
    let count = jobs.len();
    // Per job: the job while no thread holds it, and when it finished.
    let slots: Mutex<Vec<(Option<J>, f64)>> =
        Mutex::new(jobs.into_iter().map(|j| (Some(j), 0.0)).collect());
    let worker = || {
        let mut held: Option<(usize, J)> = None;
        loop {
            let (i, mut job) = {
                // A panic in `step` happens outside the lock, so a poisoned
                // lock still holds consistent slots.
                let mut slots = slots.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((i, job)) = held.take() {
                    if work_left(&job) == 0 {
                        slots[i].1 = start.elapsed().as_secs_f64();
                    }
                    slots[i].0 = Some(job);
                }
                // The most work left first, so that the last steps are
                // not all one network's while the other threads idle.
                let next = slots
                    .iter()
                    .enumerate()
                    .filter_map(|(i, (job, _))| job.as_ref().map(|j| (i, work_left(j))))
                    .filter(|&(_, left)| left > 0)
                    .max_by_key(|&(i, left)| (left, Reverse(i)));
                match next {
                    Some((i, _)) => match slots[i].0.take() {
                        Some(job) => (i, job),
                        None => return,
                    },
                    // Every job is done or on another thread, which will
                    // take it on by itself.
                    None => return,
                }
            };
            step(&mut job);
            held = Some((i, job));
        }
    };
    let panicked = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers.clamp(1, count.max(1)))
            .map(|_| {
                std::thread::Builder::new()
                    .name("lcx-train".into())
                    .spawn_scoped(scope, worker)
            })
            .collect();
        // Every handle joined (no short cut): a scoped thread left to the
        // scope's own join would make its panic the scope's.
        handles
            .into_iter()
            .map(|h| h.map_or(true, |h| h.join().is_err()))
            .fold(false, |any, failed| any | failed)
    });
    if panicked {
        return Err("a training thread panicked or could not start".into());
    }
    let slots = slots.into_inner().unwrap_or_else(|e| e.into_inner());
    slots
        .into_iter()
        .map(|(job, done)| job.map(|j| (j, done)))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| "a training job was lost".into())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A job that logs its steps and checks that no two threads are in it
    /// at once.
    struct Chain {
        left: u64,
        busy: AtomicUsize,
        steps: Vec<u64>,
    }

    fn chains(lengths: &[u64]) -> Vec<Chain> {
        lengths
            .iter()
            .map(|&left| Chain {
                left,
                busy: AtomicUsize::new(0),
                steps: Vec::new(),
            })
            .collect()
    }

    fn run(
        jobs: Vec<Chain>,
        workers: usize,
        running: &AtomicUsize,
        most: &AtomicUsize,
    ) -> Vec<(Chain, f64)> {
        rotate(
            jobs,
            workers,
            Instant::now(),
            |c| c.left,
            |c| {
                assert_eq!(
                    c.busy.fetch_add(1, Ordering::SeqCst),
                    0,
                    "a job on two threads"
                );
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
                c.steps.push(c.left);
                c.left -= 1;
                running.fetch_sub(1, Ordering::SeqCst);
                c.busy.fetch_sub(1, Ordering::SeqCst);
            },
        )
        .expect("no thread panics")
    }

    #[test]
    fn every_step_runs_once_in_order_on_at_most_the_workers() {
        for workers in [1, 2, 3, 5] {
            let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let done = run(chains(&[6, 0, 9, 4]), workers, &running, &most);
            for ((chain, finished), want) in done.iter().zip([6u64, 0, 9, 4]) {
                // Each job's steps ran one after the other, all of them.
                assert_eq!(chain.steps, (1..=want).rev().collect::<Vec<_>>());
                assert_eq!(chain.left, 0);
                assert_eq!(*finished > 0.0, want > 0, "{workers} workers");
            }
            let most = most.load(Ordering::SeqCst);
            assert!(
                most <= workers.min(3),
                "{most} steps at once on {workers} workers"
            );
            if workers > 1 {
                // Two threads were busy at once: the steps were shared out.
                assert!(most >= 2, "{workers} workers never overlapped");
            }
        }
    }

    #[test]
    fn no_jobs_and_a_panicking_step_are_answered() {
        let none: Vec<Chain> = Vec::new();
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        assert!(run(none, 2, &running, &most).is_empty());
        let failed = rotate(
            chains(&[3, 3]),
            2,
            Instant::now(),
            |c| c.left,
            |c| {
                c.left -= 1;
                if c.left == 1 {
                    panic!("a broken step");
                }
            },
        );
        assert!(failed.is_err());
    }
}
