//! Reading the tables' rows under an exported snapshot, one table after
//! another, each in primary-key order (text columns `COLLATE "C"`, by
//! bytes, as module `key_order` compares them), a chunk at a time from the
//! key after which the last chunk ended.
//!
//! Invariant: every chunk of every table is read in one `REPEATABLE READ`
//! transaction that imported the snapshot, so the rows are the tables as
//! of the snapshot's position, whatever commits meanwhile.

use postgres::{Client, NoTls, SimpleQueryMessage};

use super::super::table::{describe, quote_ident};
use super::setup::SourceTable;

/// A row: the texts of its columns, NULL as `None`.
pub(super) type Row = Vec<Option<String>>;

/// How one table's rows are read.
struct TableQuery {
    /// `SELECT <columns> FROM <table>`.
    select: String,
    /// The key columns, as compared: `("k1" COLLATE "C", "k2")`.
    key: String,
    /// ` ORDER BY ...`.
    order: String,
    /// The key columns' types, for the literals of `after`.
    key_types: Vec<(String, bool)>,
    /// The key columns, as indices into a row.
    key_columns: Vec<usize>,
}

impl TableQuery {
    fn new(table: &SourceTable) -> TableQuery {
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
        TableQuery {
            select: format!("SELECT {} FROM {}", columns.join(", "), table.sql),
            key: format!("({})", keyed.join(", ")),
            order: format!(" ORDER BY {}", keyed.join(", ")),
            key_types: (table.key.iter())
                .map(|&c| {
                    let column = &table.columns[c];
                    (column.sql_type.clone(), column.collatable)
                })
                .collect(),
            key_columns: table.key.clone(),
        }
    }

    /// The query of up to `max` rows after key `after`.
    fn sql(&self, after: Option<&Vec<String>>, max: usize) -> String {
        let filter = match after {
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
        format!("{}{filter}{} LIMIT {max}", self.select, self.order)
    }
}

/// The rows of tables under a snapshot, a table at a time, each in key
/// order.
pub(super) struct SnapshotRead {
    client: Client,
    queries: Vec<TableQuery>,
    /// The table being read (an index into `queries`).
    table: usize,
    /// The key of the last row read of it, as text.
    after: Option<Vec<String>>,
    done: bool,
}

/// A text as an SQL literal (the session has `standard_conforming_strings`).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

impl SnapshotRead {
    /// Opens a connection of `config` reading `tables` under snapshot
    /// `snapshot` (exported by a replication session that must stay open
    /// until this transaction began), from table `table` after key `after`.
    pub(super) fn begin(
        config: &postgres::Config,
        snapshot: &str,
        tables: &[SourceTable],
        table: usize,
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
        Ok(SnapshotRead {
            client,
            queries: tables.iter().map(TableQuery::new).collect(),
            done: table >= tables.len(),
            table,
            after,
        })
    }

    /// The table (an index) and up to `max` more rows of it, each the
    /// texts of its columns (NULL as `None`); no rows once every table is
    /// read. The key of the last is remembered as the place to go on from.
    pub(super) fn next_rows(&mut self, max: usize) -> Result<(usize, Vec<Row>), String> {
        while !self.done {
            let query = &self.queries[self.table];
            let sql = query.sql(self.after.as_ref(), max);
            let messages = (self.client.simple_query(&sql))
                .map_err(|e| format!("reading the snapshot failed: {}", describe(&e)))?;
            let rows: Vec<Row> = (messages.iter())
                .filter_map(|m| match m {
                    SimpleQueryMessage::Row(row) => Some(
                        (0..row.len())
                            .map(|i| row.get(i).map(str::to_owned))
                            .collect(),
                    ),
                    _ => None,
                })
                .collect();
            let table = self.table;
            if let Some(last) = rows.last() {
                let key = query.key_columns.iter();
                self.after = Some(key.map(|&c| last[c].clone().unwrap_or_default()).collect());
            }
            if rows.len() < max {
                self.table += 1;
                self.after = None;
                self.done = self.table == self.queries.len();
            }
            if !rows.is_empty() {
                return Ok((table, rows));
            }
        }
        Ok((self.table, Vec::new()))
    }

    /// The table being read and the key of the last row read of it.
    pub(super) fn at(&self) -> (usize, Option<&Vec<String>>) {
        (self.table, self.after.as_ref())
    }

    /// Whether every row was read.
    pub(super) fn done(&self) -> bool {
        self.done
    }
}
