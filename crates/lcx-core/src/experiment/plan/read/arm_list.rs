//! The second step: the list of arms. `[[arms]]` with the file's defaults
//! for them (`timing`, `timeout`, hooks, `variable_iterations`), crossed
//! with `[matrix]`, narrowed by `--arms`, given `--revision`s (or made a
//! bisect probe's two arms), each grown into one arm per `[sweep]` point
//! (`sweep.rs`), then checked as a whole: each `build` has a
//! revision to build, no `set` is silently outranked, names are unique,
//! and the baseline is one of them. It reads no report key and nothing of
//! where the cells run; each arm's config is resolved only once the plan
//! is assembled (`resolve.rs`).

use super::shape::Shape;
use super::*;

/// The arms as the file and the command line give them, not yet resolved.
pub(super) struct ArmList {
    pub(super) arms: Vec<RawArm>,
    /// The arms before `[sweep]` grew each into one per point: the names
    /// `baseline`, a gate and a guard use.
    pub(super) unswept: Vec<RawArm>,
    pub(super) sweep: Option<Sweep>,
    pub(super) baseline: String,
    /// The git repository the arms' revisions come from.
    pub(super) repository: PathBuf,
    /// The file's `build`, for arms at a revision without their own.
    pub(super) file_build: Option<String>,
}

