//! Avro values as JSON text, walked with their schema (which says a
//! decimal's scale and a union's branch): written straight into a buffer,
//! numbers with their own digits.
//!
//! The mapping: `null`, booleans, `int`/`long` and strings as themselves;
//! `float`/`double` as numbers (`NaN`, `Infinity`, `-Infinity` as
//! strings); `bytes` and `fixed` as base64 strings; an enum as its symbol;
//! a union as the value of its branch; arrays as arrays; maps as objects
//! (keys sorted); records as objects in field order; `decimal` as a number
//! with exactly `scale` fraction digits; `uuid` as a string; `date` as
//! `YYYY-MM-DD`; `time-*` as `HH:MM:SS.fff[fff]`; `timestamp-*` as RFC
//! 3339 in UTC (milli-, micro- or nanoseconds as the type has them);
//! `local-timestamp-*` the same without the `Z`; `duration` as
//! `{"months", "days", "millis"}`.

use std::borrow::Cow;
use std::io::Write;

use apache_avro::Schema;
use apache_avro::schema::NamesRef;
use apache_avro::types::Value;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use num_bigint::BigInt;

use crate::time::format_rfc3339;

/// Appends `value`, of `schema` (whose named types are `names`), as JSON.
pub(super) fn write(
    value: &Value,
    schema: &Schema,
    names: &NamesRef<'_>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let schema = super::named(schema, names)?;
    match (value, schema) {
        (Value::Union(i, inner), Schema::Union(union)) => {
            let branch = (union.variants().get(*i as usize))
                .ok_or_else(|| format!("a union value names branch {i}, which it lacks"))?;
            write(inner, branch, names, out)?;
        }
        (Value::Record(fields), Schema::Record(record)) => {
            out.push(b'{');
            for (i, ((name, value), field)) in fields.iter().zip(&record.fields).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(name, out);
                out.push(b':');
                write(value, &field.schema, names, out)?;
            }
            out.push(b'}');
        }
        (Value::Array(items), Schema::Array(array)) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, &array.items, names, out)?;
            }
            out.push(b']');
        }
        (Value::Map(entries), Schema::Map(map)) => {
            let mut keys: Vec<&String> = entries.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(key, out);
                out.push(b':');
                write(&entries[key], &map.types, names, out)?;
            }
            out.push(b'}');
        }
        (Value::Duration(d), _) => write!(
            out,
            "{{\"months\":{},\"days\":{},\"millis\":{}}}",
            u32::from(d.months()),
            u32::from(d.days()),
            u32::from(d.millis())
        )
        .expect("writes to a Vec"),
        (value, schema) => scalar(value, schema)?.write_json(out),
    }
    Ok(())
}

/// An Avro value that is one JSON scalar, as JSON has it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar<'v> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An `int` or `long`.
    Int(i64),
    /// A `float` or `double`: a number, or (not finite) a string.
    Float(f64),
    /// A string.
    Text(Cow<'v, str>),
    /// A number's text, digit for digit (a decimal).
    Number(String),
}

impl Scalar<'_> {
    /// Appends its JSON text.
    pub(super) fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Scalar::Null => out.extend_from_slice(b"null"),
            Scalar::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Scalar::Int(n) => write!(out, "{n}").expect("writes to a Vec"),
            Scalar::Float(x) => match non_finite(*x) {
                Some(name) => string(name, out),
                None => serde_json::to_writer(out, x).expect("writes to a Vec"),
            },
            Scalar::Text(s) => string(s, out),
            Scalar::Number(text) => out.extend_from_slice(text.as_bytes()),
        }
    }
}

/// How JSON names a float that is not finite (a string), if it is not.
pub(super) fn non_finite(x: f64) -> Option<&'static str> {
    match x {
        x if x.is_nan() => Some("NaN"),
        x if x.is_infinite() => Some(if x > 0.0 { "Infinity" } else { "-Infinity" }),
        _ => None,
    }
}

/// `digits` (an integer's text, maybe with `-`) divided by 10^`scale`, as
/// a JSON number with `scale` fraction digits.
pub(super) fn scaled(digits: &str, scale: usize) -> String {
    let (sign, digits) = match digits.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", digits),
    };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

