//! The fields a `jsonl` source reads from a line, its key and its event
//! time, found in one pass of the JSON parser without building a
//! [`Value`] tree: every other field is skipped (and still checked to be
//! JSON).
//!
//! Invariant: the key is what [`Value`] would give for the field: a string
//! is its (unescaped) bytes, `null` or a missing field is no key, any other
//! value is its JSON text as [`Value`]'s `Display` writes it.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use weir_flat::row;

use crate::time::parse_rfc3339;

/// What one line holds of the fields asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Fields<'a> {
    /// The key field's bytes; `None` when it is missing or `null` (or the
    /// line is not an object).
    pub(crate) key: Option<Cow<'a, [u8]>>,
    /// The event-time field.
    pub(crate) time: Time,
}

/// The event-time field of a line.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) enum Time {
    /// No such field (or the line is not an object).
    #[default]
    Missing,
    /// Milliseconds since the Unix epoch.
    Millis(i64),
    /// Not a time: what the field holds, as a message shows it (`"yesterday"`,
    /// `1.5`, `null`, `an object`).
    Bad(String),
}

/// Reads the fields `key` and `time` (either may be absent) of JSON `line`;
/// the error is the parser's when `line` is not one JSON value.
pub(crate) fn read_fields<'a>(
    line: &'a str,
    key: Option<&str>,
    time: Option<&str>,
) -> Result<Fields<'a>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(line);
    let fields = LineSeed { key, time }.deserialize(&mut de)?;
    de.end()?;
    Ok(fields)
}

/// [`read_fields`] of a row (`weir_flat::row`, checked): the same key and
/// time as its JSON object gives, found without writing it; `None` when
/// either field is a float or a decimal, whose text only the JSON path
/// writes as [`Value`] does.
pub(crate) fn row_fields<'r>(
    row: &'r [u8],
    key: Option<&str>,
    time: Option<&str>,
) -> Option<Fields<'r>> {
    let mut fields = Fields::default();
    // A repeated field: the last one counts, as in a `Value`.
    for field in row::fields(row) {
        let (name, value) = field.expect("a checked row");
        let (is_key, is_time) = (key == Some(name), time == Some(name));
        if !(is_key || is_time) {
            continue;
        }
        if let row::Value::Float(_) | row::Value::Decimal(_) = value {
            return None;
        }
        if is_key {
            // `Display` of a boolean or an integer is its JSON.
            let digits = |n: &dyn fmt::Display| Some(Cow::Owned(n.to_string().into_bytes()));
            fields.key = match value {
                row::Value::Str(s) => Some(Cow::Borrowed(s.as_bytes())),
                row::Value::Null => None,
                row::Value::Bool(b) => digits(&b),
                row::Value::Int(n) => digits(&n),
                row::Value::Uint(n) => digits(&n),
                row::Value::Float(_) | row::Value::Decimal(_) => unreachable!("returned above"),
            };
        }
        if is_time {
            fields.time = match value {
                row::Value::Str(s) => {
                    parse_rfc3339(s).map_or_else(|| Time::Bad(shown(s)), Time::Millis)
                }
                row::Value::Null => Time::Bad("null".into()),
                row::Value::Bool(b) => Time::Bad(b.to_string()),
                row::Value::Int(n) => Time::Millis(n),
                row::Value::Uint(n) => {
                    i64::try_from(n).map_or_else(|_| Time::Bad(n.to_string()), Time::Millis)
                }
                row::Value::Float(_) | row::Value::Decimal(_) => unreachable!("returned above"),
            };
        }
    }
    Some(fields)
}

/// The most characters of a bad timestamp a message quotes.
const SHOWN_CHARS: usize = 64;

/// How a message shows a string a record holds: JSON-quoted, cut short.
pub(crate) fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!(
            "{}...",
            serde_json::to_string(&text[..at]).unwrap_or_default()
        ),
        None => serde_json::to_string(text).unwrap_or_default(),
    }
}

/// The event time a JSON value stands for: an integer (`i64`) is
/// milliseconds, a string an RFC 3339 time.
fn time_of(value: &Value) -> Time {
    match value {
        Value::Number(n) => n
            .as_i64()
            .map_or_else(|| Time::Bad(n.to_string()), Time::Millis),
        Value::String(s) => parse_rfc3339(s).map_or_else(|| Time::Bad(shown(s)), Time::Millis),
        Value::Null => Time::Bad("null".into()),
        Value::Bool(b) => Time::Bad(b.to_string()),
        Value::Array(_) => Time::Bad("an array".into()),
        Value::Object(_) => Time::Bad("an object".into()),
    }
}

/// The key a JSON value stands for (see the module's invariant).
fn key_of(value: Value) -> Option<Cow<'static, [u8]>> {
    match value {
        Value::String(s) => Some(Cow::Owned(s.into_bytes())),
        Value::Null => None,
        other => Some(Cow::Owned(other.to_string().into_bytes())),
    }
}

