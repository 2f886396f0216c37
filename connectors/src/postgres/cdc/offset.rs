//! The source's checkpointed offset, as JSON:
//! `{"tables", "lsn", "skip", "snapshot", "reads", "end"}` (module
//! `reader` says what each means for exactly-once).
//!
//! - `tables`: the tables read, as SQL names, in port order: a restore
//!   refuses another list, whose ports and read points would not match.
//! - `lsn`: a position (`16/B374D848`); `skip`: per port, a count.
//! - `snapshot`: `null`, or `{"table", "after", "time"}`: the table being
//!   read (a port), the key texts of its last row returned (`null`: none
//!   yet) and the snapshot's time in milliseconds.
//! - `reads`: `[{"table", "after", "lsn"}]`, [`ReadPoint`]s.
//! - `end`: `null` or a position.
//!
//! Offsets of single-table sources before ports (no `tables`, a number as
//! `skip`, no `table` in `snapshot` and `reads`) read as port 0's.

use serde_json::{Value, json};

use super::setup::{parse_lsn, show_lsn};

/// The rows of table `table` (a port) after key `after` (all: `None`) were
/// read under a snapshot at stream position `lsn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReadPoint {
    pub(super) table: usize,
    pub(super) after: Option<Vec<String>>,
    pub(super) lsn: u64,
}

/// Where the snapshot stands: table `table`, after key `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SnapshotAt {
    pub(super) table: usize,
    pub(super) after: Option<Vec<String>>,
    /// The time of the snapshot's rows, milliseconds since the Unix epoch.
    pub(super) time: i64,
}

/// An offset of the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Offset {
    /// `None` in offsets written before sources had several tables.
    pub(super) tables: Option<Vec<String>>,
    pub(super) lsn: u64,
    pub(super) skip: Vec<u64>,
    pub(super) snapshot: Option<SnapshotAt>,
    pub(super) reads: Vec<ReadPoint>,
    pub(super) end: Option<u64>,
}

fn keys_json(after: &Option<Vec<String>>) -> Value {
    json!(after)
}

impl Offset {
    /// The offset as the checkpoint stores it.
    pub(super) fn to_json(&self) -> Value {
        let reads: Vec<Value> = (self.reads.iter())
            .map(
                |p| json!({"table": p.table, "after": keys_json(&p.after), "lsn": show_lsn(p.lsn)}),
            )
            .collect();
        let snapshot = (self.snapshot.as_ref())
            .map(|s| json!({"table": s.table, "after": keys_json(&s.after), "time": s.time}));
        json!({
            "tables": self.tables,
            "lsn": show_lsn(self.lsn),
            "skip": self.skip,
            "snapshot": snapshot,
            "reads": reads,
            "end": self.end.map(show_lsn),
        })
    }

    /// Reads an offset [`to_json`](Self::to_json) wrote.
    pub(super) fn read(offset: &Value) -> Result<Offset, String> {
        let bad = || "not an offset of a postgres-cdc source".to_owned();
        let lsn = |v: &Value| parse_lsn(v.as_str().ok_or_else(bad)?);
        let keys = |v: &Value| -> Result<Option<Vec<String>>, String> {
            match v {
                Value::Null => Ok(None),
                v => serde_json::from_value(v.clone())
                    .map(Some)
                    .map_err(|_| bad()),
            }
        };
        let table = |v: &Value| -> Result<usize, String> {
            match v {
                Value::Null => Ok(0),
                v => (v.as_u64().and_then(|t| usize::try_from(t).ok())).ok_or_else(bad),
            }
        };
        let tables = match &offset["tables"] {
            Value::Null => None,
            v => Some(serde_json::from_value(v.clone()).map_err(|_| bad())?),
        };
        let skip = match &offset["skip"] {
            Value::Number(n) => vec![n.as_u64().ok_or_else(bad)?],
            v => serde_json::from_value(v.clone()).map_err(|_| bad())?,
        };
        let snapshot = match &offset["snapshot"] {
            Value::Null => None,
            s => Some(SnapshotAt {
                table: table(&s["table"])?,
                after: keys(&s["after"])?,
                time: s["time"].as_i64().ok_or_else(bad)?,
            }),
        };
        let reads = (offset["reads"].as_array().ok_or_else(bad)?.iter())
            .map(|p| {
                Ok(ReadPoint {
                    table: table(&p["table"])?,
                    after: keys(&p["after"])?,
                    lsn: lsn(&p["lsn"])?,
                })
            })
            .collect::<Result<_, String>>()?;
        let end = match &offset["end"] {
            Value::Null => None,
            end => Some(lsn(end)?),
        };
        Ok(Offset {
            tables,
            lsn: lsn(&offset["lsn"])?,
            skip,
            snapshot,
            reads,
            end,
        })
    }

