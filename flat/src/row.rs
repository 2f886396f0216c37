//! Rows: a record's value as named, typed fields, which a plugin writes
//! without formatting any text ([`RowWriter`]) and the host encodes once,
//! on the thread that reads the record ([`write_json`]). A span says its
//! value is a row with [`Encoding::Row`](crate::Encoding::Row).
//!
//! A row is its fields one after another, each:
//!
//! | bytes | field |
//! |---|---|
//! | 1 | type: 0 null, 1 false, 2 true, 3 signed integer, 4 unsigned integer, 5 float, 6 string, 7 decimal |
//! | 1 | the name's length `n` |
//! | `n` | the name, UTF-8 |
//! | 8 | for an integer or a float: the number (`i64`, `u64`, `f64`, little-endian) |
//! | 4 + `m` | for a string: its length `m` (`u32`, little-endian), then its bytes, UTF-8 |
//! | 4 + `m` | for a decimal: its length `m` (`u32`, little-endian), then its text, a JSON number (`12.50`, `-1e+3`) |
//!
//! As JSON a row is an object of its fields in their order (a name given
//! twice appears twice). [`check`] validates a row from the other side of
//! the Wasm boundary.

use alloc::vec::Vec;
use core::fmt;

use crate::{BadSpans, HAS_KEY, ROW, Range, SPAN_BYTES, json, u32_at};

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const INT: u8 = 3;
const UINT: u8 = 4;
const FLOAT: u8 = 5;
const STRING: u8 = 6;
const DECIMAL: u8 = 7;

/// The value of one field of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// JSON `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    Uint(u64),
    /// A float (JSON `null` when not finite, as `serde_json` writes it).
    Float(f64),
    /// A string.
    Str(&'a str),
    /// A number as the text of a JSON number, kept digit for digit
    /// (`12.50`): money, `numeric` columns.
    Decimal(&'a str),
}

impl Value<'_> {
    /// Appends the value's JSON text, as a row's JSON object holds it.
    ///
    /// ```
    /// let mut out = Vec::new();
    /// weir_flat::row::Value::Decimal("1.50").write_json(&mut out);
    /// weir_flat::row::Value::Str("a").write_json(&mut out);
    /// assert_eq!(out, br#"1.50"a""#);
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match *self {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            Value::Int(n) => json::push_i64(out, n),
            Value::Uint(n) => json::push_u64(out, n),
            Value::Float(x) => json::push_f64(out, x),
            Value::Str(s) => json::push_str(out, s),
            Value::Decimal(text) => out.extend_from_slice(text.as_bytes()),
        }
    }
}

/// Why bytes are no row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRow {
    /// The row ends inside the field that starts at byte `at`.
    Truncated {
        /// Where the field starts.
        at: usize,
    },
    /// The field at byte `at` has a type no row has.
    Type {
        /// Where the field starts.
        at: usize,
        /// Its type byte.
        code: u8,
    },
    /// The name or string of the field at byte `at` is not UTF-8.
    Utf8 {
        /// Where the field starts.
        at: usize,
    },
    /// The decimal of the field at byte `at` is no JSON number.
    Number {
        /// Where the field starts.
        at: usize,
    },
}

impl fmt::Display for BadRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BadRow::Truncated { at } => write!(f, "the row ends inside its field at byte {at}"),
            BadRow::Type { at, code } => {
                write!(f, "the row's field at byte {at} has unknown type {code}")
            }
            BadRow::Utf8 { at } => {
                write!(
                    f,
                    "the row's field at byte {at} has a name or string that is not UTF-8"
                )
            }
            BadRow::Number { at } => {
                write!(
                    f,
                    "the row's field at byte {at} is a decimal that is no JSON number"
                )
            }
        }
    }
}

