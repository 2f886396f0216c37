//! State values as a person reads them. A plugin's state values are its
//! own bytes; the SDKs write JSON text or row values (the byte
//! [`ROW_VALUE`](weir_flat::state::ROW_VALUE) and a row of typed fields),
//! and tools that show state (`weir state`, shadow reports, traces) show a
//! row value as the JSON object of its fields.

use std::borrow::Cow;

/// The JSON text of the object of `value`'s fields when `value` is a
/// well-formed row value; `None` for any other bytes.
///
/// ```
/// use weir_flat::{row::RowWriter, state::ROW_VALUE};
/// let mut v = vec![ROW_VALUE];
/// RowWriter::new(&mut v).f64("a", 12.5).bool("done", true);
/// assert_eq!(weir::keyed::value::row_json(&v).unwrap(), br#"{"a":12.5,"done":true}"#);
/// assert_eq!(weir::keyed::value::row_json(b"{}"), None);
/// ```
pub fn row_json(value: &[u8]) -> Option<Vec<u8>> {
    let row = weir_flat::state::row_value(value)?;
    let mut out = Vec::new();
    weir_flat::row::write_json(row, &mut out).ok()?;
    Some(out)
}

/// What a person reads of state value `value`: a row value's JSON
/// ([`row_json`]), any other value as it is.
///
/// ```
/// assert_eq!(&*weir::keyed::value::readable(b"7"), b"7");
/// ```
pub fn readable(value: &[u8]) -> Cow<'_, [u8]> {
    row_json(value).map_or(Cow::Borrowed(value), Cow::Owned)
}
