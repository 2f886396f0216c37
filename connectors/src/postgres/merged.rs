//! [`Merged`]: an upsert epoch's changes merged by key, so that the table
//! gets one statement per key whatever number of records named it.
//!
//! Invariant: applying the merged result — the truncate if any, then the
//! deletes, then the upserts — leaves the table as applying every record
//! in order would:
//! - a record (insert or update-after) replaces the fields it names in
//!   its key's row; fields only an earlier record named stay;
//! - a delete forgets what earlier records of its key said and deletes the
//!   row; a record after it starts the row anew;
//! - a truncate forgets everything before it and empties the table;
//! - an update's before image changes nothing (the after image follows).
//!
//! Keys are compared by their COPY text.

use std::collections::HashMap;
use std::ops::Range;

use foldhash::fast::RandomState;

use super::copy::{Columns, Groups, Row, Shown, check_key};
use weir::dataflow::batch::Change;

/// Capacity the text buffer keeps from one epoch to the next.
const KEEP: usize = 4 << 20;

/// What the epoch does to one key.
#[derive(Debug, Default)]
struct KeyRow {
    /// Whether the row is deleted before `cells` are upserted.
    deleted: bool,
    /// (column, field text) sorted by column; empty: nothing to upsert.
    cells: Vec<(usize, Range<usize>)>,
    /// The key's COPY line (key columns, tab-separated, ending in `\n`).
    key: Range<usize>,
}

/// An upsert epoch's changes merged by key.
#[derive(Debug, Default)]
pub(super) struct Merged {
    index: HashMap<Vec<u8>, usize, RandomState>,
    /// Per key, in order of first appearance.
    rows: Vec<KeyRow>,
    text: Vec<u8>,
    key: Vec<u8>,
    /// Whether the table is emptied first.
    truncated: bool,
}

impl Merged {
    /// Applies `row`, read from `record` and saying `change`, to its key
    /// (columns `key`). A record without a value for a key column is an
    /// error naming it. A truncate and an update's before image are applied
    /// by [`apply_keyless`](Self::apply_keyless) instead.
    pub(super) fn push(
        &mut self,
        change: Change,
        row: &Row,
        key: &[usize],
        columns: &Columns,
        record: Shown<'_>,
    ) -> Result<(), String> {
        debug_assert!(!Self::keyless(change));
        check_key(row, key, columns, record)?;
        self.key.clear();
        for &col in key {
            self.key.extend_from_slice(row.field(col).expect("checked"));
            self.key.push(b'\t');
        }
        let r = match self.index.get(&self.key) {
            Some(r) => *r,
            None => {
                let start = self.text.len();
                self.text.extend_from_slice(&self.key);
                *self.text.last_mut().expect("a key has a column") = b'\n';
                self.index.insert(self.key.clone(), self.rows.len());
                self.rows.push(KeyRow {
                    key: start..self.text.len(),
                    ..KeyRow::default()
                });
                self.rows.len() - 1
            }
        };
        if change == Change::Delete {
            let row = &mut self.rows[r];
            row.deleted = true;
            row.cells.clear();
            return Ok(());
        }
        for (col, range) in row.cells() {
            let start = self.text.len();
            self.text.extend_from_slice(&row.text()[range.clone()]);
            let cell = (*col, start..self.text.len());
            let cells = &mut self.rows[r].cells;
            match cells.binary_search_by_key(col, |(c, _)| *c) {
                Ok(i) => cells[i] = cell,
                Err(i) => cells.insert(i, cell),
            }
        }
        Ok(())
    }

    /// Whether a record saying `change` is applied without its fields:
    /// by [`apply_keyless`](Self::apply_keyless).
    pub(super) fn keyless(change: Change) -> bool {
        matches!(change, Change::Truncate | Change::UpdateBefore)
    }

    /// Applies a truncate (forgets everything before it) or an update's
    /// before image (nothing: its after image follows).
    pub(super) fn apply_keyless(&mut self, change: Change) {
        if change == Change::Truncate {
            self.index.clear();
            self.rows.clear();
            self.text.clear();
            self.truncated = true;
        }
    }

    /// Whether the table is emptied before anything else.
    pub(super) fn truncated(&self) -> bool {
        self.truncated
    }

    /// The COPY lines of the keys deleted (key columns only), in order of
    /// first appearance.
    pub(super) fn deleted_keys(&self) -> Vec<u8> {
        let mut lines = Vec::new();
        for row in self.rows.iter().filter(|r| r.deleted) {
            lines.extend_from_slice(&self.text[row.key.clone()]);
        }
        lines
    }

