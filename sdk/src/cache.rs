//! The guest-side write-back cache behind [`MapState`](crate::MapState) and
//! [`ValueState`](crate::ValueState), and the registry through which the SDK
//! writes every cache back to host state.
//!
//! Why writing back late is correct: the host takes this instance's state
//! only right after `on-checkpoint` returns (at the end of input, `finish`
//! is followed by `on-checkpoint`), and the adapter writes every dirty entry
//! back before it returns from `on-checkpoint` and from `finish`. Every
//! checkpoint therefore holds every write made before it. After a failure
//! the host discards the instance, this cache with it, restores host state
//! from the last checkpoint and replays the records after it, so a write
//! that lived only here is made again, never lost.
//!
//! Invariant (coherence): a clean entry holds what the host holds under its
//! key (`None`: nothing); a dirty entry holds a newer value that the next
//! write-back stores. Raw state access through [`Context`](crate::Context)
//! keeps it: a raw read first writes every cache back, a raw write first
//! writes back and empties every cache.

use std::any::Any;
use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::rc::Rc;

use serde::{Serialize, de::DeserializeOwned};

use crate::bindings::weir::operator::state::Entry;
use crate::error::{Error, Result};
use crate::hash::SeededState;
use crate::host;

/// Entries a [`MapState`](crate::MapState) or
/// [`ValueState`](crate::ValueState) caches by default before it writes back
/// and evicts half of its cache: about 20 MB of guest memory for short
/// string keys and integer values, well within the host's default 256 MiB
/// memory limit. Lower it for large values.
///
/// ```
/// assert_eq!(weir_sdk::DEFAULT_CACHE_CAPACITY, 262_144);
/// ```
pub const DEFAULT_CACHE_CAPACITY: usize = 262_144;

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
/// `Value`: a string without escapes (the usual key) is its JSON text
/// without the quotes. Keys are stored, so this must never change its
/// output.
fn write_key<K: Serialize>(key: &K, out: &mut Vec<u8>) {
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

/// What `write` appends, in a buffer of exactly its size (`scratch` is
/// reused for the writing).
fn exact(scratch: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    scratch.clear();
    write(scratch);
    scratch.to_vec()
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

/// Host writes collected from dirty entries, made with one `put-many` (and
/// one `delete` per removed key).
#[derive(Default)]
struct Writes {
    puts: Vec<Entry>,
    deletes: Vec<Vec<u8>>,
}

impl Writes {
    fn apply(self) {
        if !self.puts.is_empty() {
            host::put_many(&self.puts);
        }
        for key in &self.deletes {
            host::delete(key);
        }
    }
}

/// A cached value; `None` when the host holds nothing (or it was removed).
struct Slot<V> {
    value: Option<V>,
    dirty: bool,
}

/// The cache of one named map or value.
pub(crate) struct Store<K, V> {
    name: &'static str,
    layout: Layout,
    /// Entries held before a write-back and eviction; 0 writes through.
    capacity: usize,
    entries: HashMap<K, Slot<V>, SeededState>,
    /// Number of dirty entries.
    dirty: usize,
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
    /// Runs `f` on the slot of `key`, reading the host once on a miss.
    fn with_slot<Q, R>(&mut self, key: &Q, f: impl FnOnce(&mut Slot<V>) -> R) -> Result<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(slot) = self.entries.get_mut(key) {
            return Ok(f(slot));
        }
        if let Some(m) = &mut self.misses_since_prefetch {
            *m += 1;
        }
        let key = key.to_owned();
        let value = host::get(&self.layout.state_key(&key))
            .map(|b| decode_value(self.name, &b))
            .transpose()?;
        let slot = self.entries.entry(key).or_insert(Slot {
            value,
            dirty: false,
        });
        Ok(f(slot))
    }

    /// Stores `value` (`None`: removes) under `key`, dirty, without reading.
    fn set<Q>(&mut self, key: &Q, value: Option<V>)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.entries.get_mut(key) {
            Some(slot) => {
                slot.value = value;
                if !slot.dirty {
                    slot.dirty = true;
                    self.dirty += 1;
                }
            }
            None => {
                let slot = Slot { value, dirty: true };
                self.entries.insert(key.to_owned(), slot);
                self.dirty += 1;
            }
        }
    }

    fn take_dirty(&mut self, writes: &mut Writes) {
        if self.dirty == 0 {
            return;
        }
        // Encoded in a scratch buffer, then copied at their exact size:
        // `serde_json::to_vec` starts every buffer at 128 bytes, which for
        // a full cache of small entries is tens of MiB of guest memory at
        // once.
        let mut scratch = Vec::new();
        for (key, slot) in self.entries.iter_mut().filter(|(_, s)| s.dirty) {
            slot.dirty = false;
            let key = exact(&mut scratch, |out| self.layout.write_state_key(key, out));
            match &slot.value {
                Some(v) => writes.puts.push(Entry {
                    key,
                    value: exact(&mut scratch, |out| write_value(v, out)),
                }),
                None => writes.deletes.push(key),
            }
        }
        self.dirty = 0;
    }

    /// Over `limit` entries: writes back, then drops entries down to half
    /// the capacity, an arbitrary half (hash order), so that a working set
    /// larger than the capacity keeps a hit rate near capacity / working set
    /// instead of starting cold after every overflow.
    fn trim_over(&mut self, limit: usize) {
        if self.entries.len() > limit {
            let mut writes = Writes::default();
            self.take_dirty(&mut writes);
            writes.apply();
            let keep = self.capacity / 2;
            let mut seen = 0;
            self.entries.retain(|_, _| {
                seen += 1;
                seen <= keep
            });
            // Keys a prefetch found may be gone now: the next one looks.
            self.misses_since_prefetch = None;
        }
    }

    /// The bound inside a hook: twice the capacity. The capacity itself is
    /// enforced when the hook returns ([`trim_all`]), so that the keys one
    /// batch prefetches stay cached while the batch is processed.
    fn enforce_hard_bound(&mut self) {
        self.trim_over(self.capacity.saturating_mul(2));
    }
}

