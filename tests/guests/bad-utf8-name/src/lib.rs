//! Test fixture (sandbox): `describe` returns a name that is not UTF-8 (the
//! canonical ABI forbids it; the host must reject it, not panic).

use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct BadUtf8Name;

impl Operator for BadUtf8Name {
    fn describe() -> OperatorInfo {
        // SAFETY: deliberately not UTF-8; the bytes are only handed to the
        // host through the canonical ABI, never read as a `str` here.
        let name = unsafe { String::from_utf8_unchecked(vec![b'x', 0xff, 0xfe, b'y']) };
        OperatorInfo::new(name, "1.0.0").input("in").output("out")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(BadUtf8Name)
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        ctx.emit_all(0, batch);
        Ok(())
    }
}

weir_sdk::export!(BadUtf8Name);
