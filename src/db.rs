//! Opening the database for a command, and what a store error means to
//! the user: every command that reads or changes `--db` opens it here, so
//! each says a missing file, a newer schema or a bad selector the same way
//! (exit 2) and a database failure the same way (exit 1).

use std::path::Path;

use lcx_core::store::{Store, StoreError};

/// Opens the database read-only; a missing file or an unknown schema is
/// the user's problem (exit 2).
pub(crate) fn open_db(path: &Path) -> anyhow::Result<Store> {
    // Every StoreError from opening names the path itself.
    Store::open_read_only(path).map_err(user_or_not)
}

/// Opens an existing database to change it (`lcx rm`, `lcx rename`): never
/// creates one; an older schema is migrated as `lcx run` would.
pub(crate) fn open_db_for_writing(path: &Path) -> anyhow::Result<Store> {
    Store::open_existing(path).map_err(user_or_not)
}

/// Store errors the user can fix (a selector, a path, a schema, a query)
/// exit 2; database failures exit 1.
pub(crate) fn user_or_not(err: StoreError) -> anyhow::Error {
    if err.is_user_input() {
        crate::bad_input(err)
    } else {
        err.into()
    }
}
