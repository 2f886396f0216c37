//! How to run a job: [`RunOptions`] and the checkpoint to resume from
//! ([`RestoreMode`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Job;
use crate::metrics::JobMetrics;
use crate::run::commit_point::CommitPoint;
use crate::store::{CheckpointStore, FILE_NAME};

/// Which checkpoint to resume from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestoreMode {
    /// The newest complete checkpoint, if there is one.
    #[default]
    Latest,
    /// This checkpoint.
    Id(u64),
    /// None: start from scratch, discarding existing checkpoints and output.
    None,
}

impl std::str::FromStr for RestoreMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "latest" => Ok(RestoreMode::Latest),
            "none" => Ok(RestoreMode::None),
            n => n
                .parse()
                .map(RestoreMode::Id)
                .map_err(|_| format!("`{n}` is not `latest`, `none` or a checkpoint id")),
        }
    }
}

/// `--from-savepoint`: the savepoint a run starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromSavepoint {
    /// The savepoint directory.
    pub dir: PathBuf,
    /// Start even if the savepoint holds state of operators, sources or
    /// sinks the job no longer has (that state is dropped).
    pub allow_non_restored_state: bool,
}

/// How to run a job.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Which checkpoint to resume from.
    pub restore: RestoreMode,
    /// Overrides the job's `checkpoint.dir`.
    pub state_dir: Option<PathBuf>,
    /// Live metrics to update (from [`JobMetrics::for_job`]); the run
    /// creates its own when `None`.
    pub metrics: Option<Arc<JobMetrics>>,
    /// Operators whose plugin is replaced, on restore, by another `.wasm`
    /// (`--swap OPERATOR=NEW.wasm`).
    pub swaps: Vec<(String, PathBuf)>,
    /// Listen for `weir swap` and `weir savepoint` on a control socket in
    /// the state dir.
    pub control_socket: bool,
    /// Start from this savepoint (`--from-savepoint`), in a state dir with
    /// no checkpoint.
    pub from_savepoint: Option<FromSavepoint>,
    /// What makes a checkpoint count besides its manifest (worker mode:
    /// the task's group), if anything.
    pub commit_point: Option<Arc<dyn CommitPoint>>,
}

impl RunOptions {
    /// The state directory of `job` under these options: [`state_dir`].
    pub(crate) fn state_dir(&self, job: &Job) -> PathBuf {
        state_dir(job, self.state_dir.as_deref())
    }
}

/// The folder that holds `job`'s checkpoints: `explicit` (`--state-dir`)
/// when given, else the job's `[checkpoint] dir`.
///
/// One exception keeps older jobs safe: when the job sets no `dir`, its
/// default folder `state/<name>` does not exist, and the job folder's
/// `state`, the default of older versions, holds this job's checkpoints,
/// that folder is used (with a warning saying how to move it), so that the
/// job resumes instead of starting over and emitting committed output again.
pub fn state_dir(job: &Job, explicit: Option<&Path>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_path_buf();
    }
    let dir = job.checkpoint.dir.clone();
    let legacy = job.dir.join("state");
    if !job.checkpoint.default_dir || dir.exists() || !legacy.join(FILE_NAME).exists() {
        return dir;
    }
    // A store that cannot be read is kept too: opening it reports why.
    let owner = CheckpointStore::open_existing(&legacy).and_then(|store| store.job());
    if owner.as_ref().is_ok_and(|owner| *owner != job.name) {
        return dir;
    }
    let (old, new) = (legacy.display(), dir.display());
    tracing::warn!(
        "job `{}` keeps its checkpoints in {old}, the default folder of older versions, and goes on using it; to keep it there add dir = \"state\" to [checkpoint] in {}, or to move it to the new default {new} stop the job and run: mv {old} {old}.old && mkdir {old} && mv {old}.old {new}",
        job.name,
        job.path.display(),
    );
    legacy
}
