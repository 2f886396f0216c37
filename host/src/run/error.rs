//! Why a run failed: [`RunError`].

use crate::config::JobError;
use crate::failpoint::FailpointError;
use crate::remote::{RemoteError, SyncError};
use crate::store::StoreError;
use crate::threads::TaskError;
use crate::wasm::PluginError;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A plugin could not be loaded.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The job does not fit its plugins (ports).
    #[error(transparent)]
    Job(#[from] JobError),
    /// The checkpoint store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A task failed while running.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// The object store of checkpoints failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The state directory could not be made to match the object store.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// Restoring a checkpoint is not possible.
    #[error("cannot restore checkpoint {id} of job `{job}`: {message}")]
    Restore {
        /// The job.
        job: String,
        /// The checkpoint.
        id: u64,
        /// What is wrong and what to do.
        message: String,
    },
    /// The commit point failed: a checkpoint was not committed (and is
    /// not delivered), or the committed one could not be read.
    #[error("job `{job}`: {message}")]
    CommitPoint {
        /// The job.
        job: String,
        /// What happened.
        message: String,
    },
    /// The job's state moved to another state directory (`--from-savepoint`
    /// with `--state-dir`) and this run names none.
    #[error("job `{job}` was started from savepoint {savepoint} into state directory {to}: resume it with `--state-dir {to}`, or delete {marker} to resume the checkpoints in {default}", marker = marker.display(), to = to.display(), default = default.display())]
    Moved {
        /// The job.
        job: String,
        /// Its default state directory.
        default: std::path::PathBuf,
        /// The file there that records the move.
        marker: std::path::PathBuf,
        /// Where it moved.
        to: std::path::PathBuf,
        /// The savepoint it started from.
        savepoint: String,
    },
    /// Starting from a savepoint is not possible.
    #[error("cannot start job `{job}` from savepoint {}: {message}", dir.display())]
    Savepoint {
        /// The job.
        job: String,
        /// The savepoint directory.
        dir: std::path::PathBuf,
        /// What is wrong and what to do.
        message: String,
    },
    /// The job failed again after its restart strategy's last restart.
    #[error(
        "{error} (gave up after {restarts} restart(s); the state dir keeps the last complete checkpoint: fix the cause and run again to resume)"
    )]
    GaveUp {
        /// Restarts made.
        restarts: u32,
        /// The last failure.
        error: Box<RunError>,
    },
    /// A plugin swap is not possible.
    #[error("{0}")]
    Swap(String),
    /// `WEIR_FAILPOINTS` (test-only) names no failpoint or is malformed.
    #[error(transparent)]
    Failpoints(#[from] FailpointError),
    /// A thread of the job panicked (a host bug).
    #[error("internal error: a job thread panicked ({0}); please report this")]
    Panicked(String),
}
