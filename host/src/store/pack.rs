//! Packs: what one checkpoint wrote to the store, as one self-contained
//! byte string, to copy a checkpoint to another machine (the object store
//! of `crate::remote`) and build it back there.
//!
//! Every row of the store is keyed by the version (checkpoint id) that
//! wrote it, so a checkpoint's *pack* is its rows: its `checkpoints` row,
//! the segments, chunks, snapshots and `gc` journal rows of its version,
//! its in-flight data and its recorded input.
//! A store's checkpoints are rebuilt in an empty store from the packs of
//! the versions their state reads ([`CheckpointStore::versions_in_use`])
//! and the store's [`Catalog`] (its checkpoints and recorded epochs):
//! the packs' state rows, and the `checkpoints` rows, in-flight data and
//! recordings of the catalog's checkpoints and epochs only
//! ([`CheckpointStore::import`]). A pack also holds the `checkpoints` row
//! of a checkpoint the store dropped since, whose state it no longer
//! reads whole, and the recording of an epoch it no longer keeps: the
//! catalog says which are whole.
//!
//! Encoding: `WEIRPACK`, the pack format (`u32`), the version (`u64`),
//! then entries (a tag byte and its fields: integers little-endian,
//! strings and byte strings as a `u32` length and the bytes), a zero tag,
//! and the CRC-32 of everything before it. Values are stored unsealed (a
//! pack has one checksum) and sealed again as the importing store's format
//! says.
//!
//! Invariant: [`Pack::decode`] gives back exactly the pack
//! [`Pack::encode`] wrote, and refuses any other bytes (a changed bit, a
//! cut) with a message.

use std::collections::{BTreeMap, BTreeSet};

use redb::{ReadableTable, ReadableTableMetadata};
use serde::{Deserialize, Serialize};

use super::error::{Fail, StoreError, invalid};
use super::file::CheckpointStore;
use super::layout::{CHECKPOINTS, CHUNKS, GC, INFLIGHT, SEGMENTS, SNAPSHOTS};

const MAGIC: &[u8; 8] = b"WEIRPACK";
/// The encoding this Weir writes and reads.
const FORMAT: u32 = 1;

/// One row of the store, by table, its value unsealed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Row {
    Checkpoint(Vec<u8>),
    Segment(String, u32, Vec<u8>),
    Chunk(String, u32, u32, Vec<u8>),
    Snapshot(String, u32, Vec<u8>),
    Gc(String, u32),
    Inflight(String, u32, Vec<u8>),
    Recording(String, u32, Vec<u8>),
}

/// What a store holds up to a checkpoint: the checkpoints whose state it
/// reads whole and, per operator, the checkpoints whose epochs it keeps a
/// recording of. With the packs of the versions they read, it rebuilds
/// exactly those ([`CheckpointStore::import`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Catalog {
    /// Checkpoint ids, ascending; the last is the newest.
    pub checkpoints: Vec<u64>,
    /// Operator id -> ids of the checkpoints ending its recorded epochs,
    /// ascending; `None` (a checkpoint alone, [`Catalog::only`]): every
    /// recording its pack holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<BTreeMap<String, Vec<u64>>>,
}

impl Catalog {
    /// Checkpoint `id` alone, with the recordings its pack holds (what a
    /// manifest written before catalogs restores).
    pub fn only(id: u64) -> Catalog {
        Catalog {
            checkpoints: vec![id],
            recorded: None,
        }
    }

    /// The newest checkpoint.
    pub fn newest(&self) -> Option<u64> {
        self.checkpoints.last().copied()
    }
}

/// A recording in a pack: operator, instance, bytes.
type Recorded<'p> = (&'p str, u32, &'p [u8]);

/// What checkpoint `version` wrote to the store.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pack {
    /// The checkpoint id that wrote the rows.
    pub version: u64,
    rows: Vec<Row>,
}

