//! Reading rows: a record's value as named, typed fields
//! ([`RecordRef::row`](crate::RecordRef::row)), for operators that read
//! rows ([`Operator::READS_ROWS`](crate::Operator::READS_ROWS)). The host
//! checks every row before the plugin sees it.

pub use weir_flat::row::Value;

/// The fields of a record's value, read in place.
///
/// ```
/// use weir_sdk::{BatchBuf, row::Value};
/// let mut buf = BatchBuf::new();
/// buf.push_row_with(None, None, |row| {
///     row.str("id", "a1").decimal("amount", "12.50").i64("qty", 3);
/// });
/// let batch = buf.as_batch();
/// let row = batch.get(0).unwrap().row().unwrap();
/// assert_eq!(row.str("id"), Some("a1"));
/// assert_eq!(row.f64("amount"), Some(12.5));
/// assert_eq!(row.get("amount"), Some(Value::Decimal("12.50")));
/// assert_eq!(row.i64("qty"), Some(3));
/// assert_eq!(row.str("qty"), None);
/// assert_eq!(row.to_json(), br#"{"id":"a1","amount":12.50,"qty":3}"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row<'a> {
    bytes: &'a [u8],
}

impl<'a> Row<'a> {
    /// The row in `bytes` (a value in the layout of `weir_flat::row`),
    /// checked.
    ///
    /// ```
    /// assert!(weir_sdk::row::Row::new(&[2, 1, b'b']).is_ok());
    /// assert!(weir_sdk::row::Row::new(&[9]).is_err());
    /// ```
    pub fn new(bytes: &'a [u8]) -> crate::Result<Self> {
        weir_flat::row::check(bytes)
            .map_err(|e| crate::Error::InvalidInput(format!("a malformed row: {e}")))?;
        Ok(Row { bytes })
    }

    /// A row the host checked.
    pub(crate) fn checked(bytes: &'a [u8]) -> Self {
        Row { bytes }
    }

    /// The fields in order, with their names.
    pub fn fields(&self) -> impl Iterator<Item = (&'a str, Value<'a>)> + 'a {
        // Checked: no field is malformed.
        weir_flat::row::fields(self.bytes).map_while(Result::ok)
    }

    /// The value of field `name`: the last one of that name, as JSON
    /// readers take the last of duplicate names.
    pub fn get(&self, name: &str) -> Option<Value<'a>> {
        self.fields()
            .filter(|(n, _)| *n == name)
            .last()
            .map(|(_, v)| v)
    }

    /// Field `name` when it is a string.
    pub fn str(&self, name: &str) -> Option<&'a str> {
        match self.get(name)? {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Field `name` when it is an integer that fits an `i64`.
    pub fn i64(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Value::Int(n) => Some(n),
            Value::Uint(n) => i64::try_from(n).ok(),
            _ => None,
        }
    }

    /// Field `name` when it is an integer that fits a `u64`.
    pub fn u64(&self, name: &str) -> Option<u64> {
        match self.get(name)? {
            Value::Int(n) => u64::try_from(n).ok(),
            Value::Uint(n) => Some(n),
            _ => None,
        }
    }

    /// Field `name` when it is a number of any kind, as the nearest `f64`.
    pub fn f64(&self, name: &str) -> Option<f64> {
        match self.get(name)? {
            Value::Float(x) => Some(x),
            Value::Int(n) => Some(n as f64),
            Value::Uint(n) => Some(n as f64),
            Value::Decimal(text) => text.parse().ok(),
            _ => None,
        }
    }

    /// Field `name` when it is `true` or `false`.
    pub fn bool(&self, name: &str) -> Option<bool> {
        match self.get(name)? {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// Field `name` when it is a decimal: its text, digit for digit.
    pub fn decimal(&self, name: &str) -> Option<&'a str> {
        match self.get(name)? {
            Value::Decimal(text) => Some(text),
            _ => None,
        }
    }

    /// Whether field `name` is there and `null`.
    pub fn is_null(&self, name: &str) -> bool {
        self.get(name) == Some(Value::Null)
    }

    /// The row as the JSON object its readers that want text get.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::new();
        weir_flat::row::write_json(self.bytes, &mut out).expect("a checked row");
        out
    }

    /// The row's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}
