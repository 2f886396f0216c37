//! Test fixture (sandbox): unbounded recursion in `process`.

use weir_guests::{info, pass};
use weir_sdk::{Context, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct DeepRecursion;

#[inline(never)]
fn descend(n: u64) -> u64 {
    if std::hint::black_box(n) == u64::MAX {
        return 0;
    }
    // Not a tail call: the addition happens after the recursive call.
    std::hint::black_box(descend(std::hint::black_box(n + 1))).wrapping_add(n)
}

impl Operator for DeepRecursion {
    fn describe() -> OperatorInfo {
        info("deep-recursion", "1.0.0")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(DeepRecursion)
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        let depth = descend(0);
        ctx.emit(0, Record::new(depth.to_string()));
        pass(ctx, batch)
    }
}

weir_sdk::export!(DeepRecursion);
