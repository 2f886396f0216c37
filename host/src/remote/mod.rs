//! Checkpoints in an object store (`[checkpoint] store = "s3://…"`): the
//! local redb file stays the working copy, and every checkpoint is copied
//! to the store, so that a job survives the loss of its machine.
//!
//! ```text
//! <prefix>/manifests/<id, 20 digits>.json      one per checkpoint (Manifest)
//! <prefix>/packs/<version, 20 digits>-<writer>.pack.zst   what a checkpoint wrote (store::Pack)
//! <prefix>/staged/<version>-<writer>/sinks/<id>/<file>.zst  a sink's staged epoch, as uploaded at <version>
//! ```
//!
//! Objects named `*.zst` are zstd frames (level 1, with the frame
//! checksum) of the pack or file; others are stored as they are.
//! Compression is decided by the name alone, so manifests that name
//! uncompressed objects stay readable.
//!
//! Protocol (`uploader.rs`, `local.rs`, the driver):
//! 1. Checkpoint *n* commits to the local store as without a remote.
//! 2. The uploader puts a pack for every version *n* reads that the
//!    store lacks (always *n*'s) and the sinks' staged epochs still to be
//!    delivered that it lacks (streamed from disk), then creates
//!    `manifests/<n>.json` with a conditional create: the first writer of
//!    *n* wins, a second one is fenced.
//! 3. Only then are the sinks told to commit *n*: a checkpoint counts as
//!    complete for the sinks once its manifest exists, and the next one is
//!    triggered after that.
//! 4. The owner (the writer of the newest manifest) deletes manifests past
//!    the job's `retain` and the packs and staged epochs no retained
//!    manifest names, orphans of a crash included.
//!
//! A restore takes the newest manifest (or `--restore ID`'s; with a
//! commit point, the committed one: `run/commit_point.rs`): a local store
//! holding that checkpoint is reused; otherwise the state directory is
//! rebuilt from the manifest's packs: every checkpoint and recorded epoch
//! its catalog names, as the lost store held them (`local.rs`).
//!
//! Invariants:
//! - A manifest is created only after every pack it names exists, and
//!   names packs by writer, so no upload overwrites another's.
//! - A manifest's catalog names only checkpoints and recorded epochs its
//!   packs rebuild whole: those the writer's store held after committing
//!   it, every one of which reads only versions that store held.
//! - Every checkpoint a sink commits has a manifest; a restore never picks
//!   a checkpoint without one (a newer local one is dropped), so sinks
//!   never deliver an epoch the store cannot restore.

mod error;
mod local;
mod manifest;
mod replica;
mod uploader;

use std::collections::BTreeMap;
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::store::Pack;

pub use error::RemoteError;
pub(crate) use local::pick;
pub use local::{SyncError, fetch_checkpoints, fetch_kept_plugins, sync_state_dir};
pub use manifest::{MANIFEST_FORMAT, Manifest, Staged};
pub use replica::Replica;
pub use uploader::{Upload, Uploader};

/// The object store of a job's checkpoints.
pub struct RemoteStore {
    /// The URL, as the job file gives it (it holds no secret).
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("url", &self.url)
            .finish()
    }
}

/// The name of manifest `id`.
fn manifest_name(id: u64) -> String {
    format!("manifests/{id:020}.json")
}

/// The name of the pack of `version` by `writer`.
pub fn pack_name(version: u64, writer: &str) -> String {
    format!("packs/{version:020}-{writer}.pack{COMPRESSED}")
}

/// The name of the staged epoch file `path` (relative to the state
/// directory) uploaded at checkpoint `version` by `writer`.
pub fn staged_name(version: u64, writer: &str, path: &str) -> String {
    format!("staged/{version:020}-{writer}/{path}{COMPRESSED}")
}

/// The suffix of objects stored as zstd frames.
const COMPRESSED: &str = ".zst";

/// zstd's level for uploads: its fastest positive level, about 7x smaller
/// for JSON lines at a fraction of a core for a job's whole output.
const ZSTD_LEVEL: i32 = 1;

/// A zstd frame encoder into memory, at [`ZSTD_LEVEL`], with the frame's
/// checksum.
fn encoder() -> zstd::stream::write::Encoder<'static, Vec<u8>> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)
        .expect("a zstd encoder of a fixed level");
    e.include_checksum(true).expect("a frame parameter");
    e
}

