//! `lcx run --command …`: the experiment file the flags stand for, written
//! beside the database (`.lcx/commands/NAME-HASH.toml`) so that its
//! report's reproduce line and `--resume` find it. Each command is an arm
//! lcx times (`timing = "process"`), the first the baseline; `-P`/`-L`
//! make one arm per value, `{VAR}` in a command replaced by the value's
//! text (so plain words stay plain, decision 0023) and `$VAR` set to it.
//! Every flag is checked here, before anything is written, and its errors
//! name the flag.

use std::path::{Path, PathBuf};

use anyhow::Context;

use lcx_core::experiment::plan;

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
    // A dry run writes nothing beside the database.
    let dir = match folder {
        _ if asked.dry_run => std::env::temp_dir().join("lcx-commands"),
        Some(dir) => dir.join(".lcx").join("commands"),
        None => PathBuf::from(".lcx").join("commands"),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join(file_name(&text.0, &text.1));
    std::fs::write(&file, &text.1).with_context(|| format!("writing {}", file.display()))?;
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
    if arms.len() > plan::MAX_ARMS {
        return Err(bad(format!(
            "--command with -P/-L: {} arms; at most {} in one experiment",
            arms.len(),
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
        text.push_str(&format!(
            "\n[[arms]]\nname = {}\nlabel = {}\ncommand = {}\n",
            quote(&arm.name),
            quote(&arm.command.chars().take(80).collect::<String>()),
            quote(&arm.command)
        ));
        if !arm.env.is_empty() {
            let env: Vec<String> = arm
                .env
                .iter()
                .map(|(k, v)| format!("{k} = {}", quote(v)))
                .collect();
            text.push_str(&format!("env = {{ {} }}\n", env.join(", ")));
        }
    }
    Ok((name, text))
}

/// One arm of the experiment.
struct ArmText {
    name: String,
    command: String,
    env: Vec<(String, String)>,
}

/// Each command at each combination of the axes' values.
fn arms(asked: &Asked, axes: &[Axis]) -> anyhow::Result<Vec<ArmText>> {
    let mut combos: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
    for (var, values) in axes {
        combos = combos
            .iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((var.as_str(), v.as_str()));
                    c
                })
            })
            .collect();
    }
    let mut arms: Vec<ArmText> = Vec::new();
    for (i, command) in asked.commands.iter().enumerate() {
        if command.trim().is_empty() {
            return Err(bad(format!("--command {}: empty command", i + 1)));
        }
        let base = match asked.names.get(i) {
            Some(n) => {
                plan::check_arm_name(n).map_err(|m| bad(format!("--command-name: {m}")))?;
                n.clone()
            }
            None => format!("cmd{}", i + 1),
        };
        for combo in &combos {
            let mut name = base.clone();
            let mut command = command.clone();
            for (var, value) in combo {
                name.push_str(&format!("-{var}-{}", plan::sanitize(value)));
                command = command.replace(&format!("{{{var}}}"), value);
            }
            if arms.iter().any(|a| a.name == name) {
                return Err(bad(format!(
                    "--command-name or -P/-L: two arms would be named `{name}` (each needs \
                     its own name; values that differ only in characters an arm name cannot \
                     hold read the same)"
                )));
            }
            let env = combo
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            arms.push(ArmText { name, command, env });
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
                "--parameter-list {var}: expected comma-separated values, found an empty one"
            )));
        }
        axes.push((var.clone(), values));
    }
    for (i, (var, _)) in axes.iter().enumerate() {
        let mut chars = var.chars();
        let shell_name = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !shell_name {
            return Err(bad(format!(
                "-P/-L: `{var}` is no variable name (letters, digits and `_`, not first a digit)"
            )));
        }
        if axes[..i].iter().any(|(v, _)| v == var) {
            return Err(bad(format!("-P/-L: `{var}` is given twice")));
        }
        if !asked
            .commands
            .iter()
            .any(|c| c.contains(&format!("{{{var}}}")))
        {
            return Err(bad(format!(
                "-P/-L {var}: no --command holds `{{{var}}}`, so every value would run the \
                 same command"
            )));
        }
    }
    Ok(axes)
}
