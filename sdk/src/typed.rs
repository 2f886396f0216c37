//! Typed state over the host's byte state, values encoded as JSON.
//!
//! Layout of the byte keys, which `weir state` shows:
//! - [`MapState`] `name`, key `k`: `<k>` `0x00` `<name>`, where `<k>` is the
//!   key's UTF-8 text when it serializes to a JSON string, its JSON text
//!   otherwise. The map key comes first so that the host partitions each entry
//!   like the records with that key (it hashes the bytes before the first 0x00).
//! - [`ValueState`] `name`: `0x00` `<name>`.

use std::marker::PhantomData;

use serde::{Serialize, de::DeserializeOwned};

use crate::{Context, Error, Result};

fn encode_value<V: Serialize>(v: &V) -> Vec<u8> {
    serde_json::to_vec(v).expect("serializing a state value to JSON in memory")
}

fn decode_value<V: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<V> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::IncompatibleState(format!(
            "state `{what}` holds a value that does not decode: {e}"
        ))
    })
}

/// A single value per operator instance (not per key), e.g. a running total.
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
    name: &'static str,
    key: Vec<u8>,
    _t: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> ValueState<T> {
    /// The value called `name`.
    ///
    /// ```
    /// let s = weir_sdk::ValueState::<String>::new("last-seen");
    /// # drop(s);
    /// ```
    pub fn new(name: &'static str) -> Self {
        let mut key = vec![0u8];
        key.extend_from_slice(name.as_bytes());
        ValueState {
            name,
            key,
            _t: PhantomData,
        }
    }

    /// The stored value, if any.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let ctx = weir_sdk::Context::new();
    ///     assert_eq!(weir_sdk::ValueState::<u8>::new("x").get(&ctx).unwrap(), None);
    /// });
    /// ```
    pub fn get(&self, ctx: &Context) -> Result<Option<T>> {
        ctx.get(&self.key)
            .map(|b| decode_value(self.name, &b))
            .transpose()
    }

    /// Stores `value`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     weir_sdk::ValueState::<u8>::new("x").set(&mut ctx, &7);
    /// });
    /// ```
    pub fn set(&self, ctx: &mut Context, value: &T) {
        ctx.put(&self.key, &encode_value(value))
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
    pub fn update(&self, ctx: &mut Context, f: impl FnOnce(Option<T>) -> T) -> Result<T> {
        let new = f(self.get(ctx)?);
        self.set(ctx, &new);
        Ok(new)
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
    pub fn clear(&self, ctx: &mut Context) {
        ctx.delete(&self.key)
    }
}

/// A map from keys (usually record keys) to values, in host state.
///
/// ```
/// use weir_sdk::{testing::with_memory_host, Context, MapState};
/// with_memory_host(|| {
///     let mut ctx = Context::new();
///     let counts = MapState::<String, u64>::new("count");
///     counts.put(&mut ctx, &"hello".to_string(), &2);
///     assert_eq!(counts.get(&ctx, &"hello".to_string()).unwrap(), Some(2));
///     assert_eq!(counts.entries(&ctx).unwrap(), vec![("hello".to_string(), 2)]);
/// });
/// ```
#[derive(Debug, Clone)]
pub struct MapState<K, V> {
    name: &'static str,
    suffix: Vec<u8>,
    _kv: PhantomData<fn() -> (K, V)>,
}

impl<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> MapState<K, V> {
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
        let mut suffix = vec![0u8];
        suffix.extend_from_slice(name.as_bytes());
        MapState {
            name,
            suffix,
            _kv: PhantomData,
        }
    }

    /// The byte key under which `key` is stored (see the module docs).
    ///
    /// ```
    /// let m = weir_sdk::MapState::<String, u64>::new("count");
    /// assert_eq!(m.state_key(&"hi".to_string()), b"hi\0count");
    /// ```
    pub fn state_key(&self, key: &K) -> Vec<u8> {
        let mut out = match serde_json::to_value(key) {
            Ok(serde_json::Value::String(s)) => s.into_bytes(),
            _ => serde_json::to_vec(key).expect("serializing a state key to JSON in memory"),
        };
        out.extend_from_slice(&self.suffix);
        out
    }

    fn decode_key(&self, bytes: &[u8]) -> Option<Result<K>> {
        let raw = bytes.strip_suffix(self.suffix.as_slice())?;
        if let Ok(k) = serde_json::from_slice::<K>(raw) {
            return Some(Ok(k));
        }
        let text = String::from_utf8_lossy(raw).into_owned();
        Some(
            serde_json::from_value(serde_json::Value::String(text)).map_err(|e| {
                Error::IncompatibleState(format!(
                    "state `{}` holds a key that does not decode: {e}",
                    self.name
                ))
            }),
        )
    }

    /// The value stored under `key`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let ctx = weir_sdk::Context::new();
    ///     let m = weir_sdk::MapState::<u32, u32>::new("m");
    ///     assert_eq!(m.get(&ctx, &1).unwrap(), None);
    /// });
    /// ```
    pub fn get(&self, ctx: &Context, key: &K) -> Result<Option<V>> {
        ctx.get(&self.state_key(key))
            .map(|b| decode_value(self.name, &b))
            .transpose()
    }

    /// The values stored under each of `keys`, in one host call.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let m = weir_sdk::MapState::<u32, u32>::new("m");
    ///     m.put(&mut ctx, &1, &10);
    ///     assert_eq!(m.get_many(&ctx, &[1, 2]).unwrap(), vec![Some(10), None]);
    /// });
    /// ```
    pub fn get_many(&self, ctx: &Context, keys: &[K]) -> Result<Vec<Option<V>>> {
        let byte_keys: Vec<Vec<u8>> = keys.iter().map(|k| self.state_key(k)).collect();
        ctx.get_many(&byte_keys)
            .into_iter()
            .map(|v| v.map(|b| decode_value(self.name, &b)).transpose())
            .collect()
    }

    /// Stores `value` under `key`.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     weir_sdk::MapState::<u32, u32>::new("m").put(&mut ctx, &1, &10);
    /// });
    /// ```
    pub fn put(&self, ctx: &mut Context, key: &K, value: &V) {
        ctx.put(&self.state_key(key), &encode_value(value))
    }

    /// Stores every pair in one host call.
    ///
    /// ```
    /// weir_sdk::testing::with_memory_host(|| {
    ///     let mut ctx = weir_sdk::Context::new();
    ///     let m = weir_sdk::MapState::<u32, u32>::new("m");
    ///     m.put_many(&mut ctx, [(1, 10), (2, 20)].iter().map(|(k, v)| (k, v)));
    ///     assert_eq!(m.get(&ctx, &2).unwrap(), Some(20));
    /// });
    /// ```
    pub fn put_many<'a>(&self, ctx: &mut Context, pairs: impl IntoIterator<Item = (&'a K, &'a V)>)
    where
        K: 'a,
        V: 'a,
    {
        let entries = pairs
            .into_iter()
            .map(|(k, v)| (self.state_key(k), encode_value(v)))
            .collect();
        ctx.put_many(entries)
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
    pub fn remove(&self, ctx: &mut Context, key: &K) {
        ctx.delete(&self.state_key(key))
    }

    /// Every entry of this map in this instance, in byte-key order. Scans the
    /// instance's whole state: use it at `finish` or on a timer, not per record.
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
    pub fn entries(&self, ctx: &Context) -> Result<Vec<(K, V)>> {
        let mut out = Vec::new();
        for (k, v) in ctx.scan_all(b"") {
            if let Some(key) = self.decode_key(&k) {
                out.push((key?, decode_value(self.name, &v)?));
            }
        }
        Ok(out)
    }
}
