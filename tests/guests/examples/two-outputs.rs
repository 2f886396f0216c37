//! Test fixture (ports): declares two output ports, `out` and `rejected`,
//! passes every record through on `out` and emits it again on `rejected`.

use weir_guests::pass;
use weir_sdk::{Context, OperatorInfo, Record, Result};

fn describe() -> OperatorInfo {
    OperatorInfo::new("two-outputs", "1.0.0")
        .input("in")
        .output("out")
        .output("rejected")
}

fn process(ctx: &mut Context, batch: Vec<Record>) -> Result<()> {
    ctx.emit_all(1, batch.clone());
    pass(ctx, batch)
}

weir_guests::unit_guest!(TwoOutputs, describe(), process = process);
