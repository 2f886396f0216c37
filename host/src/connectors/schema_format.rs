//! The formats with a schema, `avro`, `protobuf` and `json`, of sources
//! and sinks: their settings ([`SchemaSettings`]: `schema`, `message`,
//! `schema_registry`, `subject_strategy`), a source's decoder of messages
//! into JSON records, or rows for flat Avro records and Protobuf messages
//! when asked
//! ([`SchemaDecoder`]), and a sink's encoder of records into messages
//! ([`SchemaEncoder`]).
//!
//! With `schema_registry`, messages are in Confluent's wire format: a
//! source fetches each writer's schema by the id the message names (once)
//! and reads Avro as `schema` sees it when given (Avro's resolution; a
//! Protobuf message is read with its writer's schema; a JSON record is
//! checked against its writer's schema and `schema`), a sink registers
//! `schema` under its subject at open and frames each message with the id
//! (and, for Protobuf, the message's path in its file). Without, messages
//! are bare datums of `schema` (JSON records it checks).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::schemas::Written;
use crate::schemas::avro::{AvroReader, AvroSchema, AvroWriter, references};
use crate::schemas::json_schema::JsonSchema;
use crate::schemas::protobuf::ProtoSchema;
use crate::schemas::registry::{FetchError, Reference, Registry, SubjectStrategy};
use crate::schemas::wire;

/// The kind of a format's schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    /// `format = "avro"`: Avro schemas (`.avsc`).
    Avro,
    /// `format = "protobuf"`: message types of `.proto` files.
    Protobuf,
    /// `format = "json"`: JSON Schemas of JSON records.
    Json,
}

impl SchemaKind {
    /// The kind of `format`, if it is a format with a schema.
    pub fn of_format(format: &str) -> Option<SchemaKind> {
        match format {
            "avro" => Some(SchemaKind::Avro),
            "protobuf" => Some(SchemaKind::Protobuf),
            "json" => Some(SchemaKind::Json),
            _ => None,
        }
    }

    /// The `format` value.
    pub fn format(self) -> &'static str {
        match self {
            SchemaKind::Avro => "avro",
            SchemaKind::Protobuf => "protobuf",
            SchemaKind::Json => "json",
        }
    }

    /// The registry's name of the kind (`schemaType`).
    fn registry_name(self) -> &'static str {
        match self {
            SchemaKind::Avro => "AVRO",
            SchemaKind::Protobuf => "PROTOBUF",
            SchemaKind::Json => "JSON",
        }
    }

    /// The usual extension of its schema files.
    fn extension(self) -> &'static str {
        match self {
            SchemaKind::Avro => "avsc",
            SchemaKind::Protobuf => "proto",
            SchemaKind::Json => "schema.json",
        }
    }
}

/// A schema of a format: Avro's, a Protobuf message type's, or a JSON
/// Schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    /// An Avro schema (`.avsc`).
    Avro(AvroSchema),
    /// A message type of a `.proto` file.
    Protobuf(ProtoSchema),
    /// A JSON Schema.
    Json(JsonSchema),
}

impl Schema {
    fn kind(&self) -> SchemaKind {
        match self {
            Schema::Avro(_) => SchemaKind::Avro,
            Schema::Protobuf(_) => SchemaKind::Protobuf,
            Schema::Json(_) => SchemaKind::Json,
        }
    }

    fn text(&self) -> &str {
        match self {
            Schema::Avro(s) => s.text(),
            Schema::Protobuf(s) => s.text(),
            Schema::Json(s) => s.text(),
        }
    }

    /// The record's full name, for the record-name subject strategies (a
    /// JSON Schema's `title`).
    fn full_name(&self) -> Option<String> {
        match self {
            Schema::Avro(s) => s.full_name(),
            Schema::Protobuf(s) => Some(s.full_name().to_owned()),
            Schema::Json(s) => s.title().map(str::to_owned),
        }
    }
}

/// What a schema's settings are for: a message's value (`format`,
/// `schema`, `message`) or its key (`key_format`, `key_schema`,
/// `key_message`), whose subjects end in `-value` and `-key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The message's value.
    Values,
    /// The message's key.
    Keys,
}

