//! The wire formats of Weir's flat interfaces, the one definition the host
//! and the SDK share: a flat batch's spans (WIT `weir:operator/flat`, here)
//! and the packed keys, values and entries of flat state (WIT
//! `weir:operator/flat-state`, [`state`]).
//!
//! A flat batch is a `data` buffer plus a `spans` buffer holding one packed
//! [`Span`] of [`SPAN_BYTES`] bytes per record, little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | value offset in `data` (u32) |
//! | 4..8 | value length (u32) |
//! | 8..12 | key offset (u32; 0 without a key) |
//! | 12..16 | key length (u32; 0 without a key) |
//! | 16..20 | flags (u32): bit 0 the record has a key, bit 1 a timestamp, bits 2..5 its [`Change`] (0 insert), bit 5 its value is a [`row`] ([`Encoding`]); other bits 0 |
//! | 20..24 | reserved, 0 |
//! | 24..32 | timestamp, milliseconds since the Unix epoch (i64; 0 without one) |
//!
//! Both lists cross the Wasm boundary as one copy each, however many
//! records they hold. [`check`] validates spans from the other side of the
//! boundary; [`Span::decode`] then never fails. The rows they point at are
//! checked where they are read ([`row::write_json`] for readers of text,
//! [`row::check`] for readers of rows).

#![no_std]

extern crate alloc;

pub mod json;
pub mod row;
pub mod state;

/// Bytes of one packed span.
pub const SPAN_BYTES: usize = 32;

const HAS_KEY: u32 = 1;
const HAS_TIMESTAMP: u32 = 2;
const CHANGE_SHIFT: u32 = 2;
const CHANGE_MASK: u32 = 0b111 << CHANGE_SHIFT;
const ROW: u32 = 1 << 5;

/// How a record's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Encoding {
    /// Bytes as they are: text (a line, JSON) or anything else.
    #[default]
    Bytes,
    /// A [`row`] of typed fields, which readers that want text get as JSON.
    Row,
}

/// What a record says about the row it carries, its change kind: a
/// changelog (a database's changes, an upsert table's) is a stream of
/// these. Records of plain streams are inserts, the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[repr(u8)]
pub enum Change {
    /// A new row (and every record of a stream that is no changelog).
    #[default]
    Insert = 0,
    /// A row as it was before an update; the record with the row after it
    /// ([`Change::UpdateAfter`]) follows. Only where the before image is
    /// known.
    UpdateBefore = 1,
    /// A row as it is after an update.
    UpdateAfter = 2,
    /// A row deleted: the record carries its key (and its last values
    /// where known).
    Delete = 3,
    /// Every row of a table deleted: the record has no key.
    Truncate = 4,
}

impl Change {
    /// Every kind, by number.
    pub const ALL: [Change; 5] = [
        Change::Insert,
        Change::UpdateBefore,
        Change::UpdateAfter,
        Change::Delete,
        Change::Truncate,
    ];

    /// The kind numbered `n` in span flags, if any.
    ///
    /// ```
    /// assert_eq!(weir_flat::Change::from_number(3), Some(weir_flat::Change::Delete));
    /// assert_eq!(weir_flat::Change::from_number(5), None);
    /// ```
    pub fn from_number(n: u32) -> Option<Change> {
        Change::ALL.get(n as usize).copied()
    }

    /// Its name in job files, dead letters and the `op` field of append
    /// sinks: `insert`, `update-before`, `update-after`, `delete`,
    /// `truncate`.
    pub fn name(self) -> &'static str {
        match self {
            Change::Insert => "insert",
            Change::UpdateBefore => "update-before",
            Change::UpdateAfter => "update-after",
            Change::Delete => "delete",
            Change::Truncate => "truncate",
        }
    }

    /// The kind named `name` ([`Change::name`]).
    ///
    /// ```
    /// use weir_flat::Change;
    /// assert!(Change::ALL.iter().all(|c| Change::from_name(c.name()) == Some(*c)));
    /// ```
    pub fn from_name(name: &str) -> Option<Change> {
        Change::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether the record removes what it carries from a table: an
    /// update's before image, a delete, a truncate.
    pub fn retracts(self) -> bool {
        matches!(
            self,
            Change::UpdateBefore | Change::Delete | Change::Truncate
        )
    }
}

