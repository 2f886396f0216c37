use super::*;
use std::collections::BTreeMap;

impl KeyedState {
    /// Asserts the module invariants.
    fn check(&self) {
        let view = self.view();
        let slots = &self.arena.slots;
        let mut in_table = vec![false; slots.len()];
        for &Bucket { id, tag } in &self.table {
            assert_eq!(tag, self.tag(view.key(id)), "slot {id}'s tag");
            assert!(
                !std::mem::replace(&mut in_table[id as usize], true),
                "{id} twice in the table"
            );
        }
        let (mut live, mut bytes, mut used) = (0, 0, 0);
        let mut regions = Vec::new();
        for (id, s) in slots.iter().enumerate() {
            assert_eq!(s.in_table(), in_table[id], "slot {id}");
            if !s.in_table() {
                assert!(!s.is_dirty(), "removed slot {id} is dirty");
                continue;
            }
            let key = view.key(id as u32);
            assert_eq!(
                self.find(key),
                Some(id as u32),
                "slot {id} is found by its key"
            );
            assert!(s.is_live() || s.is_dirty(), "tombstone {id} is dirty");
            if s.is_live() {
                live += 1;
                bytes += (s.key_len + s.val_len) as usize;
            }
            used += (s.key_len + s.room()) as usize;
            regions.push((s.off(), s.off() + (s.key_len + s.room()) as usize));
        }
        assert_eq!(
            (self.live, self.bytes, self.arena.used),
            (live, bytes, used)
        );
        regions.sort_unstable();
        assert!(
            regions.windows(2).all(|w| w[0].1 <= w[1].0),
            "regions overlap"
        );
        assert!(regions.last().is_none_or(|r| r.1 <= self.arena.bytes.len()));

        let mut dirty = vec![false; slots.len()];
        for &id in &self.dirty {
            assert!(
                !std::mem::replace(&mut dirty[id as usize], true),
                "{id} listed dirty twice"
            );
        }
        for (id, s) in slots.iter().enumerate() {
            assert_eq!(s.is_dirty(), dirty[id], "slot {id}");
        }

        for id in 0..self.presorted {
            assert!(slots[id as usize].in_table());
            assert!(id == 0 || view.key(id - 1) < view.key(id), "presorted {id}");
        }

        let mut free = vec![false; slots.len()];
        for &id in &self.free {
            assert!(
                !std::mem::replace(&mut free[id as usize], true),
                "{id} free twice"
            );
            assert!(!slots[id as usize].in_table());
        }
        let removed = slots.iter().filter(|s| !s.in_table()).count();
        match &*self.order.borrow() {
            None => assert_eq!(removed, self.free.len(), "removed slots are free"),
            Some(order) => {
                let held = order.check(view, self.table.len());
                assert!(held.iter().all(|&id| !free[id as usize]));
                assert_eq!(removed, self.free.len() + held.len(), "no slot lost");
            }
        }
    }
}

