//! Traversal statistics (docs/deep-cfr.md §5.8): counters summed across traversals and
//! workers, exported as `traversal/*` metrics.

use std::collections::BTreeMap;

/// Counters of one or many traversals. `merge` sums them (max for depth).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraversalStats {
    pub nodes: u64,
    pub terminals: u64,
    pub depth_cutoffs: u64,
    pub node_limit_cutoffs: u64,
    pub max_depth_reached: u64,
    pub endpoint_depth_sum: u64,
    /// Endpoint counts keyed by bucket start (`u64::MAX` = the "plus" bucket).
    pub endpoint_buckets: BTreeMap<u64, u64>,
    pub advantage_samples: u64,
    pub strategy_samples: u64,
    pub sampled_actions: u64,
    pub regret_matching_decisions: u64,
    pub regret_fallback_count: u64,
    pub regret_fallback_depth_sum: u64,
    /// Fallback decisions keyed by depth bucket start (50 wide, 400 = plus).
    pub regret_fallback_depth_buckets: BTreeMap<u64, u64>,
    /// Fallback decisions keyed by the number of colours the actor opened.
    pub regret_fallback_opened_colors: BTreeMap<u64, u64>,
    pub regret_fallback_argmax_tie_count: u64,
    pub regret_fallback_argmax_tie_size_sum: u64,
    pub regret_fallback_argmax_full_tie_count: u64,
    /// Fallback decisions by the category of the chosen action
    /// ([`ActionKind`] order).
    pub regret_fallback_chosen: [u64; 5],
    /// Sum over fallback decisions of the number of legal actions, and of
    /// the legal actions per category.
    pub regret_fallback_legal_sum: u64,
    pub regret_fallback_legal_by_kind: [u64; 5],
    /// Fallback decisions where opening some new colour was legal.
    pub regret_fallback_open_new_available: u64,
    /// Sum over fallback decisions of the actor's opened colours.
    pub regret_fallback_opened_colors_sum: u64,
    /// Per colour: fallback decisions where opening it was legal / chosen.
    pub regret_fallback_open_new_available_color: BTreeMap<u64, u64>,
    pub regret_fallback_open_new_selected_color: BTreeMap<u64, u64>,
    pub rollouts: u64,
    pub rollout_steps: u64,
    pub rollout_timeouts: u64,
}

/// The five categories of docs/deep-cfr.md §5.8's legal-action mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// Play on an expedition the actor has opened.
    PlayExisting,
    /// Play that opens a new expedition in this colour.
    OpenNew(u8),
    Discard,
    DrawDeck,
    DrawPile,
}

impl ActionKind {
    /// Index into the per-category counters; also the metric order.
    pub fn index(self) -> usize {
        match self {
            ActionKind::PlayExisting => 0,
            ActionKind::OpenNew(_) => 1,
            ActionKind::Discard => 2,
            ActionKind::DrawDeck => 3,
            ActionKind::DrawPile => 4,
        }
    }
}

/// Metric names of the categories, in [`ActionKind::index`] order.
const KIND_NAMES: [&str; 5] = [
    "play_existing",
    "open_new",
    "discard",
    "draw_deck",
    "draw_pile",
];

/// What a fallback decision had to choose from and what it chose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FallbackMix {
    /// Legal actions per category.
    pub legal: [u64; 5],
    /// Colours (bits) that a legal play would open.
    pub open_new_colors: u64,
    /// The sampled action's category; `None` where no single action was
    /// chosen (the traverser's node under external sampling).
    pub chosen: Option<ActionKind>,
}

/// Endpoint bucket settings (docs/deep-cfr.md §11 `endpoint_depth_bucket_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    pub width: u64,
    pub max: u64,
}

impl Default for Buckets {
    fn default() -> Self {
        Self {
            width: 100,
            max: 1000,
        }
    }
}

/// Adds `src`'s counts to `dst`'s, key by key.
fn add_counts(dst: &mut BTreeMap<u64, u64>, src: &BTreeMap<u64, u64>) {
    for (k, v) in src {
        *dst.entry(*k).or_insert(0) += v;
    }
}

fn bucket_start(depth: u64, width: u64, max: u64) -> u64 {
    let start = depth / width.max(1) * width.max(1);
    if start >= max {
        u64::MAX
    } else {
        start
    }
}

