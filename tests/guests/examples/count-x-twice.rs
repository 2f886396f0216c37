//! Test fixture (shadow runs): `word-count` with a bug a shadow run must
//! find exactly: a word that starts with `x` counts twice per occurrence.
//! State (`MapState` "count") and output rows are `word-count`'s, so every
//! other word's records and state keys are the same as `word-count`'s.

use weir_sdk::{
    Batch, BatchBuf, Context, MapState, OpenContext, Operator, OperatorInfo, Record, Result,
};

/// The fixture.
pub struct CountXTwice {
    counts: MapState<String, u64>,
}

impl Operator for CountXTwice {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("word-count", "0.1.0-x-twice")
            .input("in")
            .output("out")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(CountXTwice {
            counts: MapState::new("count"),
        })
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    }

    fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
        for rec in batch {
            let word = match rec.key_str() {
                Some(k) => k,
                None => rec.value_str()?,
            }
            .trim();
            if word.is_empty() {
                continue;
            }
            let by = if word.starts_with('x') { 2 } else { 1 };
            let count = self.counts.update(ctx, word, |c| c.unwrap_or(0) + by)?;
            ctx.emit_row(0, Some(word.as_bytes()), |row| {
                row.str("word", word).u64("count", count);
            });
        }
        Ok(())
    }
}

weir_sdk::export!(CountXTwice);
