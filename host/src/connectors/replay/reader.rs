//! [`ReplayReader`]: reads an operator's replay queue as the records its
//! dead letters hold, each batch for one input port of the operator.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use base64::Engine as _;
use serde_json::{Value, json};

use super::StillReading;
use super::queue::header;
use crate::connectors::source::{BadRecord, SourceError, SourceReader};
use crate::dataflow::Batch;
use crate::dataflow::bad_kind::BadKind;
use crate::dataflow::provenance::numbered;

/// Bytes read from the queue at a time (on the stack: a reader at the end
/// of its queue reads every few milliseconds).
const CHUNK: usize = 16 << 10;

/// Reads the replay queue of one operator.
pub struct ReplayReader {
    path: PathBuf,
    /// The source's id.
    id: String,
    /// The operator's input ports: the source's output ports.
    ports: Vec<String>,
    /// While any other source reads, the end of the queue waits for more.
    others: StillReading,
    file: Option<File>,
    /// The queue's id, once its header was read.
    queue: Option<String>,
    /// Where the restored offset said to go on, in which queue: `(queue,
    /// byte, line)`.
    resume: Option<(String, u64, u64)>,
    /// The byte after the last line read, and that line's number.
    byte: u64,
    line: u64,
    /// Bytes read past `byte`, not yet a whole letter.
    pending: Vec<u8>,
    /// The port and place of the batch read last.
    port: u32,
    place: Option<String>,
    bad: Vec<BadRecord>,
}

impl ReplayReader {
    /// The reader of the queue at `path` for source `id`, whose output
    /// ports are `ports`, resuming at `offset` (none: from the start);
    /// the end of the queue waits for more letters while any of `others`
    /// reads.
    pub fn open(
        path: PathBuf,
        id: &str,
        ports: Vec<String>,
        others: StillReading,
        offset: Option<&Value>,
    ) -> Result<ReplayReader, SourceError> {
        let field = |name: &str| offset.and_then(|o| o.get(name));
        let at = (
            field("byte").and_then(Value::as_u64),
            field("line").and_then(Value::as_u64),
        );
        let resume = match (offset, field("queue"), at) {
            (None, ..) | (_, Some(Value::Null), (Some(_), Some(_))) => None,
            (_, Some(Value::String(q)), (Some(byte), Some(line))) => Some((q.clone(), byte, line)),
            _ => {
                return Err(SourceError::BadOffset {
                    source_id: id.to_owned(),
                    offset: offset.map(Value::to_string).unwrap_or_default(),
                    message: "a replay queue's offset is {\"queue\", \"byte\", \"line\"}".into(),
                });
            }
        };
        Ok(ReplayReader {
            path,
            id: id.to_owned(),
            ports,
            others,
            file: None,
            queue: None,
            resume,
            byte: 0,
            line: 0,
            pending: Vec::new(),
            port: 0,
            place: None,
            bad: Vec::new(),
        })
    }

    fn io(&self, error: std::io::Error) -> SourceError {
        SourceError::Io {
            source_id: self.id.clone(),
            path: self.path.display().to_string(),
            error,
        }
    }

    /// Opens the queue once it exists with a whole header, and goes to
    /// where the restored offset says (or past the header). Whether it is
    /// open.
    fn ready(&mut self) -> Result<bool, SourceError> {
        if self.file.is_some() {
            return Ok(true);
        }
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(self.io(e)),
        };
        let mut start = vec![0; 4096];
        let n = file.read(&mut start).map_err(|e| self.io(e))?;
        let Some((queue, header_len)) = header(&start[..n]) else {
            if start[..n].contains(&b'\n') || n == start.len() {
                return Err(SourceError::Malformed {
                    source_id: self.id.clone(),
                    path: self.path.display().to_string(),
                    line: 1,
                    message:
                        "not a replay queue (its first line is no queue header); move the file away"
                            .into(),
                });
            }
            return Ok(false); // the header is being written
        };
        (self.byte, self.line) = match self.resume.take() {
            Some((q, byte, line)) if q == queue => (byte, line),
            Some((q, ..)) => {
                tracing::warn!(
                    "source `{}`: {} is another queue than the checkpoint's ({q}); reading it from its start",
                    self.id,
                    self.path.display()
                );
                (header_len, 1)
            }
            None => (header_len, 1),
        };
        file.seek(SeekFrom::Start(self.byte))
            .map_err(|e| self.io(e))?;
        self.queue = Some(queue);
        self.file = Some(file);
        Ok(true)
    }

    /// The next whole line, reading more of the file when needed.
    fn next_line(&mut self) -> Result<Option<Vec<u8>>, SourceError> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line = self.pending[..end].to_vec();
                return Ok(Some(line));
            }
            let mut chunk = [0; CHUNK];
            let file = self.file.as_mut().expect("opened");
            let n = file.read(&mut chunk).map_err(|e| self.io(e))?;
            if n == 0 {
                return Ok(None);
            }
            self.pending.extend_from_slice(&chunk[..n]);
        }
    }

    /// Takes the line [`next_line`](Self::next_line) returned.
    fn consume(&mut self, len: usize) {
        self.pending.drain(..=len);
        self.byte += len as u64 + 1;
        self.line += 1;
    }

    fn file_name(&self) -> String {
        let name = self.path.file_name().unwrap_or_default();
        format!("{}/{}", super::DIR, name.to_string_lossy())
    }
}

