//! Unit tests of loading, validation messages, `--set` and round trips.

use super::*;

const DEFAULT_TOML: &str = include_str!("../../../../configs/default.toml");
const SMOKE_TOML: &str = include_str!("../../../../configs/smoke.toml");

fn sets(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// Loads `text` (plus sets) and returns the error's key and message.
fn reject(text: &str, set_args: &[&str]) -> (String, String) {
    match from_toml_str(text, "test.toml", &sets(set_args)) {
        Ok(cfg) => panic!("expected an error, got {cfg:?}"),
        Err(err) => (err.key().unwrap_or_default().to_owned(), err.to_string()),
    }
}

/// Asserts the config is rejected with a message about `key` containing
/// every fragment.
fn assert_rejected(text: &str, key: &str, fragments: &[&str]) {
    let (got_key, message) = reject(text, &[]);
    assert_eq!(got_key, key, "wrong key in: {message}");
    assert!(
        message.contains(&format!("`{key}")),
        "key not named in: {message}"
    );
    for f in fragments {
        assert!(message.contains(f), "{f:?} missing from: {message}");
    }
}

fn ok(text: &str) -> TrainerConfig {
    from_toml_str(text, "test.toml", &[]).unwrap_or_else(|e| panic!("{e}"))
}

// ---- defaults and the shipped files ----

#[test]
fn empty_file_is_the_code_defaults() {
    let cfg = ok("");
    assert_eq!(cfg, TrainerConfig::default());
    assert_eq!(load(None, &[]).unwrap(), TrainerConfig::default());
    // docs/deep-cfr.md §0: the reference's default opponent is replaced.
    assert_eq!(
        cfg.traversal.opponent_policy,
        OpponentPolicy::AverageStrategy
    );
    assert_eq!(cfg.traversal.max_nodes_per_traversal, Some(10_000));
    assert_eq!(cfg.run.max_iterations, None);
    assert_eq!(cfg.traversal.num_workers, WorkerCount::Fixed(0));
}

#[test]
fn default_file_has_the_default_yaml_values() {
    let cfg = ok(DEFAULT_TOML);
    assert_eq!(cfg.run.experiment_name, "deep-cfr-default");
    assert_eq!(cfg.run.seed, 79);
    assert_eq!(cfg.run.max_iterations, Some(1000));
    assert_eq!(cfg.run.device, DeviceSpec::Auto);
    assert!(cfg.encoding.derived_playability && cfg.encoding.slot_aware_playability);
    assert_eq!((cfg.network.hidden_size, cfg.network.num_layers), (512, 3));
    assert_eq!(cfg.traversal.traversals_per_player, 280);
    assert_eq!(cfg.traversal.max_nodes_per_traversal, Some(1000));
    assert_eq!(cfg.traversal.outcome_sampling_value_clip, Some(500.0));
    assert_eq!(cfg.traversal.scheduler, Scheduler::Interleaved);
    assert_eq!(cfg.traversal.num_workers, WorkerCount::Fixed(8));
    assert_eq!(
        cfg.regret_matching.all_negative_fallback,
        AllNegativeFallback::ArgmaxTiebreak
    );
    assert_eq!(cfg.training_weighting.mode, WeightingMode::Lcfr);
    assert_eq!(cfg.optimization.learning_rate, 1e-4);
    assert_eq!(cfg.checkpoint.save_every, 50);
    assert_eq!(cfg.evaluation.extended_opponents.len(), 3);
    assert!(cfg.validate().is_ok());
}

#[test]
fn smoke_file_is_one_tiny_cpu_iteration() {
    let cfg = ok(SMOKE_TOML);
    assert_eq!(cfg.run.max_iterations, Some(1));
    assert_eq!(cfg.run.device, DeviceSpec::Cpu);
    assert_eq!(cfg.network.hidden_size, 16);
    assert_eq!(cfg.traversal.max_depth, Some(2));
    assert_eq!(cfg.traversal.scheduler, Scheduler::Recursive);
    assert_eq!(
        cfg.traversal.opponent_policy,
        OpponentPolicy::AverageStrategy
    );
    assert_eq!(cfg.memory.strategy_capacity, 1000);
    assert_eq!(cfg.evaluation.opponents, vec![EvalOpponent::Random]);
}

#[test]
fn configs_round_trip_through_to_toml() {
    let mut unset = TrainerConfig::default();
    unset.traversal.max_nodes_per_traversal = None; // None where the default is Some
    unset.traversal.num_workers = WorkerCount::Auto;
    unset.run.device = DeviceSpec::CudaIndex(1);
    unset.evaluation.device = EvalDevice::Device(DeviceSpec::Cpu);
    for cfg in [
        ok(DEFAULT_TOML),
        ok(SMOKE_TOML),
        TrainerConfig::default(),
        unset,
    ] {
        let text = cfg.to_toml();
        let back =
            from_toml_str(&text, "round trip", &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, cfg, "{text}");
        // Serde's Deserialize goes through the same reader.
        let via_serde: TrainerConfig = toml::from_str(&text).unwrap();
        assert_eq!(via_serde, cfg);
    }
}

#[test]
fn to_toml_writes_every_key_and_unset_as_none() {
    let text = TrainerConfig::default().to_toml();
    assert!(text.contains("max_iterations = \"none\""), "{text}");
    assert!(text.contains("interleave_refill = true"), "{text}");
    assert!(text.contains("[evaluation]"), "{text}");
}

// ---- unknown keys and sections ----

#[test]
fn unknown_key_names_its_path_and_the_known_keys() {
    assert_rejected(
        "[traversal]\nfoo = 1\n",
        "traversal.foo",
        &[
            "unknown key `traversal.foo`",
            "known keys",
            "scheduler",
            "interleave_refill",
        ],
    );
}

#[test]
fn unknown_key_suggests_a_close_known_key() {
    assert_rejected(
        "[traversal]\nschedular = \"interleaved\"\n",
        "traversal.schedular",
        &["did you mean `traversal.scheduler`?"],
    );
    let (_, message) = reject("[traversal]\nzzz = 1\n", &[]);
    assert!(!message.contains("did you mean"), "{message}");
}

#[test]
fn unknown_section_is_rejected() {
    assert_rejected(
        "[travesal]\nscheduler = \"x\"\n",
        "travesal",
        &["unknown section", "traversal"],
    );
}

#[test]
fn section_must_be_a_table() {
    assert_rejected("run = 5\n", "run", &["must be a table"]);
}

#[test]
fn left_out_sections_say_lcx_does_not_support_them() {
    assert_rejected(
        "[self_play]\nmax_snapshots = 0\n",
        "self_play",
        &["not supported by lcx", "league"],
    );
    assert_rejected(
        "[inference_server]\nmax_batch = 2\n",
        "inference_server",
        &["not supported by lcx"],
    );
}

#[test]
fn syntax_errors_name_the_origin() {
    let err = from_toml_str("[run\n", "bad.toml", &[]).unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { .. }), "{err:?}");
    assert!(err.to_string().starts_with("bad.toml"), "{err}");
}

