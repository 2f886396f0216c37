//! Test fixture (sandbox): `describe` returns a name with a newline and
//! terminal escapes, as a plugin forging log lines would.

use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct BadNames;

impl Operator for BadNames {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("evil\nERROR weir: fake line \u{1b}[31m", "1.0.0")
            .input("in")
            .output("out")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(BadNames)
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        ctx.emit_all(0, batch);
        Ok(())
    }
}

weir_sdk::export!(BadNames);
