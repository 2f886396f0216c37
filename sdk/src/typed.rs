//! Typed state over the host's byte state, values encoded as JSON text or,
//! for a state that opts in, as row values (`state_value`), with a
//! guest-side write-back cache (see `cache.rs` for why it is correct).
//!
//! Layout of the byte keys, which `weir state` shows:
//! - [`MapState`] `name`, key `k`: `<k>` `0x00` `<name>`, where `<k>` is the
//!   key's UTF-8 text when it serializes to a JSON string, its JSON text
//!   otherwise. The map key comes first so that the host partitions each entry
//!   like the records with that key (it hashes the bytes before the first 0x00).
//! - [`ValueState`] `name`: `0x00` `<name>`.
//!
//! The cache: reads are served from decoded values kept in the guest, and a
//! miss reads the host once. Writes stay in the cache, dirty, until a
//! write-back stores them all with one `flat-state.put-many`: when
//! `on_checkpoint` or `finish` returns (the SDK does it), when a hook
//! returns with more dirty bytes than the dirty limit, when the caches of
//! the instance hold more than their budget in bytes when a hook returns
//! (they then also evict down to half of it; inside a hook the bound is
//! about twice the budget), and before any raw state access through
//! [`Context`] (a raw write also empties the cache). See [`MapState`].

use std::borrow::Borrow;
use std::hash::Hash;

use serde::{Serialize, de::DeserializeOwned};

use crate::cache::{Layout, Shared};
use crate::context::{Context, scan_pages};
use crate::error::{Error, Result};
use crate::state_value::{self, Values};

/// A single value per operator instance (not per key), e.g. a running total.
/// Cached like [`MapState`].
///
/// ```
/// use weir_sdk::{testing::with_memory_host, Context, ValueState};
/// with_memory_host(|| {
///     let mut ctx = Context::new();
///     let total = ValueState::<u64>::new("total");
///     assert_eq!(total.get(&ctx).unwrap(), None);
///     total.set(&mut ctx, &41);
///     total.update(&mut ctx, |v| v.unwrap_or(0) + 1).unwrap();
///     assert_eq!(total.get(&ctx).unwrap(), Some(42));
/// });
/// ```
#[derive(Debug, Clone)]
pub struct ValueState<T> {
    cache: Shared<(), T>,
}

impl<T: Serialize + DeserializeOwned + Clone + 'static> ValueState<T> {
    /// The value called `name`. Every `ValueState` of one name in an
    /// instance shares one cache; the type `T` must be the same (else this
    /// panics).
    ///
    /// ```
    /// let s = weir_sdk::ValueState::<String>::new("last-seen");
    /// # drop(s);
    /// ```
    pub fn new(name: &'static str) -> Self {
        let key = [&[0u8][..], name.as_bytes()].concat();
        ValueState {
            cache: Shared::open(name, Layout::Value { key }),
        }
    }

    /// Bounds this value's cache to `capacity` entries, on top of the
    /// instance's budget in bytes ([`set_cache_budget`](crate::set_cache_budget)):
    /// 0 writes every change through to the host at once.
    ///
    /// ```
    /// let s = weir_sdk::ValueState::<u64>::new("n").with_cache_capacity(0);
    /// # drop(s);
    /// ```
    pub fn with_cache_capacity(self, capacity: usize) -> Self {
        self.cache.set_capacity(capacity);
        self
    }

    /// Writes the value as a row value, not JSON text, when it is a flat
    /// struct or map (see [`MapState::with_row_values`]).
    ///
    /// ```
    /// #[derive(Clone, serde::Serialize, serde::Deserialize)]
    /// struct Total { n: u64, sum: f64 }
    /// let s = weir_sdk::ValueState::<Total>::new("total").with_row_values();
    /// # drop(s);
    /// ```
    pub fn with_row_values(self) -> Self {
        self.cache.set_values(Values::Rows);
        self
    }

    /// The stored value, if any.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let ctx = weir_sdk::Context::new();
    ///     assert_eq!(weir_sdk::ValueState::<u8>::new("x").get(&ctx).unwrap(), None);
    /// });
    /// ```
    pub fn get(&self, _ctx: &Context) -> Result<Option<T>> {
        self.cache.get(&())
    }

    /// Stores `value`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     weir_sdk::ValueState::<u8>::new("x").set(&mut ctx, &7);
    /// });
    /// ```
    pub fn set(&self, _ctx: &mut Context, value: &T) {
        self.cache.set_many([(&(), Some(value.clone()))]);
    }

    /// Replaces the value with `f(old)` and returns the new value.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let n = weir_sdk::ValueState::<u8>::new("n");
    ///     assert_eq!(n.update(&mut ctx, |v| v.unwrap_or(0) + 1).unwrap(), 1);
    /// });
    /// ```
    pub fn update(&self, _ctx: &mut Context, f: impl FnOnce(Option<T>) -> T) -> Result<T> {
        self.cache.update(&(), f)
    }

    /// Removes the value.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let s = weir_sdk::ValueState::<u8>::new("x");
    ///     s.set(&mut ctx, &1);
    ///     s.clear(&mut ctx);
    ///     assert_eq!(s.get(&ctx).unwrap(), None);
    /// });
    /// ```
    pub fn clear(&self, _ctx: &mut Context) {
        self.cache.set_many([(&(), None)]);
    }
}

