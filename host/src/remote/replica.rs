//! [`Replica`]: an attempt's side of the object store, what the driver
//! calls: which packs the store has, and each committed checkpoint turned
//! into an [`Upload`] for the [`Uploader`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crossbeam_channel::Receiver;

use super::{MANIFEST_FORMAT, Manifest, RemoteError, RemoteStore, Upload, Uploader, pack_name};
use crate::store::{CheckpointStore, StoreError};

/// An attempt's copy of its checkpoints to the object store.
pub struct Replica {
    uploader: Uploader,
    /// This attempt's writer id.
    writer: String,
    /// The pack of each version the store holds (as far as this attempt
    /// knows: the restored manifest's and its own).
    packs: BTreeMap<u64, String>,
}

impl Replica {
    /// Starts uploading to `remote`, which holds the packs of `restored`.
    pub fn start(remote: Arc<RemoteStore>, restored: Option<&Manifest>) -> Replica {
        let packs = restored
            .map(|m| {
                (m.packs.iter())
                    .filter_map(|name| Some((super::object_version(name)?, name.clone())))
                    .collect()
            })
            .unwrap_or_default();
        Replica {
            uploader: Uploader::start(remote),
            writer: writer_id(),
            packs,
        }
    }

    /// Queues checkpoint `n`, just committed to `store` (of `state_dir`),
    /// for upload: a pack of every version it reads that the store lacks,
    /// the sinks' staged epochs up to it and the plugins kept for its
    /// swapped operators, its manifest (with the metadata as stored: what
    /// it wrote, its live keys).
    pub fn upload(
        &mut self,
        store: &CheckpointStore,
        n: u64,
        state_dir: &Path,
        retain: usize,
    ) -> Result<(), StoreError> {
        let meta = store.get(n)?.ok_or_else(|| StoreError::Invalid {
            message: format!("checkpoint {n} to upload is not in the local store"),
        })?;
        let versions = store.versions_in_use()?;
        self.packs.retain(|v, _| versions.contains(v));
        let mut new = Vec::new();
        for &v in versions.iter().filter(|&&v| v <= n) {
            if v == n || !self.packs.contains_key(&v) {
                let name = pack_name(v, &self.writer);
                new.push((name.clone(), store.export(v)?));
                self.packs.insert(v, name);
            }
        }
        // The checkpoint's own pack last.
        new.sort_by_key(|(_, p)| p.version);
        let manifest = Manifest {
            format: MANIFEST_FORMAT,
            job: meta.job.clone(),
            id: n,
            writer: self.writer.clone(),
            packs: self
                .packs
                .range(..=n)
                .map(|(_, name)| name.clone())
                .collect(),
            meta,
            catalog: Some(store.catalog(n)?),
            staged: Vec::new(),
        };
        let mut files = staged_files(state_dir, n).map_err(|error| StoreError::Io {
            path: state_dir.join("sinks"),
            error,
        })?;
        // The plugins the state directory keeps for swapped operators: a
        // restore elsewhere runs them.
        let kept: std::collections::BTreeSet<&str> = (manifest.meta.operators.values())
            .filter_map(|o| Some(o.swapped.as_ref()?.copy.as_str()))
            .collect();
        files.extend(
            kept.into_iter()
                .map(|copy| (copy.to_owned(), state_dir.join(copy))),
        );
        self.uploader.send(Upload {
            manifest,
            packs: new,
            files,
            retain,
        });
        Ok(())
    }

    /// Checkpoint ids whose manifest exists, in order, or the error that
    /// ended the uploads.
    pub fn done(&self) -> &Receiver<Result<u64, RemoteError>> {
        self.uploader.done()
    }
}

/// The sealed epochs of checkpoints up to `n` in the sinks' staging
/// folders (`sinks/<id>/<k>.epoch`, `sinks/<id>/<k>.<crc>.staged`): what
/// a sink may still have to deliver after checkpoint `n` is restored.
fn staged_files(state_dir: &Path, n: u64) -> std::io::Result<Vec<(String, std::path::PathBuf)>> {
    let sinks = state_dir.join("sinks");
    let mut files = Vec::new();
    let dirs = match std::fs::read_dir(&sinks) {
        Ok(dirs) => dirs,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(e),
    };
    for dir in dirs {
        let dir = dir?;
        if !dir.file_type()?.is_dir() {
            continue;
        }
        let sink = dir.file_name().to_string_lossy().into_owned();
        for entry in std::fs::read_dir(dir.path())? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let sealed = name.ends_with(".epoch") || name.ends_with(".staged");
            let epoch = name.split('.').next().and_then(|k| k.parse::<u64>().ok());
            if sealed && epoch.is_some_and(|k| k <= n) {
                files.push((format!("sinks/{sink}/{name}"), entry.path()));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// A writer id unique to this attempt: the process, the time, a counter.
fn writer_id() -> String {
    use std::hash::{Hash, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static ATTEMPTS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::process::id().hash(&mut h);
    std::time::SystemTime::now().hash(&mut h);
    ATTEMPTS.fetch_add(1, Ordering::Relaxed).hash(&mut h);
    format!("{:016x}", h.finish())
}
