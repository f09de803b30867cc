//! The validating reader: walks a `toml::Table` section by section, takes
//! each key's value (or the code default when it is missing), and checks its
//! type, range and allowed names, then the rules between keys.
//!
//! Values, types and unknown keys go through `crate::toml_read`, the reader
//! experiment files use too; what is the config's own here is the defaults,
//! `"none"` for unset optional keys, ranges, choices and the rules between
//! keys.

use super::schema::*;
use crate::game::Rules;
use crate::toml_read::{KeyError, Table};

/// Sections of the reference that configure only features lcx leaves out.
const DROPPED_SECTIONS: &[(&str, &str)] = &[
    (
        "self_play",
        "it configures the self-play league, which lcx leaves out (docs/deep-cfr.md §0)",
    ),
    (
        "inference_server",
        "it configures the shared-memory inference server, which lcx leaves out (docs/deep-cfr.md §0)",
    ),
];

const SECTIONS: &[&str] = &[
    "run",
    "rules",
    "encoding",
    "network",
    "traversal",
    "regret_matching",
    "training_weighting",
    "optimization",
    "memory",
    "checkpoint",
    "evaluation",
];

/// A problem found while reading: the key it is about, other keys involved
/// (for rules between keys), and the full message.
#[derive(Debug)]
pub(crate) struct Problem {
    key: String,
    related: Vec<String>,
    message: String,
}

impl From<KeyError> for Problem {
    fn from(e: KeyError) -> Self {
        Problem::new(e.key.clone(), e.sentence())
    }
}

impl Problem {
    fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            key: key.into(),
            related: Vec::new(),
            message: message.into(),
        }
    }

    fn with_related(mut self, keys: &[&str]) -> Self {
        self.related = keys.iter().map(|k| (*k).to_owned()).collect();
        self
    }

    /// Whether a value written at `path` could have caused this problem.
    pub(crate) fn touches(&self, path: &[String]) -> bool {
        let written = path.join(".");
        std::iter::once(&self.key)
            .chain(&self.related)
            .any(|key| key == &written || is_under(key, &written) || is_under(&written, key))
    }

    pub(crate) fn into_error(self, origin: &str) -> super::ConfigError {
        super::ConfigError::Invalid {
            origin: origin.to_owned(),
            key: self.key,
            message: self.message,
        }
    }
}

/// `a.b.c` is under `a.b`.
fn is_under(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with('.'))
}

type Read<T> = Result<T, Problem>;

/// Reads and validates a whole config document.
pub(crate) fn from_table(doc: &toml::Table) -> Read<TrainerConfig> {
    for (name, value) in doc {
        if let Some((_, why)) = DROPPED_SECTIONS.iter().find(|(s, _)| s == name) {
            return Err(Problem::new(
                name.as_str(),
                format!("section `{name}` is not supported by lcx: {why}; remove it"),
            ));
        }
        if !SECTIONS.contains(&name.as_str()) {
            return Err(Problem::new(
                name.as_str(),
                format!(
                    "unknown section `{name}` (known sections: {})",
                    SECTIONS.join(", ")
                ),
            ));
        }
        if !value.is_table() {
            return Err(Problem::new(
                name.as_str(),
                format!("`{name}` must be a table (a [{name}] section), got {value}"),
            ));
        }
    }
    let config = TrainerConfig {
        run: read_run(&mut Section::new(doc, "run"))?,
        rules: read_rules(&mut Section::new(doc, "rules"))?,
        encoding: read_encoding(&mut Section::new(doc, "encoding"))?,
        network: read_network(&mut Section::new(doc, "network"))?,
        traversal: read_traversal(&mut Section::new(doc, "traversal"))?,
        regret_matching: read_regret_matching(&mut Section::new(doc, "regret_matching"))?,
        training_weighting: read_training_weighting(&mut Section::new(doc, "training_weighting"))?,
        optimization: read_optimization(&mut Section::new(doc, "optimization"))?,
        memory: read_memory(&mut Section::new(doc, "memory"))?,
        checkpoint: read_checkpoint(&mut Section::new(doc, "checkpoint"))?,
        evaluation: read_evaluation(&mut Section::new(doc, "evaluation"))?,
    };
    check_rules_between_keys(&config)?;
    Ok(config)
}

