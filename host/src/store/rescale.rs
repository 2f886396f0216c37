//! Derived checkpoints: a new checkpoint whose operators' state is that of
//! another checkpoint (of this store or of another one, a savepoint),
//! redistributed over a new number of instances by key group
//! ([`CheckpointStore::derive`]). Rescaling on restore, writing a savepoint
//! and starting a job from one are all derivations.
//!
//! Invariants:
//! - **Exactly the owned key groups.** After a derivation, instance `i` of
//!   an operator moved to `to` instances holds exactly the keys and timers
//!   whose key group `instance_for` gives to `i` at `to`, each as it was in
//!   the source checkpoint: every key lands in one instance, none is lost,
//!   none is duplicated.
//! - **Nothing of the old shape shows through.** Every instance the move
//!   touches gets a full segment (possibly empty) for its keyed state and
//!   its timers, and an empty snapshot where an older one exists, so no
//!   chain or snapshot of the old shape is read at the derived checkpoint;
//!   the `gc` journal then drops the old chains once no retained checkpoint
//!   reads them.
//! - Plugin snapshots cannot be split by key: an operator whose instances
//!   hold snapshot bytes is only copied at its parallelism, never
//!   redistributed ([`StoreError::Rescale`]).
//! - A key held by an instance that does not own its key group cannot be
//!   placed without clashing with the owner's, so such a move is refused
//!   ([`StoreError::Rescale`]) rather than guessed.
//!
//! Each source instance's chain is read once: its entries are split by the
//! new instance that owns them, and a new instance is written as soon as
//! the last source instance overlapping its key groups has been read, so
//! memory holds at most one source instance and the new instances it feeds.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use redb::{ReadTransaction, ReadableTable};

use super::chain::Tables;
use super::error::{Fail, StoreError, invalid};
use super::inflight::Rows;
use super::layout::INFLIGHT;
use super::layout::{CHECKPOINTS, CHUNKS, GC, SEGMENTS, SNAPSHOTS};
use super::{CheckpointMeta, CheckpointStore, CommitStats, timer_space};
use crate::dataflow::inflight::InFlight;
use crate::dataflow::partition::{KEY_GROUPS, instance_for, key_group};
use crate::failpoint::{self, Failpoint};
use crate::keyed::timers::{Entry, decode};

/// One operator's state in a derived checkpoint: the source checkpoint's
/// `from` instances, redistributed over `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    /// Operator id, in both checkpoints.
    pub operator: String,
    /// Its parallelism in the source checkpoint.
    pub from: u32,
    /// Its parallelism in the derived one.
    pub to: u32,
}

/// An instance's watermark entry: the time, and the entry's key and value.
type WatermarkEntry = (i64, Vec<u8>, Vec<u8>);

/// What one new instance receives from the source instances.
#[derive(Default)]
struct Gathered {
    state: Vec<(Vec<u8>, Vec<u8>)>,
    timers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The lowest watermark entry of the source instances it draws from;
    /// `Some(None)` once one of them had none.
    watermark: Option<Option<WatermarkEntry>>,
    snapshot: Vec<u8>,
    /// In-flight records of an unaligned source checkpoint it now owns.
    inflight: InFlight,
}

impl Gathered {
    /// Adds what one source instance gives this new instance: `part`, that
    /// instance's watermark entry (the lowest one wins; none wins over any)
    /// and its snapshot (only ever non-empty at an unchanged parallelism,
    /// where each new instance has one source instance).
    fn absorb(&mut self, part: Gathered, watermark: &Option<WatermarkEntry>, snapshot: &[u8]) {
        self.state.extend(part.state);
        self.timers.extend(part.timers);
        for (port, batch) in part.inflight.into_frames() {
            self.inflight.push(port, batch);
        }
        self.watermark = Some(match (self.watermark.take(), watermark) {
            (None, w) => w.clone(),
            (Some(None), _) | (_, None) => None,
            (Some(Some(a)), Some(b)) => Some(if b.0 < a.0 { b.clone() } else { a }),
        });
        if !snapshot.is_empty() {
            self.snapshot = snapshot.to_vec();
        }
    }
}

/// One source instance, split by the new instance that owns each part.
struct SourceInstance {
    /// New instance -> its part (every new instance overlapping the source
    /// instance has one).
    parts: BTreeMap<u32, Gathered>,
    /// The source instance's watermark entry.
    watermark: Option<WatermarkEntry>,
    /// Its snapshot, when the parallelism is unchanged.
    snapshot: Vec<u8>,
}

