//! The error of a serializer that takes only some values: a state key that
//! serializes as a string (`cache/key.rs`), a state value that is a flat
//! row (`state_value/to_row.rs`). The caller then encodes the value
//! another way (as JSON text), so the error is never shown.

use std::fmt;

use serde::ser;

/// The value is not one the serializer takes.
#[derive(Debug)]
pub(crate) struct Declined;

impl fmt::Display for Declined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value this serializer does not take")
    }
}

impl std::error::Error for Declined {}

impl ser::Error for Declined {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Declined
    }
}

/// `Serializer` methods that decline their value, each given as
/// `method(argument types) -> its Ok type;`.
macro_rules! decline {
    ($($method:ident($($arg:ty),*) -> $ok:ty;)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ok, $crate::declined::Declined> {
            Err($crate::declined::Declined)
        })*
    };
}

pub(crate) use decline;
