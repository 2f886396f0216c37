//! Test fixture (sandbox): passes records through (counting them in host
//! state) and panics in `restore`, so that it can run and checkpoint but
//! never resume.

use weir_guests::{count, pass, set_count};
use weir_sdk::{Context, Record, Result};

fn process(ctx: &mut Context, batch: Vec<Record>) -> Result<()> {
    let seen = count(ctx, b"seen");
    set_count(ctx, b"seen", seen + batch.len() as u64);
    pass(ctx, batch)
}

fn restore(_ctx: &mut Context, state_version: u32, _bytes: &[u8]) -> Result<()> {
    panic!("restore-trap: deliberate panic restoring state version {state_version}");
}

weir_guests::unit_guest!(
    RestoreTrap,
    weir_guests::info("restore-trap", "1.0.0"),
    process = process,
    restore = restore,
);
