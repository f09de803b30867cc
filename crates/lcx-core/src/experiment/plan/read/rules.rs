//! The rules a file's names and values follow wherever they appear (an
//! experiment's name, labels, metric and environment names, `min_effect`,
//! durations) and the limits on how much one file may ask for (the rules of
//! names themselves are `crate::names`, below the store that checks
//! imported names with them too). Plain
//! functions of a value: they know no key and no file, so the command line
//! (`lcx rename`, `--min-effect`) holds its words to the same rules; the
//! reader adds the key and the file to what they refuse.

pub(super) use crate::names::not_one_line;
pub use crate::names::{check_name, check_visible, MAX_NAME};

/// The longest duration a file may give (`timeout`, `wait_for_quiet`): 30
/// days, in seconds. Nothing lcx measures runs longer, and a bound keeps
/// every duration convertible (a `1e308` would panic the runner).
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;

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

/// What an environment variable's name must be, in an arm's `env`, a
/// `[matrix]` or `[sweep]` `env.NAME` key and `lcx run -P/-L` alike: not
/// empty, no `=` (it would end the name), and no control or bidi character.
pub fn check_env_name(name: &str) -> Result<(), String> {
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
