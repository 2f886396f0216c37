//! [`Table`]: the cached entries of one store. The entries lie in one dense
//! vector; a hash index maps each key to its position, and a list holds
//! the positions of the dirty ones. So a write-back visits the dirty
//! entries only, however many clean ones the cache holds, and an eviction
//! walks the vector, not the index's buckets.
//!
//! Keys are their bytes ([`KeyBytes`]), short ones inline.
//!
//! Invariants:
//! - `index` holds every position of `entries` once, under its entry's
//!   `hash` (the key's hash from `hasher`); no two entries have equal keys.
//! - `dirty` holds the position of every entry whose slot is dirty, once,
//!   in the order they became dirty, and no other position. Slots change
//!   from dirty to clean only in [`Table::retain_dirty`].
//! - Every position in `ahead` from `next` on is a position of `entries`
//!   (or [`UNKNOWN`]): positions only change in [`Table::retain`] and
//!   [`Table::clear`], which empty it.

use hashbrown::HashTable;
use hashbrown::hash_table::Entry as IndexEntry;

use super::Slot;
use super::key_bytes::{KeyBytes, Probe};
use crate::hash::SeededState;

/// One cached key and its slot.
pub(super) struct Entry<V> {
    pub(super) key: KeyBytes,
    /// The key's hash: the index grows and is rebuilt without hashing a
    /// key again.
    hash: u64,
    pub(super) slot: Slot<V>,
}

/// The hash of a key as its table computed it, from a [`Table::find`]
/// that missed: inserting the key then does not hash it again.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyHash(pub(super) u64);

/// The entries of a store, their index and their dirty list.
pub(super) struct Table<V> {
    entries: Vec<Entry<V>>,
    index: HashTable<u32>,
    hasher: SeededState,
    dirty: Vec<u32>,
    /// The positions a batch's lookups are expected to ask for, in order
    /// ([`expect`](Table::expect)), and the next one's index.
    ahead: Vec<u32>,
    next: usize,
}

/// A key expected by [`Table::expect`] whose position is not known.
pub(super) const UNKNOWN: u32 = u32::MAX;

/// A position as the index keeps it.
pub(super) fn position(i: usize) -> u32 {
    u32::try_from(i).expect("a cache holds fewer than 2^32 entries")
}

