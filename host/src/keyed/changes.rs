//! [`StateChanges`]: what one instance's keyed state changed since its
//! previous checkpoint, in flat form: one buffer of entries packed as
//! `flat-state.put-many` packs them ([`weir_flat::state`]), as
//! [`KeyedState::take_changes`](crate::keyed::state::KeyedState::take_changes)
//! hands it to the checkpoint store.
//!
//! Invariants:
//! - `data` holds `len` entries appended by [`push_entry`], back to back in
//!   push order (a deletion has no value): two values are equal iff they
//!   hold the same changes in the same order.
//! - `bytes` sums the lengths of their keys and values.

use std::fmt;

use weir_flat::state::{Entries, push_entry};

/// Changed keys with their new value (`None`: deleted), in no particular
/// order. The checkpoint store sorts them when it writes them; a key
/// appears at most once in the changes of one
/// [`take_changes`](crate::keyed::state::KeyedState::take_changes).
///
/// Keys and values are under 4 GiB each (they come from a 32-bit Wasm
/// memory).
///
/// ```
/// use weir::keyed::changes::StateChanges;
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
    data: Vec<u8>,
    len: usize,
    bytes: usize,
}

/// The changes of a [`StateChanges`], in push order.
pub type Iter<'a> = Entries<'a>;

impl StateChanges {
    /// Empty changes with room for `changes` changes of `bytes` key and
    /// value bytes in all.
    pub fn with_capacity(changes: usize, bytes: usize) -> Self {
        StateChanges {
            // Two lengths of 4 bytes per entry.
            data: Vec::with_capacity(bytes + 8 * changes),
            len: 0,
            bytes: 0,
        }
    }

    /// Appends a change: `value` stored under `key`, or `key` deleted.
    ///
    /// # Panics
    ///
    /// If the key or value is 4 GiB or larger.
    pub fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        push_entry(&mut self.data, key, value);
        self.len += 1;
        self.bytes += key.len() + value.map_or(0, <[u8]>::len);
    }

    /// Number of changes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no changes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Total bytes of the changed keys and new values.
    pub fn data_bytes(&self) -> usize {
        self.bytes
    }

    /// Every change, in push order: key and new value (`None`: deleted).
    pub fn iter(&self) -> Iter<'_> {
        Entries::parse(&self.data).expect("entries packed by StateChanges::push")
    }
}

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
