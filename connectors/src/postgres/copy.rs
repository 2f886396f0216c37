//! Records to `COPY ... FROM STDIN` text (PostgreSQL's text format), read
//! field by field from the record's JSON text (no map of values), with
//! every value checked against its column's type first, and the epoch's
//! rows grouped by the columns they name ([`Groups`]) or, for upsert,
//! merged by key (`super::merged`). No I/O: the destination sends the text.
//!
//! A field is written in the text format: `\N` for NULL, and a backslash,
//! tab, newline or carriage return escaped with a backslash, so that a row
//! is one line of tab-separated fields.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use std::ops::Range;

use serde_json::Value;
use weir_flat::row;

/// How a column's values are checked and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `smallint`, `integer`, `bigint`: a JSON integer in the type's range.
    Int(i64, i64),
    /// `numeric`, `real`, `double precision`: a JSON number.
    Number,
    /// `boolean`: `true` or `false`.
    Bool,
    /// `json`, `jsonb`: any JSON value, written as its JSON text.
    Json,
    /// Text types and every other type (dates, times, uuids, enums,
    /// arrays...): a JSON string, which PostgreSQL parses as the type.
    Text,
}

impl Kind {
    /// The kind of a column of type `typname` (`pg_type.typname`, the base
    /// type of a domain).
    pub(super) fn of(typname: &str) -> Kind {
        match typname {
            "int2" => Kind::Int(i16::MIN.into(), i16::MAX.into()),
            "int4" => Kind::Int(i32::MIN.into(), i32::MAX.into()),
            "int8" => Kind::Int(i64::MIN, i64::MAX),
            "numeric" | "float4" | "float8" => Kind::Number,
            "bool" => Kind::Bool,
            "json" | "jsonb" => Kind::Json,
            _ => Kind::Text,
        }
    }

    /// What a value of this kind must be, for messages.
    fn expected(self) -> String {
        match self {
            Kind::Int(lo, hi) => format!("a JSON integer in {lo}..={hi}"),
            Kind::Number => "a JSON number".into(),
            Kind::Bool => "true or false".into(),
            Kind::Json => "a JSON value".into(),
            Kind::Text => "a JSON string".into(),
        }
    }
}

/// One column of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Column {
    /// Its name (`pg_attribute.attname`), matched exactly by field names.
    pub(super) name: String,
    /// Its type as SQL writes it (`format_type`), for messages.
    pub(super) sql_type: String,
    /// How its values are checked.
    pub(super) kind: Kind,
    /// A generated column: PostgreSQL computes it, no record may set it.
    pub(super) generated: bool,
}

/// The columns of the table, looked up by name.
#[derive(Debug, Clone)]
pub(super) struct Columns {
    pub(super) list: Vec<Column>,
    by_name: HashMap<String, usize, RandomState>,
}

impl Columns {
    pub(super) fn new(list: Vec<Column>) -> Columns {
        let by_name = list
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        Columns { list, by_name }
    }

    /// The index of the column named `name`.
    pub(super) fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }
}

/// One record's fields as COPY text, reused from record to record: the
/// column of each field (ascending) and where its text is in `text`.
#[derive(Debug, Default)]
pub(super) struct Row {
    cells: Vec<(usize, Range<usize>)>,
    text: Vec<u8>,
    /// JSON text of a `json` value, before escaping.
    json: Vec<u8>,
}

impl Row {
    /// Reads `row_bytes`, a record's value as typed fields
    /// (`weir_flat::row`, checked by the host), into this row as
    /// [`read`](Self::read) reads the same record's JSON text: the same
    /// checks, COPY text and messages, without JSON in between.
    pub(super) fn read_fields(
        &mut self,
        columns: &Columns,
        ignore_unknown: bool,
        row_bytes: &[u8],
    ) -> Result<(), String> {
        self.clear();
        for field in row::fields(row_bytes) {
            let (name, value) = field.map_err(|e| format!("a malformed row: {e}"))?;
            let record = Shown::Row(row_bytes);
            self.add(columns, ignore_unknown, record, name, Field::Typed(value))?;
        }
        self.cells.sort_unstable_by_key(|(col, _)| *col);
        Ok(())
    }

