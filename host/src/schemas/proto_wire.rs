//! Rows (`weir_flat::row`) written straight into Protobuf's wire format
//! by a plan of the message type made once ([`WirePlan`]): the bytes
//! `prost-reflect` writes for the message `proto_row::message_of` makes of
//! the row, without making it (no field lookup by hash, no `String` per
//! string field).
//!
//! Invariant: [`WirePlan::encode`] writes a row only when its fields name
//! (by JSON name, then name, as the JSON mapping looks them up) scalar
//! fields of the message in increasing field-number order, no two of one
//! oneof, each with a value `message_of` takes; the bytes are then that
//! message's: fields in number order, those without presence left out at
//! their default. Any other row (fields in another order or twice
//! included) gives false with `out` as it was, for `message_of` and the
//! JSON mapping. `proto_row`'s random rows test both against the JSON
//! mapping.

use prost_reflect::{EnumDescriptor, Kind, MessageDescriptor};
use weir_flat::row::{self, Value};

use super::varint::write_unsigned;

/// How the rows that fit it are written as one message type.
#[derive(Debug, Clone)]
pub(super) struct WirePlan {
    fields: Vec<Field>,
    /// Every field's JSON name, then every field's name, with its index
    /// in `fields`: the first match is the field the JSON mapping takes.
    names: Vec<(Box<str>, usize)>,
}

#[derive(Debug, Clone)]
struct Field {
    number: u32,
    /// `None`: no scalar a row sets without JSON (a message, bytes, a
    /// list or map, `NullValue`).
    kind: Option<Scalar>,
    /// Written even at its default (proto3 `optional`, a oneof, proto2).
    presence: bool,
    /// The index of its oneof among the message's.
    oneof: Option<u32>,
}

#[derive(Debug, Clone)]
enum Scalar {
    Bool,
    Int32,
    Sint32,
    Sfixed32,
    Int64,
    Sint64,
    Sfixed64,
    Uint32,
    Fixed32,
    Uint64,
    Fixed64,
    Float,
    Double,
    String,
    /// An enum, read by value name; its default value's number.
    Enum(EnumDescriptor, i32),
}

/// A field's value as it goes on the wire.
enum Wire<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Bytes(&'a [u8]),
}

impl WirePlan {
    /// The plan of message type `desc`; `None` for the well-known types,
    /// which the JSON mapping reads its own way.
    pub(super) fn new(desc: &MessageDescriptor) -> Option<WirePlan> {
        if desc.full_name().starts_with("google.protobuf.") {
            return None;
        }
        let oneofs: Vec<String> = desc.oneofs().map(|o| o.full_name().to_owned()).collect();
        let fields: Vec<Field> = (desc.fields())
            .map(|f| Field {
                number: f.number(),
                kind: (!f.is_list() && !f.is_map())
                    .then(|| scalar(f.kind()))
                    .flatten(),
                presence: f.supports_presence(),
                oneof: (f.containing_oneof())
                    .and_then(|o| oneofs.iter().position(|n| n == o.full_name()))
                    .map(|i| i as u32),
            })
            .collect();
        let json_names = desc
            .fields()
            .enumerate()
            .map(|(i, f)| (f.json_name().into(), i));
        let names = desc.fields().enumerate().map(|(i, f)| (f.name().into(), i));
        let names = json_names.chain(names).collect();
        Some(WirePlan { fields, names })
    }

    /// Appends `row` as the message, length-delimited with `delimited`,
    /// and returns true; or returns false with `out` as it was (see the
    /// module's invariant).
    pub(super) fn encode(&self, row: &[u8], delimited: bool, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        if self.write(row, out).is_none() {
            out.truncate(start);
            return false;
        }
        if delimited {
            // The length after the message, then turned to its front.
            let (len, end) = ((out.len() - start) as u64, out.len());
            write_unsigned(len, out);
            let prefix = out.len() - end;
            out[start..].rotate_right(prefix);
        }
        true
    }

    fn write(&self, row: &[u8], out: &mut Vec<u8>) -> Option<()> {
        let (mut last, mut oneofs) = (0, 0u64);
        for field in row::fields(row) {
            let (name, value) = field.ok()?;
            let &(_, i) = self.names.iter().find(|(n, _)| **n == *name)?;
            let field = &self.fields[i];
            if field.number <= last {
                return None;
            }
            last = field.number;
            if let Some(oneof) = field.oneof {
                let bit = 1u64.checked_shl(oneof)?;
                if oneofs & bit != 0 {
                    return None;
                }
                oneofs |= bit;
            }
            field.write(value, out)?;
        }
        Some(())
    }
}