fn read_run(s: &mut Section) -> Read<RunConfig> {
    let d = RunConfig::default();
    let c = RunConfig {
        experiment_name: s.string("experiment_name", d.experiment_name)?,
        max_iterations: s.opt_int("max_iterations", d.max_iterations, 1)?,
        max_minutes: s.opt_float("max_minutes", d.max_minutes, Bound::Positive)?,
        seed: s.int("seed", d.seed, 0)?,
        device: s.parsed("device", d.device, DeviceSpec::EXPECTED)?,
        use_amp: s.boolean("use_amp", d.use_amp)?,
        deterministic: s.boolean("deterministic", d.deterministic)?,
        keep_freed_memory: s.boolean("keep_freed_memory", d.keep_freed_memory)?,
    };
    s.finish()?;
    if c.experiment_name.trim().is_empty() || c.experiment_name.contains(['/', '\\']) {
        return Err(Problem::new(
            "run.experiment_name",
            format!(
                "`run.experiment_name` must be a non-empty name without `/` or `\\`, got {:?}",
                c.experiment_name
            ),
        ));
    }
    Ok(c)
}

fn read_rules(s: &mut Section) -> Read<Rules> {
    let d = Rules::default();
    let c = Rules {
        n_colors: s.int("n_colors", d.n_colors, 1)?,
        n_ranks: s.int("n_ranks", d.n_ranks, 1)?,
        min_rank: s.int("min_rank", d.min_rank, 1)?,
        n_handshakes: s.int("n_handshakes", d.n_handshakes, 0)?,
        hand_size: s.int("hand_size", d.hand_size, 1)?,
        expedition_penalty: s.int("expedition_penalty", d.expedition_penalty, i64::MIN)?,
        bonus_threshold: s.int("bonus_threshold", d.bonus_threshold, 1)?,
        bonus_amount: s.int("bonus_amount", d.bonus_amount, i64::MIN)?,
    };
    s.finish()?;
    Ok(c)
}

fn read_encoding(s: &mut Section) -> Read<EncodingConfig> {
    let d = EncodingConfig::default();
    let c = EncodingConfig {
        derived_playability: s.boolean("derived_playability", d.derived_playability)?,
        slot_aware_playability: s.boolean("slot_aware_playability", d.slot_aware_playability)?,
    };
    s.finish()?;
    Ok(c)
}

fn read_network(s: &mut Section) -> Read<NetworkConfig> {
    let d = NetworkConfig::default();
    let c = NetworkConfig {
        kind: s.choice("kind", d.kind)?,
        hidden_size: s.int("hidden_size", d.hidden_size, 1)?,
        num_layers: s.int("num_layers", d.num_layers, 1)?,
        activation: s.choice("activation", d.activation)?,
        color_attention_layers: s.int("color_attention_layers", d.color_attention_layers, 0)?,
        color_attention_heads: s.int("color_attention_heads", d.color_attention_heads, 1)?,
        jit: s.choice("jit", d.jit)?,
        // `native_single_row` is the key's name from before the kernel took
        // batches too; files that still say it keep meaning the same switch.
        native_forward: {
            let legacy = s.boolean("native_single_row", d.native_forward)?;
            s.boolean("native_forward", legacy)?
        },
    };
    s.finish()?;
    Ok(c)
}

