//! The record formats of a source (`format`): how input bytes are cut into
//! records. `lines` and `jsonl` (`LineReader`) read any buffered input, a
//! file or stdin; `csv` (`CsvReader`) reads a file with a header row.
//!
//! Invariant: a reader's offset (`byte`, `records`) is the position right
//! after the last record returned, and a batch of a replayable input ends at
//! a line (or row) end, so seeking to `byte` resumes at the next record.

use std::fs::File;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use super::source::{MAX_BATCH_BYTES, SourceError, SourceReader};
use crate::dataflow::Batch;

/// Record format of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One record per line; the line is both key and value.
    Lines,
    /// One JSON value per line.
    Jsonl,
    /// Comma-separated values with a header row.
    Csv,
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
pub(crate) struct LineReader {
    reader: Box<dyn BufRead + Send>,
    parser: LineParser,
    byte: u64,
    records: u64,
    replayable: bool,
    /// A line that straddles two fills of the reader's buffer, assembled.
    line: Vec<u8>,
    /// Starting capacity of the next batch's data: the last one's size plus
    /// an eighth, so that filling a batch rarely reallocates its buffer.
    batch_bytes: usize,
}

impl LineReader {
    /// A reader of `input` that has read `records` records, ending at byte
    /// `byte` of the input; `replayable` when reopening at that byte
    /// replays what follows (a file, not stdin).
    pub(crate) fn new(
        input: Box<dyn BufRead + Send>,
        parser: LineParser,
        byte: u64,
        records: u64,
        replayable: bool,
    ) -> Self {
        LineReader {
            reader: input,
            parser,
            byte,
            records,
            replayable,
            line: Vec::new(),
            batch_bytes: 0,
        }
    }

    /// Whether the input is exhausted (nothing buffered, nothing to come).
    fn at_end(&mut self) -> bool {
        self.line.is_empty() && matches!(self.reader.fill_buf(), Ok([]))
    }
}

/// What a [`LineReader`] makes of one line.
pub(crate) struct LineParser {
    /// The source's id (for messages).
    pub(crate) id: String,
    /// What is read, a path or `stdin` (for messages).
    pub(crate) path: String,
    /// `lines` or `jsonl` (`csv` has a reader of its own).
    pub(crate) format: Format,
    /// The key field of `jsonl` records.
    pub(crate) key: Option<String>,
}

impl LineParser {
    /// Adds line number `number` (without its line break) to `batch`.
    fn add(&self, batch: &mut Batch, line: &[u8], number: u64) -> Result<(), SourceError> {
        let mut line = line;
        while let [rest @ .., b'\r'] = line {
            line = rest;
        }
        match (self.format, &self.key) {
            (Format::Jsonl, _) if line.iter().all(u8::is_ascii_whitespace) => {}
            (Format::Jsonl, None) => batch.push(None, line, None),
            (Format::Jsonl, Some(k)) => {
                let malformed = |message: String| SourceError::Malformed {
                    source_id: self.id.clone(),
                    path: self.path.clone(),
                    line: number,
                    message,
                };
                let parsed: Value = serde_json::from_slice(line)
                    .map_err(|e| malformed(format!("not JSON: {e}")))?;
                let key =
                    json_key(&parsed, k).ok_or_else(|| malformed(format!("no key field `{k}`")))?;
                batch.push(Some(&key), line, None);
            }
            // `lines`: the key is the line itself.
            _ => batch.push_keyed_by_value(line, None),
        }
        Ok(())
    }
}

