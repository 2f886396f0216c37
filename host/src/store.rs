//! The checkpoint store: one redb file per state directory holding the
//! complete checkpoints of one job, with incremental keyed state. Each
//! checkpoint stores, per instance that changed, one segment: a sorted run
//! of its changes (a delta) or, now and then, its whole state (a full
//! segment). Layout, compaction and garbage collection:
//! `docs/checkpoints.md`.
//!
//! Invariant (atomic checkpoints): a checkpoint is complete iff its row in
//! `checkpoints` exists. [`CheckpointStore::commit`] writes the row with the
//! checkpoint's state, and runs the garbage collection, in one durable write
//! transaction, so a checkpoint is never half-visible, and a crash at any
//! moment leaves the last complete checkpoint restorable.
//!
//! This module commits and reads checkpoints. Below it, from the bottom up:
//! `layout` (file name, format version, tables), `meta` (the checkpoint
//! metadata), `error`, `tuning`, `segment` (the encoding of a segment),
//! `file` (the open store: opening, transactions), `chain` (one instance's
//! segments), `gc` (garbage collection, truncation), `rescale` (derived
//! checkpoints: state redistributed by key group) and `savepoint` (a
//! checkpoint as a self-contained directory).

mod chain;
mod error;
mod file;
mod gc;
mod inflight;
mod layout;
mod meta;
mod pack;
mod recording;
mod rescale;
mod savepoint;
mod seal;
mod segment;
mod tuning;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use redb::{ReadTransaction, ReadableTable, WriteTransaction};

use chain::Tables;
use error::{Fail, invalid};
use layout::{CHECKPOINTS, CHUNKS, GC, SEGMENTS, SNAPSHOTS};

pub use error::StoreError;
pub use file::CheckpointStore;
pub use inflight::InFlightFrames;
pub use layout::{FILE_NAME, FORMAT_VERSION};
pub use meta::{CheckpointMeta, Derivation, OperatorMeta, SwappedPlugin};
pub use pack::{Catalog, Pack};
pub use recording::RecordedEpoch;
pub use rescale::Move;
pub use savepoint::{MANIFEST, Manifest, SAVEPOINT_FORMAT, Savepoint};

pub use crate::dataflow::protocol::InstanceDelta;

/// Outcome of [`CheckpointStore::commit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    /// Bytes of keys, values and snapshots written.
    pub bytes_written: u64,
    /// Time spent in the store, including the durable commit.
    pub duration: Duration,
}

/// State of one instance as of a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoredInstance {
    /// Live entries, sorted by key.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Snapshot bytes; empty if never written.
    pub snapshot: Vec<u8>,
    /// Timer entries (see [`crate::keyed::timers`]), sorted by key.
    pub timers: Vec<(Vec<u8>, Vec<u8>)>,
    /// In-flight data of the checkpoint, if it took it unaligned: replayed
    /// to the instance before any new input.
    pub inflight: InFlightFrames,
}

/// The name under which the store keeps the timers of operator `operator`,
/// as if they were the keyed state of another operator: no operator id
/// holds a `#`, so it never clashes with one.
pub fn timer_space(operator: &str) -> String {
    format!("{operator}#timers")
}

/// One live entry of an operator: `(instance, key, value)`.
pub type OperatorEntry = (u32, Vec<u8>, Vec<u8>);

impl CheckpointStore {
    fn decode_meta(&self, id: u64, raw: &[u8]) -> Result<CheckpointMeta, StoreError> {
        let raw = self
            .unseal(raw)
            .map_err(|d| self.corrupt(format!("metadata of checkpoint {id} is unreadable: {d}")))?;
        let meta: CheckpointMeta = serde_json::from_slice(raw)
            .map_err(|e| self.corrupt(format!("metadata of checkpoint {id} is unreadable: {e}")))?;
        if meta.id != id {
            return Err(self.corrupt(format!("checkpoint row {id} holds checkpoint {}", meta.id)));
        }
        Ok(meta)
    }

