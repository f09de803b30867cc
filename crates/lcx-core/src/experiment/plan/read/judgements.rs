//! The third step: what the report judges and shows. `[[columns]]`,
//! `[gate]` and `[[guard]]`, each read and checked against the arms (a
//! gate's or guard's arm must be one of them, its metric one the arms
//! write), then held to agree with one another: one fold and one better
//! side per metric, and no judgement of a metric the file says is never
//! judged. It reads the arms; it changes none of them.

use super::*;

/// The report's keys, read and agreed.
pub(super) struct Judgements {
    pub(super) columns: Vec<Column>,
    pub(super) gate: Option<Gate>,
    pub(super) guards: Vec<Guard>,
}

impl Reader<'_> {
    /// The columns, gate and guards of `arms` (before a sweep grew them),
    /// whose baseline is `baseline`. A bisect probe keeps the file's columns and adds its
    /// metric; the file's gate and guards name its arms and its question,
    /// so a probe has none.
    pub(super) fn judgements(
        &self,
        t: &toml::Table,
        cli: &Overrides,
        workload: Workload,
        arms: &[RawArm],
        baseline: &str,
        sweep: Option<&Sweep>,
    ) -> Result<Judgements, PlanError> {
        let names: BTreeSet<&str> = arms.iter().map(|a| a.name.as_str()).collect();
        let columns = self.columns(t)?;
        let (gate, guards) = match &cli.probe {
            Some(_) => (None, Vec::new()),
            None => (
                self.gate(t, &names, baseline, sweep)?,
                self.guards(t, &names, baseline)?,
            ),
        };
        self.check_judged_written(workload, arms, baseline, gate.as_ref(), &guards)?;
        let (mut columns, guards) = self.agree_folds(columns, guards)?;
        if let Some(probe) = &cli.probe {
            self.probe_column(&mut columns, probe);
        }
        self.check_one_better_side(&columns, &guards)?;
        self.check_judged_directed(&columns, gate.as_ref(), &guards)?;
        Ok(Judgements {
            columns,
            gate,
            guards,
        })
    }

    /// The gate's and each guard's metric is one that the arms it compares
    /// write ([`Reader::check_written`]): the gate's arm (or every arm) and
    /// the baseline, a guard's arm (or every arm) and its own baseline.
    fn check_judged_written(
        &self,
        workload: Workload,
        arms: &[RawArm],
        baseline: &str,
        gate: Option<&Gate>,
        guards: &[(Guard, Option<Fold>)],
    ) -> Result<(), PlanError> {
        if let Some(g) = gate {
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
            let compared_with = g.baseline.as_deref().unwrap_or(baseline);
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
        Ok(())
    }

    /// A guard's `direction` and a column's on the same metric agree.
    fn check_one_better_side(&self, columns: &[Column], guards: &[Guard]) -> Result<(), PlanError> {
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
        Ok(())
    }

    /// A gate or guard judges its metric: not one the file says is never
    /// judged, and not a count of work without a direction.
    fn check_judged_directed(
        &self,
        columns: &[Column],
        gate: Option<&Gate>,
        guards: &[Guard],
    ) -> Result<(), PlanError> {
        let undirected = |metric: &str| {
            columns
                .iter()
                .any(|c| c.metric == metric && c.direction == Some(Direction::Neither))
        };
        if let Some(g) = gate {
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
                .is_some_and(|m| m.better == crate::metrics::Direction::Neither);
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
        Ok(())
    }

    /// A gate's or guard's metric on a built-in workload is one the workload
    /// writes: otherwise every cell would run and the check still end
    /// inconclusive. Checked when one of the arms it compares (`concerned`)
    /// runs this lcx; arms at a revision run that revision's lcx, whose
    /// names may differ. `command` arms write whatever they write, except
    /// that arms lcx times (`timing = "process"`, this lcx's timer whatever
    /// their revision) write its four `process/*` names and nothing else.
    fn check_written<'a>(
        &self,
        workload: Workload,
        key: &str,
        metric: &str,
        concerned: impl Iterator<Item = &'a RawArm>,
    ) -> Result<(), PlanError> {
        let concerned: Vec<&RawArm> = concerned.collect();
        let all = |t: Timing| !concerned.is_empty() && concerned.iter().all(|a| a.timed == Some(t));
        let (writer, who) = match workload.writers() {
            Some(writer) if concerned.iter().any(|a| a.revision.is_none()) => {
                (writer, format!("the {} workload", workload.as_str()))
            }
            None if all(Timing::Process) => (
                crate::metrics::Writers::PROCESS,
                "a command lcx times (`timing = \"process\"`)".to_string(),
            ),
            None if all(Timing::Instructions) => (
                crate::metrics::Writers::COUNTED,
                "a command lcx counts (`timing = \"instructions\"`)".to_string(),
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

    /// The columns, each with the fold the file gave it (`None`: unsaid).
    fn columns(&self, t: &toml::Table) -> Result<Vec<(Column, Option<Fold>)>, PlanError> {
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

    fn gate(
        &self,
        t: &toml::Table,
        arms: &BTreeSet<&str>,
        baseline: &str,
        sweep: Option<&Sweep>,
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
        let points = self.gate_points(g, sweep)?;
        let min_effect = self.read(at(g, "gate.").number("min_effect"))?;
        if let Some(e) = min_effect {
            check_min_effect(e).map_err(|why| self.err("gate.min_effect", why))?;
        }
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
            // A crossover is where the arm starts to pay by the minimum
            // effect: the bound it must be shown to reach from there on.
            (None, None) if matches!(points, GatePoints::Crossover(_)) => {
                1.0 + min_effect.unwrap_or(0.05)
            }
            (None, None) => {
                return Err(self.err(
                    "gate.min_speedup",
                    "missing (e.g. min_speedup = 1.5 to require 1.5×, or max_slowdown = 0.03)",
                ))
            }
        };
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
            points,
        }))
    }

    /// A table's optional `direction` (`lower` | `higher`, and `none` where
    /// `none_ok`: a column may describe, a guard must judge).
    fn direction(
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
    fn fold(&self, t: &toml::Table, prefix: &str) -> Result<Option<Fold>, PlanError> {
        match self.read(at(t, prefix).string("fold"))?.as_deref() {
            None => Ok(None),
            Some("mean") => Ok(Some(Fold::Mean)),
            Some("last") => Ok(Some(Fold::Last)),
            Some("median") => Ok(Some(Fold::Median)),
            Some("min") => Ok(Some(Fold::Min)),
            Some(other) => Err(self.err(
                format!("{prefix}fold"),
                format!("unknown `{other}` (expected mean, median, min or last)"),
            )),
        }
    }

    /// One fold per metric: what any column or guard of it says, the
    /// others agreeing or silent; a metric folded two ways is refused
    /// (its table value and its verdict would judge different numbers).
    fn agree_folds(
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

    fn guards(
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
        Fold::Median => "median",
        Fold::Min => "min",
    }
}
