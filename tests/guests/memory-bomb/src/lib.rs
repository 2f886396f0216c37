//! Test fixture (sandbox): allocates memory in `process` and never frees it,
//! `chunk_kib` KiB at a time (default 1024), until the host stops it.

use serde::Deserialize;
use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct MemoryBomb {
    chunk: usize,
    hoard: Vec<Vec<u8>>,
}

#[derive(Deserialize)]
struct Config {
    #[serde(default = "default_chunk")]
    chunk_kib: usize,
}

fn default_chunk() -> usize {
    1024
}

impl Operator for MemoryBomb {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("memory-bomb", "1.0.0")
            .input("in")
            .output("out")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let c: Config = ctx.config_as()?;
        Ok(MemoryBomb {
            chunk: c.chunk_kib << 10,
            hoard: Vec::new(),
        })
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        loop {
            // Touch every page so the memory is really used.
            let block = vec![0xa5u8; self.chunk];
            self.hoard.push(std::hint::black_box(block));
            if self.hoard.len() == usize::MAX {
                break;
            }
        }
        ctx.emit_all(0, batch);
        Ok(())
    }
}

weir_sdk::export!(MemoryBomb);
