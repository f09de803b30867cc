//! A round's batch: the pending queries of the first `max_batch` games in
//! the window, gathered per network and forwarded in one policy call per
//! network (or one per row under single-row forwards), with the output
//! row of each query kept for handing back.

use std::time::Instant;

use super::context::Context;
use super::{InterleaveConfig, SchedulerMetrics};
use crate::cfr::policy::{Net, Policy};
use crate::cfr::regret::ACTIONS;
use crate::cfr::traversal::TraversalError;

/// The batch groups in [`Net::index`] order.
const GROUPS: [Net; 3] = [Net::Advantage(0), Net::Advantage(1), Net::Strategy];

/// One round's queries and the buffers they are forwarded through, kept
/// from round to round so a scheduler allocates them once.
pub(super) struct Batch {
    /// Floats per info state.
    dim: usize,
    max_batch: usize,
    single_row_forwards: bool,
    /// Requests this round (the window's first `max_batch` games).
    size: usize,
    /// Per group, the queries' info states, `dim` floats a row.
    inputs: [Vec<f32>; 3],
    /// Per group, the network's output rows, `ACTIONS` floats each.
    outputs: [Vec<f32>; 3],
    /// Per group, the window slot of each row.
    members: [Vec<usize>; 3],
}

impl Batch {
    /// Empty buffers for `config`'s batch cap and forward mode.
    pub(super) fn new(dim: usize, config: &InterleaveConfig) -> Self {
        Self {
            dim,
            max_batch: config.max_batch,
            single_row_forwards: config.single_row_forwards,
            size: 0,
            inputs: Default::default(),
            outputs: Default::default(),
            members: Default::default(),
        }
    }

    /// Gathers this round's queries from the contexts in `slots` that
    /// `window` lists.
    pub(super) fn collect(&mut self, window: &[usize], slots: &[Option<Context>]) {
        // Every context in the window has a pending request; the first
        // `max_batch` of them in window order go this round.
        let round = &window[..window.len().min(self.max_batch)];
        self.size = round.len();
        for g in 0..3 {
            self.inputs[g].clear();
            self.members[g].clear();
        }
        for &slot in round {
            #[expect(
                clippy::expect_used,
                reason = "a slot enters the window with its context and leaves it when the context retires"
            )]
            let ctx = slots[slot].as_ref().expect("window slots hold contexts");
            if let Some(req) = ctx.pending {
                let g = req.net.index();
                self.inputs[g].extend_from_slice(&ctx.query);
                self.members[g].push(slot);
            }
        }
    }

    /// Forwards the gathered queries, network by network, and counts the
    /// round and its forwards in `metrics`.
    pub(super) fn forward<P: Policy>(
        &mut self,
        policy: &P,
        metrics: &mut SchedulerMetrics,
    ) -> Result<(), TraversalError> {
        let dim = self.dim;
        let forward_start = Instant::now();
        for (g, &net) in GROUPS.iter().enumerate() {
            let rows = self.members[g].len();
            if rows == 0 {
                continue;
            }
            self.outputs[g].clear();
            self.outputs[g].resize(rows * ACTIONS, 0.0);
            if self.single_row_forwards {
                metrics.forwards += rows as u64;
                for r in 0..rows {
                    policy.evaluate(
                        net,
                        &self.inputs[g][r * dim..(r + 1) * dim],
                        1,
                        &mut self.outputs[g][r * ACTIONS..(r + 1) * ACTIONS],
                    )?;
                }
            } else {
                metrics.forwards += 1;
                policy.evaluate(net, &self.inputs[g], rows, &mut self.outputs[g])?;
            }
        }
        metrics.forward_seconds += forward_start.elapsed().as_secs_f64();
        let n = self.size as u64;
        metrics.batches += 1;
        metrics.requests += n;
        metrics.max_batch_size = metrics.max_batch_size.max(n);
        Ok(())
    }

    /// Each query's window slot and output row, group by group in
    /// [`Net::index`] order.
    pub(super) fn results(&self) -> impl Iterator<Item = (usize, &[f32])> + '_ {
        (0..3).flat_map(move |g| {
            let outputs = &self.outputs[g];
            self.members[g]
                .iter()
                .enumerate()
                .map(move |(r, &slot)| (slot, &outputs[r * ACTIONS..(r + 1) * ACTIONS]))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfr::interleaved::tests::{case_params, interleaved, jobs, Cut};
    use crate::cfr::policy::PolicyError;
    use crate::cfr::regret::Fallback;
    use crate::cfr::traversal::tests::HashPolicy;
    use crate::cfr::traversal::Opponent;
    use crate::game::Rules;
    use std::cell::RefCell;

    /// Wraps a policy and records every batch's (net, rows).
    struct Recording<'a, P: Policy> {
        inner: &'a P,
        calls: RefCell<Vec<(Net, usize)>>,
    }

    impl<P: Policy> Policy for Recording<'_, P> {
        fn evaluate(
            &self,
            net: Net,
            states: &[f32],
            rows: usize,
            out: &mut [f32],
        ) -> Result<(), PolicyError> {
            self.calls.borrow_mut().push((net, rows));
            self.inner.evaluate(net, states, rows, out)
        }
    }

    #[test]
    fn batches_group_by_sorted_network_and_respect_the_caps() {
        let policy = HashPolicy { scale: 1.0 };
        let rec = Recording {
            inner: &policy,
            calls: RefCell::new(Vec::new()),
        };
        let params = case_params(
            Opponent::AverageStrategy,
            Fallback::Uniform,
            Cut::Nodes(200),
            false,
        );
        let jobs = jobs(&Rules::default(), 9, 40, 3);
        let config = InterleaveConfig {
            width: 6,
            max_batch: 4,
            ..InterleaveConfig::default()
        };
        let (out, metrics) = interleaved(&params, config, &rec, &jobs);
        let calls = rec.calls.borrow();
        assert!(calls.iter().all(|&(_, rows)| (1..=4).contains(&rows)));
        assert_eq!(
            calls.iter().map(|&(_, r)| r as u64).sum::<u64>(),
            metrics.requests
        );
        assert_eq!(metrics.max_batch_size, 4);
        assert!(metrics.batches > 0 && metrics.batches <= calls.len() as u64);
        assert!(metrics.avg_batch_size() > 1.0);
        assert!(calls.iter().any(|&(n, _)| n == Net::Strategy));
        // Every non-endpoint node queried exactly once (no heuristic moves).
        assert_eq!(metrics.requests, out.stats.nodes - out.stats.endpoints());
    }
}
