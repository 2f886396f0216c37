//! Avro object container files (`format = "avro"` on a file source): the
//! records of the file's own schema (its header) read into JSON records,
//! resolved to `schema` when the job gives one (Avro's rules, as for
//! messages); blocks compressed with `null`, `deflate`, `snappy` or
//! `zstandard`.
//!
//! Offset: `{"records": n}`, the records read so far (bad ones included).
//! A restore seeks past the whole blocks those records fill (each block
//! says its record count and size), and decodes only the rest of the
//! block it stops in.

use crate::schemas::Written;
use std::fs::File;
use std::io::{BufReader, Cursor, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Value, json};

use super::decoded::{DecodedFile, RecordFile};
use crate::connectors::format::LineParser;
use crate::connectors::parsing::Parsing;
use crate::connectors::schema_format::Schema;
use crate::connectors::source::SourceError;
use crate::schemas::avro::container;
use crate::schemas::avro::{AvroReader, AvroSchema};

/// The file as apache-avro reads it: the header, then the blocks from the
/// one a restore starts in.
type Blocks = std::io::Chain<Cursor<Vec<u8>>, BufReader<File>>;

/// A reader of an Avro object container file.
pub type AvroFileReader = DecodedFile<AvroFile>;

/// An Avro object container file, read a record at a time.
pub struct AvroFile {
    values: apache_avro::Reader<'static, Blocks>,
    /// Its values to JSON records (resolved to the job's `schema`).
    convert: AvroReader,
    /// For messages.
    source_id: String,
    path: String,
}

impl AvroFileReader {
    /// Reads `file` (at `path`) of source `id`, after its first `skip`
    /// records (a restore's).
    pub fn open(
        id: String,
        path: &Path,
        file: File,
        parsing: &Parsing,
        skip: u64,
    ) -> Result<AvroFileReader, SourceError> {
        let shown = path.display().to_string();
        let damaged = |message: String| SourceError::Malformed {
            source_id: id.clone(),
            path: shown.clone(),
            line: 0,
            message,
        };
        let io = |error: std::io::Error| SourceError::Io {
            source_id: id.clone(),
            path: shown.clone(),
            error,
        };
        let mut input = BufReader::with_capacity(256 << 10, file);
        let header = container::read_header(&mut input)
            .map_err(|e| damaged(format!("not an Avro object container file: {e}")))?;
        // Whole blocks of records already read are passed over unread.
        let (mut at, mut passed) = (header.len, 0u64);
        while passed < skip {
            let Some(head) = container::read_block_head(&mut input).map_err(&damaged)? else {
                break;
            };
            if passed + head.count > skip {
                break;
            }
            passed += head.count;
            let end = input.stream_position().map_err(io)? + head.size + 16;
            input.seek(SeekFrom::Start(end)).map_err(io)?;
            at = end;
        }
        input.seek(SeekFrom::Start(0)).map_err(io)?;
        let mut head = vec![0u8; header.len as usize];
        input.read_exact(&mut head).map_err(io)?;
        input.seek(SeekFrom::Start(at)).map_err(io)?;
        let values = apache_avro::Reader::new(Cursor::new(head).chain(input))
            .map_err(|e| damaged(format!("not an Avro object container file: {e}")))?;
        let writer = AvroSchema::of(values.writer_schema())
            .map_err(|e| damaged(format!("the file's schema: {e}")))?;
        let reader = match parsing.schema.as_ref().and_then(|s| s.schema.as_ref()) {
            Some(Schema::Avro(schema)) => Some(schema),
            _ => None,
        };
        let convert = AvroReader::new(&writer, reader).map_err(|e| {
            damaged(format!(
                "the file's schema does not resolve to `schema`: {e}"
            ))
        })?;
        let mut values = values;
        while passed < skip {
            match values.next() {
                Some(Ok(_)) => passed += 1,
                Some(Err(e)) => return Err(damaged(format!("record {}: {e}", passed + 1))),
                None => {
                    return Err(SourceError::BadOffset {
                        source_id: id,
                        offset: skip.to_string(),
                        message: format!("{shown} holds only {passed} records (was it replaced?)"),
                    });
                }
            }
        }
        let parser = LineParser::new(id.clone(), shown.clone(), parsing).counting("record");
        let file = AvroFile {
            values,
            convert,
            source_id: id,
            path: shown,
        };
        Ok(DecodedFile::new(file, parser, skip))
    }
}

impl RecordFile for AvroFile {
    fn next(
        &mut self,
        number: u64,
        out: &mut Vec<u8>,
    ) -> Result<Option<Result<Written, String>>, SourceError> {
        let Some(value) = self.values.next() else {
            return Ok(None);
        };
        // A block that does not decode: the file is damaged.
        let value = value.map_err(|e| SourceError::Malformed {
            source_id: self.source_id.clone(),
            path: self.path.clone(),
            line: number,
            message: format!("not an Avro record of the file's schema: {e}"),
        })?;
        Ok(Some(self.convert.convert_row_or_json(value, out)))
    }