/// `len` bytes of a batch's data, starting at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Range {
    /// First byte, an index into the data.
    pub offset: u32,
    /// Number of bytes.
    pub len: u32,
}

impl Range {
    /// The index range, for slicing.
    ///
    /// ```
    /// let r = weir_flat::Range { offset: 1, len: 2 };
    /// assert_eq!(&b"abcd"[r.as_usize()], b"bc");
    /// ```
    #[inline]
    pub fn as_usize(self) -> core::ops::Range<usize> {
        self.offset as usize..self.offset as usize + self.len as usize
    }

    /// One past the last byte, without overflow.
    #[inline]
    fn end(self) -> u64 {
        u64::from(self.offset) + u64::from(self.len)
    }
}

/// One record of a flat batch: where its key and value are, and its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// The key's bytes, if the record has a key.
    pub key: Option<Range>,
    /// The value's bytes.
    pub value: Range,
    /// Event time, milliseconds since the Unix epoch.
    pub timestamp: Option<i64>,
    /// What the record says about its row.
    pub change: Change,
    /// How the value is written.
    pub encoding: Encoding,
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Span {
    /// The packed form.
    ///
    /// ```
    /// use weir_flat::{Range, Span};
    /// let s = Span { key: None, value: Range { offset: 0, len: 3 }, timestamp: Some(-1), change: Default::default(), encoding: Default::default() };
    /// assert_eq!(Span::decode(&s.encode()), s);
    /// ```
    #[inline]
    pub fn encode(&self) -> [u8; SPAN_BYTES] {
        let mut b = [0u8; SPAN_BYTES];
        let key = self.key.unwrap_or_default();
        let flags = if self.key.is_some() { HAS_KEY } else { 0 }
            | if self.timestamp.is_some() {
                HAS_TIMESTAMP
            } else {
                0
            }
            | (self.change as u32) << CHANGE_SHIFT
            | if self.encoding == Encoding::Row {
                ROW
            } else {
                0
            };
        b[0..4].copy_from_slice(&self.value.offset.to_le_bytes());
        b[4..8].copy_from_slice(&self.value.len.to_le_bytes());
        b[8..12].copy_from_slice(&key.offset.to_le_bytes());
        b[12..16].copy_from_slice(&key.len.to_le_bytes());
        b[16..20].copy_from_slice(&flags.to_le_bytes());
        b[24..32].copy_from_slice(&self.timestamp.unwrap_or(0).to_le_bytes());
        b
    }

    /// Reads a packed span that [`check`] accepted (unknown flag bits are
    /// ignored here).
    ///
    /// # Panics
    ///
    /// When `b` is shorter than [`SPAN_BYTES`].
    ///
    /// ```
    /// use weir_flat::{Range, Span};
    /// let s = Span { key: Some(Range { offset: 0, len: 1 }), value: Range { offset: 0, len: 1 }, timestamp: None, change: Default::default(), encoding: Default::default() };
    /// assert_eq!(Span::decode(&s.encode()).key, s.key);
    /// ```
    #[inline]
    pub fn decode(b: &[u8]) -> Span {
        let flags = u32_at(b, 16);
        Span {
            value: Range {
                offset: u32_at(b, 0),
                len: u32_at(b, 4),
            },
            key: (flags & HAS_KEY != 0).then(|| Range {
                offset: u32_at(b, 8),
                len: u32_at(b, 12),
            }),
            timestamp: (flags & HAS_TIMESTAMP != 0).then(|| {
                let mut t = [0u8; 8];
                t.copy_from_slice(&b[24..32]);
                i64::from_le_bytes(t)
            }),
            change: Change::from_number((flags & CHANGE_MASK) >> CHANGE_SHIFT).unwrap_or_default(),
            encoding: if flags & ROW != 0 {
                Encoding::Row
            } else {
                Encoding::Bytes
            },
        }
    }
}

/// Whether one packed span's value is a [`row`], read without decoding the
/// rest.
#[inline]
pub fn is_row(span: &[u8]) -> bool {
    u32_at(span, 16) & ROW != 0
}

/// The change kind of one packed span, read without decoding the rest.
///
/// ```
/// use weir_flat::{change, Change, Span};
/// let s = Span { change: Change::Delete, ..Span::default() };
/// assert_eq!(change(&s.encode()), Change::Delete);
/// ```
#[inline]
pub fn change(span: &[u8]) -> Change {
    Change::from_number((u32_at(span, 16) & CHANGE_MASK) >> CHANGE_SHIFT).unwrap_or_default()
}

