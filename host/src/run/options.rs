//! How to run a job: [`RunOptions`] and the checkpoint to resume from
//! ([`RestoreMode`]).

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Job;
use crate::metrics::JobMetrics;

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
    /// Listen for `weir swap` on a control socket in the state dir.
    pub control_socket: bool,
}

impl RunOptions {
    /// The state directory of `job` under these options.
    pub(crate) fn state_dir(&self, job: &Job) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| job.checkpoint.dir.clone())
    }
}
