//! Protobuf messages as the JSON records the runtime carries, and back
//! ([`ProtoSchema`]): proto3's JSON mapping, with each field named as the
//! `.proto` writes it, every field written (defaults too), enums by name,
//! 64-bit integers as numbers, `bytes` as base64, well-known types
//! (`Timestamp`, `Duration`, wrappers, `Struct`) as their JSON forms.
//!
//! Schemas are `.proto` sources compiled here (`protox`), from a file of
//! the job (its imports read from the file's folder) or from a schema
//! registry (a `.proto` source or a base64 `FileDescriptorProto`, its
//! imports the schemas it references); Google's well-known types resolve
//! in both.

use std::path::Path;

use super::Written;
use super::proto_wire::WirePlan;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost_reflect::prost::Message;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, FileDescriptor, MessageDescriptor,
    SerializeOptions,
};
use protox::file::{
    ChainFileResolver, File, FileResolver, GoogleFileResolver, IncludeFileResolver,
};

/// The name the compiled schema is known by.
const FILE: &str = "schema.proto";

/// A file a schema imports: its path in `import`, its text, and the
/// paths it imports itself (Google's well-known types left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// The path `import` names it by.
    pub name: String,
    /// Its `.proto` source (or base64 descriptor).
    pub text: String,
    /// The paths of the files it imports.
    pub imports: Vec<String>,
}

/// The files a schema's compiler may open: the schema's own (as
/// [`FILE`]) and those it imports by name, each `.proto` source or a
/// base64 descriptor.
struct Files {
    own: String,
    imports: Vec<(String, String)>,
}

impl FileResolver for Files {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        let text = match name {
            FILE => &self.own,
            _ => match self.imports.iter().find(|(n, _)| n == name) {
                Some((_, text)) => text,
                None => return Err(protox::Error::file_not_found(name)),
            },
        };
        match descriptor(text) {
            Some(mut proto) => {
                proto.name = Some(name.to_owned());
                Ok(File::from_file_descriptor_proto(proto))
            }
            None => File::from_source(name, text),
        }
    }
}

/// The `FileDescriptorProto` that `text` is in base64, if it is one.
fn descriptor(text: &str) -> Option<FileDescriptorProto> {
    let bytes = BASE64.decode(text.trim()).ok()?;
    FileDescriptorProto::decode(bytes.as_slice()).ok()
}

/// A message type of a compiled `.proto` source.
#[derive(Clone)]
pub struct ProtoSchema {
    message: MessageDescriptor,
    /// How rows are written as the message without building it.
    wire: Option<WirePlan>,
    /// The source (what a registry is given).
    text: String,
    /// The files it imports, each after those it imports itself.
    imports: Vec<Import>,
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
        self.text == other.text
            && self.imports == other.imports
            && self.message.full_name() == other.message.full_name()
    }
}

impl Eq for ProtoSchema {}

/// Compiles `own` with the files it may import (`imports` by name, and
/// those under `dir`); `Err` says where it does not compile.
fn compile(
    own: &str,
    imports: &[(&str, &str)],
    dir: Option<&Path>,
) -> Result<FileDescriptor, String> {
    let mut resolver = ChainFileResolver::new();
    resolver.add(Files {
        own: own.to_owned(),
        imports: (imports.iter())
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect(),
    });
    if let Some(dir) = dir {
        resolver.add(IncludeFileResolver::new(dir.to_path_buf()));
    }
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler
        .open_file(FILE)
        .map_err(|e| format!("the .proto does not compile: {e}"))?;
    let pool: DescriptorPool = compiler.descriptor_pool();
    pool.get_file_by_name(FILE)
        .ok_or_else(|| "the .proto compiled to nothing".to_owned())
}

