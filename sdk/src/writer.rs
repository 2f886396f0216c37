//! [`ValueWriter`]: writes a record's value straight into a flat buffer.

/// Appends the value of one record to a flat buffer, in place: no
/// intermediate `Vec` per record. Given to the closure of
/// [`Context::emit_with`](crate::Context::emit_with) and
/// [`BatchBuf::push_with`](crate::BatchBuf::push_with).
///
/// It only appends, so the records written before stay intact. It implements
/// [`std::fmt::Write`] (for `write!`) and [`std::io::Write`] (for
/// `serde_json::to_writer`), and has fast helpers for JSON text.
///
/// ```
/// use std::fmt::Write as _;
/// let mut buf = weir_sdk::BatchBuf::new();
/// buf.push_with(None, None, |out| {
///     out.push_str("{\"word\":");
///     out.push_json_str("say \"hi\"");
///     write!(out, ",\"half\":{}", 1.5).unwrap();
///     out.push(b'}');
/// });
/// assert_eq!(buf.as_batch().get(0).unwrap().value, br#"{"word":"say \"hi\"","half":1.5}"#);
/// ```
#[derive(Debug)]
pub struct ValueWriter<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> ValueWriter<'a> {
    /// A writer appending to `buf`.
    #[inline]
    pub(crate) fn new(buf: &'a mut Vec<u8>) -> Self {
        let start = buf.len();
        ValueWriter { buf, start }
    }

    /// Appends one byte.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_with(None, None, |out| out.push(b'x'));
    /// assert_eq!(buf.as_batch().get(0).unwrap().value, b"x");
    /// ```
    #[inline]
    pub fn push(&mut self, byte: u8) {
        self.buf.push(byte);
    }

    /// Appends bytes.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_with(None, None, |out| out.push_bytes(&[1, 2]));
    /// assert_eq!(buf.as_batch().get(0).unwrap().value, [1, 2]);
    /// ```
    #[inline]
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends the UTF-8 bytes of `s`.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_with(None, None, |out| out.push_str("hé"));
    /// assert_eq!(buf.as_batch().get(0).unwrap().value, "hé".as_bytes());
    /// ```
    #[inline]
    pub fn push_str(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Appends `s` as a JSON string literal: quoted, and escaped byte for
    /// byte as `serde_json` escapes it (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
    /// `\t`, other control characters as `\u00xx`; everything else as is).
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_with(None, None, |out| out.push_json_str("a\"b\n\u{1}"));
    /// assert_eq!(buf.as_batch().get(0).unwrap().value, br#""a\"b\n\u0001""#);
    /// let s = "é \u{7f}";
    /// buf.push_with(None, None, |out| out.push_json_str(s));
    /// assert_eq!(buf.as_batch().get(1).unwrap().value, serde_json::to_vec(s).unwrap());
    /// ```
    #[inline]
    pub fn push_json_str(&mut self, s: &str) {
        weir_flat::json::push_str(self.buf, s);
    }

    /// Appends `n` in decimal, as JSON writes it.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_with(None, None, |out| out.push_decimal(1234567890123));
    /// assert_eq!(buf.as_batch().get(0).unwrap().value, b"1234567890123");
    /// ```
    #[inline]
    pub fn push_decimal(&mut self, n: u64) {
        weir_flat::json::push_u64(self.buf, n);
    }

    /// The bytes of this value written so far.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push(None, b"earlier record", None);
    /// buf.push_with(None, None, |out| {
    ///     out.push_str("ab");
    ///     assert_eq!(out.as_bytes(), b"ab");
    /// });
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

impl std::fmt::Write for ValueWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

impl std::io::Write for ValueWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.push_bytes(bytes);
        Ok(bytes.len())
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.push_bytes(bytes);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(f: impl FnOnce(&mut ValueWriter<'_>)) -> Vec<u8> {
        let mut buf = b"earlier".to_vec();
        f(&mut ValueWriter::new(&mut buf));
        assert!(buf.starts_with(b"earlier"));
        buf.split_off(7)
    }

    #[test]
    fn json_strings_are_escaped_exactly_like_serde_json() {
        let mut samples: Vec<String> = (0u32..0x80)
            .map(|c| char::from_u32(c).unwrap().to_string())
            .collect();
        samples.extend(
            [
                "",
                "plain",
                "é ü 日本 🎉",
                "\u{7f}\u{80}\u{2028}",
                "a\"b\\c\u{0}d\u{1f}",
            ]
            .map(String::from),
        );
        samples.push(samples.concat());
        for s in &samples {
            let ours = written(|w| w.push_json_str(s));
            assert_eq!(ours, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn decimals_match_serde_json() {
        for n in [0, 1, 9, 10, 99, 100, 12345, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(
                written(|w| w.push_decimal(n)),
                serde_json::to_vec(&n).unwrap()
            );
        }
    }

    #[test]
    fn io_and_fmt_writes_append() {
        use std::fmt::Write as _;
        let out = written(|w| {
            serde_json::to_writer(&mut *w, &[1, 2]).unwrap();
            write!(w, "-{}", 3).unwrap();
        });
        assert_eq!(out, b"[1,2]-3");
    }
}
