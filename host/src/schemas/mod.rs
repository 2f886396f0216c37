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