    /// Reads record `value` (a JSON object) into this row: every field
    /// checked against its column and encoded. Fields without a column are
    /// an error, or skipped with `ignore_unknown`. The message names the
    /// column and shows the record.
    pub(super) fn read(
        &mut self,
        columns: &Columns,
        ignore_unknown: bool,
        value: &[u8],
    ) -> Result<(), String> {
        self.clear();
        let not_json = |e: &dyn std::fmt::Display| {
            format!(
                "a record is not JSON ({e}): {}; the postgres sink writes JSON objects, one field per column",
                shorten(value)
            )
        };
        if value.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(
                match serde_json::from_slice::<serde::de::IgnoredAny>(value) {
                    Ok(_) => format!(
                        "a record is {}, not a JSON object: {}; the postgres sink writes JSON objects, one field per column",
                        raw_type(String::from_utf8_lossy(value).trim_start()),
                        shorten(value)
                    ),
                    Err(e) => not_json(&e),
                },
            );
        }
        // The fields are read straight from the record's bytes, without a
        // map of values; a field refused by its column stops the parse.
        let mut refused = None;
        let mut de = serde_json::Deserializer::from_slice(value);
        let fields = Fields {
            row: self,
            columns,
            ignore_unknown,
            record: value,
            refused: &mut refused,
        };
        let parsed = serde::Deserializer::deserialize_map(&mut de, fields).and_then(|()| de.end());
        if let Some(message) = refused {
            return Err(message);
        }
        parsed.map_err(|e| not_json(&e))?;
        self.cells.sort_unstable_by_key(|(col, _)| *col);
        Ok(())
    }

    /// Adds field `name` of `record`, whose value is `value`.
    fn add(
        &mut self,
        columns: &Columns,
        ignore_unknown: bool,
        record: Shown<'_>,
        name: &str,
        value: Field<'_>,
    ) -> Result<(), String> {
        let Some(col) = columns.find(name) else {
            if ignore_unknown {
                return Ok(());
            }
            return Err(format!(
                "field `{name}` of record {} has no column in the table; add the column, \
                 remove the field, or set ignore_unknown = true",
                record.short()
            ));
        };
        let column = &columns.list[col];
        if column.generated {
            if ignore_unknown {
                return Ok(());
            }
            return Err(format!(
                "field `{name}` of record {} sets generated column `{name}`, which PostgreSQL computes; \
                 remove the field, or set ignore_unknown = true",
                record.short()
            ));
        }
        let start = self.text.len();
        let encoded = match value {
            Field::Json(raw) => encode(raw, column.kind, &mut self.text, &mut self.json),
            Field::Typed(v) => encode_typed(v, column.kind, &mut self.text, &mut self.json),
        };
        if let Err(got) = encoded {
            return Err(format!(
                "column `{name}` ({}) needs {}, got {got} in record {}; fix the records or the column's type",
                column.sql_type,
                column.kind.expected(),
                record.short()
            ));
        }
        let range = start..self.text.len();
        // A field given twice: the last one counts, as in a JSON map.
        match self.cells.iter_mut().find(|(c, _)| *c == col) {
            Some(cell) => cell.1 = range,
            None => self.cells.push((col, range)),
        }
        Ok(())
    }

    /// The columns the record names, ascending.
    pub(super) fn columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.cells.iter().map(|(col, _)| *col)
    }

    /// The COPY text of the field of column `col`, if the record has one.
    pub(super) fn field(&self, col: usize) -> Option<&[u8]> {
        let i = self.cells.binary_search_by_key(&col, |(c, _)| *c).ok()?;
        Some(&self.text[self.cells[i].1.clone()])
    }

    /// Appends the row as one COPY line (fields in column order).
    /// The fields read, as (column, range of [`text`](Self::text)).
    pub(super) fn cells(&self) -> &[(usize, Range<usize>)] {
        &self.cells
    }

    /// The COPY text of the fields.
    pub(super) fn text(&self) -> &[u8] {
        &self.text
    }

    /// Empties the row.
    pub(super) fn clear(&mut self) {
        self.cells.clear();
        self.text.clear();
    }

    /// Appends a field of column `col`, given as COPY text (columns in
    /// ascending order).
    pub(super) fn push_cell(&mut self, col: usize, text: &[u8]) {
        let start = self.text.len();
        self.text.extend_from_slice(text);
        self.cells.push((col, start..self.text.len()));
    }

    pub(super) fn write_line(&self, out: &mut Vec<u8>) {
        for (i, (_, range)) in self.cells.iter().enumerate() {
            if i > 0 {
                out.push(b'\t');
            }
            out.extend_from_slice(&self.text[range.clone()]);
        }
        out.push(b'\n');
    }
}

