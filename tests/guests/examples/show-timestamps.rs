//! Test fixture (event time): emits every record with its timestamp written
//! in front of its value, `<ms> <value>` (`- <value>` without one), so that
//! a sink's output shows the timestamps a source set.

use weir_guests::info;
use weir_sdk::{Context, Record, Result};

fn process(ctx: &mut Context, batch: Vec<Record>) -> Result<()> {
    for rec in batch {
        let stamp = rec
            .timestamp
            .map_or_else(|| "-".to_owned(), |t| t.to_string());
        let mut value = format!("{stamp} ").into_bytes();
        value.extend_from_slice(&rec.value);
        ctx.emit(0, Record { value, ..rec });
    }
    Ok(())
}

weir_guests::unit_guest!(
    ShowTimestamps,
    info("show-timestamps", "1.0.0"),
    process = process
);