impl Pack {
    /// The pack as bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        let text = |out: &mut Vec<u8>, b: &[u8]| {
            let len = u32::try_from(b.len()).expect("a pack field under 4 GiB");
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(b);
        };
        for row in &self.rows {
            match row {
                Row::Checkpoint(v) => {
                    out.push(1);
                    text(&mut out, v);
                }
                Row::Segment(op, inst, v)
                | Row::Snapshot(op, inst, v)
                | Row::Inflight(op, inst, v)
                | Row::Recording(op, inst, v) => {
                    out.push(match row {
                        Row::Segment(..) => 2,
                        Row::Snapshot(..) => 4,
                        Row::Inflight(..) => 6,
                        _ => 7,
                    });
                    text(&mut out, op.as_bytes());
                    out.extend_from_slice(&inst.to_le_bytes());
                    text(&mut out, v);
                }
                Row::Chunk(op, inst, chunk, v) => {
                    out.push(3);
                    text(&mut out, op.as_bytes());
                    out.extend_from_slice(&inst.to_le_bytes());
                    out.extend_from_slice(&chunk.to_le_bytes());
                    text(&mut out, v);
                }
                Row::Gc(op, inst) => {
                    out.push(5);
                    text(&mut out, op.as_bytes());
                    out.extend_from_slice(&inst.to_le_bytes());
                }
            }
        }
        out.push(0);
        let sum = crc32fast::hash(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// The pack `bytes` encode; an error says what is wrong with them.
    pub fn decode(bytes: &[u8]) -> Result<Pack, String> {
        let body = bytes
            .len()
            .checked_sub(4)
            .map(|at| bytes.split_at(at))
            .filter(|(body, sum)| crc32fast::hash(body).to_le_bytes() == **sum)
            .map(|(body, _)| body)
            .ok_or("its checksum does not match its bytes (damaged or cut short)")?;
        let mut r = Reader(body);
        if r.take(8)? != MAGIC {
            return Err("it does not start with WEIRPACK: not a pack".into());
        }
        let format = r.u32()?;
        if format != FORMAT {
            return Err(format!(
                "it has pack format {format}, this weir reads format {FORMAT}"
            ));
        }
        let mut pack = Pack {
            version: r.u64()?,
            ..Pack::default()
        };
        loop {
            let row = match r.take(1)?[0] {
                0 => break,
                1 => Row::Checkpoint(r.bytes()?),
                2 => Row::Segment(r.text()?, r.u32()?, r.bytes()?),
                3 => Row::Chunk(r.text()?, r.u32()?, r.u32()?, r.bytes()?),
                4 => Row::Snapshot(r.text()?, r.u32()?, r.bytes()?),
                5 => Row::Gc(r.text()?, r.u32()?),
                6 => Row::Inflight(r.text()?, r.u32()?, r.bytes()?),
                7 => Row::Recording(r.text()?, r.u32()?, r.bytes()?),
                tag => return Err(format!("it has an entry of unknown kind {tag}")),
            };
            pack.rows.push(row);
        }
        if !r.0.is_empty() {
            return Err("it has bytes after its end".into());
        }
        Ok(pack)
    }
}

#[cfg(test)]
impl Pack {
    /// Whether it holds its checkpoint's metadata, and the (operator,
    /// instance) of each recording it holds.
    pub(super) fn held(&self) -> (bool, Vec<(String, u32)>) {
        let meta = (self.rows.iter()).any(|r| matches!(r, Row::Checkpoint(_)));
        let recordings = (self.rows.iter())
            .filter_map(|r| match r {
                Row::Recording(op, inst, _) => Some((op.clone(), *inst)),
                _ => None,
            })
            .collect();
        (meta, recordings)
    }
}

/// Reads a pack's fields in order.
struct Reader<'b>(&'b [u8]);

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], String> {
        if self.0.len() < n {
            return Err("it ends inside an entry".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let len = self.u32()? as usize;
        Ok(self.take(len)?.to_vec())
    }

    fn text(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?).map_err(|_| "it has a name that is not UTF-8".into())
    }
}

