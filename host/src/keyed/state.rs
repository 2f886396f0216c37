//! [`KeyedState`]: the host-owned keyed state of one operator instance, kept
//! in memory with change tracking for incremental checkpoints.
//!
//! Layout: keys and values live in one byte arena, each key directly
//! followed by its value's room; a fixed-size `Slot` per key holds where
//! (offset, lengths, flags); a hash table of slot ids, each with 32 bits of
//! its key's hash (foldhash with a random seed per state: keys are
//! plugin-controlled), finds a key's slot in one probe, and grows without
//! reading a key again. No point operation allocates per key. The key order exists
//! only once something scans (`order`); the changes of a checkpoint are
//! listed from the dirty slot ids, in no order (the store sorts them on its
//! own thread), as [`StateChanges`].
//!
//! Invariants:
//! - A slot is *in the table* iff `table` holds its id, with the `tag`
//!   of its key (the table places it by `spread` of the tag); then it is live
//!   (`val_len` is its value's length) or a tombstone (`val_len ==
//!   TOMBSTONE`); otherwise it is removed (`val_len == REMOVED`). No two
//!   slots in the table have the same key.
//! - A slot in the table owns `arena[off .. off + key_len + room]`: its key,
//!   then its value (`val_len` bytes, none for a tombstone), then
//!   `slack = room - value length < 2^23` unused bytes; `used` sums
//!   `key_len + room` over those slots; the rest of `arena` (removed slots'
//!   and overwritten bytes) is garbage. The arena is compacted (rebuilt
//!   from the slots in the table) when it must grow while garbage exceeds
//!   `used`: amortized O(1) per byte written.
//! - A slot is dirty (`DIRTY` set) iff its key was written or deleted since
//!   the last [`KeyedState::take_changes`] (a key written back to its old
//!   value is still reported); `dirty` lists the dirty slots, each once.
//! - A tombstone is dirty: a deleted key keeps its slot until the next
//!   `take_changes` reports it, then leaves the table. Tombstones are
//!   invisible to reads.
//! - A removed slot is in `free`, or in the ordered index (then not in
//!   `free`: its key bytes stay valid for the index's comparisons until the
//!   index lets it go), or was let go by the index for reuse.
//! - `order` is `None` until the first scan; from then on it indexes every
//!   slot in the table (see `order`). Operators that never scan pay
//!   nothing for order.
//! - Slots `0 .. presorted` are in the table, in ascending key order (as a
//!   restore from sorted entries leaves them); removing one lowers
//!   `presorted` to its id.
//! - `live` counts live slots; `bytes` sums their key and value lengths.

mod keysort;
mod order;
mod prefetch;

use std::cell::{Ref, RefCell};
use std::fmt;
use std::hash::{BuildHasher, Hasher};

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

pub use super::changes::{Iter as ChangesIter, StateChanges};
pub(crate) use keysort::sort_stable_by_bytes;
use order::{Order, Scan};
pub use prefetch::PREFETCH_GROUP;

/// `Slot::val_len` of a tombstone.
const TOMBSTONE: u32 = u32::MAX;
/// `Slot::val_len` of a slot not in the table.
const REMOVED: u32 = u32::MAX - 1;
/// Bits of `Slot::word` holding the arena offset: arenas up to 1 TiB.
const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// Largest slack a slot keeps; shrinking a value by more leaves the rest
/// as garbage.
const MAX_SLACK: u32 = (1 << 23) - 1;
/// `Slot::word` flag: changed since the last checkpoint.
const DIRTY: u64 = 1 << 63;

/// Where one key and its value lie in the arena, and its flags (16 bytes).
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// Bits 0..40: arena offset of the key; 40..63: slack; 63: dirty.
    word: u64,
    key_len: u32,
    /// Value length, or `TOMBSTONE` or `REMOVED`.
    val_len: u32,
}

impl Slot {
    fn new(off: usize, key_len: u32, val_len: u32) -> Self {
        let mut slot = Slot {
            word: 0,
            key_len,
            val_len,
        };
        slot.place(off, 0);
        slot
    }

