//! Savepoints of a running job: a `weir savepoint` request
//! ([`SavepointRequest`], carried out by the driver once a checkpoint taken
//! for it is committed by every sink), and starting a job from a savepoint
//! (`--from-savepoint`, [`import`]).
//!
//! Invariants:
//! - A job starts from a savepoint only in a state directory with no
//!   checkpoint: the savepoint becomes its first checkpoint (same id, so
//!   sink epochs and message ids keep increasing), derived to the job's
//!   shape; every later restart of the job restores its own checkpoints.
//! - State is matched to the job by id. An operator, source or sink of the
//!   job that the savepoint lacks starts empty; state the job has no place
//!   for is refused unless `--allow-non-restored-state`, and then recorded
//!   as dropped in the derived checkpoint.

use std::path::PathBuf;

use crossbeam_channel::Sender;

use crate::config::Job;
use crate::dataflow::partition::KEY_GROUPS;
use crate::run::error::RunError;
use crate::run::kept::{Kept, operators_meta};
use crate::run::options::{FromSavepoint, RunOptions};
use crate::run::plugins::LoadedOperator;
use crate::run::restore::check_state_version;
use crate::store::{CheckpointMeta, CheckpointStore, Derivation, Move, Savepoint};
use crate::time::unix_ms;

/// A `weir savepoint` request from the control socket.
#[derive(Debug)]
pub(crate) struct SavepointRequest {
    /// Where to write it; `None` for `<state dir>/savepoints/savepoint-<id>`.
    pub out: Option<PathBuf>,
    /// Stop the job once it is written.
    pub stop: bool,
    /// Where the answer goes.
    pub reply: Sender<Result<String, String>>,
}

impl SavepointRequest {
    /// Answers the request.
    pub(crate) fn answer(self, result: Result<String, String>) {
        let _ = self.reply.send(result);
    }
}

/// Writes the savepoint `from` names into the job's (empty) state directory
/// as its first checkpoint, shaped to `job` (whose operators run
/// `plugins`), for the first attempt to restore.
pub(crate) fn import(
    job: &Job,
    options: &RunOptions,
    plugins: &[LoadedOperator],
    from: &FromSavepoint,
) -> Result<(), RunError> {
    let refuse = |message: String| RunError::Savepoint {
        job: job.name.clone(),
        dir: from.dir.clone(),
        message,
    };
    let sp = Savepoint::open(&from.dir)?;
    let state_dir = options.state_dir(job);
    let store = CheckpointStore::open(&state_dir, &job.name)?;
    if let Some(latest) = store.latest()? {
        return Err(refuse(format!(
            "--from-savepoint starts a job in a fresh state directory, and {} already holds checkpoint {} of it: run without --from-savepoint to resume it, or pass an empty --state-dir",
            state_dir.display(),
            latest.id
        )));
    }
    let old = &sp.meta;
    if old.key_groups != KEY_GROUPS {
        return Err(refuse(format!(
            "it uses {} key groups, this Weir uses {KEY_GROUPS}",
            old.key_groups
        )));
    }
    let mut derivation = Derivation {
        checkpoint: old.id,
        savepoint: Some(from.dir.display().to_string()),
        ..Derivation::default()
    };
    // The job's plugins, each with the state version its state was saved in.
    let mut operators = operators_meta(job, plugins, &Kept::new());
    let mut moves = Vec::new();
    for (op, (plugin, _)) in job.operators.iter().zip(plugins) {
        let Some(m) = old.operators.get(&op.id) else {
            tracing::info!(
                target: crate::NOTICE,
                "operator `{}` is not in the savepoint: it starts with empty state",
                op.id
            );
            continue;
        };
        check_state_version(&op.id, m, plugin).map_err(refuse)?;
        if m.sha256 != plugin.sha256() {
            tracing::info!(
                target: crate::NOTICE,
                "operator `{}`: the savepoint's state of {} {} (state version {}) is restored into {} {}, which migrates it as with --swap",
                op.id,
                m.plugin_name,
                m.plugin_version,
                m.state_version,
                plugin.info().name,
                plugin.info().version
            );
        }
        if m.parallelism != op.parallelism {
            derivation
                .rescaled
                .insert(op.id.clone(), [m.parallelism, op.parallelism]);
        }
        moves.push(Move {
            operator: op.id.clone(),
            from: m.parallelism,
            to: op.parallelism,
        });
        if let Some(meta) = operators.get_mut(&op.id) {
            meta.state_version = m.state_version;
        }
    }
    let mut dropped = missing("operator", old.operators.keys(), |id| {
        job.operators.iter().any(|o| o.id == id)
    });
    dropped.extend(missing("source", old.sources.keys(), |id| {
        job.sources.iter().any(|s| s.id == id)
    }));
    dropped.extend(missing("sink", old.sinks.keys(), |id| {
        job.sinks.iter().any(|s| s.id == id)
    }));
    if !dropped.is_empty() && !from.allow_non_restored_state {
        return Err(refuse(format!(
            "it holds state of {}, which job `{}` does not have; pass --allow-non-restored-state to start without that state",
            dropped.join(", "),
            job.name
        )));
    }
    for what in &dropped {
        tracing::warn!(
            "--allow-non-restored-state: the savepoint's state of {what} is not restored"
        );
    }
    derivation.dropped = dropped;
    let meta = CheckpointMeta {
        id: old.id,
        job: job.name.clone(),
        started_at_ms: unix_ms(std::time::SystemTime::now()),
        duration_ms: 0,
        alignment_ms: 0,
        pause_ms: None,
        bytes_written: 0,
        state_keys: 0,
        key_groups: KEY_GROUPS,
        sources: (old.sources.iter())
            .filter(|(id, _)| job.sources.iter().any(|s| &s.id == *id))
            .map(|(id, v)| (id.clone(), v.clone()))
            .collect(),
        operators,
        sinks: (old.sinks.iter())
            .filter(|(id, _)| job.sinks.iter().any(|s| &s.id == *id))
            .map(|(id, v)| (id.clone(), v.clone()))
            .collect(),
        final_checkpoint: old.final_checkpoint,
        unaligned: old.unaligned,
        inflight_bytes: 0,
        derived: Some(derivation),
    };
    store
        .derive(
            Some(&sp.store),
            old.id,
            &meta,
            &moves,
            job.checkpoint.retain,
        )
        .map_err(|e| refuse(e.to_string()))?;
    tracing::info!(
        target: crate::NOTICE,
        "job `{}` starts from savepoint {} (checkpoint {} of job `{}`)",
        job.name,
        from.dir.display(),
        old.id,
        old.job
    );
    Ok(())
}

/// `kind `id`` for each of `ids` the job does not have.
fn missing<'a>(
    kind: &str,
    ids: impl Iterator<Item = &'a String>,
    has: impl Fn(&str) -> bool,
) -> Vec<String> {
    ids.filter(|id| !has(id))
        .map(|id| format!("{kind} `{id}`"))
        .collect()
}
