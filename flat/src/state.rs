//! The packed buffers of flat state (WIT `weir:operator/flat-state`): keys,
//! values and entries, each a sequence of items with u32 little-endian
//! lengths, [`ABSENT`] standing for "no value"; and how a state value says
//! it is a row ([`ROW_VALUE`]).
//!
//! | buffer | one item |
//! |---|---|
//! | [`Keys`] (`get-many`) | key length, key bytes |
//! | [`Values`] (reply of `get-many`) | value length or [`ABSENT`], value bytes |
//! | [`Entries`] (`put-many`, reply of `scan`) | key length, value length or [`ABSENT`], key bytes, value bytes |
//!
//! The readers check a whole buffer when they are made
//! ([`Keys::parse`], ...): every length inside the buffer, no bytes left
//! over, no [`ABSENT`] key length; iterating then never fails and borrows
//! every key and value from the buffer. The writers (`push_*`) append one
//! item; the `_with` forms write the key and value in place, so packing
//! allocates nothing per item.

use alloc::vec::Vec;

/// The length that stands for no value: a missing key in a reply, a
/// deletion in `put-many`. Never a key length.
///
/// ```
/// assert_eq!(weir_flat::state::ABSENT, 0xFFFF_FFFF);
/// ```
pub const ABSENT: u32 = u32::MAX;

/// Bytes of one length.
const LEN: usize = 4;

/// The first byte of a state value that is a row ([`crate::row`]) rather
/// than JSON text: neither JSON text nor UTF-8 can begin with it, so every
/// reader tells the two apart by this byte alone.
///
/// ```
/// use weir_flat::state::{row_value, ROW_VALUE};
/// assert_eq!(row_value(&[ROW_VALUE, 2, 1, b'x']), Some(&[2, 1, b'x'][..]));
/// assert_eq!(row_value(br#"{"x":true}"#), None);
/// ```
pub const ROW_VALUE: u8 = 0xFF;

/// The row of a state value that is one (it begins with [`ROW_VALUE`]),
/// unchecked; `None` for any other value (JSON text).
#[inline]
pub fn row_value(value: &[u8]) -> Option<&[u8]> {
    match value {
        [ROW_VALUE, row @ ..] => Some(row),
        _ => None,
    }
}

/// Why a packed buffer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadPacking {
    /// An item's lengths, or the bytes they announce, run past the end of
    /// the buffer (this includes bytes left over after the last item).
    Truncated {
        /// The item's index.
        index: usize,
        /// The byte at which it starts.
        at: usize,
        /// Bytes in the buffer.
        len: usize,
    },
    /// An item's key length is [`ABSENT`].
    AbsentKey {
        /// The item's index.
        index: usize,
        /// The byte at which it starts.
        at: usize,
    },
}

impl core::fmt::Display for BadPacking {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            BadPacking::Truncated { index, at, len } => write!(
                f,
                "item {index} (at byte {at}) runs past the end of the {len}-byte buffer"
            ),
            BadPacking::AbsentKey { index, at } => write!(
                f,
                "item {index} (at byte {at}) has the absent length 0xFFFFFFFF as its key length"
            ),
        }
    }
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The layout of one item: whether it has a key length, a value length, or
/// both (key first).
#[derive(Clone, Copy)]
struct Shape {
    key: bool,
    value: bool,
}

const KEYS: Shape = Shape {
    key: true,
    value: false,
};
const VALUES: Shape = Shape {
    key: false,
    value: true,
};
const ENTRIES: Shape = Shape {
    key: true,
    value: true,
};

impl Shape {
    fn header(self) -> usize {
        LEN * (usize::from(self.key) + usize::from(self.value))
    }

    /// The item at `at` of a checked buffer: its key and value (`None`:
    /// absent; a shape without a key gives an empty one) and where the next
    /// item starts.
    #[inline]
    fn item(self, b: &[u8], at: usize) -> (&[u8], Option<&[u8]>, usize) {
        let mut pos = at + self.header();
        let key_len = if self.key { u32_at(b, at) as usize } else { 0 };
        let key = &b[pos..pos + key_len];
        pos += key_len;
        let value = if self.value {
            match u32_at(b, at + self.header() - LEN) {
                ABSENT => None,
                n => {
                    let v = &b[pos..pos + n as usize];
                    pos += n as usize;
                    Some(v)
                }
            }
        } else {
            None
        };
        (key, value, pos)
    }