impl CheckpointStore {
    /// The rows checkpoint `version` wrote that the store still holds, as a
    /// pack. Every value's checksum is checked.
    pub fn export(&self, version: u64) -> Result<Pack, StoreError> {
        self.in_context(&format!("packing checkpoint {version}"), || {
            let txn = self.read()?;
            let mut rows = Vec::new();
            let unseal = |raw: &[u8], what: &str| {
                let value = self.unseal(raw).map_err(|d| {
                    self.corrupt(format!("{what} of checkpoint {version} is unreadable: {d}"))
                })?;
                Ok::<_, Fail>(value.to_vec())
            };
            if let Some(raw) = txn.open_table(CHECKPOINTS)?.get(version)? {
                rows.push(Row::Checkpoint(unseal(raw.value(), "the metadata")?));
            }
            let segments = txn.open_table(SEGMENTS)?;
            let chunks = txn.open_table(CHUNKS)?;
            for row in segments.iter()? {
                let (key, raw) = row?;
                let (op, inst, v) = key.value();
                if v != version {
                    continue;
                }
                rows.push(Row::Segment(
                    op.into(),
                    inst,
                    unseal(raw.value(), "a segment")?,
                ));
                for chunk in chunks.range((op, inst, v, 0)..=(op, inst, v, u32::MAX))? {
                    let (key, raw) = chunk?;
                    let chunk = key.value().3;
                    rows.push(Row::Chunk(
                        op.into(),
                        inst,
                        chunk,
                        unseal(raw.value(), "a chunk")?,
                    ));
                }
            }
            for row in txn.open_table(SNAPSHOTS)?.iter()? {
                let (key, raw) = row?;
                let (op, inst, v) = key.value();
                if v == version {
                    rows.push(Row::Snapshot(
                        op.into(),
                        inst,
                        unseal(raw.value(), "a snapshot")?,
                    ));
                }
            }
            let gc = txn.open_table(GC)?;
            for row in gc.range((version, "", 0)..=(version, "\u{10ffff}", u32::MAX))? {
                let key = row?.0;
                let (_, op, inst) = key.value();
                rows.push(Row::Gc(op.into(), inst));
            }
            if let Some(inflight) = self.inflight_table(&txn)? {
                for row in inflight.iter()? {
                    let (key, raw) = row?;
                    let (op, inst, v) = key.value();
                    if v == version {
                        let value = unseal(raw.value(), "in-flight data")?;
                        rows.push(Row::Inflight(op.into(), inst, value));
                    }
                }
            }
            for (op, inst, value) in self.recordings_of(&txn, version)? {
                rows.push(Row::Recording(op, inst, value));
            }
            Ok(Pack { version, rows })
        })
    }

    /// The versions whose rows the store holds: every retained
    /// checkpoint's state reads only rows of these versions.
    pub fn versions_in_use(&self) -> Result<BTreeSet<u64>, StoreError> {
        self.in_context("listing the versions in use", || {
            let txn = self.read()?;
            let mut versions = BTreeSet::new();
            for row in txn.open_table(SEGMENTS)?.iter()? {
                versions.insert(row?.0.value().2);
            }
            for row in txn.open_table(SNAPSHOTS)?.iter()? {
                versions.insert(row?.0.value().2);
            }
            for row in txn.open_table(CHECKPOINTS)?.iter()? {
                versions.insert(row?.0.value());
            }
            Ok(versions)
        })
    }

