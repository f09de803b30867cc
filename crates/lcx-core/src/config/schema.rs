//! The typed trainer configuration: one struct per TOML section, one enum per
//! string choice, and the code defaults.
//!
//! Code defaults are the reference's `config.py` defaults (docs/deep-cfr.md §11)
//! except where docs/deep-cfr.md §0 changes them (`traversal.opponent_policy` defaults to
//! `average_strategy`). They live only in the `Default` impls below; the
//! reader in `read.rs` takes every missing key from them.
//!
//! TOML has no null, so an unset optional key is spelled `"none"` (see
//! [`NONE`]); `to_toml` writes it that way so every resolved config shows
//! every key and reads back identically.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The TOML spelling of an unset optional key (`--set key=null` writes it).
pub const NONE: &str = "none";

/// A string-valued config choice: the accepted names, and the names the
/// reference accepts but lcx deliberately does not (docs/deep-cfr.md §0).
pub trait Choice: Sized + Copy + PartialEq + fmt::Debug + 'static {
    /// Every supported value, in the canonical spelling.
    const ALL: &'static [Self];
    /// Values of the reference that lcx rejects, with the reason.
    const UNSUPPORTED: &'static [(&'static str, &'static str)];
    /// The canonical spelling.
    fn name(self) -> &'static str;
    /// Parses a name; case, surrounding blanks and `-` for `_` are forgiven.
    fn from_name(text: &str) -> Option<Self> {
        let wanted = normalize_name(text);
        Self::ALL.iter().copied().find(|v| v.name() == wanted)
    }
    /// The supported names, for error messages.
    fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|v| v.name()).collect()
    }
}

/// Lowercases, trims and maps `-` to `_`, the way the reference normalises
/// bot names (docs/deep-cfr.md §10.4); applied to every choice so `heuristic-balanced` works.
pub(crate) fn normalize_name(text: &str) -> String {
    text.trim().to_ascii_lowercase().replace('-', "_")
}

