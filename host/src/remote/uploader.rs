//! The uploader: the thread that copies each checkpoint to the object
//! store (its packs, then its manifest) off the coordinator's thread, and
//! says when one is in the store.
//!
//! Invariants:
//! - Uploads are done in the order sent; the answer for checkpoint *n*
//!   comes after its manifest exists (or with the error that stops it).
//! - A transient failure (the store unreachable, timing out, failing
//!   inside) is retried with a growing pause, up to 5 s, for as long as it
//!   lasts: the checkpoint waits, records keep flowing. Anything else, and
//!   a manifest another writer created first, ends the upload with the
//!   error.
//! - Garbage collection runs after a manifest is created, by its writer;
//!   its failures are logged and left to the next checkpoint.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::{Manifest, RemoteError, RemoteStore, Staged};
use crate::store::Pack;

/// One checkpoint to copy.
#[derive(Debug)]
pub struct Upload {
    /// Its manifest, naming every pack it reads.
    pub manifest: Manifest,
    /// The packs the store lacks, by name; the checkpoint's own is last.
    pub packs: Vec<(String, Pack)>,
    /// The files of the state directory a restore needs (the sinks'
    /// staged epochs to deliver, the plugins kept for swapped operators):
    /// path relative to the state directory, and on disk. Each is copied
    /// once (streamed), then named by the manifests that need it; a staged
    /// epoch that is gone was delivered.
    pub files: Vec<(String, PathBuf)>,
    /// Manifests the store keeps.
    pub retain: usize,
}

/// The uploader thread of an attempt; stopped when dropped.
pub struct Uploader {
    uploads: Option<Sender<Upload>>,
    done: Receiver<Result<u64, RemoteError>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Uploader {
    /// Starts the thread, uploading to `remote`.
    pub fn start(remote: Arc<RemoteStore>) -> Uploader {
        let (uploads, todo) = unbounded::<Upload>();
        let (answer, done) = unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("store-upload".into())
            .spawn(move || {
                let mut known = Known::default();
                for upload in todo {
                    let id = upload.manifest.id;
                    let result = copy(&remote, upload, &stopped, &mut known);
                    let failed = result.is_err();
                    if answer.send(result.map(|()| id)).is_err() || failed {
                        return;
                    }
                }
            })
            .expect("spawning the upload thread");
        Uploader {
            uploads: Some(uploads),
            done,
            stop,
            thread: Some(thread),
        }
    }

    /// Queues `upload`.
    pub fn send(&self, upload: Upload) {
        if let Some(tx) = &self.uploads {
            let _ = tx.send(upload);
        }
    }

    /// The answers: checkpoint ids whose manifest exists, in order, or the
    /// error that ended the uploads.
    pub fn done(&self) -> &Receiver<Result<u64, RemoteError>> {
        &self.done
    }
}

impl Drop for Uploader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.uploads = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the uploader knows the store holds.
#[derive(Default)]
struct Known {
    /// The objects of manifests written or read by garbage collection.
    manifests: BTreeMap<u64, Vec<String>>,
    /// The object of each staged epoch copied, by its path.
    staged: BTreeMap<String, String>,
}

/// Copies one checkpoint: its packs and staged epochs, then its manifest,
/// then collects garbage.
fn copy(
    remote: &RemoteStore,
    upload: Upload,
    stop: &AtomicBool,
    known: &mut Known,
) -> Result<(), RemoteError> {
    let Upload {
        mut manifest,
        packs,
        files,
        retain,
    } = upload;
    for (name, pack) in &packs {
        // `Bytes`: each try shares the one encoding.
        let bytes = RemoteStore::pack_bytes(name, pack);
        retrying(stop, || remote.put_pack(name, bytes.clone()))?;
    }
    known
        .staged
        .retain(|path, _| files.iter().any(|(p, _)| p == path));
    for (path, on_disk) in files {
        let object = match known.staged.get(&path) {
            Some(object) => object.clone(),
            None => {
                let object = super::staged_name(manifest.id, &manifest.writer, &path);
                if !retrying(stop, || remote.put_file(&object, &on_disk))? {
                    continue;
                }
                known.staged.insert(path.clone(), object.clone());
                object
            }
        };
        manifest.staged.push(Staged { path, object });
    }
    retrying(stop, || remote.create_manifest(&manifest))?;
    let objects = manifest.objects().cloned().collect();
    known.manifests.insert(manifest.id, objects);
    if let Err(e) = remote.collect_garbage(manifest.id, retain, &mut known.manifests) {
        tracing::warn!("{e}; left for the next checkpoint");
    }
    Ok(())
}

/// Runs `op` until it succeeds, fails for good, or `stop` is set.
fn retrying<T>(
    stop: &AtomicBool,
    mut op: impl FnMut() -> Result<T, RemoteError>,
) -> Result<T, RemoteError> {
    let mut pause = Duration::from_millis(200);
    loop {
        match op() {
            Err(e) if e.is_transient() && !stop.load(Ordering::Relaxed) => {
                tracing::warn!(
                    "{e}; retrying in {} ms (the checkpoint waits, records keep flowing)",
                    pause.as_millis()
                );
                let until = std::time::Instant::now() + pause;
                while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            result => return result,
        }
    }
}
