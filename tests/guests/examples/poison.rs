//! Test fixture (finding a failing record): passes records through and
//! traps (a panic) on any record whose value is `word` (config, default
//! `poison`), whatever else its batch holds: a fault a record decides, as
//! a real plugin's bug on one odd input is.

use weir_guests::pass;
use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct Poison {
    word: String,
}

weir_guests::configured_guest! {
    Poison "poison",
    config Config { word: String = "poison".to_string() },
    open |c| Poison { word: c.word };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        if batch.iter().any(|r| r.value == self.word.as_bytes()) {
            panic!("poison: the record `{}`", self.word);
        }
        pass(ctx, batch)
    }
}
