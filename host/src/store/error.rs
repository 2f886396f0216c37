//! The errors of the checkpoint store: [`StoreError`], what callers see
//! (one line, naming the file or directory and saying what to do), and
//! `Fail`, the internal error that lets `?` work on every redb call until
//! [`classify`] gives it context at the API boundary.

use std::path::{Path, PathBuf};

use super::layout::{FILE_NAME, FORMAT_VERSION};

/// Errors of the checkpoint store. Messages are one line, name the file or
/// directory and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state directory holds no store.
    #[error("no checkpoints in {}: it has no {FILE_NAME} (a job creates it when it first runs); pass the state directory of a job that has run, or its job file", dir.display())]
    NotFound {
        /// State directory.
        dir: PathBuf,
    },
    /// The store belongs to another job.
    #[error("{} holds the checkpoints of job `{found}`, not `{expected}`: use another --state-dir for `{expected}`, or delete the directory to discard `{found}`'s checkpoints", dir.display())]
    OtherJob {
        /// State directory.
        dir: PathBuf,
        /// Job recorded in the store.
        found: String,
        /// Job that tried to open it.
        expected: String,
    },
    /// The file is damaged or not a checkpoint store.
    #[error("checkpoint store {} is damaged ({message}): resume from an older checkpoint that does not read the damaged part with `weir run --restore <id>` (`weir checkpoints` lists them), restore the store from a backup, or start from scratch with `weir run --restore none` (which keeps the damaged file beside it)", path.display())]
    Corrupt {
        /// Store file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An I/O error.
    #[error("I/O error on {}: {error} (check permissions and free disk space)", path.display())]
    Io {
        /// File or directory.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// Another process has the store open for writing.
    #[error("checkpoint store {} is in use by another process (another `weir run` using this --state-dir, or a long `weir state` reading it): stop it, or use another --state-dir", path.display())]
    InUse {
        /// Store file.
        path: PathBuf,
    },
    /// The checkpoint does not exist (never completed, garbage-collected or truncated).
    #[error("checkpoint {id} is not in {}: it never completed or is no longer retained; `weir checkpoints` lists the restorable ones", path.display())]
    UnknownCheckpoint {
        /// Store file.
        path: PathBuf,
        /// Requested checkpoint.
        id: u64,
    },
    /// The store was written with a layout this build does not read.
    #[error("checkpoint store {} has format {found:?}, this weir reads formats 2 and {FORMAT_VERSION}: use the weir version that wrote it, or delete {} to start from scratch", path.display(), path.parent().map_or_else(|| path.display().to_string(), |d| d.display().to_string()))]
    UnsupportedFormat {
        /// Store file.
        path: PathBuf,
        /// Format recorded in the store.
        found: String,
    },
    /// An operator's state cannot be redistributed over a new number of
    /// instances.
    #[error("operator `{operator}` cannot change its parallelism: {message}")]
    Rescale {
        /// Operator id.
        operator: String,
        /// Why, and what to do.
        message: String,
    },
    /// A savepoint directory cannot be written or read.
    #[error("savepoint {}: {message}", dir.display())]
    Savepoint {
        /// The savepoint directory.
        dir: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
    /// The caller passed something the store refuses (a bug in the caller).
    #[error("{message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
    /// Any other database error, with the operation that failed.
    #[error("{message}")]
    Db {
        /// Operation, file and error.
        message: String,
    },
}

/// Internal error: a redb error, given context at the API boundary, or a
/// finished [`StoreError`]. Lets `?` work on every redb call.
#[derive(Debug)]
pub(super) enum Fail {
    Redb(redb::Error),
    Store(StoreError),
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(impl From<$t> for Fail {
        fn from(e: $t) -> Self { Fail::Redb(e.into()) }
    })*};
}
from_redb!(
    redb::StorageError,
    redb::TableError,
    redb::TransactionError,
    redb::CommitError
);

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

/// The [`StoreError`] of a failed operation `what` on the store file `path`.
pub(super) fn classify(path: &Path, what: &str, e: Fail) -> StoreError {
    let path = path.to_path_buf();
    match e {
        Fail::Store(e) => e,
        Fail::Redb(redb::Error::Corrupted(message)) => StoreError::Corrupt { path, message },
        Fail::Redb(redb::Error::Io(error)) if error.kind() == std::io::ErrorKind::InvalidData => {
            StoreError::Corrupt {
                path,
                message: error.to_string(),
            }
        }
        Fail::Redb(redb::Error::Io(error)) => StoreError::Io { path, error },
        Fail::Redb(redb::Error::DatabaseAlreadyOpen) => StoreError::InUse { path },
        Fail::Redb(other) => StoreError::Db {
            message: format!(
                "checkpoint store {}: {what} failed: {other} (the last complete checkpoint is unaffected; retry, or report a bug)",
                path.display()
            ),
        },
    }
}

/// A [`StoreError::Invalid`]: the caller passed something the store refuses.
pub(super) fn invalid(message: String) -> StoreError {
    StoreError::Invalid { message }
}
