//! Test fixture (large copies): moves hundreds of MB between guest and host
//! in one call. Keeps `snapshot_mib` MiB of in-memory state, returned by
//! `snapshot` and checked byte for byte by `restore`, with the number of
//! records seen so far; emits one extra record of `record_mib` MiB with the
//! first batch when `record_mib` > 0; passes records through; at the end of
//! input emits `seen=<n>`, which is the whole input only if every restore
//! brought the count back.

use weir_sdk::{Context, Error, Record, Result};

/// The fixture.
pub struct BigState {
    /// The in-memory state: `fill(snapshot_mib << 20)`.
    state: Vec<u8>,
    record_mib: usize,
    seen: u64,
}

/// `len` bytes of a pattern that a shifted or truncated copy does not match.
fn fill(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

weir_guests::configured_guest! {
    BigState "big-state",
    config Config { snapshot_mib: usize = 0, record_mib: usize = 0 },
    open |c| BigState {
        state: fill(c.snapshot_mib << 20),
        record_mib: c.record_mib,
        seen: 0,
    };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        if self.record_mib > 0 && self.seen == 0 {
            ctx.emit(0, Record::new(fill(self.record_mib << 20)));
        }
        self.seen += batch.len() as u64;
        ctx.emit_all(0, batch);
        Ok(())
    }

    fn finish(&mut self, ctx: &mut Context) -> Result<()> {
        ctx.emit(0, Record::new(format!("seen={}", self.seen).into_bytes()));
        Ok(())
    }

    fn snapshot(&mut self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(8 + self.state.len());
        bytes.extend_from_slice(&self.seen.to_le_bytes());
        bytes.extend_from_slice(&self.state);
        bytes
    }

    fn restore(&mut self, _ctx: &mut Context, _state_version: u32, bytes: &[u8]) -> Result<()> {
        let (seen, state) = bytes.split_at_checked(8).ok_or_else(|| {
            Error::IncompatibleState(format!("{} snapshot bytes, want at least 8", bytes.len()))
        })?;
        if state != self.state.as_slice() {
            return Err(Error::IncompatibleState(format!(
                "restored {} bytes of state that differ from the {} written",
                state.len(),
                self.state.len()
            )));
        }
        self.seen = u64::from_le_bytes(seen.try_into().expect("8 bytes"));
        Ok(())
    }
}
