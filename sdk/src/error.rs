//! The error an operator returns to the host.

/// An error returned from an [`Operator`](crate::Operator) hook. It fails the
/// job's current attempt; its message is shown with the operator's id, so say
/// what is wrong and how to fix it.
///
/// ```
/// let err = weir_sdk::Error::InvalidConfig("`field` is missing".into());
/// assert_eq!(err.to_string(), "invalid config: `field` is missing");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The JSON configuration passed to `open` is invalid.
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// A record could not be processed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Snapshot bytes cannot be read or migrated.
    #[error("incompatible state: {0}")]
    IncompatibleState(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// `Result` with the SDK's [`Error`].
///
/// ```
/// fn check(n: u32) -> weir_sdk::Result<u32> {
///     if n > 0 { Ok(n) } else { Err(weir_sdk::Error::Other("zero".into())) }
/// }
/// assert!(check(0).is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

use crate::bindings::weir::operator::types::Error as WitError;

impl From<Error> for WitError {
    fn from(e: Error) -> Self {
        match e {
            Error::InvalidConfig(m) => WitError::InvalidConfig(m),
            Error::InvalidInput(m) => WitError::InvalidInput(m),
            Error::IncompatibleState(m) => WitError::IncompatibleState(m),
            Error::Other(m) => WitError::Other(m),
        }
    }
}
