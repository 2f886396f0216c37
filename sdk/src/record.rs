//! Records: helpers on [`Record`], the owned record type of the WIT
//! contract, and [`RecordRef`], a borrowed record (as the records of a
//! [`Batch`](crate::Batch) are read).

use serde::de::{Deserialize, DeserializeSeed};

use crate::error::{Error, Result};
use crate::row::Row;
pub use weir_flat::{Change, Encoding};

/// One record on an edge: optional key, value bytes, optional event time in
/// milliseconds since the Unix epoch.
///
/// ```
/// use weir_sdk::Record;
/// let r = Record::new(r#"{"word":"hi"}"#).with_key("hi");
/// assert_eq!(r.key_str(), Some("hi"));
/// ```
pub use crate::bindings::weir::operator::types::Record;

impl Record {
    /// A record with `value` and no key or timestamp.
    ///
    /// ```
    /// let r = weir_sdk::Record::new("hello");
    /// assert_eq!(r.value, b"hello");
    /// ```
    pub fn new(value: impl Into<Vec<u8>>) -> Self {
        Record {
            key: None,
            value: value.into(),
            timestamp: None,
        }
    }

    /// A record whose value is `value` serialized as JSON.
    ///
    /// ```
    /// let r = weir_sdk::Record::json(&serde_json::json!({"n": 1}));
    /// assert_eq!(r.value_str().unwrap(), r#"{"n":1}"#);
    /// ```
    pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Self {
        Record::new(serde_json::to_vec(value).expect("serializing a value to JSON in memory"))
    }

    /// Sets the key.
    ///
    /// ```
    /// let r = weir_sdk::Record::new("v").with_key("k");
    /// assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
    /// ```
    pub fn with_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets or clears the key.
    ///
    /// ```
    /// let r = weir_sdk::Record::new("v").with_key_opt(None::<Vec<u8>>);
    /// assert!(r.key.is_none());
    /// ```
    pub fn with_key_opt(mut self, key: Option<impl Into<Vec<u8>>>) -> Self {
        self.key = key.map(Into::into);
        self
    }

    /// Sets the event time (milliseconds since the Unix epoch).
    ///
    /// ```
    /// let r = weir_sdk::Record::new("v").with_timestamp(1_700_000_000_000);
    /// assert_eq!(r.timestamp, Some(1_700_000_000_000));
    /// ```
    pub fn with_timestamp(mut self, millis: i64) -> Self {
        self.timestamp = Some(millis);
        self
    }

    /// A borrowed view, as records of a [`Batch`](crate::Batch) are read.
    ///
    /// ```
    /// let r = weir_sdk::Record::new("v").with_key("k");
    /// assert_eq!(r.as_record_ref().key, Some(&b"k"[..]));
    /// ```
    pub fn as_record_ref(&self) -> RecordRef<'_> {
        RecordRef {
            key: self.key.as_deref(),
            value: &self.value,
            timestamp: self.timestamp,
            change: Change::Insert,
            encoding: Encoding::Bytes,
        }
    }

    /// The value as UTF-8, or [`Error::InvalidInput`].
    ///
    /// ```
    /// assert_eq!(weir_sdk::Record::new("ok").value_str().unwrap(), "ok");
    /// assert!(weir_sdk::Record::new(vec![0xff]).value_str().is_err());
    /// ```
    pub fn value_str(&self) -> Result<&str> {
        self.as_record_ref().value_str()
    }

    /// The key as UTF-8, when there is a key and it is UTF-8.
    ///
    /// ```
    /// assert_eq!(weir_sdk::Record::new("v").key_str(), None);
    /// ```
    pub fn key_str(&self) -> Option<&str> {
        self.as_record_ref().key_str()
    }

    /// The value parsed as JSON into `T`, or [`Error::InvalidInput`].
    ///
    /// ```
    /// let v: serde_json::Value = weir_sdk::Record::new(r#"{"a":1}"#).parse_json().unwrap();
    /// assert_eq!(v["a"], 1);
    /// ```
    pub fn parse_json<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        self.as_record_ref().parse_json()
    }
}

/// One record of a [`Batch`](crate::Batch), borrowed: key, value and event
/// time, without copying.
///
/// ```
/// use weir_sdk::{BatchBuf, RecordRef};
/// let mut buf = BatchBuf::new();
/// buf.push(Some(b"k"), b"v", Some(7));
/// let rec: RecordRef<'_> = buf.as_batch().get(0).unwrap();
/// assert_eq!((rec.key, rec.value, rec.timestamp), (Some(&b"k"[..]), &b"v"[..], Some(7)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Partitioning key, if any.
    pub key: Option<&'a [u8]>,
    /// The payload.
    pub value: &'a [u8],
    /// Event time in milliseconds since the Unix epoch, when known.
    pub timestamp: Option<i64>,
    /// What the record does to the row it carries, in a changelog (a
    /// database's changes): an insert in a stream that is no changelog.
    pub change: Change,
    /// How the value is written: bytes (text), or a row of typed fields
    /// ([`row`](RecordRef::row)), which only an operator that reads rows
    /// ([`Operator::READS_ROWS`](crate::Operator::READS_ROWS)) receives.
    pub encoding: Encoding,
}

