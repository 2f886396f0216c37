//! Ordering of primary-key values the way PostgreSQL's btree orders them,
//! from the texts PostgreSQL printed (the session settings of
//! [`super::value`]), to tell whether a row's key lies after a boundary key.
//!
//! Invariants:
//! - text-like types compare as raw UTF-8 bytes, as the snapshot queries
//!   order them with `COLLATE "C"`; `bpchar` ignores trailing spaces;
//! - `numeric` compares exactly, digit by digit, at any length:
//!   `-Infinity` < every number < `Infinity` < `NaN`, and `NaN` = `NaN`;
//! - dates and timestamps compare as instants on the proleptic Gregorian
//!   calendar (BC years included, offsets applied), `-infinity` first and
//!   `infinity` last;
//! - a text that is not a value of its type is a [`ValueError`], and a type
//!   not listed by [`orderable`] compares as `None`, never as a guess.
//!
//! The numeric, date and timestamp parsers here also serve [`super::value`].

use std::cmp::Ordering;

use weir::time::{days_from_civil, days_in_month};

use super::value::oid::*;
use super::value::{ValueError, decode_bytea, parse_bool, parse_int};

/// Whether [`compare`] can order values of type `type_oid`.
pub fn orderable(type_oid: u32) -> bool {
    matches!(
        type_oid,
        INT2 | INT4
            | INT8
            | OID
            | BOOL
            | TEXT
            | VARCHAR
            | NAME
            | BPCHAR
            | UUID
            | DATE
            | TIMESTAMP
            | TIMESTAMPTZ
            | NUMERIC
            | BYTEA
    )
}

/// Compares two values of one column's type. `None` only for a type that
/// is not orderable.
pub fn compare(type_oid: u32, a: &str, b: &str) -> Result<Option<Ordering>, ValueError> {
    let ordering = match type_oid {
        INT2 | INT4 | INT8 | OID => parse_int(type_oid, a)?.cmp(&parse_int(type_oid, b)?),
        BOOL => parse_bool(type_oid, a)?.cmp(&parse_bool(type_oid, b)?),
        TEXT | VARCHAR | NAME => a.as_bytes().cmp(b.as_bytes()),
        BPCHAR => a.trim_end_matches(' ').cmp(b.trim_end_matches(' ')),
        UUID => uuid(a)?.cmp(&uuid(b)?),
        DATE | TIMESTAMP | TIMESTAMPTZ => {
            parse_moment(type_oid, a)?.cmp(&parse_moment(type_oid, b)?)
        }
        NUMERIC => numeric(a)?.cmp(&numeric(b)?),
        BYTEA => bytea(a)?.cmp(&bytea(b)?),
        _ => return Ok(None),
    };
    Ok(Some(ordering))
}

/// Compares two composite keys column by column (lexicographically, as a
/// row comparison `(a1,a2) > (b1,b2)` does).
///
/// `None` when any column's type is not orderable; a key whose length is
/// not the number of types is a [`ValueError::KeyLength`].
pub fn compare_keys<S: AsRef<str>>(
    type_oids: &[u32],
    a: &[S],
    b: &[S],
) -> Result<Option<Ordering>, ValueError> {
    for key in [a, b] {
        if key.len() != type_oids.len() {
            return Err(ValueError::KeyLength {
                columns: type_oids.len(),
                values: key.len(),
            });
        }
    }
    if !type_oids.iter().all(|&t| orderable(t)) {
        return Ok(None);
    }
    for ((&type_oid, a), b) in type_oids.iter().zip(a).zip(b) {
        match compare(type_oid, a.as_ref(), b.as_ref())? {
            Some(Ordering::Equal) => {}
            decided => return Ok(decided),
        }
    }
    Ok(Some(Ordering::Equal))
}

