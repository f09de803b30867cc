//! Reading an experiment file: its keys, the typed getters over the shared
//! `toml_read` reader (errors name this file and the key path), the top-level
//! walk into a [`Plan`], `[executor]`, and the report keys (`columns`,
//! `gate`, `guard`).

use super::*;

pub(super) const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "workload",
    "config",
    "iterations",
    "warmup",
    "repeats",
    "baseline",
    "set",
    "order",
    "arms",
    "matrix",
    "columns",
    "gate",
    "notes",
    "variable_iterations",
    "guard",
    "repository",
    "build",
    "executor",
    "measurement",
    "timing",
    "host_lock",
    "timeout",
    "setup",
    "prepare",
    "cleanup",
];
/// The `[executor]` keys that apply to the whole experiment (an arm may not
/// give them); the rest are `ARM_EXECUTOR_KEYS`.
pub(super) const EXPERIMENT_EXECUTOR_KEYS: &[&str] =
    &["kind", "max_parallel", "placement", "requeue"];
pub(super) const GUARD_KEYS: &[&str] = &[
    "metric",
    "margin",
    "direction",
    "arm",
    "baseline",
    "fold",
    "paired",
];
pub(super) const ARM_KEYS: &[&str] = &[
    "name",
    "label",
    "set",
    "requires",
    "command",
    "env",
    "args",
    "variable_iterations",
    "revision",
    "build",
    "executor",
    "timing",
    "cpus",
    "timeout",
    "setup",
    "prepare",
    "cleanup",
];
/// The `[executor]` keys an arm may give for its own cells.
pub(super) const ARM_EXECUTOR_KEYS: &[&str] = &[
    "partition",
    "account",
    "qos",
    "time",
    "cpus_per_task",
    "mem",
    "gres",
    "constraint",
    "extra",
];
pub(super) const COLUMN_KEYS: &[&str] = &["metric", "label", "show", "direction", "fold"];
pub(super) const REPEATS_KEYS: &[&str] = &["min", "max", "precision"];
pub(super) const MEASUREMENT_KEYS: &[&str] = &[
    "max_foreign_cpu",
    "rerun_contended",
    "wait_for_quiet",
    "pin",
];
pub(super) const GATE_KEYS: &[&str] =
    &["metric", "min_speedup", "max_slowdown", "min_effect", "arm"];

/// The longest experiment name (characters): it travels in environments,
/// job names and file names.
pub const MAX_NAME: usize = 200;

/// The longest duration a file may give (`timeout`, `wait_for_quiet`): 30
/// days, in seconds. Nothing lcx measures runs longer, and a bound keeps
/// every duration convertible (a `1e308` would panic the runner).
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;

/// Why `value` cannot go into a Slurm option line or a cell's environment:
/// a control character (a line break, say); `None` when it can.
fn not_one_line(value: &str) -> Option<String> {
    let c = value.chars().find(|c| c.is_control())?;
    Some(format!(
        "contains the control character {c:?}; it must be one line, as it is \
         written into Slurm job scripts' option lines and cells' environments"
    ))
}

/// What an experiment name must be (a file's `name`, `lcx rename`'s new
/// one): it goes into every cell's environment, Slurm job names and archive
/// file names, so not empty, one line, and at most [`MAX_NAME`] characters.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if let Some(problem) = not_one_line(name) {
        return Err(problem);
    }
    check_visible(name)?;
    let n = name.chars().count();
    if n > MAX_NAME {
        return Err(format!("is {n} characters long; at most {MAX_NAME}"));
    }
    Ok(())
}

/// Whether `c` shows nothing by itself: white space, and the code points
/// Unicode marks default-ignorable (zero-width spaces and joiners, bidi
/// marks, variation selectors, tags, fillers).
fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || matches!(c,
            '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}'..='\u{1160}' | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
            | '\u{ffa0}' | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

/// What a name or a label must be (an experiment's name, a label, a metric
/// a file names): text a reader can see. No control character (a terminal
/// would obey it), no bidi control (it reorders what is shown around it:
/// `evil\u{202e}txt.exe`), and not only invisible characters (a name of one
/// zero-width space looks like no name at all).
pub fn check_visible(text: &str) -> Result<(), String> {
    if let Some(c) = crate::escape::first_hidden(text) {
        return Err(format!(
            "contains {}, a control character; names and labels are visible text",
            crate::escape::terminal_line(&c.to_string())
        ));
    }
    if text.chars().all(is_invisible) {
        return Err("has no visible character".into());
    }
    Ok(())
}

/// Whether `min_effect` is a fraction in [0, 1): the one rule for a file's
/// `gate.min_effect` and every `--min-effect` flag.
pub fn check_min_effect(min_effect: f64) -> Result<(), String> {
    if (0.0..1.0).contains(&min_effect) {
        Ok(())
    } else {
        Err(format!(
            "expected a fraction in [0, 1), e.g. 0.05 for 5 %, found {min_effect}"
        ))
    }
}

/// The most arms one experiment may have (a `[matrix]` multiplies them):
/// every arm is a config, a report row and cells.
pub const MAX_ARMS: usize = 1_000;

/// What an environment variable's name must be, in an arm's `env` and a
/// `[matrix]` `env.NAME` key alike: not empty, no `=` (it would end the
/// name), and no control or bidi character.
pub(super) fn check_env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('=') {
        return Err("an environment variable name must be non-empty and hold no `=`".into());
    }
    if let Some(c) = crate::escape::first_hidden(name) {
        return Err(format!(
            "an environment variable name holds no control character (found {})",
            crate::escape::terminal_line(&c.to_string())
        ));
    }
    Ok(())
}

/// A raw arm before matrix expansion and config resolution.
#[derive(Clone)]
pub(super) struct RawArm {
    pub(super) name: String,
    pub(super) label: String,
    pub(super) key: String,
    pub(super) requires: Option<Requirement>,
    pub(super) set: Vec<String>,
    pub(super) args: Vec<String>,
    pub(super) env: BTreeMap<String, String>,
    pub(super) command: Option<Vec<String>>,
    pub(super) variable_iterations: bool,
    /// Whether the arm said `variable_iterations` itself (it wins over the
    /// file's).
    pub(super) variable_set: bool,
    /// `timing = "process"`: lcx times each run of the command (`None`:
    /// the arm did not say; the file's applies).
    pub(super) timed: Option<bool>,
    /// `command` as the file gave it when it is a string (its argv is then
    /// `sh -c STRING`): a timed arm runs plain words without the shell,
    /// and has the shell's start-up taken off otherwise (`shell`).
    pub(super) command_string: Option<String>,
    /// `timeout` (`None`: the arm did not say; the file's applies).
    pub(super) timeout: Option<f64>,
    /// `setup`, `prepare`, `cleanup` (each `None`: the file's applies).
    pub(super) hooks: Hooks,
    /// `revision` (from the arm, the matrix or `--revision`).
    pub(super) revision: Option<String>,
    /// The arm's own `build` (else the file's).
    pub(super) build: Option<String>,
    /// `[arms.executor]`.
    pub(super) slurm: SlurmOverrides,
    /// `cpus`.
    pub(super) cpus: Option<CpuSet>,
}

