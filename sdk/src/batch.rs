//! Records in flat form: one byte buffer plus one span per record (the WIT
//! `weir:operator/flat` layout). [`Batch`] is a borrowed view of an input
//! batch, read as [`RecordRef`]s, and [`BatchBuf`] an owned flat batch
//! being built (the SDK's emit buffers, and test inputs).
//!
//! Invariant: every range of every span of a [`BatchBuf`] lies inside its
//! data, by construction. The host guarantees the same for the batches it
//! passes; the SDK does not check them in a separate pass (that cost about
//! 10% of a word count's guest time) but slices each record's bytes with a
//! bounds check as it reads it, and a range outside the data panics as the
//! host bug it is, which traps the instance. Unknown flag bits of a span
//! from the host are ignored.

use weir_flat::row::RowWriter;
use weir_flat::{Encoding, Range, SPAN_BYTES, Span};

use crate::error::{Error, Result};
use crate::record::{Change, Record, RecordRef};
use crate::writer::ValueWriter;

/// Panics for a span from the host that points outside its batch.
#[cold]
#[inline(never)]
fn out_of_range(range: Range, len: usize) -> ! {
    let end = u64::from(range.offset) + u64::from(range.len);
    panic!(
        "host bug: a record of a flat batch points at bytes {}..{end} but the batch has {len} bytes",
        range.offset
    )
}

/// A batch of records in flat form, borrowed: what
/// [`Operator::process_batch`](crate::Operator::process_batch) gets. Records
/// are read in place, without copying or allocating.
///
/// ```
/// use weir_sdk::BatchBuf;
/// let mut buf = BatchBuf::new();
/// buf.push(None, b"a", None);
/// buf.push(Some(b"k"), b"b", None);
/// let batch = buf.as_batch();
/// assert_eq!(batch.len(), 2);
/// let values: Vec<&[u8]> = batch.iter().map(|r| r.value).collect();
/// assert_eq!(values, [&b"a"[..], &b"b"[..]]);
/// assert_eq!(batch.get(1).unwrap().key, Some(&b"k"[..]));
/// assert!(batch.get(2).is_none());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    data: &'a [u8],
    /// Packed spans (crate `weir-flat`), checked.
    spans: &'a [u8],
}

impl<'a> Batch<'a> {
    /// A view of the packed `spans` over `data`, or an error when `spans`
    /// is not a whole number of spans. Ranges are checked as records are
    /// read (see the [module docs](self)).
    pub(crate) fn new(data: &'a [u8], spans: &'a [u8]) -> Result<Self> {
        if !spans.len().is_multiple_of(SPAN_BYTES) {
            let e = weir_flat::BadSpans::Length { bytes: spans.len() };
            return Err(Error::Other(format!("host bug: {e}")));
        }
        Ok(Batch { data, spans })
    }

    /// Number of records.
    ///
    /// ```
    /// assert_eq!(weir_sdk::BatchBuf::new().as_batch().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.spans.len() / SPAN_BYTES
    }

    /// Whether the batch has no records.
    ///
    /// ```
    /// assert!(weir_sdk::BatchBuf::new().as_batch().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The record of one packed span.
    ///
    /// # Panics
    ///
    /// When a range of the span lies outside the data: a host bug.
    #[inline]
    fn record(&self, packed: &[u8]) -> RecordRef<'a> {
        let span = Span::decode(packed);
        RecordRef {
            key: span.key.map(|r| self.slice(r)),
            value: self.slice(span.value),
            timestamp: span.timestamp,
            change: span.change,
            encoding: span.encoding,
        }
    }

    /// The bytes of `range`; panics when they are not all in the data.
    #[inline]
    fn slice(&self, range: Range) -> &'a [u8] {
        match self.data.get(range.as_usize()) {
            Some(bytes) => bytes,
            None => out_of_range(range, self.data.len()),
        }
    }

    /// Record `index`, if there is one.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push(None, b"x", Some(1));
    /// assert_eq!(buf.as_batch().get(0).unwrap().timestamp, Some(1));
    /// ```
    pub fn get(&self, index: usize) -> Option<RecordRef<'a>> {
        let at = index.checked_mul(SPAN_BYTES)?;
        self.spans
            .get(at..at.checked_add(SPAN_BYTES)?)
            .map(|s| self.record(s))
    }

    /// The records, in order.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push(None, b"x", None);
    /// assert_eq!(buf.as_batch().iter().count(), 1);
    /// ```
    pub fn iter(&self) -> BatchIter<'a> {
        BatchIter {
            batch: *self,
            spans: self.spans.chunks_exact(SPAN_BYTES),
        }
    }

    /// Owned copies of the records, in order.
    ///
    /// ```
    /// let records = vec![weir_sdk::Record::new("a").with_key("k")];
    /// assert_eq!(weir_sdk::BatchBuf::from_records(&records).as_batch().to_records(), records);
    /// ```
    pub fn to_records(&self) -> Vec<Record> {
        self.iter().map(|r| r.to_record()).collect()
    }
}

