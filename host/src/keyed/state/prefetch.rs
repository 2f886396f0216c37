//! Warming the CPU caches for a group of point operations on a
//! [`KeyedState`] larger than the caches.
//!
//! A point operation on a cold key takes about four dependent cache misses
//! (the table's control bytes, its bucket, the key's [`Slot`](super::Slot),
//! the key and value in the arena); one after another they, not the
//! instructions, bound `get-many` and `put-many` over a large state. Taking
//! a group of keys stage by stage (all their table probes, then all their
//! slots, then all their arena bytes) lets the misses of different keys
//! overlap: each stage's loads are independent of each other, and the last
//! two stages only issue prefetches.
//!
//! Invariant: prefetching changes nothing and reads nothing but the table
//! and the slots; every operation after it gives what it gives without it.

use super::{KeyedState, View, spread};

/// Keys warmed at once: enough to keep the CPU's outstanding misses busy,
/// few enough that the first key's lines are still cached when its
/// operation runs.
pub const PREFETCH_GROUP: usize = 16;

/// How many ids ahead a walk over slot ids (the dirty list) requests their
/// slots; their arena bytes are requested half as far ahead.
pub(super) const AHEAD: usize = 16;

impl KeyedState {
    /// Brings into the CPU caches what point operations on `keys` (at most
    /// [`PREFETCH_GROUP`] of them; the rest are ignored) will read: the
    /// table's buckets, the keys' slots, their keys and values. A hint
    /// only: it changes nothing.
    ///
    /// ```
    /// let mut s = weir::keyed::state::KeyedState::default();
    /// s.put(b"a", b"1");
    /// s.prefetch([&b"a"[..], b"absent"]);
    /// assert_eq!(s.get(b"a"), Some(&b"1"[..]));
    /// ```
    pub fn prefetch<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) {
        let mut ids = [u32::MAX; PREFETCH_GROUP];
        // Stage 1: the probes, each independent of the others. A bucket of
        // the same tag is the key's slot but for a 2^-32 chance; the
        // operation itself compares the key.
        let view = self.view();
        for (id, key) in ids.iter_mut().zip(keys) {
            let tag = self.tag(key);
            if let Some(b) = self.table.find(spread(tag), |b| b.tag == tag) {
                *id = b.id;
                view.prefetch_slot(b.id);
            }
        }
        // Stage 2: the arena bytes of the slots found.
        for &id in ids.iter().filter(|&&id| id != u32::MAX) {
            view.prefetch_entry(id);
        }
    }
}

impl View<'_> {
    /// Requests the line of slot `id`, if there is one.
    pub(super) fn prefetch_slot(self, id: u32) {
        if let Some(slot) = self.slots.get(id as usize) {
            prefetch_line(std::ptr::from_ref(slot).cast());
        }
    }

    /// Requests the arena lines of slot `id`'s key and value (reading the
    /// slot).
    pub(super) fn prefetch_entry(self, id: u32) {
        let s = &self.slots[id as usize];
        let len = (s.key_len + s.value_len()) as usize;
        if s.off() + len <= self.arena.len() {
            // The first and the last line: most keys and values span one or
            // two.
            let first = self.arena.as_ptr().wrapping_add(s.off());
            prefetch_line(first);
            prefetch_line(first.wrapping_add(len.saturating_sub(1)));
        }
    }
}

/// Asks the CPU to load the cache line holding `at`, without waiting.
#[inline(always)]
fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address;
    // nothing is read through the pointer.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
