//! Flags that several commands take, declared once so that their name,
//! environment variable, default and help cannot drift apart.

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// `--db PATH`: the SQLite database of a command that reads or writes the
/// store. `LCX_DB` stands in for the flag, and with neither the database
/// is `lcx.db` ([`lcx_core::store::DEFAULT_DB`]) in the working directory;
/// `--help` shows both after the flag's text.
///
/// Every command that takes `--db` flattens this (`#[command(flatten)]`);
/// a command whose database means something narrower says so by replacing
/// the text (`#[command(mut_arg("db", …))]`: `cache`, `config show`). How
/// the file is opened is each command's own: `run` and `bisect` create it
/// (`run --resume` and `--attach` need it to exist), `report`, `list`,
/// `history`, `compare` and `config show --run` only read it (`report
/// --archive` also records what it wrote), `query` opens it query-only, and
/// `cache` uses only the folder it is in.
#[derive(Debug, Clone, clap::Args)]
// clap would make the doc comment above the about text of every command
// that flattens this, until that command's own doc comment replaces it;
// these keep it out of `--help` even for a command without one.
#[command(about = None, long_about = None)]
pub struct DbArgs {
    /// The SQLite database.
    #[arg(long, env = "LCX_DB", default_value = lcx_core::store::DEFAULT_DB)]
    db: PathBuf,
}

/// The commands use `--db` as the path it is: `Store::open(&args.db)`,
/// `args.db.display()`.
impl Deref for DbArgs {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.db
    }
}

/// A count flag (`--iterations`, `--repeats`): a whole number ≥ 1. A
/// negative or zero count is read, so the error says what is wrong with it
/// rather than clap's range of `u32`.
pub fn count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if n >= 1 => {
            u32::try_from(n).map_err(|_| format!("must be at most {} (found {n})", u32::MAX))
        }
        Ok(n) => Err(format!("must be ≥ 1 (found {n})")),
        Err(_) => Err(format!("expected a whole number ≥ 1, found `{text}`")),
    }
}

/// `--min-effect`'s parser: a fraction in [0, 1), the rule a file's
/// `gate.min_effect` follows too.
pub fn min_effect(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a fraction in [0, 1), e.g. 0.05 for 5 %, found {text}"))?;
    lcx_core::experiment::plan::check_min_effect(value)?;
    Ok(value)
}

/// `--format`: what a command writes. One type for every command, so a
/// format is spelt, parsed and matched one way; each command offers the
/// subset it can write through [`formats`], and `--help` and clap's error
/// list just those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A markdown table (`list`, `query`, `play`, `system show`).
    Table,
    /// Markdown prose and tables (`report`, `schema`).
    Markdown,
    Csv,
    Json,
    /// A pull-request comment (`report`).
    Comment,
}

impl Format {
    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Markdown => "markdown",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Comment => "comment",
        }
    }
}

/// `--format table|json` and the hidden `--json` it replaced: the output
/// flags of `lcx list` and `lcx history`, declared once so that the two
/// commands cannot come to spell them differently. Flattened where the
/// flags stood, so `--help` lists them in the same place.
#[derive(Debug, Clone, clap::Args)]
// As for DbArgs: keeps the doc comment above out of the commands' help.
#[command(about = None, long_about = None)]
pub struct TableOrJson {
    /// `table` (markdown) or `json`, as for `lcx query`.
    #[arg(long, value_parser = formats(&[(Format::Table, None), (Format::Json, None)]), default_value = "table")]
    format: Format,
    /// Same as `--format json` (kept for scripts written before `--format`).
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
}

impl TableOrJson {
    /// Whether JSON was asked for, by either flag.
    pub fn json(&self) -> bool {
        self.json || self.format == Format::Json
    }
}

/// One format a command offers, with the help line `--help` shows under
/// it when the command has something to say about it (`export`'s JSON is
/// JSON Lines, not one document).
pub type Offer = (Format, Option<&'static str>);

/// `--format`'s parser for a command that writes `offers`: clap's own
/// possible-values check (its error names the value and lists the
/// offered ones), giving the shared [`Format`].
pub fn formats(offers: &'static [Offer]) -> Formats {
    Formats(offers)
}

/// See [`formats`].
#[derive(Debug, Clone, Copy)]
pub struct Formats(&'static [Offer]);

impl Formats {
    fn values(&self) -> impl Iterator<Item = clap::builder::PossibleValue> + '_ {
        self.0.iter().map(|(format, help)| {
            let value = clap::builder::PossibleValue::new(format.name());
            match help {
                Some(help) => value.help(*help),
                None => value,
            }
        })
    }
}

impl clap::builder::TypedValueParser for Formats {
    type Value = Format;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Format, clap::Error> {
        let name =
            clap::builder::PossibleValuesParser::new(self.values()).parse_ref(cmd, arg, value)?;
        // The parser above accepted only an offered name, so the search
        // finds it; the fallback error is clap's own for a bad value.
        self.0
            .iter()
            .map(|(format, _)| *format)
            .find(|format| format.name() == name)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(self.values()))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        db: DbArgs,
    }

    // Where the flag is found, and what it says, is checked for every
    // command in `light`'s tests.
    #[test]
    fn the_flag_derefs_to_the_path_it_names() {
        let cli = Cli::try_parse_from(["lcx", "--db", "x.db"]).unwrap();
        assert_eq!(&*cli.db, Path::new("x.db"));
    }

    #[derive(Debug, Parser)]
    struct Formatted {
        #[arg(long, value_parser = formats(&[(Format::Table, None), (Format::Json, None)]), default_value = "table")]
        format: Format,
    }

    #[test]
    fn a_format_is_one_of_those_offered() {
        let parse = |args: &[&str]| Formatted::try_parse_from(args).map(|c| c.format);
        assert_eq!(parse(&["lcx"]).unwrap(), Format::Table);
        assert_eq!(parse(&["lcx", "--format", "json"]).unwrap(), Format::Json);
        // csv and markdown are formats of other commands, not this one's.
        for other in ["csv", "markdown", "JSON"] {
            let error = parse(&["lcx", "--format", other]).unwrap_err().to_string();
            assert!(
                error.contains(&format!("invalid value '{other}'"))
                    && error.contains("[possible values: table, json]"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_count_is_a_whole_number_of_at_least_one() {
        assert_eq!(count("3"), Ok(3));
        assert_eq!(count("-1"), Err("must be ≥ 1 (found -1)".into()));
        assert_eq!(count("0"), Err("must be ≥ 1 (found 0)".into()));
        assert_eq!(
            count("2.5"),
            Err("expected a whole number ≥ 1, found `2.5`".into())
        );
        assert!(count("99999999999")
            .unwrap_err()
            .starts_with("must be at most"));
    }
}