    /// Checks that `b` is a whole number of items of this shape; returns
    /// how many.
    fn check(self, b: &[u8]) -> Result<usize, BadPacking> {
        let (mut at, mut index) = (0, 0);
        while at < b.len() {
            let truncated = BadPacking::Truncated {
                index,
                at,
                len: b.len(),
            };
            let header = self.header();
            if b.len() - at < header {
                return Err(truncated);
            }
            let mut body = 0u64;
            if self.key {
                match u32_at(b, at) {
                    ABSENT => return Err(BadPacking::AbsentKey { index, at }),
                    n => body += u64::from(n),
                }
            }
            if self.value {
                match u32_at(b, at + header - LEN) {
                    ABSENT => {}
                    n => body += u64::from(n),
                }
            }
            if ((b.len() - at - header) as u64) < body {
                return Err(truncated);
            }
            at += header + body as usize;
            index += 1;
        }
        Ok(index)
    }
}

/// A length as it is packed.
///
/// # Panics
///
/// When `len` does not fit below [`ABSENT`]: no buffer across the boundary
/// of a 32-bit Wasm guest holds 4 GiB.
#[inline]
fn packed_len(len: usize) -> [u8; LEN] {
    match u32::try_from(len) {
        Ok(n) if n != ABSENT => n.to_le_bytes(),
        _ => panic!("a packed key or value of {len} bytes: at most 4 GiB - 2"),
    }
}

/// Appends `write`'s bytes after a length, which it then fills in; returns
/// the number of bytes written.
#[inline]
fn push_sized(out: &mut Vec<u8>, len_at: usize, write: impl FnOnce(&mut Vec<u8>)) -> usize {
    let start = out.len();
    write(out);
    let n = out.len() - start;
    out[len_at..len_at + LEN].copy_from_slice(&packed_len(n));
    n
}

/// Appends a key to a packed keys buffer.
///
/// ```
/// let mut keys = Vec::new();
/// weir_flat::state::push_key(&mut keys, b"ab");
/// assert_eq!(keys, [2, 0, 0, 0, b'a', b'b']);
/// ```
#[inline]
pub fn push_key(out: &mut Vec<u8>, key: &[u8]) {
    push_key_with(out, |o| o.extend_from_slice(key));
}

/// Appends a key that `write` appends to `out`, to a packed keys buffer;
/// returns its length.
///
/// ```
/// let mut keys = Vec::new();
/// assert_eq!(weir_flat::state::push_key_with(&mut keys, |o| o.extend_from_slice(b"ab")), 2);
/// assert_eq!(keys, [2, 0, 0, 0, b'a', b'b']);
/// ```
#[inline]
pub fn push_key_with(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; LEN]);
    push_sized(out, at, write)
}

/// Appends a value, or [`ABSENT`] for `None`, to a packed values buffer.
///
/// ```
/// let mut values = Vec::new();
/// weir_flat::state::push_value(&mut values, Some(b"v"));
/// weir_flat::state::push_value(&mut values, None);
/// assert_eq!(values, [1, 0, 0, 0, b'v', 255, 255, 255, 255]);
/// ```
#[inline]
pub fn push_value(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(v) => {
            out.extend_from_slice(&packed_len(v.len()));
            out.extend_from_slice(v);
        }
        None => out.extend_from_slice(&ABSENT.to_le_bytes()),
    }
}

/// Appends an entry to a packed entries buffer: `value` under `key`, or a
/// deletion of `key` for `None`.
///
/// ```
/// let mut entries = Vec::new();
/// weir_flat::state::push_entry(&mut entries, b"k", Some(b"v"));
/// weir_flat::state::push_entry(&mut entries, b"k", None);
/// assert_eq!(entries, [1, 0, 0, 0, 1, 0, 0, 0, b'k', b'v', 1, 0, 0, 0, 255, 255, 255, 255, b'k']);
/// ```
#[inline]
pub fn push_entry(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    match value {
        Some(v) => {
            push_entry_with(
                out,
                |o| o.extend_from_slice(key),
                |o| o.extend_from_slice(v),
            );
        }
        None => {
            push_deletion_with(out, |o| o.extend_from_slice(key));
        }
    }
}

/// Appends an entry whose key `key` and value `value` append to `out`, to a
/// packed entries buffer; returns the key's and the value's length.
///
/// ```
/// let mut entries = Vec::new();
/// let lens = weir_flat::state::push_entry_with(&mut entries, |o| o.push(b'k'), |o| o.extend_from_slice(b"42"));
/// assert_eq!(lens, (1, 2));
/// let parsed: Vec<_> = weir_flat::state::Entries::parse(&entries).unwrap().collect();
/// assert_eq!(parsed, [(&b"k"[..], Some(&b"42"[..]))]);
/// ```
#[inline]
pub fn push_entry_with(
    out: &mut Vec<u8>,
    key: impl FnOnce(&mut Vec<u8>),
    value: impl FnOnce(&mut Vec<u8>),
) -> (usize, usize) {
    let at = out.len();
    out.extend_from_slice(&[0; 2 * LEN]);
    let k = push_sized(out, at, key);
    let v = push_sized(out, at + LEN, value);
    (k, v)
}

