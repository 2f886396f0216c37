//! Test fixture (sandbox): a component of world `operator-flat` written
//! against the raw bindings, whose `flat.emit` sends a span outside the
//! data (bytes 2..7 of a 3-byte buffer). The host must trap the call with a
//! message naming the bad record, never read out of bounds or panic.
//!
//! Built for Wasm only (the raw export names do not link natively).
#![cfg(target_family = "wasm")]

wit_bindgen::generate!({
    world: "operator-flat",
    path: "../../wit",
});

use exports::weir::operator::{flat_lifecycle, lifecycle, snapshot};
use weir::operator::flat;
use weir::operator::types::{Error, OpenContext, OperatorInfo, Record};

struct BadSpans;

/// A packed span without key or timestamp (layout in `wit/flat.wit`).
fn span(offset: u32, len: u32) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..4].copy_from_slice(&offset.to_le_bytes());
    b[4..8].copy_from_slice(&len.to_le_bytes());
    b
}

fn emit_bad() {
    let spans = [span(0, 3), span(2, 5)].concat();
    flat::emit(0, b"abc", &spans);
}

impl lifecycle::Guest for BadSpans {
    fn describe() -> OperatorInfo {
        OperatorInfo {
            name: "bad-spans".into(),
            version: "1.0.0".into(),
            inputs: vec!["in".into()],
            outputs: vec!["out".into()],
            state_version: 1,
        }
    }

    fn open(_ctx: OpenContext) -> Result<(), Error> {
        Ok(())
    }

    fn process(_port: u32, _batch: Vec<Record>) -> Result<(), Error> {
        emit_bad();
        Ok(())
    }

    fn on_checkpoint(_checkpoint_id: u64) -> Result<(), Error> {
        Ok(())
    }

    fn finish() -> Result<(), Error> {
        Ok(())
    }
}

impl flat_lifecycle::Guest for BadSpans {
    fn process(_port: u32, _data: Vec<u8>, _spans: Vec<u8>) -> Result<(), Error> {
        emit_bad();
        Ok(())
    }
}

impl snapshot::Guest for BadSpans {
    fn snapshot() -> Vec<u8> {
        Vec::new()
    }

    fn restore(_state_version: u32, _bytes: Vec<u8>) -> Result<(), Error> {
        Ok(())
    }
}

export!(BadSpans);