/// xorshift64: deterministic pseudo-random numbers.
fn rng(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// What a run of random operations went through, to check that it
/// exercised what it should.
#[derive(Debug, Default)]
struct Seen {
    compactions: usize,
    in_place: usize,
    moved: usize,
    scans_before_order: usize,
    scans_with_order: usize,
    most_runs: usize,
    restores: usize,
}

/// Random operations against a plain map and a plain change log: puts that
/// fit the old value's room and puts that do not (so the arena compacts),
/// deletes and re-puts, scans before and after the key order exists (and
/// while keys come and go), changes taken often (few dirty keys) or rarely
/// (most), restores from the model's entries (sorted or not), then more of
/// the same. Every step compares reads with the model, and the invariants
/// are checked every few steps, so a broken compaction or a stale key order
/// fails at once.
#[test]
fn behaves_like_a_map_with_a_change_log() {
    for (seed, take_one_in) in [(0x2545_f491_4f6c_dd1d, 10), (0x9e37_79b9_7f4a_7c15, 400)] {
        let seen = random_operations(seed, take_one_in);
        assert!(seen.compactions > 0, "{seen:?}");
        assert!(seen.in_place > 0 && seen.moved > 0, "{seen:?}");
        assert!(seen.scans_before_order > 0, "{seen:?}");
        assert!(seen.scans_with_order > 100, "{seen:?}");
        assert!(seen.most_runs >= 3, "{seen:?}");
        assert!(seen.restores > 0, "{seen:?}");
    }
}

fn random_operations(seed: u64, take_one_in: u64) -> Seen {
    let mut next = rng(seed);
    // The keys of prefetch hints, apart so that the operations stay those
    // of `seed`.
    let mut hint = rng(seed ^ 0x5bd1_e995);
    let mut seen = Seen::default();
    let mut state = KeyedState::default();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut since: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    // Scans are off for a stretch after each restore, so the state runs
    // both without and with its key order.
    let mut no_scans_until = 500;
    for step in 0..40_000 {
        // Mostly a working set of 64 keys, now and then one of many more
        // (new keys while the key order exists).
        let n = match next() % 10 {
            0 => next() % 1024,
            _ => next() % 64,
        };
        let key = format!("k{n}").into_bytes();
        let op = if next().is_multiple_of(take_one_in) {
            8
        } else {
            next() % 12
        };
        if step % 3 == 0 {
            // A hint that must change nothing: live, deleted, removed and
            // never seen keys, more than one group of them.
            let others: Vec<Vec<u8>> = (0..hint() % 40)
                .map(|_| format!("k{}", hint() % 2048).into_bytes())
                .collect();
            state.prefetch(std::iter::once(&key[..]).chain(others.iter().map(Vec::as_slice)));
        }
        let arena_before = state.arena.bytes.len();
        match op {
            0..=4 => {
                let len = (next() % 24) as usize;
                let value = vec![(step % 251) as u8; len];
                let fits = state
                    .find(&key)
                    .is_some_and(|id| len as u32 <= state.arena.slots[id as usize].room());
                state.put(&key, &value);
                if fits {
                    seen.in_place += 1;
                    assert_eq!(state.arena.bytes.len(), arena_before, "in place");
                } else if model.contains_key(&key) {
                    seen.moved += 1;
                }
                model.insert(key.clone(), value.clone());
                since.insert(key.clone(), Some(value));
            }
            5..=6 => {
                state.delete(&key);
                if model.remove(&key).is_some() {
                    since.insert(key.clone(), None);
                }
            }
            7 if step % 997 == 0 => {
                // A restore, from sorted entries or not.
                let mut entries: Vec<_> = model.clone().into_iter().collect();
                if next().is_multiple_of(2) {
                    entries.reverse();
                }
                state = KeyedState::from_entries(entries);
                assert!(state.order.borrow().is_none());
                since.clear();
                seen.restores += 1;
                no_scans_until = step + 300;
            }
            8 => {
                let got = state.take_changes();
                let mut got: Vec<_> = got
                    .iter()
                    .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                    .collect();
                got.sort();
                let want: Vec<_> = std::mem::take(&mut since).into_iter().collect();
                assert_eq!(got, want, "step {step}");
            }
            9..=11 if step >= no_scans_until => {
                let prefix = format!("k{}", next() % 12).into_bytes();
                let after = match next() % 3 {
                    0 => None,
                    1 => Some(key.clone()),
                    _ => Some(format!("k{}", next() % 12).into_bytes()),
                };
                let limit = (next() % 8) as usize;
                if state.order.borrow().is_some() {
                    seen.scans_with_order += 1;
                } else {
                    seen.scans_before_order += 1;
                }
                let got: Vec<_> = state
                    .scan(&prefix, after.as_deref(), limit)
                    .map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .collect();
                let want: Vec<_> = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(&prefix))
                    .filter(|(k, _)| after.as_ref().is_none_or(|a| *k > a))
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "step {step}: scan {prefix:?} after {after:?}");
                let runs = state.order.borrow().as_ref().map_or(0, Order::runs);
                seen.most_runs = seen.most_runs.max(runs);
            }
            _ => {}
        }
        if state.arena.bytes.len() < arena_before {
            seen.compactions += 1;
        }
        if step < no_scans_until {
            assert!(state.order.borrow().is_none(), "no scan, no key order");
        }
        assert_eq!(state.len(), model.len());
        assert_eq!(
            state.bytes(),
            model.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
        );
        assert_eq!(state.get(&key), model.get(&key).map(Vec::as_slice));
        assert_eq!(state.dirty_len(), since.len());
        if op == 8 || step % 50 == 0 || state.order.borrow().is_none() && step % 10 == 0 {
            state.check();
        }
        if step % 1000 == 0 {
            let all: Vec<_> = state
                .iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect();
            assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
        }
    }
    seen
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
    restored.check();
    let mut restored = restored;
    assert!(restored.take_changes().is_empty());

    // Ascending, then a repeat and more: the ascending run is presorted.
    let s = KeyedState::from_entries([("a", "1"), ("b", "2"), ("b", "3"), ("c", "4"), ("0", "5")]);
    assert_eq!(s.presorted, 2);
    let all: Vec<_> = s.iter().collect();
    let want: [(&[u8], &[u8]); 4] = [(b"0", b"5"), (b"a", b"1"), (b"b", b"3"), (b"c", b"4")];
    assert_eq!(all, want);
    assert_eq!((s.len(), s.bytes(), s.dirty_len()), (4, 8, 0));
    s.check();
}

#[test]
fn deleting_a_missing_key_is_no_change() {
    let mut s = KeyedState::default();
    s.delete(b"nope");
    assert!(s.take_changes().is_empty());
    s.put(b"a", b"1");
    s.take_changes();
    s.delete(b"a");
    let changes: Vec<_> = s
        .take_changes()
        .iter()
        .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
        .collect();
    assert_eq!(changes, [(b"a".to_vec(), None)]);
    assert!(s.is_empty());
    assert_eq!(s.scan(b"", None, 10).count(), 0);
    s.check();
}

