//! A fast hash for the state cache's keys (mostly short strings), where
//! std's SipHash would cost more than the rest of a cache lookup. Keys come
//! from input records, so the hash is seeded per cache from std's
//! `RandomState` (random bytes from the host), as a defence against inputs
//! made to collide.

use std::hash::{BuildHasher, RandomState};

/// Multiplier of the mixing step: odd, with well-spread bits.
const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

/// Mixes `x` so that every input bit affects the high bits (which
/// `hashbrown` keeps as a tag) and the low bits (which index its table):
/// fold the high half into the low one, multiply, fold the product's high
/// bits back down. Only 64-bit operations: on `wasm32` a 128-bit product is
/// a call to `__multi3`, which cost more than the rest of a cache lookup.
#[inline]
fn mix(x: u64) -> u64 {
    let product = (x ^ (x >> 32)).wrapping_mul(MULTIPLIER);
    product ^ (product >> 29)
}

/// Hashes keys from one random seed.
#[derive(Debug, Clone)]
pub(crate) struct SeededState {
    seed: u64,
}

impl Default for SeededState {
    fn default() -> Self {
        SeededState {
            seed: RandomState::new().hash_one(0u64),
        }
    }
}

impl SeededState {
    /// The hash of a key of `len` bytes, at most 15, given as the two
    /// words that cover them, zero-padded (the state cache's inline keys).
    #[inline]
    pub(crate) fn hash_words(&self, len: usize, [first, second]: [u64; 2]) -> u64 {
        mix(mix(self.seed ^ first ^ ((len as u64) << 59)) ^ second)
    }

    /// The hash of `bytes`, a key of any length: each 8-byte word mixed
    /// into the state, then the tail, tagged with its length so that keys
    /// differing only by trailing zero bytes differ.
    #[inline]
    pub(crate) fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        let mut state = self.seed;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            state = mix(state ^ u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let tail = chunks.remainder();
        let word = (tail.iter().rev()).fold(0u64, |w, &b| (w << 8) | u64::from(b));
        mix(state ^ word ^ ((tail.len() as u64) << 59))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn similar_keys_hash_apart() {
        let state = SeededState::default();
        let mut keys: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| format!("w{i}").into_bytes())
            .collect();
        keys.extend([vec![], vec![0], vec![0, 0], vec![0; 8], vec![0; 9]]);
        let hashes: HashSet<u64> = keys.iter().map(|k| state.hash_bytes(k)).collect();
        assert_eq!(hashes.len(), keys.len());
        // The low bits (what a table indexes by) are spread too.
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 0xfff).collect();
        assert!(buckets.len() > 4000, "{}", buckets.len());
        // And the high bits (its tag for each entry).
        let tags: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert_eq!(tags.len(), 128);
        // One input bit flipped changes about half of the output bits.
        let base = state.hash_bytes(&0u64.to_le_bytes());
        for bit in 0..64 {
            let changed = (base ^ state.hash_bytes(&(1u64 << bit).to_le_bytes())).count_ones();
            assert!((16..=48).contains(&changed), "bit {bit}: {changed}");
        }
    }

    /// Short keys (hashed as two words) spread as well as any.
    #[test]
    fn similar_short_keys_hash_apart() {
        let state = SeededState::default();
        let hashes: HashSet<u64> = (0..20_000u32)
            .map(|i| {
                let mut words = [0u64; 2];
                words[0] = u64::from_le_bytes(*b"w\0\0\0\0\0\0\0") | (u64::from(i) << 8);
                state.hash_words(5, words)
            })
            .collect();
        assert_eq!(hashes.len(), 20_000);
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 0xfff).collect();
        assert!(buckets.len() > 4000, "{}", buckets.len());
        // The tags of a 32-bit table: bits 25 to 31.
        let tags: HashSet<u64> = hashes.iter().map(|h| (h >> 25) & 127).collect();
        assert_eq!(tags.len(), 128);
    }

    #[test]
    fn each_state_has_its_own_seed() {
        let (a, b) = (SeededState::default(), SeededState::default());
        assert_ne!(a.hash_bytes(b"word"), b.hash_bytes(b"word"));
    }
}