/// One `[matrix]` key: (key, short name for arm names, values as (raw
/// text, TOML text)).
pub(super) type Axis = (String, String, Vec<(String, String)>);

pub(super) struct Reader<'a> {
    pub(super) path: &'a Path,
}

/// The shared reader's view of `table`, whose keys are written `{prefix}key`
/// (`prefix` is empty or ends in a dot).
pub(super) fn at<'t>(table: &'t toml::Table, prefix: &'t str) -> Table<'t> {
    Table::new(table, prefix.strip_suffix('.').unwrap_or(prefix))
}

impl Reader<'_> {
    pub(super) fn err(&self, key: impl Into<String>, message: impl Into<String>) -> PlanError {
        PlanError::Invalid {
            path: self.path.to_path_buf(),
            key: key.into(),
            message: message.into(),
        }
    }

    /// A shared reader's error, with this file.
    pub(super) fn key_error(&self, e: KeyError) -> PlanError {
        self.err(e.key.clone(), e.message())
    }

    /// What a getter of the shared reader returned (`at(table,
    /// prefix).string(key)` …), its error with this file.
    pub(super) fn read<T>(&self, value: toml_read::Read<T>) -> Result<T, PlanError> {
        value.map_err(|e| self.key_error(e))
    }

    pub(super) fn check_keys(
        &self,
        table: &toml::Table,
        prefix: &str,
        allowed: &[&str],
    ) -> Result<(), PlanError> {
        at(table, prefix)
            .check_keys(allowed)
            .map_err(|e| self.key_error(e))
    }

    /// Strings that become argv or environment entries cannot hold a NUL
    /// byte (the child could not be started); refuse them with the file.
    pub(super) fn no_nul(&self, key: impl Into<String>, value: &str) -> Result<(), PlanError> {
        if value.contains('\0') {
            return Err(self.err(
                key,
                "contains a NUL byte, which no command line or environment can carry",
            ));
        }
        Ok(())
    }

    /// A value written into a job script's `#SBATCH` lines (an option, the
    /// job name): one line, or it could end the line and run as a command.
    pub(super) fn one_line(&self, key: impl Into<String>, value: &str) -> Result<(), PlanError> {
        match not_one_line(value) {
            Some(problem) => Err(self.err(key, problem)),
            None => Ok(()),
        }
    }

    pub(super) fn revision_text(&self, key: &str, value: &str) -> Result<String, PlanError> {
        check_revision(value).map_err(|m| self.err(key, m))
    }

    /// `build` runs a command arm's build in its revision's checkout; lcx
    /// workloads always build with cargo.
    pub(super) fn check_build(
        &self,
        key: &str,
        build: &str,
        workload: Workload,
    ) -> Result<(), PlanError> {
        if workload.uses_config() {
            return Err(self.err(
                key,
                format!(
                    "a {} arm at a revision is built with `cargo build --release --locked`; \
                     `build` is for command arms",
                    workload.as_str()
                ),
            ));
        }
        if build.trim().is_empty() {
            return Err(self.err(key, "must not be empty"));
        }
        self.no_nul(key, build)
    }

    pub(super) fn count(
        &self,
        table: &toml::Table,
        key: &str,
        min: i64,
    ) -> Result<Option<u32>, PlanError> {
        let Some(value) = table.get(key) else {
            return Ok(None);
        };
        // Bounded above only by u32, which the message names only when that
        // is the bound crossed.
        let n = self.read(toml_read::integer(key, value, min, i64::MAX))?;
        u32::try_from(n).map(Some).map_err(|_| {
            let expected = format!("an integer from {min} to {}", u32::MAX);
            self.key_error(KeyError::wrong(key, expected, value))
        })
    }

    /// `set` lists: each entry must at least look like `key=value`; the
    /// config reader checks keys and values when the arm is resolved.
    pub(super) fn sets(
        &self,
        table: &toml::Table,
        key: &str,
        prefix: &str,
    ) -> Result<Vec<String>, PlanError> {
        let sets = self.read(at(table, prefix).strings(key))?;
        for (i, set) in sets.iter().enumerate() {
            self.no_nul(format!("{prefix}{key}[{i}]"), set)?;
            if let Err(e) = crate::config::Set::parse(set) {
                return Err(self.err(format!("{prefix}{key}[{i}]"), e.to_string()));
            }
        }
        Ok(sets)
    }

    pub(super) fn tables<'t>(
        &self,
        table: &'t toml::Table,
        key: &str,
    ) -> Result<Vec<&'t toml::Table>, PlanError> {
        match table.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    toml::Value::Table(t) => Ok(t),
                    other => Err(self.key_error(KeyError::wrong(
                        format!("{key}[{i}]"),
                        "a table",
                        other,
                    ))),
                })
                .collect(),
            Some(other) => Err(self.key_error(KeyError::wrong(
                key,
                format!("an array of tables ([[{key}]])"),
                other,
            ))),
        }
    }

    pub(super) fn plan(&self, t: &toml::Table, cli: &Overrides) -> Result<Plan, PlanError> {
        let cli_set = cli.sets.as_slice();
        self.check_keys(t, "", TOP_KEYS)?;
        for set in cli_set {
            crate::config::Set::parse(set).map_err(PlanError::CliSet)?;
        }
        let name = self
            .read(at(t, "").string("name"))?
            .ok_or_else(|| self.err("name", "missing (every experiment needs a name)"))?;
        check_name(&name).map_err(|m| self.err("name", m))?;
        let description = self
            .read(at(t, "").string("description"))?
            .unwrap_or_default();
        let notes = self.read(at(t, "").string("notes"))?.unwrap_or_default();
        let workload_text = self.read(at(t, "").string("workload"))?.ok_or_else(|| {
            self.err(
                "workload",
                "missing (expected train, bench-forward, bench-trainer or command)",
            )
        })?;
        let workload = Workload::parse(&workload_text).ok_or_else(|| {
            self.err(
                "workload",
                format!(
                    "unknown workload `{workload_text}` (expected train, bench-forward, bench-trainer or command)"
                ),
            )
        })?;
        let iterations = match cli.iterations {
            Some(0) => {
                return Err(PlanError::Flag {
                    flag: "--iterations",
                    message: "expected an integer ≥ 1".into(),
                })
            }
            Some(n) => Some(n),
            // `--runs` counts the runs after the warm-up instead.
            None if cli.runs.is_some() => None,
            None => Some(
                self.count(t, "iterations", 1)?
                    .ok_or_else(|| self.err("iterations", "missing (expected an integer ≥ 1)"))?,
            ),
        };
        let (warmup, warmup_auto) = match cli.warmup.as_deref() {
            Some("auto") => (0, true),
            Some(w) => match w.parse::<u32>() {
                Ok(n) => (n, false),
                Err(_) => {
                    return Err(PlanError::Flag {
                        flag: "--warmup",
                        message: format!("expected an integer ≥ 0 or `auto`, found `{w}`"),
                    })
                }
            },
            None => {
                let auto = matches!(t.get("warmup"), Some(toml::Value::String(w)) if w == "auto");
                if let Some(toml::Value::String(w)) = t.get("warmup") {
                    if w != "auto" {
                        return Err(self.err(
                            "warmup",
                            format!("expected an integer ≥ 0 or \"auto\", found \"{w}\""),
                        ));
                    }
                }
                let n = if auto {
                    0
                } else {
                    self.count(t, "warmup", 0)?.unwrap_or(0)
                };
                (n, auto)
            }
        };
        // Without `iterations`, `--runs` was given.
        let iterations = match iterations {
            Some(n) => n,
            None => runs_after_warmup(cli.runs.unwrap_or(0), warmup, warmup_auto)?,
        };
        if warmup >= iterations {
            let message = format!(
                "warm-up ({warmup}) must be smaller than iterations ({iterations}), \
                 or no iteration would be left for statistics"
            );
            return Err(match (cli.warmup.is_some(), cli.iterations.is_some()) {
                (true, _) => PlanError::Flag {
                    flag: "--warmup",
                    message,
                },
                (false, true) => PlanError::Flag {
                    flag: "--iterations",
                    message,
                },
                _ => self.err("warmup", message),
            });
        }
        let (repeats, adaptive) = match (cli.repeats, t.get("repeats")) {
            (Some(n), _) if !(1..=MAX_REPEATS).contains(&n) => {
                return Err(PlanError::Flag {
                    flag: "--repeats",
                    message: format!("expected an integer from 1 to {MAX_REPEATS}"),
                })
            }
            (Some(n), _) => (n, None),
            (None, repeats) => match repeats {
                Some(toml::Value::Table(r)) => {
                    self.check_keys(r, "repeats.", REPEATS_KEYS)?;
                    let count = |key: &str| -> Result<u32, PlanError> {
                        match r.get(key) {
                            Some(toml::Value::Integer(n))
                                if *n >= 1 && *n <= i64::from(MAX_REPEATS) =>
                            {
                                Ok(*n as u32)
                            }
                            _ => Err(self.err(
                                format!("repeats.{key}"),
                                format!("expected an integer from 1 to {MAX_REPEATS}"),
                            )),
                        }
                    };
                    let (min, max) = (count("min")?, count("max")?);
                    if min > max {
                        return Err(self.err("repeats.min", "must not exceed repeats.max"));
                    }
                    let precision = self
                        .read(at(r, "repeats.").number("precision"))?
                        .filter(|p| *p > 0.0 && *p < 1.0)
                        .ok_or_else(|| {
                            self.err(
                            "repeats.precision",
                            "expected a fraction in (0, 1), e.g. 0.03 for intervals within ±3 %",
                        )
                        })?;
                    (
                        max,
                        Some(Adaptive {
                            min,
                            max,
                            precision,
                        }),
                    )
                }
                _ => match self.count(t, "repeats", 1)?.unwrap_or(1) {
                    n if n > MAX_REPEATS => {
                        return Err(self.err(
                            "repeats",
                            format!("expected an integer from 1 to {MAX_REPEATS}"),
                        ))
                    }
                    n => (n, None),
                },
            },
        };
        let order_text = self.read(at(t, "").string("order"))?;
        if adaptive.is_some() && order_text.as_deref() == Some("sequential") {
            return Err(self.err(
                "order",
                "adaptive repeats run interleaved rounds (A B A B …); remove `order = \"sequential\"`",
            ));
        }
        let order = match order_text.as_deref() {
            None | Some("interleaved") => Order::Interleaved,
            Some("sequential") => Order::Sequential,
            Some(other) => {
                return Err(self.err(
                    "order",
                    format!("unknown order `{other}` (expected interleaved or sequential)"),
                ))
            }
        };
        let base_dir = self.base_dir();
        let config = match self.read(at(t, "").string("config"))? {
            None => None,
            Some(_) if !workload.uses_config() => {
                return Err(self.err(
                    "config",
                    "a command workload takes no trainer config (remove `config`)",
                ))
            }
            Some(c) if c.trim().is_empty() => return Err(self.err("config", "must not be empty")),
            Some(c) => Some(normalize(&base_dir.join(c))),
        };
        let file_set = self.sets(t, "set", "")?;
        if !workload.uses_config() && !file_set.is_empty() {
            return Err(self.err(
                "set",
                "a command workload has no trainer config to set (use an arm's `env` instead)",
            ));
        }
        if !workload.uses_config() && !cli_set.is_empty() {
            return Err(PlanError::CliSet(SetError {
                arg: cli_set[0].clone(),
                message: format!(
                    "{}: a command workload has no trainer config to set",
                    self.path.display()
                ),
            }));
        }

        let variable_iterations = self.read(at(t, "").boolean("variable_iterations"))?;
        if variable_iterations.is_some() && workload.uses_config() {
            return Err(self.err(
                "variable_iterations",
                "only command arms may emit a variable number of lines (lcx workloads emit \
                 exactly `iterations`)",
            ));
        }
        let mut raw_arms = self.arms(t, workload)?;
        let timed = self.timing(t, "", workload)?;
        let timeout = self.timeout(t, "")?;
        let hooks = self.hooks(t, "")?;
        for arm in raw_arms.iter_mut() {
            arm.timed = arm.timed.or(timed);
            arm.timeout = arm.timeout.or(timeout);
            arm.hooks = std::mem::take(&mut arm.hooks).or(&hooks);
        }
        if variable_iterations == Some(true) {
            for arm in raw_arms.iter_mut().filter(|a| !a.variable_set) {
                arm.variable_iterations = true;
            }
        }
        let raw_arms = raw_arms;
        if raw_arms.len() > MAX_ARMS {
            return Err(self.err(
                "arms",
                format!(
                    "has {} arms; at most {MAX_ARMS} in one experiment",
                    raw_arms.len()
                ),
            ));
        }
        let arms = self.expand_matrix(t, workload, raw_arms)?;
        // The file's default baseline is its first arm, subset or not.
        let file_baseline = arms.first().map(|a| a.name.clone());
        let mut arms = self.select_arms(t, &cli.arms, arms, file_baseline.as_deref())?;
        for (name, rev) in &cli.revisions {
            let rev = check_revision(rev).map_err(|message| PlanError::Flag {
                flag: "--revision",
                message: format!("{name}={rev}: {message}"),
            })?;
            let names = arms
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            match arms.iter_mut().find(|a| &a.name == name) {
                Some(arm) => arm.revision = Some(rev),
                None => {
                    return Err(PlanError::Flag {
                        flag: "--revision",
                        message: format!(
                            "`{name}` names no arm of {} (arms: {names})",
                            self.path.display(),
                        ),
                    })
                }
            }
        }
        if let Some(probe) = &cli.probe {
            arms = self.probe_arms(arms, probe)?;
        }
        let repository = match self.read(at(t, "").string("repository"))? {
            None => base_dir.clone(),
            Some(r) if r.trim().is_empty() => {
                return Err(self.err("repository", "must not be empty"))
            }
            Some(r) => normalize(&base_dir.join(r)),
        };
        let file_build = self.read(at(t, "").string("build"))?;
        if let Some(b) = &file_build {
            self.check_build("build", b, workload)?;
        }
        if let Some(arm) = arms
            .iter()
            .find(|a| a.build.is_some() && a.revision.is_none())
        {
            return Err(self.err(
                format!("{}.build", arm.key),
                "`build` runs in the checkout of the arm's `revision`, and this arm has none",
            ));
        }
        let arms = arms;
        self.check_set_precedence(workload, &file_set, cli_set, &arms)?;
        if arms.is_empty() {
            return Err(self.err(
                "arms",
                "no arms: give at least one [[arms]] table or a [matrix]",
            ));
        }
        let mut seen = BTreeSet::new();
        for arm in &arms {
            if !seen.insert(arm.name.as_str()) {
                return Err(self.err(
                    arm.key.clone(),
                    "duplicate arm name; arm names must be unique",
                ));
            }
        }
        let baseline = match self.read(at(t, "").string("baseline"))? {
            // A probe's baseline is its `good` arm, whatever the file's is.
            _ if cli.probe.is_some() => "good".to_string(),
            None => file_baseline.unwrap_or_else(|| arms[0].name.clone()),
            Some(b) if seen.contains(b.as_str()) => b,
            Some(b) => {
                return Err(self.err(
                    "baseline",
                    format!(
                        "`{b}` names no arm (arms: {})",
                        arms.iter()
                            .map(|a| a.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ))
            }
        };
        let columns = self.columns(t)?;
        let (gate, guards) = match &cli.probe {
            // The file's gate and guards name its arms and its question.
            Some(_) => (None, Vec::new()),
            None => (
                self.gate(t, &seen, &baseline)?,
                self.guards(t, &seen, &baseline)?,
            ),
        };
        if let Some(g) = &gate {
            let concerned =
                |a: &RawArm| a.name == baseline || g.arm.as_ref().is_none_or(|arm| *arm == a.name);
            self.check_written(
                workload,
                "gate.metric",
                &g.metric,
                arms.iter().filter(|a| concerned(a)),
            )?;
        }
        for (i, (g, _)) in guards.iter().enumerate() {
            let compared_with = g.baseline.as_deref().unwrap_or(&baseline);
            let concerned = |a: &RawArm| {
                a.name == compared_with || g.arm.as_ref().is_none_or(|arm| *arm == a.name)
            };
            self.check_written(
                workload,
                &format!("guard[{i}].metric"),
                &g.metric,
                arms.iter().filter(|a| concerned(a)),
            )?;
        }
        let (mut columns, guards) = self.agree_folds(columns, guards)?;
        if let Some(probe) = &cli.probe {
            self.probe_column(&mut columns, probe);
        }
        for (i, g) in guards.iter().enumerate() {
            let Some(d) = g.direction else { continue };
            if let Some(c) = columns
                .iter()
                .position(|c| c.metric == g.metric && c.direction.is_some_and(|x| x != d))
            {
                return Err(self.err(
                    format!("guard[{i}].direction"),
                    format!(
                        "disagrees with columns[{c}].direction on `{}`: a metric has one better side",
                        g.metric
                    ),
                ));
            }
        }
        // A gate or guard judges its metric: not one the file says is
        // never judged, and not a count of work without a direction.
        let undirected = |metric: &str| {
            columns
                .iter()
                .any(|c| c.metric == metric && c.direction == Some(Direction::Neither))
        };
        if let Some(g) = &gate {
            if undirected(&g.metric) {
                return Err(self.err(
                    "gate.metric",
                    format!(
                        "`{}` has `direction = \"none\"` in [[columns]]: a gate judges its metric",
                        g.metric
                    ),
                ));
            }
        }
        for (i, g) in guards.iter().enumerate() {
            let neither = crate::metrics::lookup(&g.metric)
                .is_some_and(|m| m.better == crate::metrics::Better::Neither);
            if undirected(&g.metric) || (neither && g.direction.is_none()) {
                return Err(self.err(
                    format!("guard[{i}].direction"),
                    format!(
                        "`{}` has no better side (a count of the work); say `direction = \"lower\"` or `\"higher\"` for the guard to judge it",
                        g.metric
                    ),
                ));
            }
        }

        let executor = self.executor(t, cli.executor.as_deref())?;
        let host_lock = self.read(at(t, "").boolean("host_lock"))?.unwrap_or(true);
        if let (Executor::Slurm(o), Some(_)) = (&executor, &adaptive) {
            if o.max_parallel > 1 {
                return Err(self.err(
                    "executor.max_parallel",
                    "adaptive repeats decide after each round whether to run another, so \
                     rounds cannot be submitted ahead; give `repeats` a number or use \
                     max_parallel = 1",
                ));
            }
        }
        let measurement = self.measurement(t)?;
        // One source of a cell's CPUs: an arm's own `cpus` beside `pin`
        // would leave one of them silently unheeded.
        if let Some(arm) = arms.iter().find(|a| a.cpus.is_some()) {
            if measurement.pin {
                return Err(self.err(
                    format!("{}.cpus", arm.key),
                    "[measurement] pin = true already gives every arm the same CPUs; use one \
                     of the two",
                ));
            }
        }
        if let Executor::Slurm(_) = &executor {
            // A hook runs where the runner runs; a Slurm cell runs on a node
            // it does not reach, so a `prepare` there would prepare nothing.
            let file_hook = Hooks::KEYS.into_iter().find(|k| t.contains_key(*k));
            let arm_hook = || {
                arms.iter().find_map(|a| {
                    Hooks::KEYS
                        .into_iter()
                        .find(|k| a.hooks.get(k).is_some())
                        .map(|k| format!("{}.{k}", a.key))
                })
            };
            if let Some(key) = file_hook.map(str::to_string).or_else(arm_hook) {
                return Err(self.err(
                    key,
                    "setup/prepare/cleanup run on the runner's host, and Slurm cells run on \
                     the cluster's nodes; run the step in the command itself (or in `build`)",
                ));
            }
            let pinned = arms.iter().find(|a| a.cpus.is_some());
            if let Some(arm) = pinned {
                return Err(self.err(
                    format!("{}.cpus", arm.key),
                    "Slurm binds a job's CPUs itself (cpus_per_task, or `--cpu-bind` in \
                     `extra`); `cpus` pins local cells",
                ));
            }
            if measurement.pin {
                return Err(self.err(
                    "measurement.pin",
                    "Slurm binds a job's CPUs itself (cpus_per_task, or `--cpu-bind` in \
                     `extra`); `pin` pins local cells",
                ));
            }
        }
        let (name, adaptive) = match &cli.probe {
            // A probe runs a fixed number of repeats under a name of its own.
            Some(_) => (format!("{name}-bisect"), None),
            None => (name, adaptive),
        };
        let mut plan = Plan {
            executor,
            host_lock,
            name,
            description,
            workload,
            file: normalize(&absolute(self.path)),
            config,
            iterations,
            warmup,
            warmup_auto,
            repeats,
            adaptive,
            baseline,
            order,
            file_set,
            cli_set: cli_set.to_vec(),
            cli_flags: cli.flag_words(),
            arms: Vec::with_capacity(arms.len()),
            columns,
            gate,
            guards,
            notes,
            measurement,
        };
        for raw in arms {
            let revision = raw.revision.clone().map(|asked| Revision {
                asked,
                repository: repository.clone(),
                build: raw.build.clone().or_else(|| file_build.clone()),
                ..Revision::default()
            });
            let arm = self.resolve_arm(&plan, raw, &base_dir, revision)?;
            plan.arms.push(arm);
        }
        Ok(plan)
    }

    /// A gate's or guard's metric on a built-in workload is one the workload
    /// writes: otherwise every cell would run and the check still end
    /// inconclusive. Checked when one of the arms it compares (`concerned`)
    /// runs this lcx; arms at a revision run that revision's lcx, whose
    /// names may differ. `command` arms write whatever they write, except
    /// that arms lcx times (`timing = "process"`, this lcx's timer whatever
    /// their revision) write its four `process/*` names and nothing else.
    pub(super) fn check_written<'a>(
        &self,
        workload: Workload,
        key: &str,
        metric: &str,
        concerned: impl Iterator<Item = &'a RawArm>,
    ) -> Result<(), PlanError> {
        let concerned: Vec<&RawArm> = concerned.collect();
        let timed = !concerned.is_empty() && concerned.iter().all(|a| a.timed == Some(true));
        let (writer, who) = match workload.writers() {
            Some(writer) if concerned.iter().any(|a| a.revision.is_none()) => {
                (writer, format!("the {} workload", workload.as_str()))
            }
            None if timed => (
                crate::metrics::Writers::PROCESS,
                "a command lcx times (`timing = \"process\"`)".to_string(),
            ),
            _ => return Ok(()),
        };
        if crate::metrics::writes(writer, metric) {
            return Ok(());
        }
        let hint = crate::metrics::closest_written(writer, metric)
            .map(|c| format!(" (did you mean `{c}`?)"))
            .unwrap_or_default();
        let names: Vec<&str> = crate::metrics::written_by(writer).collect();
        let wildcard = if names.iter().any(|n| n.contains('*')) {
            " (`*` stands for any opponent, player or range)"
        } else {
            ""
        };
        Err(self.err(
            key,
            format!(
                "{who} never writes `{metric}`{hint}, so its cells would not report it and the \
                 check would end inconclusive; it writes: {}{wildcard}",
                names.join(", ")
            ),
        ))
    }

    /// `[executor]`, with `--executor` replacing its `kind`.
    pub(super) fn executor(
        &self,
        t: &toml::Table,
        cli: Option<&str>,
    ) -> Result<Executor, PlanError> {
        let empty = toml::Table::new();
        let table = match t.get("executor") {
            None => &empty,
            Some(toml::Value::Table(e)) => e,
            Some(other) => {
                return Err(self.key_error(KeyError::wrong(
                    "executor",
                    "a table ([executor])",
                    other,
                )))
            }
        };
        let known: Vec<&str> = EXPERIMENT_EXECUTOR_KEYS
            .iter()
            .chain(ARM_EXECUTOR_KEYS)
            .copied()
            .collect();
        self.check_keys(table, "executor.", &known)?;
        let file_kind = self.read(at(table, "executor.").string("kind"))?;
        let kind = match (cli, file_kind.as_deref()) {
            (Some(k), _) => match k {
                "local" | "slurm" => k.to_string(),
                other => {
                    return Err(PlanError::Flag {
                        flag: "--executor",
                        message: format!("unknown executor `{other}` (expected local or slurm)"),
                    })
                }
            },
            (None, Some(k @ ("local" | "slurm"))) => k.to_string(),
            (None, Some(other)) => {
                return Err(self.err(
                    "executor.kind",
                    format!("unknown executor `{other}` (expected local or slurm)"),
                ))
            }
            (None, None) => "local".to_string(),
        };
        let max_parallel = match table.get("max_parallel") {
            None => 1,
            Some(toml::Value::Integer(n)) if *n >= 1 && *n <= 1024 => *n as u32,
            Some(_) => {
                return Err(self.err(
                    "executor.max_parallel",
                    "expected an integer from 1 to 1024 (cells in flight at once)",
                ))
            }
        };
        if kind == "local" {
            if max_parallel > 1 {
                return Err(self.err(
                    "executor.max_parallel",
                    "local cells run one at a time, so that they do not share this machine's \
                     cores; max_parallel applies to kind = \"slurm\"",
                ));
            }
            return Ok(Executor::Local);
        }
        let fields = self.slurm_fields(table, "executor.")?;
        let placement = match self
            .read(at(table, "executor.").string("placement"))?
            .as_deref()
        {
            None | Some("same-node") => Placement::SameNode,
            Some("spread") => Placement::Spread,
            Some("any") => Placement::Any,
            Some(other) => {
                return Err(self.err(
                    "executor.placement",
                    format!("unknown placement `{other}` (expected same-node, spread or any)"),
                ))
            }
        };
        if max_parallel > 1 && placement == Placement::Spread {
            return Err(self.err(
                "executor.max_parallel",
                "placement = \"spread\" pins each round to the node its first cell lands on, \
                 one round at a time; use same-node or any with max_parallel > 1",
            ));
        }
        let requeue = self
            .read(at(table, "executor.").boolean("requeue"))?
            .unwrap_or(false);
        Ok(Executor::Slurm(Box::new(
            SlurmOptions {
                placement,
                max_parallel,
                requeue,
                ..SlurmOptions::default()
            }
            .for_arm(&fields),
        )))
    }

    /// The sbatch options of `[executor]` or of an arm's `[arms.executor]`
    /// (`prefix` names the table in errors).
    pub(super) fn slurm_fields(
        &self,
        table: &toml::Table,
        prefix: &str,
    ) -> Result<SlurmOverrides, PlanError> {
        let text = |key: &str| -> Result<Option<String>, PlanError> {
            let v = self.read(at(table, prefix).string(key))?;
            if let Some(v) = &v {
                if v.trim().is_empty() {
                    return Err(self.err(format!("{prefix}{key}"), "must not be empty"));
                }
                self.no_nul(format!("{prefix}{key}"), v)?;
                self.one_line(format!("{prefix}{key}"), v)?;
            }
            Ok(v)
        };
        let extra = self.read(at(table, prefix).strings("extra"))?;
        for (i, e) in extra.iter().enumerate() {
            self.no_nul(format!("{prefix}extra[{i}]"), e)?;
            self.one_line(format!("{prefix}extra[{i}]"), e)?;
            if !e.starts_with('-') {
                return Err(self.err(
                    format!("{prefix}extra[{i}]"),
                    format!("`{e}` is not an sbatch flag (write `--name=value`)"),
                ));
            }
        }
        let cpus = match table.get("cpus_per_task") {
            None => None,
            Some(toml::Value::Integer(n)) if *n >= 1 && *n <= i64::from(u32::MAX) => {
                Some(*n as u32)
            }
            Some(_) => {
                return Err(self.err(format!("{prefix}cpus_per_task"), "expected an integer ≥ 1"))
            }
        };
        Ok(SlurmOverrides {
            partition: text("partition")?,
            account: text("account")?,
            qos: text("qos")?,
            time: text("time")?,
            cpus_per_task: cpus,
            mem: text("mem")?,
            gres: text("gres")?,
            constraint: text("constraint")?,
            extra,
        })
    }
}

