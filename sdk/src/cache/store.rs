//! The cache of one named map or value ([`Store`]), where its entries live
//! in host state ([`Layout`]), and the registry's view of a store
//! ([`Cached`]).

use std::marker::PhantomData;

use super::*;

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
pub(super) fn write_key<K: Serialize + ?Sized>(key: &K, out: &mut Vec<u8>) {
    if key::if_string(key, &mut Some(|bytes: &[u8]| out.extend_from_slice(bytes))).is_some() {
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

/// `f` called with the bytes [`write_key`] writes for `key`: a string's
/// in place, else written into `buf` (cleared first).
pub(super) fn with_key_bytes<K, R>(key: &K, buf: &mut Vec<u8>, f: impl FnOnce(&[u8]) -> R) -> R
where
    K: Serialize + ?Sized,
{
    let mut f = Some(f);
    if let Some(r) = key::if_string(key, &mut f) {
        return r;
    }
    buf.clear();
    write_key(key, buf);
    f.take().expect("not called for a key that is no string")(buf)
}

impl Layout {
    /// Appends the host state key of the key of bytes `key` (as
    /// [`write_key`] writes them) to `out`.
    pub(super) fn write_key_bytes(&self, key: &[u8], out: &mut Vec<u8>) {
        match self {
            Layout::Map { suffix } => {
                out.extend_from_slice(key);
                out.extend_from_slice(suffix);
            }
            Layout::Value { key } => out.extend_from_slice(key),
        }
    }

    /// The host state key of `key`.
    pub(crate) fn state_key<K: Serialize>(&self, key: &K) -> Vec<u8> {
        // Room for a typical key, so that writing it does not reallocate.
        let mut out = Vec::with_capacity(64);
        with_key_bytes(key, &mut Vec::new(), |bytes| {
            self.write_key_bytes(bytes, &mut out)
        });
        out
    }
}

/// The cache of one named map or value.
pub(crate) struct Store<K, V> {
    pub(super) name: &'static str,
    pub(super) layout: Layout,
    /// How its values are written.
    pub(super) values: Values,
    /// Most entries when a hook returns (`with_cache_capacity`), on top of
    /// the instance's budget; `None`: no such bound.
    pub(super) capacity: Option<usize>,
    /// Entries by the bytes [`write_key`] writes for their keys.
    pub(super) table: Table<V>,
    /// The bytes of a key that is no string, for a lookup
    /// ([`with_key_bytes`]; reused, so that a lookup does not allocate).
    pub(super) key_buf: Vec<u8>,
    keys: PhantomData<fn(&K)>,
    pub(super) meter: Meter,
    /// Reads of the host since the last `prefetch` (`None` before the
    /// first, and after an eviction: the next one looks).
    pub(super) misses_since_prefetch: Option<usize>,
    /// Lookups by key since the last `prefetch`.
    pub(super) lookups_since_prefetch: usize,
    /// What the last `prefetch` that looked found: its misses and keys;
    /// `None` when the last one skipped its lookups.
    pub(super) prefetch_found: Option<(usize, usize)>,
}

/// A host read of one key costs about as much as this many lookups of
/// cached keys (a `get` through the Wasm boundary and the host's state
/// against a hash-table probe in the guest): in a word count over Zipf
/// words (about 20 new words per batch of 4,096) skipping the prefetch
/// made the job 8% faster.
pub(super) const PREFETCH_PAYS: usize = 32;

impl<K, V> Store<K, V>
where
    K: Serialize + Hash + Eq + Clone,
    V: Serialize + DeserializeOwned + Clone,
{
    pub(super) fn new(name: &'static str, layout: Layout, budget: Rc<Budget>) -> Self {
        Store {
            name,
            layout,
            values: Values::default(),
            capacity: None,
            table: Table::new(),
            key_buf: Vec::new(),
            keys: PhantomData,
            meter: Meter::for_entries::<V>(budget),
            misses_since_prefetch: None,
            lookups_since_prefetch: 0,
            prefetch_found: None,
        }
    }

    /// Whether a `prefetch` now should skip its lookups, and starts
    /// counting for the next one. Prefetching only saves host calls: a
    /// lookup per key of the batch buys one `get-many` instead of a `get`
    /// per miss. It pays when misses are more than one in
    /// [`PREFETCH_PAYS`] lookups, judged on the last batch: what the last
    /// prefetch found (and missed after it), or what the batch after a
    /// skipped one missed. After an eviction, and before the first, it looks.
    pub(super) fn skips_prefetch(&mut self) -> bool {
        let lookups = std::mem::take(&mut self.lookups_since_prefetch);
        let Some(missed) = self.misses_since_prefetch.replace(0) else {
            return false;
        };
        let (misses, keys) = match self.prefetch_found.take() {
            Some((found, keys)) => (found + missed, keys),
            None => (missed, lookups),
        };
        misses * PREFETCH_PAYS <= keys
    }

    /// `f` called with this store and the bytes of `key` ([`write_key`]).
    pub(super) fn with_key<Q, R>(&mut self, key: &Q, f: impl FnOnce(&mut Self, &[u8]) -> R) -> R
    where
        Q: Serialize + ?Sized,
    {
        let mut buf = std::mem::take(&mut self.key_buf);
        let r = with_key_bytes(key, &mut buf, |bytes| f(self, bytes));
        self.key_buf = buf;
        r
    }

    /// Runs `f` on the slot of `key`, reading the host once on a miss.
    pub(super) fn with_slot<Q, R>(
        &mut self,
        key: &Q,
        f: impl FnOnce(&mut Slot<V>, &mut Meter) -> R,
    ) -> Result<R>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        self.with_key(key, |store, key| store.with_slot_of(key, f))
    }

    /// [`with_slot`](Self::with_slot) of the key of bytes `key`.
    fn with_slot_of<R>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&mut Slot<V>, &mut Meter) -> R,
    ) -> Result<R> {
        self.lookups_since_prefetch += 1;
        let meter = &mut self.meter;
        let hash = match self.table.find_next(key) {
            Ok(i) => return Ok(self.table.with(i, |slot| f(slot, meter))),
            Err(hash) => hash,
        };
        if let Some(m) = &mut self.misses_since_prefetch {
            *m += 1;
        }
        let (bytes, key_len) = host::with_buffer(|buf| {
            self.layout.write_key_bytes(key, buf);
            (host::get(buf), buf.len())
        });
        let sizes = (key_len, bytes.as_ref().map(Vec::len));
        let value = bytes
            .map(|b| state_value::decode(self.name, &b))
            .transpose()?;
        let key = Probe::new(key).to_key();
        let i = insert_read(&mut self.table, &mut self.meter, (hash, key), value, sizes);
        let meter = &mut self.meter;
        Ok(self.table.with(i, |slot| f(slot, meter)))
    }

    /// Stores `value` (`None`: removes) under `key`, dirty, without reading.
    pub(super) fn set<Q>(&mut self, key: &Q, value: Option<V>)
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        self.with_key(key, |store, key| store.set_of(key, value))
    }

    /// [`set`](Self::set) of the key of bytes `key`.
    fn set_of(&mut self, key: &[u8], value: Option<V>) {
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
        let size = if self.meter.sample() {
            let (layout, values) = (&self.layout, self.values);
            let (k, v) = host::with_buffer(|buf| {
                layout.write_key_bytes(key, buf);
                let k = buf.len();
                let v = value.as_ref().map(|v| {
                    state_value::write(v, values, buf);
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
        self.table.insert_new(hash, Probe::new(key).to_key(), slot);
    }

    /// Packs every dirty entry into `writes` (a deletion for a removed one)
    /// and marks it clean, charged at its encoded size.
    pub(super) fn take_dirty(&mut self, writes: &mut PutMany) {
        self.write_back_while(writes, |_| true);
    }

    /// Packs dirty entries into `writes` and marks them clean, oldest
    /// change first, while the instance holds more than `target` dirty bytes:
    /// unless `any`, only those not changed again since the last such pass
    /// (a hot one is cooled and left dirty).
    pub(super) fn write_back_to(&mut self, writes: &mut PutMany, target: usize, any: bool) {
        let budget = Rc::clone(&self.meter.budget);
        self.write_back_while(writes, |slot| {
            budget.dirty.get() > target && (any || !std::mem::take(&mut slot.hot))
        });
    }

    /// Packs the dirty entries `pick` picks (seeing each dirty one, in the
    /// order they became dirty) into `writes` and marks them clean.
    pub(super) fn write_back_while(
        &mut self,
        writes: &mut PutMany,
        mut pick: impl FnMut(&mut Slot<V>) -> bool,
    ) {
        let (layout, values, meter) = (&self.layout, self.values, &mut self.meter);
        self.table.retain_dirty(|key, slot| {
            if !pick(slot) {
                return;
            }
            let (k, v) = match &slot.value {
                Some(v) => {
                    let (k, v) = push_entry_with(
                        writes.buf(),
                        |out| layout.write_key_bytes(key, out),
                        |out| state_value::write(v, values, out),
                    );
                    (k, Some(v))
                }
                None => {
                    let k =
                        push_deletion_with(writes.buf(), |out| layout.write_key_bytes(key, out));
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
    pub(super) fn evict(&mut self, keep: f64, over: impl Fn(&Meter, usize) -> bool) {
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
    pub(super) fn trim_entries_over(&mut self, limit: usize) {
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
    pub(super) fn enforce_entry_bound(&mut self) {
        if let Some(capacity) = self.capacity {
            self.trim_entries_over(capacity.saturating_mul(2));
        }
    }
}

/// A store as the registry sees it.
pub(super) trait Cached: Any {
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
