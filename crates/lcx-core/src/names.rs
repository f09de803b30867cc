//! What a name must be, wherever it comes from: an experiment file, the
//! command line (`lcx rename`, `--name`), an imported database, or the
//! environment (`LCX_HOSTNAME`). On the bottom floor, so that the
//! experiment reader, the store's import and the host's facts hold names
//! to one rule.

/// The longest experiment name (characters): it travels in environments,
/// job names and file names.
pub const MAX_NAME: usize = 200;

/// Why `value` cannot go into a Slurm option line or a cell's environment:
/// a control character (a line break, say); `None` when it can.
pub fn not_one_line(value: &str) -> Option<String> {
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

/// Arm names end up in commands, file names and SQL filters: keep them
/// to a safe alphabet, and as short as an experiment's name.
pub fn check_arm_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    let n = name.chars().count();
    if n > MAX_NAME {
        return Err(format!("is {n} characters long; at most {MAX_NAME}"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "`{name}` contains `{c}`; use letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok(())
}