impl Reader<'_> {
    /// The columns, each with the fold the file gave it (`None`: unsaid).
    pub(super) fn columns(
        &self,
        t: &toml::Table,
    ) -> Result<Vec<(Column, Option<Fold>)>, PlanError> {
        let mut out = Vec::new();
        for (i, c) in self.tables(t, "columns")?.into_iter().enumerate() {
            let prefix = format!("columns[{i}].");
            self.check_keys(c, &prefix, COLUMN_KEYS)?;
            let metric = self
                .read(at(c, &prefix).string("metric"))?
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| self.err(format!("{prefix}metric"), "missing (the metric name)"))?;
            check_visible(&metric).map_err(|m| self.err(format!("{prefix}metric"), m))?;
            let label = self
                .read(at(c, &prefix).string("label"))?
                .unwrap_or_else(|| metric.clone());
            check_visible(&label).map_err(|m| self.err(format!("{prefix}label"), m))?;
            let show = match self.read(at(c, &prefix).string("show"))?.as_deref() {
                None | Some("value") => Show::Value,
                Some("speedup") => Show::Speedup,
                Some("both") => Show::Both,
                Some(other) => {
                    return Err(self.err(
                        format!("{prefix}show"),
                        format!("unknown `{other}` (expected value, speedup or both)"),
                    ))
                }
            };
            let direction = self.direction(c, &prefix, true)?;
            let fold = self.fold(c, &prefix)?;
            out.push((
                Column {
                    metric,
                    label,
                    show,
                    direction,
                    fold: fold.unwrap_or_default(),
                },
                fold,
            ));
        }
        Ok(out)
    }

    /// `[measurement]`.
    pub(super) fn measurement(&self, t: &toml::Table) -> Result<Measurement, PlanError> {
        let m = match t.get("measurement") {
            None => return Ok(Measurement::default()),
            Some(toml::Value::Table(m)) => m,
            Some(other) => {
                return Err(self.key_error(KeyError::wrong(
                    "measurement",
                    "a table ([measurement])",
                    other,
                )))
            }
        };
        self.check_keys(m, "measurement.", MEASUREMENT_KEYS)?;
        let max = self.read(at(m, "measurement.").number("max_foreign_cpu"))?;
        if max.is_some_and(|x| !(x > 0.0 && x.is_finite())) {
            return Err(self.err(
                "measurement.max_foreign_cpu",
                "expected a number of cores > 0, e.g. 0.5 (half a core on average)",
            ));
        }
        let rerun = self.read(at(m, "measurement.").integer("rerun_contended", 0, 10))?;
        let wait = match m.get("wait_for_quiet") {
            None => None,
            Some(v) => Some(seconds(v).filter(|s| *s <= MAX_SECONDS).ok_or_else(|| {
                self.err(
                    "measurement.wait_for_quiet",
                    format!(
                        "expected a duration such as \"30s\", \"2m\" or a number of seconds \
                         from 0 to 30 days (\"720h\"), found {v}"
                    ),
                )
            })?),
        };
        let pin = self.read(at(m, "measurement.").boolean("pin"))?;
        Ok(Measurement {
            max_foreign_cpu: max,
            rerun_contended: rerun.unwrap_or(0) as u32,
            wait_for_quiet: wait,
            pin: pin.unwrap_or(false),
        })
    }

    pub(super) fn gate(
        &self,
        t: &toml::Table,
        arms: &BTreeSet<&str>,
        baseline: &str,
    ) -> Result<Option<Gate>, PlanError> {
        let g = match t.get("gate") {
            None => return Ok(None),
            Some(toml::Value::Table(g)) => g,
            Some(other) => {
                return Err(self.key_error(KeyError::wrong("gate", "a table ([gate])", other)))
            }
        };
        self.check_keys(g, "gate.", GATE_KEYS)?;
        let metric = self
            .read(at(g, "gate.").string("metric"))?
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| self.err("gate.metric", "missing (the metric the gate judges)"))?;
        check_visible(&metric).map_err(|m| self.err("gate.metric", m))?;
        let max_slowdown = self.read(at(g, "gate.").number("max_slowdown"))?;
        let min_speedup = match (
            self.read(at(g, "gate.").number("min_speedup"))?,
            max_slowdown,
        ) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    "gate.max_slowdown",
                    "give either min_speedup or max_slowdown, not both",
                ))
            }
            (Some(m), None) if m <= 0.0 => return Err(self.err("gate.min_speedup", "must be > 0")),
            (Some(m), None) => m,
            (None, Some(x)) if !(0.0..1.0).contains(&x) => {
                return Err(self.err(
                    "gate.max_slowdown",
                    "expected a fraction in [0, 1), e.g. 0.03 for 3 % slower at most",
                ))
            }
            (None, Some(x)) => 1.0 / (1.0 + x),
            (None, None) => {
                return Err(self.err(
                    "gate.min_speedup",
                    "missing (e.g. min_speedup = 1.5 to require 1.5×, or max_slowdown = 0.03)",
                ))
            }
        };
        let min_effect = self.read(at(g, "gate.").number("min_effect"))?;
        if let Some(e) = min_effect {
            check_min_effect(e).map_err(|why| self.err("gate.min_effect", why))?;
        }
        let arm = self.read(at(g, "gate.").string("arm"))?;
        if let Some(a) = &arm {
            if !arms.contains(a.as_str()) {
                return Err(self.err("gate.arm", format!("`{a}` names no arm")));
            }
            if a == baseline {
                return Err(self.err(
                    "gate.arm",
                    format!("`{a}` is the baseline; the gate compares another arm with it"),
                ));
            }
        }
        Ok(Some(Gate {
            metric,
            min_speedup,
            max_slowdown,
            min_effect,
            arm,
        }))
    }

    /// A table's optional `direction` (`lower` | `higher`, and `none` where
    /// `none_ok`: a column may describe, a guard must judge).
    pub(super) fn direction(
        &self,
        t: &toml::Table,
        prefix: &str,
        none_ok: bool,
    ) -> Result<Option<Direction>, PlanError> {
        match self.read(at(t, prefix).string("direction"))?.as_deref() {
            None => Ok(None),
            Some("lower") => Ok(Some(Direction::Lower)),
            Some("higher") => Ok(Some(Direction::Higher)),
            Some("none") if none_ok => Ok(Some(Direction::Neither)),
            Some(other) => Err(self.err(
                format!("{prefix}direction"),
                if none_ok {
                    format!("unknown `{other}` (expected lower, higher or none)")
                } else {
                    format!("unknown `{other}` (expected lower or higher: a guard judges)")
                },
            )),
        }
    }

    /// The `fold` key of the table at `prefix` (`None`: unsaid).
    pub(super) fn fold(&self, t: &toml::Table, prefix: &str) -> Result<Option<Fold>, PlanError> {
        match self.read(at(t, prefix).string("fold"))?.as_deref() {
            None => Ok(None),
            Some("mean") => Ok(Some(Fold::Mean)),
            Some("last") => Ok(Some(Fold::Last)),
            Some(other) => Err(self.err(
                format!("{prefix}fold"),
                format!("unknown `{other}` (expected mean or last)"),
            )),
        }
    }

    /// One fold per metric: what any column or guard of it says, the
    /// others agreeing or silent; a metric folded two ways is refused
    /// (its table value and its verdict would judge different numbers).
    pub(super) fn agree_folds(
        &self,
        columns: Vec<(Column, Option<Fold>)>,
        guards: Vec<(Guard, Option<Fold>)>,
    ) -> Result<(Vec<Column>, Vec<Guard>), PlanError> {
        let mut said: BTreeMap<String, (String, Fold)> = BTreeMap::new();
        let keys = columns
            .iter()
            .enumerate()
            .map(|(i, (c, f))| (format!("columns[{i}].fold"), &c.metric, *f))
            .chain(
                guards
                    .iter()
                    .enumerate()
                    .map(|(i, (g, f))| (format!("guard[{i}].fold"), &g.metric, *f)),
            );
        for (key, metric, fold) in keys {
            let Some(fold) = fold else { continue };
            match said.get(metric) {
                Some((first, f)) if *f != fold => {
                    return Err(self.err(
                        key,
                        format!(
                            "`{metric}` is folded `{}` by {first}: a metric has one fold in a file",
                            fold_name(*f)
                        ),
                    ))
                }
                Some(_) => {}
                None => {
                    said.insert(metric.clone(), (key, fold));
                }
            }
        }
        let of = |metric: &str| said.get(metric).map(|(_, f)| *f).unwrap_or_default();
        Ok((
            columns
                .into_iter()
                .map(|(mut c, _)| {
                    c.fold = of(&c.metric);
                    // The default label says which value of the cell it is.
                    if c.label == c.metric {
                        c.label = c.fold.default_label(&c.metric);
                    }
                    c
                })
                .collect(),
            guards
                .into_iter()
                .map(|(mut g, _)| {
                    g.fold = of(&g.metric);
                    g
                })
                .collect(),
        ))
    }

    pub(super) fn guards(
        &self,
        t: &toml::Table,
        arms: &BTreeSet<&str>,
        baseline: &str,
    ) -> Result<Vec<(Guard, Option<Fold>)>, PlanError> {
        let mut out = Vec::new();
        for (i, g) in self.tables(t, "guard")?.into_iter().enumerate() {
            let prefix = format!("guard[{i}].");
            self.check_keys(g, &prefix, GUARD_KEYS)?;
            let metric = self
                .read(at(g, &prefix).string("metric"))?
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| {
                    self.err(format!("{prefix}metric"), "missing (the metric guarded)")
                })?;
            check_visible(&metric).map_err(|m| self.err(format!("{prefix}metric"), m))?;
            let margin = self.read(at(g, &prefix).number("margin"))?.ok_or_else(|| {
                self.err(
                    format!("{prefix}margin"),
                    "missing (how much worse the arm may be, in the metric's units, e.g. 0.05)",
                )
            })?;
            if margin < 0.0 {
                return Err(self.err(format!("{prefix}margin"), "must be ≥ 0"));
            }
            let direction = self.direction(g, &prefix, false)?;
            let own_baseline = self.read(at(g, &prefix).string("baseline"))?;
            if let Some(b) = &own_baseline {
                if !arms.contains(b.as_str()) {
                    return Err(
                        self.err(format!("{prefix}baseline"), format!("`{b}` names no arm"))
                    );
                }
            }
            let compared_with = own_baseline.as_deref().unwrap_or(baseline);
            let arm = self.read(at(g, &prefix).string("arm"))?;
            if let Some(a) = &arm {
                if !arms.contains(a.as_str()) || a == compared_with {
                    return Err(self.err(
                        format!("{prefix}arm"),
                        format!(
                            "`{a}` is not an arm other than the guard's baseline `{compared_with}`"
                        ),
                    ));
                }
            }
            let fold = self.fold(g, &prefix)?;
            let paired = self
                .read(at(g, &prefix).boolean("paired"))?
                .unwrap_or(false);
            out.push((
                Guard {
                    metric,
                    margin,
                    direction,
                    arm,
                    baseline: own_baseline,
                    fold: fold.unwrap_or_default(),
                    paired,
                },
                fold,
            ));
        }
        Ok(out)
    }
}