/// Reads a whole line: an object's wanted fields, nothing of anything else.
struct LineSeed<'k> {
    key: Option<&'k str>,
    time: Option<&'k str>,
}

impl<'de> DeserializeSeed<'de> for LineSeed<'_> {
    type Value = Fields<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Fields<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_> {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let mut fields = Fields::default();
        // A repeated field: the last one counts, as in a `Value`.
        while let Some(name) = map.next_key::<Text<'de>>()? {
            let is_key = self.key == Some(&*name.0);
            let is_time = self.time == Some(&*name.0);
            match (is_key, is_time) {
                (true, true) => {
                    let value: Value = map.next_value()?;
                    fields.time = time_of(&value);
                    fields.key = key_of(value);
                }
                (true, false) => fields.key = map.next_value_seed(KeySeed)?,
                (false, true) => fields.time = map.next_value_seed(TimeSeed)?,
                (false, false) => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Fields<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Fields::default())
    }

    fn visit_bool<E>(self, _: bool) -> Result<Fields<'de>, E> {
        Ok(Fields::default())
    }

    fn visit_i64<E>(self, _: i64) -> Result<Fields<'de>, E> {
        Ok(Fields::default())
    }

    fn visit_u64<E>(self, _: u64) -> Result<Fields<'de>, E> {
        Ok(Fields::default())
    }

    fn visit_f64<E>(self, _: f64) -> Result<Fields<'de>, E> {
        Ok(Fields::default())
    }

    fn visit_str<E>(self, _: &str) -> Result<Fields<'de>, E> {
        Ok(Fields::default())
    }

    fn visit_unit<E>(self) -> Result<Fields<'de>, E> {
        Ok(Fields::default())
    }
}

