//! The first step of reading a file: its shape. The top-level keys, the
//! experiment's name and workload, how long and how often each cell runs
//! (`iterations`, `warmup`, `repeats`, `order`), the trainer config and the
//! file's `set`, with the command-line flags that replace them (`--set`,
//! `--iterations`, `--runs`, `--warmup`, `--repeats`). Nothing here reads
//! an arm.

use super::*;

/// What the file says of the experiment as a whole.
pub(super) struct Shape {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) notes: String,
    pub(super) workload: Workload,
    pub(super) iterations: u32,
    pub(super) warmup: u32,
    pub(super) warmup_auto: bool,
    pub(super) repeats: u32,
    pub(super) adaptive: Option<Adaptive>,
    pub(super) order: Order,
    pub(super) order_seed: u64,
    pub(super) config: Option<PathBuf>,
    pub(super) file_set: Vec<String>,
}

/// How many iterations each cell runs, and how many of them lead in
/// unmeasured.
struct Length {
    iterations: u32,
    warmup: u32,
    warmup_auto: bool,
}

impl Reader<'_> {
    /// The top-level keys that shape the experiment, each with its flag.
    pub(super) fn shape(&self, t: &toml::Table, cli: &Overrides) -> Result<Shape, PlanError> {
        self.check_keys(t, "", TOP_KEYS)?;
        for set in &cli.sets {
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
        let workload = self.workload(t)?;
        let length = self.length(t, cli)?;
        let (repeats, adaptive) = self.repeats(t, cli.repeats)?;
        let order = self.order(t, adaptive.is_some())?;
        let order_seed = self.order_seed(t, order)?;
        let config = self.config(t, workload)?;
        let file_set = self.file_set(t, workload, &cli.sets)?;
        Ok(Shape {
            name,
            description,
            notes,
            workload,
            iterations: length.iterations,
            warmup: length.warmup,
            warmup_auto: length.warmup_auto,
            repeats,
            adaptive,
            order,
            order_seed,
            config,
            file_set,
        })
    }

    fn workload(&self, t: &toml::Table) -> Result<Workload, PlanError> {
        let workload_text = self.read(at(t, "").string("workload"))?.ok_or_else(|| {
            self.err(
                "workload",
                "missing (expected train, bench-forward, bench-trainer or command)",
            )
        })?;
        Workload::parse(&workload_text).ok_or_else(|| {
            self.err(
                "workload",
                format!(
                    "unknown workload `{workload_text}` (expected train, bench-forward, bench-trainer or command)"
                ),
            )
        })
    }

    /// `iterations` and `warmup`, or the flags in their place (`--runs`
    /// counts the runs after the warm-up instead of all of them); the
    /// warm-up must leave iterations for statistics.
    fn length(&self, t: &toml::Table, cli: &Overrides) -> Result<Length, PlanError> {
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
        let (warmup, warmup_auto) = self.warmup(t, cli.warmup.as_deref())?;
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
        Ok(Length {
            iterations,
            warmup,
            warmup_auto,
        })
    }

    /// `warmup` (a count or `"auto"`), or `--warmup` in its place: the
    /// count, and whether it is detected per cell instead.
    fn warmup(&self, t: &toml::Table, cli: Option<&str>) -> Result<(u32, bool), PlanError> {
        match cli {
            Some("auto") => Ok((0, true)),
            Some(w) => match w.parse::<u32>() {
                Ok(n) => Ok((n, false)),
                Err(_) => Err(PlanError::Flag {
                    flag: "--warmup",
                    message: format!("expected an integer ≥ 0 or `auto`, found `{w}`"),
                }),
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
                Ok((n, auto))
            }
        }
    }

    /// `repeats` (a count, or a table for adaptive repeats), or `--repeats`
    /// in its place: the most cells per arm, and the adaptive rule if any.
    fn repeats(
        &self,
        t: &toml::Table,
        cli: Option<u32>,
    ) -> Result<(u32, Option<Adaptive>), PlanError> {
        match (cli, t.get("repeats")) {
            (Some(n), _) if !(1..=MAX_REPEATS).contains(&n) => Err(PlanError::Flag {
                flag: "--repeats",
                message: format!("expected an integer from 1 to {MAX_REPEATS}"),
            }),
            (Some(n), _) => Ok((n, None)),
            (None, Some(toml::Value::Table(r))) => {
                let adaptive = self.adaptive(r)?;
                Ok((adaptive.max, Some(adaptive)))
            }
            (None, _) => match self.count(t, "repeats", 1)?.unwrap_or(1) {
                n if n > MAX_REPEATS => Err(self.err(
                    "repeats",
                    format!("expected an integer from 1 to {MAX_REPEATS}"),
                )),
                n => Ok((n, None)),
            },
        }
    }

    /// `repeats = { min, max, precision }`.
    fn adaptive(&self, r: &toml::Table) -> Result<Adaptive, PlanError> {
        self.check_keys(r, "repeats.", REPEATS_KEYS)?;
        let count = |key: &str| -> Result<u32, PlanError> {
            match r.get(key) {
                Some(toml::Value::Integer(n)) if *n >= 1 && *n <= i64::from(MAX_REPEATS) => {
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
        Ok(Adaptive {
            min,
            max,
            precision,
        })
    }

    /// `order` (interleaved unless the file says sequential, which
    /// adaptive repeats cannot run).
    fn order(&self, t: &toml::Table, adaptive: bool) -> Result<Order, PlanError> {
        let order_text = self.read(at(t, "").string("order"))?;
        if adaptive && order_text.as_deref() == Some("sequential") {
            return Err(self.err(
                "order",
                "adaptive repeats run interleaved rounds (A B A B …); remove `order = \"sequential\"`",
            ));
        }
        match order_text.as_deref() {
            None | Some("interleaved") => Ok(Order::Interleaved),
            Some("sequential") => Ok(Order::Sequential),
            Some("randomized") => Ok(Order::Randomized),
            Some(other) => Err(self.err(
                "order",
                format!("unknown order `{other}` (expected interleaved, randomized or sequential)"),
            )),
        }
    }

    /// `order_seed`: what a randomized order is drawn from (0 unless
    /// given; only a randomized order reads it).
    fn order_seed(&self, t: &toml::Table, order: Order) -> Result<u64, PlanError> {
        let Some(value) = t.get("order_seed") else {
            return Ok(0);
        };
        if order != Order::Randomized {
            return Err(self.err(
                "order_seed",
                "only `order = \"randomized\"` draws an order from a seed; add it, or remove \
                 `order_seed`",
            ));
        }
        value
            .as_integer()
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| {
                self.err(
                    "order_seed",
                    format!("expected an integer ≥ 0, found {value}"),
                )
            })
    }

    /// `config`: the trainer config file, relative to the experiment file.
    fn config(&self, t: &toml::Table, workload: Workload) -> Result<Option<PathBuf>, PlanError> {
        match self.read(at(t, "").string("config"))? {
            None => Ok(None),
            Some(_) if !workload.uses_config() => Err(self.err(
                "config",
                "a command workload takes no trainer config (remove `config`)",
            )),
            Some(c) if c.trim().is_empty() => Err(self.err("config", "must not be empty")),
            Some(c) => Ok(Some(normalize(&self.base_dir().join(c)))),
        }
    }

    /// The file's `set`; neither it nor `--set` applies to a command
    /// workload, which has no trainer config.
    fn file_set(
        &self,
        t: &toml::Table,
        workload: Workload,
        cli_set: &[String],
    ) -> Result<Vec<String>, PlanError> {
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
        Ok(file_set)
    }
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