impl CheckpointStore {
    /// Writes checkpoint `meta` (an id newer than every one here) whose
    /// state, for each of `moves`, is the operator's state at checkpoint
    /// `id` of `source` (this store when `None`) over `to` instances, each
    /// key and timer in the instance that owns its key group; the watermark
    /// of a new instance is the lowest of the source instances it draws
    /// from. Operators `moves` does not name keep the chains they have here
    /// (none in another store). Then garbage-collects to `retain`, in one
    /// durable transaction. `state_keys` of the written meta counts the
    /// moved keys (plus, from this store, the unmoved ones).
    pub fn derive(
        &self,
        source: Option<&CheckpointStore>,
        id: u64,
        meta: &CheckpointMeta,
        moves: &[Move],
        retain: usize,
    ) -> Result<CommitStats, StoreError> {
        let start = Instant::now();
        let from = source.unwrap_or(self);
        let n = self.check_new(meta, retain)?;
        for m in moves {
            let to = meta.operators.get(&m.operator).map(|o| o.parallelism);
            if to != Some(m.to) || m.from == 0 || m.to == 0 || m.to > KEY_GROUPS {
                return Err(invalid(format!(
                    "derived checkpoint {n}: operator `{}` cannot move from {} to {} instances (its metadata says {to:?})",
                    m.operator, m.from, m.to
                )));
            }
        }
        let source_meta = from.get(id)?.ok_or_else(|| StoreError::UnknownCheckpoint {
            path: from.path.clone(),
            id,
        })?;
        let read = from.in_context("reading the source checkpoint", || from.read())?;
        let db = self.rw()?;
        let bytes = self.in_context(&format!("writing derived checkpoint {n}"), || {
            let txn = db.begin_write()?;
            let mut checkpoints = txn.open_table(CHECKPOINTS)?;
            if let Some((last, _)) = checkpoints.last()?
                && last.value() >= n
            {
                let message = format!(
                    "derived checkpoint {n} is not newer than checkpoint {} in {}",
                    last.value(),
                    self.path.display()
                );
                return Err(invalid(message).into());
            }
            let mut t = Tables {
                segments: txn.open_table(SEGMENTS)?,
                chunks: txn.open_table(CHUNKS)?,
                snapshots: txn.open_table(SNAPSHOTS)?,
                gc: txn.open_table(GC)?,
            };
            let mut inflight: Rows = txn.open_table(INFLIGHT)?;
            let (mut bytes, mut moved, mut inflight_bytes) = (0, 0, 0);
            for m in moves {
                let out = (&mut t, &mut inflight);
                let (b, keys, f) = self.move_operator(out, n, from, &read, id, m)?;
                bytes += b;
                moved += keys;
                inflight_bytes += f;
            }
            if source.is_none() {
                inflight_bytes += self.copy_unmoved_inflight(&mut inflight, id, n, moves)?;
            }
            // Every key of a moved operator lands in one new instance.
            let unmoved = match source {
                None => source_meta.state_keys.saturating_sub(moved),
                Some(_) => 0,
            };
            let stored = CheckpointMeta {
                inflight_bytes,
                // A derivation records its own time; a copy (a savepoint)
                // keeps the checkpoint's.
                duration_ms: match meta.derived {
                    Some(_) => start.elapsed().as_millis() as u64,
                    None => meta.duration_ms,
                },
                bytes_written: bytes,
                state_keys: moved + unmoved,
                ..meta.clone()
            };
            checkpoints.insert(n, &*self.encode_meta(&stored)?)?;
            drop((checkpoints, t, inflight));
            self.collect_garbage(&txn, retain)?;
            txn.commit()?;
            Ok(bytes)
        })?;
        Ok(CommitStats {
            bytes_written: bytes,
            duration: start.elapsed(),
        })
    }