    /// Moves the rows to upsert into `groups`, in order of their keys' first
    /// appearance, and empties this.
    pub(super) fn drain_into(&mut self, groups: &mut Groups, row: &mut Row) {
        for key_row in self.rows.drain(..) {
            if key_row.cells.is_empty() {
                continue;
            }
            row.clear();
            for (col, range) in key_row.cells {
                row.push_cell(col, &self.text[range]);
            }
            groups.push(row);
        }
        self.clear();
    }

    /// Forgets everything (an epoch starts).
    pub(super) fn clear(&mut self) {
        self.rows.clear();
        self.index.clear();
        self.text.clear();
        self.text.shrink_to(KEEP);
        self.truncated = false;
    }

    /// Whether nothing was pushed since the last drain.
    pub(super) fn is_empty(&self) -> bool {
        self.rows.is_empty() && !self.truncated
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::copy::tests::columns;

    fn lines(groups: &mut Groups) -> Vec<String> {
        (groups.groups_mut().iter())
            .map(|g| String::from_utf8(g.copy.clone()).unwrap())
            .collect()
    }

    fn push_all(merged: &mut Merged, changes: &[(Change, &str)]) {
        let cols = columns();
        let key = [cols.find("name").unwrap()];
        let mut row = Row::default();
        for (change, r) in changes {
            if Merged::keyless(*change) {
                merged.apply_keyless(*change);
                continue;
            }
            row.read(&cols, false, r.as_bytes()).unwrap();
            merged
                .push(*change, &row, &key, &cols, Shown::Json(r.as_bytes()))
                .unwrap();
        }
    }

    /// Several records of one key in an epoch become one row, as if applied
    /// in order: the last value of each field wins, in first-seen key order.
    #[test]
    fn upsert_rows_are_merged_by_key_last_wins() {
        let cols = columns();
        let (mut row, mut merged, mut groups) =
            (Row::default(), Merged::default(), Groups::default());
        let key = [cols.find("name").unwrap()];
        for r in [
            r#"{"name": "a", "id": 1}"#,
            r#"{"name": "b", "id": 2}"#,
            r#"{"name": "a", "id": 3, "ok": false}"#,
            r#"{"name": "a", "id": 4}"#,
        ] {
            row.read(&cols, false, r.as_bytes()).unwrap();
            merged
                .push(Change::Insert, &row, &key, &cols, Shown::Json(r.as_bytes()))
                .unwrap();
        }
        merged.drain_into(&mut groups, &mut row);
        assert!(merged.is_empty());
        let got: Vec<String> = groups
            .groups_mut()
            .iter()
            .map(|g| String::from_utf8(g.copy.clone()).unwrap())
            .collect();
        assert_eq!(got, ["4\tf\ta\n", "2\tb\n"]);

        for (r, want) in [
            (r#"{"id": 1}"#, "`name` is missing"),
            (r#"{"name": null}"#, "`name` is null"),
        ] {
            row.read(&cols, false, r.as_bytes()).unwrap();
            let err = merged
                .push(Change::Insert, &row, &key, &cols, Shown::Json(r.as_bytes()))
                .unwrap_err();
            assert!(err.contains(want) && err.contains(r), "{err}");
        }
    }

    /// A delete forgets its key's earlier records and deletes the row; a
    /// record after it starts the row anew; an update's before image does
    /// nothing; a truncate forgets everything before it.
    #[test]
    fn deletes_and_truncates_apply_in_order() {
        use Change::*;
        let (mut merged, mut groups, mut row) =
            (Merged::default(), Groups::default(), Row::default());
        push_all(
            &mut merged,
            &[
                (Insert, r#"{"name": "a", "id": 1, "ok": true}"#),
                (Insert, r#"{"name": "b", "id": 2}"#),
                (Delete, r#"{"name": "a"}"#),
                (UpdateBefore, r#"{"name": "b", "id": 2}"#),
                (UpdateAfter, r#"{"name": "b", "id": 3}"#),
                (Delete, r#"{"name": "c"}"#),
                (Insert, r#"{"name": "c", "id": 4}"#),
            ],
        );
        assert!(!merged.truncated());
        assert_eq!(merged.deleted_keys(), b"a\nc\n");
        merged.drain_into(&mut groups, &mut row);
        assert_eq!(lines(&mut groups), ["3\tb\n4\tc\n"]);
        assert!(merged.is_empty());

        let mut groups = Groups::default();
        push_all(
            &mut merged,
            &[
                (Insert, r#"{"name": "a", "id": 1}"#),
                (Delete, r#"{"name": "b"}"#),
                (Truncate, r#"{}"#),
                (Insert, r#"{"name": "d", "id": 5}"#),
            ],
        );
        assert!(merged.truncated() && !merged.is_empty());
        assert_eq!(merged.deleted_keys(), b"");
        merged.drain_into(&mut groups, &mut row);
        assert_eq!(lines(&mut groups), ["5\td\n"]);
        assert!(!merged.truncated());
    }
}
