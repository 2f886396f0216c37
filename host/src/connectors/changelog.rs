//! How a sink that keeps every record (an append) writes a record's change
//! kind: a JSON object value that is not an insert gets the field
//! [`OP_FIELD`] naming its kind (`"op": "delete"`); inserts are written as
//! they are, so a stream that is no changelog looks as it always did.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::dataflow::batch::Change;

/// The field that carries a record's change kind ([`Change::name`]) in
/// what append sinks write: absent means insert.
pub const OP_FIELD: &str = "op";

/// `value` as an append sink writes it for a record saying `change`: itself
/// for an insert, else the object with [`OP_FIELD`] set (replacing a field
/// of that name). A value that is not a JSON object cannot say its kind:
/// an error naming the kind.
///
/// ```
/// use weir::connectors::changelog::with_op;
/// use weir::dataflow::batch::Change;
/// assert_eq!(&*with_op(b"x", Change::Insert).unwrap(), b"x");
/// assert_eq!(&*with_op(br#"{"id":1}"#, Change::Delete).unwrap(), br#"{"id":1,"op":"delete"}"#);
/// assert!(with_op(b"x", Change::Delete).is_err());
/// ```
pub fn with_op(value: &[u8], change: Change) -> Result<Cow<'_, [u8]>, String> {
    if change == Change::Insert {
        return Ok(Cow::Borrowed(value));
    }
    let mut object: Map<String, Value> = serde_json::from_slice(value).map_err(|_| {
        format!(
            "a record saying `{}` must be a JSON object to carry its kind in the field `{OP_FIELD}`; \
             this sink writes every record and cannot apply it",
            change.name()
        )
    })?;
    object.insert(OP_FIELD.to_owned(), Value::from(change.name()));
    Ok(Cow::Owned(
        serde_json::to_vec(&object).expect("a JSON map serializes"),
    ))
}