impl SourceReader for LineReader {
    /// Lines are cut straight out of the reader's buffer, found by one
    /// `memchr` scan per buffer fill (not one per line: its setup costs
    /// more than a short line); only a line that straddles two fills is
    /// assembled in `self.line`.
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        let mut batch = Batch::with_capacity(max, self.batch_bytes);
        let full = |b: &Batch| b.len() >= max || b.data_bytes() >= MAX_BATCH_BYTES;
        while !full(&batch) {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                // A live input with nothing more for now: return what has
                // arrived (maybe nothing).
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(error) => {
                    return Err(SourceError::Io {
                        source_id: self.parser.id.clone(),
                        path: self.parser.path.clone(),
                        error,
                    });
                }
            };
            if buf.is_empty() {
                // The end of the input ends the last line too.
                if !self.line.is_empty() {
                    self.records += 1;
                    self.parser.add(&mut batch, &self.line, self.records)?;
                    self.line.clear();
                }
                break;
            }
            // Bytes of `buf` used up: whole lines, and a last partial one.
            let mut used = 0;
            let mut ends = memchr::memchr_iter(b'\n', buf);
            while !full(&batch) {
                let Some(end) = ends.next() else {
                    self.line.extend_from_slice(&buf[used..]);
                    used = buf.len();
                    break;
                };
                let line = if self.line.is_empty() {
                    &buf[used..end]
                } else {
                    self.line.extend_from_slice(&buf[used..end]);
                    &self.line
                };
                self.records += 1;
                self.parser.add(&mut batch, line, self.records)?;
                self.line.clear();
                used = end + 1;
            }
            self.byte += used as u64;
            self.reader.consume(used);
        }
        // A partial line is only kept when the whole fill was used, and the
        // batch is only full after a complete line: a batch of a file ends
        // at a line end, and `byte` is an offset to resume at. (A live
        // input may pause mid-line; it is not replayable.)
        debug_assert!(self.line.is_empty() || !self.replayable);
        self.batch_bytes = batch.data_bytes() + batch.data_bytes() / 8;
        Ok(if batch.is_empty() && self.at_end() {
            None
        } else {
            Some(batch)
        })
    }

    fn offset(&self) -> Value {
        json!({"byte": self.byte, "records": self.records})
    }

    fn replayable(&self) -> bool {
        self.replayable
    }
}

/// A reader of CSV `file`, whose first row is the header.
pub(crate) fn csv_reader(file: File) -> csv::Reader<File> {
    csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(file)
}

/// Reads the header row of `reader`, refusing one without the column `key`:
/// the one check of both `weir validate` (through the job file's checks)
/// and opening the source. The message is about row 1 of the file.
pub(crate) fn csv_header(
    reader: &mut csv::Reader<File>,
    key: Option<&str>,
) -> Result<Vec<String>, String> {
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| format!("cannot read the header row: {e}"))?
        .iter()
        .map(str::to_string)
        .collect();
    if let Some(k) = key
        && !headers.iter().any(|h| h == k)
    {
        return Err(format!(
            "the header row has no column `{k}` (columns: {}); fix `key` or the header",
            headers.join(", ")
        ));
    }
    Ok(headers)
}

/// `csv` files with a header row; each row becomes a JSON object of strings.
pub(crate) struct CsvReader {
    id: String,
    path: PathBuf,
    reader: csv::Reader<File>,
    headers: Vec<String>,
    key: Option<String>,
    records: u64,
}