    fn off(&self) -> usize {
        (self.word & OFFSET_MASK) as usize
    }

    fn slack(&self) -> u32 {
        ((self.word >> OFFSET_BITS) as u32) & MAX_SLACK
    }

    /// Moves the slot to `off` with `slack` spare bytes, keeping its flags.
    fn place(&mut self, off: usize, slack: u32) {
        assert!(
            (off as u64) <= OFFSET_MASK,
            "a keyed state arena of 1 TiB or more"
        );
        debug_assert!(slack <= MAX_SLACK);
        self.word = (self.word & DIRTY) | (u64::from(slack) << OFFSET_BITS) | off as u64;
    }

    fn is_dirty(&self) -> bool {
        self.word & DIRTY != 0
    }

    fn is_live(&self) -> bool {
        self.val_len < REMOVED
    }

    fn in_table(&self) -> bool {
        self.val_len != REMOVED
    }

    /// Value bytes (0 for a tombstone).
    fn value_len(&self) -> u32 {
        if self.is_live() { self.val_len } else { 0 }
    }

    /// Bytes the value may grow to in place.
    fn room(&self) -> u32 {
        self.value_len() + self.slack()
    }
}

/// A slot in the table: its id and its key's [`tag`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    id: u32,
    tag: u32,
}

/// The hash the table places a key of tag `tag` by: the tag in the low
/// half (the bucket index) and again in the high half (hashbrown's 7-bit
/// control tag comes from the top bits).
fn spread(tag: u32) -> u64 {
    u64::from(tag) << 32 | u64::from(tag)
}

/// Read access to the slots and the arena, for the ordered index.
#[derive(Clone, Copy)]
struct View<'a> {
    slots: &'a [Slot],
    arena: &'a [u8],
}

impl<'a> View<'a> {
    fn key(self, id: u32) -> &'a [u8] {
        let s = &self.slots[id as usize];
        &self.arena[s.off()..s.off() + s.key_len as usize]
    }

    /// The value of slot `id` if it is live.
    fn value(self, id: u32) -> Option<&'a [u8]> {
        let s = &self.slots[id as usize];
        s.is_live().then(|| {
            let at = s.off() + s.key_len as usize;
            &self.arena[at..at + s.val_len as usize]
        })
    }

    fn in_table(self, id: u32) -> bool {
        self.slots[id as usize].in_table()
    }
}

/// A length as stored in a slot.
fn stored_len(len: usize) -> u32 {
    u32::try_from(len)
        .ok()
        .filter(|&n| n < REMOVED)
        .expect("state keys and values are under 4 GiB")
}

/// In-memory keyed state with change tracking for incremental checkpoints.
///
/// Keys and values are under 4 GiB each (they come from a 32-bit Wasm
/// memory).
///
/// ```
/// let mut s = weir::keyed::state::KeyedState::default();
/// s.put(b"a", b"1");
/// assert_eq!(s.get(b"a"), Some(&b"1"[..]));
/// let changes = s.take_changes();
/// assert_eq!(changes.iter().collect::<Vec<_>>(), [(&b"a"[..], Some(&b"1"[..]))]);
/// assert!(s.take_changes().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct KeyedState {
    /// Keys, values and their slots.
    arena: Arena,
    /// The slots in the table, by the hash of their key.
    table: HashTable<Bucket>,
    hasher: RandomState,
    /// Removed slots free for new keys.
    free: Vec<u32>,
    /// The dirty slots.
    dirty: Vec<u32>,
    /// The key order, from the first scan on.
    order: RefCell<Option<Order>>,
    presorted: u32,
    live: usize,
    bytes: usize,
}

/// The byte arena and the slots that place keys and values in it.
#[derive(Debug, Clone, Default)]
struct Arena {
    bytes: Vec<u8>,
    slots: Vec<Slot>,
    /// Arena bytes owned by slots in the table.
    used: usize,
}

