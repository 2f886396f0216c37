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
use crate::config::{Format, SourceConfig, SourceKind};
use crate::dataflow::partition::mix64;

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
    /// Up to `max` records, or `None` at end of input. A live source
    /// (stdin) returns what has arrived rather than wait for `max` records,
    /// and an empty batch when nothing has: the caller asks again shortly,
    /// and meanwhile can inject barriers.
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
                        reader: Box::new(reader),
                        parser: LineParser {
                            id,
                            path: path.display().to_string(),
                            format: *format,
                            key: key.clone(),
                        },
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
                reader: Box::new(LiveInput::stdin()),
                parser: LineParser {
                    id,
                    path: "stdin".into(),
                    format: *format,
                    key: key.clone(),
                },
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

/// A live input (stdin) read by a thread of its own, so that the source
/// thread never blocks on it: [`BufRead::fill_buf`] returns what has
/// arrived, an empty slice at the end of the input, and
/// [`ErrorKind::WouldBlock`](std::io::ErrorKind::WouldBlock) when nothing
/// has arrived yet.
struct LiveInput {
    chunks: crossbeam_channel::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
    ended: bool,
}

/// Chunks of a live input, read by a thread of its own.
type Chunks = crossbeam_channel::Receiver<std::io::Result<Vec<u8>>>;

/// Bytes one read of a live input asks for.
const LIVE_CHUNK: usize = 64 << 10;

/// Starts a thread named `name` that reads `input` in chunks until its end
/// or an error; at most a few chunks wait unread.
fn read_on_a_thread(name: &str, mut input: impl std::io::Read + Send + 'static) -> Chunks {
    let (tx, chunks) = crossbeam_channel::bounded(4);
    let spawned = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            loop {
                let mut chunk = vec![0; LIVE_CHUNK];
                let read = match input.read(&mut chunk) {
                    Ok(0) => return,
                    Ok(n) => {
                        chunk.truncate(n);
                        Ok(chunk)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let failed = read.is_err();
                // Every reader is gone: stop reading.
                if tx.send(read).is_err() || failed {
                    return;
                }
            }
        });
    // Without the thread, readers see the input end at once; `spawn` fails
    // only when the system is out of threads.
    if let Err(e) = spawned {
        tracing::error!("cannot start the thread that reads {name}: {e}");
    }
    chunks
}

impl LiveInput {
    fn new(chunks: Chunks) -> Self {
        LiveInput {
            chunks,
            chunk: Vec::new(),
            at: 0,
            ended: false,
        }
    }

    /// The process's stdin. One thread reads it for the whole process: a
    /// source reopened after a restart takes over the same stream of
    /// chunks, rather than start a second reader that would race the first
    /// for the bytes.
    fn stdin() -> Self {
        static STDIN: std::sync::OnceLock<Chunks> = std::sync::OnceLock::new();
        let chunks = STDIN.get_or_init(|| read_on_a_thread("stdin-reader", std::io::stdin()));
        LiveInput::new(chunks.clone())
    }
}

impl std::io::Read for LiveInput {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for LiveInput {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.at == self.chunk.len() && !self.ended {
            match self.chunks.try_recv() {
                Ok(chunk) => {
                    self.chunk = chunk?;
                    self.at = 0;
                }
                Err(crossbeam_channel::TryRecvError::Empty) => {
                    return Err(std::io::ErrorKind::WouldBlock.into());
                }
                Err(crossbeam_channel::TryRecvError::Disconnected) => self.ended = true,
            }
        }
        Ok(&self.chunk[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.chunk.len());
    }
}

/// What a [`LineReader`] makes of one line.
struct LineParser {
    id: String,
    path: String,
    format: Format,
    key: Option<String>,
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

impl LineReader {
    /// Whether the input is exhausted (nothing buffered, nothing to come).
    fn at_end(&mut self) -> bool {
        self.line.is_empty() && matches!(self.reader.fill_buf(), Ok([]))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn reader(input: &[u8], buffer: usize, format: Format, key: Option<&str>) -> LineReader {
        LineReader {
            reader: Box::new(BufReader::with_capacity(
                buffer,
                Cursor::new(input.to_vec()),
            )),
            parser: LineParser {
                id: "in".into(),
                path: "test".into(),
                format,
                key: key.map(str::to_string),
            },
            byte: 0,
            records: 0,
            replayable: true,
            line: Vec::new(),
            batch_bytes: 0,
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

    /// Reads batches until one is not empty (a live source returns empty
    /// batches while nothing has arrived), or the end (`None`).
    fn next_records(r: &mut LineReader) -> Option<Vec<Vec<u8>>> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let batch = r.read_batch(1024).unwrap()?;
            if !batch.is_empty() {
                return Some(batch.iter().map(|rec| rec.value.to_vec()).collect());
            }
            assert!(std::time::Instant::now() < deadline, "no input arrived");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// A live input hands over the lines that have arrived instead of
    /// waiting for a full batch, never blocks, and keeps a line that
    /// arrives in pieces whole.
    #[test]
    fn a_live_input_returns_what_has_arrived_without_blocking() {
        use std::io::Write;
        let (input, mut feed) = std::io::pipe().unwrap();
        let mut r = reader(b"", 64, Format::Lines, None);
        r.reader = Box::new(LiveInput::new(read_on_a_thread("test-input", input)));
        r.replayable = false;
        feed.write_all(b"a\nb").unwrap();
        assert_eq!(next_records(&mut r), Some(vec![b"a".to_vec()]));
        // Nothing complete has arrived since: an empty batch, at once.
        assert_eq!(r.read_batch(1024).unwrap().map(|b| b.len()), Some(0));
        feed.write_all(b"c\nd\n").unwrap();
        assert_eq!(
            next_records(&mut r),
            Some(vec![b"bc".to_vec(), b"d".to_vec()])
        );
        feed.write_all(b"no newline").unwrap();
        drop(feed);
        assert_eq!(next_records(&mut r), Some(vec![b"no newline".to_vec()]));
        assert_eq!(next_records(&mut r), None);
        assert_eq!(r.records, 4);
    }

    /// A stdin source reopened in the same process (a restart) reads on
    /// from the same reader thread.
    #[test]
    fn stdin_sources_share_one_reader() {
        let (a, b) = (LiveInput::stdin(), LiveInput::stdin());
        assert!(a.chunks.same_channel(&b.chunks));
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
