//! The `csv` format of the file sink: a record is a line of cells in the
//! columns' order, written from a row's fields (`weir_flat::row`) or a
//! JSON object's members with no JSON text or value in between, both
//! through one `Line`, so a row and its JSON text give the same bytes.
//!
//! Cells: null (and a missing field) is empty, an empty string `""`,
//! booleans `true`/`false`, numbers their JSON text (a row's decimal digit
//! for digit), strings as they are, a nested JSON value (only an object's
//! member can hold one) its compact JSON text. A cell holding the
//! delimiter, `"`, `\r` or `\n`, or starting or ending with a space, is
//! quoted (RFC 4180: in `"`, inner `"` doubled). Lines end with `\n`.
//!
//! A row's names and strings are copied as bytes, not checked as UTF-8
//! again: a sink that reads rows gets them checked
//! ([`Sink::reads_rows`](crate::connectors::sink::Sink::reads_rows)).
//!
//! Invariants:
//! - A file gets one header line (none with `header = false`): before the
//!   first record written into it while it is empty. A file that is not
//!   empty is continued under the columns its first line names.
//! - Once known (`columns`, the file's header, or the first record
//!   written), the columns never change; a record that has a field none of
//!   them names, or says a change with no `op` column to carry it, is
//!   refused whole and leaves the output as it was.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use weir_flat::json;
use weir_flat::row::{self, Raw};

use super::csv_layout::CsvLayout;
use crate::connectors::changelog::OP_FIELD;
use crate::connectors::jsonl::Text;
use crate::dataflow::batch::{Change, Encoding, RecordRef};

/// Writes records as lines of CSV (module doc).
pub(crate) struct CsvWriter {
    quoting: Quoting,
    columns: Option<Columns>,
    /// Whether the header line goes before the next record written.
    header_due: bool,
    held: Held,
}

/// The cells of a line held back until its end (a record whose fields
/// come in another order than the columns).
#[derive(Default)]
struct Held {
    /// The cells' bytes, and where each column's is in them.
    bytes: Vec<u8>,
    spans: Vec<(usize, usize)>,
    /// Per column, the `stamp` of the last line that held a cell for it.
    seen: Vec<u32>,
    /// The current line's mark in `seen`.
    stamp: u32,
}

impl Held {
    /// Starts holding the cells of a new line.
    fn start(&mut self) {
        self.bytes.clear();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
    }

    /// Whether the current line holds a cell for column `i`.
    fn has(&self, i: usize) -> bool {
        self.seen[i] == self.stamp
    }
}

/// The columns once known.
struct Columns {
    names: Vec<String>,
    index: HashMap<Vec<u8>, usize>,
    /// The column that carries a change's kind, [`OP_FIELD`].
    op: Option<usize>,
}

impl Columns {
    fn new(names: Vec<String>) -> Columns {
        let index: HashMap<Vec<u8>, usize> = (names.iter().map(|n| n.as_bytes().to_vec()))
            .zip(0..)
            .collect();
        let op = index.get(OP_FIELD.as_bytes()).copied();
        Columns { names, index, op }
    }

    /// The names, for messages.
    fn listed(&self) -> String {
        self.names.join(", ")
    }
}

impl CsvWriter {
    /// A writer of `layout` appending to `path`, which is then `len` bytes
    /// long: a file that is not empty is continued under the columns of
    /// its header line (which `columns`, when set, must equal); `Err` says
    /// why it cannot be, and what to do.
    pub(crate) fn open(layout: &CsvLayout, path: &Path, len: u64) -> Result<CsvWriter, String> {
        let columns = match (len, layout.header) {
            (0, _) | (_, false) => layout.columns.clone(),
            _ => Some(layout.header_of(path)?),
        };
        let quoting = Quoting::new(layout.delimiter);
        let mut writer = CsvWriter {
            quoting,
            columns: None,
            header_due: layout.header && len == 0,
            held: Held::default(),
        };
        if let Some(names) = columns {
            writer.set_columns(names);
        }
        Ok(writer)
    }

    fn set_columns(&mut self, names: Vec<String>) {
        self.held.seen = vec![0; names.len()];
        self.held.spans = vec![(0, 0); names.len()];
        self.columns = Some(Columns::new(names));
    }

