//! [`Batch`]: records in flat form, the unit that travels on every edge.
//!
//! A batch is one byte buffer plus one packed [`Span`] per record pointing
//! into it, the WIT `weir:operator/flat` layout (crate `weir-flat`), so a
//! batch crosses the Wasm boundary as two byte-list copies and costs no
//! allocation per record anywhere in the host.
//!
//! Invariant: `may_have_rows` is false only when no span is a row;
//! `unchecked_rows` is false only when every row was written by the host
//! ([`Batch::push_row`]) or copied from a batch whose rows were.
//!
//! Invariant: `spans` is a whole number of valid packed spans whose ranges
//! lie inside `data`. [`Batch::from_parts`] checks it for data coming from a
//! plugin; every other constructor maintains it.
//!
//! A batch also carries its *origin* ([`Batch::origin`]): when its oldest
//! record entered the job, for the sinks' latency histogram; and its
//! [`Provenance`], where its records came from, for messages. Neither is
//! part of the batch's value (equality ignores them) nor persisted.

use std::sync::Arc;
use std::time::Instant;

use crate::Record;
use crate::dataflow::provenance::Provenance;

pub use weir_flat::{BadSpans, Change, Encoding, Range, SPAN_BYTES, Span};

mod rows;

/// Bytes a record costs besides its data, for limits and buffering
/// accounting (the span and bookkeeping).
pub const RECORD_OVERHEAD: usize = 32;

/// A borrowed record of a [`Batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The partitioning key, if any.
    pub key: Option<&'a [u8]>,
    /// The value.
    pub value: &'a [u8],
    /// Event time, milliseconds since the Unix epoch.
    pub timestamp: Option<i64>,
    /// What it says about its row (an insert in a stream that is no
    /// changelog).
    pub change: Change,
    /// How its value is written: a plugin's row stays one on the edges
    /// and in checkpoints, and becomes JSON text for its reader
    /// ([`Batch::rows_as_text`]).
    pub encoding: Encoding,
}

impl RecordRef<'_> {
    /// Whether the key is the value itself, stored once (as sources make
    /// it); [`Batch::push_ref`] keeps it shared.
    fn key_is_value(&self) -> bool {
        self.key
            .is_some_and(|k| k.as_ptr() == self.value.as_ptr() && k.len() == self.value.len())
    }

    /// Bytes of data it takes in a batch.
    fn data_len(&self) -> usize {
        match self.key {
            Some(k) if !self.key_is_value() => k.len() + self.value.len(),
            _ => self.value.len(),
        }
    }

    /// The value as text: a row as its JSON object, else as it is (also
    /// a value marked a row that is none, as the bytes it has).
    ///
    /// ```
    /// let mut row = Vec::new();
    /// weir_flat::row::RowWriter::new(&mut row).bool("ok", true);
    /// let mut b = weir::Batch::new();
    /// b.push_row(None, &row, None);
    /// b.push(None, b"text", None);
    /// assert_eq!(b.get(0).text_value(), br#"{"ok":true}"#);
    /// assert_eq!(b.get(1).text_value(), b"text");
    /// ```
    pub fn text_value(&self) -> Vec<u8> {
        let mut text = Vec::new();
        match self.encoding {
            Encoding::Row if weir_flat::row::write_json(self.value, &mut text).is_ok() => text,
            _ => self.value.to_vec(),
        }
    }

    /// `f` of this record with its value as text ([`text_value`](Self::text_value)),
    /// for a reader of rows that does not encode this one itself:
    /// ```
    /// let (mut row, mut b) = (Vec::new(), weir::Batch::new());
    /// weir_flat::row::RowWriter::new(&mut row).bool("ok", true);
    /// b.push_row(None, &row, None);
    /// assert_eq!(b.get(0).with_text_value(|r| r.value.to_vec()), br#"{"ok":true}"#);
    /// ```
    pub fn with_text_value<R>(&self, f: impl FnOnce(&RecordRef<'_>) -> R) -> R {
        let (value, encoding) = (&self.text_value()[..], Encoding::Bytes);
        f(&RecordRef {
            value,
            encoding,
            ..*self
        })
    }

    /// An owned copy, its value as text ([`text_value`](Self::text_value)):
    /// a [`Record`] holds text.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push(Some(b"k"), b"v", None);
    /// assert_eq!(b.get(0).to_record().key.as_deref(), Some(&b"k"[..]));
    /// ```
    pub fn to_record(&self) -> Record {
        Record {
            key: self.key.map(<[u8]>::to_vec),
            value: self.text_value(),
            timestamp: self.timestamp,
        }
    }
}

