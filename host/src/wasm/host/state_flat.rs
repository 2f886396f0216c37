//! The `flat-state` interface: the same keyed state as `state` (see
//! `state.rs`, whose checks it reuses), read and written as packed buffers
//! (`weir_flat::state`): one byte list per call, however many keys.
//!
//! Invariants:
//! - The same rules as `state`: writes only in the hooks `check_write`
//!   allows, every stored key and value within its limit (`put_checked`),
//!   every reply, its lengths included, capped at `limits.memory`.
//! - A packed buffer from the plugin is checked whole before any key is
//!   read or written; a malformed one traps with a message naming
//!   `flat-state`, the function, the buffer and the item.
//! - Buffers are read in place: keys and values are slices of the list the
//!   plugin passed, and each reply is built in one `Vec`.
//! - Keys are taken in groups of [`PREFETCH_GROUP`], each group's cache
//!   misses overlapped first ([`KeyedState::prefetch`](crate::keyed::state::KeyedState::prefetch)).

use super::shown;
use weir_flat::state::{BadPacking, Entries, Keys, push_entry, push_value};

use crate::keyed::state::PREFETCH_GROUP;
use crate::wasm::instance_state::InstanceState;
use crate::wit::flat_state;

/// Bytes of the lengths of one reply item: one for a value, two for an
/// entry.
const VALUE_HEADER: usize = 4;
const ENTRY_HEADER: usize = 8;

/// The trap for a malformed `buffer` passed to `flat-state.<function>`.
fn malformed(function: &str, buffer: &str, e: BadPacking) -> wasmtime::Error {
    wasmtime::format_err!("flat-state.{function}: malformed packed {buffer}: {e}")
}

impl flat_state::Host for InstanceState {
    fn get_many(&mut self, keys: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        let keys = Keys::parse(&keys).map_err(|e| malformed("get-many", "keys", e))?;
        let mut total = 0;
        let mut out = Vec::with_capacity(keys.len() * VALUE_HEADER);
        let keys: Vec<&[u8]> = keys.collect();
        for group in keys.chunks(PREFETCH_GROUP) {
            self.state.prefetch(group.iter().copied());
            for &key in group {
                let value = self.state.get(key);
                Self::check_read(
                    &mut total,
                    VALUE_HEADER + value.map_or(0, <[u8]>::len),
                    self.limits.memory,
                )?;
                push_value(&mut out, value);
            }
        }
        self.trace(|| format!("flat-state.get-many {} keys", keys.len()));
        Ok(out)
    }

    fn put_many(&mut self, entries: Vec<u8>) -> wasmtime::Result<()> {
        let entries = Entries::parse(&entries).map_err(|e| malformed("put-many", "entries", e))?;
        if entries.len() == 0 {
            return Ok(());
        }
        self.check_write()?;
        let entries: Vec<(&[u8], Option<&[u8]>)> = entries.collect();
        let deleted = entries.iter().filter(|e| e.1.is_none()).count();
        self.trace(|| {
            format!(
                "flat-state.put-many {} entries ({deleted} deletes)",
                entries.len()
            )
        });
        for group in entries.chunks(PREFETCH_GROUP) {
            self.state.prefetch(group.iter().map(|&(key, _)| key));
            for &(key, value) in group {
                match value {
                    Some(value) => self.put_checked(key, value)?,
                    None => self.state.delete(key),
                }
            }
        }
        Ok(())
    }

    fn scan(
        &mut self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: u32,
    ) -> wasmtime::Result<Vec<u8>> {
        let mut out = Vec::new();
        let scan = (&prefix[..], after.as_deref(), limit);
        self.scan_each(
            scan,
            |k, v| ENTRY_HEADER + k.len() + v.len(),
            |k, v| push_entry(&mut out, k, Some(v)),
        )?;
        self.trace(|| {
            format!(
                "flat-state.scan {} limit {limit} -> {} bytes",
                shown(&prefix),
                out.len()
            )
        });
        Ok(out)
    }