#[test]
fn missing_file_names_the_path() {
    let err = load(Some(Path::new("/nonexistent/lcx.toml")), &[]).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/lcx.toml"), "{err}");
}

// ---- types and ranges ----

#[test]
fn wrong_type_says_what_is_expected() {
    assert_rejected(
        "[optimization]\nlearning_rate = \"abc\"\n",
        "optimization.learning_rate",
        &["must be a number > 0, got \"abc\""],
    );
    assert_rejected(
        "[run]\nuse_amp = \"yes\"\n",
        "run.use_amp",
        &["true or false"],
    );
    assert_rejected(
        "[run]\nexperiment_name = 3\n",
        "run.experiment_name",
        &["a string"],
    );
    assert_rejected(
        "[traversal]\ntraversals_per_player = 1.5\n",
        "traversal.traversals_per_player",
        &["an integer >= 1", "1.5"],
    );
}

#[test]
fn out_of_range_numbers_are_rejected() {
    assert_rejected(
        "[optimization]\nlearning_rate = 0\n",
        "optimization.learning_rate",
        &["> 0, got 0"],
    );
    assert_rejected(
        "[optimization]\nweight_decay = -1e-4\n",
        "optimization.weight_decay",
        &[">= 0"],
    );
    assert_rejected(
        "[traversal]\noutcome_sampling_epsilon = 1.5\n",
        "traversal.outcome_sampling_epsilon",
        &["from 0 to 1"],
    );
    assert_rejected(
        "[traversal]\ntraversals_per_player = 0\n",
        "traversal.traversals_per_player",
        &[">= 1"],
    );
    assert_rejected(
        "[traversal]\ncutoff_rollouts = -2\n",
        "traversal.cutoff_rollouts",
        &[">= 0, got -2"],
    );
    assert_rejected(
        "[network]\nhidden_size = 5000000000\n",
        "network.hidden_size",
        &["<= 4294967295"],
    );
    assert_rejected(
        "[memory]\nstrategy_capacity = 0\n",
        "memory.strategy_capacity",
        &[">= 1"],
    );
    assert_rejected(
        "[optimization]\ngrad_clip = inf\n",
        "optimization.grad_clip",
        &["finite"],
    );
    assert_rejected(
        "[optimization]\nlearning_rate = nan\n",
        "optimization.learning_rate",
        &["finite"],
    );
    assert_rejected("[evaluation]\ngames = 0\n", "evaluation.games", &[">= 1"]);
    assert_rejected("[rules]\nn_colors = 0\n", "rules.n_colors", &[">= 1"]);
    assert_rejected(
        "[run]\nmax_minutes = 0\n",
        "run.max_minutes",
        &["> 0 or \"none\""],
    );
    assert_rejected(
        "[run]\nexperiment_name = \"a/b\"\n",
        "run.experiment_name",
        &["without `/`"],
    );
}

