//! Schemas of records: Avro datums and Protobuf messages read into and
//! written from the JSON records the runtime carries (modules `avro`,
//! `protobuf`; flat ones read as rows whose JSON is the same, module
//! `proto_row` and `avro`'s `to_row`), JSON Schema's checks of those records (`json_schema`),
//! Confluent's wire format (`wire`), varints (`varint`), and a client of a Confluent-compatible
//! schema registry with its cache (`registry`).

pub mod avro;
pub mod json_schema;
mod proto_row;
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

/// The JSON text of `row` (tests compare it with the record's JSON).
#[cfg(test)]
pub(crate) fn row_json(row: &[u8]) -> String {
    let mut json = Vec::new();
    weir_flat::row::write_json(row, &mut json).expect("a row");
    String::from_utf8(json).expect("JSON is UTF-8")
}
