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
//!   are not retried.
//! - an operator keeps the plugin it was swapped to across restarts and
//!   crashes: its checkpoints record the swap and the state dir keeps a copy
//!   (`kept`), which the next `weir run` restores with unless `--swap` or an
//!   edited job file says otherwise.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use crossbeam_channel::bounded;

use crate::config::Job;
use crate::metrics::{EventKind, JobMetrics, Journal, PluginRecord};
use crate::run::attempt::{Attempt, AttemptEnd, run_attempt};
use crate::run::control::ControlSocket;
use crate::run::error::RunError;
use crate::run::kept::{self, Kept};
use crate::run::options::{RestoreMode, RunOptions};
use crate::run::plugins::{LoadedOperator, load_operator, load_plugins, warn_unconsumed_outputs};
use crate::run::savepoint;
use crate::run::summary::RunSummary;
use crate::run::swap::{Probation, SwapRequest};
use crate::store::SwappedPlugin;
use crate::threads::TaskError;
use crate::wasm::InstanceError;
use crate::wasm::Runtime;

/// A swap on probation: its probation, the swapped operator's index, and
/// the plugin it replaced with that plugin's swap record (to roll back to).
type OnProbation = (Probation, usize, LoadedOperator, Option<SwappedPlugin>);

/// Runs `job` to its end (or a stop), through swaps and restarts.
pub(crate) fn supervise(
    job: &Job,
    runtime: &Runtime,
    options: &RunOptions,
    shutdown: &AtomicBool,
) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    // Resolved once: every attempt and the control socket use one folder.
    let options = &RunOptions {
        state_dir: Some(options.state_dir(job)),
        ..options.clone()
    };
    let mut swapped: BTreeSet<String> = options.swaps.iter().map(|(op, _)| op.clone()).collect();
    if !swapped.is_empty() && options.restore == RestoreMode::None {
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
    let job_shas = kept::job_file_shas(job);
    let restored = kept::restored_swaps(job, options, &job_shas)?;
    let swaps: Vec<(String, PathBuf)> = (options.swaps.iter().cloned())
        .chain(
            restored
                .iter()
                .map(|(op, copy, _)| (op.clone(), copy.clone())),
        )
        .collect();
    let mut plugins = load_plugins(job, runtime, &swaps)?;
    warn_unconsumed_outputs(job, &plugins);
    record_plugins(&metrics.journal, job, &plugins);
    let mut kept: Kept = restored
        .into_iter()
        .map(|(op, _, record)| (op, record))
        .collect();
    for (op, from) in &options.swaps {
        let index = operator_index(job, op);
        if let Some(r) = kept::record(&plugins[index].0, from, job_shas[index].as_deref()) {
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
        savepoint::import(job, options, &plugins, from)?;
    }

    let mut restore = options.restore;
    let mut probation: Option<OnProbation> = None;
    // The checkpoint the first attempt resumed from, for the summary.
    let mut first_restore: Option<Option<u64>> = None;
    let mut total_checkpoints = 0;
    let mut restarts = 0;
    loop {
        let attempt = Attempt {
            restore,
            plugins: &plugins,
            swapped: &swapped,
            kept: &kept,
            control: Some(&control_rx),
            probation: probation.as_mut().map(|(p, _, _, _)| p),
            metrics: metrics.clone(),
        };
        let result = run_attempt(job, options, attempt, shutdown);
        // A swap on probation whose attempt failed: roll back.
        if let Err(e) = &result
            && probation.as_ref().is_some_and(|(p, _, _, _)| p.pending())
        {
            let (p, index, old, old_record) = probation.take().expect("checked above");
            tracing::warn!(
                "swap of `{}` failed, rolling back to the previous plugin: {e}",
                p.operator
            );
            let (operator, from) = (p.operator.clone(), p.from);
            p.rolled_back(e);
            plugins[index] = old;
            record_plugins(&metrics.journal, job, &plugins);
            match old_record {
                Some(r) => kept.insert(operator.clone(), r),
                None => kept.remove(&operator),
            };
            swapped.remove(&operator);
            restore = RestoreMode::Id(from);
            continue;
        }
        let (summary, end) = match result {
            Ok(done) => done,
            Err(e) if restartable(&e) => {
                restarts += 1;
                let Some(wait) = job.restart.delay(restarts) else {
                    let e = if restarts > 1 {
                        RunError::GaveUp {
                            restarts: restarts - 1,
                            error: Box::new(e),
                        }
                    } else {
                        e
                    };
                    metrics
                        .journal
                        .event(EventKind::Failure, true, format!("the job failed: {e}"));
                    return Err(e);
                };
                metrics
                    .journal
                    .event(EventKind::Failure, true, format!("attempt failed: {e}"));
                let restart = format!(
                    "restarting from the last complete checkpoint in {} ms (restart {restarts} of {})",
                    wait.as_millis(),
                    job.restart.attempts()
                );
                tracing::warn!("attempt failed: {e}; {restart}");
                metrics.journal.event(EventKind::Restart, false, restart);
                std::thread::sleep(wait);
                restore = RestoreMode::Latest;
                continue;
            }
            Err(e) => {
                metrics
                    .journal
                    .event(EventKind::Failure, true, format!("the job failed: {e}"));
                return Err(e);
            }
        };
        first_restore.get_or_insert(summary.restored_from);
        total_checkpoints += summary.checkpoints;
        match end {
            AttemptEnd::Finished | AttemptEnd::Stopped => {
                if let Some((p, _, _, _)) = probation.take() {
                    p.job_ended();
                }
                return Ok(RunSummary {
                    restored_from: first_restore.flatten(),
                    checkpoints: total_checkpoints,
                    duration: started.elapsed(),
                    restarts,
                    ..summary
                });
            }
            AttemptEnd::SwapAt {
                checkpoint,
                request,
            } => {
                restore = RestoreMode::Id(checkpoint);
                let swap = SwapIn {
                    plugins: &mut plugins,
                    kept: &mut kept,
                    job_shas: &job_shas,
                };
                if let Some(on) = swap.swap_in(job, runtime, checkpoint, request) {
                    swapped.insert(on.0.operator.clone());
                    probation = Some(on);
                    record_plugins(&metrics.journal, job, &plugins);
                }
            }
        }
    }
}

/// What a live swap changes: the plugins, with the swap records.
struct SwapIn<'a> {
    plugins: &'a mut [LoadedOperator],
    kept: &'a mut Kept,
    job_shas: &'a [Option<String>],
}