    /// Refuses an offset of other tables than `tables` (SQL names, in port
    /// order), or with more ports than they have.
    pub(super) fn check_tables(&self, tables: &[String]) -> Result<(), String> {
        let ports = tables.len();
        let beyond = self.skip.len() > ports
            || (self.reads.iter()).any(|p| p.table >= ports)
            || self.snapshot.as_ref().is_some_and(|s| s.table >= ports);
        match &self.tables {
            Some(read) if read != tables => Err(format!(
                "the checkpoint was taken reading tables {}, the source now reads {}; a source's tables cannot change across a restore \
                 (put the table in a source of its own, or rerun with `--restore none` for a fresh snapshot of them all)",
                read.join(", "),
                tables.join(", ")
            )),
            None if ports > 1 => Err(format!(
                "the checkpoint was taken reading one table, the source now reads {}; a source's tables cannot change across a restore \
                 (put the others in a source of their own, or rerun with `--restore none`)",
                tables.join(", ")
            )),
            _ if beyond => Err("it names more tables than the source reads".into()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_and_single_table_offsets_read_as_port_0() {
        let offset = Offset {
            tables: Some(vec!["\"public\".\"a\"".into(), "\"s\".\"b\"".into()]),
            lsn: 0x16_B374_D848,
            skip: vec![3, 0],
            snapshot: Some(SnapshotAt {
                table: 1,
                after: Some(vec!["7".into(), "x".into()]),
                time: 1_700_000_000_000,
            }),
            reads: vec![
                ReadPoint {
                    table: 0,
                    after: None,
                    lsn: 10,
                },
                ReadPoint {
                    table: 1,
                    after: Some(vec!["7".into(), "x".into()]),
                    lsn: 20,
                },
            ],
            end: Some(30),
        };
        assert_eq!(Offset::read(&offset.to_json()), Ok(offset.clone()));
        let tables = offset.tables.clone().unwrap();
        assert_eq!(offset.check_tables(&tables), Ok(()));
        let err = offset.check_tables(&tables[..1]).unwrap_err();
        assert!(err.contains("cannot change across a restore"), "{err}");

        let old = json!({
            "lsn": "0/10", "skip": 2,
            "snapshot": {"after": ["5"], "time": 9},
            "reads": [{"after": null, "lsn": "0/8"}],
            "end": null,
        });
        let old = Offset::read(&old).unwrap();
        assert_eq!(
            (old.tables.clone(), old.lsn, old.skip.clone()),
            (None, 16, vec![2])
        );
        assert_eq!(
            old.snapshot,
            Some(SnapshotAt {
                table: 0,
                after: Some(vec!["5".into()]),
                time: 9
            })
        );
        assert_eq!(old.reads[0].table, 0);
        assert_eq!(old.check_tables(&["\"public\".\"a\"".into()]), Ok(()));
        let err = (old.check_tables(&["a".into(), "b".into()])).unwrap_err();
        assert!(err.contains("reading one table"), "{err}");
        for bad in [
            json!({}),
            json!({"lsn": "x", "skip": 0, "reads": []}),
            json!({"lsn": "0/1", "skip": "no", "reads": []}),
            json!({"lsn": "0/1", "skip": [0], "reads": [{"table": -1, "lsn": "0/1"}]}),
        ] {
            assert!(Offset::read(&bad).is_err(), "{bad}");
        }
    }
}
