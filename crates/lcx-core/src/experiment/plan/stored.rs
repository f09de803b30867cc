//! The plan as the store keeps it (`experiments.plan_json`): the plan's
//! JSON with a format `version`. One writer ([`Plan::to_json`]) and one
//! reader ([`Plan::from_stored`]) for `--resume`, reports, history and
//! comparisons alike.

use super::Plan;

/// The newest format [`Plan::to_json`] writes. Plans stored before the
/// key existed have none and are this format's first version: a key added
/// since reads with its default (`#[serde(default)]`). A change that old
/// readers would misread gets a new number: 2 is a plan with a `[sweep]`
/// (an lcx before it would drop the sweep and compare across points); a
/// plan without one is still written as 1, which every lcx reads; 3 is a
/// plan with randomized rounds or arms counted under cachegrind (an lcx
/// before them cannot read the order, or would start cells its timer
/// refuses).
pub const PLAN_VERSION: u64 = 3;

/// Why a stored plan cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum StoredPlanError {
    #[error(
        "it was stored by a newer lcx (plan format {found}; this lcx reads formats up to \
         {PLAN_VERSION}): read it with that lcx or a newer one"
    )]
    Newer { found: u64 },
    #[error("it is not a plan this lcx can read: {0}")]
    Malformed(#[from] serde_json::Error),
}

impl Plan {
    /// The plan as stored: its JSON, with `version` = [`PLAN_VERSION`].
    pub fn to_json(&self) -> String {
        // A plan is strings, numbers and maps: serialising cannot fail.
        let mut value = serde_json::to_value(self).unwrap_or_default();
        let counted = self.arms.iter().any(|a| a.counts_instructions());
        let version = if self.order == super::Order::Randomized || counted {
            3
        } else if self.sweep.is_some() {
            2
        } else {
            1
        };
        if let Some(object) = value.as_object_mut() {
            object.insert("version".into(), version.into());
        }
        serde_json::to_string_pretty(&value).unwrap_or_default()
    }

    /// Reads a stored plan of any format up to [`PLAN_VERSION`].
    pub fn from_stored(json: &str) -> Result<Plan, StoredPlanError> {
        let mut value: serde_json::Value = serde_json::from_str(json)?;
        let version = match value.as_object_mut().and_then(|o| o.remove("version")) {
            None => 1,
            Some(v) => v.as_u64().ok_or_else(|| {
                <serde_json::Error as serde::de::Error>::custom(format!(
                    "`version` is {v}, not a format number"
                ))
            })?,
        };
        if version > PLAN_VERSION {
            return Err(StoredPlanError::Newer { found: version });
        }
        let plan: Plan = serde_json::from_value(value)?;
        plan.check_sweep().map_err(|why| {
            StoredPlanError::Malformed(<serde_json::Error as serde::de::Error>::custom(why))
        })?;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::experiment::plan::{from_str, Overrides};

    fn plan() -> Plan {
        from_str(
            "name = \"s\"\nworkload = \"command\"\niterations = 2\n[[arms]]\nname = \"a\"\ncommand = \"true\"\n",
            Path::new("s.toml"),
            &Overrides::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_stored_plan_carries_its_version_and_reads_back() {
        let p = plan();
        let json = p.to_json();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            value["version"], 1,
            "a plan without a sweep every lcx reads"
        );
        assert_eq!(Plan::from_stored(&json).unwrap(), p);
    }

    #[test]
    fn a_plan_stored_before_versions_reads_as_the_first() {
        let p = plan();
        let mut value: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        value.as_object_mut().unwrap().remove("version");
        assert_eq!(Plan::from_stored(&value.to_string()).unwrap(), p);
    }

    #[test]
    fn a_newer_or_broken_plan_is_refused_with_the_reason() {
        let mut value: serde_json::Value = serde_json::from_str(&plan().to_json()).unwrap();
        value["version"] = (PLAN_VERSION + 1).into();
        let err = Plan::from_stored(&value.to_string()).unwrap_err();
        assert!(matches!(err, StoredPlanError::Newer { found } if found == PLAN_VERSION + 1));
        assert!(err.to_string().contains("stored by a newer lcx"), "{err}");
        value["version"] = "two".into();
        let err = Plan::from_stored(&value.to_string()).unwrap_err();
        assert!(err.to_string().contains("`version` is \"two\""), "{err}");
        assert!(matches!(
            Plan::from_stored("{\"name\": 3}"),
            Err(StoredPlanError::Malformed(_))
        ));
    }
}
