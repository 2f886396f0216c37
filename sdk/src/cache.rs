//! The guest-side write-back cache behind [`MapState`](crate::MapState) and
//! [`ValueState`](crate::ValueState), and the registry through which the SDK
//! sizes every cache of the instance and writes it back to host state.
//!
//! Why writing back late is correct: the host takes this instance's state
//! only right after `on-checkpoint` returns (at the end of input, `finish`
//! is followed by `on-checkpoint`), and the adapter writes every dirty entry
//! back before it returns from `on-checkpoint` and from `finish`. Every
//! checkpoint therefore holds every write made before it. After a failure
//! the host discards the instance, this cache with it, restores host state
//! from the last checkpoint and replays the records after it, so a write
//! that lived only here is made again, never lost. Writing back earlier is
//! always correct too: it stores what a later write-back would, or older
//! values that a later one overwrites, before the host takes anything.
//!
//! Invariant (coherence): a clean entry holds what the host holds under its
//! key (`None`: nothing); a dirty entry holds a newer value that the next
//! write-back stores. Raw state access through [`Context`](crate::Context)
//! keeps it: a raw read first writes every cache back, a raw write first
//! writes back and empties every cache.
//!
//! Size, in bytes: each entry is charged an estimate of the guest memory it
//! takes ([`Meter`]): the length of its encoded state key plus that of its
//! encoded value, measured when it is read from the host or written back,
//! plus a fixed overhead for its hash-table slot and heap bookkeeping. An
//! entry set before either is measured (encoded into a scratch buffer) for
//! the first sets of its store and one in every [`SAMPLE_EVERY`] after,
//! else charged its store's running means of measured keys and values; an
//! entry read as absent that gets a value is charged the mean value on top.
//! The decoded form in the guest is close to the encoded one for strings
//! and smaller for numbers, so the estimate errs on the high side. The
//! charges of every store of the instance add up against one budget
//! ([`set_cache_budget`], by default `limits.memory / 8`, read from the host
//! at the first use).
//!
//! Invariants (bounds):
//! - When a hook returns, the caches hold at most the budget: over it, every
//!   dirty entry is written back and each store drops an arbitrary part of
//!   its entries, down to its share of half the budget: it keeps those
//!   whose keys hash lowest (with a seed of its own), the same part of a
//!   working set at every eviction, so that a working set larger than the
//!   cache keeps a hit rate near budget / working set, in whatever order
//!   its keys are used, instead of starting cold after every overflow.
//!   Inside a hook the bound is the budget plus at most `limits.memory / 8`
//!   (twice the budget by default), so that the keys a batch prefetches stay
//!   cached while it is processed; the budget is at most half of
//!   `limits.memory`, so the caches never take more than 5/8 of it.
//! - When a hook returns, the dirty entries of every store together are
//!   charged at most the dirty limit ([`set_cache_dirty_limit`], by default
//!   a quarter of the budget, at most [`DEFAULT_CACHE_DIRTY_LIMIT`]): a
//!   hook that leaves more writes entries back then, down to half the
//!   limit, and they stay cached, clean. So the write-back when
//!   `on-checkpoint` returns stores at most the dirty limit plus what
//!   `on_checkpoint` itself wrote, and the operator's pause at a checkpoint
//!   does not grow with the cache. That write-back takes first the entries
//!   not changed again since the last one ([`Slot::hot`], a second
//!   chance), so that keys that keep changing are not written back over and
//!   over.
//! - A write-back hands the host at most about [`host::PUT_MANY_CHUNK`]
//!   packed bytes per `flat-state.put-many`, deletions included.
//! - [`with_cache_capacity`](crate::MapState::with_cache_capacity) adds a
//!   bound on one store's entries: over it when a hook returns (over twice
//!   it inside a hook), the store writes back and keeps an arbitrary half.
//! - A write-back visits only the dirty entries, an eviction walks the
//!   store's entries ([`table`]): neither costs more with a larger cache.
//!
//! Registry-wide operations (write-backs, evictions) borrow every store in
//! turn; none runs while a store is borrowed, since an operation on one
//! store never runs code that can reach another (the closure of `update`
//! cannot use the [`Context`](crate::Context) it borrows).

use hashbrown::HashTable;
use std::any::Any;
use std::borrow::Borrow;
use std::cell::{Cell, RefCell, RefMut};
use std::hash::Hash;
use std::rc::Rc;

