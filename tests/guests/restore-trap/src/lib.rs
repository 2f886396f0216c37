//! Test fixture (sandbox): passes records through (counting them in host
//! state) and panics in `restore`, so that it can run and checkpoint but
//! never resume.

use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct RestoreTrap;

impl Operator for RestoreTrap {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("restore-trap", "1.0.0")
            .input("in")
            .output("out")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(RestoreTrap)
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        let seen = ctx
            .get(b"seen")
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or_default()));
        ctx.put(b"seen", &(seen + batch.len() as u64).to_le_bytes());
        ctx.emit_all(0, batch);
        Ok(())
    }

    fn restore(&mut self, _ctx: &mut Context, state_version: u32, _bytes: &[u8]) -> Result<()> {
        panic!("restore-trap: deliberate panic restoring state version {state_version}");
    }
}

weir_sdk::export!(RestoreTrap);
