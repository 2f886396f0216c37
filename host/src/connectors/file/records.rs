//! How a file sink writes records (`format`): a line per record (`lines`,
//! `jsonl`, `debezium-json`, and `json`, each record checked against a
//! JSON Schema), a length-delimited Protobuf message per record
//! (`protobuf`: the message's size as a varint, then the message, as
//! Java's `writeDelimitedTo` writes them), the blocks of an Avro object
//! container file (`avro`), or lines of CSV cells under a header line
//! (`csv`, module `csv_out`).
//!
//! Invariants:
//! - Whatever `RecordWriter::write` and `RecordWriter::finish` wrote
//!   since the writer opened, appended to the file the writer was opened
//!   on, is a whole file of the format: an Avro file gets its header
//!   before its first block, and only if it was empty; a non-empty one is
//!   continued with its own marker (and must hold the sink's schema and
//!   codec); a CSV file gets its header line likewise, and a non-empty one
//!   is continued under its header's columns.
//! - An Avro block never spans a `RecordWriter::finish`: a sink that
//!   calls it at each epoch's end stages whole blocks per epoch.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::Path;

use super::csv_layout::{CsvKeys, CsvLayout};
use super::csv_out::CsvWriter;
use crate::connectors::changelog::with_op;
use crate::connectors::schema_format::{Schema, SchemaKeys, SchemaKind, SchemaSettings};
use crate::connectors::sink::{SinkFormat, encode};
use crate::dataflow::Batch;
use crate::dataflow::batch::{self, Change, RecordRef};
use crate::schemas::avro::container::{self, AvroCodec};
use crate::schemas::avro::{AvroSchema, AvroWriter};
use crate::schemas::json_schema::JsonSchema;
use crate::schemas::protobuf::ProtoSchema;

/// Datums an Avro block holds before it is written out (more go to the
/// next block); an epoch's last block is written at its end.
const BLOCK_BYTES: usize = 256 << 10;

/// The format of a file sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileFormat {
    /// A value per line (`lines`, `jsonl`, `debezium-json`).
    Text(SinkFormat),
    /// A JSON record per line, checked against the schema (`json`).
    Json(JsonSchema),
    /// Length-delimited messages of the schema's type (`protobuf`).
    Protobuf(ProtoSchema),
    /// An Avro object container file of the schema, blocks compressed
    /// with the codec (`avro`).
    Avro(AvroSchema, AvroCodec),
    /// Lines of CSV cells (`csv`, with `columns`, `header`, `delimiter`).
    Csv(CsvLayout),
}

impl FileFormat {
    /// The format that `format`, `schema`, `message`, `codec` and the keys
    /// of `csv` say; the schema file is read from the job folder `dir`.
    pub fn read(
        format: Option<&str>,
        schema: Option<&str>,
        message: Option<&str>,
        codec: Option<&str>,
        csv: CsvKeys,
        dir: &Path,
    ) -> Result<FileFormat, String> {
        let format = format.unwrap_or("lines");
        let kind = SchemaKind::of_format(format);
        let text = match format {
            "lines" => Some(SinkFormat::Lines),
            "jsonl" => Some(SinkFormat::Jsonl),
            "debezium-json" => Some(SinkFormat::DebeziumJson),
            "csv" => None,
            _ if kind.is_some() => None,
            _ => {
                return Err(format!(
                    "format = {format:?}: write \"lines\", \"jsonl\", \"debezium-json\", \"csv\", \"avro\", \"protobuf\" or \"json\""
                ));
            }
        };
        if format != "csv" && !csv.is_empty() {
            return Err(
                "`columns`, `header` and `delimiter` lay out the file of format = \"csv\"; set that format or remove them"
                    .into(),
            );
        }
        if codec.is_some() && kind != Some(SchemaKind::Avro) {
            return Err(
                "`codec` compresses the blocks of format = \"avro\"; set that format or remove it"
                    .into(),
            );
        }
        let keys = SchemaKeys {
            schema,
            message,
            ..SchemaKeys::default()
        };
        let (settings, _) = SchemaSettings::read(kind, keys, dir, true)?;
        if format == "csv" {
            return CsvLayout::read(csv).map(FileFormat::Csv);
        }
        Ok(match (text, settings.and_then(|s| s.schema)) {
            (Some(format), _) => FileFormat::Text(format),
            (None, Some(Schema::Json(schema))) => FileFormat::Json(schema),
            (None, Some(Schema::Protobuf(schema))) => FileFormat::Protobuf(schema),
            (None, Some(Schema::Avro(schema))) => {
                let codec = codec.map(AvroCodec::parse).transpose()?;
                FileFormat::Avro(schema, codec.unwrap_or_default())
            }
            (None, None) => unreachable!("a sink's schema settings have a schema"),
        })
    }