use serde::{Serialize, de::DeserializeOwned};
use weir_flat::state::{push_deletion_with, push_entry_with, push_key_with};

use crate::error::{Error, Result};
use crate::host::{self, PutMany};
use crate::state_value::{self, Values};

mod key;
mod key_bytes;
mod meter;
mod shared;
mod store;
mod table;

use meter::*;
pub(crate) use shared::Shared;
pub(crate) use store::Layout;
use store::*;

use key_bytes::{KeyBytes, Probe};
use table::{KeyHash, Table};

/// Dirty bytes the typed-state caches of an instance may hold when a hook
/// returns, by default (see [`set_cache_dirty_limit`]): a quarter of the
/// budget, at most this, 8 MiB (some 80,000 word-count entries).
///
/// ```
/// assert_eq!(weir_sdk::DEFAULT_CACHE_DIRTY_LIMIT, 8 << 20);
/// ```
pub const DEFAULT_CACHE_DIRTY_LIMIT: usize = 8 << 20;

/// The entry count the caches were once sized by. They are sized in bytes
/// now, for the whole instance: see [`set_cache_budget`].
///
/// ```
/// #[allow(deprecated)]
/// let n = weir_sdk::DEFAULT_CACHE_CAPACITY;
/// assert_eq!(n, 262_144);
/// ```
#[deprecated(
    since = "0.1.0",
    note = "the caches are sized in bytes for the whole instance: see `weir_sdk::set_cache_budget`"
)]
pub const DEFAULT_CACHE_CAPACITY: usize = 262_144;

/// The estimate of an encoded key, or value, bytes, while its store has
/// measured none.
const FIRST_ESTIMATE: usize = 16;

/// Sets of uncached keys measured exactly (encoded) at first in each store,
/// and one in how many after that, to keep the store's means current.
const SAMPLED_FIRST: u64 = 16;
const SAMPLE_EVERY: u64 = 64;

/// Bytes charged per entry for the allocator's bookkeeping of the heap
/// parts of a key or value (a `String`'s bytes, say).
const HEAP_SLACK: usize = 16;

/// Sets the guest memory, bytes, that the caches of every
/// [`MapState`](crate::MapState) and [`ValueState`](crate::ValueState) of
/// this instance may take together (the estimate in the [cache
/// docs](crate::MapState#the-cache)). The default is an eighth of the
/// instance's memory limit (`limits.memory`, 32 MiB of the default 256
/// MiB); more than half of it is taken as half. 0 writes every change
/// through to the host at once and keeps nothing. Call it in
/// [`Operator::open`](crate::Operator::open).
///
/// ```
/// weir_sdk::testing::with_memory_host(|| {
///     assert_eq!(weir_sdk::cache_budget(), 32 << 20);
///     weir_sdk::set_cache_budget(100 << 20);
///     assert_eq!(weir_sdk::cache_budget(), 100 << 20);
///     weir_sdk::set_cache_budget(usize::MAX);
///     assert_eq!(weir_sdk::cache_budget(), 128 << 20, "at most half the memory limit");
/// });
/// ```
pub fn set_cache_budget(bytes: usize) {
    REGISTRY.with(|r| {
        let mut r = r.borrow_mut();
        let budget = r.budget();
        budget.requested.set(Some(bytes));
        budget.bounds.set(None);
    })
}

/// The budget of this instance's caches, bytes (see [`set_cache_budget`]).
/// Reads the instance's memory limit from the host the first time.
///
/// ```
/// # use weir_sdk::*;
/// # struct Op;
/// # impl Operator for Op {
/// # fn describe() -> OperatorInfo { OperatorInfo::new("op", "1.0.0").input("in").output("out") }
/// # fn open(_: &OpenContext) -> Result<Self> { Ok(Op) }
/// fn process(&mut self, ctx: &mut Context, _: u32, _: Vec<Record>) -> Result<()> {
///     ctx.emit_bytes(0, None, weir_sdk::cache_budget().to_string().as_bytes());
///     Ok(())
/// }
/// # }
/// let mut h = weir_sdk::testing::Harness::<Op>::open("{}").unwrap();
/// h.limits_mut().memory = 64 << 20;
/// let out = h.process("in", vec![Record::new("x")]).unwrap();
/// assert_eq!(out[0].value_str().unwrap(), (8 << 20).to_string());
/// ```
pub fn cache_budget() -> usize {
    REGISTRY.with(|r| r.borrow_mut().budget().bounds().budget)
}