impl SwapIn<'_> {
    /// Loads the plugin `request` names and puts it in `plugins` (with its
    /// record in `kept`), to run from `checkpoint` on probation. A plugin
    /// that fails to load is refused, and the job continues with the
    /// previous one.
    fn swap_in(
        self,
        job: &Job,
        runtime: &Runtime,
        checkpoint: u64,
        request: SwapRequest,
    ) -> Option<OnProbation> {
        let index = operator_index(job, &request.operator);
        let op = &job.operators[index];
        match load_operator(job, runtime, op, &request.plugin) {
            Err(e) => {
                request.refuse(format!(
                    "swap refused, the job continues with the previous plugin: {e}"
                ));
                None
            }
            Ok(new) => {
                let record = kept::record(&new.0, &request.plugin, self.job_shas[index].as_deref());
                let old_record = match record {
                    Some(r) => self.kept.insert(op.id.clone(), r),
                    None => self.kept.remove(&op.id),
                };
                let old = std::mem::replace(&mut self.plugins[index], new);
                tracing::info!(
                    "swapping `{}` to {} at checkpoint {checkpoint}",
                    request.operator,
                    request.plugin.display()
                );
                let p = Probation {
                    from: checkpoint,
                    operator: request.operator,
                    reply: Some(request.reply),
                };
                Some((p, index, old, old_record))
            }
        }
    }
}

/// Records the plugin each operator of `job` runs in `journal`.
fn record_plugins(journal: &Journal, job: &Job, plugins: &[LoadedOperator]) {
    for (op, (plugin, _)) in job.operators.iter().zip(plugins) {
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

/// The index of operator `id` (one the job has: checked by `load_plugins`
/// and the driver).
fn operator_index(job: &Job, id: &str) -> usize {
    job.operators
        .iter()
        .position(|o| o.id == id)
        .expect("an operator of the job")
}

/// Whether restarting from a checkpoint can help: failures while running
/// can; failures to load, validate, open or restore cannot.
fn restartable(e: &RunError) -> bool {
    match e {
        RunError::Task(TaskError::Instance(
            InstanceError::Trap { hook, .. }
            | InstanceError::Limit { hook, .. }
            | InstanceError::Returned { hook, .. },
        )) => !hook.sets_up(),
        RunError::Task(_) => true,
        _ => false,
    }
}