fn read_traversal(s: &mut Section) -> Read<TraversalConfig> {
    let d = TraversalConfig::default();
    let c = TraversalConfig {
        traversals_per_player: s.int("traversals_per_player", d.traversals_per_player, 1)?,
        sampling_mode: s.choice("sampling_mode", d.sampling_mode)?,
        max_depth: s.opt_int("max_depth", d.max_depth, 1)?,
        max_nodes_per_traversal: s.opt_int(
            "max_nodes_per_traversal",
            d.max_nodes_per_traversal,
            1,
        )?,
        regret_matching_epsilon: s.float(
            "regret_matching_epsilon",
            d.regret_matching_epsilon,
            Bound::NonNegative,
        )?,
        outcome_sampling_epsilon: s.float(
            "outcome_sampling_epsilon",
            d.outcome_sampling_epsilon,
            Bound::Fraction,
        )?,
        outcome_sampling_value_clip: s.opt_float(
            "outcome_sampling_value_clip",
            d.outcome_sampling_value_clip,
            Bound::Positive,
        )?,
        outcome_unsampled_regret: s
            .choice("outcome_unsampled_regret", d.outcome_unsampled_regret)?,
        outcome_unsampled_first_open_prior_alpha: s.zero_only(
            "outcome_unsampled_first_open_prior_alpha",
            "the first-open prior is left out (docs/deep-cfr.md §0)",
        )?,
        cutoff_value_mode: s.choice("cutoff_value_mode", d.cutoff_value_mode)?,
        cutoff_rollouts: s.int("cutoff_rollouts", d.cutoff_rollouts, 0)?,
        cutoff_rollout_policy: s.choice("cutoff_rollout_policy", d.cutoff_rollout_policy)?,
        cutoff_rollout_max_steps: s.int(
            "cutoff_rollout_max_steps",
            d.cutoff_rollout_max_steps,
            1,
        )?,
        opponent_policy: s.choice("opponent_policy", d.opponent_policy)?,
        strategy_sample_interval: s.int(
            "strategy_sample_interval",
            d.strategy_sample_interval,
            1,
        )?,
        store_strategy_on_traverser_nodes: s.boolean(
            "store_strategy_on_traverser_nodes",
            d.store_strategy_on_traverser_nodes,
        )?,
        store_strategy_on_opponent_nodes: s.boolean(
            "store_strategy_on_opponent_nodes",
            d.store_strategy_on_opponent_nodes,
        )?,
        num_workers: s.workers("num_workers", d.num_workers)?,
        worker_chunk_size: s.int("worker_chunk_size", d.worker_chunk_size, 1)?,
        progress_every_traversals: s.int(
            "progress_every_traversals",
            d.progress_every_traversals,
            0,
        )?,
        endpoint_depth_bucket_width: s.int(
            "endpoint_depth_bucket_width",
            d.endpoint_depth_bucket_width,
            1,
        )?,
        endpoint_depth_bucket_max: s.int(
            "endpoint_depth_bucket_max",
            d.endpoint_depth_bucket_max,
            1,
        )?,
        inference_backend: s.choice("inference_backend", d.inference_backend)?,
        scheduler: s.choice("scheduler", d.scheduler)?,
        interleave_width: s.int("interleave_width", d.interleave_width, 0)?,
        interleave_max_batch: s.int("interleave_max_batch", d.interleave_max_batch, 0)?,
        interleave_refill: s.boolean("interleave_refill", d.interleave_refill)?,
        interleave_share_games: s.boolean("interleave_share_games", d.interleave_share_games)?,
        cuda_graphs: s.boolean("cuda_graphs", d.cuda_graphs)?,
    };
    s.finish()?;
    Ok(c)
}

fn read_regret_matching(s: &mut Section) -> Read<RegretMatchingConfig> {
    let d = RegretMatchingConfig::default();
    let c = RegretMatchingConfig {
        all_negative_fallback: s.choice("all_negative_fallback", d.all_negative_fallback)?,
    };
    s.finish()?;
    Ok(c)
}

fn read_training_weighting(s: &mut Section) -> Read<TrainingWeightingConfig> {
    let d = TrainingWeightingConfig::default();
    let c = TrainingWeightingConfig {
        mode: s.choice("mode", d.mode)?,
        lcfr_alpha: s.float("lcfr_alpha", d.lcfr_alpha, Bound::NonNegative)?,
        dcfr_alpha: s.float("dcfr_alpha", d.dcfr_alpha, Bound::NonNegative)?,
        // A negative exponent is meaningful (it favours old samples), so
        // only finiteness is required.
        dcfr_beta: s.float("dcfr_beta", d.dcfr_beta, Bound::Finite)?,
        dcfr_gamma: s.float("dcfr_gamma", d.dcfr_gamma, Bound::NonNegative)?,
    };
    s.finish()?;
    Ok(c)
}