impl Role {
    /// The job-file key `name` (`format`, `schema`, `message`) is for this
    /// role.
    fn key(self, name: &str) -> String {
        match self {
            Role::Values => name.to_owned(),
            Role::Keys => format!("key_{name}"),
        }
    }
}

/// The settings of `format = "avro"`, `"protobuf"` or `"json"` (or of
/// the same `key_format`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaSettings {
    /// The format's kind of schema.
    pub kind: SchemaKind,
    /// Whether they are of values or keys.
    pub role: Role,
    /// `schema` (with `message`): the schema file's, compiled. An Avro
    /// source reads values as it sees them; a sink writes values of it.
    pub schema: Option<Schema>,
    /// `schema_registry`: the registry's URL.
    pub registry: Option<String>,
    /// `subject_strategy` (sinks): how the subject is named.
    pub strategy: SubjectStrategy,
}

/// What [`SchemaSettings::read`] reads: the settings as written.
#[derive(Debug, Default)]
pub struct SchemaKeys<'a> {
    /// `schema`: a file.
    pub schema: Option<&'a str>,
    /// `message`: a Protobuf message type's full name.
    pub message: Option<&'a str>,
    /// `schema_registry`: a URL, of values and keys alike.
    pub registry: Option<String>,
    /// `subject_strategy` (sinks), of values and keys alike.
    pub strategy: Option<SubjectStrategy>,
    /// `key_format` (Kafka): the format of message keys.
    pub key_format: Option<&'a str>,
    /// `key_schema`: a file.
    pub key_schema: Option<&'a str>,
    /// `key_message`: a Protobuf message type's full name.
    pub key_message: Option<&'a str>,
}

/// Why the schema's keys are refused with a format that has none.
const KEYS_WITHOUT_FORMAT: &str = "`schema`, `message`, `schema_registry` and `subject_strategy` are settings of format = \"avro\", \"protobuf\" or \"json\" (`schema_registry` and `subject_strategy` also of key_format); set the format or remove them";

impl SchemaSettings {
    /// Reads the schema settings of a source or sink: of values when their
    /// format has a schema (`kind`), and of keys with `key_format` (then
    /// `key_schema` and `key_message` play `schema`'s and `message`'s
    /// part); the two share `schema_registry` and `subject_strategy`. A
    /// key that neither uses is refused in one line. A sink (`writes`)
    /// needs the schemas it writes with.
    pub fn read(
        kind: Option<SchemaKind>,
        keys: SchemaKeys<'_>,
        dir: &Path,
        writes: bool,
    ) -> Result<(Option<SchemaSettings>, Option<SchemaSettings>), String> {
        let of_keys = match keys.key_format {
            None if keys.key_schema.is_some() || keys.key_message.is_some() => {
                return Err("`key_schema` and `key_message` are settings of key_format = \"avro\", \"protobuf\" or \"json\"; set it or remove them".into());
            }
            None => None,
            Some(format) => {
                let kind = SchemaKind::of_format(format).ok_or_else(|| {
                    format!("`key_format` = {format:?} is no format with a schema; write \"avro\", \"protobuf\" or \"json\", or remove it to take keys as they are")
                })?;
                let key_keys = SchemaKeys {
                    schema: keys.key_schema,
                    message: keys.key_message,
                    registry: keys.registry.clone(),
                    strategy: keys.strategy,
                    ..SchemaKeys::default()
                };
                Some(SchemaSettings::read_as(
                    Role::Keys,
                    kind,
                    key_keys,
                    dir,
                    writes,
                )?)
            }
        };
        let shared = keys.registry.is_some() || keys.strategy.is_some();
        let of_values = match kind {
            Some(kind) => Some(SchemaSettings::read_as(
                Role::Values,
                kind,
                keys,
                dir,
                writes,
            )?),
            None if keys.schema.is_some() || keys.message.is_some() => {
                return Err(KEYS_WITHOUT_FORMAT.into());
            }
            None if shared && of_keys.is_none() => return Err(KEYS_WITHOUT_FORMAT.into()),
            None => None,
        };
        Ok((of_values, of_keys))
    }

