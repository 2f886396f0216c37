//! Garbage collection and truncation of the checkpoint store: dropping the
//! checkpoints that are no longer retained with what only they read, and
//! deleting every checkpoint after a restored one.
//!
//! Invariant (GC preserves retained checkpoints): garbage collection never
//! changes what a retained checkpoint reads. It deletes a segment only when
//! a full segment no newer than the oldest retained checkpoint hides it, and
//! a snapshot only when a snapshot no newer than that checkpoint hides it;
//! the `gc` journal names every instance that wrote such a full segment or
//! snapshot, so only those instances are visited. In-flight data is read
//! only at its own checkpoint, so the rows of checkpoints no longer
//! retained go (`inflight.rs`).

use std::collections::BTreeSet;

use redb::{ReadableTable, WriteTransaction};

use super::error::{Fail, StoreError};
use super::file::CheckpointStore;
use super::layout::{CHECKPOINTS, CHUNKS, GC, META, NEXT_ID, SEGMENTS, SNAPSHOTS};

impl CheckpointStore {
    /// Drops checkpoints older than the newest `retain` (but not the one
    /// before the oldest recorded epoch), then, for every
    /// instance journaled at a version no newer than the oldest retained
    /// checkpoint (`horizon`), the segments older than its newest full
    /// segment <= horizon and the snapshots older than its newest snapshot
    /// <= horizon: every retained checkpoint reads those or newer ones.
    pub(super) fn collect_garbage(
        &self,
        txn: &WriteTransaction,
        retain: usize,
    ) -> Result<(), Fail> {
        let mut checkpoints = txn.open_table(CHECKPOINTS)?;
        let mut horizon = 0;
        for row in checkpoints.iter()?.rev().take(retain) {
            horizon = row?.0.value();
        }
        // A recorded epoch is run again from the checkpoint before it (the
        // oldest from the job's start when there is none).
        if let Some(oldest) = self.oldest_recording(txn)? {
            let before = checkpoints.range(..oldest)?.next_back();
            horizon = horizon.min(before.map_or(Ok(oldest), |row| row.map(|r| r.0.value()))?);
        }
        checkpoints.retain_in(..horizon, |_, _| false)?;
        let end = horizon + 1; // ids are below u64::MAX

        let mut journal = txn.open_table(GC)?;
        let mut due = BTreeSet::new();
        for row in journal.range(..(end, "", 0))? {
            let row = row?.0;
            let (_, op, inst) = row.value();
            due.insert((op.to_string(), inst));
        }
        journal.retain_in(..(end, "", 0), |_, _| false)?;
        let mut segments = txn.open_table(SEGMENTS)?;
        let mut chunks = txn.open_table(CHUNKS)?;
        let mut snapshots = txn.open_table(SNAPSHOTS)?;
        for (op, inst) in &due {
            let (op, inst) = (op.as_str(), *inst);
            if let Some((base, _)) = self.chain(&segments, op, inst, horizon)?.full {
                segments.retain_in((op, inst, 0)..(op, inst, base), |_, _| false)?;
                chunks.retain_in((op, inst, 0, 0)..(op, inst, base, 0), |_, _| false)?;
            }
            let newest = snapshots
                .range((op, inst, 0)..=(op, inst, horizon))?
                .next_back()
                .transpose()?;
            if let Some(base) = newest.map(|(k, _)| k.value().2) {
                snapshots.retain_in((op, inst, 0)..(op, inst, base), |_, _| false)?;
            }
        }
        self.collect_inflight(txn, horizon)
    }

    /// Makes checkpoint ids up to `id` never given again, though this
    /// store never held them (another writer's manifests in the object
    /// store).
    pub fn reserve_ids_through(&self, id: u64) -> Result<(), StoreError> {
        if self.next_id()? > id {
            return Ok(());
        }
        let db = self.rw()?;
        self.in_context(&format!("reserving checkpoint ids up to {id}"), || {
            let txn = db.begin_write()?;
            self.reserve_in(&txn, id)?;
            Ok(txn.commit()?)
        })
    }

    /// Raises the recorded `next_id` in `txn` past `id`.
    fn reserve_in(&self, txn: &WriteTransaction, id: u64) -> Result<(), Fail> {
        let mut meta = txn.open_table(META)?;
        let next = self.recorded_next_id(&meta)?.max(id + 1);
        meta.insert(NEXT_ID, next.to_string().as_bytes())?;
        Ok(())
    }

    /// Deletes every checkpoint newer than `id` (an existing checkpoint, or 0
    /// for all) with the segments, snapshots and journal rows they wrote, in
    /// one transaction.
    pub fn truncate_after(&self, id: u64) -> Result<(), StoreError> {
        let db = self.rw()?;
        self.in_context(&format!("truncating after checkpoint {id}"), || {
            let txn = db.begin_write()?;
            {
                let mut checkpoints = txn.open_table(CHECKPOINTS)?;
                if id != 0 && checkpoints.get(id)?.is_none() {
                    return Err(StoreError::UnknownCheckpoint {
                        path: self.path.clone(),
                        id,
                    }
                    .into());
                }
                let after = id.saturating_add(1);
                // Ids of dropped checkpoints are never given again: their
                // epochs may have reached a sink (message ids, delivery
                // marks) before they were dropped.
                let dropped = checkpoints
                    .last()?
                    .map(|(k, _)| k.value())
                    .filter(|&n| n > id);
                if let Some(n) = dropped {
                    self.reserve_in(&txn, n)?;
                }
                checkpoints.retain_in(after.., |_, _| false)?;
                let mut segments = txn.open_table(SEGMENTS)?;
                let mut newer = Vec::new();
                for row in segments.iter()? {
                    let row = row?.0;
                    let (op, inst, version) = row.value();
                    if version > id {
                        newer.push((op.to_string(), inst, version));
                    }
                }
                segments.retain(|k, _| k.2 <= id)?;
                let mut chunks = txn.open_table(CHUNKS)?;
                for (op, inst, v) in &newer {
                    let (op, inst, v) = (op.as_str(), *inst, *v);
                    chunks.retain_in((op, inst, v, 0)..=(op, inst, v, u32::MAX), |_, _| false)?;
                }
                txn.open_table(SNAPSHOTS)?.retain(|k, _| k.2 <= id)?;
                txn.open_table(GC)?
                    .retain_in((after, "", 0).., |_, _| false)?;
                self.truncate_inflight(&txn, id)?;
                self.truncate_recordings(&txn, id)?;
            }
            Ok(txn.commit()?)
        })
    }
}
