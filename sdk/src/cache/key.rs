//! The fast path of encoding a state key: a key that serializes as a
//! string (a `String` or `&str`, a `char`, a unit enum variant, or a
//! newtype or `Some` around one) is stored as that string's bytes, which is
//! its JSON text without the quotes and escapes. Reading the bytes in
//! place skips `serde_json`'s escaping and the unescaping after it, and a
//! cache lookup by such a key copies nothing; any other key is left to the
//! JSON path of [`super::write_key`].

use serde::ser::{Impossible, Serialize, Serializer};

use crate::declined::{Declined, decline};

/// `f` called with `key`'s string's bytes, read in place, if it
/// serializes as one; otherwise `None`, `f` left in `f`.
pub(super) fn if_string<K, R, F>(key: &K, f: &mut Option<F>) -> Option<R>
where
    K: Serialize + ?Sized,
    F: FnOnce(&[u8]) -> R,
{
    key.serialize(StringKey { f }).ok()
}

/// Hands a string's bytes to the function it holds; refuses anything else.
struct StringKey<'a, F> {
    f: &'a mut Option<F>,
}

impl<R, F: FnOnce(&[u8]) -> R> Serializer for StringKey<'_, F> {
    type Ok = R;
    type Error = Declined;
    type SerializeSeq = Impossible<R, Declined>;
    type SerializeTuple = Impossible<R, Declined>;
    type SerializeTupleStruct = Impossible<R, Declined>;
    type SerializeTupleVariant = Impossible<R, Declined>;
    type SerializeMap = Impossible<R, Declined>;
    type SerializeStruct = Impossible<R, Declined>;
    type SerializeStructVariant = Impossible<R, Declined>;

    fn serialize_str(self, v: &str) -> Result<R, Declined> {
        let f = self.f.take().expect("a serializer serializes one value");
        Ok(f(v.as_bytes()))
    }

    fn serialize_char(self, v: char) -> Result<R, Declined> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<R, Declined> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<R, Declined> {
        value.serialize(self)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<R, Declined> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<R, Declined> {
        Err(Declined)
    }

    decline! {
        serialize_bool(bool) -> R;
        serialize_i8(i8) -> R;
        serialize_i16(i16) -> R;
        serialize_i32(i32) -> R;
        serialize_i64(i64) -> R;
        serialize_i128(i128) -> R;
        serialize_u8(u8) -> R;
        serialize_u16(u16) -> R;
        serialize_u32(u32) -> R;
        serialize_u64(u64) -> R;
        serialize_u128(u128) -> R;
        serialize_f32(f32) -> R;
        serialize_f64(f64) -> R;
        serialize_bytes(&[u8]) -> R;
        serialize_none() -> R;
        serialize_unit() -> R;
        serialize_unit_struct(&'static str) -> R;
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct(&'static str, usize) -> Self::SerializeStruct;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }
}
