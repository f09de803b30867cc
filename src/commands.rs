//! `lcx run --command …`: the experiment file the flags stand for, written
//! beside the database (`.lcx/commands/NAME-HASH.toml`) so that its
//! report's reproduce line and `--resume` find it; a dry run writes it in a
//! folder of lcx's own under the temporary folder (`crate::files`). Each
//! command is an arm lcx times (`timing = "process"`), the first the
//! baseline. `-P`/`-L` make a `[sweep]` of `"{VAR}"` keys (decision 0027):
//! each command at every value, `{VAR}` replaced as hyperfine does and
//! `$VAR` set (`plan::placeholder`), a second command compared with the
//! first at each value, one command's values reported as a scan. Every
//! flag is checked here, before anything is written, and its errors name
//! the flag.

use std::path::{Path, PathBuf};

use anyhow::Context;

use lcx_core::experiment::plan::{self, placeholder};

/// hyperfine's defaults: 10 runs after 1 warm-up, in 3 interleaved repeats.
const RUNS: u32 = 10;
const WARMUP: u32 = 1;
const REPEATS: u32 = 3;

/// The `--command` flags of `lcx run`.
pub struct Asked<'a> {
    pub commands: &'a [String],
    /// `-n`, in order.
    pub names: &'a [String],
    /// `--name`.
    pub name: Option<&'a str>,
    /// `-P VAR MIN MAX`, each three words.
    pub scans: &'a [String],
    /// `-L VAR A,B,C`, each two words.
    pub lists: &'a [String],
    /// `--runs` beside `--warmup auto`, which cannot be counted.
    pub runs_with_auto_warmup: bool,
    pub db: &'a Path,
    pub dry_run: bool,
}

fn bad(message: String) -> anyhow::Error {
    crate::errors::bad_input(anyhow::anyhow!(message))
}

