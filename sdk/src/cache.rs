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

use std::any::Any;
use std::borrow::Borrow;
use std::cell::{Cell, RefCell, RefMut};
use std::collections::HashSet;
use std::hash::Hash;
use std::rc::Rc;

use serde::{Serialize, de::DeserializeOwned};
use weir_flat::state::{push_deletion_with, push_entry_with, push_key_with};

use crate::error::{Error, Result};
use crate::host::{self, PutMany};

mod key;
mod table;

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

/// Adds `delta` to `cell`.
fn add(cell: &Cell<usize>, delta: usize) {
    cell.set(cell.get() + delta);
}

/// Subtracts `delta` from `cell`.
fn sub(cell: &Cell<usize>, delta: usize) {
    cell.set(cell.get() - delta);
}

/// A size as a slot keeps it, saturated.
fn size32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A cached value; `None` when the host holds nothing (or it was removed).
struct Slot<V> {
    value: Option<V>,
    dirty: bool,
    /// Changed again while dirty since the last partial write-back looked
    /// at it: that write-back leaves it dirty (and clears this), since a
    /// key that keeps changing would soon be dirty again.
    hot: bool,
    /// Bytes of its encoded state key and value: measured when read from
    /// the host or written back, else estimated.
    size: u32,
}

/// The charges of one store's entries: each is charged its [`Slot::size`]
/// plus `overhead`. Keeps its totals and those of the instance's
/// [`Budget`] equal to the sums over the store's slots, and the running
/// means of the encoded keys and values it has measured, for the sizes it
/// estimates.
struct Meter {
    /// The table's share per entry ([`Table::bytes_per_entry`]), plus
    /// [`HEAP_SLACK`].
    overhead: usize,
    bytes: usize,
    dirty_entries: usize,
    dirty_bytes: usize,
    budget: Rc<Budget>,
    /// Encoded keys measured: how many, and their bytes.
    keys: (u64, u64),
    /// Encoded values measured (absent ones aside): how many, their bytes.
    values: (u64, u64),
    /// Sets of keys that were not cached, for sampling.
    sets: u64,
}

impl Meter {
    fn for_entries<K, V>(budget: Rc<Budget>) -> Meter {
        Meter {
            overhead: Table::<K, V>::bytes_per_entry() + HEAP_SLACK,
            bytes: 0,
            dirty_entries: 0,
            dirty_bytes: 0,
            budget,
            keys: (0, 0),
            values: (0, 0),
            sets: 0,
        }
    }

    fn charge(&self, size: u32) -> usize {
        size as usize + self.overhead
    }

    /// Records the sizes of an encoded key and value (`None`: absent)
    /// for the means; returns the entry's size.
    fn measured(&mut self, key: usize, value: Option<usize>) -> usize {
        self.keys = (self.keys.0 + 1, self.keys.1 + key as u64);
        if let Some(v) = value {
            self.values = (self.values.0 + 1, self.values.1 + v as u64);
        }
        key + value.unwrap_or(0)
    }

    fn mean(&(n, bytes): &(u64, u64)) -> usize {
        match n {
            0 => FIRST_ESTIMATE,
            n => (bytes / n) as usize,
        }
    }

    /// The estimated size of an entry of an unmeasured key, and of an
    /// unmeasured value if `present`.
    fn estimate(&self, present: bool) -> usize {
        Self::mean(&self.keys) + if present { Self::mean(&self.values) } else { 0 }
    }

    /// Whether to measure this set of an uncached key exactly.
    fn sample(&mut self) -> bool {
        self.sets += 1;
        self.sets <= SAMPLED_FIRST || self.sets.is_multiple_of(SAMPLE_EVERY)
    }

    /// Counts a new slot, clean.
    fn cached<V>(&mut self, slot: &Slot<V>) {
        debug_assert!(!slot.dirty);
        let c = self.charge(slot.size);
        self.bytes += c;
        add(&self.budget.used, c);
    }

    /// Uncounts a clean slot that is dropped.
    fn dropped<V>(&mut self, slot: &Slot<V>) {
        debug_assert!(!slot.dirty, "dropping a dirty entry");
        let c = self.charge(slot.size);
        self.bytes -= c;
        sub(&self.budget.used, c);
    }

