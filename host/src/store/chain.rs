//! Segment chains: how one instance's state is read from and written to
//! its segments (see [`super::segment`] for their encoding).

use redb::{AccessGuard, ReadTransaction, ReadableTable};

use super::error::{Fail, StoreError};
use super::file::CheckpointStore;
use super::layout::{CHUNKS, SEGMENTS};
use super::segment;
use super::segment::{Damage, Decoder, Encoder, Header, Kind, Overrides};
use crate::keyed::state::sort_stable_by_bytes;

type SegmentKey = (&'static str, u32, u64);
type ChunkKey = (&'static str, u32, u64, u32);

/// A live entry: key and value.
type LiveEntry = (Vec<u8>, Vec<u8>);

/// The tables a commit writes, opened once per transaction.
pub(super) struct Tables<'txn> {
    pub(super) segments: redb::Table<'txn, SegmentKey, &'static [u8]>,
    pub(super) chunks: redb::Table<'txn, ChunkKey, &'static [u8]>,
    pub(super) snapshots: redb::Table<'txn, SegmentKey, &'static [u8]>,
    pub(super) gc: redb::Table<'txn, (u64, &'static str, u32), ()>,
}

/// What writing one instance's changes did to the checkpoint's totals.
#[derive(Debug, Default)]
pub(super) struct Written {
    pub(super) bytes: u64,
    pub(super) added: u64,
    pub(super) removed: u64,
}

/// The segments that make an instance's state at some checkpoint: its
/// newest full segment at or before it, then the deltas after that, oldest
/// first, as (version, header). Empty if the instance had no state yet.
#[derive(Debug, Default)]
pub(super) struct Chain {
    pub(super) full: Option<(u64, Header)>,
    pub(super) deltas: Vec<(u64, Header)>,
}

impl CheckpointStore {
    fn damaged(&self, op: &str, inst: u32, version: u64, damage: Damage) -> StoreError {
        self.corrupt(format!(
            "the state segment of instance {inst} of operator `{op}` written by checkpoint {version} is unreadable: {damage}"
        ))
    }

    /// Writes the changes of one instance as its segment at version `n`: a
    /// delta, or a full segment if the instance has none yet or its chain is
    /// due for compaction (see [`Tuning`]). Writes nothing if no change has
    /// an effect (only deletes of absent keys).
    pub(super) fn write_state(
        &self,
        t: &mut Tables<'_>,
        n: u64,
        op: &str,
        inst: u32,
        mut changes: Vec<(&[u8], Option<&[u8]>)>,
    ) -> Result<Written, Fail> {
        // Stable: repeated keys keep their order, so the last change wins.
        sort_stable_by_bytes(&mut changes, |c| c.0);
        let mut keys: Vec<&[u8]> = changes.iter().map(|c| c.0).collect();
        keys.dedup();
        let chain = self.chain(&t.segments, op, inst, n)?;
        let was_live = self.lookup(&t.chunks, op, inst, &chain, &keys)?;

        let mut out = Written::default();
        let mut effective = Vec::with_capacity(keys.len());
        let mut changes = changes.into_iter().peekable();
        for (&key, &before) in keys.iter().zip(&was_live) {
            let (mut live, mut last) = (before, None);
            while let Some((_, change)) = changes.next_if(|c| c.0 == key) {
                last = change;
                if change.is_none() && !live {
                    continue; // deleting an absent key
                }
                out.bytes += (key.len() + change.map_or(0, <[u8]>::len)) as u64;
                live = change.is_some();
            }
            out.added += u64::from(live && !before);
            out.removed += u64::from(before && !live);
            // A tombstone only where an older segment has the key.
            if live || before {
                effective.push((key, last));
            }
        }
        if effective.is_empty() {
            return Ok(out);
        }

        let mut delta = Encoder::new(self.tuning.chunk_bytes);
        for &(key, value) in &effective {
            delta.push(key, value);
        }
        let (header, chunks) = match chain.full {
            // The first segment of an instance: nothing was live before, so
            // `effective` holds values only.
            None => delta.finish(Kind::Full),
            Some((_, full)) if !self.due(&chain, full, delta.bytes()) => delta.finish(Kind::Delta),
            Some(_) => {
                let mut merged = Encoder::new(self.tuning.chunk_bytes);
                self.with_chain(&t.chunks, op, inst, &chain, &effective, |full, over| {
                    segment::merge(full, over, |k, v| merged.push(k, Some(v)))
                })?;
                // The chain stays for the retained checkpoints that read it.
                t.gc.insert((n, op, inst), ())?;
                merged.finish(Kind::Full)
            }
        };
        self.put_segment(t, (op, inst, n), header, &chunks)?;
        Ok(out)
    }