impl Arena {
    fn view(&self) -> View<'_> {
        View {
            slots: &self.slots,
            arena: &self.bytes,
        }
    }

    /// Stores `value` in slot `id` (in the table): in place if it fits the
    /// room, else appended with the key (the old bytes become garbage).
    fn overwrite(&mut self, id: u32, value: &[u8], order: Option<&mut Order>) {
        let vlen = stored_len(value.len());
        let slot = self.slots[id as usize];
        let room = slot.room();
        if vlen <= room {
            let at = slot.off() + slot.key_len as usize;
            self.bytes[at..at + value.len()].copy_from_slice(value);
            let spare = room - vlen;
            let slack = spare.min(MAX_SLACK);
            self.used -= (spare - slack) as usize;
            let s = &mut self.slots[id as usize];
            s.place(slot.off(), slack);
            s.val_len = vlen;
            return;
        }
        let klen = slot.key_len as usize;
        // Room first: compacting moves the slot.
        self.reserve(klen + value.len(), order);
        let old = self.slots[id as usize];
        let off = self.bytes.len();
        self.bytes.extend_from_within(old.off()..old.off() + klen);
        self.bytes.extend_from_slice(value);
        self.used += value.len() - old.room() as usize;
        let s = &mut self.slots[id as usize];
        s.place(off, 0);
        s.val_len = vlen;
    }

    /// Appends `key` then `value`, owned by a new slot; returns their
    /// offset.
    fn append(&mut self, key: &[u8], value: &[u8], order: Option<&mut Order>) -> usize {
        self.reserve(key.len() + value.len(), order);
        let off = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        self.used += key.len() + value.len();
        off
    }

    /// Makes room for `n` more bytes: compacts if garbage exceeds the bytes
    /// in use, else grows the arena by half (at least).
    fn reserve(&mut self, n: usize, order: Option<&mut Order>) {
        if self.bytes.capacity() - self.bytes.len() >= n {
            return;
        }
        let garbage = self.bytes.len() - self.used;
        if garbage > self.used {
            self.compact(n, order);
        } else {
            let grow = n.max(self.bytes.capacity() / 2).max(64);
            self.bytes.reserve_exact(grow);
        }
    }

    /// Rebuilds the arena from the slots in the table, with room for `n`
    /// more bytes and half as much again as in use; drops slack.
    fn compact(&mut self, n: usize, order: Option<&mut Order>) {
        if let Some(order) = order {
            // Removed slots in the index keep their keys until now.
            order.purge(self.view());
        }
        let mut bytes = Vec::with_capacity(self.used + n + (self.used + n) / 2);
        for s in self.slots.iter_mut().filter(|s| s.in_table()) {
            let len = (s.key_len + s.value_len()) as usize;
            let off = bytes.len();
            bytes.extend_from_slice(&self.bytes[s.off()..s.off() + len]);
            s.place(off, 0);
        }
        self.used = bytes.len();
        self.bytes = bytes;
    }
}

