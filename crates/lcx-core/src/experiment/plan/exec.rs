//! Whether each arm's cells can be started at all: `execve` refuses an
//! argument list and environment above the system's limit ("Argument list
//! too long"), and Linux refuses any one string above `MAX_ARG_STRLEN`. A
//! plan checks both when it is loaded, so `--dry-run` refuses what `run`
//! could not start, rather than every cell failing later.

use super::{Arm, Plan, PlanError};

/// The limits `execve` applies on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// Argument and environment strings together, pointers included.
    pub total: usize,
    /// One string (an argument, or one `NAME=value`).
    pub one: usize,
}

/// Linux's `MAX_ARG_STRLEN` (32 pages): the longest single string.
const MAX_ARG_STRLEN: usize = 32 * 4096;

/// Room kept for what lcx cannot know in advance (the length of a cell's
/// `LCX_RUN_ID`, its folder, what the kernel adds), as xargs keeps.
const RESERVE: usize = 4096;

impl ExecLimits {
    /// This host's: `sysconf(_SC_ARG_MAX)` (a quarter of the stack limit
    /// on Linux) and `MAX_ARG_STRLEN`.
    pub fn here() -> ExecLimits {
        // SAFETY: sysconf only reads a system setting.
        let max = unsafe { libc::sysconf(libc::_SC_ARG_MAX) };
        let total = usize::try_from(max)
            .ok()
            .filter(|&m| m > 0)
            .unwrap_or(128 * 1024);
        ExecLimits {
            total,
            one: MAX_ARG_STRLEN,
        }
    }
}

/// What `execve` counts for one string of `len` bytes: its bytes, its NUL
/// and its pointer.
fn execve_bytes(len: usize) -> usize {
    len + 1 + std::mem::size_of::<*const u8>()
}

/// What `execve` counts for `strings`.
fn counted<'a>(strings: impl IntoIterator<Item = &'a str>) -> usize {
    strings.into_iter().map(|s| execve_bytes(s.len())).sum()
}

/// The environment lcx gives every cell (`LCX_EXPERIMENT`, …), at its
/// longest: ids of 20 digits, a commit's 64 hex digits.
fn lcx_env(plan: &Plan, arm: &Arm) -> Vec<String> {
    let mut env = vec![
        format!("LCX_EXPERIMENT={}", plan.name),
        format!("LCX_ARM={}", arm.name),
        format!("LCX_REPEAT={}", u64::MAX),
        format!("LCX_ITERATIONS={}", plan.iterations),
        format!("LCX_RUN_ID={}", u64::MAX),
    ];
    if let Some(r) = &arm.revision {
        env.push(format!("LCX_REVISION={}", r.asked));
        env.push(format!("LCX_REVISION_SHA={}", "0".repeat(64)));
    }
    env
}

impl Plan {
    /// Refuses an arm whose cells (or hooks) could not be started here:
    /// one string above `limits.one`, or its arguments and environment
    /// (the runner's own, `inherited` bytes as [`counted`] counts them, plus
    /// lcx's and the arm's) above `limits.total`.
    pub fn check_exec_size(&self, limits: ExecLimits, inherited: usize) -> Result<(), PlanError> {
        let key = |arm: &Arm| format!("arms (`{}`)", arm.name);
        let invalid = |key: String, message: String| PlanError::Invalid {
            path: self.file.clone(),
            key,
            message,
        };
        for arm in &self.arms {
            let env: Vec<String> = lcx_env(self, arm)
                .into_iter()
                .chain(arm.env.iter().map(|(k, v)| format!("{k}={v}")))
                .collect();
            let own = counted(env.iter().map(String::as_str));
            for (k, v) in &arm.env {
                let n = k.len() + 1 + v.len();
                // The kernel counts the string's NUL too.
                if n >= limits.one {
                    return Err(invalid(
                        format!("{}.env.{k}", key(arm)),
                        format!(
                            "is {n} bytes; one environment entry may be at most {} bytes \
                             here (Linux's MAX_ARG_STRLEN), or no cell could start",
                            limits.one
                        ),
                    ));
                }
            }
            let hooks = [
                ("setup", &arm.hooks.setup),
                ("prepare", &arm.hooks.prepare),
                ("cleanup", &arm.hooks.cleanup),
            ];
            let argvs = std::iter::once(("command", Some(&arm.args)))
                .chain(hooks.iter().map(|(name, argv)| (*name, argv.as_ref())));
            for (what, argv) in argvs {
                let Some(argv) = argv else { continue };
                if let Some((i, a)) = argv.iter().enumerate().find(|(_, a)| a.len() >= limits.one) {
                    return Err(invalid(
                        format!("{}.{what}", key(arm)),
                        format!(
                            "argument {i} is {} bytes; one argument may be at most {} bytes \
                             here (Linux's MAX_ARG_STRLEN), or no cell could start",
                            a.len(),
                            limits.one
                        ),
                    ));
                }
                // The program's own path (lcx's, for lcx workloads) is
                // within the reserve.
                let args = counted(argv.iter().map(String::as_str));
                let total = args + own + inherited + RESERVE;
                if total > limits.total {
                    return Err(invalid(
                        format!("{}.{what}", key(arm)),
                        format!(
                            "its arguments ({args} bytes) and environment ({own} bytes of \
                             the arm's and lcx's, {inherited} inherited) come to {total} \
                             bytes, above this system's {} (sysconf ARG_MAX): its cells \
                             could not start (\"Argument list too long\")",
                            limits.total
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The bytes of this process's environment as `execve` counts them: what
/// every cell inherits.
pub fn inherited_env_bytes() -> usize {
    std::env::vars_os()
        .map(|(k, v)| execve_bytes(k.len() + 1 + v.len()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        super::super::from_str(text, std::path::Path::new("x.toml"), &Default::default()).unwrap()
    }

    const SMALL: ExecLimits = ExecLimits {
        total: 64 * 1024,
        one: 16 * 1024,
    };

    #[test]
    fn a_cell_that_could_not_start_is_refused_at_plan_time() {
        let ok = plan(
            "name = \"x\"\nworkload = \"command\"\niterations = 1\n[[arms]]\nname = \"a\"\n\
             command = [\"true\"]\nenv = { A = \"1\" }\n",
        );
        assert!(ok.check_exec_size(SMALL, 1000).is_ok());
        // One environment value above the one-string limit.
        let big = format!(
            "name = \"x\"\nworkload = \"command\"\niterations = 1\n[[arms]]\nname = \"a\"\n\
             command = [\"true\"]\nenv = {{ BIG = \"{}\" }}\n",
            "v".repeat(20_000)
        );
        let err = plan(&big)
            .check_exec_size(SMALL, 1000)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("arms (`a`).env.BIG") && err.contains("MAX_ARG_STRLEN"),
            "{err}"
        );
        // Many small arguments above the total.
        let many = format!(
            "name = \"x\"\nworkload = \"command\"\niterations = 1\n[[arms]]\nname = \"a\"\n\
             command = [\"echo\", {}]\n",
            vec!["\"aaaa\""; 8000].join(", ")
        );
        let err = plan(&many)
            .check_exec_size(SMALL, 1000)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("arms (`a`).command") && err.contains("Argument list too long"),
            "{err}"
        );
        // The inherited environment counts.
        let err = ok
            .check_exec_size(SMALL, 64 * 1024)
            .unwrap_err()
            .to_string();
        assert!(err.contains("inherited"), "{err}");
        // This host's limits are real numbers.
        let here = ExecLimits::here();
        assert!(here.total >= 64 * 1024 && here.one == MAX_ARG_STRLEN);
    }
}