    /// What this store holds up to checkpoint `upto`: its checkpoints
    /// and recorded epochs.
    pub fn catalog(&self, upto: u64) -> Result<Catalog, StoreError> {
        let ids = self.list()?.into_iter().map(|m| m.id);
        let checkpoints = ids.filter(|&id| id <= upto).collect();
        let recorded = self.in_context("listing recordings", || {
            let txn = self.read()?;
            let Some((_, index)) = self.recordings_tables(&txn)? else {
                return Ok(BTreeMap::new());
            };
            self.epochs_in(&index)
        })?;
        let recorded = (recorded.into_iter())
            .map(|(op, epochs)| {
                let ids = epochs.iter().map(|e| e.checkpoint).filter(|&id| id <= upto);
                (op, ids.collect::<Vec<_>>())
            })
            .filter(|(_, ids)| !ids.is_empty())
            .collect();
        Ok(Catalog {
            checkpoints,
            recorded: Some(recorded),
        })
    }

    /// Builds the checkpoints of `catalog` into this store, which holds no
    /// checkpoint, from `packs`: the state rows of every pack, and the
    /// `checkpoints` row and in-flight data of the catalog's checkpoints
    /// and the recordings of its epochs only (every recording of those
    /// checkpoints when it has no list: [`Catalog::only`]), in one
    /// transaction. The newest checkpoint is read back whole.
    pub fn import(&self, catalog: &Catalog, packs: &[Pack]) -> Result<(), StoreError> {
        let Some(newest) = catalog.newest() else {
            return Err(StoreError::Invalid {
                message: "no checkpoint to build: the catalog is empty".into(),
            });
        };
        let held: BTreeSet<u64> = catalog.checkpoints.iter().copied().collect();
        let recorded = |op: &str, v: u64| match &catalog.recorded {
            None => true,
            Some(epochs) => epochs.get(op).is_some_and(|ids| ids.contains(&v)),
        };
        let what = match held.len() {
            1 => format!("building checkpoint {newest} from its packs"),
            n => format!("building {n} checkpoints up to {newest} from their packs"),
        };
        let db = self.rw()?;
        self.in_context(&what, || {
            let txn = db.begin_write()?;
            let mut recordings: BTreeMap<u64, Vec<Recorded>> = BTreeMap::new();
            let mut metas = Vec::new();
            {
                let mut checkpoints = txn.open_table(CHECKPOINTS)?;
                if !checkpoints.is_empty()? {
                    return Err(invalid(format!(
                        "{} holds checkpoints already: checkpoints are built only into an empty store",
                        self.path.display()
                    ))
                    .into());
                }
                let mut segments = txn.open_table(SEGMENTS)?;
                let mut chunks = txn.open_table(CHUNKS)?;
                let mut snapshots = txn.open_table(SNAPSHOTS)?;
                let mut gc = txn.open_table(GC)?;
                let mut inflight = txn.open_table(INFLIGHT)?;
                for pack in packs {
                    let v = pack.version;
                    let own = held.contains(&v);
                    for row in &pack.rows {
                        match row {
                            Row::Checkpoint(value) if own => {
                                checkpoints.insert(v, &*self.seal(value))?;
                            }
                            Row::Inflight(op, inst, value) if own => {
                                inflight.insert((op.as_str(), *inst, v), &*self.seal(value))?;
                            }
                            Row::Recording(op, inst, value) if own && recorded(op, v) => {
                                let epoch = recordings.entry(v).or_default();
                                epoch.push((op.as_str(), *inst, value.as_slice()));
                            }
                            Row::Checkpoint(_) | Row::Inflight(..) | Row::Recording(..) => {}
                            Row::Segment(op, inst, value) => {
                                segments.insert((op.as_str(), *inst, v), &*self.seal(value))?;
                            }
                            Row::Chunk(op, inst, chunk, value) => {
                                let key = (op.as_str(), *inst, v, *chunk);
                                chunks.insert(key, &*self.seal(value))?;
                            }
                            Row::Snapshot(op, inst, value) => {
                                snapshots.insert((op.as_str(), *inst, v), &*self.seal(value))?;
                            }
                            Row::Gc(op, inst) => {
                                gc.insert((v, op.as_str(), *inst), ())?;
                            }
                        }
                    }
                }
                for &id in &held {
                    let Some(raw) = checkpoints.get(id)? else {
                        return Err(invalid(format!(
                            "the packs of checkpoint {id} do not hold its metadata"
                        ))
                        .into());
                    };
                    metas.push(self.decode_meta(id, raw.value())?);
                }
            }
            for meta in &metas {
                if let Some(epoch) = recordings.get(&meta.id) {
                    self.import_recordings(&txn, meta, epoch)?;
                }
            }
            Ok(txn.commit()?)
        })?;
        // What is restored must read back: every instance's chain.
        if let Some(meta) = self.get(newest)? {
            for (op, o) in &meta.operators {
                for inst in 0..o.parallelism {
                    self.load_instance(meta.id, op, inst)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{delta, meta};

    /// Checkpoints 1..=6 with changes, deletes and snapshots on both
    /// operators, compacted now and then (`retain` 2); each one's packs
    /// rebuild it in an empty store, which reads exactly what the original
    /// reads.
    #[test]
    fn a_checkpoint_rebuilt_from_its_packs_reads_as_the_original() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path(), "job").unwrap();
        for id in 1..=6u64 {
            let (k, old) = (format!("k{id}=v{id} shared={id}"), format!("-k{}", id - 1));
            let snapshot = (id % 2 == 0).then(|| format!("s{id}"));
            let deltas = [
                delta("a", 0, &k, snapshot.as_deref()),
                delta("a", 1, &old, None),
                delta("b", 1, &k, None),
            ];
            store.commit(&meta(id), &deltas, 2).unwrap();
            let versions = store.versions_in_use().unwrap();
            assert!(versions.contains(&id));
            let packs: Vec<Pack> = versions
                .iter()
                .map(|&v| Pack::decode(&store.export(v).unwrap().encode()).unwrap())
                .collect();
            let copy_dir = tempfile::tempdir().unwrap();
            let copy = CheckpointStore::open(copy_dir.path(), "job").unwrap();
            copy.import(&Catalog::only(id), &packs).unwrap();
            assert_eq!(copy.list().unwrap().len(), 1, "only checkpoint {id}");
            assert_eq!(copy.latest().unwrap().unwrap().id, id);
            for (op, inst) in [("a", 0), ("a", 1), ("b", 0), ("b", 1)] {
                let want = store.load_instance(id, op, inst).unwrap();
                assert_eq!(
                    copy.load_instance(id, op, inst).unwrap(),
                    want,
                    "{op}[{inst}] at {id}"
                );
            }
            assert_eq!(copy.next_id().unwrap(), id + 1);
        }
    }

    #[test]
    fn a_pack_round_trips_and_refuses_any_change() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path(), "job").unwrap();
        store
            .commit(&meta(1), &[delta("a", 0, "k=v", Some("s"))], 1)
            .unwrap();
        let pack = store.export(1).unwrap();
        let bytes = pack.encode();
        assert_eq!(Pack::decode(&bytes).unwrap(), pack);
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(Pack::decode(&bad).is_err(), "byte {at}");
        }
        for len in 0..bytes.len() {
            assert!(Pack::decode(&bytes[..len]).is_err(), "cut to {len}");
        }
    }

    #[test]
    fn import_refuses_a_store_with_checkpoints_and_packs_without_the_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path(), "job").unwrap();
        store
            .commit(&meta(1), &[delta("a", 0, "k=v", None)], 1)
            .unwrap();
        let pack = store.export(1).unwrap();
        let err = (store.import(&Catalog::only(1), std::slice::from_ref(&pack))).unwrap_err();
        assert!(
            err.to_string().contains("holds checkpoints already"),
            "{err}"
        );
        let copy_dir = tempfile::tempdir().unwrap();
        let copy = CheckpointStore::open(copy_dir.path(), "job").unwrap();
        let err = copy.import(&Catalog::only(2), &[pack]).unwrap_err();
        assert!(
            err.to_string().contains("do not hold its metadata"),
            "{err}"
        );
    }
}