fn read_optimization(s: &mut Section) -> Read<OptimizationConfig> {
    let d = OptimizationConfig::default();
    let c = OptimizationConfig {
        advantage_batch_size: s.int("advantage_batch_size", d.advantage_batch_size, 1)?,
        strategy_batch_size: s.int("strategy_batch_size", d.strategy_batch_size, 1)?,
        // 0 updates is allowed: it measures traversal alone.
        advantage_updates_per_iteration: s.int(
            "advantage_updates_per_iteration",
            d.advantage_updates_per_iteration,
            0,
        )?,
        strategy_updates_per_iteration: s.int(
            "strategy_updates_per_iteration",
            d.strategy_updates_per_iteration,
            0,
        )?,
        advantage_first_open_fraction: s.zero_only(
            "advantage_first_open_fraction",
            "first-open oversampling is left out (docs/deep-cfr.md §0)",
        )?,
        learning_rate: s.float("learning_rate", d.learning_rate, Bound::Positive)?,
        weight_decay: s.float("weight_decay", d.weight_decay, Bound::NonNegative)?,
        grad_clip: s.float("grad_clip", d.grad_clip, Bound::NonNegative)?,
        concurrent_networks: s.boolean("concurrent_networks", d.concurrent_networks)?,
        native_training: s.boolean("native_training", d.native_training)?,
        cuda_graphs: s.boolean("cuda_graphs", d.cuda_graphs)?,
    };
    s.finish()?;
    Ok(c)
}

fn read_memory(s: &mut Section) -> Read<MemoryConfig> {
    let d = MemoryConfig::default();
    let c = MemoryConfig {
        advantage_capacity: s.int("advantage_capacity", d.advantage_capacity, 1)?,
        strategy_capacity: s.int("strategy_capacity", d.strategy_capacity, 1)?,
        on_device: s.boolean("on_device", d.on_device)?,
    };
    s.finish()?;
    Ok(c)
}

fn read_checkpoint(s: &mut Section) -> Read<CheckpointConfig> {
    let d = CheckpointConfig::default();
    let c = CheckpointConfig {
        save_every: s.int("save_every", d.save_every, 0)?,
        save_latest: s.boolean("save_latest", d.save_latest)?,
        progress_interval_seconds: s.float(
            "progress_interval_seconds",
            d.progress_interval_seconds,
            Bound::NonNegative,
        )?,
        exact_resume: s.boolean("exact_resume", d.exact_resume)?,
    };
    s.finish()?;
    if c.exact_resume {
        return Err(Problem::new(
            "checkpoint.exact_resume",
            "`checkpoint.exact_resume = true` is not supported by lcx: a resume restores the \
             networks, optimisers and iteration only; memories, RNGs and the grad scaler \
             start fresh (docs/deep-cfr.md §8.6); set it to false",
        ));
    }
    Ok(c)
}

fn read_evaluation(s: &mut Section) -> Read<EvaluationConfig> {
    let d = EvaluationConfig::default();
    let c = EvaluationConfig {
        eval_every: s.int("eval_every", d.eval_every, 0)?,
        games: s.int("games", d.games, 1)?,
        opponents: s.choice_list("opponents", d.opponents)?,
        extended_eval_every: s.int("extended_eval_every", d.extended_eval_every, 0)?,
        extended_opponents: s.choice_list("extended_opponents", d.extended_opponents)?,
        max_steps: s.int("max_steps", d.max_steps, 1)?,
        on_max_steps: s.choice("on_max_steps", d.on_max_steps)?,
        batch_size: s.int("batch_size", d.batch_size, 1)?,
        device: s.parsed("device", d.device, EvalDevice::EXPECTED)?,
        num_workers: s.int("num_workers", d.num_workers, 1)?,
    };
    s.finish()?;
    Ok(c)
}

