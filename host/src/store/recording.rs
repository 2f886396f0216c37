//! The `recordings` table: per (operator, instance, checkpoint), the
//! instance's recorded input of the epoch that checkpoint ends, encoded as
//! in [`crate::dataflow::recording`].
//!
//! Invariants:
//! - A row is the whole epoch: the calls since the instance's snapshot in
//!   the checkpoint before it in this store (or since its start, for the
//!   first checkpoint). A commit whose deltas for an instance lack a
//!   recording (an epoch that outgrew `record_max_bytes`) writes no row
//!   for it.
//! - Every commit keeps, per operator, only the recordings its
//!   [`RecordInputs`] in the new checkpoint's metadata allows (none for an
//!   operator that no longer records), and garbage collection keeps the
//!   checkpoint each kept recording starts from (`gc.rs`).
//! - The table may be missing in a store written before recordings; it
//!   then reads as empty, and is created when the store is opened
//!   read-write (`file.rs`).

use std::collections::{BTreeMap, BTreeSet};

use redb::{ReadableTable, TableError, WriteTransaction};

use super::error::{Fail, StoreError};
use super::file::CheckpointStore;
use super::layout::{CHECKPOINTS, RECORDINGS};
use super::meta::CheckpointMeta;
use crate::config::{Keep, RecordInputs};
use crate::dataflow::protocol::InstanceDelta;
use crate::dataflow::recording::{Step, decode};

