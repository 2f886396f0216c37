//! The `recordings` table: per (operator, instance, checkpoint), the
//! instance's recorded input of the epoch that checkpoint ends, encoded as
//! in [`crate::dataflow::recording`]; and its index, `recorded`: per
//! (operator, checkpoint), the epoch's bytes, the checkpoint's start time
//! and the instances with a row, so that bounding, listing, truncating and
//! packing recordings never read the recordings themselves.
//!
//! Invariants:
//! - A row is the whole epoch: the calls since the instance's snapshot in
//!   the checkpoint before it in this store (or since its start, for the
//!   first checkpoint). A commit whose deltas for an instance lack a
//!   recording (an epoch that outgrew `record_max_bytes`) writes no row
//!   for it.
//! - `recorded` has a row for (operator, checkpoint) exactly when
//!   `recordings` has rows for it, naming their instances and bytes.
//! - Every commit keeps, per operator, only the recordings its
//!   [`RecordInputs`] in the new checkpoint's metadata allows (none for an
//!   operator that no longer records), and garbage collection keeps the
//!   checkpoint each kept recording starts from (`gc.rs`).
//! - A row is one zstd frame of the recording (or, written before rows
//!   were compressed, the recording itself); `recorded` counts the bytes
//!   stored.
//! - The tables may be missing in a store written before recordings; they
//!   then read as empty, and are created when the store is opened
//!   read-write (`file.rs`).

use std::collections::BTreeMap;

use redb::{ReadTransaction, ReadableTable, TableError, WriteTransaction};

use super::error::{Fail, StoreError};
use super::file::CheckpointStore;
use super::layout::{RECORDED, RECORDINGS};
use super::meta::CheckpointMeta;
use crate::config::{Keep, RecordInputs};
use crate::dataflow::protocol::InstanceDelta;
use crate::dataflow::recording::{Step, decode};

