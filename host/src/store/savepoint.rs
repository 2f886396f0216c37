//! Savepoints: one checkpoint written out of the job's state directory as a
//! self-contained, versioned directory (`docs/checkpoints.md`,
//! "Savepoints"):
//!
//! ```text
//! <dir>/savepoint.json     the manifest (Manifest): savepoint format, job, checkpoint id
//! <dir>/checkpoints.redb   a checkpoint store holding exactly that checkpoint,
//!                          every instance as one full segment
//! ```
//!
//! Invariants:
//! - A savepoint directory is complete or absent: it is written under a
//!   temporary name beside its final one, made durable (store commit,
//!   manifest fsync, directory fsync), then renamed.
//! - A savepoint never depends on the state directory it came from: its
//!   store holds the checkpoint's whole state, and it is taken once every
//!   sink committed the checkpoint, so restoring it needs no staged output.
//! - Nothing in a job deletes a savepoint.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::file::CheckpointStore;
use super::layout::FORMAT_VERSION;
use super::meta::CheckpointMeta;
use super::rescale::Move;

/// File name of a savepoint's manifest.
pub const MANIFEST: &str = "savepoint.json";
/// Version of the savepoint directory layout this Weir writes and reads.
pub const SAVEPOINT_FORMAT: u32 = 1;

/// A savepoint's `savepoint.json`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The savepoint layout version ([`SAVEPOINT_FORMAT`]).
    pub format: u32,
    /// The checkpoint store format of its `checkpoints.redb`.
    pub store_format: u32,
    /// The Weir version that wrote it.
    pub weir_version: String,
    /// The job it was taken of.
    pub job: String,
    /// The checkpoint it holds.
    pub checkpoint: u64,
    /// When it was written, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
}

/// An opened savepoint.
#[derive(Debug)]
pub struct Savepoint {
    /// Its directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// Its store (read-only use).
    pub store: CheckpointStore,
    /// The checkpoint it holds.
    pub meta: CheckpointMeta,
}

impl Savepoint {
    /// Opens the savepoint in `dir`, refusing one of another format or one
    /// whose manifest and store disagree.
    pub fn open(dir: &Path) -> Result<Savepoint, StoreError> {
        let bad = |message: String| StoreError::Savepoint {
            dir: dir.to_path_buf(),
            message,
        };
        let path = dir.join(MANIFEST);
        let raw = fs::read(&path).map_err(|e| {
            bad(format!(
                "cannot read {}: {e}; a savepoint directory holds {MANIFEST} and {} (written by `weir savepoint`)",
                path.display(),
                super::FILE_NAME
            ))
        })?;
        let value: serde_json::Value = serde_json::from_slice(&raw)
            .map_err(|e| bad(format!("{MANIFEST} is not JSON: {e}")))?;
        match value.get("format").and_then(serde_json::Value::as_u64) {
            Some(f) if f == u64::from(SAVEPOINT_FORMAT) => {}
            Some(f) => {
                return Err(bad(format!(
                    "it has savepoint format {f}, this weir reads format {SAVEPOINT_FORMAT}: restore it with the weir version that wrote it ({})",
                    value
                        .get("weir_version")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("unknown")
                )));
            }
            None => return Err(bad(format!("{MANIFEST} has no savepoint `format`"))),
        }
        let manifest: Manifest = serde_json::from_value(value)
            .map_err(|e| bad(format!("{MANIFEST} is malformed: {e}")))?;
        let store = CheckpointStore::open_existing(dir)?;
        let meta = store.get(manifest.checkpoint)?.ok_or_else(|| {
            bad(format!(
                "its store does not hold checkpoint {}, which {MANIFEST} names",
                manifest.checkpoint
            ))
        })?;
        if meta.job != manifest.job {
            return Err(bad(format!(
                "{MANIFEST} names job `{}` but its checkpoint is of job `{}`",
                manifest.job, meta.job
            )));
        }
        Ok(Savepoint {
            dir: dir.to_path_buf(),
            manifest,
            store,
            meta,
        })
    }
}

impl CheckpointStore {
    /// Writes checkpoint `id` as a savepoint in `dir`, which must not exist
    /// yet. The caller makes sure every sink committed `id`.
    pub fn write_savepoint(&self, id: u64, dir: &Path) -> Result<Manifest, StoreError> {
        let meta = self.get(id)?.ok_or_else(|| StoreError::UnknownCheckpoint {
            path: self.path.clone(),
            id,
        })?;
        let bad = |message: String| StoreError::Savepoint {
            dir: dir.to_path_buf(),
            message,
        };
        if dir.exists() {
            return Err(bad(
                "it already exists; pass another --out, or move it away".into(),
            ));
        }
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |error| StoreError::Io { path, error }
        };
        let name = dir
            .file_name()
            .ok_or_else(|| bad("it has no file name".into()))?;
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&parent).map_err(io(&parent))?;
        let tmp = parent.join(format!(
            ".{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
        }
        let moves: Vec<Move> = meta
            .operators
            .iter()
            .map(|(op, m)| Move {
                operator: op.clone(),
                from: m.parallelism,
                to: m.parallelism,
            })
            .collect();
        {
            let copy = CheckpointStore::open(&tmp, &meta.job)?;
            copy.derive(Some(self), id, &meta, &moves, 1)?;
        }
        let manifest = Manifest {
            format: SAVEPOINT_FORMAT,
            store_format: FORMAT_VERSION,
            weir_version: env!("CARGO_PKG_VERSION").to_string(),
            job: meta.job.clone(),
            checkpoint: id,
            created_at_ms: crate::time::unix_ms(std::time::SystemTime::now()),
        };
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| bad(format!("cannot encode {MANIFEST}: {e}")))?;
        let path = tmp.join(MANIFEST);
        fs::write(&path, json).map_err(io(&path))?;
        let sync = |p: &Path| fs::File::open(p).and_then(|f| f.sync_all()).map_err(io(p));
        sync(&path)?;
        sync(&tmp)?;
        fs::rename(&tmp, dir).map_err(io(dir))?;
        sync(&parent)?;
        Ok(manifest)
    }
}