/// A map from keys (usually record keys) to values, in host state, with a
/// guest-side write-back cache: a cached read or a write needs no host call
/// and no encoding.
///
/// When writes reach the host: when `on_checkpoint` or `finish` returns (the
/// SDK writes back, with one `flat-state.put-many`, before the host takes
/// the checkpoint), when a hook returns with more dirty bytes than the dirty
/// limit or the caches over their budget (see below), and before any raw
/// state call on [`Context`] (`get`, `scan`, `put`, ... see the rule there).
/// The host's limits on key and value sizes are checked then.
///
/// # The cache
///
/// Every `MapState` and `ValueState` of an instance caches decoded values
/// within one budget in bytes, by default an eighth of the instance's
/// memory limit (32 MiB of the default 256 MiB;
/// [`set_cache_budget`](crate::set_cache_budget) changes it). Each entry is
/// charged an estimate of its guest memory: the bytes of its encoded state
/// key and value (measured when it is read from the host or written back;
/// an entry written before either is measured for the first writes of its
/// map and one in 64 after, and charged the map's mean otherwise), plus a
/// fixed share for the table and the allocator (one and a half times the
/// in-memory size of the key and its slot, plus 21 bytes): about 110 bytes
/// in all for a short `String` word and a `u64` count. When a hook returns
/// over the budget, every cache writes back and keeps an arbitrary part,
/// down to half the budget in all; inside a hook the caches
/// may hold up to twice the budget (at most 5/8 of the memory limit), so
/// that what a batch prefetched stays cached while it is processed.
///
/// When a hook returns with more than the dirty limit of changed entries
/// (a quarter of the budget, at most 8 MiB, by default;
/// [`set_cache_dirty_limit`](crate::set_cache_dirty_limit)), entries are
/// written back then, down to half the limit, those not changed again
/// since the last such write-back first, and stay cached; so the write-back
/// at a checkpoint, which pauses the operator, stays short however large
/// the cache.
///
/// Every `MapState` of one name in an instance shares one cache (clones
/// too); the key and value types must be the same (else [`new`](Self::new)
/// panics).
///
/// ```
/// use weir_sdk::{testing::with_memory_host, Context, MapState};
/// with_memory_host(|| {
///     let mut ctx = Context::new();
///     let counts = MapState::<String, u64>::new("count");
///     counts.put(&mut ctx, &"hello".to_string(), &2);
///     assert_eq!(counts.get(&ctx, "hello").unwrap(), Some(2));
///     assert_eq!(counts.update(&mut ctx, "hello", |n| n.unwrap_or(0) + 1).unwrap(), 3);
///     assert_eq!(counts.entries(&ctx).unwrap(), vec![("hello".to_string(), 3)]);
/// });
/// ```
#[derive(Debug, Clone)]
pub struct MapState<K, V> {
    cache: Shared<K, V>,
    suffix: Vec<u8>,
}

