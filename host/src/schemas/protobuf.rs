//! Protobuf messages as the JSON records the runtime carries, and back
//! ([`ProtoSchema`]): proto3's JSON mapping, with each field named as the
//! `.proto` writes it, every field written (defaults too), enums by name,
//! 64-bit integers as numbers, `bytes` as base64, well-known types
//! (`Timestamp`, `Duration`, wrappers, `Struct`) as their JSON forms.
//!
//! Schemas are `.proto` sources compiled here (`protox`), from a file of
//! the job or from a schema registry; imports of Google's well-known types
//! resolve, others do not (one file per schema).

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost_reflect::prost::Message;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, FileDescriptor, MessageDescriptor,
    SerializeOptions,
};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

/// The name the compiled source is known by.
const FILE: &str = "schema.proto";

/// One file of source, for the compiler.
struct Source(String);

impl FileResolver for Source {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match name {
            FILE => File::from_source(name, &self.0),
            _ => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// A message type of a compiled `.proto` source.
#[derive(Clone)]
pub struct ProtoSchema {
    message: MessageDescriptor,
    /// The source (what a registry is given).
    text: String,
}

impl std::fmt::Debug for ProtoSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ProtoSchema")
            .field(&self.message.full_name())
            .finish()
    }
}

impl PartialEq for ProtoSchema {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.message.full_name() == other.message.full_name()
    }
}

impl Eq for ProtoSchema {}

/// Compiles `source`; `Err` says where it does not compile.
fn compile(source: &str) -> Result<DescriptorPool, String> {
    let mut resolver = ChainFileResolver::new();
    resolver.add(Source(source.to_owned()));
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler
        .open_file(FILE)
        .map_err(|e| format!("the .proto does not compile: {e}"))?;
    Ok(compiler.descriptor_pool())
}

/// The file a base64 `FileDescriptorProto` describes; `None` if `text` is
/// not one.
fn descriptor(text: &str) -> Option<Result<FileDescriptor, String>> {
    let bytes = BASE64.decode(text.trim()).ok()?;
    let proto = FileDescriptorProto::decode(bytes.as_slice()).ok()?;
    let name = proto.name().to_owned();
    let mut pool = DescriptorPool::new();
    Some(match pool.add_file_descriptor_proto(proto) {
        Ok(()) => pool
            .get_file_by_name(&name)
            .ok_or_else(|| format!("the descriptor of {name} holds no file")),
        Err(e) => Err(format!(
            "the descriptor of {name} does not resolve (imports of other schemas are not read): {e}"
        )),
    })
}

impl ProtoSchema {
    /// Message `message` (a full name; `None`: the file's first message)
    /// of `.proto` source `text`.
    pub fn compile(text: &str, message: Option<&str>) -> Result<ProtoSchema, String> {
        let pool = compile(text)?;
        let file = pool
            .get_file_by_name(FILE)
            .ok_or("the .proto compiled to nothing")?;
        let found = match message {
            Some(name) => pool.get_message_by_name(name).ok_or_else(|| {
                let names: Vec<String> =
                    file.messages().map(|m| m.full_name().to_owned()).collect();
                format!(
                    "the .proto has no message {name} (its messages: {})",
                    names.join(", ")
                )
            })?,
            None => file
                .messages()
                .next()
                .ok_or("the .proto defines no message")?,
        };
        Ok(ProtoSchema {
            message: found,
            text: text.to_owned(),
        })
    }

    /// Message number `indexes` (Confluent's path: the index among the
    /// file's messages, then among that message's nested ones...) of a
    /// schema as a registry holds it: `.proto` source or, as Confluent's
    /// Python and Go clients register them, a base64 `FileDescriptorProto`.
    pub fn at_indexes(text: &str, indexes: &[i32]) -> Result<ProtoSchema, String> {
        let file = match compile(text) {
            Ok(pool) => pool
                .get_file_by_name(FILE)
                .ok_or("the .proto compiled to nothing")?,
            Err(e) => descriptor(text).ok_or(e)??,
        };
        let missing = || format!("the .proto has no message at indexes {indexes:?}");
        let (first, rest) = indexes.split_first().map_or((0, &[][..]), |(f, r)| (*f, r));
        let mut message = file.messages().nth(first as usize).ok_or_else(missing)?;
        for &i in rest {
            let child = message
                .child_messages()
                .nth(i as usize)
                .ok_or_else(missing)?;
            message = child;
        }
        Ok(ProtoSchema {
            message,
            text: text.to_owned(),
        })
    }