    /// Stores the segment `header`, `chunks` of instance `inst` of `op` at
    /// version `n`, sealed.
    fn put_segment(
        &self,
        t: &mut Tables<'_>,
        (op, inst, n): (&str, u32, u64),
        header: Header,
        chunks: &[Vec<u8>],
    ) -> Result<(), Fail> {
        t.segments
            .insert((op, inst, n), &*self.seal(&header.encode()))?;
        for (j, chunk) in chunks.iter().enumerate() {
            t.chunks
                .insert((op, inst, n, j as u32), &*self.seal(chunk))?;
        }
        Ok(())
    }

    /// Writes `entries` (sorted by key, unique) as the whole state of one
    /// instance at version `n`: a full segment that hides its older chain,
    /// with a `gc` row when there is one. An instance with neither entries
    /// nor a chain gets nothing. Returns the entries' key and value bytes.
    pub(super) fn write_full(
        &self,
        t: &mut Tables<'_>,
        n: u64,
        op: &str,
        inst: u32,
        entries: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<u64, Fail> {
        let older = t.segments.range((op, inst, 0)..(op, inst, n))?.next_back();
        let older = older.transpose()?.is_some();
        if entries.is_empty() && !older {
            return Ok(0);
        }
        let mut full = Encoder::new(self.tuning.chunk_bytes);
        let mut bytes = 0;
        for (key, value) in entries {
            full.push(key, Some(value));
            bytes += (key.len() + value.len()) as u64;
        }
        let (header, chunks) = full.finish(Kind::Full);
        self.put_segment(t, (op, inst, n), header, &chunks)?;
        if older {
            t.gc.insert((n, op, inst), ())?;
        }
        Ok(bytes)
    }

    /// Whether an instance whose chain is `chain` (with full segment `full`)
    /// should get a full segment instead of a delta of `delta_bytes`.
    fn due(&self, chain: &Chain, full: Header, delta_bytes: u64) -> bool {
        let deltas: u64 = chain.deltas.iter().map(|(_, h)| h.bytes).sum::<u64>() + delta_bytes;
        chain.deltas.len() >= self.tuning.max_deltas
            || u128::from(deltas) * 100
                > u128::from(full.bytes) * u128::from(self.tuning.max_delta_percent)
    }

    /// The segments an instance's state at checkpoint `id` is made of.
    pub(super) fn chain(
        &self,
        segments: &impl ReadableTable<SegmentKey, &'static [u8]>,
        op: &str,
        inst: u32,
        id: u64,
    ) -> Result<Chain, Fail> {
        let mut chain = Chain::default();
        for row in segments.range((op, inst, 0)..=(op, inst, id))?.rev() {
            let (key, raw) = row?;
            let version = key.value().2;
            let header = self
                .unseal(raw.value())
                .and_then(Header::decode)
                .map_err(|d| self.damaged(op, inst, version, d))?;
            match header.kind {
                Kind::Full => {
                    chain.full = Some((version, header));
                    break;
                }
                Kind::Delta => chain.deltas.push((version, header)),
            }
        }
        if let (None, Some(&(version, _))) = (chain.full, chain.deltas.last()) {
            let damage = Damage("no full segment precedes it".into());
            return Err(self.damaged(op, inst, version, damage).into());
        }
        chain.deltas.reverse();
        Ok(chain)
    }

    /// The chunk values of one segment, in order.
    fn chunks<'t>(
        &self,
        table: &'t impl ReadableTable<ChunkKey, &'static [u8]>,
        op: &str,
        inst: u32,
        version: u64,
    ) -> Result<Vec<AccessGuard<'t, &'static [u8]>>, Fail> {
        let mut out = Vec::new();
        for row in table.range((op, inst, version, 0)..=(op, inst, version, u32::MAX))? {
            let (key, value) = row?;
            if key.value().3 as usize != out.len() {
                let damage = Damage(format!("its chunk {} is missing", out.len()));
                return Err(self.damaged(op, inst, version, damage).into());
            }
            out.push(value);
        }
        Ok(out)
    }

