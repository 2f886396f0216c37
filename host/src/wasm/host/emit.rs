//! The `emit` and `flat` interfaces: records out of the plugin, as WIT
//! records (world `operator`) or as a flat batch (world `operator-flat`),
//! into the per-port output buffers of the store data, within the per-call
//! emit limits.
//!
//! Invariants:
//! - Emits are buffered per call: records emitted during a call into a
//!   plugin are buffered per output port and handed out
//!   ([`OperatorInstance::take_output`](crate::wasm::OperatorInstance::take_output))
//!   only after the call returned.
//! - Records are accepted only in `process`, `on-timers`, `on-checkpoint`
//!   and `finish`
//!   (records emitted while opening or restoring would be repeated on every
//!   restart), and only on a declared output port; anything else traps.
//! - A record emitted without a timestamp gets the call's default
//!   (`InstanceState::default_timestamp`): the largest timestamp of the
//!   batch being processed, or the time of the last timer being fired.
//! - A flat emit whose span points outside its data, or whose value
//!   marked a row is none, traps ([`Batch::from_parts`]), so every
//!   buffered batch has all its spans inside its data and only well-formed
//!   rows.

use super::shown;
use crate::Record;
use crate::dataflow::batch::{Batch, SPAN_BYTES};
use crate::wasm::instance_state::InstanceState;
use crate::wasm::limiter::LimitExceeded;
use crate::wit::{emit, flat};

impl InstanceState {
    /// The output buffer of `port`, if the current hook may emit to it.
    fn output(&mut self, port: u32) -> wasmtime::Result<&mut Batch> {
        if !self.hook.may_emit() {
            wasmtime::bail!(
                "the plugin emitted records during `{}`; records may only be emitted in `process`, `on-timers`, `on-checkpoint` and `finish` (records emitted while opening or restoring would be repeated on every restart)",
                self.hook
            );
        }
        let ports = self.outputs.len();
        match self.outputs.get_mut(port as usize) {
            Some(buf) => Ok(buf),
            None => wasmtime::bail!(
                "emit to output port {port}, but the plugin declares {ports} output ports"
            ),
        }
    }

    /// Counts `records` records of `bytes` bytes more towards the per-call
    /// emit limits, and checks that output `port` stays addressable.
    fn count_emitted(&mut self, port: u32, records: usize, bytes: usize) -> wasmtime::Result<()> {
        self.output(port)?;
        self.emitted_records += records;
        LimitExceeded::check_count(
            "records emitted in one call",
            "max_emit_records",
            self.limits.max_emit_records_per_call,
            self.emitted_records,
        )?;
        self.emitted_bytes += bytes;
        LimitExceeded::check_bytes(
            "bytes emitted in one call",
            "max_emit_bytes",
            self.limits.max_emit_bytes_per_call,
            self.emitted_bytes,
        )?;
        let buffered = self.outputs[port as usize].data_bytes();
        if buffered + bytes > u32::MAX as usize {
            wasmtime::bail!("the plugin emitted more than 4 GiB on output port {port} in one call");
        }
        Ok(())
    }

    fn push_records(&mut self, port: u32, records: &[Record]) -> wasmtime::Result<()> {
        let bytes = records
            .iter()
            .map(|r| r.value.len() + r.key.as_ref().map_or(0, Vec::len))
            .sum();
        self.count_emitted(port, records.len(), bytes)?;
        let default = self.default_timestamp;
        let buf = &mut self.outputs[port as usize];
        for r in records {
            buf.push(r.key.as_deref(), &r.value, r.timestamp.or(default));
        }
        Ok(())
    }
}

impl emit::Host for InstanceState {
    fn emit(&mut self, port: u32, rec: Record) -> wasmtime::Result<()> {
        let key = rec.key.as_deref().map_or_else(|| "none".to_owned(), shown);
        self.trace(|| format!("emit port {port}: key {key} value {}", shown(&rec.value)));
        self.push_records(port, std::slice::from_ref(&rec))
    }

    fn emit_batch(&mut self, port: u32, records: Vec<Record>) -> wasmtime::Result<()> {
        self.trace(|| format!("emit-batch port {port}: {} records", records.len()));
        self.push_records(port, &records)
    }
}

impl flat::Host for InstanceState {
    fn emit(&mut self, port: u32, data: Vec<u8>, spans: Vec<u8>) -> wasmtime::Result<()> {
        self.count_emitted(port, spans.len() / SPAN_BYTES, data.len())?;
        let n = spans.len() / SPAN_BYTES;
        self.trace(|| format!("flat.emit port {port}: {n} records, {} bytes", data.len()));
        let mut batch = Batch::from_parts(data, spans)
            .map_err(|e| wasmtime::format_err!("flat emit to output port {port}: {e}"))?;
        if let Some(t) = self.default_timestamp {
            batch.fill_timestamps(t);
        }
        let buf = &mut self.outputs[port as usize];
        if buf.is_empty() {
            *buf = batch;
        } else {
            buf.append(&batch);
        }
        Ok(())
    }
}