/// Sets how many bytes of dirty entries (changed, not written back yet) the
/// caches of this instance may hold when a hook returns (by default a
/// quarter of the budget, at most [`DEFAULT_CACHE_DIRTY_LIMIT`]). A hook
/// that leaves more writes entries back when it returns, down to half the
/// limit, first those not changed again since the last such write-back,
/// and they stay cached. The write-back after `on_checkpoint`, the
/// operator's pause at a checkpoint, stores at most this plus what
/// `on_checkpoint` itself wrote. A lower limit means shorter pauses, and
/// more writes when more keys change between checkpoints than it holds.
///
/// ```
/// weir_sdk::set_cache_dirty_limit(1 << 20);
/// ```
pub fn set_cache_dirty_limit(bytes: usize) {
    REGISTRY.with(|r| {
        let mut r = r.borrow_mut();
        let budget = r.budget();
        budget.dirty_limit.set(Some(bytes));
        budget.bounds.set(None);
    })
}

/// What the caches of an instance hold, as the SDK estimates it (see the
/// [cache docs](crate::MapState#the-cache)); see
/// [`Harness::cache_usage`](crate::testing::Harness::cache_usage).
///
/// ```
/// let u = weir_sdk::testing::CacheUsage::default();
/// assert_eq!(u.bytes + u.dirty_bytes, 0);
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheUsage {
    /// Cached entries.
    pub entries: usize,
    /// Their estimated bytes.
    pub bytes: usize,
    /// Entries changed and not written back yet.
    pub dirty_entries: usize,
    /// Their estimated bytes.
    pub dirty_bytes: usize,
}

/// The bounds of an instance's caches, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    /// When a hook returns.
    budget: usize,
    /// Inside a hook.
    hard: usize,
    /// Of dirty entries, when a hook returns.
    dirty: usize,
}

impl Bounds {
    /// The bounds for an instance of `memory` bytes of linear memory and
    /// what the operator asked for.
    fn new(memory: usize, budget: Option<usize>, dirty: Option<usize>) -> Bounds {
        let budget = budget.unwrap_or(memory / 8).min(memory / 2);
        Bounds {
            budget,
            hard: budget + budget.min(memory / 8),
            dirty: dirty.unwrap_or((budget / 4).min(DEFAULT_CACHE_DIRTY_LIMIT)),
        }
    }
}

/// The budget of one instance's caches and what they hold, shared by its
/// stores (each updates it through its [`Meter`]).
#[derive(Debug, Default)]
struct Budget {
    /// [`set_cache_budget`], if called.
    requested: Cell<Option<usize>>,
    /// [`set_cache_dirty_limit`], if called.
    dirty_limit: Cell<Option<usize>>,
    /// `limits.memory`, read from the host at the first use.
    memory: Cell<Option<usize>>,
    /// The bounds from the three above; `None` until the first use and
    /// after a change.
    bounds: Cell<Option<Bounds>>,
    /// Bytes charged for every cached entry of every store.
    used: Cell<usize>,
    /// Bytes charged for the dirty ones.
    dirty: Cell<usize>,
}

impl Budget {
    fn bounds(&self) -> Bounds {
        if let Some(b) = self.bounds.get() {
            return b;
        }
        let memory = self.memory.get().unwrap_or_else(|| {
            let m = usize::try_from(host::limits().memory).unwrap_or(usize::MAX);
            self.memory.set(Some(m));
            m
        });
        let b = Bounds::new(memory, self.requested.get(), self.dirty_limit.get());
        self.bounds.set(Some(b));
        b
    }
}

/// Every store of one operator instance, by layout, and their budget. The
/// guest is single threaded and runs one instance, so on Wasm this is one
/// thread-local; `testing` installs one per simulated instance.
///
/// Invariant: an instance that uses no typed state allocates nothing here,
/// not even when the SDK looks at its caches after every hook (the budget
/// is created at the first store or setting): an allocation made while a
/// plugin holds a large buffer could pin the heap and keep that buffer's
/// memory from being reused.
#[derive(Default)]
pub(crate) struct Registry {
    stores: Vec<(Layout, Rc<dyn Cached>)>,
    budget: Option<Rc<Budget>>,
}