/// A JSON string (a field name, a value), borrowed from the text unless
/// it has escapes.
pub(crate) struct Text<'de>(pub(crate) Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// Reads the key field's value.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Option<Cow<'de, [u8]>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Option<Cow<'de, [u8]>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(s.as_bytes())))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(s.as_bytes().to_vec())))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(key_of(Value::Bool(b)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(key_of(Value::from(n)))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(key_of(Value::from(n)))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
        Ok(key_of(Value::from(n)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Ok(key_of(Value::deserialize(SeqAccessDeserializer::new(seq))?))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(key_of(Value::deserialize(MapAccessDeserializer::new(map))?))
    }
}

/// Reads the event-time field's value.
struct TimeSeed;

impl<'de> DeserializeSeed<'de> for TimeSeed {
    type Value = Time;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Time, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TimeSeed {
    type Value = Time;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_i64<E>(self, n: i64) -> Result<Time, E> {
        Ok(Time::Millis(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Time, E> {
        Ok(time_of(&Value::from(n)))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Time, E> {
        Ok(time_of(&Value::from(n)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Time, E> {
        Ok(parse_rfc3339(s).map_or_else(|| Time::Bad(shown(s)), Time::Millis))
    }

    fn visit_unit<E>(self) -> Result<Time, E> {
        Ok(time_of(&Value::Null))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Time, E> {
        Ok(time_of(&Value::Bool(b)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Time, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(time_of(&Value::Array(Vec::new())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Time, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(time_of(&Value::Object(serde_json::Map::new())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(line: &str, field: &str) -> Option<Vec<u8>> {
        read_fields(line, Some(field), None)
            .unwrap()
            .key
            .map(Cow::into_owned)
    }

    fn time(line: &str) -> Time {
        read_fields(line, None, Some("ts")).unwrap().time
    }

    /// The key is what a parsed `Value` gives, for every kind of value.
    #[test]
    fn keys_are_those_of_a_parsed_value() {
        let lines = [
            r#"{"k":"x","v":1}"#,
            r#"{"k":"a\"b\u00e9\n"}"#,
            r#"{"k":null}"#,
            r#"{"v":1}"#,
            r#"{"k":12}"#,
            r#"{"k":-12}"#,
            r#"{"k":1.50}"#,
            r#"{"k":1e3}"#,
            r#"{"k":18446744073709551616}"#,
            r#"{"k":true}"#,
            r#"{"k": [1, {"a" : 2}] }"#,
            r#"{"k": {"b":1, "a":[null]}}"#,
            r#"{"k":"first","k":"last"}"#,
            r#"{"\u006b":"escaped name"}"#,
            r#"[1,2]"#,
            r#""text""#,
            r#"7"#,
            r#"null"#,
        ];
        for line in lines {
            let parsed: Value = serde_json::from_str(line).unwrap();
            let want = parsed.get("k").and_then(|v| key_of(v.clone()));
            assert_eq!(key(line, "k"), want.map(Cow::into_owned), "{line}");
        }
    }

    #[test]
    fn times_are_integer_milliseconds_or_rfc3339_strings() {
        assert_eq!(
            time(r#"{"ts":1700000000000}"#),
            Time::Millis(1_700_000_000_000)
        );
        assert_eq!(time(r#"{"ts":-250}"#), Time::Millis(-250));
        assert_eq!(
            time(r#"{"a":{"ts":1},"ts":"2026-12-01T15:30:00.250+01:00"}"#),
            Time::Millis(1_796_135_400_250)
        );
        assert_eq!(
            time(r#"{"ts":"1970-01-01T00:00:00\u005a"}"#),
            Time::Millis(0)
        );
        let bad =
            |line: &str, shown: &str| assert_eq!(time(line), Time::Bad(shown.into()), "{line}");
        bad(r#"{"ts":"yesterday"}"#, r#""yesterday""#);
        bad(r#"{"ts":"1700000000000"}"#, r#""1700000000000""#);
        bad(r#"{"ts":1.5}"#, "1.5");
        bad(r#"{"ts":1.0}"#, "1.0");
        bad(r#"{"ts":9223372036854775808}"#, "9223372036854775808");
        bad(r#"{"ts":null}"#, "null");
        bad(r#"{"ts":false}"#, "false");
        bad(r#"{"ts":[1]}"#, "an array");
        bad(r#"{"ts":{"ms":1}}"#, "an object");
        assert_eq!(time(r#"{"t":1}"#), Time::Missing);
        assert_eq!(time("[1]"), Time::Missing);
        let long = format!(r#"{{"ts":"{}"}}"#, "x".repeat(100));
        assert_eq!(time(&long), Time::Bad(format!("\"{}\"...", "x".repeat(64))));
    }

    #[test]
    fn one_field_can_be_both_key_and_time() {
        let f = read_fields(r#"{"ts":5}"#, Some("ts"), Some("ts")).unwrap();
        assert_eq!(f.key.as_deref(), Some(&b"5"[..]));
        assert_eq!(f.time, Time::Millis(5));
    }

    /// Skipped fields are still parsed: a line that is not JSON is an error.
    #[test]
    fn lines_that_are_not_json_are_errors() {
        for line in [
            r#"{"k":"x""#,
            r#"{"k":"x"} {}"#,
            r#"{"k":"x","v":[1,}"#,
            r#"{"k":"x","v":"\q"}"#,
            r#"{"k":"x","v":01}"#,
            "",
        ] {
            assert!(read_fields(line, Some("k"), Some("ts")).is_err(), "{line}");
        }
    }

    /// A row's key and time are its JSON object's, field by field; a
    /// float or decimal in either field leaves them to the JSON path.
    #[test]
    fn a_rows_key_and_time_are_those_of_its_json() {
        let rows: [&dyn Fn(&mut row::RowWriter); 12] = [
            &|r| {
                r.str("k", "x").i64("ts", 5);
            },
            &|r| {
                r.str("k", "a\"bé\n")
                    .str("ts", "2026-12-01T15:30:00.250+01:00");
            },
            &|r| {
                r.null("k").null("ts");
            },
            &|r| {
                r.u64("v", 1);
            },
            &|r| {
                r.u64("k", 12).i64("ts", -250);
            },
            &|r| {
                r.i64("k", -12).u64("ts", i64::MAX as u64);
            },
            &|r| {
                r.u64("k", u64::MAX).u64("ts", 1 << 63);
            },
            &|r| {
                r.bool("k", true).bool("ts", false);
            },
            &|r| {
                r.str("k", "first")
                    .str("k", "last")
                    .i64("ts", 1)
                    .str("ts", "yesterday");
            },
            &|r| {
                r.str("ts", "1700000000000").str("k", "");
            },
            &|r| {
                r.decimal("k", "1.50");
            },
            &|r| {
                r.str("k", "x").f64("ts", 1e3);
            },
        ];
        let mut decided = 0;
        for write in rows {
            let mut row = Vec::new();
            write(&mut row::RowWriter::new(&mut row));
            let mut json = Vec::new();
            row::write_json(&row, &mut json).unwrap();
            let line = std::str::from_utf8(&json).unwrap();
            for (key, time) in [
                (Some("k"), Some("ts")),
                (Some("ts"), Some("k")),
                (Some("k"), Some("k")),
                (None, Some("ts")),
                (Some("k"), None),
            ] {
                let want = read_fields(line, key, time).unwrap();
                match row_fields(&row, key, time) {
                    Some(got) => {
                        assert_eq!(got, want, "{line} {key:?} {time:?}");
                        decided += 1;
                    }
                    None => assert!(line.contains('.'), "{line}"),
                }
            }
        }
        assert!(decided >= 50, "{decided}");
    }
}
