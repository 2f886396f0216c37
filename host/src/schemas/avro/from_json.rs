//! JSON values as Avro values of a schema: the reverse of module
//! `to_json`, and what a sink writes with. A union takes the first branch
//! the value fits (`null` the null branch); a record's missing field takes
//! its default, and a field the schema lacks is refused (it would be lost).
//! Decimals come as numbers or strings (a string keeps more than 15
//! significant digits exactly); times as `to_json` writes them or as
//! integers in the type's own unit.

use std::collections::HashMap;

use apache_avro::schema::{NamesRef, RecordSchema};
use apache_avro::types::Value;
use apache_avro::{Days, Decimal, Duration, Millis, Months, Schema, Uuid};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use num_bigint::BigInt;
use serde_json::Value as Json;

use crate::time::{days_from_civil, parse_rfc3339};

/// `json` as a value of `schema`; `Err` says where (`at`, a field path)
/// and what does not fit.
pub(super) fn value(
    json: &Json,
    schema: &Schema,
    names: &NamesRef<'_>,
    at: &str,
) -> Result<Value, String> {
    let not = |what: &str| Err(format!("{}{what}, not {}", place(at), shown(json)));
    let schema = super::named(schema, names)?;
    Ok(match (schema, json) {
        (Schema::Null, Json::Null) => Value::Null,
        (Schema::Boolean, Json::Bool(b)) => Value::Boolean(*b),
        (Schema::Int, Json::Number(n)) => match n.as_i64().and_then(|n| i32::try_from(n).ok()) {
            Some(n) => Value::Int(n),
            None => return not("a 32-bit integer (int)"),
        },
        (Schema::Long, Json::Number(n)) => match n.as_i64() {
            Some(n) => Value::Long(n),
            None => return not("a 64-bit integer (long)"),
        },
        (Schema::Float | Schema::Double, json) => {
            let x = match json {
                Json::Number(n) => n.as_f64(),
                Json::String(s) => match s.as_str() {
                    "NaN" => Some(f64::NAN),
                    "Infinity" => Some(f64::INFINITY),
                    "-Infinity" => Some(f64::NEG_INFINITY),
                    _ => None,
                },
                _ => None,
            };
            match (x, schema) {
                (Some(x), Schema::Float) => Value::Float(x as f32),
                (Some(x), _) => Value::Double(x),
                (None, _) => return not("a number"),
            }
        }
        (Schema::String, Json::String(s)) => Value::String(s.clone()),
        (Schema::Bytes, Json::String(s)) => match BASE64.decode(s) {
            Ok(b) => Value::Bytes(b),
            Err(_) => return not("base64 bytes"),
        },
        (Schema::Fixed(f), Json::String(s)) => match BASE64.decode(s) {
            Ok(b) if b.len() == f.size => Value::Fixed(f.size, b),
            _ => return not(&format!("{} base64 bytes (fixed {})", f.size, f.name)),
        },
        (Schema::Enum(e), Json::String(s)) => match e.symbols.iter().position(|x| x == s) {
            Some(i) => Value::Enum(i as u32, s.clone()),
            None => {
                return not(&format!(
                    "a symbol of enum {} ({})",
                    e.name,
                    e.symbols.join(", ")
                ));
            }
        },
        (Schema::Union(union), json) => {
            let mut why = None;
            for (i, branch) in union.variants().iter().enumerate() {
                match value(json, branch, names, at) {
                    Ok(v) => return Ok(Value::Union(i as u32, Box::new(v))),
                    Err(e) => why = why.or(Some(e)),
                }
            }
            return Err(why.unwrap_or_else(|| format!("{}an empty union", place(at))));
        }
        (Schema::Array(array), Json::Array(items)) => Value::Array(
            (items.iter().enumerate())
                .map(|(i, item)| value(item, &array.items, names, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        (Schema::Map(map), Json::Object(entries)) => Value::Map(
            (entries.iter())
                .map(|(k, v)| Ok((k.clone(), value(v, &map.types, names, &join(at, k))?)))
                .collect::<Result<HashMap<_, _>, String>>()?,
        ),
        (Schema::Record(record), Json::Object(_)) => self::record(json, record, names, at)?,
        (Schema::Decimal(d), json) => {
            let text = match json {
                Json::Number(n) => n.to_string(),
                Json::String(s) => s.clone(),
                _ => return not("a decimal number"),
            };
            let Some(unscaled) = unscaled(&text, d.scale) else {
                return not(&format!(
                    "a decimal number with at most {} fraction digits",
                    d.scale
                ));
            };
            if unscaled.trim_start_matches('-').len() > d.precision {
                return not(&format!("a decimal of at most {} digits", d.precision));
            }
            let big: BigInt = unscaled.parse().expect("digits");
            Value::Decimal(Decimal::from(big.to_signed_bytes_be()))
        }
        (Schema::BigDecimal, json) => {
            let text = match json {
                Json::Number(n) => n.to_string(),
                Json::String(s) => s.clone(),
                _ => return not("a decimal number"),
            };
            match text.parse() {
                Ok(d) => Value::BigDecimal(d),
                Err(_) => return not("a decimal number"),
            }
        }
        (Schema::Uuid(_), Json::String(s)) => match Uuid::parse_str(s) {
            Ok(u) => Value::Uuid(u),
            Err(_) => return not("a UUID"),
        },
        (Schema::Date, json) => match json {
            Json::Number(n) => match n.as_i64().and_then(|n| i32::try_from(n).ok()) {
                Some(d) => Value::Date(d),
                None => return not("a date"),
            },
            Json::String(s) => match date(s) {
                Some(d) => Value::Date(d),
                None => return not("a date (YYYY-MM-DD)"),
            },
            _ => return not("a date (YYYY-MM-DD)"),
        },
        (Schema::TimeMillis, json) => match units(json, time_of_day, 1) {
            Some(t) => Value::TimeMillis(t as i32),
            None => return not("a time of day (HH:MM:SS.fff)"),
        },
        (Schema::TimeMicros, json) => match units(json, time_of_day, 1000) {
            Some(t) => Value::TimeMicros(t),
            None => return not("a time of day (HH:MM:SS.ffffff)"),
        },
        (
            Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos,
            json,
        ) => {
            let local = matches!(
                schema,
                Schema::LocalTimestampMillis
                    | Schema::LocalTimestampMicros
                    | Schema::LocalTimestampNanos
            );
            let per_ms = match schema {
                Schema::TimestampMillis | Schema::LocalTimestampMillis => 1,
                Schema::TimestampMicros | Schema::LocalTimestampMicros => 1000,
                _ => 1_000_000,
            };
            let read = |text: &str, per_ms: i64| match local {
                true => instant(&format!("{text}Z"), per_ms),
                false => instant(text, per_ms),
            };
            let Some(t) = units(json, read, per_ms) else {
                return not("a time (RFC 3339, or an integer in the type's unit)");
            };
            match schema {
                Schema::TimestampMillis => Value::TimestampMillis(t),
                Schema::TimestampMicros => Value::TimestampMicros(t),
                Schema::TimestampNanos => Value::TimestampNanos(t),
                Schema::LocalTimestampMillis => Value::LocalTimestampMillis(t),
                Schema::LocalTimestampMicros => Value::LocalTimestampMicros(t),
                _ => Value::LocalTimestampNanos(t),
            }
        }
        (Schema::Duration(_), Json::Object(o)) => {
            let part = |k: &str| {
                o.get(k)
                    .and_then(Json::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
            };
            match (part("months"), part("days"), part("millis")) {
                (Some(m), Some(d), Some(ms)) => {
                    Value::Duration(Duration::new(Months::new(m), Days::new(d), Millis::new(ms)))
                }
                _ => return not("a duration {\"months\", \"days\", \"millis\"}"),
            }
        }
        (schema, _) => return not(&expected(schema)),
    })
}

fn record(
    json: &Json,
    record: &RecordSchema,
    names: &NamesRef<'_>,
    at: &str,
) -> Result<Value, String> {
    let object = json.as_object().expect("checked by the caller");
    if let Some(extra) = object
        .keys()
        .find(|k| !record.fields.iter().any(|f| &f.name == *k))
    {
        return Err(format!(
            "{}field `{extra}` is not in record {} of the schema; add it to the schema or leave it out of the record",
            place(at),
            record.name
        ));
    }
    let mut fields = Vec::with_capacity(record.fields.len());
    for field in &record.fields {
        let path = join(at, &field.name);
        let v = match (object.get(&field.name), &field.default) {
            (Some(v), _) => value(v, &field.schema, names, &path)?,
            (None, Some(default)) => default_value(default, &field.schema, names, &path)?,
            (None, None) => {
                return Err(format!(
                    "{}no field `{}`, which record {} needs (it has no default)",
                    place(at),
                    field.name,
                    record.name
                ));
            }
        };
        fields.push((field.name.clone(), v));
    }
    Ok(Value::Record(fields))
}

/// A field's default (JSON, as the schema writes it; a union's is of its
/// first branch).
fn default_value(
    default: &Json,
    schema: &Schema,
    names: &NamesRef<'_>,
    at: &str,
) -> Result<Value, String> {
    match schema {
        Schema::Union(union) => {
            let first = union.variants().first().ok_or("an empty union")?;
            Ok(Value::Union(0, Box::new(value(default, first, names, at)?)))
        }
        schema => value(default, schema, names, at),
    }
}

fn place(at: &str) -> String {
    match at {
        "" => String::new(),
        at => format!("field `{at}`: "),
    }
}

fn join(at: &str, name: &str) -> String {
    match at {
        "" => name.to_owned(),
        at => format!("{at}.{name}"),
    }
}

fn shown(json: &Json) -> String {
    let text = json.to_string();
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text,
    }
}

fn expected(schema: &Schema) -> String {
    match schema {
        Schema::Null => "null".into(),
        Schema::Boolean => "true or false".into(),
        Schema::Int => "a 32-bit integer (int)".into(),
        Schema::Long => "a 64-bit integer (long)".into(),
        Schema::Float | Schema::Double => "a number".into(),
        Schema::Enum(e) => format!("a symbol of enum {} ({})", e.name, e.symbols.join(", ")),
        Schema::Fixed(f) => format!("{} base64 bytes (fixed {})", f.size, f.name),
        Schema::Duration(_) => "a duration {\"months\", \"days\", \"millis\"}".into(),
        Schema::String => "a string".into(),
        Schema::Bytes => "base64 bytes".into(),
        Schema::Array(_) => "an array".into(),
        Schema::Map(_) => "an object (map)".into(),
        Schema::Record(r) => format!("an object (record {})", r.name),
        Schema::Uuid(_) => "a UUID".into(),
        other => format!("a value of type {other:?}"),
    }
}

/// An integer in the type's unit, or a text `parse` reads.
fn units(json: &Json, parse: impl Fn(&str, i64) -> Option<i64>, per_ms: i64) -> Option<i64> {
    match json {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => parse(s, per_ms),
        _ => None,
    }
}

/// `text`, a decimal number, as the digits of its value times
/// 10^`scale`; `None` if not a number or with more fraction digits.
pub(super) fn unscaled(text: &str, scale: usize) -> Option<String> {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits_only(int) || !digits_only(frac) || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    // value = int.frac × 10^exp; we want value × 10^scale as an integer.
    let mut digits = format!("{int}{frac}");
    let shift = exp + scale as i64 - frac.len() as i64;
    if shift >= 0 {
        digits.push_str(&"0".repeat(shift as usize));
    } else {
        let cut = (-shift) as usize;
        let keep = digits.len().checked_sub(cut)?;
        if digits[keep..].bytes().any(|b| b != b'0') {
            return None;
        }
        digits.truncate(keep);
    }
    let digits = digits.trim_start_matches('0');
    Some(match digits {
        "" => "0".into(),
        d => format!("{sign}{d}"),
    })
}

/// `YYYY-MM-DD` as days since the epoch.
fn date(text: &str) -> Option<i32> {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let n = |s: &str| s.parse::<i64>().ok();
    let (y, m, d) = (n(&text[..4])?, n(&text[5..7])?, n(&text[8..])?);
    if !(1..=12).contains(&m) || !(1..=crate::time::days_in_month(y, m)).contains(&d) {
        return None;
    }
    i32::try_from(days_from_civil(y, m, d)).ok()
}

/// The digits of a fraction of a second past the milliseconds, as a count
/// of 1/`per_ms` milliseconds.
fn sub_millis(text: &str, per_ms: i64) -> i64 {
    let Some(dot) = text.find('.') else {
        return 0;
    };
    let digits: String = text[dot + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .skip(3)
        .collect();
    let width = match per_ms {
        1 => 0,
        1000 => 3,
        _ => 6,
    };
    let padded = format!("{digits:0<width$}");
    padded[..width].parse().unwrap_or(0)
}

/// An RFC 3339 time in 1/`per_ms` milliseconds since the epoch.
fn instant(text: &str, per_ms: i64) -> Option<i64> {
    let ms = parse_rfc3339(text)?;
    ms.checked_mul(per_ms)?
        .checked_add(sub_millis(text, per_ms))
}

/// `HH:MM:SS[.fraction]` in 1/`per_ms` milliseconds since midnight.
fn time_of_day(text: &str, per_ms: i64) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let n = |s: &str| s.parse::<i64>().ok();
    let (h, m, s) = (n(&text[..2])?, n(&text[3..5])?, n(&text[6..8])?);
    if h > 23 || m > 59 || s > 59 {
        return None;
    }
    let millis = match &text[8..] {
        "" => 0,
        f if f.starts_with('.') => {
            let digits: String = f[1..].chars().take(3).collect();
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            format!("{digits:0<3}").parse().ok()?
        }
        _ => return None,
    };
    Some(((h * 60 + m) * 60 + s) * 1000 * per_ms + millis * per_ms + sub_millis(text, per_ms))
}
