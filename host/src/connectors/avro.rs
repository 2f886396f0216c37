//! The `avro` format of sources and sinks: its settings ([`AvroSettings`]:
//! `schema`, `schema_registry`, `subject_strategy`), a source's decoder of
//! messages into JSON records ([`AvroDecoder`]) and a sink's encoder of
//! records into messages ([`AvroEncoder`]).
//!
//! With `schema_registry`, messages are in Confluent's wire format: a
//! source fetches each writer schema by the id the message names (once)
//! and reads it as `schema` sees it when given (Avro's resolution), a sink
//! registers `schema` under its subject at open and frames each datum with
//! the id. Without, messages are bare datums of `schema`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::schemas::avro::{AvroReader, AvroSchema, AvroWriter};
use crate::schemas::registry::{Registry, SubjectStrategy};
use crate::schemas::wire;

/// The settings of the `avro` format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvroSettings {
    /// `schema`: the schema file's, parsed. A source reads values as it
    /// sees them; a sink writes values of it.
    pub schema: Option<AvroSchema>,
    /// `schema_registry`: the registry's URL.
    pub registry: Option<String>,
    /// `subject_strategy` (sinks): how the subject is named.
    pub strategy: SubjectStrategy,
}

impl AvroSettings {
    /// Reads the settings: `schema` a file (relative to the job folder
    /// `dir`); a source needs `schema` or `schema_registry`, a sink
    /// (`writes`) needs `schema`.
    pub fn read(
        schema: Option<&str>,
        registry: Option<String>,
        strategy: Option<SubjectStrategy>,
        dir: &Path,
        writes: bool,
    ) -> Result<AvroSettings, String> {
        let schema = schema
            .map(|file| {
                let path = dir.join(file);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    format!("`schema` = {file:?}: cannot read {}: {e}", path.display())
                })?;
                AvroSchema::parse(&text).map_err(|e| format!("`schema` = {file:?}: {e}"))
            })
            .transpose()?;
        match (&schema, &registry, writes) {
            (None, _, true) => Err(
                "format = \"avro\" writes values of a schema: add schema = \"<file>.avsc\"".into(),
            ),
            (None, None, false) => Err(
                "format = \"avro\" needs the writers' schemas: add schema = \"<file>.avsc\" or schema_registry = \"http://...\"".into(),
            ),
            _ if strategy.is_some() && registry.is_none() => Err(
                "`subject_strategy` names the subject of a schema registry: add schema_registry or remove it".into(),
            ),
            _ => Ok(AvroSettings {
                schema,
                registry,
                strategy: strategy.unwrap_or_default(),
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

/// A source's decoder of `avro` messages.
pub struct AvroDecoder {
    settings: AvroSettings,
    registry: Option<Registry>,
    /// Readers by writer schema id (with a registry).
    by_id: HashMap<u32, Arc<AvroReader>>,
    /// The reader of bare datums of `schema` (without a registry).
    plain: Option<Arc<AvroReader>>,
    /// The JSON of the message decoded last.
    json: Vec<u8>,
}

impl AvroDecoder {
    /// A decoder for `settings`.
    pub fn new(settings: &AvroSettings) -> Result<AvroDecoder, String> {
        let registry = settings
            .registry
            .as_deref()
            .map(Registry::new)
            .transpose()?;
        let plain = match (&registry, &settings.schema) {
            (None, Some(schema)) => Some(Arc::new(AvroReader::new(schema, None)?)),
            _ => None,
        };
        Ok(AvroDecoder {
            settings: settings.clone(),
            registry,
            by_id: HashMap::new(),
            plain,
            json: Vec::new(),
        })
    }

    /// `message` as a JSON record.
    pub fn decode(&mut self, message: &[u8]) -> Result<&[u8], DecodeError> {
        self.json.clear();
        let (reader, datum) = match &self.registry {
            None => (
                self.plain.clone().expect("a schema without a registry"),
                message,
            ),
            Some(registry) => {
                let (id, datum) = wire::split(message).map_err(DecodeError::Bad)?;
                let reader = match self.by_id.get(&id) {
                    Some(reader) => reader.clone(),
                    None => {
                        let stored = registry.schema(id).map_err(DecodeError::Registry)?;
                        if stored.kind != "AVRO" {
                            return Err(DecodeError::Bad(format!(
                                "schema {id} of the registry is {}, not Avro",
                                stored.kind
                            )));
                        }
                        let writer = AvroSchema::parse(&stored.text).map_err(|e| {
                            DecodeError::Bad(format!("schema {id} of the registry: {e}"))
                        })?;
                        let reader = AvroReader::new(&writer, self.settings.schema.as_ref())
                            .map_err(|e| {
                                DecodeError::Bad(format!("schema {id} of the registry: {e}"))
                            })?;
                        let reader = Arc::new(reader);
                        self.by_id.insert(id, reader.clone());
                        reader
                    }
                };
                (reader, datum)
            }
        };
        reader
            .read(datum, &mut self.json)
            .map_err(DecodeError::Bad)?;
        Ok(&self.json)
    }
}

/// A sink's encoder of records into `avro` messages.
pub struct AvroEncoder {
    writer: AvroWriter,
    /// With a registry, the schema's id there.
    id: Option<u32>,
}

impl AvroEncoder {
    /// An encoder for `settings` writing to `topic` (the subject's base):
    /// with a registry, registers the schema (or finds it registered).
    pub fn open(settings: &AvroSettings, topic: &str) -> Result<AvroEncoder, String> {
        let schema = settings
            .schema
            .as_ref()
            .expect("a sink's avro settings have a schema");
        let id = match &settings.registry {
            None => None,
            Some(url) => {
                let registry = Registry::new(url)?;
                let record = schema.full_name();
                let subject = settings.strategy.subject(topic, record.as_deref())?;
                Some(registry.register(&subject, "AVRO", schema.text())?)
            }
        };
        Ok(AvroEncoder {
            writer: AvroWriter::new(schema)?,
            id,
        })
    }

    /// JSON record `json` as a message.
    pub fn encode(&self, json: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(json.len());
        if let Some(id) = self.id {
            wire::frame(id, &mut out);
        }
        self.writer.write(json, &mut out)?;
        Ok(out)
    }
}
