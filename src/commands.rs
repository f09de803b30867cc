//! `lcx run --command …`: the experiment file the flags stand for, written
//! beside the database (`.lcx/commands/NAME-HASH.toml`) so that its
//! report's reproduce line and `--resume` find it; a dry run writes it in a
//! folder of lcx's own under the temporary folder (`crate::files`). Each
//! command is an arm lcx times (`timing = "process"`), the first the
//! baseline; `-P`/`-L` make one arm per value as hyperfine does (decision
//! 0027): `{VAR}` in a command replaced by the value's text in one pass
//! (so plain words stay plain, decision 0023, and a value's own `{…}` stays
//! as it is), one way of running (its words, or `sh -c`) for every arm of a
//! command, and `$VAR` set to the value unless lcx's environment already
//! has a `VAR` (or it is one of lcx's own `LCX_` names). Every flag is
//! checked here, before anything is written, and its errors name the flag.

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
        if arm.shell {
            text.push_str("shell = true\n");
        }
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
    /// Whether the name is the user's (`-n`), not `cmdN`.
    named: bool,
    command: String,
    env: Vec<(String, String)>,
    /// Through `sh -c` even when its own words are plain: a sibling of the
    /// same command needs a shell.
    shell: bool,
}

/// `text` as an error shows it: escaped by the terminal rule, one line,
/// and shortened.
fn shown(text: &str) -> String {
    format!("`{}`", lcx_core::escape::terminal_short(text, 60))
}

