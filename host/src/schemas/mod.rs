//! Schemas of records: Avro datums read into and written from the JSON
//! records the runtime carries (module `avro`), Confluent's wire format
//! (module `wire`), and a client of a Confluent-compatible schema registry
//! with its cache (module `registry`).

pub mod avro;
pub mod protobuf;
pub mod registry;
pub mod wire;
