//! Test fixture (sandbox): a component of world `operator-flat` written
//! against the raw bindings, whose `flat.emit` sends two records marked
//! rows (flag bit 5, layout in `wit/flat.wit`): a good one,
//! `{"w":"hi"}`, then one whose field has type 9, which no row has. Its
//! reader (a sink, an operator) must fail naming the bad record, never
//! write it or panic.
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

struct BadRows;

/// A packed span of a row without key or timestamp.
fn row_span(offset: u32, len: u32) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0..4].copy_from_slice(&offset.to_le_bytes());
    b[4..8].copy_from_slice(&len.to_le_bytes());
    b[16] = 1 << 5;
    b
}

fn emit_bad() {
    // A string field "w" = "hi", then a field of type 9 named "x".
    let good = [6, 1, b'w', 2, 0, 0, 0, b'h', b'i'];
    let data = [&good[..], &[9, 1, b'x']].concat();
    let spans = [row_span(0, 9), row_span(9, 3)].concat();
    flat::emit(0, &data, &spans);
}

impl lifecycle::Guest for BadRows {
    fn describe() -> OperatorInfo {
        OperatorInfo {
            name: "bad-rows".into(),
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

impl flat_lifecycle::Guest for BadRows {
    fn process(_port: u32, _data: Vec<u8>, _spans: Vec<u8>) -> Result<(), Error> {
        emit_bad();
        Ok(())
    }
}

impl snapshot::Guest for BadRows {
    fn snapshot() -> Vec<u8> {
        Vec::new()
    }

    fn restore(_state_version: u32, _bytes: Vec<u8>) -> Result<(), Error> {
        Ok(())
    }
}

export!(BadRows);