/// Appends fields to a row in a buffer (a record's value being written).
///
/// ```
/// let mut buf = Vec::new();
/// weir_flat::row::RowWriter::new(&mut buf).str("word", "hi").u64("count", 2);
/// let mut json = Vec::new();
/// weir_flat::row::write_json(&buf, &mut json).unwrap();
/// assert_eq!(json, br#"{"word":"hi","count":2}"#);
/// ```
#[derive(Debug)]
pub struct RowWriter<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> RowWriter<'a> {
    /// A writer appending fields to `buf`.
    #[inline]
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        RowWriter { buf }
    }

    /// The type and the name of a field.
    ///
    /// # Panics
    ///
    /// When `name` is longer than 255 bytes.
    #[inline]
    fn head(&mut self, code: u8, name: &str) {
        let len = u8::try_from(name.len()).unwrap_or_else(|_| {
            panic!(
                "a row's field name is at most 255 bytes, not {}",
                name.len()
            )
        });
        self.buf.extend_from_slice(&[code, len]);
        self.buf.extend_from_slice(name.as_bytes());
    }

    /// Appends field `name` with JSON `null`.
    #[inline]
    pub fn null(&mut self, name: &str) -> &mut Self {
        self.head(NULL, name);
        self
    }

    /// Appends field `name` with `v`.
    #[inline]
    pub fn bool(&mut self, name: &str, v: bool) -> &mut Self {
        self.head(if v { TRUE } else { FALSE }, name);
        self
    }

    /// Appends field `name` with the signed integer `v`.
    #[inline]
    pub fn i64(&mut self, name: &str, v: i64) -> &mut Self {
        self.head(INT, name);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends field `name` with the unsigned integer `v`.
    #[inline]
    pub fn u64(&mut self, name: &str, v: u64) -> &mut Self {
        self.head(UINT, name);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends field `name` with the float `v`.
    #[inline]
    pub fn f64(&mut self, name: &str, v: f64) -> &mut Self {
        self.head(FLOAT, name);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends field `name` with the string `v`.
    ///
    /// # Panics
    ///
    /// When `v` is 4 GiB or longer.
    #[inline]
    pub fn str(&mut self, name: &str, v: &str) -> &mut Self {
        self.head(STRING, name);
        self.text(v);
        self
    }

    /// Appends field `name` with the number written `v`, a JSON number
    /// kept as written (`12.50` stays `12.50`).
    ///
    /// # Panics
    ///
    /// When `v` is no JSON number ([`json::is_number`]).
    pub fn decimal(&mut self, name: &str, v: &str) -> &mut Self {
        assert!(
            json::is_number(v.as_bytes()),
            "a row's decimal is a JSON number, not {v:?}"
        );
        self.head(DECIMAL, name);
        self.text(v);
        self
    }

    /// Appends field `name` with `value`, of whatever kind.
    ///
    /// ```
    /// use weir_flat::row::{fields, RowWriter, Value};
    /// let mut buf = Vec::new();
    /// RowWriter::new(&mut buf).value("d", Value::Decimal("1.50"));
    /// assert_eq!(fields(&buf).next(), Some(Ok(("d", Value::Decimal("1.50")))));
    /// ```
    pub fn value(&mut self, name: &str, value: Value<'_>) -> &mut Self {
        match value {
            Value::Null => self.null(name),
            Value::Bool(b) => self.bool(name, b),
            Value::Int(n) => self.i64(name, n),
            Value::Uint(n) => self.u64(name, n),
            Value::Float(x) => self.f64(name, x),
            Value::Str(s) => self.str(name, s),
            Value::Decimal(d) => self.decimal(name, d),
        }
    }

    /// A string's or decimal's length and bytes.
    #[inline]
    fn text(&mut self, v: &str) {
        let len = u32::try_from(v.len()).expect("a row's string is under 4 GiB");
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(v.as_bytes());
    }
}

/// The fields of a row, in order, each checked as it is read.
///
/// ```
/// use weir_flat::row::{fields, RowWriter, Value};
/// let mut buf = Vec::new();
/// RowWriter::new(&mut buf).i64("t", -1).null("x");
/// let read: Vec<_> = fields(&buf).collect::<Result<_, _>>().unwrap();
/// assert_eq!(read, [("t", Value::Int(-1)), ("x", Value::Null)]);
/// ```
pub fn fields(row: &[u8]) -> Fields<'_> {
    Fields {
        raw: raw_fields(row),
    }
}

/// The iterator of [`fields`]; it ends after the first error.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    raw: RawFields<'a>,
}

