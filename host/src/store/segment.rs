//! Segments: the encoding of one instance's state changes (a *delta*) or of
//! its whole state (a *full* segment) at one checkpoint version.
//!
//! A segment is a header and zero or more chunks, each stored as one redb
//! value. Entries are sorted by key, keys are unique within a segment, and
//! every chunk decodes on its own (its first key is stored whole), so a
//! lookup can skip the chunks that cannot hold the keys it wants. Byte-level
//! layout: `docs/checkpoints.md`, "Segment encoding".
//!
//! Decoding never trusts the bytes: a damaged segment is a [`Damage`] naming
//! what is wrong, never a panic or an out-of-order entry.

use std::cmp::Ordering;
use std::fmt;

/// Whether a segment holds an instance's changes or its whole state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// The changes since the previous segment: values and tombstones.
    Delta,
    /// The whole live state: values only.
    Full,
}

/// The `segments` row of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub kind: Kind,
    /// Number of chunk rows, numbered from 0.
    pub chunks: u32,
    /// Number of entries over all chunks.
    pub entries: u64,
    /// Total bytes of the chunks.
    pub bytes: u64,
}

/// Encoded header length: kind (1), chunks (4), entries (8), bytes (8).
const HEADER_LEN: usize = 21;

impl Header {
    /// `kind, chunks, entries, bytes`, integers little-endian.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0] = match self.kind {
            Kind::Delta => 0,
            Kind::Full => 1,
        };
        out[1..5].copy_from_slice(&self.chunks.to_le_bytes());
        out[5..13].copy_from_slice(&self.entries.to_le_bytes());
        out[13..21].copy_from_slice(&self.bytes.to_le_bytes());
        out
    }

    pub fn decode(raw: &[u8]) -> Result<Header, Damage> {
        let raw: &[u8; HEADER_LEN] = raw.try_into().map_err(|_| {
            Damage(format!(
                "its header is {} bytes, expected {HEADER_LEN}",
                raw.len()
            ))
        })?;
        let kind = match raw[0] {
            0 => Kind::Delta,
            1 => Kind::Full,
            other => return Err(Damage(format!("unknown segment kind {other}"))),
        };
        let le = |at: usize, len: usize| {
            let bytes = raw[at..at + len].iter().rev();
            bytes.fold(0u64, |n, &b| n << 8 | u64::from(b))
        };
        Ok(Header {
            kind,
            chunks: le(1, 4) as u32,
            entries: le(5, 8),
            bytes: le(13, 8),
        })
    }
}

/// What is wrong with a segment's bytes (the store adds which segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Damage(pub String);

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Encodes sorted, unique entries into chunks of about `chunk_bytes` each.
pub(super) struct Encoder {
    chunk_bytes: usize,
    done: Vec<Vec<u8>>,
    current: Vec<u8>,
    previous: Vec<u8>,
    entries: u64,
    bytes: u64,
}

impl Encoder {
    /// A chunk is closed before an entry would take it past `chunk_bytes`;
    /// a single larger entry gets a chunk of its own.
    pub fn new(chunk_bytes: usize) -> Self {
        Encoder {
            chunk_bytes: chunk_bytes.max(1),
            done: Vec::new(),
            current: Vec::new(),
            previous: Vec::new(),
            entries: 0,
            bytes: 0,
        }
    }

