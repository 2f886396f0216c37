//! Schemas of records: Avro datums and Protobuf messages read into and
//! written from the JSON records the runtime carries (modules `avro`,
//! `protobuf`; flat ones read as rows whose JSON is the same, module
//! `proto_row` and `avro`'s `to_row`), JSON Schema's checks of those records (`json_schema`),
//! Confluent's wire format (`wire`), varints (`varint`), and a client of a Confluent-compatible
//! schema registry with its cache (`registry`).

pub mod avro;
pub mod json_schema;
mod proto_row;
mod proto_wire;
pub mod protobuf;
pub mod registry;
pub mod varint;
pub mod wire;

/// What a datum or message was appended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// JSON text.
    Json,
    /// A row (`weir_flat::row`), whose JSON is the record's JSON.
    Row,
}

/// The JSON record of `row` (`weir_flat::row`), what a writer with a
/// schema encodes when it does not write the row itself.
pub(crate) fn json_of_row(row: &[u8]) -> Result<Vec<u8>, String> {
    let mut json = Vec::with_capacity(row.len() + 32);
    weir_flat::row::write_json(row, &mut json).map_err(|e| format!("not a row: {e}"))?;
    Ok(json)
}

/// The JSON text of `row` (tests compare it with the record's JSON).
#[cfg(test)]
pub(crate) fn row_json(row: &[u8]) -> String {
    String::from_utf8(json_of_row(row).expect("a row")).expect("JSON is UTF-8")
}
