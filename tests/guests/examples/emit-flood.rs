//! Test fixture (sandbox): emits records in `process` without end, each
//! `size` bytes (default 16).

use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct EmitFlood {
    size: usize,
}

weir_guests::configured_guest! {
    EmitFlood "emit-flood",
    config Config { size: usize = 16 },
    open |c| EmitFlood { size: c.size };

    fn process(&mut self, ctx: &mut Context, _port: u32, _batch: Vec<Record>) -> Result<()> {
        loop {
            ctx.emit(0, Record::new(vec![b'x'; self.size]));
        }
    }
}
