//! Checksums on what the store reads back. In a format-3 store every value
//! of the `checkpoints`, `segments`, `chunks`, `snapshots` and `inflight`
//! tables ends with the CRC-32 (IEEE, little-endian) of the bytes before
//! it; a value whose checksum does not match is damage, never a value read
//! differently. A format-2 store has no checksums and is read and written
//! as it is.

use std::borrow::Cow;

use super::error::{StoreError, invalid};
use super::file::CheckpointStore;
use super::meta::CheckpointMeta;
use super::segment::Damage;

/// Bytes of the checksum at the end of a sealed value.
const LEN: usize = 4;

impl CheckpointStore {
    /// `value` as it is stored: followed by its checksum in a format-3
    /// store.
    pub(super) fn seal<'v>(&self, value: &'v [u8]) -> Cow<'v, [u8]> {
        if !self.sealed {
            return Cow::Borrowed(value);
        }
        let mut out = Vec::with_capacity(value.len() + LEN);
        out.extend_from_slice(value);
        out.extend_from_slice(&crc32fast::hash(value).to_le_bytes());
        Cow::Owned(out)
    }

    /// The value stored as `raw`, its checksum checked and cut off.
    pub(super) fn unseal<'r>(&self, raw: &'r [u8]) -> Result<&'r [u8], Damage> {
        if !self.sealed {
            return Ok(raw);
        }
        let Some(at) = raw.len().checked_sub(LEN) else {
            return Err(Damage(format!(
                "it is {} bytes long, shorter than its checksum",
                raw.len()
            )));
        };
        let (value, sum) = raw.split_at(at);
        let stored = u32::from_le_bytes(sum.try_into().expect("LEN bytes"));
        if crc32fast::hash(value) != stored {
            return Err(Damage(
                "its checksum does not match its bytes (changed on disk)".into(),
            ));
        }
        Ok(value)
    }

    /// The `checkpoints` row of `meta`: its JSON, sealed.
    pub(super) fn encode_meta(&self, meta: &CheckpointMeta) -> Result<Vec<u8>, StoreError> {
        let json = serde_json::to_vec(meta).map_err(|e| {
            invalid(format!(
                "checkpoint {} metadata cannot be encoded: {e}",
                meta.id
            ))
        })?;
        Ok(self.seal(&json).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_changed_bit_and_every_cut_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path(), "job").unwrap();
        let value = b"the value of a row".as_slice();
        let sealed = store.seal(value).into_owned();
        assert_eq!(store.unseal(&sealed), Ok(value));
        for at in 0..sealed.len() {
            for bit in 0..8 {
                let mut bad = sealed.clone();
                bad[at] ^= 1 << bit;
                assert!(store.unseal(&bad).is_err(), "bit {bit} of byte {at}");
            }
        }
        for len in 0..sealed.len() {
            assert!(store.unseal(&sealed[..len]).is_err(), "cut to {len} bytes");
        }
    }
}