/// What a queued letter holds: the record, the port it goes to, and where
/// it first came from.
struct Replayed {
    key: Option<Vec<u8>>,
    value: Vec<u8>,
    timestamp: Option<i64>,
    port: u32,
    origin: String,
}

/// The record dead letter `line` holds, for an operator whose input ports
/// are `ports`, or why it cannot be replayed.
fn replayed(line: &[u8], ports: &[String]) -> Result<Replayed, String> {
    let letter: Value =
        serde_json::from_slice(line).map_err(|e| format!("not a dead letter (JSON): {e}"))?;
    let bytes = |name: &str| -> Result<Option<Vec<u8>>, String> {
        match (&letter[name], &letter[format!("{name}_base64")]) {
            (Value::String(text), _) => Ok(Some(text.clone().into_bytes())),
            (_, Value::String(b64)) => (base64::engine::general_purpose::STANDARD.decode(b64))
                .map(Some)
                .map_err(|e| format!("`{name}_base64` is not base64: {e}")),
            (Value::Null, Value::Null) => Ok(None),
            (other, _) => Err(format!("`{name}` is not text: {other}")),
        }
    };
    let value = bytes("value")?.ok_or("the dead letter holds no `value`")?;
    let timestamp = match &letter["timestamp"] {
        Value::Null => None,
        t => Some(
            t.as_i64()
                .ok_or(format!("`timestamp` is not a number: {t}"))?,
        ),
    };
    let port = match (&letter["port"], ports) {
        (Value::String(name), _) => ports.iter().position(|p| p == name).ok_or(format!(
            "the operator's plugin has no input port {name:?} (its inputs: {})",
            ports.join(", ")
        ))?,
        (Value::Null, [_]) => 0,
        (_, _) => {
            return Err(
                "the dead letter names no input `port`, and the operator has several".into(),
            );
        }
    };
    let origin = letter["origin"].as_str().unwrap_or_default();
    Ok(Replayed {
        key: bytes("key")?,
        value,
        timestamp,
        port: port as u32,
        origin: first_origin(origin).to_owned(),
    })
}

/// Where a letter's record first came from: its `origin`, without the
/// replay a letter that failed again names.
fn first_origin(origin: &str) -> &str {
    match (origin.find(" (first: "), origin.rfind(')')) {
        (Some(start), Some(end)) if start < end => &origin[start + " (first: ".len()..end],
        _ => origin,
    }
}

impl SourceReader for ReplayReader {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        // Checked after a read found nothing: what was appended before the
        // last other source ended is read.
        let at_end = |others: &StillReading| others.any().then(Batch::new);
        if !self.ready()? {
            return Ok(at_end(&self.others));
        }
        let mut batch = Batch::new();
        let first_line = self.line + 1;
        let mut single = (0, String::new());
        let mut read_any = false;
        while batch.len() < max {
            let Some(line) = self.next_line()? else {
                break;
            };
            match replayed(&line, &self.ports) {
                Ok(r) if !batch.is_empty() && r.port != self.port => break,
                Ok(r) => {
                    self.port = r.port;
                    batch.push(r.key.as_deref(), &r.value, r.timestamp);
                    single = (self.line + 1, r.origin);
                }
                Err(message) => {
                    let place = format!("{} line {}", self.file_name(), self.line + 1);
                    self.bad.push(BadRecord {
                        kind: BadKind::Unreadable,
                        error: SourceError::Malformed {
                            source_id: self.id.clone(),
                            path: self.path.display().to_string(),
                            line: self.line + 1,
                            message,
                        },
                        origin: place,
                        key: None,
                        value: line.clone(),
                        timestamp: None,
                    });
                }
            }
            read_any = true;
            self.consume(line.len());
        }
        let name = self.file_name();
        self.place = match batch.len() {
            0 => None,
            1 => Some(format!("{name} line {} (first: {})", single.0, single.1)),
            _ => Some(numbered(&name, "line", first_line, self.line)),
        };
        if batch.is_empty() && !read_any {
            return Ok(at_end(&self.others));
        }
        Ok(Some(batch))
    }

    fn offset(&self) -> Value {
        match &self.queue {
            Some(queue) => json!({"queue": queue, "byte": self.byte, "line": self.line}),
            // Not opened yet: where the restored offset said, or nothing read.
            None => match &self.resume {
                Some((queue, byte, line)) => json!({"queue": queue, "byte": byte, "line": line}),
                None => json!({"queue": null, "byte": 0, "line": 0}),
            },
        }
    }

    fn place(&self) -> Option<String> {
        self.place.clone()
    }

    fn take_bad(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.bad)
    }

    fn output_port(&self) -> u32 {
        self.port
    }

    fn moves_event_time(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests;