macro_rules! choice_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
        unsupported { $( $bad:literal => $why:literal, )* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant, )+
        }

        impl Choice for $name {
            const ALL: &'static [Self] = &[ $( Self::$variant, )+ ];
            const UNSUPPORTED: &'static [(&'static str, &'static str)] = &[ $( ($bad, $why), )* ];
            fn name(self) -> &'static str {
                match self { $( Self::$variant => $text, )+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

choice_enum! {
    /// Network architecture (`network.kind`).
    pub enum NetworkKind {
        Mlp = "mlp",
    }
    unsupported {
        "color_shared" => "the colour-shared network is left out of lcx (docs/deep-cfr.md §0)",
    }
}

choice_enum! {
    /// Hidden-layer activation (`network.activation`).
    pub enum Activation {
        Relu = "relu",
        Gelu = "gelu",
    }
    unsupported {}
}

choice_enum! {
    /// How networks are executed (`network.jit`): eager, or traced to
    /// TorchScript once and run as a `CModule` (the `jit.toml` experiment).
    pub enum JitMode {
        None = "none",
        Trace = "trace",
    }
    unsupported {}
}

choice_enum! {
    /// Monte-Carlo CFR sampling scheme (`traversal.sampling_mode`).
    pub enum SamplingMode {
        Outcome = "outcome",
        External = "external",
    }
    unsupported {}
}

choice_enum! {
    /// Advantage target on legal, unsampled actions (`traversal.outcome_unsampled_regret`).
    pub enum UnsampledRegret {
        NegativeNodeValue = "negative_node_value",
        Zero = "zero",
    }
    unsupported {}
}

choice_enum! {
    /// Value of a depth or node-limit cutoff (`traversal.cutoff_value_mode`).
    pub enum CutoffValueMode {
        ScoreDiff = "score_diff",
        RandomRollout = "random_rollout",
    }
    unsupported {}
}

choice_enum! {
    /// Move choice inside cutoff playouts (`traversal.cutoff_rollout_policy`).
    pub enum RolloutPolicy {
        Random = "random",
        HeuristicBalanced = "heuristic_balanced",
    }
    unsupported {}
}

choice_enum! {
    /// Who plays the non-traverser seat (`traversal.opponent_policy`).
    pub enum OpponentPolicy {
        Network = "network",
        AverageStrategy = "average_strategy",
        DiscardOnly = "discard_only",
        HeuristicBalanced = "heuristic_balanced",
    }
    unsupported {
        "self_play_league" => "the self-play league is left out of lcx (docs/deep-cfr.md §0); use average_strategy, the default.yaml value",
    }
}

choice_enum! {
    /// Where traversal forwards run (`traversal.inference_backend`).
    pub enum InferenceBackend {
        Local = "local",
    }
    unsupported {
        "server" => "the shared-memory inference server is left out of lcx (docs/deep-cfr.md §0); workers are threads sharing the weights",
    }
}

choice_enum! {
    /// Traversal scheduler (`traversal.scheduler`), docs/deep-cfr.md §6.
    pub enum Scheduler {
        Recursive = "recursive",
        Interleaved = "interleaved",
    }
    unsupported {}
}

choice_enum! {
    /// Regret matching when no regret is positive (`regret_matching.all_negative_fallback`).
    pub enum AllNegativeFallback {
        Uniform = "uniform",
        ArgmaxTiebreak = "argmax_tiebreak",
    }
    unsupported {}
}

choice_enum! {
    /// Iteration weighting of the losses (`training_weighting.mode`).
    pub enum WeightingMode {
        None = "none",
        Lcfr = "lcfr",
        Dcfr = "dcfr",
    }
    unsupported {}
}

choice_enum! {
    /// What a timed-out evaluation game counts as (`evaluation.on_max_steps`;
    /// read by nothing, like the reference, kept for file compatibility).
    pub enum OnMaxSteps {
        ScoreDiff = "score_diff",
        Loss = "loss",
        Draw = "draw",
    }
    unsupported {}
}

choice_enum! {
    /// An evaluation opponent (docs/deep-cfr.md §10.4).
    pub enum EvalOpponent {
        Random = "random",
        DiscardOnly = "discard_only",
        HeuristicBalanced = "heuristic_balanced",
        HeuristicAggressive = "heuristic_aggressive",
        HeuristicCautious = "heuristic_cautious",
        HeuristicNoisy = "heuristic_noisy",
    }
    unsupported {}
}

/// A compute device: `auto` (CUDA when available, else CPU), `cpu`, `cuda`
/// (the default CUDA device) or `cuda:N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DeviceSpec {
    #[default]
    Auto,
    Cpu,
    Cuda,
    CudaIndex(u32),
}

impl DeviceSpec {
    /// What the parser accepts, for error messages.
    pub const EXPECTED: &'static str = "\"auto\", \"cpu\", \"cuda\" or \"cuda:N\"";
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda => f.write_str("cuda"),
            DeviceSpec::CudaIndex(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let token = text.trim().to_ascii_lowercase();
        match token.as_str() {
            "auto" => Ok(DeviceSpec::Auto),
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda),
            other => other
                .strip_prefix("cuda:")
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse::<u32>().ok())
                .map(DeviceSpec::CudaIndex)
                .ok_or_else(|| format!("expected {}", Self::EXPECTED)),
        }
    }
}

/// The evaluation device: `trainer` (whatever the trainer runs on) or an
/// explicit device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum EvalDevice {
    #[default]
    Trainer,
    Device(DeviceSpec),
}

impl EvalDevice {
    /// What the parser accepts, for error messages.
    pub const EXPECTED: &'static str = "\"trainer\", \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"";
}

impl fmt::Display for EvalDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalDevice::Trainer => f.write_str("trainer"),
            EvalDevice::Device(d) => d.fmt(f),
        }
    }
}

