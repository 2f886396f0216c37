//! What `weir checkpoints` and `weir state` inspect: a local state
//! directory, or a job's object store (`s3://bucket/prefix`, ...), whose
//! checkpoints are listed from their manifests and whose state is read
//! from one checkpoint fetched into a temporary folder. Credentials come
//! from the environment, as for `weir run`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use weir::remote::{RemoteStore, sync_state_dir};
use weir::store::CheckpointMeta;

/// Whether the argument names an object store rather than a path.
pub fn is_store_url(arg: &Path) -> bool {
    arg.to_str().is_some_and(|s| s.contains("://"))
}

/// The complete checkpoints in the object store at `url`, by their
/// manifests, ascending, with the job they belong to.
pub fn list(url: &str) -> anyhow::Result<(Option<String>, Vec<CheckpointMeta>)> {
    let remote = RemoteStore::open(url, &BTreeMap::new())?;
    let mut metas = Vec::new();
    for id in remote.manifest_ids()? {
        metas.push(remote.manifest(id)?.meta);
    }
    let job = metas.last().map(|m| m.job.clone());
    Ok((job, metas))
}

/// A state directory to read: the local one given, or checkpoint
/// `checkpoint` (default: the newest) of the object store at a URL,
/// fetched into a temporary folder deleted when this is dropped.
pub struct Inspected {
    /// The state directory.
    pub dir: PathBuf,
    _fetched: Option<tempfile::TempDir>,
}

/// The state directory `arg` (a path, or an object store's URL) names.
pub fn inspected(arg: &Path, checkpoint: Option<u64>) -> anyhow::Result<Inspected> {
    if !is_store_url(arg) {
        return Ok(Inspected {
            dir: arg.to_path_buf(),
            _fetched: None,
        });
    }
    let url = arg.to_str().expect("a URL is UTF-8");
    let remote = RemoteStore::open(url, &BTreeMap::new())?;
    let ids = remote.manifest_ids()?;
    let id = match checkpoint {
        Some(id) => id,
        None => *ids
            .last()
            .with_context(|| format!("no complete checkpoints in {url}"))?,
    };
    let job = match ids.contains(&id) {
        true => remote.manifest(id)?.job,
        false => anyhow::bail!(
            "no complete checkpoint {id} in {url}; `weir checkpoints {url}` lists them"
        ),
    };
    let fetched = tempfile::Builder::new().prefix("weir-state-").tempdir()?;
    sync_state_dir(&remote, fetched.path(), &job, Some(id))?;
    Ok(Inspected {
        dir: fetched.path().to_path_buf(),
        _fetched: Some(fetched),
    })
}

/// Downloads the savepoint at the object store URL `url` into a temporary
/// folder (deleted when the guard is dropped), with the credentials of the
/// environment, and `job`'s `store_options` for a URL of its store's
/// scheme; returns the savepoint's folder.
pub fn fetch_savepoint(
    url: &Path,
    job: &weir::config::Job,
) -> anyhow::Result<(PathBuf, tempfile::TempDir)> {
    let url = url.to_str().context("a savepoint URL is UTF-8")?;
    let checkpoint = &job.checkpoint;
    let scheme = |u: &str| u.split("://").next().map(str::to_owned);
    let options = match checkpoint.store.as_deref().map(scheme) == Some(scheme(url)) {
        true => checkpoint.store_options.clone(),
        false => BTreeMap::new(),
    };
    let remote = RemoteStore::open(url, &options)?;
    let fetched = tempfile::Builder::new()
        .prefix("weir-savepoint-")
        .tempdir()?;
    let dir = fetched.path().join("savepoint");
    remote.get_tree(&dir)?;
    Ok((dir, fetched))
}