/// The fields of a row, in order, as [`fields`] reads them but with names
/// and strings as bytes not checked as UTF-8: for a reader of rows that
/// [`check`] accepted, which need not check them again.
///
/// ```
/// use weir_flat::row::{raw_fields, Raw, RowWriter};
/// let mut buf = Vec::new();
/// RowWriter::new(&mut buf).str("w", "hi").u64("n", 2);
/// let read: Vec<_> = raw_fields(&buf).collect::<Result<_, _>>().unwrap();
/// assert_eq!(read, [(&b"w"[..], Raw::Str(b"hi")), (&b"n"[..], Raw::Uint(2))]);
/// ```
pub fn raw_fields(row: &[u8]) -> RawFields<'_> {
    RawFields { row, at: 0 }
}

/// The iterator of [`raw_fields`]; it ends after the first error.
#[derive(Debug, Clone)]
pub struct RawFields<'a> {
    row: &'a [u8],
    at: usize,
}

/// A field's value as [`raw_fields`] reads it: [`Value`] with its string
/// as bytes, not checked as UTF-8.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Raw<'a> {
    /// JSON `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    Uint(u64),
    /// A float.
    Float(f64),
    /// A string's bytes.
    Str(&'a [u8]),
    /// A number as the text of a JSON number (checked).
    Decimal(&'a str),
}

impl<'a> Raw<'a> {
    /// The value, its string checked as UTF-8 (the field starts at `at`).
    #[inline]
    fn checked(self, at: usize) -> Result<Value<'a>, BadRow> {
        Ok(match self {
            Raw::Null => Value::Null,
            Raw::Bool(b) => Value::Bool(b),
            Raw::Int(n) => Value::Int(n),
            Raw::Uint(n) => Value::Uint(n),
            Raw::Float(x) => Value::Float(x),
            Raw::Str(s) => Value::Str(core::str::from_utf8(s).map_err(|_| BadRow::Utf8 { at })?),
            Raw::Decimal(text) => Value::Decimal(text),
        })
    }
}

/// The field of `row` that starts at byte `at` (below `row.len()`): its
/// name's bytes and its value, neither checked as UTF-8, and where the
/// next field starts. The one reader of the format: [`raw_fields`]
/// hands out what it reads, [`fields`] and [`check`] check it,
/// [`JsonWriter`] writes it.
#[inline]
fn raw_field(row: &[u8], at: usize) -> Result<(&[u8], Raw<'_>, usize), BadRow> {
    let truncated = BadRow::Truncated { at };
    let take = |from: usize, n: usize| {
        let end = from.checked_add(n).ok_or(truncated)?;
        row.get(from..end).ok_or(truncated)
    };
    let (code, name_len) = match row.get(at..).and_then(<[u8]>::first_chunk::<2>) {
        Some(&[code, len]) => (code, usize::from(len)),
        None => return Err(truncated),
    };
    let name = take(at + 2, name_len)?;
    let body = at + 2 + name_len;
    // A number's 8 bytes, read as one word.
    let word = || match row.get(body..).and_then(<[u8]>::first_chunk::<8>) {
        Some(bytes) => Ok(u64::from_le_bytes(*bytes)),
        None => Err(truncated),
    };
    let value = match code {
        NULL => (Raw::Null, body),
        FALSE => (Raw::Bool(false), body),
        TRUE => (Raw::Bool(true), body),
        INT => (Raw::Int(word()? as i64), body + 8),
        UINT => (Raw::Uint(word()?), body + 8),
        FLOAT => (Raw::Float(f64::from_bits(word()?)), body + 8),
        STRING | DECIMAL => {
            let len = row.get(body..).and_then(<[u8]>::first_chunk::<4>);
            let len = u32::from_le_bytes(*len.ok_or(truncated)?) as usize;
            let bytes = take(body + 4, len)?;
            // Inside the row: no overflow.
            let end = body + 4 + len;
            match code {
                STRING => (Raw::Str(bytes), end),
                _ if json::is_number(bytes) => {
                    // ASCII, as every JSON number.
                    let text = core::str::from_utf8(bytes).expect("a JSON number is ASCII");
                    (Raw::Decimal(text), end)
                }
                _ => return Err(BadRow::Number { at }),
            }
        }
        code => return Err(BadRow::Type { at, code }),
    };
    Ok((name, value.0, value.1))
}