/// Checks the flags and writes the experiment they stand for; its path.
pub fn experiment_file(asked: &Asked) -> anyhow::Result<PathBuf> {
    if asked.runs_with_auto_warmup {
        return Err(bad(
            "--runs: counts the runs after the warm-up, which `--warmup auto` \
                        decides only once a cell ran; give a warm-up count or --iterations"
                .into(),
        ));
    }
    let folder = asked.db.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(folder) = folder.filter(|f| !asked.dry_run && !f.is_dir()) {
        // The database's folder would otherwise appear for the file beside it.
        return Err(crate::errors::bad_input(anyhow::Error::new(
            lcx_core::store::StoreError::NoFolder {
                db: asked.db.to_path_buf(),
                folder: folder.to_path_buf(),
            },
        )));
    }
    let text = experiment_text(asked)?;
    // A dry run writes nothing beside the database; under the shared
    // temporary folder, only into a folder of lcx's own (0700, this user's,
    // no link), where no one else can plant a link at the file's name.
    let dir = match folder {
        _ if asked.dry_run => lcx_core::files::private_temp_dir("lcx-commands")?,
        Some(dir) => dir.join(".lcx").join("commands"),
        None => PathBuf::from(".lcx").join("commands"),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join(file_name(&text.0, &text.1));
    // Whole or not at all, renamed into place: a link at the name is
    // replaced, never written through.
    lcx_core::files::replace("--command", &file, text.1.as_bytes(), &[asked.db])
        .map_err(crate::errors::output_error)
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// `NAME-HASH.toml`: the content's hash keeps two experiments of one name
/// (a `--name` given to other commands) from overwriting each other's file.
fn file_name(name: &str, text: &str) -> String {
    let hash = &plan::sha256_hex(text.as_bytes())[..8];
    // An arm name's alphabet is a safe file name's, but for a leading dot.
    if plan::check_arm_name(name).is_ok() && !name.starts_with('.') && name.len() <= 100 {
        format!("{name}-{hash}.toml")
    } else {
        format!("named-{hash}.toml")
    }
}

/// The experiment's name and its file's text.
fn experiment_text(asked: &Asked) -> anyhow::Result<(String, String)> {
    let commands = asked.commands;
    for (i, command) in commands.iter().enumerate() {
        if command.trim().is_empty() {
            return Err(bad(format!("--command {}: empty command", i + 1)));
        }
        if let Some(c) = lcx_core::escape::first_hidden(command) {
            return Err(bad(format!(
                "--command {} ({}): contains {}; expected one line of visible text (a script \
                 of several lines belongs in a file the command runs)",
                i + 1,
                shown(command),
                lcx_core::escape::terminal_line(&c.to_string())
            )));
        }
    }
    if asked.names.len() > commands.len() {
        return Err(bad(format!(
            "--command-name: {} names for {} (one name per --command, in order)",
            asked.names.len(),
            lcx_core::text::counted(commands.len() as u64, "command")
        )));
    }
    let axes = axes(asked)?;
    let name = match asked.name {
        Some(name) => {
            plan::check_name(name).map_err(|m| bad(format!("--name: {m}")))?;
            name.to_string()
        }
        None => {
            let mut words: Vec<&str> = commands.iter().map(String::as_str).collect();
            words.extend(asked.names.iter().map(String::as_str));
            words.extend(asked.scans.iter().chain(asked.lists).map(String::as_str));
            format!(
                "commands-{}",
                &plan::sha256_hex(words.join("\n").as_bytes())[..8]
            )
        }
    };
    let arms = arms(asked, &axes)?;
    let count = axes
        .iter()
        .try_fold(arms.len(), |n, (_, values)| n.checked_mul(values.len()));
    if count.is_none_or(|n| n > plan::MAX_ARMS) {
        return Err(bad(format!(
            "--command with -P/-L: {} arms; at most {} in one experiment",
            count.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string()),
            plan::MAX_ARMS
        )));
    }
    // A JSON string is a TOML basic string: the same quotes and escapes.
    let quote = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let mut text = format!(
        "# Written by `lcx run --command …`.\nname = {}\nworkload = \"command\"\n\
         timing = \"process\"\niterations = {}\nwarmup = {WARMUP}\nrepeats = {REPEATS}\n",
        quote(&name),
        RUNS + WARMUP,
    );
    for arm in &arms {
        // The report's Mode column shows the label: the command's text,
        // after the arm's name where the user gave one (`-n`), so the
        // table names the arms as the verdicts do.
        let shown: String = arm.command.trim().chars().take(80).collect();
        let label = if arm.named {
            format!("{}: {shown}", arm.name)
        } else {
            shown
        };
        text.push_str(&format!(
            "\n[[arms]]\nname = {}\nlabel = {}\ncommand = {}\n",
            quote(&arm.name),
            quote(&label),
            quote(&arm.command)
        ));
    }
    // A scan is a sweep along its parameters: each command at every
    // point, a second command compared with the first at the same point,
    // and one command's cost reported per point, not judged against its
    // first value as an A/B test would.
    if let Some((first, _)) = axes.first() {
        text.push_str("\n[sweep]\n");
        for (var, values) in &axes {
            let values: Vec<String> = values.iter().map(|v| quote(v)).collect();
            text.push_str(&format!(
                "{} = [{}]\n",
                quote(&format!("{{{var}}}")),
                values.join(", ")
            ));
        }
        if axes.len() > 1 {
            text.push_str(&format!("axis = {}\n", quote(&format!("{{{first}}}"))));
        }
    }
    Ok((name, text))
}

/// One arm of the experiment: one command, at every point of the sweep
/// that `-P`/`-L` make.
struct ArmText {
    name: String,
    /// Whether the name is the user's (`-n`), not `cmdN`.
    named: bool,
    command: String,
}

/// `text` as an error shows it: escaped by the terminal rule, one line,
/// and shortened.
fn shown(text: &str) -> String {
    format!("`{}`", lcx_core::escape::terminal_short(text, 60))
}

/// Each command, named; checked here so that an error names the flag.
fn arms(asked: &Asked, axes: &[Axis]) -> anyhow::Result<Vec<ArmText>> {
    let mut arms: Vec<ArmText> = Vec::new();
    for (i, command) in asked.commands.iter().enumerate() {
        let (name, named) = match asked.names.get(i) {
            Some(n) => {
                plan::check_arm_name(n).map_err(|m| bad(format!("--command-name: {m}")))?;
                (n.clone(), true)
            }
            None => (format!("cmd{}", i + 1), false),
        };
        if arms.iter().any(|a| a.name == name) {
            return Err(bad(format!(
                "--command-name: two commands are named `{name}` (each needs its own name)"
            )));
        }
        arms.push(ArmText {
            name,
            named,
            command: command.clone(),
        });
    }
    // A point's arm is named after its values (`cmd1-n-1000`), as an arm
    // name can hold them: two values that read the same there would make
    // two arms of one name.
    for (var, values) in axes {
        let mut seen: Vec<String> = Vec::new();
        for value in values {
            let part = plan::sanitize(value);
            if seen.contains(&part) {
                return Err(bad(format!(
                    "-P/-L {var}: two values would name their arms `…-{}-{part}` (values that \
                     differ only in characters an arm name cannot hold read the same)",
                    plan::sanitize(&var.to_lowercase())
                )));
            }
            seen.push(part);
        }
    }
    Ok(arms)
}

/// A parameter and its values.
type Axis = (String, Vec<String>);

/// The `-P` and `-L` parameters, checked: a variable name a shell can
/// read, each used by some command, none twice.
fn axes(asked: &Asked) -> anyhow::Result<Vec<Axis>> {
    let mut axes: Vec<Axis> = Vec::new();
    for scan in asked.scans.chunks(3) {
        let [var, lo, hi] = scan else {
            return Err(bad("--parameter-scan: expected VAR MIN MAX".into()));
        };
        let bound = |text: &str, which: &str| {
            text.trim().parse::<i64>().map_err(|_| {
                bad(format!(
                    "--parameter-scan {var}: {which} must be a whole number, found `{text}`"
                ))
            })
        };
        let (lo, hi) = (bound(lo, "MIN")?, bound(hi, "MAX")?);
        if hi
            .checked_sub(lo)
            .is_none_or(|d| d < 0 || d >= plan::MAX_ARMS as i64)
        {
            return Err(bad(format!(
                "--parameter-scan {var}: expected MIN ≤ MAX and at most {} values, found {lo} \
                 to {hi}",
                plan::MAX_ARMS
            )));
        }
        axes.push((var.clone(), (lo..=hi).map(|v| v.to_string()).collect()));
    }
    for list in asked.lists.chunks(2) {
        let [var, values] = list else {
            return Err(bad("--parameter-list: expected VAR A,B,C".into()));
        };
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if values.iter().any(String::is_empty) {
            return Err(bad(format!(
                "--parameter-list {}: expected comma-separated values, found an empty one",
                shown(var)
            )));
        }
        if let Some((value, c)) = values
            .iter()
            .find_map(|v| lcx_core::escape::first_hidden(v).map(|c| (v, c)))
        {
            return Err(bad(format!(
                "--parameter-list {}: the value {} contains {}; expected one line of visible \
                 text",
                shown(var),
                shown(value),
                lcx_core::escape::terminal_line(&c.to_string())
            )));
        }
        axes.push((var.clone(), values));
    }
    for (i, (var, _)) in axes.iter().enumerate() {
        // The rule of every environment name lcx sets (an arm's `env`,
        // `[matrix]` and `[sweep]`'s `env.NAME`).
        plan::check_env_name(var).map_err(|m| {
            bad(format!(
                "-P/-L {}: {m}; the parameter's name is also its variable's",
                shown(var)
            ))
        })?;
        if axes[..i].iter().any(|(v, _)| v == var) {
            return Err(bad(format!("-P/-L: `{var}` is given twice")));
        }
        if !asked.commands.iter().any(|c| placeholder::uses(c, var)) {
            let set = if placeholder::exported(var) {
                format!(" or `${var}`")
            } else {
                String::new()
            };
            let why = if placeholder::exported(var)
                || !asked
                    .commands
                    .iter()
                    .any(|c| placeholder::reads_variable(c, var))
            {
                String::new()
            } else {
                format!(
                    " (`${var}` is not set per value: lcx's environment has a `{var}` already, \
                     or it is one of lcx's own)"
                )
            };
            return Err(bad(format!(
                "-P/-L {var}: no --command holds `{{{var}}}`{set}, so every value would run \
                 the same command{why}"
            )));
        }
    }
    Ok(axes)
}