type Rows<'t> = redb::Table<'t, (&'static str, u32, u64), &'static [u8]>;
type ReadOnlyRows = redb::ReadOnlyTable<(&'static str, u32, u64), &'static [u8]>;
type Index<'t> = redb::Table<'t, (&'static str, u64), &'static [u8]>;
type ReadOnlyIndex = redb::ReadOnlyTable<(&'static str, u64), &'static [u8]>;

/// What the store holds of one recorded epoch of an operator (a row of
/// `recorded`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEpoch {
    /// The checkpoint that ends the epoch.
    pub checkpoint: u64,
    /// The instances with a recording of it.
    pub instances: Vec<u32>,
    /// Bytes of those recordings.
    pub bytes: u64,
    /// When its checkpoint started (Unix ms).
    pub started_at_ms: u64,
}

impl RecordedEpoch {
    /// Its row in `recorded`: the bytes and start time (`u64` each), then
    /// each instance (`u32`), little-endian.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 4 * self.instances.len());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        out.extend_from_slice(&self.started_at_ms.to_le_bytes());
        for i in &self.instances {
            out.extend_from_slice(&i.to_le_bytes());
        }
        out
    }

    /// The epoch of `checkpoint` its row `raw` describes.
    fn decode(checkpoint: u64, raw: &[u8]) -> Option<RecordedEpoch> {
        let (head, instances) = raw.split_at_checked(16)?;
        if !instances.len().is_multiple_of(4) {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        let instances = instances.chunks_exact(4);
        Some(RecordedEpoch {
            checkpoint,
            bytes: word(0),
            started_at_ms: word(8),
            instances: instances
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
        })
    }
}

impl CheckpointStore {
    /// Writes the recordings of `deltas` as checkpoint `meta`'s (the
    /// recordings of several deltas of one instance one after the other,
    /// and none when one of them has none), compressed, with their index
    /// rows; returns the bytes written.
    pub(super) fn write_recordings(
        &self,
        txn: &WriteTransaction,
        meta: &CheckpointMeta,
        deltas: &[InstanceDelta],
    ) -> Result<u64, Fail> {
        if deltas.iter().all(|d| d.recorded.is_none()) {
            return Ok(0); // no operator records
        }
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
        let stored = (rows.into_iter())
            .filter_map(|((op, inst), row)| Some((op, inst, compress(&row?))))
            .collect();
        self.insert_recordings(txn, meta, stored)
    }

    /// Inserts the recordings `rows` (operator, instance, the row as
    /// stored) of checkpoint `meta` and their index rows; returns their
    /// bytes.
    fn insert_recordings<B: AsRef<[u8]>>(
        &self,
        txn: &WriteTransaction,
        meta: &CheckpointMeta,
        rows: Vec<(&str, u32, B)>,
    ) -> Result<u64, Fail> {
        let mut table: Rows = txn.open_table(RECORDINGS)?;
        let mut epochs: BTreeMap<&str, RecordedEpoch> = BTreeMap::new();
        for (op, inst, row) in rows {
            let row = row.as_ref();
            table.insert((op, inst, meta.id), &*self.seal(row))?;
            let e = epochs.entry(op).or_insert_with(|| RecordedEpoch {
                checkpoint: meta.id,
                instances: Vec::new(),
                bytes: 0,
                started_at_ms: meta.started_at_ms,
            });
            e.instances.push(inst);
            e.bytes += row.len() as u64;
        }
        let mut index: Index = txn.open_table(RECORDED)?;
        let mut bytes = 0;
        for (op, e) in epochs {
            index.insert((op, meta.id), &*self.seal(&e.encode()))?;
            bytes += e.bytes;
        }
        Ok(bytes)
    }

    /// Every row of `recorded`, by operator, oldest first.
    pub(super) fn epochs_in(
        &self,
        index: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    ) -> Result<BTreeMap<String, Vec<RecordedEpoch>>, Fail> {
        let mut out: BTreeMap<String, Vec<RecordedEpoch>> = BTreeMap::new();
        for row in index.iter()? {
            let (key, raw) = row?;
            let (op, id) = key.value();
            let damaged = || {
                self.corrupt(format!(
                    "the index of the recordings of operator `{op}` in checkpoint {id} is unreadable"
                ))
            };
            let raw = self.unseal(raw.value()).map_err(|_| damaged())?;
            let e = RecordedEpoch::decode(id, raw).ok_or_else(damaged)?;
            out.entry(op.to_string()).or_default().push(e);
        }
        Ok(out)
    }

    /// Drops the recordings of `op`'s epoch of checkpoint `e`, and its row
    /// of `recorded`.
    fn drop_epoch(
        &self,
        rows: &mut Rows,
        index: &mut Index,
        op: &str,
        e: &RecordedEpoch,
    ) -> Result<(), Fail> {
        for &inst in &e.instances {
            rows.remove((op, inst, e.checkpoint))?;
        }
        index.remove((op, e.checkpoint))?;
        Ok(())
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
        let mut index: Index = txn.open_table(RECORDED)?;
        let mut rows: Rows = txn.open_table(RECORDINGS)?;
        for (op, epochs) in self.epochs_in(&index)? {
            let bound = meta.operators.get(&op).and_then(|o| o.recording);
            let (mut count, mut total) = (0u32, 0u64);
            for e in epochs.iter().rev() {
                let keep = match bound {
                    None => false,
                    Some(RecordInputs { keep, max_bytes }) => {
                        let within = match keep {
                            Keep::Checkpoints(n) => count < n,
                            Keep::Millis(ms) => {
                                e.started_at_ms.saturating_add(ms) >= meta.started_at_ms
                            }
                        };
                        within && total + e.bytes <= max_bytes
                    }
                };
                match keep {
                    true => {
                        count += 1;
                        total += e.bytes;
                    }
                    false => self.drop_epoch(&mut rows, &mut index, &op, e)?,
                }
            }
        }
        Ok(())
    }

    /// The oldest checkpoint a recording ends, if any.
    pub(super) fn oldest_recording(&self, txn: &WriteTransaction) -> Result<Option<u64>, Fail> {
        let index: Index = txn.open_table(RECORDED)?;
        let epochs = self.epochs_in(&index)?;
        Ok(epochs
            .values()
            .filter_map(|e| e.first())
            .map(|e| e.checkpoint)
            .min())
    }

    /// Drops the recordings of checkpoints newer than `id`.
    pub(super) fn truncate_recordings(&self, txn: &WriteTransaction, id: u64) -> Result<(), Fail> {
        let mut index: Index = txn.open_table(RECORDED)?;
        let mut rows: Rows = txn.open_table(RECORDINGS)?;
        for (op, epochs) in self.epochs_in(&index)? {
            for e in epochs.iter().filter(|e| e.checkpoint > id) {
                self.drop_epoch(&mut rows, &mut index, &op, e)?;
            }
        }
        Ok(())
    }

    /// The `recordings` table and its index, `None` in a store written
    /// before them.
    pub(super) fn recordings_tables(
        &self,
        txn: &ReadTransaction,
    ) -> Result<Option<(ReadOnlyRows, ReadOnlyIndex)>, Fail> {
        let open = || Ok::<_, TableError>((txn.open_table(RECORDINGS)?, txn.open_table(RECORDED)?));
        match open() {
            Ok(tables) => Ok(Some(tables)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The recordings of checkpoint `version`: `(operator, instance, the
    /// recording unsealed)` (a pack's rows).
    pub(super) fn recordings_of(
        &self,
        txn: &ReadTransaction,
        version: u64,
    ) -> Result<Vec<(String, u32, Vec<u8>)>, Fail> {
        let Some((rows, index)) = self.recordings_tables(txn)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (op, epochs) in self.epochs_in(&index)? {
            for e in epochs.iter().filter(|e| e.checkpoint == version) {
                for &inst in &e.instances {
                    let key = (op.as_str(), inst, version);
                    if let Some(raw) = rows.get(key)? {
                        out.push((
                            op.clone(),
                            inst,
                            self.unsealed_recording(raw.value(), key)?.to_vec(),
                        ));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Writes the recordings of checkpoint `meta` a pack holds (as stored),
    /// with their index rows (a store rebuilt from packs).
    pub(super) fn import_recordings(
        &self,
        txn: &WriteTransaction,
        meta: &CheckpointMeta,
        recordings: &[(&str, u32, &[u8])],
    ) -> Result<(), Fail> {
        self.insert_recordings(txn, meta, recordings.to_vec())
            .map(drop)
    }

    /// The recorded epochs of `operator`, oldest first.
    pub fn recorded_epochs(&self, operator: &str) -> Result<Vec<RecordedEpoch>, StoreError> {
        self.in_context("listing recordings", || {
            let txn = self.read()?;
            let Some((_, index)) = self.recordings_tables(&txn)? else {
                return Ok(Vec::new());
            };
            Ok(self.epochs_in(&index)?.remove(operator).unwrap_or_default())
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
            let Some((rows, _)) = self.recordings_tables(&txn)? else {
                return Ok(None);
            };
            let key = (operator, instance, id);
            let Some(raw) = rows.get(key)? else {
                return Ok(None);
            };
            let stored = self.unsealed_recording(raw.value(), key)?;
            let raw = expand(stored).map_err(|e| self.damaged_recording(key, &e))?;
            let steps = decode(&raw).map_err(|e| self.damaged_recording(key, &e.to_string()))?;
            Ok(Some(steps))
        })
    }

    fn unsealed_recording<'r>(
        &self,
        raw: &'r [u8],
        key: (&str, u32, u64),
    ) -> Result<&'r [u8], StoreError> {
        self.unseal(raw)
            .map_err(|d| self.damaged_recording(key, &d.to_string()))
    }

    fn damaged_recording(&self, (op, inst, id): (&str, u32, u64), what: &str) -> StoreError {
        self.corrupt(format!(
            "the recording of instance {inst} of operator `{op}` in checkpoint {id} is unreadable: {what}"
        ))
    }
}

/// zstd's level for recordings: its fastest positive one. A recording is
/// frames of JSON text or rows, which shrink several times, so the
/// compression costs less than the bytes it spares the commit.
const ZSTD_LEVEL: i32 = 1;

/// The first bytes of a zstd frame; a recording's first byte is a step's
/// tag (1 to 5), so a row that does not start with them is a recording
/// stored as it is (written before rows were compressed).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// A recording as stored: one zstd frame.
fn compress(raw: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(raw, ZSTD_LEVEL).expect("compressing into memory")
}

/// The recording a stored row holds.
fn expand(stored: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    if !stored.starts_with(&ZSTD_MAGIC) {
        return Ok(stored.into());
    }
    zstd::stream::decode_all(stored)
        .map(Into::into)
        .map_err(|e| format!("not a whole zstd frame: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataflow::recording::Recorder;

    /// A compressed row expands to its recording; a row stored as it is
    /// (before compression) reads as it is; a damaged frame is refused.
    #[test]
    fn rows_expand_to_their_recording_compressed_or_not() {
        let mut r = Recorder::default();
        for id in 1..=200 {
            r.checkpoint(id, id as u64);
        }
        let raw = r.take();
        let stored = compress(&raw);
        assert!(
            stored.len() * 3 < raw.len(),
            "{} of {}",
            stored.len(),
            raw.len()
        );
        assert_eq!(expand(&stored).unwrap(), raw);
        assert_eq!(expand(&raw).unwrap(), raw);
        let cut = &stored[..stored.len() - 3];
        assert!(expand(cut).unwrap_err().contains("not a whole zstd frame"));
    }
}
