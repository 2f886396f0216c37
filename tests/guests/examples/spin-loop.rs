//! Test fixture (sandbox): never returns from `process`.
//!
//! Config `{"mode": ...}`:
//! - `"loop"` (default): a busy loop;
//! - `"sleep"`: `std::thread::sleep` for an hour (a host call, not wasm code);
//! - `"clock"`: waits in a busy loop for the monotonic clock to advance by a
//!   second (it never does in the sandbox without the clocks grant).

use weir_guests::pass;
use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct SpinLoop {
    mode: String,
}

weir_guests::configured_guest! {
    SpinLoop "spin-loop",
    config Config { mode: String = "loop".into() },
    open |c| SpinLoop { mode: c.mode };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        match self.mode.as_str() {
            "sleep" => std::thread::sleep(std::time::Duration::from_secs(3600)),
            "clock" => {
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_secs(1) {
                    std::hint::spin_loop();
                }
            }
            _ => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
        }
        pass(ctx, batch)
    }
}