impl Registry {
    /// The budget of every store, created at the first use.
    fn budget(&mut self) -> &Rc<Budget> {
        self.budget.get_or_insert_with(Rc::default)
    }

    /// The budget, if there is one (there is once a store exists).
    fn budget_if_any(&self) -> Option<&Budget> {
        self.budget.as_deref()
    }

    /// Writes every dirty entry of every store back: one `put-many` (per
    /// [`host::PUT_MANY_CHUNK`]), deletions included. Entries stay cached,
    /// clean.
    fn write_back(&self) {
        if self.budget_if_any().is_none_or(|b| b.dirty.get() == 0) {
            return;
        }
        PutMany::run(|writes| {
            for (_, store) in &self.stores {
                store.take_dirty(writes);
            }
        });
    }

    /// Writes back dirty entries until at most `target` bytes of them are
    /// left: those not changed again since the last such pass first (so
    /// that keys that keep changing are not written over and over), then
    /// any. Entries stay cached, clean.
    fn write_back_to(&self, target: usize) {
        if self.budget_if_any().is_none_or(|b| b.dirty.get() <= target) {
            return;
        }
        PutMany::run(|writes| {
            for any in [false, true] {
                for (_, store) in &self.stores {
                    store.write_back_to(writes, target, any);
                }
            }
        });
    }

    /// Writes back, then brings the caches down to half the budget, each
    /// store to its share.
    fn shrink(&self) {
        let Some(budget) = self.budget_if_any() else {
            return;
        };
        self.write_back();
        let target = budget.bounds().budget / 2;
        let used = budget.used.get();
        if used > target {
            for (_, store) in &self.stores {
                store.shrink(target, used);
            }
        }
    }

    /// What every store holds.
    pub(crate) fn usage(&self) -> CacheUsage {
        let mut usage = CacheUsage::default();
        for (_, store) in &self.stores {
            store.add_usage(&mut usage);
        }
        if let Some(budget) = self.budget_if_any() {
            debug_assert_eq!(usage.bytes, budget.used.get());
            debug_assert_eq!(usage.dirty_bytes, budget.dirty.get());
        }
        debug_assert_eq!(
            usage.bytes,
            self.stores.iter().map(|(_, s)| s.bytes()).sum::<usize>()
        );
        usage
    }
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// Exchanges the installed registry with `other`.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) fn swap_registry(other: &mut Registry) {
    REGISTRY.with(|r| std::mem::swap(&mut *r.borrow_mut(), other));
}

/// Writes every dirty entry of every store back to the host, with one
/// `put-many` (per [`host::PUT_MANY_CHUNK`]), deletions included. Entries
/// stay cached, clean.
pub(crate) fn write_back_all() {
    REGISTRY.with(|r| r.borrow().write_back());
}

/// Brings the caches back within their bounds (the SDK calls it when a
/// hook returns): each store within its entry capacity, if it has one, all
/// of them within the budget and the dirty limit.
pub(crate) fn trim_all() {
    REGISTRY.with(|r| {
        let r = r.borrow();
        let Some(budget) = r.budget_if_any() else {
            return;
        };
        if budget.used.get() == 0 {
            return;
        }
        for (_, store) in &r.stores {
            store.trim_entries();
        }
        let bounds = budget.bounds();
        if budget.used.get() > bounds.budget {
            r.shrink();
        } else if budget.dirty.get() > bounds.dirty {
            r.write_back_to(bounds.dirty / 2);
        }
    });
}