    /// Whether a record torn by a crash would damage what follows it
    /// (`avro`, `protobuf`; `csv`, whose torn quoted cell would leave its
    /// quote open over the lines after it), so that only whole epochs may
    /// be appended.
    pub fn needs_whole_epochs(&self) -> bool {
        matches!(
            self,
            FileFormat::Protobuf(_) | FileFormat::Avro(..) | FileFormat::Csv(_)
        )
    }
}

/// Writes records in a file sink's format.
pub(crate) struct RecordWriter {
    encoding: Encoding,
    /// The bytes of a batch (or a block) before they are written.
    buffer: Vec<u8>,
    /// Avro: the datums of the block being filled, and their count.
    datums: Vec<u8>,
    count: u64,
    /// The records `refuse` accepted, encoded, for the `write` after it.
    ahead: Ahead,
}

/// Records encoded by `refuse` for the `write` that follows it: a sink's
/// `write` after `refuse` gets exactly the batch `refuse` saw without the
/// records it refused ([`Sink::refuse`](crate::connectors::sink::Sink::refuse)),
/// so each record is encoded once.
#[derive(Default)]
struct Ahead {
    /// The accepted records' bytes, one after another.
    bytes: Vec<u8>,
    /// Where each of them ends in `bytes`.
    ends: Vec<usize>,
    /// Set by `refuse`, taken by the next `write`, which uses them when its
    /// batch holds as many records.
    ready: bool,
}