    /// Writes checkpoint `meta.id` (greater than every existing id) with
    /// `deltas` applied in slice order (a later delta for the same
    /// operator/instance/key wins), then garbage-collects so that only the
    /// newest `retain` checkpoints stay restorable (and those the kept
    /// recordings start from, `store/recording.rs`), all in one durable
    /// transaction. Stores `bytes_written` and `state_keys` in the meta row.
    pub fn commit(
        &self,
        meta: &CheckpointMeta,
        deltas: &[InstanceDelta],
        retain: usize,
    ) -> Result<CommitStats, StoreError> {
        let start = Instant::now();
        let n = self.check_new(meta, retain)?;
        for d in deltas {
            if meta
                .operators
                .get(&d.operator)
                .is_none_or(|op| d.instance >= op.parallelism)
            {
                return Err(invalid(format!(
                    "checkpoint {n} has state for instance {} of operator `{}`, which its metadata does not list",
                    d.instance, d.operator
                )));
            }
        }
        let db = self.rw()?;
        let bytes_written = self.in_context(&format!("writing checkpoint {n}"), || {
            let txn = db.begin_write()?;
            let written = self.write_checkpoint(&txn, meta, deltas)?;
            self.collect_recordings(&txn, meta)?;
            self.collect_garbage(&txn, retain)?;
            txn.commit()?;
            Ok(written)
        })?;
        Ok(CommitStats {
            bytes_written,
            duration: start.elapsed(),
        })
    }

    fn write_checkpoint(
        &self,
        txn: &WriteTransaction,
        meta: &CheckpointMeta,
        deltas: &[InstanceDelta],
    ) -> Result<u64, Fail> {
        let n = meta.id;
        let mut checkpoints = txn.open_table(CHECKPOINTS)?;
        let mut live = match checkpoints.last()? {
            Some((last, _)) if last.value() >= n => {
                let message = format!(
                    "checkpoint {n} is not newer than checkpoint {} in {}: ids must increase (truncate_after the restored checkpoint first)",
                    last.value(),
                    self.path.display()
                );
                return Err(invalid(message).into());
            }
            Some((last, raw)) => self.decode_meta(last.value(), raw.value())?.state_keys,
            None => 0,
        };
        let mut t = Tables {
            segments: txn.open_table(SEGMENTS)?,
            chunks: txn.open_table(CHUNKS)?,
            snapshots: txn.open_table(SNAPSHOTS)?,
            gc: txn.open_table(GC)?,
        };
        let mut by_instance: BTreeMap<(&str, u32), Vec<&InstanceDelta>> = BTreeMap::new();
        for d in deltas {
            let instance = (d.operator.as_str(), d.instance);
            by_instance.entry(instance).or_default().push(d);
        }
        let mut bytes = 0u64;
        for ((op, inst), deltas) in by_instance {
            let changes = deltas.iter().flat_map(|d| d.changes.iter()).collect();
            let written = self.write_state(&mut t, n, op, inst, changes)?;
            bytes += written.bytes;
            let timers: Vec<_> = deltas
                .iter()
                .flat_map(|d| &d.timers)
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            if !timers.is_empty() {
                // Timers are not state keys: only their bytes count.
                bytes += self
                    .write_state(&mut t, n, &timer_space(op), inst, timers)?
                    .bytes;
            }
            live = (live + written.added)
                .checked_sub(written.removed)
                .ok_or_else(|| self.corrupt("the live key count went negative".into()))?;
            for snapshot in deltas.iter().filter_map(|d| d.snapshot.as_deref()) {
                let older = t
                    .snapshots
                    .range((op, inst, 0)..(op, inst, n))?
                    .next_back()
                    .is_some();
                t.snapshots.insert((op, inst, n), &*self.seal(snapshot))?;
                bytes += snapshot.len() as u64;
                if older {
                    t.gc.insert((n, op, inst), ())?;
                }
            }
        }
        self.write_inflight(txn, n, deltas)?;
        let recorded_bytes = self.write_recordings(txn, meta, deltas)?;
        let stored = CheckpointMeta {
            bytes_written: bytes,
            recorded_bytes,
            state_keys: live,
            ..meta.clone()
        };
        checkpoints.insert(n, &*self.encode_meta(&stored)?)?;
        Ok(bytes)
    }

    /// Checks that checkpoint `meta` may be written with `retain`: its id is
    /// in 1..u64::MAX, retain is at least 1 and the job is this store's.
    /// Returns the id.
    fn check_new(&self, meta: &CheckpointMeta, retain: usize) -> Result<u64, StoreError> {
        let (n, job) = (meta.id, self.job()?);
        if retain == 0 || n == 0 || n == u64::MAX || meta.job != job {
            return Err(invalid(format!(
                "refusing checkpoint {n} of job `{}` with retain {retain} in {} (job `{job}`): ids are 1..u64::MAX, retain is at least 1, the job must match",
                meta.job,
                self.path.display()
            )));
        }
        Ok(n)
    }

