//! `--set KEY=VALUE` overrides, KEY a dotted path such as
//! `traversal.scheduler` (docs/deep-cfr.md §11, in TOML).
//!
//! VALUE is read as a TOML value (`1e-4`, `false`, `[1, 2]`, `"x"`,
//! `{ a = 1 }`); a bare word that is not TOML is taken as a string, so
//! `traversal.scheduler=interleaved` needs no quotes. `null` becomes the
//! string `"none"`, lcx's spelling of an unset optional key. The value is
//! merged into the document before validation: tables merge key by key,
//! anything else replaces what was there.

use super::schema::NONE;
use super::ConfigError;

/// One `KEY=VALUE` override, parsed: KEY as its dotted path, VALUE as TOML.
/// Every way a set arrives (`--set` on the command line of `lcx train`,
/// `lcx bench`, `lcx config show` and `lcx run`, an experiment file's `set`
/// lists and matrix keys) goes through [`Set::parse`], so all of them
/// accept the same text and refuse it with the same message.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    /// The text as given, for messages that name it.
    pub arg: String,
    /// KEY split at its dots, each segment trimmed and non-empty.
    pub path: Vec<String>,
    pub value: toml::Value,
}

/// A set that cannot be parsed or applied. Every such message has one
/// form, `--set "ARG": PROBLEM`, and a parse error's PROBLEM says what was
/// expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", named(arg))]
pub struct SetError {
    /// The text as given.
    pub arg: String,
    pub message: String,
}

/// How every message names a set: the flag, then the text as given,
/// quoted (so that spaces and an empty VALUE show).
pub(super) fn named(arg: &str) -> String {
    format!("--set {arg:?}")
}

impl Set {
    /// Splits `KEY=VALUE` at the first `=` and parses both halves.
    pub fn parse(arg: &str) -> Result<Set, SetError> {
        let fail = |problem: String| SetError {
            arg: arg.to_owned(),
            message: format!("expected KEY=VALUE{problem}"),
        };
        // A set ends up in a child's argv (a revision's own lcx gets each
        // one as `--set`), which cannot carry a NUL.
        if arg.contains('\0') {
            return Err(fail(
                " without a NUL byte (no command line can carry one)".to_owned(),
            ));
        }
        let (path_text, value_text) = arg
            .split_once('=')
            .ok_or_else(|| fail(", e.g. traversal.scheduler=interleaved".to_owned()))?;
        let path_text = path_text.trim();
        if path_text.is_empty() {
            return Err(fail(", but the key before `=` is empty".to_owned()));
        }
        let path: Vec<String> = path_text.split('.').map(|s| s.trim().to_owned()).collect();
        if path.iter().any(String::is_empty) {
            return Err(fail(format!(
                " with KEY a dotted path, but `{path_text}` has an empty segment"
            )));
        }
        Ok(Set {
            arg: arg.to_owned(),
            path,
            value: parse_value(value_text),
        })
    }
}

/// Reads VALUE as TOML, falling back to the raw text as a string.
fn parse_value(text: &str) -> toml::Value {
    if text.trim() == "null" {
        return toml::Value::String(NONE.to_owned());
    }
    // Parse as the right-hand side of a one-key document; anything that does
    // not come back as exactly that one key (a syntax error, or text that
    // smuggles in further lines) is a plain string.
    match format!("v = {text}").parse::<toml::Table>() {
        Ok(mut doc) if doc.len() == 1 => doc
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(text.to_owned())),
        _ => bare_list(text).unwrap_or_else(|| toml::Value::String(text.to_owned())),
    }
}

/// `[a, b]` with bare words (as YAML would read it, e.g.
/// `evaluation.opponents=[random,discard_only]`): a flat list whose items
/// are each read like a VALUE. Nested lists and quotes are left to TOML.
fn bare_list(text: &str) -> Option<toml::Value> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.contains(['[', ']', '"', '\'', '{', '}']) {
        return None;
    }
    let items = if inner.trim().is_empty() {
        Vec::new()
    } else {
        inner
            .split(',')
            .map(|item| parse_value(item.trim()))
            .collect()
    };
    Some(toml::Value::Array(items))
}

/// Parses and applies each set to `table`, in order; returns them parsed,
/// so that a later error about a key can name the set that wrote it.
pub fn apply_sets(table: &mut toml::Table, sets: &[String]) -> Result<Vec<Set>, ConfigError> {
    let mut applied = Vec::with_capacity(sets.len());
    for arg in sets {
        let set = Set::parse(arg)?;
        apply_set(table, &set.path, set.value.clone()).map_err(|message| SetError {
            arg: arg.clone(),
            message,
        })?;
        applied.push(set);
    }
    Ok(applied)
}

/// Merges `value` at `path` into `table`, creating missing tables on the
/// way. Fails (with a message naming the key) when the path runs through a
/// value that is not a table.
pub fn apply_set(
    table: &mut toml::Table,
    path: &[String],
    value: toml::Value,
) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("the key path is empty".to_owned());
    };
    let mut here = table;
    for (depth, segment) in parents.iter().enumerate() {
        let entry = here
            .entry(segment.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        here = match entry {
            toml::Value::Table(inner) => inner,
            other => {
                return Err(format!(
                    "`{}` is a value ({other}), not a section, so `{}` cannot be set",
                    path[..=depth].join("."),
                    path.join(".")
                ))
            }
        };
    }
    match (here.get_mut(last.as_str()), value) {
        (Some(toml::Value::Table(existing)), toml::Value::Table(patch)) => merge(existing, patch),
        (_, value) => {
            here.insert(last.clone(), value);
        }
    }
    Ok(())
}

