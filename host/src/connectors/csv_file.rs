//! `csv` input: a file whose first row is the header; each row becomes a
//! row record (`weir_flat::row`) of its cells by column name, strings or,
//! with `columns`, values of the columns' types (module `cells`), written
//! straight into the batch without a map of values. Readers that want
//! text get each as its JSON object; plugins that read rows get the
//! typed fields.
//!
//! Invariant: the offset (`byte`, `records`, `line`) is right after the
//! last row read (returned, dropped or bad), so seeking to `byte` resumes
//! at the next row, and the places of the rows read after it name their
//! real lines.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::cells::{CellType, write_inferred};
use super::jsonl::shown;
use super::parsing::{OnBadTimestamp, Parsing, TimestampField};
use super::source::{BadRecord, MAX_BATCH_BYTES, SourceError, SourceReader};
use crate::dataflow::Batch;
use crate::dataflow::bad_kind::BadKind;
use crate::dataflow::provenance::NumberRange;
use crate::time::parse_cell;
use weir_flat::json;
use weir_flat::row::{self, RowWriter, fields, write_json};

/// A reader of CSV `file`, whose first row is the header.
pub(crate) fn csv_reader(file: File) -> csv::Reader<File> {
    csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(file)
}

/// Reads the header row of `reader`, refusing one without a column the
/// parsing settings name (`key`, `timestamp`, each of `columns`): the one
/// check of both `weir validate` (through the job file's checks) and
/// opening the source. The message is about row 1 of the file.
pub(crate) fn csv_header(
    reader: &mut csv::Reader<File>,
    parsing: &Parsing,
) -> Result<Vec<String>, String> {
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| format!("cannot read the header row: {e}"))?
        .iter()
        .map(str::to_string)
        .collect();
    for (setting, column) in parsing.named_columns() {
        if !headers.iter().any(|h| h == column) {
            return Err(format!(
                "the header row has no column `{column}` (columns: {}); fix `{setting}` or the header",
                headers.join(", ")
            ));
        }
    }
    Ok(headers)
}

/// `csv` files with a header row.
pub(crate) struct CsvReader {
    id: String,
    path: PathBuf,
    reader: csv::Reader<File>,
    headers: Vec<String>,
    /// Each column's type; `None`: a string (or inferred, with `infer`).
    types: Vec<Option<CellType>>,
    infer: bool,
    /// The key column, by index.
    key: Option<usize>,
    timestamp: Option<(usize, TimestampField)>,
    records: u64,
    skipped: u64,
    /// Rows that could not be read since they were last taken.
    bad: Vec<BadRecord>,
    /// The lines the rows of the last batch start on.
    lines: NumberRange,
    /// The value being written.
    value: Vec<u8>,
}

impl CsvReader {
    /// Reads the header row of `file` (checking that it has the columns
    /// the settings name), then seeks to `byte`, after `records` rows, at
    /// `line`, if given (an offset without `line` is taken as one row a
    /// line after the header).
    pub(crate) fn open(
        id: String,
        path: &Path,
        file: File,
        parsing: &Parsing,
        byte: Option<u64>,
        (records, line): (u64, Option<u64>),
    ) -> Result<Self, SourceError> {
        let mut reader = csv_reader(file);
        let headers =
            csv_header(&mut reader, parsing).map_err(|message| SourceError::Malformed {
                source_id: id.clone(),
                path: path.display().to_string(),
                line: 1,
                message,
            })?;
        if let Some(b) = byte {
            let mut pos = csv::Position::new();
            // The line too: the places of the records read next, and of
            // their dead letters, are counted from it.
            let line = line.unwrap_or(records + 2);
            pos.set_byte(b).set_record(records + 1).set_line(line);
            reader.seek(pos).map_err(|e| SourceError::BadOffset {
                source_id: id.clone(),
                offset: b.to_string(),
                message: e.to_string(),
            })?;
        }
        let column = |name: &str| headers.iter().position(|h| h == name);
        Ok(CsvReader {
            id,
            path: path.to_path_buf(),
            reader,
            types: parsing.columns.types(&headers),
            infer: parsing.columns.is_infer(),
            key: parsing.key.as_deref().and_then(column),
            timestamp: (parsing.timestamp.clone()).and_then(|t| Some((column(&t.field)?, t))),
            headers,
            records,
            skipped: 0,
            bad: Vec::new(),
            lines: NumberRange::default(),
            value: Vec::new(),
        })
    }