impl CsvReader {
    /// Reads the header row of `file` (checking that it has the column
    /// `key`), then seeks to `byte`, after `records` rows, if given.
    pub(crate) fn open(
        id: String,
        path: &Path,
        file: File,
        key: Option<String>,
        byte: Option<u64>,
        records: u64,
    ) -> Result<Self, SourceError> {
        let mut reader = csv_reader(file);
        let headers =
            csv_header(&mut reader, key.as_deref()).map_err(|message| SourceError::Malformed {
                source_id: id.clone(),
                path: path.display().to_string(),
                line: 1,
                message,
            })?;
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::{BufReader, Cursor};

    use crate::dataflow::partition::mix64;

    fn reader(input: &[u8], buffer: usize, format: Format, key: Option<&str>) -> LineReader {
        let input = BufReader::with_capacity(buffer, Cursor::new(input.to_vec()));
        LineReader::new(Box::new(input), test_parser(format, key), 0, 0, true)
    }

    /// The parser of a test input `test` of source `in`.
    pub(crate) fn test_parser(format: Format, key: Option<&str>) -> LineParser {
        LineParser {
            id: "in".into(),
            path: "test".into(),
            format,
            key: key.map(str::to_string),
        }
    }

    /// Every record's value, reading batches of at most `max`.
    fn values(r: &mut LineReader, max: usize) -> Result<Vec<Vec<u8>>, SourceError> {
        let mut out = Vec::new();
        while let Some(batch) = r.read_batch(max)? {
            assert!(batch.len() <= max);
            out.extend(batch.iter().map(|rec| rec.value.to_vec()));
        }
        Ok(out)
    }

    /// The lines of `input` as the `lines` format defines them: split at
    /// `\n`, trailing `\r`s dropped, no empty line after a final `\n`.
    fn model(input: &[u8]) -> Vec<Vec<u8>> {
        let mut lines: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
        if lines.last() == Some(&&b""[..]) {
            lines.pop();
        }
        lines
            .into_iter()
            .map(|mut l| {
                while let [rest @ .., b'\r'] = l {
                    l = rest;
                }
                l.to_vec()
            })
            .collect()
    }

    /// Lines cut from the reader's buffer and lines assembled across its
    /// fills agree with splitting the whole input, for every buffer size.
    #[test]
    fn lines_match_a_plain_split_whatever_the_buffer_size() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            rng = mix64(rng);
            rng % n
        };
        for case in 0..200 {
            let mut input = Vec::new();
            for _ in 0..next(40) {
                let len = if next(10) == 0 { next(3000) } else { next(12) };
                input.extend((0..len).map(|_| b"ab\rc"[next(4) as usize]));
                input.extend_from_slice(if next(3) == 0 { b"\r\n" } else { b"\n" });
            }
            if case % 2 == 0 {
                input.extend_from_slice(b"no newline at the end");
            }
            let want = model(&input);
            for buffer in [1, 3, 64, 256 << 10] {
                for max in [1, 7, 1024] {
                    let mut r = reader(&input, buffer, Format::Lines, None);
                    let got = values(&mut r, max).unwrap();
                    assert_eq!(got, want, "case {case}, buffer {buffer}, max {max}");
                    assert_eq!(r.byte, input.len() as u64);
                    assert_eq!(r.records, want.len() as u64);
                }
            }
        }
    }

    #[test]
    fn lines_are_keyed_by_themselves_and_jsonl_skips_blank_lines() {
        let mut r = reader(b"a\r\nb", 2, Format::Lines, None);
        let batch = r.read_batch(10).unwrap().unwrap();
        let keys: Vec<_> = batch.iter().map(|rec| rec.key.unwrap().to_vec()).collect();
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);

        let input = b"{\"k\":\"x\",\"v\":1}\n  \n\n{\"k\":\"y\"}\n";
        let mut r = reader(input, 4, Format::Jsonl, Some("k"));
        let batch = r.read_batch(10).unwrap().unwrap();
        let keys: Vec<_> = batch.iter().map(|rec| rec.key.unwrap().to_vec()).collect();
        assert_eq!(keys, [b"x".to_vec(), b"y".to_vec()]);
        assert_eq!(r.records, 4, "blank lines count as lines");
    }

    #[test]
    fn a_bad_jsonl_line_is_reported_with_its_number() {
        let mut r = reader(b"{\"k\":\"x\"}\n{\"k\":\n", 5, Format::Jsonl, Some("k"));
        let err = r.read_batch(10).unwrap_err().to_string();
        assert!(err.contains("test:2: not JSON"), "{err}");
        let mut r = reader(b"{}\n", 64, Format::Jsonl, Some("k"));
        let err = r.read_batch(10).unwrap_err().to_string();
        assert!(err.contains("no key field `k`"), "{err}");
    }
}
