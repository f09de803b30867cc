//! Workers sharing games ([`InterleavedTraverser::run_shared`]): one
//! scheduler per thread of a pool, pulling new games from one shared job
//! list, and the hand-off of games in flight from a busy worker to one
//! that has run out, so no core idles through the end of another's share.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::context::Context;
use super::scheduler::{assemble, numbered, Feed, Incoming};
use super::{GameJob, InterleaveConfig, InterleavedTraverser, SchedulerMetrics};
use crate::cfr::policy::Policy;
use crate::cfr::stats::TraversalStats;
use crate::cfr::traversal::{TraversalError, TraversalOutput, TraversalParams};

impl<'a, P: Policy + Sync> InterleavedTraverser<'a, P> {
    /// Runs `jobs` on one scheduler per thread of `pool`, with the
    /// threads pulling games from the shared queue as their windows free
    /// up, and a worker whose games are all done taking over half of a
    /// busy one's games in flight. So no core idles while another works
    /// through the end of its share; results are those of [`Self::run`]
    /// over the same jobs (samples in job order, statistics summed).
    ///
    /// Which games share a window then depends on timing, so this needs a
    /// policy that gives each row the same result in any batch
    /// ([`Policy::batch_invariant`]) or single-row forwards; otherwise
    /// it is an error. `games` (the job count) caps each window at an even
    /// share, so the first worker to start does not take them all.
    pub fn run_shared<I>(
        params: &'a TraversalParams,
        config: InterleaveConfig,
        policy: &'a P,
        dim: usize,
        (jobs, games): (I, usize),
        pool: &rayon::ThreadPool,
    ) -> Result<(TraversalOutput, SchedulerMetrics), TraversalError>
    where
        I: Iterator<Item = Result<GameJob, TraversalError>> + Send,
    {
        if !config.batch_invisible(policy) {
            return Err(TraversalError::Unsupported(
                "sharing games between workers needs batch-invariant forwards".into(),
            ));
        }
        let workers = pool.current_num_threads();
        let config = InterleaveConfig {
            width: config.width.min(games.div_ceil(workers.max(1))),
            ..config
        };
        let shared = SharedWork::new(jobs, workers);
        // `broadcast` runs exactly one scheduler on every thread of the
        // pool, so a worker waiting for handed-over games never holds up
        // one that has not started.
        let parts: Vec<Result<_, TraversalError>> = pool.broadcast(|_| {
            let _abort = AbortOnExit(&shared);
            let mut t = Self::new(params, config, policy, dim)?;
            let mut feed = SharedFeed {
                work: &shared,
                taking: false,
            };
            let done = t.run_feed(&mut feed)?;
            Ok((done, std::mem::take(&mut t.core.stats), t.metrics()))
        });
        let mut metrics = SchedulerMetrics::default();
        let mut stats = TraversalStats::default();
        let mut done = Vec::new();
        for part in parts {
            let (finished, part_stats, part_metrics) = part?;
            done.extend(finished);
            stats.merge(&part_stats);
            metrics.merge(&part_metrics);
        }
        Ok((assemble(dim, stats, done), metrics))
    }
}

/// Work shared by the schedulers of [`InterleavedTraverser::run_shared`].
struct SharedWork<I> {
    workers: usize,
    /// The job list, numbered in job order.
    jobs: Mutex<std::iter::Fuse<std::iter::Enumerate<I>>>,
    handoff: Mutex<Handoff>,
    /// Signalled when games are handed over or all work is done.
    wake: Condvar,
    /// Lock-free copies of `handoff`'s counts, read every round.
    idle: AtomicUsize,
    handed: AtomicUsize,
    /// Set by a failing worker: no more jobs start.
    aborted: AtomicBool,
}

#[derive(Default)]
struct Handoff {
    contexts: Vec<Context>,
    /// Workers in `wait`.
    idle: usize,
    done: bool,
}

impl<I: Iterator<Item = Result<GameJob, TraversalError>>> SharedWork<I> {
    fn new(jobs: I, workers: usize) -> Self {
        Self {
            workers,
            jobs: Mutex::new(jobs.enumerate().fuse()),
            handoff: Mutex::new(Handoff::default()),
            wake: Condvar::new(),
            idle: AtomicUsize::new(0),
            handed: AtomicUsize::new(0),
            aborted: AtomicBool::new(false),
        }
    }

    fn handoff(&self) -> MutexGuard<'_, Handoff> {
        // A worker that panicked holding the lock left the counts whole
        // (they change only together, without panicking code between).
        self.handoff.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.handoff().done = true;
        self.wake.notify_all();
    }
}

