//! Test fixture (a fixed plugin): what `picky` and `poison` become once
//! their bug is fixed. Passes every record through, with the value of
//! each record they refuse or trap on (`bad…`, `poison`) prefixed
//! `cured `, so the output tells which records only the fix let through;
//! sleeps `delay_ms` (config, default 0; the sleep needs the `clocks`
//! grant) per batch, so that a test can crash it mid-way.

use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct Cured {
    delay: std::time::Duration,
}

weir_guests::configured_guest! {
    Cured "cured",
    config Config { delay_ms: u64 = 0 },
    open |c| Cured {
        delay: std::time::Duration::from_millis(c.delay_ms),
    };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        std::thread::sleep(self.delay);
        for mut r in batch {
            if r.value.starts_with(b"bad") || r.value == b"poison" {
                r.value = [&b"cured "[..], &r.value].concat();
            }
            ctx.emit(0, r);
        }
        Ok(())
    }
}