    /// The settings of a format of `kind` for `role`: `schema` a file
    /// relative to the job folder `dir`, `message` the Protobuf message
    /// type in it (default: its first). A source needs `schema` or
    /// `schema_registry`, a sink (`writes`) needs `schema`.
    fn read_as(
        role: Role,
        kind: SchemaKind,
        keys: SchemaKeys<'_>,
        dir: &Path,
        writes: bool,
    ) -> Result<SchemaSettings, String> {
        let (format, extension) = (kind.format(), kind.extension());
        let (format_key, schema_key) = (role.key("format"), role.key("schema"));
        if keys.message.is_some() && kind != SchemaKind::Protobuf {
            return Err(format!(
                "`{}` names a Protobuf message type: remove it ({format_key} = \"{format}\" has one schema)",
                role.key("message")
            ));
        }
        let schema = match keys.schema {
            None => None,
            Some(file) => {
                let path = dir.join(file);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()));
                let parsed = text.and_then(|text| match kind {
                    SchemaKind::Protobuf => {
                        let folder = path.parent().unwrap_or(dir);
                        ProtoSchema::of_file(&text, folder, keys.message).map(Schema::Protobuf)
                    }
                    SchemaKind::Avro => AvroSchema::parse(&text).map(Schema::Avro),
                    SchemaKind::Json => JsonSchema::parse(&text).map(Schema::Json),
                });
                Some(parsed.map_err(|e| format!("`{schema_key}` = {file:?}: {e}"))?)
            }
        };
        let what = match role {
            Role::Values => "values",
            Role::Keys => "keys",
        };
        match (&schema, &keys.registry, writes) {
            (None, _, true) => Err(format!(
                "{format_key} = \"{format}\" writes {what} of a schema: add {schema_key} = \"<file>.{extension}\""
            )),
            (None, None, false) => Err(format!(
                "{format_key} = \"{format}\" needs the writers' schemas: add {schema_key} = \"<file>.{extension}\" or schema_registry = \"http://...\""
            )),
            _ if keys.strategy.is_some() && keys.registry.is_none() => Err(
                "`subject_strategy` names the subject of a schema registry: add schema_registry or remove it".into(),
            ),
            _ => Ok(SchemaSettings {
                kind,
                role,
                schema,
                registry: keys.registry,
                strategy: keys.strategy.unwrap_or_default(),
            }),
        }
    }
}

/// Why a message does not decode.
#[derive(Debug)]
pub enum DecodeError {
    /// The message is not what the format says: a bad record.
    Bad(String),
    /// The registry did not answer: the source fails (and is restarted).
    Registry(String),
}

/// What reads the messages of one writer's schema.
#[derive(Clone)]
enum Reader {
    Avro(Arc<AvroReader>),
    Protobuf(Arc<ProtoSchema>),
    /// The schemas a JSON record must fit: its writer's and the job's.
    Json(Vec<JsonSchema>),
}

impl Reader {
    /// Appends `datum` decoded to `out`: JSON, or with `rows` a row when
    /// the format makes one of it.
    fn read(&self, datum: &[u8], rows: bool, out: &mut Vec<u8>) -> Result<Written, String> {
        let json = |done: Result<(), String>| done.map(|()| Written::Json);
        match self {
            Reader::Avro(r) if rows => r.read_row_or_json(datum, out),
            Reader::Avro(r) => json(r.read(datum, out)),
            Reader::Protobuf(s) if rows => s.decode_row_or_json(datum, out),
            Reader::Protobuf(s) => json(s.decode(datum, out)),
            Reader::Json(schemas) => {
                let value: serde_json::Value =
                    serde_json::from_slice(datum).map_err(|e| format!("not JSON: {e}"))?;
                for schema in schemas {
                    schema.check_value(&value)?;
                }
                out.extend_from_slice(datum);
                Ok(Written::Json)
            }
        }
    }
}

/// A source's decoder of `avro`, `protobuf` or `json` messages.
pub struct SchemaDecoder {
    settings: SchemaSettings,
    registry: Option<Registry>,
    /// Readers by writer's schema id (and Protobuf message path).
    by_id: HashMap<(u32, Vec<i32>), Reader>,
    /// The reader of bare messages of `schema` (without a registry).
    plain: Option<Reader>,
    /// Whether flat Avro records are decoded as rows.
    rows: bool,
    /// The message decoded last.
    out: Vec<u8>,
}