    /// Charges `slot` for `size` bytes from now on.
    fn resized<V>(&mut self, slot: &mut Slot<V>, size: usize) {
        let old = self.charge(slot.size);
        slot.size = size32(size);
        let new = self.charge(slot.size);
        self.bytes = self.bytes - old + new;
        sub(&self.budget.used, old);
        add(&self.budget.used, new);
        if slot.dirty {
            self.dirty_bytes = self.dirty_bytes - old + new;
            sub(&self.budget.dirty, old);
            add(&self.budget.dirty, new);
        }
    }

    /// Stores `value` in `slot`, dirty; `was_absent`: the slot held no
    /// value before. A slot that was clean and absent was measured without
    /// a value: it is charged a value's estimate on top when `value` is one.
    fn set<V>(&mut self, slot: &mut Slot<V>, was_absent: bool, value: Option<V>) {
        if !slot.dirty && was_absent && value.is_some() {
            let size = slot.size as usize + Self::mean(&self.values);
            self.resized(slot, size);
        }
        slot.value = value;
        self.dirtied(slot);
    }

    /// Marks `slot` dirty (hot if it already was).
    fn dirtied<V>(&mut self, slot: &mut Slot<V>) {
        if slot.dirty {
            slot.hot = true;
        } else {
            slot.dirty = true;
            let c = self.charge(slot.size);
            self.dirty_entries += 1;
            self.dirty_bytes += c;
            add(&self.budget.dirty, c);
        }
    }

    /// Marks a dirty `slot` clean, written back with a key of `key` bytes
    /// and a value of `value` bytes (`None`: a deletion).
    fn cleaned<V>(&mut self, slot: &mut Slot<V>, key: usize, value: Option<usize>) {
        debug_assert!(slot.dirty);
        let size = self.measured(key, value);
        self.resized(slot, size);
        let c = self.charge(slot.size);
        slot.dirty = false;
        slot.hot = false;
        self.dirty_entries -= 1;
        self.dirty_bytes -= c;
        sub(&self.budget.dirty, c);
    }

    /// Uncounts every slot; they must all be clean.
    fn clear(&mut self) {
        debug_assert_eq!(self.dirty_entries, 0, "evicting dirty entries");
        sub(&self.budget.used, self.bytes);
        self.bytes = 0;
    }
}

/// Caches `value` under `key`, clean, unless `key` is cached; returns its
/// position. `sizes`: of the encoded key and value read from the host.
fn insert_read<K: Hash + Eq, V>(
    table: &mut Table<K, V>,
    meter: &mut Meter,
    (hash, key): (KeyHash, K),
    value: Option<V>,
    (key_len, value_len): (usize, Option<usize>),
) -> usize {
    table.find_or_insert(hash, key, || {
        let slot = Slot {
            value,
            dirty: false,
            hot: false,
            size: size32(meter.measured(key_len, value_len)),
        };
        meter.cached(&slot);
        slot
    })
}

/// Where a store's entries live in host state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Layout {
    /// A map: key `k` is stored under `<k>` followed by `suffix`.
    Map { suffix: Vec<u8> },
    /// One value, stored under `key`.
    Value { key: Vec<u8> },
}

/// Appends a state key's text to `out`: the key's string when it
/// serializes to a JSON string, else its JSON text. One serialization, no
/// `Value`: a string is written as it is ([`key`]); the JSON path below
/// handles the rest and, for a string, gives the same bytes (its JSON text
/// without the quotes, unescaped). Keys are stored, so this must never
/// change its output.
fn write_key<K: Serialize>(key: &K, out: &mut Vec<u8>) {
    if key::write_if_string(key, out) {
        return;
    }
    let start = out.len();
    serde_json::to_writer(&mut *out, key).expect("serializing a state key to JSON in memory");
    match &out[start..] {
        [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') => {
            let end = out.len() - 1;
            out.copy_within(start + 1..end, start);
            out.truncate(end - 1);
        }
        [b'"', ..] => {
            let text: String = serde_json::from_slice(&out[start..])
                .expect("serde_json reads back the string it wrote");
            out.truncate(start);
            out.extend_from_slice(text.as_bytes());
        }
        _ => {}
    }
}

impl Layout {
    /// Appends the host state key of `key` to `out`.
    fn write_state_key<K: Serialize>(&self, key: &K, out: &mut Vec<u8>) {
        match self {
            Layout::Map { suffix } => {
                write_key(key, out);
                out.extend_from_slice(suffix);
            }
            Layout::Value { key } => out.extend_from_slice(key),
        }
    }