    /// Appends an entry; `None` is a tombstone. Keys must be strictly
    /// increasing (the callers sort and deduplicate).
    pub fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(self.entries == 0 || key > self.previous.as_slice());
        let entry_len = |shared: usize| {
            let suffix = key.len() - shared;
            let tag = value.map_or(0, |v| v.len() as u64 + 1);
            varint_len(shared as u64)
                + varint_len(suffix as u64)
                + suffix
                + varint_len(tag)
                + value.map_or(0, <[u8]>::len)
        };
        let mut shared = if self.current.is_empty() {
            0
        } else {
            common_prefix(&self.previous, key)
        };
        if !self.current.is_empty() && self.current.len() + entry_len(shared) > self.chunk_bytes {
            self.close_chunk();
            shared = 0;
        }
        let before = self.current.len();
        put_varint(&mut self.current, shared as u64);
        put_varint(&mut self.current, (key.len() - shared) as u64);
        self.current.extend_from_slice(&key[shared..]);
        match value {
            Some(v) => {
                put_varint(&mut self.current, v.len() as u64 + 1);
                self.current.extend_from_slice(v);
            }
            None => put_varint(&mut self.current, 0),
        }
        self.bytes += (self.current.len() - before) as u64;
        self.entries += 1;
        self.previous.clear();
        self.previous.extend_from_slice(key);
    }

    fn close_chunk(&mut self) {
        let chunk = std::mem::take(&mut self.current);
        self.done.push(chunk);
    }

    /// Encoded bytes so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The header (with `kind`) and the chunks.
    pub fn finish(mut self, kind: Kind) -> (Header, Vec<Vec<u8>>) {
        if !self.current.is_empty() {
            self.close_chunk();
        }
        let header = Header {
            kind,
            chunks: self.done.len() as u32,
            entries: self.entries,
            bytes: self.bytes,
        };
        (header, self.done)
    }
}

fn varint(data: &[u8], pos: &mut usize) -> Result<u64, Damage> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = *data
            .get(*pos)
            .ok_or_else(|| Damage("a length runs past the end of a chunk".into()))?;
        *pos += 1;
        if shift == 63 && byte > 1 {
            return Err(Damage("a length overflows 64 bits".into()));
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
    }
}

fn take<'a>(data: &'a [u8], pos: &mut usize, len: u64) -> Result<&'a [u8], Damage> {
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| pos.checked_add(len))
        .filter(|&end| end <= data.len())
        .ok_or_else(|| {
            Damage(format!(
                "an entry of {len} bytes runs past the end of a chunk"
            ))
        })?;
    let out = &data[*pos..end];
    *pos = end;
    Ok(out)
}

/// Decodes the entry at `*pos` of `chunk`, replacing `key` (the previous
/// key, if `has_previous`) with the entry's key; returns its value (`None`
/// for a tombstone). Checks that keys strictly increase, that a chunk's first
/// key is stored whole (`chunk_start`) and that full segments hold no
/// tombstones.
fn read_entry<'a>(
    chunk: &'a [u8],
    pos: &mut usize,
    key: &mut Vec<u8>,
    has_previous: bool,
    chunk_start: bool,
    kind: Kind,
) -> Result<Option<&'a [u8]>, Damage> {
    let shared = varint(chunk, pos)?;
    let suffix_len = varint(chunk, pos)?;
    let suffix = take(chunk, pos, suffix_len)?;
    let shared = usize::try_from(shared)
        .ok()
        .filter(|&s| s <= key.len() && (s == 0 || !chunk_start))
        .ok_or_else(|| {
            Damage(format!(
                "a key shares {shared} bytes with a {}-byte previous key",
                if chunk_start { 0 } else { key.len() }
            ))
        })?;
    // Equal prefixes up to `shared`, so the order is decided by the rest,
    // in a canonical encoding by its first byte.
    let increasing = match (suffix.first(), key.get(shared)) {
        (Some(next), Some(previous)) if next != previous => next > previous,
        (Some(_), None) => true,
        (None, _) => false,
        (Some(_), Some(_)) => suffix > &key[shared..],
    };
    if has_previous && !increasing {
        return Err(Damage("its keys are not in increasing order".into()));
    }
    key.truncate(shared);
    key.extend_from_slice(suffix);
    match varint(chunk, pos)? {
        0 if kind == Kind::Full => Err(Damage("a full segment holds a tombstone".into())),
        0 => Ok(None),
        tag => take(chunk, pos, tag - 1).map(Some),
    }
}

/// The first key of a chunk (stored whole).
fn first_key(chunk: &[u8]) -> Result<&[u8], Damage> {
    let mut pos = 0;
    if varint(chunk, &mut pos)? != 0 {
        return Err(Damage("a chunk's first key is not stored whole".into()));
    }
    let len = varint(chunk, &mut pos)?;
    take(chunk, &mut pos, len)
}

