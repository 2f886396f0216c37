//! The ordered index of a [`KeyedState`](super::KeyedState): its slot ids
//! in key order, for scans. The state builds it on the first scan and keeps
//! it up to date from then on at a cost of O(log n) amortized moves per new
//! key (the logarithmic method: sorted runs of halving lengths, merged as
//! new keys arrive), so a scan never sorts the whole state again.
//!
//! Invariants (ids are the state's slot ids, keys and liveness read through
//! a [`View`]):
//! - Every slot in the state's table (live or tombstone) is in exactly one
//!   run or in `pending`; so is every removed slot counted in `dead`; no
//!   other id is in a run or in `pending`.
//! - `pending` holds the ids added since the last [`Order::refresh`], in no
//!   order; each run is sorted by key.
//! - After a refresh, `runs[i].len() >= 2 * runs[i + 1].len()`: there are at
//!   most log2(n) + 1 runs.
//! - `dead * 2 <= ` the number of ids in the index: removing slots purges
//!   the index when half of it is removed (amortized O(1) per removal).
//! - `released` holds removed ids that left the index: the state may give
//!   them to new keys. A removed id still in the index is never reused, so
//!   its key bytes (which the state keeps until it compacts, after
//!   [`Order::purge`]) stay valid for the comparisons of binary searches.

use std::cell::Ref;
use std::cmp::Ordering;

use super::View;
use super::prefetch::AHEAD;

/// Slot ids in key order, as runs.
#[derive(Debug, Clone, Default)]
pub(super) struct Order {
    runs: Vec<Vec<u32>>,
    pending: Vec<u32>,
    dead: usize,
    released: Vec<u32>,
}

impl Order {
    /// The index of a state whose slots `0..presorted` are in the table in
    /// ascending key order, with `others` its other slots in the table.
    pub(super) fn build(presorted: u32, others: impl Iterator<Item = u32>, view: View<'_>) -> Self {
        let mut order = Order {
            pending: others.collect(),
            ..Order::default()
        };
        if presorted > 0 {
            order.runs.push((0..presorted).collect());
        }
        order.refresh(view);
        order
    }

    /// Slot `id`, new in the table, joins the index.
    pub(super) fn add(&mut self, id: u32) {
        self.pending.push(id);
    }

    /// A slot in the index was removed from the table; purges when removed
    /// slots are more than half of the index (amortized O(1)).
    pub(super) fn removed(&mut self, view: View<'_>) {
        self.dead += 1;
        if self.dead * 2 > self.indexed() {
            self.purge(view);
        }
    }

    /// Number of ids in the index.
    fn indexed(&self) -> usize {
        self.runs.iter().map(Vec::len).sum::<usize>() + self.pending.len()
    }

    /// Whether every id is in a run (scans may start).
    pub(super) fn is_fresh(&self) -> bool {
        self.pending.is_empty()
    }

    /// A removed id that left the index, for a new key.
    pub(super) fn reuse(&mut self) -> Option<u32> {
        self.released.pop()
    }

    /// Bytes allocated.
    pub(super) fn memory_bytes(&self) -> usize {
        let ids: usize = self.runs.iter().map(Vec::capacity).sum::<usize>()
            + self.pending.capacity()
            + self.released.capacity();
        ids * size_of::<u32>() + self.runs.capacity() * size_of::<Vec<u32>>()
    }

    /// Sorts the pending ids into the runs.
    pub(super) fn refresh(&mut self, view: View<'_>) {
        let mut run = std::mem::take(&mut self.pending);
        self.drop_removed(&mut run, view);
        sort_by_key(&mut run, view);
        if !run.is_empty() {
            self.runs.push(run);
        }
        while let [.., a, b] = &self.runs[..]
            && b.len() * 2 > a.len()
        {
            self.merge_last_two(view);
        }
        if self.dead * 2 > self.indexed() {
            self.purge(view);
        }
    }

    /// Drops every removed id from the index (into `released`), leaving one
    /// run. O(n).
    pub(super) fn purge(&mut self, view: View<'_>) {
        let mut pending = std::mem::take(&mut self.pending);
        self.drop_removed(&mut pending, view);
        sort_by_key(&mut pending, view);
        self.runs.push(pending);
        while self.runs.len() > 1 {
            self.merge_last_two(view);
        }
        if let Some(mut run) = self.runs.pop() {
            self.drop_removed(&mut run, view);
            if !run.is_empty() {
                self.runs.push(run);
            }
        }
        debug_assert_eq!(self.dead, 0);
    }

    /// Moves the removed ids of `ids` to `released`.
    fn drop_removed(&mut self, ids: &mut Vec<u32>, view: View<'_>) {
        ids.retain(|&id| {
            let keep = view.in_table(id);
            if !keep {
                self.released.push(id);
                self.dead -= 1;
            }
            keep
        });
    }

