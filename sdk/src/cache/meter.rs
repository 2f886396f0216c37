//! What one store's entries are charged against the instance's budget
//! ([`Meter`]), and the cached form of an entry ([`Slot`]).

use super::*;

/// Adds `delta` to `cell`.
pub(super) fn add(cell: &Cell<usize>, delta: usize) {
    cell.set(cell.get() + delta);
}

/// Subtracts `delta` from `cell`.
pub(super) fn sub(cell: &Cell<usize>, delta: usize) {
    cell.set(cell.get() - delta);
}

/// A size as a slot keeps it, saturated.
pub(super) fn size32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A cached value; `None` when the host holds nothing (or it was removed).
pub(super) struct Slot<V> {
    pub(super) value: Option<V>,
    pub(super) dirty: bool,
    /// Changed again while dirty since the last partial write-back looked
    /// at it: that write-back leaves it dirty (and clears this), since a
    /// key that keeps changing would soon be dirty again.
    pub(super) hot: bool,
    /// Bytes of its encoded state key and value: measured when read from
    /// the host or written back, else estimated.
    pub(super) size: u32,
}

/// The charges of one store's entries: each is charged its [`Slot::size`]
/// plus `overhead`. Keeps its totals and those of the instance's
/// [`Budget`] equal to the sums over the store's slots, and the running
/// means of the encoded keys and values it has measured, for the sizes it
/// estimates.
pub(super) struct Meter {
    /// The table's share per entry ([`Table::bytes_per_entry`]), plus
    /// [`HEAP_SLACK`].
    pub(super) overhead: usize,
    pub(super) bytes: usize,
    pub(super) dirty_entries: usize,
    pub(super) dirty_bytes: usize,
    pub(super) budget: Rc<Budget>,
    /// Encoded keys measured: how many, and their bytes.
    pub(super) keys: (u64, u64),
    /// Encoded values measured (absent ones aside): how many, their bytes.
    pub(super) values: (u64, u64),
    /// Sets of keys that were not cached, for sampling.
    pub(super) sets: u64,
}

impl Meter {
    pub(super) fn for_entries<V>(budget: Rc<Budget>) -> Meter {
        Meter {
            overhead: Table::<V>::bytes_per_entry() + HEAP_SLACK,
            bytes: 0,
            dirty_entries: 0,
            dirty_bytes: 0,
            budget,
            keys: (0, 0),
            values: (0, 0),
            sets: 0,
        }
    }

    pub(super) fn charge(&self, size: u32) -> usize {
        size as usize + self.overhead
    }

    /// Records the sizes of an encoded key and value (`None`: absent)
    /// for the means; returns the entry's size.
    pub(super) fn measured(&mut self, key: usize, value: Option<usize>) -> usize {
        self.keys = (self.keys.0 + 1, self.keys.1 + key as u64);
        if let Some(v) = value {
            self.values = (self.values.0 + 1, self.values.1 + v as u64);
        }
        key + value.unwrap_or(0)
    }

    pub(super) fn mean(&(n, bytes): &(u64, u64)) -> usize {
        match n {
            0 => FIRST_ESTIMATE,
            n => (bytes / n) as usize,
        }
    }

    /// The estimated size of an entry of an unmeasured key, and of an
    /// unmeasured value if `present`.
    pub(super) fn estimate(&self, present: bool) -> usize {
        Self::mean(&self.keys) + if present { Self::mean(&self.values) } else { 0 }
    }

    /// Whether to measure this set of an uncached key exactly.
    pub(super) fn sample(&mut self) -> bool {
        self.sets += 1;
        self.sets <= SAMPLED_FIRST || self.sets.is_multiple_of(SAMPLE_EVERY)
    }

    /// Counts a new slot, clean.
    pub(super) fn cached<V>(&mut self, slot: &Slot<V>) {
        debug_assert!(!slot.dirty);
        let c = self.charge(slot.size);
        self.bytes += c;
        add(&self.budget.used, c);
    }

    /// Uncounts a clean slot that is dropped.
    pub(super) fn dropped<V>(&mut self, slot: &Slot<V>) {
        debug_assert!(!slot.dirty, "dropping a dirty entry");
        let c = self.charge(slot.size);
        self.bytes -= c;
        sub(&self.budget.used, c);
    }

    /// Charges `slot` for `size` bytes from now on.
    pub(super) fn resized<V>(&mut self, slot: &mut Slot<V>, size: usize) {
        let old = self.charge(slot.size);
        slot.size = size32(size);
        let new = self.charge(slot.size);
        self.bytes = self.bytes - old + new;
        sub(&self.budget.used, old);
        add(&self.budget.used, new);
        if slot.dirty {
            self.dirty_bytes = self.dirty_bytes - old + new;
            sub(&self.budget.dirty, old);
            add(&self.budget.dirty, new);
        }
    }

    /// Stores `value` in `slot`, dirty; `was_absent`: the slot held no
    /// value before. A slot that was clean and absent was measured without
    /// a value: it is charged a value's estimate on top when `value` is one.
    pub(super) fn set<V>(&mut self, slot: &mut Slot<V>, was_absent: bool, value: Option<V>) {
        if !slot.dirty && was_absent && value.is_some() {
            let size = slot.size as usize + Self::mean(&self.values);
            self.resized(slot, size);
        }
        slot.value = value;
        self.dirtied(slot);
    }

    /// Marks `slot` dirty (hot if it already was).
    pub(super) fn dirtied<V>(&mut self, slot: &mut Slot<V>) {
        if slot.dirty {
            slot.hot = true;
        } else {
            slot.dirty = true;
            let c = self.charge(slot.size);
            self.dirty_entries += 1;
            self.dirty_bytes += c;
            add(&self.budget.dirty, c);
        }
    }

    /// Marks a dirty `slot` clean, written back with a key of `key` bytes
    /// and a value of `value` bytes (`None`: a deletion).
    pub(super) fn cleaned<V>(&mut self, slot: &mut Slot<V>, key: usize, value: Option<usize>) {
        debug_assert!(slot.dirty);
        let size = self.measured(key, value);
        self.resized(slot, size);
        let c = self.charge(slot.size);
        slot.dirty = false;
        slot.hot = false;
        self.dirty_entries -= 1;
        self.dirty_bytes -= c;
        sub(&self.budget.dirty, c);
    }

    /// Uncounts every slot; they must all be clean.
    pub(super) fn clear(&mut self) {
        debug_assert_eq!(self.dirty_entries, 0, "evicting dirty entries");
        sub(&self.budget.used, self.bytes);
        self.bytes = 0;
    }
}

/// Caches `value` under `key`, clean, unless `key` is cached; returns its
/// position. `sizes`: of the encoded key and value read from the host.
pub(super) fn insert_read<V>(
    table: &mut Table<V>,
    meter: &mut Meter,
    (hash, key): (KeyHash, KeyBytes),
    value: Option<V>,
    (key_len, value_len): (usize, Option<usize>),
) -> usize {
    table.find_or_insert(hash, key, || {
        let slot = Slot {
            value,
            dirty: false,
            hot: false,
            size: size32(meter.measured(key_len, value_len)),
        };
        meter.cached(&slot);
        slot
    })
}