/// The rules of docs/deep-cfr.md §1.1 and §11 that involve several keys.
fn check_rules_between_keys(c: &TrainerConfig) -> Read<()> {
    // The engine's own checks (docs/deep-cfr.md §1.1 plus its capacities), after the
    // per-key ranges above gave the precise messages they can.
    if let Err(err) = c.rules.validate() {
        return Err(Problem::new("rules", format!("`rules`: {err}")));
    }

    let t = &c.traversal;
    if t.sampling_mode == SamplingMode::External
        && (t.store_strategy_on_traverser_nodes || !t.store_strategy_on_opponent_nodes)
    {
        return Err(Problem::new(
            "traversal.sampling_mode",
            "`traversal.sampling_mode = \"external\"` requires \
             `traversal.store_strategy_on_traverser_nodes = false` and \
             `traversal.store_strategy_on_opponent_nodes = true` (OpenSpiel's convention: \
             storing on traverser nodes under external sampling biases the average policy)",
        )
        .with_related(&[
            "traversal.store_strategy_on_traverser_nodes",
            "traversal.store_strategy_on_opponent_nodes",
        ]));
    }
    match t.scheduler {
        Scheduler::Interleaved => check_interleaved(t)?,
        Scheduler::Recursive => {
            if t.opponent_policy == OpponentPolicy::DiscardOnly {
                return Err(Problem::new(
                    "traversal.opponent_policy",
                    "`traversal.opponent_policy = \"discard_only\"` needs \
                     `traversal.scheduler = \"interleaved\"`; the recursive scheduler does not \
                     support it (docs/deep-cfr.md §6.1)",
                )
                .with_related(&["traversal.scheduler"]));
            }
        }
    }
    Ok(())
}

fn check_interleaved(t: &TraversalConfig) -> Read<()> {
    const WHY: &str = "with `traversal.scheduler = \"interleaved\"` (docs/deep-cfr.md §6.2)";
    let related = &["traversal.scheduler"];
    if t.sampling_mode != SamplingMode::Outcome {
        return Err(Problem::new(
            "traversal.sampling_mode",
            format!(
                "`traversal.sampling_mode` must be \"outcome\" {WHY}, got \"{}\"",
                t.sampling_mode
            ),
        )
        .with_related(related));
    }
    // Every opponent lcx supports is one the interleaved scheduler supports
    // (network, average_strategy, discard_only, heuristic_balanced), so there
    // is nothing to check for it here.
    if t.cutoff_value_mode != CutoffValueMode::ScoreDiff || t.cutoff_rollouts != 0 {
        return Err(Problem::new(
            "traversal.cutoff_value_mode",
            format!(
                "`traversal.cutoff_value_mode` must be \"score_diff\" and \
                 `traversal.cutoff_rollouts` 0 {WHY}, got \"{}\" and {}",
                t.cutoff_value_mode, t.cutoff_rollouts
            ),
        )
        .with_related(&["traversal.scheduler", "traversal.cutoff_rollouts"]));
    }
    for (key, value) in [
        ("interleave_width", t.interleave_width),
        ("interleave_max_batch", t.interleave_max_batch),
    ] {
        if value == 0 {
            return Err(Problem::new(
                format!("traversal.{key}"),
                format!("`traversal.{key}` must be an integer >= 1 {WHY}, got 0"),
            )
            .with_related(related));
        }
    }
    Ok(())
}

/// Allowed range of a floating-point key (always finite).
#[derive(Clone, Copy)]
enum Bound {
    Finite,
    Positive,
    NonNegative,
    Fraction,
}

impl Bound {
    fn describe(self) -> &'static str {
        match self {
            Bound::Finite => "a finite number",
            Bound::Positive => "a number > 0",
            Bound::NonNegative => "a number >= 0",
            Bound::Fraction => "a number from 0 to 1",
        }
    }

    fn admits(self, v: f64) -> bool {
        v.is_finite()
            && match self {
                Bound::Finite => true,
                Bound::Positive => v > 0.0,
                Bound::NonNegative => v >= 0.0,
                Bound::Fraction => (0.0..=1.0).contains(&v),
            }
    }
}

