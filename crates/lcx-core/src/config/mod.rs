//! Trainer configuration: the TOML schema of docs/deep-cfr.md §11 (as scoped by
//! docs/deep-cfr.md §0), its code defaults, validation with messages that name the key, and
//! the `--set path.to.key=value` overrides.
//!
//! Flow: TOML text → `toml::Table` → each `--set` merged in order → the
//! validating reader (`read.rs`) → [`TrainerConfig`]. Only the reader turns
//! tables into configs, so every way in (files, `--set`, serde) is checked the
//! same way, and [`TrainerConfig::validate`] re-runs it on the serialised form.

mod read;
mod schema;
mod set;

use std::path::{Path, PathBuf};

pub mod amp;
pub use schema::*;
pub use set::{apply_set, apply_sets, Set, SetError};

/// The `n` names of `known` nearest to `name` by edit distance, nearest
/// first: the hint for a misspelt key or metric name.
pub fn nearest<'k>(name: &str, known: &'k [String], n: usize) -> Vec<&'k str> {
    let mut by: Vec<(usize, &str)> = known
        .iter()
        .map(|k| (crate::toml_read::edit_distance(name, k), k.as_str()))
        .collect();
    by.sort();
    by.into_iter().take(n).map(|(_, k)| k).collect()
}

/// Origin used in messages when no file was given.
const DEFAULTS_ORIGIN: &str = "code defaults";

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The text is not valid TOML.
    #[error("{origin} is not valid TOML: {message}")]
    Syntax { origin: String, message: String },
    /// A `--set` argument is malformed or cannot be applied.
    #[error(transparent)]
    Set(#[from] SetError),
    /// A key is unknown, has the wrong type or value, or breaks a rule
    /// between keys. `key` is the dotted path (e.g. `traversal.scheduler`).
    #[error("{origin}: {message}")]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
}

impl ConfigError {
    /// The dotted key path an [`ConfigError::Invalid`] is about.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// The config the benches use when none is given: `configs/default.toml`,
/// compiled in so that a bench runs the same anywhere.
const BENCH_DEFAULT_TOML: &str = include_str!("../../../../configs/default.toml");
/// How [`BENCH_DEFAULT_TOML`] is named in messages.
const BENCH_DEFAULT_ORIGIN: &str = "configs/default.toml (built in)";

/// Loads a bench's config: as [`load`], but without a file the benches
/// start from [`BENCH_DEFAULT_TOML`] rather than the code defaults.
pub fn load_bench(path: Option<&Path>, sets: &[String]) -> Result<TrainerConfig, ConfigError> {
    match path {
        Some(_) => load(path, sets),
        None => from_toml_str(BENCH_DEFAULT_TOML, BENCH_DEFAULT_ORIGIN, sets),
    }
}

/// Loads a config: the file at `path` (or the code defaults when `None`),
/// then each `--set` in order, then validation. The path `-` reads the
/// config from standard input: that is how `lcx run` hands each cell the
/// exact config it recorded for it.
pub fn load(path: Option<&Path>, sets: &[String]) -> Result<TrainerConfig, ConfigError> {
    match path {
        Some(path) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|source| {
                ConfigError::Io {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
            from_toml_str(&text, "standard input", sets)
        }
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            from_toml_str(&text, &path.display().to_string(), sets)
        }
        None => resolve(toml::Table::new(), DEFAULTS_ORIGIN, sets),
    }
}

/// Parses config text; `origin` names it in messages (usually the path).
pub fn from_toml_str(
    text: &str,
    origin: &str,
    sets: &[String],
) -> Result<TrainerConfig, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        origin: origin.to_owned(),
        message: e.to_string(),
    })?;
    resolve(table, origin, sets)
}

/// Applies the sets to a parsed document and reads it. An error about a key
/// that a `--set` wrote is attributed to that `--set`.
fn resolve(
    mut table: toml::Table,
    origin: &str,
    sets: &[String],
) -> Result<TrainerConfig, ConfigError> {
    let written = apply_sets(&mut table, sets)?;
    read::from_table(&table).map_err(|err| {
        let culprit = written
            .iter()
            .rev()
            .find(|set| err.touches(&set.path))
            .map(|set| set::named(&set.arg));
        err.into_error(culprit.as_deref().unwrap_or(origin))
    })
}

impl TrainerConfig {
    /// The fully resolved config as TOML; every key is written (unset
    /// optional keys as `"none"`), and the text reads back identically.
    pub fn to_toml(&self) -> String {
        // Only out-of-TOML-range integers set in code can fail here
        // (`validate` reports those); the text then says so instead of panicking.
        toml::to_string_pretty(self)
            .unwrap_or_else(|e| format!("# this config cannot be written as TOML: {e}\n"))
    }

    /// Checks every range and cross-key rule, as loading does.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let table = toml::Table::try_from(self).map_err(|e| ConfigError::Invalid {
            origin: "config".to_owned(),
            key: String::new(),
            message: format!("cannot be represented as TOML: {e}"),
        })?;
        read::from_table(&table)
            .map(|_| ())
            .map_err(|e| e.into_error("config"))
    }
}

impl TryFrom<toml::Table> for TrainerConfig {
    type Error = ConfigError;
    fn try_from(table: toml::Table) -> Result<Self, ConfigError> {
        read::from_table(&table).map_err(|e| e.into_error("config"))
    }
}

#[cfg(test)]
mod tests;