/// Writes the JSON value `raw` (its text) as a COPY field of a column of
/// `kind`, or returns what the value is when it does not fit (for the
/// message).
fn encode(raw: &str, kind: Kind, out: &mut Vec<u8>, json: &mut Vec<u8>) -> Result<(), String> {
    let got = || format!("{} {}", raw_type(raw), shorten(raw.as_bytes()));
    let first = raw.as_bytes().first().copied().unwrap_or(b'n');
    match (kind, first) {
        (_, b'n') => out.extend_from_slice(b"\\N"),
        // A JSON integer's text is its COPY text; anything else (a
        // fraction, an exponent, out of range) is refused.
        (Kind::Int(lo, hi), b'-' | b'0'..=b'9') => match raw.parse::<i64>() {
            Ok(v) if (lo..=hi).contains(&v) => out.extend_from_slice(raw.as_bytes()),
            _ => return Err(got()),
        },
        // JSON numbers hold no tab, newline or backslash, and PostgreSQL
        // reads their every digit (no rounding through a float).
        (Kind::Number, b'-' | b'0'..=b'9') => out.extend_from_slice(raw.as_bytes()),
        (Kind::Bool, b't') => out.push(b't'),
        (Kind::Bool, b'f') => out.push(b'f'),
        (Kind::Json, _) => {
            // Written compact, as serde_json writes it.
            let value: Value = serde_json::from_str(raw).map_err(|_| got())?;
            json.clear();
            serde_json::to_writer(&mut *json, &value).expect("writing JSON to memory");
            escape(json, out);
        }
        (Kind::Text, b'"') => {
            let text: std::borrow::Cow<str> = match serde_json::from_str::<&str>(raw) {
                Ok(s) => s.into(),
                Err(_) => serde_json::from_str::<String>(raw)
                    .map_err(|_| got())?
                    .into(),
            };
            if text.contains('\0') {
                return Err(format!(
                    "a string with a NUL character, which PostgreSQL text cannot hold: {}",
                    shorten(text.as_bytes())
                ));
            }
            escape(text.as_bytes(), out);
        }
        _ => return Err(got()),
    }
    Ok(())
}

/// A record's value as the messages about it show it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shown<'a> {
    /// JSON text.
    Json(&'a [u8]),
    /// A row, shown as its JSON text.
    Row(&'a [u8]),
}

impl Shown<'_> {
    /// The record on one line, cut short ([`shorten`]).
    pub(super) fn short(self) -> String {
        match self {
            Shown::Json(text) => shorten(text),
            Shown::Row(row) => {
                let mut text = Vec::new();
                match row::write_json(row, &mut text) {
                    Ok(()) => shorten(&text),
                    Err(_) => shorten(row),
                }
            }
        }
    }
}

