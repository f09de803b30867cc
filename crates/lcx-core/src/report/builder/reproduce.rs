//! The Reproduce section: the `lcx run` line of the whole experiment and,
//! for each arm, the shell line of its first cell, as a user would type
//! them. It quotes through the model's shell helpers and must read
//! nothing but the experiment, its plan and its cells.

use crate::experiment::Plan;
use crate::report::model::{shell_line, shell_quote, Reproduce};
use crate::store::{Experiment, Run};

use super::arms::ArmName;

/// The experiment's line and one line per arm. `db`: the database the
/// report was read from, where it is not the default.
pub(super) fn reproduce(
    e: &Experiment,
    plan: Option<&Plan>,
    runs: &[Run],
    order: &[ArmName],
    db: Option<&str>,
) -> Reproduce {
    // A file recorded from its repository's root is reproduced from the
    // root of a clone, with the wrapper that builds lcx there (`./lcx`);
    // one outside a repository by its path on the machine that ran it.
    let from_root = e.git_commit.is_some() && std::path::Path::new(&e.file_path).is_relative();
    let lcx = if from_root { "./lcx" } else { "lcx" };
    let mut exp_cmd = vec![lcx.to_string(), "run".to_string(), e.file_path.clone()];
    if let Some(db) = db {
        exp_cmd.extend(["--db".to_string(), db.to_string()]);
    }
    if let Some(p) = plan {
        for s in &p.cli_set {
            exp_cmd.push("--set".into());
            exp_cmd.push(s.clone());
        }
        exp_cmd.extend(p.cli_flags.iter().cloned());
    }
    let cells = order
        .iter()
        .filter_map(|a| {
            let r = runs.iter().find(|r| r.arm == a.name)?;
            Some((a.name.clone(), cell_line(r, lcx, db)))
        })
        .collect();
    Reproduce {
        experiment: shell_line(&exp_cmd),
        cells,
    }
}

/// One cell's command as a shell line: its environment, its argv with
/// `lcx` for the runner's own binary, and for a cell that read its config
/// from stdin, the `lcx config show` that feeds it.
fn cell_line(r: &Run, lcx: &str, db: Option<&str>) -> String {
    let mut words: Vec<String> = r
        .env
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect();
    // A cell at a revision ran that revision's build: its path, not this
    // checkout's lcx.
    let argv = if r.revision.is_some() {
        r.command.clone()
    } else {
        pretty_argv(&r.command, lcx)
    };
    // A cell that read its recorded config from stdin is reproduced from
    // that record, not from the file as it is now.
    if r.config_toml.is_some() && crate::experiment::plan::reads_config_from_stdin(&argv) {
        let db = db
            .map(|d| format!(" --db {}", shell_quote(d)))
            .unwrap_or_default();
        words.insert(0, format!("{lcx} config show --run {}{db} |", r.id));
    }
    words.push(shell_line(&argv));
    words.join(" ")
}

/// Program name for display: the lcx binary's path becomes `lcx`.
/// A cell's argv as a user types it: the runner's own binary (a path of
/// the machine that ran it) becomes `lcx`.
fn pretty_argv(argv: &[String], lcx: &str) -> Vec<String> {
    let mut out = argv.to_vec();
    if let Some(first) = out.first_mut() {
        let file = std::path::Path::new(first.as_str())
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or("");
        if file == "lcx" || file.starts_with("lcx-") {
            *first = lcx.into();
        }
    }
    out
}
