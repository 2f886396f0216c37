//! The supervisor runs a job as a sequence of attempts, each a full dataflow
//! started from a checkpoint ([`supervise`]):
//! - a live swap (`weir swap`) ends an attempt at a checkpoint; the next
//!   attempt restores that checkpoint with the new plugin. If the new plugin
//!   fails to load, instantiate, restore, or run until the next checkpoint,
//!   the following attempt restores the same checkpoint with the old plugin:
//!   a rollback that loses and duplicates nothing, because sources replay
//!   from the checkpoint's offsets and sinks only expose committed output.
//! - a failed attempt is retried from the last complete checkpoint when the
//!   job's restart strategy allows it; failures to load, open or restore
//!   are not retried, nor a record a plugin called invalid (the replay
//!   would hand it the same record again).
//! - a plugin failing on a batch of many records is replayed one record
//!   per batch to name the record it fails on ([`narrow`](crate::run::narrow)).
//! - an operator keeps the plugin it was swapped to across restarts and
//!   crashes: its checkpoints record the swap and the state dir keeps a copy
//!   (`kept`), which the next `weir run` restores with unless `--swap` or an
//!   edited job file says otherwise.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, bounded};

use crate::config::{Job, OnError};
use crate::metrics::{EventKind, JobMetrics, Journal, PluginRecord};
use crate::plan::{NodeId, Plan};
use crate::remote::RemoteStore;
use crate::run::attempt::{Attempt, AttemptEnd, run_attempt};
use crate::run::control::{ControlRequest, ControlSocket};
use crate::run::error::RunError;
use crate::run::kept::{self, JobShas, Kept};
use crate::run::narrow::{AfterFailure, Narrowing};
use crate::run::options::{RestoreMode, RunOptions};
use crate::run::plugins::{LoadedOperator, load_operator, load_plugins, warn_unconsumed_outputs};
use crate::run::summary::RunSummary;
use crate::run::swap::{self, Probation, SwapRequest};
use crate::run::{moved, savepoint};
use crate::store::SwappedPlugin;
use crate::threads::bad_records::{BadInputs, Learnt, kind_of};
use crate::threads::{FailedBatch, TaskError};
use crate::wasm::Runtime;
use crate::wasm::{InstanceError, PluginReturned, ReturnedKind};

/// How often a restart's wait looks for a stop request.
const STOP_POLL: Duration = Duration::from_millis(50);

/// A swap on probation: its probation, the swapped operator, and the
/// plugin it replaced with that plugin's swap record (to roll back to).
type OnProbation = (Probation, NodeId, LoadedOperator, Option<SwappedPlugin>);

/// Runs `job` to its end (or a stop), through swaps and restarts.
pub(crate) fn supervise(
    job: &Job,
    runtime: &Runtime,
    options: &RunOptions,
    shutdown: &AtomicBool,
) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    moved::check(job, options)?;
    // Resolved once: every attempt and the control socket use one folder.
    let options = &RunOptions {
        state_dir: Some(options.state_dir(job)),
        ..options.clone()
    };
    // Worker mode's commit point carries the transactions of every task
    // whose stage has such sinks.
    if options.commit_point.is_none() {
        for sink in &job.sinks {
            if let Some(why) = sink.connector.needs_transactions() {
                return Err(RunError::Job(crate::config::JobError::Invalid {
                    path: job.path.clone(),
                    entry: format!("sink \"{}\"", sink.id),
                    message: why.into(),
                }));
            }
        }
    }
    if !options.swaps.is_empty() && options.restore == RestoreMode::None {
        return Err(RunError::Swap(
            "--swap replaces a plugin in a restored checkpoint; with --restore none there is nothing to swap: change the plugin in the job file instead".into(),
        ));
    }
    let metrics = options
        .metrics
        .clone()
        .unwrap_or_else(|| JobMetrics::for_job(job));
    // Opened first, so that `weir swap` reaches a job that is still loading.
    let (control_tx, control_rx) = bounded(4);
    let _control = if options.control_socket {
        let state_dir = options.state_dir(job);
        Some(ControlSocket::start(
            &state_dir,
            control_tx,
            metrics.clone(),
        )?)
    } else {
        None
    };
    let mut supervisor = Supervisor::load(job, (runtime, options), metrics, started)?;
    supervisor.run(&control_rx, shutdown)
}

