//! Error classification and small helpers shared by every subcommand, in both
//! binaries.

/// Marks an error as the user's input being wrong (a file, key or flag), as
/// opposed to a failure while doing the work. Such errors exit with code 2,
/// like clap's own usage errors; everything else exits with 1.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BadInput(#[from] pub anyhow::Error);

/// Wraps any error as [`BadInput`].
pub fn bad_input(err: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(BadInput(err.into()))
}

/// An output path refused (a database, a folder: exit 2) or a failed
/// write (exit 1), from [`lcx_core::files`].
pub fn output_error(err: lcx_core::files::OutputError) -> anyhow::Error {
    if err.is_user_input() {
        bad_input(err)
    } else {
        err.into()
    }
}

/// Opens a `--metrics-out PATH|-` sink: stdout for `-`, else a new file.
/// Writers flush after every JSON line, so a reader sees whole lines (so
/// the file is written in place, not renamed in at the end); a path that
/// is an SQLite database or a folder is refused first (exit 2).
pub fn metrics_sink(
    path: Option<&std::path::PathBuf>,
) -> anyhow::Result<Option<Box<dyn std::io::Write>>> {
    use anyhow::Context;
    Ok(match path {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
        Some(p) => {
            lcx_core::files::check_output("--metrics-out", p, &[]).map_err(output_error)?;
            Some(Box::new(std::io::BufWriter::new(
                std::fs::File::create(p)
                    .with_context(|| format!("--metrics-out: cannot create {}", p.display()))?,
            )))
        }
    })
}

/// Exit code for an error that reached `main`.
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    let user_input = |cause: &(dyn std::error::Error + 'static)| {
        cause.is::<BadInput>()
            || cause
                .downcast_ref::<lcx_core::store::StoreError>()
                .is_some_and(lcx_core::store::StoreError::is_user_input)
            || cause
                .downcast_ref::<lcx_core::session::SessionError>()
                .is_some_and(lcx_core::session::SessionError::is_user_input)
            || cause
                .downcast_ref::<lcx_core::session::bisect::BisectError>()
                .is_some_and(lcx_core::session::bisect::BisectError::is_user_input)
    };
    if err.chain().any(user_input) {
        2
    } else {
        1
    }
}

/// Makes a closed stdout (`lcx report | head -1`) end the process quietly
/// with exit 0, as Unix tools do, instead of a "failed printing to stdout:
/// Broken pipe" panic (exit 101). Rust ignores SIGPIPE, so the print macros
/// see EPIPE and panic; this hook recognises that one panic. Every other
/// panic goes to the default hook.
pub fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if payload.starts_with("failed printing to stdout") && payload.contains("Broken pipe") {
            #[expect(
                clippy::disallowed_methods,
                reason = "inside a panic hook there is no main to return to; the reader has gone"
            )]
            std::process::exit(0);
        }
        default(info);
    }));
}

/// Prints an error that reached `main` as `error: …` on stderr, with what
/// it quotes from files, names and children (which may hold terminal
/// escapes) shown by the terminal rule ([`lcx_core::escape::terminal`]).
pub fn print_error(err: &anyhow::Error) {
    let text = format!("{err:#}");
    eprintln!("error: {}", lcx_core::escape::terminal(&text));
}

/// Text for stdout in a data format (CSV) that has no escape of its own for
/// control characters: as it is into a file or a pipe, where it is data;
/// by the terminal rule when stdout is a terminal, where it would be obeyed.
pub fn data_for_stdout(text: &str) -> std::borrow::Cow<'_, str> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        lcx_core::escape::terminal(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}
