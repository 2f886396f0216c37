//! Schemas of records: Avro datums and Protobuf messages read into and
//! written from the JSON records the runtime carries (modules `avro`,
//! `protobuf`), JSON Schema's checks of those records (`json_schema`),
//! Confluent's wire format (`wire`), varints (`varint`), and a client of a Confluent-compatible
//! schema registry with its cache (`registry`).

pub mod avro;
pub mod json_schema;
pub mod protobuf;
pub mod registry;
pub mod varint;
pub mod wire;
