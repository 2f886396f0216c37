//! [`Record`]: the unit of data on every edge of a dataflow.

/// One record: optional partitioning key, value bytes, optional event time in
/// milliseconds since the Unix epoch. It is the WIT `weir:operator/types.record`
/// and crosses the Wasm boundary without conversion.
///
/// ```
/// let r = weir::Record::new(b"hello".to_vec()).with_key(b"k".to_vec());
/// assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
/// ```
pub use crate::wit::types::Record;

impl Record {
    /// A record with `value`, no key and no timestamp.
    ///
    /// ```
    /// assert!(weir::Record::new(vec![1]).key.is_none());
    /// ```
    pub fn new(value: Vec<u8>) -> Self {
        Record {
            key: None,
            value,
            timestamp: None,
        }
    }

    /// Sets the key.
    ///
    /// ```
    /// assert!(weir::Record::new(vec![]).with_key(vec![1]).key.is_some());
    /// ```
    pub fn with_key(mut self, key: Vec<u8>) -> Self {
        self.key = Some(key);
        self
    }

    /// Bytes this record occupies in memory, roughly: key plus value plus a
    /// fixed overhead. Used for limits and metrics.
    ///
    /// ```
    /// assert_eq!(weir::Record::new(vec![0; 10]).size(), 10 + 32);
    /// ```
    pub fn size(&self) -> usize {
        self.value.len() + self.key.as_ref().map_or(0, Vec::len) + 32
    }
}