/// A run between its attempts: the plan with the plugins it runs, the swap
/// records, and what the attempts so far did.
struct Supervisor<'a> {
    runtime: &'a Runtime,
    options: &'a RunOptions,
    metrics: Arc<JobMetrics>,
    /// The job with the plugin each operator runs now.
    plan: Plan<'a>,
    /// Operators whose plugin may differ from the checkpoint's.
    swapped: BTreeSet<String>,
    kept: Kept,
    job_shas: JobShas,
    /// The checkpoint the next attempt starts from.
    restore: RestoreMode,
    probation: Option<OnProbation>,
    started: Instant,
    /// The checkpoint the first attempt resumed from, for the summary.
    first_restore: Option<Option<u64>>,
    checkpoints: u64,
    restarts: u32,
    /// The last failed attempt's error and the checkpoints completed by
    /// then: the same plugin error again, with none completed since, is the
    /// same records failing the same plugin.
    last_failure: Option<(String, u64)>,
    narrowing: Narrowing,
    /// The object store checkpoints are copied to, if the job has one.
    remote: Option<Arc<RemoteStore>>,
    /// The records replays found plugins fail on (operators whose
    /// `on_error` goes past them).
    bad_inputs: Arc<BadInputs>,
}

impl<'a> Supervisor<'a> {
    /// Loads the plugins of `job` (with `--swap` and the swaps its
    /// checkpoint recorded), records them, and imports the savepoint to
    /// start from, if any.
    fn load(
        job: &'a Job,
        (runtime, options): (&'a Runtime, &'a RunOptions),
        metrics: Arc<JobMetrics>,
        started: Instant,
    ) -> Result<Self, RunError> {
        let job_shas = kept::job_file_shas(job);
        let remote = match &job.checkpoint.store {
            Some(url) => Some(Arc::new(RemoteStore::open(
                url,
                &job.checkpoint.store_options,
            )?)),
            None => None,
        };
        let restored = kept::restored_swaps(job, options, &job_shas, remote.as_deref())?;
        let swaps: Vec<(String, PathBuf)> = (options.swaps.iter().cloned())
            .chain(
                restored
                    .iter()
                    .map(|(op, copy, _)| (op.clone(), copy.clone())),
            )
            .collect();
        let plan = load_plugins(job, runtime, &swaps)?;
        warn_unconsumed_outputs(&plan);
        crate::run::validate::warn_held_until_the_end(job);
        record_plugins(&metrics.journal, &plan);
        let mut kept: Kept = (restored.into_iter())
            .map(|(op, _, record)| (op, record))
            .collect();
        for (op, from) in &options.swaps {
            let plugin = plan.find(op).and_then(|id| plan.plugin(id));
            let plugin = plugin.expect("an operator of the job: checked by load_plugins");
            if let Some(r) = kept::record(plugin, from, job_sha(&job_shas, op)) {
                kept.insert(op.clone(), r);
            }
        }
        if let Some(from) = &options.from_savepoint {
            if options.restore != RestoreMode::Latest {
                return Err(RunError::Savepoint {
                    job: job.name.clone(),
                    dir: from.dir.clone(),
                    message: "--from-savepoint is where the job starts; drop --restore".into(),
                });
            }
            if let Some(remote) = &remote
                && let Some(id) = remote.manifest_ids()?.last()
            {
                return Err(RunError::Savepoint {
                    job: job.name.clone(),
                    dir: from.dir.clone(),
                    message: format!(
                        "the job's checkpoint store {} holds checkpoints already (the newest is {id}), which a restore would take over the savepoint; set [checkpoint] store to a new prefix for the job started from it",
                        remote.url()
                    ),
                });
            }
            savepoint::import(&plan, options, from)?;
            moved::record(job, &options.state_dir(job), &from.dir)?;
        }
        Ok(Supervisor {
            runtime,
            options,
            metrics,
            plan,
            swapped: options.swaps.iter().map(|(op, _)| op.clone()).collect(),
            kept,
            job_shas,
            restore: options.restore,
            probation: None,
            started,
            first_restore: None,
            checkpoints: 0,
            restarts: 0,
            last_failure: None,
            narrowing: Narrowing::default(),
            remote,
            bad_inputs: Arc::default(),
        })
    }

