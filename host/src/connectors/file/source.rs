//! The file source (`type = "file"` in `[[source]]`): a file read in the
//! format `lines`, `jsonl` or `csv` ([`super::super::format`]), resumed at
//! a checkpointed offset by seeking.
//!
//! Invariant: the offset `{"byte", "records"}` is the position right after
//! the last record returned; opening at it seeks to `byte`, so the reader
//! yields exactly the records not yet returned. An offset past the end of
//! the file (truncated or replaced since) is refused, not clamped.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use toml::Table;

use crate::connectors::format::{
    CsvReader, Format, LineParser, LineReader, csv_header, csv_reader,
};
use crate::connectors::source::{SourceError, SourceReader};
use crate::connectors::{BuildSource, SourceConnector, SourceType};
use crate::fields::{from_table, relative_to, resolve};

/// The registry entry of `type = "file"` sources.
pub const SOURCE: SourceType = SourceType {
    name: "file",
    keys: &["path", "format", "key"],
    read: FileSourceConfig::read,
};

/// The settings of a file source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSourceConfig {
    /// The file (`path`, resolved onto the job folder).
    pub path: PathBuf,
    /// How the file is split into records (`format`, default `lines`).
    pub format: Format,
    /// Field or column used as record key (`key`, jsonl/csv); ignored for
    /// `lines`.
    pub key: Option<String>,
}

impl FileSourceConfig {
    fn read(table: Table) -> Result<BuildSource, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            path: Option<String>,
            format: Option<Format>,
            key: Option<String>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |dir: &Path| {
            Ok(Arc::new(FileSourceConfig {
                path: resolve(dir, "path", raw.path)?,
                format: raw.format.unwrap_or(Format::Lines),
                key: raw.key,
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
        if self.format == Format::Csv {
            let key = self.key.clone();
            return Ok(Box::new(CsvReader::open(
                id, path, file, key, byte, records,
            )?));
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
        let parser = LineParser {
            id,
            path: path.display().to_string(),
            format: self.format,
            key: self.key.clone(),
        };
        let reader = LineReader::new(Box::new(reader), parser, pos, records, true);
        Ok(Box::new(reader))
    }

    fn file(&self) -> Option<&Path> {
        Some(&self.path)
    }

    /// The file must exist; a `csv` file's header must have the `key`
    /// column (a header that cannot be read is a warning: the run says why).
    fn check_files(&self, dir: &Path) -> Result<(), String> {
        let path = self.path.display();
        if !self.path.is_file() {
            return Err(format!(
                "input file {path} does not exist or is not a file; fix `path` {}",
                relative_to(dir)
            ));
        }
        if self.format != Format::Csv {
            return Ok(());
        }
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!("could not check the header row of {path}: {e}");
                return Ok(());
            }
        };
        let header = csv_header(&mut csv_reader(file), self.key.as_deref());
        header
            .map(drop)
            .map_err(|message| format!("{path}:1: {message}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(reader: &mut dyn SourceReader) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(batch) = reader.read_batch(2).unwrap() {
            let values = batch.iter().map(|r| r.value.to_vec());
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
                format,
                key,
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
            format: Format::Lines,
            key: None,
        };
        let err = source.open("s", Some(&past)).err().unwrap().to_string();
        assert!(err.contains("is only"), "{err}");
    }
}
