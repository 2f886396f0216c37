//! The `reject` interface: records of the batch being processed that the
//! plugin refuses as invalid input, kept in the store data for the
//! instance's thread to hand to the operator's `on_error`
//! ([`OperatorInstance::take_rejected`](crate::wasm::OperatorInstance::take_rejected)).
//!
//! Invariants:
//! - Only in `process`, only indices of its batch, each at most once: so
//!   at most one refusal per record, and never one for a record the call
//!   did not get.
//! - Messages are sanitized and bounded like a returned error's.

use crate::wasm::guest_output::{MAX_MESSAGE, sanitize};
use crate::wasm::hook::Hook;
use crate::wasm::instance_state::InstanceState;
use crate::wit::reject;

impl reject::Host for InstanceState {
    fn reject(&mut self, index: u32, error: String) -> wasmtime::Result<()> {
        if self.hook != Hook::Process {
            wasmtime::bail!(
                "the plugin refused record {index} during `{}`; records may only be refused in `process`, which gets them",
                self.hook
            );
        }
        self.trace(|| format!("reject record {index}: {error}"));
        if index as usize >= self.batch_len {
            wasmtime::bail!(
                "the plugin refused record {index}, but the batch being processed has {} record(s)",
                self.batch_len
            );
        }
        if self.rejected.iter().any(|(i, _)| *i == index) {
            wasmtime::bail!("the plugin refused record {index} of the batch twice");
        }
        self.rejected.push((index, sanitize(&error, MAX_MESSAGE)));
        Ok(())
    }
}