impl FromStr for EvalDevice {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim().eq_ignore_ascii_case("trainer") {
            return Ok(EvalDevice::Trainer);
        }
        text.parse::<DeviceSpec>()
            .map(EvalDevice::Device)
            .map_err(|_| format!("expected {}", Self::EXPECTED))
    }
}

/// Traversal worker threads: a fixed count (0 = in-process) or `auto`
/// (max(1, cpus/2), docs/deep-cfr.md §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkerCount {
    Auto,
    Fixed(u32),
}

impl Default for WorkerCount {
    fn default() -> Self {
        WorkerCount::Fixed(0)
    }
}

impl WorkerCount {
    /// The worker count to use, given the machine's logical CPUs and the
    /// number of batches (the count is capped by it when `batches > 0`).
    pub fn resolve(self, cpus: usize, batches: usize) -> usize {
        let wanted = match self {
            WorkerCount::Auto => (cpus / 2).max(1),
            WorkerCount::Fixed(n) => n as usize,
        };
        if batches > 0 {
            wanted.min(batches)
        } else {
            wanted
        }
    }
}

impl fmt::Display for WorkerCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerCount::Auto => f.write_str("auto"),
            WorkerCount::Fixed(n) => write!(f, "{n}"),
        }
    }
}

// Strings in TOML for the non-derived value types, so serialised configs
// read back through the same parsers.
macro_rules! string_serde {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
string_serde!(DeviceSpec);
string_serde!(EvalDevice);

impl Serialize for WorkerCount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            WorkerCount::Auto => s.serialize_str("auto"),
            WorkerCount::Fixed(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for WorkerCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Count(u32),
            Word(String),
        }
        match Raw::deserialize(d)? {
            Raw::Count(n) => Ok(WorkerCount::Fixed(n)),
            Raw::Word(w) if w.trim().eq_ignore_ascii_case("auto") => Ok(WorkerCount::Auto),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "expected an integer >= 0 or \"auto\", got {w:?}"
            ))),
        }
    }
}

/// Serde for optional keys: `None` is written as the string [`NONE`].
pub(crate) mod none_as_string {
    use super::NONE;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => v.serialize(s),
            None => s.serialize_str(NONE),
        }
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
    where
        T: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw<T> {
            Value(T),
            Word(String),
        }
        match Raw::<T>::deserialize(d)? {
            Raw::Value(v) => Ok(Some(v)),
            Raw::Word(w) if w.trim().eq_ignore_ascii_case(NONE) => Ok(None),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "expected a value or \"{NONE}\", got {w:?}"
            ))),
        }
    }
}

/// The whole trainer configuration (docs/deep-cfr.md §11, lcx scope of §0).
///
/// Deserialising goes through the validating reader (`read.rs`), so a
/// `TrainerConfig` obtained from serde is always valid.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct TrainerConfig {
    pub run: RunConfig,
    /// `[rules]`: the game variant (docs/deep-cfr.md §1.1), the engine's own type.
    pub rules: crate::game::Rules,
    pub encoding: EncodingConfig,
    pub network: NetworkConfig,
    pub traversal: TraversalConfig,
    pub regret_matching: RegretMatchingConfig,
    pub training_weighting: TrainingWeightingConfig,
    pub optimization: OptimizationConfig,
    pub memory: MemoryConfig,
    pub checkpoint: CheckpointConfig,
    pub evaluation: EvaluationConfig,
}

/// `[run]`: identity, length, seed and device of a training run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    pub experiment_name: String,
    /// Stop after this many iterations; `None` = no limit.
    #[serde(with = "none_as_string")]
    pub max_iterations: Option<u64>,
    /// Stop once this much wall time has passed (checked after each iteration).
    #[serde(with = "none_as_string")]
    pub max_minutes: Option<f64>,
    pub seed: u64,
    pub device: DeviceSpec,
    pub use_amp: bool,
    pub deterministic: bool,
    /// lcx: keep the memory an iteration frees for the next one instead of
    /// returning it to the kernel (glibc's mmap and trim thresholds raised,
    /// see `lcx_trainer::heap`), so that no iteration faults in its buffers
    /// afresh. Process-wide; `false` leaves the allocator as it is.
    pub keep_freed_memory: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            experiment_name: "deep_cfr".to_owned(),
            max_iterations: None,
            max_minutes: None,
            seed: 1,
            device: DeviceSpec::Auto,
            use_amp: false,
            deterministic: false,
            keep_freed_memory: true,
        }
    }
}

