//! [`KeyedState`]: the host-owned keyed state of one operator instance, kept
//! in memory with the set of keys changed since the last checkpoint.
//!
//! Invariant: `dirty` holds every key whose value (or absence) may differ
//! from what the last [`KeyedState::take_changes`] reported (a superset: a
//! key written back to its old value is still reported).

use std::collections::{BTreeMap, HashSet};

/// Sorted in-memory keyed state with change tracking for incremental
/// checkpoints.
///
/// ```
/// let mut s = weir::state::KeyedState::default();
/// s.put(b"a".to_vec(), b"1".to_vec());
/// assert_eq!(s.get(b"a"), Some(&b"1"[..]));
/// assert_eq!(s.take_changes(), vec![(b"a".to_vec(), Some(b"1".to_vec()))]);
/// assert!(s.take_changes().is_empty());
/// ```
#[derive(Debug, Default, Clone)]
pub struct KeyedState {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    dirty: HashSet<Vec<u8>>,
    bytes: usize,
}

impl KeyedState {
    /// State holding `entries`, with nothing dirty (as restored from a
    /// checkpoint).
    ///
    /// ```
    /// let s = weir::state::KeyedState::from_entries([(b"k".to_vec(), b"v".to_vec())]);
    /// assert_eq!(s.len(), 1);
    /// ```
    pub fn from_entries(entries: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> Self {
        let map: BTreeMap<_, _> = entries.into_iter().collect();
        let bytes = map.iter().map(|(k, v)| k.len() + v.len()).sum();
        KeyedState {
            map,
            dirty: HashSet::new(),
            bytes,
        }
    }

    /// The value under `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.map.get(key).map(Vec::as_slice)
    }

    /// Stores `value` under `key`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let (klen, vlen) = (key.len(), value.len());
        if !self.dirty.contains(&key) {
            self.dirty.insert(key.clone());
        }
        match self.map.insert(key, value) {
            Some(old) => self.bytes = self.bytes - old.len() + vlen,
            None => self.bytes += klen + vlen,
        }
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: &[u8]) {
        if let Some(old) = self.map.remove(key) {
            self.bytes -= key.len() + old.len();
            if !self.dirty.contains(key) {
                self.dirty.insert(key.to_vec());
            }
        }
    }

    /// Up to `limit` entries whose key starts with `prefix`, after `after`.
    ///
    /// ```
    /// let s = weir::state::KeyedState::from_entries(
    ///     ["a1", "a2", "b1"].map(|k| (k.as_bytes().to_vec(), vec![])));
    /// let keys: Vec<_> = s.scan(b"a", Some(b"a1"), 10).map(|(k, _)| k.to_vec()).collect();
    /// assert_eq!(keys, [b"a2".to_vec()]);
    /// ```
    pub fn scan<'a>(
        &'a self,
        prefix: &'a [u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        use std::ops::Bound;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a.to_vec()),
            _ => Bound::Included(prefix.to_vec()),
        };
        self.map
            .range((start, Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
    }

    /// Total bytes of keys and values.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every entry in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.map.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))
    }

    /// The keys changed since the last call, with their new value (`None` for
    /// deleted), sorted by key; clears the change set.
    pub fn take_changes(&mut self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out: Vec<_> = self
            .dirty
            .drain()
            .map(|k| {
                let v = self.map.get(&k).cloned();
                (k, v)
            })
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Number of keys changed since the last [`take_changes`](Self::take_changes).
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }
}
