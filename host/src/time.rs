//! Event times as text: RFC 3339 timestamps and integer milliseconds since
//! the Unix epoch (the `i64` timestamp of a record), read by the sources
//! ([`parse_rfc3339`], `parse_cell`) and written by the CLI and in logs
//! ([`format_rfc3339`]), and [`unix_ms`], a system time as such milliseconds.
//!
//! A leaf: the text rules only, no I/O and no settings.

/// `t` as milliseconds since the Unix epoch (0 before it).
pub fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The milliseconds since the Unix epoch of an RFC 3339 date-time, such as
/// `2026-12-01T15:30:00Z` or `2026-12-01T15:30:00.250+01:00`; `None` for
/// anything else.
///
/// Strict: `YYYY-MM-DD`, `T` (or `t`), `HH:MM:SS`, an optional fraction of
/// one or more digits, then `Z` (or `z`) or an offset `±HH:MM`. The date
/// must exist (leap years included); a leap second (`:60`) is refused. A
/// fraction finer than a millisecond is truncated towards the past.
///
/// ```
/// use weir::time::parse_rfc3339;
/// assert_eq!(parse_rfc3339("1970-01-01T00:00:01.5Z"), Some(1500));
/// assert_eq!(parse_rfc3339("1970-01-01 00:00:01Z"), None);
/// ```
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let at = |i: usize, c: u8| b[i] == c;
    let separators = at(4, b'-') && at(7, b'-') && at(13, b':') && at(16, b':');
    if !separators || !matches!(b[10], b'T' | b't') {
        return None;
    }
    let year = digits(&b[0..4])?;
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    let hour = digits(&b[11..13])?;
    let minute = digits(&b[14..16])?;
    let second = digits(&b[17..19])?;
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut rest = &b[19..];
    let mut millis = 0;
    if let [b'.', fraction @ ..] = rest {
        let n = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        // The first three digits are milliseconds; the rest are dropped.
        millis = fraction[..n.min(3)]
            .iter()
            .fold(0, |ms, d| ms * 10 + i64::from(d - b'0'));
        millis *= [100, 10, 1][n.min(3) - 1];
        rest = &fraction[n..];
    }
    let offset_minutes = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = digits(&[*h1, *h2])?;
            let minutes = digits(&[*m1, *m2])?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let offset = hours * 60 + minutes;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// `ms` milliseconds since the Unix epoch in RFC 3339 with milliseconds,
/// UTC (`2023-11-14T23:13:20.000Z`); `None` outside the years 0 to 9999.
///
/// ```
/// use weir::time::{format_rfc3339, parse_rfc3339};
/// assert_eq!(format_rfc3339(0).as_deref(), Some("1970-01-01T00:00:00.000Z"));
/// assert_eq!(format_rfc3339(-1).as_deref(), Some("1969-12-31T23:59:59.999Z"));
/// assert_eq!(format_rfc3339(i64::MAX), None);
/// let t = 1_796_139_000_250;
/// assert_eq!(parse_rfc3339(&format_rfc3339(t).unwrap()), Some(t));
/// ```
pub fn format_rfc3339(ms: i64) -> Option<String> {
    const DAY_MS: i64 = 86_400_000;
    let (days, in_day) = (ms.div_euclid(DAY_MS), ms.rem_euclid(DAY_MS));
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    let (h, min, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z"
    ))
}

/// A CSV cell's event time: an optional `-` and digits are milliseconds
/// since the epoch, anything else must be an RFC 3339 date-time.
pub(crate) fn parse_cell(text: &str) -> Option<i64> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()) {
        return text.parse().ok();
    }
    parse_rfc3339(text)
}