#[test]
fn integers_are_accepted_as_numbers() {
    assert_eq!(
        ok("[optimization]\nlearning_rate = 1\n")
            .optimization
            .learning_rate,
        1.0
    );
}

#[test]
fn none_unsets_optional_keys_only() {
    let cfg = ok("[traversal]\nmax_nodes_per_traversal = \"none\"\n");
    assert_eq!(cfg.traversal.max_nodes_per_traversal, None);
    assert_rejected("[run]\nseed = \"none\"\n", "run.seed", &["not optional"]);
}

#[test]
fn bad_choices_list_what_is_allowed() {
    assert_rejected(
        "[traversal]\nopponent_policy = \"foo\"\n",
        "traversal.opponent_policy",
        &[
            "must be one of",
            "network",
            "average_strategy",
            "discard_only",
            "heuristic_balanced",
            "\"foo\"",
        ],
    );
    assert_rejected(
        "[network]\nactivation = 1\n",
        "network.activation",
        &["relu, gelu"],
    );
}

#[test]
fn choices_forgive_case_and_dashes() {
    let cfg = ok("[traversal]\nscheduler = \"Interleaved\"\n[evaluation]\nopponents = [\"heuristic-balanced\"]\n");
    assert_eq!(cfg.traversal.scheduler, Scheduler::Interleaved);
    assert_eq!(
        cfg.evaluation.opponents,
        vec![EvalOpponent::HeuristicBalanced]
    );
}

#[test]
fn devices_parse_and_bad_ones_are_rejected() {
    assert_eq!(
        ok("[run]\ndevice = \"CUDA:1\"\n").run.device,
        DeviceSpec::CudaIndex(1)
    );
    assert_eq!(
        ok("[run]\ndevice = \"cuda\"\n").run.device,
        DeviceSpec::Cuda
    );
    assert_rejected(
        "[run]\ndevice = \"gpu\"\n",
        "run.device",
        &["cuda:N", "\"gpu\""],
    );
    assert_rejected("[run]\ndevice = \"cuda:\"\n", "run.device", &["cuda:N"]);
    assert_eq!(
        ok("[evaluation]\ndevice = \"cpu\"\n").evaluation.device,
        EvalDevice::Device(DeviceSpec::Cpu)
    );
    assert_rejected(
        "[evaluation]\ndevice = \"tpu\"\n",
        "evaluation.device",
        &["trainer"],
    );
}