impl SchemaDecoder {
    /// A decoder for `settings`.
    pub fn new(settings: &SchemaSettings) -> Result<SchemaDecoder, String> {
        let registry = settings
            .registry
            .as_deref()
            .map(Registry::new)
            .transpose()?;
        let plain = match (&registry, &settings.schema) {
            (None, Some(Schema::Avro(schema))) => {
                Some(Reader::Avro(Arc::new(AvroReader::new(schema, None)?)))
            }
            (None, Some(Schema::Protobuf(schema))) => {
                Some(Reader::Protobuf(Arc::new(schema.clone())))
            }
            (None, Some(Schema::Json(schema))) => Some(Reader::Json(vec![schema.clone()])),
            _ => None,
        };
        Ok(SchemaDecoder {
            settings: settings.clone(),
            registry,
            by_id: HashMap::new(),
            plain,
            rows: false,
            out: Vec::new(),
        })
    }

    /// This decoder, decoding flat Avro records as rows (whose JSON is the
    /// record's: `schemas::avro`): for a source's values, not its keys.
    pub fn reading_rows(mut self) -> SchemaDecoder {
        self.rows = true;
        self
    }

    /// `message` as a JSON record, or a row ([`reading_rows`](Self::reading_rows)).
    pub fn decode(&mut self, message: &[u8]) -> Result<(&[u8], Written), DecodeError> {
        self.out.clear();
        let (reader, datum) = match &self.registry {
            None => (
                self.plain.clone().expect("a schema without a registry"),
                message,
            ),
            Some(_) => {
                let (id, datum) = wire::split(message).map_err(DecodeError::Bad)?;
                let (path, datum) = match self.settings.kind {
                    SchemaKind::Protobuf => wire::split_indexes(datum).map_err(DecodeError::Bad)?,
                    _ => (Vec::new(), datum),
                };
                let key = (id, path);
                let reader = match self.by_id.get(&key) {
                    Some(reader) => reader.clone(),
                    None => {
                        let reader = self.reader(key.0, &key.1)?;
                        self.by_id.insert(key, reader.clone());
                        reader
                    }
                };
                (reader, datum)
            }
        };
        let written = (reader.read(datum, self.rows, &mut self.out)).map_err(DecodeError::Bad)?;
        Ok((&self.out, written))
    }

    /// The reader of the messages of schema `id` (Protobuf: of the
    /// message type at `path` in it).
    fn reader(&self, id: u32, path: &[i32]) -> Result<Reader, DecodeError> {
        let registry = self.registry.as_ref().expect("with a registry");
        let stored = registry.schema(id).map_err(|e| match e {
            FetchError::Missing(message) => DecodeError::Bad(message),
            FetchError::Unavailable(message) => DecodeError::Registry(message),
        })?;
        let bad = |e: String| DecodeError::Bad(format!("schema {id} of the registry: {e}"));
        let kind = self.settings.kind;
        let imports = stored.imports();
        if stored.kind != kind.registry_name() {
            return Err(bad(format!(
                "it is {}, not {}",
                stored.kind,
                kind.registry_name()
            )));
        }
        match kind {
            SchemaKind::Avro => {
                let text = references::inline(&stored.text, &imports).map_err(bad)?;
                let writer = AvroSchema::parse(&text).map_err(bad)?;
                let reader = match &self.settings.schema {
                    Some(Schema::Avro(reader)) => Some(reader),
                    _ => None,
                };
                Ok(Reader::Avro(Arc::new(
                    AvroReader::new(&writer, reader).map_err(bad)?,
                )))
            }
            SchemaKind::Protobuf => {
                let schema = ProtoSchema::at_indexes(&stored.text, &imports, path).map_err(bad)?;
                Ok(Reader::Protobuf(Arc::new(schema)))
            }
            SchemaKind::Json => {
                let own = JsonSchema::parse_with(&stored.text, &imports).map_err(bad)?;
                let mut schemas = vec![own];
                if let Some(Schema::Json(own)) = &self.settings.schema {
                    schemas.push(own.clone());
                }
                Ok(Reader::Json(schemas))
            }
        }
    }
}

