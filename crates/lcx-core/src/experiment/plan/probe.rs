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
}

/// The probe's metric as a column, when the file has none for it.
pub(super) fn probe_column(columns: &mut Vec<Column>, probe: &Probe) {
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
