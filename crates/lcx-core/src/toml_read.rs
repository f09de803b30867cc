//! The one reader of lcx's TOML documents: trainer configs (`config::read`)
//! and experiment files (`experiment::plan`). It takes typed values out of a
//! table and refuses unknown keys; every error names the key's full path
//! (`arms[2].set[0]`, `traversal.batch_size`), what would be accepted and
//! what was found, in one style for both documents.
//!
//! Hand-written rather than left to serde: serde's messages name neither the
//! key path nor the accepted values.

use toml::Value;

/// A key whose value cannot be used, or that should not be there.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyError {
    /// The full key path.
    pub key: String,
    pub problem: Problem,
}

/// What is wrong with a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// The value has the wrong type or range: "must be {expected}, got {got}".
    Wrong { expected: String, got: String },
    /// The table does not have this key.
    Unknown {
        /// The known key it most likely meant, as a full path.
        hint: Option<String>,
        /// The table's path (empty for the top level) and its known keys.
        table: String,
        known: Vec<String>,
    },
}

/// What a reader returns.
pub type Read<T> = Result<T, KeyError>;

impl KeyError {
    /// `got` is shown as TOML writes it, so strings keep their quotes.
    pub fn wrong(key: impl Into<String>, expected: impl Into<String>, got: &Value) -> Self {
        KeyError {
            key: key.into(),
            problem: Problem::Wrong {
                expected: expected.into(),
                got: got.to_string(),
            },
        }
    }

    /// The message for a reader that shows the key beside it
    /// (`file: key: message`).
    pub fn message(&self) -> String {
        match &self.problem {
            Problem::Wrong { expected, got } => format!("must be {expected}, got {got}"),
            Problem::Unknown { .. } => format!("unknown key ({})", self.unknown_detail()),
        }
    }

    /// One sentence that names the key, for a reader that shows only it.
    pub fn sentence(&self) -> String {
        match &self.problem {
            Problem::Wrong { expected, got } => {
                format!("`{}` must be {expected}, got {got}", self.key)
            }
            Problem::Unknown { .. } => {
                format!("unknown key `{}` ({})", self.key, self.unknown_detail())
            }
        }
    }

    fn unknown_detail(&self) -> String {
        let Problem::Unknown { hint, table, known } = &self.problem else {
            return String::new();
        };
        let hint = hint
            .as_ref()
            .map(|h| format!("did you mean `{h}`? "))
            .unwrap_or_default();
        // The table is what the key path starts with; a plain one (a
        // config section) is named as TOML writes its header.
        let place =
            if !table.is_empty() && table.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                format!(" in [{table}]")
            } else {
                String::new()
            };
        format!("{hint}known keys{place}: {}", known.join(", "))
    }
}

/// One table of a document and the key path it sits at.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    pub table: &'a toml::Table,
    /// The table's own path, `""` at the top level (`"executor"`,
    /// `"arms[0]"`).
    path: &'a str,
}

impl<'a> Table<'a> {
    pub fn new(table: &'a toml::Table, path: &'a str) -> Self {
        Table { table, path }
    }

    /// `key`'s full path.
    pub fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.table.get(key)
    }

    /// Refuses the first key that is not in `known`, naming the one it most
    /// likely meant.
    pub fn check_keys(&self, known: &[&str]) -> Read<()> {
        let Some(key) = self.table.keys().find(|k| !known.contains(&k.as_str())) else {
            return Ok(());
        };
        Err(KeyError {
            key: self.key_path(key),
            problem: Problem::Unknown {
                hint: closest(key, known).map(|k| self.key_path(k)),
                table: self.path.to_string(),
                known: known.iter().map(|k| (*k).to_string()).collect(),
            },
        })
    }

    pub fn string(&self, key: &str) -> Read<Option<String>> {
        self.get(key)
            .map(|v| string(&self.key_path(key), v))
            .transpose()
    }

    pub fn boolean(&self, key: &str) -> Read<Option<bool>> {
        self.get(key)
            .map(|v| boolean(&self.key_path(key), v))
            .transpose()
    }

    /// An integer in `min..=max`.
    pub fn integer(&self, key: &str, min: i64, max: i64) -> Read<Option<i64>> {
        self.get(key)
            .map(|v| integer(&self.key_path(key), v, min, max))
            .transpose()
    }

    /// A finite number (an integer is fine where a number is expected).
    pub fn number(&self, key: &str) -> Read<Option<f64>> {
        self.get(key)
            .map(|v| number(&self.key_path(key), v))
            .transpose()
    }

    /// An array of strings; empty when the key is missing.
    pub fn strings(&self, key: &str) -> Read<Vec<String>> {
        let path = self.key_path(key);
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| string(&format!("{path}[{i}]"), item))
                .collect(),
            Some(other) => Err(KeyError::wrong(path, "an array of strings", other)),
        }
    }
}