/// Appends a deletion of the key that `key` appends to `out`, to a packed
/// entries buffer; returns the key's length.
///
/// ```
/// let mut entries = Vec::new();
/// assert_eq!(weir_flat::state::push_deletion_with(&mut entries, |o| o.push(b'k')), 1);
/// let parsed: Vec<_> = weir_flat::state::Entries::parse(&entries).unwrap().collect();
/// assert_eq!(parsed, [(&b"k"[..], None)]);
/// ```
#[inline]
pub fn push_deletion_with(out: &mut Vec<u8>, key: impl FnOnce(&mut Vec<u8>)) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; LEN]);
    out.extend_from_slice(&ABSENT.to_le_bytes());
    push_sized(out, at, key)
}

/// Defines a reader of checked packed items of one shape.
macro_rules! reader {
    ($(#[$doc:meta])* $name:ident, $shape:expr, $item:ty, |$k:ident, $v:ident| $make:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name<'a> {
            buf: &'a [u8],
            at: usize,
            left: usize,
        }

        impl<'a> $name<'a> {
            /// Checks `buf` (see the module docs) and reads it.
            pub fn parse(buf: &'a [u8]) -> Result<Self, BadPacking> {
                let left = $shape.check(buf)?;
                Ok($name { buf, at: 0, left })
            }
        }

        impl<'a> Iterator for $name<'a> {
            type Item = $item;

            #[inline]
            fn next(&mut self) -> Option<$item> {
                if self.left == 0 {
                    return None;
                }
                self.left -= 1;
                let ($k, $v, next) = $shape.item(self.buf, self.at);
                self.at = next;
                Some($make)
            }

            fn size_hint(&self) -> (usize, Option<usize>) {
                (self.left, Some(self.left))
            }
        }

        impl ExactSizeIterator for $name<'_> {}
    };
}

reader!(
    /// The keys of a packed keys buffer, in order.
    ///
    /// ```
    /// use weir_flat::state::{push_key, Keys};
    /// let mut buf = Vec::new();
    /// push_key(&mut buf, b"a");
    /// push_key(&mut buf, b"");
    /// assert_eq!(Keys::parse(&buf).unwrap().collect::<Vec<_>>(), [&b"a"[..], b""]);
    /// assert!(Keys::parse(&buf[..3]).is_err());
    /// ```
    Keys,
    KEYS,
    &'a [u8],
    |key, _value| key
);

reader!(
    /// The values (`None`: absent) of a packed values buffer, in order.
    ///
    /// ```
    /// use weir_flat::state::{push_value, Values};
    /// let mut buf = Vec::new();
    /// push_value(&mut buf, None);
    /// push_value(&mut buf, Some(b"v"));
    /// assert_eq!(Values::parse(&buf).unwrap().collect::<Vec<_>>(), [None, Some(&b"v"[..])]);
    /// ```
    Values,
    VALUES,
    Option<&'a [u8]>,
    |_key, value| value
);

reader!(
    /// The entries (key, value; `None`: absent) of a packed entries buffer,
    /// in order.
    ///
    /// ```
    /// use weir_flat::state::{push_entry, Entries};
    /// let mut buf = Vec::new();
    /// push_entry(&mut buf, b"k", Some(b"v"));
    /// push_entry(&mut buf, b"gone", None);
    /// let entries: Vec<_> = Entries::parse(&buf).unwrap().collect();
    /// assert_eq!(entries, [(&b"k"[..], Some(&b"v"[..])), (&b"gone"[..], None)]);
    /// ```
    Entries,
    ENTRIES,
    (&'a [u8], Option<&'a [u8]>),
    |key, value| (key, value)
);

#[cfg(test)]
mod tests {
    use super::*;

    fn le(n: u32) -> [u8; 4] {
        n.to_le_bytes()
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let mut keys = Vec::new();
        push_key(&mut keys, b"ab");
        push_key(&mut keys, b"");
        assert_eq!(keys, [&le(2)[..], b"ab", &le(0)].concat());

        let mut values = Vec::new();
        push_value(&mut values, Some(b"xyz"));
        push_value(&mut values, None);
        push_value(&mut values, Some(b""));
        assert_eq!(values, [&le(3)[..], b"xyz", &le(ABSENT), &le(0)].concat());

        let mut entries = Vec::new();
        push_entry(&mut entries, b"k", Some(b"vv"));
        push_entry(&mut entries, b"kk", None);
        assert_eq!(
            entries,
            [&le(1)[..], &le(2), b"k", b"vv", &le(2), &le(ABSENT), b"kk"].concat()
        );
    }