/// A `uuid`'s 16 bytes, from its canonical text (either case), its 32 hex
/// digits alone, or either in braces.
fn uuid(text: &str) -> Result<[u8; 16], ValueError> {
    let invalid = || ValueError::invalid(UUID, text, "expected 32 hex digits (8-4-4-4-12)");
    let inner = text
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or(text);
    let hex: Vec<u8> = match inner.len() {
        32 => inner.bytes().collect(),
        36 if [8, 13, 18, 23].iter().all(|&i| inner.as_bytes()[i] == b'-') => {
            inner.bytes().filter(|&b| b != b'-').collect()
        }
        _ => return Err(invalid()),
    };
    let nibble = |b: u8| char::from(b).to_digit(16).ok_or_else(invalid);
    let mut out = [0; 16];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = (nibble(pair[0])? * 16 + nibble(pair[1])?) as u8;
    }
    Ok(out)
}

fn bytea(text: &str) -> Result<Vec<u8>, ValueError> {
    decode_bytea(text).ok_or_else(|| {
        ValueError::invalid(
            BYTEA,
            text,
            "expected hex format bytes (\\x0a1b); set bytea_output=hex",
        )
    })
}

fn numeric(text: &str) -> Result<Numeric<'_>, ValueError> {
    parse_numeric(text).ok_or_else(|| {
        ValueError::invalid(
            NUMERIC,
            text,
            "expected a decimal number, NaN, Infinity or -Infinity",
        )
    })
}

/// A `numeric` value, in PostgreSQL's sort order (the variants' order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Numeric<'a> {
    /// `-Infinity`.
    NegInfinity,
    /// A number.
    Finite(Decimal<'a>),
    /// `Infinity`.
    Infinity,
    /// `NaN`, after every other value and equal to itself.
    NaN,
}

/// A finite decimal in a canonical form: equal values have equal fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Decimal<'a> {
    /// Below zero (never set for zero).
    negative: bool,
    /// Digits before the point, without leading zeros.
    int: &'a str,
    /// Digits after the point, without trailing zeros.
    frac: &'a str,
}

impl Ord for Decimal<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Without leading zeros, a longer integer part is a larger magnitude;
        // without trailing zeros, fraction digits compare as strings.
        let magnitude =
            |x: &Self, y: &Self| (x.int.len(), x.int, x.frac).cmp(&(y.int.len(), y.int, y.frac));
        match (self.negative, other.negative) {
            (false, false) => magnitude(self, other),
            (true, true) => magnitude(other, self),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
        }
    }
}

impl PartialOrd for Decimal<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Parses a `numeric` text as `numeric_out` prints it: `NaN`, `Infinity`,
/// `-Infinity`, or an optional `-`, digits and an optional fraction (no
/// exponent). `None` for anything else.
pub(super) fn parse_numeric(text: &str) -> Option<Numeric<'_>> {
    match text {
        "NaN" => return Some(Numeric::NaN),
        "Infinity" => return Some(Numeric::Infinity),
        "-Infinity" => return Some(Numeric::NegInfinity),
        _ => {}
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !all_digits(int) || !all_digits(frac) {
        return None;
    }
    let (int, frac) = (int.trim_start_matches('0'), frac.trim_end_matches('0'));
    let negative = negative && !(int.is_empty() && frac.is_empty());
    Some(Numeric::Finite(Decimal {
        negative,
        int,
        frac,
    }))
}

/// A `date`, `timestamp` or `timestamptz` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Moment {
    /// `-infinity`, before every other value.
    NegInfinity,
    /// A finite value: microseconds since 1970-01-01 00:00:00 UTC (days
    /// times a day's microseconds for a date), proleptic Gregorian.
    At(i128),
    /// `infinity`, after every other value.
    Infinity,
}

/// A finite date or timestamp text split into its parts.
pub(super) struct Parts<'a> {
    /// The date as printed, without ` BC`.
    pub(super) date: &'a str,
    /// The time of day as printed, empty for a date.
    pub(super) time: &'a str,
    /// The offset as printed (`+05:30`), empty when there is none.
    pub(super) offset: &'a str,
    /// Whether the text ends in ` BC`.
    pub(super) bc: bool,
    /// The instant, offset applied (see [`Moment::At`]).
    micros: i128,
    /// The offset in seconds east of UTC.
    pub(super) offset_seconds: i64,
}