/// A store as the registry sees it.
trait Cached: Any {
    /// Moves the dirty entries into `writes` and marks them clean.
    fn take_dirty(&self, writes: &mut Writes);
    /// Drops every entry; they must all be clean.
    fn evict(&self);
    /// Writes back and evicts half when over capacity.
    fn trim(&self);
}

impl<K, V> Cached for RefCell<Store<K, V>>
where
    K: Serialize + Hash + Eq + Clone + 'static,
    V: Serialize + DeserializeOwned + Clone + 'static,
{
    fn take_dirty(&self, writes: &mut Writes) {
        self.borrow_mut().take_dirty(writes)
    }

    fn trim(&self) {
        let mut store = self.borrow_mut();
        let capacity = store.capacity;
        store.trim_over(capacity);
    }

    fn evict(&self) {
        let mut store = self.borrow_mut();
        debug_assert_eq!(store.dirty, 0, "evicting dirty entries");
        store.entries.clear();
    }
}

/// Every store of one operator instance, by layout. The guest is single
/// threaded and runs one instance, so on Wasm this is one thread-local;
/// `testing` installs one per simulated instance.
#[derive(Default)]
pub(crate) struct Registry {
    stores: Vec<(Layout, Rc<dyn Cached>)>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// Exchanges the installed registry with `other`.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) fn swap_registry(other: &mut Registry) {
    REGISTRY.with(|r| std::mem::swap(&mut *r.borrow_mut(), other));
}

/// Writes every dirty entry of every store back to the host: one
/// `put-many`, one `delete` per removed key. Entries stay cached, clean.
pub(crate) fn write_back_all() {
    let mut writes = Writes::default();
    REGISTRY.with(|r| {
        for (_, store) in &r.borrow().stores {
            store.take_dirty(&mut writes);
        }
    });
    writes.apply();
}

/// Brings every store back within its capacity (the SDK calls it when a
/// hook returns).
pub(crate) fn trim_all() {
    REGISTRY.with(|r| {
        for (_, store) in &r.borrow().stores {
            store.trim();
        }
    });
}

/// [`write_back_all`], then empties every store.
pub(crate) fn write_back_and_evict_all() {
    write_back_all();
    REGISTRY.with(|r| {
        for (_, store) in &r.borrow().stores {
            store.evict();
        }
    });
}

/// A handle on a store; clones share it.
pub(crate) struct Shared<K, V>(Rc<RefCell<Store<K, V>>>);

impl<K, V> Clone for Shared<K, V> {
    fn clone(&self) -> Self {
        Shared(Rc::clone(&self.0))
    }
}