/// The files `file` imports, directly or not, each after its own imports,
/// Google's well-known types left out; their texts from `text_of`.
fn imports_of(
    file: &FileDescriptor,
    text_of: &dyn Fn(&str) -> Result<String, String>,
) -> Result<Vec<Import>, String> {
    fn own(file: &FileDescriptor) -> Vec<FileDescriptor> {
        let well_known = |f: &FileDescriptor| f.name().starts_with("google/protobuf/");
        file.dependencies().filter(|f| !well_known(f)).collect()
    }
    fn walk(
        file: &FileDescriptor,
        text_of: &dyn Fn(&str) -> Result<String, String>,
        out: &mut Vec<Import>,
    ) -> Result<(), String> {
        for dependency in own(file) {
            if out.iter().any(|i| i.name == dependency.name()) {
                continue;
            }
            walk(&dependency, text_of, out)?;
            out.push(Import {
                name: dependency.name().to_owned(),
                text: text_of(dependency.name())?,
                imports: own(&dependency)
                    .iter()
                    .map(|f| f.name().to_owned())
                    .collect(),
            });
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(file, text_of, &mut out)?;
    Ok(out)
}

impl ProtoSchema {
    /// Message `message` (a full name; `None`: the file's first message)
    /// of `.proto` source `text`, which imports nothing of its own.
    pub fn compile(text: &str, message: Option<&str>) -> Result<ProtoSchema, String> {
        let file = compile(text, &[], None)?;
        ProtoSchema::named(file, text, Vec::new(), message)
    }

    /// Message `message` of `file` (`None`: its first).
    fn named(
        file: FileDescriptor,
        text: &str,
        imports: Vec<Import>,
        message: Option<&str>,
    ) -> Result<ProtoSchema, String> {
        let found = match message {
            Some(name) => file
                .parent_pool()
                .get_message_by_name(name)
                .ok_or_else(|| {
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
            wire: WirePlan::new(&found),
            message: found,
            text: text.to_owned(),
            imports,
        })
    }

    /// Message number `indexes` (Confluent's path: the index among the
    /// file's messages, then among that message's nested ones...) of a
    /// schema as a registry holds it: `.proto` source or, as Confluent's
    /// Python and Go clients register them, a base64 `FileDescriptorProto`;
    /// `imports` are the schemas it references, by import path.
    pub fn at_indexes(
        text: &str,
        imports: &[(&str, &str)],
        indexes: &[i32],
    ) -> Result<ProtoSchema, String> {
        let file = compile(text, imports, None)?;
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
            wire: WirePlan::new(&message),
            message,
            text: text.to_owned(),
            imports: Vec::new(),
        })
    }

    /// Message `message` of the `.proto` source `text` of a file in
    /// `folder`, whose imports are read from that folder.
    pub fn of_file(
        text: &str,
        folder: &Path,
        message: Option<&str>,
    ) -> Result<ProtoSchema, String> {
        let compiled = compile(text, &[], Some(folder))?;
        let text_of = |name: &str| {
            let path = folder.join(name);
            std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read the import {}: {e}", path.display()))
        };
        let imports = imports_of(&compiled, &text_of)?;
        ProtoSchema::named(compiled, text, imports, message)
    }

    /// The files it imports (its own folder's, for a registry), each after
    /// those it imports itself.
    pub fn imports(&self) -> &[Import] {
        &self.imports
    }

    /// The paths of the files its own file imports directly.
    pub fn direct_imports(&self) -> Vec<String> {
        let file = self.message.parent_file();
        let direct = file.dependencies().map(|f| f.name().to_owned());
        direct
            .filter(|n| self.imports.iter().any(|i| &i.name == n))
            .collect()
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
        let message = self.message_in(bytes)?;
        self.write_json(&message, out)
    }

    /// Message `bytes` of the type.
    fn message_in(&self, bytes: &[u8]) -> Result<DynamicMessage, String> {
        DynamicMessage::decode(self.message.clone(), bytes)
            .map_err(|e| format!("not a protobuf message {}: {e}", self.full_name()))
    }

    /// Appends `message` as JSON to `out`.
    fn write_json(&self, message: &DynamicMessage, out: &mut Vec<u8>) -> Result<(), String> {
        let options = SerializeOptions::new()
            .stringify_64_bit_integers(false)
            .use_proto_field_name(true)
            .skip_default_fields(false);
        let mut serializer = serde_json::Serializer::new(out);
        message
            .serialize_with_options(&mut serializer, &options)
            .map_err(|e| format!("message {} as JSON: {e}", self.full_name()))
    }

    /// Appends message `bytes` to `out` as a row when it is flat (module
    /// `proto_row`), else as JSON; says which.
    pub fn decode_row_or_json(&self, bytes: &[u8], out: &mut Vec<u8>) -> Result<Written, String> {
        let message = self.message_in(bytes)?;
        if super::proto_row::write(&message, out) {
            return Ok(Written::Row);
        }
        self.write_json(&message, out)?;
        Ok(Written::Json)
    }

    /// Appends JSON record `json` as a message to `out`; `Err` says what
    /// does not fit.
    pub fn encode(&self, json: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        self.write(&self.message_of(json)?, false, out)
    }

    /// [`encode`](Self::encode) preceded by the message's size as a
    /// varint (a length-delimited message, as Java's `writeDelimitedTo`).
    pub fn encode_delimited(&self, json: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        self.write(&self.message_of(json)?, true, out)
    }

    /// The message type.
    pub(crate) fn descriptor(&self) -> &MessageDescriptor {
        &self.message
    }

    /// Appends row `row` (`weir_flat::row`) as a message to `out`,
    /// length-delimited with `delimited`: written straight from its fields
    /// when they come in field-number order (module `proto_wire`), else
    /// the message of its fields when each maps without JSON (module
    /// `proto_row`), else of its JSON record; all give the same bytes, and
    /// the same refusals.
    pub fn encode_row(&self, row: &[u8], delimited: bool, out: &mut Vec<u8>) -> Result<(), String> {
        if let Some(plan) = &self.wire
            && plan.encode(row, delimited, out)
        {
            return Ok(());
        }
        let message = match super::proto_row::message_of(self.descriptor(), row) {
            Some(message) => message,
            None => self.message_of(&super::json_of_row(row)?)?,
        };
        self.write(&message, delimited, out)
    }

    /// Appends `message`, length-delimited with `delimited`.
    fn write(
        &self,
        message: &DynamicMessage,
        delimited: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let written = match delimited {
            true => Message::encode_length_delimited(message, out),
            false => Message::encode(message, out),
        };
        written.map_err(|e| format!("message {}: {e}", self.full_name()))
    }

    /// JSON record `json` as a message of the type.
    fn message_of(&self, json: &[u8]) -> Result<DynamicMessage, String> {
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        let options = DeserializeOptions::new().deny_unknown_fields(true);
        DynamicMessage::deserialize_with_options(self.message.clone(), &mut deserializer, &options)
            .map_err(|e| format!("does not fit message {}: {e}", self.full_name()))
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

    /// A flat message of every scalar kind (defaults, unset and set
    /// optional fields, escapes, floats that are not finite, a `float`'s
    /// own digits, an enum value the schema does not name) reads as a row
    /// whose JSON is byte for byte its JSON; a message with a nested,
    /// repeated, map or well-known-type field reads as that JSON.
    #[test]
    fn a_flat_message_reads_as_a_row_whose_json_is_its_json() {
        const FLAT: &str = r#"syntax = "proto3";
package shop;
enum State { NEW = 0; PAID = 1; }
message Flat {
  int32 a = 1; int64 b = 2; uint32 c = 3; uint64 d = 4; sint32 e = 5; sint64 f = 6;
  fixed32 g = 7; fixed64 h = 8; sfixed32 i = 9; sfixed64 j = 10;
  bool ok = 11; string s = 12; bytes raw = 13; State state = 14;
  float x = 15; double y = 16; optional string note = 17; optional int64 n = 18;
}
"#;
        let flat = ProtoSchema::compile(FLAT, None).unwrap();
        let cases = [
            r#"{}"#,
            r#"{"a":-1,"b":-9007199254740993,"c":4294967295,"d":18446744073709551615,"e":-5,"f":-6,"g":7,"h":8,"i":-9,"j":-10,"ok":true,"s":"a \"q\"\n\u0001 é 😀","raw":"AAH/","state":"PAID","x":0.1,"y":1e300,"note":"n","n":0}"#,
            r#"{"x":"NaN","y":"-Infinity","state":7}"#,
            r#"{"x":-1.5e-7,"y":-0.0,"a":2147483647}"#,
            r#"{"x":16777217,"y":0.30000000000000004}"#,
            r#"{"x":"Infinity","y":"NaN","note":""}"#,
        ];
        for json in cases {
            let mut bytes = Vec::new();
            flat.encode(json.as_bytes(), &mut bytes).unwrap();
            let mut want = Vec::new();
            flat.decode(&bytes, &mut want).unwrap();
            let mut row = Vec::new();
            assert_eq!(
                flat.decode_row_or_json(&bytes, &mut row).unwrap(),
                Written::Row,
                "{json}"
            );
            assert_eq!(
                crate::schemas::row_json(&row),
                String::from_utf8(want).unwrap(),
                "{json}"
            );
        }
        let order = ProtoSchema::compile(ORDERS, None).unwrap();
        let json = r#"{"id":9,"amount":"12.50","state":"PAID","tags":{"a":1},"lines":[{"sku":"x","qty":2}],"note":"n","at":"2024-01-31T12:00:00.250Z","raw":"AAH/"}"#;
        let mut bytes = Vec::new();
        order.encode(json.as_bytes(), &mut bytes).unwrap();
        let (mut out, mut want) = (Vec::new(), Vec::new());
        assert_eq!(
            order.decode_row_or_json(&bytes, &mut out).unwrap(),
            Written::Json
        );
        order.decode(&bytes, &mut want).unwrap();
        assert_eq!(out, want);
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
        let by_source = ProtoSchema::at_indexes(ORDERS, &[], &[0, 1]).unwrap();
        assert_eq!(by_source.full_name(), "shop.Order.Line");
        let plain = "syntax = \"proto3\";\npackage p;\nmessage A { int64 id = 1; }\nmessage B { string s = 1; }\n";
        let compiled = ProtoSchema::compile(plain, Some("p.B")).unwrap();
        let file = compiled
            .message
            .parent_file()
            .file_descriptor_proto()
            .encode_to_vec();
        let base64 = BASE64.encode(file);
        let by_descriptor = ProtoSchema::at_indexes(&base64, &[], &[1]).unwrap();
        assert_eq!(by_descriptor.full_name(), "p.B");
        let mut bytes = Vec::new();
        compiled.encode(br#"{"s":"hi"}"#, &mut bytes).unwrap();
        let mut out = Vec::new();
        by_descriptor.decode(&bytes, &mut out).unwrap();
        assert_eq!(out, br#"{"s":"hi"}"#);
        assert!(ProtoSchema::at_indexes(plain, &[], &[5]).is_err());
    }

    /// A `.proto` of the job imports another from its folder, which
    /// imports a third: both are compiled in and listed, each after its
    /// own imports; as a registry gives them (`.proto` sources or base64
    /// descriptors by import path), the same messages decode.
    #[test]
    fn imports_come_from_the_files_folder_or_the_registrys_references() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("protos/shop")).unwrap();
        let kind = "syntax = \"proto3\";\npackage shop;\nenum Kind { HOME = 0; WORK = 1; }\n";
        let address = "syntax = \"proto3\";\npackage shop;\nimport \"shop/kind.proto\";\nmessage Address { string city = 1; Kind kind = 2; }\n";
        let order = "syntax = \"proto3\";\npackage shop;\nimport \"shop/address.proto\";\nimport \"google/protobuf/timestamp.proto\";\nmessage Order { int64 id = 1; Address ship = 2; google.protobuf.Timestamp at = 3; }\n";
        for (name, text) in [
            ("shop/kind.proto", kind),
            ("shop/address.proto", address),
            ("order.proto", order),
        ] {
            std::fs::write(dir.path().join("protos").join(name), text).unwrap();
        }
        let schema = ProtoSchema::of_file(order, &dir.path().join("protos"), None).unwrap();
        let names: Vec<(&str, &[String])> = (schema.imports().iter())
            .map(|i| (i.name.as_str(), i.imports.as_slice()))
            .collect();
        let address_imports = ["shop/kind.proto".to_owned()];
        assert_eq!(
            names,
            [
                ("shop/kind.proto", &[][..]),
                ("shop/address.proto", &address_imports[..])
            ]
        );
        assert_eq!(schema.imports()[1].text, address);
        assert_eq!(schema.direct_imports(), ["shop/address.proto"]);
        let json = r#"{"id":7,"ship":{"city":"Oslo","kind":"WORK"},"at":"2024-01-31T12:00:00Z"}"#;
        let mut bytes = Vec::new();
        schema.encode(json.as_bytes(), &mut bytes).unwrap();

        let as_descriptor = |name: &str| {
            let file = schema.message.parent_pool().get_file_by_name(name).unwrap();
            BASE64.encode(file.file_descriptor_proto().encode_to_vec())
        };
        let sources = [("shop/kind.proto", kind), ("shop/address.proto", address)];
        let descriptors = [
            (
                "shop/kind.proto".to_owned(),
                as_descriptor("shop/kind.proto"),
            ),
            (
                "shop/address.proto".to_owned(),
                as_descriptor("shop/address.proto"),
            ),
        ];
        let descriptors: Vec<(&str, &str)> = descriptors
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        let own = as_descriptor(FILE);
        for (text, imports) in [(order, &sources[..]), (own.as_str(), &descriptors[..])] {
            let read = ProtoSchema::at_indexes(text, imports, &[0]).unwrap();
            let mut out = Vec::new();
            read.decode(&bytes, &mut out).unwrap();
            let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(
                back,
                serde_json::from_str::<serde_json::Value>(json).unwrap()
            );
        }
        let err = ProtoSchema::at_indexes(order, &[], &[0]).unwrap_err();
        assert!(err.contains("shop/address.proto"), "{err}");
    }
}