pub fn string(path: &str, v: &Value) -> Read<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => Err(KeyError::wrong(path, "a string", other)),
    }
}

pub fn boolean(path: &str, v: &Value) -> Read<bool> {
    match v {
        Value::Boolean(b) => Ok(*b),
        other => Err(KeyError::wrong(path, "true or false", other)),
    }
}

/// An integer in `min..=max`; the message states the range as far as it
/// constrains (no bound shown at `i64::MIN` / `i64::MAX`).
pub fn integer(path: &str, v: &Value, min: i64, max: i64) -> Read<i64> {
    match v {
        Value::Integer(n) if (min..=max).contains(n) => Ok(*n),
        other => {
            let expected = match (min, max) {
                (i64::MIN, i64::MAX) => "an integer".to_string(),
                (min, i64::MAX) => format!("an integer >= {min}"),
                (i64::MIN, max) => format!("an integer <= {max}"),
                (min, max) => format!("an integer from {min} to {max}"),
            };
            Err(KeyError::wrong(path, expected, other))
        }
    }
}

/// A finite number; integers are fine where numbers are expected
/// (`learning_rate = 1`).
pub fn number(path: &str, v: &Value) -> Read<f64> {
    match v {
        Value::Float(x) if x.is_finite() => Ok(*x),
        Value::Integer(n) => Ok(*n as f64),
        other => Err(KeyError::wrong(path, "a finite number", other)),
    }
}

/// The known name a typo most likely meant, if one is close enough: edit
/// distance at most 2, or a third of the typo's length. The one "did you
/// mean" rule of every lcx reader.
pub fn closest<'k>(typo: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (typo.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| (edit_distance(typo, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over chars.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn wrong_types_name_the_full_path_the_expectation_and_the_value() {
        let d = doc("name = 3\nflag = \"yes\"\nn = -1\nx = nan\nlist = [\"a\", 2]\n");
        let t = Table::new(&d, "arms[1]");
        let e = t.string("name").unwrap_err();
        assert_eq!(e.key, "arms[1].name");
        assert_eq!(e.message(), "must be a string, got 3");
        assert_eq!(e.sentence(), "`arms[1].name` must be a string, got 3");
        assert_eq!(
            t.boolean("flag").unwrap_err().message(),
            "must be true or false, got \"yes\""
        );
        assert_eq!(
            t.integer("n", 0, i64::MAX).unwrap_err().message(),
            "must be an integer >= 0, got -1"
        );
        assert_eq!(
            t.integer("n", 1, 10).unwrap_err().message(),
            "must be an integer from 1 to 10, got -1"
        );
        assert_eq!(
            t.number("x").unwrap_err().message(),
            "must be a finite number, got nan"
        );
        let e = t.strings("list").unwrap_err();
        assert_eq!(e.key, "arms[1].list[1]");
        assert_eq!(t.string("missing"), Ok(None));
        assert_eq!(t.integer("n", -5, 5), Ok(Some(-1)));
        assert_eq!(t.number("n"), Ok(Some(-1.0)));
    }

    #[test]
    fn unknown_keys_name_the_likely_typo_and_the_known_keys() {
        let d = doc("repeets = 3\n");
        let top = Table::new(&d, "");
        let e = top.check_keys(&["name", "repeats"]).unwrap_err();
        assert_eq!(e.key, "repeets");
        assert_eq!(
            e.message(),
            "unknown key (did you mean `repeats`? known keys: name, repeats)"
        );
        let nested = Table::new(&d, "traversal");
        let e = nested.check_keys(&["repeats"]).unwrap_err();
        assert_eq!(
            e.sentence(),
            "unknown key `traversal.repeets` (did you mean `traversal.repeats`? known keys in [traversal]: repeats)"
        );
        let arm = Table::new(&d, "arms[1] (`b`)")
            .check_keys(&["set"])
            .unwrap_err();
        assert_eq!(arm.message(), "unknown key (known keys: set)");
        let far = top.check_keys(&["workload"]).unwrap_err();
        assert!(!far.message().contains("did you mean"), "{far:?}");
        assert_eq!(top.check_keys(&["repeets"]), Ok(()));
    }

    #[test]
    fn closest_allows_about_a_third_of_the_length() {
        assert_eq!(
            closest("sheduler", &["scheduler", "seed"]),
            Some("scheduler")
        );
        assert_eq!(closest("xyz", &["scheduler"]), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
