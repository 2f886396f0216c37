//! [`StateChanges`]: what one instance's keyed state changed since its
//! previous checkpoint, in flat form (one byte buffer, fixed-size entries),
//! as [`KeyedState::take_changes`](crate::checkpoint::state::KeyedState::take_changes) hands it
//! to the checkpoint store.
//!
//! Invariants:
//! - Entry `i` describes `data[off .. off + key_len]` (its key), directly
//!   followed by `value_len` bytes of value unless it is a deletion
//!   (`value_len == DELETED`, no value bytes).
//! - Entries lie back to back in `data`, in push order: two values are
//!   equal iff they hold the same changes in the same order.

use std::fmt;

/// `Entry::value_len` of a deletion.
const DELETED: u32 = u32::MAX;

/// One change: where its key (and value) lie in the data buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    off: u64,
    key_len: u32,
    value_len: u32,
}

/// Changed keys with their new value (`None`: deleted), in no particular
/// order. The checkpoint store sorts them when it writes them; a key
/// appears at most once in the changes of one
/// [`take_changes`](crate::checkpoint::state::KeyedState::take_changes).
///
/// Keys and values are under 4 GiB each (they come from a 32-bit Wasm
/// memory).
///
/// ```
/// use weir::dataflow::StateChanges;
/// let mut c = StateChanges::default();
/// c.push(b"a", Some(b"1"));
/// c.push(b"b", None);
/// assert_eq!(c.len(), 2);
/// let all: Vec<_> = c.iter().collect();
/// assert_eq!(all, [(&b"a"[..], Some(&b"1"[..])), (&b"b"[..], None)]);
/// let same: StateChanges = [(b"a".to_vec(), Some(b"1".to_vec())), (b"b".to_vec(), None)]
///     .into_iter()
///     .collect();
/// assert_eq!(c, same);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StateChanges {
    /// Every change's key, then its value if any, change after change.
    data: Vec<u8>,
    entries: Vec<Entry>,
}

impl StateChanges {
    /// Empty changes with room for `changes` changes of `bytes` key and
    /// value bytes in all.
    pub fn with_capacity(changes: usize, bytes: usize) -> Self {
        StateChanges {
            data: Vec::with_capacity(bytes),
            entries: Vec::with_capacity(changes),
        }
    }

    /// Appends a change: `value` stored under `key`, or `key` deleted.
    ///
    /// # Panics
    ///
    /// If the key or value is 4 GiB or larger.
    pub fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        let len = |b: &[u8]| {
            u32::try_from(b.len())
                .ok()
                .filter(|&n| n != DELETED)
                .expect("state keys and values are under 4 GiB")
        };
        let entry = Entry {
            off: self.data.len() as u64,
            key_len: len(key),
            value_len: value.map_or(DELETED, len),
        };
        self.data.extend_from_slice(key);
        if let Some(v) = value {
            self.data.extend_from_slice(v);
        }
        self.entries.push(entry);
    }

    /// Number of changes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no changes.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total bytes of the changed keys and new values.
    pub fn data_bytes(&self) -> usize {
        self.data.len()
    }

    /// Every change, in push order: key and new value (`None`: deleted).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            data: &self.data,
            entries: self.entries.iter(),
        }
    }
}

/// The changes of a [`StateChanges`], in push order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    data: &'a [u8],
    entries: std::slice::Iter<'a, Entry>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        let e = self.entries.next()?;
        let off = e.off as usize;
        let value_at = off + e.key_len as usize;
        let key = &self.data[off..value_at];
        let value =
            (e.value_len != DELETED).then(|| &self.data[value_at..value_at + e.value_len as usize]);
        Some((key, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a StateChanges {
    type Item = (&'a [u8], Option<&'a [u8]>);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<K: AsRef<[u8]>, V: AsRef<[u8]>> FromIterator<(K, Option<V>)> for StateChanges {
    fn from_iter<I: IntoIterator<Item = (K, Option<V>)>>(iter: I) -> Self {
        let mut out = StateChanges::default();
        for (k, v) in iter {
            out.push(k.as_ref(), v.as_ref().map(AsRef::as_ref));
        }
        out
    }
}

impl fmt::Debug for StateChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let escaped = |b: &[u8]| b.escape_ascii().to_string();
        f.debug_map()
            .entries(self.iter().map(|(k, v)| (escaped(k), v.map(escaped))))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_empty_keys_values_and_deletions() {
        let want: Vec<(&[u8], Option<&[u8]>)> = vec![
            (b"", Some(b"")),
            (b"k", None),
            (b"", None),
            (b"key", Some(b"value")),
        ];
        let c: StateChanges = want.iter().copied().collect();
        assert_eq!(c.iter().collect::<Vec<_>>(), want);
        assert_eq!((c.len(), c.data_bytes()), (4, 9));
        assert_eq!((&c).into_iter().len(), 4);
        assert_eq!(
            format!("{c:?}"),
            r#"{"": Some(""), "k": None, "": None, "key": Some("value")}"#
        );
    }
}