/// [`write_back_all`], then empties every store.
pub(crate) fn write_back_and_evict_all() {
    REGISTRY.with(|r| {
        let r = r.borrow();
        r.write_back();
        for (_, store) in &r.stores {
            store.evict_all();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// How keys were encoded before `encode_key` skipped the `Value`: the
    /// stored keys of existing checkpoints.
    fn through_value<K: Serialize>(key: &K) -> Vec<u8> {
        match serde_json::to_value(key) {
            Ok(serde_json::Value::String(s)) => s.into_bytes(),
            _ => serde_json::to_vec(key).unwrap(),
        }
    }

    #[derive(Serialize)]
    enum Kind {
        Unit,
        Tuple(u8, String),
    }

    fn encode_key<K: Serialize>(key: &K) -> Vec<u8> {
        let mut out = b"prefix".to_vec();
        write_key(key, &mut out);
        assert_eq!(&out[..6], b"prefix", "appends");
        out.split_off(6)
    }

    fn count_store(budget: &Rc<Budget>) -> Store<String, u64> {
        Store::new(
            "count",
            Layout::Map {
                suffix: b"\0count".to_vec(),
            },
            Rc::clone(budget),
        )
    }

    /// A write-back packs each dirty entry, key and value encoded in place
    /// in one buffer (no allocation per entry), a removal as a deletion;
    /// each entry is then charged its encoded size.
    #[test]
    fn a_write_back_packs_every_dirty_entry_once_at_its_size() {
        crate::testing::with_memory_host(|| {
            let budget = Rc::new(Budget::default());
            let mut store = count_store(&budget);
            store.set("w1", Some(7));
            store.set("q\"uote", Some(123_456));
            store.set("gone", None);
            assert_eq!(store.meter.dirty_entries, 3);
            let overhead = store.meter.overhead;
            // The first sets of a store are measured.
            assert_eq!(store.meter.bytes, (10 + 18 + 9) + 3 * overhead);
            PutMany::run(|w| {
                store.take_dirty(w);
                let mut packed: Vec<(&[u8], Option<&[u8]>)> =
                    weir_flat::state::Entries::parse(w.buf()).unwrap().collect();
                packed.sort();
                assert_eq!(
                    packed,
                    [
                        (&b"gone\0count"[..], None),
                        (&b"q\"uote\0count"[..], Some(&b"123456"[..])),
                        (&b"w1\0count"[..], Some(&b"7"[..])),
                    ]
                );
                assert_eq!(w.buf().len(), (8 + 10) + (8 + 12 + 6) + (8 + 8 + 1));
            });
            assert_eq!(store.meter.dirty_entries, 0);
            assert_eq!(store.meter.dirty_bytes, 0);
            assert_eq!(store.meter.bytes, (10 + 18 + 9) + 3 * overhead);
            assert_eq!(budget.used.get(), store.meter.bytes);
            assert_eq!(budget.dirty.get(), 0);
            let (calls, state) =
                crate::host::memory::with_host(|h| (h.calls.clone(), h.state.clone()));
            assert_eq!((calls.flat_put_many, calls.flat_put_entries), (1, 3));
            assert_eq!(state.len(), 2);
            assert_eq!(state[&b"w1\0count"[..]], b"7");
        });
    }

    /// Reads are charged their key and value, sets after the first ones
    /// their store's means; every change reaches the shared budget, and
    /// evictions give back what they drop.
    #[test]
    fn every_entry_is_charged_in_its_store_and_in_the_budget() {
        crate::testing::with_memory_host(|| {
            crate::host::memory::with_host(|h| {
                h.state.insert(b"abc\0count".to_vec(), b"12345".to_vec());
            });
            let budget = Rc::new(Budget::default());
            let mut store = count_store(&budget);
            let overhead = store.meter.overhead;
            assert!(overhead > size_of::<(String, Slot<u64>)>() * 3 / 2);
            let n = store.with_slot("abc", |slot, _| slot.value).unwrap();
            assert_eq!(n, Some(12345));
            assert_eq!(store.meter.bytes, 9 + 5 + overhead, "key and value, read");
            store.with_slot("none", |_, _| ()).unwrap();
            assert_eq!(store.meter.bytes, (14 + overhead) + (10 + overhead));
            // A clean absent entry that gets a value is charged the mean
            // value on top of its key.
            store.set("none", Some(7));
            assert_eq!(store.meter.bytes, (14 + overhead) + (10 + 5 + overhead));
            assert_eq!(store.meter.dirty_bytes, 15 + overhead);
            // Sets of new keys are measured at first, then estimated.
            for i in 0..SAMPLED_FIRST {
                store.set(&format!("k{i:02}"), Some(1));
            }
            let before = store.meter.bytes;
            store.set("unmeasured", Some(1));
            let (keys, values) = (store.meter.keys, store.meter.values);
            assert_eq!(
                store.meter.bytes - before,
                (keys.1 / keys.0 + values.1 / values.0) as usize + overhead
            );
            assert_eq!(budget.used.get(), store.meter.bytes);
            assert_eq!(budget.dirty.get(), store.meter.dirty_bytes);
            // A second store adds to the same budget.
            let mut other = count_store(&budget);
            other.set("x", None);
            assert_eq!(budget.used.get(), store.meter.bytes + other.meter.bytes);
            PutMany::run(|w| {
                store.take_dirty(w);
                other.take_dirty(w);
            });
            assert_eq!(budget.dirty.get(), 0);
            // Written back, every entry is charged its measured size.
            let measured: usize = store.table.slots().map(|s| s.size as usize).sum();
            assert_eq!(store.meter.bytes, measured + store.table.len() * overhead);
            store.evict(0.0, |_, left| left > 0);
            other.evict(0.0, |_, left| left > 0);
            assert_eq!((budget.used.get(), budget.dirty.get()), (0, 0));
            assert!(store.table.is_empty());
        });
    }

    #[test]
    fn the_bounds_follow_the_memory_limit() {
        let mib = 1 << 20;
        let default = Bounds::new(256 * mib, None, None);
        assert_eq!(
            default,
            Bounds {
                budget: 32 * mib,
                hard: 64 * mib,
                dirty: 8 * mib
            }
        );
        // The dirty limit is a quarter of the budget, at most 8 MiB.
        assert_eq!(Bounds::new(16 * mib, None, None).dirty, mib / 2);
        assert_eq!(Bounds::new(256 * mib, Some(100 * mib), None).dirty, 8 * mib);
        // Asked for: at most half the memory; inside a hook at most an
        // eighth more.
        let big = Bounds::new(256 * mib, Some(usize::MAX), Some(mib));
        assert_eq!(
            (big.budget, big.hard, big.dirty),
            (128 * mib, 160 * mib, mib)
        );
        let small = Bounds::new(256 * mib, Some(mib), None);
        assert_eq!((small.budget, small.hard), (mib, 2 * mib));
        let none = Bounds::new(256 * mib, Some(0), None);
        assert_eq!((none.budget, none.hard), (0, 0));
        // The 4 GiB of a 32-bit guest, read as usize::MAX when it does not
        // fit, does not overflow.
        let max = Bounds::new(usize::MAX, None, None);
        assert!(max.hard > max.budget);
    }

    #[test]
    fn keys_encode_as_they_always_have() {
        let strings = [
            "",
            "w1",
            "with space",
            "q\"uote",
            "back\\slash",
            "tab\tnl\n",
            "\u{1}\u{7f}",
            "日本語",
            "\u{2028}",
            "\\u0041",
            "\"",
            "\\",
        ];
        for k in strings {
            assert_eq!(encode_key(&k), through_value(&k), "{k:?}");
            assert_eq!(encode_key(&k.to_string()), k.as_bytes());
        }
        assert_eq!(encode_key(&'x'), through_value(&'x'));
        assert_eq!(encode_key(&42u64), through_value(&42u64));
        assert_eq!(encode_key(&-1.5f64), through_value(&-1.5f64));
        assert_eq!(encode_key(&f64::NAN), through_value(&f64::NAN));
        assert_eq!(encode_key(&true), through_value(&true));
        assert_eq!(encode_key(&None::<u8>), through_value(&None::<u8>));
        assert_eq!(encode_key(&Some("s")), through_value(&Some("s")));
        assert_eq!(encode_key(&("a", 1)), through_value(&("a", 1)));
        assert_eq!(encode_key(&Kind::Unit), through_value(&Kind::Unit));
        let t = Kind::Tuple(1, "x\"".into());
        assert_eq!(encode_key(&t), through_value(&t));
        #[derive(Serialize)]
        struct Name(String);
        assert_eq!(
            encode_key(&Name("n\"1".into())),
            through_value(&Name("n\"1".into()))
        );
        assert_eq!(
            encode_key(&Some(Some("s"))),
            through_value(&Some(Some("s")))
        );
        assert_eq!(
            encode_key(&Some(None::<&str>)),
            through_value(&Some(None::<&str>))
        );
        assert_eq!(encode_key(&Some(3u8)), through_value(&Some(3u8)));
        assert_eq!(encode_key(&()), through_value(&()));
        let ip: std::net::IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(encode_key(&ip), through_value(&ip));
        let m: BTreeMap<&str, u8> = [("b", 1), ("a", 2)].into();
        assert_eq!(encode_key(&m), through_value(&m));
        assert_eq!(encode_key(&vec!["\"x\""]), through_value(&vec!["\"x\""]));
    }
}