impl<'a> IntoIterator for Batch<'a> {
    type Item = RecordRef<'a>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &Batch<'a> {
    type Item = RecordRef<'a>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

/// Iterator over the records of a [`Batch`], from [`Batch::iter`].
///
/// ```
/// let mut buf = weir_sdk::BatchBuf::new();
/// buf.push(None, b"x", None);
/// let mut it: weir_sdk::BatchIter<'_> = buf.as_batch().iter();
/// assert_eq!(it.len(), 1);
/// assert_eq!(it.next().unwrap().value, b"x");
/// ```
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    batch: Batch<'a>,
    spans: std::slice::ChunksExact<'a, u8>,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = RecordRef<'a>;

    /// Also makes the record's timestamp the current one, which records
    /// emitted without a timestamp get (see [`Context`](crate::Context)).
    #[inline]
    fn next(&mut self) -> Option<RecordRef<'a>> {
        let rec = self.batch.record(self.spans.next()?);
        crate::timer::set_current(rec.timestamp);
        Some(rec)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl ExactSizeIterator for BatchIter<'_> {}

/// An owned batch in flat form, built record by record: one growing byte
/// buffer and one span per record. [`Context`](crate::Context) buffers
/// emitted records in one; build one to feed
/// [`Operator::process_batch`](crate::Operator::process_batch) directly.
///
/// ```
/// use weir_sdk::BatchBuf;
/// let mut buf = BatchBuf::new();
/// buf.push(Some(b"k"), b"v", None);
/// buf.push_with(None, None, |out| out.push_str("written in place"));
/// assert_eq!(buf.len(), 2);
/// assert_eq!(buf.as_batch().get(1).unwrap().value, b"written in place");
/// ```
#[derive(Debug, Clone, Default)]
pub struct BatchBuf {
    data: Vec<u8>,
    /// Packed spans (crate `weir-flat`).
    spans: Vec<u8>,
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).expect("a flat batch holds less than 4 GiB")
}

impl BatchBuf {
    /// An empty batch.
    ///
    /// ```
    /// assert!(weir_sdk::BatchBuf::new().is_empty());
    /// ```
    pub fn new() -> Self {
        BatchBuf::default()
    }

    /// A flat copy of `records`.
    ///
    /// ```
    /// let buf = weir_sdk::BatchBuf::from_records(&[weir_sdk::Record::new("a")]);
    /// assert_eq!(buf.len(), 1);
    /// ```
    pub fn from_records(records: &[Record]) -> Self {
        let mut buf = BatchBuf::new();
        for r in records {
            buf.push(r.key.as_deref(), &r.value, r.timestamp);
        }
        buf
    }

    /// The range of the bytes appended by `append`.
    #[inline]
    fn append(&mut self, append: impl FnOnce(&mut Vec<u8>)) -> Range {
        let start = self.data.len();
        append(&mut self.data);
        Range {
            offset: to_u32(start),
            len: to_u32(self.data.len() - start),
        }
    }