/// A field's value: JSON text, or typed (a row's field).
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Json(&'a str),
    Typed(row::Value<'a>),
}

/// Writes a row's field `value` as a COPY field of a column of `kind`,
/// as [`encode`] writes the field's JSON text: the common cases directly,
/// every other (and every refusal, for its message) through that JSON.
fn encode_typed(
    value: row::Value<'_>,
    kind: Kind,
    out: &mut Vec<u8>,
    json: &mut Vec<u8>,
) -> Result<(), String> {
    use row::Value as V;
    match (kind, value) {
        (_, V::Null) => out.extend_from_slice(b"\\N"),
        (Kind::Int(lo, hi), V::Int(n)) if (lo..=hi).contains(&n) => {
            weir_flat::json::push_i64(out, n)
        }
        (Kind::Number, V::Int(n)) => weir_flat::json::push_i64(out, n),
        (Kind::Number, V::Uint(n)) => weir_flat::json::push_u64(out, n),
        (Kind::Number, V::Float(x)) if x.is_finite() => weir_flat::json::push_f64(out, x),
        (Kind::Number, V::Decimal(text)) => out.extend_from_slice(text.as_bytes()),
        (Kind::Bool, V::Bool(b)) => out.push(if b { b't' } else { b'f' }),
        (Kind::Text, V::Str(s)) if !s.contains('\0') => escape(s.as_bytes(), out),
        _ => {
            let mut raw = Vec::new();
            value.write_json(&mut raw);
            let raw = String::from_utf8(raw).expect("JSON text is UTF-8");
            encode(&raw, kind, out, json)?;
        }
    }
    Ok(())
}

/// The fields of a record object, handed to [`Row::add`] one by one as
/// they are parsed; a refusal is kept in `refused` and stops the parse.
struct Fields<'a> {
    row: &'a mut Row,
    columns: &'a Columns,
    ignore_unknown: bool,
    record: &'a [u8],
    refused: &'a mut Option<String>,
}

impl<'de> serde::de::Visitor<'de> for Fields<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(name) = map.next_key_seed(FieldName)? {
            let raw: &'de serde_json::value::RawValue = map.next_value()?;
            let added = self.row.add(
                self.columns,
                self.ignore_unknown,
                Shown::Json(self.record),
                &name,
                Field::Json(raw.get()),
            );
            if let Err(message) = added {
                *self.refused = Some(message);
                return Err(serde::de::Error::custom("refused"));
            }
        }
        Ok(())
    }
}

/// A field name, borrowed from the record unless it holds escapes.
struct FieldName;

impl<'de> serde::de::DeserializeSeed<'de> for FieldName {
    type Value = std::borrow::Cow<'de, str>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for FieldName {
    type Value = std::borrow::Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(s.into())
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(s.to_owned().into())
    }
}