    /// The worked example of `wit/flat-state.wit`.
    #[test]
    fn the_example_of_the_wit_docs_packs_as_written() {
        let hex = |b: &[u8]| -> alloc::string::String {
            b.iter()
                .map(|x| alloc::format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut keys = Vec::new();
        push_key(&mut keys, b"a");
        push_key(&mut keys, b"bc");
        assert_eq!(hex(&keys), "01 00 00 00 61 02 00 00 00 62 63");
        let mut values = Vec::new();
        push_value(&mut values, Some(b"7"));
        push_value(&mut values, None);
        assert_eq!(hex(&values), "01 00 00 00 37 ff ff ff ff");
        let mut entries = Vec::new();
        push_entry(&mut entries, b"a", Some(b"7"));
        push_entry(&mut entries, b"bc", None);
        assert_eq!(
            hex(&entries),
            "01 00 00 00 01 00 00 00 61 37 02 00 00 00 ff ff ff ff 62 63"
        );
    }

    #[test]
    fn every_item_round_trips_in_order() {
        let items: [(&[u8], Option<&[u8]>); 4] = [
            (b"", Some(b"")),
            (b"key", None),
            (&[0, 255, 0], Some(&[0xFF; 300])),
            (b"k", Some(b"v")),
        ];
        let (mut keys, mut values, mut entries) = (Vec::new(), Vec::new(), Vec::new());
        for (k, v) in items {
            push_key(&mut keys, k);
            push_value(&mut values, v);
            push_entry(&mut entries, k, v);
        }
        let parsed = Keys::parse(&keys).unwrap();
        assert_eq!(parsed.len(), 4);
        assert!(parsed.eq(items.iter().map(|(k, _)| *k)));
        assert!(
            Values::parse(&values)
                .unwrap()
                .eq(items.iter().map(|(_, v)| *v))
        );
        assert!(Entries::parse(&entries).unwrap().eq(items));
        for empty in [
            Keys::parse(&[]).unwrap().len(),
            Values::parse(&[]).unwrap().len(),
        ] {
            assert_eq!(empty, 0);
        }
    }

    #[test]
    fn the_in_place_writers_write_what_the_plain_ones_do() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        push_entry(&mut a, b"key", Some(b"value"));
        push_entry(&mut a, b"gone", None);
        let lens = push_entry_with(
            &mut b,
            |o| o.extend_from_slice(b"key"),
            |o| o.extend_from_slice(b"value"),
        );
        assert_eq!(lens, (3, 5));
        assert_eq!(
            push_deletion_with(&mut b, |o| o.extend_from_slice(b"gone")),
            4
        );
        assert_eq!(a, b);
    }

    #[test]
    fn parse_refuses_each_kind_of_bad_buffer() {
        let mut one = Vec::new();
        push_entry(&mut one, b"k", Some(b"v"));
        // A length cut short, bytes cut short, bytes left over.
        assert_eq!(
            Entries::parse(&one[..6]).unwrap_err(),
            BadPacking::Truncated {
                index: 0,
                at: 0,
                len: 6
            }
        );
        assert_eq!(
            Entries::parse(&one[..9]).unwrap_err(),
            BadPacking::Truncated {
                index: 0,
                at: 0,
                len: 9
            }
        );
        let two = [&one[..], &[1, 0]].concat();
        assert_eq!(
            Entries::parse(&two).unwrap_err(),
            BadPacking::Truncated {
                index: 1,
                at: 10,
                len: 12
            }
        );
        // `absent` as a key length, in keys and in entries.
        let absent = le(ABSENT);
        assert_eq!(
            Keys::parse(&absent).unwrap_err(),
            BadPacking::AbsentKey { index: 0, at: 0 }
        );
        let entry = [&le(ABSENT)[..], &le(0)].concat();
        assert!(matches!(
            Entries::parse(&entry),
            Err(BadPacking::AbsentKey { .. })
        ));
        // An absent value is fine; a huge one runs past the end, without
        // overflow.
        assert_eq!(Values::parse(&absent).unwrap().collect::<Vec<_>>(), [None]);
        let huge = [&le(ABSENT - 1)[..], &le(ABSENT - 1)].concat();
        assert!(matches!(
            Entries::parse(&huge),
            Err(BadPacking::Truncated { index: 0, .. })
        ));
        assert!(Keys::parse(&[0u8; 7]).is_err(), "a key length cut short");
    }

    #[test]
    fn errors_say_what_is_wrong_and_where() {
        let e = BadPacking::Truncated {
            index: 2,
            at: 17,
            len: 20,
        };
        assert_eq!(
            alloc::format!("{e}"),
            "item 2 (at byte 17) runs past the end of the 20-byte buffer"
        );
        let e = BadPacking::AbsentKey { index: 0, at: 0 };
        assert_eq!(
            alloc::format!("{e}"),
            "item 0 (at byte 0) has the absent length 0xFFFFFFFF as its key length"
        );
    }
}
