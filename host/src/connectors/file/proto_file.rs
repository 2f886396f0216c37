//! Files of length-delimited Protobuf messages (`format = "protobuf"` on
//! a file source): each message's size as a varint, then the message, as
//! Java's `writeDelimitedTo` and the file sink write them; each message,
//! of the type `schema` and `message` name, read into a JSON record.
//!
//! Offset: `{"byte", "records"}`, the position after the last message
//! read; a restore seeks there. A message that does not decode is a bad
//! record named by its number; a file that ends inside a size or a
//! message is damaged (the source fails).

use crate::schemas::Written;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Value, json};

use super::decoded::{DecodedFile, RecordFile};
use crate::connectors::format::LineParser;
use crate::connectors::parsing::Parsing;
use crate::connectors::schema_format::Schema;
use crate::connectors::source::SourceError;
use crate::schemas::protobuf::ProtoSchema;
use crate::schemas::varint::{self, VarintError};

/// The largest message read (Protobuf's own limit is 2 GiB); a larger
/// size says the file is not what `format` says.
const MAX_MESSAGE: u64 = 64 << 20;

/// A reader of a file of length-delimited Protobuf messages.
pub type ProtoFileReader = DecodedFile<ProtoFile>;

/// A file of length-delimited Protobuf messages, read a message at a time.
pub struct ProtoFile {
    input: BufReader<File>,
    schema: ProtoSchema,
    /// The position after the last message read.
    byte: u64,
    message: Vec<u8>,
    /// For messages.
    source_id: String,
    path: String,
}

impl ProtoFileReader {
    /// Reads `file` (at `path`) of source `id` from byte `byte`, past
    /// `records` messages (a restore's offset).
    pub fn open(
        id: String,
        path: &Path,
        file: File,
        parsing: &Parsing,
        (byte, records): (u64, u64),
    ) -> Result<ProtoFileReader, SourceError> {
        let shown = path.display().to_string();
        let Some(Schema::Protobuf(schema)) = parsing.schema.as_ref().and_then(|s| s.schema.clone())
        else {
            unreachable!("a protobuf file source's settings have its schema");
        };
        let mut input = BufReader::with_capacity(256 << 10, file);
        input
            .seek(SeekFrom::Start(byte))
            .map_err(|error| SourceError::Io {
                source_id: id.clone(),
                path: shown.clone(),
                error,
            })?;
        let parser = LineParser::new(id.clone(), shown.clone(), parsing).counting("message");
        let file = ProtoFile {
            input,
            schema,
            byte,
            message: Vec::new(),
            source_id: id,
            path: shown,
        };
        Ok(DecodedFile::new(file, parser, records))
    }
}

impl ProtoFile {
    /// The file is not a file of delimited messages after `self.byte`
    /// (message `number`).
    fn damaged(&self, number: u64, message: String) -> SourceError {
        SourceError::Malformed {
            source_id: self.source_id.clone(),
            path: self.path.clone(),
            line: number,
            message: format!("at byte {}: {message}", self.byte),
        }
    }

    fn io(&self, error: std::io::Error) -> SourceError {
        SourceError::Io {
            source_id: self.source_id.clone(),
            path: self.path.clone(),
            error,
        }
    }
}

impl RecordFile for ProtoFile {
    fn next(
        &mut self,
        number: u64,
        out: &mut Vec<u8>,
    ) -> Result<Option<Result<Written, String>>, SourceError> {
        let (size, prefix) = match varint::read_unsigned_sized(&mut self.input) {
            Ok(None) => return Ok(None),
            Ok(Some((size, prefix))) if size <= MAX_MESSAGE => (size, prefix),
            Ok(Some((size, _))) => {
                let why = format!(
                    "a message of {size} bytes (is it a file of length-delimited messages?)"
                );
                return Err(self.damaged(number, why));
            }
            Err(VarintError::Ended) => {
                return Err(self.damaged(number, "the file ends inside a message's size".into()));
            }
            Err(VarintError::Overlong) => {
                return Err(self.damaged(number, "an overlong message size".into()));
            }
            Err(VarintError::Io(error)) => return Err(self.io(error)),
        };
        self.message.resize(size as usize, 0);
        if let Err(e) = self.input.read_exact(&mut self.message) {
            return Err(match e.kind() {
                std::io::ErrorKind::UnexpectedEof => self.damaged(
                    number,
                    format!("the file ends inside a message of {size} bytes"),
                ),
                _ => self.io(e),
            });
        }
        self.byte += prefix + size;
        Ok(Some(self.schema.decode_row_or_json(&self.message, out)))
    }

    fn raw(&self) -> &[u8] {
        &self.message
    }

    fn offset(&self, records: u64) -> Value {
        json!({ "byte": self.byte, "records": records })
    }
}
