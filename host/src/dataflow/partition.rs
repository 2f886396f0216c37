//! Routing records to the instances of a downstream operator.
//!
//! A record's key is hashed into one of [`KEY_GROUPS`] key groups; each
//! instance owns a contiguous range of key groups. The number of key groups is
//! fixed for the life of a job's checkpoints, so that state can later be
//! redistributed when parallelism changes. Records without a key are spread
//! round-robin. Only the bytes before the first 0x00 of a key are hashed (the
//! same rule the `state` interface documents for state keys).

/// Number of key groups. Recorded in every checkpoint.
pub const KEY_GROUPS: u32 = 128;

/// The key group of `key`: FNV-1a over the bytes before the first 0x00, then
/// a finalizing mix. Stable across platforms and versions.
///
/// ```
/// use weir::dataflow::partition::{key_group, KEY_GROUPS};
/// assert!(key_group(b"hello") < KEY_GROUPS);
/// assert_eq!(key_group(b"hello"), key_group(b"hello\0count"));
/// ```
pub fn key_group(key: &[u8]) -> u32 {
    // FNV-1a of the bytes before the first NUL, in one pass.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key.iter().take_while(|&&b| b != 0) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (mix64(h) % u64::from(KEY_GROUPS)) as u32
}

/// SplitMix64: a stable, well-mixed function of `x`.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The instance (of `parallelism`) that owns `key_group`.
///
/// ```
/// use weir::dataflow::partition::instance_for;
/// assert_eq!(instance_for(0, 2), 0);
/// assert_eq!(instance_for(127, 2), 1);
/// ```
pub fn instance_for(key_group: u32, parallelism: u32) -> u32 {
    (u64::from(key_group) * u64::from(parallelism) / u64::from(KEY_GROUPS)) as u32
}

/// Chooses the downstream instance for each record.
#[derive(Debug, Clone)]
pub struct Partitioner {
    parallelism: u32,
    next: u32,
}

impl Partitioner {
    /// A partitioner over `parallelism` instances.
    pub fn new(parallelism: u32) -> Self {
        assert!(parallelism > 0, "parallelism must be at least 1");
        Partitioner {
            parallelism,
            next: 0,
        }
    }

    /// The instance `record` goes to.
    ///
    /// ```
    /// let mut p = weir::dataflow::partition::Partitioner::new(4);
    /// let a = p.route(Some(b"k"));
    /// assert_eq!(a, p.route(Some(b"k")));
    /// assert_ne!(p.route(None), p.route(None));
    /// ```
    pub fn route(&mut self, key: Option<&[u8]>) -> usize {
        if self.parallelism == 1 {
            return 0;
        }
        match key {
            Some(k) => instance_for(key_group(k), self.parallelism) as usize,
            None => {
                self.next = (self.next + 1) % self.parallelism;
                self.next as usize
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_groups_spread_evenly_and_instances_cover_all() {
        let mut groups = vec![0u32; KEY_GROUPS as usize];
        for i in 0..100_000 {
            groups[key_group(format!("w{i}").as_bytes()) as usize] += 1;
        }
        let (min, max) = (groups.iter().min().unwrap(), groups.iter().max().unwrap());
        assert!(*min > 600 && *max < 1000, "uneven: {min}..{max}");
        for p in 1..=16 {
            let owners: std::collections::BTreeSet<u32> =
                (0..KEY_GROUPS).map(|g| instance_for(g, p)).collect();
            assert_eq!(owners.len() as u32, p.min(KEY_GROUPS));
        }
    }

    #[test]
    fn key_group_is_stable() {
        // Changing the hash would scatter checkpointed state: pin it.
        assert_eq!(key_group(b""), key_group(b"\0anything"));
        let pinned: Vec<u32> = ["a", "hello", "ORD-00001"]
            .iter()
            .map(|k| key_group(k.as_bytes()))
            .collect();
        assert_eq!(pinned, PINNED);
    }

    const PINNED: [u32; 3] = [39, 0, 105];
}