impl TraversalStats {
    /// Counts an endpoint (terminal or cutoff) at `depth`.
    pub fn endpoint(&mut self, depth: u64, buckets: Buckets) {
        self.endpoint_depth_sum += depth;
        *self
            .endpoint_buckets
            .entry(bucket_start(depth, buckets.width, buckets.max))
            .or_insert(0) += 1;
    }

    pub fn endpoints(&self) -> u64 {
        self.terminals + self.depth_cutoffs + self.node_limit_cutoffs
    }

    /// Counts a regret-matching decision and, when the fallback fired, its
    /// diagnostics; `mix` is only called then.
    pub fn regret_decision(
        &mut self,
        depth: u64,
        fallback: bool,
        tie_size: u32,
        full_tie: bool,
        opened_colors: u64,
        mix: impl FnOnce() -> FallbackMix,
    ) {
        self.regret_matching_decisions += 1;
        if !fallback {
            return;
        }
        let mix = mix();
        self.regret_fallback_opened_colors_sum += opened_colors;
        for (sum, n) in self.regret_fallback_legal_by_kind.iter_mut().zip(mix.legal) {
            *sum += n;
        }
        self.regret_fallback_legal_sum += mix.legal.iter().sum::<u64>();
        if mix.open_new_colors != 0 {
            self.regret_fallback_open_new_available += 1;
        }
        for c in crate::game::mask_iter(mix.open_new_colors) {
            *self
                .regret_fallback_open_new_available_color
                .entry(c as u64)
                .or_insert(0) += 1;
        }
        if let Some(kind) = mix.chosen {
            self.regret_fallback_chosen[kind.index()] += 1;
            if let ActionKind::OpenNew(c) = kind {
                *self
                    .regret_fallback_open_new_selected_color
                    .entry(u64::from(c))
                    .or_insert(0) += 1;
            }
        }
        self.regret_fallback_count += 1;
        self.regret_fallback_depth_sum += depth;
        *self
            .regret_fallback_depth_buckets
            .entry(bucket_start(depth, 50, 400))
            .or_insert(0) += 1;
        *self
            .regret_fallback_opened_colors
            .entry(opened_colors)
            .or_insert(0) += 1;
        if tie_size > 1 {
            self.regret_fallback_argmax_tie_count += 1;
            self.regret_fallback_argmax_tie_size_sum += u64::from(tie_size);
        }
        if full_tie {
            self.regret_fallback_argmax_full_tie_count += 1;
        }
    }

    /// Adds `other`'s counters (max for the depth reached).
    pub fn merge(&mut self, other: &TraversalStats) {
        self.nodes += other.nodes;
        self.terminals += other.terminals;
        self.depth_cutoffs += other.depth_cutoffs;
        self.node_limit_cutoffs += other.node_limit_cutoffs;
        self.max_depth_reached = self.max_depth_reached.max(other.max_depth_reached);
        self.endpoint_depth_sum += other.endpoint_depth_sum;
        add_counts(&mut self.endpoint_buckets, &other.endpoint_buckets);
        self.advantage_samples += other.advantage_samples;
        self.strategy_samples += other.strategy_samples;
        self.sampled_actions += other.sampled_actions;
        self.regret_matching_decisions += other.regret_matching_decisions;
        self.regret_fallback_count += other.regret_fallback_count;
        self.regret_fallback_depth_sum += other.regret_fallback_depth_sum;
        add_counts(
            &mut self.regret_fallback_depth_buckets,
            &other.regret_fallback_depth_buckets,
        );
        add_counts(
            &mut self.regret_fallback_opened_colors,
            &other.regret_fallback_opened_colors,
        );
        self.regret_fallback_argmax_tie_count += other.regret_fallback_argmax_tie_count;
        self.regret_fallback_argmax_tie_size_sum += other.regret_fallback_argmax_tie_size_sum;
        self.regret_fallback_argmax_full_tie_count += other.regret_fallback_argmax_full_tie_count;
        for k in 0..5 {
            self.regret_fallback_chosen[k] += other.regret_fallback_chosen[k];
            self.regret_fallback_legal_by_kind[k] += other.regret_fallback_legal_by_kind[k];
        }
        self.regret_fallback_legal_sum += other.regret_fallback_legal_sum;
        self.regret_fallback_open_new_available += other.regret_fallback_open_new_available;
        self.regret_fallback_opened_colors_sum += other.regret_fallback_opened_colors_sum;
        add_counts(
            &mut self.regret_fallback_open_new_available_color,
            &other.regret_fallback_open_new_available_color,
        );
        add_counts(
            &mut self.regret_fallback_open_new_selected_color,
            &other.regret_fallback_open_new_selected_color,
        );
        self.rollouts += other.rollouts;
        self.rollout_steps += other.rollout_steps;
        self.rollout_timeouts += other.rollout_timeouts;
    }