/// `bytes` as one zstd frame.
fn compress(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = encoder();
    std::io::Write::write_all(&mut encoder, bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// The version of the pack or staged epoch object named `name`, if it is
/// one.
fn object_version(name: &str) -> Option<u64> {
    let rest = (name.strip_prefix("packs/")).or_else(|| name.strip_prefix("staged/"))?;
    rest.split_once('-')?.0.parse().ok()
}

impl RemoteStore {
    /// A client of the store at `url` (schemes: `crate::config::STORE_SCHEMES`),
    /// configured from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, as
    /// `object_store`'s builders read them) and then `options`, whose keys
    /// are those builders' config keys (`aws_endpoint`, `region`, ...).
    /// Contacts nothing yet.
    pub fn open(url: &str, options: &BTreeMap<String, String>) -> Result<RemoteStore, RemoteError> {
        let config = |message: String| RemoteError::Config {
            url: url.to_string(),
            message,
        };
        crate::config::check_store_url(url).map_err(&config)?;
        let (scheme, rest) = url.split_once("://").expect("checked above");
        let prefix_of = |path: &str| {
            ObjectPath::parse(path.trim_matches('/')).map_err(|e| {
                config(format!(
                    "the prefix {path:?} is not a valid object path: {e}"
                ))
            })
        };
        let built: Result<(Arc<dyn ObjectStore>, ObjectPath), RemoteError> = match scheme {
            "file" => {
                std::fs::create_dir_all(rest)
                    .map_err(|e| config(format!("cannot create the folder {rest}: {e}")))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(rest)
                    .map_err(|e| config(e.to_string()))?;
                Ok((Arc::new(fs), ObjectPath::default()))
            }
            _ => {
                let bucket_end = rest.find('/').unwrap_or(rest.len());
                let prefix = prefix_of(&rest[bucket_end..])?;
                let store = build_cloud(scheme, url, options).map_err(&config)?;
                Ok((store, prefix))
            }
        };
        let (store, prefix) = built?;
        if scheme == "file" && !options.is_empty() {
            return Err(config(
                "`store_options` do not apply to file:// stores; remove them".into(),
            ));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("weir-store")
            .enable_all()
            .build()
            .map_err(|e| config(format!("cannot start its client's runtime: {e}")))?;
        Ok(RemoteStore {
            url: url.to_string(),
            store,
            prefix,
            runtime,
        })
    }

    /// The store's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn path(&self, name: &str) -> ObjectPath {
        name.split('/')
            .fold(self.prefix.clone(), |p, part| p.clone().join(part))
    }

    fn fail(&self, operation: &str, e: object_store::Error) -> RemoteError {
        RemoteError::from_store(&self.url, operation, e)
    }

    fn damaged(&self, object: &str, message: String) -> RemoteError {
        RemoteError::Damaged {
            url: self.url.clone(),
            object: object.to_string(),
            message,
        }
    }

    /// The objects under `folder` of the prefix (`manifests`, or `""`
    /// for all), as `/`-separated names relative to the prefix, sorted.
    pub(crate) fn names(&self, folder: &str) -> Result<Vec<String>, RemoteError> {
        use futures_util::TryStreamExt;
        let under = match folder {
            "" => self.prefix.clone(),
            _ => self.path(folder),
        };
        let listed: Vec<_> = (self.runtime)
            .block_on(self.store.list(Some(&under)).try_collect())
            .map_err(|e| self.fail(&format!("listing {folder}/"), e))?;
        let mut names: Vec<String> = (listed.into_iter())
            .filter_map(|m| {
                let parts = m.location.prefix_match(&self.prefix)?;
                Some(
                    parts
                        .map(|p| p.as_ref().to_string())
                        .collect::<Vec<_>>()
                        .join("/"),
                )
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// The ids of the manifests in the store, ascending.
    pub fn manifest_ids(&self) -> Result<Vec<u64>, RemoteError> {
        Ok(self
            .names("manifests")?
            .iter()
            .filter_map(|n| {
                n.strip_prefix("manifests/")?
                    .strip_suffix(".json")?
                    .parse()
                    .ok()
            })
            .collect())
    }

    fn get(&self, name: &str) -> Result<Vec<u8>, RemoteError> {
        let path = self.path(name);
        self.runtime
            .block_on(async { self.store.get(&path).await?.bytes().await })
            .map(|b| b.to_vec())
            .map_err(|e| self.fail(&format!("reading {name}"), e))
    }

    /// Manifest `id`.
    pub fn manifest(&self, id: u64) -> Result<Manifest, RemoteError> {
        let name = manifest_name(id);
        let bytes = self.get(&name)?;
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| self.damaged(&name, e.to_string()))?;
        if manifest.id != id {
            return Err(self.damaged(
                &name,
                format!("it is the manifest of checkpoint {}", manifest.id),
            ));
        }
        Ok(manifest)
    }

    /// The pack named `name`.
    pub fn pack(&self, name: &str) -> Result<Pack, RemoteError> {
        let mut bytes = self.get(name)?;
        if name.ends_with(COMPRESSED) {
            bytes = zstd::stream::decode_all(&bytes[..])
                .map_err(|e| self.damaged(name, format!("not a zstd frame: {e}")))?;
        }
        Pack::decode(&bytes).map_err(|message| self.damaged(name, message))
    }

    /// The bytes to upload of the pack `pack` under `name`.
    pub fn pack_bytes(name: &str, pack: &Pack) -> bytes::Bytes {
        let encoded = pack.encode();
        match name.ends_with(COMPRESSED) {
            true => compress(&encoded).into(),
            false => encoded.into(),
        }
    }

    /// Puts the pack bytes `bytes` ([`RemoteStore::pack_bytes`]) under
    /// `name` (a name no one else writes).
    pub fn put_pack(&self, name: &str, bytes: bytes::Bytes) -> Result<(), RemoteError> {
        let path = self.path(name);
        self.runtime
            .block_on(self.store.put(&path, PutPayload::from(bytes)))
            .map(|_| ())
            .map_err(|e| self.fail(&format!("writing {name}"), e))
    }

    /// Creates `manifest`, unless one of its checkpoint exists: then it is
    /// this writer's own (an earlier try whose answer was lost), or
    /// [`RemoteError::Fenced`].
    pub fn create_manifest(&self, manifest: &Manifest) -> Result<(), RemoteError> {
        let name = manifest_name(manifest.id);
        let bytes = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let path = self.path(&name);
        let put =
            self.runtime
                .block_on(self.store.put_opts(&path, PutPayload::from(bytes), options));
        match put {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => {
                let there = self.manifest(manifest.id)?;
                if there.writer == manifest.writer {
                    return Ok(());
                }
                Err(RemoteError::Fenced {
                    url: self.url.clone(),
                    job: manifest.job.clone(),
                    id: manifest.id,
                    writer: manifest.writer.clone(),
                    other: there.writer,
                })
            }
            Err(e) => Err(self.fail(&format!("creating {name}"), e)),
        }
    }

    /// Deletes manifest `id` (a checkpoint never committed), if it exists.
    pub fn delete_manifest(&self, id: u64) -> Result<(), RemoteError> {
        self.delete(&manifest_name(id))
    }

    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        let path = self.path(name);
        match self.runtime.block_on(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.fail(&format!("deleting {name}"), e)),
        }
    }

    /// After this writer created manifest `newest`, if it is still the
    /// owner (no manifest is newer): deletes the manifests older than the
    /// `retain` newest, then every pack of a version up to `newest` that
    /// no remaining manifest names (what older checkpoints alone read, and
    /// orphans of a crash), and likewise staged epochs. A writer that was
    /// superseded deletes nothing: the new owner's manifests, which it
    /// does not weigh, may name the packs its own no longer do. `known`
    /// caches the objects of manifests read or written before, so each is
    /// read once.
    pub fn collect_garbage(
        &self,
        newest: u64,
        retain: usize,
        known: &mut BTreeMap<u64, Vec<String>>,
    ) -> Result<(), RemoteError> {
        let ids = self.manifest_ids()?;
        if let Some(&later) = ids.iter().find(|&&id| id > newest) {
            tracing::debug!(
                "{}: manifest {later} is newer than this writer's {newest}; the owner collects garbage",
                self.url
            );
            return Ok(());
        }
        let keep = ids.len().saturating_sub(retain.max(1));
        for &id in &ids[..keep] {
            self.delete(&manifest_name(id))?;
        }
        known.retain(|id, _| ids[keep..].contains(id));
        let mut named = std::collections::BTreeSet::new();
        for &id in &ids[keep..] {
            if let std::collections::btree_map::Entry::Vacant(e) = known.entry(id) {
                e.insert(self.manifest(id)?.objects().cloned().collect());
            }
            named.extend(known[&id].iter().cloned());
        }
        for name in self.names("")? {
            if object_version(&name).is_some_and(|v| v <= newest) && !named.contains(&name) {
                self.delete(&name)?;
            }
        }
        Ok(())
    }

    /// Copies every file under the local folder `dir` to the store, at
    /// the same names under the prefix, which must hold nothing yet (a
    /// savepoint written to a URL). Returns the number of files.
    pub fn put_tree(&self, dir: &std::path::Path) -> Result<usize, RemoteError> {
        if let Some(there) = self.names("")?.first() {
            return Err(RemoteError::Config {
                url: self.url.clone(),
                message: format!("it holds objects already ({there}); name a new prefix"),
            });
        }
        let mut files = Vec::new();
        let mut dirs = vec![dir.to_path_buf()];
        let local = |path: &std::path::Path, e: std::io::Error| RemoteError::Failed {
            url: self.url.clone(),
            operation: format!("reading {}", path.display()),
            message: e.to_string(),
            transient: false,
        };
        while let Some(d) = dirs.pop() {
            for entry in std::fs::read_dir(&d).map_err(|e| local(&d, e))? {
                let path = entry.map_err(|e| local(&d, e))?.path();
                match path.is_dir() {
                    true => dirs.push(path),
                    false => files.push(path),
                }
            }
        }
        for path in &files {
            let relative = path.strip_prefix(dir).expect("found under dir");
            let name = relative
                .to_string_lossy()
                .replace(std::path::MAIN_SEPARATOR, "/");
            let bytes = std::fs::read(path).map_err(|e| local(path, e))?;
            let object = self.path(&name);
            (self.runtime)
                .block_on(self.store.put(&object, PutPayload::from(bytes)))
                .map_err(|e| self.fail(&format!("writing {name}"), e))?;
        }
        Ok(files.len())
    }

    /// Copies every object under the prefix into the local folder `dir`
    /// (a savepoint read from a URL). Returns the number of files; none is
    /// an error naming the URL.
    pub fn get_tree(&self, dir: &std::path::Path) -> Result<usize, RemoteError> {
        let names = self.names("")?;
        if names.is_empty() {
            return Err(RemoteError::Config {
                url: self.url.clone(),
                message: "it holds no objects; check the URL".into(),
            });
        }
        for name in &names {
            let bytes = self.get(name)?;
            let path = dir.join(name);
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&path, bytes));
            written.map_err(|e| RemoteError::Failed {
                url: self.url.clone(),
                operation: format!("writing {}", path.display()),
                message: e.to_string(),
                transient: false,
            })?;
        }
        Ok(names.len())
    }

    /// Deletes every object under the prefix (`--restore none`).
    pub fn clear(&self) -> Result<(), RemoteError> {
        for name in self.names("")? {
            self.delete(&name)?;
        }
        Ok(())
    }

    /// Uploads the file at `path` as `name`, streamed from disk (in parts
    /// for a large one), compressed when `name` says so. `Ok(false)` when
    /// the file is gone.
    pub fn put_file(&self, name: &str, path: &std::path::Path) -> Result<bool, RemoteError> {
        use std::io::{Read as _, Write as _};
        use tokio::io::AsyncWriteExt as _;
        let mut file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(self.local(path, e)),
        };
        let operation = format!("writing {name}");
        let object = self.path(name);
        let mut writer = object_store::buffered::BufWriter::new(self.store.clone(), object);
        let mut encoder = name.ends_with(COMPRESSED).then(encoder);
        let mut chunk = vec![0u8; 8 << 20];
        loop {
            let n = file.read(&mut chunk).map_err(|e| self.local(path, e))?;
            let bytes = match (&mut encoder, n) {
                (None, 0) => break,
                (None, n) => bytes::Bytes::copy_from_slice(&chunk[..n]),
                (Some(_), 0) => {
                    let e = encoder.take().expect("matched Some");
                    bytes::Bytes::from(e.finish().expect("writing to memory"))
                }
                (Some(e), n) => {
                    e.write_all(&chunk[..n]).expect("writing to memory");
                    bytes::Bytes::from(std::mem::take(e.get_mut()))
                }
            };
            let put = self.runtime.block_on(writer.put(bytes));
            if let Err(e) = put {
                let _ = self.runtime.block_on(writer.abort());
                return Err(self.fail(&operation, e));
            }
            if n == 0 {
                break;
            }
        }
        (self.runtime)
            .block_on(writer.shutdown())
            .map_err(|e| RemoteError::from_io(&self.url, &operation, e))?;
        Ok(true)
    }

    /// Downloads the object `name` into the file `path`, streamed,
    /// decompressed when `name` says so.
    pub fn get_file(&self, name: &str, path: &std::path::Path) -> Result<(), RemoteError> {
        use futures_util::StreamExt as _;
        use std::io::Write as _;
        let operation = format!("reading {name}");
        let object = self.path(name);
        let file = std::fs::File::create(path).map_err(|e| self.local(path, e))?;
        enum Out {
            Plain(std::fs::File),
            Zstd(zstd::stream::write::Decoder<'static, std::fs::File>),
        }
        let mut out = match name.ends_with(COMPRESSED) {
            true => {
                Out::Zstd(zstd::stream::write::Decoder::new(file).map_err(|e| self.local(path, e))?)
            }
            false => Out::Plain(file),
        };
        // A local file fails with an OS error; anything else is the frame's.
        let failed = |e: std::io::Error| match e.raw_os_error() {
            Some(_) => self.local(path, e),
            None => self.damaged(name, format!("not a whole zstd frame: {e}")),
        };
        self.runtime.block_on(async {
            let mut stream = (self.store.get(&object).await)
                .map_err(|e| self.fail(&operation, e))?
                .into_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| self.fail(&operation, e))?;
                match &mut out {
                    Out::Plain(file) => file.write_all(&chunk),
                    Out::Zstd(decoder) => decoder.write_all(&chunk),
                }
                .map_err(failed)?;
            }
            Ok::<(), RemoteError>(())
        })?;
        let file = match out {
            Out::Plain(file) => file,
            Out::Zstd(decoder) => decoder.finish().map_err(failed)?,
        };
        file.sync_all().map_err(|e| self.local(path, e))
    }

    /// A failure of the local file `path`.
    fn local(&self, path: &std::path::Path, e: std::io::Error) -> RemoteError {
        RemoteError::Failed {
            url: self.url.clone(),
            operation: format!("copying {}", path.display()),
            message: e.to_string(),
            transient: false,
        }
    }
}

