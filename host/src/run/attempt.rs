//! One attempt: a complete start of the dataflow from a checkpoint, as a
//! list of phases ([`run_attempt`]):
//!
//! 1. `restore`: open the store, choose and check the checkpoint, truncate;
//!    keep a copy of every swapped-in plugin in the state dir;
//! 2. `wiring`: build every channel;
//! 3. `open`: instantiate and restore the operator instances, open the
//!    sinks, open the sources;
//! 4. `start`: start the threads;
//! 5. `driver`: drive the checkpoints until the attempt ends;
//! 6. cancel (unless the job finished) and join the threads.
//!
//! Invariant: nothing runs and no sink is opened before every instance is
//! instantiated and restored, so a plugin that fails to restore leaves the
//! checkpoint and the output untouched.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crossbeam_channel::Receiver;

use crate::failpoint::{self, Failpoint};
use crate::metrics::JobMetrics;
use crate::plan::Plan;
use crate::remote::{RemoteStore, Replica};
use crate::run::control::ControlRequest;
use crate::run::driver::Driver;
use crate::run::error::RunError;
use crate::run::kept::{self, Kept};
use crate::run::narrow::Narrow;
use crate::run::open::{Opened, instantiate_operators, open_sinks, open_sources};
use crate::run::options::{RestoreMode, RunOptions};
use crate::run::restore::{self, Prepared};
use crate::run::start::start_threads;
use crate::run::summary::{RunSummary, node_counts};
use crate::run::swap::{Probation, SwapRequest};
use crate::run::wiring::Wiring;
use crate::threads::bad_records::BadInputs;

/// What one attempt runs with.
pub(crate) struct Attempt<'a> {
    /// The checkpoint to start from.
    pub restore: RestoreMode,
    /// The job compiled with the plugin each operator runs.
    pub plan: &'a Plan<'a>,
    /// Operators whose plugin may differ from the checkpoint's (swapped).
    pub swapped: &'a BTreeSet<String>,
    /// Operators that do not run their job file's plugin, with the record
    /// their checkpoints keep.
    pub kept: &'a Kept,
    /// Swap requests from the control socket.
    pub control: Option<&'a Receiver<ControlRequest>>,
    /// A swapped plugin on probation.
    pub probation: Option<&'a mut Probation>,
    /// The job's live metrics.
    pub metrics: Arc<JobMetrics>,
    /// Records each source sends one per batch first.
    pub narrow: &'a Narrow,
    /// The records replays found plugins fail on.
    pub bad_inputs: Arc<BadInputs>,
    /// The object store checkpoints are copied to, if the job has one.
    pub remote: Option<&'a Arc<RemoteStore>>,
}

/// How an attempt ended (when it did not fail).
#[derive(Debug)]
pub(crate) enum AttemptEnd {
    /// End of input, final checkpoint committed.
    Finished,
    /// Stopped at a checkpoint on request.
    Stopped,
    /// Stopped at checkpoint `checkpoint` to swap a plugin.
    SwapAt {
        /// The checkpoint to restart from.
        checkpoint: u64,
        /// The swap.
        request: SwapRequest,
    },
}

/// Runs the dataflow of `attempt.plan` once, from the checkpoint
/// `attempt.restore` names.
pub(crate) fn run_attempt(
    options: &RunOptions,
    attempt: Attempt<'_>,
    shutdown: &AtomicBool,
) -> Result<(RunSummary, AttemptEnd), RunError> {
    let started = Instant::now();
    let plan = attempt.plan;
    let remote = attempt.remote.map(|r| &**r);
    let at = match restore::prepare(plan, options, (attempt.restore, remote), attempt.swapped)? {
        Prepared::AlreadyFinished(id) => {
            let summary = RunSummary {
                restored_from: Some(id),
                checkpoints: 0,
                last_checkpoint: Some(id),
                finished: true,
                restarts: 0,
                duration: started.elapsed(),
                nodes: Vec::new(),
            };
            return Ok((summary, AttemptEnd::Finished));
        }
        Prepared::Resume(at) => at,
    };

    // Every copy the attempt's checkpoints will record is durable first.
    kept::keep(&at.state_dir, plan, attempt.kept)?;
    kept::collect(&at.state_dir, &at.store, attempt.kept);

    let wiring = Wiring::new(plan);
    let metrics = attempt.metrics;
    let instances = instantiate_operators(plan, &at)?;
    if attempt.probation.as_ref().is_some_and(|p| p.pending()) {
        // A live swap's new plugin restored its state; nothing records it.
        failpoint::hit(Failpoint::SwapAfterMigrate);
    }
    let opened = Opened {
        instances,
        sinks: open_sinks(plan, &at, options.commit_point.as_deref())?,
        sources: open_sources(plan, &at)?,
    };
    let replica = (attempt.remote).map(|r| Replica::start(r.clone(), at.manifest.as_ref()));
    let cancel = wiring.tasks.shared.cancel.clone();
    let threads = start_threads(
        plan,
        (wiring.tasks, attempt.narrow, attempt.bad_inputs),
        (opened, at.first_id),
        &metrics,
    );

    let mut driver = Driver::new(
        (plan, attempt.kept),
        &at,
        wiring.driver,
        &metrics,
        attempt.control,
        attempt.probation,
    )
    .replicating(replica)
    .committing(options.commit_point.clone());
    let outcome = driver.drive(shutdown);
    let driven = driver.driven();
    if outcome.is_err() || !driven.finished {
        cancel.store(true, Ordering::Relaxed);
    }
    let panicked = threads.join();
    // The driver's channel ends stay open until every thread is joined: the
    // threads end by the cancel flag or at their end of input, not because
    // a control channel closed.
    drop(driver);
    outcome?;
    if let Some(name) = panicked {
        return Err(RunError::Panicked(name));
    }

    let end = match (driven.finished, driven.swap, driven.last) {
        (true, _, _) => AttemptEnd::Finished,
        (false, Some(request), Some(checkpoint)) => AttemptEnd::SwapAt {
            checkpoint,
            request,
        },
        _ => AttemptEnd::Stopped,
    };
    let summary = RunSummary {
        restored_from: at.checkpoint.as_ref().map(|m| m.id),
        checkpoints: driven.checkpoints,
        last_checkpoint: driven.last,
        finished: driven.finished,
        restarts: 0,
        duration: started.elapsed(),
        nodes: node_counts(&metrics),
    };
    Ok((summary, end))
}
