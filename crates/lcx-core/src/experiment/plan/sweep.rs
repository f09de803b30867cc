//! `[sweep]`: every arm at every point of one or more axes, each compared
//! with the baseline at the same point. Its keys take `[matrix]`'s forms
//! (a config key, a `--flag`, `env.NAME`, `revision`); `axis` names the
//! key crossovers run along when there are several.

use super::matrix::{combinations, combo_of, one_way_of_running};
use super::*;

/// The `[sweep]` key that names the crossover's axis rather than giving
/// one: no config key, flag or `env.` key is spelt so.
const ALONG: &str = "axis";

impl Reader<'_> {
    /// The file's arms crossed with the `[sweep]`'s points, and the sweep;
    /// the arms as they were without one.
    pub(super) fn expand_sweep(
        &self,
        t: &toml::Table,
        workload: Workload,
        arms: Vec<RawArm>,
    ) -> Result<(Vec<RawArm>, Option<Sweep>), PlanError> {
        let table = match t.get("sweep") {
            None => return Ok((arms, None)),
            Some(toml::Value::Table(s)) => s,
            Some(other) => {
                return Err(self.key_error(KeyError::wrong("sweep", "a table of lists", other)))
            }
        };
        let axes = table
            .iter()
            .filter(|(key, _)| key.as_str() != ALONG)
            .map(|(key, values)| self.axis("sweep", key, values, workload))
            .collect::<Result<Vec<Axis>, PlanError>>()?;
        if axes.is_empty() {
            return Err(self.err(
                "sweep",
                "has no axis (give at least one key with a list of values, e.g. \
                 \"network.hidden_size\" = [512, 1024, 2048])",
            ));
        }
        let along = self.along(table, &axes)?;
        // Counted before any point is made: a cap with its figure, not
        // gigabytes of points to find out.
        let total = axes
            .iter()
            .try_fold(arms.len().max(1), |n, (_, _, values)| {
                n.checked_mul(values.len())
            });
        if total.is_none_or(|n| n > MAX_ARMS) {
            let sizes: Vec<String> = axes.iter().map(|(_, _, v)| v.len().to_string()).collect();
            return Err(self.err(
                "sweep",
                format!(
                    "makes {} arms ({} arms × {} values); at most {MAX_ARMS} arms in one \
                     experiment (fewer values, or several experiments)",
                    total.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
                    arms.len(),
                    sizes.join(" × ")
                ),
            ));
        }
        self.check_placeholders_used("sweep", &axes, &arms)?;
        let points = combinations(&axes);
        let mut out = Vec::with_capacity(total.unwrap_or(0));
        for arm in &arms {
            let first = out.len();
            for point in &points {
                let swept = self.swept_arm(arm, &axes, point)?;
                check_arm_name(&swept.name).map_err(|m| self.err(swept.key.clone(), m))?;
                check_visible(&swept.label).map_err(|m| self.err(swept.key.clone(), m))?;
                out.push(swept);
            }
            one_way_of_running(&mut out[first..]);
        }
        let sweep = Sweep {
            axes: axes
                .into_iter()
                .map(|(key, short, values)| SweepAxis {
                    key,
                    short,
                    values: values.into_iter().map(|(raw, _)| raw).collect(),
                })
                .collect(),
            along,
        };
        Ok((out, Some(sweep)))
    }

    /// `axis = KEY`: which axis crossovers run along; required with
    /// several keys (TOML gives them sorted, not as written), refused
    /// naming a key the table does not have.
    fn along(&self, table: &toml::Table, axes: &[Axis]) -> Result<usize, PlanError> {
        let keys = || {
            axes.iter()
                .map(|(k, _, _)| format!("\"{k}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self.read(at(table, "sweep.").string(ALONG))? {
            None if axes.len() == 1 => Ok(0),
            None => Err(self.err(
                "sweep.axis",
                format!(
                    "missing: with several keys, name the one crossovers run along (one of {})",
                    keys()
                ),
            )),
            Some(key) => axes.iter().position(|(k, _, _)| *k == key).ok_or_else(|| {
                self.err(
                    "sweep.axis",
                    format!("`{key}` is not a key of [sweep] (keys: {})", keys()),
                )
            }),
        }
    }

    /// `arm` at one point: the point's values laid over the arm's own.
    fn swept_arm(&self, arm: &RawArm, axes: &[Axis], point: &[usize]) -> Result<RawArm, PlanError> {
        let mut swept = self.laid_over("sweep", arm, combo_of(axes, point))?;
        swept.sweep = Some(SweepPoint {
            arm: arm.name.clone(),
            values: axes
                .iter()
                .zip(point)
                .map(|((_, _, values), &i)| values[i].0.clone())
                .collect(),
        });
        Ok(swept)
    }

    /// A gate's `from`, `at` or `crossover_at_most`: values of the sweep's
    /// crossover axis; refused without a sweep, or naming no point.
    pub(super) fn gate_points(
        &self,
        g: &toml::Table,
        sweep: Option<&Sweep>,
    ) -> Result<GatePoints, PlanError> {
        let given: Vec<&str> = ["from", "at", "crossover_at_most"]
            .into_iter()
            .filter(|k| g.contains_key(*k))
            .collect();
        let key = match given.as_slice() {
            [] => return Ok(GatePoints::Every),
            [one] => *one,
            [a, b, ..] => {
                return Err(self.err(
                    format!("gate.{b}"),
                    format!("give one of `from`, `at` and `crossover_at_most`, not `{a}` too"),
                ))
            }
        };
        let full = format!("gate.{key}");
        let Some(sweep) = sweep else {
            return Err(self.err(full, "names points of a [sweep], and this file has none"));
        };
        let axis = &sweep.axes[sweep.along];
        let point = |value: &toml::Value, at: &str| -> Result<String, PlanError> {
            let text = self.scalar_text(at, value, "a value of the axis")?;
            if axis.values.contains(&text) {
                Ok(text)
            } else {
                Err(self.err(
                    at,
                    format!(
                        "`{text}` is not a point of the sweep's axis `{}` (points: {})",
                        axis.key,
                        axis.values.join(", ")
                    ),
                ))
            }
        };
        let value = &g[key];
        Ok(match key {
            "at" => {
                let toml::Value::Array(items) = value else {
                    return Err(self.key_error(KeyError::wrong(full, "a list of points", value)));
                };
                if items.is_empty() {
                    return Err(self.err(full, "the list of points is empty"));
                }
                let points = items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| point(v, &format!("{full}[{i}]")))
                    .collect::<Result<Vec<String>, PlanError>>()?;
                GatePoints::At(points)
            }
            "from" => GatePoints::From(point(value, &full)?),
            _ => GatePoints::Crossover(point(value, &full)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<Plan, PlanError> {
        from_str(text, Path::new("/exp/x.toml"), &Overrides::default())
    }

    fn error(text: &str) -> String {
        plan(text).expect_err("expected an error").to_string()
    }

    const SWEEP: &str = r#"
name = "s"
workload = "command"
iterations = 3
baseline = "fp32"
[[arms]]
name = "fp32"
command = "echo 1"
[[arms]]
name = "amp"
command = "echo 2"
env = { AMP = "1" }
[sweep]
"env.HIDDEN" = [512, 1024, 2048]
"#;

    #[test]
    fn every_arm_runs_at_every_point_against_the_baseline_there() {
        let p = plan(SWEEP).unwrap();
        let names: Vec<&str> = p.arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "fp32-hidden-512",
                "fp32-hidden-1024",
                "fp32-hidden-2048",
                "amp-hidden-512",
                "amp-hidden-1024",
                "amp-hidden-2048"
            ]
        );
        assert_eq!(p.baseline, "fp32");
        let amp = &p.arms[5];
        assert_eq!(amp.env.get("HIDDEN").map(String::as_str), Some("2048"));
        assert_eq!(amp.env.get("AMP").map(String::as_str), Some("1"));
        assert_eq!(p.baseline_of("amp-hidden-2048"), Some("fp32-hidden-2048"));
        assert_eq!(p.baseline_of("fp32-hidden-512"), Some("fp32-hidden-512"));
        assert_eq!(p.file_arm_of("amp-hidden-1024"), "amp");
        assert_eq!(
            p.at_point_of("amp", "fp32-hidden-512"),
            Some("amp-hidden-512")
        );
        let sweep = p.sweep.as_ref().unwrap();
        assert_eq!(sweep.points().len(), 3);
        assert_eq!(sweep.label(&["1024".into()]), "hidden 1024");
        assert!(!sweep.counts_workers(0));
        // A stored plan reads back as it was (a resume runs the same sweep).
        assert_eq!(Plan::from_stored(&p.to_json()).unwrap(), p);
    }

    #[test]
    fn a_grid_needs_the_axis_named_and_config_keys_set_the_config() {
        let grid = SWEEP.replace("[sweep]\n", "[sweep]\n\"env.LAYERS\" = [3, 6]\n");
        let e = error(&grid);
        assert!(e.contains("sweep.axis: missing"), "{e}");
        assert!(e.contains("\"env.HIDDEN\""), "{e}");
        let e = error(&grid.replace("[sweep]\n", "[sweep]\naxis = \"env.WIDTH\"\n"));
        assert!(e.contains("`env.WIDTH` is not a key of [sweep]"), "{e}");
        let p = plan(&grid.replace("[sweep]\n", "[sweep]\naxis = \"env.HIDDEN\"\n")).unwrap();
        assert_eq!(p.arms.len(), 12);
        let sweep = p.sweep.unwrap();
        assert_eq!(sweep.axes[sweep.along].key, "env.HIDDEN");
        // A config key on an lcx workload goes into the arm's `set`.
        let train = r#"
name = "t"
workload = "bench-forward"
iterations = 3
[sweep]
"traversal.num_workers" = [1, 2]
"#;
        let p = plan(train).unwrap();
        assert_eq!(p.arms[1].set, ["traversal.num_workers=2"]);
        assert!(p.sweep.unwrap().counts_workers(0));
    }

    /// A timed command scanned as hyperfine scans one: `{n}` replaced per
    /// point, `$n` set, and the arms of one command run one way.
    const SCAN: &str = r#"
name = "scan"
workload = "command"
timing = "process"
iterations = 3
[[arms]]
name = "sum"
command = "./sum {n} {nn}"
[sweep]
"{n}" = [10, "2;x"]
"#;

    #[test]
    fn a_placeholder_key_fills_the_command_at_each_point_and_sets_its_variable() {
        let p = plan(SCAN).unwrap();
        let names: Vec<&str> = p.arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["sum-n-10", "sum-n-2-x"]);
        // `{nn}` is no placeholder of `n`; `2;x` needs a shell, so `10`
        // runs through one too (the arms differ by the value alone).
        for (arm, text) in p.arms.iter().zip(["./sum 10 {nn}", "./sum 2;x {nn}"]) {
            let args = &arm.args;
            assert!(args.contains(&"--subtract-shell".to_string()), "{args:?}");
            assert_eq!(args.last().map(String::as_str), Some(text), "{args:?}");
        }
        assert_eq!(p.arms[0].env.get("n").map(String::as_str), Some("10"));
        let sweep = p.sweep.as_ref().unwrap();
        assert_eq!(sweep.axes[0].key, "{n}");
        assert_eq!(sweep.axes[0].values, ["10", "2;x"]);
        // Plain values stay plain words, run without a shell.
        let plain = plan(&SCAN.replace("\"2;x\"", "20").replace(" {nn}", "")).unwrap();
        assert!(plain
            .arms
            .iter()
            .all(|a| !a.args.contains(&"--subtract-shell".to_string())));
        assert_eq!(plain.arms[1].args.last().map(String::as_str), Some("20"));
        // Values replaced in one pass over every placeholder key.
        let two = plan(&SCAN.replace(
            "\"{n}\" = [10, \"2;x\"]",
            "\"{n}\" = [\"{nn}\"]\n\"{nn}\" = [7]\naxis = \"{n}\"",
        ))
        .unwrap();
        assert_eq!(
            two.arms[0].args.last().map(String::as_str),
            Some("./sum {nn} 7")
        );
    }

    #[test]
    fn a_placeholder_no_command_uses_or_a_trainer_workload_is_refused() {
        let e = error(&SCAN.replace("\"{n}\"", "\"{m}\""));
        assert!(
            e.contains("sweep.{m}: no arm's command holds `{m}` or reads `$m`"),
            "{e}"
        );
        let e = error(&SCAN.replace("\"{n}\"", "\"{1n}\""));
        assert!(e.contains("sweep.{1n}:"), "{e}");
        let e = error(
            "name = \"t\"\nworkload = \"bench-forward\"\niterations = 3\n[sweep]\n\"{n}\" = [1, 2]\n",
        );
        assert!(
            e.contains("sweep.{n}: a placeholder key ({NAME}) replaces `{NAME}` in a command arm"),
            "{e}"
        );
    }

    #[test]
    fn bad_sweeps_are_refused_by_key() {
        let e = error(&SWEEP.replace("\"env.HIDDEN\" = [512, 1024, 2048]", ""));
        assert!(e.contains("sweep: has no axis"), "{e}");
        let e = error(&SWEEP.replace("[512, 1024, 2048]", "[]"));
        assert!(
            e.contains("sweep.env.HIDDEN: the list of values is empty"),
            "{e}"
        );
        let e = error(&SWEEP.replace("\"env.HIDDEN\"", "\"model.hidden\""));
        assert!(
            e.contains("only takes env.NAME, {NAME} and revision sweep keys"),
            "{e}"
        );
        let e = error(&SWEEP.replace("baseline = \"fp32\"", "baseline = \"fp32-hidden-512\""));
        assert!(
            e.contains("baseline: `fp32-hidden-512` names no arm"),
            "{e}"
        );
    }

    #[test]
    fn arms_picks_file_arms_and_says_so_of_a_point() {
        let only = |arms: &[&str], text: &str| {
            let cli = Overrides {
                arms: arms.iter().map(|a| a.to_string()).collect(),
                ..Overrides::default()
            };
            from_str(text, Path::new("/exp/x.toml"), &cli)
        };
        let e = only(&["fp32", "amp-hidden-1024"], SWEEP)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`amp-hidden-1024` is arm `amp` at one point of [sweep]"),
            "{e}"
        );
        assert_eq!(only(&["fp32"], SWEEP).unwrap().arms.len(), 3);
        // The one arm of a sweep without [[arms]] is named after its
        // workload, and --arms may name it.
        let train = "name = \"t\"\nworkload = \"bench-forward\"\niterations = 3\n\
                     [sweep]\n\"--batch-sizes\" = [1, 4]\n";
        let p = only(&["bench-forward"], train).unwrap();
        assert_eq!(p.arms.len(), 2);
        assert_eq!(p.baseline, "bench-forward");
        assert_eq!(p.arms, plan(train).unwrap().arms);
    }

    #[test]
    fn a_stored_sweep_is_format_2_and_checked_when_read() {
        let p = plan(SWEEP).unwrap();
        let mut json: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        // An lcx before sweeps reads format 1 only: it refuses, never
        // compares across points.
        assert_eq!(json["version"], 2);
        json["sweep"]["along"] = 5.into();
        let e = Plan::from_stored(&json.to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("its sweep runs along axis 5 of 1"), "{e}");
        json["sweep"]["along"] = 0.into();
        json["arms"][0]["sweep"]["values"] = serde_json::json!([]);
        let e = Plan::from_stored(&json.to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains("has a value on 0 of the sweep's 1 axes"), "{e}");
    }

    #[test]
    fn a_sweep_too_big_is_counted_not_made() {
        let values = format!(
            "[{}]",
            (0..1000)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let huge = SWEEP.replace(
            "[sweep]\n\"env.HIDDEN\" = [512, 1024, 2048]\n",
            &format!(
                "[sweep]\naxis = \"env.A\"\n\"env.A\" = {values}\n\"env.B\" = {values}\n\
                 \"env.C\" = {values}\n\"env.D\" = {values}\n"
            ),
        );
        let e = error(&huge);
        assert!(
            e.contains(
                "sweep: makes 2000000000000 arms (2 arms × 1000 × 1000 × 1000 × 1000 values)"
            ),
            "{e}"
        );
    }

    #[test]
    fn gates_name_points_of_the_axis() {
        let gate =
            |extra: &str| format!("{SWEEP}[gate]\nmetric = \"my/seconds\"\narm = \"amp\"\n{extra}");
        let p = plan(&gate("crossover_at_most = 1024")).unwrap();
        let g = p.gate.unwrap();
        assert_eq!(g.points, GatePoints::Crossover("1024".into()));
        assert!((g.min_speedup - 1.05).abs() < 1e-12);
        let p = plan(&gate("min_speedup = 1.2\nat = [512, 2048]")).unwrap();
        assert_eq!(
            p.gate.unwrap().points,
            GatePoints::At(vec!["512".into(), "2048".into()])
        );
        let e = error(&gate("min_speedup = 1.2\nfrom = 4096"));
        assert!(e.contains("gate.from: `4096` is not a point"), "{e}");
        let e = error(&gate("min_speedup = 1.2\nfrom = 512\nat = [512]"));
        assert!(
            e.contains("give one of `from`, `at` and `crossover_at_most`"),
            "{e}"
        );
        let e = error(&gate("from = 512"));
        assert!(e.contains("gate.min_speedup: missing"), "{e}");
        let no_sweep = SWEEP.replace("[sweep]\n\"env.HIDDEN\" = [512, 1024, 2048]\n", "");
        let e = error(&format!(
            "{no_sweep}[gate]\nmetric = \"m\"\nmin_speedup = 1.1\nfrom = 512"
        ));
        assert!(e.contains("gate.from: names points of a [sweep]"), "{e}");
        let e =
            error(&gate("min_speedup = 1.2").replace("arm = \"amp\"", "arm = \"amp-hidden-512\""));
        assert!(e.contains("gate.arm: `amp-hidden-512` names no arm"), "{e}");
    }
}