/// `[encoding]`: optional feature blocks (docs/deep-cfr.md §2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EncodingConfig {
    pub derived_playability: bool,
    pub slot_aware_playability: bool,
}

/// `[network]`: the MLP (docs/deep-cfr.md §3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkConfig {
    pub kind: NetworkKind,
    pub hidden_size: u32,
    pub num_layers: u32,
    pub activation: Activation,
    /// Only read by the colour-shared network, which lcx leaves out; kept
    /// so files written for the reference still load.
    pub color_attention_layers: u32,
    /// As `color_attention_layers`.
    pub color_attention_heads: u32,
    /// lcx: run the networks eagerly or as traced TorchScript.
    pub jit: JitMode,
    /// lcx: traversal forwards on the CPU (single rows of the recursive
    /// scheduler, batches of the interleaved one) run lcx's own kernel
    /// (AVX2, or AVX-512 where the CPU has it) instead of libtorch, where it
    /// applies (ReLU, eager, f32, a CPU with AVX2/FMA); `false` keeps
    /// libtorch. Read from `native_single_row` in
    /// older files.
    pub native_forward: bool,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            kind: NetworkKind::Mlp,
            hidden_size: 64,
            num_layers: 2,
            activation: Activation::Relu,
            color_attention_layers: 0,
            color_attention_heads: 4,
            jit: JitMode::None,
            native_forward: true,
        }
    }
}

/// `[traversal]`: sampling, cutoffs, opponents, scheduler and workers
/// (docs/deep-cfr.md §5, §6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TraversalConfig {
    pub traversals_per_player: u32,
    pub sampling_mode: SamplingMode,
    #[serde(with = "none_as_string")]
    pub max_depth: Option<u32>,
    #[serde(with = "none_as_string")]
    pub max_nodes_per_traversal: Option<u64>,
    pub regret_matching_epsilon: f64,
    pub outcome_sampling_epsilon: f64,
    #[serde(with = "none_as_string")]
    pub outcome_sampling_value_clip: Option<f64>,
    pub outcome_unsampled_regret: UnsampledRegret,
    /// Must stay 0: the first-open prior is left out of lcx (docs/deep-cfr.md §0).
    pub outcome_unsampled_first_open_prior_alpha: f64,
    pub cutoff_value_mode: CutoffValueMode,
    pub cutoff_rollouts: u32,
    pub cutoff_rollout_policy: RolloutPolicy,
    pub cutoff_rollout_max_steps: u32,
    pub opponent_policy: OpponentPolicy,
    pub strategy_sample_interval: u32,
    pub store_strategy_on_traverser_nodes: bool,
    pub store_strategy_on_opponent_nodes: bool,
    pub num_workers: WorkerCount,
    pub worker_chunk_size: u32,
    pub progress_every_traversals: u32,
    pub endpoint_depth_bucket_width: u32,
    pub endpoint_depth_bucket_max: u32,
    pub inference_backend: InferenceBackend,
    pub scheduler: Scheduler,
    pub interleave_width: u32,
    pub interleave_max_batch: u32,
    /// lcx: refill the interleaved window as games finish (false = the
    /// reference's waves, docs/deep-cfr.md §0).
    pub interleave_refill: bool,
    /// lcx: interleaved workers share one game queue and hand games in
    /// flight to a worker that runs out, where forwards are batch-invariant
    /// (lcx's kernel); false keeps one scheduler per chunk.
    pub interleave_share_games: bool,
    /// lcx: on a CUDA device each traversal forward of up to 1,024 rows is
    /// replayed from a CUDA graph of its network and batch-size bucket
    /// (rows rounded up to a power of two), captured once an iteration;
    /// eager networks only, no effect on a CPU. Off until a GPU shows it
    /// faster (decision 0026).
    pub cuda_graphs: bool,
}