type Rows<'t> = redb::Table<'t, (&'static str, u32, u64), &'static [u8]>;
type ReadOnlyRows = redb::ReadOnlyTable<(&'static str, u32, u64), &'static [u8]>;

/// What the store holds of one recorded epoch of an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEpoch {
    /// The checkpoint that ends the epoch.
    pub checkpoint: u64,
    /// The instances with a recording of it.
    pub instances: Vec<u32>,
    /// Bytes of those recordings.
    pub bytes: u64,
}

impl CheckpointStore {
    /// Writes the recordings of `deltas` as checkpoint `n`'s (the
    /// recordings of several deltas of one instance one after the other,
    /// and none when one of them has none); returns the bytes written.
    pub(super) fn write_recordings(
        &self,
        txn: &WriteTransaction,
        n: u64,
        deltas: &[InstanceDelta],
    ) -> Result<u64, Fail> {
        let mut rows: BTreeMap<(&str, u32), Option<Vec<u8>>> = BTreeMap::new();
        for d in deltas {
            let row = rows
                .entry((d.operator.as_str(), d.instance))
                .or_insert_with(|| Some(Vec::new()));
            match (row.as_mut(), d.recorded.as_deref()) {
                (Some(row), Some(recorded)) => row.extend_from_slice(recorded),
                // An instance whose epoch is not whole, or whose operator
                // does not record.
                _ => *row = None,
            }
        }
        let mut table: Rows = txn.open_table(RECORDINGS)?;
        let mut bytes = 0;
        for ((op, inst), row) in rows {
            if let Some(row) = row {
                table.insert((op, inst, n), &*self.seal(&row))?;
                bytes += row.len() as u64;
            }
        }
        Ok(bytes)
    }

    /// Drops the recordings that checkpoint `meta`'s operators no longer
    /// keep: per operator the newest epochs its [`RecordInputs`] allows
    /// (by count, or by the start time of their checkpoints against
    /// `meta`'s, and at most its bytes), every epoch of an operator
    /// without one.
    pub(super) fn collect_recordings(
        &self,
        txn: &WriteTransaction,
        meta: &CheckpointMeta,
    ) -> Result<(), Fail> {
        let mut table: Rows = txn.open_table(RECORDINGS)?;
        // (operator, checkpoint) -> bytes, over all instances.
        let mut epochs: BTreeMap<(String, u64), u64> = BTreeMap::new();
        for row in table.iter()? {
            let (key, value) = row?;
            let (op, _, id) = key.value();
            *epochs.entry((op.to_string(), id)).or_default() += value.value().len() as u64;
        }
        let checkpoints = txn.open_table(CHECKPOINTS)?;
        let started = |id: u64| -> Result<Option<u64>, Fail> {
            if id == meta.id {
                return Ok(Some(meta.started_at_ms));
            }
            match checkpoints.get(id)? {
                Some(raw) => Ok(Some(self.decode_meta(id, raw.value())?.started_at_ms)),
                None => Ok(None),
            }
        };
        let mut drop: BTreeSet<(String, u64)> = BTreeSet::new();
        let mut kept: BTreeMap<&str, (u32, u64)> = BTreeMap::new();
        for ((op, id), bytes) in epochs.iter().rev() {
            let bound = meta.operators.get(op).and_then(|o| o.recording);
            let (count, total) = kept.entry(op.as_str()).or_default();
            let keep = match bound {
                None => false,
                Some(RecordInputs { keep, max_bytes }) => {
                    let within = match keep {
                        Keep::Checkpoints(n) => *count < n,
                        Keep::Millis(ms) => started(*id)?
                            .is_some_and(|t| t.saturating_add(ms) >= meta.started_at_ms),
                    };
                    within && *total + bytes <= max_bytes
                }
            };
            match keep {
                true => {
                    *count += 1;
                    *total += bytes;
                }
                false => {
                    drop.insert((op.clone(), *id));
                }
            }
        }
        table.retain(|(op, _, id), _| !drop.contains(&(op.to_string(), id)))?;
        Ok(())
    }

    /// The oldest checkpoint a recording ends, if any.
    pub(super) fn oldest_recording(&self, txn: &WriteTransaction) -> Result<Option<u64>, Fail> {
        let table: Rows = txn.open_table(RECORDINGS)?;
        let mut oldest: Option<u64> = None;
        for row in table.iter()? {
            let id = row?.0.value().2;
            oldest = Some(oldest.map_or(id, |o| o.min(id)));
        }
        Ok(oldest)
    }

    /// Drops the rows of checkpoints newer than `id`.
    pub(super) fn truncate_recordings(&self, txn: &WriteTransaction, id: u64) -> Result<(), Fail> {
        let mut table: Rows = txn.open_table(RECORDINGS)?;
        table.retain(|k, _| k.2 <= id)?;
        Ok(())
    }

    /// The `recordings` table, `None` in a store written before it.
    pub(super) fn recordings_table(
        &self,
        txn: &redb::ReadTransaction,
    ) -> Result<Option<ReadOnlyRows>, Fail> {
        match txn.open_table(RECORDINGS) {
            Ok(table) => Ok(Some(table)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The recorded epochs of `operator`, oldest first.
    pub fn recorded_epochs(&self, operator: &str) -> Result<Vec<RecordedEpoch>, StoreError> {
        self.in_context("listing recordings", || {
            let txn = self.read()?;
            let Some(table) = self.recordings_table(&txn)? else {
                return Ok(Vec::new());
            };
            let mut epochs: BTreeMap<u64, RecordedEpoch> = BTreeMap::new();
            for row in table.range((operator, 0, 0)..=(operator, u32::MAX, u64::MAX))? {
                let (key, value) = row?;
                let (_, inst, id) = key.value();
                let e = epochs.entry(id).or_insert_with(|| RecordedEpoch {
                    checkpoint: id,
                    instances: Vec::new(),
                    bytes: 0,
                });
                e.instances.push(inst);
                e.bytes += value.value().len() as u64;
            }
            Ok(epochs.into_values().collect())
        })
    }

    /// The recording of instance `instance` of `operator` of the epoch
    /// checkpoint `id` ends; `None` when the store has none.
    pub fn recording(
        &self,
        id: u64,
        operator: &str,
        instance: u32,
    ) -> Result<Option<Vec<Step>>, StoreError> {
        self.in_context("loading a recording", || {
            let txn = self.read()?;
            let Some(table) = self.recordings_table(&txn)? else {
                return Ok(None);
            };
            let Some(raw) = table.get((operator, instance, id))? else {
                return Ok(None);
            };
            let damaged = |what: &str| {
                self.corrupt(format!(
                    "the recording of instance {instance} of operator `{operator}` in checkpoint {id} is unreadable: {what}"
                ))
            };
            let raw = self.unseal(raw.value()).map_err(|d| damaged(&d.to_string()))?;
            Ok(Some(decode(raw).map_err(|e| damaged(&e.to_string()))?))
        })
    }
}