    /// Appends `r` as a line, after the header line when it is due; `Err`
    /// says why the record cannot be written, and `out` is as it was.
    #[inline]
    pub(crate) fn write(&mut self, r: &RecordRef<'_>, out: &mut Vec<u8>) -> Result<(), String> {
        let start = out.len();
        self.line(r, out)?;
        self.header_at(start, out);
        Ok(())
    }

    /// Appends `line`, what [`line`](Self::line) wrote of a record, after
    /// the header line when it is due.
    pub(crate) fn write_line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(line);
        self.header_at(start, out);
    }

    /// Puts the header line at `start` of `out` when it is due: after the
    /// first line is written, which sets the columns when they are
    /// inferred.
    fn header_at(&mut self, start: usize, out: &mut Vec<u8>) {
        if self.header_due {
            self.header_due = false;
            let mut header = Vec::new();
            self.push_header(&mut header);
            out.splice(start..start, header);
        }
    }

    /// Appends `r` as a line (no header), or leaves `out` as it was and
    /// says why it cannot be written. The first record written while the
    /// columns are unknown sets them.
    #[inline]
    pub(crate) fn line(&mut self, r: &RecordRef<'_>, out: &mut Vec<u8>) -> Result<(), String> {
        let start = out.len();
        let written = self.cells(r, out);
        if written.is_err() {
            out.truncate(start);
        }
        written
    }

    #[inline]
    fn cells(&mut self, r: &RecordRef<'_>, out: &mut Vec<u8>) -> Result<(), String> {
        let op = (r.change != Change::Insert).then(|| r.change.name());
        let columns = self.columns.as_ref();
        let mut line = Line::start(&self.quoting, columns, &mut self.held, op, out)?;
        match r.encoding {
            Encoding::Row => {
                for field in row::raw_fields(r.value) {
                    let (name, value) = field.map_err(|e| e.to_string())?;
                    line.field(name, Cell::of_row(value))?;
                }
            }
            _ => members(r.value, &mut line)?,
        }
        if let Some(learned) = line.end()? {
            self.set_columns(learned);
        }
        Ok(())
    }

    /// Appends the header line: the columns' names as cells.
    fn push_header(&self, out: &mut Vec<u8>) {
        let names = self.columns.as_ref().map_or(&[][..], |c| &c.names[..]);
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                out.push(self.quoting.delimiter);
            }
            self.quoting.push(Cell::Str(name.as_bytes()), out);
        }
        out.push(b'\n');
    }
}