    /// Runs attempts until one finishes or stops the job, or the job fails.
    fn run(
        &mut self,
        control: &Receiver<ControlRequest>,
        shutdown: &AtomicBool,
    ) -> Result<RunSummary, RunError> {
        loop {
            let attempt = Attempt {
                restore: self.restore,
                plan: &self.plan,
                swapped: &self.swapped,
                kept: &self.kept,
                control: Some(control),
                probation: self.probation.as_mut().map(|(p, _, _, _)| p),
                metrics: self.metrics.clone(),
                narrow: self.narrowing.start(&self.metrics),
                bad_inputs: self.bad_inputs.clone(),
                remote: self.remote.as_ref(),
            };
            let result = run_attempt(self.options, attempt, shutdown);
            if let Err(e) = &result
                && self.found_bad_input(e)
            {
                continue;
            }
            // A swap on probation whose attempt failed: roll back.
            if let Err(e) = &result
                && let Some((p, ..)) = self.probation.as_mut()
                && p.pending()
            {
                if p.revertible() {
                    self.roll_back(e);
                    continue;
                }
                // Some sink holds the new plugin's output: it stays.
                let (p, ..) = self.probation.take().expect("on probation");
                p.kept_after_delivery(e);
            }
            let result = match result {
                Err(e) => match self.narrow(&e) {
                    AfterFailure::Narrow => continue,
                    AfterFailure::Found => {
                        tracing::warn!("not restarting: {}", not_restarting(&e));
                        return Err(self.failed(e));
                    }
                    AfterFailure::Other => Err(e),
                },
                ok => ok,
            };
            let (summary, end) = match result {
                Ok(done) => done,
                Err(e) if restartable(&e) => {
                    if self.recurs(&e) {
                        tracing::warn!(
                            "not restarting: the attempt failed as the one before, in the same plugin, with no checkpoint completed since; a restart replays the same records into it"
                        );
                        return Err(self.failed(e));
                    }
                    self.wait_to_restart(e, shutdown)?;
                    continue;
                }
                Err(e) => {
                    if recurs_on_replay(&e) && self.plan.job().restart.delay(1).is_some() {
                        tracing::warn!("not restarting: {}", not_restarting(&e));
                    }
                    return Err(self.failed(e));
                }
            };
            self.first_restore.get_or_insert(summary.restored_from);
            self.checkpoints += summary.checkpoints;
            match end {
                AttemptEnd::Finished | AttemptEnd::Stopped => return Ok(self.ended(summary)),
                AttemptEnd::SwapAt {
                    checkpoint,
                    request,
                } => self.swap_at(checkpoint, request),
            }
        }
    }

    /// After the attempt of a swap on probation failed with `e`: puts the
    /// previous plugin back, to restart from the checkpoint of the swap.
    fn roll_back(&mut self, e: &RunError) {
        let (p, node, (plugin, wired), old_record) = self.probation.take().expect("on probation");
        tracing::warn!(
            "swap of `{}` failed, rolling back to the previous plugin: {e}",
            p.operator
        );
        let (operator, from) = (p.operator.clone(), p.from);
        p.rolled_back(e);
        self.plan.replace_operator(node, plugin, wired);
        record_plugins(&self.metrics.journal, &self.plan);
        match old_record {
            Some(r) => self.kept.insert(operator.clone(), r),
            None => self.kept.remove(&operator),
        };
        self.swapped.remove(&operator);
        self.restore = RestoreMode::Id(from);
    }

    /// After the attempt failed with `e`, a plugin failing on the records
    /// one source record made, of an operator whose `on_error` goes past
    /// bad records: learns which record it is, or that the next replay
    /// gives them one call each to find it, and replays narrowed again
    /// (not a restart). False when `e` is not that, or taught nothing new.
    fn found_bad_input(&mut self, e: &RunError) -> bool {
        let RunError::Task(TaskError::Process { error, batch }) = e else {
            return false;
        };
        let FailedBatch {
            operator,
            records,
            from: Some(from),
            record,
            ..
        } = &**batch
        else {
            return false;
        };
        if from.records != 1 || !error.repeats_on_replay() || !self.goes_past(operator) {
            return false;
        }
        let inputs = Arc::make_mut(&mut self.bad_inputs);
        let failure = (kind_of(error), error.to_string());
        let then = match inputs.learn(operator, from, (*records, *record), failure) {
            None => return false,
            Some(Learnt::Record) => "going past it",
            Some(Learnt::OneByOne) => "giving its records to the plugin one call each to find it",
        };
        let message = format!(
            "operator `{operator}` fails on a record of {from}: replaying from the last complete checkpoint, {then} (on_error)"
        );
        tracing::warn!("{message}: {error}");
        let journal = &self.metrics.journal;
        journal.event(EventKind::Restart, false, message);
        self.narrowing.again(&self.metrics);
        self.restore = RestoreMode::Latest;
        true
    }

    /// Whether operator `id`'s `on_error` goes past bad records.
    fn goes_past(&self, id: &str) -> bool {
        let config = self
            .plan
            .find(id)
            .and_then(|n| self.plan.node(n).operator());
        config.is_some_and(|c| c.on_error != OnError::Fail)
    }