    /// Appends a record.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push(None, b"v", Some(1));
    /// assert_eq!(buf.as_batch().get(0).unwrap().value, b"v");
    /// ```
    pub fn push(&mut self, key: Option<&[u8]>, value: &[u8], timestamp: Option<i64>) {
        self.push_with(key, timestamp, |out| out.push_bytes(value));
    }

    /// Appends a record whose value `write` writes straight into the buffer.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_with(Some(b"n"), None, |out| out.push_decimal(42));
    /// assert_eq!(buf.as_batch().get(0).unwrap().value, b"42");
    /// ```
    #[inline]
    pub fn push_with(
        &mut self,
        key: Option<&[u8]>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut ValueWriter<'_>),
    ) {
        self.push_change_with(Change::Insert, key, timestamp, write);
    }

    /// Appends a record saying `change` of its row.
    ///
    /// ```
    /// use weir_sdk::{BatchBuf, Change};
    /// let mut buf = BatchBuf::new();
    /// buf.push_change(Change::Delete, Some(b"k"), b"{}", None);
    /// assert_eq!(buf.as_batch().get(0).unwrap().change, Change::Delete);
    /// ```
    pub fn push_change(
        &mut self,
        change: Change,
        key: Option<&[u8]>,
        value: &[u8],
        timestamp: Option<i64>,
    ) {
        self.push_change_with(change, key, timestamp, |out| out.push_bytes(value));
    }

    /// Appends a record saying `change` of its row, whose value `write`
    /// writes straight into the buffer.
    #[inline]
    pub fn push_change_with(
        &mut self,
        change: Change,
        key: Option<&[u8]>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut ValueWriter<'_>),
    ) {
        let value = |data: &mut Vec<u8>| write(&mut ValueWriter::new(data));
        self.push_span_with(change, Encoding::Bytes, key, timestamp, value);
    }

    /// Appends a record whose value is a row of typed fields that `write`
    /// appends: no text is formatted here; whoever reads the record as
    /// text (a sink, an operator) gets the row as a JSON object of its
    /// fields in order.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_row_with(Some(b"hi"), None, |row| {
    ///     row.str("word", "hi").u64("count", 2);
    /// });
    /// assert_eq!(buf.len(), 1);
    /// ```
    #[inline]
    pub fn push_row_with(
        &mut self,
        key: Option<&[u8]>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut RowWriter<'_>),
    ) {
        let value = |data: &mut Vec<u8>| write(&mut RowWriter::new(data));
        self.push_span_with(Change::Insert, Encoding::Row, key, timestamp, value);
    }

    /// Appends a copy of `record`, a row staying a row.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_row_with(Some(b"k"), Some(3), |row| { row.bool("ok", true); });
    /// let mut copy = weir_sdk::BatchBuf::new();
    /// copy.push_ref(buf.as_batch().get(0).unwrap());
    /// assert_eq!(copy.as_batch().get(0), buf.as_batch().get(0));
    /// ```
    #[inline]
    pub fn push_ref(&mut self, record: RecordRef<'_>) {
        let value = |data: &mut Vec<u8>| data.extend_from_slice(record.value);
        let (change, encoding) = (record.change, record.encoding);
        self.push_span_with(change, encoding, record.key, record.timestamp, value);
    }

    #[inline]
    fn push_span_with(
        &mut self,
        change: Change,
        encoding: Encoding,
        key: Option<&[u8]>,
        timestamp: Option<i64>,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        let key = key.map(|k| self.append(|data| data.extend_from_slice(k)));
        let value = self.append(write);
        self.spans.extend_from_slice(
            &Span {
                key,
                value,
                timestamp,
                change,
                encoding,
            }
            .encode(),
        );
    }

    /// Number of records.
    ///
    /// ```
    /// assert_eq!(weir_sdk::BatchBuf::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.spans.len() / SPAN_BYTES
    }

