//! Reading one field of a JSON record without building the rest of it.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// The configured field of a record.
#[derive(Debug, PartialEq)]
pub(crate) enum Field<'de> {
    /// A string, borrowed from the record when it has no escapes.
    Str(Cow<'de, str>),
    /// Anything else (a number, `null` or a boolean costs no allocation).
    Other(Value),
}

/// Finds the value at `path` in a JSON document, building nothing else.
/// Every part of the document still goes through `deserialize_any` (keys
/// through `deserialize_str`), as parsing it into a [`Value`] does, so the
/// documents accepted are exactly those.
pub(crate) struct Lookup<'p> {
    pub(crate) path: &'p [String],
}

impl<'de> DeserializeSeed<'de> for Lookup<'_> {
    type Value = Option<Field<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        match self.path.split_first() {
            None => d.deserialize_any(LeafVisitor).map(Some),
            Some((part, rest)) => d.deserialize_any(ObjectVisitor { part, rest }),
        }
    }
}

/// Implements the scalar methods of a [`Visitor`] that only validates them,
/// returning `$value`.
macro_rules! accept_scalars {
    ($value:expr) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// The value of an object member on the path: finds `part`, then `rest`.
struct ObjectVisitor<'p> {
    part: &'p str,
    rest: &'p [String],
}

impl<'de> Visitor<'de> for ObjectVisitor<'_> {
    type Value = Option<Field<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    accept_scalars!(None);

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip.visit_seq(seq).map(|()| None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // A repeated member: the last one counts, as in a `Value`.
        let mut found = None;
        while let Some(is_part) = map.next_key_seed(KeyIs(self.part))? {
            if is_part {
                found = map.next_value_seed(Lookup { path: self.rest })?;
            } else {
                map.next_value_seed(Skip)?;
            }
        }
        Ok(found)
    }
}

/// Whether an object key is the given one.
struct KeyIs<'p>(&'p str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// Validates a value and drops it.
struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    accept_scalars!(());

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Skip)?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(())
    }
}

/// The field itself, as a [`Value`] would hold it (strings borrowed).
struct LeafVisitor;

impl<'de> Visitor<'de> for LeafVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::Null))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::Bool(b)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::Number(n.into())))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::Number(n.into())))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Field<'de>, E> {
        Ok(Field::Other(
            Number::from_f64(n).map_or(Value::Null, Value::Number),
        ))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(s.to_owned())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field<'de>, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Field::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field<'de>, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(Field::Other)
    }
}
