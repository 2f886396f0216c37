//! The record formats of a source (`format`): how input bytes are cut into
//! records. `lines` and `jsonl` (`LineReader`) read any buffered input, a
//! file or stdin; `csv` has a reader of its own (module `csv_file`).
//!
//! With `timestamp`, each record's event time is read from a field (jsonl)
//! or column (csv) ([`TimestampField`]); a record without a valid one fails
//! the source or, with `on_bad_timestamp = "skip"`, is dropped and counted
//! ([`SourceReader::skipped`]).
//!
//! Invariant: a reader's offset (`byte`, `records`) is the position right
//! after the last record read (returned or dropped), and a batch of a
//! replayable input ends at a line (or row) end, so seeking to `byte`
//! resumes at the next record.

use std::borrow::Cow;
use std::io::BufRead;

use serde_json::{Value, json};

use super::debezium;
use super::jsonl::{Fields, Time, read_fields, row_fields};
use super::metadata::{self, Members};
pub use super::parsing::{Format, OnBadTimestamp, Parsing, TimestampField};
use super::schema_format::{DecodeError, SchemaDecoder};
use super::source::{BadRecord, MAX_BATCH_BYTES, SourceError, SourceReader};
use crate::dataflow::Batch;
use crate::dataflow::bad_kind::BadKind;
use crate::dataflow::batch::Change;
use crate::dataflow::provenance::NumberRange;
use crate::schemas::Written;

/// A record decoded: its bytes, and whether they are JSON or a row.
pub(crate) type Decoded<'d> = (&'d [u8], Written);

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

/// What a `LineReader` makes of one line.
pub struct LineParser {
    /// The source's id (for messages).
    pub id: String,
    /// What is read, a path or `stdin` (for messages).
    pub path: String,
    /// `lines` or `jsonl` (`csv` has a reader of its own).
    pub format: Format,
    /// The key field of `jsonl` records.
    pub key: Option<String>,
    /// The event-time field of `jsonl` records.
    pub timestamp: Option<TimestampField>,
    /// Records dropped for a bad timestamp so far.
    pub skipped: u64,
    /// Records that could not be read since they were last taken
    /// ([`SourceReader::take_bad`]).
    pub bad: Vec<BadRecord>,
    /// What a record's number counts in messages: `line` unless
    /// [`counting`](Self::counting) says otherwise.
    unit: &'static str,
    /// The numbers of the records added to the batch being built.
    numbers: NumberRange,
    /// Of format `avro` or `protobuf`: the decoder of messages (or why
    /// there is none).
    decoder: Option<Result<SchemaDecoder, String>>,
    /// Why the source must fail (a schema registry that did not answer),
    /// once a record met it; [`take_failure`](Self::take_failure).
    failure: Option<SourceError>,
    /// The metadata of the next message (module `metadata`), appended to
    /// its record's JSON object: a message source fills it before each
    /// [`add_keyed`](Self::add_keyed), which empties it.
    pub members: Members,
    /// The field the message key goes to among the metadata, if any (as
    /// text, or decoded with `key_format`); set by a message source.
    pub key_member: Option<String>,
    /// With `key_format`: the decoder of message keys (or why there is
    /// none).
    key_decoder: Option<Result<SchemaDecoder, String>>,
    /// A record with its metadata appended, reused.
    joined: Vec<u8>,
}

impl LineParser {
    /// A parser of source `id` reading `path`, with nothing skipped yet.
    pub fn new(id: String, path: String, parsing: &Parsing) -> Self {
        let Parsing {
            format,
            key,
            timestamp,
            columns: _,
            schema,
            key_schema,
        } = parsing.clone();
        // A decoder fails only to make its HTTP client; then every record
        // fails the source, saying why.
        // Values of flat Avro records go as rows; keys as JSON.
        let decoder =
            schema.map(|settings| SchemaDecoder::new(&settings).map(SchemaDecoder::reading_rows));
        LineParser {
            id,
            path,
            format,
            key,
            timestamp,
            skipped: 0,
            bad: Vec::new(),
            unit: "line",
            numbers: NumberRange::default(),
            decoder,
            failure: None,
            members: Members::default(),
            joined: Vec::new(),
            key_member: None,
            key_decoder: key_schema.map(|settings| SchemaDecoder::new(&settings)),
        }
    }