impl Ahead {
    /// The bytes of accepted record `i`.
    fn record(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

enum Encoding {
    Text(SinkFormat),
    Json(JsonSchema),
    Protobuf(ProtoSchema),
    Avro(Blocks),
    Csv(CsvWriter),
}

/// What an Avro file's blocks need.
struct Blocks {
    writer: AvroWriter,
    codec: AvroCodec,
    marker: [u8; 16],
    /// The header, until it is written before the first block.
    header: Option<Vec<u8>>,
}

impl RecordWriter {
    /// A writer of records in `format` appending to `path`, which is then
    /// `len` bytes long: an Avro file that is not empty is continued after
    /// its header is checked (same schema, same codec), a CSV file under
    /// the columns of its header line; `Err` says why it cannot be.
    pub(crate) fn open(format: &FileFormat, path: &Path, len: u64) -> Result<RecordWriter, String> {
        let encoding = match format {
            FileFormat::Text(format) => Encoding::Text(*format),
            FileFormat::Json(schema) => Encoding::Json(schema.clone()),
            FileFormat::Protobuf(schema) => Encoding::Protobuf(schema.clone()),
            FileFormat::Avro(schema, codec) => {
                Encoding::Avro(Blocks::open(schema, *codec, path, len)?)
            }
            FileFormat::Csv(layout) => Encoding::Csv(CsvWriter::open(layout, path, len)?),
        };
        Ok(RecordWriter {
            encoding,
            buffer: Vec::new(),
            datums: Vec::new(),
            count: 0,
            ahead: Ahead::default(),
        })
    }

    /// Writes `batch` to `out` (Avro: what fills blocks; the rest waits for
    /// [`finish`](Self::finish)); returns the bytes written. A record that
    /// does not fit the schema is an `InvalidData` error saying why.
    pub(crate) fn write(&mut self, batch: &Batch, out: &mut impl Write) -> io::Result<u64> {
        if let Encoding::Text(format) = self.encoding {
            return encode(batch, format, out);
        }
        self.buffer.clear();
        let ahead = std::mem::take(&mut self.ahead.ready) && self.ahead.ends.len() == batch.len();
        for (i, r) in batch.iter().enumerate() {
            let fits = match &mut self.encoding {
                Encoding::Avro(_) => {
                    let encoded = if ahead {
                        self.datums.extend_from_slice(self.ahead.record(i));
                        Ok(())
                    } else {
                        encode_one(&mut self.encoding, &r, &mut self.datums)
                    };
                    self.count += 1;
                    encoded.and_then(|()| match self.datums.len() >= BLOCK_BYTES {
                        true => self.seal(),
                        false => Ok(()),
                    })
                }
                Encoding::Csv(csv) if ahead => {
                    csv.write_line(self.ahead.record(i), &mut self.buffer);
                    Ok(())
                }
                Encoding::Csv(csv) => csv.write(&r, &mut self.buffer),
                _ if ahead => {
                    self.buffer.extend_from_slice(self.ahead.record(i));
                    Ok(())
                }
                encoding => encode_one(encoding, &r, &mut self.buffer),
            };
            fits.map_err(|e| misfit(&r.text_value(), self.encoding.fits(), e))?;
        }
        out.write_all(&self.buffer)?;
        Ok(self.buffer.len() as u64)
    }

    /// Writes what is held back (an Avro file's last block) to `out`;
    /// returns the bytes written.
    pub(crate) fn finish(&mut self, out: &mut impl Write) -> io::Result<u64> {
        self.buffer.clear();
        self.seal().map_err(io::Error::other)?;
        out.write_all(&self.buffer)?;
        Ok(self.buffer.len() as u64)
    }

    /// Whether it takes rows as rows ([`Sink::reads_rows`](crate::connectors::sink::Sink::reads_rows)):
    /// an Avro file writes them without JSON ([`AvroWriter::write_row`]),
    /// a Protobuf file where their fields map to the message's
    /// ([`ProtoSchema::encode_row`]), a CSV file from their fields.
    pub(crate) fn reads_rows(&self) -> bool {
        matches!(
            self.encoding,
            Encoding::Avro(_) | Encoding::Protobuf(_) | Encoding::Csv(_)
        )
    }

    /// The records of `batch` that do not fit the schema (or the CSV
    /// columns), by index, with why; the others are kept encoded for the
    /// `write` that follows.
    pub(crate) fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        if let Encoding::Text(_) = self.encoding {
            return Vec::new();
        }
        let ahead = &mut self.ahead;
        ahead.bytes.clear();
        ahead.ends.clear();
        let mut refused = Vec::new();
        for (i, r) in batch.iter().enumerate() {
            let start = ahead.bytes.len();
            match encode_one(&mut self.encoding, &r, &mut ahead.bytes) {
                Ok(()) => ahead.ends.push(ahead.bytes.len()),
                Err(e) => {
                    ahead.bytes.truncate(start);
                    refused.push((i, e));
                }
            }
        }
        ahead.ready = true;
        refused
    }

    /// Moves the block being filled, if it holds records, to `buffer`
    /// (after the header when it is the file's first).
    fn seal(&mut self) -> Result<(), String> {
        let Encoding::Avro(blocks) = &mut self.encoding else {
            return Ok(());
        };
        if self.count == 0 {
            return Ok(());
        }
        if let Some(header) = blocks.header.take() {
            self.buffer.extend_from_slice(&header);
        }
        let (codec, marker) = (blocks.codec, &blocks.marker);
        container::write_block(
            self.count,
            &mut self.datums,
            codec,
            marker,
            &mut self.buffer,
        )?;
        self.count = 0;
        Ok(())
    }
}

/// Appends what the file holds of record `value` saying `change` to `out`:
/// a checked line, a delimited message, an Avro datum, a line of CSV
/// (without the header line).
fn encode_one(encoding: &mut Encoding, r: &RecordRef<'_>, out: &mut Vec<u8>) -> Result<(), String> {
    if let Encoding::Csv(csv) = encoding {
        return csv.line(r, out);
    }
    if r.encoding == batch::Encoding::Row {
        // Avro and Protobuf files write an inserted row from its fields;
        // anything else takes the row's JSON.
        match (&*encoding, r.change) {
            (Encoding::Avro(blocks), Change::Insert) => {
                return blocks.writer.write_row(r.value, out);
            }
            (Encoding::Protobuf(schema), Change::Insert) => {
                return schema.encode_row(r.value, true, out);
            }
            _ => return r.with_text_value(|text| encode_one(encoding, text, out)),
        }
    }
    let value = with_op(r.value, r.change)?;
    match encoding {
        Encoding::Text(_) => unreachable!("text formats write batches"),
        Encoding::Csv(_) => unreachable!("written above"),
        Encoding::Json(schema) => {
            schema.check(&value)?;
            out.extend_from_slice(&value);
            out.push(b'\n');
        }
        Encoding::Protobuf(schema) => schema.encode_delimited(&value, out)?,
        Encoding::Avro(blocks) => blocks.writer.write(&value, out)?,
    }
    Ok(())
}

impl Encoding {
    /// What a record must fit, for messages.
    fn fits(&self) -> &'static str {
        match self {
            Encoding::Csv(_) => "the sink's CSV columns",
            _ => "the sink's schema",
        }
    }
}

/// The error of a record that does not fit `what`, showing its start.
fn misfit(value: &[u8], what: &str, why: String) -> io::Error {
    let text = String::from_utf8_lossy(value);
    let shown: String = text.chars().take(200).collect();
    let more = if shown.len() < text.len() { "…" } else { "" };
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a record does not fit {what} ({why}): {shown}{more}"),
    )
}

