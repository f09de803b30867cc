//! Error classification and small helpers shared by every subcommand, in both
//! binaries (`lcx` compiles the torch-free commands on its own; see
//! src/main.rs).

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

/// Opens a `--metrics-out PATH|-` sink: stdout for `-`, else a new file.
/// Writers flush after every JSON line, so a reader sees whole lines.
pub(crate) fn metrics_sink(
    path: Option<&std::path::PathBuf>,
) -> anyhow::Result<Option<Box<dyn std::io::Write>>> {
    use anyhow::Context;
    Ok(match path {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
        Some(p) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(p)
                .with_context(|| format!("--metrics-out: cannot create {}", p.display()))?,
        ))),
    })
}

/// Exit code for an error that reached `main`.
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    let user_input = |cause: &(dyn std::error::Error + 'static)| {
        cause.is::<BadInput>()
            || cause
                .downcast_ref::<crate::store::StoreError>()
                .is_some_and(crate::store::StoreError::is_user_input)
    };
    if err.chain().any(user_input) {
        2
    } else {
        1
    }
}