/// Checks the chunk list against the header: count, total size, no empty chunk.
fn check_chunks(header: &Header, chunks: &[&[u8]]) -> Result<(), Damage> {
    if chunks.len() != header.chunks as usize {
        return Err(Damage(format!(
            "it has {} chunks, its header says {}",
            chunks.len(),
            header.chunks
        )));
    }
    let bytes: u64 = chunks.iter().map(|c| c.len() as u64).sum();
    if bytes != header.bytes {
        return Err(Damage(format!(
            "its chunks hold {bytes} bytes, its header says {}",
            header.bytes
        )));
    }
    if chunks.iter().any(|c| c.is_empty()) {
        return Err(Damage("it has an empty chunk".into()));
    }
    Ok(())
}

/// Reads a segment's entries in key order. Yields keys from an internal
/// buffer (no allocation per entry) and values borrowed from the chunks.
pub(super) struct Decoder<'a> {
    header: Header,
    chunks: &'a [&'a [u8]],
    chunk: usize,
    pos: usize,
    key: Vec<u8>,
    read: u64,
}

impl<'a> Decoder<'a> {
    pub fn new(header: Header, chunks: &'a [&'a [u8]]) -> Result<Self, Damage> {
        check_chunks(&header, chunks)?;
        Ok(Decoder {
            header,
            chunks,
            chunk: 0,
            pos: 0,
            key: Vec::new(),
            read: 0,
        })
    }

    /// An upper bound of the entries left to read, safe to allocate for:
    /// the header's count, at most one entry per 3 bytes (the smallest
    /// entry) actually present.
    pub fn max_entries(&self) -> usize {
        let left = self.header.entries.saturating_sub(self.read);
        left.min(self.header.bytes / 3) as usize
    }

    /// The next entry, or `None` after the last (having checked the entry
    /// count against the header).
    #[allow(clippy::type_complexity)]
    pub fn next(&mut self) -> Result<Option<(&[u8], Option<&'a [u8]>)>, Damage> {
        while self
            .chunks
            .get(self.chunk)
            .is_some_and(|c| self.pos == c.len())
        {
            self.chunk += 1;
            self.pos = 0;
        }
        let Some(&chunk) = self.chunks.get(self.chunk) else {
            if self.read != self.header.entries {
                return Err(Damage(format!(
                    "it has {} entries, its header says {}",
                    self.read, self.header.entries
                )));
            }
            return Ok(None);
        };
        let (has_previous, chunk_start) = (self.read > 0, self.pos == 0);
        let value = read_entry(
            chunk,
            &mut self.pos,
            &mut self.key,
            has_previous,
            chunk_start,
            self.header.kind,
        )?;
        self.read += 1;
        Ok(Some((&self.key, value)))
    }
}

/// Looks up `wanted` (sorted, unique) in a segment: `Some(true)` for a value,
/// `Some(false)` for a tombstone, `None` if the segment does not hold the
/// key. Only chunks whose key range holds a wanted key are decoded.
pub(super) fn find(
    header: Header,
    chunks: &[&[u8]],
    wanted: &[&[u8]],
) -> Result<Vec<Option<bool>>, Damage> {
    check_chunks(&header, chunks)?;
    let firsts = chunks
        .iter()
        .map(|c| first_key(c))
        .collect::<Result<Vec<_>, _>>()?;
    if firsts.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Damage("its chunks are not in key order".into()));
    }
    let mut out = vec![None; wanted.len()];
    let mut w = 0;
    let mut key = Vec::new();
    for (j, chunk) in chunks.iter().enumerate() {
        // Keys of chunk j are in [firsts[j], firsts[j + 1]).
        while w < wanted.len() && wanted[w] < firsts[j] {
            w += 1;
        }
        let below_end = |k: &[u8]| firsts.get(j + 1).is_none_or(|end| k < *end);
        if w == wanted.len() {
            break;
        }
        if !below_end(wanted[w]) {
            continue;
        }
        let mut pos = 0;
        while pos < chunk.len() {
            let start = pos == 0;
            let value = read_entry(chunk, &mut pos, &mut key, !start, start, header.kind)?;
            while w < wanted.len() && wanted[w] < key.as_slice() {
                w += 1;
            }
            if w < wanted.len() && wanted[w] == key.as_slice() {
                out[w] = Some(value.is_some());
                w += 1;
            }
            if w == wanted.len() || !below_end(wanted[w]) {
                break;
            }
        }
        if !below_end(&key) {
            return Err(Damage("its chunks overlap".into()));
        }
    }
    Ok(out)
}

