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

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crossbeam_channel::Sender;

use crate::config::Job;
use crate::dataflow::partition::KEY_GROUPS;
use crate::plan::Plan;
use crate::run::error::RunError;
use crate::run::kept::{Kept, operators_meta};
use crate::run::options::{FromSavepoint, RunOptions};
use crate::run::restore::{changed_sinks, check_same_plugin, check_state_version};
use crate::store::{CheckpointMeta, CheckpointStore, Derivation, Move, OperatorMeta, Savepoint};

/// What copies a savepoint written locally to an object store.
pub(crate) type CopyOut = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// A new empty folder under `state_dir` for a savepoint on its way to an
/// object store.
pub(crate) fn tempfile_dir(state_dir: &std::path::Path) -> std::io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = state_dir.join(format!("savepoint-upload-{nanos}"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

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
/// as its first checkpoint, shaped to `plan` (the job with its operators'
/// plugins), for the first attempt to restore.
pub(crate) fn import(
    plan: &Plan<'_>,
    options: &RunOptions,
    from: &FromSavepoint,
) -> Result<(), RunError> {
    let job = plan.job();
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
    let swapped: BTreeSet<&str> = options.swaps.iter().map(|(op, _)| op.as_str()).collect();
    let shaped = shape_operators(plan, old, &swapped).map_err(refuse)?;
    let derivation = Derivation {
        checkpoint: old.id,
        savepoint: Some(from.dir.display().to_string()),
        rescaled: shaped.rescaled,
        dropped: dropped_state(job, old, from.allow_non_restored_state).map_err(refuse)?,
    };
    let meta = derived_meta(job, old, shaped.operators, derivation);
    let retain = job.checkpoint.retain;
    (store.derive(Some(&sp.store), old.id, &meta, &shaped.moves, retain))
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

/// The savepoint's operators shaped to the job's.
struct Shaped {
    /// What the derived checkpoint records of the job's operators.
    operators: BTreeMap<String, OperatorMeta>,
    /// How each operator's state moves to the job's parallelism.
    moves: Vec<Move>,
    /// The operators whose parallelism changed: id -> `[from, to]`.
    rescaled: BTreeMap<String, [u32; 2]>,
}

/// Matches the operators of `plan` to the savepoint `old` by id: each
/// keeps the state version its state was saved in and moves to the job's
/// parallelism; one the savepoint lacks starts empty. Refuses state a
/// plugin cannot read, and another plugin than the savepoint's unless
/// `swapped` (`--swap`) names the operator.
fn shape_operators(
    plan: &Plan<'_>,
    old: &CheckpointMeta,
    swapped: &BTreeSet<&str>,
) -> Result<Shaped, String> {
    let mut shaped = Shaped {
        operators: operators_meta(plan, &Kept::new()),
        moves: Vec::new(),
        rescaled: BTreeMap::new(),
    };
    for (_, op, plugin) in plan.operator_plugins() {
        let Some(m) = old.operators.get(&op.id) else {
            tracing::info!(
                target: crate::NOTICE,
                "operator `{}` is not in the savepoint: it starts with empty state",
                op.id
            );
            continue;
        };
        check_state_version(&op.id, m, plugin)?;
        if !swapped.contains(op.id.as_str()) {
            let otherwise = "point the job file's plugin at the one the savepoint ran";
            check_same_plugin(op, m, plugin, "the savepoint", otherwise)?;
        } else if m.sha256 != plugin.sha256() {
            tracing::info!(
                target: crate::NOTICE,
                "operator `{}`: the savepoint's state of {} {} (state version {}) is restored into {} {}, which migrates it (--swap)",
                op.id,
                m.plugin_name,
                m.plugin_version,
                m.state_version,
                plugin.info().name,
                plugin.info().version
            );
        }
        if m.parallelism != op.parallelism {
            (shaped.rescaled).insert(op.id.clone(), [m.parallelism, op.parallelism]);
        }
        shaped.moves.push(Move {
            operator: op.id.clone(),
            from: m.parallelism,
            to: op.parallelism,
        });
        if let Some(meta) = shaped.operators.get_mut(&op.id) {
            meta.state_version = m.state_version;
        }
    }
    Ok(shaped)
}

/// The savepoint's state `job` has no place for (`operator `x``, ...):
/// refused unless `allow` (`--allow-non-restored-state`), else logged.
fn dropped_state(job: &Job, old: &CheckpointMeta, allow: bool) -> Result<Vec<String>, String> {
    let mut dropped = missing("operator", old.operators.keys(), |id| {
        job.operators.iter().any(|o| o.id == id)
    });
    dropped.extend(missing("source", old.sources.keys(), |id| {
        job.sources.iter().any(|s| s.id == id)
    }));
    dropped.extend(missing("sink", old.sinks.keys(), |id| {
        job.sinks.iter().any(|s| s.id == id)
    }));
    dropped.extend(changed_sinks(job, old).map(|(id, was, now)| {
        format!("sink `{id}` (a {was} sink in the savepoint, a {now} sink now)")
    }));
    if !dropped.is_empty() && !allow {
        return Err(format!(
            "it holds state of {}, which job `{}` does not have; pass --allow-non-restored-state to start without that state",
            dropped.join(", "),
            job.name
        ));
    }
    for what in &dropped {
        tracing::warn!(
            "--allow-non-restored-state: the savepoint's state of {what} is not restored"
        );
    }
    Ok(dropped)
}

/// The first checkpoint of `job` derived from the savepoint's `old`: its
/// id, source offsets and sink commit infos (of the job's sources and
/// sinks), with `operators` and `derivation`.
fn derived_meta(
    job: &Job,
    old: &CheckpointMeta,
    operators: BTreeMap<String, OperatorMeta>,
    derivation: Derivation,
) -> CheckpointMeta {
    CheckpointMeta {
        sources: (old.sources.iter())
            .filter(|(id, _)| job.sources.iter().any(|s| &s.id == *id))
            .map(|(id, v)| (id.clone(), v.clone()))
            .collect(),
        operators,
        sinks: (old.sinks.iter())
            .filter(|(id, _)| job.sinks.iter().any(|s| &s.id == *id))
            .filter(|(id, _)| !changed_sinks(job, old).any(|(changed, ..)| changed == *id))
            .map(|(id, v)| (id.clone(), v.clone()))
            .collect(),
        final_checkpoint: old.final_checkpoint,
        unaligned: old.unaligned,
        derived: Some(derivation),
        ..CheckpointMeta::new(old.id, &job.name)
    }
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