/// Makes every record of packed `spans` an insert, for a reader that
/// knows no change kinds; returns how many were something else.
///
/// ```
/// use weir_flat::{change, forget_changes, Change, Span};
/// let mut b = Span { change: Change::Delete, ..Span::default() }.encode();
/// assert_eq!(forget_changes(&mut b), 1);
/// assert_eq!(change(&b), Change::Insert);
/// ```
pub fn forget_changes(spans: &mut [u8]) -> usize {
    let mut changed = 0;
    for span in spans.chunks_exact_mut(SPAN_BYTES) {
        let flags = u32_at(span, 16);
        if flags & CHANGE_MASK != 0 {
            changed += 1;
            span[16..20].copy_from_slice(&(flags & !CHANGE_MASK).to_le_bytes());
        }
    }
    changed
}

/// The timestamp of one packed span, read without decoding the rest (the
/// flags and the time only).
///
/// ```
/// use weir_flat::{timestamp, Range, Span};
/// let s = Span { key: None, value: Range::default(), timestamp: Some(-7), change: Default::default(), encoding: Default::default() };
/// assert_eq!(timestamp(&s.encode()), Some(-7));
/// assert_eq!(timestamp(&Span::default().encode()), None);
/// ```
#[inline]
pub fn timestamp(span: &[u8]) -> Option<i64> {
    (u32_at(span, 16) & HAS_TIMESTAMP != 0).then(|| {
        let mut t = [0u8; 8];
        t.copy_from_slice(&span[24..32]);
        i64::from_le_bytes(t)
    })
}

/// Gives one packed span the timestamp `t` if it has none.
///
/// ```
/// use weir_flat::{fill_timestamp, timestamp, Span};
/// let mut b = Span::default().encode();
/// fill_timestamp(&mut b, 5);
/// fill_timestamp(&mut b, 9);
/// assert_eq!(timestamp(&b), Some(5));
/// ```
#[inline]
pub fn fill_timestamp(span: &mut [u8], t: i64) {
    let flags = u32_at(span, 16);
    if flags & HAS_TIMESTAMP == 0 {
        span[16..20].copy_from_slice(&(flags | HAS_TIMESTAMP).to_le_bytes());
        span[24..32].copy_from_slice(&t.to_le_bytes());
    }
}

/// Why packed spans were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadSpans {
    /// The spans buffer is not a whole number of spans.
    Length {
        /// Its length in bytes.
        bytes: usize,
    },
    /// A span has flag bits or reserved bytes this version does not know.
    Flags {
        /// The record's index.
        index: usize,
        /// Bytes 16..24 of the span.
        bits: u64,
    },
    /// A record's value is marked a row but is none.
    Row {
        /// The record's index.
        index: usize,
        /// What is wrong with it.
        error: row::BadRow,
    },
    /// A range lies outside the data.
    OutOfRange {
        /// The record's index.
        index: usize,
        /// Start of the range.
        offset: u32,
        /// One past its end.
        end: u64,
        /// Bytes of data.
        len: usize,
    },
}

impl core::fmt::Display for BadSpans {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            BadSpans::Length { bytes } => write!(
                f,
                "the spans of a flat batch are {bytes} bytes, not a multiple of {SPAN_BYTES}"
            ),
            BadSpans::Flags { index, bits } => write!(
                f,
                "record {index} of a flat batch has unknown flag or reserved bits {bits:#x}"
            ),
            BadSpans::OutOfRange {
                index,
                offset,
                end,
                len,
            } => write!(
                f,
                "record {index} of a flat batch points at bytes {offset}..{end} but the batch has {len} bytes"
            ),
            BadSpans::Row { index, error } => {
                write!(f, "record {index} of a flat batch: {error}")
            }
        }
    }
}

