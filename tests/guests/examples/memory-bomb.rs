//! Test fixture (sandbox): allocates memory in `process` and never frees it,
//! `chunk_kib` KiB at a time (default 1024), until the host stops it.

use weir_guests::pass;
use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct MemoryBomb {
    chunk: usize,
    hoard: Vec<Vec<u8>>,
}

weir_guests::configured_guest! {
    MemoryBomb "memory-bomb",
    config Config { chunk_kib: usize = 1024 },
    open |c| MemoryBomb {
        chunk: c.chunk_kib << 10,
        hoard: Vec::new(),
    };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        loop {
            // Touch every page so the memory is really used.
            let block = vec![0xa5u8; self.chunk];
            self.hoard.push(std::hint::black_box(block));
            if self.hoard.len() == usize::MAX {
                break;
            }
        }
        pass(ctx, batch)
    }
}