    fn limits(&mut self) -> wasmtime::Result<flat_state::StateLimits> {
        let l = &self.limits;
        Ok(flat_state::StateLimits {
            memory: l.memory as u64,
            max_key_bytes: l.max_key_bytes as u64,
            max_value_bytes: l.max_value_bytes as u64,
            max_state_bytes: l.max_state_bytes as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::wasm::Hook;
    use weir_flat::state::{Values, push_key};

    use super::*;
    use crate::config::{Grants, Limits};
    use crate::wit::state::{self, Host as _};

    fn instance(limits: Limits) -> InstanceState {
        let mut s = InstanceState::new("op[0]", limits, Grants::default());
        s.hook = Hook::Process;
        s
    }

    fn keys(keys: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for k in keys {
            push_key(&mut out, k);
        }
        out
    }

    fn entries(entries: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, v) in entries {
            push_entry(&mut out, k, *v);
        }
        out
    }

    /// Writes through either interface are read through both.
    #[test]
    fn flat_and_old_calls_share_one_state() {
        let mut s = instance(Limits::default());
        s.put(b"old".to_vec(), b"1".to_vec()).unwrap();
        flat_state::Host::put_many(
            &mut s,
            entries(&[(b"flat", Some(b"2")), (b"old", Some(b"3")), (b"gone", None)]),
        )
        .unwrap();
        assert_eq!(s.get(b"old".to_vec()).unwrap(), Some(b"3".to_vec()));
        let reply = flat_state::Host::get_many(&mut s, keys(&[b"flat", b"none", b"old"])).unwrap();
        let values: Vec<_> = Values::parse(&reply).unwrap().collect();
        assert_eq!(values, [Some(&b"2"[..]), None, Some(b"3")]);

        // A deletion in put-many, a later entry winning, and the old delete.
        flat_state::Host::put_many(
            &mut s,
            entries(&[(b"flat", None), (b"old", Some(b"4")), (b"old", Some(b"5"))]),
        )
        .unwrap();
        assert_eq!(s.get(b"flat".to_vec()).unwrap(), None);
        state::Host::delete(&mut s, b"old".to_vec()).unwrap();
        let reply = flat_state::Host::get_many(&mut s, keys(&[b"old"])).unwrap();
        assert_eq!(Values::parse(&reply).unwrap().collect::<Vec<_>>(), [None]);
        assert!(s.state.is_empty());
    }

    #[test]
    fn scan_packs_what_the_old_scan_lists() {
        let mut s = instance(Limits::default());
        for k in ["a1", "a2", "a3", "b1"] {
            s.put(k.as_bytes().to_vec(), k.to_uppercase().into_bytes())
                .unwrap();
        }
        let old = state::Host::scan(&mut s, b"a".to_vec(), Some(b"a1".to_vec()), 5).unwrap();
        let reply = flat_state::Host::scan(&mut s, b"a".to_vec(), Some(b"a1".to_vec()), 5).unwrap();
        let flat: Vec<_> = Entries::parse(&reply)
            .unwrap()
            .map(|(k, v)| (k.to_vec(), v.expect("scans never pack absent").to_vec()))
            .collect();
        let old: Vec<_> = old.into_iter().map(|e| (e.key, e.value)).collect();
        assert_eq!(flat, old);
        assert_eq!(flat.len(), 2);
        let one = flat_state::Host::scan(&mut s, b"".to_vec(), None, 1).unwrap();
        assert_eq!(Entries::parse(&one).unwrap().len(), 1);
    }

    #[test]
    fn a_malformed_buffer_traps_naming_the_function_and_the_item() {
        let mut s = instance(Limits::default());
        let mut bad = entries(&[(b"k", Some(b"v"))]);
        bad.extend_from_slice(&[1, 0]);
        let err = flat_state::Host::put_many(&mut s, bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "flat-state.put-many: malformed packed entries: item 1 (at byte 10) runs past the end of the 12-byte buffer"
        );
        assert!(
            s.state.is_empty(),
            "nothing of a malformed buffer is stored"
        );

        let err = flat_state::Host::get_many(&mut s, u32::MAX.to_le_bytes().to_vec()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "flat-state.get-many: malformed packed keys: item 0 (at byte 0) has the absent length 0xFFFFFFFF as its key length"
        );
    }

    #[test]
    fn flat_writes_are_checked_like_old_ones() {
        let limits = Limits {
            max_key_bytes: 4,
            max_value_bytes: 8,
            max_state_bytes: 20,
            ..Limits::default()
        };
        let mut s = instance(limits);
        let limit = |e: wasmtime::Error| e.downcast::<crate::wasm::LimitExceeded>().unwrap().key;
        let err =
            flat_state::Host::put_many(&mut s, entries(&[(b"12345", Some(b""))])).unwrap_err();
        assert_eq!(limit(err), "max_key_bytes");
        let err =
            flat_state::Host::put_many(&mut s, entries(&[(b"k", Some(&[0; 9]))])).unwrap_err();
        assert_eq!(limit(err), "max_value_bytes");
        let big: &[u8] = &[0; 8];
        let err = flat_state::Host::put_many(
            &mut s,
            entries(&[(b"k1", Some(big)), (b"k2", Some(big)), (b"k3", Some(big))]),
        )
        .unwrap_err();
        assert_eq!(limit(err), "max_state_bytes");

        // Writes only where `state` allows them; an empty put-many is no
        // write.
        s.hook = Hook::Snapshot;
        flat_state::Host::put_many(&mut s, Vec::new()).unwrap();
        let err = flat_state::Host::put_many(&mut s, entries(&[(b"k", None)])).unwrap_err();
        assert!(
            err.to_string().contains("wrote state during `snapshot`"),
            "{err}"
        );
    }

    #[test]
    fn a_reply_with_its_lengths_is_capped_at_the_memory_limit() {
        let limits = Limits {
            memory: 64 << 10,
            ..Limits::default()
        };
        let mut s = instance(limits);
        s.put(b"v".to_vec(), vec![1; 16 << 10]).unwrap();
        let four = keys(&[&b"v"[..]; 4]);
        let err = flat_state::Host::get_many(&mut s, four).unwrap_err();
        let e = err.downcast::<crate::wasm::LimitExceeded>().unwrap();
        assert_eq!(
            (e.what, e.key),
            ("bytes returned by one state read", "memory")
        );
        // 16,384 absent keys are 64 KiB of lengths, one more is too many.
        let absent = keys(&vec![&b"none"[..]; 16 << 10]);
        assert_eq!(
            flat_state::Host::get_many(&mut s, absent).unwrap().len(),
            64 << 10
        );
        let absent = keys(&vec![&b"none"[..]; (16 << 10) + 1]);
        assert!(flat_state::Host::get_many(&mut s, absent).is_err());
        let reply = flat_state::Host::get_many(&mut s, keys(&[&b"v"[..]; 3])).unwrap();
        assert_eq!(reply.len(), 3 * (4 + (16 << 10)));
    }

    #[test]
    fn limits_are_the_instances() {
        let mut s = instance(Limits::default());
        let l = flat_state::Host::limits(&mut s).unwrap();
        let d = Limits::default();
        assert_eq!(
            (
                l.memory,
                l.max_key_bytes,
                l.max_value_bytes,
                l.max_state_bytes
            ),
            (
                d.memory as u64,
                d.max_key_bytes as u64,
                d.max_value_bytes as u64,
                d.max_state_bytes as u64
            )
        );
    }
}