    /// After the attempt failed with `e`: replays narrowed when `e` is a
    /// plugin failing on a batch of many records ([`narrow`](crate::run::narrow)), says so,
    /// and restarts from the last complete checkpoint.
    fn narrow(&mut self, e: &RunError) -> AfterFailure {
        let completed = self.metrics.checkpoints.completed.load(Ordering::Relaxed);
        let past = match e {
            RunError::Task(TaskError::Process { batch, .. }) => self.goes_past(&batch.operator),
            _ => false,
        };
        let may_restart = past || self.plan.job().restart.delay(1).is_some();
        let after = (self.narrowing).failed(e, &self.metrics, completed, may_restart);
        if after == AfterFailure::Narrow {
            let message = "replaying from the last complete checkpoint one record per batch, to find the record it fails on";
            tracing::warn!("attempt failed: {e}; {message}");
            let journal = &self.metrics.journal;
            journal.event(EventKind::Failure, true, format!("attempt failed: {e}"));
            journal.event(EventKind::Restart, false, message.to_string());
            self.restore = RestoreMode::Latest;
        }
        after
    }

    /// Whether `e`, a plugin's failure, repeats the last attempt's with no
    /// checkpoint completed since (the same records into the same state);
    /// remembers it for the next attempt. A call that ran out of time is
    /// not taken to recur: the machine may have been slow.
    fn recurs(&mut self, e: &RunError) -> bool {
        // Every attempt's, a failed one's too (`self.checkpoints` counts
        // those of attempts that ended well).
        let completed = self.metrics.checkpoints.completed.load(Ordering::Relaxed);
        let seen = (e.to_string(), completed);
        let plugin = instance_error(e).is_some_and(InstanceError::repeats_on_replay);
        let again = plugin && self.last_failure.as_ref() == Some(&seen);
        self.last_failure = Some(seen);
        again
    }

    /// After an attempt failed with `e`, which a restart may cure: waits as
    /// the job's restart strategy says, to restart from the last complete
    /// checkpoint; or gives up when the strategy says no more, or when a
    /// stop is requested (`shutdown`) before or while it waits: a stopped
    /// job (a worker's task handed over or lost) runs no further attempt.
    fn wait_to_restart(&mut self, e: RunError, shutdown: &AtomicBool) -> Result<(), RunError> {
        let stopping = || shutdown.load(Ordering::Relaxed);
        if stopping() {
            tracing::warn!("not restarting: a stop was requested");
            return Err(self.failed(e));
        }
        self.restarts += 1;
        let restart = &self.plan.job().restart;
        let Some(wait) = restart.delay(self.restarts) else {
            let e = if self.restarts > 1 {
                RunError::GaveUp {
                    restarts: self.restarts - 1,
                    error: Box::new(e),
                }
            } else {
                e
            };
            return Err(self.failed(e));
        };
        let journal = &self.metrics.journal;
        journal.event(EventKind::Failure, true, format!("attempt failed: {e}"));
        let message = format!(
            "restarting from the last complete checkpoint in {} ms (restart {} of {})",
            wait.as_millis(),
            self.restarts,
            restart.attempts()
        );
        tracing::warn!("attempt failed: {e}; {message}");
        journal.event(EventKind::Restart, false, message);
        // Counted after its events are journaled: a reader that sees the
        // count (Acquire) finds the failure and the restart in the journal.
        (self.metrics.checkpoints.restarts).fetch_add(1, Ordering::Release);
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if stopping() {
                tracing::warn!("not restarting: a stop was requested");
                return Err(self.failed(e));
            }
            std::thread::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(STOP_POLL),
            );
        }
        self.restore = RestoreMode::Latest;
        Ok(())
    }

    /// Records that the job failed with `e`, and returns `e`.
    fn failed(&self, e: RunError) -> RunError {
        let journal = &self.metrics.journal;
        journal.event(EventKind::Failure, true, format!("the job failed: {e}"));
        e
    }

    /// The summary of the run, whose last attempt ended the job with
    /// `summary`; confirms a swap still on probation.
    fn ended(&mut self, summary: RunSummary) -> RunSummary {
        if let Some((p, _, _, _)) = self.probation.take() {
            p.job_ended();
        }
        RunSummary {
            restored_from: self.first_restore.flatten(),
            checkpoints: self.checkpoints,
            duration: self.started.elapsed(),
            restarts: self.restarts,
            ..summary
        }
    }

    /// After an attempt stopped at `checkpoint` for the swap `request`:
    /// swaps the plugin in, on probation, to restart from that checkpoint.
    fn swap_at(&mut self, checkpoint: u64, request: SwapRequest) {
        self.restore = RestoreMode::Id(checkpoint);
        let swap = SwapIn {
            plan: &mut self.plan,
            kept: &mut self.kept,
            job_shas: &self.job_shas,
        };
        if let Some(on) = swap.swap_in(self.runtime, checkpoint, request) {
            self.swapped.insert(on.0.operator.clone());
            self.probation = Some(on);
            record_plugins(&self.metrics.journal, &self.plan);
        }
    }
}

