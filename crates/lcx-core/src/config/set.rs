//! `--set path.to.key=value` overrides (docs/deep-cfr.md §11, in TOML).
//!
//! VALUE is read as a TOML value (`1e-4`, `false`, `[1, 2]`, `"x"`,
//! `{ a = 1 }`); a bare word that is not TOML is taken as a string, so
//! `traversal.scheduler=interleaved` needs no quotes. `null` becomes the
//! string `"none"`, lcx's spelling of an unset optional key. The value is
//! merged into the document before validation: tables merge key by key,
//! anything else replaces what was there.

use super::schema::NONE;
use super::ConfigError;

/// Splits `PATH=VALUE` at the first `=` and parses both halves.
pub fn parse_set(arg: &str) -> Result<(Vec<String>, toml::Value), ConfigError> {
    let fail = |message: String| ConfigError::Set {
        arg: arg.to_owned(),
        message,
    };
    let (path_text, value_text) = arg.split_once('=').ok_or_else(|| {
        fail("expected PATH=VALUE, e.g. traversal.scheduler=interleaved".to_owned())
    })?;
    let path_text = path_text.trim();
    if path_text.is_empty() {
        return Err(fail("the key path before `=` is empty".to_owned()));
    }
    let path: Vec<String> = path_text.split('.').map(|s| s.trim().to_owned()).collect();
    if path.iter().any(String::is_empty) {
        return Err(fail(format!(
            "the key path `{path_text}` has an empty segment"
        )));
    }
    Ok((path, parse_value(value_text)))
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

/// Parses and applies each `--set` to `table`, in order.
pub fn apply_sets(table: &mut toml::Table, sets: &[String]) -> Result<(), ConfigError> {
    for arg in sets {
        let (path, value) = parse_set(arg)?;
        apply_set(table, &path, value).map_err(|message| ConfigError::Set {
            arg: arg.clone(),
            message,
        })?;
    }
    Ok(())
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
        parse_set(arg).unwrap().1
    }

    fn set_error(arg: &str) -> String {
        parse_set(arg).unwrap_err().to_string()
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
        let (path, v) = parse_set("a.b=c=d").unwrap();
        assert_eq!(path, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(v, toml::Value::String("c=d".into()));
    }

    #[test]
    fn malformed_paths_are_errors() {
        assert!(set_error("a..b=1").contains("empty segment"));
        assert!(set_error(".a=1").contains("empty segment"));
        assert!(set_error("a.=1").contains("empty segment"));
        assert!(set_error("=1").contains("empty"));
        assert!(set_error("novalue").contains("PATH=VALUE"));
    }

    #[test]
    fn applying_creates_tables_and_refuses_to_pass_through_values() {
        let mut doc: toml::Table = "[run]\nseed = 1\n".parse().unwrap();
        apply_sets(&mut doc, &["traversal.scheduler=interleaved".to_owned()]).unwrap();
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