    pub(crate) fn state_key<K: Serialize>(&self, key: &K) -> Vec<u8> {
        // Room for a typical key, so that writing it does not reallocate.
        let mut out = Vec::with_capacity(64);
        self.write_state_key(key, &mut out);
        out
    }
}

/// Appends `v` as JSON to `out`.
fn write_value<V: Serialize>(v: &V, out: &mut Vec<u8>) {
    serde_json::to_writer(out, v).expect("serializing a state value to JSON in memory");
}

pub(crate) fn decode_value<V: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<V> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::IncompatibleState(format!(
            "state `{what}` holds a value that does not decode: {e}"
        ))
    })
}

/// The cache of one named map or value.
pub(crate) struct Store<K, V> {
    name: &'static str,
    layout: Layout,
    /// Most entries when a hook returns (`with_cache_capacity`), on top of
    /// the instance's budget; `None`: no such bound.
    capacity: Option<usize>,
    table: Table<K, V>,
    meter: Meter,
    /// Reads of the host since the last `prefetch` (`None` before the
    /// first, and after an eviction): a `prefetch` after one that found
    /// every key cached, with no miss or eviction since, skips its lookups
    /// (prefetching only saves host calls).
    misses_since_prefetch: Option<usize>,
}

impl<K, V> Store<K, V>
where
    K: Serialize + Hash + Eq + Clone,
    V: Serialize + DeserializeOwned + Clone,
{
    fn new(name: &'static str, layout: Layout, budget: Rc<Budget>) -> Self {
        Store {
            name,
            layout,
            capacity: None,
            table: Table::new(),
            meter: Meter::for_entries::<K, V>(budget),
            misses_since_prefetch: None,
        }
    }

    /// Runs `f` on the slot of `key`, reading the host once on a miss.
    fn with_slot<Q, R>(
        &mut self,
        key: &Q,
        f: impl FnOnce(&mut Slot<V>, &mut Meter) -> R,
    ) -> Result<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let meter = &mut self.meter;
        let hash = match self.table.find_next(key) {
            Ok(i) => return Ok(self.table.with(i, |slot| f(slot, meter))),
            Err(hash) => hash,
        };
        if let Some(m) = &mut self.misses_since_prefetch {
            *m += 1;
        }
        let key = key.to_owned();
        let (bytes, key_len) = host::with_buffer(|buf| {
            self.layout.write_state_key(&key, buf);
            (host::get(buf), buf.len())
        });
        let sizes = (key_len, bytes.as_ref().map(Vec::len));
        let value = bytes.map(|b| decode_value(self.name, &b)).transpose()?;
        let i = insert_read(&mut self.table, &mut self.meter, (hash, key), value, sizes);
        let meter = &mut self.meter;
        Ok(self.table.with(i, |slot| f(slot, meter)))
    }

    /// Stores `value` (`None`: removes) under `key`, dirty, without reading.
    fn set<Q>(&mut self, key: &Q, value: Option<V>)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let hash = match self.table.find_next(key) {
            Ok(i) => {
                let meter = &mut self.meter;
                self.table.with(i, |slot| {
                    let was_absent = slot.value.is_none();
                    meter.set(slot, was_absent, value);
                });
                return;
            }
            Err(hash) => hash,
        };
        let key = key.to_owned();
        let size = if self.meter.sample() {
            let layout = &self.layout;
            let (k, v) = host::with_buffer(|buf| {
                layout.write_state_key(&key, buf);
                let k = buf.len();
                let v = value.as_ref().map(|v| {
                    write_value(v, buf);
                    buf.len() - k
                });
                (k, v)
            });
            self.meter.measured(k, v)
        } else {
            self.meter.estimate(value.is_some())
        };
        let mut slot = Slot {
            value,
            dirty: false,
            hot: false,
            size: size32(size),
        };
        self.meter.cached(&slot);
        self.meter.dirtied(&mut slot);
        self.table.insert_new(hash, key, slot);
    }

    /// Packs every dirty entry into `writes` (a deletion for a removed one)
    /// and marks it clean, charged at its encoded size.
    fn take_dirty(&mut self, writes: &mut PutMany) {
        self.write_back_while(writes, |_| true);
    }

    /// Packs dirty entries into `writes` and marks them clean, oldest
    /// change first, while the instance holds more than `target` dirty bytes:
    /// unless `any`, only those not changed again since the last such pass
    /// (a hot one is cooled and left dirty).
    fn write_back_to(&mut self, writes: &mut PutMany, target: usize, any: bool) {
        let budget = Rc::clone(&self.meter.budget);
        self.write_back_while(writes, |slot| {
            budget.dirty.get() > target && (any || !std::mem::take(&mut slot.hot))
        });
    }

    /// Packs the dirty entries `pick` picks (seeing each dirty one, in the
    /// order they became dirty) into `writes` and marks them clean.
    fn write_back_while(
        &mut self,
        writes: &mut PutMany,
        mut pick: impl FnMut(&mut Slot<V>) -> bool,
    ) {
        let (layout, meter) = (&self.layout, &mut self.meter);
        self.table.retain_dirty(|key, slot| {
            if !pick(slot) {
                return;
            }
            let (k, v) = match &slot.value {
                Some(v) => {
                    let (k, v) = push_entry_with(
                        writes.buf(),
                        |out| layout.write_state_key(key, out),
                        |out| write_value(v, out),
                    );
                    (k, Some(v))
                }
                None => {
                    let k =
                        push_deletion_with(writes.buf(), |out| layout.write_state_key(key, out));
                    (k, None)
                }
            };
            meter.cleaned(slot, k, v);
            writes.packed();
        });
    }

    /// Drops clean entries while `over(meter, entries left)`: all but about
    /// a share `keep` of them, those whose keys hash lowest, then, if still
    /// over, the first in position order. The hash is seeded per store, so
    /// which keys stay is arbitrary, but the same from one eviction to the
    /// next: a working set larger than the cache keeps the same part of it
    /// cached, rather than a new one after every overflow. Choosing them
    /// takes a vector of the store's hashes, 8 bytes per entry, for the
    /// eviction's duration.
    fn evict(&mut self, keep: f64, over: impl Fn(&Meter, usize) -> bool) {
        let n = self.table.len();
        let kept = (n as f64 * keep.clamp(0.0, 1.0)) as usize;
        let limit = match kept {
            0 => None,
            k => {
                let mut hashes: Vec<u64> = self.table.hashes().collect();
                Some(*hashes.select_nth_unstable(k - 1).1)
            }
        };
        let mut left = n;
        for by_hash in [true, false] {
            if !over(&self.meter, left) {
                break;
            }
            let meter = &mut self.meter;
            self.table.retain(|hash, slot| {
                if slot.dirty || !over(meter, left) {
                    return true;
                }
                if by_hash && limit.is_some_and(|l| hash <= l) {
                    return true;
                }
                meter.dropped(slot);
                left -= 1;
                false
            });
        }
        // Keys a prefetch found may be gone now: the next one looks.
        self.misses_since_prefetch = None;
    }

    /// Over `limit` entries: writes back, then keeps half the capacity
    /// ([`evict`](Self::evict)).
    fn trim_entries_over(&mut self, limit: usize) {
        if let Some(capacity) = self.capacity
            && self.table.len() > limit
        {
            PutMany::run(|w| self.take_dirty(w));
            let keep = (capacity / 2) as f64 / self.table.len() as f64;
            self.evict(keep, |_, left| left > capacity / 2);
        }
    }

    /// The entry bound inside a hook: twice the capacity. The capacity
    /// itself is enforced when the hook returns ([`trim_all`]), so that the
    /// keys one batch prefetches stay cached while the batch is processed.
    fn enforce_entry_bound(&mut self) {
        if let Some(capacity) = self.capacity {
            self.trim_entries_over(capacity.saturating_mul(2));
        }
    }
}