    /// Why the source must fail, if a record met a reason since the last
    /// call (the record was neither added nor kept as bad: it is read
    /// again after the restart).
    pub fn take_failure(&mut self) -> Option<SourceError> {
        self.failure.take()
    }

    /// The parser with records numbered in `unit`s (`sequence`) in
    /// messages, not lines.
    pub fn counting(self, unit: &'static str) -> Self {
        LineParser { unit, ..self }
    }

    /// Where the records of the batch built last are (`in.txt lines
    /// 3–258`), if it has any.
    pub fn place(&self) -> Option<String> {
        self.numbers.describe(&self.path, self.unit)
    }

    /// Adds line number `number` (without its line break) to `batch`, or
    /// counts it as skipped, or keeps it as bad ([`LineParser::bad`]).
    /// Without a `timestamp` field the record's timestamp is `time`.
    pub fn add(&mut self, batch: &mut Batch, line: &[u8], number: u64, time: Option<i64>) {
        self.add_keyed(batch, line, number, time, None);
    }

    /// [`add`](Self::add) for a message that comes with a key of its own
    /// (Kafka's): without a `key` field, `key` is the record's key (and a
    /// `lines` record is keyed by its value only when `key` is `None`).
    /// Whether a record was added (not skipped, not bad).
    pub fn add_keyed(
        &mut self,
        batch: &mut Batch,
        line: &[u8],
        number: u64,
        time: Option<i64>,
        key: Option<&[u8]>,
    ) -> bool {
        let before = batch.len();
        let parsed = match self.key_decoder.take() {
            None => {
                self.key_metadata(key, false);
                self.parse(batch, line, number, time, key)
            }
            Some(mut decoder) => {
                let parsed = self.parse_decoding_key(&mut decoder, batch, line, number, time, key);
                self.key_decoder = Some(decoder);
                parsed
            }
        };
        self.settle(batch, before, parsed, (number, line, key, time))
    }

    /// Adds record `number` that a reader decoded itself from `raw` (its
    /// bytes as read; `decoded`: its JSON object, or why it is bad), as
    /// [`add_keyed`](Self::add_keyed) adds a message: keyed and timed by
    /// its fields, or kept as bad.
    pub fn add_decoded_record(
        &mut self,
        batch: &mut Batch,
        decoded: Result<Decoded<'_>, String>,
        raw: &[u8],
        number: u64,
    ) -> bool {
        let before = batch.len();
        let parsed = match decoded {
            Ok((json, Written::Json)) => self.add_json(batch, json, number, None, None),
            Ok((row, Written::Row)) => self.add_row(batch, row, number, None, None),
            Err(m) => Err(self.malformed(number, BadKind::Unreadable, m)),
        };
        self.settle(batch, before, parsed, (number, raw, None, None))
    }

    /// After record `number` (`line`, with its own `key` and `time`) was
    /// parsed into `batch`, which held `before` records: counts it, or
    /// keeps it as bad. Whether a record was added.
    fn settle(
        &mut self,
        batch: &Batch,
        before: usize,
        parsed: Result<(), (BadKind, SourceError)>,
        (number, line, key, time): (u64, &[u8], Option<&[u8]>, Option<i64>),
    ) -> bool {
        self.members.clear();
        if let Err((kind, error)) = parsed {
            self.bad.push(BadRecord {
                kind,
                error,
                origin: format!("{} {} {number}", self.path, self.unit),
                key: key.map(<[u8]>::to_vec),
                value: line.to_vec(),
                timestamp: time,
            });
            return false;
        }
        let added = batch.len() > before;
        if added {
            self.numbers.add(number, before == 0);
        }
        added
    }

    /// [`parse`](Self::parse) of a message whose key `key` is decoded
    /// with `key_format` by `decoder` first: a key that does not decode
    /// makes the message a bad record.
    fn parse_decoding_key(
        &mut self,
        decoder: &mut Result<SchemaDecoder, String>,
        batch: &mut Batch,
        line: &[u8],
        number: u64,
        time: Option<i64>,
        key: Option<&[u8]>,
    ) -> Result<(), (BadKind, SourceError)> {
        let Some(key) = key else {
            self.key_metadata(None, true);
            return self.parse(batch, line, number, time, None);
        };
        let Some((json, _)) = self.decode(decoder, key, number, "its key: ")? else {
            return Ok(());
        };
        self.key_metadata(Some(json), true);
        self.parse(batch, line, number, time, Some(json))
    }

