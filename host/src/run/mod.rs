//! Running a job ([`run`]): the supervisor runs it as a sequence of
//! attempts; each attempt restores a checkpoint, wires the dataflow, opens
//! and starts its threads, and drives the checkpoint coordinator until the
//! end of input, a stop request, a swap, or a failure.
//!
//! The modules, in the order a run goes through them:
//! - [`options`](RunOptions): how to run; `plugins`: loading the job's
//!   plugins and compiling the job with them into its [`Plan`](crate::plan::Plan)
//!   ([`load_plugins`]), which every later phase looks nodes, instances and
//!   edges up in by id;
//! - `supervisor`: attempts, the restart strategy, live swaps with
//!   probation and rollback; `swap`: a swap request and its probation;
//!   `control`: the control socket `weir.sock` ([`request_swap`],
//!   [`request_savepoint`]); `savepoint`: taking a savepoint on request and
//!   starting from one ([`FromSavepoint`]); `kept`:
//!   the copies of swapped-in plugins in the state dir ([`KEPT_DIR`]), which
//!   restarts restore with;
//! - `attempt`: one attempt as a list of phases: `restore` (open the store,
//!   choose and check the checkpoint, truncate), `wiring` (every channel),
//!   `open` (instances, sinks, sources), `start` (the threads), `driver`
//!   (commands, persisting, commits, swap requests);
//! - [`CommitPoint`]: what makes a checkpoint count besides its manifest
//!   (worker mode: the task's group), which the driver commits and the
//!   restore phase reads;
//! - [`RunSummary`], [`format_summary`] and [`summary_json`]: what a run
//!   did, for a person and for a program; [`validate()`]:
//!   checking a job without running it; [`RunError`]: why a run failed.

mod attempt;
mod commit_point;
mod control;
mod driver;
mod error;
mod kept;
mod moved;
mod narrow;
mod open;
mod options;
mod plugins;
mod restore;
mod savepoint;
mod start;
mod summary;
mod supervisor;
mod swap;
mod validate;
mod wiring;

use std::sync::atomic::AtomicBool;

use crate::config::Job;
use crate::wasm::Runtime;

pub use commit_point::{CommitPoint, Transactions};
pub use control::{
    CONTROL_SOCKET, MAX_CONNECTIONS, MAX_REQUEST, REQUEST_TIMEOUT, request_savepoint, request_swap,
};
pub use error::RunError;
pub use kept::KEPT_DIR;
pub(crate) use open::restore_instance;
pub use options::{FromSavepoint, RestoreMode, RunOptions, state_dir};
pub use plugins::{LoadedOperator, load_operator, load_plugins, warn_unconsumed_outputs};
pub(crate) use restore::check_state_version;
pub use summary::{NodeCounts, RunSummary, format_summary, summary_json};
pub use validate::validate;

/// Runs `job` until its input ends, `shutdown` becomes true (then it takes a
/// checkpoint and stops), or something fails; through live swaps and the
/// job's restart strategy. Arms the failpoints `WEIR_FAILPOINTS` names
/// (test-only, [`crate::failpoint`]) first.
pub fn run(
    job: &Job,
    runtime: &Runtime,
    options: &RunOptions,
    shutdown: &AtomicBool,
) -> Result<RunSummary, RunError> {
    crate::failpoint::arm_from_env()?;
    supervisor::supervise(job, runtime, options, shutdown)
}