/// A store as the registry sees it.
trait Cached: Any {
    /// Packs the dirty entries into `writes` and marks them clean.
    fn take_dirty(&self, writes: &mut PutMany);
    /// Packs dirty entries until the instance holds at most `target`
    /// dirty bytes, only cold ones unless `any` ([`Store::write_back_to`]).
    fn write_back_to(&self, writes: &mut PutMany, target: usize, any: bool);
    /// Writes back and evicts half when over its entry capacity.
    fn trim_entries(&self);
    /// Drops clean entries ([`Store::evict`]) down to `share` of their
    /// bytes (a fraction `num / den`).
    fn shrink(&self, num: usize, den: usize);
    /// Drops every entry; they must all be clean.
    fn evict_all(&self);
    /// Bytes charged for its entries.
    fn bytes(&self) -> usize;
    /// Adds what it holds to `usage`.
    fn add_usage(&self, usage: &mut CacheUsage);
}

impl<K, V> Cached for RefCell<Store<K, V>>
where
    K: Serialize + Hash + Eq + Clone + 'static,
    V: Serialize + DeserializeOwned + Clone + 'static,
{
    fn take_dirty(&self, writes: &mut PutMany) {
        self.borrow_mut().take_dirty(writes)
    }

    fn write_back_to(&self, writes: &mut PutMany, target: usize, any: bool) {
        self.borrow_mut().write_back_to(writes, target, any)
    }

    fn trim_entries(&self) {
        let mut store = self.borrow_mut();
        if let Some(capacity) = store.capacity {
            store.trim_entries_over(capacity);
        }
    }

    fn shrink(&self, num: usize, den: usize) {
        let mut store = self.borrow_mut();
        let target = (store.meter.bytes as u128 * num as u128 / den.max(1) as u128) as usize;
        let keep = target as f64 / store.meter.bytes.max(1) as f64;
        store.evict(keep, |meter, _| meter.bytes > target);
    }

    fn evict_all(&self) {
        let mut store = self.borrow_mut();
        store.table.clear();
        store.meter.clear();
    }

    fn bytes(&self) -> usize {
        RefCell::borrow(self).meter.bytes
    }

    fn add_usage(&self, usage: &mut CacheUsage) {
        let store = RefCell::borrow(self);
        usage.entries += store.table.len();
        usage.bytes += store.meter.bytes;
        usage.dirty_entries += store.meter.dirty_entries;
        usage.dirty_bytes += store.meter.dirty_bytes;
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

/// A handle on a store; clones share it.
pub(crate) struct Shared<K, V> {
    store: Rc<RefCell<Store<K, V>>>,
    budget: Rc<Budget>,
}

impl<K, V> Clone for Shared<K, V> {
    fn clone(&self) -> Self {
        Shared {
            store: Rc::clone(&self.store),
            budget: Rc::clone(&self.budget),
        }
    }
}

impl<K, V> std::fmt::Debug for Shared<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = RefCell::borrow(&self.store);
        f.debug_struct("StateCache")
            .field("name", &s.name)
            .field("capacity", &s.capacity)
            .field("cached", &s.table.len())
            .field("bytes", &s.meter.bytes)
            .field("dirty", &s.meter.dirty_entries)
            .field("dirty_bytes", &s.meter.dirty_bytes)
            .finish()
    }
}

