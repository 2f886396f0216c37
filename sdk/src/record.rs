//! Helpers on the record type of the WIT contract.

use crate::{RecordRef, Result};

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
        }
    }

    /// The value as UTF-8, or [`Error::InvalidInput`](crate::Error::InvalidInput).
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

    /// The value parsed as JSON into `T`, or [`Error::InvalidInput`](crate::Error::InvalidInput).
    ///
    /// ```
    /// let v: serde_json::Value = weir_sdk::Record::new(r#"{"a":1}"#).parse_json().unwrap();
    /// assert_eq!(v["a"], 1);
    /// ```
    pub fn parse_json<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        self.as_record_ref().parse_json()
    }
}
