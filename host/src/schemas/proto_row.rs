//! Protobuf messages as rows (`weir_flat::row`): a message whose every
//! field the JSON mapping writes is one JSON scalar becomes a row of those
//! fields, in the order and with the names and values `ProtoSchema`'s JSON
//! has them: integers as integers, `double` as a float, `float` as a
//! decimal of its JSON digits (a float's `f64` would print other digits),
//! floats that are not finite and enums by name as strings, `bytes` in
//! base64. A message with a nested message (well-known types included), a
//! repeated or map field, an extension, or a name over 255 bytes is not a
//! row: its readers get JSON.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost_reflect::{DynamicMessage, Kind, ReflectMessage, Value};
use weir_flat::row::RowWriter;

/// Appends `message` to `row` as a row and returns true, or returns false
/// and leaves `row` as it was when it is not flat.
pub(super) fn write(message: &DynamicMessage, row: &mut Vec<u8>) -> bool {
    let desc = message.descriptor();
    if desc.full_name().starts_with("google.protobuf.") || message.extensions().next().is_some() {
        return false;
    }
    let start = row.len();
    for field in desc.fields() {
        // As the JSON mapping writes every field: those without presence
        // always, the others when set.
        if field.supports_presence() && !message.has_field(&field) {
            continue;
        }
        let name = field.name();
        if name.len() > usize::from(u8::MAX) {
            row.truncate(start);
            return false;
        }
        let value = message.get_field(&field);
        let fields = &mut RowWriter::new(row);
        match (&*value, field.kind()) {
            (Value::Bool(b), _) => _ = fields.bool(name, *b),
            (Value::I32(n), _) => _ = fields.i64(name, i64::from(*n)),
            (Value::I64(n), _) => _ = fields.i64(name, *n),
            (Value::U32(n), _) => _ = fields.u64(name, u64::from(*n)),
            (Value::U64(n), _) => _ = fields.u64(name, *n),
            (Value::F32(x), _) => {
                let digits = serde_json::to_string(x).expect("a float serializes");
                float(fields, name, f64::from(*x), Some(&digits));
            }
            (Value::F64(x), _) => float(fields, name, *x, None),
            (Value::String(s), _) => _ = fields.str(name, s),
            (Value::Bytes(b), _) => _ = fields.str(name, &BASE64.encode(b)),
            (Value::EnumNumber(_), Kind::Enum(e))
                if e.full_name() == "google.protobuf.NullValue" =>
            {
                _ = fields.null(name)
            }
            (Value::EnumNumber(n), Kind::Enum(e)) => match e.get_value(*n) {
                Some(v) => _ = fields.str(name, v.name()),
                None => _ = fields.i64(name, i64::from(*n)),
            },
            _ => {
                row.truncate(start);
                return false;
            }
        }
    }
    true
}

/// Writes float `x` as the JSON mapping does: a string when not finite,
/// else a float, or a decimal of `digits` (a `float`'s own JSON digits).
fn float(fields: &mut RowWriter, name: &str, x: f64, digits: Option<&str>) {
    if x.is_nan() {
        fields.str(name, "NaN");
    } else if x.is_infinite() {
        fields.str(name, if x > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        match digits {
            Some(d) => fields.decimal(name, d),
            None => fields.f64(name, x),
        };
    }
}
