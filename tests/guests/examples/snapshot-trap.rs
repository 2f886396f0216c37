//! Test fixture (sandbox): passes records through, and panics in `snapshot`
//! for every checkpoint from `from_checkpoint` (default 1) on, as seen in
//! `on-checkpoint`.

use weir_guests::{info, pass};
use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct SnapshotTrap {
    from: u64,
    seen: u64,
}

weir_guests::config! {
    struct Config { from_checkpoint: u64 = 1 }
}

impl Operator for SnapshotTrap {
    fn describe() -> OperatorInfo {
        info("snapshot-trap", "1.0.0")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let c: Config = ctx.config_as()?;
        Ok(SnapshotTrap {
            from: c.from_checkpoint,
            seen: 0,
        })
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        pass(ctx, batch)
    }

    fn on_checkpoint(&mut self, _ctx: &mut Context, checkpoint_id: u64) -> Result<()> {
        self.seen = checkpoint_id;
        Ok(())
    }

    fn snapshot(&mut self) -> Vec<u8> {
        if self.seen >= self.from {
            panic!(
                "snapshot-trap: deliberate panic at checkpoint {}",
                self.seen
            );
        }
        Vec::new()
    }
}

weir_sdk::export!(SnapshotTrap);