impl<V> Table<V> {
    /// Bytes of the entry vector and the index per entry, as allocated
    /// on average: what [`Meter`](super::Meter) charges an entry for its
    /// place in the table.
    pub(super) fn bytes_per_entry() -> usize {
        // The vector between half full (just grown) and full; the index: a
        // position and a control byte per bucket, at most 7/8 of them used.
        size_of::<Entry<V>>() * 3 / 2 + (size_of::<u32>() + 1) * 8 / 7
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn new() -> Self {
        Table {
            entries: Vec::new(),
            index: HashTable::new(),
            hasher: SeededState::default(),
            dirty: Vec::new(),
            ahead: Vec::new(),
            next: 0,
        }
    }

    /// The position of the key of bytes `key` if cached, else its hash
    /// (for inserting it).
    #[inline]
    pub(super) fn find(&self, key: &[u8]) -> Result<usize, KeyHash> {
        self.find_probe(&Probe::new(key))
    }

    #[inline]
    fn find_probe(&self, probe: &Probe<'_>) -> Result<usize, KeyHash> {
        let hash = probe.hash(&self.hasher);
        let entries = &self.entries;
        self.index
            .find(hash, |&i| probe.matches(&entries[i as usize].key))
            .map(|&i| i as usize)
            .ok_or(KeyHash(hash))
    }

    /// Expects the next lookups by [`find_next`](Self::find_next) to ask
    /// for the keys at `positions`, in this order ([`UNKNOWN`]: any key).
    /// A prefetch has just found them: the lookups then compare one key
    /// each instead of hashing and probing again. `positions` comes from
    /// [`take_expected`](Self::take_expected), so no batch allocates it.
    pub(super) fn expect(&mut self, positions: Vec<u32>) {
        self.ahead = positions;
        self.next = 0;
    }

    /// Ends the expectation and returns its buffer, empty, to fill for the
    /// next [`expect`](Self::expect).
    pub(super) fn take_expected(&mut self) -> Vec<u32> {
        self.next = 0;
        let mut positions = std::mem::take(&mut self.ahead);
        positions.clear();
        positions
    }

    /// Ends the expectation: lookups hash and probe again.
    fn forget_expected(&mut self) {
        self.ahead.clear();
        self.next = 0;
    }

    /// Like [`find`](Self::find), trying the next expected position first.
    /// A key other than the expected one ends the expectation (the caller
    /// looks keys up in another order), so a lookup costs at most one
    /// wasted compare per [`expect`](Self::expect).
    #[inline]
    pub(super) fn find_next(&mut self, key: &[u8]) -> Result<usize, KeyHash> {
        let probe = Probe::new(key);
        if let Some(&at) = self.ahead.get(self.next) {
            self.next += 1;
            if at != UNKNOWN {
                if probe.matches(&self.entries[at as usize].key) {
                    return Ok(at as usize);
                }
                self.forget_expected();
            }
        }
        self.find_probe(&probe)
    }

    /// The slot at position `i`.
    pub(super) fn slot(&self, i: usize) -> &Slot<V> {
        &self.entries[i].slot
    }

    /// Runs `f` on the slot at position `i` (from [`find`](Self::find) or
    /// an insertion, with no [`retain`](Self::retain) since), which may
    /// make it dirty but not clean.
    pub(super) fn with<R>(&mut self, i: usize, f: impl FnOnce(&mut Slot<V>) -> R) -> R {
        let slot = &mut self.entries[i].slot;
        let was_dirty = slot.dirty;
        let r = f(slot);
        debug_assert!(!was_dirty || slot.dirty, "cleaned outside a write-back");
        if !was_dirty && slot.dirty {
            self.dirty.push(position(i));
        }
        r
    }

    /// Adds `key` of hash `hash`, which is not cached, with `slot`; returns
    /// its position.
    pub(super) fn insert_new(
        &mut self,
        KeyHash(hash): KeyHash,
        key: KeyBytes,
        slot: Slot<V>,
    ) -> usize {
        debug_assert_eq!(
            hash,
            Probe::new(key.as_bytes()).hash(&self.hasher),
            "the hash of another key"
        );
        debug_assert!(self.find(key.as_bytes()).is_err(), "inserting a cached key");
        let i = self.entries.len();
        let entries = &self.entries;
        self.index
            .insert_unique(hash, position(i), |&j| entries[j as usize].hash);
        if slot.dirty {
            self.dirty.push(position(i));
        }
        self.entries.push(Entry { key, hash, slot });
        i
    }

    /// The position of `key` of hash `hash`, inserted with the slot `make`
    /// builds when it is not cached (one probe either way).
    pub(super) fn find_or_insert(
        &mut self,
        KeyHash(hash): KeyHash,
        key: KeyBytes,
        make: impl FnOnce() -> Slot<V>,
    ) -> usize {
        let probe = Probe::new(key.as_bytes());
        debug_assert_eq!(hash, probe.hash(&self.hasher), "the hash of another key");
        let entries = &self.entries;
        let next = entries.len();
        match self.index.entry(
            hash,
            |&i| probe.matches(&entries[i as usize].key),
            |&i| entries[i as usize].hash,
        ) {
            IndexEntry::Occupied(o) => *o.get() as usize,
            IndexEntry::Vacant(v) => {
                v.insert(position(next));
                let slot = make();
                if slot.dirty {
                    self.dirty.push(position(next));
                }
                self.entries.push(Entry { key, hash, slot });
                next
            }
        }
    }

    /// The hash of every entry's key, in position order.
    pub(super) fn hashes(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries.iter().map(|e| e.hash)
    }

    /// Every slot, in position order.
    #[cfg(test)]
    pub(super) fn slots(&self) -> impl Iterator<Item = &Slot<V>> {
        self.entries.iter().map(|e| &e.slot)
    }

    /// Calls `visit` with the key and slot of every dirty entry, in the
    /// order they became dirty; the ones `visit` leaves clean leave the
    /// dirty list.
    pub(super) fn retain_dirty(&mut self, mut visit: impl FnMut(&[u8], &mut Slot<V>)) {
        let entries = &mut self.entries;
        self.dirty.retain(|&i| {
            let e = &mut entries[i as usize];
            debug_assert!(e.slot.dirty, "a clean entry on the dirty list");
            visit(e.key.as_bytes(), &mut e.slot);
            e.slot.dirty
        });
    }

    /// Keeps the entries `keep` accepts, seeing each one's hash and slot in
    /// position order (it may change the slot but not clean it), and
    /// rebuilds the index and the dirty list; returns how many it dropped.
    /// Storage far larger than what is left is given back.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u64, &mut Slot<V>) -> bool) -> usize {
        let before = self.entries.len();
        self.entries.retain_mut(|e| keep(e.hash, &mut e.slot));
        let dropped = before - self.entries.len();
        if dropped > 0 {
            self.forget_expected();
            self.rebuild();
        }
        dropped
    }

