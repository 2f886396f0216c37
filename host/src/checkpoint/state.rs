//! [`KeyedState`]: the host-owned keyed state of one operator instance, kept
//! in memory with a dirty flag per key for incremental checkpoints.
//!
//! Point reads and writes (`get`, `put`, `delete`: what operators do per
//! record) go to a hash map; the same keys are also kept in order, for
//! scans, iteration and the sorted changes of a checkpoint. A write to an
//! existing key costs one hash lookup; only a new key also costs an
//! ordered insert.
//!
//! Invariants:
//! - `map` and `order` hold the same keys.
//! - A slot is dirty iff its key was written or deleted since the last
//!   [`KeyedState::take_changes`] (a key written back to its old value is
//!   still reported).
//! - A deleted key keeps a tombstone slot (`value: None`, dirty) until the
//!   next `take_changes` reports it; tombstones are invisible to reads.
//! - `live` counts slots with a value; `bytes` sums their key and value
//!   lengths; `dirty` counts dirty slots.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

/// A key, shared by the hash map and the ordered set.
type Key = Arc<[u8]>;

/// One key's value (or tombstone) and whether it changed since the last
/// checkpoint.
#[derive(Debug, Clone)]
struct Slot {
    value: Option<Vec<u8>>,
    dirty: bool,
}

/// In-memory keyed state with change tracking for incremental checkpoints.
///
/// ```
/// let mut s = weir::checkpoint::state::KeyedState::default();
/// s.put(b"a", b"1");
/// assert_eq!(s.get(b"a"), Some(&b"1"[..]));
/// assert_eq!(s.take_changes(), vec![(b"a".to_vec(), Some(b"1".to_vec()))]);
/// assert!(s.take_changes().is_empty());
/// ```
#[derive(Debug, Default, Clone)]
pub struct KeyedState {
    /// Every key, live or tombstone, with its slot.
    map: HashMap<Key, Slot>,
    /// The keys of `map`, in order.
    order: BTreeSet<Key>,
    live: usize,
    dirty: usize,
    bytes: usize,
}

impl KeyedState {
    /// State holding `entries`, with nothing dirty (as restored from a
    /// checkpoint).
    ///
    /// ```
    /// let s = weir::checkpoint::state::KeyedState::from_entries([(b"k".to_vec(), b"v".to_vec())]);
    /// assert_eq!(s.len(), 1);
    /// assert_eq!(s.dirty_len(), 0);
    /// ```
    pub fn from_entries(entries: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> Self {
        let entries = entries.into_iter();
        let n = entries.size_hint().0;
        let mut map: HashMap<Key, Slot> = HashMap::with_capacity(n);
        let mut keys = Vec::with_capacity(n);
        let mut bytes = 0;
        for (k, v) in entries {
            bytes += k.len() + v.len();
            let key: Key = k.into();
            let slot = Slot {
                value: Some(v),
                dirty: false,
            };
            // A later entry for the same key wins.
            match map.insert(key.clone(), slot) {
                None => keys.push(key),
                Some(old) => bytes -= key.len() + old.value.map_or(0, |v| v.len()),
            }
        }
        // `collect` sorts (linear for sorted input, as a restore passes
        // it) and builds the tree in bulk.
        let order: BTreeSet<Key> = keys.into_iter().collect();
        KeyedState {
            live: map.len(),
            dirty: 0,
            bytes,
            map,
            order,
        }
    }

    /// The value under `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.map.get(key).and_then(|s| s.value.as_deref())
    }

