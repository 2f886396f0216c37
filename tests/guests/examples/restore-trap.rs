//! Test fixture (sandbox): passes records through (counting them in host
//! state) and panics in `restore`, so that it can run and checkpoint but
//! never resume.

use weir_guests::{count, pass, set_count};
use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct RestoreTrap;

impl Operator for RestoreTrap {
    fn describe() -> OperatorInfo {
        weir_guests::info("restore-trap", "1.0.0")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(RestoreTrap)
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        let seen = count(ctx, b"seen");
        set_count(ctx, b"seen", seen + batch.len() as u64);
        pass(ctx, batch)
    }

    fn restore(&mut self, _ctx: &mut Context, state_version: u32, _bytes: &[u8]) -> Result<()> {
        panic!("restore-trap: deliberate panic restoring state version {state_version}");
    }
}

weir_sdk::export!(RestoreTrap);
