//! Decoding of the `pgoutput` logical replication plugin's messages,
//! protocol version 1: one XLogData payload in, one owned [`Message`] out.
//! No I/O and no state: relations and types are reported as they come and
//! are the caller's to remember.
//!
//! Invariants of [`decode`]:
//! - every integer is read big-endian at the width the protocol gives it;
//! - every string is NUL-terminated UTF-8; a string without its NUL or one
//!   that is not UTF-8 is an error, never a lossy conversion;
//! - the whole payload is consumed: a message that ends early
//!   ([`Defect::Truncated`]) or has bytes left over
//!   ([`Defect::TrailingBytes`]) is an error;
//! - a count or length read from the payload is never trusted for an
//!   allocation beyond the bytes actually present, and a negative one is an
//!   error, so malformed input yields an error and never a panic.

use thiserror::Error;

/// Microseconds from the Unix epoch (1970-01-01) to PostgreSQL's epoch
/// (2000-01-01), the origin of every timestamp in the protocol.
pub const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// Milliseconds since the Unix epoch of a protocol timestamp
/// (`pg_micros` microseconds since 2000-01-01), rounded towards negative
/// infinity. Never overflows: the epoch offset is a whole number of
/// milliseconds, so it is added after the division.
pub fn unix_millis(pg_micros: i64) -> i64 {
    pg_micros.div_euclid(1000) + PG_EPOCH_MICROS / 1000
}

/// One decoded `pgoutput` message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::enum_variant_names, reason = "the protocol's names")]
pub enum Message {
    /// `B`: a transaction starts.
    Begin {
        /// LSN of the transaction's commit record.
        final_lsn: u64,
        /// Commit time, microseconds since 2000-01-01 (see [`unix_millis`]).
        commit_time: i64,
        /// Transaction id.
        xid: u32,
    },
    /// `C`: the transaction started by the last `Begin` commits.
    Commit {
        /// Flags (currently always 0).
        flags: u8,
        /// LSN of the commit record.
        commit_lsn: u64,
        /// LSN just past the commit record: where to confirm up to.
        end_lsn: u64,
        /// Commit time, microseconds since 2000-01-01.
        commit_time: i64,
    },
    /// `O`: the transaction came from another node through replication.
    Origin {
        /// LSN of the commit on the origin server.
        lsn: u64,
        /// Name of the origin.
        name: String,
    },
    /// `R`: a table's description, sent before its first row change in a
    /// session and again whenever it changes.
    Relation(Relation),
    /// `Y`: a non-built-in type used by a following relation.
    Type {
        /// The type's OID.
        id: u32,
        /// Its schema (empty for `pg_catalog`).
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `I`: a row was inserted.
    Insert {
        /// OID of the relation (as in a previous `Relation`).
        relation: u32,
        /// The new row.
        new: Tuple,
    },
    /// `U`: a row was updated.
    Update {
        /// OID of the relation.
        relation: u32,
        /// The old key or row, present when the key changed or the
        /// relation's replica identity is `FULL`.
        old: Option<OldTuple>,
        /// The new row.
        new: Tuple,
    },
    /// `D`: a row was deleted.
    Delete {
        /// OID of the relation.
        relation: u32,
        /// The deleted row's key or, for replica identity `FULL`, the row.
        old: OldTuple,
    },
    /// `T`: relations were truncated.
    Truncate {
        /// OIDs of the truncated relations.
        relations: Vec<u32>,
        /// `TRUNCATE ... CASCADE`.
        cascade: bool,
        /// `TRUNCATE ... RESTART IDENTITY`.
        restart_identity: bool,
    },
    /// `M`: a message written with `pg_logical_emit_message`.
    LogicalMessage {
        /// Whether it was emitted as part of a transaction.
        transactional: bool,
        /// LSN of the message.
        lsn: u64,
        /// The prefix it was emitted with.
        prefix: String,
        /// Its content, as emitted.
        content: Vec<u8>,
    },
}

/// A table's description from a `Relation` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// The relation's OID, which row messages refer to.
    pub id: u32,
    /// Its schema (empty for `pg_catalog`).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Which old values its updates and deletes carry.
    pub replica_identity: ReplicaIdentity,
    /// Its columns, in the order row tuples list their values.
    pub columns: Vec<Column>,
}

