//! Sorting by byte-string keys that live scattered in memory (a state's
//! arena, a checkpoint's changes), with few reads of the keys.
//!
//! Comparing whole keys reads two keys per comparison, each a cache miss
//! when the keys are spread over a large arena: a sort of n keys takes
//! about n log n of them. Here each round reads every key of a group once,
//! for 8 of its bytes, and sorts those with their positions in a dense
//! array; keys whose 8 bytes tie go to another round on their next 8
//! bytes. Keys with long common prefixes (`ORD-00001234`, `user:42`) take
//! one extra round per 8 common bytes instead of one full compare per
//! comparison.
//!
//! The sort is stable: of equal keys, the one earlier in the input stays
//! earlier.

/// Groups up to this size are sorted by comparing their keys directly.
const SMALL: usize = 16;

/// One item in a round: the 8 key bytes from the round's depth on (zero
/// padded), how many key bytes are left from there (capped at 9: "more
/// than 8"), and the item's position in the input.
type Digit = (u64, u8, u32);

/// Sorts `items` by `key` (bytewise, a key before its extensions), stably.
pub(crate) fn sort_stable_by_bytes<'k, T: Copy>(items: &mut [T], key: impl Fn(&T) -> &'k [u8]) {
    if items.len() < 2 {
        return;
    }
    let n = u32::try_from(items.len()).expect("under 2^32 items");
    let mut order: Vec<u32> = (0..n).collect();
    sort_group(&mut order, 0, &|i: u32| key(&items[i as usize]));
    let sorted: Vec<T> = order.iter().map(|&i| items[i as usize]).collect();
    items.copy_from_slice(&sorted);
}

/// Sorts `group` (positions of items whose keys agree on their first
/// `depth` bytes, in ascending position order) by key, ties by position.
fn sort_group<'k>(group: &mut [u32], depth: usize, key: &impl Fn(u32) -> &'k [u8]) {
    if group.len() <= SMALL {
        group.sort_unstable_by(|&a, &b| key(a)[depth..].cmp(&key(b)[depth..]).then(a.cmp(&b)));
        return;
    }
    let mut digits: Vec<Digit> = group.iter().map(|&i| digit(key(i), depth, i)).collect();
    digits.sort_unstable();
    for (slot, d) in group.iter_mut().zip(&digits) {
        *slot = d.2;
    }
    // Runs of keys with the same 8 bytes and more to come go another round
    // (their positions are still ascending within the run: ties sort by
    // position). A run that ends inside these 8 bytes is of equal keys,
    // already in position order.
    let mut start = 0;
    while start < digits.len() {
        let (bytes, left, _) = digits[start];
        let end = start
            + digits[start..]
                .iter()
                .take_while(|d| d.0 == bytes && d.1 == left)
                .count();
        if left > 8 && end - start > 1 {
            sort_group(&mut group[start..end], depth + 8, key);
        }
        start = end;
    }
}

/// `key`'s digit at `depth` for the item at `pos`.
fn digit(key: &[u8], depth: usize, pos: u32) -> Digit {
    let rest = &key[depth.min(key.len())..];
    let mut b = [0u8; 8];
    let n = rest.len().min(8);
    b[..n].copy_from_slice(&rest[..n]);
    (u64::from_be_bytes(b), rest.len().min(9) as u8, pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the sort against std's stable sort by whole keys.
    fn check(keys: &[Vec<u8>]) {
        let mut items: Vec<(usize, &[u8])> = keys.iter().map(Vec::as_slice).enumerate().collect();
        let mut expected = items.clone();
        expected.sort_by(|a, b| a.1.cmp(b.1));
        sort_stable_by_bytes(&mut items, |&(_, k)| k);
        assert_eq!(items, expected);
    }

    #[test]
    fn sorts_like_whole_key_comparison_and_keeps_ties_in_order() {
        check(&[]);
        check(&[b"x".to_vec()]);
        let small: Vec<Vec<u8>> = ["b", "ab", "a", "ab\0", "", "ab", "a\u{ff}"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        check(&small);
        // Long common prefixes, zero bytes, prefixes of each other, and
        // repeats: several rounds deep, with groups above and below SMALL.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for len in [0usize, 7, 8, 9, 17, 30] {
            let keys: Vec<Vec<u8>> = (0..2000)
                .map(|_| {
                    let mut k = b"ORD-0000".repeat(len / 8);
                    let tail = (next() % 4) as usize;
                    k.extend((0..tail).map(|_| [0u8, 1, b'a', 0xff][(next() % 4) as usize]));
                    k
                })
                .collect();
            check(&keys);
        }
        let orders: Vec<Vec<u8>> = (0..5000u64)
            .map(|i| format!("ORD-{:08}\0rc", (i * 7919) % 5000).into_bytes())
            .collect();
        check(&orders);
    }
}
