//! Test fixture (sandbox): emits records in `process` without end, each
//! `size` bytes (default 16).

use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct EmitFlood {
    size: usize,
}

weir_guests::config! {
    struct Config { size: usize = 16 }
}

impl Operator for EmitFlood {
    fn describe() -> OperatorInfo {
        weir_guests::info("emit-flood", "1.0.0")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let c: Config = ctx.config_as()?;
        Ok(EmitFlood { size: c.size })
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, _batch: Vec<Record>) -> Result<()> {
        loop {
            ctx.emit(0, Record::new(vec![b'x'; self.size]));
        }
    }
}

weir_sdk::export!(EmitFlood);