const MICROS_PER_DAY: i128 = 86_400_000_000;

/// Parses a `date` (`2024-01-31`, `0044-03-15 BC`), `timestamp`
/// (`2024-01-31 12:00:00.5`) or `timestamptz` (`... 12:00:00+05:30`) text,
/// `infinity` and `-infinity` included.
pub(super) fn parse_moment(type_oid: u32, text: &str) -> Result<Moment, ValueError> {
    match text {
        "infinity" => Ok(Moment::Infinity),
        "-infinity" => Ok(Moment::NegInfinity),
        _ => parse_parts(type_oid, text).map(|p| Moment::At(p.micros)),
    }
}

/// Splits and checks a finite `date`, `timestamp` or `timestamptz` text.
pub(super) fn parse_parts(type_oid: u32, text: &str) -> Result<Parts<'_>, ValueError> {
    let expected = match type_oid {
        DATE => "expected YYYY-MM-DD, optionally followed by BC",
        TIMESTAMP => "expected YYYY-MM-DD HH:MM:SS[.ffffff], optionally followed by BC",
        _ => "expected YYYY-MM-DD HH:MM:SS[.ffffff]+HH[:MM[:SS]], optionally followed by BC",
    };
    let invalid = || ValueError::invalid(type_oid, text, expected);
    let (body, bc) = match text.strip_suffix(" BC") {
        Some(body) => (body, true),
        None => (text, false),
    };
    let (date, clock) = match type_oid {
        DATE => (body, ""),
        _ => body.split_once(' ').ok_or_else(invalid)?,
    };
    let (time, offset) = match type_oid {
        TIMESTAMPTZ => clock.split_at(clock.find(['+', '-']).ok_or_else(invalid)?),
        _ => (clock, ""),
    };
    let days = parse_date(date, bc).ok_or_else(invalid)?;
    let time_micros = if type_oid == DATE {
        0
    } else {
        parse_time(time).ok_or_else(invalid)?
    };
    let offset_seconds = if type_oid == TIMESTAMPTZ {
        parse_offset(offset).ok_or_else(invalid)?
    } else {
        0
    };
    Ok(Parts {
        date,
        time,
        offset,
        bc,
        micros: days * MICROS_PER_DAY + time_micros - i128::from(offset_seconds) * 1_000_000,
        offset_seconds,
    })
}

/// Days since 1970-01-01 of `YYYY-MM-DD` (at least four year digits), a
/// year before Christ when `bc` is set.
fn parse_date(date: &str, bc: bool) -> Option<i128> {
    let mut fields = date.split('-');
    let (year, month, day) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() || year.len() < 4 || month.len() != 2 || day.len() != 2 {
        return None;
    }
    let year: i128 = digits(year)?;
    let (month, day) = (digits(month)?, digits(day)?);
    // Year 1 BC is year 0 of the proleptic Gregorian calendar.
    let year = if bc { 1 - year } else { year };
    // At most 12 digits each: they fit an i64.
    let (year, month, day) = (year as i64, month as i64, day as i64);
    if bc && year > 0 || !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    Some(i128::from(days_from_civil(year, month, day)))
}