impl<K, V> Shared<K, V>
where
    K: Serialize + Hash + Eq + Clone + 'static,
    V: Serialize + DeserializeOwned + Clone + 'static,
{
    /// The instance's store at `layout`, created empty when there is none.
    /// Panics when it exists with other key or value types.
    pub(crate) fn open(name: &'static str, layout: Layout) -> Self {
        REGISTRY.with(|r| {
            let mut registry = r.borrow_mut();
            let budget = Rc::clone(registry.budget());
            if let Some((_, found)) = registry.stores.iter().find(|(l, _)| *l == layout) {
                let found: Rc<dyn Any> = found.clone();
                let store = found.downcast().unwrap_or_else(|_| {
                    panic!("typed state `{name}` is already in use with other key or value types: give each its own name")
                });
                return Shared { store, budget };
            }
            let store = Rc::new(RefCell::new(Store::new(
                name,
                layout.clone(),
                Rc::clone(&budget),
            )));
            registry.stores.push((layout, store.clone()));
            Shared { store, budget }
        })
    }

    pub(crate) fn set_capacity(&self, capacity: usize) {
        self.store.borrow_mut().capacity = Some(capacity);
    }

    pub(crate) fn name(&self) -> &'static str {
        RefCell::borrow(&self.store).name
    }

    pub(crate) fn state_key(&self, key: &K) -> Vec<u8> {
        RefCell::borrow(&self.store).layout.state_key(key)
    }

    /// Enforces the bounds inside a hook after a change to this store: its
    /// entry bound, then, with `store` released (an eviction may reach
    /// every store), the instance's hard bound.
    fn enforce_bounds(&self, mut store: RefMut<'_, Store<K, V>>) {
        store.enforce_entry_bound();
        drop(store);
        if self.budget.used.get() > self.budget.bounds().hard {
            REGISTRY.with(|r| r.borrow().shrink());
        }
    }

    /// The value under `key`.
    pub(crate) fn get<Q>(&self, key: &Q) -> Result<Option<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut store = self.store.borrow_mut();
        let value = store.with_slot(key, |slot, _| slot.value.clone())?;
        self.enforce_bounds(store);
        Ok(value)
    }

    /// The values under `keys`, reading every miss in one `get-many`.
    pub(crate) fn get_many(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let mut out = Vec::with_capacity(keys.len());
        let mut guard = self.store.borrow_mut();
        {
            let store = &mut *guard;
            let mut misses = Vec::new();
            for (i, key) in keys.iter().enumerate() {
                match store.table.find(key) {
                    Ok(at) => out.push(store.table.slot(at).value.clone()),
                    Err(hash) => {
                        out.push(None);
                        misses.push((i, hash));
                    }
                }
            }
            let (name, layout) = (store.name, &store.layout);
            let mut next = misses.iter();
            host::get_many_with(
                |buf| {
                    for &(i, _) in &misses {
                        push_key_with(buf, |out| layout.write_state_key(&keys[i], out));
                    }
                },
                |key, bytes| {
                    let &(i, hash) = next.next().expect("one value per miss");
                    let value: Option<V> = bytes.map(|b| decode_value(name, b)).transpose()?;
                    out[i].clone_from(&value);
                    let sizes = (key.len(), bytes.map(<[u8]>::len));
                    let key = (hash, keys[i].clone());
                    insert_read(&mut store.table, &mut store.meter, key, value, sizes);
                    Ok::<_, Error>(())
                },
            )?;
        }
        self.enforce_bounds(guard);
        Ok(out)
    }

    /// Reads every uncached key of `keys` with one `get-many`.
    pub(crate) fn prefetch<'a, Q>(&self, keys: impl IntoIterator<Item = &'a Q>) -> Result<()>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'a,
    {
        let mut guard = self.store.borrow_mut();
        {
            let store = &mut *guard;
            let mut positions = store.table.take_expected();
            if store.misses_since_prefetch == Some(0) {
                // No expectation: the buffer only goes back for reuse.
                store.table.expect(positions);
                return Ok(());
            }
            // Each miss once, however often the batch repeats it, with the
            // index in `positions` of its first occurrence.
            let mut misses: Vec<(usize, KeyHash, K)> = Vec::new();
            let mut seen = HashSet::with_hasher(store.table.hasher().clone());
            for key in keys {
                match store.table.find(key) {
                    Ok(at) => positions.push(table::position(at)),
                    Err(hash) => {
                        if seen.insert(key) {
                            misses.push((positions.len(), hash, key.to_owned()));
                        }
                        positions.push(table::UNKNOWN);
                    }
                }
            }
            store.misses_since_prefetch = Some(misses.len());
            if misses.is_empty() {
                store.table.expect(positions);
                return Ok(());
            }
            let (name, layout) = (store.name, &store.layout);
            // Decoded before any is cached: a value that does not decode
            // leaves the cache as it was.
            let mut values = Vec::with_capacity(misses.len());
            host::get_many_with(
                |buf| {
                    for (_, _, key) in &misses {
                        push_key_with(buf, |out| layout.write_state_key(key, out));
                    }
                },
                |key, bytes| {
                    let value: Option<V> = bytes.map(|b| decode_value(name, b)).transpose()?;
                    values.push((value, (key.len(), bytes.map(<[u8]>::len))));
                    Ok::<_, Error>(())
                },
            )?;
            for ((first, hash, key), (value, sizes)) in misses.into_iter().zip(values) {
                let at = insert_read(
                    &mut store.table,
                    &mut store.meter,
                    (hash, key),
                    value,
                    sizes,
                );
                positions[first] = table::position(at);
            }
            store.table.expect(positions);
        }
        self.enforce_bounds(guard);
        Ok(())
    }

    /// Replaces the value under `key` with `f(old)`; returns the new value.
    pub(crate) fn update<Q>(&self, key: &Q, f: impl FnOnce(Option<V>) -> V) -> Result<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut store = self.store.borrow_mut();
        let new = store.with_slot(key, |slot, meter| {
            let old = slot.value.take();
            let was_absent = old.is_none();
            let new = f(old);
            meter.set(slot, was_absent, Some(new.clone()));
            new
        })?;
        self.enforce_bounds(store);
        Ok(new)
    }

    /// Stores each `(key, value)`; `None` removes.
    pub(crate) fn set_many<'a, Q>(&self, pairs: impl IntoIterator<Item = (&'a Q, Option<V>)>)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'a,
    {
        let mut store = self.store.borrow_mut();
        for (key, value) in pairs {
            store.set(key, value);
        }
        self.enforce_bounds(store);
    }
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
