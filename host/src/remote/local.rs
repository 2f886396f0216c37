//! The state directory made to match the object store before an attempt
//! restores ([`sync_state_dir`]): the newest manifest's checkpoint (or the
//! one `--restore ID` names), reusing the local store when it holds that
//! very checkpoint (the same metadata as the manifest, not only the same
//! id), else rebuilding the directory from the manifest's packs: every
//! checkpoint and recorded epoch of its catalog, and the sinks' staged
//! epochs and kept plugins. [`fetch_checkpoints`] builds the same store
//! into a folder to read, without the staged epochs.

use std::path::{Component, Path};

use super::{Manifest, RemoteError, RemoteStore};
use crate::store::{CheckpointStore, FILE_NAME, StoreError};

/// Why the state directory could not be synced.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The object store failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The local store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `--restore ID` names a checkpoint the object store lacks.
    #[error("checkpoint store {url}: checkpoint {id} has no manifest; it holds {held}")]
    Unknown {
        /// The store's URL.
        url: String,
        /// The checkpoint asked for.
        id: u64,
        /// The ids it holds.
        held: String,
    },
    /// The object store holds no checkpoint to read.
    #[error("checkpoint store {url} holds no complete checkpoint yet (no manifest)")]
    Empty {
        /// The store's URL.
        url: String,
    },
}

/// Makes `state_dir` (of job `job`) hold checkpoint `id` of `remote`, or
/// its newest, and returns that checkpoint's manifest: the local store is
/// kept when it holds the checkpoint, else the directory is rebuilt from
/// the manifest's packs. A store without manifests leaves the directory
/// as it is (`None`).
pub fn sync_state_dir(
    remote: &RemoteStore,
    state_dir: &Path,
    job: &str,
    id: Option<u64>,
) -> Result<Option<Manifest>, SyncError> {
    let Some(manifest) = pick(remote, job, id)? else {
        return Ok(None);
    };
    let id = manifest.id;
    let local = state_dir
        .join(FILE_NAME)
        .exists()
        .then(|| CheckpointStore::open(state_dir, job));
    // Held means the very checkpoint: its metadata as stored (times,
    // offsets, figures) equals the manifest's. A local checkpoint of the
    // same id written by another attempt (its manifest fenced) is not it.
    let held = match local {
        Some(Ok(store)) => store.get(id)?.is_some_and(|meta| meta == manifest.meta),
        // A damaged local copy is rebuilt from the object store.
        Some(Err(StoreError::Corrupt { .. })) | None => false,
        Some(Err(e)) => return Err(e.into()),
    };
    if held {
        tracing::info!(
            "checkpoint {id} of the store {} is in the local store too",
            remote.url()
        );
    } else {
        rebuild(remote, state_dir, job, &manifest)?;
    }
    Ok(Some(manifest))
}

/// Builds checkpoint `id` of `remote` (or its newest) of job `job` into
/// the folder `dir`, which holds no checkpoint store, to read: every
/// checkpoint and recorded epoch its manifest catalogs, and the plugins
/// kept for swapped operators, without the sinks' staged epochs. Returns
/// the manifest.
pub fn fetch_checkpoints(
    remote: &RemoteStore,
    dir: &Path,
    job: &str,
    id: Option<u64>,
) -> Result<Manifest, SyncError> {
    let manifest = pick(remote, job, id)?.ok_or_else(|| SyncError::Empty {
        url: remote.url().to_string(),
    })?;
    get_files(remote, dir, &manifest, is_kept_plugin)?;
    build_store(remote, dir, job, &manifest)?;
    Ok(manifest)
}

