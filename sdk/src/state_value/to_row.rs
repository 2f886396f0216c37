//! A serde value written as a row: a struct, or a map with string keys,
//! whose fields are scalars, each written as the field of the row its JSON
//! text would hold (`None`, `()` and unit structs null, a unit variant its
//! name, a newtype its inner value). Anything else (a sequence, a nested
//! struct or map, bytes, a variant with data, an integer beyond 64 bits, a
//! name over 255 bytes) is no flat row: [`write`] returns `false` and the
//! caller writes JSON text instead.

use serde::ser::{self, Impossible, Serialize};
use weir_flat::row::RowWriter;

use crate::declined::{Declined, decline};

/// Appends the row of `v` to `out`: `false` (with part of it appended)
/// when `v` is no flat struct or map.
pub(super) fn write<V: Serialize + ?Sized>(v: &V, out: &mut Vec<u8>) -> bool {
    v.serialize(Top {
        row: RowWriter::new(out),
        name: String::new(),
    })
    .is_ok()
}

type Done = Result<(), Declined>;

/// The value itself: a struct or a map becomes the row; `name` holds a map
/// entry's key until its value is written.
struct Top<'a> {
    row: RowWriter<'a>,
    name: String,
}

impl<'a> ser::Serializer for Top<'a> {
    type Ok = ();
    type Error = Declined;
    type SerializeSeq = Impossible<(), Declined>;
    type SerializeTuple = Impossible<(), Declined>;
    type SerializeTupleStruct = Impossible<(), Declined>;
    type SerializeTupleVariant = Impossible<(), Declined>;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible<(), Declined>;

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Declined> {
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, Declined> {
        Ok(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Done {
        v.serialize(self)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Done {
        v.serialize(self)
    }

    decline! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_char(char) -> ();
        serialize_str(&str) -> ();
        serialize_bytes(&[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Done {
        Err(Declined)
    }
}

impl ser::SerializeStruct for Top<'_> {
    type Ok = ();
    type Error = Declined;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Done {
        v.serialize(Field {
            row: &mut self.row,
            name: checked(name)?,
        })
    }
    fn end(self) -> Done {
        Ok(())
    }
}

impl ser::SerializeMap for Top<'_> {
    type Ok = ();
    type Error = Declined;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Done {
        self.name.clear();
        key.serialize(Name(&mut self.name))
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Done {
        v.serialize(Field {
            row: &mut self.row,
            name: checked(&self.name)?,
        })
    }
    fn end(self) -> Done {
        Ok(())
    }
}

/// `name`, when a row can hold it (at most 255 bytes).
fn checked(name: &str) -> Result<&str, Declined> {
    if name.len() <= usize::from(u8::MAX) {
        Ok(name)
    } else {
        Err(Declined)
    }
}

/// One field's value, written as field `name` of the row.
struct Field<'r, 'a> {
    row: &'r mut RowWriter<'a>,
    name: &'r str,
}

impl ser::Serializer for Field<'_, '_> {
    type Ok = ();
    type Error = Declined;
    type SerializeSeq = Impossible<(), Declined>;
    type SerializeTuple = Impossible<(), Declined>;
    type SerializeTupleStruct = Impossible<(), Declined>;
    type SerializeTupleVariant = Impossible<(), Declined>;
    type SerializeMap = Impossible<(), Declined>;
    type SerializeStruct = Impossible<(), Declined>;
    type SerializeStructVariant = Impossible<(), Declined>;

    fn serialize_bool(self, v: bool) -> Done {
        self.row.bool(self.name, v);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Done {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Done {
        self.row.i64(self.name, v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Done {
        match (i64::try_from(v), u64::try_from(v)) {
            (Ok(v), _) => self.serialize_i64(v),
            (_, Ok(v)) => self.serialize_u64(v),
            _ => Err(Declined),
        }
    }
    fn serialize_u8(self, v: u8) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Done {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Done {
        self.row.u64(self.name, v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Done {
        u64::try_from(v).map_or(Err(Declined), |v| self.serialize_u64(v))
    }
    fn serialize_f32(self, v: f32) -> Done {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Done {
        self.row.f64(self.name, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Done {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Done {
        self.row.str(self.name, v);
        Ok(())
    }
    fn serialize_none(self) -> Done {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Done {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Done {
        self.row.null(self.name);
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Done {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Done {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Done {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Done {
        Err(Declined)
    }

    decline! {
        serialize_bytes(&[u8]) -> ();
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct(&'static str, usize) -> Self::SerializeStruct;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }
}

/// A map key, kept as a field name: a string or a char (JSON's object keys
/// are strings; other keys make no row).
struct Name<'a>(&'a mut String);

impl ser::Serializer for Name<'_> {
    type Ok = ();
    type Error = Declined;
    type SerializeSeq = Impossible<(), Declined>;
    type SerializeTuple = Impossible<(), Declined>;
    type SerializeTupleStruct = Impossible<(), Declined>;
    type SerializeTupleVariant = Impossible<(), Declined>;
    type SerializeMap = Impossible<(), Declined>;
    type SerializeStruct = Impossible<(), Declined>;
    type SerializeStructVariant = Impossible<(), Declined>;

    fn serialize_str(self, v: &str) -> Done {
        self.0.push_str(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Done {
        self.0.push(v);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Done {
        v.serialize(self)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Done {
        Err(Declined)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Done {
        Err(Declined)
    }

    decline! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_bytes(&[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct(&'static str, usize) -> Self::SerializeStruct;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }
}