/// Registers the files `schema` imports, each under its import path (as
/// Confluent's clients name them), after those it imports itself; returns
/// the references of the schema's own file.
fn register_imports(registry: &Registry, schema: &ProtoSchema) -> Result<Vec<Reference>, String> {
    let mut registered: Vec<Reference> = Vec::new();
    let kind = SchemaKind::Protobuf.registry_name();
    for import in schema.imports() {
        let references: Vec<Reference> = (registered.iter())
            .filter(|r| import.imports.contains(&r.name))
            .cloned()
            .collect();
        let subject = &import.name;
        registry.register(subject, kind, &import.text, &references)?;
        let version = registry.version_of(subject, kind, &import.text, &references)?;
        registered.push(Reference {
            name: import.name.clone(),
            subject: subject.clone(),
            version,
        });
    }
    let direct = schema.direct_imports();
    Ok(registered
        .into_iter()
        .filter(|r| direct.contains(&r.name))
        .collect())
}

/// What writes a sink's messages.
enum Writer {
    Avro(AvroWriter),
    Protobuf(ProtoSchema),
    Json(JsonSchema),
}

/// A sink's encoder of records into `avro`, `protobuf` or `json` messages.
pub struct SchemaEncoder {
    writer: Writer,
    /// With a registry, the schema's id there.
    id: Option<u32>,
}

impl SchemaEncoder {
    /// An encoder for `settings` writing to `topic` (the subject's base: a
    /// Kafka topic, a NATS subject): with a registry, registers the schema
    /// (or finds it registered).
    pub fn open(settings: &SchemaSettings, topic: &str) -> Result<SchemaEncoder, String> {
        let schema = settings
            .schema
            .as_ref()
            .expect("a sink's settings have a schema");
        let id = match &settings.registry {
            None => None,
            Some(url) => {
                let registry = Registry::new(url)?;
                let subject = (settings.strategy).subject(
                    topic,
                    schema.full_name().as_deref(),
                    settings.role == Role::Keys,
                )?;
                let references = match schema {
                    Schema::Protobuf(s) => register_imports(&registry, s)?,
                    _ => Vec::new(),
                };
                let kind = schema.kind().registry_name();
                Some(registry.register(&subject, kind, schema.text(), &references)?)
            }
        };
        let writer = match schema {
            Schema::Avro(s) => Writer::Avro(AvroWriter::new(s)?),
            Schema::Protobuf(s) => Writer::Protobuf(s.clone()),
            Schema::Json(s) => Writer::Json(s.clone()),
        };
        Ok(SchemaEncoder { writer, id })
    }

    /// JSON record `json` as a message.
    pub fn encode(&self, json: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = self.framed(json.len());
        match &self.writer {
            Writer::Avro(w) => w.write(json, &mut out)?,
            Writer::Protobuf(s) => s.encode(json, &mut out)?,
            Writer::Json(s) => {
                s.check(json)?;
                out.extend_from_slice(json);
            }
        }
        Ok(out)
    }

    /// Row `row` ([`weir_flat::row`]) as a message: the message of its
    /// JSON record, which an Avro or Protobuf schema writes from the row
    /// itself.
    pub fn encode_row(&self, row: &[u8]) -> Result<Vec<u8>, String> {
        let mut out;
        match &self.writer {
            Writer::Json(_) => return self.encode(&crate::schemas::json_of_row(row)?),
            Writer::Avro(w) => {
                out = self.framed(row.len());
                w.write_row(row, &mut out)?;
            }
            Writer::Protobuf(s) => {
                out = self.framed(row.len());
                s.encode_row(row, false, &mut out)?;
            }
        }
        Ok(out)
    }

    /// A message's buffer with its registry framing, room for `len` bytes.
    fn framed(&self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        if let Some(id) = self.id {
            wire::frame(id, &mut out);
            if let Writer::Protobuf(s) = &self.writer {
                wire::write_indexes(&s.indexes(), &mut out);
            }
        }
        out
    }
}