    /// Merges the last run into the one before it, dropping removed ids.
    fn merge_last_two(&mut self, view: View<'_>) {
        let (Some(mut b), Some(mut a)) = (self.runs.pop(), self.runs.pop()) else {
            unreachable!("called with two runs or more");
        };
        self.drop_removed(&mut a, view);
        self.drop_removed(&mut b, view);
        // From the back, in place: `a`'s tail moves up to make room.
        let (mut i, mut j) = (a.len(), b.len());
        a.resize(i + j, 0);
        while j > 0 {
            let k = i + j - 1;
            if i > 0 && view.key(a[i - 1]) > view.key(b[j - 1]) {
                a[k] = a[i - 1];
                i -= 1;
            } else {
                a[k] = b[j - 1];
                j -= 1;
            }
        }
        self.runs.push(a);
    }

    /// Checks the invariants against the state's table (`in_table` is the
    /// number of slots in the table); returns the removed ids it holds (in
    /// the index or released).
    #[cfg(test)]
    pub(super) fn check(&self, view: View<'_>, in_table: usize) -> Vec<u32> {
        let mut seen = vec![false; view.slots.len()];
        let (mut indexed, mut removed) = (0, Vec::new());
        for &id in self.runs.iter().flatten().chain(&self.pending) {
            assert!(
                !std::mem::replace(&mut seen[id as usize], true),
                "{id} twice in the index"
            );
            indexed += 1;
            if !view.in_table(id) {
                removed.push(id);
            }
        }
        assert_eq!(removed.len(), self.dead);
        assert!(self.dead * 2 <= indexed, "purged when half is removed");
        assert_eq!(indexed - self.dead, in_table, "every slot of the table");
        for run in &self.runs {
            assert!(run.windows(2).all(|w| view.key(w[0]) <= view.key(w[1])));
        }
        for &id in &self.released {
            assert!(!seen[id as usize] && !view.in_table(id));
        }
        removed.extend(&self.released);
        removed
    }

    /// Number of runs.
    #[cfg(test)]
    pub(super) fn runs(&self) -> usize {
        self.runs.len()
    }
}

/// Sorts slot ids by key ([`keysort`](super::keysort)).
pub(super) fn sort_by_key(ids: &mut [u32], view: View<'_>) {
    super::keysort::sort_stable_by_bytes(ids, |&id| view.key(id));
}

/// The entries of a scan: the runs merged, from the start bound on, while
/// keys have the prefix, live ones only, up to a limit.
pub(super) struct Scan<'a> {
    view: View<'a>,
    order: Ref<'a, Order>,
    /// Next position in each run.
    heads: Vec<usize>,
    prefix: &'a [u8],
    left: usize,
}

impl<'a> Scan<'a> {
    /// Up to `limit` live entries with keys starting with `prefix`, from the
    /// first key after `after` (or at `prefix`, whichever is later).
    pub(super) fn new(
        view: View<'a>,
        order: Ref<'a, Order>,
        prefix: &'a [u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Self {
        debug_assert!(order.is_fresh(), "scans start after a refresh");
        let before_start = |key: &[u8]| match after {
            Some(a) if a >= prefix => key <= a,
            _ => key < prefix,
        };
        let heads = order
            .runs
            .iter()
            .map(|run| run.partition_point(|&id| before_start(view.key(id))))
            .collect();
        Scan {
            view,
            order,
            heads,
            prefix,
            left: limit,
        }
    }
}

impl<'a> Iterator for Scan<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let view = self.view;
        while self.left > 0 {
            let mut best: Option<(usize, &'a [u8])> = None;
            for (r, &pos) in self.heads.iter().enumerate() {
                if let Some(&id) = self.order.runs[r].get(pos) {
                    let key = view.key(id);
                    if best.is_none_or(|(_, b)| key.cmp(b) == Ordering::Less) {
                        best = Some((r, key));
                    }
                }
            }
            let (r, key) = best?;
            // Every key starts with the empty prefix (a scan of all state,
            // as at `finish`): no comparison per entry.
            if !self.prefix.is_empty() && !key.starts_with(self.prefix) {
                self.left = 0;
                return None;
            }
            let run = &self.order.runs[r];
            let id = run[self.heads[r]];
            self.heads[r] += 1;
            // The run's next keys, ahead of their turn (a run is in key
            // order, not in arena order).
            if let Some(&next) = run.get(self.heads[r] + AHEAD) {
                view.prefetch_slot(next);
            }
            if let Some(&next) = run.get(self.heads[r] + AHEAD / 2) {
                view.prefetch_entry(next);
            }
            if let Some(value) = view.value(id) {
                self.left -= 1;
                return Some((key, value));
            }
        }
        None
    }
}
