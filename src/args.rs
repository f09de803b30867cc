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