    /// apache-avro's reader hands out records decoded, not their bytes.
    fn raw(&self) -> &[u8] {
        &[]
    }

    fn offset(&self, records: u64) -> Value {
        json!({ "records": records })
    }
}

#[cfg(test)]
mod tests {
    use apache_avro::types::{Record, Value as Avro};
    use apache_avro::{Codec, Writer};

    use super::*;
    use crate::connectors::format::Format;
    use crate::connectors::source::SourceReader;

    const SCHEMA: &str = r#"{"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "long"}, {"name": "s", "type": "string"}]}"#;

    /// A container file of `count` records `{n, s}` compressed with
    /// `codec`, in blocks of about 10 records.
    fn file_of(dir: &Path, codec: Codec, count: i64) -> std::path::PathBuf {
        let schema = apache_avro::Schema::parse_str(SCHEMA).unwrap();
        let path = dir.join(format!("{codec:?}.avro").replace([' ', '{', '}', ':'], ""));
        let mut writer = Writer::with_codec(&schema, File::create(&path).unwrap(), codec).unwrap();
        for n in 0..count {
            let mut r = Record::new(&schema).unwrap();
            r.put("n", Avro::Long(n));
            r.put("s", Avro::String(format!("s{n}")));
            writer.append_value(r).unwrap();
            if n % 10 == 9 {
                writer.flush().unwrap();
            }
        }
        writer.flush().unwrap();
        path
    }

    fn parsing() -> Parsing {
        Parsing {
            format: Format::Avro,
            ..Parsing::default()
        }
    }

    /// Every record of `reader`, as JSON lines; each a row (the records
    /// of [`SCHEMA`] are flat).
    fn all(mut reader: AvroFileReader, max: usize) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(batch) = reader.read_batch(max).unwrap() {
            let rows = batch
                .iter()
                .all(|r| r.encoding == crate::dataflow::batch::Encoding::Row);
            assert!(rows, "flat records are rows");
            lines.extend(
                batch
                    .iter()
                    .map(|r| String::from_utf8(r.text_value()).unwrap()),
            );
        }
        lines
    }

    #[test]
    fn every_codec_reads_every_record_in_order_and_a_restore_skips_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let codecs = [
            Codec::Null,
            Codec::Deflate(Default::default()),
            Codec::Snappy,
            Codec::Zstandard(Default::default()),
        ];
        let want: Vec<String> = (0..95)
            .map(|n| format!(r#"{{"n":{n},"s":"s{n}"}}"#))
            .collect();
        for codec in codecs {
            let path = file_of(dir.path(), codec, 95);
            let open = |skip| {
                let file = File::open(&path).unwrap();
                AvroFileReader::open("in".into(), &path, file, &parsing(), skip).unwrap()
            };
            assert_eq!(all(open(0), 7), want, "{codec:?}");
            let mut first = open(0);
            let batch = first.read_batch(40).unwrap().unwrap();
            assert_eq!(batch.len(), 40);
            assert_eq!(first.offset(), json!({"records": 40}));
            for skip in 0..=95 {
                assert_eq!(
                    all(open(skip), 16),
                    want[skip as usize..],
                    "{codec:?} {skip}"
                );
            }
        }
    }

    /// A restore passes over whole blocks without decoding them: past a
    /// damaged first block, it reads the rest.
    #[test]
    fn a_restore_passes_over_whole_blocks_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_of(dir.path(), Codec::Deflate(Default::default()), 30);
        let mut bytes = std::fs::read(&path).unwrap();
        let mut input = &bytes[..];
        let header = container::read_header(&mut input).unwrap();
        let before = input.len();
        let head = container::read_block_head(&mut input).unwrap().unwrap();
        assert_eq!(head.count, 10);
        let data = header.len as usize + (before - input.len());
        for b in &mut bytes[data..data + head.size as usize] {
            *b = 0xFF;
        }
        std::fs::write(&path, &bytes).unwrap();
        let open = |skip| {
            let file = File::open(&path).unwrap();
            AvroFileReader::open("in".into(), &path, file, &parsing(), skip).unwrap()
        };
        assert!(open(0).read_batch(5).is_err(), "the first block is damaged");
        let want: Vec<String> = (10..30)
            .map(|n| format!(r#"{{"n":{n},"s":"s{n}"}}"#))
            .collect();
        assert_eq!(all(open(10), 7), want);
    }

    #[test]
    fn a_file_that_is_none_or_too_short_for_the_offset_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines.avro");
        std::fs::write(&path, "not avro\n").unwrap();
        let open = |path: &Path, skip| {
            AvroFileReader::open(
                "in".into(),
                path,
                File::open(path).unwrap(),
                &parsing(),
                skip,
            )
        };
        let err = open(&path, 0).err().unwrap().to_string();
        assert!(err.contains("not an Avro object container file"), "{err}");
        let path = file_of(dir.path(), Codec::Null, 5);
        let err = open(&path, 9).err().unwrap().to_string();
        assert!(err.contains("holds only 5 records"), "{err}");
    }
}