impl<'a> Iterator for RawFields<'a> {
    type Item = Result<(&'a [u8], Raw<'a>), BadRow>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.row.len() {
            return None;
        }
        match raw_field(self.row, self.at) {
            Ok((name, value, end)) => {
                self.at = end;
                Some(Ok((name, value)))
            }
            Err(e) => {
                self.at = self.row.len();
                Some(Err(e))
            }
        }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(&'a str, Value<'a>), BadRow>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.raw.at;
        let field = self.raw.next()?.and_then(|(name, value)| {
            let value = value.checked(at)?;
            let name = core::str::from_utf8(name).map_err(|_| BadRow::Utf8 { at })?;
            Ok((name, value))
        });
        if field.is_err() {
            self.raw.at = self.raw.row.len();
        }
        Some(field)
    }
}

/// Checks that `row` is a whole number of well-formed fields; returns how
/// many.
///
/// ```
/// let mut buf = Vec::new();
/// weir_flat::row::RowWriter::new(&mut buf).str("a", "b");
/// assert_eq!(weir_flat::row::check(&buf), Ok(1));
/// assert!(weir_flat::row::check(&buf[..buf.len() - 1]).is_err());
/// ```
pub fn check(row: &[u8]) -> Result<usize, BadRow> {
    // What `fields` checks, with no `str` made: ASCII (names, most
    // strings) is checked inline, without a call to the UTF-8 validator.
    let utf8 = |bytes: &[u8]| bytes.is_ascii() || core::str::from_utf8(bytes).is_ok();
    let (mut at, mut count) = (0, 0);
    while at < row.len() {
        let (name, value, end) = raw_field(row, at)?;
        let text = match value {
            Raw::Str(s) => s,
            _ => &[],
        };
        if !(utf8(text) && utf8(name)) {
            return Err(BadRow::Utf8 { at });
        }
        at = end;
        count += 1;
    }
    Ok(count)
}

/// Appends `row` as a JSON object of its fields in order, as `serde_json`
/// writes one ([`json`]); an error, with nothing written, when it is no
/// row. [`JsonWriter`] does the same for many rows, faster.
pub fn write_json(row: &[u8], out: &mut Vec<u8>) -> Result<(), BadRow> {
    JsonWriter::default().write(row, out)
}

/// Writes rows as JSON objects ([`write_json`]), remembering the JSON text
/// of the last row's field names: the rows of a plugin name the same
/// fields in the same order, so each name is checked and escaped once, not
/// once per row.
///
/// ```
/// use weir_flat::row::{JsonWriter, RowWriter};
/// let (mut writer, mut out) = (JsonWriter::default(), Vec::new());
/// for n in 1..=2 {
///     let mut row = Vec::new();
///     RowWriter::new(&mut row).u64("n", n);
///     writer.write(&row, &mut out).unwrap();
/// }
/// assert_eq!(out, br#"{"n":1}{"n":2}"#);
/// ```
#[derive(Debug, Default)]
pub struct JsonWriter {
    /// By position: a name's bytes, and its JSON text with the colon.
    names: Vec<(Vec<u8>, Vec<u8>)>,
}

impl JsonWriter {
    /// Appends `row` as [`write_json`] does.
    pub fn write(&mut self, row: &[u8], out: &mut Vec<u8>) -> Result<(), BadRow> {
        let start = out.len();
        let written = self.write_fields(row, out);
        if written.is_err() {
            out.truncate(start);
        }
        written
    }