/// The value of ASCII decimal `digits` (all of them digits), else `None`.
fn digits(digits: &[u8]) -> Option<i64> {
    digits.iter().try_fold(0, |n, d| {
        d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
    })
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days in month `month` (1 to 12) of proleptic Gregorian year `year`.
///
/// ```
/// assert_eq!(weir::time::days_in_month(2024, 2), 29);
/// assert_eq!(weir::time::days_in_month(1900, 2), 28);
/// ```
pub fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (negative
/// before it; year 0 is 1 BC): Howard Hinnant's `days_from_civil`.
///
/// ```
/// assert_eq!(weir::time::days_from_civil(1970, 1, 1), 0);
/// assert_eq!(weir::time::days_from_civil(2000, 3, 1), 11_017);
/// ```
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date `days` days after 1970-01-01 (Hinnant's
/// `civil_from_days`, the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_become_milliseconds() {
        let cases = [
            ("1970-01-01T00:00:00Z", 0),
            ("2026-12-01T15:30:00Z", 1_796_139_000_000),
            ("2026-12-01t15:30:00z", 1_796_139_000_000),
            ("2026-12-01T15:30:00.250+01:00", 1_796_135_400_250),
            ("2026-12-01T15:30:00.25-02:30", 1_796_148_000_250),
            ("2026-12-01T15:30:00.2Z", 1_796_139_000_200),
            ("2026-12-01T15:30:00.123456789Z", 1_796_139_000_123),
            ("1969-12-31T23:59:59.999Z", -1),
            ("2024-02-29T00:00:00Z", 1_709_164_800_000),
            ("2000-03-01T00:00:00Z", 951_868_800_000),
            ("0000-01-01T00:00:00Z", -62_167_219_200_000),
            ("9999-12-31T23:59:59.999Z", 253_402_300_799_999),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_rfc3339(text), Some(ms), "{text}");
        }
    }

    #[test]
    fn anything_else_is_not_an_rfc3339_time() {
        for text in [
            "",
            "yesterday",
            "2026-12-01",
            "2026-12-01T15:30:00",
            "2026-12-01 15:30:00Z",
            "2026-12-01T15:30Z",
            "2026-12-01T15:30:00.Z",
            "2026-12-01T15:30:00+0100",
            "2026-12-01T15:30:00+01",
            "2026-12-01T15:30:00Zjunk",
            "2026-13-01T15:30:00Z",
            "2026-00-01T15:30:00Z",
            "2025-02-29T15:30:00Z",
            "2026-04-31T15:30:00Z",
            "2026-12-00T15:30:00Z",
            "2026-12-01T24:00:00Z",
            "2026-12-01T15:60:00Z",
            "2026-12-31T23:59:60Z",
            "2026-12-01T15:30:00+24:00",
            "+2026-12-01T15:30:00Z",
            "2026-1a-01T15:30:00Z",
            "２０２６-12-01T15:30:00Z",
        ] {
            assert_eq!(parse_rfc3339(text), None, "{text}");
        }
    }

    #[test]
    fn csv_cells_are_milliseconds_or_rfc3339() {
        assert_eq!(parse_cell("1700000000000"), Some(1_700_000_000_000));
        assert_eq!(parse_cell("-5"), Some(-5));
        assert_eq!(parse_cell("0"), Some(0));
        assert_eq!(parse_cell("1970-01-01T00:00:01Z"), Some(1000));
        for bad in [
            "",
            "-",
            "+5",
            "1.5",
            " 5",
            "5 ",
            "99999999999999999999",
            "x",
        ] {
            assert_eq!(parse_cell(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_agrees_with_humantime_after_the_epoch() {
        for ms in [
            0,
            999,
            951_782_400_000, // 2000-02-29
            1_700_000_000_123,
            4_102_444_800_000,
            253_402_300_799_999, // the last ms of 9999
        ] {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms as u64);
            let want = humantime::format_rfc3339_millis(t).to_string();
            assert_eq!(format_rfc3339(ms).as_deref(), Some(want.as_str()), "{ms}");
        }
        assert_eq!(format_rfc3339(253_402_300_800_000), None, "year 10000");
        assert_eq!(
            format_rfc3339(-62_167_219_200_000).as_deref(),
            Some("0000-01-01T00:00:00.000Z")
        );
        assert_eq!(format_rfc3339(-62_167_219_200_001), None, "year -1");
    }

    #[test]
    fn days_are_counted_from_the_epoch_both_ways() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for days in [-719_468, -1, 0, 11_017, 20_786, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
