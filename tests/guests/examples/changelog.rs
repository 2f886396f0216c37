//! Test fixture (change kinds): reads lines `<kind> <word>` (`insert`,
//! `update-before`, `update-after`, `delete`, `truncate`) and emits a
//! record `{"word": <word>}` keyed by the word and saying that kind; a
//! line without a kind passes through with the change kind it arrived
//! with, so the fixture also shows what kinds reach it.

use weir_sdk::{Batch, Change, Context, OperatorInfo, Record, Result};

/// The guest.
pub struct Changelog;

impl weir_sdk::Operator for Changelog {
    fn describe() -> OperatorInfo {
        weir_guests::info("changelog", "1.0.0")
    }

    fn open(_ctx: &weir_sdk::OpenContext) -> Result<Self> {
        Ok(Changelog)
    }

    fn process(&mut self, _: &mut Context, _: u32, _: Vec<Record>) -> Result<()> {
        unreachable!("process_batch reads the batches")
    }

    fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
        for rec in batch {
            let line = rec.value_str()?;
            let parsed = line
                .split_once(' ')
                .and_then(|(kind, word)| Some((Change::from_name(kind)?, word)));
            match parsed {
                Some((change, word)) => {
                    let value = serde_json::json!({ "word": word }).to_string();
                    ctx.emit_change(0, change, Some(word.as_bytes()), value.as_bytes());
                }
                None => ctx.emit_ref(0, rec),
            }
        }
        Ok(())
    }
}

weir_sdk::export!(Changelog);