fn string(text: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(out, text).expect("writes to a Vec");
}

/// `sub` digits of a time below the millisecond (`digits` of them), put
/// before the `Z` of an RFC 3339 time with milliseconds.
fn finer(ms: i64, sub: i64, digits: usize, utc: bool) -> Result<String, String> {
    let text = format_rfc3339(ms).ok_or("a timestamp outside the years 0 to 9999")?;
    let text = text.trim_end_matches('Z');
    let sub = match digits {
        0 => String::new(),
        n => format!("{sub:0n$}"),
    };
    Ok(format!("{text}{sub}{}", if utc { "Z" } else { "" }))
}

/// A time in `per_ms` units (1, 1000, 1000000) since the epoch.
fn timestamp(units: i64, per_ms: i64, utc: bool) -> Result<String, String> {
    let digits = match per_ms {
        1 => 0,
        1000 => 3,
        _ => 6,
    };
    finer(
        units.div_euclid(per_ms),
        units.rem_euclid(per_ms),
        digits,
        utc,
    )
}

/// A time of day in `per_ms` units since midnight.
fn time_of_day(units: i64, per_ms: i64) -> Result<String, String> {
    if units < 0 || units >= 86_400_000 * per_ms {
        return Err(format!("a time of day out of range ({units})"));
    }
    let ms = units / per_ms;
    let mut text = format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    );
    if per_ms > 1 {
        text.push_str(&format!("{:03}", units % per_ms));
    }
    Ok(text)
}

/// `value` (of `schema`, named types and unions already followed) as a
/// JSON scalar; `Err` for a container, a duration, or a value that does
/// not fit its schema.
pub(super) fn scalar<'v>(value: &'v Value, schema: &Schema) -> Result<Scalar<'v>, String> {
    let text = |s: String| Scalar::Text(Cow::Owned(s));
    Ok(match (value, schema) {
        (Value::Decimal(decimal), Schema::Decimal(d)) => {
            let bytes: Vec<u8> = decimal.try_into().map_err(|e| format!("a decimal: {e}"))?;
            let unscaled = BigInt::from_signed_bytes_be(&bytes);
            Scalar::Number(scaled(&unscaled.to_string(), d.scale))
        }
        (Value::Null, _) => Scalar::Null,
        (Value::Boolean(b), _) => Scalar::Bool(*b),
        (Value::Int(n), _) => Scalar::Int(i64::from(*n)),
        (Value::Long(n), _) => Scalar::Int(*n),
        (Value::Float(x), _) => Scalar::Float(f64::from(*x)),
        (Value::Double(x), _) => Scalar::Float(*x),
        (Value::Bytes(b) | Value::Fixed(_, b), _) => text(BASE64.encode(b)),
        (Value::String(s) | Value::Enum(_, s), _) => Scalar::Text(Cow::Borrowed(s)),
        (Value::Uuid(u), _) => text(u.to_string()),
        (Value::BigDecimal(d), _) => Scalar::Number(d.to_string()),
        (Value::Date(days), _) => {
            let day = format_rfc3339(i64::from(*days) * 86_400_000)
                .ok_or("a date outside the years 0 to 9999")?;
            text(day[..10].to_owned())
        }
        (Value::TimeMillis(t), _) => text(time_of_day(i64::from(*t), 1)?),
        (Value::TimeMicros(t), _) => text(time_of_day(*t, 1000)?),
        (Value::TimestampMillis(t), _) => text(timestamp(*t, 1, true)?),
        (Value::TimestampMicros(t), _) => text(timestamp(*t, 1000, true)?),
        (Value::TimestampNanos(t), _) => text(timestamp(*t, 1_000_000, true)?),
        (Value::LocalTimestampMillis(t), _) => text(timestamp(*t, 1, false)?),
        (Value::LocalTimestampMicros(t), _) => text(timestamp(*t, 1000, false)?),
        (Value::LocalTimestampNanos(t), _) => text(timestamp(*t, 1_000_000, false)?),
        (other, _) => {
            return Err(format!(
                "an Avro value that does not fit its schema: {other:?}"
            ));
        }
    })
}
