//! How the shared row mapping (`crate::rows`) reads rusqlite's rows: each column as the
//! schema's type, and a damaged column as rusqlite's conversion error, so it fails the query
//! that read it.

use rusqlite::Row;

use crate::rows::{Columns, Corrupt};

impl Columns for Row<'_> {
    type Error = rusqlite::Error;

    fn text(&self, column: usize) -> rusqlite::Result<String> {
        self.get(column)
    }

    fn text_or_null(&self, column: usize) -> rusqlite::Result<Option<String>> {
        self.get(column)
    }

    fn int(&self, column: usize) -> rusqlite::Result<i64> {
        self.get(column)
    }

    fn int_or_null(&self, column: usize) -> rusqlite::Result<Option<i64>> {
        self.get(column)
    }
}

impl From<Corrupt> for rusqlite::Error {
    fn from(corrupt: Corrupt) -> Self {
        rusqlite::Error::FromSqlConversionFailure(
            corrupt.column,
            rusqlite::types::Type::Text,
            Box::new(corrupt),
        )
    }
}
