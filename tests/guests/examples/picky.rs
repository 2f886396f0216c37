//! Test fixture (refusing records): passes records through, and refuses
//! (`reject`) each record whose value starts with `bad`;
//! asked to by a record's value, it breaks the rules of `reject`: `past`
//! refuses an index past the batch, `twice` refuses its own record twice,
//! and a checkpoint refuses record 0 when the config says
//! `in_checkpoint`.

use weir_sdk::{Context, Record, Result};

/// The fixture.
pub struct Picky {
    in_checkpoint: bool,
}

weir_guests::configured_guest! {
    Picky "picky",
    config Config { in_checkpoint: bool = false },
    open |c| Picky { in_checkpoint: c.in_checkpoint };

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        for (i, r) in batch.iter().enumerate() {
            match &r.value[..] {
                v if v.starts_with(b"bad") => ctx.reject(i, &format!("record {i} is bad")),
                b"past" => ctx.reject(batch.len(), "past the batch"),
                b"twice" => {
                    ctx.reject(i, "once");
                    ctx.reject(i, "twice");
                }
                _ => ctx.emit(0, r.clone()),
            }
        }
        Ok(())
    }

    fn on_checkpoint(&mut self, ctx: &mut Context, _id: u64) -> Result<()> {
        if self.in_checkpoint {
            ctx.reject(0, "no batch here");
        }
        Ok(())
    }
}