    fn write_fields(&mut self, row: &[u8], out: &mut Vec<u8>) -> Result<(), BadRow> {
        out.push(b'{');
        let (mut at, mut i) = (0, 0);
        while at < row.len() {
            let (name, value, end) = raw_field(row, at)?;
            if i > 0 {
                out.push(b',');
            }
            self.push_name(i, name, at, out)?;
            match value {
                // Checked and scanned for escapes in one pass.
                Raw::Str(s) => {
                    if !json::push_utf8(out, s) {
                        return Err(BadRow::Utf8 { at });
                    }
                }
                other => other.checked(at)?.write_json(out),
            }
            at = end;
            i += 1;
        }
        out.push(b'}');
        Ok(())
    }

    /// Appends the JSON text of field `i`'s name and its colon: the text
    /// remembered for the last row's field `i` when it has the same name.
    #[inline]
    fn push_name(
        &mut self,
        i: usize,
        name: &[u8],
        at: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), BadRow> {
        // Names are short: a loop without early exit beats a call to `memcmp`.
        let same = |known: &[u8]| {
            known.len() == name.len()
                && (known.iter().zip(name)).fold(0, |diff, (a, b)| diff | (a ^ b)) == 0
        };
        if let Some((known, text)) = self.names.get(i)
            && same(known)
        {
            out.extend_from_slice(text);
            return Ok(());
        }
        let name_str = core::str::from_utf8(name).map_err(|_| BadRow::Utf8 { at })?;
        let mut text = Vec::with_capacity(name.len() + 3);
        json::push_str(&mut text, name_str);
        text.push(b':');
        out.extend_from_slice(&text);
        self.names.truncate(i);
        self.names.push((name.to_vec(), text));
        Ok(())
    }
}

/// Rewrites a flat batch (`data` and its packed `spans`, which [`check`](crate::check)
/// accepted) so that no value is a row: appends to `out` each record's
/// key and value in order, a row's value as its JSON object ([`write_json`])
/// and any other as it is, and points the spans at `out`, which is then
/// the batch's data. A key inside its own (non-row) value stays inside it.
/// An error names the first record whose row is malformed; the spans are
/// then partly rewritten and must be dropped.
///
/// ```
/// use weir_flat::{row, Encoding, Range, Span};
/// let mut data = b"k".to_vec();
/// row::RowWriter::new(&mut data).u64("n", 7);
/// let value = Range { offset: 1, len: (data.len() - 1) as u32 };
/// let key = Some(Range { offset: 0, len: 1 });
/// let mut spans = Span { key, value, encoding: Encoding::Row, ..Span::default() }.encode();
/// let mut out = Vec::new();
/// row::batch_as_json(&data, &mut spans, &mut out).unwrap();
/// assert_eq!(out, br#"k{"n":7}"#);
/// let span = Span::decode(&spans);
/// assert_eq!((span.key, span.encoding), (key, Encoding::Bytes));
/// ```
pub fn batch_as_json(data: &[u8], spans: &mut [u8], out: &mut Vec<u8>) -> Result<(), BadSpans> {
    let mut writer = JsonWriter::default();
    for (index, span) in spans.chunks_exact_mut(SPAN_BYTES).enumerate() {
        let flags = u32_at(span, 16);
        let value = Range {
            offset: u32_at(span, 0),
            len: u32_at(span, 4),
        };
        let key = Range {
            offset: u32_at(span, 8),
            len: u32_at(span, 12),
        };
        let has_key = flags & HAS_KEY != 0;
        let key_in_value =
            has_key && flags & ROW == 0 && key.offset >= value.offset && key.end() <= value.end();
        if has_key && !key_in_value {
            put_u32(span, 8, out.len());
            out.extend_from_slice(&data[key.as_usize()]);
        }
        let start = out.len();
        if flags & ROW != 0 {
            (writer.write(&data[value.as_usize()], out))
                .map_err(|error| BadSpans::Row { index, error })?;
            put_u32(span, 16, (flags & !ROW) as usize);
        } else {
            out.extend_from_slice(&data[value.as_usize()]);
            if key_in_value {
                put_u32(span, 8, start + (key.offset - value.offset) as usize);
            }
        }
        put_u32(span, 0, start);
        put_u32(span, 4, out.len() - start);
    }
    Ok(())
}

