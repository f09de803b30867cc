//! The rules a file's names and values follow wherever they appear (an
//! experiment's name, labels, metric and environment names, `min_effect`,
//! durations) and the limits on how much one file may ask for. Plain
//! functions of a value: they know no key and no file, so the command line
//! (`lcx rename`, `--min-effect`) holds its words to the same rules; the
//! reader adds the key and the file to what they refuse.

/// The longest experiment name (characters): it travels in environments,
/// job names and file names.
pub const MAX_NAME: usize = 200;

/// The longest duration a file may give (`timeout`, `wait_for_quiet`): 30
/// days, in seconds. Nothing lcx measures runs longer, and a bound keeps
/// every duration convertible (a `1e308` would panic the runner).
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;

/// Why `value` cannot go into a Slurm option line or a cell's environment:
/// a control character (a line break, say); `None` when it can.
pub(super) fn not_one_line(value: &str) -> Option<String> {
    let c = value.chars().find(|c| c.is_control())?;
    Some(format!(
        "contains the control character {c:?}; it must be one line, as it is \
         written into Slurm job scripts' option lines and cells' environments"
    ))
}

/// What an experiment name must be (a file's `name`, `lcx rename`'s new
/// one): it goes into every cell's environment, Slurm job names and archive
/// file names, so not empty, one line, and at most [`MAX_NAME`] characters.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("must not be empty".into());
    }
    if let Some(problem) = not_one_line(name) {
        return Err(problem);
    }
    check_visible(name)?;
    let n = name.chars().count();
    if n > MAX_NAME {
        return Err(format!("is {n} characters long; at most {MAX_NAME}"));
    }
    Ok(())
}

/// Whether `c` shows nothing by itself: white space, and the code points
/// Unicode marks default-ignorable (zero-width spaces and joiners, bidi
/// marks, variation selectors, tags, fillers).
fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || matches!(c,
            '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}'..='\u{1160}' | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
            | '\u{ffa0}' | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

/// What a name or a label must be (an experiment's name, a label, a metric
/// a file names): text a reader can see. No control character (a terminal
/// would obey it), no bidi control (it reorders what is shown around it:
/// `evil\u{202e}txt.exe`), and not only invisible characters (a name of one
/// zero-width space looks like no name at all).
pub fn check_visible(text: &str) -> Result<(), String> {
    if let Some(c) = crate::escape::first_hidden(text) {
        return Err(format!(
            "contains {}, a control character; names and labels are visible text",
            crate::escape::terminal_line(&c.to_string())
        ));
    }
    if text.chars().all(is_invisible) {
        return Err("has no visible character".into());
    }
    Ok(())
}

/// Whether `min_effect` is a fraction in [0, 1): the one rule for a file's
/// `gate.min_effect` and every `--min-effect` flag.
pub fn check_min_effect(min_effect: f64) -> Result<(), String> {
    if (0.0..1.0).contains(&min_effect) {
        Ok(())
    } else {
        Err(format!(
            "expected a fraction in [0, 1), e.g. 0.05 for 5 %, found {min_effect}"
        ))
    }
}

/// The most arms one experiment may have (a `[matrix]` multiplies them):
/// every arm is a config, a report row and cells.
pub const MAX_ARMS: usize = 1_000;

/// What an environment variable's name must be, in an arm's `env` and a
/// `[matrix]` `env.NAME` key alike: not empty, no `=` (it would end the
/// name), and no control or bidi character.
pub(in crate::experiment::plan) fn check_env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('=') {
        return Err("an environment variable name must be non-empty and hold no `=`".into());
    }
    if let Some(c) = crate::escape::first_hidden(name) {
        return Err(format!(
            "an environment variable name holds no control character (found {})",
            crate::escape::terminal_line(&c.to_string())
        ));
    }
    Ok(())
}
