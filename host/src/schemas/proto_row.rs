//! Protobuf messages as rows (`weir_flat::row`), and rows as messages.
//!
//! Out ([`write`]): a message whose every
//! field the JSON mapping writes is one JSON scalar becomes a row of those
//! fields, in the order and with the names and values `ProtoSchema`'s JSON
//! has them: integers as integers, `double` as a float, `float` as a
//! decimal of its JSON digits (a float's `f64` would print other digits),
//! floats that are not finite and enums by name as strings, `bytes` in
//! base64. A message with a nested message (well-known types included), a
//! repeated or map field, an extension, or a name over 255 bytes is not a
//! row: its readers get JSON.
//!
//! In ([`message_of`]): a row whose every field sets a scalar field of the
//! message as the JSON mapping would set it from the row's JSON record
//! becomes that message without JSON; any other row (a name no field has,
//! a null, a decimal, a string for a number, bytes or a nested message, a
//! oneof set twice, a number out of its field's range) is left to the
//! JSON mapping, which reads it or says why not. Both give the same
//! message, so the same bytes.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value};
use weir_flat::row::{self, RowWriter};

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

/// The message of type `desc` that `row`'s fields set, as the JSON
/// mapping sets them from the row's JSON record; `None` when a field is
/// not one this reads without JSON (see the module), or `row` is no row.
pub(super) fn message_of(desc: &MessageDescriptor, row: &[u8]) -> Option<DynamicMessage> {
    if desc.full_name().starts_with("google.protobuf.") {
        return None;
    }
    let mut message = DynamicMessage::new(desc.clone());
    for field in row::fields(row) {
        let (name, value) = field.ok()?;
        // As the JSON mapping looks a name up: its JSON name, then its own.
        let field = (desc.get_field_by_json_name(name)).or_else(|| desc.get_field_by_name(name))?;
        if field.is_list() || field.is_map() {
            return None;
        }
        // The JSON mapping refuses a second field of a oneof (a field
        // given twice included).
        if let Some(oneof) = field.containing_oneof()
            && oneof.fields().any(|f| message.has_field(&f))
        {
            return None;
        }
        message.set_field(&field, scalar(value, &field.kind())?.into());
    }
    Some(message)
}

/// A field's value as a row sets it, its string borrowed from the row
/// ([`scalar`]): what both the message ([`message_of`]) and the wire
/// format (module `proto_wire`) are made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Scalar<'a> {
    Bool(bool),
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    Str(&'a str),
    /// An enum value's number.
    Enum(i32),
}

impl From<Scalar<'_>> for Value {
    fn from(scalar: Scalar<'_>) -> Value {
        match scalar {
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::I32(n) => Value::I32(n),
            Scalar::I64(n) => Value::I64(n),
            Scalar::U32(n) => Value::U32(n),
            Scalar::U64(n) => Value::U64(n),
            Scalar::F32(x) => Value::F32(x),
            Scalar::F64(x) => Value::F64(x),
            Scalar::Str(s) => Value::String(s.to_owned()),
            Scalar::Enum(n) => Value::EnumNumber(n),
        }
    }
}

/// `value` as a field of `kind` holds it when the JSON mapping reads its
/// JSON text (a finite float as the shortest digits that read back as it);
/// `None` when this is not one of those cases.
pub(super) fn scalar<'a>(value: row::Value<'a>, kind: &Kind) -> Option<Scalar<'a>> {
    use row::Value::{Bool, Float, Int, Str, Uint};
    Some(match (value, kind) {
        (Bool(b), Kind::Bool) => Scalar::Bool(b),
        (Int(n), _) => integer(i128::from(n), kind)?,
        (Uint(n), _) => integer(i128::from(n), kind)?,
        (Float(x), Kind::Double) if x.is_finite() => Scalar::F64(x),
        (Float(x), Kind::Float) if x.is_finite() && x.abs() <= f64::from(f32::MAX) => {
            Scalar::F32(x as f32)
        }
        (Str(s), Kind::String) => Scalar::Str(s),
        (Str(s), Kind::Enum(e)) if e.full_name() != "google.protobuf.NullValue" => {
            Scalar::Enum(e.get_value_by_name(s)?.number())
        }
        _ => return None,
    })
}