/// Records in flat form: one buffer, one [`Span`] per record.
///
/// ```
/// let mut b = weir::Batch::new();
/// b.push(None, b"hello", None);
/// b.push_keyed_by_value(b"world", Some(7));
/// assert_eq!(b.len(), 2);
/// assert_eq!(b.get(1).key, Some(&b"world"[..]));
/// assert_eq!(b.iter().map(|r| r.value.len()).sum::<usize>(), 10);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Batch {
    data: Vec<u8>,
    /// Packed spans, [`SPAN_BYTES`] per record.
    spans: Vec<u8>,
    /// When the oldest record entered the job, if known.
    origin: Option<Instant>,
    /// Where its records came from, if known.
    provenance: Option<Arc<Provenance>>,
    /// False only when no value is a row (records pushed by the host say
    /// so; a plugin's spans may): [`has_rows`](Batch::has_rows) then scans
    /// nothing, so the batches of sources that write text cost no scan.
    may_have_rows: bool,
    /// False only when no row can be malformed ([`check_rows`](Batch::check_rows)
    /// then checks nothing): a plugin's rows are checked by their reader.
    unchecked_rows: bool,
}

/// The records only: two batches holding the same records are equal
/// whatever their origins.
impl PartialEq for Batch {
    fn eq(&self, other: &Batch) -> bool {
        self.data == other.data && self.spans == other.spans
    }
}

impl Eq for Batch {}

fn offset_of(at: usize) -> u32 {
    u32::try_from(at).expect("a batch holds less than 4 GiB (sources and emits cut batches)")
}