/// Ends the shared run when a worker leaves, whether done, failed or
/// panicking, so no other worker waits for it forever.
struct AbortOnExit<'s, I: Iterator<Item = Result<GameJob, TraversalError>>>(&'s SharedWork<I>);

impl<I: Iterator<Item = Result<GameJob, TraversalError>>> Drop for AbortOnExit<'_, I> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct SharedFeed<'s, I> {
    work: &'s SharedWork<I>,
    /// Set when this worker woke up to handed-over games, until it has
    /// taken what is there. Only such a worker takes them: the one that
    /// handed them over refills its window next round and would
    /// otherwise take them straight back.
    taking: bool,
}

impl<I: Iterator<Item = Result<GameJob, TraversalError>>> Feed for SharedFeed<'_, I> {
    fn next(&mut self) -> Option<Result<Incoming, TraversalError>> {
        let w = self.work;
        if w.aborted.load(Ordering::Relaxed) {
            return None;
        }
        if self.taking {
            let mut h = w.handoff();
            if let Some(ctx) = h.contexts.pop() {
                w.handed.store(h.contexts.len(), Ordering::Relaxed);
                return Some(Ok(Incoming::Handed(ctx)));
            }
            self.taking = false;
        }
        let mut jobs = w.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.next().map(numbered)
    }

    fn spare(&self, in_flight: usize) -> usize {
        // Hand over only once the last handover has been picked up, and
        // share evenly between this worker and the idle ones.
        let idle = self.work.idle.load(Ordering::Relaxed);
        if idle == 0 || self.work.handed.load(Ordering::Relaxed) > 0 {
            0
        } else {
            in_flight * idle / (idle + 1)
        }
    }

    fn hand_over(&self, contexts: Vec<Context>) {
        let mut h = self.work.handoff();
        h.contexts.extend(contexts);
        self.work.handed.store(h.contexts.len(), Ordering::Relaxed);
        drop(h);
        self.work.wake.notify_all();
    }

    fn wait(&mut self) -> bool {
        let w = self.work;
        let mut h = w.handoff();
        h.idle += 1;
        w.idle.store(h.idle, Ordering::Relaxed);
        loop {
            if !h.contexts.is_empty() && !h.done {
                h.idle -= 1;
                w.idle.store(h.idle, Ordering::Relaxed);
                self.taking = true;
                return true;
            }
            // Everyone is here with nothing to hand over: all games are
            // done (the job list ran dry before any worker got here).
            if h.done || h.idle == w.workers {
                h.done = true;
                w.wake.notify_all();
                return false;
            }
            h = w.wake.wait(h).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfr::interleaved::scheduler::LocalFeed;
    use crate::cfr::interleaved::tests::{assert_same, case_params, interleaved, jobs, Cut};
    use crate::cfr::policy::{Net, PolicyError};
    use crate::cfr::regret::Fallback;
    use crate::cfr::traversal::tests::{params, HashPolicy};
    use crate::cfr::traversal::Opponent;
    use crate::game::Rules;
    use std::cell::RefCell;

    /// Hands over the newest `spare` games at the feed's `at`-th round.
    struct HandAt<I> {
        local: LocalFeed<I>,
        round: std::cell::Cell<usize>,
        at: usize,
        handed: RefCell<Vec<Context>>,
    }

    impl<I: Iterator<Item = Result<GameJob, TraversalError>>> Feed for HandAt<I> {
        fn next(&mut self) -> Option<Result<Incoming, TraversalError>> {
            self.local.next()
        }
        fn spare(&self, in_flight: usize) -> usize {
            self.round.set(self.round.get() + 1);
            if self.round.get() == self.at {
                in_flight / 2
            } else {
                0
            }
        }
        fn hand_over(&self, contexts: Vec<Context>) {
            self.handed.borrow_mut().extend(contexts);
        }
    }

    /// Only games handed over by another scheduler.
    struct Given(Vec<Context>);

    impl Feed for Given {
        fn next(&mut self) -> Option<Result<Incoming, TraversalError>> {
            self.0.pop().map(|c| Ok(Incoming::Handed(c)))
        }
    }

    /// Games moved to another scheduler mid-game (their network query
    /// pending) finish exactly as if they had stayed: the two schedulers'
    /// results together are one scheduler's, however the window is cut.
    #[test]
    fn games_handed_over_mid_game_finish_as_if_they_stayed() {
        let params = case_params(Opponent::Network, Fallback::ArgmaxTiebreak, Cut::None, true);
        let policy = HashPolicy { scale: 1.0 };
        let jobs = jobs(&Rules::default(), 9, 11, 17);
        let dim = params.encoding.input_dim(&Rules::default());
        let config = InterleaveConfig {
            width: 6,
            ..InterleaveConfig::default()
        };
        let (expected, _) = interleaved(&params, config, &policy, &jobs);
        for at in [1, 5, 40] {
            let mut first = InterleavedTraverser::new(&params, config, &policy, dim).unwrap();
            let mut feed = HandAt {
                local: LocalFeed(jobs.iter().cloned().map(Ok).enumerate()),
                round: Default::default(),
                at,
                handed: Default::default(),
            };
            let mut done = first.run_feed(&mut feed).unwrap();
            let handed = feed.handed.into_inner();
            assert_eq!(handed.len(), 3, "half of a full window of 6, round {at}");
            assert!(handed.iter().all(|c| c.pending.is_some() && c.nodes > 0));
            let mut second = InterleavedTraverser::new(&params, config, &policy, dim).unwrap();
            done.extend(second.run_feed(&mut Given(handed)).unwrap());
            let mut stats = std::mem::take(&mut first.core.stats);
            stats.merge(&second.core.stats);
            assert_same(&expected, &assemble(dim, stats, done), "handed over");
        }
    }

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    /// `jobs` on `workers` schedulers sharing them.
    fn shared<P: Policy + Sync>(
        params: &TraversalParams,
        config: InterleaveConfig,
        policy: &P,
        jobs: &[GameJob],
        workers: usize,
    ) -> Result<(TraversalOutput, SchedulerMetrics), TraversalError> {
        let dim = params.encoding.input_dim(&Rules::default());
        let queue = (jobs.iter().cloned().map(Ok), jobs.len());
        InterleavedTraverser::run_shared(params, config, policy, dim, queue, &pool(workers))
    }

    /// `HashPolicy`'s outputs, with or without the claim that batches do
    /// not matter, and optionally slow (a 1 ms sleep per forward) on the
    /// first thread that queries it.
    struct Variant<'a> {
        inner: &'a HashPolicy,
        invariant: bool,
        slow: Option<Mutex<Option<std::thread::ThreadId>>>,
    }

    impl Policy for Variant<'_> {
        fn evaluate(
            &self,
            net: Net,
            states: &[f32],
            rows: usize,
            out: &mut [f32],
        ) -> Result<(), PolicyError> {
            if let Some(slow) = &self.slow {
                let me = std::thread::current().id();
                if *slow.lock().unwrap().get_or_insert(me) == me {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            self.inner.evaluate(net, states, rows, out)
        }

        fn batch_invariant(&self) -> bool {
            self.invariant
        }
    }

    /// Workers sharing games give one scheduler's output, however many
    /// there are and whether or not the window is a whole share.
    #[test]
    fn shared_workers_give_one_schedulers_output() {
        let params = case_params(
            Opponent::Network,
            Fallback::ArgmaxTiebreak,
            Cut::Nodes(300),
            true,
        );
        let policy = HashPolicy { scale: 1.0 };
        let jobs = jobs(&Rules::default(), 24, 5, 9);
        for width in [2, 64] {
            let config = InterleaveConfig {
                width,
                ..InterleaveConfig::default()
            };
            let (expected, one) = interleaved(&params, config, &policy, &jobs);
            for workers in [1, 2, 4] {
                let (got, metrics) = shared(&params, config, &policy, &jobs, workers).unwrap();
                assert_same(
                    &expected,
                    &got,
                    &format!("width {width}, {workers} workers"),
                );
                assert_eq!(metrics.requests, one.requests);
            }
        }
    }

    /// One worker made slow (the first thread to query the network sleeps
    /// on every forward): the other runs out of games first and is handed
    /// games in flight, and the output is still one scheduler's.
    #[test]
    fn an_idle_worker_takes_over_games_from_a_slow_one() {
        let params = case_params(
            Opponent::Network,
            Fallback::ArgmaxTiebreak,
            Cut::Nodes(200),
            true,
        );
        let policy = HashPolicy { scale: 1.0 };
        let jobs = jobs(&Rules::default(), 8, 21, 23);
        let config = InterleaveConfig::default();
        let (expected, _) = interleaved(&params, config, &policy, &jobs);
        let slow = Variant {
            inner: &policy,
            invariant: true,
            slow: Some(Mutex::new(None)),
        };
        let (got, metrics) = shared(&params, config, &slow, &jobs, 2).unwrap();
        assert_same(&expected, &got, "slow worker");
        assert!(metrics.handed_over >= 1, "{metrics:?}");
    }

    /// The protocol step by step: a worker hands games over only while
    /// another waits, the waiting one gets them, and the giver's next
    /// refill does not take them back.
    #[test]
    fn handed_games_go_to_the_waiting_worker_not_back_to_the_giver() {
        let rules = Rules::default();
        let dim = params().encoding.input_dim(&rules);
        let games = jobs(&rules, 2, 1, 2);
        let work = SharedWork::new(games.clone().into_iter().map(Ok), 2);
        let mut giver = SharedFeed {
            work: &work,
            taking: false,
        };
        assert!(matches!(giver.next(), Some(Ok(Incoming::Job(0, _)))));
        assert!(matches!(giver.next(), Some(Ok(Incoming::Job(1, _)))));
        assert!(giver.next().is_none());
        assert_eq!(giver.spare(6), 0, "nobody waits yet");
        let (go, wait_for_go) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            // Owned here, so a failing assertion below drops it and the
            // taker's `recv` returns instead of hanging the scope.
            let go = go;
            let work = &work;
            let taker = scope.spawn(move || {
                let mut feed = SharedFeed {
                    work,
                    taking: false,
                };
                assert!(feed.wait(), "woken by the handover");
                // Let the giver refill first.
                wait_for_go.recv().unwrap();
                let mut got = Vec::new();
                while let Some(Ok(Incoming::Handed(ctx))) = feed.next() {
                    got.push(ctx.job);
                }
                got
            });
            while giver.spare(6) == 0 {
                std::thread::yield_now();
            }
            assert_eq!(giver.spare(6), 3, "half of six to the one waiting worker");
            let spec = |i: usize| games[i].clone();
            giver.hand_over(vec![
                Context::new(7, spec(0), dim),
                Context::new(8, spec(1), dim),
            ]);
            assert_eq!(giver.spare(6), 0, "not again before they are picked up");
            assert!(giver.next().is_none(), "the giver took its games back");
            go.send(()).unwrap();
            let mut got = taker.join().unwrap();
            got.sort_unstable();
            assert_eq!(got, [7, 8]);
        });
    }

    /// A batch-dependent policy cannot share games (which rows meet in a
    /// batch would depend on timing), and a failing game stops every
    /// worker with its error instead of leaving one waiting.
    #[test]
    fn shared_workers_refuse_batch_dependent_policies_and_stop_on_errors() {
        let params = params();
        let policy = HashPolicy { scale: 1.0 };
        let plain = Variant {
            inner: &policy,
            invariant: false,
            slow: None,
        };
        let jobs = jobs(&Rules::default(), 6, 3, 4);
        let dim = params.encoding.input_dim(&Rules::default());
        let refused = shared(&params, InterleaveConfig::default(), &plain, &jobs, 2);
        assert!(
            matches!(refused, Err(TraversalError::Unsupported(m)) if m.contains("batch-invariant"))
        );
        // Forwarding one row at a time makes any policy batch-invariant.
        let single = InterleaveConfig {
            single_row_forwards: true,
            ..InterleaveConfig::default()
        };
        let (expected, _) = interleaved(&params, single, &plain, &jobs);
        let (got, _) = shared(&params, single, &plain, &jobs, 2).unwrap();
        assert_same(&expected, &got, "single-row forwards");

        for workers in [1, 2, 3] {
            // On a thread of its own, so a worker left waiting fails the
            // test instead of hanging it.
            let (params, jobs) = (params.clone(), jobs.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let failing = jobs.iter().cloned().enumerate().map(|(i, j)| {
                    if i == 4 {
                        Err(TraversalError::Unsupported("job 4 is broken".into()))
                    } else {
                        Ok(j)
                    }
                });
                let result = InterleavedTraverser::run_shared(
                    &params,
                    InterleaveConfig::default(),
                    &HashPolicy { scale: 1.0 },
                    dim,
                    (failing, jobs.len()),
                    &pool(workers),
                );
                tx.send(result.map(|_| ()).map_err(|e| e.to_string()))
                    .unwrap();
            });
            let result = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("a failing job left a worker waiting");
            let err = result.unwrap_err();
            assert!(err.contains("job 4 is broken"), "{err}");
        }
    }
}