    /// Writes operator `m.operator` at version `n` from `from`'s checkpoint
    /// `id`; returns the bytes and keys written, and the bytes of in-flight
    /// data.
    fn move_operator(
        &self,
        (t, inflight): (&mut Tables<'_>, &mut Rows<'_>),
        n: u64,
        from: &CheckpointStore,
        read: &ReadTransaction,
        id: u64,
        m: &Move,
    ) -> Result<(u64, u64, u64), Fail> {
        let op = m.operator.as_str();
        // The last source instance each new instance draws from.
        let mut last_source = vec![0u32; m.to as usize];
        for g in 0..KEY_GROUPS {
            let new = instance_for(g, m.to) as usize;
            last_source[new] = last_source[new].max(instance_for(g, m.from));
        }
        let mut gathered: BTreeMap<u32, Gathered> = BTreeMap::new();
        let (mut next_new, mut written) = (0u32, (0u64, 0u64, 0u64));
        for j in 0..m.from {
            let source = from.split_source(read, id, m, j)?;
            for (new, part) in source.parts {
                let g = gathered.entry(new).or_default();
                g.absorb(part, &source.watermark, &source.snapshot);
            }
            while next_new < m.to && last_source[next_new as usize] == j {
                let g = gathered.remove(&next_new).unwrap_or_default();
                let (bytes, keys, f) = self.write_instance((t, inflight), n, op, next_new, g)?;
                written = (written.0 + bytes, written.1 + keys, written.2 + f);
                next_new += 1;
                if m.from != m.to {
                    failpoint::hit(Failpoint::RescaleMidDerive);
                }
            }
        }
        // Instances beyond the new parallelism that this store still has.
        let mut beyond = BTreeSet::new();
        for space in [op.to_owned(), timer_space(op)] {
            let space = space.as_str();
            let rows = t
                .segments
                .range((space, m.to, 0)..=(space, u32::MAX, u64::MAX))?;
            for row in rows {
                beyond.insert(row?.0.value().1);
            }
        }
        for row in t
            .snapshots
            .range((op, m.to, 0)..=(op, u32::MAX, u64::MAX))?
        {
            beyond.insert(row?.0.value().1);
        }
        for inst in beyond {
            self.write_instance((t, inflight), n, op, inst, Gathered::default())?;
        }
        Ok(written)
    }

    /// Source instance `j` of `m` at checkpoint `id`, split by the new
    /// instance that owns each key, timer and in-flight record; refused
    /// when it holds a snapshot that would have to be split, or a key of a
    /// key group it does not own.
    fn split_source(
        &self,
        read: &ReadTransaction,
        id: u64,
        m: &Move,
        j: u32,
    ) -> Result<SourceInstance, Fail> {
        let op = m.operator.as_str();
        let refuse = |message: String| StoreError::Rescale {
            operator: op.to_owned(),
            message,
        };
        let snapshot = self.snapshot_at(read, id, op, j)?;
        if !snapshot.is_empty() && m.from != m.to {
            return Err(refuse(format!(
                "instance {j} keeps {} bytes of state in plugin memory (its snapshot), which cannot be split by key group. \
                 Keep parallelism {}, or move that state to the host's keyed state (the `state` interface)",
                snapshot.len(),
                m.from
            ))
            .into());
        }
        let owned = |g: u32| instance_for(g, m.from) == j;
        let new_owner = |key: &[u8]| instance_for(key_group(key), m.to);
        // Every new instance overlapping `j` gets a part, possibly empty, so
        // that it takes `j`'s watermark into account.
        let mut parts: BTreeMap<u32, Gathered> = (0..KEY_GROUPS)
            .filter(|&g| owned(g))
            .map(|g| (instance_for(g, m.to), Gathered::default()))
            .collect();
        let first_part = parts.keys().next().copied().unwrap_or(0);
        for (key, value) in self.load(read, id, op, j)? {
            let g = key_group(&key);
            if !owned(g) {
                return Err(refuse(format!(
                    "instance {j} holds the state key {} of key group {g}, which instance {} owns at parallelism {}; \
                     a state key must start with the record key it belongs to (see the `state` interface) for its state to move. \
                     Keep parallelism {}",
                    shown(&key),
                    instance_for(g, m.from),
                    m.from,
                    m.from
                ))
                .into());
            }
            let part = parts.entry(instance_for(g, m.to)).or_default();
            part.state.push((key, value));
        }
        let mut watermark = None;
        for (key, value) in self.load(read, id, &timer_space(op), j)? {
            match decode(&key, &value) {
                Ok(Entry::Timer(timer)) => {
                    let part = parts.entry(new_owner(&timer.key)).or_default();
                    part.timers.push((key, value));
                }
                Ok(Entry::Watermark(w)) => watermark = Some((w, key, value)),
                Err(e) => {
                    let message = format!(
                        "a timer of instance {j} of operator `{op}` in checkpoint {id} is unreadable: {e}"
                    );
                    return Err(self.corrupt(message).into());
                }
            }
        }
        // In-flight records go where their key routes them now; one without
        // a key (spread round-robin when sent) to the first new instance.
        for (port, batch) in self.load_inflight(read, id, op, j)? {
            let routed = batch.partition(m.to as usize, |key| {
                key.map_or(first_part, new_owner) as usize
            });
            for (new, part) in routed.into_iter().enumerate() {
                if !part.is_empty() {
                    let g = parts.entry(new as u32).or_default();
                    g.inflight.push(port, part);
                }
            }
        }
        Ok(SourceInstance {
            parts,
            watermark,
            snapshot: if m.from == m.to { snapshot } else { Vec::new() },
        })
    }