impl KeyedState {
    /// State holding `entries`, with nothing dirty (as restored from a
    /// checkpoint). A later entry for the same key wins. Entries sorted by
    /// key (as the checkpoint store hands them over) make the first scan
    /// cheap.
    ///
    /// ```
    /// let s = weir::keyed::state::KeyedState::from_entries([(b"k".to_vec(), b"v".to_vec())]);
    /// assert_eq!(s.len(), 1);
    /// assert_eq!(s.dirty_len(), 0);
    /// ```
    pub fn from_entries<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut entries = entries.into_iter();
        let n = entries.size_hint().0;
        let mut s = KeyedState {
            table: HashTable::with_capacity(n),
            ..KeyedState::default()
        };
        s.arena.slots.reserve_exact(n);
        // Strictly ascending entries (as a restore hands them over) are
        // unique: they go to the arena first, then to the table in bulk.
        let mut unsorted = None;
        for (k, v) in entries.by_ref() {
            let (key, value) = (k.as_ref(), v.as_ref());
            let last = s.arena.slots.len();
            if last > 0 && s.view().key(last as u32 - 1) >= key {
                unsorted = Some((k, v));
                break;
            }
            let (klen, vlen) = (stored_len(key.len()), stored_len(value.len()));
            let off = s.arena.append(key, value, None);
            s.arena.slots.push(Slot::new(off, klen, vlen));
            s.live += 1;
            s.bytes += key.len() + value.len();
        }
        s.presorted = u32::try_from(s.arena.slots.len()).expect("under 2^32 keys");
        s.index_presorted();
        for (k, v) in unsorted.into_iter().chain(entries) {
            s.write(k.as_ref(), v.as_ref(), usize::MAX, false)
                .expect("no limit");
        }
        s
    }

    /// Puts slots `0 .. presorted` (unique keys, none in the table yet) into
    /// the table, in the order of their buckets: the table fills front to
    /// back instead of at random.
    fn index_presorted(&mut self) {
        let n = self.presorted as usize;
        let view = self.arena.view();
        self.table.reserve(n, |b| spread(b.tag));
        // hashbrown's bucket count for its capacity (a power of two); the
        // first probe of a hash is its low bits.
        let buckets = (self.table.capacity() + 1).next_power_of_two();
        let bits = buckets.trailing_zeros();
        let shift = bits - bits.min(12);
        let part = |h: u64| (h as usize & (buckets - 1)) >> shift;
        let hashes: Vec<(u64, u32)> = (0..n as u32)
            .map(|id| (spread(self.tag(view.key(id))), id))
            .collect();
        // A counting sort by the leading bits of the first probe.
        let mut starts = vec![0usize; (buckets >> shift) + 1];
        for &(h, _) in &hashes {
            starts[part(h) + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut sorted = vec![(0u64, 0u32); n];
        for &(h, id) in &hashes {
            let at = &mut starts[part(h)];
            sorted[*at] = (h, id);
            *at += 1;
        }
        drop(hashes);
        for (h, id) in sorted {
            let bucket = Bucket { id, tag: h as u32 };
            self.table.insert_unique(h, bucket, |b| spread(b.tag));
        }
    }

    fn view(&self) -> View<'_> {
        self.arena.view()
    }

    /// 32 bits of `key`'s hash.
    fn tag(&self, key: &[u8]) -> u32 {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        h.finish() as u32
    }

    /// The slot of `key` in the table, if any.
    fn find(&self, key: &[u8]) -> Option<u32> {
        let tag = self.tag(key);
        let view = self.view();
        self.table
            .find(spread(tag), |b| b.tag == tag && view.key(b.id) == key)
            .map(|b| b.id)
    }

    /// The value under `key`. One hash probe.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.view().value(self.find(key)?)
    }

    /// Stores `value` under `key`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        let stored = self.put_within(key, value, usize::MAX);
        debug_assert!(stored.is_ok(), "no limit");
    }

    /// Stores `value` under `key` unless the state would then hold more than
    /// `max_bytes` of keys and values; then nothing changes and the size it
    /// would have had is returned. One hash probe; no allocation unless the
    /// state grows.
    ///
    /// ```
    /// let mut s = weir::keyed::state::KeyedState::default();
    /// assert!(s.put_within(b"k", &[0; 9], 10).is_ok());
    /// assert_eq!(s.put_within(b"k", &[0; 10], 10), Err(11));
    /// assert_eq!(s.bytes(), 10);
    /// ```
    pub fn put_within(&mut self, key: &[u8], value: &[u8], max_bytes: usize) -> Result<(), usize> {
        self.write(key, value, max_bytes, true)
    }

    /// `put_within`, marking the key dirty if `dirty`.
    fn write(
        &mut self,
        key: &[u8],
        value: &[u8],
        max_bytes: usize,
        dirty: bool,
    ) -> Result<(), usize> {
        let (klen, vlen) = (stored_len(key.len()), stored_len(value.len()));
        let tag = self.tag(key);
        let view = self.arena.view();
        let entry = self.table.entry(
            spread(tag),
            |b| b.tag == tag && view.key(b.id) == key,
            |b| spread(b.tag),
        );
        let id = match entry {
            Entry::Occupied(e) => {
                let id = e.get().id;
                let slot = self.arena.slots[id as usize];
                let after = match slot.is_live() {
                    true => self.bytes - slot.val_len as usize + value.len(),
                    false => self.bytes + key.len() + value.len(),
                };
                if after > max_bytes {
                    return Err(after);
                }
                if !slot.is_live() {
                    self.live += 1;
                }
                self.bytes = after;
                self.arena
                    .overwrite(id, value, self.order.get_mut().as_mut());
                id
            }
            Entry::Vacant(e) => {
                let after = self.bytes + key.len() + value.len();
                if after > max_bytes {
                    return Err(after);
                }
                let order = self.order.get_mut();
                let off = self.arena.append(key, value, order.as_mut());
                let slot = Slot::new(off, klen, vlen);
                let slots = &mut self.arena.slots;
                let id = match self.free.pop().or_else(|| order.as_mut()?.reuse()) {
                    Some(id) => {
                        slots[id as usize] = slot;
                        id
                    }
                    None => {
                        if slots.len() == slots.capacity() {
                            slots.reserve_exact((slots.len() / 2).max(16));
                        }
                        slots.push(slot);
                        u32::try_from(slots.len() - 1).expect("under 2^32 keys")
                    }
                };
                e.insert(Bucket { id, tag });
                if let Some(order) = order {
                    order.add(id);
                }
                self.live += 1;
                self.bytes = after;
                id
            }
        };
        if dirty {
            self.mark_dirty(id);
        }
        Ok(())
    }

    fn mark_dirty(&mut self, id: u32) {
        let s = &mut self.arena.slots[id as usize];
        if !s.is_dirty() {
            s.word |= DIRTY;
            self.dirty.push(id);
        }
    }

    /// Removes `key`; its deletion is reported by the next
    /// [`take_changes`](Self::take_changes). One hash probe.
    pub fn delete(&mut self, key: &[u8]) {
        let Some(id) = self.find(key) else {
            return;
        };
        let s = &mut self.arena.slots[id as usize];
        if !s.is_live() {
            return;
        }
        let slack = s.room().min(MAX_SLACK);
        self.arena.used -= (s.room() - slack) as usize;
        self.live -= 1;
        self.bytes -= (s.key_len + s.val_len) as usize;
        let off = s.off();
        s.place(off, slack);
        s.val_len = TOMBSTONE;
        self.mark_dirty(id);
    }

    /// Up to `limit` entries whose key starts with `prefix`, after `after`,
    /// in key order. The first scan builds the key order (O(n log n), O(n)
    /// after a restore); later ones only sort in the keys added since.
    ///
    /// ```
    /// let mut s = weir::keyed::state::KeyedState::from_entries(
    ///     ["a1", "a2", "a3", "b1"].map(|k| (k, "")));
    /// s.delete(b"a2");
    /// let keys: Vec<_> = s.scan(b"a", Some(b"a1"), 10).map(|(k, _)| k.to_vec()).collect();
    /// assert_eq!(keys, [b"a3".to_vec()]);
    /// ```
    pub fn scan<'a>(
        &'a self,
        prefix: &'a [u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        Scan::new(self.view(), self.ordered(), prefix, after, limit)
    }

    /// The key order, built or brought up to date first.
    fn ordered(&self) -> Ref<'_, Order> {
        let fresh = self.order.borrow().as_ref().is_some_and(Order::is_fresh);
        if !fresh {
            // No `Ref` of the order is alive: one would have seen it fresh,
            // and only `&mut self` methods add keys to it.
            let mut order = self.order.borrow_mut();
            match order.as_mut() {
                Some(o) => o.refresh(self.view()),
                None => {
                    let slots = &self.arena.slots;
                    let others = (self.presorted..slots.len() as u32)
                        .filter(|&id| slots[id as usize].in_table());
                    *order = Some(Order::build(self.presorted, others, self.view()));
                }
            }
        }
        Ref::map(self.order.borrow(), |o| o.as_ref().expect("built above"))
    }

    /// Total bytes of keys and values.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Bytes of memory the state holds: its arena, slots, hash table, lists
    /// of slot ids and key order (once built), by capacity.
    ///
    /// ```
    /// let mut s = weir::keyed::state::KeyedState::default();
    /// s.put(b"key", b"value");
    /// assert!(s.memory_bytes() >= s.bytes());
    /// ```
    pub fn memory_bytes(&self) -> usize {
        let ids = self.free.capacity() + self.dirty.capacity();
        self.arena.bytes.capacity()
            + self.arena.slots.capacity() * size_of::<Slot>()
            + self.table.allocation_size()
            + ids * size_of::<u32>()
            + self.order.borrow().as_ref().map_or(0, Order::memory_bytes)
    }

    /// Every entry in key order (sorted on demand: for tests and
    /// inspection, not for operators' hot paths).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let view = self.view();
        let slots = &self.arena.slots;
        let mut ids: Vec<u32> = (0..slots.len() as u32)
            .filter(|&id| slots[id as usize].is_live())
            .collect();
        order::sort_by_key(&mut ids, view);
        ids.into_iter()
            .map(move |id| (view.key(id), view.value(id).expect("live")))
    }

    /// The keys changed since the last call, with their new value (`None`
    /// for deleted), in no particular order; clears the change flags and
    /// drops the tombstones. Copies the dirty keys and values once;
    /// O(changes), whatever the size of the state.
    pub fn take_changes(&mut self) -> StateChanges {
        let view = self.view();
        let bytes = self.dirty.iter().enumerate().map(|(i, &id)| {
            if let Some(&next) = self.dirty.get(i + prefetch::AHEAD) {
                view.prefetch_slot(next);
            }
            let s = &view.slots[id as usize];
            (s.key_len + s.value_len()) as usize
        });
        let mut out = StateChanges::with_capacity(self.dirty.len(), bytes.sum());
        let mut tombstones = 0;
        for (i, &id) in self.dirty.iter().enumerate() {
            if let Some(&next) = self.dirty.get(i + prefetch::AHEAD / 2) {
                view.prefetch_entry(next);
            }
            let value = view.value(id);
            out.push(view.key(id), value);
            tombstones += usize::from(value.is_none());
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        for &id in &dirty {
            self.arena.slots[id as usize].word &= !DIRTY;
        }
        if tombstones > 0 {
            for &id in &dirty {
                if !self.arena.slots[id as usize].is_live() {
                    self.remove(id);
                }
            }
        }
        dirty.clear();
        self.dirty = dirty;
        out
    }

    /// Takes tombstone `id` out of the table.
    fn remove(&mut self, id: u32) {
        let tag = self.tag(self.view().key(id));
        match self.table.find_entry(spread(tag), |b| b.id == id) {
            Ok(e) => {
                e.remove();
            }
            Err(_) => unreachable!("a tombstone is in the table"),
        }
        let s = &mut self.arena.slots[id as usize];
        self.arena.used -= (s.key_len + s.room()) as usize;
        s.val_len = REMOVED;
        self.presorted = self.presorted.min(id);
        match self.order.get_mut() {
            Some(order) => order.removed(self.arena.view()),
            None => self.free.push(id),
        }
    }

    /// Number of keys changed since the last [`take_changes`](Self::take_changes).
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }
}

impl fmt::Debug for KeyedState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedState")
            .field("len", &self.live)
            .field("bytes", &self.bytes)
            .field("dirty", &self.dirty.len())
            .field("memory_bytes", &self.memory_bytes())
            .field("ordered", &self.order.borrow().is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests;
