//! [`Tuning`]: how segments are cut into chunks and when an instance's
//! delta chain is compacted into a full segment. It changes how much a
//! commit writes, never what a checkpoint reads: any tuning reads any store.

/// How segments are cut into chunks and when a delta chain is compacted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tuning {
    /// Largest chunk value, unless one entry is larger. A redb leaf holding
    /// one chunk then fits a 64 KiB page with room for the key.
    pub(super) chunk_bytes: usize,
    /// A commit writes a full segment instead of a delta when the instance
    /// would have more deltas than this after its newest full segment...
    pub(super) max_deltas: usize,
    /// ...or when those deltas would total more than this percentage of the
    /// full segment's bytes.
    pub(super) max_delta_percent: u64,
}

pub(super) const TUNING: Tuning = Tuning {
    chunk_bytes: 64 * 1024 - 512,
    max_deltas: 256,
    max_delta_percent: 50,
};