#[test]
fn worker_counts_are_integers_or_auto() {
    assert_eq!(
        ok("[traversal]\nnum_workers = \"auto\"\n")
            .traversal
            .num_workers,
        WorkerCount::Auto
    );
    assert_eq!(
        ok("[traversal]\nnum_workers = 3\n").traversal.num_workers,
        WorkerCount::Fixed(3)
    );
    assert_rejected(
        "[traversal]\nnum_workers = -1\n",
        "traversal.num_workers",
        &["\"auto\""],
    );
    assert_rejected(
        "[traversal]\nnum_workers = \"many\"\n",
        "traversal.num_workers",
        &["\"auto\""],
    );
    assert_eq!(WorkerCount::Auto.resolve(16, 0), 8);
    assert_eq!(WorkerCount::Auto.resolve(1, 0), 1);
    assert_eq!(WorkerCount::Fixed(8).resolve(2, 3), 3);
}

#[test]
fn evaluation_opponent_lists_are_checked_item_by_item() {
    assert_rejected(
        "[evaluation]\nopponents = [\"random\", \"bogus\"]\n",
        "evaluation.opponents[1]",
        &["heuristic_noisy", "\"bogus\""],
    );
    assert_rejected(
        "[evaluation]\nopponents = [\"random\", \"random\"]\n",
        "evaluation.opponents",
        &["more than once"],
    );
    assert_rejected(
        "[evaluation]\nopponents = \"random\"\n",
        "evaluation.opponents",
        &["list"],
    );
}

// ---- what lcx leaves out (docs/deep-cfr.md §0) ----

#[test]
fn left_out_options_are_not_supported_by_lcx() {
    let cases = [
        ("[network]\nkind = \"color_shared\"\n", "network.kind"),
        (
            "[traversal]\nopponent_policy = \"self_play_league\"\n",
            "traversal.opponent_policy",
        ),
        (
            "[traversal]\ninference_backend = \"server\"\n",
            "traversal.inference_backend",
        ),
        (
            "[traversal]\noutcome_unsampled_first_open_prior_alpha = 0.5\n",
            "traversal.outcome_unsampled_first_open_prior_alpha",
        ),
        (
            "[optimization]\nadvantage_first_open_fraction = 0.25\n",
            "optimization.advantage_first_open_fraction",
        ),
        (
            "[checkpoint]\nexact_resume = true\n",
            "checkpoint.exact_resume",
        ),
    ];
    for (text, key) in cases {
        assert_rejected(text, key, &["not supported by lcx"]);
    }
    // Their neutral values are still accepted, so reference files load.
    ok("[traversal]\noutcome_unsampled_first_open_prior_alpha = 0.0\ninference_backend = \"local\"\n\
        [optimization]\nadvantage_first_open_fraction = 0\n[network]\nkind = \"mlp\"\n");
}

// ---- rules between keys ----

#[test]
fn external_sampling_needs_the_openspiel_storage_convention() {
    assert_rejected(
        "[traversal]\nsampling_mode = \"external\"\n",
        "traversal.sampling_mode",
        &[
            "store_strategy_on_traverser_nodes = false",
            "store_strategy_on_opponent_nodes = true",
        ],
    );
    ok("[traversal]\nsampling_mode = \"external\"\nstore_strategy_on_traverser_nodes = false\n");
}

#[test]
fn interleaved_scheduler_restrictions() {
    let base = "[traversal]\nscheduler = \"interleaved\"\n";
    assert_rejected(
        &format!("{base}sampling_mode = \"external\"\nstore_strategy_on_traverser_nodes = false\n"),
        "traversal.sampling_mode",
        &["\"outcome\"", "interleaved"],
    );
    assert_rejected(
        &format!("{base}cutoff_value_mode = \"random_rollout\"\n"),
        "traversal.cutoff_value_mode",
        &["score_diff"],
    );
    assert_rejected(
        &format!("{base}cutoff_rollouts = 4\n"),
        "traversal.cutoff_value_mode",
        &["cutoff_rollouts"],
    );
    assert_rejected(
        &format!("{base}interleave_width = 0\n"),
        "traversal.interleave_width",
        &[">= 1"],
    );
    assert_rejected(
        &format!("{base}interleave_max_batch = 0\n"),
        "traversal.interleave_max_batch",
        &[">= 1"],
    );
    for opponent in [
        "network",
        "average_strategy",
        "discard_only",
        "heuristic_balanced",
    ] {
        ok(&format!("{base}opponent_policy = \"{opponent}\"\n"));
    }
    // The recursive scheduler ignores the window settings.
    ok("[traversal]\ninterleave_width = 0\ncutoff_value_mode = \"random_rollout\"\ncutoff_rollouts = 4\n");
}