/// Appends `text` escaped for a COPY text field.
pub(super) fn escape(text: &[u8], out: &mut Vec<u8>) {
    let special = |b: &u8| matches!(b, b'\\' | b'\t' | b'\n' | b'\r');
    if !text.iter().any(special) {
        out.extend_from_slice(text);
        return;
    }
    out.reserve(text.len() + 8);
    for &b in text {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

/// Line `line` (from 1) of COPY text `copy`, shown as `(col=value, ...)`
/// for messages: which row PostgreSQL refused.
pub(super) fn show_line(copy: &[u8], line: usize, columns: &[&str]) -> Option<String> {
    let text = copy.split(|b| *b == b'\n').nth(line.checked_sub(1)?)?;
    let fields: Vec<String> = text
        .split(|b| *b == b'\t')
        .zip(columns)
        .map(|(v, c)| format!("{c}={}", String::from_utf8_lossy(v)))
        .collect();
    Some(shorten(format!("({})", fields.join(", ")).as_bytes()))
}

/// `text` on one line, cut to about 100 characters.
pub(super) fn shorten(text: &[u8]) -> String {
    const MAX: usize = 100;
    let text = String::from_utf8_lossy(text);
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == MAX {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}

/// What the JSON text `raw` is, for messages (`a string`).
fn raw_type(raw: &str) -> &'static str {
    match raw.as_bytes().first() {
        Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        Some(b'"') => "a string",
        Some(b'[') => "an array",
        Some(b'{') => "an object",
        _ => "a number",
    }
}

/// The COPY lines of an epoch's rows, one group per set of columns the
/// rows name (a COPY names its columns once; the columns a row leaves out
/// get their defaults). Groups are in order of first appearance.
#[derive(Debug, Default)]
pub(super) struct Groups {
    index: HashMap<Vec<usize>, usize, RandomState>,
    /// The group the last row went to: consecutive rows mostly name the
    /// same columns, and then need no lookup.
    last: Option<usize>,
    groups: Vec<Group>,
    columns: Vec<usize>,
    /// The line buffers of earlier epochs' groups, for reuse.
    spare: Vec<Vec<u8>>,
}

/// Capacity a buffer keeps from one epoch to the next (a large epoch's
/// memory is given back).
const KEEP: usize = 4 << 20;

/// The rows of one set of columns.
#[derive(Debug)]
pub(super) struct Group {
    /// The columns, ascending.
    pub(super) columns: Vec<usize>,
    /// COPY lines, one per row.
    pub(super) copy: Vec<u8>,
}

impl Groups {
    /// Appends `row` to the group of its columns; returns the group's index.
    pub(super) fn push(&mut self, row: &Row) -> usize {
        if let Some(g) = self.last
            && self.groups[g].columns.iter().copied().eq(row.columns())
        {
            row.write_line(&mut self.groups[g].copy);
            return g;
        }
        self.columns.clear();
        self.columns.extend(row.columns());
        let g = match self.index.get(&self.columns) {
            Some(g) => *g,
            None => {
                self.index.insert(self.columns.clone(), self.groups.len());
                let copy = self.spare.pop().unwrap_or_default();
                self.groups.push(Group {
                    columns: self.columns.clone(),
                    copy,
                });
                self.groups.len() - 1
            }
        };
        row.write_line(&mut self.groups[g].copy);
        self.last = Some(g);
        g
    }

    /// Every group, for sending and emptying their lines.
    pub(super) fn groups_mut(&mut self) -> &mut [Group] {
        &mut self.groups
    }

    /// Forgets every group (an epoch starts), keeping their buffers.
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.last = None;
        for group in self.groups.drain(..) {
            let mut copy = group.copy;
            copy.clear();
            copy.shrink_to(KEEP);
            self.spare.push(copy);
        }
        self.spare.truncate(8);
    }
}

/// Checks that `row`, read from `record`, has a value for each of the
/// `key` columns: an upsert needs one, and `NULL` is none.
pub(super) fn check_key(
    row: &Row,
    key: &[usize],
    columns: &Columns,
    record: Shown<'_>,
) -> Result<(), String> {
    for &col in key {
        let found = row.field(col);
        if found.is_none_or(|v| v == b"\\N") {
            let how = if found.is_some() { "null" } else { "missing" };
            return Err(format!(
                "key column `{}` is {how} in record {}; every record needs a value for each `key` column",
                columns.list[col].name,
                record.short()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::postgres) fn columns() -> Columns {
        let col = |name: &str, sql_type: &str, typname: &str| Column {
            name: name.into(),
            sql_type: sql_type.into(),
            kind: Kind::of(typname),
            generated: false,
        };
        let mut list = vec![
            col("id", "integer", "int4"),
            col("small", "smallint", "int2"),
            col("big", "bigint", "int8"),
            col("x", "double precision", "float8"),
            col("ok", "boolean", "bool"),
            col("doc", "jsonb", "jsonb"),
            col("name", "text", "text"),
            col("day", "date", "date"),
        ];
        list.push(Column {
            generated: true,
            ..col("total", "bigint", "int8")
        });
        Columns::new(list)
    }

    fn line(record: &str) -> Result<String, String> {
        let mut row = Row::default();
        row.read(&columns(), false, record.as_bytes())?;
        let mut out = Vec::new();
        row.write_line(&mut out);
        Ok(String::from_utf8(out).unwrap())
    }

    /// A row's fields give exactly what the JSON text of the same record
    /// gives: the same COPY line, or the same message.
    #[test]
    fn a_rows_fields_read_as_its_json_text_reads() {
        use weir_flat::row::RowWriter;
        type Write = fn(&mut RowWriter<'_>);
        let rows: [Write; 13] = [
            |r| {
                r.i64("id", 7).str("name", "a\tb\\c").bool("ok", true);
                r.f64("x", 1.5).null("day");
            },
            |r| {
                r.i64("big", i64::MIN)
                    .decimal("x", "12.50")
                    .u64("small", 12);
            },
            |r| {
                r.str("doc", "q").f64("x", f64::NAN).decimal("id", "3");
            },
            |r| {
                r.decimal("doc", "1.50").i64("id", 1).i64("id", 2);
            },
            |r| {
                r.str("day", "2024-01-01").u64("x", u64::MAX);
            },
            |r| {
                r.str("id", "7");
            },
            |r| {
                r.i64("small", 40000);
            },
            |r| {
                r.u64("big", u64::MAX);
            },
            |r| {
                r.str("name", "nul\0");
            },
            |r| {
                r.i64("total", 1);
            },
            |r| {
                r.bool("nope", true);
            },
            |r| {
                r.f64("id", 2.0);
            },
            |r| {
                r.bool("name", false);
            },
        ];
        let (mut lines, mut refusals) = (0, 0);
        for ignore_unknown in [false, true] {
            for write in rows {
                let mut bytes = Vec::new();
                write(&mut RowWriter::new(&mut bytes));
                let mut json = Vec::new();
                weir_flat::row::write_json(&bytes, &mut json).unwrap();
                let line = |row: &Row| {
                    let mut out = Vec::new();
                    row.write_line(&mut out);
                    String::from_utf8(out).unwrap()
                };
                let (mut typed, mut text) = (Row::default(), Row::default());
                let from_row =
                    (typed.read_fields(&columns(), ignore_unknown, &bytes)).map(|()| line(&typed));
                let from_json =
                    (text.read(&columns(), ignore_unknown, &json)).map(|()| line(&text));
                assert_eq!(from_row, from_json, "{}", String::from_utf8_lossy(&json));
                match from_row {
                    Ok(_) => lines += 1,
                    Err(_) => refusals += 1,
                }
            }
        }
        assert!(
            lines >= 8 && refusals >= 10,
            "{lines} lines, {refusals} refusals"
        );
    }

    /// Fields are read from the record's text: a number keeps every digit,
    /// an escaped field name is its column, a field given twice counts once
    /// (the last, as in a JSON map), and trailing text is not JSON.
    #[test]
    fn fields_are_read_from_the_records_text() {
        let got = line(r#"{"x": 12345678901234567890.125, "na\u006de": "n"}"#).unwrap();
        assert_eq!(got, "12345678901234567890.125\tn\n");
        assert_eq!(line(r#"{"id": 1, "id": 2}"#).unwrap(), "2\n");
        assert!(line(r#"{"id": 1} x"#).unwrap_err().contains("is not JSON"));
        assert!(line(r#"{"id": 1"#).unwrap_err().contains("is not JSON"));
    }

    #[test]
    fn escaping_covers_backslash_tab_newline_and_return() {
        let mut out = Vec::new();
        escape(b"a\\b\tc\nd\re", &mut out);
        assert_eq!(out, b"a\\\\b\\tc\\nd\\re");
        out.clear();
        escape("plain ünïcode \\.".as_bytes(), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "plain ünïcode \\\\.");
    }

    #[test]
    fn fields_are_written_in_column_order_with_null_as_backslash_n() {
        let got = line(r#"{"name": "a\tb", "id": 7, "ok": true, "x": 1.5, "day": null}"#).unwrap();
        assert_eq!(got, "7\t1.5\tt\ta\\tb\t\\N\n");
        let got = line(r#"{"doc": {"k": "line\nnext", "q": "\\"}, "big": -9007199254740993}"#);
        assert_eq!(
            got.unwrap(),
            "-9007199254740993\t{\"k\":\"line\\\\nnext\",\"q\":\"\\\\\\\\\"}\n"
        );
    }

    #[test]
    fn values_of_the_wrong_type_name_the_column_and_the_record() {
        let err = line(r#"{"id": "7"}"#).unwrap_err();
        assert!(
            err.contains("column `id` (integer) needs a JSON integer in -2147483648..=2147483647")
                && err.contains("got a string \"7\"")
                && err.contains(r#"in record {"id": "7"}"#),
            "{err}"
        );
        let err = line(r#"{"small": 40000}"#).unwrap_err();
        assert!(
            err.contains("`small` (smallint)") && err.contains("got a number 40000"),
            "{err}"
        );
        assert!(
            line(r#"{"id": 1.5}"#)
                .unwrap_err()
                .contains("got a number 1.5")
        );
        assert!(
            line(r#"{"x": "1"}"#)
                .unwrap_err()
                .contains("needs a JSON number")
        );
        assert!(
            line(r#"{"ok": 1}"#)
                .unwrap_err()
                .contains("needs true or false")
        );
        assert!(
            line(r#"{"name": 1}"#)
                .unwrap_err()
                .contains("needs a JSON string")
        );
        assert!(
            line(r#"{"day": 20240101}"#)
                .unwrap_err()
                .contains("`day` (date) needs a JSON string")
        );
        assert!(line(r#"{"name": "a\u0000b"}"#).unwrap_err().contains("NUL"));
        assert!(line(r#"{"doc": [1, "x", null]}"#).is_ok());
    }

    #[test]
    fn records_that_are_not_objects_or_have_unknown_fields_are_refused() {
        let err = line("[1, 2]").unwrap_err();
        assert!(
            err.contains("is an array, not a JSON object: [1, 2]"),
            "{err}"
        );
        let err = line("hello").unwrap_err();
        assert!(
            err.contains("is not JSON") && err.contains("hello"),
            "{err}"
        );
        let err = line(r#"{"id": 1, "colour": "red"}"#).unwrap_err();
        assert!(
            err.contains("field `colour`") && err.contains("ignore_unknown = true"),
            "{err}"
        );
        let err = line(r#"{"total": 3}"#).unwrap_err();
        assert!(err.contains("generated column `total`"), "{err}");
        let mut row = Row::default();
        row.read(
            &columns(),
            true,
            br#"{"id": 1, "colour": "red", "total": 3}"#,
        )
        .unwrap();
        assert_eq!(row.columns().collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn a_long_record_is_shortened_in_messages() {
        let long = format!(r#"{{"id": "{}"}}"#, "x".repeat(500));
        let err = line(&long).unwrap_err();
        assert!(err.len() < 400 && err.contains('…'), "{err}");
        assert_eq!(shorten(b"a\nb"), "a b");
    }

    #[test]
    fn rows_are_grouped_by_the_columns_they_name() {
        let cols = columns();
        let mut row = Row::default();
        let mut groups = Groups::default();
        for r in [
            r#"{"id": 1, "name": "a"}"#,
            r#"{"id": 2}"#,
            r#"{"name": "c", "id": 3}"#,
        ] {
            row.read(&cols, false, r.as_bytes()).unwrap();
            groups.push(&row);
        }
        let got: Vec<(Vec<usize>, String)> = groups
            .groups_mut()
            .iter()
            .map(|g| {
                (
                    g.columns.clone(),
                    String::from_utf8(g.copy.clone()).unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [(vec![0, 6], "1\ta\n3\tc\n".into()), (vec![0], "2\n".into())]
        );
    }

    #[test]
    fn a_refused_copy_line_is_shown_with_its_columns() {
        let copy = b"1\ta\n2\tb\\tc\n";
        assert_eq!(
            show_line(copy, 2, &["id", "name"]).unwrap(),
            "(id=2, name=b\\tc)"
        );
        assert_eq!(show_line(copy, 0, &["id"]), None);
    }
}
