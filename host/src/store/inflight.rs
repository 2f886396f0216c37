//! The `inflight` table: per (operator, instance, checkpoint), the
//! instance's in-flight data of an unaligned checkpoint, encoded as in
//! [`crate::dataflow::inflight`]. Unlike state, in-flight data is not
//! incremental: a row is read only when restoring exactly its checkpoint,
//! so garbage collection drops the rows of checkpoints no longer retained
//! and truncation those of deleted checkpoints.
//!
//! Invariant: the table may be missing in a store written before
//! unaligned checkpoints (format 2 still); it then reads as empty, and is
//! created when the store is opened read-write (`file.rs`).

use redb::{ReadOnlyTable, ReadTransaction, ReadableTable, Table, TableError, WriteTransaction};

use super::error::{Fail, StoreError};
use super::file::CheckpointStore;
use super::layout::INFLIGHT;
use crate::dataflow::Batch;
use crate::dataflow::inflight::decode;
use crate::dataflow::protocol::InstanceDelta;

/// The in-flight data of one instance: `(input port, batch)` in the order
/// it received them.
pub type InFlightFrames = Vec<(u32, Batch)>;

pub(super) type Rows<'t> = Table<'t, (&'static str, u32, u64), &'static [u8]>;
/// The `inflight` table, read.
pub(super) type ReadOnlyRows = ReadOnlyTable<(&'static str, u32, u64), &'static [u8]>;

impl CheckpointStore {
    /// Writes the in-flight data of `deltas` as checkpoint `n`'s (the
    /// frames of several deltas of one instance concatenated in slice
    /// order); returns the bytes written.
    pub(super) fn write_inflight(
        &self,
        txn: &WriteTransaction,
        n: u64,
        deltas: &[InstanceDelta],
    ) -> Result<u64, Fail> {
        let mut table: Rows = txn.open_table(INFLIGHT)?;
        let mut bytes = 0;
        for d in deltas {
            let Some(data) = d.inflight.as_deref().filter(|b| !b.is_empty()) else {
                continue;
            };
            let key = (d.operator.as_str(), d.instance, n);
            // Several deltas of one instance: their frames in slice order.
            let mut row = match table.get(key)? {
                Some(v) => self.unsealed_inflight(v.value(), &key)?.to_vec(),
                None => Vec::new(),
            };
            row.extend_from_slice(data);
            table.insert(key, &*self.seal(&row))?;
            bytes += data.len() as u64;
        }
        Ok(bytes)
    }

    /// The in-flight data of `operator`'s instance `instance` in checkpoint
    /// `id` (empty when it took `id` aligned, or had none).
    pub(super) fn load_inflight(
        &self,
        txn: &ReadTransaction,
        id: u64,
        operator: &str,
        instance: u32,
    ) -> Result<InFlightFrames, Fail> {
        let Some(table) = self.inflight_table(txn)? else {
            return Ok(Vec::new());
        };
        let Some(raw) = table.get((operator, instance, id))? else {
            return Ok(Vec::new());
        };
        let key = (operator, instance, id);
        decode(self.unsealed_inflight(raw.value(), &key)?)
            .map_err(|e| self.damaged_inflight(&key, &e.to_string()).into())
    }

    /// The `inflight` table, `None` in a store written before it.
    pub(super) fn inflight_table(
        &self,
        txn: &ReadTransaction,
    ) -> Result<Option<ReadOnlyRows>, Fail> {
        match txn.open_table(INFLIGHT) {
            Ok(table) => Ok(Some(table)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The in-flight row `raw` of `key`, its checksum checked.
    pub(super) fn unsealed_inflight<'r>(
        &self,
        raw: &'r [u8],
        key: &(&str, u32, u64),
    ) -> Result<&'r [u8], StoreError> {
        self.unseal(raw)
            .map_err(|d| self.damaged_inflight(key, &d.to_string()))
    }

    fn damaged_inflight(&self, &(op, inst, id): &(&str, u32, u64), what: &str) -> StoreError {
        self.corrupt(format!(
            "the in-flight data of instance {inst} of operator `{op}` in checkpoint {id} is unreadable: {what}"
        ))
    }

    /// The in-flight data of every instance of `operator` in checkpoint
    /// `id`, by instance (instances without any are left out): what a
    /// rescale re-partitions by key.
    pub fn operator_inflight(
        &self,
        id: u64,
        operator: &str,
    ) -> Result<Vec<(u32, InFlightFrames)>, StoreError> {
        self.in_context("loading in-flight data", || {
            let txn = self.read()?;
            let Some(table) = self.inflight_table(&txn)? else {
                return Ok(Vec::new());
            };
            let mut instances = Vec::new();
            for row in table.range((operator, 0, 0)..=(operator, u32::MAX, u64::MAX))? {
                let (instance, version) = {
                    let key = row?.0;
                    (key.value().1, key.value().2)
                };
                if version == id {
                    instances.push(instance);
                }
            }
            let mut out = Vec::new();
            for instance in instances {
                out.push((instance, self.load_inflight(&txn, id, operator, instance)?));
            }
            Ok(out)
        })
    }

    /// Drops the rows of checkpoints older than `horizon`, the oldest
    /// retained one.
    pub(super) fn collect_inflight(
        &self,
        txn: &WriteTransaction,
        horizon: u64,
    ) -> Result<(), Fail> {
        let mut table: Rows = txn.open_table(INFLIGHT)?;
        table.retain(|k, _| k.2 >= horizon)?;
        Ok(())
    }

    /// Drops the rows of checkpoints newer than `id`.
    pub(super) fn truncate_inflight(&self, txn: &WriteTransaction, id: u64) -> Result<(), Fail> {
        let mut table: Rows = txn.open_table(INFLIGHT)?;
        table.retain(|k, _| k.2 <= id)?;
        Ok(())
    }
}