    /// Whether there are no records.
    ///
    /// ```
    /// assert!(weir_sdk::BatchBuf::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Bytes of keys and values held.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push(Some(b"k"), b"vv", None);
    /// assert_eq!(buf.data_len(), 3);
    /// ```
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// Removes every record, keeping the allocated memory.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push(None, b"v", None);
    /// buf.clear();
    /// assert!(buf.is_empty() && buf.data_len() == 0);
    /// ```
    pub fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
    }

    /// A borrowed view of the records.
    ///
    /// ```
    /// let buf = weir_sdk::BatchBuf::from_records(&[weir_sdk::Record::new("a")]);
    /// assert_eq!(buf.as_batch().get(0).unwrap().value, b"a");
    /// ```
    pub fn as_batch(&self) -> Batch<'_> {
        Batch {
            data: &self.data,
            spans: &self.spans,
        }
    }

    /// The data buffer and the spans, as the flat WIT interfaces take them.
    pub(crate) fn parts(&self) -> (&[u8], &[u8]) {
        (&self.data, &self.spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(offset: u32, len: u32) -> Range {
        Range { offset, len }
    }

    fn packed(spans: &[Span]) -> Vec<u8> {
        spans.iter().flat_map(Span::encode).collect()
    }

    #[test]
    fn a_span_outside_the_data_panics_as_a_host_bug() {
        let data = b"abc";
        let ok = Span {
            key: Some(range(0, 1)),
            value: range(1, 2),
            timestamp: None,
            change: Default::default(),
            encoding: Default::default(),
        };
        assert_eq!(
            Batch::new(data, &packed(&[ok]))
                .unwrap()
                .get(0)
                .unwrap()
                .value,
            b"bc"
        );
        for (bad, bytes) in [
            (
                Span {
                    value: range(2, 2),
                    ..ok
                },
                "2..4",
            ),
            (
                Span {
                    key: Some(range(3, 1)),
                    ..ok
                },
                "3..4",
            ),
            (
                Span {
                    value: range(u32::MAX, u32::MAX),
                    ..ok
                },
                "4294967295..8589934590",
            ),
        ] {
            let spans = packed(&[ok, bad]);
            let batch = Batch::new(data, &spans).unwrap();
            assert_eq!(batch.get(0).unwrap().value, b"bc");
            let panic = std::panic::catch_unwind(|| batch.iter().count()).unwrap_err();
            let msg = panic.downcast_ref::<String>().unwrap();
            assert!(msg.starts_with("host bug"), "{msg}");
            assert!(
                msg.contains(&format!("bytes {bytes} but the batch has 3 bytes")),
                "{msg}"
            );
        }
        // An empty range at the very end is inside.
        let spans = packed(&[Span {
            value: range(3, 0),
            ..ok
        }]);
        assert_eq!(Batch::new(data, &spans).unwrap().get(0).unwrap().value, b"");
        // Spans that are not a whole number of spans are refused up front.
        let err = Batch::new(data, &packed(&[ok])[..31]).unwrap_err();
        assert!(err.to_string().contains("31 bytes"), "{err}");
    }

    #[test]
    fn ranges_may_overlap() {
        let data = b"word";
        let span = Span {
            key: Some(range(0, 4)),
            value: range(0, 4),
            timestamp: Some(-1),
            change: Default::default(),
            encoding: Default::default(),
        };
        let spans = packed(&[span]);
        let rec = Batch::new(data, &spans).unwrap().get(0).unwrap();
        assert_eq!((rec.key, rec.value), (Some(&b"word"[..]), &b"word"[..]));
    }

    #[test]
    fn records_round_trip_through_the_flat_form() {
        let records = vec![
            Record::new("").with_key(""),
            Record::new("v").with_timestamp(i64::MIN),
            Record::new(vec![0xff; 3]).with_key("k"),
        ];
        let buf = BatchBuf::from_records(&records);
        assert_eq!(buf.as_batch().to_records(), records);
        let (data, spans) = buf.parts();
        assert_eq!(Batch::new(data, spans).unwrap().to_records(), records);
    }
}