/// Changes that override a full segment: the entries of delta segments and
/// in-memory changes, pushed oldest first, kept in one buffer (no allocation
/// per entry).
#[derive(Debug, Default)]
pub(super) struct Overrides {
    bytes: Vec<u8>,
    entries: Vec<Span>,
}

/// An entry of [`Overrides`]: key at `start`, then the value (if not a tombstone).
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    key_len: usize,
    value_len: Option<usize>,
}

impl Overrides {
    /// Appends one entry; `None` is a tombstone.
    pub fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value.unwrap_or_default());
        self.entries.push(Span {
            start,
            key_len: key.len(),
            value_len: value.map(<[u8]>::len),
        });
    }

    /// Appends every entry of a segment.
    pub fn push_segment(&mut self, mut segment: Decoder<'_>) -> Result<(), Damage> {
        self.entries.reserve(segment.max_entries());
        self.bytes.reserve(segment.header.bytes as usize);
        while let Some((key, value)) = segment.next()? {
            self.push(key, value);
        }
        Ok(())
    }

    /// Sorts by key, keeping of each key only the entry pushed last.
    pub fn settle(&mut self) {
        let bytes = &self.bytes;
        let key = |s: &Span| &bytes[s.start..s.start + s.key_len];
        // Stable, so equal keys stay in push order; each pushed segment is a
        // sorted run, which the sort merges.
        self.entries.sort_by(|a, b| key(a).cmp(key(b)));
        self.entries.dedup_by(|later, kept| {
            let same = key(later) == key(kept);
            if same {
                std::mem::swap(later, kept);
            }
            same
        });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Entry `i`: key and value (`None` for a tombstone).
    fn get(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        let s = self.entries[i];
        let value_start = s.start + s.key_len;
        let value = s
            .value_len
            .map(|len| &self.bytes[value_start..value_start + len]);
        (&self.bytes[s.start..value_start], value)
    }
}

