//! `[matrix]`: one arm per combination of its values, named after them.

use super::*;

/// What one combination of matrix values gives an arm: its part of the
/// arm's name and label, and where each value goes.
pub(super) struct Combo {
    pub(super) name: String,
    pub(super) label: String,
    pub(super) set: Vec<String>,
    pub(super) args: Vec<String>,
    pub(super) env: BTreeMap<String, String>,
    pub(super) revision: Option<String>,
    /// `{VAR}` keys: each variable and its value, replaced in the command.
    pub(super) placeholders: Vec<(String, String)>,
}

impl Reader<'_> {
    /// Crosses the arms with the `[matrix]` combinations.
    pub(super) fn expand_matrix(
        &self,
        t: &toml::Table,
        workload: Workload,
        arms: Vec<RawArm>,
    ) -> Result<Vec<RawArm>, PlanError> {
        let matrix = match t.get("matrix") {
            None => return Ok(arms),
            Some(toml::Value::Table(m)) => m,
            Some(other) => {
                return Err(self.key_error(KeyError::wrong("matrix", "a table of lists", other)))
            }
        };
        if matrix.is_empty() {
            return Err(self.err(
                "matrix",
                "is empty (give at least one key with a list of values)",
            ));
        }
        let axes = matrix
            .iter()
            .map(|(key, values)| self.axis("matrix", key, values, workload))
            .collect::<Result<Vec<Axis>, PlanError>>()?;
        self.check_matrix_size(&axes, arms.len())?;
        self.check_placeholders_used("matrix", &axes, &arms)?;
        let combos = combinations(&axes);
        let bases = if arms.is_empty() {
            vec![None]
        } else {
            arms.into_iter().map(Some).collect()
        };
        let mut out = Vec::new();
        for base in &bases {
            let first = out.len();
            for combo in &combos {
                let arm = self.matrix_arm(base.as_ref(), combo_of(&axes, combo), workload)?;
                check_arm_name(&arm.name).map_err(|m| self.err(arm.key.clone(), m))?;
                check_visible(&arm.label).map_err(|m| self.err(arm.key.clone(), m))?;
                out.push(arm);
            }
            one_way_of_running(&mut out[first..]);
        }
        Ok(out)
    }

    /// One key of `table` (`matrix` or `sweep`) and its values. A key is
    /// `revision`, `env.NAME`, a placeholder (`{NAME}`), a flag
    /// (`--batch-sizes`) or a config key; a command workload takes only the
    /// first three.
    pub(super) fn axis(
        &self,
        table: &str,
        key: &str,
        values: &toml::Value,
        workload: Workload,
    ) -> Result<Axis, PlanError> {
        let full = format!("{table}.{key}");
        self.no_nul(&full, key)?;
        let placed = placeholder::key_variable(key);
        if let Some(var) = key.strip_prefix("env.").or(placed) {
            // The rule an arm's own `env` keys follow: a placeholder's
            // variable is set as `$NAME` too.
            check_env_name(var).map_err(|m| self.err(full.clone(), m))?;
        }
        let kind_ok = if key == "revision" {
            true
        } else if let Some(var) = key.strip_prefix("env.") {
            !var.is_empty()
        } else if placed.is_some() {
            !workload.uses_config()
        } else if key.starts_with("--") {
            workload.uses_config() && key.len() > 2
        } else {
            workload.uses_config()
        };
        if !kind_ok {
            return Err(self.err(
                full,
                if placed.is_some() {
                    "a placeholder key ({NAME}) replaces `{NAME}` in a command arm's command; \
                     this workload has none (a config key, a flag, env.NAME or revision)"
                } else if workload.uses_config() {
                    "expected a config key (traversal.scheduler), a flag (--batch-sizes), env.NAME or revision"
                } else {
                    if table == "matrix" {
                        "a command workload only takes env.NAME, {NAME} and revision matrix keys"
                    } else {
                        "a command workload only takes env.NAME, {NAME} and revision sweep keys"
                    }
                },
            ));
        }
        let items = match values {
            toml::Value::Array(items) if !items.is_empty() => items,
            toml::Value::Array(_) => return Err(self.err(full, "the list of values is empty")),
            other => return Err(self.key_error(KeyError::wrong(full, "a list of values", other))),
        };
        let mut vals = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let raw =
                self.scalar_text(format!("{full}[{i}]"), item, "a string, number or boolean")?;
            self.no_nul(format!("{full}[{i}]"), &raw)?;
            let raw = if key == "revision" {
                self.revision_text(&format!("{full}[{i}]"), &raw)?
            } else {
                raw
            };
            vals.push((raw, item.to_string()));
        }
        // The arm names' part for this key: the rule arm names follow.
        let short = sanitize(
            &placed
                .unwrap_or_else(|| key.trim_start_matches("--"))
                .rsplit('.')
                .next()
                .unwrap_or(key)
                .to_lowercase(),
        );
        Ok((key.to_string(), short, vals))
    }

    /// The arms the matrix makes, counted before any is made: a cap with
    /// its figure, not gigabytes of arms to find out.
    fn check_matrix_size(&self, axes: &[Axis], arms: usize) -> Result<(), PlanError> {
        let bases_count = arms.max(1);
        let total = axes
            .iter()
            .try_fold(bases_count, |n, (_, _, vals)| n.checked_mul(vals.len()));
        match total {
            Some(n) if n <= MAX_ARMS => Ok(()),
            _ => {
                let sizes: Vec<String> = axes.iter().map(|(_, _, v)| v.len().to_string()).collect();
                Err(self.err(
                    "matrix",
                    format!(
                        "makes {} arms ({} [[arms]] × {} values); at most {MAX_ARMS} arms in \
                         one experiment (fewer values, or several experiments)",
                        total.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                        bases_count,
                        sizes.join(" × ")
                    ),
                ))
            }
        }
    }

    /// The arm of one combination: on its own (a file without `[[arms]]`)
    /// or on a base arm, whose settings it extends.
    fn matrix_arm(
        &self,
        base: Option<&RawArm>,
        combo: Combo,
        workload: Workload,
    ) -> Result<RawArm, PlanError> {
        let Some(b) = base else {
            if workload == Workload::Command {
                return Err(self.err(
                    "arms",
                    "a command matrix needs [[arms]] with a `command` to vary",
                ));
            }
            return Ok(RawArm {
                key: format!("matrix ({})", combo.name),
                name: combo.name,
                label: combo.label,
                set: combo.set,
                args: combo.args,
                env: combo.env,
                revision: combo.revision,
                ..bare_arm()
            });
        };
        self.laid_over("matrix", b, combo)
    }

    /// `base` with one combination of `table`'s (`matrix` or `sweep`)
    /// values laid over it: named and labelled after them, its `set`,
    /// `args` and `env` extended, its revision the one either gives.
    pub(super) fn laid_over(
        &self,
        table: &str,
        base: &RawArm,
        combo: Combo,
    ) -> Result<RawArm, PlanError> {
        if let (Some(own), Some(_)) = (&base.revision, &combo.revision) {
            return Err(self.err(
                format!("{table}.revision"),
                format!(
                    "{} has `revision = \"{own}\"` itself; give the revision in one place",
                    base.key
                ),
            ));
        }
        let mut env = base.env.clone();
        env.extend(combo.env);
        // One pass over every placeholder of the combination (hyperfine's
        // rule: a value's own `{…}` is never read again).
        let values: Vec<(&str, &str)> = combo
            .placeholders
            .iter()
            .map(|(var, value)| (var.as_str(), value.as_str()))
            .collect();
        let fill = |text: &String| placeholder::substitute(text, &values);
        Ok(RawArm {
            command: base
                .command
                .as_ref()
                .map(|argv| argv.iter().map(fill).collect()),
            command_string: base.command_string.as_ref().map(fill),
            name: format!("{}-{}", base.name, combo.name),
            label: format!("{}, {}", base.label, combo.label),
            key: format!("{} × {table} ({})", base.key, combo.name),
            set: base.set.iter().cloned().chain(combo.set).collect(),
            args: base.args.iter().cloned().chain(combo.args).collect(),
            env,
            revision: combo.revision.or_else(|| base.revision.clone()),
            ..base.clone()
        })
    }
}