    /// Stores `value` under `key`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        let stored = self.put_within(key, value, usize::MAX);
        debug_assert!(stored.is_ok(), "no limit");
    }

    /// Stores `value` under `key` unless the state would then hold more than
    /// `max_bytes` of keys and values; then nothing changes and the size it
    /// would have had is returned. One hash lookup for an existing key.
    ///
    /// ```
    /// let mut s = weir::checkpoint::state::KeyedState::default();
    /// assert!(s.put_within(b"k", &[0; 9], 10).is_ok());
    /// assert_eq!(s.put_within(b"k", &[0; 10], 10), Err(11));
    /// assert_eq!(s.bytes(), 10);
    /// ```
    pub fn put_within(&mut self, key: &[u8], value: &[u8], max_bytes: usize) -> Result<(), usize> {
        let vlen = value.len();
        if let Some(slot) = self.map.get_mut(key) {
            let after = match &slot.value {
                Some(old) => self.bytes - old.len() + vlen,
                None => self.bytes + key.len() + vlen,
            };
            if after > max_bytes {
                return Err(after);
            }
            if slot.value.replace(value.to_vec()).is_none() {
                self.live += 1;
            }
            self.bytes = after;
            if !slot.dirty {
                slot.dirty = true;
                self.dirty += 1;
            }
            return Ok(());
        }
        let after = self.bytes + key.len() + vlen;
        if after > max_bytes {
            return Err(after);
        }
        self.live += 1;
        self.dirty += 1;
        self.bytes = after;
        let key: Key = key.into();
        self.order.insert(key.clone());
        self.map.insert(
            key,
            Slot {
                value: Some(value.to_vec()),
                dirty: true,
            },
        );
        Ok(())
    }

    /// Removes `key`; its deletion is reported by the next
    /// [`take_changes`](Self::take_changes).
    pub fn delete(&mut self, key: &[u8]) {
        if let Some(slot) = self.map.get_mut(key)
            && let Some(old) = slot.value.take()
        {
            self.live -= 1;
            self.bytes -= key.len() + old.len();
            if !slot.dirty {
                slot.dirty = true;
                self.dirty += 1;
            }
        }
    }

    /// The value of `key`, which `order` holds, if it is live.
    fn live_value(&self, key: &[u8]) -> Option<&[u8]> {
        let slot = self.map.get(key).expect("map and order hold the same keys");
        slot.value.as_deref()
    }

    /// Up to `limit` entries whose key starts with `prefix`, after `after`.
    ///
    /// ```
    /// let mut s = weir::checkpoint::state::KeyedState::from_entries(
    ///     ["a1", "a2", "a3", "b1"].map(|k| (k.as_bytes().to_vec(), vec![])));
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
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        self.order
            .range::<[u8], _>((start, Bound::Unbounded))
            .take_while(move |k| k.starts_with(prefix))
            .filter_map(|k| self.live_value(k).map(|v| (&k[..], v)))
            .take(limit)
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

    /// Every entry in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.order
            .iter()
            .filter_map(|k| self.live_value(k).map(|v| (&k[..], v)))
    }

    /// The keys changed since the last call, with their new value (`None` for
    /// deleted), sorted by key; clears the change flags and drops tombstones.
    pub fn take_changes(&mut self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        if self.dirty == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(self.dirty);
        if self.dirty * 4 < self.map.len() {
            // A few changed keys: find them and sort them.
            for (k, slot) in self.map.iter_mut().filter(|(_, s)| s.dirty) {
                slot.dirty = false;
                out.push((k.to_vec(), slot.value.clone()));
            }
            out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        } else {
            // Many: walk the keys in order.
            for k in &self.order {
                let slot = self
                    .map
                    .get_mut(k)
                    .expect("map and order hold the same keys");
                if slot.dirty {
                    slot.dirty = false;
                    out.push((k.to_vec(), slot.value.clone()));
                }
            }
        }
        for (k, _) in out.iter().filter(|(_, v)| v.is_none()) {
            self.map.remove(k.as_slice());
            self.order.remove(k.as_slice());
        }
        self.dirty = 0;
        out
    }

    /// Number of keys changed since the last [`take_changes`](Self::take_changes).
    pub fn dirty_len(&self) -> usize {
        self.dirty
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Random operations against a plain map and a plain change log. With
    /// changes taken often, few keys are dirty each time (`take_changes`
    /// sorts them); with changes taken rarely, most are (it walks the
    /// ordered keys).
    #[test]
    fn behaves_like_a_map_with_a_change_log() {
        for take_one_in in [10, 400] {
            random_operations(take_one_in);
        }
    }

    fn random_operations(take_one_in: u64) {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut state = KeyedState::default();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut since: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        for step in 0..20_000 {
            let key = format!("k{}", next() % 64).into_bytes();
            // 8 takes the changes; the other ops are drawn from 0..=7 and 9.
            let op = if next() % take_one_in == 0 {
                8
            } else {
                match next() % 9 {
                    8 => 9,
                    o => o,
                }
            };
            match op {
                0..=5 => {
                    let value = vec![b'v'; (next() % 8) as usize];
                    state.put(&key, &value);
                    model.insert(key.clone(), value.clone());
                    since.insert(key.clone(), Some(value));
                }
                6..=7 => {
                    state.delete(&key);
                    if model.remove(&key).is_some() {
                        since.insert(key.clone(), None);
                    }
                }
                8 => {
                    let got = state.take_changes();
                    let want: Vec<_> = std::mem::take(&mut since).into_iter().collect();
                    assert_eq!(got, want, "step {step}");
                }
                _ => {
                    let prefix = format!("k{}", next() % 7).into_bytes();
                    let got: Vec<_> = state
                        .scan(&prefix, None, 5)
                        .map(|(k, v)| (k.to_vec(), v.to_vec()))
                        .collect();
                    let want: Vec<_> = model
                        .iter()
                        .filter(|(k, _)| k.starts_with(&prefix))
                        .take(5)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_eq!(got, want, "step {step}");
                }
            }
            assert_eq!(state.len(), model.len());
            assert_eq!(
                state.bytes(),
                model.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
            );
            assert_eq!(state.get(&key), model.get(&key).map(Vec::as_slice));
            assert_eq!(state.dirty_len(), since.len());
            assert_eq!(state.map.len(), state.order.len());
        }
        let all: Vec<_> = state
            .iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn from_entries_counts_like_puts_and_the_last_duplicate_wins() {
        let entries = [
            (b"b".to_vec(), b"22".to_vec()),
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"3".to_vec()),
        ];
        let restored = KeyedState::from_entries(entries.clone());
        let mut put = KeyedState::default();
        for (k, v) in entries {
            put.put(&k, &v);
        }
        assert_eq!(restored.get(b"b"), Some(&b"3"[..]));
        assert_eq!((restored.len(), restored.bytes()), (put.len(), put.bytes()));
        assert_eq!(restored.dirty_len(), 0);
        let mut restored = restored;
        assert!(restored.take_changes().is_empty());
    }

    #[test]
    fn deleting_a_missing_key_is_no_change() {
        let mut s = KeyedState::default();
        s.delete(b"nope");
        assert!(s.take_changes().is_empty());
        s.put(b"a", b"1");
        s.take_changes();
        s.delete(b"a");
        assert_eq!(s.take_changes(), vec![(b"a".to_vec(), None)]);
        assert!(s.is_empty());
        assert_eq!(s.scan(b"", None, 10).count(), 0);
    }
}