impl<'a> RecordRef<'a> {
    /// The value as UTF-8, or [`Error::InvalidInput`].
    ///
    /// ```
    /// let r = weir_sdk::Record::new("ok");
    /// assert_eq!(r.as_record_ref().value_str().unwrap(), "ok");
    /// ```
    #[inline]
    pub fn value_str(&self) -> Result<&'a str> {
        self.not_a_row()?;
        std::str::from_utf8(self.value)
            .map_err(|e| Error::InvalidInput(format!("record value is not UTF-8: {e}")))
    }

    /// The value's fields when it is a row, read in place; `None` when it
    /// is text. Only an operator that reads rows
    /// ([`Operator::READS_ROWS`](crate::Operator::READS_ROWS)) gets rows.
    ///
    /// ```
    /// let mut buf = weir_sdk::BatchBuf::new();
    /// buf.push_row_with(None, None, |row| { row.u64("n", 2); });
    /// buf.push(None, br#"{"n":2}"#, None);
    /// let batch = buf.as_batch();
    /// assert_eq!(batch.get(0).unwrap().row().unwrap().u64("n"), Some(2));
    /// assert!(batch.get(1).unwrap().row().is_none());
    /// ```
    #[inline]
    pub fn row(&self) -> Option<Row<'a>> {
        (self.encoding == Encoding::Row).then(|| Row::checked(self.value))
    }

    /// An error for reading a row's bytes as text.
    fn not_a_row(&self) -> Result<()> {
        match self.encoding {
            Encoding::Bytes => Ok(()),
            Encoding::Row => Err(Error::InvalidInput(
                "the record's value is a row of typed fields, not text: read it with `RecordRef::row`".into(),
            )),
        }
    }

    /// The key as UTF-8, when there is a key and it is UTF-8.
    ///
    /// ```
    /// let r = weir_sdk::Record::new("v").with_key(vec![0xff]);
    /// assert_eq!(r.as_record_ref().key_str(), None);
    /// ```
    #[inline]
    pub fn key_str(&self) -> Option<&'a str> {
        self.key.and_then(|k| std::str::from_utf8(k).ok())
    }

    /// The value parsed as JSON into `T`, which may borrow from the record,
    /// or [`Error::InvalidInput`].
    ///
    /// ```
    /// #[derive(serde::Deserialize)]
    /// struct Event<'a> { user: &'a str }
    /// let r = weir_sdk::Record::new(r#"{"user":"ada"}"#);
    /// let e: Event = r.as_record_ref().parse_json().unwrap();
    /// assert_eq!(e.user, "ada");
    /// ```
    pub fn parse_json<T: Deserialize<'a>>(&self) -> Result<T> {
        self.parse_json_seed(std::marker::PhantomData)
    }

    /// The value parsed as JSON by a [`DeserializeSeed`] (to read only the
    /// parts you need, without building the whole document), or
    /// [`Error::InvalidInput`]. The whole value must be one JSON document.
    ///
    /// ```
    /// use std::marker::PhantomData;
    /// let r = weir_sdk::Record::new("[1, 2]");
    /// let v: Vec<u8> = r.as_record_ref().parse_json_seed(PhantomData).unwrap();
    /// assert_eq!(v, [1, 2]);
    /// assert!(weir_sdk::Record::new("[1] x").as_record_ref().parse_json_seed(PhantomData::<Vec<u8>>).is_err());
    /// ```
    pub fn parse_json_seed<S: DeserializeSeed<'a>>(&self, seed: S) -> Result<S::Value> {
        self.not_a_row()?;
        let mut de = serde_json::Deserializer::from_slice(self.value);
        seed.deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
            .map_err(|e| {
                Error::InvalidInput(format!(
                    "record value is not the expected JSON ({e}): {}",
                    String::from_utf8_lossy(&self.value[..self.value.len().min(200)])
                ))
            })
    }

    /// An owned copy (a row as its JSON text: a [`Record`] holds text).
    ///
    /// ```
    /// let r = weir_sdk::Record::new("v").with_key("k");
    /// assert_eq!(r.as_record_ref().to_record(), r);
    /// ```
    pub fn to_record(&self) -> Record {
        Record {
            key: self.key.map(<[u8]>::to_vec),
            value: match self.row() {
                Some(row) => row.to_json(),
                None => self.value.to_vec(),
            },
            timestamp: self.timestamp,
        }
    }
}