impl Reader<'_> {
    /// The arms of a file of this `shape`, with the command line's choice
    /// among them and its revisions.
    pub(super) fn arm_list(
        &self,
        t: &toml::Table,
        cli: &Overrides,
        shape: &Shape,
    ) -> Result<ArmList, PlanError> {
        let workload = shape.workload;
        let arms = self.file_arms(t, workload)?;
        let mut arms = self.expand_matrix(t, workload, arms)?;
        // A sweep of an lcx workload without [[arms]]: one arm, named
        // after the workload, at each point (which `--arms` may name).
        if arms.is_empty() && t.contains_key("sweep") && workload.uses_config() {
            arms.push(RawArm {
                key: "sweep".into(),
                name: workload.as_str().into(),
                label: workload.as_str().into(),
                ..super::super::matrix::bare_arm()
            });
        }
        // The file's default baseline is its first arm, subset or not.
        let file_baseline = arms.first().map(|a| a.name.clone());
        let mut arms = self.select_arms(t, &cli.arms, arms, file_baseline.as_deref())?;
        self.cli_revisions(&mut arms, &cli.revisions)?;
        if let Some(probe) = &cli.probe {
            arms = self.probe_arms(arms, probe)?;
        }
        self.check_unique(&arms)?;
        let baseline = self.baseline(t, cli.probe.is_some(), &arms, file_baseline)?;
        let unswept = arms.clone();
        let (arms, sweep) = self.expand_sweep(t, workload, arms)?;
        let repository = self.repository(t)?;
        let file_build = self.file_build(t, workload, &arms)?;
        self.check_set_precedence(workload, &shape.file_set, &cli.sets, &arms)?;
        self.check_unique(&arms)?;
        Ok(ArmList {
            arms,
            unswept,
            sweep,
            baseline,
            repository,
            file_build,
        })
    }

    /// The `[[arms]]` tables, each given the file's `timing`, `timeout`,
    /// hooks and `variable_iterations` where it says nothing itself.
    fn file_arms(&self, t: &toml::Table, workload: Workload) -> Result<Vec<RawArm>, PlanError> {
        let variable_iterations = self.read(at(t, "").boolean("variable_iterations"))?;
        if variable_iterations.is_some() && workload.uses_config() {
            return Err(self.err(
                "variable_iterations",
                "only command arms may emit a variable number of lines (lcx workloads emit \
                 exactly `iterations`)",
            ));
        }
        let mut raw_arms = self.arms(t, workload)?;
        let timed = self.timing(t, "", workload)?;
        let timeout = self.timeout(t, "")?;
        let hooks = self.hooks(t, "")?;
        for arm in raw_arms.iter_mut() {
            arm.timed = arm.timed.or(timed);
            arm.timeout = arm.timeout.or(timeout);
            arm.hooks = std::mem::take(&mut arm.hooks).or(&hooks);
        }
        if variable_iterations == Some(true) {
            for arm in raw_arms.iter_mut().filter(|a| !a.variable_set) {
                arm.variable_iterations = true;
            }
        }
        if raw_arms.len() > MAX_ARMS {
            return Err(self.err(
                "arms",
                format!(
                    "has {} arms; at most {MAX_ARMS} in one experiment",
                    raw_arms.len()
                ),
            ));
        }
        Ok(raw_arms)
    }

    /// `--revision ARM=REV`: the named arm runs that revision instead of
    /// the file's.
    fn cli_revisions(
        &self,
        arms: &mut [RawArm],
        revisions: &[(String, String)],
    ) -> Result<(), PlanError> {
        for (name, rev) in revisions {
            let rev = check_revision(rev).map_err(|message| PlanError::Flag {
                flag: "--revision",
                message: format!("{name}={rev}: {message}"),
            })?;
            let names = arms
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            match arms.iter_mut().find(|a| &a.name == name) {
                Some(arm) => arm.revision = Some(rev),
                None => {
                    return Err(PlanError::Flag {
                        flag: "--revision",
                        message: format!(
                            "`{name}` names no arm of {} (arms: {names})",
                            self.path.display(),
                        ),
                    })
                }
            }
        }
        Ok(())
    }

    /// `repository`, relative to the file (its folder when absent).
    fn repository(&self, t: &toml::Table) -> Result<PathBuf, PlanError> {
        let base_dir = self.base_dir();
        match self.read(at(t, "").string("repository"))? {
            None => Ok(base_dir),
            Some(r) if r.trim().is_empty() => Err(self.err("repository", "must not be empty")),
            Some(r) => Ok(normalize(&base_dir.join(r))),
        }
    }

    /// The file's `build`; a `build` (the file's or an arm's) needs an arm
    /// at a revision, whose checkout it runs in.
    fn file_build(
        &self,
        t: &toml::Table,
        workload: Workload,
        arms: &[RawArm],
    ) -> Result<Option<String>, PlanError> {
        let file_build = self.read(at(t, "").string("build"))?;
        if let Some(b) = &file_build {
            self.check_build("build", b, workload)?;
        }
        if let Some(arm) = arms
            .iter()
            .find(|a| a.build.is_some() && a.revision.is_none())
        {
            return Err(self.err(
                format!("{}.build", arm.key),
                "`build` runs in the checkout of the arm's `revision`, and this arm has none",
            ));
        }
        Ok(file_build)
    }

    /// At least one arm, and no two of one name.
    fn check_unique(&self, arms: &[RawArm]) -> Result<(), PlanError> {
        if arms.is_empty() {
            return Err(self.err(
                "arms",
                "no arms: give at least one [[arms]] table or a [matrix]",
            ));
        }
        let mut seen = BTreeSet::new();
        for arm in arms {
            if !seen.insert(arm.name.as_str()) {
                return Err(self.err(
                    arm.key.clone(),
                    "duplicate arm name; arm names must be unique",
                ));
            }
        }
        Ok(())
    }

    /// `baseline`: an arm's name, else the file's first arm (`file_baseline`,
    /// before `--arms` chose among them). A probe's baseline is its `good`
    /// arm, whatever the file's is.
    fn baseline(
        &self,
        t: &toml::Table,
        probe: bool,
        arms: &[RawArm],
        file_baseline: Option<String>,
    ) -> Result<String, PlanError> {
        match self.read(at(t, "").string("baseline"))? {
            _ if probe => Ok("good".to_string()),
            None => Ok(file_baseline.unwrap_or_else(|| arms[0].name.clone())),
            Some(b) if arms.iter().any(|a| a.name == b) => Ok(b),
            Some(b) => Err(self.err(
                "baseline",
                format!(
                    "`{b}` names no arm (arms: {})",
                    arms.iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }
}
