//! A column's value, as PostgreSQL's output function printed it, turned
//! into JSON without losing what it says.
//!
//! The texts are those of a session with `DateStyle=ISO, MDY`,
//! `TimeZone=UTC`, `IntervalStyle=iso_8601`, `extra_float_digits=3` and
//! `bytea_output=hex`. Invariants of [`to_json`]:
//! - a type it knows is checked: a text that is not a value of the type is
//!   a [`ValueError`], never a guess;
//! - a value JSON cannot hold exactly stays a string (numerics by default,
//!   `NaN` and infinities, BC and infinite dates and timestamps);
//! - every type it does not know (enums, domains, geometric types, ...) is
//!   its text as a JSON string, unchanged.
//!
//! Dates, timestamps and numerics are checked with `key_order`'s parsers,
//! so both modules accept exactly the same texts.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Number, Value};
use thiserror::Error;

use super::key_order::{parse_numeric, parse_parts};

/// OIDs of the built-in types this module knows (`pg_type.oid`, checked
/// against PostgreSQL's `pg_type.dat`).
pub mod oid {
    /// Defines each type's OID constant, and its array type's when listed,
    /// with [`name`] and [`element`], from one table.
    macro_rules! types {
        ($($name:ident = $oid:literal $pg:literal $(, $array:ident = $array_oid:literal)?;)*) => {
            $(
                #[doc = concat!("`", $pg, "`.")]
                pub const $name: u32 = $oid;
                $(
                    #[doc = concat!("`", $pg, "[]`.")]
                    pub const $array: u32 = $array_oid;
                )?
            )*

            /// The name of a base type listed here.
            pub(super) fn name(oid: u32) -> Option<&'static str> {
                match oid {
                    $($name => Some($pg),)*
                    _ => None,
                }
            }

            /// The element type of an array type listed here.
            pub(super) fn element(oid: u32) -> Option<u32> {
                match oid {
                    $($($array => Some($name),)?)*
                    _ => None,
                }
            }
        };
    }

    types! {
        BOOL = 16 "bool", BOOL_ARRAY = 1000;
        BYTEA = 17 "bytea", BYTEA_ARRAY = 1001;
        CHAR = 18 "\"char\"", CHAR_ARRAY = 1002;
        NAME = 19 "name", NAME_ARRAY = 1003;
        INT8 = 20 "int8", INT8_ARRAY = 1016;
        INT2 = 21 "int2", INT2_ARRAY = 1005;
        INT4 = 23 "int4", INT4_ARRAY = 1007;
        TEXT = 25 "text", TEXT_ARRAY = 1009;
        OID = 26 "oid", OID_ARRAY = 1028;
        JSON = 114 "json", JSON_ARRAY = 199;
        XML = 142 "xml";
        CIDR = 650 "cidr";
        FLOAT4 = 700 "float4", FLOAT4_ARRAY = 1021;
        FLOAT8 = 701 "float8", FLOAT8_ARRAY = 1022;
        MONEY = 790 "money", MONEY_ARRAY = 791;
        MACADDR = 829 "macaddr";
        INET = 869 "inet";
        BPCHAR = 1042 "bpchar", BPCHAR_ARRAY = 1014;
        VARCHAR = 1043 "varchar", VARCHAR_ARRAY = 1015;
        DATE = 1082 "date", DATE_ARRAY = 1182;
        TIME = 1083 "time", TIME_ARRAY = 1183;
        TIMESTAMP = 1114 "timestamp", TIMESTAMP_ARRAY = 1115;
        TIMESTAMPTZ = 1184 "timestamptz", TIMESTAMPTZ_ARRAY = 1185;
        INTERVAL = 1186 "interval", INTERVAL_ARRAY = 1187;
        TIMETZ = 1266 "timetz", TIMETZ_ARRAY = 1270;
        BIT = 1560 "bit";
        VARBIT = 1562 "varbit";
        NUMERIC = 1700 "numeric", NUMERIC_ARRAY = 1231;
        UUID = 2950 "uuid", UUID_ARRAY = 2951;
        JSONB = 3802 "jsonb", JSONB_ARRAY = 3807;
    }
}

