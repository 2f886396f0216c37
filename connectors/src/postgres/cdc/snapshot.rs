//! Reading the table's rows under an exported snapshot, in primary-key
//! order (text columns `COLLATE "C"`, by bytes, as module `key_order`
//! compares them), a chunk at a time from the key after which the last
//! chunk ended.
//!
//! Invariant: every chunk is read in one `REPEATABLE READ` transaction
//! that imported the snapshot, so the rows are the table as of the
//! snapshot's position, whatever commits meanwhile.

use postgres::{Client, NoTls, SimpleQueryMessage};

use super::super::table::{describe, quote_ident};
use super::setup::SourceTable;

/// The rows of a table under a snapshot, read in key order.
pub(super) struct SnapshotRead {
    client: Client,
    /// `SELECT <columns> FROM <table>`.
    select: String,
    /// The key columns, as compared: `("k1" COLLATE "C", "k2")`.
    key: String,
    /// ` ORDER BY ...`.
    order: String,
    /// The key columns' types, for the literals of `after`.
    key_types: Vec<(String, bool)>,
    /// The key of the last row read, as text.
    after: Option<Vec<String>>,
    done: bool,
}

/// A text as an SQL literal (the session has `standard_conforming_strings`).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

impl SnapshotRead {
    /// Opens a connection of `config` reading `table` under snapshot
    /// `snapshot` (exported by a replication session that must stay open
    /// until this transaction began), from after key `after`.
    pub(super) fn begin(
        config: &postgres::Config,
        snapshot: &str,
        table: &SourceTable,
        after: Option<Vec<String>>,
    ) -> Result<SnapshotRead, String> {
        let mut client = config
            .connect(NoTls)
            .map_err(|e| format!("cannot connect to read the snapshot: {}", describe(&e)))?;
        client
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT {}",
                literal(snapshot)
            ))
            .map_err(|e| format!("cannot import the snapshot: {}", describe(&e)))?;
        let columns: Vec<String> = (table.columns.iter())
            .map(|c| quote_ident(&c.name))
            .collect();
        let keyed: Vec<String> = (table.key.iter())
            .map(|&c| {
                let column = &table.columns[c];
                match column.collatable {
                    true => format!("{} COLLATE \"C\"", quote_ident(&column.name)),
                    false => quote_ident(&column.name),
                }
            })
            .collect();
        Ok(SnapshotRead {
            client,
            select: format!("SELECT {} FROM {}", columns.join(", "), table.sql),
            key: format!("({})", keyed.join(", ")),
            order: format!(" ORDER BY {}", keyed.join(", ")),
            key_types: (table.key.iter())
                .map(|&c| {
                    (
                        table.columns[c].sql_type.clone(),
                        table.columns[c].collatable,
                    )
                })
                .collect(),
            after,
            done: false,
        })
    }

    /// Up to `max` more rows, each the texts of the table's columns (NULL
    /// as `None`); none once the table is read. `key` picks a row's key
    /// texts, remembered as the place to go on from.
    pub(super) fn next_rows(
        &mut self,
        max: usize,
        key: impl Fn(&[Option<String>]) -> Vec<String>,
    ) -> Result<Vec<Vec<Option<String>>>, String> {
        if self.done {
            return Ok(Vec::new());
        }
        let filter = match &self.after {
            None => String::new(),
            Some(after) => {
                let values: Vec<String> = (after.iter().zip(&self.key_types))
                    .map(|(text, (sql_type, collatable))| {
                        let cast = format!("CAST({} AS {sql_type})", literal(text));
                        match collatable {
                            true => format!("{cast} COLLATE \"C\""),
                            false => cast,
                        }
                    })
                    .collect();
                format!(" WHERE {} > ({})", self.key, values.join(", "))
            }
        };
        let sql = format!("{}{filter}{} LIMIT {max}", self.select, self.order);
        let messages = (self.client.simple_query(&sql))
            .map_err(|e| format!("reading the snapshot failed: {}", describe(&e)))?;
        let rows: Vec<Vec<Option<String>>> = (messages.iter())
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_owned))
                        .collect(),
                ),
                _ => None,
            })
            .collect();
        match rows.last() {
            Some(last) => self.after = Some(key(last)),
            None => self.done = true,
        }
        if rows.len() < max {
            self.done = true;
        }
        Ok(rows)
    }

    /// The key of the last row read, if any.
    pub(super) fn after(&self) -> Option<&Vec<String>> {
        self.after.as_ref()
    }

    /// Whether every row was read.
    pub(super) fn done(&self) -> bool {
        self.done
    }
}
