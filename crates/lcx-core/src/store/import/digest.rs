//! What must agree for two copies of one uuid to be one experiment: every
//! stored value of the experiment, its cells and their live lines, hashed.
//! Row ids are left out (each database numbers its own rows) and a cell
//! stands for itself by its arm and repeat; archived reports are left out
//! too, since an import adds those archived since to the copy here.

use rusqlite::types::ValueRef;
use rusqlite::Connection;
use sha2::{Digest, Sha256};

use crate::store::StoreError;

/// One value into the hash, tagged with its type so that `1` (integer),
/// `1.0` (real) and `'1'` (text) differ, and texts cannot run together.
fn feed(hash: &mut Sha256, value: ValueRef<'_>) {
    match value {
        ValueRef::Null => hash.update([0u8]),
        ValueRef::Integer(i) => {
            hash.update([1u8]);
            hash.update(i.to_le_bytes());
        }
        ValueRef::Real(f) => {
            hash.update([2u8]);
            hash.update(f.to_bits().to_le_bytes());
        }
        ValueRef::Text(t) => {
            hash.update([3u8]);
            hash.update((t.len() as u64).to_le_bytes());
            hash.update(t);
        }
        ValueRef::Blob(b) => {
            hash.update([4u8]);
            hash.update((b.len() as u64).to_le_bytes());
            hash.update(b);
        }
    }
}

/// Every row `sql` selects (bound to `id`), each value fed in order.
fn feed_rows(hash: &mut Sha256, conn: &Connection, sql: &str, id: i64) -> Result<(), StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let n = stmt.column_count();
    let mut rows = stmt.query([id])?;
    while let Some(row) = rows.next()? {
        hash.update([0xfeu8]);
        for i in 0..n {
            feed(hash, row.get_ref(i)?);
        }
    }
    Ok(())
}

/// The columns of `table` but `leave_out`, as an SQL list.
fn kept(conn: &Connection, table: &str, leave_out: &[&str]) -> Result<String, StoreError> {
    Ok(super::list(&super::columns(conn, table, leave_out)?, ""))
}

/// The digest of experiment `id` of `schema` (`main` or `src`, whose
/// schemas are one), as hex.
pub(super) fn digest(conn: &Connection, schema: &str, id: i64) -> Result<String, StoreError> {
    let mut hash = Sha256::new();
    let experiment = kept(conn, "experiments", &["id"])?;
    feed_rows(
        &mut hash,
        conn,
        &format!("SELECT {experiment} FROM {schema}.experiments WHERE id = ?1"),
        id,
    )?;
    let cells: Vec<i64> = {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT id FROM {schema}.runs WHERE experiment_id = ?1 ORDER BY arm, repeat"
        ))?;
        let ids = stmt
            .query_map([id], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        ids
    };
    let run = kept(conn, "runs", &["id", "experiment_id"])?;
    let run_sql = format!("SELECT {run} FROM {schema}.runs WHERE id = ?1");
    let mut line_sqls = Vec::new();
    for table in super::LINE_TABLES {
        let cols = kept(conn, table, &["run_id", "superseded"])?;
        // The live lines, in the order of their unique index (one row per
        // name and iteration): read through it, with no sort, in any
        // storage order. Superseded lines (an attempt a resume replaced)
        // are kept for forensics and read by no report; the cell's
        // attempt, hashed above, tells a resumed copy from one that was not.
        line_sqls.push(format!(
            "SELECT {cols} FROM {schema}.{table} WHERE run_id = ?1 AND superseded = 0
             ORDER BY name, iteration"
        ));
    }
    for cell in cells {
        hash.update([0xfdu8]);
        feed_rows(&mut hash, conn, &run_sql, cell)?;
        for sql in &line_sqls {
            hash.update([0xfcu8]);
            feed_rows(&mut hash, conn, sql, cell)?;
        }
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
