//! The handle on a store that typed state holds ([`Shared`]).

use super::*;

/// A handle on a store; clones share it.
pub(crate) struct Shared<K, V> {
    pub(super) store: Rc<RefCell<Store<K, V>>>,
    pub(super) budget: Rc<Budget>,
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

    pub(crate) fn set_values(&self, values: Values) {
        self.store.borrow_mut().values = values;
    }

    pub(crate) fn values(&self) -> Values {
        RefCell::borrow(&self.store).values
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
    pub(super) fn enforce_bounds(&self, mut store: RefMut<'_, Store<K, V>>) {
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
        Q: Serialize + ?Sized,
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
                store.with_key(key, |store, key| match store.table.find(key) {
                    Ok(at) => out.push(store.table.slot(at).value.clone()),
                    Err(hash) => {
                        out.push(None);
                        misses.push((i, hash, Probe::new(key).to_key()));
                    }
                });
            }
            let (name, layout) = (store.name, &store.layout);
            let mut values = Vec::with_capacity(misses.len());
            host::get_many_with(
                |buf| {
                    for (_, _, key) in &misses {
                        push_key_with(buf, |out| layout.write_key_bytes(key.as_bytes(), out));
                    }
                },
                |state_key, bytes| {
                    let value: Option<V> =
                        bytes.map(|b| state_value::decode(name, b)).transpose()?;
                    values.push((value, (state_key.len(), bytes.map(<[u8]>::len))));
                    Ok::<_, Error>(())
                },
            )?;
            for ((i, hash, key), (value, sizes)) in misses.into_iter().zip(values) {
                out[i].clone_from(&value);
                insert_read(
                    &mut store.table,
                    &mut store.meter,
                    (hash, key),
                    value,
                    sizes,
                );
            }
        }
        self.enforce_bounds(guard);
        Ok(out)
    }

    /// Reads every uncached key of `keys` with one `get-many`.
    pub(crate) fn prefetch<'a, Q>(&self, keys: impl IntoIterator<Item = &'a Q>) -> Result<()>
    where
        K: Borrow<Q>,
        Q: Serialize + ?Sized + 'a,
    {
        let mut guard = self.store.borrow_mut();
        {
            let store = &mut *guard;
            let mut positions = store.table.take_expected();
            if store.skips_prefetch() {
                // No expectation: the buffer only goes back for reuse.
                store.table.expect(positions);
                return Ok(());
            }
            // Each miss once, however often the batch repeats it, with the
            // index in `positions` of its first occurrence; `seen` indexes
            // `misses` by key.
            let mut misses: Vec<(usize, KeyHash, KeyBytes)> = Vec::new();
            let mut seen: HashTable<usize> = HashTable::new();
            for key in keys {
                store.with_key(key, |store, key| match store.table.find(key) {
                    Ok(at) => positions.push(table::position(at)),
                    Err(hash) => {
                        let missed = |&j: &usize| misses[j].2.as_bytes() == key;
                        if seen.find(hash.0, missed).is_none() {
                            seen.insert_unique(hash.0, misses.len(), |&j| misses[j].1.0);
                            misses.push((positions.len(), hash, Probe::new(key).to_key()));
                        }
                        positions.push(table::UNKNOWN);
                    }
                });
            }
            store.prefetch_found = Some((misses.len(), positions.len()));
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
                        push_key_with(buf, |out| layout.write_key_bytes(key.as_bytes(), out));
                    }
                },
                |state_key, bytes| {
                    let value: Option<V> =
                        bytes.map(|b| state_value::decode(name, b)).transpose()?;
                    values.push((value, (state_key.len(), bytes.map(<[u8]>::len))));
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
        Q: Serialize + ?Sized,
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
        Q: Serialize + ?Sized + 'a,
    {
        let mut store = self.store.borrow_mut();
        for (key, value) in pairs {
            store.set(key, value);
        }
        self.enforce_bounds(store);
    }
}