impl<K, V> std::fmt::Debug for Shared<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = RefCell::borrow(&self.0);
        f.debug_struct("StateCache")
            .field("name", &s.name)
            .field("capacity", &s.capacity)
            .field("cached", &s.entries.len())
            .field("dirty", &s.dirty)
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
            if let Some((_, found)) = registry.stores.iter().find(|(l, _)| *l == layout) {
                let found: Rc<dyn Any> = found.clone();
                return Shared(found.downcast().unwrap_or_else(|_| {
                    panic!("typed state `{name}` is already in use with other key or value types: give each its own name")
                }));
            }
            let store = Rc::new(RefCell::new(Store {
                name,
                layout: layout.clone(),
                capacity: DEFAULT_CACHE_CAPACITY,
                entries: HashMap::default(),
                dirty: 0,
                misses_since_prefetch: None,
            }));
            registry.stores.push((layout, store.clone()));
            Shared(store)
        })
    }

    pub(crate) fn set_capacity(&self, capacity: usize) {
        self.0.borrow_mut().capacity = capacity;
    }

    pub(crate) fn name(&self) -> &'static str {
        RefCell::borrow(&self.0).name
    }

    pub(crate) fn state_key(&self, key: &K) -> Vec<u8> {
        RefCell::borrow(&self.0).layout.state_key(key)
    }

    /// The value under `key`.
    pub(crate) fn get<Q>(&self, key: &Q) -> Result<Option<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut store = self.0.borrow_mut();
        let value = store.with_slot(key, |slot| slot.value.clone())?;
        store.enforce_hard_bound();
        Ok(value)
    }

    /// The values under `keys`, reading every miss in one `get-many`.
    pub(crate) fn get_many(&self, keys: &[K]) -> Result<Vec<Option<V>>> {
        let mut store = self.0.borrow_mut();
        let mut out = Vec::with_capacity(keys.len());
        let mut misses = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match store.entries.get(key) {
                Some(slot) => out.push(slot.value.clone()),
                None => {
                    out.push(None);
                    misses.push(i);
                }
            }
        }
        if !misses.is_empty() {
            let byte_keys: Vec<Vec<u8>> = misses
                .iter()
                .map(|&i| store.layout.state_key(&keys[i]))
                .collect();
            for (&i, bytes) in misses.iter().zip(host::get_many(&byte_keys)) {
                let value: Option<V> = bytes.map(|b| decode_value(store.name, &b)).transpose()?;
                out[i].clone_from(&value);
                store.entries.entry(keys[i].clone()).or_insert(Slot {
                    value,
                    dirty: false,
                });
            }
        }
        store.enforce_hard_bound();
        Ok(out)
    }

    /// Reads every uncached key of `keys` with one `get-many`.
    pub(crate) fn prefetch<'a, Q>(&self, keys: impl IntoIterator<Item = &'a Q>) -> Result<()>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'a,
    {
        let mut store = self.0.borrow_mut();
        if store.misses_since_prefetch == Some(0) {
            return Ok(());
        }
        // Each miss once, however often the batch repeats it.
        let mut misses: Vec<K> = Vec::new();
        let mut seen = HashSet::with_hasher(store.entries.hasher().clone());
        for key in keys {
            if !store.entries.contains_key(key) && seen.insert(key) {
                misses.push(key.to_owned());
            }
        }
        store.misses_since_prefetch = Some(misses.len());
        if misses.is_empty() {
            return Ok(());
        }
        let byte_keys: Vec<Vec<u8>> = misses.iter().map(|k| store.layout.state_key(k)).collect();
        let name = store.name;
        // Decoded before any is cached: a value that does not decode leaves
        // the cache as it was.
        let values = host::get_many(&byte_keys)
            .into_iter()
            .map(|bytes| bytes.map(|b| decode_value(name, &b)).transpose())
            .collect::<Result<Vec<Option<V>>>>()?;
        for (key, value) in misses.into_iter().zip(values) {
            let slot = Slot {
                value,
                dirty: false,
            };
            store.entries.insert(key, slot);
        }
        store.enforce_hard_bound();
        Ok(())
    }

    /// Replaces the value under `key` with `f(old)`; returns the new value.
    pub(crate) fn update<Q>(&self, key: &Q, f: impl FnOnce(Option<V>) -> V) -> Result<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut store = self.0.borrow_mut();
        let (new, newly_dirty) = store.with_slot(key, |slot| {
            let new = f(slot.value.take());
            slot.value = Some(new.clone());
            (new, !std::mem::replace(&mut slot.dirty, true))
        })?;
        store.dirty += usize::from(newly_dirty);
        store.enforce_hard_bound();
        Ok(new)
    }

    /// Stores each `(key, value)`; `None` removes.
    pub(crate) fn set_many<'a, Q>(&self, pairs: impl IntoIterator<Item = (&'a Q, Option<V>)>)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'a,
    {
        let mut store = self.0.borrow_mut();
        for (key, value) in pairs {
            store.set(key, value);
        }
        store.enforce_hard_bound();
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

    /// Written-back keys and values are allocated at their size, not at
    /// `serde_json::to_vec`'s 128 bytes each.
    #[test]
    fn written_back_entries_take_only_their_size() {
        let mut store = Store::<String, u64> {
            name: "count",
            layout: Layout::Map {
                suffix: b"\0count".to_vec(),
            },
            capacity: 10,
            entries: HashMap::default(),
            dirty: 0,
            misses_since_prefetch: None,
        };
        store.set("w1", Some(7));
        store.set("q\"uote", Some(123_456));
        store.set("gone", None);
        let mut writes = Writes::default();
        store.take_dirty(&mut writes);
        let mut puts: Vec<(&[u8], &[u8])> = writes
            .puts
            .iter()
            .map(|e| (e.key.as_slice(), e.value.as_slice()))
            .collect();
        puts.sort();
        assert_eq!(
            puts,
            [
                (&b"q\"uote\0count"[..], &b"123456"[..]),
                (&b"w1\0count"[..], &b"7"[..])
            ]
        );
        assert_eq!(writes.deletes, [b"gone\0count".to_vec()]);
        for e in &writes.puts {
            assert_eq!(e.key.capacity(), e.key.len());
            assert_eq!(e.value.capacity(), e.value.len());
        }
        assert_eq!(store.dirty, 0);
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
        let m: BTreeMap<&str, u8> = [("b", 1), ("a", 2)].into();
        assert_eq!(encode_key(&m), through_value(&m));
        assert_eq!(encode_key(&vec!["\"x\""]), through_value(&vec!["\"x\""]));
    }
}