impl Batch {
    /// An empty batch.
    ///
    /// ```
    /// assert!(weir::Batch::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Batch::default()
    }

    /// An empty batch with room for `records` records of `bytes` bytes in
    /// all.
    ///
    /// ```
    /// assert!(weir::Batch::with_capacity(16, 1024).is_empty());
    /// ```
    pub fn with_capacity(records: usize, bytes: usize) -> Self {
        Batch {
            data: Vec::with_capacity(bytes),
            spans: Vec::with_capacity(records * SPAN_BYTES),
            origin: None,
            provenance: None,
            may_have_rows: false,
            unchecked_rows: false,
        }
    }

    /// A batch from a plugin's flat emit, checking the packed spans (see
    /// [`weir_flat::check`]). Values marked rows are checked where they are
    /// read, by [`Batch::rows_as_text`] on the reader's thread.
    ///
    /// ```
    /// use weir::dataflow::batch::{Batch, Range, Span};
    /// let span = Span { value: Range { offset: 0, len: 3 }, ..Span::default() };
    /// assert!(Batch::from_parts(b"abc".to_vec(), span.encode().to_vec()).is_ok());
    /// assert!(Batch::from_parts(b"ab".to_vec(), span.encode().to_vec()).is_err());
    /// ```
    pub fn from_parts(data: Vec<u8>, spans: Vec<u8>) -> Result<Self, BadSpans> {
        weir_flat::check(&spans, data.len())?;
        Ok(Batch {
            data,
            spans,
            origin: None,
            provenance: None,
            may_have_rows: true,
            unchecked_rows: true,
        })
    }

    /// When the oldest record of the batch entered the job (its source
    /// handed it over), if known: batches a source sends have one, the
    /// output of an operator call has its input's.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// assert_eq!(b.origin(), None);
    /// let (early, late) = (std::time::Instant::now(), std::time::Instant::now());
    /// b.set_origin(late);
    /// b.set_origin(early);
    /// assert_eq!(b.origin(), Some(early));
    /// ```
    pub fn origin(&self) -> Option<Instant> {
        self.origin
    }

    /// Sets the origin to `at`, unless it already has an earlier one.
    pub fn set_origin(&mut self, at: Instant) {
        self.origin = Some(self.origin.map_or(at, |o| o.min(at)));
    }

    /// Where the batch's records came from, if known: batches a source
    /// sends name their place in its input, the output of an operator call
    /// has its input's ([`crate::dataflow::provenance`]).
    pub fn provenance(&self) -> Option<&Arc<Provenance>> {
        self.provenance.as_ref()
    }

    /// Sets where the batch's records came from.
    pub fn set_provenance(&mut self, provenance: Option<Arc<Provenance>>) {
        self.provenance = provenance;
    }

    /// The records at `indices` (in that order), with this batch's origin
    /// and provenance.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// for v in ["a", "b", "c"] {
    ///     b.push(None, v.as_bytes(), Some(1));
    /// }
    /// let picked = b.select(&[2, 0]);
    /// let values: Vec<&[u8]> = picked.iter().map(|r| r.value).collect();
    /// assert_eq!(values, [&b"c"[..], &b"a"[..]]);
    /// ```
    pub fn select(&self, indices: &[usize]) -> Batch {
        let mut out = Batch::with_capacity(indices.len(), 0);
        for &i in indices {
            out.push_ref(self.get(i));
        }
        out.unchecked_rows = self.unchecked_rows;
        out.origin = self.origin;
        out.provenance = self.provenance.clone();
        out
    }

    /// Number of records.
    ///
    /// ```
    /// assert_eq!(weir::Batch::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.spans.len() / SPAN_BYTES
    }

    /// Whether the batch has no records.
    ///
    /// ```
    /// assert!(weir::Batch::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Bytes of record data (keys that are part of their value count once).
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push_keyed_by_value(b"abc", None);
    /// assert_eq!(b.data_bytes(), 3);
    /// ```
    pub fn data_bytes(&self) -> usize {
        self.data.len()
    }

    /// Bytes the batch occupies for buffering limits: data plus
    /// [`RECORD_OVERHEAD`] per record.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push(None, &[0; 10], None);
    /// assert_eq!(b.size(), 10 + weir::dataflow::batch::RECORD_OVERHEAD);
    /// ```
    pub fn size(&self) -> usize {
        self.data.len() + self.len() * RECORD_OVERHEAD
    }

    /// The data buffer and the packed spans, as the flat WIT interfaces take
    /// them.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push(None, b"x", None);
    /// let (data, spans) = b.parts();
    /// assert_eq!((data.len(), spans.len()), (1, weir::dataflow::batch::SPAN_BYTES));
    /// ```
    pub fn parts(&self) -> (&[u8], &[u8]) {
        (&self.data, &self.spans)
    }

    fn push_span(&mut self, span: Span) {
        self.may_have_rows |= span.encoding == Encoding::Row;
        self.spans.extend_from_slice(&span.encode());
    }

    fn span(&self, i: usize) -> Span {
        Span::decode(&self.spans[i * SPAN_BYTES..(i + 1) * SPAN_BYTES])
    }

    fn range(&mut self, bytes: &[u8]) -> Range {
        let offset = offset_of(self.data.len());
        self.data.extend_from_slice(bytes);
        Range {
            offset,
            len: offset_of(bytes.len()),
        }
    }

    /// Appends a record.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push(Some(b"k"), b"v", Some(1));
    /// assert_eq!(b.get(0).timestamp, Some(1));
    /// ```
    pub fn push(&mut self, key: Option<&[u8]>, value: &[u8], timestamp: Option<i64>) {
        self.push_change(Change::Insert, key, value, timestamp);
    }

    /// Appends a record whose value is a row ([`weir_flat::row`]), which
    /// its readers get as JSON text unless they read rows. The host wrote
    /// it (a source): it is a row, and no reader checks it again.
    ///
    /// ```
    /// let mut row = Vec::new();
    /// weir_flat::row::RowWriter::new(&mut row).i64("n", 1);
    /// let mut b = weir::Batch::new();
    /// b.push_row(None, &row, None);
    /// assert!(b.has_rows());
    /// assert_eq!(b.rows_as_text().unwrap().get(0).value, br#"{"n":1}"#);
    /// ```
    pub fn push_row(&mut self, key: Option<&[u8]>, row: &[u8], timestamp: Option<i64>) {
        debug_assert!(weir_flat::row::check(row).is_ok(), "the host writes rows");
        self.push_encoded(Change::Insert, Encoding::Row, key, row, timestamp);
    }

    /// Appends a record saying `change` of its row.
    ///
    /// ```
    /// use weir::dataflow::batch::Change;
    /// let mut b = weir::Batch::new();
    /// b.push_change(Change::Delete, Some(b"k"), b"{}", None);
    /// assert_eq!(b.get(0).change, Change::Delete);
    /// ```
    pub fn push_change(
        &mut self,
        change: Change,
        key: Option<&[u8]>,
        value: &[u8],
        timestamp: Option<i64>,
    ) {
        self.push_encoded(change, Encoding::Bytes, key, value, timestamp);
    }

    fn push_encoded(
        &mut self,
        change: Change,
        encoding: Encoding,
        key: Option<&[u8]>,
        value: &[u8],
        timestamp: Option<i64>,
    ) {
        let key = key.map(|k| self.range(k));
        let value = self.range(value);
        self.push_span(Span {
            key,
            value,
            timestamp,
            change,
            encoding,
        });
    }

    /// Appends a record whose key is its whole value, storing the bytes once.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push_keyed_by_value(b"w", None);
    /// assert_eq!(b.get(0).key, Some(&b"w"[..]));
    /// ```
    pub fn push_keyed_by_value(&mut self, value: &[u8], timestamp: Option<i64>) {
        let value = self.range(value);
        self.push_span(Span {
            key: Some(value),
            value,
            timestamp,
            ..Span::default()
        });
    }

    /// Appends a copy of `r`.
    ///
    /// ```
    /// let mut a = weir::Batch::new();
    /// a.push(Some(b"k"), b"v", None);
    /// let mut b = weir::Batch::new();
    /// b.push_ref(a.get(0));
    /// assert_eq!(a, b);
    /// ```
    pub fn push_ref(&mut self, r: RecordRef<'_>) {
        self.unchecked_rows |= r.encoding == Encoding::Row;
        if r.key_is_value() {
            let value = self.range(r.value);
            self.push_span(Span {
                key: Some(value),
                value,
                timestamp: r.timestamp,
                change: r.change,
                encoding: r.encoding,
            });
        } else {
            self.push_encoded(r.change, r.encoding, r.key, r.value, r.timestamp)
        }
    }

    /// Appends every record of `other`, in order.
    ///
    /// ```
    /// let mut a = weir::Batch::new();
    /// a.push(None, b"1", None);
    /// let mut b = weir::Batch::new();
    /// b.push(Some(b"k"), b"2", None);
    /// a.append(&b);
    /// assert_eq!(a.get(1).key, Some(&b"k"[..]));
    /// ```
    pub fn append(&mut self, other: &Batch) {
        if let Some(o) = other.origin {
            self.set_origin(o);
        }
        if self.provenance.is_none() {
            self.provenance.clone_from(&other.provenance);
        }
        let base = offset_of(self.data.len());
        // Every shifted range must stay addressable: panics like `offset_of`
        // past 4 GiB.
        let _ = offset_of(self.data.len() + other.data.len());
        self.data.extend_from_slice(&other.data);
        self.unchecked_rows |= other.unchecked_rows;
        let shift = |r: Range| Range {
            offset: r.offset + base,
            len: r.len,
        };
        self.spans.reserve(other.spans.len());
        for i in 0..other.len() {
            let s = other.span(i);
            self.push_span(Span {
                key: s.key.map(shift),
                value: shift(s.value),
                ..s
            });
        }
    }

    fn slice(&self, r: Range) -> &[u8] {
        &self.data[r.as_usize()]
    }

    /// Record `i`.
    ///
    /// # Panics
    ///
    /// When `i >= len()`.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push(None, b"v", None);
    /// assert_eq!(b.get(0).value, b"v");
    /// ```
    pub fn get(&self, i: usize) -> RecordRef<'_> {
        let s = self.span(i);
        RecordRef {
            key: s.key.map(|k| self.slice(k)),
            value: self.slice(s.value),
            timestamp: s.timestamp,
            change: s.change,
            encoding: s.encoding,
        }
    }

    /// The records, in order.
    ///
    /// ```
    /// let b = weir::Batch::from(vec![weir::Record::new(b"a".to_vec())]);
    /// assert_eq!(b.iter().next().unwrap().value, b"a");
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RecordRef<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Owned copies of the records.
    ///
    /// ```
    /// let recs = vec![weir::Record::new(b"a".to_vec()).with_key(b"k".to_vec())];
    /// assert_eq!(weir::Batch::from(recs.clone()).to_records(), recs);
    /// ```
    pub fn to_records(&self) -> Vec<Record> {
        self.iter().map(|r| r.to_record()).collect()
    }

    /// Empties the batch, keeping its allocations.
    ///
    /// ```
    /// let mut b = weir::Batch::from(vec![weir::Record::new(vec![1])]);
    /// b.clear();
    /// assert!(b.is_empty());
    /// ```
    pub fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
        self.origin = None;
        self.provenance = None;
        self.may_have_rows = false;
        self.unchecked_rows = false;
    }

    /// The largest timestamp of its records, if any has one.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push(None, b"a", Some(5));
    /// b.push(None, b"b", None);
    /// b.push(None, b"c", Some(3));
    /// assert_eq!(b.max_timestamp(), Some(5));
    /// ```
    pub fn max_timestamp(&self) -> Option<i64> {
        self.spans
            .chunks_exact(SPAN_BYTES)
            .filter_map(weir_flat::timestamp)
            .max()
    }

    /// Whether a record says anything but [`Change::Insert`].
    ///
    /// ```
    /// use weir::dataflow::batch::Change;
    /// let mut b = weir::Batch::new();
    /// b.push(None, b"a", None);
    /// assert!(!b.has_changes());
    /// b.push_change(Change::Delete, None, b"a", None);
    /// assert!(b.has_changes());
    /// ```
    pub fn has_changes(&self) -> bool {
        (self.spans.chunks_exact(SPAN_BYTES)).any(|s| weir_flat::change(s) != Change::Insert)
    }

    /// Gives every record without a timestamp the timestamp `t`.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// b.push(None, b"a", Some(5));
    /// b.push(None, b"b", None);
    /// b.fill_timestamps(9);
    /// assert_eq!(b.iter().map(|r| r.timestamp).collect::<Vec<_>>(), [Some(5), Some(9)]);
    /// ```
    pub fn fill_timestamps(&mut self, t: i64) {
        for span in self.spans.chunks_exact_mut(SPAN_BYTES) {
            weir_flat::fill_timestamp(span, t);
        }
    }

    /// Splits the batch into `n` batches by `route(key)`, keeping the order
    /// within each. A truncate concerns every key: it goes to every part,
    /// in its place.
    ///
    /// ```
    /// let mut b = weir::Batch::new();
    /// for k in [b"x", b"y", b"x"] { b.push(Some(k), b"v", None); }
    /// let parts = b.partition(2, |key| usize::from(key == Some(&b"y"[..])));
    /// assert_eq!(parts[0].len(), 2);
    /// ```
    pub fn partition(&self, n: usize, mut route: impl FnMut(Option<&[u8]>) -> usize) -> Vec<Batch> {
        // Two passes: route and size every part, then copy into buffers of
        // exactly that size (growing them as we go reallocated and copied
        // each part about once more).
        let mut routed = Vec::with_capacity(self.len());
        let mut sizes = vec![(0, 0); n];
        for r in self.iter() {
            let to = (r.change != Change::Truncate).then(|| route(r.key));
            let parts = match to {
                Some(to) => to..to + 1,
                None => 0..n,
            };
            for (records, bytes) in &mut sizes[parts] {
                *records += 1;
                *bytes += r.data_len();
            }
            routed.push((to, r));
        }
        let mut parts: Vec<Batch> = sizes
            .into_iter()
            .map(|(records, bytes)| Batch::with_capacity(records, bytes))
            .collect();
        for (to, r) in routed {
            match to {
                Some(to) => parts[to].push_ref(r),
                None => parts.iter_mut().for_each(|p| p.push_ref(r)),
            }
        }
        for part in &mut parts {
            part.unchecked_rows = self.unchecked_rows;
            part.origin = self.origin;
            part.provenance.clone_from(&self.provenance);
        }
        parts
    }
}