    /// The values of the chunk rows `guards` of one segment, their
    /// checksums checked.
    fn unsealed<'g>(
        &self,
        guards: &'g [AccessGuard<'_, &'static [u8]>],
        op: &str,
        inst: u32,
        version: u64,
    ) -> Result<Vec<&'g [u8]>, StoreError> {
        let unseal = |g: &'g AccessGuard<'_, &'static [u8]>| self.unseal(g.value());
        let slices: Result<Vec<&[u8]>, Damage> = guards.iter().map(unseal).collect();
        slices.map_err(|d| self.damaged(op, inst, version, d))
    }

    /// Whether each of `keys` (sorted, unique) is live at the end of `chain`:
    /// looked up in the newest delta first, then in older ones, then in the
    /// full segment, each decoding only the chunks that may hold a key.
    fn lookup(
        &self,
        chunks: &impl ReadableTable<ChunkKey, &'static [u8]>,
        op: &str,
        inst: u32,
        chain: &Chain,
        keys: &[&[u8]],
    ) -> Result<Vec<bool>, Fail> {
        let mut live = vec![false; keys.len()];
        let mut pending: Vec<usize> = (0..keys.len()).collect();
        for &(version, header) in chain.deltas.iter().rev().chain(&chain.full) {
            if pending.is_empty() {
                break;
            }
            let guards = self.chunks(chunks, op, inst, version)?;
            let slices = self.unsealed(&guards, op, inst, version)?;
            let wanted: Vec<&[u8]> = pending.iter().map(|&i| keys[i]).collect();
            let found = segment::find(header, &slices, &wanted)
                .map_err(|d| self.damaged(op, inst, version, d))?;
            let mut unresolved = Vec::new();
            for (i, found) in pending.into_iter().zip(found) {
                match found {
                    Some(value) => live[i] = value,
                    None => unresolved.push(i),
                }
            }
            pending = unresolved;
        }
        Ok(live)
    }

    /// Calls `f` with a decoder of the chain's full segment and the chain's
    /// deltas, then `newest` (sorted, unique), settled into one run.
    fn with_chain<T>(
        &self,
        chunks: &impl ReadableTable<ChunkKey, &'static [u8]>,
        op: &str,
        inst: u32,
        chain: &Chain,
        newest: &[(&[u8], Option<&[u8]>)],
        f: impl FnOnce(Option<Decoder<'_>>, &Overrides) -> Result<T, Damage>,
    ) -> Result<T, Fail> {
        let mut overrides = Overrides::default();
        for &(version, header) in &chain.deltas {
            let guards = self.chunks(chunks, op, inst, version)?;
            let slices = self.unsealed(&guards, op, inst, version)?;
            let pushed = Decoder::new(header, &slices).and_then(|d| overrides.push_segment(d));
            pushed.map_err(|d| self.damaged(op, inst, version, d))?;
        }
        for &(key, value) in newest {
            overrides.push(key, value);
        }
        overrides.settle();
        let Some((version, header)) = chain.full else {
            return Ok(f(None, &overrides).map_err(|d| self.corrupt(d.0))?);
        };
        let guards = self.chunks(chunks, op, inst, version)?;
        let slices = self.unsealed(&guards, op, inst, version)?;
        let full = Decoder::new(header, &slices).and_then(|full| f(Some(full), &overrides));
        Ok(full.map_err(|d| self.damaged(op, inst, version, d))?)
    }

    /// Live entries of one instance at checkpoint `id`, sorted by key.
    pub(super) fn load(
        &self,
        txn: &ReadTransaction,
        id: u64,
        op: &str,
        inst: u32,
    ) -> Result<Vec<LiveEntry>, Fail> {
        let chain = self.chain(&txn.open_table(SEGMENTS)?, op, inst, id)?;
        let chunks = txn.open_table(CHUNKS)?;
        self.with_chain(&chunks, op, inst, &chain, &[], |full, overrides| {
            let from_full = full.as_ref().map_or(0, Decoder::max_entries);
            let mut out = Vec::with_capacity(from_full + overrides.len());
            segment::merge(full, overrides, |k, v| out.push((k.to_vec(), v.to_vec())))?;
            Ok(out)
        })
    }
}