/// A client for the cloud `scheme` from the environment, then `options`.
fn build_cloud(
    scheme: &str,
    url: &str,
    options: &BTreeMap<String, String>,
) -> Result<Arc<dyn ObjectStore>, String> {
    fn configured<B, K: std::str::FromStr>(
        mut builder: B,
        options: &BTreeMap<String, String>,
        set: impl Fn(B, K, &str) -> B,
    ) -> Result<B, String> {
        for (key, value) in options {
            let k = key.to_ascii_lowercase().parse::<K>().map_err(|_| {
                format!("[checkpoint.store_options] has the unknown key `{key}` (see the object_store builder's config keys)")
            })?;
            builder = set(builder, k, value);
        }
        Ok(builder)
    }
    let store: Arc<dyn ObjectStore> = match scheme {
        "s3" | "s3a" => {
            use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
            let b = AmazonS3Builder::from_env().with_url(url);
            let b = configured(b, options, |b, k: AmazonS3ConfigKey, v| b.with_config(k, v))?;
            Arc::new(b.build().map_err(|e| e.to_string())?)
        }
        "gs" => {
            use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
            let b = GoogleCloudStorageBuilder::from_env().with_url(url);
            let b = configured(b, options, |b, k: GoogleConfigKey, v| b.with_config(k, v))?;
            Arc::new(b.build().map_err(|e| e.to_string())?)
        }
        _ => {
            use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
            let b = MicrosoftAzureBuilder::from_env().with_url(url);
            let b = configured(b, options, |b, k: AzureConfigKey, v| b.with_config(k, v))?;
            Arc::new(b.build().map_err(|e| e.to_string())?)
        }
    };
    Ok(store)
}

#[cfg(test)]
mod tests;