impl Default for TraversalConfig {
    fn default() -> Self {
        TraversalConfig {
            traversals_per_player: 8,
            sampling_mode: SamplingMode::Outcome,
            max_depth: None,
            max_nodes_per_traversal: Some(10_000),
            regret_matching_epsilon: 1e-8,
            outcome_sampling_epsilon: 0.0,
            outcome_sampling_value_clip: None,
            outcome_unsampled_regret: UnsampledRegret::NegativeNodeValue,
            outcome_unsampled_first_open_prior_alpha: 0.0,
            cutoff_value_mode: CutoffValueMode::ScoreDiff,
            cutoff_rollouts: 0,
            cutoff_rollout_policy: RolloutPolicy::Random,
            cutoff_rollout_max_steps: 10_000,
            // docs/deep-cfr.md §0: the reference's config.py default is self_play_league.
            opponent_policy: OpponentPolicy::AverageStrategy,
            strategy_sample_interval: 1,
            store_strategy_on_traverser_nodes: true,
            store_strategy_on_opponent_nodes: true,
            num_workers: WorkerCount::Fixed(0),
            worker_chunk_size: 4,
            progress_every_traversals: 0,
            endpoint_depth_bucket_width: 100,
            endpoint_depth_bucket_max: 1000,
            inference_backend: InferenceBackend::Local,
            scheduler: Scheduler::Recursive,
            interleave_width: 64,
            interleave_max_batch: 128,
            interleave_refill: true,
            interleave_share_games: true,
            cuda_graphs: false,
        }
    }
}

/// `[regret_matching]` (docs/deep-cfr.md §4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegretMatchingConfig {
    pub all_negative_fallback: AllNegativeFallback,
}

impl Default for RegretMatchingConfig {
    fn default() -> Self {
        RegretMatchingConfig {
            all_negative_fallback: AllNegativeFallback::Uniform,
        }
    }
}

/// `[training_weighting]`: iteration weights of the losses (docs/deep-cfr.md §8.3–8.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainingWeightingConfig {
    pub mode: WeightingMode,
    pub lcfr_alpha: f64,
    pub dcfr_alpha: f64,
    pub dcfr_beta: f64,
    pub dcfr_gamma: f64,
}

impl Default for TrainingWeightingConfig {
    fn default() -> Self {
        TrainingWeightingConfig {
            mode: WeightingMode::None,
            lcfr_alpha: 1.0,
            dcfr_alpha: 1.5,
            dcfr_beta: 0.0,
            dcfr_gamma: 2.0,
        }
    }
}

/// `[optimization]`: batches, steps and AdamW (docs/deep-cfr.md §8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptimizationConfig {
    pub advantage_batch_size: u32,
    pub strategy_batch_size: u32,
    pub advantage_updates_per_iteration: u32,
    pub strategy_updates_per_iteration: u32,
    /// Must stay 0: first-open oversampling is left out of lcx (docs/deep-cfr.md §0).
    pub advantage_first_open_fraction: f64,
    pub learning_rate: f64,
    pub weight_decay: f64,
    /// Global gradient-norm clip; 0 = off.
    pub grad_clip: f64,
    /// lcx: without AMP the two advantage networks and the strategy network
    /// train at the same time, each on its own thread (on a CPU with a third
    /// of the cores; on a GPU each thread queues its network's kernels);
    /// `false` trains them one after the other, as the reference does. The
    /// steps of each network are the same either way.
    pub concurrent_networks: bool,
    /// lcx: on a CPU with AVX2/FMA (fp32, ReLU, not traced) training steps
    /// run on lcx's own kernel (forward, backward, clipping and AdamW over
    /// plain slices) instead of libtorch; `false` keeps libtorch. On
    /// finite values both compute the same update up to float summation
    /// order.
    pub native_training: bool,
    /// lcx: on a CUDA device each network's training step is captured once
    /// per iteration as a CUDA graph and replayed (networks not traced),
    /// instead of queueing its forty-odd kernels
    /// each step; the same steps either way. Off until a GPU shows it
    /// faster (decision 0026); no effect on a CPU.
    pub cuda_graphs: bool,
}

