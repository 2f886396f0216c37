//! Sources: read records from files, a generator or stdin, in batches, with
//! an offset that a checkpoint records and a restore seeks back to.
//!
//! Invariant: [`SourceReader::offset`] is the position right after the last
//! record returned, so reopening at that offset yields exactly the records
//! not yet returned.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::Batch;
use crate::job::{Format, SourceConfig, SourceKind};

/// Why a source failed. Messages name the source and, for files, the path
/// and line.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The input could not be opened or read.
    #[error("source `{source_id}`: cannot read {path}: {error}")]
    Io {
        /// The source's id.
        source_id: String,
        /// What was read.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A record is malformed.
    #[error("source `{source_id}`: {path}:{line}: {message}")]
    Malformed {
        /// The source's id.
        source_id: String,
        /// The file.
        path: String,
        /// 1-based line (or record) number.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// The checkpointed offset does not fit the input.
    #[error("source `{source_id}`: cannot resume at checkpointed offset {offset}: {message}")]
    BadOffset {
        /// The source's id.
        source_id: String,
        /// The offset.
        offset: String,
        /// What is wrong.
        message: String,
    },
}

/// A source cuts a batch once it holds this many bytes, whatever its
/// `batch_size` (so a batch stays far below the 4 GiB a [`Batch`] can address).
pub const MAX_BATCH_BYTES: usize = 4 << 20;

/// A source of records, read in batches.
pub trait SourceReader: Send {
    /// Up to `max` records, or `None` at end of input.
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError>;
    /// Where to resume to read everything after the records returned so far.
    fn offset(&self) -> Value;
    /// Whether reopening at an offset replays the same records (stdin: no).
    fn replayable(&self) -> bool {
        true
    }
}

/// Opens the source of `cfg`, positioned at `offset` (from a checkpoint) or
/// at the beginning.
pub fn open(
    cfg: &SourceConfig,
    offset: Option<&Value>,
) -> Result<Box<dyn SourceReader>, SourceError> {
    let id = cfg.id.clone();
    match &cfg.kind {
        SourceKind::File {
            path, format, key, ..
        } => {
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
            match format {
                Format::Csv => Ok(Box::new(CsvReader::open(
                    id,
                    path,
                    file,
                    key.clone(),
                    byte,
                    records,
                )?)),
                _ => {
                    let mut reader = BufReader::with_capacity(256 << 10, file);
                    let pos = byte.unwrap_or(0);
                    reader
                        .seek(SeekFrom::Start(pos))
                        .map_err(|error| SourceError::Io {
                            source_id: id.clone(),
                            path: path.display().to_string(),
                            error,
                        })?;
                    Ok(Box::new(LineReader {
                        id,
                        path: path.display().to_string(),
                        reader: Box::new(reader),
                        format: *format,
                        key: key.clone(),
                        byte: pos,
                        records,
                        replayable: true,
                        line: Vec::new(),
                        batch_bytes: 0,
                    }))
                }
            }
        }
        SourceKind::Stdin { format, key, .. } => {
            if *format == Format::Csv {
                return Err(SourceError::Malformed {
                    source_id: id,
                    path: "stdin".into(),
                    line: 0,
                    message: "csv is not supported on stdin; use lines or jsonl".into(),
                });
            }
            Ok(Box::new(LineReader {
                id,
                path: "stdin".into(),
                reader: Box::new(BufReader::new(std::io::stdin())),
                format: *format,
                key: key.clone(),
                byte: 0,
                records: offset
                    .and_then(|o| o.get("records"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                replayable: false,
                line: Vec::new(),
                batch_bytes: 0,
            }))
        }
        SourceKind::Generator {
            count, words, seed, ..
        } => {
            let next = offset
                .and_then(|o| o.get("records"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            Ok(Box::new(Generator {
                count: *count,
                words: (*words).max(1),
                seed: *seed,
                next,
            }))
        }
    }
}

/// The record key of a JSON object for key field `key`.
fn json_key(v: &Value, key: &str) -> Option<Vec<u8>> {
    match v.get(key)? {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Null => None,
        other => Some(other.to_string().into_bytes()),
    }
}

/// `lines` and `jsonl` input, from a file or stdin.
struct LineReader {
    id: String,
    path: String,
    reader: Box<dyn BufRead + Send>,
    format: Format,
    key: Option<String>,
    byte: u64,
    records: u64,
    replayable: bool,
    /// The line being read, reused.
    line: Vec<u8>,
    /// Starting capacity of the next batch's data: the last one's size plus
    /// an eighth, so that filling a batch rarely reallocates its buffer.
    batch_bytes: usize,
}

impl SourceReader for LineReader {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        let mut batch = Batch::with_capacity(max, self.batch_bytes);
        let mut line = std::mem::take(&mut self.line);
        while batch.len() < max && batch.data_bytes() < MAX_BATCH_BYTES {
            line.clear();
            let n = self
                .reader
                .read_until(b'\n', &mut line)
                .map_err(|error| SourceError::Io {
                    source_id: self.id.clone(),
                    path: self.path.clone(),
                    error,
                })?;
            if n == 0 {
                break;
            }
            self.byte += n as u64;
            self.records += 1;
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            match (self.format, &self.key) {
                (Format::Jsonl, _) if line.iter().all(u8::is_ascii_whitespace) => {}
                (Format::Jsonl, None) => batch.push(None, &line, None),
                (Format::Jsonl, Some(k)) => {
                    let parsed: Value =
                        serde_json::from_slice(&line).map_err(|e| SourceError::Malformed {
                            source_id: self.id.clone(),
                            path: self.path.clone(),
                            line: self.records,
                            message: format!("not JSON: {e}"),
                        })?;
                    let key = json_key(&parsed, k).ok_or_else(|| SourceError::Malformed {
                        source_id: self.id.clone(),
                        path: self.path.clone(),
                        line: self.records,
                        message: format!("no key field `{k}`"),
                    })?;
                    batch.push(Some(&key), &line, None);
                }
                // `lines`: the key is the line itself.
                _ => batch.push_keyed_by_value(&line, None),
            }
        }
        self.line = line;
        self.batch_bytes = batch.data_bytes() + batch.data_bytes() / 8;
        Ok(if batch.is_empty() { None } else { Some(batch) })
    }

    fn offset(&self) -> Value {
        json!({"byte": self.byte, "records": self.records})
    }

    fn replayable(&self) -> bool {
        self.replayable
    }
}

/// `csv` files with a header row; each row becomes a JSON object of strings.
struct CsvReader {
    id: String,
    path: PathBuf,
    reader: csv::Reader<File>,
    headers: Vec<String>,
    key: Option<String>,
    records: u64,
}

impl CsvReader {
    fn open(
        id: String,
        path: &Path,
        file: File,
        key: Option<String>,
        byte: Option<u64>,
        records: u64,
    ) -> Result<Self, SourceError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(file);
        let malformed = |line: u64, message: String| SourceError::Malformed {
            source_id: id.clone(),
            path: path.display().to_string(),
            line,
            message,
        };
        let headers: Vec<String> = reader
            .headers()
            .map_err(|e| malformed(1, format!("cannot read the header row: {e}")))?
            .iter()
            .map(str::to_string)
            .collect();
        if let Some(k) = &key
            && !headers.iter().any(|h| h == k)
        {
            return Err(malformed(
                1,
                format!(
                    "the header row has no column `{k}` (columns: {})",
                    headers.join(", ")
                ),
            ));
        }
        if let Some(b) = byte {
            let mut pos = csv::Position::new();
            pos.set_byte(b).set_record(records + 1);
            reader.seek(pos).map_err(|e| SourceError::BadOffset {
                source_id: id.clone(),
                offset: b.to_string(),
                message: e.to_string(),
            })?;
        }
        Ok(CsvReader {
            id,
            path: path.to_path_buf(),
            reader,
            headers,
            key,
            records,
        })
    }
}

impl SourceReader for CsvReader {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        let mut batch = Batch::with_capacity(max, 0);
        let mut row = csv::StringRecord::new();
        while batch.len() < max && batch.data_bytes() < MAX_BATCH_BYTES {
            let more = self
                .reader
                .read_record(&mut row)
                .map_err(|e| SourceError::Malformed {
                    source_id: self.id.clone(),
                    path: self.path.display().to_string(),
                    line: e.position().map_or(0, |p| p.line()),
                    message: e.to_string(),
                })?;
            if !more {
                break;
            }
            self.records += 1;
            let mut obj = serde_json::Map::with_capacity(self.headers.len());
            for (h, v) in self.headers.iter().zip(row.iter()) {
                obj.insert(h.clone(), Value::String(v.to_string()));
            }
            let value = Value::Object(obj);
            let key = self.key.as_ref().and_then(|k| json_key(&value, k));
            batch.push(key.as_deref(), value.to_string().as_bytes(), None);
        }
        Ok(if batch.is_empty() { None } else { Some(batch) })
    }

    fn offset(&self) -> Value {
        json!({"byte": self.reader.position().byte(), "records": self.records})
    }
}

/// Deterministic words `w<N>`: record `i` is the same on every run, so the
/// generator replays exactly from any offset.
struct Generator {
    count: u64,
    words: u64,
    seed: u64,
    next: u64,
}

/// SplitMix64: a stable, well-mixed function of `x`.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl SourceReader for Generator {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        use std::fmt::Write;
        let end = self.count.min(self.next + max as u64);
        if self.next >= end {
            return Ok(None);
        }
        let mut batch = Batch::with_capacity((end - self.next) as usize, 0);
        let mut word = String::new();
        for i in self.next..end {
            word.clear();
            let n = mix64(i ^ self.seed.rotate_left(17)) % self.words;
            write!(word, "w{n}").expect("writing to a String");
            batch.push_keyed_by_value(word.as_bytes(), None);
        }
        self.next = end;
        Ok(Some(batch))
    }

    fn offset(&self) -> Value {
        json!({"records": self.next})
    }
}