impl From<Vec<Record>> for Batch {
    fn from(records: Vec<Record>) -> Self {
        Batch::from(records.as_slice())
    }
}

impl From<&[Record]> for Batch {
    fn from(records: &[Record]) -> Self {
        let bytes = records.iter().map(|r| r.size()).sum();
        let mut b = Batch::with_capacity(records.len(), bytes);
        for r in records {
            b.push(r.key.as_deref(), &r.value, r.timestamp);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::dataflow::provenance::Provenance;

    /// Provenance goes with a batch's parts and into a batch it is appended
    /// to that has none, never over one it has.
    #[test]
    fn provenance_follows_the_records() {
        let from = |place: &str| {
            Some(Arc::new(Provenance {
                source: "in".into(),
                place: place.into(),
                records: 2,
            }))
        };
        let mut b = Batch::new();
        b.push(Some(b"x"), b"1", None);
        b.push(Some(b"y"), b"2", None);
        b.set_provenance(from("in.txt lines 1–2"));
        for part in b.partition(2, |k| usize::from(k == Some(b"y"))) {
            assert_eq!(part.provenance(), from("in.txt lines 1–2").as_ref());
        }
        let mut empty = Batch::new();
        empty.append(&b);
        assert_eq!(empty.provenance(), b.provenance());
        let mut other = Batch::new();
        other.set_provenance(from("in.txt line 9"));
        other.append(&b);
        assert_eq!(other.provenance(), from("in.txt line 9").as_ref());
        other.clear();
        assert_eq!(other.provenance(), None);
    }

    use super::*;

    /// A batch of rows `{"n":i}` (keyed `k<i>`, at time i, record 1 a
    /// delete) with the plain value `plain` between the first two.
    fn rows_and_text(plain: &[u8]) -> Batch {
        let mut b = Batch::new();
        for i in 0..3u64 {
            let mut row = Vec::new();
            weir_flat::row::RowWriter::new(&mut row).u64("n", i);
            let change = if i == 1 {
                Change::Delete
            } else {
                Change::Insert
            };
            let key = format!("k{i}");
            b.push_encoded(
                change,
                Encoding::Row,
                Some(key.as_bytes()),
                &row,
                Some(i as i64),
            );
            if i == 0 {
                b.push(None, plain, None);
            }
        }
        b
    }

    /// A plugin's rows are checked by their reader wherever they were
    /// copied to; the host's own rows (a source's) are not checked again,
    /// nor are their copies.
    #[test]
    fn only_rows_a_plugin_wrote_are_checked_again() {
        let bad = Span {
            value: Range { offset: 0, len: 2 },
            encoding: Encoding::Row,
            ..Span::default()
        };
        let plugin = Batch::from_parts(vec![9, 0], bad.encode().to_vec()).unwrap();
        let mut row = Vec::new();
        weir_flat::row::RowWriter::new(&mut row).i64("n", 1);
        let mut host = Batch::new();
        host.push_row(Some(b"k"), &row, None);
        let copies = |b: &Batch| {
            let mut pushed = Batch::new();
            pushed.push_ref(b.get(0));
            let mut appended = host.clone();
            appended.append(b);
            [
                b.select(&[0]),
                b.partition(2, |_| 1).remove(1),
                pushed,
                appended,
            ]
        };
        for copy in copies(&plugin) {
            assert!(copy.check_rows().is_err(), "a plugin's row, copied");
        }
        assert!(!host.unchecked_rows);
        for copy in &copies(&host)[..2] {
            assert!(!copy.unchecked_rows, "a source's rows, copied");
        }
        assert!(host.clone().rows_as_text().unwrap().check_rows().is_ok());
    }

    #[test]
    fn rows_stay_rows_through_every_copy_and_become_json_for_readers() {
        let mut b = rows_and_text(b"plain");
        b.set_provenance(Some(Arc::new(Provenance {
            source: "in".into(),
            place: "line 1".into(),
            records: 4,
        })));
        let encodings = |b: &Batch| b.iter().map(|r| r.encoding).collect::<Vec<_>>();
        let (row, bytes) = (Encoding::Row, Encoding::Bytes);
        assert_eq!(encodings(&b), [row, bytes, row, row]);
        assert_eq!(encodings(&b.select(&[1, 3])), [bytes, row]);
        let mut appended = Batch::new();
        appended.push(None, b"first", None);
        appended.append(&b);
        assert_eq!(encodings(&appended), [bytes, row, bytes, row, row]);
        let parts = b.partition(2, |k| usize::from(k == Some(b"k2")));
        assert_eq!(encodings(&parts[0]), [row, bytes, row]);
        assert_eq!(encodings(&parts[1]), [row]);
        let mut framed = Vec::new();
        crate::dataflow::frame::write(&mut framed, &b).unwrap();
        let read = crate::dataflow::frame::read(&mut &framed[..])
            .unwrap()
            .unwrap();
        assert_eq!(read, b);

        let text = b.clone().rows_as_text().unwrap();
        assert_eq!(encodings(&text), [bytes; 4]);
        assert!(!text.has_rows() && b.has_rows());
        let values: Vec<&[u8]> = text.iter().map(|r| r.value).collect();
        assert_eq!(
            values,
            [&br#"{"n":0}"#[..], b"plain", br#"{"n":1}"#, br#"{"n":2}"#]
        );
        for (was, now) in b.iter().zip(text.iter()) {
            assert_eq!(
                (was.key, was.timestamp, was.change),
                (now.key, now.timestamp, now.change)
            );
        }
        assert_eq!(text.provenance(), b.provenance());
        // A batch without rows is handed back as it is.
        let plain = Batch::from(vec![Record::new(b"x".to_vec())]);
        assert_eq!(plain.clone().rows_as_text().unwrap(), plain);
    }

    /// `has_rows` answers as a scan of the spans does, however the batch
    /// was made: the flag that spares the scan is false only when no span
    /// is a row.
    #[test]
    fn has_rows_is_what_the_spans_say_through_every_copy() {
        let scan = |b: &Batch| b.spans.chunks_exact(SPAN_BYTES).any(weir_flat::is_row);
        let rows = rows_and_text(b"plain");
        let (data, spans) = rows.parts();
        let from_guest = Batch::from_parts(data.to_vec(), spans.to_vec()).unwrap();
        let text_from_guest = Batch::from_parts(
            b"x".to_vec(),
            Span {
                value: Range { offset: 0, len: 1 },
                ..Span::default()
            }
            .encode()
            .to_vec(),
        )
        .unwrap();
        let mut framed = Vec::new();
        crate::dataflow::frame::write(&mut framed, &rows).unwrap();
        let mut appended = Batch::from(vec![Record::new(b"t".to_vec())]);
        appended.append(&rows);
        let mut cleared = rows.clone();
        cleared.clear();
        cleared.push(None, b"t", None);
        let batches = [
            Batch::from(vec![Record::new(b"t".to_vec())]),
            rows.clone(),
            from_guest.clone(),
            text_from_guest.clone(),
            from_guest.select(&[1]),
            from_guest.select(&[0, 1]),
            text_from_guest.select(&[0]),
            appended,
            cleared,
            crate::dataflow::frame::read(&mut &framed[..])
                .unwrap()
                .unwrap(),
            from_guest.clone().rows_as_text().unwrap(),
        ]
        .into_iter()
        .chain(from_guest.partition(3, |k| k.map_or(0, |k| usize::from(k[1] % 3))));
        let mut with_rows = 0;
        for (i, b) in batches.enumerate() {
            assert_eq!(b.has_rows(), scan(&b), "batch {i}");
            with_rows += usize::from(scan(&b));
        }
        assert!(with_rows >= 5, "{with_rows}");
        // Pushed text spares the scan.
        assert!(!Batch::from(vec![Record::new(b"t".to_vec())]).may_have_rows);
    }

    #[test]
    fn a_value_marked_a_row_that_is_none_is_named_when_read() {
        let mut b = rows_and_text(b"plain");
        b.push_encoded(Change::Insert, Encoding::Row, None, &[6, 0, 9], None);
        let e = b.rows_as_text().unwrap_err();
        assert_eq!(
            e.to_string(),
            "record 4 of a flat batch: the row ends inside its field at byte 0"
        );
    }

    fn rec(key: Option<&str>, value: &str, ts: Option<i64>) -> Record {
        Record {
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.as_bytes().to_vec(),
            timestamp: ts,
        }
    }

    #[test]
    fn records_round_trip_in_order() {
        let recs = vec![
            rec(Some("k1"), "v1", None),
            rec(None, "", Some(-5)),
            rec(Some(""), "value", Some(3)),
        ];
        let b = Batch::from(recs.clone());
        assert_eq!(b.len(), 3);
        assert_eq!(b.to_records(), recs);
    }

    #[test]
    fn keyed_by_value_stores_the_bytes_once_and_copies_keep_sharing() {
        let mut b = Batch::new();
        b.push_keyed_by_value(b"word", None);
        assert_eq!(b.data_bytes(), 4);
        let mut c = Batch::new();
        c.push_ref(b.get(0));
        assert_eq!(c.data_bytes(), 4);
        assert_eq!(c.get(0).key, Some(&b"word"[..]));
        // A key equal to the value but stored apart is copied apart.
        let mut d = Batch::new();
        d.push(Some(b"word"), b"word", None);
        let mut e = Batch::new();
        e.push_ref(d.get(0));
        assert_eq!(e.data_bytes(), 8);
    }

    #[test]
    fn append_shifts_the_ranges() {
        let mut a = Batch::from(vec![rec(Some("a"), "1", None)]);
        let b = Batch::from(vec![rec(Some("bb"), "22", Some(9)), rec(None, "3", None)]);
        a.append(&b);
        assert_eq!(
            a.to_records(),
            vec![
                rec(Some("a"), "1", None),
                rec(Some("bb"), "22", Some(9)),
                rec(None, "3", None)
            ]
        );
    }

    #[test]
    fn changes_survive_copies_and_truncates_reach_every_part() {
        let mut b = Batch::new();
        b.push_change(Change::Delete, Some(b"x"), b"1", None);
        b.push_change(Change::Truncate, None, b"{}", Some(2));
        b.push_change(Change::UpdateAfter, Some(b"y"), b"3", None);
        let kinds = |b: &Batch| b.iter().map(|r| r.change).collect::<Vec<_>>();
        let mut copy = Batch::new();
        copy.append(&b);
        assert_eq!(copy, b);
        assert_eq!(
            kinds(&b.select(&[2, 0])),
            [Change::UpdateAfter, Change::Delete]
        );
        let parts = b.partition(2, |key| usize::from(key == Some(&b"y"[..])));
        assert_eq!(kinds(&parts[0]), [Change::Delete, Change::Truncate]);
        assert_eq!(kinds(&parts[1]), [Change::Truncate, Change::UpdateAfter]);
    }

    #[test]
    fn partition_keeps_order_within_each_part() {
        let recs: Vec<Record> = (0..10)
            .map(|i| rec(Some(&format!("k{}", i % 3)), &i.to_string(), None))
            .collect();
        let b = Batch::from(recs.clone());
        let parts = b.partition(3, |k| (k.unwrap()[1] - b'0') as usize);
        for (p, part) in parts.iter().enumerate() {
            let want: Vec<Record> = recs
                .iter()
                .filter(|r| (r.key.as_ref().unwrap()[1] - b'0') as usize == p)
                .cloned()
                .collect();
            assert_eq!(part.to_records(), want);
        }
    }

    /// Each part is allocated once at its exact size, and a key shared
    /// with its value stays shared.
    #[test]
    fn partition_sizes_each_part_exactly() {
        let mut b = Batch::new();
        for i in 0..100u8 {
            match i % 3 {
                0 => b.push_keyed_by_value(&[i; 5], None),
                1 => b.push(Some(&[i; 2]), &[i; 7], Some(1)),
                _ => b.push(None, &[i; 3], None),
            }
        }
        let parts = b.partition(3, |k| k.map_or(2, |k| usize::from(k[0] % 2)));
        assert_eq!(parts.iter().map(Batch::len).sum::<usize>(), 100);
        assert_eq!(
            parts.iter().map(Batch::data_bytes).sum::<usize>(),
            b.data_bytes()
        );
        for part in &parts {
            assert_eq!(part.data.capacity(), part.data.len());
            assert_eq!(part.spans.capacity(), part.spans.len());
            for r in part.iter().filter(|r| r.value.len() == 5) {
                assert!(r.key_is_value());
            }
        }
        let routed: Vec<Record> = parts.iter().flat_map(Batch::to_records).collect();
        let mut want = b.to_records();
        want.sort_by_key(|r| r.key.as_ref().map_or(2, |k| usize::from(k[0] % 2)));
        assert_eq!(routed, want);
    }

    #[test]
    fn from_parts_checks_the_spans() {
        let r = |offset, len| Range { offset, len };
        let packed = |spans: &[Span]| spans.iter().flat_map(|s| s.encode()).collect::<Vec<u8>>();
        let span = |key, value| Span {
            key,
            value,
            timestamp: Some(4),
            ..Span::default()
        };
        let ok =
            Batch::from_parts(b"abc".to_vec(), packed(&[span(Some(r(0, 1)), r(1, 2))])).unwrap();
        assert_eq!(ok.get(0).key, Some(&b"a"[..]));
        assert_eq!(ok.get(0).value, b"bc");
        assert_eq!(ok.get(0).timestamp, Some(4));
        let e = Batch::from_parts(
            b"abc".to_vec(),
            packed(&[span(None, r(0, 3)), span(Some(r(2, 2)), r(0, 1))]),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "record 1 of a flat batch points at bytes 2..4 but the batch has 3 bytes"
        );
        assert!(Batch::from_parts(vec![], vec![0; 5]).is_err());
    }
}
