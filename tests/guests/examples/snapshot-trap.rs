//! Test fixture (sandbox): passes records through, and panics in `snapshot`
//! for every checkpoint from `from_checkpoint` (default 1) on, as seen in
//! `on-checkpoint`.

use weir_guests::pass;
use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct SnapshotTrap {
    from: u64,
    seen: u64,
}

weir_guests::configured_guest! {
    SnapshotTrap "snapshot-trap",
    config Config { from_checkpoint: u64 = 1 },
    open |c| SnapshotTrap {
        from: c.from_checkpoint,
        seen: 0,
    };

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