/// A non-empty run of ASCII digits as a number.
fn digits(s: &str) -> Option<i128> {
    if s.is_empty() || s.len() > 12 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Microseconds since midnight of `HH:MM:SS[.f{1,6}]`.
fn parse_time(time: &str) -> Option<i128> {
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut fields = hms.split(':');
    let (h, m, s) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() || [h, m, s].iter().any(|f| f.len() != 2) {
        return None;
    }
    let (h, m, s) = (digits(h)?, digits(m)?, digits(s)?);
    if h > 23 || m > 59 || s > 59 || frac.len() > 6 {
        return None;
    }
    let micros = match frac {
        "" if !time.contains('.') => 0,
        _ => digits(frac)? * 10_i128.pow(6 - frac.len() as u32),
    };
    Some(((h * 60 + m) * 60 + s) * 1_000_000 + micros)
}

/// Seconds east of UTC of `+HH`, `+HH:MM` or `+HH:MM:SS` (or `-`).
fn parse_offset(offset: &str) -> Option<i64> {
    let (sign, rest) = match offset.split_at_checked(1)? {
        ("+", rest) => (1, rest),
        ("-", rest) => (-1, rest),
        _ => return None,
    };
    let fields: Vec<&str> = rest.split(':').collect();
    if fields.len() > 3 {
        return None;
    }
    let mut seconds = 0;
    for (i, field) in fields.iter().enumerate() {
        let value = digits(field).filter(|&v| field.len() == 2 && (i == 0 || v < 60))?;
        seconds += value as i64 * 60_i64.pow(2 - i as u32);
    }
    Some(sign * seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks every pair of `sorted`'s items, a list in PostgreSQL's order
    /// written `a < b = c < d` (an empty item is the empty string).
    fn sorted(type_oid: u32, sorted: &str) {
        let ranked: Vec<(usize, &str)> = sorted
            .split(" < ")
            .enumerate()
            .flat_map(|(rank, equal)| equal.split(" = ").map(move |item| (rank, item)))
            .collect();
        for (rank_a, a) in &ranked {
            for (rank_b, b) in &ranked {
                let want = Ok(Some(rank_a.cmp(rank_b)));
                assert_eq!(
                    compare(type_oid, a, b),
                    want,
                    "{a:?} vs {b:?} as {type_oid}"
                );
            }
        }
    }

    #[test]
    fn integers_and_booleans() {
        sorted(INT2, "-32768 < -1 < 0 < 1 < 32767");
        sorted(INT4, "-2147483648 < -10 < -9 < 0 < 9 < 10 < 2147483647");
        sorted(INT8, "-9223372036854775808 < -1 < 0 < 9223372036854775807");
        sorted(OID, "0 < 1 < 10 < 4294967295");
        sorted(BOOL, "f < t");
    }

    #[test]
    fn texts_in_byte_order() {
        for t in [TEXT, VARCHAR, NAME] {
            sorted(t, " < \t < A < Z < a < a  < a b < ab < b < z < é < 😀");
        }
        sorted(BPCHAR, " =   < A < a = a  = a   < a b < ab < é");
    }

    #[test]
    fn uuids() {
        sorted(
            UUID,
            "00000000-0000-0000-0000-000000000000 \
             < 0000000f-0000-0000-0000-000000000000 = 0000000F000000000000000000000000 \
             < a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 = {A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11} \
             < ffffffff-ffff-ffff-ffff-ffffffffffff",
        );
    }

    #[test]
    fn dates_and_timestamps() {
        sorted(
            DATE,
            "-infinity < 4714-11-24 BC < 0044-03-15 BC < 0001-12-31 BC < 0001-01-01 \
             < 1969-12-31 < 1970-01-01 < 2000-02-29 < 2024-01-31 < 10000-01-01 \
             < 5874897-12-31 < infinity",
        );
        sorted(
            TIMESTAMP,
            "-infinity < 0044-03-15 12:00:00 BC < 1999-12-31 23:59:59.999999 \
             < 2000-01-01 00:00:00 = 2000-01-01 00:00:00.000 < 2000-01-01 00:00:00.000001 \
             < 2000-01-01 00:00:00.1 < 2000-01-01 00:00:01 < 294276-12-31 23:59:59.999999 \
             < infinity",
        );
        sorted(
            TIMESTAMPTZ,
            "-infinity < 0001-01-01 00:00:00+00 BC < 1900-01-01 00:00:00+00 \
             = 1900-01-01 00:53:28+00:53:28 < 2023-12-31 23:30:00+00 = 2024-01-01 00:30:00+01 \
             < 2024-01-31 12:00:00+00 = 2024-01-31 17:30:00+05:30 = 2024-01-31 08:00:00-04 \
             < 2024-01-31 12:00:00.5+00 < infinity",
        );
    }

    #[test]
    fn numerics() {
        sorted(
            NUMERIC,
            "-Infinity < -123456789012345678901234567890.5 < -10 < -9.5 < -9.49 < -0.001 \
             < 0 = 0.000 = -0 = 00.0 = .0 < 0.0001 < 0.001 < 1 = 1.0 = 1. < 1.5 < 2 < 9.99 \
             < 10 < 10.01 < 100 < 123456789012345678901234567890 < Infinity < NaN = NaN",
        );
    }

    #[test]
    fn byteas() {
        sorted(
            BYTEA,
            "\\x < \\x00 < \\x0000 < \\x01 < \\x7f < \\x80 < \\xfe = \\xFE < \\xff",
        );
    }

    #[test]
    fn composite_keys() {
        let types = [INT4, TEXT, DATE];
        let key = ["1", "b", "2024-01-31"];
        let cases = [
            (["1", "b", "2024-01-31"], Ordering::Equal),
            (["1", "b", "2024-01-30"], Ordering::Greater),
            (["1", "a", "2025-01-01"], Ordering::Greater),
            (["1", "ba", "2000-01-01"], Ordering::Less),
            (["2", "", "-infinity"], Ordering::Less),
            (["0", "zzz", "infinity"], Ordering::Greater),
        ];
        for (other, want) in cases {
            assert_eq!(
                compare_keys(&types, &key, &other),
                Ok(Some(want)),
                "{other:?}"
            );
        }
        assert_eq!(
            compare_keys::<&str>(&[], &[], &[]),
            Ok(Some(Ordering::Equal))
        );
        let unorderable = compare_keys(&[INT4, JSONB], &["1", "{}"], &["2", "[]"]);
        assert_eq!(unorderable, Ok(None));
        let short = compare_keys(&types, &key, &["1", "b"]);
        assert_eq!(
            short,
            Err(ValueError::KeyLength {
                columns: 3,
                values: 2
            })
        );
        assert!(compare_keys(&types, &key, &["1", "b", "2024-13-01"]).is_err());
    }

    #[test]
    fn orderable_types_and_errors() {
        for t in [
            INT2, INT4, INT8, OID, BOOL, TEXT, VARCHAR, NAME, BPCHAR, UUID, DATE,
        ] {
            assert!(orderable(t), "{t}");
        }
        for t in [TIMESTAMP, TIMESTAMPTZ, NUMERIC, BYTEA] {
            assert!(orderable(t), "{t}");
        }
        for t in [
            FLOAT8, JSONB, TIME, INTERVAL, CHAR, INT4_ARRAY, MONEY, 16_400,
        ] {
            assert!(!orderable(t), "{t}");
            assert_eq!(compare(t, "1", "2"), Ok(None));
        }
        let invalid = [
            (INT4, "abc"),
            (INT2, "40000"),
            (BOOL, "true"),
            (UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1"),
            (UUID, "+0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            (UUID, "a0eebc999c0b-4ef8-bb6d-6bb9bd380a11-"),
            (DATE, "2024-02-30"),
            (TIMESTAMP, "2024-01-31T12:00:00"),
            (
                TIMESTAMPTZ,
                "2024-01-31 12:00:00+01:02:03:04:05:06:07:08:09:10:11:12",
            ),
            (NUMERIC, "1e5"),
            (NUMERIC, "nan"),
            (BYTEA, "\\x0"),
        ];
        for (t, text) in invalid {
            let result = compare(t, text, text);
            assert!(
                matches!(result, Err(ValueError::Invalid { .. })),
                "{text}: {result:?}"
            );
        }
    }
}