/// Emits, in key order, the live entries of a full segment (if any) with
/// `overrides` (settled) applied over it.
pub(super) fn merge(
    full: Option<Decoder<'_>>,
    overrides: &Overrides,
    mut emit: impl FnMut(&[u8], &[u8]),
) -> Result<(), Damage> {
    let mut over = (0..overrides.len()).map(|i| overrides.get(i)).peekable();
    if let Some(mut full) = full {
        while let Some((key, mut value)) = full.next()? {
            while let Some(&(k, v)) = over.peek() {
                let order = k.cmp(key);
                match order {
                    Ordering::Less => {
                        if let Some(v) = v {
                            emit(k, v);
                        }
                    }
                    Ordering::Equal => value = v,
                    Ordering::Greater => break,
                }
                over.next();
                if order == Ordering::Equal {
                    break;
                }
            }
            if let Some(v) = value {
                emit(key, v);
            }
        }
    }
    for (k, v) in over {
        if let Some(v) = v {
            emit(k, v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(
        chunk_bytes: usize,
        kind: Kind,
        entries: &[(&str, Option<&str>)],
    ) -> (Header, Vec<Vec<u8>>) {
        let mut e = Encoder::new(chunk_bytes);
        for (k, v) in entries {
            e.push(k.as_bytes(), v.map(str::as_bytes));
        }
        e.finish(kind)
    }

    type Entry = (Vec<u8>, Option<Vec<u8>>);

    fn owned(entries: &[(&str, Option<&str>)]) -> Vec<Entry> {
        entries
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec())))
            .collect()
    }

    fn decode(header: Header, chunks: &[&[u8]]) -> Result<Vec<Entry>, Damage> {
        let mut decoder = Decoder::new(header, chunks)?;
        let mut out = Vec::new();
        while let Some((key, value)) = decoder.next()? {
            out.push((key.to_vec(), value.map(<[u8]>::to_vec)));
        }
        Ok(out)
    }

    fn slices(chunks: &[Vec<u8>]) -> Vec<&[u8]> {
        chunks.iter().map(Vec::as_slice).collect()
    }

    const SAMPLE: [(&str, Option<&str>); 6] = [
        ("", Some("empty key")),
        ("apple", Some("1")),
        ("applesauce", None),
        ("apply", Some("")),
        ("b", Some("2")),
        ("banana", None),
    ];

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
            let mut pos = 0;
            assert_eq!(varint(&out, &mut pos), Ok(v));
            assert_eq!(pos, out.len());
        }
        let mut pos = 0;
        assert!(varint(&[0xff; 11], &mut pos).is_err());
        let mut pos = 0;
        assert!(varint(&[0x80], &mut pos).is_err());
    }

    #[test]
    fn entries_round_trip_at_every_chunk_size() {
        for chunk_bytes in [1, 8, 16, 40, 1 << 16] {
            let (header, chunks) = encode(chunk_bytes, Kind::Delta, &SAMPLE);
            assert_eq!(header.entries, 6);
            assert_eq!(header.chunks as usize, chunks.len());
            assert!(
                chunks.iter().all(|c| c.len() <= chunk_bytes.max(16)),
                "{chunks:?}"
            );
            let got = decode(header, &slices(&chunks)).unwrap();
            assert_eq!(got, owned(&SAMPLE), "chunk size {chunk_bytes}");
            assert_eq!(Header::decode(&header.encode()), Ok(header));
        }
        // Prefixes are shared within a chunk: "applesauce" stores "sauce".
        let (header, _) = encode(
            1 << 16,
            Kind::Full,
            &[("apple", Some("")), ("applesauce", Some(""))],
        );
        assert_eq!(header.bytes, (1 + 1 + 5 + 1) + (1 + 1 + 5 + 1));
        let (header, chunks) = encode(1 << 16, Kind::Full, &[]);
        assert_eq!((header.chunks, header.bytes), (0, 0));
        assert!(decode(header, &slices(&chunks)).unwrap().is_empty());
    }

    #[test]
    fn encoding_is_as_documented() {
        // The example of docs/checkpoints.md, "Segment encoding".
        let entries = [("apple", Some("1")), ("applesauce", Some("2")), ("b", None)];
        let (header, chunks) = encode(1 << 16, Kind::Delta, &entries);
        let chunk = [
            &[0x00, 0x05][..],
            b"apple",
            &[0x02, b'1', 0x05, 0x05],
            b"sauce",
            &[0x02, b'2'],
            &[0x00, 0x01, b'b', 0x00],
        ]
        .concat();
        assert_eq!(chunks, [chunk]);
        let mut raw = vec![0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0];
        raw.extend_from_slice(&22u64.to_le_bytes());
        assert_eq!(header.encode()[..], raw[..]);
    }

    #[test]
    fn find_skips_chunks_and_reports_tombstones() {
        for chunk_bytes in [1, 20, 1 << 16] {
            let (header, chunks) = encode(chunk_bytes, Kind::Delta, &SAMPLE);
            let wanted: [&[u8]; 7] = [
                b"",
                b"a",
                b"apple",
                b"applesauce",
                b"apply",
                b"banana",
                b"c",
            ];
            let found = find(header, &slices(&chunks), &wanted).unwrap();
            let want = [
                Some(true),
                None,
                Some(true),
                Some(false),
                Some(true),
                Some(false),
                None,
            ];
            assert_eq!(found, want, "chunk size {chunk_bytes}");
            let found = find(header, &slices(&chunks), &[b"b"]).unwrap();
            assert_eq!(found, [Some(true)]);
        }
    }

    #[test]
    fn merge_applies_newest_change() {
        let (header, chunks) = encode(
            12,
            Kind::Full,
            &[("a", Some("1")), ("c", Some("3")), ("e", Some("5"))],
        );
        let chunks = slices(&chunks);
        let mut over = Overrides::default();
        // Two delta segments, then in-memory changes.
        let (h1, c1) = encode(
            8,
            Kind::Delta,
            &[("a", None), ("b", Some("2")), ("d", Some("4"))],
        );
        let (h2, c2) = encode(
            8,
            Kind::Delta,
            &[("a", Some("10")), ("d", None), ("f", None)],
        );
        over.push_segment(Decoder::new(h1, &slices(&c1)).unwrap())
            .unwrap();
        over.push_segment(Decoder::new(h2, &slices(&c2)).unwrap())
            .unwrap();
        over.push(b"c", None);
        over.push(b"g", Some(b"7"));
        over.settle();
        let settled: Vec<Entry> = (0..over.len())
            .map(|i| over.get(i))
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect();
        let want = [
            ("a", Some("10")),
            ("b", Some("2")),
            ("c", None),
            ("d", None),
            ("f", None),
            ("g", Some("7")),
        ];
        assert_eq!(settled, owned(&want));
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let mut out = Vec::new();
        let full = Decoder::new(header, &chunks).unwrap();
        merge(Some(full), &over, |k, v| {
            out.push(format!("{}={}", text(k), text(v)))
        })
        .unwrap();
        assert_eq!(out, ["a=10", "b=2", "e=5", "g=7"]);
        out.clear();
        merge(None, &over, |k, _| out.push(text(k))).unwrap();
        assert_eq!(out, ["a", "b", "g"]);
    }

    #[test]
    fn damage_is_an_error() {
        let (header, chunks) = encode(20, Kind::Delta, &SAMPLE);
        let ok = slices(&chunks);
        let decode_err = |h: Header, c: &[&[u8]]| decode(h, c).unwrap_err().0;
        // Every truncation and every single-byte change: an error or another
        // valid segment, never a panic.
        for (i, chunk) in chunks.iter().enumerate() {
            for cut in 0..chunk.len() {
                let mut c = ok.clone();
                c[i] = &chunk[..cut];
                let h = Header {
                    bytes: header.bytes - (chunk.len() - cut) as u64,
                    ..header
                };
                let _ = decode(h, &c);
                let _ = find(h, &c, &[b"apple"]);
            }
            for at in 0..chunk.len() {
                for flip in [0x01, 0x80, 0xff] {
                    let mut bad = chunk.clone();
                    bad[at] ^= flip;
                    let mut c = ok.clone();
                    c[i] = &bad;
                    let _ = decode(header, &c);
                    let _ = find(header, &c, &[b"", b"apply", b"b"]);
                }
            }
        }
        assert!(
            decode_err(
                Header {
                    chunks: 9,
                    ..header
                },
                &ok
            )
            .contains("header says 9")
        );
        assert!(
            decode_err(
                Header {
                    entries: 7,
                    ..header
                },
                &ok
            )
            .contains("6 entries")
        );
        assert!(decode_err(Header { bytes: 1, ..header }, &ok).contains("bytes"));
        assert!(
            decode_err(
                Header {
                    kind: Kind::Full,
                    ..header
                },
                &ok
            )
            .contains("tombstone")
        );
        let mut swapped = ok.clone();
        swapped.swap(0, 1);
        assert!(decode_err(header, &swapped).contains("order"));
        assert!(
            find(header, &swapped, &[b"x"])
                .unwrap_err()
                .0
                .contains("order")
        );
        assert!(
            Header::decode(&[1, 2, 3])
                .unwrap_err()
                .0
                .contains("3 bytes")
        );
        let mut raw = header.encode();
        raw[0] = 9;
        assert!(Header::decode(&raw).unwrap_err().0.contains("kind 9"));
    }
}