/// A cell's value, from a row's field or a JSON object's member.
#[derive(Debug, Clone, Copy)]
enum Cell<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    /// Finite.
    Float(f64),
    /// A JSON number's text, written as it is.
    Number(&'a str),
    Str(&'a [u8]),
    /// The text of a JSON object or array, written compact.
    Json(&'a str),
}

impl<'a> Cell<'a> {
    /// The cell of a row's field: what its JSON text gives ([`Cell::of_json`]).
    #[inline]
    fn of_row(value: Raw<'a>) -> Cell<'a> {
        match value {
            Raw::Null => Cell::Null,
            Raw::Bool(b) => Cell::Bool(b),
            Raw::Int(n) => Cell::Int(n),
            Raw::Uint(n) => Cell::Uint(n),
            // Its JSON is `null`.
            Raw::Float(x) if !x.is_finite() => Cell::Null,
            Raw::Float(x) => Cell::Float(x),
            Raw::Str(s) => Cell::Str(s),
            Raw::Decimal(text) => Cell::Number(text),
        }
    }

    /// The cell of a JSON value's text `raw` (well-formed, no space
    /// around it) that is no string.
    fn of_json(raw: &'a str) -> Cell<'a> {
        match raw.as_bytes().first() {
            Some(b'n') => Cell::Null,
            Some(b't') => Cell::Bool(true),
            Some(b'f') => Cell::Bool(false),
            Some(b'{' | b'[') => Cell::Json(raw),
            _ => Cell::Number(raw),
        }
    }
}

/// How cells are written and quoted.
struct Quoting {
    delimiter: u8,
    /// Whether no number or boolean can hold the delimiter, so that
    /// neither is ever quoted.
    plain_scalars: bool,
}

impl Quoting {
    fn new(delimiter: u8) -> Quoting {
        let plain_scalars = !delimiter.is_ascii_alphanumeric() && !b"+-.".contains(&delimiter);
        Quoting {
            delimiter,
            plain_scalars,
        }
    }

    /// Appends `cell`'s text, quoted when it must be.
    #[inline(always)]
    fn push(&self, cell: Cell<'_>, out: &mut Vec<u8>) {
        let start = out.len();
        match cell {
            Cell::Null => return,
            Cell::Bool(true) => out.extend_from_slice(b"true"),
            Cell::Bool(false) => out.extend_from_slice(b"false"),
            Cell::Int(n) => json::push_i64(out, n),
            Cell::Uint(n) => json::push_u64(out, n),
            Cell::Float(x) => json::push_f64(out, x),
            Cell::Number(text) => out.extend_from_slice(text.as_bytes()),
            // Not empty like a null.
            Cell::Str(b"") => return out.extend_from_slice(b"\"\""),
            Cell::Str(s) => out.extend_from_slice(s),
            Cell::Json(text) => compact(text, out),
        }
        if self.plain_scalars && !matches!(cell, Cell::Str(_) | Cell::Json(_)) {
            return;
        }
        self.quote(start, out);
    }

    /// Quotes the cell `out[start..]` when it holds the delimiter, `"`,
    /// `\r` or `\n`, or starts or ends with a space: in place, `"` doubled.
    #[inline(always)]
    fn quote(&self, start: usize, out: &mut Vec<u8>) {
        let text = &out[start..];
        let d = self.delimiter;
        let spaced = text.first() == Some(&b' ') || text.last() == Some(&b' ');
        // One pass without early exit, which the compiler vectorizes.
        let special = |b: u8| (b == d) | (b == b'"') | (b == b'\r') | (b == b'\n');
        if !spaced && !text.iter().fold(false, |any, &b| any | special(b)) {
            return;
        }
        let quotes = text.iter().filter(|&&b| b == b'"').count();
        let end = out.len();
        out.resize(end + quotes + 2, 0);
        // From the back, so that every byte is read before it is written over.
        let mut to = out.len() - 1;
        out[to] = b'"';
        for from in (start..end).rev() {
            let b = out[from];
            to -= 1;
            out[to] = b;
            if b == b'"' {
                to -= 1;
                out[to] = b'"';
            }
        }
        to -= 1;
        out[to] = b'"';
        debug_assert_eq!(to, start);
    }
}

/// Appends the JSON text `text` (well-formed) without its whitespace.
fn compact(text: &str, out: &mut Vec<u8>) {
    let (mut in_string, mut escaped) = (false, false);
    for &b in text.as_bytes() {
        if in_string {
            out.push(b);
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'"' => {
                in_string = true;
                out.push(b);
            }
            _ => out.push(b),
        }
    }
}

/// One record's line being written: cells that come in the columns'
/// order go straight to `out`, each after the one to its left; from the
/// first that does not, cells are held and the line is put together at
/// its end.
struct Line<'a> {
    quoting: &'a Quoting,
    /// The columns; `None` while the first record's fields make them.
    columns: Option<&'a Columns>,
    held: &'a mut Held,
    out: &'a mut Vec<u8>,
    /// The kind of a record that is not an insert, the `op` column's cell.
    op: Option<&'static str>,
    /// Columns written to `out` so far.
    next: usize,
    /// Whether cells are held.
    scattered: bool,
    /// The fields so far, while they make the columns.
    learned: Vec<String>,
}

impl<'a> Line<'a> {
    #[inline]
    fn start(
        quoting: &'a Quoting,
        columns: Option<&'a Columns>,
        held: &'a mut Held,
        op: Option<&'static str>,
        out: &'a mut Vec<u8>,
    ) -> Result<Line<'a>, String> {
        if let (Some(c), Some(kind)) = (columns, op)
            && c.op.is_none()
        {
            return Err(format!(
                "a record saying `{kind}` carries its kind in the column `{OP_FIELD}`, which the columns ({}) lack: add \"{OP_FIELD}\" to `columns`",
                c.listed()
            ));
        }
        Ok(Line {
            quoting,
            columns,
            held,
            out,
            op,
            next: 0,
            scattered: false,
            learned: Vec::new(),
        })
    }

    /// Takes field `name` with `cell`.
    #[inline(always)]
    fn field(&mut self, name: &[u8], cell: Cell<'_>) -> Result<(), String> {
        if self.op.is_some() && name == OP_FIELD.as_bytes() {
            // The record's kind takes its place, as `with_op` does.
            return Ok(());
        }
        let Some(columns) = self.columns else {
            return self.learn(name, cell);
        };
        let i = match columns.names.get(self.next) {
            Some(next) if same(next.as_bytes(), name) => self.next,
            _ => match columns.index.get(name) {
                Some(&i) => i,
                None => {
                    return Err(format!(
                        "the record has the field `{}`, which is none of the columns ({}): add it to `columns`, or leave it out before the sink",
                        String::from_utf8_lossy(name),
                        columns.listed()
                    ));
                }
            },
        };
        self.place(i, cell, name)
    }

    /// Takes field `name` of the first record, which makes a column.
    fn learn(&mut self, name: &[u8], cell: Cell<'_>) -> Result<(), String> {
        let name = String::from_utf8_lossy(name);
        if self.learned.iter().any(|n| *n == name) {
            return Err(twice(&name));
        }
        if !self.learned.is_empty() {
            self.out.push(self.quoting.delimiter);
        }
        self.learned.push(name.into_owned());
        self.quoting.push(cell, self.out);
        Ok(())
    }

    /// Puts `cell` in column `i` (named `name`).
    #[inline(always)]
    fn place(&mut self, i: usize, cell: Cell<'_>, name: &[u8]) -> Result<(), String> {
        if !self.scattered && i == self.next {
            if i > 0 {
                self.out.push(self.quoting.delimiter);
            }
            self.quoting.push(cell, self.out);
            self.next += 1;
            return Ok(());
        }
        // The columns left of `next` are written, the others held once.
        if i < self.next || (self.scattered && self.held.has(i)) {
            return Err(twice(&String::from_utf8_lossy(name)));
        }
        if !self.scattered {
            self.scattered = true;
            self.held.start();
        }
        let held = &mut *self.held;
        held.seen[i] = held.stamp;
        let from = held.bytes.len();
        self.quoting.push(cell, &mut held.bytes);
        held.spans[i] = (from, held.bytes.len());
        Ok(())
    }

    /// Ends the line: the `op` cell, then the columns left (empty, or
    /// held). Returns the columns the line made, if it was the first.
    #[inline]
    fn end(&mut self) -> Result<Option<Vec<String>>, String> {
        let Some(columns) = self.columns else {
            let mut names = std::mem::take(&mut self.learned);
            if let Some(kind) = self.op {
                if !names.is_empty() {
                    self.out.push(self.quoting.delimiter);
                }
                self.quoting.push(Cell::Str(kind.as_bytes()), self.out);
                names.push(OP_FIELD.to_owned());
            }
            if names.is_empty() {
                return Err(
                    "the first record sets the columns, and this one has no fields: set `columns`"
                        .into(),
                );
            }
            self.out.push(b'\n');
            return Ok(Some(names));
        };
        if let Some(kind) = self.op {
            let i = columns.op.expect("checked at start");
            self.place(i, Cell::Str(kind.as_bytes()), OP_FIELD.as_bytes())?;
        }
        for i in self.next..columns.names.len() {
            if i > 0 {
                self.out.push(self.quoting.delimiter);
            }
            if self.scattered && self.held.has(i) {
                let (from, to) = self.held.spans[i];
                self.out.extend_from_slice(&self.held.bytes[from..to]);
            }
        }
        self.out.push(b'\n');
        Ok(None)
    }
}

/// The refusal of a record with field `name` twice.
fn twice(name: &str) -> String {
    format!("the record has the field `{name}` twice")
}

/// Whether `a` and `b` are the same bytes: for short names a plain loop
/// beats a call to `memcmp`.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Feeds the members of the JSON object `value` to `line`, with no JSON
/// value built: each member's text is read in place.
fn members(value: &[u8], line: &mut Line<'_>) -> Result<(), String> {
    let mut refused = None;
    let mut de = serde_json::Deserializer::from_slice(value);
    let seed = Members {
        line,
        refused: &mut refused,
    };
    let read = seed.deserialize(&mut de).and_then(|()| de.end());
    match (refused, read) {
        (Some(why), _) => Err(why),
        (None, Ok(())) => Ok(()),
        (None, Err(e)) => Err(format!(
            "a record of a csv sink is a JSON object or a row, and this one is not: {e}"
        )),
    }
}

/// The visitor of [`members`]: a refusal of `line` is kept in `refused`
/// and stops the parse.
struct Members<'l, 'a> {
    line: &'l mut Line<'a>,
    refused: &'l mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Members<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Members<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Text(name)) = map.next_key::<Text<'de>>()? {
            let raw: &'de RawValue = map.next_value()?;
            let raw = raw.get();
            let string;
            let cell = match raw.starts_with('"') {
                true => {
                    string = serde_json::from_str::<Text<'_>>(raw).map_err(de::Error::custom)?;
                    Cell::Str(string.0.as_bytes())
                }
                false => Cell::of_json(raw),
            };
            if let Err(why) = self.line.field(name.as_bytes(), cell) {
                *self.refused = Some(why);
                return Err(de::Error::custom("refused"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use weir_flat::row::{RowWriter, Value};

    use super::*;

    fn layout(columns: Option<&[&str]>, delimiter: u8) -> CsvLayout {
        CsvLayout {
            columns: columns.map(|c| c.iter().map(|n| n.to_string()).collect()),
            header: true,
            delimiter,
        }
    }

    /// A writer of `layout` on an empty file.
    fn writer(layout: &CsvLayout) -> CsvWriter {
        CsvWriter::open(layout, Path::new("unused.csv"), 0).unwrap()
    }

    fn record(value: &[u8], change: Change, encoding: Encoding) -> RecordRef<'_> {
        RecordRef {
            key: Some(b"k"),
            value,
            timestamp: None,
            change,
            encoding,
        }
    }

    /// What `w` writes of the JSON text `value` (an insert), as text.
    fn json_line(w: &mut CsvWriter, value: &str) -> Result<String, String> {
        let mut out = Vec::new();
        let r = record(value.as_bytes(), Change::Insert, Encoding::Bytes);
        w.write(&r, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    fn row_of(fields: &[(&str, Value<'_>)]) -> Vec<u8> {
        let mut row = Vec::new();
        let mut w = RowWriter::new(&mut row);
        for (name, value) in fields {
            w.value(name, *value);
        }
        row
    }

    /// Quoted exactly when a cell holds the delimiter, `"`, `\r`, `\n` or
    /// starts or ends with a space; `"` doubled inside; an empty string is
    /// `""` and a null (or a missing field) an empty cell; what is quoted
    /// depends on the delimiter, numbers included.
    #[test]
    fn cells_are_quoted_when_they_must_be_and_null_is_not_an_empty_string() {
        let cases: &[(&str, &str)] = &[
            ("plain", "plain"),
            ("", "\"\""),
            ("a,b", "\"a,b\""),
            ("say \"hi\"", "\"say \"\"hi\"\"\""),
            ("\"", "\"\"\"\""),
            ("two\nlines", "\"two\nlines\""),
            ("cr\r", "\"cr\r\""),
            (" lead", "\" lead\""),
            ("trail ", "\"trail \""),
            (" ", "\" \""),
            ("in side", "in side"),
            ("tab\tx", "tab\tx"),
            ("a;b", "a;b"),
            ("é日\u{1}", "é日\u{1}"),
        ];
        let mut w = writer(&layout(Some(&["s", "n"]), b','));
        w.header_due = false;
        for (s, cell) in cases {
            let value = serde_json::json!({"s": s, "n": null}).to_string();
            assert_eq!(
                json_line(&mut w, &value).unwrap(),
                format!("{cell},\n"),
                "{s:?}"
            );
        }
        let value = r#"{"s": "a,b;c", "n": 1.5}"#;
        let mut semi = writer(&layout(Some(&["s", "n"]), b';'));
        assert_eq!(json_line(&mut semi, value).unwrap(), "s;n\n\"a,b;c\";1.5\n");
        let mut dot = writer(&layout(Some(&["s", "n"]), b'.'));
        assert_eq!(json_line(&mut dot, value).unwrap(), "s.n\na,b;c.\"1.5\"\n");
        let mut tab = writer(&layout(Some(&["s", "n"]), b'\t'));
        let tabbed = r#"{"s": "a\tb", "n": true}"#;
        assert_eq!(
            json_line(&mut tab, tabbed).unwrap(),
            "s\tn\n\"a\tb\"\ttrue\n"
        );
        // Null, a missing field and an empty string.
        let mut w = writer(&layout(Some(&["a", "b", "c"]), b','));
        w.header_due = false;
        let line = json_line(&mut w, r#"{"a": null, "c": ""}"#).unwrap();
        assert_eq!(line, ",,\"\"\n");
        // What the csv crate reads back is each string as it was.
        let mut out = Vec::new();
        let mut w = writer(&layout(Some(&["s"]), b','));
        for (s, _) in cases {
            let value = serde_json::json!({ "s": s }).to_string();
            let r = record(value.as_bytes(), Change::Insert, Encoding::Bytes);
            w.write(&r, &mut out).unwrap();
        }
        let mut reader = csv::ReaderBuilder::new().from_reader(&out[..]);
        let read: Vec<String> = (reader.records())
            .map(|r| r.unwrap()[0].to_owned())
            .collect();
        let want: Vec<&str> = cases.iter().map(|(s, _)| *s).collect();
        assert_eq!(read, want);
    }

    /// Every kind of a row's field as its cell: numbers as their JSON text
    /// (a decimal digit for digit, a non-finite float as its JSON `null`),
    /// through the row and through its JSON text alike.
    #[test]
    fn every_scalar_kind_is_its_json_text() {
        let fields = [
            ("n", Value::Null),
            ("t", Value::Bool(true)),
            ("f", Value::Bool(false)),
            ("i", Value::Int(i64::MIN)),
            ("u", Value::Uint(u64::MAX)),
            ("x", Value::Float(-1.5e-7)),
            ("big", Value::Float(1e300)),
            ("one", Value::Float(1.0)),
            ("nan", Value::Float(f64::NAN)),
            ("inf", Value::Float(f64::INFINITY)),
            ("d", Value::Decimal("-12.50e+3")),
            ("z", Value::Decimal("0.10")),
            ("s", Value::Str("a \"b\"")),
            ("e", Value::Str("")),
        ];
        let row = row_of(&fields);
        let want = "n,t,f,i,u,x,big,one,nan,inf,d,z,s,e\n,true,false,-9223372036854775808,18446744073709551615,-1.5e-7,1e+300,1.0,,,-12.50e+3,0.10,\"a \"\"b\"\"\",\"\"\n";
        let mut w = writer(&layout(None, b','));
        let mut out = Vec::new();
        w.write(&record(&row, Change::Insert, Encoding::Row), &mut out)
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), want);
        let json = crate::schemas::row_json(&row);
        let mut w = writer(&layout(None, b','));
        assert_eq!(json_line(&mut w, &json).unwrap(), want);
    }

    /// A nested value (JSON path only) is one cell of its compact JSON
    /// text, its strings and numbers as written; spaces around members do
    /// not matter.
    #[test]
    fn a_nested_value_is_its_compact_json_text() {
        let mut w = writer(&layout(Some(&["a", "b", "c"]), b','));
        w.header_due = false;
        let value = "{ \"a\" : [1, 2.50 ,{\"k\" : \"x y\\\"\\n\"}] ,\n \"b\":{ }, \"c\" : \"\\u00e9\\\"\" }";
        let line = json_line(&mut w, value).unwrap();
        assert_eq!(
            line,
            "\"[1,2.50,{\"\"k\"\":\"\"x y\\\"\"\\n\"\"}]\",{},\"é\"\"\"\n"
        );
    }

    /// Values of every kind a row holds, with the strings that need quotes.
    fn candidates() -> Vec<Value<'static>> {
        vec![
            Value::Null,
            Value::Bool(true),
            Value::Bool(false),
            Value::Int(0),
            Value::Int(-17),
            Value::Int(i64::MIN),
            Value::Uint(7),
            Value::Uint(u64::MAX),
            Value::Float(0.1),
            Value::Float(-0.0),
            Value::Float(1e300),
            Value::Float(f64::NAN),
            Value::Float(f64::NEG_INFINITY),
            Value::Decimal("12.50"),
            Value::Decimal("-1e+3"),
            Value::Str(""),
            Value::Str(" "),
            Value::Str("plain"),
            Value::Str("a,b"),
            Value::Str("q\"q"),
            Value::Str("l\nm\r\n"),
            Value::Str(" lead"),
            Value::Str("\u{1}é日\\"),
        ]
    }

    /// The text of `value`'s cell as a CSV reader reads it back; `None`
    /// for an empty cell.
    fn model(value: Value<'_>) -> Option<String> {
        Some(match value {
            Value::Null => return None,
            Value::Float(x) if !x.is_finite() => return None,
            Value::Float(x) => serde_json::to_string(&x).unwrap(),
            Value::Bool(b) => b.to_string(),
            Value::Int(n) => n.to_string(),
            Value::Uint(n) => n.to_string(),
            Value::Str(s) | Value::Decimal(s) => s.to_owned(),
        })
    }

    /// The cells the line of `fields` saying `change` holds under
    /// `columns`, as a CSV reader reads them back.
    fn model_line(
        columns: &[String],
        fields: &[(&str, Value<'_>)],
        change: Change,
    ) -> Vec<Option<String>> {
        (columns.iter())
            .map(|c| match fields.iter().find(|(n, _)| n == c) {
                _ if c == OP_FIELD && change != Change::Insert => Some(change.name().to_owned()),
                Some((_, v)) => model(*v),
                None => None,
            })
            .collect()
    }

    /// Random rows, their fields in random order, some missing, some
    /// unknown or twice, of random change kinds: what a writer makes of
    /// each row is byte for byte what another makes of its JSON text,
    /// lines and refusals alike, with columns given, and learned from the
    /// first record (which a refusal leaves unlearned); the csv crate
    /// reads back each line's cells as the model says.
    #[test]
    fn a_row_is_written_as_its_json_text_is() {
        let names = ["a", "b", "c", "op", "d", "x"];
        let values = candidates();
        let (mut x, mut written, mut refused) = (9u64, 0, 0);
        let mut next = |n: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % n
        };
        for given in [Some(&["a", "b", "c", "op", "d"][..]), None] {
            for delimiter in [b',', b';', b'.'] {
                let layout = layout(given, delimiter);
                let (mut rows, mut texts) = (writer(&layout), writer(&layout));
                let (mut from_rows, mut from_texts) = (Vec::new(), Vec::new());
                let mut want: Vec<Vec<Option<String>>> = Vec::new();
                for _ in 0..5_000 {
                    let mut fields = Vec::new();
                    for _ in 0..next(7) {
                        // "x" is no column; a name may come twice.
                        let name = names[next(names.len())];
                        fields.push((name, values[next(values.len())]));
                    }
                    let change = match next(4) {
                        0 => Change::ALL[next(5)],
                        _ => Change::Insert,
                    };
                    let row = row_of(&fields);
                    let json = crate::schemas::row_json(&row);
                    let a = rows.write(&record(&row, change, Encoding::Row), &mut from_rows);
                    let r = record(json.as_bytes(), change, Encoding::Bytes);
                    let b = texts.write(&r, &mut from_texts);
                    assert_eq!(a, b, "{json} {change:?}");
                    match a {
                        Ok(()) => {
                            written += 1;
                            let columns = &rows.columns.as_ref().unwrap().names;
                            if want.is_empty() {
                                want.push(columns.iter().cloned().map(Some).collect());
                            }
                            want.push(model_line(columns, &fields, change));
                        }
                        Err(_) => refused += 1,
                    }
                    assert_eq!(from_rows, from_texts);
                }
                // A reader skips the empty line of one empty cell.
                want.retain(|cells| cells != &[None]);
                let want: Vec<Vec<String>> = (want.into_iter())
                    .map(|cells| cells.into_iter().map(Option::unwrap_or_default).collect())
                    .collect();
                let mut reader = csv::ReaderBuilder::new()
                    .has_headers(false)
                    .delimiter(delimiter)
                    .from_reader(&from_rows[..]);
                let read: Vec<Vec<String>> = (reader.records())
                    .map(|r| r.unwrap().iter().map(str::to_owned).collect())
                    .collect();
                assert_eq!(read, want);
            }
        }
        assert!(written > 5_000 && refused > 5_000, "{written} {refused}");
    }

    /// A field none of the columns names, a field twice, a value that is
    /// no JSON object and a change without an `op` column are refused,
    /// named, writing nothing; a change with one fills it (replacing the
    /// record's own `op`), as `jsonl`'s `op` field.
    #[test]
    fn records_that_do_not_fit_the_columns_are_refused_by_name() {
        let mut w = writer(&layout(Some(&["word", "count"]), b','));
        let mut out = b"x".to_vec();
        let mut refusal = |value: &str, change: Change| {
            let r = record(value.as_bytes(), change, Encoding::Bytes);
            let e = w.write(&r, &mut out).unwrap_err();
            assert_eq!(out, b"x", "{value}: nothing written");
            e
        };
        let e = refusal(r#"{"word":"a","count":1,"extra":true}"#, Change::Insert);
        assert!(
            e.contains("field `extra`") && e.contains("(word, count)"),
            "{e}"
        );
        assert!(e.contains("add it to `columns`"), "{e}");
        let e = refusal(r#"{"count":1,"word":"a","count":2}"#, Change::Insert);
        assert!(e.contains("field `count` twice"), "{e}");
        let e = refusal("[1]", Change::Insert);
        assert!(e.contains("JSON object or a row"), "{e}");
        let e = refusal(r#"{"word":"a"} x"#, Change::Insert);
        assert!(e.contains("JSON object or a row"), "{e}");
        let e = refusal(r#"{"word":"a","count":1}"#, Change::Delete);
        assert!(
            e.contains("`delete`") && e.contains("add \"op\" to `columns`"),
            "{e}"
        );
        let mut w = writer(&layout(Some(&["op", "word", "count"]), b','));
        let mut out = Vec::new();
        let changes = [
            (r#"{"word":"a","count":1}"#, Change::Insert),
            (r#"{"word":"a","count":1,"op":"x"}"#, Change::UpdateBefore),
            (r#"{"count":2,"word":"a"}"#, Change::UpdateAfter),
            (r#"{"word":"a","op":"mine"}"#, Change::Insert),
            (r#"{}"#, Change::Truncate),
        ];
        for (value, change) in changes {
            let r = record(value.as_bytes(), change, Encoding::Bytes);
            w.write(&r, &mut out).unwrap();
        }
        let want =
            "op,word,count\n,a,1\nupdate-before,a,1\nupdate-after,a,2\nmine,a,\ntruncate,,\n";
        assert_eq!(String::from_utf8(out).unwrap(), want);
        // Learned from a first record saying a change: `op` comes last.
        let mut w = writer(&layout(None, b','));
        let mut out = Vec::new();
        let r = record(br#"{"op":"x","id":1}"#, Change::Delete, Encoding::Bytes);
        w.write(&r, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "id,op\n1,delete\n");
        // A first record without fields sets no columns.
        let mut w = writer(&layout(None, b','));
        let e = json_line(&mut w, "{}").unwrap_err();
        assert!(e.contains("set `columns`"), "{e}");
        assert_eq!(json_line(&mut w, r#"{"a":1}"#).unwrap(), "a\n1\n");
    }

    /// A file that is not empty is continued under the columns of its
    /// header line (read with its quotes and delimiter), with no second
    /// header; `columns` that differ from them are refused with the fix;
    /// without a header, `columns` are taken as they are.
    #[test]
    fn a_file_is_continued_under_its_header_and_other_columns_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        let mut first = writer(&layout(None, b';'));
        let mut text = Vec::new();
        let r = record(
            br#"{"a;b":1,"c\"":2," d":3}"#,
            Change::Insert,
            Encoding::Bytes,
        );
        first.write(&r, &mut text).unwrap();
        assert_eq!(
            String::from_utf8(text.clone()).unwrap(),
            "\"a;b\";\"c\"\"\";\" d\"\n1;2;3\n"
        );
        std::fs::write(&path, &text).unwrap();
        let len = text.len() as u64;
        let mut again = CsvWriter::open(&layout(None, b';'), &path, len).unwrap();
        let r = record(br#"{" d":6,"a;b":4}"#, Change::Insert, Encoding::Bytes);
        let mut out = Vec::new();
        again.write(&r, &mut out).unwrap();
        assert_eq!(out, b"4;;6\n", "no header; the file's columns");
        let same = layout(Some(&["a;b", "c\"", " d"]), b';');
        CsvWriter::open(&same, &path, len).unwrap();
        let other = layout(Some(&["a;b", " d"]), b';');
        let e = CsvWriter::open(&other, &path, len).err().unwrap();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains(r#"set columns = ["a;b", "c\"", " d"]"#), "{e}");
        assert!(e.contains("--restore none"), "{e}");
        let headless = CsvLayout {
            header: false,
            ..layout(Some(&["x"]), b',')
        };
        let mut w = CsvWriter::open(&headless, &path, len).unwrap();
        let mut out = Vec::new();
        let r = record(br#"{"x":1}"#, Change::Insert, Encoding::Bytes);
        w.write(&r, &mut out).unwrap();
        assert_eq!(out, b"1\n");
        let mut w = writer(&headless);
        let mut out = Vec::new();
        w.write(&r, &mut out).unwrap();
        assert_eq!(out, b"1\n", "no header into an empty file either");
        std::fs::write(&path, "a,a\n1,2\n").unwrap();
        let e = CsvWriter::open(&layout(None, b','), &path, 8)
            .err()
            .unwrap();
        assert!(e.contains("twice"), "{e}");
    }
}