#[test]
fn recursive_scheduler_rejects_discard_only() {
    assert_rejected(
        "[traversal]\nopponent_policy = \"discard_only\"\n",
        "traversal.opponent_policy",
        &["interleaved"],
    );
}

#[test]
fn rules_are_checked_by_the_engine_too() {
    assert_rejected(
        "[rules]\nn_colors = 1\nn_ranks = 3\nn_handshakes = 0\n",
        "rules",
        &["deck_size", "hand_size"],
    );
    assert_rejected(
        "[rules]\nn_colors = 9\n",
        "rules",
        &["n_colors", "capacity"],
    );
    let cfg = ok("[rules]\nn_colors = 3\nn_ranks = 5\nn_handshakes = 1\nhand_size = 3\n");
    assert_eq!(cfg.rules, crate::game::Rules::small());
    // A --set on a rules key is named when the engine refuses the result.
    let (_, message) = reject("", &["rules.hand_size=40"]);
    assert!(
        message.starts_with("--set \"rules.hand_size=40\""),
        "{message}"
    );
}

#[test]
fn validate_checks_configs_built_in_code() {
    assert!(TrainerConfig::default().validate().is_ok());
    let mut cfg = TrainerConfig::default();
    cfg.optimization.learning_rate = -1.0;
    let err = cfg.validate().unwrap_err();
    assert_eq!(err.key(), Some("optimization.learning_rate"), "{err}");
    let mut cfg = TrainerConfig::default();
    cfg.traversal.scheduler = Scheduler::Interleaved;
    cfg.traversal.interleave_max_batch = 0;
    assert_eq!(
        cfg.validate().unwrap_err().key(),
        Some("traversal.interleave_max_batch")
    );
}

// ---- --set through load ----

#[test]
fn sets_apply_in_order_after_the_file() {
    let cfg = from_toml_str(
        SMOKE_TOML,
        "smoke.toml",
        &sets(&[
            "traversal.scheduler=interleaved",
            "optimization.learning_rate=5e-4",
            "optimization.learning_rate=2e-4",
            "evaluation.opponents=[random,discard_only]",
            "run.device=cuda:0",
        ]),
    )
    .unwrap();
    assert_eq!(cfg.traversal.scheduler, Scheduler::Interleaved);
    assert_eq!(cfg.optimization.learning_rate, 2e-4);
    assert_eq!(
        cfg.evaluation.opponents,
        vec![EvalOpponent::Random, EvalOpponent::DiscardOnly]
    );
    assert_eq!(cfg.run.device, DeviceSpec::CudaIndex(0));
    assert_eq!(cfg.network.hidden_size, 16, "file values survive");
}

#[test]
fn set_null_unsets_even_where_the_default_is_a_value() {
    let cfg = from_toml_str(
        DEFAULT_TOML,
        "default.toml",
        &sets(&[
            "run.max_iterations=null",
            "traversal.max_nodes_per_traversal=null",
        ]),
    )
    .unwrap();
    assert_eq!(cfg.run.max_iterations, None);
    assert_eq!(cfg.traversal.max_nodes_per_traversal, None);
}

#[test]
fn set_errors_are_attributed_to_the_set() {
    let (key, message) = reject(SMOKE_TOML, &["traversal.foo=1"]);
    assert_eq!(key, "traversal.foo");
    assert!(
        message.starts_with("--set \"traversal.foo=1\""),
        "{message}"
    );
    assert!(message.contains("unknown key `traversal.foo`"), "{message}");

    let (key, message) = reject("", &["optimization.learning_rate=abc"]);
    assert_eq!(key, "optimization.learning_rate");
    assert!(
        message.contains("must be a number > 0, got \"abc\""),
        "{message}"
    );

    // A rule between keys broken by a --set names that --set.
    let (_, message) = reject(
        "",
        &[
            "traversal.scheduler=interleaved",
            "traversal.interleave_width=0",
        ],
    );
    assert!(
        message.starts_with("--set \"traversal.interleave_width=0\""),
        "{message}"
    );

    // An error the file causes names the file.
    let (_, message) = reject("[run]\nseed = -1\n", &["traversal.scheduler=interleaved"]);
    assert!(message.starts_with("test.toml:"), "{message}");
}