#[test]
fn a_deleted_then_written_key_is_one_put() {
    let mut s = KeyedState::from_entries([("k", "old")]);
    s.delete(b"k");
    s.put(b"k", b"new");
    let changes: Vec<_> = s
        .take_changes()
        .iter()
        .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
        .collect();
    assert_eq!(changes, [(b"k".to_vec(), Some(b"new".to_vec()))]);
    s.check();
}

/// 200,000 keys of 16 bytes with 8-byte values, written by puts (the arena,
/// slots and dirty list grown as they go) and then taken as changes. Per
/// key beyond its 24 bytes: a 16-byte slot, the hash table's 4-byte id and
/// control byte at a load of 76% (262,144 buckets), a 4-byte dirty list
/// entry, and what the growth by half leaves unused in the arena and slots.
#[test]
fn memory_per_key_is_close_to_its_bytes() {
    let n = 200_000u64;
    let mut s = KeyedState::default();
    for i in 0..n {
        s.put(format!("key-{i:012}").as_bytes(), &i.to_le_bytes());
    }
    assert_eq!(s.take_changes().len(), n as usize);
    let data = s.bytes();
    assert_eq!(data, n as usize * 24);
    let over = (s.memory_bytes() - data) as f64 / n as f64;
    assert!(over < 40.0, "{over:.1} bytes per key beyond its bytes");
    // Restored, nothing is grown beyond need.
    let restored = KeyedState::from_entries(s.iter().map(|(k, v)| (k.to_vec(), v.to_vec())));
    let over = (restored.memory_bytes() - data) as f64 / n as f64;
    assert!(
        over < 30.0,
        "{over:.1} bytes per key beyond its bytes, restored"
    );
    // The key order costs 4 bytes per key on top, for scanning operators only.
    let before = restored.memory_bytes();
    assert_eq!(restored.scan(b"key-", None, 1).count(), 1);
    let order = restored.memory_bytes() - before;
    assert!(order <= 4 * n as usize + 1024, "{order} bytes of key order");
}

/// A restore hands over sorted entries: the first scan takes them as they
/// are, one run.
#[test]
fn the_first_scan_after_a_restore_sorts_nothing() {
    let s = KeyedState::from_entries((0..1000u32).map(|i| (i.to_be_bytes(), [])));
    assert_eq!(s.presorted, 1000);
    assert_eq!(s.scan(b"", None, 3).count(), 3);
    assert_eq!(s.order.borrow().as_ref().map(Order::runs), Some(1));
    s.check();
}

/// A job that scans after every few new keys keeps O(log n) runs: each scan
/// sorts only the keys added since the last one.
#[test]
fn scans_between_new_keys_keep_few_runs() {
    let mut s = KeyedState::default();
    let mut next = rng(7);
    for i in 0..20_000u64 {
        s.put(&next().to_be_bytes(), &i.to_le_bytes());
        if i % 3 == 0 {
            let first = s.scan(b"", None, 1).next().map(|(k, _)| k.to_vec());
            if i % 999 == 0 {
                assert_eq!(first, s.iter().next().map(|(k, _)| k.to_vec()));
            }
            let runs = s.order.borrow().as_ref().map_or(0, Order::runs);
            let bound = (s.len() as f64).log2() as usize + 1;
            assert!(runs <= bound, "{runs} runs for {} keys", s.len());
        }
    }
    s.check();
}

/// Deleting most keys of a scanned state lets their slots go (the key order
/// purges them) and their bytes (the arena compacts as it grows again).
#[test]
fn removed_keys_of_a_scanned_state_are_reclaimed() {
    let mut s = KeyedState::default();
    for i in 0..10_000u32 {
        s.put(&i.to_be_bytes(), &[1; 20]);
    }
    assert_eq!(s.scan(b"", None, 1).count(), 1);
    for i in 0..9_000u32 {
        s.delete(&i.to_be_bytes());
    }
    s.take_changes();
    s.check();
    assert_eq!(
        s.scan(b"", None, 1).next().unwrap().0,
        9_000u32.to_be_bytes()
    );
    s.check();
    let slots = s.arena.slots.len();
    for i in 20_000..29_000u32 {
        s.put(&i.to_be_bytes(), &[2; 20]);
    }
    // All but the removed slots that the key order still holds (fewer than
    // half of it) are reused.
    assert!(
        s.arena.slots.len() < slots + 1000,
        "removed slots are reused"
    );
    assert!(
        s.arena.bytes.len() < 2 * 10_000 * 24,
        "{}",
        s.arena.bytes.len()
    );
    assert_eq!(s.scan(b"", None, usize::MAX).count(), 10_000);
    s.check();
}
