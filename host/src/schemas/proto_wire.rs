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

use prost_reflect::{Kind, MessageDescriptor};
use weir_flat::row::{self, Value};

use super::proto_row::{Scalar, scalar};
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
    /// `None` for a list or map, which no row field sets.
    kind: Option<Kind>,
    /// Written even at its default (proto3 `optional`, a oneof, proto2).
    presence: bool,
    /// The number of an enum field's default value.
    enum_default: i32,
    /// The index of its oneof among the message's.
    oneof: Option<u32>,
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
                kind: (!f.is_list() && !f.is_map()).then(|| f.kind()),
                presence: f.supports_presence(),
                enum_default: f.kind().as_enum().map_or(0, |e| e.default_value().number()),
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

impl Field {
    /// Appends the field with `value`, as `proto_row::message_of` sets it
    /// and `prost-reflect` writes it; `None` when `message_of` would not
    /// take the value.
    fn write(&self, value: Value<'_>, out: &mut Vec<u8>) -> Option<()> {
        let kind = self.kind.as_ref()?;
        let value = scalar(value, kind)?;
        if !self.presence && self.is_default(value) {
            return Some(());
        }
        let zigzag32 = |v: i32| u64::from(((v << 1) ^ (v >> 31)) as u32);
        let zigzag64 = |v: i64| ((v << 1) ^ (v >> 63)) as u64;
        let (wire_type, varint) = match (value, kind) {
            (Scalar::I32(v), Kind::Sfixed32) => return self.fixed(&v.to_le_bytes(), out),
            (Scalar::U32(v), Kind::Fixed32) => return self.fixed(&v.to_le_bytes(), out),
            (Scalar::F32(x), _) => return self.fixed(&x.to_le_bytes(), out),
            (Scalar::I64(v), Kind::Sfixed64) => return self.fixed(&v.to_le_bytes(), out),
            (Scalar::U64(v), Kind::Fixed64) => return self.fixed(&v.to_le_bytes(), out),
            (Scalar::F64(x), _) => return self.fixed(&x.to_le_bytes(), out),
            (Scalar::Str(s), _) => (2, s.len() as u64),
            (Scalar::Bool(b), _) => (0, u64::from(b)),
            (Scalar::I32(v), Kind::Sint32) => (0, zigzag32(v)),
            // Negative `int32`s and enums go as ten-byte varints, sign-extended.
            (Scalar::I32(v) | Scalar::Enum(v), _) => (0, i64::from(v) as u64),
            (Scalar::I64(v), Kind::Sint64) => (0, zigzag64(v)),
            (Scalar::I64(v), _) => (0, v as u64),
            (Scalar::U32(v), _) => (0, u64::from(v)),
            (Scalar::U64(v), _) => (0, v),
        };
        self.tag(wire_type, out);
        write_unsigned(varint, out);
        if let Scalar::Str(s) = value {
            out.extend_from_slice(s.as_bytes());
        }
        Some(())
    }

    /// Appends the field's tag with `wire_type`.
    fn tag(&self, wire_type: u64, out: &mut Vec<u8>) {
        write_unsigned(u64::from(self.number) << 3 | wire_type, out);
    }

    /// Appends the field as the little-endian `bytes` of a 32- or 64-bit
    /// wire type.
    fn fixed(&self, bytes: &[u8], out: &mut Vec<u8>) -> Option<()> {
        self.tag(if bytes.len() == 4 { 5 } else { 1 }, out);
        out.extend_from_slice(bytes);
        Some(())
    }

    /// Whether `value` is the field's default (`-0.0` is a float's:
    /// `prost-reflect` compares values, not bits).
    fn is_default(&self, value: Scalar<'_>) -> bool {
        match value {
            Scalar::Bool(b) => !b,
            Scalar::I32(n) => n == 0,
            Scalar::I64(n) => n == 0,
            Scalar::U32(n) => n == 0,
            Scalar::U64(n) => n == 0,
            Scalar::F32(x) => x == 0.0,
            Scalar::F64(x) => x == 0.0,
            Scalar::Str(s) => s.is_empty(),
            Scalar::Enum(n) => n == self.enum_default,
        }
    }
}
