//! The typed values of an experiment file that several tables share: a
//! count, a `set` list, an array of tables, a command (`command` and the
//! hooks), a `timeout`, `timing`, and strings bound for a command line or a
//! Slurm script. Each refuses a bad value with its key and this file; none
//! decides what a key means for the plan (the steps do).

use super::rules::not_one_line;
use super::*;

impl Reader<'_> {
    /// Strings that become argv or environment entries cannot hold a NUL
    /// byte (the child could not be started); refuse them with the file.
    pub(in crate::experiment::plan) fn no_nul(
        &self,
        key: impl Into<String>,
        value: &str,
    ) -> Result<(), PlanError> {
        if value.contains('\0') {
            return Err(self.err(
                key,
                "contains a NUL byte, which no command line or environment can carry",
            ));
        }
        Ok(())
    }

    /// A scalar the file may write as a string, a number or a boolean (an
    /// `env` value, a `[matrix]` or `[sweep]` value, a gate's point), as
    /// the text a command line or a comparison takes: a string as it is,
    /// the others as TOML writes them. Anything else is refused as not
    /// `expected`.
    pub(in crate::experiment::plan) fn scalar_text(
        &self,
        key: impl Into<String>,
        value: &toml::Value,
        expected: &str,
    ) -> Result<String, PlanError> {
        match value {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                Ok(value.to_string())
            }
            other => Err(self.key_error(KeyError::wrong(key, expected, other))),
        }
    }

    /// A value written into a job script's `#SBATCH` lines (an option, the
    /// job name): one line, or it could end the line and run as a command.
    pub(super) fn one_line(&self, key: impl Into<String>, value: &str) -> Result<(), PlanError> {
        match not_one_line(value) {
            Some(problem) => Err(self.err(key, problem)),
            None => Ok(()),
        }
    }

    pub(in crate::experiment::plan) fn revision_text(
        &self,
        key: &str,
        value: &str,
    ) -> Result<String, PlanError> {
        check_revision(value).map_err(|m| self.err(key, m))
    }

    /// `build` runs a command arm's build in its revision's checkout; lcx
    /// workloads always build with cargo.
    pub(in crate::experiment::plan) fn check_build(
        &self,
        key: &str,
        build: &str,
        workload: Workload,
    ) -> Result<(), PlanError> {
        if workload.uses_config() {
            return Err(self.err(
                key,
                format!(
                    "a {} arm at a revision is built with `cargo build --release --locked`; \
                     `build` is for command arms",
                    workload.as_str()
                ),
            ));
        }
        if build.trim().is_empty() {
            return Err(self.err(key, "must not be empty"));
        }
        self.no_nul(key, build)
    }

    pub(super) fn count(
        &self,
        table: &toml::Table,
        key: &str,
        min: i64,
    ) -> Result<Option<u32>, PlanError> {
        let Some(value) = table.get(key) else {
            return Ok(None);
        };
        // Bounded above only by u32, which the message names only when that
        // is the bound crossed.
        let n = self.read(toml_read::integer(key, value, min, i64::MAX))?;
        u32::try_from(n).map(Some).map_err(|_| {
            let expected = format!("an integer from {min} to {}", u32::MAX);
            self.key_error(KeyError::wrong(key, expected, value))
        })
    }

    /// `set` lists: each entry must at least look like `key=value`; the
    /// config reader checks keys and values when the arm is resolved.
    pub(in crate::experiment::plan) fn sets(
        &self,
        table: &toml::Table,
        key: &str,
        prefix: &str,
    ) -> Result<Vec<String>, PlanError> {
        let sets = self.read(at(table, prefix).strings(key))?;
        for (i, set) in sets.iter().enumerate() {
            self.no_nul(format!("{prefix}{key}[{i}]"), set)?;
            if let Err(e) = crate::config::Set::parse(set) {
                return Err(self.err(format!("{prefix}{key}[{i}]"), e.to_string()));
            }
        }
        Ok(sets)
    }

    pub(in crate::experiment::plan) fn tables<'t>(
        &self,
        table: &'t toml::Table,
        key: &str,
    ) -> Result<Vec<&'t toml::Table>, PlanError> {
        match table.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    toml::Value::Table(t) => Ok(t),
                    other => Err(self.key_error(KeyError::wrong(
                        format!("{key}[{i}]"),
                        "a table",
                        other,
                    ))),
                })
                .collect(),
            Some(other) => Err(self.key_error(KeyError::wrong(
                key,
                format!("an array of tables ([[{key}]])"),
                other,
            ))),
        }
    }

    /// `setup`, `prepare` and `cleanup` of the file or an arm: each a
    /// command, an array run without a shell or a string through `sh -c`.
    pub(in crate::experiment::plan) fn hooks(
        &self,
        table: &toml::Table,
        prefix: &str,
    ) -> Result<Hooks, PlanError> {
        let mut hooks = Hooks::default();
        for key in Hooks::KEYS {
            let argv = self.argv(table, prefix, key)?;
            match key {
                "setup" => hooks.setup = argv,
                "prepare" => hooks.prepare = argv,
                _ => hooks.cleanup = argv,
            }
        }
        Ok(hooks)
    }

    /// A command-valued key (`command`, a hook) as an argv: a string runs
    /// through `sh -c`, an array as it is (its first entry the program).
    /// (A timed arm's string may then run without the shell: `resolve`.)
    pub(in crate::experiment::plan) fn argv(
        &self,
        table: &toml::Table,
        prefix: &str,
        key: &str,
    ) -> Result<Option<Vec<String>>, PlanError> {
        let path = format!("{prefix}{key}");
        match table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) if s.trim().is_empty() => {
                Err(self.err(path, "must not be empty"))
            }
            Some(toml::Value::String(s)) => {
                self.no_nul(path, s)?;
                Ok(Some(vec!["sh".to_string(), "-c".to_string(), s.clone()]))
            }
            Some(toml::Value::Array(_)) => {
                let argv = self.read(at(table, prefix).strings(key))?;
                for (i, a) in argv.iter().enumerate() {
                    self.no_nul(format!("{path}[{i}]"), a)?;
                }
                if argv.first().is_none_or(|p| p.is_empty()) {
                    return Err(self.err(
                        path,
                        "must name a program (a non-empty array whose first entry is the program)",
                    ));
                }
                Ok(Some(argv))
            }
            Some(other) => Err(self.key_error(KeyError::wrong(
                path,
                "an array of strings or a shell string",
                other,
            ))),
        }
    }

    /// `timeout` of the file or an arm: how long one cell may run, as
    /// `"90s"`, `"10m"`, `"2h"` or a number of seconds; in seconds.
    pub(in crate::experiment::plan) fn timeout(
        &self,
        table: &toml::Table,
        prefix: &str,
    ) -> Result<Option<f64>, PlanError> {
        let key = format!("{prefix}timeout");
        let expected = "expected a duration such as \"90s\", \"10m\" or \"2h\" (or a number of \
                        seconds) above 0 and at most 30 days (\"720h\")";
        let Some(value) = table.get("timeout") else {
            return Ok(None);
        };
        let seconds = seconds(value)
            .ok_or_else(|| self.err(key.clone(), format!("{expected}, found {value}")))?;
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS) {
            return Err(self.err(key, format!("{expected}, found {value}")));
        }
        Ok(Some(seconds))
    }

    /// `timing` in `table` (the file's top level or an arm): `"process"`
    /// (lcx times each run of the command), `"instructions"` (lcx counts
    /// each run under cachegrind) or `"lines"` (the command prints its own
    /// metric lines, the default). Command workloads only.
    pub(in crate::experiment::plan) fn timing(
        &self,
        table: &toml::Table,
        prefix: &str,
        workload: Workload,
    ) -> Result<Option<Timing>, PlanError> {
        let key = format!("{prefix}timing");
        let Some(value) = self.read(at(table, prefix).string("timing"))? else {
            return Ok(None);
        };
        let timing = match value.as_str() {
            "process" => Timing::Process,
            "instructions" => Timing::Instructions,
            "lines" => Timing::Lines,
            other => {
                return Err(self.err(
                    key,
                    format!(
                        "expected \"process\" (lcx times each run of the command), \
                         \"instructions\" (lcx counts each run's instructions under valgrind) \
                         or \"lines\" (the command prints its metric lines), found \"{other}\""
                    ),
                ))
            }
        };
        if timing.by_lcx() && workload.uses_config() {
            return Err(self.err(
                key,
                format!(
                    "timing = \"{value}\" measures a command arm; lcx workloads write their own \
                     lines"
                ),
            ));
        }
        Ok(Some(timing))
    }
}

/// `30`, `"30s"`, `"2m"`, `"1h"`: seconds, or `None` when it is none of them.
pub(super) fn seconds(v: &toml::Value) -> Option<f64> {
    let n = match v {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(x) => *x,
        toml::Value::String(s) => {
            let s = s.trim();
            let (digits, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
                Some((at, _)) => s.split_at(at),
                None => (s, "s"),
            };
            let n: f64 = digits.trim().parse().ok()?;
            n * match unit {
                "s" => 1.0,
                "m" | "min" => 60.0,
                "h" => 3600.0,
                _ => return None,
            }
        }
        _ => return None,
    };
    (n >= 0.0 && n.is_finite()).then_some(n)
}