    /// Keeps the row on `line` (its bytes `value`) as bad, failed with
    /// `error`.
    fn bad_row(&mut self, (kind, error): (BadKind, SourceError), line: u64, value: Vec<u8>) {
        self.bad.push(BadRecord {
            kind,
            error,
            origin: format!("{} line {line}", self.path.display()),
            key: None,
            value,
            timestamp: None,
        });
    }

    fn malformed(&self, line: u64, message: String) -> SourceError {
        SourceError::Malformed {
            source_id: self.id.clone(),
            path: self.path.display().to_string(),
            line,
            message,
        }
    }

    /// Writes `row` into `self.value` as a row of typed cells (readers that
    /// want text get its JSON object); returns the key's bytes (its
    /// string, or its JSON text; none for `null`). `Err`: the column whose
    /// cell is not of its type, and why.
    fn write_row(&mut self, row: &csv::StringRecord) -> Result<Option<Vec<u8>>, String> {
        self.value.clear();
        let mut key = None;
        for (i, cell) in row.iter().enumerate() {
            let start = self.value.len();
            let fields = &mut RowWriter::new(&mut self.value);
            let name = &self.headers[i];
            match self.types[i] {
                Some(kind) => {
                    (kind.write(name, cell, fields)).map_err(|e| format!("column `{name}`: {e}"))?
                }
                None if self.infer => write_inferred(name, cell, fields),
                None => {
                    fields.str(name, cell);
                }
            }
            if self.key == Some(i) {
                key = key_of(&self.value[start..]);
            }
        }
        Ok(key)
    }

    /// `row` as a JSON object of strings, for a bad row's dead letter.
    fn strings(&self, row: &csv::StringRecord) -> Vec<u8> {
        let object: serde_json::Map<String, Value> = (self.headers.iter().zip(row.iter()))
            .map(|(h, v)| (h.clone(), Value::String(v.to_owned())))
            .collect();
        Value::Object(object).to_string().into_bytes()
    }
}

impl SourceReader for CsvReader {
    fn read_batch(&mut self, max: usize) -> Result<Option<Batch>, SourceError> {
        let mut batch = Batch::with_capacity(max, 0);
        let mut row = csv::StringRecord::new();
        self.lines.clear();
        while batch.len() < max && batch.data_bytes() < MAX_BATCH_BYTES {
            let more = match self.reader.read_record(&mut row) {
                Ok(more) => more,
                // A row that does not parse (a column missing): the reader
                // is past it.
                Err(e) if e.position().is_some() && !e.is_io_error() => {
                    self.records += 1;
                    let line = e.position().map_or(0, |p| p.line());
                    let error = self.malformed(line, e.to_string());
                    let value = row.as_byte_record().as_slice().to_vec();
                    self.bad_row((BadKind::Unreadable, error), line, value);
                    continue;
                }
                Err(e) => {
                    let line = e.position().map_or(0, |p| p.line());
                    return Err(self.malformed(line, e.to_string()));
                }
            };
            if !more {
                break;
            }
            self.records += 1;
            let line = row.position().map_or(0, |p| p.line());
            let key = match self.write_row(&row) {
                Ok(key) => key,
                Err(message) => {
                    let message =
                        format!("{message}; fix the row or the column's type in `columns`");
                    let error = self.malformed(line, message);
                    let value = self.strings(&row);
                    self.bad_row((BadKind::Unreadable, error), line, value);
                    continue;
                }
            };
            let timestamp = match &self.timestamp {
                None => None,
                Some((column, t)) => {
                    // The header has the column, so every row has the cell.
                    let cell = row.get(*column).unwrap_or("");
                    match parse_cell(cell) {
                        Some(ms) => Some(ms),
                        None if t.on_bad == OnBadTimestamp::Skip => {
                            self.skipped += 1;
                            continue;
                        }
                        None => {
                            let message = t.bad("column", Some(&shown(cell)));
                            let error = self.malformed(line, message);
                            let mut value = Vec::new();
                            write_json(&self.value, &mut value).expect("a row just written");
                            self.bad_row((BadKind::BadTimestamp, error), line, value);
                            continue;
                        }
                    }
                }
            };
            batch.push_row(key.as_deref(), &self.value, timestamp);
            self.lines.add(line, false);
        }
        Ok(if batch.is_empty() { None } else { Some(batch) })
    }

