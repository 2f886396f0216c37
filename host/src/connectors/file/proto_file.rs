//! Files of length-delimited Protobuf messages (`format = "protobuf"` on
//! a file source): each message's size as a varint, then the message, as
//! Java's `writeDelimitedTo` and the file sink write them; each message,
//! of the type `schema` and `message` name, read into a JSON record.
//!
//! Offset: `{"byte", "records"}`, the position after the last message
//! read; a restore seeks there. A message that does not decode is a bad
//! record named by its number; a file that ends inside a size or a
//! message is damaged (the source fails).

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Value, json};

use crate::connectors::format::LineParser;
use crate::connectors::parsing::Parsing;
use crate::connectors::schema_format::Schema;
use crate::connectors::source::{BadRecord, MAX_BATCH_BYTES, SourceError, SourceReader};
use crate::dataflow::Batch;
use crate::schemas::protobuf::ProtoSchema;
use crate::schemas::varint::{self, VarintError};

/// The largest message read (Protobuf's own limit is 2 GiB); a larger
/// size says the file is not what `format` says.
const MAX_MESSAGE: u64 = 64 << 20;

/// A reader of a file of length-delimited Protobuf messages.
pub struct ProtoFileReader {
    input: BufReader<File>,
    schema: ProtoSchema,
    parser: LineParser,
    /// The position after the last message read.
    byte: u64,
    /// Messages read so far.
    records: u64,
    message: Vec<u8>,
    json: Vec<u8>,
    ended: bool,
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
        let parser = LineParser::new(id, shown, parsing).counting("message");
        Ok(ProtoFileReader {
            input,
            schema,
            parser,
            byte,
            records,
            message: Vec::new(),
            json: Vec::new(),
            ended: false,
        })
    }

    /// The file is not a file of delimited messages after `self.byte`.
    fn damaged(&self, message: String) -> SourceError {
        SourceError::Malformed {
            source_id: self.parser.id.clone(),
            path: self.parser.path.clone(),
            line: self.records + 1,
            message: format!("at byte {}: {message}", self.byte),
        }
    }

    /// The next message into `self.message`; `false` at the file's end.
    fn next_message(&mut self) -> Result<bool, SourceError> {
        let (start, mut counted) = (self.byte, Counted(&mut self.input, 0));
        let size = match varint::read_unsigned(&mut counted) {
            Ok(None) => return Ok(false),
            Ok(Some(size)) if size <= MAX_MESSAGE => size,
            Ok(Some(size)) => {
                return Err(self.damaged(format!(
                    "a message of {size} bytes (is it a file of length-delimited messages?)"
                )));
            }
            Err(VarintError::Ended) => {
                return Err(self.damaged("the file ends inside a message's size".into()));
            }
            Err(VarintError::Overlong) => {
                return Err(self.damaged("an overlong message size".into()));
            }
            Err(VarintError::Io(error)) => return Err(self.io(error)),
        };
        let prefix = counted.1;
        self.message.resize(size as usize, 0);
        if let Err(e) = self.input.read_exact(&mut self.message) {
            return Err(match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    self.damaged(format!("the file ends inside a message of {size} bytes"))
                }
                _ => self.io(e),
            });
        }
        self.byte = start + prefix + size;
        Ok(true)
    }

    fn io(&self, error: std::io::Error) -> SourceError {
        SourceError::Io {
            source_id: self.parser.id.clone(),
            path: self.parser.path.clone(),
            error,
        }
    }
}

/// A reader that counts the bytes read through it.
struct Counted<'a, R>(&'a mut R, u64);

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1 += n as u64;
        Ok(n)
    }
}

impl SourceReader for ProtoFileReader {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        if self.ended {
            return Ok(None);
        }
        let mut batch = Batch::with_capacity(max.min(4096), 0);
        let mut read = 0;
        while read < max && batch.data_bytes() < MAX_BATCH_BYTES {
            if !self.next_message()? {
                self.ended = true;
                break;
            }
            self.records += 1;
            read += 1;
            self.json.clear();
            let decoded = self.schema.decode(&self.message, &mut self.json);
            let decoded = decoded.map(|()| &self.json[..]);
            self.parser
                .add_decoded_record(&mut batch, decoded, self.records);
        }
        Ok(match (batch.is_empty(), self.ended) {
            (true, true) => None,
            _ => Some(batch),
        })
    }

    fn offset(&self) -> Value {
        json!({ "byte": self.byte, "records": self.records })
    }

    fn place(&self) -> Option<String> {
        self.parser.place()
    }

    fn skipped(&self) -> u64 {
        self.parser.skipped
    }

    fn take_bad(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.parser.bad)
    }
}