use oid::*;

/// How `numeric` values become JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NumericAs {
    /// A string of the exact decimal text.
    #[default]
    Text,
    /// A JSON number: an integer when it fits `i64`, else the nearest
    /// `f64`. `NaN` and the infinities stay strings.
    Number,
}

/// Why a value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    /// The text is not a value of its column's type.
    #[error("{text:?} is not a valid PostgreSQL {type_name} value: {reason}")]
    Invalid {
        /// The type's name (`int4`, `text[]`, `type with OID 16400`).
        type_name: String,
        /// The text, cut to about 60 characters.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key's values do not match its columns one to one.
    #[error("a key has {values} values for {columns} key columns: give one value per column")]
    KeyLength {
        /// Number of key columns (types).
        columns: usize,
        /// Number of values in the offending key.
        values: usize,
    },
}

/// Longest text, in characters, an error repeats.
const SHOWN_CHARS: usize = 60;

impl ValueError {
    /// An [`ValueError::Invalid`] for `text` read as type `type_oid`.
    pub(super) fn invalid(type_oid: u32, text: &str, reason: impl Into<String>) -> Self {
        let mut shown: String = text.chars().take(SHOWN_CHARS).collect();
        if shown.len() < text.len() {
            shown.push('…');
        }
        ValueError::Invalid {
            type_name: type_name(type_oid),
            text: shown,
            reason: reason.into(),
        }
    }
}

/// The name of a type for messages.
fn type_name(type_oid: u32) -> String {
    match (element_type(type_oid), oid::name(type_oid)) {
        (Some(element), _) => format!("{}[]", type_name(element)),
        (None, Some(name)) => name.to_owned(),
        (None, None) => format!("type with OID {type_oid}"),
    }
}

/// The element type of one of the built-in array types [`to_json`]
/// reads as arrays; `None` for any other type.
pub fn element_type(array_oid: u32) -> Option<u32> {
    oid::element(array_oid)
}

/// The JSON form of `text`, a value of type `type_oid` as PostgreSQL
/// printed it (see the module documentation for the session settings).
pub fn to_json(type_oid: u32, text: &str, numeric: NumericAs) -> Result<Value, ValueError> {
    if let Some(element) = element_type(type_oid) {
        return array::to_json(type_oid, element, text, numeric);
    }
    let invalid = |reason: &str| ValueError::invalid(type_oid, text, reason);
    match type_oid {
        BOOL => parse_bool(type_oid, text).map(Value::Bool),
        INT2 | INT4 | INT8 | OID => parse_int(type_oid, text).map(Value::from),
        FLOAT4 | FLOAT8 => float(type_oid, text),
        NUMERIC => numeric_json(text, numeric),
        JSON | JSONB => serde_json::from_str(text).map_err(|e| invalid(&e.to_string())),
        DATE | TIMESTAMP | TIMESTAMPTZ => moment_json(type_oid, text),
        BYTEA => decode_bytea(text)
            .map(|bytes| Value::String(BASE64.encode(bytes)))
            .ok_or_else(|| invalid("expected hex format bytes (\\x0a1b); set bytea_output=hex")),
        _ => Ok(Value::String(text.to_owned())),
    }
}

/// A `bool` text: `t` or `f`.
pub(super) fn parse_bool(type_oid: u32, text: &str) -> Result<bool, ValueError> {
    match text {
        "t" => Ok(true),
        "f" => Ok(false),
        _ => Err(ValueError::invalid(type_oid, text, "expected t or f")),
    }
}