fn fold_name(f: Fold) -> &'static str {
    match f {
        Fold::Mean => "mean",
        Fold::Last => "last",
    }
}

/// `30`, `"30s"`, `"2m"`, `"1h"`: seconds, or `None` when it is none of them.
fn seconds(v: &toml::Value) -> Option<f64> {
    let n = match v {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(x) => *x,
        toml::Value::String(s) => {
            let s = s.trim();
            let (digits, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
                Some((at, _)) => s.split_at(at),
                None => (s, "s"),
            };
            let n: f64 = digits.trim().parse().ok()?;
            n * match unit {
                "s" => 1.0,
                "m" | "min" => 60.0,
                "h" => 3600.0,
                _ => return None,
            }
        }
        _ => return None,
    };
    (n >= 0.0 && n.is_finite()).then_some(n)
}

/// `--runs N`: the iterations of N runs after `warmup`.
fn runs_after_warmup(runs: u32, warmup: u32, auto: bool) -> Result<u32, PlanError> {
    let flag = |message: &str| PlanError::Flag {
        flag: "--runs",
        message: message.to_string(),
    };
    if runs == 0 {
        return Err(flag("expected an integer ≥ 1"));
    }
    if auto {
        return Err(flag(
            "counts the runs after the warm-up, which `warmup = \"auto\"` decides only once \
             the cell ran; give a warm-up count (--warmup N) or every run (--iterations N)",
        ));
    }
    runs.checked_add(warmup)
        .ok_or_else(|| flag("with the warm-up, more runs than a cell can count"))
}

