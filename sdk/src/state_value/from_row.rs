//! A serde value read from a row: the row is a map of its fields, in
//! order, each value visited as its JSON text would be (`null` as unit or
//! `None`, a decimal as the number its text is, a string as a unit
//! variant's name where an enum is wanted).

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use weir_flat::row::{Fields, Value, fields};

/// Why a row value did not decode.
#[derive(Debug)]
pub(super) struct BadValue(String);

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadValue {}

impl de::Error for BadValue {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        BadValue(msg.to_string())
    }
}

/// The value of type `V` that `row` holds.
pub(super) fn read<V: DeserializeOwned>(row: &[u8]) -> Result<V, BadValue> {
    V::deserialize(Row(fields(row)))
}

/// A whole row: a map.
struct Row<'a>(Fields<'a>);

impl<'de> de::Deserializer<'de> for Row<'de> {
    type Error = BadValue;

    fn deserialize_any<W: Visitor<'de>>(self, visitor: W) -> Result<W::Value, BadValue> {
        visitor.visit_map(Entries {
            fields: self.0,
            value: None,
        })
    }
    fn deserialize_option<W: Visitor<'de>>(self, visitor: W) -> Result<W::Value, BadValue> {
        visitor.visit_some(self)
    }
    fn deserialize_newtype_struct<W: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: W,
    ) -> Result<W::Value, BadValue> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// The fields of a row as map entries.
struct Entries<'a> {
    fields: Fields<'a>,
    /// The value of the field whose name was just read.
    value: Option<Value<'a>>,
}

impl<'de> de::MapAccess<'de> for Entries<'de> {
    type Error = BadValue;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, BadValue> {
        match self.fields.next() {
            None => Ok(None),
            Some(Err(e)) => Err(BadValue(format!("a malformed row: {e}"))),
            Some(Ok((name, value))) => {
                self.value = Some(value);
                seed.deserialize(BorrowedStrDeserializer::new(name))
                    .map(Some)
            }
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, BadValue> {
        let value = self.value.take().expect("a value is read after its key");
        seed.deserialize(Field(value))
    }
}

/// One field's value.
struct Field<'a>(Value<'a>);

impl<'de> de::Deserializer<'de> for Field<'de> {
    type Error = BadValue;

    fn deserialize_any<W: Visitor<'de>>(self, visitor: W) -> Result<W::Value, BadValue> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Int(n) => visitor.visit_i64(n),
            Value::Uint(n) => visitor.visit_u64(n),
            Value::Float(x) => visitor.visit_f64(x),
            Value::Str(s) => visitor.visit_borrowed_str(s),
            Value::Decimal(text) => number(text, visitor),
        }
    }
    fn deserialize_option<W: Visitor<'de>>(self, visitor: W) -> Result<W::Value, BadValue> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }
    fn deserialize_newtype_struct<W: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: W,
    ) -> Result<W::Value, BadValue> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_enum<W: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: W,
    ) -> Result<W::Value, BadValue> {
        match self.0 {
            Value::Str(s) => visitor.visit_enum(s.into_deserializer()),
            _ => self.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

/// Visits a decimal's text as `serde_json` visits the same number: an
/// integer that fits 64 bits as one, anything else as an `f64`.
fn number<'de, W: Visitor<'de>>(text: &str, visitor: W) -> Result<W::Value, BadValue> {
    if let Ok(n) = text.parse::<u64>() {
        return visitor.visit_u64(n);
    }
    match text.parse::<i64>() {
        // `-0` is the float -0.0 to serde_json.
        Ok(0) => return visitor.visit_f64(-0.0),
        Ok(n) => return visitor.visit_i64(n),
        Err(_) => {}
    }
    match text.parse::<f64>() {
        Ok(x) => visitor.visit_f64(x),
        Err(_) => Err(BadValue(format!("a row's decimal {text:?} is no number"))),
    }
}