/// An `int2`, `int4`, `int8` or `oid` text, checked against its type's
/// range.
pub(super) fn parse_int(type_oid: u32, text: &str) -> Result<i64, ValueError> {
    let (min, max) = match type_oid {
        INT2 => (i16::MIN.into(), i16::MAX.into()),
        INT4 => (i32::MIN.into(), i32::MAX.into()),
        OID => (0, u32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    };
    match text.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) && !text.starts_with('+') => Ok(n),
        _ => Err(ValueError::invalid(
            type_oid,
            text,
            format!("expected an integer in {min}..={max}"),
        )),
    }
}

/// The texts PostgreSQL prints for float and numeric values JSON has no
/// number for.
fn is_special_number(text: &str) -> bool {
    matches!(text, "NaN" | "Infinity" | "-Infinity")
}

fn float(type_oid: u32, text: &str) -> Result<Value, ValueError> {
    if is_special_number(text) {
        return Ok(Value::String(text.to_owned()));
    }
    // Rust also parses words (`inf`, `nan`); PostgreSQL prints none but the
    // specials above.
    let plain = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
    plain
        .then(|| text.parse::<f64>().ok())
        .flatten()
        .and_then(Number::from_f64)
        .map(Value::Number)
        .ok_or_else(|| ValueError::invalid(type_oid, text, "expected a finite decimal number"))
}

fn numeric_json(text: &str, numeric: NumericAs) -> Result<Value, ValueError> {
    if parse_numeric(text).is_none() {
        let reason = "expected a decimal number, NaN, Infinity or -Infinity";
        return Err(ValueError::invalid(NUMERIC, text, reason));
    }
    if is_special_number(text) || numeric == NumericAs::Text {
        return Ok(Value::String(text.to_owned()));
    }
    if let Ok(n) = text.parse::<i64>() {
        return Ok(Value::from(n));
    }
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
        .ok_or_else(|| {
            let reason = "too large for a JSON number; read numeric columns as text";
            ValueError::invalid(NUMERIC, text, reason)
        })
}

/// A `bytea` text's bytes, from the hex format (`\x0a1b`, either case)
/// that `bytea_output=hex` selects.
pub(super) fn decode_bytea(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    let nibble = |b: u8| char::from(b).to_digit(16);
    hex.chunks_exact(2)
        .map(|pair| Some((nibble(pair[0])? * 16 + nibble(pair[1])?) as u8))
        .collect()
}

/// A date or timestamp as JSON: ISO 8601 / RFC 3339 text when it can be,
/// else the text as printed.
fn moment_json(type_oid: u32, text: &str) -> Result<Value, ValueError> {
    if matches!(text, "infinity" | "-infinity") {
        return Ok(Value::String(text.to_owned()));
    }
    let p = parse_parts(type_oid, text)?;
    let json = match type_oid {
        _ if p.bc || type_oid == DATE => text.to_owned(),
        TIMESTAMP => format!("{}T{}", p.date, p.time),
        _ if p.offset_seconds == 0 => format!("{}T{}Z", p.date, p.time),
        _ if p.offset_seconds % 60 != 0 => format!("{}T{}{}", p.date, p.time, p.offset),
        _ => {
            let sign = if p.offset_seconds < 0 { '-' } else { '+' };
            let minutes = p.offset_seconds.abs() / 60;
            let (hours, minutes) = (minutes / 60, minutes % 60);
            format!("{}T{}{sign}{hours:02}:{minutes:02}", p.date, p.time)
        }
    };
    Ok(Value::String(json))
}

/// Array literals (`{1,2}`, `{{"a b",NULL}}`, `[0:1]={1,2}`), as
/// `array_out` prints them and `array_in` reads them.
mod array {
    use super::{NumericAs, Value, ValueError, to_json as element_json};

    /// Most dimensions an array has (PostgreSQL's `MAXDIM`).
    const MAX_DEPTH: usize = 6;

