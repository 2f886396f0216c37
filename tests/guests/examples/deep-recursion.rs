//! Test fixture (sandbox): unbounded recursion in `process`.

use weir_sdk::{Context, Record, Result};

#[inline(never)]
fn descend(n: u64) -> u64 {
    if std::hint::black_box(n) == u64::MAX {
        return 0;
    }
    // Not a tail call: the addition happens after the recursive call.
    std::hint::black_box(descend(std::hint::black_box(n + 1))).wrapping_add(n)
}

fn process(ctx: &mut Context, batch: Vec<Record>) -> Result<()> {
    let depth = descend(0);
    ctx.emit(0, Record::new(depth.to_string()));
    weir_guests::pass(ctx, batch)
}

weir_guests::unit_guest!(
    DeepRecursion,
    weir_guests::info("deep-recursion", "1.0.0"),
    process = process,
);
