//! The last step: where and how the cells run. `[executor]` (local, or
//! Slurm with its sbatch options, placement, `max_parallel` and `requeue`),
//! `[measurement]`, `host_lock`, and the checks that tie them to the arms:
//! one source of a cell's CPUs, and nothing a Slurm cell could not honour
//! (hooks and `cpus` act on the runner's host). It reads the arms; it
//! changes none of them, and it never looks at the host it runs on (fitting
//! CPUs to this host is `Plan::place_cpus`, at load).

use super::values::seconds;
use super::*;

/// Where and how the cells run, as the file says.
pub(super) struct Placed {
    pub(super) executor: Executor,
    pub(super) measurement: Measurement,
    pub(super) host_lock: bool,
}

impl Reader<'_> {
    /// `[executor]` (with `--executor`), `host_lock` and `[measurement]`,
    /// checked against the arms and whether repeats are `adaptive`.
    pub(super) fn placement(
        &self,
        t: &toml::Table,
        cli: &Overrides,
        arms: &[RawArm],
        adaptive: bool,
    ) -> Result<Placed, PlanError> {
        let executor = self.executor(t, cli.executor.as_deref())?;
        let host_lock = self.read(at(t, "").boolean("host_lock"))?.unwrap_or(true);
        if let (Executor::Slurm(o), true) = (&executor, adaptive) {
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
            self.check_slurm_cells(t, arms, &measurement)?;
        }
        Ok(Placed {
            executor,
            measurement,
            host_lock,
        })
    }

    /// Nothing of a Slurm experiment acts on the runner's host for its
    /// cells: no hook, no arm's `cpus`, no `pin`.
    fn check_slurm_cells(
        &self,
        t: &toml::Table,
        arms: &[RawArm],
        measurement: &Measurement,
    ) -> Result<(), PlanError> {
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
        Ok(())
    }

    /// `[executor]`, with `--executor` replacing its `kind`.
    fn executor(&self, t: &toml::Table, cli: Option<&str>) -> Result<Executor, PlanError> {
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
        let kind = self.executor_kind(table, cli)?;
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
        let sbatch = self.slurm_fields(table, "executor.")?;
        let placement = self.slurm_placement(table)?;
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
        Ok(Executor::Slurm(Box::new(SlurmOptions {
            sbatch,
            placement,
            max_parallel,
            requeue,
        })))
    }

    /// `kind` of `[executor]`, or `--executor` in its place: `local` (the
    /// default) or `slurm`.
    fn executor_kind(&self, table: &toml::Table, cli: Option<&str>) -> Result<String, PlanError> {
        let file_kind = self.read(at(table, "executor.").string("kind"))?;
        Ok(match (cli, file_kind.as_deref()) {
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
        })
    }

    /// `placement` of `[executor]` (`same-node` when absent).
    fn slurm_placement(&self, table: &toml::Table) -> Result<Placement, PlanError> {
        Ok(
            match self
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
            },
        )
    }

    /// The sbatch options of `[executor]` or of an arm's `[arms.executor]`
    /// (`prefix` names the table in errors).
    pub(in crate::experiment::plan) fn slurm_fields(
        &self,
        table: &toml::Table,
        prefix: &str,
    ) -> Result<SbatchOptions, PlanError> {
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
        Ok(SbatchOptions {
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

    /// `[measurement]`.
    fn measurement(&self, t: &toml::Table) -> Result<Measurement, PlanError> {
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
}