    /// The `traversal/*` metrics of docs/deep-cfr.md §9 that these counters support.
    /// Sample and rollout counters are not exported, as in the reference.
    pub fn metrics(&self, buckets: Buckets) -> Vec<(String, f64)> {
        let mut m: Vec<(String, f64)> = Vec::new();
        let mut put = |k: &str, v: f64| m.push((format!("traversal/{k}"), v));
        put("nodes", self.nodes as f64);
        put("terminals", self.terminals as f64);
        put("depth_cutoffs", self.depth_cutoffs as f64);
        put("node_limit_cutoffs", self.node_limit_cutoffs as f64);
        put("max_depth_reached", self.max_depth_reached as f64);
        put("endpoint_depth_sum", self.endpoint_depth_sum as f64);
        let endpoints = self.endpoints();
        put("endpoints", endpoints as f64);
        put(
            "avg_endpoint_depth",
            if endpoints > 0 {
                self.endpoint_depth_sum as f64 / endpoints as f64
            } else {
                0.0
            },
        );
        for (start, count) in &self.endpoint_buckets {
            let key = if *start == u64::MAX {
                format!("endpoint_depth_bucket_{}_plus", buckets.max)
            } else {
                format!(
                    "endpoint_depth_bucket_{}_{}",
                    start,
                    start + buckets.width - 1
                )
            };
            put(&key, *count as f64);
        }
        put("sampled_actions", self.sampled_actions as f64);
        put(
            "regret_matching_decisions",
            self.regret_matching_decisions as f64,
        );
        let fb = self.regret_fallback_count;
        put("regret_fallback_count", fb as f64);
        let rate = |n: u64, d: u64| if d > 0 { n as f64 / d as f64 } else { 0.0 };
        put(
            "regret_fallback_rate",
            rate(fb, self.regret_matching_decisions),
        );
        put(
            "regret_fallback_avg_depth",
            rate(self.regret_fallback_depth_sum, fb),
        );
        put(
            "regret_fallback_argmax_tie_count",
            self.regret_fallback_argmax_tie_count as f64,
        );
        put(
            "regret_fallback_argmax_tie_rate",
            rate(self.regret_fallback_argmax_tie_count, fb),
        );
        put(
            "regret_fallback_argmax_tie_size_mean",
            rate(
                self.regret_fallback_argmax_tie_size_sum,
                self.regret_fallback_argmax_tie_count,
            ),
        );
        put(
            "regret_fallback_argmax_full_tie_count",
            self.regret_fallback_argmax_full_tie_count as f64,
        );
        put(
            "regret_fallback_argmax_full_tie_rate",
            rate(self.regret_fallback_argmax_full_tie_count, fb),
        );
        for (start, count) in &self.regret_fallback_depth_buckets {
            let key = if *start == u64::MAX {
                "regret_fallback_depth_bucket_400_plus".to_string()
            } else {
                format!("regret_fallback_depth_bucket_{}_{}", start, start + 49)
            };
            put(&key, *count as f64);
        }
        for (k, count) in &self.regret_fallback_opened_colors {
            put(
                &format!("regret_fallback_opened_colors_count_{k}"),
                *count as f64,
            );
        }
        for (k, name) in KIND_NAMES.iter().enumerate() {
            put(
                &format!("regret_fallback_action_{name}"),
                self.regret_fallback_chosen[k] as f64,
            );
            put(
                &format!("regret_fallback_legal_{name}_mean"),
                rate(self.regret_fallback_legal_by_kind[k], fb),
            );
        }
        put(
            "regret_fallback_legal_actions_mean",
            rate(self.regret_fallback_legal_sum, fb),
        );
        let available = self.regret_fallback_open_new_available;
        let selected = self.regret_fallback_chosen[1];
        put(
            "regret_fallback_open_new_available_rate",
            rate(available, fb),
        );
        put("regret_fallback_open_new_selected", selected as f64);
        put("regret_fallback_open_new_selected_rate", rate(selected, fb));
        put(
            "regret_fallback_open_new_selection_over_availability",
            rate(selected, available),
        );
        put(
            "regret_fallback_avg_opened_colors_before_action",
            rate(self.regret_fallback_opened_colors_sum, fb),
        );
        for (c, count) in &self.regret_fallback_open_new_available_color {
            put(
                &format!("regret_fallback_open_new_available_color_{c}"),
                *count as f64,
            );
        }
        for (c, count) in &self.regret_fallback_open_new_selected_color {
            put(
                &format!("regret_fallback_open_new_selected_color_{c}"),
                *count as f64,
            );
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_merge() {
        let b = Buckets {
            width: 100,
            max: 1000,
        };
        let mut s = TraversalStats::default();
        s.endpoint(5, b);
        s.endpoint(150, b);
        s.endpoint(2000, b);
        s.terminals = 3;
        let mix = FallbackMix {
            legal: [1, 2, 3, 0, 0],
            open_new_colors: 0b101,
            chosen: Some(ActionKind::OpenNew(2)),
        };
        s.regret_decision(10, true, 3, false, 0, || mix);
        let draw = FallbackMix {
            legal: [0, 0, 0, 1, 2],
            open_new_colors: 0,
            chosen: Some(ActionKind::DrawPile),
        };
        s.regret_decision(420, true, 1, false, 2, || draw);
        s.regret_decision(1, false, 0, false, 0, || panic!("no fallback, no mix"));
        let mut t = TraversalStats {
            max_depth_reached: 7,
            ..Default::default()
        };
        t.merge(&s);
        t.merge(&s);
        let m: BTreeMap<String, f64> = t.metrics(b).into_iter().collect();
        assert_eq!(m["traversal/endpoints"], 6.0);
        assert_eq!(m["traversal/endpoint_depth_bucket_0_99"], 2.0);
        assert_eq!(m["traversal/endpoint_depth_bucket_100_199"], 2.0);
        assert_eq!(m["traversal/endpoint_depth_bucket_1000_plus"], 2.0);
        assert_eq!(m["traversal/regret_fallback_count"], 4.0);
        assert!((m["traversal/regret_fallback_rate"] - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(m["traversal/regret_fallback_depth_bucket_0_49"], 2.0);
        assert_eq!(m["traversal/regret_fallback_depth_bucket_400_plus"], 2.0);
        assert_eq!(m["traversal/regret_fallback_opened_colors_count_0"], 2.0);
        assert_eq!(m["traversal/regret_fallback_argmax_tie_size_mean"], 3.0);
        assert_eq!(m["traversal/max_depth_reached"], 7.0);
        // Legal-action mix over the 4 fallback decisions (2 of each).
        assert_eq!(m["traversal/regret_fallback_action_open_new"], 2.0);
        assert_eq!(m["traversal/regret_fallback_action_draw_pile"], 2.0);
        assert_eq!(m["traversal/regret_fallback_action_discard"], 0.0);
        assert_eq!(m["traversal/regret_fallback_legal_actions_mean"], 4.5);
        assert_eq!(m["traversal/regret_fallback_legal_discard_mean"], 1.5);
        assert_eq!(m["traversal/regret_fallback_open_new_available_rate"], 0.5);
        assert_eq!(m["traversal/regret_fallback_open_new_selected_rate"], 0.5);
        assert_eq!(
            m["traversal/regret_fallback_open_new_selection_over_availability"],
            1.0
        );
        assert_eq!(
            m["traversal/regret_fallback_avg_opened_colors_before_action"],
            1.0
        );
        assert_eq!(
            m["traversal/regret_fallback_open_new_available_color_0"],
            2.0
        );
        assert_eq!(
            m["traversal/regret_fallback_open_new_available_color_2"],
            2.0
        );
        assert_eq!(
            m["traversal/regret_fallback_open_new_selected_color_2"],
            2.0
        );
    }
}
