//! Test fixture (change kinds): a component of world `operator-flat`,
//! written against the raw bindings, that knows no change kinds and emits
//! every flat batch it gets as it got it. The host gives such a plugin
//! every record as an insert, so what it echoes is inserts.
//!
//! Built for Wasm only (the raw export names do not link natively).
#![cfg(target_family = "wasm")]

wit_bindgen::generate!({
    world: "operator-flat",
    path: "../../wit",
});

use exports::weir::operator::{flat_lifecycle, lifecycle, snapshot};
use weir::operator::types::{Error, OpenContext, OperatorInfo, Record};
use weir::operator::{emit, flat};

struct FlatEcho;

impl lifecycle::Guest for FlatEcho {
    fn describe() -> OperatorInfo {
        OperatorInfo {
            name: "flat-echo".into(),
            version: "1.0.0".into(),
            inputs: vec!["in".into()],
            outputs: vec!["out".into()],
            state_version: 1,
        }
    }

    fn open(_ctx: OpenContext) -> Result<(), Error> {
        Ok(())
    }

    fn process(_port: u32, batch: Vec<Record>) -> Result<(), Error> {
        emit::emit_batch(0, &batch);
        Ok(())
    }

    fn on_checkpoint(_checkpoint_id: u64) -> Result<(), Error> {
        Ok(())
    }

    fn finish() -> Result<(), Error> {
        Ok(())
    }
}

impl flat_lifecycle::Guest for FlatEcho {
    fn process(_port: u32, data: Vec<u8>, spans: Vec<u8>) -> Result<(), Error> {
        flat::emit(0, &data, &spans);
        Ok(())
    }
}

impl snapshot::Guest for FlatEcho {
    fn snapshot() -> Vec<u8> {
        Vec::new()
    }

    fn restore(_state_version: u32, _bytes: Vec<u8>) -> Result<(), Error> {
        Ok(())
    }
}

export!(FlatEcho);