/// An integer type a key can hold, with its range for messages.
trait Int: Copy + TryFrom<i64> {
    const MAX: i128;
}
impl Int for u32 {
    const MAX: i128 = u32::MAX as i128;
}
impl Int for u64 {
    const MAX: i128 = i64::MAX as i128;
}
impl Int for i32 {
    const MAX: i128 = i32::MAX as i128;
}

static EMPTY: std::sync::LazyLock<toml::Table> = std::sync::LazyLock::new(toml::Table::new);

/// One section being read: remembers which keys were asked for, so the
/// leftovers can be reported as unknown with the list of known ones.
struct Section<'a> {
    name: &'static str,
    table: &'a toml::Table,
    known: Vec<&'static str>,
}

impl<'a> Section<'a> {
    fn new(doc: &'a toml::Table, name: &'static str) -> Self {
        let table = doc
            .get(name)
            .and_then(toml::Value::as_table)
            .unwrap_or(&EMPTY);
        Section {
            name,
            table,
            known: Vec::new(),
        }
    }

    fn path(&self, key: &str) -> String {
        format!("{}.{}", self.name, key)
    }

    /// The value at `key`, if present, and records `key` as known.
    fn get(&mut self, key: &'static str) -> Option<&'a toml::Value> {
        self.known.push(key);
        self.table.get(key)
    }

    fn wrong(&self, key: &str, expected: &str, got: &toml::Value) -> Problem {
        let path = self.path(key);
        if got
            .as_str()
            .is_some_and(|s| s.trim().eq_ignore_ascii_case(NONE))
        {
            return Problem::new(
                path.clone(),
                format!("`{path}` is not optional and cannot be none/null; it must be {expected}"),
            );
        }
        KeyError::wrong(path, expected, got).into()
    }

    fn finish(&self) -> Read<()> {
        Table::new(self.table, self.name)
            .check_keys(&self.known)
            .map_err(Problem::from)
    }

    fn boolean(&mut self, key: &'static str, default: bool) -> Read<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(other) => Err(self.wrong(key, "true or false", other)),
        }
    }

    fn string(&mut self, key: &'static str, default: String) -> Read<String> {
        match self.get(key) {
            None => Ok(default),
            Some(toml::Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.wrong(key, "a string", other)),
        }
    }