    /// Writes one new instance's gathered state, timers, snapshot and
    /// in-flight data at version `n`; returns the bytes and keys written and
    /// the in-flight bytes.
    fn write_instance(
        &self,
        (t, inflight): (&mut Tables<'_>, &mut Rows<'_>),
        n: u64,
        op: &str,
        inst: u32,
        mut g: Gathered,
    ) -> Result<(u64, u64, u64), Fail> {
        // Each source instance's run is sorted and the runs hold distinct
        // keys (every key had one owner).
        g.state.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if let Some(Some((_, key, value))) = g.watermark {
            g.timers.push((key, value));
        }
        g.timers.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut bytes = self.write_full(t, n, op, inst, &g.state)?;
        bytes += self.write_full(t, n, &timer_space(op), inst, &g.timers)?;
        let older = (t.snapshots.range((op, inst, 0)..(op, inst, n))?.next_back())
            .transpose()?
            .is_some();
        if !g.snapshot.is_empty() || older {
            t.snapshots
                .insert((op, inst, n), &*self.seal(&g.snapshot))?;
            bytes += g.snapshot.len() as u64;
            t.gc.insert((n, op, inst), ())?;
        }
        let mut inflight_bytes = 0;
        if !g.inflight.is_empty() {
            let encoded = g.inflight.encode();
            inflight.insert((op, inst, n), &*self.seal(&encoded))?;
            inflight_bytes = encoded.len() as u64;
        }
        Ok((bytes, g.state.len() as u64, inflight_bytes))
    }

    /// The snapshot of one instance at checkpoint `id` (empty if none).
    pub(super) fn snapshot_at(
        &self,
        txn: &ReadTransaction,
        id: u64,
        op: &str,
        inst: u32,
    ) -> Result<Vec<u8>, Fail> {
        let snapshots = txn.open_table(SNAPSHOTS)?;
        let newest = snapshots.range((op, inst, 0)..=(op, inst, id))?.next_back();
        let Some(row) = newest else {
            return Ok(Vec::new());
        };
        let (key, raw) = row?;
        let version = key.value().2;
        let snapshot = self.unseal(raw.value()).map_err(|d| {
            self.corrupt(format!(
                "the snapshot of instance {inst} of operator `{op}` written by checkpoint {version} is unreadable: {d}"
            ))
        })?;
        Ok(snapshot.to_vec())
    }

    /// Copies the in-flight rows of checkpoint `id` of the operators
    /// `moves` does not name to the derived checkpoint `n` (in-flight data
    /// is read at exactly its checkpoint), checksums checked; returns their
    /// bytes.
    fn copy_unmoved_inflight(
        &self,
        inflight: &mut Rows<'_>,
        id: u64,
        n: u64,
        moves: &[Move],
    ) -> Result<u64, Fail> {
        let mut rows = Vec::new();
        for row in inflight.iter()? {
            let (key, value) = row?;
            let (op, inst, version) = key.value();
            if version == id && !moves.iter().any(|m| m.operator == op) {
                rows.push((op.to_owned(), inst, value.value().to_vec()));
            }
        }
        let mut bytes = 0;
        for (op, inst, value) in rows {
            bytes += self.unsealed_inflight(&value, &(&op, inst, id))?.len() as u64;
            inflight.insert((op.as_str(), inst, n), value.as_slice())?;
        }
        Ok(bytes)
    }
}

/// A state key for a message: UTF-8 text quoted, else hex.
fn shown(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) => format!("{text:?}"),
        Err(_) => key.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

#[cfg(test)]
mod tests;