/// Writes `n` as the `u32` at byte `at` of a packed span.
///
/// # Panics
///
/// When `n` does not fit: a batch holds less than 4 GiB.
#[inline]
fn put_u32(span: &mut [u8], at: usize, n: usize) {
    let n = u32::try_from(n).expect("a flat batch holds less than 4 GiB");
    span[at..at + 4].copy_from_slice(&n.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec;

    fn every_type() -> Vec<u8> {
        let mut buf = Vec::new();
        RowWriter::new(&mut buf)
            .null("n")
            .bool("t", true)
            .bool("f", false)
            .i64("i", i64::MIN)
            .u64("u", u64::MAX)
            .f64("x", -1.5e-7)
            .f64("nan", f64::NAN)
            .str("s", "q\"\\\n\u{1}\u{7f}é日")
            .str("", "")
            .decimal("d", "-12.50e+3");
        buf
    }

    #[test]
    fn every_type_reads_back_and_writes_json() {
        let row = every_type();
        assert_eq!(check(&row), Ok(10));
        let read: Vec<_> = fields(&row).map(Result::unwrap).collect();
        assert_eq!(read[9], ("d", Value::Decimal("-12.50e+3")));
        assert_eq!(read[3], ("i", Value::Int(i64::MIN)));
        assert_eq!(read[4], ("u", Value::Uint(u64::MAX)));
        assert_eq!(read[7], ("s", Value::Str("q\"\\\n\u{1}\u{7f}é日")));
        let mut out = Vec::new();
        write_json(&row, &mut out).unwrap();
        // What serde_json writes for each value.
        let js = |v: serde_json::Value| serde_json::to_string(&v).unwrap();
        let expected = [
            ("n", js(serde_json::Value::Null)),
            ("t", js(true.into())),
            ("f", js(false.into())),
            ("i", js(i64::MIN.into())),
            ("u", js(u64::MAX.into())),
            ("x", js((-1.5e-7).into())),
            ("nan", js(serde_json::Value::Null)),
            ("s", js("q\"\\\n\u{1}\u{7f}é日".into())),
            ("", js("".into())),
            // A decimal keeps its digits.
            ("d", "-12.50e+3".into()),
        ]
        .map(|(name, value)| alloc::format!("{}:{value}", js(name.into())))
        .join(",");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            alloc::format!("{{{expected}}}")
        );
        assert!(expected.contains(r#""x":-1.5e-7"#), "{expected}");
        let mut out = vec![b'x'];
        write_json(&[], &mut out).unwrap();
        assert_eq!(out, b"x{}");
    }

    #[test]
    fn every_cut_of_a_row_is_refused_and_writes_nothing() {
        let row = every_type();
        let ends: Vec<usize> = {
            let mut ends = Vec::new();
            let mut it = fields(&row);
            while it.next().is_some() {
                ends.push(it.raw.at);
            }
            ends
        };
        for cut in 0..row.len() {
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            let result = check(&row[..cut]);
            if ends.contains(&cut) || cut == 0 {
                assert_eq!(result, Ok(whole), "cut at {cut}");
            } else {
                let at = if whole == 0 { 0 } else { ends[whole - 1] };
                assert_eq!(result, Err(BadRow::Truncated { at }), "cut at {cut}");
                let mut out = vec![b'x'];
                assert!(write_json(&row[..cut], &mut out).is_err());
                assert_eq!(out, b"x");
            }
        }
    }

    #[test]
    fn unknown_types_and_bad_utf8_are_refused() {
        assert_eq!(check(&[8, 0]), Err(BadRow::Type { at: 0, code: 8 }));
        // Decimals are JSON numbers: not `x`, not `01`, not `1.`.
        for text in [&b"x"[..], b"01", b"1.", b"", b"+1"] {
            let mut row = vec![DECIMAL, 0];
            row.extend_from_slice(&(text.len() as u32).to_le_bytes());
            row.extend_from_slice(text);
            assert_eq!(check(&row), Err(BadRow::Number { at: 0 }), "{text:?}");
            assert_eq!(
                write_json(&row, &mut Vec::new()),
                Err(BadRow::Number { at: 0 })
            );
        }
        assert_eq!(check(&[NULL, 1, 0xff]), Err(BadRow::Utf8 { at: 0 }));
        let mut row = Vec::new();
        RowWriter::new(&mut row).null("a").str("b", "é");
        let last = row.len() - 1;
        row[last] = 0xff;
        assert_eq!(check(&row), Err(BadRow::Utf8 { at: 3 }));
        // A string's length past the row's end.
        assert_eq!(
            check(&[STRING, 0, 9, 0, 0, 0, b'a']),
            Err(BadRow::Truncated { at: 0 })
        );
        assert_eq!(
            check(&[STRING, 0, 0xff, 0xff, 0xff, 0xff]),
            Err(BadRow::Truncated { at: 0 })
        );
    }

    #[test]
    fn a_writer_of_many_rows_writes_each_as_write_json_does() {
        let rows: Vec<Vec<u8>> = [
            &["a", "b"][..],
            &["a", "b"],
            &["a"],
            &["b", "a", "c"],
            &[],
            &["a", "b", "\"é"],
            &["a", "b", "\"é"],
        ]
        .iter()
        .map(|names| {
            let mut row = Vec::new();
            for (i, n) in names.iter().enumerate() {
                RowWriter::new(&mut row).u64(n, i as u64);
            }
            row
        })
        .collect();
        let mut writer = JsonWriter::default();
        for row in &rows {
            let (mut one, mut many) = (Vec::new(), Vec::new());
            write_json(row, &mut one).unwrap();
            writer.write(row, &mut many).unwrap();
            assert_eq!(
                String::from_utf8(many).unwrap(),
                String::from_utf8(one).unwrap()
            );
        }
        // A name known from the last row is still checked when it differs.
        let mut bad = rows[0].clone();
        bad[2] = 0xff;
        let mut out = vec![b'x'];
        assert_eq!(writer.write(&bad, &mut out), Err(BadRow::Utf8 { at: 0 }));
        assert_eq!(out, b"x");
    }

    /// The JSON of `row` as the model writes it: each field read by
    /// [`fields`], written by `serde_json`.
    fn model_json(row: &[u8]) -> Result<String, BadRow> {
        let mut parts = Vec::new();
        for field in fields(row) {
            let (name, value) = field?;
            let js = |v: serde_json::Value| serde_json::to_string(&v).unwrap();
            let value = match value {
                Value::Null => js(serde_json::Value::Null),
                Value::Bool(b) => js(b.into()),
                Value::Int(n) => js(n.into()),
                Value::Uint(n) => js(n.into()),
                Value::Float(x) => js(x.into()),
                Value::Str(s) => js(s.into()),
                // Its digits as they are.
                Value::Decimal(text) => text.into(),
            };
            parts.push(alloc::format!("{}:{value}", js(name.into())));
        }
        Ok(alloc::format!("{{{}}}", parts.join(",")))
    }

    #[test]
    fn the_json_writer_agrees_with_the_field_reader_on_every_changed_byte() {
        // Every byte of a row of every type set to values that make it a
        // type code, a short or huge length, a quote, non-ASCII or bad
        // UTF-8: the writer (and `check`) refuses exactly the rows the
        // reader refuses, with the same error, and writes the model's JSON
        // for the others.
        let row = every_type();
        let mut writer = JsonWriter::default();
        for at in 0..row.len() {
            for b in [0, 1, 3, 5, 6, 7, b'"', b'\\', 0x7f, 0x80, 0xc3, 0xff] {
                let mut changed = row.clone();
                changed[at] = b;
                let mut out = vec![b'x'];
                let written = writer.write(&changed, &mut out);
                let read = fields(&changed).try_fold(0, |n, f| f.map(|_| n + 1));
                assert_eq!(check(&changed), read, "byte {at} = {b}");
                match model_json(&changed) {
                    Ok(json) => {
                        assert_eq!(written, Ok(()), "byte {at} = {b}");
                        assert_eq!(String::from_utf8(out[1..].to_vec()).unwrap(), json);
                    }
                    Err(e) => {
                        assert_eq!(written, Err(e), "byte {at} = {b}");
                        assert_eq!(out, b"x");
                    }
                }
            }
        }
    }

    #[test]
    fn a_batch_as_json_keeps_keys_and_plain_values_and_names_a_bad_row() {
        use crate::{Encoding, Span};
        // Record 0: a row keyed outside it; 1: a plain value whose key is
        // its own tail; 2: a row without a key.
        let mut data = b"key".to_vec();
        RowWriter::new(&mut data).str("s", "v");
        let row_end = data.len() as u32;
        data.extend_from_slice(b"plain");
        RowWriter::new(&mut data).bool("b", true);
        let r = |offset: u32, end: u32| Range {
            offset,
            len: end - offset,
        };
        let spans = [
            Span {
                key: Some(r(0, 3)),
                value: r(3, row_end),
                encoding: Encoding::Row,
                timestamp: Some(-4),
                ..Span::default()
            },
            Span {
                key: Some(r(row_end + 2, row_end + 5)),
                value: r(row_end, row_end + 5),
                ..Span::default()
            },
            Span {
                value: r(row_end + 5, data.len() as u32),
                encoding: Encoding::Row,
                ..Span::default()
            },
        ];
        let mut packed: Vec<u8> = spans.iter().flat_map(|s| s.encode()).collect();
        let mut out = Vec::new();
        batch_as_json(&data, &mut packed, &mut out).unwrap();
        assert_eq!(crate::check(&packed, out.len()), Ok(3));
        let read: Vec<Span> = packed.chunks(SPAN_BYTES).map(Span::decode).collect();
        let bytes = |r: Option<Range>| r.map(|r| &out[r.as_usize()]);
        assert_eq!(bytes(read[0].key), Some(&b"key"[..]));
        assert_eq!(bytes(Some(read[0].value)), Some(&br#"{"s":"v"}"#[..]));
        assert_eq!(read[0].timestamp, Some(-4));
        assert_eq!(bytes(Some(read[1].value)), Some(&b"plain"[..]));
        assert_eq!(bytes(read[1].key), Some(&b"ain"[..]));
        let value = read[1].value.as_usize();
        assert!(
            value.contains(&(read[1].key.unwrap().offset as usize)),
            "the key stays inside its value"
        );
        assert_eq!(bytes(Some(read[2].value)), Some(&br#"{"b":true}"#[..]));
        assert!(read.iter().all(|s| s.encoding == Encoding::Bytes));
        // A bad row is named by its record.
        data.push(9);
        let bad = Span {
            value: r(data.len() as u32 - 1, data.len() as u32),
            encoding: Encoding::Row,
            ..Span::default()
        };
        let mut packed: Vec<u8> = [spans[0], bad].iter().flat_map(|s| s.encode()).collect();
        let error = batch_as_json(&data, &mut packed, &mut Vec::new()).unwrap_err();
        assert_eq!(
            error,
            BadSpans::Row {
                index: 1,
                error: BadRow::Truncated { at: 0 }
            }
        );
    }

    #[test]
    #[should_panic(expected = "a row's decimal is a JSON number, not \"1,5\"")]
    fn a_decimal_that_is_no_json_number_panics() {
        RowWriter::new(&mut Vec::new()).decimal("d", "1,5");
    }

    #[test]
    #[should_panic(expected = "at most 255 bytes")]
    fn a_name_over_255_bytes_panics() {
        let name = "n".repeat(256);
        RowWriter::new(&mut Vec::new()).null(&name);
    }
}
