//! The parity tests, the contract of this scheduler: it gives the
//! recursive scheduler's statistics and samples exactly, whatever the
//! window, batch cap and refill mode. Also the helpers the other files'
//! tests share, and the tests of the public settings and metrics.

use super::*;
use crate::cfr::regret::Fallback;
use crate::cfr::traversal::tests::{params, HashPolicy};
use crate::cfr::traversal::{Opponent, RecursiveTraverser, TraversalOutput, TraversalParams};
use crate::game::Rules;
use proptest::prelude::*;

pub(super) fn jobs(rules: &Rules, games: u64, deal_base: u64, rng_base: u64) -> Vec<GameJob> {
    (0..games)
        .map(|k| GameJob {
            state: GameState::new(rules, deal_base + 7 * k).unwrap(),
            traverser: (k % 2) as usize,
            iteration: 1 + (k % 3) as u32,
            rng_seed: rng_base.wrapping_add(k.wrapping_mul(1_000_003)),
        })
        .collect()
}

fn recursive(params: &TraversalParams, policy: &HashPolicy, jobs: &[GameJob]) -> TraversalOutput {
    let dim = params.encoding.input_dim(&Rules::default());
    let mut t = RecursiveTraverser::new(params, policy, 0, dim);
    for j in jobs {
        let mut state = j.state.clone();
        t.traverse_seeded(&mut state, j.traverser, j.iteration, j.rng_seed)
            .unwrap();
        assert!(state == j.state);
    }
    t.finish()
}

pub(super) fn interleaved<P: Policy>(
    params: &TraversalParams,
    config: InterleaveConfig,
    policy: &P,
    jobs: &[GameJob],
) -> (TraversalOutput, SchedulerMetrics) {
    let dim = params.encoding.input_dim(&Rules::default());
    let mut t = InterleavedTraverser::new(params, config, policy, dim).unwrap();
    let out = t.run(jobs.iter().cloned().map(Ok)).unwrap();
    (out, t.metrics())
}

pub(super) fn assert_same(a: &TraversalOutput, b: &TraversalOutput, what: &str) {
    assert_eq!(a.stats, b.stats, "{what}: stats differ");
    assert_eq!(a.advantage, b.advantage, "{what}: advantage samples differ");
    assert_eq!(a.strategy, b.strategy, "{what}: strategy samples differ");
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Cut {
    None,
    Nodes(u64),
    Depth(u64),
}

pub(super) fn case_params(
    opponent: Opponent,
    fallback: Fallback,
    cut: Cut,
    store_opponent: bool,
) -> TraversalParams {
    let mut p = params();
    p.opponent = opponent;
    p.fallback = fallback;
    p.store_opponent = store_opponent;
    p.strategy_interval = 2;
    (p.max_nodes, p.max_depth) = match cut {
        Cut::None => (None, None),
        Cut::Nodes(n) => (Some(n), None),
        Cut::Depth(d) => (Some(1000), Some(d)),
    };
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Recursive (per-game seeds) and interleaved agree exactly, whatever
    /// the window, batch cap and refill mode, for every opponent and
    /// fallback, with or without cutoffs, and with a zeroed network (every
    /// decision takes the fallback and argmax ties fire).
    #[test]
    fn recursive_and_interleaved_agree(
        seed in 0u64..1_000_000,
        opponent in prop::sample::select(vec![
            Opponent::Network, Opponent::AverageStrategy, Opponent::Heuristic,
        ]),
        argmax in any::<bool>(),
        zeroed in any::<bool>(),
        cut in prop::sample::select(vec![
            Cut::None, Cut::Nodes(40), Cut::Nodes(300), Cut::Depth(25),
        ]),
        store_opponent in any::<bool>(),
        width in 1usize..6,
        max_batch in 1usize..5,
        refill in any::<bool>(),
    ) {
        let fallback = if argmax { Fallback::ArgmaxTiebreak } else { Fallback::Uniform };
        let params = case_params(opponent, fallback, cut, store_opponent);
        let policy = HashPolicy { scale: if zeroed { 0.0 } else { 1.0 } };
        let jobs = jobs(&Rules::default(), 3, seed, seed.wrapping_mul(31));
        let expected = recursive(&params, &policy, &jobs);
        let config = InterleaveConfig { width, max_batch, refill, share_games: true, single_row_forwards: false };
        let (got, metrics) = interleaved(&params, config, &policy, &jobs);
        assert_same(&expected, &got, "interleaved");
        prop_assert!(metrics.max_batch_size as usize <= width.min(max_batch));
        prop_assert!(expected.stats.nodes > 0);
    }
}

#[test]
fn zeroed_network_parity_exercises_argmax_ties() {
    let policy = HashPolicy { scale: 0.0 };
    let params = case_params(Opponent::Network, Fallback::ArgmaxTiebreak, Cut::None, true);
    let jobs = jobs(&Rules::default(), 4, 5, 17);
    let expected = recursive(&params, &policy, &jobs);
    assert!(expected.stats.regret_fallback_argmax_tie_count > 0);
    assert_eq!(
        expected.stats.regret_fallback_count,
        expected.stats.regret_matching_decisions
    );
    let config = InterleaveConfig {
        width: 3,
        max_batch: 2,
        ..InterleaveConfig::default()
    };
    let (got, _) = interleaved(&params, config, &policy, &jobs);
    assert_same(&expected, &got, "zeroed");
}

#[test]
fn discard_only_opponent_runs_and_stores_only_traverser_samples() {
    let policy = HashPolicy { scale: 1.0 };
    let mut params = case_params(Opponent::DiscardOnly, Fallback::Uniform, Cut::None, true);
    params.strategy_interval = 1;
    let jobs = jobs(&Rules::default(), 4, 3, 9);
    let (out, _) = interleaved(&params, InterleaveConfig::default(), &policy, &jobs);
    assert_eq!(out.stats.endpoints(), 4);
    assert_eq!(
        out.stats.regret_matching_decisions as usize,
        out.advantage.len()
    );
    assert_eq!(out.strategy.players, out.advantage.players);
    // Game k has traverser k % 2, and samples come out in job order.
    let mut seen = out.advantage.players.clone();
    seen.dedup();
    assert_eq!(seen, vec![0, 1, 0, 1]);
}

#[test]
fn metrics_merge_sums_and_recomputes_the_average() {
    let mut a = SchedulerMetrics {
        batches: 2,
        requests: 10,
        max_batch_size: 7,
        forwards: 4,
        forward_seconds: 1.0,
        scheduler_seconds: 0.5,
        handed_over: 3,
    };
    let b = SchedulerMetrics {
        batches: 3,
        requests: 5,
        max_batch_size: 4,
        forwards: 2,
        forward_seconds: 2.0,
        scheduler_seconds: 0.25,
        handed_over: 1,
    };
    a.merge(&b);
    let m: std::collections::BTreeMap<String, f64> = a.metrics().into_iter().collect();
    assert_eq!(m["interleaved/batches"], 5.0);
    assert_eq!(m["interleaved/requests"], 15.0);
    assert_eq!(m["interleaved/avg_batch_size"], 3.0);
    assert_eq!(m["interleaved/max_batch_size"], 7.0);
    assert_eq!(m["interleaved/forwards"], 6.0);
    assert_eq!(m["interleaved/avg_rows_per_forward"], 2.5);
    assert_eq!(m["interleaved/forward_seconds"], 3.0);
    assert_eq!(m["interleaved/scheduler_seconds"], 0.75);
    assert_eq!(m["interleaved/handed_over"], 4.0);
}