#[test]
fn set_through_a_scalar_names_the_scalar() {
    let err = from_toml_str(SMOKE_TOML, "smoke.toml", &sets(&["run.seed.low=1"])).unwrap_err();
    assert!(matches!(err, ConfigError::Set { .. }), "{err:?}");
    assert!(err.to_string().contains("`run.seed` is a value"), "{err}");
}

#[test]
fn set_of_a_whole_section_merges_into_it() {
    let cfg = from_toml_str(
        SMOKE_TOML,
        "smoke.toml",
        &sets(&["traversal={ scheduler = \"interleaved\" }"]),
    )
    .unwrap();
    assert_eq!(cfg.traversal.scheduler, Scheduler::Interleaved);
    assert_eq!(
        cfg.traversal.max_depth,
        Some(2),
        "other keys of the section survive"
    );
}

#[test]
fn sets_apply_to_code_defaults_without_a_file() {
    let cfg = load(
        None,
        &sets(&["network.jit=trace", "traversal.interleave_refill=false"]),
    )
    .unwrap();
    assert_eq!(cfg.network.jit, JitMode::Trace);
    assert!(!cfg.traversal.interleave_refill);
}

#[test]
fn native_forward_reads_its_old_name_and_the_new_one_wins() {
    let read = |text: &str| crate::config::from_toml_str(text, "t.toml", &[]).unwrap();
    assert!(read("").network.native_forward);
    assert!(
        !read("[network]\nnative_single_row = false\n")
            .network
            .native_forward
    );
    assert!(
        read("[network]\nnative_single_row = false\nnative_forward = true\n")
            .network
            .native_forward
    );
    let set =
        crate::config::from_toml_str("", "t.toml", &sets(&["network.native_single_row=false"]))
            .unwrap();
    assert!(!set.network.native_forward);
    assert!(!TrainerConfig::default()
        .to_toml()
        .contains("native_single_row"));
}

#[test]
fn concurrent_networks_is_on_by_default_and_can_be_turned_off() {
    assert!(TrainerConfig::default().optimization.concurrent_networks);
    let off = crate::config::from_toml_str(
        "",
        "t.toml",
        &sets(&["optimization.concurrent_networks=false"]),
    )
    .unwrap();
    assert!(!off.optimization.concurrent_networks);
}

#[test]
fn cuda_graphs_are_off_by_default_and_can_be_turned_on() {
    assert!(!TrainerConfig::default().optimization.cuda_graphs);
    assert!(!TrainerConfig::default().traversal.cuda_graphs);
    let on = crate::config::from_toml_str("[optimization]\ncuda_graphs = true\n", "t.toml", &[])
        .unwrap();
    assert!(on.optimization.cuda_graphs && !on.traversal.cuda_graphs);
    let on =
        crate::config::from_toml_str("[traversal]\ncuda_graphs = true\n", "t.toml", &[]).unwrap();
    assert!(on.traversal.cuda_graphs && !on.optimization.cuda_graphs);
    let err =
        crate::config::from_toml_str("[optimization]\ncuda_graphs = \"yes\"\n", "t.toml", &[])
            .unwrap_err()
            .to_string();
    assert!(err.contains("cuda_graphs"), "{err}");
}

#[test]
fn native_training_is_on_by_default_and_can_be_turned_off() {
    assert!(TrainerConfig::default().optimization.native_training);
    let off =
        crate::config::from_toml_str("[optimization]\nnative_training = false\n", "t.toml", &[])
            .unwrap();
    assert!(!off.optimization.native_training);
    let err = crate::config::from_toml_str("[optimization]\nnative_training = 1\n", "t.toml", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("native_training"), "{err}");
}

#[test]
fn keep_freed_memory_is_on_by_default_and_can_be_turned_off() {
    assert!(TrainerConfig::default().run.keep_freed_memory);
    let off = crate::config::from_toml_str("", "t.toml", &sets(&["run.keep_freed_memory=false"]))
        .unwrap();
    assert!(!off.run.keep_freed_memory);
    let err = crate::config::from_toml_str("[run]\nkeep_freed_memory = \"yes\"\n", "t.toml", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("keep_freed_memory"), "{err}");
}