/// The manifest of checkpoint `id` of `remote`, or of its newest (`None`
/// when it has none), checked to be job `job`'s.
pub(crate) fn pick(
    remote: &RemoteStore,
    job: &str,
    id: Option<u64>,
) -> Result<Option<Manifest>, SyncError> {
    let ids = remote.manifest_ids()?;
    let id = match id {
        Some(id) if !ids.contains(&id) => {
            let held = match ids.is_empty() {
                true => "none".to_string(),
                false => ids
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            return Err(SyncError::Unknown {
                url: remote.url().to_string(),
                id,
                held,
            });
        }
        Some(id) => id,
        None => match ids.last() {
            Some(&id) => id,
            None => return Ok(None),
        },
    };
    let manifest = remote.manifest(id)?;
    if manifest.job != job {
        return Err(RemoteError::Config {
            url: remote.url().to_string(),
            message: format!(
                "it holds the checkpoints of job `{}`, not `{job}`; give each job its own prefix",
                manifest.job
            ),
        }
        .into());
    }
    Ok(Some(manifest))
}

fn io(path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Replaces the local store, the sinks' staging folders and the kept
/// plugins of `state_dir` with the files `manifest` names and the
/// checkpoints it catalogs, built from its packs. The store is built last,
/// so an interrupted rebuild leaves no checkpoint and is made again.
fn rebuild(
    remote: &RemoteStore,
    state_dir: &Path,
    job: &str,
    manifest: &Manifest,
) -> Result<(), SyncError> {
    for stale in [state_dir.join(FILE_NAME), state_dir.join("sinks")] {
        let removed = match stale.is_dir() {
            true => std::fs::remove_dir_all(&stale),
            false => std::fs::remove_file(&stale),
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&stale, e).into()),
        }
    }
    get_files(remote, state_dir, manifest, |_| true)?;
    build_store(remote, state_dir, job, manifest)
}

/// Downloads the plugins kept for swapped operators that `manifest`
/// names into the state directory `state_dir` (`plugins/<sha256>.wasm`):
/// what loading the job's plugins needs before its checkpoint is rebuilt.
pub fn fetch_kept_plugins(
    remote: &RemoteStore,
    state_dir: &Path,
    manifest: &Manifest,
) -> Result<(), SyncError> {
    get_files(remote, state_dir, manifest, is_kept_plugin)
}

/// Whether a file of the state directory is a kept plugin.
fn is_kept_plugin(path: &str) -> bool {
    path.starts_with("plugins/")
}

/// Downloads the files `manifest` names whose path `wanted` accepts into
/// `dir`, each whole or not at all (a temporary file renamed into place).
fn get_files(
    remote: &RemoteStore,
    dir: &Path,
    manifest: &Manifest,
    wanted: impl Fn(&str) -> bool,
) -> Result<(), SyncError> {
    for staged in manifest.staged.iter().filter(|s| wanted(&s.path)) {
        let path = inside(dir, &staged.path).ok_or_else(|| RemoteError::Damaged {
            url: remote.url().to_string(),
            object: format!("manifests of checkpoint {}", manifest.id),
            message: format!(
                "it names the file {:?}, outside the state directory",
                staged.path
            ),
        })?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        let mut partial = path.clone().into_os_string();
        partial.push(".download");
        let partial = std::path::PathBuf::from(partial);
        remote.get_file(&staged.object, &partial)?;
        std::fs::rename(&partial, &path).map_err(|e| io(&path, e))?;
        // The rename is durable before the store that needs the file is.
        if let Some(parent) = path.parent() {
            let synced = std::fs::File::open(parent).and_then(|d| d.sync_all());
            synced.map_err(|e| io(parent, e))?;
        }
    }
    Ok(())
}

/// Downloads the packs of `manifest` and builds the checkpoints it
/// catalogs into a new store in `dir`.
fn build_store(
    remote: &RemoteStore,
    dir: &Path,
    job: &str,
    manifest: &Manifest,
) -> Result<(), SyncError> {
    let catalog = manifest.catalog();
    tracing::info!(
        "downloading checkpoint {} from {} ({} packs, {} checkpoints)",
        manifest.id,
        remote.url(),
        manifest.packs.len(),
        catalog.checkpoints.len()
    );
    let mut packs = Vec::with_capacity(manifest.packs.len());
    for name in &manifest.packs {
        packs.push(remote.pack(name)?);
    }
    let store = CheckpointStore::open(dir, job)?;
    store.import(&catalog, &packs)?;
    Ok(())
}

/// `name` (a `/`-separated relative path) under `dir`, if it stays there.
fn inside(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    let relative = Path::new(name);
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    (plain && !name.is_empty()).then(|| dir.join(relative))
}
