//! How the shared row mapping (`crate::rows`) reads tokio-postgres's rows: each column as the
//! schema's type ([`Columns`]), a damaged one as [`PgError::Corrupt`], and an audit entry of a
//! partitioned log with its chain and link.

use tokio_postgres::Row;

use crate::audit::AuditEntry;
use crate::records::StoreError;
use crate::rows::{self, Columns, Corrupt, from_db};

/// What a statement or a row read can fail with: the database's error, or a row holding what
/// gatehouse never writes there.
#[derive(Debug)]
pub(crate) enum PgError {
    /// The database's error.
    Db(tokio_postgres::Error),
    /// A damaged row.
    Corrupt(Corrupt),
}

impl From<tokio_postgres::Error> for PgError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Db(error)
    }
}

impl From<Corrupt> for PgError {
    fn from(corrupt: Corrupt) -> Self {
        Self::Corrupt(corrupt)
    }
}

impl PgError {
    /// As the store reports it, naming the database.
    pub(super) fn into_store_error(self, location: &str) -> StoreError {
        match self {
            Self::Db(error) => super::unavailable(location, &error),
            Self::Corrupt(corrupt) => StoreError::Unavailable(format!("{location}: {corrupt}")),
        }
    }
}

/// An audit entry of a partitioned log: [`rows::audit_entry`], then its chain and link
/// (the columns `sql::audit_columns` adds).
pub(super) fn audit_entry(row: &Row) -> Result<AuditEntry, PgError> {
    let mut entry = rows::audit_entry(row)?;
    let chain: i32 = row.try_get(11)?;
    entry.chain = u32::try_from(chain).map_err(|_| Corrupt {
        column: 11,
        problem: format!("holds the negative chain {chain}"),
    })?;
    entry.link = from_db(row.int(12)?);
    Ok(entry)
}

impl Columns for Row {
    type Error = PgError;

    fn text(&self, column: usize) -> Result<String, PgError> {
        Ok(self.try_get(column)?)
    }

    fn text_or_null(&self, column: usize) -> Result<Option<String>, PgError> {
        Ok(self.try_get(column)?)
    }

    fn int(&self, column: usize) -> Result<i64, PgError> {
        Ok(self.try_get(column)?)
    }

    fn int_or_null(&self, column: usize) -> Result<Option<i64>, PgError> {
        Ok(self.try_get(column)?)
    }
}
