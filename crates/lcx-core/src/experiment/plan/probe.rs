//! `lcx bisect`'s probes, built by the same reader as every plan: the
//! file's arm twice, as the baseline `good` at one revision and as
//! `candidate` at another. The file's gate, guards and adaptive repeats do
//! not apply to a probe (they name the file's arms and its question), and
//! the bisected metric is always a column.

use super::read::{RawArm, Reader};
use super::resolve::check_revision;
use super::{Column, Fold, PlanError, Show};

/// One probe of `lcx bisect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The file's arm that is bisected.
    pub arm: String,
    /// The baseline's revision (`good`), and how the report labels it.
    pub good: (String, String),
    /// The probed revision (`candidate`), and its label.
    pub candidate: (String, String),
    /// The metric the bisection judges.
    pub metric: String,
}

impl Reader<'_> {
    /// The probe's two arms, from the file's arm `probe.arm`.
    pub(super) fn probe_arms(
        &self,
        arms: Vec<RawArm>,
        probe: &Probe,
    ) -> Result<Vec<RawArm>, PlanError> {
        let names = arms
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let Some(template) = arms.into_iter().find(|a| a.name == probe.arm) else {
            return Err(PlanError::Flag {
                flag: "--arm",
                message: format!(
                    "`{}` names no arm of {} (arms: {names})",
                    probe.arm,
                    self.path.display()
                ),
            });
        };
        let arm = |name: &str, (rev, label): &(String, String)| -> Result<RawArm, PlanError> {
            let revision = check_revision(rev).map_err(|message| PlanError::Flag {
                flag: "--good/--bad",
                message: format!("{rev}: {message}"),
            })?;
            Ok(RawArm {
                name: name.to_string(),
                label: label.clone(),
                revision: Some(revision),
                ..template.clone()
            })
        };
        Ok(vec![
            arm("good", &probe.good)?,
            arm("candidate", &probe.candidate)?,
        ])
    }

    /// The probe's metric as a column, when the file has none for it.
    pub(super) fn probe_column(&self, columns: &mut Vec<Column>, probe: &Probe) {
        if !columns.iter().any(|c| c.metric == probe.metric) {
            columns.push(Column {
                metric: probe.metric.clone(),
                label: probe.metric.clone(),
                show: Show::Both,
                direction: None,
                fold: Fold::Mean,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::experiment::plan::{from_str, Overrides};

    const FILE: &str = r#"
name = "b"
workload = "command"
iterations = 2
repeats = { min = 2, max = 4, precision = 0.05 }
[[arms]]
name = "base"
command = "echo 1"
env = { K = "v" }
[[arms]]
name = "fast"
command = "echo 2"
[[columns]]
metric = "t"
[gate]
metric = "t"
arm = "fast"
min_speedup = 1.1
"#;

    fn probe(arm: &str, metric: &str) -> Overrides {
        Overrides {
            probe: Some(Probe {
                arm: arm.into(),
                good: ("v1".into(), format!("{arm} at v1")),
                candidate: ("abc123".into(), format!("{arm} at abc123")),
                metric: metric.into(),
            }),
            ..Overrides::default()
        }
    }

    #[test]
    fn a_probe_is_the_files_arm_at_two_revisions_without_the_files_question() {
        let p = from_str(FILE, Path::new("/e/b.toml"), &probe("base", "u")).unwrap();
        assert_eq!(p.name, "b-bisect");
        let arms: Vec<_> = p
            .arms
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    a.label.as_str(),
                    a.revision.as_ref().map(|r| r.asked.as_str()),
                )
            })
            .collect();
        assert_eq!(
            arms,
            [
                ("good", "base at v1", Some("v1")),
                ("candidate", "base at abc123", Some("abc123"))
            ]
        );
        // Everything else of the arm comes with it.
        assert!(p
            .arms
            .iter()
            .all(|a| a.env.get("K").map(String::as_str) == Some("v")));
        assert_eq!(p.baseline, "good");
        assert!(p.gate.is_none() && p.guards.is_empty() && p.adaptive.is_none());
        let metrics: Vec<_> = p.columns.iter().map(|c| c.metric.as_str()).collect();
        assert_eq!(metrics, ["t", "u"]);
        // A stored probe reads back like any plan.
        assert_eq!(
            crate::experiment::Plan::from_stored(&p.to_json()).unwrap(),
            p
        );
    }

    #[test]
    fn a_probe_of_an_arm_the_file_lacks_or_a_bad_revision_is_refused() {
        let err = from_str(FILE, Path::new("/e/b.toml"), &probe("slow", "t")).unwrap_err();
        assert!(
            err.to_string()
                .contains("--arm: `slow` names no arm of /e/b.toml (arms: base, fast)"),
            "{err}"
        );
        let mut bad = probe("base", "t");
        if let Some(p) = bad.probe.as_mut() {
            p.candidate.0 = "--exec=x".into();
        }
        let err = from_str(FILE, Path::new("/e/b.toml"), &bad).unwrap_err();
        assert!(
            err.to_string().starts_with("--good/--bad: --exec=x"),
            "{err}"
        );
    }
}
