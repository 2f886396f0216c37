//! The `state` interface: the plugin's host-owned keyed state
//! ([`KeyedState`](crate::keyed::state::KeyedState) in the store data),
//! with its size limits, whose checks `flat-state` (`state_flat.rs`) shares.
//!
//! Invariants:
//! - State is written only in `open`, `restore`, `process`, `on-timers`,
//!   `on-checkpoint` and `finish`; a write in `describe` (no state yet) or `snapshot` (after
//!   the state was cut for the checkpoint) traps.
//! - Every key, value and the total state stay within `max_key_bytes`,
//!   `max_value_bytes` and `max_state_bytes`; a write past one traps.
//! - The reply to one state read (`get-many`, `scan`) is capped at
//!   `limits.memory`: it must fit in the plugin's memory, so the host never
//!   builds a larger one.

use super::shown;
use crate::keyed::value::readable;
use crate::wasm::instance_state::InstanceState;
use crate::wasm::limiter::LimitExceeded;
use crate::wit::state;

impl InstanceState {
    pub(super) fn check_key(&self, key: &[u8]) -> wasmtime::Result<()> {
        LimitExceeded::check_bytes(
            "state key size",
            "max_key_bytes",
            self.limits.max_key_bytes,
            key.len(),
        )
    }

    fn check_entry(&self, key: &[u8], value: &[u8]) -> wasmtime::Result<()> {
        self.check_key(key)?;
        LimitExceeded::check_bytes(
            "state value size",
            "max_value_bytes",
            self.limits.max_value_bytes,
            value.len(),
        )
    }

    /// Traps unless the current hook may write state. `snapshot` runs after
    /// the state was cut for the checkpoint; `describe` has no state.
    pub(super) fn check_write(&self) -> wasmtime::Result<()> {
        if !self.hook.may_write_state() {
            wasmtime::bail!(
                "the plugin wrote state during `{}`; state may be written in `open`, `restore`, `process`, `on-timers`, `on-checkpoint` and `finish`",
                self.hook
            );
        }
        Ok(())
    }

    pub(super) fn put_checked(&mut self, key: &[u8], value: &[u8]) -> wasmtime::Result<()> {
        self.check_entry(key, value)?;
        match self
            .state
            .put_within(key, value, self.limits.max_state_bytes)
        {
            Ok(()) => Ok(()),
            Err(after) => LimitExceeded::check_bytes(
                "host state size",
                "max_state_bytes",
                self.limits.max_state_bytes,
                after,
            ),
        }
    }

    /// Counts `bytes` more of a state read towards the reply's cap: a reply
    /// must fit in the plugin's memory, so it is capped at `limits.memory`.
    pub(super) fn check_read(total: &mut usize, bytes: usize, cap: usize) -> wasmtime::Result<()> {
        *total = total.saturating_add(bytes);
        LimitExceeded::check_bytes("bytes returned by one state read", "memory", cap, *total)
    }

    /// Calls `each` with the entries of a `scan` (up to `limit` with keys
    /// starting with `prefix`, after `after`), counting `reply_bytes` of
    /// each towards the reply's cap ([`check_read`](Self::check_read)).
    pub(super) fn scan_each(
        &self,
        (prefix, after, limit): (&[u8], Option<&[u8]>, u32),
        reply_bytes: impl Fn(&[u8], &[u8]) -> usize,
        mut each: impl FnMut(&[u8], &[u8]),
    ) -> wasmtime::Result<()> {
        let mut total = 0;
        for (key, value) in self.state.scan(prefix, after, limit as usize) {
            Self::check_read(&mut total, reply_bytes(key, value), self.limits.memory)?;
            each(key, value);
        }
        Ok(())
    }
}

impl state::Host for InstanceState {
    fn get(&mut self, key: Vec<u8>) -> wasmtime::Result<Option<Vec<u8>>> {
        let value = self.state.get(&key).map(<[u8]>::to_vec);
        let found = value.as_deref().map_or_else(|| "none".to_owned(), shown);
        self.trace(|| format!("state.get {} -> {found}", shown(&key)));
        Ok(value)
    }

    fn get_many(&mut self, keys: Vec<Vec<u8>>) -> wasmtime::Result<Vec<Option<Vec<u8>>>> {
        let mut total = 0;
        let mut out = Vec::with_capacity(keys.len());
        for k in &keys {
            let v = self.state.get(k);
            Self::check_read(&mut total, v.map_or(0, <[u8]>::len), self.limits.memory)?;
            out.push(v.map(<[u8]>::to_vec));
        }
        let found = out.iter().filter(|v| v.is_some()).count();
        self.trace(|| format!("state.get-many {} keys -> {found} found", keys.len()));
        Ok(out)
    }

    fn scan(
        &mut self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: u32,
    ) -> wasmtime::Result<Vec<state::Entry>> {
        let entry = |k: &[u8], v: &[u8]| state::Entry {
            key: k.to_vec(),
            value: v.to_vec(),
        };
        let mut entries = Vec::new();
        let scan = (&prefix[..], after.as_deref(), limit);
        self.scan_each(
            scan,
            |k, v| k.len() + v.len(),
            |k, v| entries.push(entry(k, v)),
        )?;
        let n = entries.len();
        let after = after.as_deref().map_or_else(|| "start".to_owned(), shown);
        self.trace(|| {
            format!(
                "state.scan {} after {after} limit {limit} -> {n}",
                shown(&prefix)
            )
        });
        Ok(entries)
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> wasmtime::Result<()> {
        self.check_write()?;
        self.trace(|| format!("state.put {} = {}", shown(&key), shown(&readable(&value))));
        self.put_checked(&key, &value)
    }

    fn put_many(&mut self, entries: Vec<state::Entry>) -> wasmtime::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        self.check_write()?;
        self.trace(|| format!("state.put-many {} entries", entries.len()));
        for e in entries {
            self.put_checked(&e.key, &e.value)?;
        }
        Ok(())
    }

    fn delete(&mut self, key: Vec<u8>) -> wasmtime::Result<()> {
        self.check_write()?;
        self.trace(|| format!("state.delete {}", shown(&key)));
        self.state.delete(&key);
        Ok(())
    }
}