    /// The JSON array of an array literal whose elements have type
    /// `element`; bounds decoration is dropped.
    pub(super) fn to_json(
        array_oid: u32,
        element: u32,
        text: &str,
        numeric: NumericAs,
    ) -> Result<Value, ValueError> {
        let syntax = |reason: String| ValueError::invalid(array_oid, text, reason);
        let body = strip_bounds(text).ok_or_else(|| syntax("malformed dimension bounds".into()))?;
        let mut parser = Parser {
            text: body.as_bytes(),
            pos: 0,
            element,
            numeric,
        };
        let value = parser.array(1).map_err(|failure| match failure {
            Failure::Syntax(reason) => syntax(reason),
            Failure::Element(e) => e,
        })?;
        match parser.text[parser.pos..].trim_ascii() {
            [] => Ok(value),
            _ => Err(syntax("unexpected text after the closing brace".into())),
        }
    }

    /// The literal without a leading `[lo:hi][lo:hi]=`.
    fn strip_bounds(text: &str) -> Option<&str> {
        let mut rest = text.trim_start();
        if !rest.starts_with('[') {
            return Some(rest);
        }
        while let Some(after) = rest.strip_prefix('[') {
            let (bounds, after) = after.split_once(']')?;
            let (lo, hi) = bounds.split_once(':').unwrap_or(("1", bounds));
            lo.trim().parse::<i64>().ok()?;
            hi.trim().parse::<i64>().ok()?;
            rest = after.trim_start();
        }
        rest.strip_prefix('=')
    }

    /// Why a literal could not be read: it is malformed, or an element is
    /// not a value of the element type.
    enum Failure {
        Syntax(String),
        Element(ValueError),
    }

    /// A cursor over the literal; `pos` never exceeds `text.len()`.
    struct Parser<'a> {
        text: &'a [u8],
        pos: usize,
        element: u32,
        numeric: NumericAs,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<u8> {
            self.text.get(self.pos).copied()
        }

