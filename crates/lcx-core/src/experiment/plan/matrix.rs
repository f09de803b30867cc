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
        let combos = combinations(&axes);
        let bases = if arms.is_empty() {
            vec![None]
        } else {
            arms.into_iter().map(Some).collect()
        };
        let mut out = Vec::new();
        for base in &bases {
            for combo in &combos {
                let arm = self.matrix_arm(base.as_ref(), combo_of(&axes, combo), workload)?;
                check_arm_name(&arm.name).map_err(|m| self.err(arm.key.clone(), m))?;
                check_visible(&arm.label).map_err(|m| self.err(arm.key.clone(), m))?;
                out.push(arm);
            }
        }
        Ok(out)
    }

    /// One key of `table` (`matrix` or `sweep`) and its values. A key is
    /// `revision`, `env.NAME`, a flag (`--batch-sizes`) or a config key; a
    /// command workload takes only the first two.
    pub(super) fn axis(
        &self,
        table: &str,
        key: &str,
        values: &toml::Value,
        workload: Workload,
    ) -> Result<Axis, PlanError> {
        let full = format!("{table}.{key}");
        self.no_nul(&full, key)?;
        if let Some(var) = key.strip_prefix("env.") {
            // The rule an arm's own `env` keys follow.
            check_env_name(var).map_err(|m| self.err(full.clone(), m))?;
        }
        let kind_ok = if key == "revision" {
            true
        } else if let Some(var) = key.strip_prefix("env.") {
            !var.is_empty()
        } else if key.starts_with("--") {
            workload.uses_config() && key.len() > 2
        } else {
            workload.uses_config()
        };
        if !kind_ok {
            return Err(self.err(
                full,
                if workload.uses_config() {
                    "expected a config key (traversal.scheduler), a flag (--batch-sizes), env.NAME or revision"
                } else {
                    if table == "matrix" {
                        "a command workload only takes env.NAME and revision matrix keys"
                    } else {
                        "a command workload only takes env.NAME and revision sweep keys"
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
            &key.trim_start_matches("--")
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
        Ok(RawArm {
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
    };
    for ((key, short, vals), &i) in axes.iter().zip(combo) {
        let (raw, toml_text) = &vals[i];
        name_parts.push(format!("{short}-{}", sanitize(raw)));
        label_parts.push(format!("{short} {raw}"));
        if key == "revision" {
            out.revision = Some(raw.clone());
        } else if let Some(var) = key.strip_prefix("env.") {
            out.env.insert(var.to_string(), raw.clone());
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