impl<K, V> MapState<K, V>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
    V: Serialize + DeserializeOwned + Clone + 'static,
{
    /// The map called `name`. `name` must not contain a 0x00 byte.
    ///
    /// ```
    /// let m = weir_sdk::MapState::<String, f64>::new("amount");
    /// # drop(m);
    /// ```
    pub fn new(name: &'static str) -> Self {
        assert!(
            !name.as_bytes().contains(&0),
            "MapState name must not contain a 0x00 byte"
        );
        let suffix = [&[0u8][..], name.as_bytes()].concat();
        MapState {
            cache: Shared::open(
                name,
                Layout::Map {
                    suffix: suffix.clone(),
                },
            ),
            suffix,
        }
    }

    /// Bounds this map's cache to `capacity` entries, on top of the
    /// instance's budget in bytes ([`set_cache_budget`](crate::set_cache_budget),
    /// which is what sizes the cache by default): over it when a hook
    /// returns, the map writes back and keeps an arbitrary half (inside a
    /// hook it may hold twice as many); 0 writes every change through to
    /// the host at once and keeps nothing.
    ///
    /// ```
    /// let m = weir_sdk::MapState::<String, u64>::new("count").with_cache_capacity(1000);
    /// # drop(m);
    /// ```
    pub fn with_cache_capacity(self, capacity: usize) -> Self {
        self.cache.set_capacity(capacity);
        self
    }

    /// Writes values as row values rather than JSON text: the byte
    /// `0xFF` (`weir_flat::state::ROW_VALUE`) and the value's fields as a
    /// row, typed (no number formatted or parsed), when the value
    /// serializes as a struct or a map with string keys whose fields are
    /// all scalars (numbers, strings, booleans, options of them, unit
    /// variants); other values are still written as JSON text. Every map
    /// reads both forms, so state written before a plugin opts in
    /// restores; `weir state` shows row values as the JSON objects they
    /// stand for. A row keeps a float's exact bits (NaN and infinities
    /// too, which JSON text writes as `null`).
    ///
    /// A build that does not opt in (an older one) still reads JSON text
    /// only: a plugin that opts in should raise its
    /// [`state_version`](crate::OperatorInfo::state_version), so that the
    /// host refuses to restore its checkpoints into an older build.
    ///
    /// ```
    /// use weir_sdk::{testing::with_memory_host, Context, MapState};
    /// #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Pending { a: Option<f64>, done: bool }
    /// with_memory_host(|| {
    ///     let mut ctx = Context::new();
    ///     let m = MapState::<String, Pending>::new("p").with_row_values();
    ///     let p = Pending { a: Some(1.5), done: false };
    ///     assert_eq!(m.encoded(&p)[0], weir_flat::state::ROW_VALUE);
    ///     m.put(&mut ctx, &"k".to_string(), &p);
    ///     assert_eq!(m.get(&ctx, "k").unwrap(), Some(p));
    /// });
    /// ```
    pub fn with_row_values(self) -> Self {
        self.cache.set_values(Values::Rows);
        self
    }

    /// The byte key under which `key` is stored (see the module docs).
    ///
    /// ```
    /// let m = weir_sdk::MapState::<String, u64>::new("count");
    /// assert_eq!(m.state_key(&"hi".to_string()), b"hi\0count");
    /// ```
    pub fn state_key(&self, key: &K) -> Vec<u8> {
        self.cache.state_key(key)
    }

    fn decode_key(&self, bytes: &[u8]) -> Option<Result<K>> {
        let raw = bytes.strip_suffix(self.suffix.as_slice())?;
        // A key is stored as its JSON text, or as its string when it
        // serializes to one; the JSON reading is tried first, but only when
        // the first byte can start a JSON text (failing costs an error
        // with its position, per key of a scan).
        if may_be_json(raw)
            && let Ok(k) = serde_json::from_slice::<K>(raw)
        {
            return Some(Ok(k));
        }
        let text = String::from_utf8_lossy(raw).into_owned();
        Some(
            serde_json::from_value(serde_json::Value::String(text)).map_err(|e| {
                Error::IncompatibleState(format!(
                    "state `{}` holds a key that does not decode: {e}",
                    self.cache.name()
                ))
            }),
        )
    }

    /// The value stored under `key` (any borrowed form of `K`, like `&str`
    /// for `String`).
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let ctx = weir_sdk::Context::new();
    ///     let m = weir_sdk::MapState::<u32, u32>::new("m");
    ///     assert_eq!(m.get(&ctx, &1).unwrap(), None);
    /// });
    /// ```
    pub fn get<Q>(&self, _ctx: &Context, key: &Q) -> Result<Option<V>>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        self.cache.get(key)
    }

    /// The values stored under each of `keys`; the uncached ones are read
    /// in one host call.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let m = weir_sdk::MapState::<u32, u32>::new("m");
    ///     m.put(&mut ctx, &1, &10);
    ///     assert_eq!(m.get_many(&ctx, &[1, 2]).unwrap(), vec![Some(10), None]);
    /// });
    /// ```
    pub fn get_many(&self, _ctx: &Context, keys: &[K]) -> Result<Vec<Option<V>>> {
        self.cache.get_many(keys)
    }

    /// Reads every key of `keys` that is not cached with one host call, so
    /// that the `get`s and `update`s that follow in this hook hit the cache.
    /// Worth it when the state has more keys than the cache holds: call it
    /// with a batch's keys before processing the batch. While the last
    /// batch missed fewer than one key in 32, a prefetch does nothing (the
    /// few misses are cheaper read one by one than every key looked up),
    /// so calling it on every batch costs little when most keys are cached.
    /// When it did look the keys up, the `get`s,
    /// `update`s and `put`s that follow in the order of `keys` reuse the
    /// places it found them at: each costs one key comparison instead of a
    /// hash lookup.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let m = weir_sdk::MapState::<String, u32>::new("m");
    ///     m.prefetch(&ctx, ["a", "b", "a"]).unwrap();
    ///     assert_eq!(m.update(&mut ctx, "a", |n| n.unwrap_or(0) + 1).unwrap(), 1);
    /// });
    /// ```
    pub fn prefetch<'a, Q>(
        &self,
        _ctx: &Context,
        keys: impl IntoIterator<Item = &'a Q>,
    ) -> Result<()>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized + 'a,
    {
        self.cache.prefetch(keys)
    }

    /// Replaces the value under `key` with `f(old)` and returns the new
    /// value: one lookup, and no host call when `key` is cached.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let counts = weir_sdk::MapState::<String, u64>::new("count");
    ///     assert_eq!(counts.update(&mut ctx, "a", |n| n.unwrap_or(0) + 1).unwrap(), 1);
    ///     assert_eq!(counts.update(&mut ctx, "a", |n| n.unwrap_or(0) + 1).unwrap(), 2);
    /// });
    /// ```
    pub fn update<Q>(
        &self,
        _ctx: &mut Context,
        key: &Q,
        f: impl FnOnce(Option<V>) -> V,
    ) -> Result<V>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        self.cache.update(key, f)
    }

    /// Stores `value` under `key`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     weir_sdk::MapState::<u32, u32>::new("m").put(&mut ctx, &1, &10);
    /// });
    /// ```
    pub fn put(&self, _ctx: &mut Context, key: &K, value: &V) {
        self.cache.set_many([(key, Some(value.clone()))]);
    }

    /// Stores every pair.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let m = weir_sdk::MapState::<u32, u32>::new("m");
    ///     m.put_many(&mut ctx, [(1, 10), (2, 20)].iter().map(|(k, v)| (k, v)));
    ///     assert_eq!(m.get(&ctx, &2).unwrap(), Some(20));
    /// });
    /// ```
    pub fn put_many<'a>(&self, _ctx: &mut Context, pairs: impl IntoIterator<Item = (&'a K, &'a V)>)
    where
        K: 'a,
        V: 'a,
    {
        self.cache
            .set_many(pairs.into_iter().map(|(k, v)| (k, Some(v.clone()))));
    }

    /// Removes `key`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let m = weir_sdk::MapState::<u32, u32>::new("m");
    ///     m.put(&mut ctx, &1, &10);
    ///     m.remove(&mut ctx, &1);
    ///     assert_eq!(m.get(&ctx, &1).unwrap(), None);
    /// });
    /// ```
    pub fn remove<Q>(&self, _ctx: &mut Context, key: &Q)
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized,
    {
        self.cache.set_many([(key, None)]);
    }

    /// Every entry of this map in this instance, in byte-key order. Writes
    /// every cache back first, then scans the instance's whole state: use it
    /// at `finish` or on a timer, not per record.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let a = weir_sdk::MapState::<String, u32>::new("a");
    ///     let b = weir_sdk::MapState::<String, u32>::new("b");
    ///     a.put(&mut ctx, &"x".into(), &1);
    ///     b.put(&mut ctx, &"x".into(), &2);
    ///     assert_eq!(a.entries(&ctx).unwrap(), vec![("x".to_string(), 1)]);
    /// });
    /// ```
    pub fn entries(&self, _ctx: &Context) -> Result<Vec<(K, V)>> {
        let mut out = Vec::new();
        scan_pages(b"", |k, v| {
            if let Some(entry) = self.decode_entry(k, v) {
                out.push(entry?);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The entry of this map stored under byte key `k` with value `v`, or
    /// `None` when `k` belongs to other state.
    fn decode_entry(&self, k: &[u8], v: &[u8]) -> Option<Result<(K, V)>> {
        let key = self.decode_key(k)?;
        Some(key.and_then(|key| Ok((key, state_value::decode(self.cache.name(), v)?))))
    }

    /// Calls `f` with every entry of this map in this instance, in byte-key
    /// order, reading host state a page of 1000 entries at a time:
    /// unlike [`entries`](Self::entries), the memory it needs does not grow
    /// with the state, so it suits `finish` over more keys than the plugin's
    /// memory holds. The first error (of `f`, or of an entry that does not
    /// decode) stops it and is returned.
    ///
    /// `f` may read and write any state. Each page is read after every
    /// cache is written back, so it holds `f`'s writes so far; each entry is
    /// visited at most once, with its value as of the read of its page. So a
    /// key `f` writes that was already visited (like the one it is given) is
    /// not visited again, a key removed before its page is read is not
    /// visited, and a key after the current one that `f` adds or changes is
    /// visited with the new value if it lies on a later page, with the value
    /// the page holds otherwise: to depend on no page boundary, write only
    /// keys already visited. Writing back before each page visits only
    /// the entries changed since the last write-back, so a large cache
    /// costs nothing extra.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let open = weir_sdk::MapState::<String, bool>::new("open");
    ///     for k in ["a", "b", "c"] {
    ///         open.put(&mut ctx, &k.to_string(), &true);
    ///     }
    ///     let mut closed = Vec::new();
    ///     open.for_each(&mut ctx, |ctx, key, is_open| {
    ///         if is_open && key != "b" {
    ///             open.put(ctx, &key, &false);
    ///             closed.push(key);
    ///         }
    ///         Ok(())
    ///     })
    ///     .unwrap();
    ///     assert_eq!(closed, ["a", "c"]);
    ///     assert_eq!(open.get(&ctx, "a").unwrap(), Some(false));
    /// });
    /// ```
    pub fn for_each(
        &self,
        ctx: &mut Context,
        f: impl FnMut(&mut Context, K, V) -> Result<()>,
    ) -> Result<()> {
        self.for_each_where(ctx, |_| true, f)
    }

    /// [`for_each`](Self::for_each) over the entries whose stored value
    /// `wanted` accepts (the bytes [`encoded`](Self::encoded) makes of a
    /// value): the others are passed over without decoding their key or
    /// value, so that a scan visiting few of many entries (`finish` over
    /// keys mostly done) costs little more than reading them.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let open = weir_sdk::MapState::<String, bool>::new("open");
    ///     for (k, v) in [("a", true), ("b", false), ("c", true)] {
    ///         open.put(&mut ctx, &k.to_string(), &v);
    ///     }
    ///     let closed = open.encoded(&false);
    ///     let mut visited = Vec::new();
    ///     open.for_each_where(&mut ctx, |raw| raw != closed, |_, key, _| {
    ///         visited.push(key);
    ///         Ok(())
    ///     })
    ///     .unwrap();
    ///     assert_eq!(visited, ["a", "c"]);
    /// });
    /// ```
    pub fn for_each_where(
        &self,
        ctx: &mut Context,
        wanted: impl Fn(&[u8]) -> bool,
        mut f: impl FnMut(&mut Context, K, V) -> Result<()>,
    ) -> Result<()> {
        scan_pages(b"", |k, v| {
            if !wanted(v) {
                return Ok(());
            }
            match self.decode_entry(k, v) {
                Some(entry) => {
                    let (key, value) = entry?;
                    f(ctx, key, value)
                }
                None => Ok(()),
            }
        })
    }

    /// The bytes this map stores `value` as (its JSON text, or its row
    /// value after [`with_row_values`](Self::with_row_values)), for
    /// [`for_each_where`](Self::for_each_where).
    ///
    /// ```
    /// let m = weir_sdk::MapState::<String, u64>::new("n");
    /// assert_eq!(m.encoded(&7), b"7");
    /// ```
    pub fn encoded(&self, value: &V) -> Vec<u8> {
        let mut out = Vec::new();
        state_value::write(value, self.cache.values(), &mut out);
        out
    }
}

/// Whether a JSON text could start with `raw`'s first byte (JSON allows
/// leading whitespace; an empty text is no JSON).
fn may_be_json(raw: &[u8]) -> bool {
    matches!(
        raw.first(),
        Some(
            b'{' | b'[' | b'"' | b'-' | b'0'
                ..=b'9' | b't' | b'f' | b'n' | b' ' | b'\t' | b'\n' | b'\r'
        )
    )
}

#[cfg(test)]
mod tests {
    use std::fmt::Debug;
    use std::hash::Hash;

    use serde::{Deserialize, Serialize, de::DeserializeOwned};

    use super::MapState;

    /// How keys were decoded before the JSON reading was skipped for
    /// texts that cannot be JSON: the keys of existing checkpoints.
    fn decoded_as_before<K: DeserializeOwned>(raw: &[u8]) -> Option<K> {
        if let Ok(k) = serde_json::from_slice::<K>(raw) {
            return Some(k);
        }
        let text = String::from_utf8_lossy(raw).into_owned();
        serde_json::from_value(serde_json::Value::String(text)).ok()
    }

    fn check<K>(keys: &[K])
    where
        K: Serialize + DeserializeOwned + Hash + Eq + Clone + Debug + 'static,
    {
        crate::testing::with_memory_host(|| {
            let m = MapState::<K, u8>::new("m");
            for key in keys {
                let stored = m.state_key(key);
                let raw = stored.strip_suffix(&b"\0m"[..]).unwrap();
                let now = m.decode_key(&stored).unwrap().ok();
                assert_eq!(
                    now,
                    decoded_as_before::<K>(raw),
                    "{key:?} stored as {raw:?}"
                );
            }
        });
    }

    #[derive(Serialize, Deserialize, Hash, PartialEq, Eq, Clone, Debug)]
    enum Kind {
        Unit,
        Tuple(u8, String),
    }

    #[test]
    fn keys_decode_as_they_always_have() {
        let strings: Vec<String> = [
            "",
            "ORD-1",
            "w",
            "123",
            "-5",
            "1e3",
            "true",
            "false",
            "null",
            "nul",
            "[1]",
            "[",
            "{}",
            "{",
            " x",
            " 1",
            "\t",
            "\"q\"",
            "\"",
            "a\"b",
            "back\\slash",
            "日本語",
            "\u{1}",
            "tab\tnl\n",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        check(&strings);
        check(&[0u64, 42, u64::MAX]);
        check(&[-1i64, 0, 7]);
        check(&[true, false]);
        check(&['x', '"', '1', 't']);
        check(&[
            None,
            Some("s".to_string()),
            Some("1".to_string()),
            Some("".to_string()),
        ]);
        check(&[("a".to_string(), 1u32), ("".to_string(), 0)]);
        check(&[Kind::Unit, Kind::Tuple(1, "x\"".into())]);
    }

    /// `for_each_where` passes over the entries it does not want without
    /// decoding them: a value that would not decode as the map's type
    /// fails `for_each` but not a scan that does not want it.
    #[test]
    fn unwanted_entries_are_not_decoded() {
        crate::testing::with_memory_host(|| {
            let mut ctx = crate::Context::new();
            let counts = MapState::<String, u64>::new("m");
            counts.put(&mut ctx, &"a".to_string(), &1);
            let odd = br#""not a count""#;
            let key = counts.state_key(&"b".to_string());
            crate::host::memory::with_host(|host| host.put(&key, odd));
            assert!(counts.for_each(&mut ctx, |_, _, _| Ok(())).is_err());
            let mut seen = Vec::new();
            let wanted = |raw: &[u8]| raw != odd.as_slice();
            (counts.for_each_where(&mut ctx, wanted, |_, k, v| {
                seen.push((k, v));
                Ok(())
            }))
            .unwrap();
            assert_eq!(seen, [("a".to_string(), 1)]);
        });
    }
}
