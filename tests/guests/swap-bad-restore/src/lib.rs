//! Test fixture: a would-be successor of `word-count` whose `restore`
//! always fails, as a plugin with a broken migration would. Swapping to it
//! must be rolled back.

use weir_sdk::{Context, Error, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct BadRestore;

impl Operator for BadRestore {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("word-count", "9.0.0-bad-restore")
            .input("in")
            .output("out")
            .state_version(9)
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(BadRestore)
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        ctx.emit_all(0, batch);
        Ok(())
    }

    fn restore(&mut self, _ctx: &mut Context, state_version: u32, _bytes: &[u8]) -> Result<()> {
        Err(Error::IncompatibleState(format!(
            "cannot migrate state version {state_version} (deliberately broken)"
        )))
    }
}

weir_sdk::export!(BadRestore);
