//! `[matrix]`: one arm per combination of its values, named after them.

use super::*;

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
        let mut axes: Vec<Axis> = Vec::new();
        for (key, values) in matrix {
            let full = format!("matrix.{key}");
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
                        "a command workload only takes env.NAME and revision matrix keys"
                    },
                ));
            }
            let items = match values {
                toml::Value::Array(items) if !items.is_empty() => items,
                toml::Value::Array(_) => return Err(self.err(full, "the list of values is empty")),
                other => {
                    return Err(self.key_error(KeyError::wrong(full, "a list of values", other)))
                }
            };
            let mut vals = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let raw = match item {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                        item.to_string()
                    }
                    other => {
                        return Err(self.key_error(KeyError::wrong(
                            format!("{full}[{i}]"),
                            "a string, number or boolean",
                            other,
                        )))
                    }
                };
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
            axes.push((key.clone(), short, vals));
        }
        // The arms it makes, counted before any is made: a cap with its
        // figure, not gigabytes of arms to find out.
        let bases_count = arms.len().max(1);
        let total = axes
            .iter()
            .try_fold(bases_count, |n, (_, _, vals)| n.checked_mul(vals.len()));
        match total {
            Some(n) if n <= MAX_ARMS => {}
            _ => {
                let sizes: Vec<String> = axes.iter().map(|(_, _, v)| v.len().to_string()).collect();
                return Err(self.err(
                    "matrix",
                    format!(
                        "makes {} arms ({} [[arms]] × {} values); at most {MAX_ARMS} arms in \
                         one experiment (fewer values, or several experiments)",
                        total.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                        bases_count,
                        sizes.join(" × ")
                    ),
                ));
            }
        }
        // Cartesian product, first key slowest.
        let mut combos: Vec<Vec<usize>> = vec![Vec::new()];
        for (_, _, vals) in &axes {
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
        let bases = if arms.is_empty() {
            vec![None]
        } else {
            arms.into_iter().map(Some).collect()
        };
        let mut out = Vec::new();
        for base in &bases {
            for combo in &combos {
                let mut name_parts = Vec::new();
                let mut label_parts = Vec::new();
                let mut set = Vec::new();
                let mut args = Vec::new();
                let mut env = BTreeMap::new();
                let mut revision = None;
                for (axis, &i) in axes.iter().zip(combo) {
                    let (key, short, vals) = axis;
                    let (raw, toml_text) = &vals[i];
                    name_parts.push(format!("{short}-{}", sanitize(raw)));
                    label_parts.push(format!("{short} {raw}"));
                    if key == "revision" {
                        revision = Some(raw.clone());
                    } else if let Some(var) = key.strip_prefix("env.") {
                        env.insert(var.to_string(), raw.clone());
                    } else if key.starts_with("--") {
                        args.push(key.clone());
                        args.push(raw.clone());
                    } else {
                        set.push(format!("{key}={toml_text}"));
                    }
                }
                let combo_name = name_parts.join("_");
                let combo_label = label_parts.join(", ");
                let arm = match base {
                    None => {
                        if workload == Workload::Command {
                            return Err(self.err(
                                "arms",
                                "a command matrix needs [[arms]] with a `command` to vary",
                            ));
                        }
                        RawArm {
                            name: combo_name.clone(),
                            label: combo_label,
                            key: format!("matrix ({combo_name})"),
                            requires: None,
                            set,
                            args,
                            env,
                            command: None,
                            variable_iterations: false,
                            variable_set: false,
                            timed: None,
                            command_string: None,
                            timeout: None,
                            hooks: Hooks::default(),
                            revision,
                            build: None,
                            slurm: SlurmOverrides::default(),
                            cpus: None,
                        }
                    }
                    Some(b) => {
                        if let (Some(own), Some(_)) = (&b.revision, &revision) {
                            return Err(self.err(
                                "matrix.revision",
                                format!(
                                    "{} has `revision = \"{own}\"` itself; give the revision in one place",
                                    b.key
                                ),
                            ));
                        }
                        let mut arm_env = b.env.clone();
                        arm_env.extend(env);
                        RawArm {
                            name: format!("{}-{combo_name}", b.name),
                            label: format!("{}, {combo_label}", b.label),
                            key: format!("{} × matrix ({combo_name})", b.key),
                            requires: b.requires,
                            set: b.set.iter().cloned().chain(set).collect(),
                            args: b.args.iter().cloned().chain(args).collect(),
                            env: arm_env,
                            command: b.command.clone(),
                            variable_iterations: b.variable_iterations,
                            variable_set: b.variable_set,
                            timed: b.timed,
                            command_string: b.command_string.clone(),
                            timeout: b.timeout,
                            hooks: b.hooks.clone(),
                            revision: revision.or_else(|| b.revision.clone()),
                            build: b.build.clone(),
                            slurm: b.slurm.clone(),
                            cpus: b.cpus.clone(),
                        }
                    }
                };
                check_arm_name(&arm.name).map_err(|m| self.err(arm.key.clone(), m))?;
                check_visible(&arm.label).map_err(|m| self.err(arm.key.clone(), m))?;
                out.push(arm);
            }
        }
        Ok(out)
    }
}