    /// Reads a `.proto` file (relative to `dir`), message `message`.
    pub fn read(dir: &Path, file: &str, message: Option<&str>) -> Result<ProtoSchema, String> {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("`schema` = {file:?}: cannot read {}: {e}", path.display()))?;
        ProtoSchema::compile(&text, message).map_err(|e| format!("`schema` = {file:?}: {e}"))
    }

    /// The source.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The message's full name.
    pub fn full_name(&self) -> &str {
        self.message.full_name()
    }

    /// The message's place in its file, as Confluent's wire format names
    /// it.
    pub fn indexes(&self) -> Vec<i32> {
        self.message
            .path()
            .iter()
            .skip(1)
            .step_by(2)
            .copied()
            .collect()
    }

    /// Appends message `bytes` as JSON to `out`.
    pub fn decode(&self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let message = DynamicMessage::decode(self.message.clone(), bytes)
            .map_err(|e| format!("not a protobuf message {}: {e}", self.full_name()))?;
        let options = SerializeOptions::new()
            .stringify_64_bit_integers(false)
            .use_proto_field_name(true)
            .skip_default_fields(false);
        let mut serializer = serde_json::Serializer::new(out);
        message
            .serialize_with_options(&mut serializer, &options)
            .map_err(|e| format!("message {} as JSON: {e}", self.full_name()))
    }

    /// Appends JSON record `json` as a message to `out`; `Err` says what
    /// does not fit.
    pub fn encode(&self, json: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        let options = DeserializeOptions::new().deny_unknown_fields(true);
        let message = DynamicMessage::deserialize_with_options(
            self.message.clone(),
            &mut deserializer,
            &options,
        )
        .map_err(|e| format!("does not fit message {}: {e}", self.full_name()))?;
        Message::encode(&message, out).map_err(|e| format!("message {}: {e}", self.full_name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDERS: &str = r#"syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

enum State { NEW = 0; PAID = 1; SHIPPED = 2; }

message Order {
  int64 id = 1;
  string amount = 2;
  State state = 3;
  map<string, int32> tags = 4;
  repeated Line lines = 5;
  optional string note = 6;
  google.protobuf.Timestamp at = 7;
  bytes raw = 8;
  message Line { string sku = 1; int32 qty = 2; }
}

message Other { string x = 1; }
"#;

    fn round_trip(schema: &ProtoSchema, json: &str) -> String {
        let mut bytes = Vec::new();
        schema.encode(json.as_bytes(), &mut bytes).unwrap();
        let mut out = Vec::new();
        schema.decode(&bytes, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn messages_round_trip_through_json_with_their_field_names() {
        let order = ProtoSchema::compile(ORDERS, None).unwrap();
        assert_eq!(
            (order.full_name(), order.indexes()),
            ("shop.Order", vec![0])
        );
        let json = r#"{"id":9007199254740993,"amount":"12.50","state":"PAID","tags":{"a":1},"lines":[{"sku":"x","qty":2}],"note":"n","at":"2024-01-31T12:00:00.250Z","raw":"AAH/"}"#;
        let back: serde_json::Value = serde_json::from_str(&round_trip(&order, json)).unwrap();
        let want: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(back, want);
        // Defaults are written: a consumer sees every field.
        let sparse = round_trip(&order, r#"{"id":1}"#);
        assert!(
            sparse.contains(r#""state":"NEW""#) && sparse.contains(r#""amount":"""#),
            "{sparse}"
        );
        let err = order
            .encode(br#"{"id":1,"op":"delete"}"#, &mut Vec::new())
            .unwrap_err();
        assert!(
            err.contains("does not fit message shop.Order") && err.contains("op"),
            "{err}"
        );
        let line = ProtoSchema::compile(ORDERS, Some("shop.Order.Line")).unwrap();
        // The map's entry type is the first nested message.
        assert_eq!(line.indexes(), [0, 1]);
        let other = ProtoSchema::compile(ORDERS, Some("shop.Other")).unwrap();
        assert_eq!(other.indexes(), [1]);
        let err = ProtoSchema::compile(ORDERS, Some("shop.Nope")).unwrap_err();
        assert!(
            err.contains("no message shop.Nope (its messages: shop.Order, shop.Other)"),
            "{err}"
        );
        assert!(ProtoSchema::compile("syntax = \"proto3\"; message {", None).is_err());
    }

    #[test]
    fn a_registry_schema_is_source_or_a_base64_descriptor() {
        let by_source = ProtoSchema::at_indexes(ORDERS, &[0, 1]).unwrap();
        assert_eq!(by_source.full_name(), "shop.Order.Line");
        let plain = "syntax = \"proto3\";\npackage p;\nmessage A { int64 id = 1; }\nmessage B { string s = 1; }\n";
        let compiled = ProtoSchema::compile(plain, Some("p.B")).unwrap();
        let file = compiled
            .message
            .parent_file()
            .file_descriptor_proto()
            .encode_to_vec();
        let base64 = BASE64.encode(file);
        let by_descriptor = ProtoSchema::at_indexes(&base64, &[1]).unwrap();
        assert_eq!(by_descriptor.full_name(), "p.B");
        let mut bytes = Vec::new();
        compiled.encode(br#"{"s":"hi"}"#, &mut bytes).unwrap();
        let mut out = Vec::new();
        by_descriptor.decode(&bytes, &mut out).unwrap();
        assert_eq!(out, br#"{"s":"hi"}"#);
        assert!(ProtoSchema::at_indexes(plain, &[5]).is_err());
    }
}