    fn int<T: Int>(&mut self, key: &'static str, default: T, min: i64) -> Read<T> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => self.int_value(key, v, min, false),
        }
    }

    fn opt_int<T: Int>(
        &mut self,
        key: &'static str,
        default: Option<T>,
        min: i64,
    ) -> Read<Option<T>> {
        match self.get(key) {
            None => Ok(default),
            Some(toml::Value::String(s)) if s.trim().eq_ignore_ascii_case(NONE) => Ok(None),
            Some(v) => self.int_value(key, v, min, true).map(Some),
        }
    }

    fn int_value<T: Int>(&self, key: &str, v: &toml::Value, min: i64, optional: bool) -> Read<T> {
        let or_none = if optional { " or \"none\"" } else { "" };
        let expected = if min == i64::MIN {
            format!("an integer{or_none}")
        } else {
            format!("an integer >= {min}{or_none}")
        };
        let toml::Value::Integer(n) = v else {
            return Err(self.wrong(key, &expected, v));
        };
        if *n < min {
            return Err(self.wrong(key, &expected, v));
        }
        T::try_from(*n).map_err(|_| {
            let expected = format!("{expected} and <= {}", T::MAX);
            self.wrong(key, &expected, v)
        })
    }

    fn float(&mut self, key: &'static str, default: f64, bound: Bound) -> Read<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => self.float_value(key, v, bound, false),
        }
    }

    fn opt_float(
        &mut self,
        key: &'static str,
        default: Option<f64>,
        bound: Bound,
    ) -> Read<Option<f64>> {
        match self.get(key) {
            None => Ok(default),
            Some(toml::Value::String(s)) if s.trim().eq_ignore_ascii_case(NONE) => Ok(None),
            Some(v) => self.float_value(key, v, bound, true).map(Some),
        }
    }

    fn float_value(&self, key: &str, v: &toml::Value, bound: Bound, optional: bool) -> Read<f64> {
        let or_none = if optional { " or \"none\"" } else { "" };
        let x = match v {
            toml::Value::Float(x) => *x,
            // Integers are fine where numbers are expected (`learning_rate = 1`).
            toml::Value::Integer(n) => *n as f64,
            other => return Err(self.wrong(key, &format!("{}{or_none}", bound.describe()), other)),
        };
        if bound.admits(x) {
            Ok(x)
        } else {
            let finite = if x.is_finite() { "" } else { "finite " };
            let desc = bound.describe().replacen("a ", &format!("a {finite}"), 1);
            Err(self.wrong(key, &format!("{desc}{or_none}"), v))
        }
    }

    /// A key lcx keeps only so reference files load: anything but 0 is
    /// refused as unsupported.
    fn zero_only(&mut self, key: &'static str, why: &str) -> Read<f64> {
        let Some(v) = self.get(key) else {
            return Ok(0.0);
        };
        let x = self.float_value(key, v, Bound::Finite, false)?;
        if x == 0.0 {
            Ok(0.0)
        } else {
            let path = self.path(key);
            Err(Problem::new(
                path.clone(),
                format!("`{path}` = {v} is not supported by lcx: {why}; it must be 0"),
            ))
        }
    }

    fn choice<E: Choice>(&mut self, key: &'static str, default: E) -> Read<E> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => choice_value(&self.path(key), v),
        }
    }

    fn choice_list<E: Choice>(&mut self, key: &'static str, default: Vec<E>) -> Read<Vec<E>> {
        let Some(v) = self.get(key) else {
            return Ok(default);
        };
        let path = self.path(key);
        let Some(items) = v.as_array() else {
            return Err(Problem::new(
                path.clone(),
                format!(
                    "`{path}` must be a list of names from: {}; got {v}",
                    E::names().join(", ")
                ),
            ));
        };
        let mut out: Vec<E> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let name = choice_value::<E>(&format!("{path}[{i}]"), item).map_err(|mut p| {
                // Report against the list's key so `--set` attribution works.
                p.related.push(path.clone());
                p
            })?;
            if out.contains(&name) {
                return Err(Problem::new(
                    path.clone(),
                    format!("`{path}` lists \"{}\" more than once", name.name()),
                ));
            }
            out.push(name);
        }
        Ok(out)
    }

    fn parsed<T: std::str::FromStr>(
        &mut self,
        key: &'static str,
        default: T,
        expected: &str,
    ) -> Read<T> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.as_str().map(str::parse::<T>) {
                Some(Ok(parsed)) => Ok(parsed),
                _ => Err(self.wrong(key, &format!("one of {expected}"), v)),
            },
        }
    }

    fn workers(&mut self, key: &'static str, default: WorkerCount) -> Read<WorkerCount> {
        const EXPECTED: &str = "an integer >= 0 or \"auto\"";
        match self.get(key) {
            None => Ok(default),
            Some(toml::Value::String(s)) if s.trim().eq_ignore_ascii_case("auto") => {
                Ok(WorkerCount::Auto)
            }
            Some(v @ toml::Value::Integer(n)) => u32::try_from(*n)
                .map(WorkerCount::Fixed)
                .map_err(|_| self.wrong(key, EXPECTED, v)),
            Some(other) => Err(self.wrong(key, EXPECTED, other)),
        }
    }
}

/// Reads one choice name at `path`.
fn choice_value<E: Choice>(path: &str, v: &toml::Value) -> Read<E> {
    let allowed = E::names().join(", ");
    let Some(text) = v.as_str() else {
        return Err(Problem::new(
            path,
            format!("`{path}` must be one of: {allowed}; got {v}"),
        ));
    };
    if let Some(found) = E::from_name(text) {
        return Ok(found);
    }
    let wanted = normalize_name(text);
    if let Some((name, why)) = E::UNSUPPORTED.iter().find(|(name, _)| *name == wanted) {
        return Err(Problem::new(
            path,
            format!("`{path}` = \"{name}\" is not supported by lcx: {why}. Allowed: {allowed}"),
        ));
    }
    Err(Problem::new(
        path,
        format!("`{path}` must be one of: {allowed}; got {v}"),
    ))
}