/// A relation's `REPLICA IDENTITY` (`pg_class.relreplident`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaIdentity {
    /// `d`: the primary key.
    Default,
    /// `n`: nothing.
    Nothing,
    /// `f`: every column.
    Full,
    /// `i`: the columns of a chosen unique index.
    Index,
}

/// One column of a [`Relation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Whether the column is part of the replica identity key.
    pub key: bool,
    /// The column's name.
    pub name: String,
    /// OID of its type.
    pub type_oid: u32,
    /// Its type modifier (`atttypmod`, -1 for none).
    pub type_modifier: i32,
}

/// A row's values, one per column of its relation, in column order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuple(pub Vec<Datum>);

/// One column's value in a [`Tuple`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datum {
    /// `n`: SQL NULL.
    Null,
    /// `u`: a TOASTed value the update left unchanged and did not send.
    UnchangedToast,
    /// `t`: the value in the type's text format.
    Text(String),
    /// `b`: the value in the type's binary format.
    Binary(Vec<u8>),
}

/// The old values an `Update` or `Delete` carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldTuple {
    /// `K`: only the replica identity key's columns are set; the others
    /// are `Null`.
    Key(Tuple),
    /// `O`: the whole old row (replica identity `FULL`).
    Full(Tuple),
}

/// Why a payload is not a valid `pgoutput` protocol version 1 message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The payload has no bytes at all.
    #[error("empty pgoutput message: expected a message tag")]
    Empty,
    /// The first byte names no protocol version 1 message.
    #[error(
        "unknown pgoutput message tag {0:?}: only protocol version 1 is supported \
         (start replication with proto_version '1' and streaming off)"
    )]
    UnknownTag(char),
    /// A message of a known kind is malformed.
    #[error("malformed pgoutput {message} message at byte {offset}: {defect}")]
    Malformed {
        /// The kind of message (`Insert`, `Relation`, ...).
        message: &'static str,
        /// Offset in the payload of the field that is wrong.
        offset: usize,
        /// What is wrong with it.
        defect: Defect,
    },
}

/// What is wrong with a field of a [`DecodeError::Malformed`] message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Defect {
    /// The payload ends before a field of this many bytes.
    #[error("the message ends before a {0}-byte field")]
    Truncated(usize),
    /// A string runs to the end of the payload without its NUL.
    #[error("string without a terminating NUL")]
    UnterminatedString,
    /// A string or text value is not UTF-8.
    #[error("text is not UTF-8 (the database's encoding must be UTF8)")]
    NotUtf8,
    /// A count or length (named) is negative.
    #[error("negative {0} {1}")]
    Negative(&'static str, i64),
    /// A marker byte is none of those the protocol allows (described).
    #[error("expected {0}, found {1:?}")]
    UnexpectedByte(&'static str, char),
    /// This many bytes are left after a complete message.
    #[error("{0} bytes after the end of the message")]
    TrailingBytes(usize),
}

/// Decodes one `pgoutput` (protocol version 1) message from an XLogData
/// payload, which must hold exactly that message.
pub fn decode(data: &[u8]) -> Result<Message, DecodeError> {
    let (&tag, _) = data.split_first().ok_or(DecodeError::Empty)?;
    let message = kind_name(tag).ok_or(DecodeError::UnknownTag(char::from(tag)))?;
    let mut r = Reader {
        data,
        pos: 1,
        message,
    };
    let decoded = match tag {
        b'B' => Message::Begin {
            final_lsn: r.read()?,
            commit_time: r.read()?,
            xid: r.read()?,
        },
        b'C' => Message::Commit {
            flags: r.read()?,
            commit_lsn: r.read()?,
            end_lsn: r.read()?,
            commit_time: r.read()?,
        },
        b'O' => Message::Origin {
            lsn: r.read()?,
            name: r.string()?,
        },
        b'R' => Message::Relation(r.relation()?),
        b'Y' => Message::Type {
            id: r.read()?,
            namespace: r.string()?,
            name: r.string()?,
        },
        b'I' => r.insert()?,
        b'U' => r.update()?,
        b'D' => r.delete()?,
        b'T' => r.truncate()?,
        _ => r.logical_message()?,
    };
    match r.remaining() {
        0 => Ok(decoded),
        n => Err(r.malformed(r.pos, Defect::TrailingBytes(n))),
    }
}

/// The name of the message kind a tag introduces, `None` for a tag that is
/// not a protocol version 1 message.
fn kind_name(tag: u8) -> Option<&'static str> {
    Some(match tag {
        b'B' => "Begin",
        b'C' => "Commit",
        b'O' => "Origin",
        b'R' => "Relation",
        b'Y' => "Type",
        b'I' => "Insert",
        b'U' => "Update",
        b'D' => "Delete",
        b'T' => "Truncate",
        b'M' => "Message",
        _ => return None,
    })
}