impl Blocks {
    fn open(
        schema: &AvroSchema,
        codec: AvroCodec,
        path: &Path,
        len: u64,
    ) -> Result<Blocks, String> {
        let writer = AvroWriter::new(schema)?;
        if len == 0 {
            let marker = container::new_marker();
            let mut header = Vec::new();
            container::write_header(schema, codec, &marker, &mut header);
            return Ok(Blocks {
                writer,
                codec,
                marker,
                header: Some(header),
            });
        }
        let shown = path.display();
        let file = File::open(path).map_err(|e| format!("{shown}: {e}"))?;
        let header = container::read_header(&mut BufReader::new(file)).map_err(|e| {
            format!("{shown} is not empty and {e}: move it away, or rerun with `--restore none` to write it anew")
        })?;
        let theirs = AvroSchema::parse(&header.schema)
            .map_err(|e| format!("{shown}: the schema in its header: {e}"))?;
        if theirs.canonical_form() != schema.canonical_form() {
            return Err(format!(
                "{shown} holds Avro records of another schema than `schema` (its header says {}): move it away, or rerun with `--restore none` to write it anew",
                header.schema
            ));
        }
        if header.codec != codec.name() {
            return Err(format!(
                "{shown} holds Avro blocks compressed with {:?}, the sink's `codec` is {:?}: set codec = {:?}, or move the file away",
                header.codec,
                codec.name(),
                header.codec
            ));
        }
        Ok(Blocks {
            writer,
            codec,
            marker: header.marker,
            header: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemas::avro::AvroSchema;

    fn batch(values: &[&str]) -> Batch {
        let mut b = Batch::new();
        for v in values {
            b.push(None, v.as_bytes(), None);
        }
        b
    }

    /// Every format with a schema: what `write` appends, then `finish`.
    fn formats() -> Vec<(&'static str, FileFormat)> {
        let avsc = r#"{"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}, {"name": "s", "type": "string"}]}"#;
        let proto = "syntax = \"proto3\"; message M { int64 n = 1; string s = 2; }";
        let json =
            r#"{"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}"#;
        vec![
            (
                "avro",
                FileFormat::Avro(AvroSchema::parse(avsc).unwrap(), AvroCodec::default()),
            ),
            (
                "protobuf",
                FileFormat::Protobuf(ProtoSchema::compile(proto, None).unwrap()),
            ),
            ("json", FileFormat::Json(JsonSchema::parse(json).unwrap())),
            (
                "csv",
                FileFormat::Csv(CsvLayout {
                    columns: None,
                    header: true,
                    delimiter: b',',
                }),
            ),
        ]
    }

    /// The records a file of `format` holds after `writes` into a new
    /// writer (an Avro file's as records: its sync marker is random).
    fn written(
        format: &FileFormat,
        dir: &Path,
        writes: impl FnOnce(&mut RecordWriter, &mut Vec<u8>),
    ) -> Vec<String> {
        let mut w = RecordWriter::open(format, &dir.join("f"), 0).unwrap();
        let mut out = Vec::new();
        writes(&mut w, &mut out);
        w.finish(&mut out).unwrap();
        match format {
            FileFormat::Avro(..) => (apache_avro::Reader::new(&out[..]).unwrap())
                .map(|v| format!("{:?}", v.unwrap()))
                .collect(),
            _ => vec![String::from_utf8_lossy(&out).into_owned()],
        }
    }

    /// What `refuse` accepted is written by the `write` after it as a
    /// `write` alone writes it (CSV: the header, from the first accepted
    /// record's fields, first), and only by that `write`: the next batch
    /// is encoded anew.
    #[test]
    fn a_write_after_refuse_writes_what_a_write_alone_would() {
        let dir = tempfile::tempdir().unwrap();
        let mixed = batch(&[
            r#"{"n":1,"s":"a"}"#,
            r#"{"s":"no n"}"#,
            r#"{"n":"x","s":"b"}"#,
            r#"{"n":2,"s":"c,\"q\""}"#,
            r#"{"n":3,"s":"d","extra":true}"#,
            "not json",
            r#"{"n":4,"s":""}"#,
        ]);
        let more: Vec<String> = (7..14).map(|n| format!(r#"{{"n":{n},"s":"x"}}"#)).collect();
        for (name, format) in formats() {
            let mut kept = Vec::new();
            // As many records as were kept: a stale reuse would fit.
            let next = |n: usize| batch(&more[..n].iter().map(String::as_str).collect::<Vec<_>>());
            let through_refuse = written(&format, dir.path(), |w, out| {
                let refused: Vec<usize> = w.refuse(&mixed).into_iter().map(|(i, _)| i).collect();
                kept = (0..mixed.len()).filter(|i| !refused.contains(i)).collect();
                w.write(&mixed.select(&kept), out).unwrap();
                w.write(&next(kept.len()), out).unwrap();
            });
            assert!(
                kept.len() > 1 && kept.len() < mixed.len(),
                "{name}: {kept:?}"
            );
            let alone = written(&format, dir.path(), |w, out| {
                w.write(&mixed.select(&kept), out).unwrap();
                w.write(&next(kept.len()), out).unwrap();
            });
            assert_eq!(through_refuse, alone, "{name}");
        }
    }
}
