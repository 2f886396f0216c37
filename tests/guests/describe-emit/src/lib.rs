//! Test fixture (sandbox): emits a record and writes state from `describe`,
//! which must not call imports.

use weir_sdk::bindings::weir::operator::{emit as raw_emit, state as raw_state};
use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct DescribeEmit;

impl Operator for DescribeEmit {
    fn describe() -> OperatorInfo {
        // Reading is harmless; writing and emitting trap.
        let _ = raw_state::get(b"anything");
        raw_emit::emit(0, &Record::new("from describe"));
        raw_state::put(b"k", b"v");
        OperatorInfo::new("describe-emit", "1.0.0")
            .input("in")
            .output("out")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(DescribeEmit)
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        ctx.emit_all(0, batch);
        Ok(())
    }
}

weir_sdk::export!(DescribeEmit);
