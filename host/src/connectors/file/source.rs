//! The file source (`type = "file"` in `[[source]]`): a file read in the
//! format `lines`, `jsonl` or `csv` ([`super::super::format`]), or of
//! length-delimited Protobuf messages (`super::proto_file`), resumed at a
//! checkpointed offset by seeking; or an Avro object container file
//! (`super::avro_file`), resumed by counting records.
//!
//! Invariant: the offset `{"byte", "records"}` (and, for `csv`, `line`) is
//! the position right after the last record returned; opening at it seeks
//! to `byte`, so the reader yields exactly the records not yet returned,
//! numbered by their real lines. An offset past the end of
//! the file (truncated or replaced since) is refused, not clamped.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Table;

use super::avro_file::AvroFileReader;
use super::proto_file::ProtoFileReader;
use crate::connectors::csv_file::{CsvReader, csv_header, csv_reader};
use crate::connectors::format::{Format, LineParser, LineReader, Parsing};
use crate::connectors::source::{SourceError, SourceReader};
use crate::connectors::{BuildSource, SourceConnector, SourceType};
use crate::fields::{from_table, relative_to, resolve};

/// The registry entry of `type = "file"` sources.
pub const SOURCE: SourceType = SourceType {
    name: "file",
    keys: &[
        "path",
        "format",
        "key",
        "timestamp",
        "on_bad_timestamp",
        "columns",
        "schema",
        "message",
    ],
    read: FileSourceConfig::read,
};

/// The settings of a file source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSourceConfig {
    /// The file (`path`, resolved onto the job folder).
    pub path: PathBuf,
    /// How the file is split into records (any format; `key` is ignored
    /// for `lines`).
    pub parsing: Parsing,
}

impl FileSourceConfig {
    fn read(table: Table) -> Result<BuildSource, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            path: Option<String>,
        }
        let mut table = table;
        let parsing = Parsing::take(&mut table)?.files()?;
        parsing.refuse_binary("file")?;
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |dir: &Path| {
            Ok(Arc::new(FileSourceConfig {
                path: resolve(dir, "path", raw.path)?,
                parsing: parsing.check(dir)?,
            }))
        }))
    }
}