/// Integer `n` as a field of `kind`: in range for an integer field, cast
/// for a float field (as the JSON mapping casts an integer).
fn integer<'a>(n: i128, kind: &Kind) -> Option<Scalar<'a>> {
    Some(match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Scalar::I32(n.try_into().ok()?),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Scalar::I64(n.try_into().ok()?),
        Kind::Uint32 | Kind::Fixed32 => Scalar::U32(n.try_into().ok()?),
        Kind::Uint64 | Kind::Fixed64 => Scalar::U64(n.try_into().ok()?),
        Kind::Double => Scalar::F64(n as f64),
        Kind::Float => Scalar::F32(n as f32),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemas::protobuf::ProtoSchema;
    use weir_flat::row::Value as V;

    const ALL: &str = r#"syntax = "proto3";
package t;
import "google/protobuf/struct.proto";
enum Color { RED = 0; GREEN = 1; BLUE = 2; }
message Inner { int32 x = 1; }
message All {
  bool b = 1; int32 i32 = 2; sint32 s32 = 3; sfixed32 sf32 = 4;
  int64 i64 = 5; sint64 s64 = 6; sfixed64 sf64 = 7;
  uint32 u32 = 8; fixed32 fx32 = 9; uint64 u64 = 10; fixed64 fx64 = 11;
  float fl = 12; double db = 13; string s = 14; bytes by = 15;
  Color color = 16; Inner inner = 17; repeated int32 list = 18;
  optional int64 opt = 19;
  oneof choice { string one_s = 20; int32 one_i = 21; }
  string camel_case = 22;
  google.protobuf.NullValue nv = 23;
}
"#;

    /// Values of every kind a row holds, at the edges of the message's
    /// number types.
    fn candidates() -> Vec<V<'static>> {
        let mut values = vec![V::Null, V::Bool(true), V::Bool(false)];
        for n in [
            0,
            -1,
            7,
            i64::from(i32::MIN),
            i64::from(i32::MIN) - 1,
            i64::from(i32::MAX),
            i64::from(i32::MAX) + 1,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1,
            i64::MIN,
            i64::MAX,
        ] {
            values.push(V::Int(n));
        }
        for n in [0, 5, u64::from(u32::MAX), u64::MAX, 1 << 63] {
            values.push(V::Uint(n));
        }
        for x in [
            0.0,
            -0.0,
            0.1,
            1.5,
            -2.0,
            1e300,
            f64::from(f32::MAX),
            f64::from(f32::MAX) * 1.0000001,
            f64::from(f32::MIN_POSITIVE) / 3.0,
            f64::NAN,
            f64::INFINITY,
            4e9,
        ] {
            values.push(V::Float(x));
        }
        for s in [
            "", "RED", "BLUE", "PURPLE", "12", "AAEC", "é\"\\n", "NaN", "Infinity",
        ] {
            values.push(V::Str(s));
        }
        for d in ["1.50", "7", "-0", "1e3"] {
            values.push(V::Decimal(d));
        }
        values
    }

    /// Random rows over every field (by its name or JSON name, unknown
    /// names too, fields twice, half of them in field-number order) with
    /// values of every kind: a message made from the row, and the bytes
    /// written straight from it (module `proto_wire`), are byte for byte
    /// the JSON mapping's of the row's JSON record, and `encode_row` agrees
    /// with the JSON path on every row, written or refused; most rows that
    /// fit are made without JSON, many written straight.
    #[test]
    fn a_row_is_the_message_the_json_mapping_reads_from_its_json() {
        let schema = ProtoSchema::compile(ALL, Some("t.All")).unwrap();
        let desc = schema.descriptor();
        let names: Vec<&str> = "b i32 s32 sf32 i64 s64 sf64 u32 fx32 u64 fx64 fl db s by color \
            inner list opt one_s oneS one_i camel_case camelCase nv unknown"
            .split_whitespace()
            .collect();
        let values = candidates();
        let plan = crate::schemas::proto_wire::WirePlan::new(desc).unwrap();
        let number = |name: &str| {
            let field =
                (desc.get_field_by_json_name(name)).or_else(|| desc.get_field_by_name(name));
            field.map_or(u32::MAX, |f| f.number())
        };
        let (mut direct, mut wired, mut written, mut x) = (0, 0, 0, 46u64);
        let mut next = |n: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % n
        };
        for _ in 0..30_000 {
            let mut row = Vec::new();
            let mut fields = RowWriter::new(&mut row);
            let mut chosen: Vec<&str> = (0..next(5)).map(|_| names[next(names.len())]).collect();
            if next(2) == 0 {
                chosen.sort_by_key(|n| number(n));
            }
            for name in chosen {
                fields.value(name, values[next(values.len())]);
            }
            let through_json = |delimited: bool| {
                let json = crate::schemas::json_of_row(&row).unwrap();
                let mut out = Vec::new();
                match delimited {
                    true => schema.encode_delimited(&json, &mut out),
                    false => schema.encode(&json, &mut out),
                }
                .map(|()| out)
            };
            let shown = || weir_flat::row::fields(&row).collect::<Vec<_>>();
            if let Some(message) = message_of(desc, &row) {
                direct += 1;
                let bytes = prost_reflect::prost::Message::encode_to_vec(&message);
                assert_eq!(Ok(bytes), through_json(false), "{:?}", shown());
            }
            for delimited in [false, true] {
                let mut out = b"kept".to_vec();
                if plan.encode(&row, delimited, &mut out) {
                    wired += 1;
                    assert_eq!(
                        Ok(out[4..].to_vec()),
                        through_json(delimited),
                        "{:?}",
                        shown()
                    );
                } else {
                    assert_eq!(out, b"kept", "nothing written: {:?}", shown());
                }
                let mut out = Vec::new();
                let got = schema.encode_row(&row, delimited, &mut out).map(|()| out);
                assert_eq!(got, through_json(delimited), "{:?}", shown());
                written += usize::from(got.is_ok());
            }
        }
        assert!(direct > 5_000, "only {direct} rows made without JSON");
        assert!(wired > 2 * 3_000, "only {wired} rows written straight");
        assert!(written > 2 * direct, "{written} of {direct}");
    }

    /// What is left to the JSON mapping: each case reads as the JSON path
    /// reads it (a string for a number, bytes in base64, a null) or is
    /// refused with its words (an unknown name, a second field of a
    /// oneof, an integer out of range).
    #[test]
    fn rows_this_does_not_read_are_the_json_paths() {
        let schema = ProtoSchema::compile(ALL, Some("t.All")).unwrap();
        let row = |write: &dyn Fn(&mut RowWriter<'_>)| {
            let mut row = Vec::new();
            write(&mut RowWriter::new(&mut row));
            row
        };
        let encode = |row: &[u8]| {
            let mut out = Vec::new();
            schema.encode_row(row, false, &mut out).map(|()| out)
        };
        let read = [
            row(&|r| _ = r.str("i64", "12")),
            row(&|r| _ = r.str("by", "AAEC")),
            row(&|r| _ = r.null("s")),
            row(&|r| _ = r.decimal("db", "1.50")),
        ];
        for r in &read {
            assert!(message_of(schema.descriptor(), r).is_none());
            assert!(encode(r).is_ok(), "{:?}", encode(r));
        }
        let refused = [
            (
                row(&|r| _ = r.i64("nope", 1)),
                "unrecognized field name 'nope'",
            ),
            (
                row(&|r| _ = r.str("one_s", "a").i64("one_i", 1)),
                "multiple fields provided for oneof 'choice'",
            ),
            (row(&|r| _ = r.i64("opt", 1).i64("opt", 2)), "oneof '_opt'"),
            (row(&|r| _ = r.i64("u32", -1)), "does not fit message t.All"),
            (
                row(&|r| _ = r.str("color", "PURPLE")),
                "unrecognized enum value 'PURPLE'",
            ),
        ];
        for (r, why) in &refused {
            assert!(message_of(schema.descriptor(), r).is_none());
            let error = encode(r).unwrap_err();
            assert!(error.contains(why), "{error}");
        }
        // A field given twice outside a oneof: the last value counts.
        let twice = row(&|r| _ = r.i64("i64", 1).i64("i64", 2));
        let last = row(&|r| _ = r.i64("i64", 2));
        assert!(message_of(schema.descriptor(), &twice).is_some());
        assert_eq!(encode(&twice), encode(&last));
    }
}