    /// Rebuilds the index and the dirty list from `entries`.
    fn rebuild(&mut self) {
        let n = self.entries.len();
        if self.entries.capacity() > 4 * n.max(64) {
            self.entries.shrink_to(2 * n);
        }
        if self.index.capacity() > 4 * n.max(64) {
            self.index = HashTable::with_capacity(n);
        } else {
            self.index.clear();
        }
        let entries = &self.entries;
        for (i, e) in entries.iter().enumerate() {
            self.index
                .insert_unique(e.hash, position(i), |&j| entries[j as usize].hash);
        }
        self.dirty.clear();
        self.dirty
            .extend((0..n).filter(|&i| entries[i].slot.dirty).map(position));
    }

    /// Drops every entry and gives back their storage.
    pub(super) fn clear(&mut self) {
        *self = Table {
            hasher: self.hasher.clone(),
            ..Table::new()
        };
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn key_of(key: &str) -> KeyBytes {
        Probe::new(key.as_bytes()).to_key()
    }

    fn slot(value: u32, dirty: bool) -> Slot<u32> {
        Slot {
            value: Some(value),
            dirty,
            hot: false,
            size: 0,
        }
    }

    /// Checks the invariants against a model: the key of every entry and
    /// whether it is dirty.
    fn check(t: &Table<u32>, model: &HashMap<String, (u32, bool)>) {
        assert_eq!(t.len(), model.len());
        assert_eq!(t.index.len(), model.len());
        for (k, &(v, dirty)) in model {
            let i = t
                .find(k.as_bytes())
                .unwrap_or_else(|_| panic!("{k} missing"));
            assert_eq!(t.entries[i].key.as_bytes(), k.as_bytes());
            assert_eq!(t.entries[i].slot.value, Some(v));
            assert_eq!(t.entries[i].slot.dirty, dirty);
        }
        let mut listed: Vec<u32> = t.dirty.clone();
        listed.sort_unstable();
        listed.dedup();
        assert_eq!(listed.len(), t.dirty.len(), "a position listed twice");
        let dirty: Vec<u32> = (0..t.len())
            .filter(|&i| t.entries[i].slot.dirty)
            .map(position)
            .collect();
        assert_eq!(listed, dirty);
    }

    /// Inserts, dirtying, write-backs and evictions in a pseudo-random
    /// order, checked against a map after every step.
    #[test]
    fn the_index_and_the_dirty_list_follow_every_change() {
        let mut t: Table<u32> = Table::new();
        let mut model: HashMap<String, (u32, bool)> = HashMap::new();
        let mut x: u64 = 7;
        for step in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = format!("k{}", (x >> 33) % 500);
            match (x >> 20) % 10 {
                0..=4 => {
                    let dirty = (x >> 10).is_multiple_of(2);
                    let hash = t
                        .find(key.as_bytes())
                        .err()
                        .unwrap_or(KeyHash(Probe::new(key.as_bytes()).hash(&t.hasher)));
                    let i = t.find_or_insert(hash, key_of(&key), || slot(step, dirty));
                    model.entry(key).or_insert((step, dirty));
                    assert!(i < t.len());
                }
                5..=7 => {
                    if (x >> 40).is_multiple_of(16) {
                        // The positions of this key and a few others.
                        let ahead: Vec<u32> = std::iter::once(key.clone())
                            .chain((1..4).map(|j| format!("k{}", (x >> (j * 8)) % 500)))
                            .map(|k| t.find(k.as_bytes()).map_or(UNKNOWN, position))
                            .collect();
                        t.expect(ahead);
                    }
                    let found = t.find_next(key.as_bytes());
                    assert_eq!(found.is_ok(), model.contains_key(&key));
                    if let Ok(i) = found {
                        assert_eq!(t.entries[i].key.as_bytes(), key.as_bytes());
                        t.with(i, |s| {
                            s.value = Some(step);
                            s.dirty = true;
                        });
                        model.insert(key, (step, true));
                    }
                }
                8 => {
                    // Cleans every other dirty entry.
                    let mut n = 0u32;
                    t.retain_dirty(|k, s| {
                        n += 1;
                        if n.is_multiple_of(2) {
                            s.dirty = false;
                            model.get_mut(std::str::from_utf8(k).unwrap()).unwrap().1 = false;
                        }
                    });
                }
                _ => {
                    // Drops clean entries with odd values.
                    let dropped = t.retain(|_, s| s.dirty || s.value.unwrap().is_multiple_of(2));
                    let before = model.len();
                    model.retain(|_, &mut (v, dirty)| dirty || v.is_multiple_of(2));
                    assert_eq!(dropped, before - model.len());
                }
            }
            check(&t, &model);
        }
        t.clear();
        assert!(t.is_empty() && t.find(b"k1").is_err() && t.dirty.is_empty());
    }

