//! What `weir checkpoints` and `weir state` inspect ([`Inspect`]): a
//! local state directory, or a job's object store (`s3://bucket/prefix`,
//! or the `[checkpoint] store` of a job file given), whose checkpoints are
//! listed from their manifests and whose state is read from one checkpoint
//! fetched into a temporary folder. Credentials come from the environment,
//! and the job file's `store_options` when a job file names the store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use weir::remote::{RemoteStore, fetch_checkpoints};
use weir::store::CheckpointMeta;

/// Whether the argument names an object store rather than a path.
pub fn is_store_url(arg: &Path) -> bool {
    arg.to_str().is_some_and(weir::config::is_url)
}

/// What to inspect.
pub enum Inspect {
    /// An object store, with its client's options.
    Store(String, BTreeMap<String, String>),
    /// A local state directory.
    Dir(PathBuf),
}

impl Inspect {
    /// What `arg` names: an object store URL; a job file or job folder,
    /// for its object store if it has one, else its state directory; or a
    /// state directory.
    pub fn of(arg: &Path) -> anyhow::Result<Inspect> {
        if is_store_url(arg) {
            let url = arg.to_str().context("a URL is UTF-8")?.to_string();
            return Ok(Inspect::Store(url, BTreeMap::new()));
        }
        let Some(job) = job_of(arg)? else {
            return Ok(Inspect::Dir(arg.to_path_buf()));
        };
        Ok(match job.checkpoint.store.clone() {
            Some(url) => Inspect::Store(url, job.checkpoint.store_options.clone()),
            None => Inspect::Dir(weir::run::state_dir(&job, None)),
        })
    }
}

/// The job `arg` names when it is a job file, or a folder holding a
/// `job.toml` (and no checkpoint store, which makes it a state
/// directory); `None` for a state directory.
pub fn job_of(arg: &Path) -> anyhow::Result<Option<weir::config::Job>> {
    let store_here = arg.join(weir::store::FILE_NAME).exists();
    let job_folder = arg.join(weir::config::JOB_FILE).is_file() && !store_here;
    if !arg.is_file() && !job_folder {
        return Ok(None);
    }
    Ok(Some(weir::config::Job::load(
        arg,
        &weir_connectors::registry(),
    )?))
}

/// The complete checkpoints in the object store at `url`, by their
/// manifests, ascending, with the job they belong to.
pub fn list(
    url: &str,
    options: &BTreeMap<String, String>,
) -> anyhow::Result<(Option<String>, Vec<CheckpointMeta>)> {
    let remote = RemoteStore::open(url, options)?;
    let mut metas = Vec::new();
    for id in remote.manifest_ids()? {
        metas.push(remote.manifest(id)?.meta);
    }
    let job = metas.last().map(|m| m.job.clone());
    Ok((job, metas))
}

/// A state directory to read: the local one given, or checkpoint
/// `checkpoint` (default: the newest) of the object store at a URL,
/// fetched into a temporary folder deleted when this is dropped (with the
/// checkpoints and recorded epochs the store kept with it, without the
/// sinks' staged epochs).
pub struct Inspected {
    /// The state directory.
    pub dir: PathBuf,
    _fetched: Option<tempfile::TempDir>,
}

/// An object store that holds no complete checkpoint ([`inspected`]'s
/// error, for callers that explain it).
#[derive(Debug, thiserror::Error)]
#[error("no complete checkpoints in {url}")]
pub struct NoCheckpoints {
    /// The store's URL.
    pub url: String,
}

/// The state directory `what` names: checkpoint `checkpoint` of an
/// object store fetched, or a local directory.
pub fn inspected(what: &Inspect, checkpoint: Option<u64>) -> anyhow::Result<Inspected> {
    let (url, options) = match what {
        Inspect::Dir(dir) => {
            return Ok(Inspected {
                dir: dir.clone(),
                _fetched: None,
            });
        }
        Inspect::Store(url, options) => (url.as_str(), options),
    };
    let remote = RemoteStore::open(url, options)?;
    let ids = remote.manifest_ids()?;
    let id = match checkpoint {
        Some(id) => id,
        None => match ids.last() {
            Some(&id) => id,
            None => {
                return Err(NoCheckpoints {
                    url: url.to_string(),
                }
                .into());
            }
        },
    };
    let job = match ids.contains(&id) {
        true => remote.manifest(id)?.job,
        false => anyhow::bail!(
            "no complete checkpoint {id} in {url}; `weir checkpoints {url}` lists them"
        ),
    };
    let fetched = tempfile::Builder::new().prefix("weir-state-").tempdir()?;
    fetch_checkpoints(&remote, fetched.path(), &job, Some(id))?;
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
