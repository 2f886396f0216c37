//! [`KeyBytes`]: a cached key as the bytes of its state key (before the
//! map's suffix), the bytes the host keys it by. So two keys share a cache
//! entry exactly when they share a host state key, and a write-back writes
//! the bytes without serializing the key again.
//!
//! A key of at most [`INLINE`] bytes lies in its entry: a lookup compares
//! a length and two words of the entry it probes and follows no pointer
//! (in a word count over Zipf words, the load of a heap key's bytes missed
//! the CPU cache on most lookups of rare words). Longer keys are on the heap.

use std::num::NonZeroU8;

use crate::hash::SeededState;

/// The longest key kept in its entry.
pub(super) const INLINE: usize = 15;

/// A cached key's bytes.
///
/// Invariant: a key of at most [`INLINE`] bytes is `Inline`, its bytes
/// followed by zeros; a longer one is `Heap`.
pub(super) enum KeyBytes {
    Inline {
        /// The length plus one (non-zero, so that the enum fits in 16 bytes
        /// on `wasm32`).
        len_1: NonZeroU8,
        bytes: [u8; INLINE],
    },
    Heap(Box<[u8]>),
}

/// The two words an inline key is compared and hashed by: its bytes
/// zero-padded to [`INLINE`], as two words that overlap by a byte.
#[inline]
fn words(padded: &[u8; INLINE]) -> [u64; 2] {
    let word = |at: usize| u64::from_le_bytes(padded[at..at + 8].try_into().expect("8 bytes"));
    [word(0), word(INLINE - 8)]
}

/// [`words`] of `bytes` (at most [`INLINE`]) zero-padded, read in place a
/// word or half-word at a time (overlapping, then shifted): copying the
/// bytes into a zeroed array and loading words from it made every lookup
/// wait for the copy's stores.
#[inline]
fn padded_words(bytes: &[u8]) -> [u64; 2] {
    let n = bytes.len();
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let u32_at = |at: usize| {
        u64::from(u32::from_le_bytes(
            bytes[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    match n {
        // Bytes 7 to n - 1 of the second word are the last ones loaded.
        8.. => [u64_at(0), u64_at(n - 8) >> (8 * (INLINE - n))],
        4..8 => [u32_at(0) | ((u32_at(n - 4) >> (8 * (8 - n))) << 32), 0],
        1..4 => {
            let byte = |at: usize| bytes.get(at).map_or(0, |&b| u64::from(b));
            [byte(0) | (byte(1) << 8) | (byte(2) << 16), 0]
        }
        0 => [0, 0],
    }
}

impl KeyBytes {
    /// The key's bytes.
    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            KeyBytes::Inline { len_1, bytes } => &bytes[..usize::from(len_1.get() - 1)],
            KeyBytes::Heap(bytes) => bytes,
        }
    }
}

/// A key being looked up: its bytes, and its words when it fits inline.
pub(super) struct Probe<'a> {
    bytes: &'a [u8],
    /// `Some` exactly when the key has at most [`INLINE`] bytes.
    words: Option<[u64; 2]>,
}

impl<'a> Probe<'a> {
    #[inline]
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        let words = (bytes.len() <= INLINE).then(|| padded_words(bytes));
        Probe { bytes, words }
    }

    /// Whether `key` is this key.
    #[inline]
    pub(super) fn matches(&self, key: &KeyBytes) -> bool {
        match key {
            KeyBytes::Inline { len_1, bytes } => {
                usize::from(len_1.get() - 1) == self.bytes.len() && self.words == Some(words(bytes))
            }
            KeyBytes::Heap(bytes) => **bytes == *self.bytes,
        }
    }

    /// The key's hash under `state`.
    #[inline]
    pub(super) fn hash(&self, state: &SeededState) -> u64 {
        match self.words {
            Some(words) => state.hash_words(self.bytes.len(), words),
            None => state.hash_bytes(self.bytes),
        }
    }

    /// The key, to keep.
    pub(super) fn to_key(&self) -> KeyBytes {
        match self.words {
            Some(_) => {
                let mut bytes = [0u8; INLINE];
                bytes[..self.bytes.len()].copy_from_slice(self.bytes);
                let len_1 = u8::try_from(self.bytes.len() + 1).expect("an inline length");
                KeyBytes::Inline {
                    len_1: NonZeroU8::new(len_1).expect("a length plus one"),
                    bytes,
                }
            }
            None => KeyBytes::Heap(self.bytes.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys of every length around the inline bound, and keys that differ
    /// in one byte or only in trailing zeros, match themselves and nothing
    /// else; a key's hash is its probe's.
    #[test]
    fn a_key_matches_its_own_bytes_only() {
        let state = SeededState::default();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for len in 0..=2 * INLINE + 1 {
            let base: Vec<u8> = (0..len as u8).map(|i| b'a' + i).collect();
            keys.push(base.clone());
            for at in 0..len {
                let mut other = base.clone();
                other[at] ^= 1;
                keys.push(other);
            }
            keys.push([base.as_slice(), &[0]].concat());
        }
        keys.sort();
        keys.dedup();
        for (i, a) in keys.iter().enumerate() {
            let stored = Probe::new(a).to_key();
            assert_eq!(stored.as_bytes(), a.as_slice());
            assert_eq!(matches!(stored, KeyBytes::Inline { .. }), a.len() <= INLINE);
            for (j, b) in keys.iter().enumerate() {
                assert_eq!(Probe::new(b).matches(&stored), i == j, "{a:?} {b:?}");
            }
        }
        let hashes: std::collections::HashSet<u64> =
            keys.iter().map(|k| Probe::new(k).hash(&state)).collect();
        assert_eq!(hashes.len(), keys.len());
    }

    #[test]
    fn an_inline_key_takes_no_more_than_a_heap_one() {
        assert!(size_of::<KeyBytes>() <= size_of::<(Box<[u8]>, usize)>());
        #[cfg(target_pointer_width = "32")]
        assert_eq!(size_of::<KeyBytes>(), 16);
    }
}
