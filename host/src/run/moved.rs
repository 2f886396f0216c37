//! A job's default state directory remembers that the job moved: after
//! `--from-savepoint` into another `--state-dir`, it holds [`MARKER`], and a
//! later run that names no state directory is refused, instead of silently
//! resuming the checkpoints left there (or starting over beside them).
//! `--restore none` in the default directory starts over there and forgets
//! the move.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::Job;
use crate::run::error::RunError;
use crate::run::options::{RestoreMode, RunOptions};
use crate::time::unix_ms;

/// The marker's file name in the default state directory.
pub(crate) const MARKER: &str = "moved.json";

/// What the marker records.
#[derive(Serialize, Deserialize)]
struct Moved {
    state_dir: String,
    savepoint: String,
    at_ms: u64,
}

/// Refuses a run of `job` without `--state-dir` (in its default state
/// directory) once the job moved; `--restore none` forgets the move.
pub(crate) fn check(job: &Job, options: &RunOptions) -> Result<(), RunError> {
    if options.state_dir.is_some() || options.from_savepoint.is_some() {
        return Ok(());
    }
    let default = &job.checkpoint.dir;
    let marker = default.join(MARKER);
    let Ok(text) = std::fs::read(&marker) else {
        return Ok(());
    };
    if options.restore == RestoreMode::None {
        tracing::info!(
            target: crate::NOTICE,
            "--restore none: job `{}` starts over in {}, forgetting that it moved",
            job.name,
            default.display()
        );
        return std::fs::remove_file(&marker).map_err(|e| moved_error(&marker, e));
    }
    let moved: Moved = serde_json::from_slice(&text)
        .map_err(|e| moved_error(&marker, std::io::Error::other(e)))?;
    Err(RunError::Moved {
        job: job.name.clone(),
        default: default.clone(),
        marker,
        to: moved.state_dir.into(),
        savepoint: moved.savepoint,
    })
}

/// Records in `job`'s default state directory that it moved to
/// `state_dir`, started from `savepoint`; nothing when `state_dir` is the
/// default one.
pub(crate) fn record(job: &Job, state_dir: &Path, savepoint: &Path) -> Result<(), RunError> {
    let default = &job.checkpoint.dir;
    if same_dir(default, state_dir) {
        return Ok(());
    }
    let marker = default.join(MARKER);
    let moved = Moved {
        state_dir: std::path::absolute(state_dir)
            .unwrap_or_else(|_| state_dir.to_path_buf())
            .display()
            .to_string(),
        savepoint: savepoint.display().to_string(),
        at_ms: unix_ms(std::time::SystemTime::now()),
    };
    let text = serde_json::to_vec_pretty(&moved).expect("plain data encodes");
    std::fs::create_dir_all(default)
        .and_then(|()| std::fs::write(&marker, text))
        .map_err(|e| moved_error(&marker, e))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => std::path::absolute(a).ok() == std::path::absolute(b).ok(),
    }
}

fn moved_error(marker: &Path, error: std::io::Error) -> RunError {
    RunError::Store(crate::store::StoreError::Io {
        path: marker.to_path_buf(),
        error,
    })
}