/// Checks packed `spans` against `data_len` bytes of data: a whole number
/// of spans, known flags and change kinds, reserved bytes zero, every
/// range inside the data.
/// Returns the number of records.
///
/// ```
/// use weir_flat::{check, Range, Span};
/// let s = Span { key: None, value: Range { offset: 2, len: 5 }, timestamp: None, change: Default::default(), encoding: Default::default() };
/// assert_eq!(check(&s.encode(), 7), Ok(1));
/// assert!(check(&s.encode(), 6).is_err());
/// assert!(check(&[0; 31], 100).is_err());
/// ```
pub fn check(spans: &[u8], data_len: usize) -> Result<usize, BadSpans> {
    if !spans.len().is_multiple_of(SPAN_BYTES) {
        return Err(BadSpans::Length { bytes: spans.len() });
    }
    for (index, b) in spans.chunks_exact(SPAN_BYTES).enumerate() {
        let bits = u64::from(u32_at(b, 16)) | (u64::from(u32_at(b, 20)) << 32);
        let kind = (u32_at(b, 16) & CHANGE_MASK) >> CHANGE_SHIFT;
        if bits & !u64::from(HAS_KEY | HAS_TIMESTAMP | CHANGE_MASK | ROW) != 0
            || Change::from_number(kind).is_none()
        {
            return Err(BadSpans::Flags { index, bits });
        }
        let span = Span::decode(b);
        for r in span.key.iter().chain(core::iter::once(&span.value)) {
            if r.end() > data_len as u64 {
                return Err(BadSpans::OutOfRange {
                    index,
                    offset: r.offset,
                    end: r.end(),
                    len: data_len,
                });
            }
        }
    }
    Ok(spans.len() / SPAN_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(key: Option<(u32, u32)>, value: (u32, u32), timestamp: Option<i64>) -> Span {
        let r = |(offset, len)| Range { offset, len };
        Span {
            key: key.map(r),
            value: r(value),
            timestamp,
            change: Default::default(),
            encoding: Encoding::Bytes,
        }
    }

    #[test]
    fn every_field_round_trips() {
        for s in [
            span(None, (0, 0), None),
            span(Some((0, 0)), (0, 0), Some(0)),
            span(Some((7, 9)), (u32::MAX, u32::MAX), Some(i64::MIN)),
            span(None, (1, 2), Some(i64::MAX)),
        ] {
            assert_eq!(Span::decode(&s.encode()), s);
        }
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let b = span(Some((3, 4)), (1, 2), Some(-2)).encode();
        assert_eq!(&b[0..8], &[1, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(&b[8..16], &[3, 0, 0, 0, 4, 0, 0, 0]);
        assert_eq!(&b[16..24], &[3, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[24..32], &(-2i64).to_le_bytes());
    }

    #[test]
    fn check_refuses_each_kind_of_bad_span() {
        let ok = span(Some((0, 1)), (1, 2), None).encode();
        assert_eq!(check(&ok, 3), Ok(1));
        assert_eq!(check(&[], 0), Ok(0));
        assert_eq!(check(&ok[..31], 3), Err(BadSpans::Length { bytes: 31 }));
        // Bit 6 is unknown; kinds 5..7 in bits 2..5 are none.
        for bits in [0x40, 5 << 2, 7 << 2] {
            let mut flags = ok;
            flags[16] = bits;
            assert!(matches!(
                check(&flags, 3),
                Err(BadSpans::Flags { index: 0, .. })
            ));
        }
        for kind in Change::ALL {
            let s = Span {
                change: kind,
                ..span(Some((0, 1)), (1, 2), Some(-3))
            };
            assert_eq!(check(&s.encode(), 3), Ok(1));
            assert_eq!(Span::decode(&s.encode()), s);
        }
        let row = Span {
            encoding: Encoding::Row,
            ..span(None, (0, 3), Some(1))
        };
        assert_eq!(&row.encode()[16..20], &[0x22, 0, 0, 0]);
        assert_eq!(Span::decode(&row.encode()), row);
        assert!(is_row(&row.encode()) && !is_row(&ok));
        let mut reserved = ok;
        reserved[23] = 1;
        assert!(matches!(check(&reserved, 3), Err(BadSpans::Flags { .. })));
        let mut two = [0u8; 64];
        two[..32].copy_from_slice(&ok);
        two[32..].copy_from_slice(&span(Some((2, 2)), (0, 1), None).encode());
        assert_eq!(
            check(&two, 3),
            Err(BadSpans::OutOfRange {
                index: 1,
                offset: 2,
                end: 4,
                len: 3
            })
        );
        // No overflow on huge ranges.
        let huge = span(None, (u32::MAX, u32::MAX), None).encode();
        assert_eq!(check(&huge, 8 << 30), Ok(1));
        assert!(check(&huge, 10).is_err());
    }
}