/// The scalar of `kind` a row sets without JSON, if any.
fn scalar(kind: Kind) -> Option<Scalar> {
    Some(match kind {
        Kind::Bool => Scalar::Bool,
        Kind::Int32 => Scalar::Int32,
        Kind::Sint32 => Scalar::Sint32,
        Kind::Sfixed32 => Scalar::Sfixed32,
        Kind::Int64 => Scalar::Int64,
        Kind::Sint64 => Scalar::Sint64,
        Kind::Sfixed64 => Scalar::Sfixed64,
        Kind::Uint32 => Scalar::Uint32,
        Kind::Fixed32 => Scalar::Fixed32,
        Kind::Uint64 => Scalar::Uint64,
        Kind::Fixed64 => Scalar::Fixed64,
        Kind::Float => Scalar::Float,
        Kind::Double => Scalar::Double,
        Kind::String => Scalar::String,
        Kind::Enum(e) if e.full_name() != "google.protobuf.NullValue" => {
            let default = e.default_value().number();
            Scalar::Enum(e, default)
        }
        _ => return None,
    })
}

impl Field {
    /// Appends the field with `value`, as `proto_row::message_of` sets it
    /// and `prost-reflect` writes it; `None` when `message_of` would not
    /// take the value.
    fn write(&self, value: Value<'_>, out: &mut Vec<u8>) -> Option<()> {
        let kind = self.kind.as_ref()?;
        let wire = match (value, kind) {
            (Value::Bool(b), Scalar::Bool) => Wire::Varint(u64::from(b)),
            (Value::Int(n), _) => integer(i128::from(n), kind)?,
            (Value::Uint(n), _) => integer(i128::from(n), kind)?,
            (Value::Float(x), Scalar::Double) if x.is_finite() => Wire::Fixed64(x.to_bits()),
            (Value::Float(x), Scalar::Float) if x.is_finite() && x.abs() <= f64::from(f32::MAX) => {
                Wire::Fixed32((x as f32).to_bits())
            }
            (Value::Str(s), Scalar::String) => Wire::Bytes(s.as_bytes()),
            (Value::Str(s), Scalar::Enum(e, _)) => {
                Wire::Varint(i64::from(e.get_value_by_name(s)?.number()) as u64)
            }
            _ => return None,
        };
        if !self.presence && is_default(&wire, kind) {
            return Some(());
        }
        let tag = |wire_type: u64, out: &mut Vec<u8>| {
            write_unsigned(u64::from(self.number) << 3 | wire_type, out)
        };
        match wire {
            Wire::Varint(v) => {
                tag(0, out);
                write_unsigned(v, out);
            }
            Wire::Fixed64(v) => {
                tag(1, out);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Wire::Bytes(b) => {
                tag(2, out);
                write_unsigned(b.len() as u64, out);
                out.extend_from_slice(b);
            }
            Wire::Fixed32(v) => {
                tag(5, out);
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        Some(())
    }
}

/// Integer `n` as a field of `kind`: in range for an integer field, cast
/// for a float field (as the JSON mapping casts an integer).
fn integer<'a>(n: i128, kind: &Scalar) -> Option<Wire<'a>> {
    let zigzag32 = |v: i32| ((v << 1) ^ (v >> 31)) as u32;
    let zigzag64 = |v: i64| ((v << 1) ^ (v >> 63)) as u64;
    Some(match kind {
        // Negative `int32`s go as ten-byte varints, sign-extended.
        Scalar::Int32 => Wire::Varint(i64::from(i32::try_from(n).ok()?) as u64),
        Scalar::Sint32 => Wire::Varint(u64::from(zigzag32(n.try_into().ok()?))),
        Scalar::Sfixed32 => Wire::Fixed32(i32::try_from(n).ok()? as u32),
        Scalar::Int64 => Wire::Varint(i64::try_from(n).ok()? as u64),
        Scalar::Sint64 => Wire::Varint(zigzag64(n.try_into().ok()?)),
        Scalar::Sfixed64 => Wire::Fixed64(i64::try_from(n).ok()? as u64),
        Scalar::Uint32 => Wire::Varint(u64::from(u32::try_from(n).ok()?)),
        Scalar::Fixed32 => Wire::Fixed32(n.try_into().ok()?),
        Scalar::Uint64 => Wire::Varint(n.try_into().ok()?),
        Scalar::Fixed64 => Wire::Fixed64(n.try_into().ok()?),
        Scalar::Double => Wire::Fixed64((n as f64).to_bits()),
        Scalar::Float => Wire::Fixed32((n as f32).to_bits()),
        _ => return None,
    })
}

/// Whether `wire` is the default of a field of `kind` (`-0.0` is a
/// float's: `prost-reflect` compares values, not bits).
fn is_default(wire: &Wire<'_>, kind: &Scalar) -> bool {
    match (wire, kind) {
        (Wire::Fixed32(bits), Scalar::Float) => f32::from_bits(*bits) == 0.0,
        (Wire::Fixed64(bits), Scalar::Double) => f64::from_bits(*bits) == 0.0,
        (Wire::Varint(v), Scalar::Enum(_, default)) => *v == i64::from(*default) as u64,
        (Wire::Varint(v), _) => *v == 0,
        (Wire::Fixed32(v), _) => *v == 0,
        (Wire::Fixed64(v), _) => *v == 0,
        (Wire::Bytes(b), _) => b.is_empty(),
    }
}