/// One way of running for every arm grown from one command: where a
/// value makes a timed string need a shell, its siblings run through one
/// too, so that the arms differ by the value alone (the shell's start-up
/// is taken off, but only as well as a mean measured beforehand can).
pub(super) fn one_way_of_running(siblings: &mut [RawArm]) {
    let needs = |a: &RawArm| a.command_string.as_deref().is_some_and(shell::needs_shell);
    if siblings.iter().any(needs) {
        for arm in siblings.iter_mut().filter(|a| a.command_string.is_some()) {
            arm.shell = true;
        }
    }
}

impl Reader<'_> {
    /// Each `{VAR}` key of `table` is used by some arm's command (its
    /// `{VAR}`, or its `$VAR` where lcx sets it): else every value would
    /// run the same command.
    pub(super) fn check_placeholders_used(
        &self,
        table: &str,
        axes: &[Axis],
        arms: &[RawArm],
    ) -> Result<(), PlanError> {
        let texts: Vec<String> = arms
            .iter()
            .map(|a| match (&a.command_string, &a.command) {
                (Some(s), _) => s.clone(),
                (None, Some(argv)) => argv.join(" "),
                (None, None) => String::new(),
            })
            .collect();
        for (key, _, _) in axes {
            let Some(var) = placeholder::key_variable(key) else {
                continue;
            };
            if !texts.iter().any(|t| placeholder::uses(t, var)) {
                return Err(self.err(
                    format!("{table}.{key}"),
                    format!(
                        "no arm's command holds `{{{var}}}`{}, so every value would run the \
                         same command",
                        if placeholder::exported(var) {
                            format!(" or reads `${var}`")
                        } else {
                            String::new()
                        }
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// An lcx workload's arm that changes nothing: what `[matrix]` or
/// `[sweep]` values are laid on in a file without `[[arms]]`.
pub(super) fn bare_arm() -> RawArm {
    RawArm {
        key: String::new(),
        name: String::new(),
        label: String::new(),
        requires: None,
        set: Vec::new(),
        args: Vec::new(),
        env: BTreeMap::new(),
        command: None,
        variable_iterations: false,
        variable_set: false,
        timed: None,
        command_string: None,
        shell: false,
        timeout: None,
        hooks: Hooks::default(),
        revision: None,
        build: None,
        slurm: SbatchOptions::default(),
        cpus: None,
        sweep: None,
    }
}

/// Every combination of the axes' values (as indices), first key slowest.
pub(super) fn combinations(axes: &[Axis]) -> Vec<Vec<usize>> {
    let mut combos: Vec<Vec<usize>> = vec![Vec::new()];
    for (_, _, vals) in axes {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                (0..vals.len()).map(move |i| {
                    let mut next = c.clone();
                    next.push(i);
                    next
                })
            })
            .collect();
    }
    combos
}

/// Where the values of one combination go: `revision`, the environment, a
/// flag and its value, or a `set` entry (the value as TOML wrote it).
pub(super) fn combo_of(axes: &[Axis], combo: &[usize]) -> Combo {
    let mut name_parts = Vec::new();
    let mut label_parts = Vec::new();
    let mut out = Combo {
        name: String::new(),
        label: String::new(),
        set: Vec::new(),
        args: Vec::new(),
        env: BTreeMap::new(),
        revision: None,
        placeholders: Vec::new(),
    };
    for ((key, short, vals), &i) in axes.iter().zip(combo) {
        let (raw, toml_text) = &vals[i];
        name_parts.push(format!("{short}-{}", sanitize(raw)));
        label_parts.push(format!("{short} {raw}"));
        if key == "revision" {
            out.revision = Some(raw.clone());
        } else if let Some(var) = key.strip_prefix("env.") {
            out.env.insert(var.to_string(), raw.clone());
        } else if let Some(var) = placeholder::key_variable(key) {
            out.placeholders.push((var.to_string(), raw.clone()));
            if placeholder::exported(var) {
                out.env.insert(var.to_string(), raw.clone());
            }
        } else if key.starts_with("--") {
            out.args.push(key.clone());
            out.args.push(raw.clone());
        } else {
            out.set.push(format!("{key}={toml_text}"));
        }
    }
    out.name = name_parts.join("_");
    out.label = label_parts.join(", ");
    out
}