        fn skip_whitespace(&mut self) {
            while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
                self.pos += 1;
            }
        }

        fn syntax(&self, what: &str) -> Failure {
            Failure::Syntax(format!("{what} at byte {}", self.pos))
        }

        /// `{item,item,...}`, `depth` levels deep.
        fn array(&mut self, depth: usize) -> Result<Value, Failure> {
            if depth > MAX_DEPTH {
                return Err(self.syntax("more than 6 dimensions"));
            }
            self.skip_whitespace();
            if self.peek() != Some(b'{') {
                return Err(self.syntax("expected '{'"));
            }
            self.pos += 1;
            self.skip_whitespace();
            let mut items = Vec::new();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(Value::Array(items));
            }
            loop {
                self.skip_whitespace();
                items.push(match self.peek() {
                    Some(b'{') => self.array(depth + 1)?,
                    _ => self.element()?,
                });
                self.skip_whitespace();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        return Ok(Value::Array(items));
                    }
                    _ => return Err(self.syntax("expected ',' or '}'")),
                }
            }
        }

        /// One element, quoted or not, converted with the element type;
        /// an unquoted, unescaped `NULL` (any case) is null.
        fn element(&mut self) -> Result<Value, Failure> {
            let quoted = self.peek() == Some(b'"');
            self.pos += usize::from(quoted);
            let mut out = Vec::new();
            let mut escaped = false;
            // Length of `out` up to its last escaped or non-blank byte:
            // unquoted elements lose surrounding whitespace.
            let mut kept = 0;
            loop {
                let byte = self
                    .peek()
                    .ok_or_else(|| self.syntax("unterminated element"))?;
                let literal = match byte {
                    b'"' if quoted => {
                        self.pos += 1;
                        break;
                    }
                    b',' | b'}' if !quoted => break,
                    b'"' | b'{' if !quoted => return Err(self.syntax("unexpected character")),
                    b'\\' => {
                        self.pos += 1;
                        self.peek()
                            .ok_or_else(|| self.syntax("unterminated element"))?
                    }
                    _ => byte,
                };
                let is_escape = byte == b'\\';
                escaped |= is_escape;
                out.push(literal);
                if quoted || is_escape || !literal.is_ascii_whitespace() {
                    kept = out.len();
                }
                self.pos += 1;
            }
            out.truncate(kept);
            if !quoted && !escaped && out.eq_ignore_ascii_case(b"NULL") {
                return Ok(Value::Null);
            }
            if !quoted && out.is_empty() {
                return Err(self.syntax("empty unquoted element"));
            }
            let text = String::from_utf8(out).map_err(|_| self.syntax("element is not UTF-8"))?;
            element_json(self.element, &text, self.numeric).map_err(Failure::Element)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs cases, one a line, each naming a type as errors do (`int4`,
    /// `text[]`): `type text => json` when the text gives that JSON value
    /// (numerics read as text), `type ! text | text ...` when those texts
    /// are invalid.
    fn check(cases: &str) {
        for line in cases.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (name, rest) = line.split_once(' ').expect("a type name");
            let type_oid = (0..5000).find(|&t| type_name(t) == name).expect("a type");
            if let Some(texts) = rest.strip_prefix("! ") {
                for text in texts.split(" | ") {
                    let got = to_json(type_oid, text, NumericAs::Number);
                    let is_invalid = matches!(got, Err(ValueError::Invalid { .. }));
                    assert!(is_invalid, "{name} {text:?}: {got:?}");
                }
                continue;
            }
            let (text, want) = rest.rsplit_once(" => ").expect("text => json");
            let want = serde_json::from_str(want).expect("expected JSON");
            assert_eq!(to_json(type_oid, text, NumericAs::Text), Ok(want), "{line}");
        }
    }

    #[test]
    fn booleans_and_integers() {
        check(
            r#"
            bool t => true
            bool f => false
            bool ! true | T | 1
            int2 -32768 => -32768
            int2 32767 => 32767
            int2 ! 32768 | -32769
            int4 -2147483648 => -2147483648
            int4 2147483647 => 2147483647
            int4 ! 2147483648 | abc | 1.5 | +1
            int8 9223372036854775807 => 9223372036854775807
            int8 -9223372036854775808 => -9223372036854775808
            int8 ! 9223372036854775808 | 1e3
            oid 4294967295 => 4294967295
            oid 0 => 0
            oid ! -1 | 4294967296
            "#,
        );
    }

    #[test]
    fn floats() {
        for t in ["float4", "float8"] {
            check(&format!(
                r#"
                {t} 1.5 => 1.5
                {t} -2.25e-5 => -2.25e-5
                {t} 1e+300 => 1e300
                {t} NaN => "NaN"
                {t} Infinity => "Infinity"
                {t} -Infinity => "-Infinity"
                {t} ! inf | nan | infinity | 1e999 | abc
                "#
            ));
        }
        let negative_zero = to_json(FLOAT8, "-0", NumericAs::Text).map(|v| v.to_string());
        assert_eq!(negative_zero, Ok("-0.0".into()));
        // float4's shortest text reads back as the same short f64 text.
        let float4 = to_json(FLOAT4, "0.1", NumericAs::Text);
        assert_eq!(float4, Ok(Value::from(0.1)));
        let precise = to_json(FLOAT8, "0.30000000000000004", NumericAs::Text);
        assert_eq!(precise, Ok(Value::from(0.1 + 0.2)));
    }

    #[test]
    fn numerics() {
        check(
            r#"
            numeric 0.10 => "0.10"
            numeric NaN => "NaN"
            numeric -Infinity => "-Infinity"
            numeric -1234567890123456789.000000000001 => "-1234567890123456789.000000000001"
            numeric ! 1e5 | abc | . | - | 1.2.3 | nan
            "#,
        );
        let number = |text: &str| to_json(NUMERIC, text, NumericAs::Number);
        assert_eq!(number("42"), Ok(Value::from(42)));
        assert_eq!(number("-9223372036854775808"), Ok(Value::from(i64::MIN)));
        assert_eq!(number("12.50"), Ok(Value::from(12.5)));
        assert_eq!(number("99999999999999999999"), Ok(Value::from(1e20)));
        assert_eq!(number("Infinity"), Ok(Value::from("Infinity")));
        assert_eq!(number("NaN"), Ok(Value::from("NaN")));
        assert!(number(&format!("1{}", "0".repeat(400))).is_err());
    }

    #[test]
    fn empty_and_padded_texts() {
        let checked = [
            BOOL,
            INT2,
            OID,
            FLOAT8,
            NUMERIC,
            JSON,
            BYTEA,
            DATE,
            TIMESTAMPTZ,
        ];
        for t in checked.into_iter().chain([INT4_ARRAY]) {
            assert!(to_json(t, "", NumericAs::Text).is_err(), "{t}");
        }
        assert!(to_json(INT4, " 1", NumericAs::Text).is_err());
        let padded = to_json(TEXT_ARRAY, " { a , \" b \" } ", NumericAs::Text);
        assert_eq!(padded, Ok(serde_json::json!(["a", " b "])));
    }

    #[test]
    fn texts_stay_as_printed() {
        let as_text = [
            TEXT, VARCHAR, NAME, CHAR, UUID, XML, BIT, VARBIT, INET, CIDR,
        ];
        let others = [MACADDR, MONEY, TIME, TIMETZ, INTERVAL, BPCHAR, 16_400, 1020];
        let texts = [
            "a b\\\"é ",
            "",
            "{1,2}",
            "12:00:00+05:30",
            "P1Y2M3DT4H5M6.5S",
        ];
        for t in as_text.into_iter().chain(others) {
            for text in texts {
                assert_eq!(to_json(t, text, NumericAs::Text), Ok(Value::from(text)));
            }
        }
    }

    #[test]
    fn json_and_bytea() {
        check(
            r#"
            jsonb {"a": [1, 2.5, {"b": null}], "c": {}} => {"c": {}, "a": [1, 2.5, {"b": null}]}
            jsonb [] => []
            json "s" => "s"
            json null => null
            json ! { | {'a': 1}
            bytea \x => ""
            bytea \x0a1B => "Chs="
            bytea \x00ff10 => "AP8Q"
            bytea ! \x0 | \xzz | \x+1 | a\\b\001
            "#,
        );
    }

    #[test]
    fn dates_and_timestamps() {
        check(
            r#"
            date 2024-01-31 => "2024-01-31"
            date 0044-03-15 BC => "0044-03-15 BC"
            date 10000-02-29 => "10000-02-29"
            date -infinity => "-infinity"
            date ! 2024-02-30 | 2023-02-29 | 1900-02-29 | 24-01-01 | 2024-13-01 | 2024/01/01
            date ! 0000-01-01 BC | 2024-01-00 | 2024-1-01
            timestamp 2024-01-31 12:00:00 => "2024-01-31T12:00:00"
            timestamp 2024-02-29 23:59:59.123456 => "2024-02-29T23:59:59.123456"
            timestamp 0044-03-15 12:00:00 BC => "0044-03-15 12:00:00 BC"
            timestamp infinity => "infinity"
            timestamp ! 2024-01-31T12:00:00 | 2024-01-31 24:00:00 | 2024-01-31 12:00:00.1234567
            timestamp ! 2024-01-31 12:00:00+00 | 2024-01-31 | 2024-01-31 12:00:00.
            timestamptz 2024-01-31 12:00:00+00 => "2024-01-31T12:00:00Z"
            timestamptz 2024-01-31 12:00:00.5+00 => "2024-01-31T12:00:00.5Z"
            timestamptz 2024-01-31 12:00:00+05 => "2024-01-31T12:00:00+05:00"
            timestamptz 2024-01-31 12:00:00-03:30 => "2024-01-31T12:00:00-03:30"
            timestamptz 2024-01-31 12:00:00+05:30:00 => "2024-01-31T12:00:00+05:30"
            timestamptz 1900-01-01 00:00:00+00:53:28 => "1900-01-01T00:00:00+00:53:28"
            timestamptz 0044-03-15 12:00:00+00 BC => "0044-03-15 12:00:00+00 BC"
            timestamptz -infinity => "-infinity"
            timestamptz ! 2024-01-31 12:00:00 | 2024-01-31 12:00:00+5 | 2024-01-31 12:00:00+05:60
            timestamptz ! 2024-01-31 12:00:00+01:02:03:04 | 2024-01-31 12:00:00Z
            "#,
        );
    }

    #[test]
    fn arrays() {
        check(
            r#"
            int4[] {1,2,NULL} => [1, 2, null]
            int4[] {} => []
            int4[] {{1,2},{3,4}} => [[1, 2], [3, 4]]
            int4[] [0:1]={1,2} => [1, 2]
            int4[] [1:1][-2:-1]={{5,6}} => [[5, 6]]
            int4[] { 1 , null } => [1, null]
            int4[] ! {1,abc} | {{1},x} | {1.5}
            text[] {"a b","c\"d","NULL",NULL} => ["a b", "c\"d", "NULL", null]
            text[] {"back\\slash",plain,"",é} => ["back\\slash", "plain", "", "é"]
            text[] {a\,b,"{}",\NULL,a\ , " b ",nUlL} => ["a,b", "{}", "NULL", "a ", " b ", null]
            text[] ! 1,2 | {1,2 | {1,,2} | {1}x | {"a} | {a"b} | {"a"b} | {a\
            text[] ! [0:1]{1,2} | [a:1]={1} | [0:1={1}
            text[] ! {{{{{{{1}}}}}}}
            bytea[] {"\\x0a1b",NULL} => ["Chs=", null]
            timestamptz[] {"2024-01-31 12:00:00+00",infinity} => ["2024-01-31T12:00:00Z","infinity"]
            jsonb[] {"{\"a\": {\"b\": [1]}}",NULL,"3"} => [{"a": {"b": [1]}}, null, 3]
            numeric[] {1.50,NaN} => ["1.50", "NaN"]
            bpchar[] {"a  ",b} => ["a  ", "b"]
            money[] {"$1.00"} => ["$1.00"]
            "#,
        );
        let floats = to_json(FLOAT8_ARRAY, "{1.5,-Infinity}", NumericAs::Number);
        assert_eq!(floats, Ok(serde_json::json!([1.5, "-Infinity"])));
        let error = to_json(INT4_ARRAY, "{1,abc}", NumericAs::Text).map_err(|e| e.to_string());
        let want = r#""abc" is not a valid PostgreSQL int4 value: expected an integer in "#;
        assert_eq!(error, Err(format!("{want}-2147483648..=2147483647")));
    }

    #[test]
    fn element_types_and_messages() {
        let arrays = [
            1000, 1001, 1002, 1003, 1005, 1007, 1009, 1014, 1015, 1016, 1021, 1022,
        ];
        let more = [
            1028, 1115, 1182, 1183, 1185, 1187, 1231, 1270, 2951, 199, 3807, 791,
        ];
        let names: Vec<_> = arrays.into_iter().chain(more).map(type_name).collect();
        let want = "bool[] bytea[] \"char\"[] name[] int2[] int4[] text[] bpchar[] varchar[] \
                    int8[] float4[] float8[] oid[] timestamp[] date[] time[] timestamptz[] \
                    interval[] numeric[] timetz[] uuid[] json[] jsonb[] money[]";
        assert_eq!(names.join(" "), want);
        assert_eq!((element_type(INT4), element_type(1020)), (None, None));
        assert_eq!(type_name(99_999), "type with OID 99999");
        let long = "x".repeat(100);
        let error = to_json(INT4, &long, NumericAs::Text).map_err(|e| e.to_string());
        let shown = format!(
            "\"{}…\" is not a valid PostgreSQL int4 value",
            "x".repeat(60)
        );
        assert!(error.is_err_and(|e| e.starts_with(&shown)));
    }
}