/// Deep merge: tables merge recursively, other values replace.
fn merge(into: &mut toml::Table, patch: toml::Table) {
    for (key, value) in patch {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(existing)), toml::Value::Table(inner)) => {
                merge(existing, inner)
            }
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(arg: &str) -> toml::Value {
        Set::parse(arg).unwrap().value
    }

    fn set_error(arg: &str) -> String {
        Set::parse(arg).unwrap_err().to_string()
    }

    #[test]
    fn values_are_read_as_toml() {
        assert_eq!(value("a.b=3"), toml::Value::Integer(3));
        assert_eq!(value("a.b=-2"), toml::Value::Integer(-2));
        assert_eq!(value("a.b=1e-4"), toml::Value::Float(1e-4));
        assert_eq!(value("a.b=false"), toml::Value::Boolean(false));
        assert_eq!(
            value("a.b=\"quoted\""),
            toml::Value::String("quoted".into())
        );
        assert_eq!(
            value("a.b=[1, 2]"),
            toml::Value::Array(vec![toml::Value::Integer(1), toml::Value::Integer(2)])
        );
    }

    #[test]
    fn null_becomes_none() {
        assert_eq!(
            value("run.max_iterations=null"),
            toml::Value::String(NONE.into())
        );
    }

    #[test]
    fn bare_words_are_strings() {
        assert_eq!(
            value("a=interleaved"),
            toml::Value::String("interleaved".into())
        );
        assert_eq!(value("a=cuda:1"), toml::Value::String("cuda:1".into()));
        assert_eq!(value("a="), toml::Value::String(String::new()));
        // Text that would smuggle a second key in stays one string.
        assert_eq!(value("a=1\nb = 2"), toml::Value::String("1\nb = 2".into()));
    }

    #[test]
    fn bare_word_lists_are_lists_of_strings() {
        let words = |w: &[&str]| {
            toml::Value::Array(w.iter().map(|s| toml::Value::String((*s).into())).collect())
        };
        assert_eq!(
            value("e.o=[random,discard_only]"),
            words(&["random", "discard_only"])
        );
        assert_eq!(value("e.o=[ random ]"), words(&["random"]));
        assert_eq!(value("e.o=[]"), toml::Value::Array(Vec::new()));
        assert_eq!(
            value("e.o=[random, 3]"),
            toml::Value::Array(vec![
                toml::Value::String("random".into()),
                toml::Value::Integer(3)
            ])
        );
    }

    #[test]
    fn splits_at_the_first_equals() {
        let set = Set::parse("a.b=c=d").unwrap();
        assert_eq!(set.path, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(set.value, toml::Value::String("c=d".into()));
        assert_eq!(set.arg, "a.b=c=d");
    }

    #[test]
    fn malformed_paths_are_errors() {
        assert!(set_error("a..b=1").contains("empty segment"));
        assert!(set_error(".a=1").contains("empty segment"));
        assert!(set_error("a.=1").contains("empty segment"));
        assert!(set_error("=1").contains("empty"));
        assert!(set_error("novalue").contains("KEY=VALUE"));
    }

    #[test]
    fn keys_are_trimmed_dotted_paths() {
        let set = Set::parse(" traversal . scheduler =interleaved").unwrap();
        assert_eq!(set.path, ["traversal", "scheduler"]);
        assert_eq!(set.value, toml::Value::String("interleaved".into()));
    }

    #[test]
    fn every_parse_error_names_the_flag_the_text_and_what_was_expected() {
        assert_eq!(
            set_error("novalue"),
            "--set \"novalue\": expected KEY=VALUE, e.g. traversal.scheduler=interleaved"
        );
        assert_eq!(
            set_error(" =1"),
            "--set \" =1\": expected KEY=VALUE, but the key before `=` is empty"
        );
        assert_eq!(
            set_error("a..b=1"),
            "--set \"a..b=1\": expected KEY=VALUE with KEY a dotted path, but `a..b` has an \
             empty segment"
        );
        assert_eq!(
            set_error("a=b\0c"),
            "--set \"a=b\\0c\": expected KEY=VALUE without a NUL byte (no command line can \
             carry one)"
        );
    }

    #[test]
    fn applying_creates_tables_and_refuses_to_pass_through_values() {
        let mut doc: toml::Table = "[run]\nseed = 1\n".parse().unwrap();
        let applied =
            apply_sets(&mut doc, &["traversal.scheduler=interleaved".to_owned()]).unwrap();
        assert_eq!(applied[0].path, ["traversal", "scheduler"]);
        assert_eq!(doc["traversal"]["scheduler"].as_str(), Some("interleaved"));
        let err = apply_sets(&mut doc, &["run.seed.x=2".to_owned()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`run.seed` is a value"), "{err}");
        assert!(err.contains("run.seed.x"), "{err}");
    }

    #[test]
    fn tables_merge_and_other_values_replace() {
        let mut doc: toml::Table = "[t]\na = 1\nb = [1, 2]\n".parse().unwrap();
        apply_sets(&mut doc, &["t={ c = 3 }".to_owned(), "t.b=[5]".to_owned()]).unwrap();
        assert_eq!(doc["t"]["a"].as_integer(), Some(1));
        assert_eq!(doc["t"]["c"].as_integer(), Some(3));
        assert_eq!(doc["t"]["b"].as_array().map(Vec::len), Some(1));
    }
}
