//! Records of the table's rows: a row's value is a JSON object of its
//! columns (module `value`), its key the primary key's value as JSON (an
//! array of them for several columns).

use serde_json::Value;

use super::pgoutput::{Datum, Relation, Tuple};
use super::setup::SourceTable;
use super::value::{NumericAs, to_json};

/// A row of the stream as a record: its key, its key's texts (as
/// PostgreSQL prints them, for ordering) and its value.
pub(super) struct Image {
    pub(super) key: Vec<u8>,
    pub(super) texts: Vec<String>,
    pub(super) value: Vec<u8>,
}

/// The records of rows: a row's value is a JSON object of its columns, its
/// key the primary key's value (an array of them for several columns).
pub(super) struct RecordBuilder<'t> {
    table: &'t SourceTable,
    numeric: NumericAs,
}

impl<'t> RecordBuilder<'t> {
    pub(super) fn new(table: &'t SourceTable, numeric: NumericAs) -> Self {
        RecordBuilder { table, numeric }
    }

    fn json(&self, type_oid: u32, text: &str, column: &str) -> Result<Value, String> {
        to_json(type_oid, text, self.numeric).map_err(|e| format!("column {column}: {e}"))
    }

    fn key(&self, mut values: Vec<Value>) -> Vec<u8> {
        let key = match values.len() {
            1 => values.pop().expect("one value"),
            _ => Value::Array(values),
        };
        serde_json::to_vec(&key).expect("JSON serializes")
    }

    /// A snapshot row (texts of the table's columns): key and value.
    pub(super) fn row(&mut self, row: &[Option<String>]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let mut object = serde_json::Map::new();
        for (column, text) in self.table.columns.iter().zip(row) {
            let value = match text {
                None => Value::Null,
                Some(text) => self.json(column.type_oid, text, &column.name)?,
            };
            object.insert(column.name.clone(), value);
        }
        let key = (self.table.record_key.iter())
            .map(|&c| object[&self.table.columns[c].name].clone())
            .collect();
        let value = serde_json::to_vec(&Value::Object(object)).expect("JSON serializes");
        Ok((self.key(key), value))
    }

    /// A tuple of the stream (`key_only`: an old tuple of the replica
    /// identity's columns only): key, key texts and value. Columns left out
    /// of the tuple (a key-only old tuple's others, unchanged TOAST values)
    /// are left out of the value.
    pub(super) fn tuple(
        &self,
        relation: &Relation,
        tuple: &Tuple,
        key_only: bool,
    ) -> Result<Image, String> {
        if tuple.0.len() != relation.columns.len() {
            return Err(format!(
                "a change of table {}.{} has {} values for {} columns",
                relation.namespace,
                relation.name,
                tuple.0.len(),
                relation.columns.len()
            ));
        }
        let mut object = serde_json::Map::new();
        for (column, datum) in relation.columns.iter().zip(&tuple.0) {
            match datum {
                // A key-only old tuple sends the other columns as NULLs:
                // unknown, left out.
                Datum::Null if key_only && !column.key => {}
                Datum::Null => {
                    object.insert(column.name.clone(), Value::Null);
                }
                Datum::UnchangedToast => {}
                Datum::Text(text) => {
                    object.insert(
                        column.name.clone(),
                        self.json(column.type_oid, text, &column.name)?,
                    );
                }
                Datum::Binary(_) => {
                    return Err(format!(
                        "column {} came in binary form, which the source never asks for",
                        column.name
                    ));
                }
            }
        }
        let mut key_texts = Vec::new();
        for &c in &self.table.key {
            let name = &self.table.columns[c].name;
            let text = (relation.columns.iter().zip(&tuple.0))
                .find(|(column, _)| &column.name == name)
                .and_then(|(_, datum)| match datum {
                    Datum::Text(text) => Some(text),
                    _ => None,
                });
            let Some(text) = text else {
                return Err(format!(
                    "a change of table {} has no value for its key column {name}; was the primary key changed while the job ran?",
                    self.table.sql
                ));
            };
            key_texts.push(text.clone());
        }
        let mut key_values = Vec::new();
        for &c in &self.table.record_key {
            let name = &self.table.columns[c].name;
            match object.get(name) {
                Some(value) => key_values.push(value.clone()),
                None => {
                    return Err(format!(
                        "a change of table {} carries no value for column {name} of the source's `key`: \
                         deletes and updates carry only the primary key unless the table has REPLICA IDENTITY FULL \
                         (ALTER TABLE {0} REPLICA IDENTITY FULL), or key by the primary key",
                        self.table.sql
                    ));
                }
            }
        }
        // A key-only old tuple: only the key's columns are known.
        if tuple
            .0
            .iter()
            .zip(&relation.columns)
            .any(|(d, c)| c.key && matches!(d, Datum::Null))
        {
            return Err(format!(
                "a change of table {} has a NULL key",
                self.table.sql
            ));
        }
        let value = serde_json::to_vec(&Value::Object(object)).expect("JSON serializes");
        Ok(Image {
            key: self.key(key_values),
            texts: key_texts,
            value,
        })
    }
}