    fn offset(&self) -> Value {
        let at = self.reader.position();
        json!({"byte": at.byte(), "records": self.records, "line": at.line()})
    }

    fn place(&self) -> Option<String> {
        self.lines
            .describe(&self.path.display().to_string(), "line")
    }

    fn skipped(&self) -> u64 {
        self.skipped
    }

    fn take_bad(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.bad)
    }
}

/// A record's key from its key column's field (the one row field in
/// `field`): a string's text, a number's or boolean's JSON text, none for
/// `null`.
fn key_of(field: &[u8]) -> Option<Vec<u8>> {
    let (_, value) = (fields(field).next())?.expect("a field just written");
    let mut text = Vec::new();
    match value {
        row::Value::Null => return None,
        row::Value::Str(s) => return Some(s.as_bytes().to_vec()),
        row::Value::Bool(b) => text.extend_from_slice(if b { b"true" } else { b"false" }),
        row::Value::Int(n) => json::push_i64(&mut text, n),
        row::Value::Uint(n) => json::push_u64(&mut text, n),
        row::Value::Float(x) => json::push_f64(&mut text, x),
        row::Value::Decimal(d) => text.extend_from_slice(d.as_bytes()),
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::cells::Columns;
    use crate::connectors::format::tests::stamps;
    use crate::connectors::parsing::Format;
    use crate::dataflow::batch::Encoding;

    fn values(r: &mut CsvReader) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(batch) = r.read_batch(2).unwrap() {
            // Every record is a row, read as its JSON text.
            assert!(batch.iter().all(|r| r.encoding == Encoding::Row));
            let text = batch.rows_as_text().unwrap();
            out.extend((text.iter()).map(|r| serde_json::from_slice::<Value>(r.value).unwrap()));
        }
        out
    }

    /// A reader of `text` (written to a file in `dir`) with `parsing`.
    fn open(dir: &Path, text: &str, parsing: &Parsing) -> Result<CsvReader, SourceError> {
        let path = dir.join("in.csv");
        std::fs::write(&path, text).unwrap();
        let file = File::open(&path).unwrap();
        CsvReader::open("in".into(), &path, file, parsing, None, (0, None))
    }

    fn typed(columns: &[(&str, CellType)]) -> Parsing {
        Parsing {
            format: Format::Csv,
            key: Some("id".into()),
            columns: Columns::Typed((columns.iter()).map(|(c, t)| (c.to_string(), *t)).collect()),
            ..Parsing::default()
        }
    }

    #[test]
    fn typed_columns_become_numbers_booleans_and_times_in_header_order() {
        let dir = tempfile::tempdir().unwrap();
        let text = "id,amount,qty,paid,at,note\n\
                    7,12.50,3,t,2024-01-31T12:00:00Z,a \"b\"\n\
                    8,,,,,\n";
        let parsing = typed(&[
            ("amount", CellType::Decimal),
            ("qty", CellType::I64),
            ("paid", CellType::Bool),
            ("at", CellType::Timestamp),
            ("id", CellType::I64),
        ]);
        let mut r = open(dir.path(), text, &parsing).unwrap();
        let batch = r.read_batch(10).unwrap().unwrap();
        let cells: Vec<_> = fields(batch.get(0).value).map(Result::unwrap).collect();
        use row::Value::*;
        assert_eq!(
            cells,
            [
                ("id", Int(7)),
                ("amount", Decimal("12.50")),
                ("qty", Int(3)),
                ("paid", Bool(true)),
                ("at", Str("2024-01-31T12:00:00.000Z")),
                ("note", Str("a \"b\""))
            ]
        );
        let batch = batch.rows_as_text().unwrap();
        let first = std::str::from_utf8(batch.get(0).value).unwrap();
        assert_eq!(
            first,
            r#"{"id":7,"amount":12.50,"qty":3,"paid":true,"at":"2024-01-31T12:00:00.000Z","note":"a \"b\""}"#
        );
        assert_eq!(batch.get(0).key, Some(&b"7"[..]));
        let second = std::str::from_utf8(batch.get(1).value).unwrap();
        assert_eq!(
            second,
            r#"{"id":8,"amount":null,"qty":null,"paid":null,"at":null,"note":""}"#
        );
    }

    #[test]
    fn a_cell_not_of_its_type_makes_a_bad_row_and_the_reader_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let text = "id,amount\n1,2.5\n2,abc\n3,4\n";
        let mut r = open(dir.path(), text, &typed(&[("amount", CellType::F64)])).unwrap();
        let got = values(&mut r);
        assert_eq!(
            got,
            [
                json!({"id": "1", "amount": 2.5}),
                json!({"id": "3", "amount": 4.0})
            ]
        );
        let bad = r.take_bad();
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].kind, BadKind::Unreadable);
        assert!(
            bad[0].origin.ends_with("in.csv line 3"),
            "{}",
            bad[0].origin
        );
        let reason = bad[0].reason();
        assert!(
            reason.contains("column `amount`: \"abc\" is not a finite number; fix the row or the column's type in `columns`"),
            "{reason}"
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&bad[0].value).unwrap(),
            json!({"id": "2", "amount": "abc"})
        );
        assert_eq!(r.records, 3);
    }

    #[test]
    fn inferred_cells_and_a_typed_column_the_header_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let parsing = Parsing {
            format: Format::Csv,
            key: Some("id".into()),
            columns: Columns::Infer,
            ..Parsing::default()
        };
        let mut r = open(dir.path(), "id,zip,x,ok\n5,01234,1.5,true\n", &parsing).unwrap();
        assert_eq!(
            values(&mut r),
            [json!({"id": 5, "zip": "01234", "x": 1.5, "ok": true})]
        );
        let err = open(
            dir.path(),
            "id,a\n1,2\n",
            &typed(&[("amount", CellType::I64)]),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            err.contains("in.csv:1: the header row has no column `amount` (columns: id, a); fix `columns` or the header"),
            "{err}"
        );
    }

    /// A CSV reader of `text` (written to a file in `dir`), timestamps in
    /// column `ts`.
    fn csv(dir: &Path, text: &str, on_bad: OnBadTimestamp) -> Result<CsvReader, SourceError> {
        let parsing = Parsing {
            format: Format::Csv,
            key: Some("k".into()),
            timestamp: Some(TimestampField {
                field: "ts".into(),
                on_bad,
            }),
            ..Parsing::default()
        };
        open(dir, text, &parsing)
    }

    /// A CSV reader reopened at a checkpoint's offset goes on counting
    /// lines where it stood, so the places of its records (and of its bad
    /// rows) name their real lines; an offset without `line` (an older
    /// checkpoint) counts one row a line.
    #[test]
    fn a_csv_reader_reopened_at_an_offset_names_the_real_lines() {
        let dir = tempfile::tempdir().unwrap();
        let text = "k,ts\na,1\nb,2\nc,3\nd,x\ne,5\n";
        let mut r = csv(dir.path(), text, OnBadTimestamp::Fail).unwrap();
        assert_eq!(r.read_batch(2).unwrap().map(|b| b.len()), Some(2));
        let offset = r.offset();
        assert_eq!(offset["line"], 4, "{offset}");
        let reopen = |line: Option<u64>| {
            let path = dir.path().join("in.csv");
            let parsing = Parsing {
                format: Format::Csv,
                key: Some("k".into()),
                timestamp: Some(TimestampField {
                    field: "ts".into(),
                    on_bad: OnBadTimestamp::Fail,
                }),
                ..Parsing::default()
            };
            let byte = offset["byte"].as_u64();
            let file = File::open(&path).unwrap();
            CsvReader::open("in".into(), &path, file, &parsing, byte, (2, line)).unwrap()
        };
        for line in [offset["line"].as_u64(), None] {
            let mut r = reopen(line);
            let batch = r.read_batch(10).unwrap().unwrap();
            assert_eq!(batch.len(), 2, "c and e");
            assert_eq!(
                r.place().as_deref().map(|p| p.ends_with("lines 4–6")),
                Some(true),
                "{:?}",
                r.place()
            );
            let bad = r.take_bad();
            assert_eq!(bad.len(), 1);
            assert!(bad[0].origin.ends_with("line 5"), "{}", bad[0].origin);
        }
    }

    /// A CSV row's place is the line it starts on (a quoted cell may span
    /// lines; the header is line 1).
    #[test]
    fn a_csv_batch_names_the_lines_its_rows_start_on() {
        let dir = tempfile::tempdir().unwrap();
        let text = "k,ts\na,1\n\"b\nb\",2\nc,3\n";
        let mut r = csv(dir.path(), text, OnBadTimestamp::Fail).unwrap();
        r.read_batch(2).unwrap().unwrap();
        let path = dir.path().join("in.csv").display().to_string();
        assert_eq!(r.place(), Some(format!("{path} lines 2–3")));
        r.read_batch(2).unwrap().unwrap();
        assert_eq!(r.place(), Some(format!("{path} line 5")));
    }

    /// A row missing a column is kept as bad, with its line and bytes, and
    /// the reader goes on with the next row.
    #[test]
    fn a_csv_row_missing_a_column_is_kept_and_the_reader_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let text = "k,ts\na,1\nb\nc,3\n";
        let mut r = csv(dir.path(), text, OnBadTimestamp::Fail).unwrap();
        let batch = r.read_batch(10).unwrap().unwrap();
        assert_eq!(batch.len(), 2);
        let bad = r.take_bad();
        assert_eq!(bad.len(), 1);
        assert!(
            bad[0].origin.ends_with("in.csv line 3"),
            "{}",
            bad[0].origin
        );
        assert_eq!(bad[0].value, b"b");
        assert!(
            bad[0].reason().contains("found record with 1 field"),
            "{}",
            bad[0].reason()
        );
        assert_eq!(r.records, 3);
    }

    #[test]
    fn csv_timestamps_are_cells_of_milliseconds_or_rfc3339() {
        let dir = tempfile::tempdir().unwrap();
        let text = "k,ts\na,1700000000000\nb,-3\nc,2026-12-01T15:30:00Z\n";
        let mut r = csv(dir.path(), text, OnBadTimestamp::Fail).unwrap();
        let want = [
            (Some("a".into()), Some(1_700_000_000_000)),
            (Some("b".into()), Some(-3)),
            (Some("c".into()), Some(1_796_139_000_000)),
        ];
        assert_eq!(stamps(&mut r).unwrap(), want);

        let text = "k,ts\na,1\nb,1.5\nc,\nd,4\n";
        let mut r = csv(dir.path(), text, OnBadTimestamp::Fail).unwrap();
        let err = stamps(&mut r).unwrap_err().to_string();
        assert!(
            err.contains("in.csv:3: column `ts` is \"1.5\", not milliseconds since the epoch"),
            "{err}"
        );
        let mut r = csv(dir.path(), text, OnBadTimestamp::Skip).unwrap();
        assert_eq!(
            stamps(&mut r).unwrap(),
            [(Some("a".into()), Some(1)), (Some("d".into()), Some(4))]
        );
        assert_eq!((r.skipped(), r.records), (2, 4));

        let err = csv(dir.path(), "k,t\na,1\n", OnBadTimestamp::Fail)
            .err()
            .unwrap();
        let err = err.to_string();
        assert!(
            err.contains("in.csv:1: the header row has no column `ts`"),
            "{err}"
        );
        assert!(err.contains("fix `timestamp` or the header"), "{err}");
    }
}
