//! The common case of reading an input record, without serde: a flat JSON
//! object (scalar values only, strings without escapes), as CSV and most
//! JSON sources produce. One pass over the bytes finds `amount` and the key
//! field and checks the rest is well-formed.
//!
//! Invariant: [`read`] gives `Some` only for texts that serde_json reads
//! with [`FieldsSeed`](super::FieldsSeed) to the same [`Fields`]; for
//! anything else (nesting, escapes, invalid UTF-8, malformed JSON, numbers
//! serde_json rejects) it gives `None` and the caller takes the serde path,
//! which also produces the errors.

use std::borrow::Cow;
use std::str::FromStr;

use serde_json::Number;

use super::{Field, Fields};

/// `amount` and the field named `key_field` of `text`, if it is a flat
/// JSON object this reader takes (see the module docs).
pub(crate) fn read<'a>(text: &'a [u8], key_field: Option<&str>) -> Option<Fields<'a>> {
    let mut r = Reader { text, at: 0 };
    let mut fields = Fields::default();
    r.skip_ws();
    r.expect(b'{')?;
    r.skip_ws();
    if r.peek() == Some(b'}') {
        r.at += 1;
    } else {
        loop {
            let name = r.string()?;
            // serde_json reads field names as `str` (checking UTF-8), and
            // skips the values of other fields without checking it.
            if !name.is_ascii() {
                std::str::from_utf8(name).ok()?;
            }
            r.skip_ws();
            r.expect(b':')?;
            r.skip_ws();
            let (amount, key) = (
                name == b"amount",
                key_field.map(str::as_bytes) == Some(name),
            );
            if !(amount || key) {
                r.skip_scalar()?;
            } else {
                let value = r.scalar()?;
                // Of a field given twice the last counts, as in serde's
                // reading.
                if amount && key {
                    fields.amount = Some(value.clone());
                }
                if key {
                    fields.key = Some(value);
                } else {
                    fields.amount = Some(value);
                }
            }
            r.skip_ws();
            match r.next()? {
                b',' => r.skip_ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    r.skip_ws();
    (r.at == text.len()).then_some(fields)
}

/// A cursor over the text.
struct Reader<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        (self.next()? == b).then_some(())
    }

    /// JSON's whitespace.
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The bytes of a string without escapes or control characters.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let rest = &self.text[self.at..];
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at += len + 1;
        Some(&rest[..len])
    }

    /// A string, number, `true`, `false` or `null`, read.
    fn scalar(&mut self) -> Option<Field<'a>> {
        match self.peek()? {
            b'"' => {
                let s = std::str::from_utf8(self.string()?).ok()?;
                Some(Field::Str(Cow::Borrowed(s)))
            }
            b't' => self.word(b"true").map(|()| Field::Bool(true)),
            b'f' => self.word(b"false").map(|()| Field::Bool(false)),
            b'n' => self.word(b"null").map(|()| Field::Null),
            b'-' | b'0'..=b'9' => {
                let text = self.number()?;
                // JSON numbers are ASCII.
                let text = std::str::from_utf8(text).ok()?;
                Number::from_str(text).ok().map(Field::Number)
            }
            _ => None,
        }
    }

    /// A scalar skipped as serde_json skips one: checked by JSON's
    /// grammar only (no UTF-8 check of a string, no range of a number).
    fn skip_scalar(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            _ => self.scalar().map(drop),
        }
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.text.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// The text of a number by JSON's grammar.
    fn number(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(&self.text[start..self.at])
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }

    /// One digit or more.
    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeSeed;

    use super::*;
    use crate::FieldsSeed;

    /// serde_json's reading of `text`, as the plugin does it without this
    /// module.
    fn by_serde<'a>(text: &'a [u8], key_field: Option<&str>) -> Option<Fields<'a>> {
        let mut de = serde_json::Deserializer::from_slice(text);
        let fields = FieldsSeed { key_field }.deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(fields)
    }

    fn agrees(text: &[u8], key_field: Option<&str>) -> bool {
        let quick = read(text, key_field);
        if let Some(q) = &quick {
            assert_eq!(
                Some(q),
                by_serde(text, key_field).as_ref(),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        quick.is_some()
    }

    #[test]
    fn reads_flat_objects_as_serde_does() {
        for text in [
            r#"{"order_no":"ORD-00000001","amount":"12.34","channel":"alipay"}"#,
            r#" { "amount" : 5 , "key" : "k" } "#,
            r#"{"amount":-0.5e+3,"key":42,"x":null,"y":true,"z":false}"#,
            r#"{"amount":"1","amount":"2","key":"a","key":"b"}"#,
            r#"{"amount":"渠道","key":"订单"}"#,
            r#"{}"#,
            r#"{"amount":0,"key":-0}"#,
            r#"{"amount":18446744073709551615,"key":-9223372036854775808}"#,
        ] {
            assert!(agrees(text.as_bytes(), Some("key")), "{text}");
            assert!(agrees(text.as_bytes(), None), "{text}");
        }
        // Other fields are skipped as serde_json skips them: no range of a
        // number, no UTF-8 check of a string.
        assert!(agrees(br#"{"x":1e999,"amount":"1"}"#, None));
        assert!(agrees(b"{\"x\":\"\xff\",\"amount\":1}", None));
        assert!(agrees(br#"{"amount":"3"}"#, Some("amount")));
        let both = read(br#"{"amount":"3"}"#, Some("amount")).unwrap();
        assert_eq!(both.key, both.amount);
    }

    #[test]
    fn leaves_everything_else_to_serde() {
        for text in [
            r#"{"amount":{"v":1}}"#,
            r#"{"amount":[1]}"#,
            r#"{"amount":"a\"b"}"#,
            r#"{"amount":"tab	in"}"#,
            r#"[1,2]"#,
            r#""amount""#,
            r#"{"amount":01}"#,
            r#"{"amount":1.}"#,
            r#"{"amount":.5}"#,
            r#"{"amount":1e}"#,
            r#"{"amount":1e999}"#,
            r#"{"amount":tru}"#,
            r#"{"amount":1,}"#,
            r#"{"amount":1} x"#,
            r#"{"amount" 1}"#,
            r#"{"amount":1"#,
            "",
        ] {
            assert!(!agrees(text.as_bytes(), Some("key")), "{text}");
        }
        assert!(!agrees(b"{\"amount\":\"\xff\"}", None));
    }

    /// Random edits of flat objects: whatever this reader takes, serde_json
    /// reads the same.
    #[test]
    fn agrees_with_serde_on_edited_texts() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        let base = br#"{"order_no":"ORD-00000001", "amount":-12.5e1,"key":"k","ok":true,"n":null}"#;
        let alphabet = b"{}[]\":,. -+0123456789eEtrufalsn\\\t\x01\xc3\xa9";
        let mut taken = 0;
        for _ in 0..20_000 {
            let mut text = base.to_vec();
            for _ in 0..1 + next(3) {
                let at = next(text.len() + 1);
                match next(3) {
                    0 if at < text.len() => {
                        text.remove(at);
                    }
                    1 if at < text.len() => text[at] = alphabet[next(alphabet.len())],
                    _ => text.insert(at, alphabet[next(alphabet.len())]),
                }
            }
            taken += usize::from(agrees(&text, Some("key")));
        }
        assert!(taken > 1000, "the reader took {taken} of 20,000 edits");
    }
}