impl Default for OptimizationConfig {
    fn default() -> Self {
        OptimizationConfig {
            advantage_batch_size: 256,
            strategy_batch_size: 256,
            advantage_updates_per_iteration: 64,
            strategy_updates_per_iteration: 64,
            advantage_first_open_fraction: 0.0,
            learning_rate: 1e-3,
            weight_decay: 0.0,
            grad_clip: 0.0,
            concurrent_networks: true,
            native_training: true,
            cuda_graphs: false,
        }
    }
}

/// `[memory]`: reservoir capacities (docs/deep-cfr.md §7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Per player.
    pub advantage_capacity: u64,
    pub strategy_capacity: u64,
    /// lcx: on a GPU, keep a copy of each memory in device memory (about
    /// 1.4 KB a sample: 8.4 GB for the three default memories when full),
    /// brought up to date with the samples each iteration added, and
    /// gather every batch there; `false` copies each chunk of batches from
    /// the host instead. The batches are the same either way. No effect on
    /// a CPU.
    pub on_device: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            advantage_capacity: 2_000_000,
            strategy_capacity: 2_000_000,
            on_device: true,
        }
    }
}

/// `[checkpoint]` (docs/deep-cfr.md §8.6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointConfig {
    /// Write `iteration_{t:05d}` every this many iterations; 0 = never.
    pub save_every: u32,
    pub save_latest: bool,
    /// Not read by the trainer (as in the reference); kept for compatibility.
    pub progress_interval_seconds: f64,
    /// Must stay false: exact resume is not implemented (as in the reference).
    pub exact_resume: bool,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            save_every: 1,
            save_latest: true,
            progress_interval_seconds: 20.0,
            exact_resume: false,
        }
    }
}

/// `[evaluation]` (docs/deep-cfr.md §10).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvaluationConfig {
    /// Evaluate when t % eval_every = 0; 0 = never.
    pub eval_every: u32,
    pub games: u32,
    pub opponents: Vec<EvalOpponent>,
    /// Also play `extended_opponents` when t % extended_eval_every = 0; 0 = never.
    pub extended_eval_every: u32,
    pub extended_opponents: Vec<EvalOpponent>,
    pub max_steps: u32,
    pub on_max_steps: OnMaxSteps,
    pub batch_size: u32,
    pub device: EvalDevice,
    pub num_workers: u32,
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        EvaluationConfig {
            eval_every: 50,
            games: 10,
            opponents: vec![EvalOpponent::Random, EvalOpponent::HeuristicBalanced],
            extended_eval_every: 0,
            extended_opponents: Vec::new(),
            max_steps: 10_000,
            on_max_steps: OnMaxSteps::ScoreDiff,
            batch_size: 64,
            device: EvalDevice::Trainer,
            num_workers: 4,
        }
    }
}

impl EvaluationConfig {
    /// The opponents to evaluate against after iteration `t` (docs/deep-cfr.md
    /// §10.1): none unless t > 0 and eval_every divides t; the extended ones
    /// appended without duplicates when extended_eval_every also divides t.
    pub fn opponents_for_iteration(&self, t: u64) -> Vec<EvalOpponent> {
        let every = u64::from(self.eval_every);
        if every == 0 || t == 0 || !t.is_multiple_of(every) {
            return Vec::new();
        }
        let mut out = self.opponents.clone();
        let ext = u64::from(self.extended_eval_every);
        if ext > 0 && t.is_multiple_of(ext) {
            for o in &self.extended_opponents {
                if !out.contains(o) {
                    out.push(*o);
                }
            }
        }
        out
    }
}