    fn insert(t: &mut Table<u32>, key: &str) -> u32 {
        let hash = t.find(key.as_bytes()).unwrap_err();
        position(t.find_or_insert(hash, key_of(key), || slot(0, false)))
    }

    /// Expected positions answer lookups in order; a key out of order, or
    /// an eviction, ends the expectation, and every lookup still finds its
    /// key.
    #[test]
    fn expected_positions_answer_lookups_until_one_differs() {
        let mut t: Table<u32> = Table::new();
        let [a, b, c] = ["a", "b", "c"].map(|k| insert(&mut t, k));
        t.expect(vec![b, UNKNOWN, a, c]);
        assert_eq!(t.find_next(b"b").ok(), Some(b as usize));
        // An unknown position is a lookup of its own.
        assert_eq!(t.find_next(b"c").ok(), Some(c as usize));
        assert_eq!((t.ahead.len(), t.next), (4, 2));
        assert_eq!(t.find_next(b"a").ok(), Some(a as usize));
        // Out of order: found all the same, and the rest is dropped.
        assert_eq!(t.find_next(b"b").ok(), Some(b as usize));
        assert!(t.ahead.is_empty());
        assert_eq!(t.find_next(b"c").ok(), Some(c as usize));
        assert!(t.find_next(b"d").is_err());

        t.expect(vec![c, a]);
        let dropped = t.retain(|_, s| s.value != Some(0) || s.dirty);
        assert_eq!(dropped, 3);
        assert!(t.ahead.is_empty(), "positions of an evicted table");
        let d = insert(&mut t, "d");
        t.expect(vec![d]);
        t.clear();
        assert!(t.ahead.is_empty() && t.find_next(b"d").is_err());
    }

    /// A write-back's pass sees the dirty entries only, however many clean
    /// ones there are.
    #[test]
    fn dirty_entries_are_visited_in_the_order_they_became_dirty() {
        let mut t: Table<u32> = Table::new();
        for i in 0..10_000 {
            let key = format!("clean{i}");
            let hash = t.find(key.as_bytes()).unwrap_err();
            t.find_or_insert(hash, key_of(&key), || slot(0, false));
        }
        for k in ["a", "b", "c"] {
            let hash = t.find(k.as_bytes()).unwrap_err();
            t.insert_new(hash, key_of(k), slot(0, false));
        }
        for k in ["c", "a", "b", "a"] {
            let i = t.find(k.as_bytes()).ok().unwrap();
            t.with(i, |s| s.dirty = true);
        }
        let mut seen = Vec::new();
        t.retain_dirty(|k, _| seen.push(String::from_utf8(k.to_vec()).unwrap()));
        assert_eq!(seen, ["c", "a", "b"]);
    }
}