    /// All complete checkpoints, ascending by id.
    pub fn list(&self) -> Result<Vec<CheckpointMeta>, StoreError> {
        self.in_context("listing checkpoints", || {
            let table = self.read()?.open_table(CHECKPOINTS)?;
            let rows = table.iter()?.map(|row| {
                let (id, raw) = row?;
                Ok(self.decode_meta(id.value(), raw.value())?)
            });
            rows.collect()
        })
    }

    /// The id the next checkpoint gets: after the newest complete one, and
    /// after every one [`truncate_after`](Self::truncate_after) dropped, so
    /// that an id names one checkpoint (and one epoch of each sink) ever.
    pub fn next_id(&self) -> Result<u64, StoreError> {
        let after_latest = self.latest()?.map_or(1, |m| m.id + 1);
        let recorded = self.in_context("reading the next checkpoint id", || {
            self.recorded_next_id(&self.read()?.open_table(layout::META)?)
        })?;
        Ok(after_latest.max(recorded))
    }

    /// The `next_id` the `meta` table records (0 when none).
    fn recorded_next_id(
        &self,
        meta: &impl ReadableTable<&'static str, &'static [u8]>,
    ) -> Result<u64, Fail> {
        let Some(raw) = meta.get(layout::NEXT_ID)? else {
            return Ok(0);
        };
        let text = String::from_utf8_lossy(raw.value()).into_owned();
        text.parse().map_err(|_| {
            self.corrupt(format!("its next checkpoint id {text:?} is not a number"))
                .into()
        })
    }

    /// The newest complete checkpoint.
    pub fn latest(&self) -> Result<Option<CheckpointMeta>, StoreError> {
        self.in_context("reading the latest checkpoint", || {
            let table = self.read()?.open_table(CHECKPOINTS)?;
            let last = table.last()?;
            Ok(last
                .map(|(id, raw)| self.decode_meta(id.value(), raw.value()))
                .transpose()?)
        })
    }

    /// Checkpoint `id`, if complete and retained.
    pub fn get(&self, id: u64) -> Result<Option<CheckpointMeta>, StoreError> {
        self.in_context("reading a checkpoint", || {
            let raw = self.read()?.open_table(CHECKPOINTS)?.get(id)?;
            Ok(raw
                .map(|raw| self.decode_meta(id, raw.value()))
                .transpose()?)
        })
    }

    fn check_exists(&self, txn: &ReadTransaction, id: u64) -> Result<(), Fail> {
        match txn.open_table(CHECKPOINTS)?.get(id)? {
            Some(_) => Ok(()),
            None => Err(StoreError::UnknownCheckpoint {
                path: self.path.clone(),
                id,
            }
            .into()),
        }
    }

    /// State of one instance as of checkpoint `id`: its newest full segment
    /// <= id with every later delta <= id applied in version order, and its
    /// newest snapshot <= id.
    pub fn load_instance(
        &self,
        id: u64,
        operator: &str,
        instance: u32,
    ) -> Result<RestoredInstance, StoreError> {
        self.in_context("loading state", || {
            let txn = self.read()?;
            self.check_exists(&txn, id)?;
            let entries = self.load(&txn, id, operator, instance)?;
            let timers = self.load(&txn, id, &timer_space(operator), instance)?;
            let snapshot = self.snapshot_at(&txn, id, operator, instance)?;
            let inflight = self.load_inflight(&txn, id, operator, instance)?;
            Ok(RestoredInstance {
                entries,
                snapshot,
                timers,
                inflight,
            })
        })
    }

    /// All live entries of `operator` at checkpoint `id`, across instances:
    /// `(instance, key, value)` sorted by (key, instance).
    pub fn operator_state(
        &self,
        id: u64,
        operator: &str,
    ) -> Result<Vec<OperatorEntry>, StoreError> {
        let mut out = self.in_context("loading state", || {
            let txn = self.read()?;
            self.check_exists(&txn, id)?;
            let mut instances = BTreeSet::new();
            let segments = txn.open_table(SEGMENTS)?;
            for row in segments.range((operator, 0, 0)..=(operator, u32::MAX, u64::MAX))? {
                instances.insert(row?.0.value().1);
            }
            let mut out = Vec::new();
            for inst in instances {
                let entries = self.load(&txn, id, operator, inst)?;
                out.extend(entries.into_iter().map(|(k, v)| (inst, k, v)));
            }
            Ok(out)
        })?;
        out.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests;