    /// Record `number`'s `bytes` (`what`: `""`, or `"its key: "`) decoded
    /// by `decoder`; `None` when the registry did not answer (the source
    /// then fails: [`take_failure`](Self::take_failure)). A decoder that
    /// could not be made fails every message so.
    fn decode<'d>(
        &mut self,
        decoder: &'d mut Result<SchemaDecoder, String>,
        bytes: &[u8],
        number: u64,
        what: &str,
    ) -> Result<Option<Decoded<'d>>, (BadKind, SourceError)> {
        let decoded = match decoder {
            Ok(decoder) => decoder.decode(bytes),
            Err(e) => Err(DecodeError::Registry(e.clone())),
        };
        match decoded {
            Ok(decoded) => Ok(Some(decoded)),
            Err(DecodeError::Bad(message)) => {
                let message = format!("{what}{message}");
                Err(self.malformed(number, BadKind::Unreadable, message))
            }
            Err(DecodeError::Registry(message)) => {
                self.failure = Some(SourceError::Remote {
                    source_id: self.id.clone(),
                    target: self.path.clone(),
                    message,
                });
                Ok(None)
            }
        }
    }

    /// Adds the message key to the metadata, if asked: as JSON (decoded
    /// with `key_format`) or as text.
    fn key_metadata(&mut self, key: Option<&[u8]>, json: bool) {
        if let Some(field) = &self.key_member {
            match json {
                true => self.members.raw(field, key),
                false => self.members.text(field, key),
            }
        }
    }

    /// The body of [`add_keyed`](Self::add_keyed), without the numbering.
    fn parse(
        &mut self,
        batch: &mut Batch,
        line: &[u8],
        number: u64,
        time: Option<i64>,
        key: Option<&[u8]>,
    ) -> Result<(), (BadKind, SourceError)> {
        let mut line = line;
        // A datum is bytes: a trailing `\r` is its own.
        let binary = matches!(self.format, Format::Avro | Format::Protobuf);
        while let ([rest @ .., b'\r'], false) = (line, binary) {
            line = rest;
        }
        match self.format {
            // A tombstone of a Kafka topic.
            Format::Avro | Format::Protobuf if line.is_empty() => {}
            Format::Jsonl | Format::DebeziumJson | Format::Json
                if line.iter().all(u8::is_ascii_whitespace) => {}
            Format::Jsonl => self.add_json(batch, line, number, time, key)?,
            Format::DebeziumJson => {
                let event = debezium::read(line).map_err(|e| self.unreadable(number, &e))?;
                let time = event.ts_ms.or(time);
                for row in event.changes {
                    if row.change == Change::Truncate {
                        batch.push_change(Change::Truncate, None, row.row.as_bytes(), time);
                        continue;
                    }
                    if let Some((field, timestamp)) = self.fields(&row.row, number, time)? {
                        let key = field.as_deref().or(key);
                        batch.push_change(row.change, key, row.row.as_bytes(), timestamp);
                    }
                }
            }
            Format::Avro | Format::Protobuf | Format::Json => {
                // Held apart while its output, borrowed, is parsed.
                let mut decoder = self.decoder.take().expect("a binary format has a decoder");
                let added = self.add_decoded(&mut decoder, batch, line, number, time, key);
                self.decoder = Some(decoder);
                added?;
            }
            // `lines`: the key is the message's, or the line itself.
            _ => match key {
                Some(key) => batch.push(Some(key), line, time),
                None => batch.push_keyed_by_value(line, time),
            },
        }
        Ok(())
    }

    /// Adds message `line` of a schema format, decoded by `decoder`.
    fn add_decoded(
        &mut self,
        decoder: &mut Result<SchemaDecoder, String>,
        batch: &mut Batch,
        line: &[u8],
        number: u64,
        time: Option<i64>,
        key: Option<&[u8]>,
    ) -> Result<(), (BadKind, SourceError)> {
        match self.decode(decoder, line, number, "")? {
            None => Ok(()),
            Some((json, Written::Json)) => self.add_json(batch, json, number, time, key),
            Some((row, Written::Row)) => self.add_row(batch, row, number, time, key),
        }
    }

    /// Adds the row `row` (a flat record decoded), keyed and timed by its
    /// fields as [`add_json`](Self::add_json) would its JSON. With metadata
    /// to append (JSON members), it is added as its JSON.
    fn add_row(
        &mut self,
        batch: &mut Batch,
        row: &[u8],
        number: u64,
        time: Option<i64>,
        key: Option<&[u8]>,
    ) -> Result<(), (BadKind, SourceError)> {
        if !self.members.as_bytes().is_empty() {
            let mut json = Vec::with_capacity(row.len() + 16);
            weir_flat::row::write_json(row, &mut json).expect("a row the decoder wrote");
            return self.add_json(batch, &json, number, time, key);
        }
        if self.key.is_none() && self.timestamp.is_none() {
            batch.push_row(key, row, time);
            return Ok(());
        }
        let ts = self.timestamp.as_ref().map(|t| &*t.field);
        if let Some(fields) = row_fields(row, self.key.as_deref(), ts) {
            if let Some((field, timestamp)) = self.stamp(fields, number, time)? {
                batch.push_row(field.as_deref().or(key), row, timestamp);
            }
            return Ok(());
        }
        // A float or a decimal: the key and timestamp fields, alone as
        // JSON, read by the JSON path's own rules and messages.
        let named = [
            self.key.as_deref(),
            self.timestamp.as_ref().map(|t| &*t.field),
        ];
        let mut object = b"{".to_vec();
        for field in weir_flat::row::fields(row) {
            let (name, value) = field.expect("a row the decoder wrote");
            if named.contains(&Some(name)) {
                if object.len() > 1 {
                    object.push(b',');
                }
                weir_flat::json::push_str(&mut object, name);
                object.push(b':');
                value.write_json(&mut object);
            }
        }
        object.push(b'}');
        let text = std::str::from_utf8(&object).expect("JSON written from a row");
        if let Some((field, timestamp)) = self.fields(text, number, time)? {
            batch.push_row(field.as_deref().or(key), row, timestamp);
        }
        Ok(())
    }

    /// Adds the JSON record `json` (of `jsonl`, or decoded), with the
    /// message's metadata ([`LineParser::members`]) appended, keyed and
    /// timed by its fields when `key` and `timestamp` name them.
    fn add_json(
        &mut self,
        batch: &mut Batch,
        json: &[u8],
        number: u64,
        time: Option<i64>,
        key: Option<&[u8]>,
    ) -> Result<(), (BadKind, SourceError)> {
        let mut joined = std::mem::take(&mut self.joined);
        let mut add = |parser: &mut LineParser| {
            let json = match parser.members.as_bytes() {
                [] => json,
                members => {
                    joined.clear();
                    let appended = metadata::append(json, members, &mut joined);
                    appended.map_err(|m| parser.malformed(number, BadKind::Unreadable, m))?;
                    &joined[..]
                }
            };
            if parser.key.is_none() && parser.timestamp.is_none() {
                batch.push(key, json, time);
                return Ok(());
            }
            let text = std::str::from_utf8(json).map_err(|e| parser.unreadable(number, &e))?;
            if let Some((field, timestamp)) = parser.fields(text, number, time)? {
                batch.push(field.as_deref().or(key), json, timestamp);
            }
            Ok(())
        };
        let added = add(self);
        self.joined = joined;
        added
    }

    /// The error of record `number`, which is not what its format says.
    fn malformed(&self, number: u64, kind: BadKind, message: String) -> (BadKind, SourceError) {
        let error = SourceError::Malformed {
            source_id: self.id.clone(),
            path: self.path.clone(),
            line: number,
            message,
        };
        (kind, error)
    }

    fn unreadable(&self, number: u64, e: &dyn std::fmt::Display) -> (BadKind, SourceError) {
        let what = match self.format {
            Format::DebeziumJson => "",
            _ => "not JSON: ",
        };
        self.malformed(number, BadKind::Unreadable, format!("{what}{e}"))
    }

    /// The `key` field and the timestamp (the `timestamp` field's, else
    /// `time`) of JSON object `text`, record `number`; `None` when a bad
    /// timestamp skips it.
    #[allow(clippy::type_complexity)]
    fn fields<'t>(
        &mut self,
        text: &'t str,
        number: u64,
        time: Option<i64>,
    ) -> Result<Option<(Option<Cow<'t, [u8]>>, Option<i64>)>, (BadKind, SourceError)> {
        let ts = self.timestamp.as_ref().map(|t| &*t.field);
        let fields =
            read_fields(text, self.key.as_deref(), ts).map_err(|e| self.unreadable(number, &e))?;
        self.stamp(fields, number, time)
    }

    /// The key and the timestamp (the `timestamp` field's, else `time`)
    /// of record `number` whose `key` and `timestamp` fields are `fields`;
    /// `None` when a bad timestamp skips it.
    #[allow(clippy::type_complexity)]
    fn stamp<'t>(
        &mut self,
        fields: Fields<'t>,
        number: u64,
        time: Option<i64>,
    ) -> Result<Option<(Option<Cow<'t, [u8]>>, Option<i64>)>, (BadKind, SourceError)> {
        let ts = self.timestamp.as_ref();
        let timestamp = match (ts, fields.time) {
            (None, _) => time,
            (Some(_), Time::Millis(ms)) => Some(ms),
            (Some(t), bad) if t.on_bad == OnBadTimestamp::Fail => {
                let found = match &bad {
                    Time::Bad(found) => Some(found.as_str()),
                    _ => None,
                };
                let message = t.bad("field", found);
                return Err(self.malformed(number, BadKind::BadTimestamp, message));
            }
            (Some(_), _) => {
                self.skipped += 1;
                return Ok(None);
            }
        };
        let field = match &self.key {
            None => None,
            Some(k) => match fields.key {
                Some(key) => Some(key),
                None => {
                    let message = format!("no key field `{k}`");
                    return Err(self.malformed(number, BadKind::NoKey, message));
                }
            },
        };
        Ok(Some((field, timestamp)))
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
                    self.parser.add(&mut batch, &self.line, self.records, None);
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
                self.parser.add(&mut batch, line, self.records, None);
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

    fn place(&self) -> Option<String> {
        self.parser.place()
    }

    fn replayable(&self) -> bool {
        self.replayable
    }

    fn skipped(&self) -> u64 {
        self.parser.skipped
    }

    fn take_bad(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.parser.bad)
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
        let parsing = Parsing {
            format,
            key: key.map(str::to_string),
            ..Parsing::default()
        };
        LineParser::new("in".into(), "test".into(), &parsing)
    }

    /// Every record's value, reading batches of at most `max`.
    fn values(r: &mut LineReader, max: usize) -> Result<Vec<Vec<u8>>, SourceError> {
        let mut out = Vec::new();
        while let Some(batch) = failing(r, max)? {
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

    /// Debezium events become records saying their kinds, keyed by the
    /// `key` field of their rows, timed by `ts_ms`; a Kafka tombstone
    /// (empty) is skipped, a malformed event is a bad record.
    #[test]
    fn debezium_events_become_changes() {
        let input = concat!(
            r#"{"before":null,"after":{"id":1,"n":"a"},"op":"r","ts_ms":10}"#,
            "\n",
            r#"{"before":{"id":1,"n":"a"},"after":{"id":1,"n":"b"},"op":"u","ts_ms":11}"#,
            "\n",
            "\n",
            r#"{"before":{"id":1,"n":"b"},"after":null,"op":"d"}"#,
            "\n",
            r#"{"op":"t","ts_ms":13}"#,
            "\n",
            r#"{"op":"q"}"#,
            "\n",
        );
        let mut r = reader(input.as_bytes(), 64, Format::DebeziumJson, Some("id"));
        let batch = r.read_batch(100).unwrap().unwrap();
        let got: Vec<_> = (batch.iter())
            .map(|rec| (rec.change, rec.key, rec.timestamp))
            .collect();
        use Change::*;
        assert_eq!(
            got,
            [
                (Insert, Some(&b"1"[..]), Some(10)),
                (UpdateBefore, Some(&b"1"[..]), Some(11)),
                (UpdateAfter, Some(&b"1"[..]), Some(11)),
                (Delete, Some(&b"1"[..]), None),
                (Truncate, None, Some(13)),
            ]
        );
        assert_eq!(batch.get(2).value, br#"{"id":1,"n":"b"}"#);
        let bad = r.take_bad();
        assert_eq!(bad.len(), 1);
        assert!(
            bad[0].reason().contains("none of c, r, u, d, t, m"),
            "{}",
            bad[0].reason()
        );
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

    /// A read of up to `max` records, failing with the first bad record's
    /// error as `on_error = "fail"` does.
    fn failing(r: &mut dyn SourceReader, max: usize) -> Result<Option<Batch>, SourceError> {
        let batch = r.read_batch(max)?;
        match r.take_bad().into_iter().next() {
            Some(bad) => Err(bad.error),
            None => Ok(batch),
        }
    }

    #[test]
    fn a_bad_jsonl_line_is_reported_with_its_number() {
        let mut r = reader(b"{\"k\":\"x\"}\n{\"k\":\n", 5, Format::Jsonl, Some("k"));
        let err = failing(&mut r, 10).unwrap_err().to_string();
        assert!(err.contains("test:2: not JSON"), "{err}");
        let mut r = reader(b"{}\n", 64, Format::Jsonl, Some("k"));
        let err = failing(&mut r, 10).unwrap_err().to_string();
        assert!(err.contains("no key field `k`"), "{err}");
    }

    /// Bad lines are kept with where they are and what they hold, and the
    /// reader goes on past them: its offset is past them too.
    #[test]
    fn bad_jsonl_lines_are_kept_and_the_reader_goes_on() {
        let input = b"{\"k\":\"a\"}\n{\"k\":\n{}\n{\"k\":\"b\"}\n";
        let mut r = reader(input, 8, Format::Jsonl, Some("k"));
        let batch = r.read_batch(10).unwrap().unwrap();
        let keys: Vec<_> = batch.iter().map(|rec| rec.key.unwrap().to_vec()).collect();
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
        let bad = r.take_bad();
        let seen: Vec<(&str, &[u8], String)> = (bad.iter())
            .map(|b| (b.origin.as_str(), &b.value[..], b.reason()))
            .collect();
        assert_eq!(seen[0].0, "test line 2");
        assert_eq!(seen[0].1, b"{\"k\":");
        assert!(seen[0].2.starts_with("not JSON"), "{}", seen[0].2);
        assert_eq!(
            seen[1],
            ("test line 3", &b"{}"[..], "no key field `k`".to_owned())
        );
        assert!(r.take_bad().is_empty(), "taken");
        assert_eq!(r.offset(), json!({"byte": input.len(), "records": 4}));
    }

    /// A `jsonl` reader of `input` whose timestamps are in field `ts`.
    fn timed(input: &str, key: Option<&str>, on_bad: OnBadTimestamp) -> LineReader {
        let mut r = reader(input.as_bytes(), 16, Format::Jsonl, key);
        r.parser.timestamp = Some(TimestampField {
            field: "ts".into(),
            on_bad,
        });
        r
    }

    /// A record's key and timestamp.
    pub(crate) type Stamp = (Option<String>, Option<i64>);

    /// Every record's key and timestamp.
    pub(crate) fn stamps(r: &mut dyn SourceReader) -> Result<Vec<Stamp>, SourceError> {
        let mut out = Vec::new();
        while let Some(batch) = failing(r, 2)? {
            let key = |k: Option<&[u8]>| k.map(|k| String::from_utf8(k.to_vec()).unwrap());
            out.extend(batch.iter().map(|rec| (key(rec.key), rec.timestamp)));
        }
        Ok(out)
    }

    #[test]
    fn jsonl_timestamps_are_milliseconds_or_rfc3339() {
        let input = concat!(
            "{\"k\":\"a\",\"ts\":1700000000000}\n",
            "\n",
            "{\"ts\":\"2026-12-01T15:30:00Z\",\"k\":\"b\"}\r\n",
            "{\"k\":\"c\",\"ts\":\"2026-12-01T15:30:00.250+01:00\",\"x\":[1,{}]}\n",
            "{\"k\":\"d\",\"ts\":-5}",
        );
        let mut r = timed(input, Some("k"), OnBadTimestamp::Fail);
        let want = [
            (Some("a".into()), Some(1_700_000_000_000)),
            (Some("b".into()), Some(1_796_139_000_000)),
            (Some("c".into()), Some(1_796_135_400_250)),
            (Some("d".into()), Some(-5)),
        ];
        assert_eq!(stamps(&mut r).unwrap(), want);
        assert_eq!((r.skipped(), r.records), (0, 5));
        // Without `key`, the record has no key but its timestamp.
        let mut r = timed("{\"ts\":7}\n", None, OnBadTimestamp::Fail);
        assert_eq!(stamps(&mut r).unwrap(), [(None, Some(7))]);
    }

    /// Each kind of bad timestamp fails the source, naming the line and
    /// what the field holds.
    #[test]
    fn a_bad_jsonl_timestamp_names_the_line_and_what_was_found() {
        let cases = [
            (
                "{\"ts\":\"yesterday\"}",
                "field `ts` is \"yesterday\", not milliseconds",
            ),
            ("{\"ts\":1.5}", "field `ts` is 1.5, not"),
            ("{\"ts\":null}", "field `ts` is null, not"),
            ("{\"ts\":true}", "field `ts` is true, not"),
            ("{\"ts\":{}}", "field `ts` is an object, not"),
            ("{\"ts\":99999999999999999999}", "field `ts` is 1e+20, not"),
            (
                "{\"ts\":\"2026-02-30T00:00:00Z\"}",
                "field `ts` is \"2026-02-30T00:00:00Z\"",
            ),
            ("{\"t\":1}", "no field `ts` (the timestamp)"),
            ("[1]", "no field `ts`"),
        ];
        for (line, found) in cases {
            let input = format!("{{\"ts\":1}}\n\n{line}\n");
            let mut r = timed(&input, None, OnBadTimestamp::Fail);
            let err = stamps(&mut r).unwrap_err().to_string();
            assert!(err.starts_with("source `in`: test:3: "), "{err}");
            assert!(err.contains(found), "{line}: {err}");
            assert!(
                err.ends_with("; fix the record or set on_bad_timestamp = \"skip\""),
                "{err}"
            );
        }
        let mut r = timed("{\"ts\":1,}\n", None, OnBadTimestamp::Fail);
        let err = stamps(&mut r).unwrap_err().to_string();
        assert!(err.contains("test:1: not JSON"), "{err}");
        // Not UTF-8: not JSON, even where the field would be skipped.
        let mut r = reader(b"{\"ts\":\"\xff\"}\n", 16, Format::Jsonl, None);
        r.parser.timestamp = Some(TimestampField {
            field: "ts".into(),
            on_bad: OnBadTimestamp::Skip,
        });
        assert!(
            stamps(&mut r)
                .unwrap_err()
                .to_string()
                .contains("test:1: not JSON")
        );
    }

    /// With `skip`, records with a bad timestamp are dropped and counted,
    /// but still read: a key error is not hidden by an earlier skip.
    #[test]
    fn skipped_jsonl_records_are_counted() {
        let input = "{\"ts\":1}\n{\"ts\":\"x\"}\n{}\n{\"ts\":4}\n{\"ts\":null}\n";
        let mut r = timed(input, None, OnBadTimestamp::Skip);
        assert_eq!(stamps(&mut r).unwrap(), [(None, Some(1)), (None, Some(4))]);
        assert_eq!((r.skipped(), r.records), (3, 5));
        assert_eq!(r.offset(), json!({"byte": input.len(), "records": 5}));
        let mut r = timed(
            "{\"ts\":\"x\"}\n{\"ts\":2}\n",
            Some("k"),
            OnBadTimestamp::Skip,
        );
        let err = stamps(&mut r).unwrap_err().to_string();
        assert!(err.contains("test:2: no key field `k`"), "{err}");
        assert_eq!(r.skipped(), 1);
    }

    /// A batch's place is the lines of its first and last records, blank
    /// `jsonl` lines (no record) left out; batches of one record name its
    /// line.
    #[test]
    fn a_batch_names_the_lines_of_its_records() {
        let input = b"{}\n\n{}\n{}\n   \n{}\n";
        let mut r = reader(input, 64, Format::Jsonl, None);
        let places: Vec<_> = std::iter::from_fn(|| {
            let batch = r.read_batch(2).unwrap()?;
            Some((batch.len(), r.place()))
        })
        .collect();
        let line = |s: &str| Some(s.to_string());
        let want = [(2, line("test lines 1–3")), (2, line("test lines 4–6"))];
        assert_eq!(places, want);
        let mut r = reader(b"a\nb\nc\n", 64, Format::Lines, None);
        r.read_batch(2).unwrap();
        r.read_batch(1).unwrap();
        assert_eq!(r.place(), line("test line 3"));
    }
}