/// `template` with every `{VAR}` of `values` replaced by its value, in one
/// pass from left to right (hyperfine's rule): a value's own text is never
/// read again, so a value that holds `{OTHER}` keeps it as it is. Where two
/// names could match at one place, the longer wins. `${VAR}` is the
/// shell's, not a placeholder after a `$`: it is left for the shell to
/// read the variable lcx sets (replaced, `${n}` would become `$1000`, an
/// empty positional parameter).
fn substitute(template: &str, values: &[(&str, &str)]) -> String {
    let mut keys: Vec<(String, &str)> = values
        .iter()
        .map(|(var, value)| (format!("{{{var}}}"), *value))
        .collect();
    keys.sort_by_key(|(key, _)| std::cmp::Reverse(key.len()));
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    'text: while let Some(c) = rest.chars().next() {
        let shells = out.ends_with('$');
        for (key, value) in keys.iter().filter(|_| !shells) {
            if let Some(after) = rest.strip_prefix(key.as_str()) {
                out.push_str(value);
                rest = after;
                continue 'text;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether a parameter is also set as `$VAR` in the arm's environment:
/// not where lcx's own environment has a variable of that name (`-L PATH
/// …` replaces `{PATH}` and leaves `$PATH` alone) and not for the names lcx
/// gives its cells (`LCX_…`).
fn exported(var: &str) -> bool {
    !var.starts_with("LCX_") && std::env::var_os(var).is_none()
}

/// Whether `command` uses the parameter `var`: its `{VAR}`, or its `$VAR`
/// where lcx sets that variable ([`exported`]).
fn uses(command: &str, var: &str) -> bool {
    let placeholder = format!("{{{var}}}");
    let replaced = command
        .match_indices(&placeholder)
        .any(|(at, _)| !command[..at].ends_with('$'));
    replaced || (exported(var) && reads_variable(command, var))
}

/// Whether `command` reads the shell variable `var`: `$VAR` or `${VAR…}`
/// not followed by a character that would make a longer name (`$nn` and
/// `${nx}` are not `n`'s). A name a shell cannot read as a variable
/// (`1bad`: `$1` then `bad`) never is.
fn reads_variable(command: &str, var: &str) -> bool {
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let readable = var
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && var.chars().all(name_char);
    readable
        && command.match_indices('$').any(|(at, _)| {
            let after = &command[at + 1..];
            let after = after.strip_prefix('{').unwrap_or(after);
            after
                .strip_prefix(var)
                .is_some_and(|rest| !rest.starts_with(name_char))
        })
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
        let named = asked.names.get(i).is_some();
        let base = match asked.names.get(i) {
            Some(n) => {
                plan::check_arm_name(n).map_err(|m| bad(format!("--command-name: {m}")))?;
                n.clone()
            }
            None => format!("cmd{}", i + 1),
        };
        let first = arms.len();
        for combo in &combos {
            let mut name = base.clone();
            for (var, value) in combo {
                name.push_str(&format!(
                    "-{}-{}",
                    plan::sanitize(var),
                    plan::sanitize(value)
                ));
            }
            let command = substitute(command, combo);
            if arms.iter().any(|a| a.name == name) {
                return Err(bad(format!(
                    "--command-name or -P/-L: two arms would be named `{name}` (each needs \
                     its own name; values that differ only in characters an arm name cannot \
                     hold read the same)"
                )));
            }
            let env = combo
                .iter()
                .filter(|(k, _)| exported(k))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            arms.push(ArmText {
                name,
                named,
                command,
                env,
                shell: false,
            });
        }
        // One way of running for every arm of a command: when one value
        // needs a shell, its siblings run through one too, so the arms
        // differ by the value alone (a shell's start-up is taken off, but
        // only as well as a mean measured beforehand can).
        let of_command = &mut arms[first..];
        if of_command
            .iter()
            .any(|a| plan::shell::needs_shell(&a.command))
        {
            for arm in of_command {
                // Said only where the arm's own text would not say it.
                arm.shell = !plan::shell::needs_shell(&arm.command);
            }
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
        if !asked.commands.iter().any(|c| uses(c, var)) {
            let set = if exported(var) {
                format!(" or `${var}`")
            } else {
                String::new()
            };
            let why = if exported(var) || !asked.commands.iter().any(|c| reads_variable(c, var)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_substituted_in_one_pass_as_hyperfine_does() {
        // hyperfine's `test_get_command_line_nonoverlapping`.
        let values = [("foo", "{bar} baz"), ("bar", "quux")];
        assert_eq!(
            substitute("echo {foo} {bar}", &values),
            "echo {bar} baz quux"
        );
        let values = [("v", "{w}"), ("w", "X")];
        assert_eq!(substitute("echo {v} {w}", &values), "echo {w} X");
        // Every place, text around it kept, names that share a start.
        let values = [("n", "1"), ("nn", "2")];
        assert_eq!(substitute("{n}{nn}-{n}é{x}", &values), "12-1é{x}");
        // `${n}` is the shell's variable, left for it.
        assert_eq!(
            substitute("echo ${n} {n} $n", &[("n", "5")]),
            "echo ${n} 5 $n"
        );
        // Where lcx does not set the variable, `${PATH}` is no use of `-L PATH`.
        assert!(!uses("echo ${PATH}", "PATH"));
        assert!(uses("echo {PATH}", "PATH"));
    }

    #[test]
    fn a_variable_is_read_as_dollar_name_or_braced_name_alone() {
        for command in [
            "echo $n",
            "python3 -c \"sum(range($n))\"",
            "echo ${n}",
            "x${n:-1}",
            "$n",
        ] {
            assert!(reads_variable(command, "n"), "{command}");
        }
        for command in [
            "echo $nn",
            "echo ${nx}",
            "echo n",
            "echo {n}",
            "echo $N",
            "echo $",
        ] {
            assert!(!reads_variable(command, "n"), "{command}");
        }
        assert!(reads_variable("echo $n_1.", "n_1"));
        assert!(!reads_variable("echo $1bad", "1bad"));
    }

    #[test]
    fn lcx_own_and_taken_names_are_not_exported() {
        assert!(!exported("PATH"));
        assert!(!exported("LCX_ARM"));
        assert!(exported("lcx_test_surely_unset_parameter_q"));
    }
}
