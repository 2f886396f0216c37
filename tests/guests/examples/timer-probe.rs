//! Test fixture (event time): passes every record through and, for each
//! record key, registers an event-time timer one hour after the record's
//! timestamp ([`BASE`] for a record without one) and a processing-time
//! timer at [`FAR`], so timers stay pending while the job runs. Event-time
//! timers fire at the end of input, each emitting a record `fired <key>`;
//! the processing-time ones stay pending in the final checkpoint.
//!
//! Registering a timer twice does nothing, so an instance holds one timer
//! of each domain per key it has seen (for records without timestamps).

use weir_guests::info;
use weir_sdk::{Batch, Context, OpenContext, Operator, OperatorInfo, Record, Result, Timer};

/// The event time of a record without a timestamp: 2023-11-14T22:13:20Z.
pub const BASE: i64 = 1_700_000_000_000;
/// One hour, in milliseconds.
pub const HOUR: i64 = 3_600_000;
/// Where processing-time timers are set: 2100-01-01T00:00:00Z.
pub const FAR: i64 = 4_102_444_800_000;

/// The fixture.
pub struct TimerProbe;

impl Operator for TimerProbe {
    fn describe() -> OperatorInfo {
        info("timer-probe", "1.0.0")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(TimerProbe)
    }

    fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> {
        unreachable!("process_batch handles every batch")
    }

    fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
        for rec in batch {
            if let Some(key) = rec.key {
                ctx.register_event_timer(key, rec.timestamp.unwrap_or(BASE) + HOUR);
                ctx.register_processing_timer(key, FAR);
            }
            ctx.emit_ref(0, rec);
        }
        Ok(())
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer<'_>) -> Result<()> {
        let mut value = b"fired ".to_vec();
        value.extend_from_slice(timer.key);
        ctx.emit(0, Record::new(value).with_key(timer.key));
        Ok(())
    }
}

weir_sdk::export!(TimerProbe);
