//! The fast path of encoding a state key: a key that serializes as a
//! string (a `String` or `&str`, a `char`, a unit enum variant, or a
//! newtype or `Some` around one) is stored as that string's bytes, which is
//! its JSON text without the quotes and escapes. Reading the bytes in
//! place skips `serde_json`'s escaping and the unescaping after it, and a
//! cache lookup by such a key copies nothing; any other key is left to the
//! JSON path of [`super::write_key`].

use std::fmt;

use serde::ser::{self, Impossible, Serialize, Serializer};

/// `f` called with `key`'s string's bytes, read in place, if it
/// serializes as one; otherwise `None`, `f` left in `f`.
pub(super) fn if_string<K, R, F>(key: &K, f: &mut Option<F>) -> Option<R>
where
    K: Serialize + ?Sized,
    F: FnOnce(&[u8]) -> R,
{
    key.serialize(StringKey { f }).ok()
}

/// The key does not serialize as a string.
#[derive(Debug)]
struct NotString;

impl fmt::Display for NotString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the key does not serialize as a string")
    }
}

impl std::error::Error for NotString {}

impl ser::Error for NotString {
    fn custom<T: fmt::Display>(_: T) -> Self {
        NotString
    }
}

/// Hands a string's bytes to the function it holds; refuses anything else.
struct StringKey<'a, F> {
    f: &'a mut Option<F>,
}

/// The methods of `Serializer` for the values that are not strings.
macro_rules! not_a_string {
    ($($method:ident($($arg:ty),*);)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<R, NotString> {
            Err(NotString)
        })*
    };
}

impl<R, F: FnOnce(&[u8]) -> R> Serializer for StringKey<'_, F> {
    type Ok = R;
    type Error = NotString;
    type SerializeSeq = Impossible<R, NotString>;
    type SerializeTuple = Impossible<R, NotString>;
    type SerializeTupleStruct = Impossible<R, NotString>;
    type SerializeTupleVariant = Impossible<R, NotString>;
    type SerializeMap = Impossible<R, NotString>;
    type SerializeStruct = Impossible<R, NotString>;
    type SerializeStructVariant = Impossible<R, NotString>;

    fn serialize_str(self, v: &str) -> Result<R, NotString> {
        let f = self.f.take().expect("a serializer serializes one value");
        Ok(f(v.as_bytes()))
    }

    fn serialize_char(self, v: char) -> Result<R, NotString> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<R, NotString> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<R, NotString> {
        value.serialize(self)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<R, NotString> {
        value.serialize(self)
    }

    not_a_string! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_i128(i128);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_u128(u128);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<R, NotString> {
        Err(NotString)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotString> {
        Err(NotString)
    }

    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NotString> {
        Err(NotString)
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NotString> {
        Err(NotString)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, NotString> {
        Err(NotString)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotString> {
        Err(NotString)
    }

    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, NotString> {
        Err(NotString)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, NotString> {
        Err(NotString)
    }
}