/// What a live swap changes: the plan's plugins, with the swap records.
struct SwapIn<'s, 'a> {
    plan: &'s mut Plan<'a>,
    kept: &'s mut Kept,
    job_shas: &'s JobShas,
}

impl SwapIn<'_, '_> {
    /// Loads the plugin `request` names and puts it in the plan (with its
    /// record in `kept`), to run from `checkpoint` on probation. A plugin
    /// that fails to load is refused, and the job continues with the
    /// previous one.
    fn swap_in(
        self,
        runtime: &Runtime,
        checkpoint: u64,
        request: SwapRequest,
    ) -> Option<OnProbation> {
        let node = self.plan.find(&request.operator);
        let node = node.expect("an operator of the job: checked by the driver");
        let op = self.plan.node(node).operator().expect("an operator");
        match load_operator(self.plan.job(), runtime, op, &request.plugin) {
            Err(e) => {
                request.refuse(format!(
                    "swap refused, the job continues with the previous plugin: {e}"
                ));
                None
            }
            Ok((plugin, wired)) => {
                let record = kept::record(&plugin, &request.plugin, job_sha(self.job_shas, &op.id));
                let old_record = match record {
                    Some(r) => self.kept.insert(op.id.clone(), r),
                    None => self.kept.remove(&op.id),
                };
                let was = self.plan.plugin(node).expect("an operator's plugin").info();
                let warnings = swap::differences(was, plugin.info());
                let old = self.plan.replace_operator(node, plugin, wired);
                tracing::info!(
                    "swapping `{}` to {} at checkpoint {checkpoint}",
                    request.operator,
                    request.plugin.display()
                );
                for w in &warnings {
                    tracing::warn!("swap of `{}`: {w}", request.operator);
                }
                let p = Probation::new(checkpoint, request, warnings);
                Some((p, node, old, old_record))
            }
        }
    }
}

/// The sha256 of operator `op`'s job-file plugin when the run started.
fn job_sha<'s>(job_shas: &'s JobShas, op: &str) -> Option<&'s str> {
    job_shas.get(op).and_then(|sha| sha.as_deref())
}

/// Records the plugin each operator of `plan` runs in `journal`.
fn record_plugins(journal: &Journal, plan: &Plan<'_>) {
    for (_, op, plugin) in plan.operator_plugins() {
        let info = plugin.info();
        let record = PluginRecord {
            name: info.name.clone(),
            version: info.version.clone(),
            sha256: plugin.sha256().to_string(),
            path: plugin.path().display().to_string(),
            size: plugin.size(),
            flat: plugin.flat(),
            state_version: info.state_version,
        };
        journal.plugin(&op.id, record);
    }
}

/// Whether restarting from a checkpoint can help: failures while running
/// can; failures to load, validate, open or restore cannot, nor a record a
/// plugin called invalid ([`recurs_on_replay`]).
fn restartable(e: &RunError) -> bool {
    match instance_error(e) {
        Some(
            InstanceError::Trap { hook, .. }
            | InstanceError::Limit { hook, .. }
            | InstanceError::Returned { hook, .. },
        ) if hook.sets_up() => false,
        _ if recurs_on_replay(e) => false,
        _ => matches!(e, RunError::Task(_)),
    }
}

/// Why a plugin's failure `e`, found to recur on one record, is not
/// restarted.
fn not_restarting(e: &RunError) -> &'static str {
    if recurs_on_replay(e) {
        "a plugin that calls a record invalid does so again when a restart replays it"
    } else {
        "replayed one record per batch, the plugin fails on the same record again"
    }
}

/// Whether `e` is a plugin's `invalid-input` for a record: plugins are
/// deterministic, and a restart replays the same records into the same
/// state, so the plugin refuses the same record again.
fn recurs_on_replay(e: &RunError) -> bool {
    matches!(
        instance_error(e),
        Some(InstanceError::Returned {
            error: PluginReturned {
                kind: ReturnedKind::InvalidInput,
                ..
            },
            ..
        })
    )
}

/// The failed plugin call behind `e`, if a plugin call failed.
fn instance_error(e: &RunError) -> Option<&InstanceError> {
    match e {
        RunError::Task(TaskError::Instance(error) | TaskError::Process { error, .. }) => {
            Some(error)
        }
        _ => None,
    }
}
