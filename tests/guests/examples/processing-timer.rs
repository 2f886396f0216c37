//! Test fixture (event time): per record, registers a processing-time
//! timer `delay_ms` after the host's clock (config `{"delay_ms": N}`) for
//! the key `<value>` and remembers its time in state; a record `cancel K`
//! deletes the timer of key `K` instead. When a timer fires it emits
//! `fired <key>`, keyed by the key. Run it with parallelism 1 (the timer
//! key is the value, not the record key).

use weir_sdk::{
    Batch, BatchBuf, Context, Error, OpenContext, Operator, OperatorInfo, Record, Result,
    TimeDomain, Timer,
};

/// The fixture.
pub struct ProcessingTimer {
    /// Milliseconds from a record to its timer.
    delay_ms: i64,
}

/// The state key holding `key`'s timer time.
pub fn slot(key: &[u8]) -> Vec<u8> {
    [key, b"\0t"].concat()
}

impl Operator for ProcessingTimer {
    fn describe() -> OperatorInfo {
        weir_guests::info("processing-timer", "1.0.0")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let config: serde_json::Value = ctx.config_as()?;
        let delay_ms = config["delay_ms"]
            .as_i64()
            .ok_or_else(|| Error::InvalidConfig("`delay_ms` (an integer) is missing".into()))?;
        Ok(ProcessingTimer { delay_ms })
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    }

    fn process_batch(&mut self, ctx: &mut Context, _: u32, batch: &Batch<'_>) -> Result<()> {
        for rec in batch {
            if let Some(key) = rec.value.strip_prefix(b"cancel ") {
                if let Some(t) = ctx.get(&slot(key)) {
                    let t = i64::from_le_bytes(t.try_into().expect("8 bytes"));
                    ctx.delete_timer(key, TimeDomain::ProcessingTime, t);
                    ctx.delete(&slot(key));
                }
                continue;
            }
            let key = rec.value;
            let at = ctx.processing_time() + self.delay_ms;
            ctx.register_processing_timer(key, at);
            ctx.put(&slot(key), &at.to_le_bytes());
        }
        Ok(())
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer<'_>) -> Result<()> {
        ctx.delete(&slot(timer.key));
        let line = [&b"fired "[..], timer.key].concat();
        ctx.emit(0, Record::new(line).with_key(timer.key));
        Ok(())
    }
}

weir_sdk::export!(ProcessingTimer);
