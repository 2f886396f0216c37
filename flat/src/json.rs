//! JSON text as `serde_json` writes it, for the few values Weir writes by
//! hand on hot paths (a plugin's output through the SDK, a [`row`](crate::row)
//! encoded by the host): strings with the same escapes, integers in
//! decimal, floats as `zmij` writes them (as `serde_json` does) and `null` for the non-finite ones.
//! The host's and the SDK's text is then byte for byte `serde_json`'s.

use alloc::vec::Vec;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string: quoted, with `"`, `\` and the control
/// characters escaped as `serde_json` escapes them (short forms where JSON
/// has them, else `\u00XX`), everything else as is.
///
/// ```
/// let mut out = Vec::new();
/// weir_flat::json::push_str(&mut out, "say \"hi\"\n\u{1}é");
/// assert_eq!(String::from_utf8(out).unwrap(), r#""say \"hi\"\n\u0001é""#);
/// ```
#[inline]
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    // Most strings need no escape: one pass that the compiler vectorizes.
    let plain = |b: u8| b >= 0x20 && b != b'"' && b != b'\\';
    if s.bytes().fold(true, |all, b| all & plain(b)) {
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    let mut rest = s.as_bytes();
    while let Some(i) = rest
        .iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
    {
        out.extend_from_slice(&rest[..i]);
        push_escape(out, rest[i]);
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// Appends `bytes` as [`push_str`] does when they are UTF-8 and returns
/// true; returns false, with nothing written, when they are not. Plain
/// ASCII, the common case, is checked and scanned for escapes in one pass.
///
/// ```
/// let mut out = Vec::new();
/// assert!(weir_flat::json::push_utf8(&mut out, "a\"é".as_bytes()));
/// assert!(!weir_flat::json::push_utf8(&mut out, &[b'a', 0xff]));
/// assert_eq!(String::from_utf8(out).unwrap(), r#""a\"é""#);
/// ```
#[inline]
pub fn push_utf8(out: &mut Vec<u8>, bytes: &[u8]) -> bool {
    let plain = |b: u8| (0x20..0x80).contains(&b) && b != b'"' && b != b'\\';
    if bytes.iter().fold(true, |all, &b| all & plain(b)) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return true;
    }
    match core::str::from_utf8(bytes) {
        Ok(s) => {
            push_str(out, s);
            true
        }
        Err(_) => false,
    }
}

/// Whether `text` is a JSON number: `-`, then `0` or digits without a
/// leading zero, then a fraction `.digits` and an exponent `e[+-]digits`
/// (either case), each optional.
///
/// ```
/// use weir_flat::json::is_number;
/// assert!(is_number(b"-12.50") && is_number(b"0") && is_number(b"1E+3"));
/// assert!(!is_number(b"01") && !is_number(b"1.") && !is_number(b"+1") && !is_number(b".5"));
/// ```
pub fn is_number(text: &[u8]) -> bool {
    let digits = |at: usize| text[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut at = usize::from(text.first() == Some(&b'-'));
    match text.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => at += digits(at),
        _ => return false,
    }
    if text.get(at) == Some(&b'.') {
        let n = digits(at + 1);
        if n == 0 {
            return false;
        }
        at += 1 + n;
    }
    if matches!(text.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(text.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let n = digits(at);
        if n == 0 {
            return false;
        }
        at += n;
    }
    at == text.len()
}

/// Appends the JSON escape of `b`, a control character, `"` or `\`.
fn push_escape(out: &mut Vec<u8>, b: u8) {
    let short = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        0x08 => b'b',
        0x0c => b'f',
        _ => {
            let hex = [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]];
            out.extend_from_slice(b"\\u00");
            out.extend_from_slice(&hex);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

/// Appends `n` in decimal.
///
/// ```
/// let mut out = Vec::new();
/// weir_flat::json::push_u64(&mut out, 1234567890123);
/// assert_eq!(out, b"1234567890123");
/// ```
#[inline]
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `n` in decimal, `-` first when negative.
///
/// ```
/// let mut out = Vec::new();
/// weir_flat::json::push_i64(&mut out, i64::MIN);
/// assert_eq!(out, b"-9223372036854775808");
/// ```
#[inline]
pub fn push_i64(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `x` as `serde_json` writes an `f64`: the shortest text that
/// reads back as `x` (`1.0`, `1e+300`), `null` when it is not finite.
///
/// ```
/// let mut out = Vec::new();
/// weir_flat::json::push_f64(&mut out, 0.1);
/// weir_flat::json::push_f64(&mut out, f64::NAN);
/// weir_flat::json::push_f64(&mut out, 1e300);
/// assert_eq!(out, b"0.1null1e+300");
/// ```
#[inline]
pub fn push_f64(out: &mut Vec<u8>, x: f64) {
    if x.is_finite() {
        out.extend_from_slice(zmij::Buffer::new().format_finite(x).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn is_number_agrees_with_serde_json() {
        let texts = [
            "0",
            "-0",
            "7",
            "-12",
            "10",
            "01",
            "-01",
            "1.5",
            "1.",
            ".5",
            "-.5",
            "1e5",
            "1E-5",
            "1e+5",
            "1e",
            "1e+",
            "0.0e0",
            "00",
            "-",
            "",
            "+1",
            "1.5.5",
            "1e5e5",
            "NaN",
            "Infinity",
            "12345678901234567890123",
            "0x10",
            "1_0",
        ];
        for text in texts {
            let serde = serde_json::from_str::<serde_json::Number>(text).is_ok();
            assert_eq!(is_number(text.as_bytes()), serde, "{text:?}");
        }
    }

    #[test]
    fn push_utf8_writes_what_serde_json_writes_and_refuses_what_is_not_utf8() {
        // Each byte value alone and amid ASCII, and multi-byte characters
        // whole and cut.
        let mut inputs: Vec<Vec<u8>> = (0..=255u8)
            .flat_map(|b| [vec![b], vec![b'a', b, b'z']])
            .collect();
        for s in ["é", "日本", "\u{10ffff}", "a\u{1}\"\\\u{7f}é"] {
            inputs.push(s.as_bytes().to_vec());
            inputs.push(s.as_bytes()[..s.len() - 1].to_vec());
        }
        for bytes in inputs {
            let mut out = vec![b'x'];
            let written = push_utf8(&mut out, &bytes);
            match core::str::from_utf8(&bytes) {
                Ok(s) => {
                    assert!(written, "{bytes:?}");
                    assert_eq!(&out[1..], serde_json::to_string(s).unwrap().as_bytes());
                }
                Err(_) => assert!(!written && out == b"x", "{bytes:?}"),
            }
        }
    }
}