impl SourceConnector for FileSourceConfig {
    fn open(&self, id: &str, offset: Option<&Value>) -> Result<Box<dyn SourceReader>, SourceError> {
        let (id, path) = (id.to_owned(), &self.path);
        let file = File::open(path).map_err(|error| SourceError::Io {
            source_id: id.clone(),
            path: path.display().to_string(),
            error,
        })?;
        let records = offset
            .and_then(|o| o.get("records"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if self.parsing.format == Format::Avro {
            let reader = AvroFileReader::open(id, path, file, &self.parsing, records)?;
            return Ok(Box::new(reader));
        }
        let byte = offset.and_then(|o| o.get("byte")).and_then(Value::as_u64);
        if offset.is_some() && byte.is_none() {
            return Err(SourceError::BadOffset {
                source_id: id,
                offset: offset.map(Value::to_string).unwrap_or_default(),
                message: "it has no `byte` position".into(),
            });
        }
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if let Some(b) = byte
            && b > len
        {
            return Err(SourceError::BadOffset {
                source_id: id,
                offset: b.to_string(),
                message: format!(
                    "{} is only {len} bytes long (was it truncated or replaced?)",
                    path.display()
                ),
            });
        }
        if self.parsing.format == Format::Protobuf {
            let at = (byte.unwrap_or(0), records);
            let reader = ProtoFileReader::open(id, path, file, &self.parsing, at)?;
            return Ok(Box::new(reader));
        }
        if self.parsing.format == Format::Csv {
            let line = offset.and_then(|o| o.get("line")).and_then(Value::as_u64);
            let reader = CsvReader::open(id, path, file, &self.parsing, byte, (records, line))?;
            return Ok(Box::new(reader));
        }
        let mut reader = BufReader::with_capacity(256 << 10, file);
        let pos = byte.unwrap_or(0);
        reader
            .seek(SeekFrom::Start(pos))
            .map_err(|error| SourceError::Io {
                source_id: id.clone(),
                path: path.display().to_string(),
                error,
            })?;
        let parser = LineParser::new(id, path.display().to_string(), &self.parsing);
        let reader = LineReader::new(Box::new(reader), parser, pos, records, true);
        Ok(Box::new(reader))
    }

    fn file(&self) -> Option<&Path> {
        Some(&self.path)
    }

    /// The file must exist; a `csv` file's header must have the `key` and
    /// `timestamp` columns (a header that cannot be read is a warning: the run says why).
    fn check_files(&self, dir: &Path) -> Result<(), String> {
        let path = self.path.display();
        if !self.path.is_file() {
            return Err(format!(
                "input file {path} does not exist or is not a file; fix `path` {}",
                relative_to(dir)
            ));
        }
        if self.parsing.format != Format::Csv {
            return Ok(());
        }
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!("could not check the header row of {path}: {e}");
                return Ok(());
            }
        };
        let header = csv_header(&mut csv_reader(file), &self.parsing);
        header
            .map(drop)
            .map_err(|message| format!("{path}:1: {message}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::format::{OnBadTimestamp, TimestampField};

    fn values(reader: &mut dyn SourceReader) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(batch) = reader.read_batch(2).unwrap() {
            // Values as readers of text see them (a csv row as JSON).
            let values = batch.iter().map(|r| r.text_value());
            out.extend(values.map(|v| String::from_utf8(v).unwrap()));
        }
        out
    }

    /// Reopening at the offset after some records yields exactly the rest,
    /// in every format; an offset past the end is refused.
    #[test]
    fn reopening_at_an_offset_reads_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        let inputs = [
            (Format::Lines, "a\nb\nc\nd\ne\n"),
            (Format::Jsonl, "{\"k\":1}\n{\"k\":2}\n{\"k\":3}\n"),
            (Format::Csv, "k,v\n1,a\n2,b\n3,c\n"),
        ];
        for (format, text) in inputs {
            std::fs::write(&path, text).unwrap();
            let key = (format != Format::Lines).then(|| "k".to_owned());
            let source = FileSourceConfig {
                path: path.clone(),
                parsing: Parsing {
                    format,
                    key,
                    timestamp: None,
                    ..Parsing::default()
                },
            };
            let all = values(source.open("s", None).unwrap().as_mut());
            let mut first = source.open("s", None).unwrap();
            assert_eq!(first.read_batch(2).unwrap().unwrap().len(), 2);
            let offset = first.offset();
            let rest = values(source.open("s", Some(&offset)).unwrap().as_mut());
            assert_eq!(rest, all[2..], "{format:?}");
        }
        let past = serde_json::json!({"byte": 1000, "records": 0});
        let source = FileSourceConfig {
            path,
            parsing: Parsing::default(),
        };
        let err = source.open("s", Some(&past)).err().unwrap().to_string();
        assert!(err.contains("is only"), "{err}");
    }

    /// With `on_bad_timestamp = "skip"`, the offset after any batch is past
    /// the records skipped before it: reopening there neither replays nor
    /// loses a record, wherever the batch ended.
    #[test]
    fn reopening_after_skipped_records_reads_exactly_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        let inputs = [
            (
                Format::Jsonl,
                "{\"v\":1,\"ts\":1}\n{\"v\":2,\"ts\":\"x\"}\n{\"v\":3,\"ts\":3}\n\
                 {\"v\":4}\n{\"v\":5,\"ts\":5}\n{\"v\":6,\"ts\":null}\n",
            ),
            (Format::Csv, "v,ts\n1,1\n2,x\n3,3\n4,\n5,5\n6,y\n"),
        ];
        for (format, text) in inputs {
            std::fs::write(&path, text).unwrap();
            let source = FileSourceConfig {
                path: path.clone(),
                parsing: Parsing {
                    format,
                    key: None,
                    timestamp: Some(TimestampField {
                        field: "ts".into(),
                        on_bad: OnBadTimestamp::Skip,
                    }),
                    ..Parsing::default()
                },
            };
            let mut whole = source.open("s", None).unwrap();
            let all = values(whole.as_mut());
            assert_eq!(all.len(), 3, "{format:?}: {all:?}");
            assert_eq!(whole.skipped(), 3);
            for max in 1..=3 {
                let mut first = source.open("s", None).unwrap();
                let batch = first.read_batch(max).unwrap().unwrap();
                let mut got: Vec<String> = batch
                    .iter()
                    .map(|r| String::from_utf8(r.text_value()).unwrap())
                    .collect();
                let offset = first.offset();
                got.extend(values(source.open("s", Some(&offset)).unwrap().as_mut()));
                assert_eq!(got, all, "{format:?}, first batch of {max}");
            }
            let at_end = whole.offset();
            let mut rest = source.open("s", Some(&at_end)).unwrap();
            assert!(rest.read_batch(8).unwrap().is_none(), "{format:?}");
        }
    }

    #[test]
    fn timestamp_settings_are_read_and_checked() {
        let read = |text: &str| (SOURCE.read)(text.parse().unwrap())?(Path::new("."));
        let err = read("path = \"x\"\ntimestamp = \"ts\"").unwrap_err();
        assert!(
            err.contains("`timestamp` needs format = \"jsonl\" or \"csv\""),
            "{err}"
        );
        let err =
            read("path = \"x\"\nformat = \"jsonl\"\non_bad_timestamp = \"skip\"").unwrap_err();
        assert!(
            err.contains("`on_bad_timestamp` needs `timestamp`"),
            "{err}"
        );
        let err =
            read("path = \"x\"\nformat = \"csv\"\ntimestamp = \"t\"\non_bad_timestamp = \"drop\"");
        assert!(err.unwrap_err().contains("unknown variant `drop`"));
        let ok =
            read("path = \"x\"\nformat = \"csv\"\ntimestamp = \"t\"\non_bad_timestamp = \"skip\"");
        let want: Arc<dyn SourceConnector> = Arc::new(FileSourceConfig {
            path: PathBuf::from("./x"),
            parsing: Parsing {
                format: Format::Csv,
                key: None,
                timestamp: Some(TimestampField {
                    field: "t".into(),
                    on_bad: OnBadTimestamp::Skip,
                }),
                ..Parsing::default()
            },
        });
        assert!(ok.unwrap() == want);
    }
}
