//! How typed state ([`MapState`](crate::MapState),
//! [`ValueState`](crate::ValueState)) encodes its values in host state:
//! JSON text, or row values.
//!
//! A row value is the byte [`ROW_VALUE`] followed by a row in the layout of
//! `weir_flat::row` (typed, named fields: no number is formatted or parsed).
//! A store that opted in ([`Values::Rows`]) writes a value as a row value
//! when it serializes as a struct or a map with string keys whose every
//! field is a scalar ([`to_row`]), and as JSON text otherwise. Every store
//! reads both forms, whatever it writes ([`decode`]): state written before
//! a plugin opted in, or by a build that did not, restores.
//!
//! A value as a row decodes to what its JSON text decodes to, with two
//! differences that only make rows more faithful: a float keeps its exact
//! bits (JSON text has no NaN or infinity and writes them as `null`), and
//! an `f32` is stored widened to `f64` (read back as the same `f32`).

use serde::{Serialize, de::DeserializeOwned};
use weir_flat::state::{ROW_VALUE, row_value};

use crate::error::{Error, Result};

mod from_row;
mod to_row;

/// How a store writes its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Values {
    /// JSON text, as `serde_json` writes it.
    #[default]
    Json,
    /// Row values where the value is a flat struct or map, else JSON text.
    Rows,
}

/// Appends `v` encoded as `values` says to `out`.
pub(crate) fn write<V: Serialize + ?Sized>(v: &V, values: Values, out: &mut Vec<u8>) {
    if values == Values::Rows {
        let start = out.len();
        out.push(ROW_VALUE);
        if to_row::write(v, out) {
            return;
        }
        out.truncate(start);
    }
    serde_json::to_writer(out, v).expect("serializing a state value to JSON in memory");
}

/// The value of state `what` stored as `bytes`, a row value or JSON text.
pub(crate) fn decode<V: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<V> {
    let decoded = match row_value(bytes) {
        Some(row) => from_row::read(row).map_err(|e| e.to_string()),
        None => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
    };
    decoded.map_err(|e| {
        Error::IncompatibleState(format!(
            "state `{what}` holds a value that does not decode: {e}"
        ))
    })
}

#[cfg(test)]
mod tests;
