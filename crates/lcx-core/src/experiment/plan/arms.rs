//! `[[arms]]` tables into raw arms, and `--arms` selecting among them.

use super::*;

impl Reader<'_> {
    /// `--arms a,b`: only the named arms (all when `wanted` is empty), in
    /// file order. Refuses an unknown name, and leaving out an arm that the
    /// baseline (given, or the file's first arm), `[gate]` or a `[[guard]]`
    /// names.
    pub(super) fn select_arms(
        &self,
        t: &toml::Table,
        wanted: &[String],
        mut arms: Vec<RawArm>,
        file_baseline: Option<&str>,
    ) -> Result<Vec<RawArm>, PlanError> {
        if wanted.is_empty() {
            return Ok(arms);
        }
        if let Some(unknown) = wanted.iter().find(|w| !arms.iter().any(|a| &a.name == *w)) {
            // A sweep's arm at one point (`fast-n-4`) is no arm of the file.
            let point_of = arms
                .iter()
                .find(|a| t.contains_key("sweep") && unknown.starts_with(&format!("{}-", a.name)));
            let hint = match point_of {
                Some(a) => format!(
                    "; `{unknown}` is arm `{}` at one point of [sweep]: --arms picks the \
                     file's arms, [sweep] in the file picks the points",
                    a.name
                ),
                None => String::new(),
            };
            return Err(PlanError::Flag {
                flag: "--arms",
                message: format!(
                    "`{unknown}` names no arm of {} (arms: {}){hint}",
                    self.path.display(),
                    arms.iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let named = |v: Option<&toml::Value>| {
            v.and_then(|v| v.get("arm"))
                .and_then(|a| a.as_str())
                .map(str::to_owned)
        };
        let mut wanted_by: Vec<(String, String)> = Vec::new();
        if let Some(b) = t.get("baseline").and_then(|b| b.as_str()) {
            wanted_by.push(("`baseline`".into(), b.to_owned()));
        } else if let Some(b) = file_baseline {
            wanted_by.push(("the default baseline (the first arm)".into(), b.to_owned()));
        }
        if let Some(a) = named(t.get("gate")) {
            wanted_by.push(("[gate]".into(), a));
        }
        if let Some(toml::Value::Array(guards)) = t.get("guard") {
            for (i, g) in guards.iter().enumerate() {
                if let Some(a) = named(Some(g)) {
                    wanted_by.push((format!("[[guard]] {}", i + 1), a));
                }
            }
        }
        if let Some((what, arm)) = wanted_by.iter().find(|(_, a)| !wanted.contains(a)) {
            return Err(PlanError::Flag {
                flag: "--arms",
                message: format!(
                    "leaves out arm `{arm}`, which {what} of {} names; add it",
                    self.path.display()
                ),
            });
        }
        arms.retain(|a| wanted.contains(&a.name));
        Ok(arms)
    }

    /// The `[[arms]]` tables, in file order.
    pub(super) fn arms(
        &self,
        t: &toml::Table,
        workload: Workload,
    ) -> Result<Vec<RawArm>, PlanError> {
        self.tables(t, "arms")?
            .into_iter()
            .enumerate()
            .map(|(i, arm)| self.arm(i, arm, workload))
            .collect()
    }

    /// `[[arms]]` table `i`, its keys read in the order they are checked.
    fn arm(&self, i: usize, arm: &toml::Table, workload: Workload) -> Result<RawArm, PlanError> {
        let name = self.read(at(arm, &format!("arms[{i}].")).string("name"))?;
        // Errors name the arm by its name where it has one.
        let key = match &name {
            Some(n) => format!("arms[{i}] (`{n}`)"),
            None => format!("arms[{i}]"),
        };
        let prefix = format!("{key}.");
        self.check_keys(arm, &prefix, ARM_KEYS)?;
        let name = name.ok_or_else(|| self.err(format!("{prefix}name"), "missing"))?;
        check_arm_name(&name).map_err(|m| self.err(format!("{prefix}name"), m))?;
        let label = self
            .read(at(arm, &prefix).string("label"))?
            .unwrap_or_else(|| name.clone());
        check_visible(&label).map_err(|m| self.err(format!("{prefix}label"), m))?;
        let requires = match self.read(at(arm, &prefix).string("requires"))?.as_deref() {
            None => None,
            Some("cuda") => Some(Requirement::Cuda),
            Some(other) => {
                return Err(self.err(
                    format!("{prefix}requires"),
                    format!("unknown requirement `{other}` (expected cuda)"),
                ))
            }
        };
        let set = self.sets(arm, "set", &prefix)?;
        let args = self.arm_args(arm, &prefix, workload)?;
        let revision = match self.read(at(arm, &prefix).string("revision"))? {
            Some(r) => Some(self.revision_text(&format!("{prefix}revision"), &r)?),
            None => None,
        };
        let build = self.read(at(arm, &prefix).string("build"))?;
        if let Some(b) = &build {
            self.check_build(&format!("{prefix}build"), b, workload)?;
        }
        let slurm = self.arm_executor(arm, &prefix)?;
        let timed = self.timing(arm, &prefix, workload)?;
        let cpus = self.arm_cpus(arm, &prefix)?;
        let timeout = self.timeout(arm, &prefix)?;
        let variable = self.read(at(arm, &prefix).boolean("variable_iterations"))?;
        if variable.is_some() && workload.uses_config() {
            return Err(self.err(
                format!("{prefix}variable_iterations"),
                "only command arms may emit a variable number of lines",
            ));
        }
        let env = self.arm_env(arm, &prefix)?;
        let command = self.argv(arm, &prefix, "command")?;
        let command_string = match arm.get("command") {
            Some(toml::Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let shell = self
            .read(at(arm, &prefix).boolean("shell"))?
            .unwrap_or(false);
        if shell && command_string.is_none() {
            return Err(self.err(
                format!("{prefix}shell"),
                "applies to a `command` given as a string (an array runs as it is)",
            ));
        }
        let hooks = self.hooks(arm, &prefix)?;
        self.check_arm_workload(&prefix, workload, command.is_some(), &set, &args)?;
        Ok(RawArm {
            name,
            label,
            key,
            requires,
            set,
            args,
            env,
            command,
            variable_iterations: variable.unwrap_or(false),
            variable_set: variable.is_some(),
            timed,
            command_string,
            shell,
            timeout,
            hooks,
            revision,
            build,
            slurm,
            cpus,
            sweep: None,
        })
    }

    /// An arm's `args`, after the workload's own.
    fn arm_args(
        &self,
        arm: &toml::Table,
        prefix: &str,
        workload: Workload,
    ) -> Result<Vec<String>, PlanError> {
        let args = self.read(at(arm, prefix).strings("args"))?;
        for (i, a) in args.iter().enumerate() {
            self.no_nul(format!("{prefix}args[{i}]"), a)?;
            // One cell measures one mode: `--both` would print fp32 and
            // AMP lines as iterations 1..2N of one cell.
            if workload == Workload::BenchTrainer && a == "--both" {
                return Err(self.err(
                    format!("{prefix}args[{i}]"),
                    "`--both` times two modes in one cell; give fp32 and `--amp` their own arms",
                ));
            }
        }
        Ok(args)
    }

    /// `[arms.executor]`: the arm's own sbatch options. The keys that
    /// apply to every cell of the experiment are refused here, not ignored.
    fn arm_executor(&self, arm: &toml::Table, prefix: &str) -> Result<SbatchOptions, PlanError> {
        match arm.get("executor") {
            None => Ok(SbatchOptions::default()),
            Some(toml::Value::Table(e)) => {
                let table_prefix = format!("{prefix}executor.");
                if let Some(key) = EXPERIMENT_EXECUTOR_KEYS
                    .iter()
                    .find(|k| e.contains_key(**k))
                {
                    return Err(self.err(
                        format!("{table_prefix}{key}"),
                        "applies to every cell of the experiment: set it in [executor]",
                    ));
                }
                self.check_keys(e, &table_prefix, ARM_EXECUTOR_KEYS)?;
                self.slurm_fields(e, &table_prefix)
            }
            Some(other) => Err(self.key_error(KeyError::wrong(
                format!("{prefix}executor"),
                format!(
                    "a table of sbatch options ({})",
                    ARM_EXECUTOR_KEYS.join(", ")
                ),
                other,
            ))),
        }
    }

    /// An arm's `cpus`: a CPU list (`"0-3,6"`) or one CPU's number.
    fn arm_cpus(&self, arm: &toml::Table, prefix: &str) -> Result<Option<CpuSet>, PlanError> {
        match arm.get("cpus") {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(
                CpuSet::parse(s).map_err(|m| self.err(format!("{prefix}cpus"), m))?,
            )),
            Some(toml::Value::Integer(n)) => Ok(Some(
                usize::try_from(*n)
                    .ok()
                    .filter(|n| *n <= crate::system::affinity::MAX_CPU)
                    .map(|n| CpuSet::from_cpus([n]))
                    .ok_or_else(|| {
                        self.err(format!("{prefix}cpus"), format!("{n} is not a CPU number"))
                    })?,
            )),
            Some(other) => Err(self.key_error(KeyError::wrong(
                format!("{prefix}cpus"),
                "a CPU list as a string (\"0-3,6\")",
                other,
            ))),
        }
    }

    /// An arm's `env`: names and values for the cells' environment
    /// (numbers and booleans written as TOML writes them).
    fn arm_env(
        &self,
        arm: &toml::Table,
        prefix: &str,
    ) -> Result<BTreeMap<String, String>, PlanError> {
        let env = match arm.get("env") {
            None => return Ok(BTreeMap::new()),
            Some(toml::Value::Table(env)) => env,
            Some(other) => {
                return Err(self.key_error(KeyError::wrong(
                    format!("{prefix}env"),
                    "a table of strings",
                    other,
                )))
            }
        };
        let mut out = BTreeMap::new();
        for (k, v) in env {
            let value = self.scalar_text(format!("{prefix}env.{k}"), v, "a string")?;
            check_env_name(k).map_err(|m| self.err(format!("{prefix}env.{k}"), m))?;
            self.no_nul(format!("{prefix}env.{k}"), k)?;
            self.no_nul(format!("{prefix}env.{k}"), &value)?;
            out.insert(k.clone(), value);
        }
        Ok(out)
    }

    /// A command arm runs its `command` and nothing else; an lcx arm runs
    /// no command.
    fn check_arm_workload(
        &self,
        prefix: &str,
        workload: Workload,
        has_command: bool,
        set: &[String],
        args: &[String],
    ) -> Result<(), PlanError> {
        if workload != Workload::Command {
            if has_command {
                return Err(self.err(
                    format!("{prefix}command"),
                    format!(
                        "only `workload = \"command\"` arms run a command (this is {})",
                        workload.as_str()
                    ),
                ));
            }
            return Ok(());
        }
        if !has_command {
            return Err(self.err(
                format!("{prefix}command"),
                "missing (a command workload arm runs this program)",
            ));
        }
        if !set.is_empty() {
            return Err(self.err(
                format!("{prefix}set"),
                "a command arm has no trainer config to set (use `env`)",
            ));
        }
        if !args.is_empty() {
            return Err(self.err(
                format!("{prefix}args"),
                "a command arm takes its arguments in `command`",
            ));
        }
        Ok(())
    }
}