/// A fixed-width big-endian integer field.
trait Field: Sized {
    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

macro_rules! big_endian_fields {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok(<$t>::from_be_bytes(r.array()?))
            }
        }
    )*};
}

big_endian_fields!(u8, i16, u32, i32, u64, i64);

/// A cursor over one payload; `pos` never exceeds `data.len()`.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    message: &'static str,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn malformed(&self, offset: usize, defect: Defect) -> DecodeError {
        DecodeError::Malformed {
            message: self.message,
            offset,
            defect,
        }
    }

    /// The next `n` bytes, consumed.
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.malformed(self.pos, Defect::Truncated(n)));
        }
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    /// The next `N` bytes, consumed.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn read<T: Field>(&mut self) -> Result<T, DecodeError> {
        T::read(self)
    }

    /// A count or length (an `Int16` or `Int32`) that must not be negative.
    fn count<T: Field + Into<i64>>(&mut self, field: &'static str) -> Result<usize, DecodeError> {
        let at = self.pos;
        let value: i64 = self.read::<T>()?.into();
        usize::try_from(value).map_err(|_| self.malformed(at, Defect::Negative(field, value)))
    }

    /// A NUL-terminated UTF-8 string; the NUL is consumed, not returned.
    fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.pos;
        let len = self.data[at..]
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.malformed(at, Defect::UnterminatedString))?;
        let bytes = self.take(len + 1)?;
        self.utf8(&bytes[..len], at)
    }

    fn utf8(&self, bytes: &[u8], at: usize) -> Result<String, DecodeError> {
        String::from_utf8(bytes.to_vec()).map_err(|_| self.malformed(at, Defect::NotUtf8))
    }

    /// A marker byte, which `pick` maps to a value; `expected` describes
    /// the bytes it accepts.
    fn marker<T>(
        &mut self,
        expected: &'static str,
        pick: impl FnOnce(u8) -> Option<T>,
    ) -> Result<T, DecodeError> {
        let at = self.pos;
        let byte: u8 = self.read()?;
        pick(byte).ok_or_else(|| self.malformed(at, Defect::UnexpectedByte(expected, byte.into())))
    }

    fn relation(&mut self) -> Result<Relation, DecodeError> {
        let id = self.read()?;
        let namespace = self.string()?;
        let name = self.string()?;
        let replica_identity = self.marker("'d', 'n', 'f' or 'i'", |b| match b {
            b'd' => Some(ReplicaIdentity::Default),
            b'n' => Some(ReplicaIdentity::Nothing),
            b'f' => Some(ReplicaIdentity::Full),
            b'i' => Some(ReplicaIdentity::Index),
            _ => None,
        })?;
        let n = self.count::<i16>("column count")?;
        // A column takes at least 10 bytes: the allocation stays within
        // what the payload can hold.
        let mut columns = Vec::with_capacity(n.min(self.remaining() / 10));
        for _ in 0..n {
            columns.push(Column {
                key: self.read::<u8>()? & 1 != 0,
                name: self.string()?,
                type_oid: self.read()?,
                type_modifier: self.read()?,
            });
        }
        Ok(Relation {
            id,
            namespace,
            name,
            replica_identity,
            columns,
        })
    }

    fn tuple(&mut self) -> Result<Tuple, DecodeError> {
        let n = self.count::<i16>("tuple column count")?;
        // A value takes at least one byte.
        let mut values = Vec::with_capacity(n.min(self.remaining()));
        for _ in 0..n {
            let kind = self.marker("'n', 'u', 't' or 'b'", |b| {
                matches!(b, b'n' | b'u' | b't' | b'b').then_some(b)
            })?;
            values.push(match kind {
                b'n' => Datum::Null,
                b'u' => Datum::UnchangedToast,
                b't' => {
                    let at = self.pos + 4;
                    let bytes = self.value_bytes()?;
                    Datum::Text(self.utf8(bytes, at)?)
                }
                _ => Datum::Binary(self.value_bytes()?.to_vec()),
            });
        }
        Ok(Tuple(values))
    }

    /// A value's bytes, after their `Int32` length.
    fn value_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.count::<i32>("value length")?;
        self.take(len)
    }

    /// A tuple after its `N` marker.
    fn new_tuple(&mut self) -> Result<Tuple, DecodeError> {
        self.marker("'N'", |b| (b == b'N').then_some(()))?;
        self.tuple()
    }

    /// An old tuple, after its marker (`K` or `O`) was read as `marker`.
    fn old_tuple(&mut self, marker: u8) -> Result<OldTuple, DecodeError> {
        let tuple = self.tuple()?;
        Ok(match marker {
            b'K' => OldTuple::Key(tuple),
            _ => OldTuple::Full(tuple),
        })
    }

    fn insert(&mut self) -> Result<Message, DecodeError> {
        let relation = self.read()?;
        let new = self.new_tuple()?;
        Ok(Message::Insert { relation, new })
    }

    fn update(&mut self) -> Result<Message, DecodeError> {
        let relation = self.read()?;
        let marker = self.marker("'K', 'O' or 'N'", |b| {
            matches!(b, b'K' | b'O' | b'N').then_some(b)
        })?;
        let (old, new) = match marker {
            b'N' => (None, self.tuple()?),
            _ => (Some(self.old_tuple(marker)?), self.new_tuple()?),
        };
        Ok(Message::Update { relation, old, new })
    }

    fn delete(&mut self) -> Result<Message, DecodeError> {
        let relation = self.read()?;
        let marker = self.marker("'K' or 'O'", |b| matches!(b, b'K' | b'O').then_some(b))?;
        let old = self.old_tuple(marker)?;
        Ok(Message::Delete { relation, old })
    }

    fn truncate(&mut self) -> Result<Message, DecodeError> {
        let n = self.count::<i32>("relation count")?;
        let options: u8 = self.read()?;
        let mut relations = Vec::with_capacity(n.min(self.remaining() / 4));
        for _ in 0..n {
            relations.push(self.read()?);
        }
        Ok(Message::Truncate {
            relations,
            cascade: options & 1 != 0,
            restart_identity: options & 2 != 0,
        })
    }

    fn logical_message(&mut self) -> Result<Message, DecodeError> {
        let transactional = self.read::<u8>()? & 1 != 0;
        let lsn = self.read()?;
        let prefix = self.string()?;
        let len = self.count::<i32>("content length")?;
        let content = self.take(len)?.to_vec();
        Ok(Message::LogicalMessage {
            transactional,
            lsn,
            prefix,
            content,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes a payload field by field from space-separated `kind:value`
    /// tokens: `c:` raw ASCII, `x:` hex bytes, `s:` NUL-terminated string,
    /// `t:` text column value, or a big-endian integer (`u8:`, `i16:`,
    /// `i32:`, `u32:`, `u64:`, `i64:`). `ROW` and `KEY` stand for tuples.
    fn p(spec: &str) -> Vec<u8> {
        let spec = spec.replace("ROW", "i16:4 t:42 c:nub i32:2 x:00ff");
        let spec = spec.replace("KEY", "i16:1 t:7");
        let mut out = Vec::new();
        for token in spec.split(' ') {
            let (kind, value) = token.split_once(':').expect("kind:value");
            let int = || value.parse::<i128>().expect("an integer");
            let hex = |pair| u8::from_str_radix(pair, 16).expect("hex");
            match kind {
                "c" => out.extend(value.bytes()),
                "x" => out.extend((0..value.len()).step_by(2).map(|i| hex(&value[i..i + 2]))),
                "s" => out.extend(value.bytes().chain([0])),
                "t" => out.extend(p(&format!("c:t i32:{} c:{value}", value.len()))),
                "u8" => out.push(int() as u8),
                "i16" => out.extend((int() as i16).to_be_bytes()),
                "i32" => out.extend((int() as i32).to_be_bytes()),
                "u32" => out.extend((int() as u32).to_be_bytes()),
                "u64" => out.extend((int() as u64).to_be_bytes()),
                "i64" => out.extend((int() as i64).to_be_bytes()),
                _ => panic!("unknown field kind {kind}"),
            }
        }
        out
    }

    /// Checks that each `spec => debug` case decodes to the message whose
    /// `{:?}` is `debug`, with `ROW` and `KEY` standing for the tuples of [`p`].
    fn check(cases: &[&str]) {
        let row = r#"Tuple([Text("42"), Null, UnchangedToast, Binary([0, 255])])"#;
        let key = r#"Tuple([Text("7")])"#;
        for case in cases {
            let (spec, want) = case.split_once(" => ").expect("spec => debug");
            let want = format!("Ok({})", want.replace("ROW", row).replace("KEY", key));
            assert_eq!(format!("{:?}", decode(&p(spec))), want, "{spec}");
        }
    }

    #[test]
    fn transaction_messages() {
        check(&[
            "c:B u64:97500000000 i64:-5 u32:771 => \
             Begin { final_lsn: 97500000000, commit_time: -5, xid: 771 }",
            "c:C u8:0 u64:10 u64:20 i64:30 => \
             Commit { flags: 0, commit_lsn: 10, end_lsn: 20, commit_time: 30 }",
            "c:O u64:18446744073709551615 s:nöde => \
             Origin { lsn: 18446744073709551615, name: \"nöde\" }",
            "c:Y u32:16385 s:public s:mood => \
             Type { id: 16385, namespace: \"public\", name: \"mood\" }",
            "c:M u8:1 u64:99 s:weir i32:3 x:010002 => \
             LogicalMessage { transactional: true, lsn: 99, prefix: \"weir\", content: [1, 0, 2] }",
            "c:M u8:0 u64:1 s: i32:0 => \
             LogicalMessage { transactional: false, lsn: 1, prefix: \"\", content: [] }",
        ]);
    }

    #[test]
    fn relations() {
        check(&["c:R u32:16390 s: s:t c:f i16:2 \
             u8:1 s:id u32:23 i32:-1 u8:0 s:name u32:1043 i32:68 => \
             Relation(Relation { id: 16390, namespace: \"\", name: \"t\", replica_identity: Full, \
             columns: [Column { key: true, name: \"id\", type_oid: 23, type_modifier: -1 }, \
             Column { key: false, name: \"name\", type_oid: 1043, type_modifier: 68 }] })"]);
        use ReplicaIdentity as RI;
        for (byte, identity) in [('d', RI::Default), ('n', RI::Nothing), ('i', RI::Index)] {
            let spec = format!("c:R u32:1 s:s s:t c:{byte} i16:0");
            let Ok(Message::Relation(r)) = decode(&p(&spec)) else {
                panic!("{spec}")
            };
            assert_eq!(r.replica_identity, identity);
        }
    }

    #[test]
    fn row_changes_and_truncate() {
        check(&[
            "c:I u32:9 c:N ROW => Insert { relation: 9, new: ROW }",
            r#"c:I u32:9 c:N i16:1 t: => Insert { relation: 9, new: Tuple([Text("")]) }"#,
            "c:U u32:9 c:N ROW => Update { relation: 9, old: None, new: ROW }",
            "c:U u32:9 c:K KEY c:N ROW => Update { relation: 9, old: Some(Key(KEY)), new: ROW }",
            "c:U u32:9 c:O ROW c:N ROW => Update { relation: 9, old: Some(Full(ROW)), new: ROW }",
            "c:D u32:9 c:K KEY => Delete { relation: 9, old: Key(KEY) }",
            "c:D u32:9 c:O ROW => Delete { relation: 9, old: Full(ROW) }",
            "c:T i32:2 u8:0 u32:5 u32:6 => \
             Truncate { relations: [5, 6], cascade: false, restart_identity: false }",
            "c:T i32:1 u8:1 u32:5 => \
             Truncate { relations: [5], cascade: true, restart_identity: false }",
            "c:T i32:1 u8:2 u32:5 => \
             Truncate { relations: [5], cascade: false, restart_identity: true }",
            "c:T i32:0 u8:3 => Truncate { relations: [], cascade: true, restart_identity: true }",
        ]);
    }

    #[test]
    fn unknown_tags_and_empty() {
        assert_eq!(decode(&[]), Err(DecodeError::Empty));
        for tag in [b'S', b'E', b'c', b'A', b'x', 0xC3] {
            let want = Err(DecodeError::UnknownTag(char::from(tag)));
            assert_eq!(decode(&[tag]), want);
        }
        let message = DecodeError::UnknownTag('S').to_string();
        assert!(message.starts_with("unknown pgoutput message tag 'S'"));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let update = p("c:U u32:9 c:K KEY c:N ROW");
        let relation = p("c:R u32:1 s:s s:t c:d i16:1 u8:1 s:id u32:23 i32:-1");
        for full in [update, relation] {
            for len in 1..full.len() {
                assert!(decode(&full[..len]).is_err(), "{len}-byte prefix");
            }
        }
        let message = decode(&p("c:B u64:1 i64:2")).map_err(|e| e.to_string());
        let want = "malformed pgoutput Begin message at byte 17: \
                    the message ends before a 4-byte field";
        assert_eq!(message, Err(want.into()));
    }

    #[test]
    fn malformed_fields() {
        let cases = [
            "c:C u8:0 u64:1 u64:2 i64:3 c:! => Commit 26 TrailingBytes(1)",
            r#"c:I u32:1 c:N i16:-1 => Insert 6 Negative("tuple column count", -1)"#,
            r#"c:I u32:1 c:N i16:1 c:t i32:-3 => Insert 9 Negative("value length", -3)"#,
            r#"c:T i32:-2 u8:0 => Truncate 1 Negative("relation count", -2)"#,
            r#"c:R u32:1 s:s s:t c:d i16:-1 => Relation 10 Negative("column count", -1)"#,
            r#"c:M u8:0 u64:1 s: i32:-1 => Message 11 Negative("content length", -1)"#,
            r#"c:I u32:1 c:N i16:1 c:x => Insert 8 UnexpectedByte("'n', 'u', 't' or 'b'", 'x')"#,
            r#"c:I u32:1 c:K i16:0 => Insert 5 UnexpectedByte("'N'", 'K')"#,
            r#"c:D u32:1 c:N i16:0 => Delete 5 UnexpectedByte("'K' or 'O'", 'N')"#,
            r#"c:U u32:1 c:K i16:0 c:K => Update 8 UnexpectedByte("'N'", 'K')"#,
            r#"c:U u32:1 c:X i16:0 => Update 5 UnexpectedByte("'K', 'O' or 'N'", 'X')"#,
            "c:R u32:1 s:s s:t c:z i16:0 => \
             Relation 9 UnexpectedByte(\"'d', 'n', 'f' or 'i'\", 'z')",
            "c:O u64:1 c:abc => Origin 9 UnterminatedString",
            "c:O u64:1 x:fffe00 => Origin 9 NotUtf8",
            "c:I u32:1 c:N i16:1 c:t i32:1 x:80 => Insert 13 NotUtf8",
            "c:I u32:1 c:N i16:32767 => Insert 8 Truncated(1)",
            "c:M u8:0 u64:1 s: i32:5 x:00 => Message 15 Truncated(5)",
            "c:B u64:1 i64:2 => Begin 17 Truncated(4)",
        ];
        for case in cases {
            let (spec, want) = case.split_once(" => ").expect("spec => error");
            let Err(DecodeError::Malformed {
                message,
                offset,
                defect,
            }) = decode(&p(spec))
            else {
                panic!("{spec} is not malformed");
            };
            assert_eq!(format!("{message} {offset} {defect:?}"), want, "{spec}");
        }
    }

    #[test]
    fn timestamps() {
        assert_eq!(unix_millis(0), 946_684_800_000);
        assert_eq!(unix_millis(1_999), 946_684_800_001);
        assert_eq!(unix_millis(-1), 946_684_799_999);
        assert_eq!(unix_millis(-PG_EPOCH_MICROS), 0);
        assert_eq!(unix_millis(i64::MAX), i64::MAX / 1000 + 946_684_800_000);
        let min = i64::MIN.div_euclid(1000) + 946_684_800_000;
        assert_eq!(unix_millis(i64::MIN), min);
    }
}