impl Reader<'_> {
    /// `setup`, `prepare` and `cleanup` of the file or an arm: each a
    /// command, an array run without a shell or a string through `sh -c`.
    pub(super) fn hooks(&self, table: &toml::Table, prefix: &str) -> Result<Hooks, PlanError> {
        let mut hooks = Hooks::default();
        for key in Hooks::KEYS {
            let argv = self.argv(table, prefix, key)?;
            match key {
                "setup" => hooks.setup = argv,
                "prepare" => hooks.prepare = argv,
                _ => hooks.cleanup = argv,
            }
        }
        Ok(hooks)
    }

    /// A command-valued key (`command`, a hook) as an argv: a string runs
    /// through `sh -c`, an array as it is (its first entry the program).
    /// (A timed arm's string may then run without the shell: `resolve`.)
    pub(super) fn argv(
        &self,
        table: &toml::Table,
        prefix: &str,
        key: &str,
    ) -> Result<Option<Vec<String>>, PlanError> {
        let path = format!("{prefix}{key}");
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) if s.trim().is_empty() => {
                Err(self.err(path, "must not be empty"))
            }
            Some(toml::Value::String(s)) => {
                self.no_nul(path, s)?;
                Ok(Some(vec!["sh".to_string(), "-c".to_string(), s.clone()]))
            }
            Some(toml::Value::Array(_)) => {
                let argv = self.read(at(table, prefix).strings(key))?;
                for (i, a) in argv.iter().enumerate() {
                    self.no_nul(format!("{path}[{i}]"), a)?;
                }
                if argv.first().is_none_or(|p| p.is_empty()) {
                    return Err(self.err(
                        path,
                        "must name a program (a non-empty array whose first entry is the program)",
                    ));
                }
                Ok(Some(argv))
            }
            Some(other) => Err(self.key_error(KeyError::wrong(
                path,
                "an array of strings or a shell string",
                other,
            ))),
        }
    }

    /// `timeout` of the file or an arm: how long one cell may run, as
    /// `"90s"`, `"10m"`, `"2h"` or a number of seconds; in seconds.
    pub(super) fn timeout(
        &self,
        table: &toml::Table,
        prefix: &str,
    ) -> Result<Option<f64>, PlanError> {
        let key = format!("{prefix}timeout");
        let expected = "expected a duration such as \"90s\", \"10m\" or \"2h\" (or a number of \
                        seconds) above 0 and at most 30 days (\"720h\")";
        let Some(value) = table.get("timeout") else {
            return Ok(None);
        };
        let seconds = seconds(value)
            .ok_or_else(|| self.err(key.clone(), format!("{expected}, found {value}")))?;
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS) {
            return Err(self.err(key, format!("{expected}, found {value}")));
        }
        Ok(Some(seconds))
    }

    /// `timing` in `table` (the file's top level or an arm): `"process"`
    /// (lcx times each run of the command) or `"lines"` (the command
    /// prints its own metric lines, the default). Command workloads only.
    pub(super) fn timing(
        &self,
        table: &toml::Table,
        prefix: &str,
        workload: Workload,
    ) -> Result<Option<bool>, PlanError> {
        let key = format!("{prefix}timing");
        let Some(value) = self.read(at(table, prefix).string("timing"))? else {
            return Ok(None);
        };
        let timed = match value.as_str() {
            "process" => true,
            "lines" => false,
            other => {
                return Err(self.err(
                    key,
                    format!(
                        "expected \"process\" (lcx times each run of the command) or \"lines\" \
                         (the command prints its metric lines), found \"{other}\""
                    ),
                ))
            }
        };
        if timed && workload.uses_config() {
            return Err(self.err(
                key,
                "timing = \"process\" times a command arm; lcx workloads write their own lines",
            ));
        }
        Ok(Some(timed))
    }
}
