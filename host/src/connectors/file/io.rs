//! The file sink's I/O thread: the disk work of a checkpoint (early
//! writeback, fsync and rename of a staged epoch, appending epochs to the
//! visible file), done off the data path.
//!
//! The requests run on the sink's [`Worker`](crate::connectors::worker::Worker),
//! one at a time in the order they were sent, so the disk sees the same
//! sequence of operations as if the sink thread did them inline.

use serde_json::Value;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::connectors::sink::{Done, SealEpoch, SinkError};
use crate::failpoint::{self, Failpoint};

/// Disk work of the file sink, done in order on its I/O thread.
pub(super) enum IoRequest {
    /// Write what the file holds so far to the disk (a hint: a failure
    /// resurfaces at the epoch's precommit, which syncs again).
    Writeback { file: File },
    /// Make the epoch written to `open` durable and rename it to `staged`.
    Seal(SealEpoch),
    /// Append the `staged` epochs, in order, to the visible file, make it
    /// durable, then delete them.
    Commit { staged: Vec<PathBuf>, done: Done },
}

/// Does one request of sink `sink`, reporting to its `done` if it has one.
pub(super) fn perform(sink: &str, visible: &Path, request: IoRequest) {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |error| SinkError::Io {
            sink: sink.to_string(),
            path,
            error,
        }
    };
    match request {
        IoRequest::Writeback { file } => {
            if let Err(e) = file.sync_data() {
                tracing::debug!("sink `{sink}`: early writeback failed: {e}");
            }
        }
        IoRequest::Seal(seal) => seal.run(sink),
        IoRequest::Commit { staged, done } if staged.is_empty() => done(Ok(Value::Null)),
        IoRequest::Commit { staged, done } => {
            let append = || -> Result<(), SinkError> {
                let renamed = renamed_into_empty(visible, &staged).map_err(io(visible))?;
                let rest = &staged[usize::from(renamed)..];
                if !rest.is_empty() {
                    let out = OpenOptions::new()
                        .append(true)
                        .open(visible)
                        .map_err(io(visible))?;
                    append_epochs(&out, rest.iter().map(PathBuf::as_path))
                        .map_err(|(path, e)| io(path.unwrap_or(visible))(e))?;
                }
                // Every epoch is visible and durable; the staged files are
                // still there.
                failpoint::hit(Failpoint::SinkAfterDelivery);
                for path in rest {
                    fs::remove_file(path).map_err(io(path))?;
                }
                Ok(())
            };
            done(append().map(|()| Value::Null))
        }
    }
}

/// Appends the files `epochs`, in order, to `out` and makes it durable. An
/// error comes with the epoch file it concerns, or `None` for `out`.
///
/// Each epoch is copied in two halves with failpoint `sink.mid-delivery`
/// between them: a crash there leaves part of an epoch (a torn line,
/// unsynced) at the end of the visible file, which recovery cuts off.
pub(super) fn append_epochs<'a>(
    mut out: &File,
    epochs: impl IntoIterator<Item = &'a Path>,
) -> Result<(), (Option<&'a Path>, std::io::Error)> {
    for path in epochs {
        let mut from = File::open(path).map_err(|e| (Some(path), e))?;
        let half = from.metadata().map_err(|e| (Some(path), e))?.len() / 2;
        if half > 0 {
            std::io::copy(&mut (&mut from).take(half), &mut out).map_err(|e| (None, e))?;
            failpoint::hit(Failpoint::SinkMidDelivery);
        }
        std::io::copy(&mut from, &mut out).map_err(|e| (None, e))?;
    }
    out.sync_all().map_err(|e| (None, e))
}

/// Commits the first of `staged` by renaming it over `visible` when
/// `visible` is an empty regular file: the epoch was made durable when it
/// was sealed, so it need not be copied and synced a second time (a job
/// without periodic checkpoints commits all of its output at once). Returns
/// whether it did.
///
/// A crash before the rename leaves the empty file and the staged epoch,
/// which recovery appends; after it, the file is complete. When the rename
/// fails (another file system, say), the caller appends instead.
fn renamed_into_empty(visible: &Path, staged: &[PathBuf]) -> std::io::Result<bool> {
    let Some(first) = staged.first() else {
        return Ok(false);
    };
    let meta = fs::symlink_metadata(visible)?;
    if !meta.file_type().is_file() || meta.len() != 0 || fs::rename(first, visible).is_err() {
        return Ok(false);
    }
    // The rename itself must survive a power loss before the epoch counts
    // as appended; the staged file's data was synced when it was sealed.
    let dir = visible.parent().filter(|p| !p.as_os_str().is_empty());
    File::open(dir.unwrap_or(Path::new(".")))?.sync_all()?;
    Ok(true)
}
