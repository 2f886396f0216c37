//! Test fixture (rows in): an operator that reads rows. For each record it
//! emits one text line naming what arrived: `row` and each field as
//! `name:type=value` (`text` and the value for a record that is no row),
//! so a sink's output shows whether a source's typed cells reached the
//! plugin as typed fields.

use std::fmt::Write;

use weir_guests::info;
use weir_sdk::row::Value;
use weir_sdk::*;

/// The guest.
pub struct RowFields;

impl Operator for RowFields {
    const READS_ROWS: bool = true;

    fn describe() -> OperatorInfo {
        info("row-fields", "1.0.0")
    }

    fn open(_: &OpenContext) -> Result<Self> {
        Ok(RowFields)
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    }

    fn process_batch(&mut self, ctx: &mut Context, _: u32, batch: &Batch<'_>) -> Result<()> {
        for rec in batch {
            let Some(row) = rec.row() else {
                let line = format!("text {}", String::from_utf8_lossy(rec.value));
                ctx.emit(0, Record::new(line));
                continue;
            };
            let mut line = String::from("row");
            for (name, value) in row.fields() {
                let (kind, text) = match value {
                    Value::Null => ("null", String::new()),
                    Value::Bool(b) => ("bool", b.to_string()),
                    Value::Int(n) => ("int", n.to_string()),
                    Value::Uint(n) => ("uint", n.to_string()),
                    Value::Float(x) => ("float", x.to_string()),
                    Value::Str(s) => ("str", s.to_owned()),
                    Value::Decimal(d) => ("decimal", d.to_owned()),
                };
                write!(line, " {name}:{kind}={text}").expect("writes to a String");
            }
            ctx.emit(0, Record::new(line));
        }
        Ok(())
    }
}

weir_sdk::export!(RowFields);
