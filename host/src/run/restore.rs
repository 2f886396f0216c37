//! The restore phase of an attempt: open the store, choose the checkpoint
//! to resume from, refuse one that does not fit the job
//! ([`check_restorable`]), and delete the checkpoints after it.
//!
//! A damaged store is refused, except with `--restore none`, which sets the
//! damaged file aside (renamed, never deleted) and starts a new store.
//!
//! Invariants:
//! - A final checkpoint is resumed only when a replay queue holds dead
//!   letters past it; otherwise the job is done.
//! - Once [`prepare`] returns a [`RestorePoint`], the store holds no
//!   checkpoint newer than the restored one, so new checkpoint ids continue
//!   after it (`first_id`) and build on its state.
//! - A restored checkpoint matches the job: key groups, the set of
//!   operators and each plugin's sha256 (except for swapped operators); a
//!   plugin never reads a state version newer than it knows.
//! - **Rescale on restore.** When operators' parallelism changed, the
//!   checkpoint is not restored as is: its state is redistributed by key
//!   group into a derived checkpoint (the next id, [`CheckpointStore::derive`])
//!   with the job's parallelism, and the attempt restores that one. The
//!   derived checkpoint keeps the original's source offsets and sink commit
//!   info, so the output and the input resume exactly where they were.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::config::{Job, OperatorConfig};
use crate::dataflow::partition::KEY_GROUPS;
use crate::failpoint::{self, Failpoint};
use crate::plan::Plan;
use crate::remote::{Manifest, RemoteStore, sync_state_dir};
use crate::run::commit_point::CommitPoint;
use crate::run::error::RunError;
use crate::run::options::{RestoreMode, RunOptions};
use crate::store::{CheckpointMeta, CheckpointStore, Derivation, Move, OperatorMeta, StoreError};
use crate::time::unix_ms;

/// Where an attempt starts.
pub(crate) enum Prepared {
    /// The chosen checkpoint is final: the job is done.
    AlreadyFinished(u64),
    /// Start from this point.
    Resume(Box<RestorePoint>),
}

/// The opened store and the checkpoint an attempt resumes from.
pub(crate) struct RestorePoint {
    /// The state directory.
    pub state_dir: PathBuf,
    /// The job's checkpoint store.
    pub store: CheckpointStore,
    /// The checkpoint to restore; `None` to start from scratch.
    pub checkpoint: Option<CheckpointMeta>,
    /// The id of the attempt's first checkpoint.
    pub first_id: u64,
    /// The object store's manifest of the restored checkpoint, if the job
    /// has an object store holding any.
    pub manifest: Option<Manifest>,
}

/// Opens the store of `plan`'s job and prepares it to resume from the
/// checkpoint `mode` names. `swapped` operators may run another plugin than
/// the checkpoint's. With an object store (`remote`), the checkpoint is one
/// it has a manifest of, fetched into the state directory when missing
/// there ([`sync_state_dir`]); `--restore none` empties it.
pub(crate) fn prepare(
    plan: &Plan<'_>,
    options: &RunOptions,
    (mode, remote): (RestoreMode, Option<&RemoteStore>),
    swapped: &BTreeSet<String>,
) -> Result<Prepared, RunError> {
    let job = plan.job();
    let state_dir = options.state_dir(job);
    // The newest id of a manifest the commit point's restore dropped.
    let mut dropped_upto = None;
    let (mode, manifest) = match remote {
        Some(remote) if mode == RestoreMode::None => {
            tracing::info!(
                "--restore none: deleting the checkpoints in {}",
                remote.url()
            );
            remote.clear()?;
            (mode, None)
        }
        Some(remote) => {
            let picked = match (mode, &options.commit_point) {
                (RestoreMode::Id(id), _) => Picked::Committed { id, dropped: None },
                (_, Some(point)) => committed(&job.name, remote, &**point)?,
                _ => Picked::Newest,
            };
            let (id, start_over) = match picked {
                Picked::Committed { id, dropped } => {
                    dropped_upto = dropped;
                    (Some(id), false)
                }
                Picked::Newest => (None, false),
                Picked::Nothing { dropped } => {
                    dropped_upto = dropped;
                    (None, true)
                }
            };
            if start_over {
                (RestoreMode::None, None)
            } else {
                let manifest = sync_state_dir(remote, &state_dir, &job.name, id)?;
                let mode = manifest.as_ref().map_or(mode, |m| RestoreMode::Id(m.id));
                (mode, manifest)
            }
        }
        None => (mode, None),
    };
    // Ids of manifests dropped above, or written since the listing by a
    // writer that lost the job, are never given again.
    let seen = match remote {
        Some(remote) => remote.manifest_ids()?.last().copied().max(dropped_upto),
        None => None,
    };
    let store = match CheckpointStore::open(&state_dir, &job.name) {
        Err(StoreError::Corrupt { path, message }) if mode == RestoreMode::None => {
            set_aside(&path, &message)?;
            CheckpointStore::open(&state_dir, &job.name)?
        }
        opened => opened?,
    };
    let checkpoint = choose(job, &state_dir, &store, mode)?;
    let finished = checkpoint.as_ref().filter(|m| m.final_checkpoint);
    if let Some(meta) = finished.filter(|m| replays_pending(job, &state_dir, m)) {
        tracing::info!(
            "job `{}` finished at checkpoint {}; it resumes from there for the dead letters queued for replay",
            job.name,
            meta.id
        );
    } else if let Some(meta) = finished {
        tracing::warn!(
            "job `{}` already finished (checkpoint {} is final); nothing to do. Run with `--restore none` to process the input again",
            job.name,
            meta.id
        );
        return Ok(Prepared::AlreadyFinished(meta.id));
    }
    if let Some(meta) = &checkpoint {
        check_restorable(plan, meta, swapped)?;
        store.truncate_after(meta.id)?;
    }
    let checkpoint = match checkpoint {
        Some(meta) => Some(rescale(job, &store, meta)?),
        None => None,
    };
    if let Some(seen) = seen {
        store.reserve_ids_through(seen)?;
    }
    let first_id = store.next_id()?;
    if let Some(meta) = &checkpoint {
        tracing::info!(
            "restoring checkpoint {} from {}",
            meta.id,
            state_dir.display()
        );
    }
    Ok(Prepared::Resume(Box::new(RestorePoint {
        state_dir,
        store,
        checkpoint,
        first_id,
        manifest,
    })))
}

/// Whether a replay queue of `job` in `state_dir` holds dead letters past
/// the offset its source has in checkpoint `meta` (a queue that cannot be
/// read does: the run reports why).
fn replays_pending(job: &Job, state_dir: &std::path::Path, meta: &CheckpointMeta) -> bool {
    (job.sources.iter()).any(|s| {
        let Some(operator) = s.replays() else {
            return false;
        };
        let path = crate::connectors::replay::queue_path(state_dir, operator);
        crate::connectors::replay::pending(&path, meta.sources.get(&s.id)).unwrap_or(true)
    })
}

/// What a restore with a commit point takes.
#[derive(Debug, PartialEq, Eq)]
enum Picked {
    /// The committed checkpoint `id`; `dropped`: the newest id of the
    /// manifests after it, deleted.
    Committed { id: u64, dropped: Option<u64> },
    /// Nothing committed although several manifests exist: the commits
    /// expired (a checkpoint is triggered only once the one before is
    /// committed). The newest manifest, each being a whole checkpoint.
    Newest,
    /// Nothing ever committed: the job starts over, after deleting the one
    /// manifest, `dropped`, if any (a sink that writes into the commit
    /// point's transactions lost its output with them), and ignoring the
    /// local checkpoints, which never had a manifest.
    Nothing { dropped: Option<u64> },
}

/// The checkpoint a job with a commit point restores: the committed one,
/// after deleting the manifests after it (written, never committed:
/// nothing of them reached a sink). With nothing committed, a lone
/// manifest was never committed either and is deleted ([`Picked::Nothing`]);
/// several mean the commits expired ([`Picked::Newest`]).
fn committed(job: &str, remote: &RemoteStore, point: &dyn CommitPoint) -> Result<Picked, RunError> {
    let failed = |message: String| RunError::CommitPoint {
        job: job.to_owned(),
        message,
    };
    let committed = (point.committed())
        .map_err(|m| failed(format!("reading its committed checkpoint failed: {m}")))?;
    failpoint::hit(Failpoint::RestoreAfterCommitRead);
    // Listed before the claim that allows deleting any of them.
    let ids = remote.manifest_ids()?;
    let claim = || {
        (point.claim(committed))
            .map_err(|m| failed(format!("not restoring (and deleting no manifest): {m}")))
    };
    let Some(c) = committed else {
        return match ids[..] {
            [] => Ok(Picked::Nothing { dropped: None }),
            [only] => {
                claim()?;
                tracing::warn!(
                    "job `{job}`: checkpoint {only} was written but never committed (its writer stopped or lost the job before its commit point); dropping it and starting over"
                );
                remote.delete_manifest(only)?;
                Ok(Picked::Nothing {
                    dropped: Some(only),
                })
            }
            [.., newest] => {
                tracing::warn!(
                    "job `{job}`: no committed checkpoint is recorded although {} manifests are (the group's offsets expired: raise offsets.retention.minutes); restoring the newest, {newest}",
                    ids.len()
                );
                Ok(Picked::Newest)
            }
        };
    };
    if !ids.contains(&c) {
        let held = ids.iter().map(u64::to_string).collect::<Vec<_>>();
        return Err(failed(format!(
            "checkpoint {c} is committed but {} has no manifest of it (it holds: {}); was the store's prefix changed or emptied? Point the job back at the store that holds it, or, to start the job over, delete the group's committed offsets (kafka-consumer-groups.sh --delete-offsets)",
            remote.url(),
            if held.is_empty() {
                "none".into()
            } else {
                held.join(", ")
            }
        )));
    }
    let later: Vec<u64> = ids.iter().copied().filter(|&id| id > c).collect();
    if !later.is_empty() {
        claim()?;
    }
    for &id in &later {
        tracing::warn!(
            "job `{job}`: checkpoint {id} was written but never committed (its writer stopped or lost the job before its commit point); dropping it and restoring checkpoint {c}"
        );
        remote.delete_manifest(id)?;
    }
    Ok(Picked::Committed {
        id: c,
        dropped: later.last().copied(),
    })
}

/// Renames the damaged store file at `path` to `<name>.damaged-<unix
/// seconds>` beside it, for `--restore none`, which starts over but never
/// deletes what it could not read.
fn set_aside(path: &std::path::Path, damage: &str) -> Result<(), RunError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".damaged-{secs}"));
    let aside = path.with_file_name(name);
    std::fs::rename(path, &aside).map_err(|error| StoreError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    tracing::warn!(
        "checkpoint store {} is damaged ({damage}); --restore none starts from scratch and kept the damaged file as {}",
        path.display(),
        aside.display()
    );
    Ok(())
}

/// The checkpoint `mode` names (`None` deletes every checkpoint).
fn choose(
    job: &Job,
    state_dir: &std::path::Path,
    store: &CheckpointStore,
    mode: RestoreMode,
) -> Result<Option<CheckpointMeta>, RunError> {
    Ok(match mode {
        RestoreMode::None => {
            store.truncate_after(0)?;
            None
        }
        RestoreMode::Latest => store.latest()?,
        RestoreMode::Id(id) => Some(store.get(id)?.ok_or_else(|| RunError::Restore {
            job: job.name.clone(),
            id,
            message: format!(
                "no such complete checkpoint in {}; `weir checkpoints {}` lists them",
                state_dir.display(),
                state_dir.display()
            ),
        })?),
    })
}

/// The checkpoint to restore for `job` from `meta`: `meta` itself when every
/// operator keeps its parallelism, else a checkpoint derived from it with
/// the job's parallelism (written as the next id, logged per operator).
fn rescale(
    job: &Job,
    store: &CheckpointStore,
    meta: CheckpointMeta,
) -> Result<CheckpointMeta, RunError> {
    let moves: Vec<Move> = job
        .operators
        .iter()
        .filter_map(|op| {
            let m = meta.operators.get(&op.id)?;
            (m.parallelism != op.parallelism).then(|| Move {
                operator: op.id.clone(),
                from: m.parallelism,
                to: op.parallelism,
            })
        })
        .collect();
    if moves.is_empty() {
        return Ok(meta);
    }
    let mut derived = CheckpointMeta {
        id: store.next_id()?,
        started_at_ms: unix_ms(std::time::SystemTime::now()),
        duration_ms: 0,
        alignment_ms: 0,
        pause_ms: None,
        derived: Some(Derivation {
            checkpoint: meta.id,
            savepoint: None,
            rescaled: moves
                .iter()
                .map(|m| (m.operator.clone(), [m.from, m.to]))
                .collect(),
            dropped: Vec::new(),
        }),
        ..meta.clone()
    };
    for m in &moves {
        if let Some(op) = derived.operators.get_mut(&m.operator) {
            op.parallelism = m.to;
        }
    }
    let refused = |e: StoreError| match e {
        StoreError::Rescale { .. } => RunError::Restore {
            job: job.name.clone(),
            id: meta.id,
            message: format!("{e}, or use `--restore none`"),
        },
        other => other.into(),
    };
    let stats = store
        .derive(None, meta.id, &derived, &moves, job.checkpoint.retain)
        .map_err(refused)?;
    failpoint::hit(Failpoint::RescaleAfterDerive);
    for m in &moves {
        tracing::info!(
            target: crate::NOTICE,
            "operator `{}`: rescaled from {} to {} instances by key group (checkpoint {} restored as checkpoint {}, {} ms)",
            m.operator,
            m.from,
            m.to,
            meta.id,
            derived.id,
            stats.duration.as_millis()
        );
    }
    derived = store
        .get(derived.id)?
        .ok_or_else(|| StoreError::UnknownCheckpoint {
            path: store.path().to_path_buf(),
            id: derived.id,
        })?;
    Ok(derived)
}

/// Refuses state of operator `op` recorded as `m` that `plugin` cannot
/// read: a state version newer than it knows.
pub(crate) fn check_state_version(
    op: &str,
    m: &OperatorMeta,
    plugin: &crate::wasm::Plugin,
) -> Result<(), String> {
    let info = plugin.info();
    if m.state_version <= info.state_version {
        return Ok(());
    }
    Err(format!(
        "operator `{op}` was checkpointed by {} {} with state version {}, but {} {} reads state versions up to {}: downgrading would lose or misread its state. Restore with a plugin that reads state version {}",
        m.plugin_name,
        m.plugin_version,
        m.state_version,
        info.name,
        info.version,
        info.state_version,
        m.state_version
    ))
}

/// Refuses to restore state of operator `op` recorded as `m` (by `what`,
/// "the checkpoint" or "the savepoint") into another plugin than the one
/// that wrote it, unless `--swap` names it; `otherwise` says what else to
/// do.
pub(crate) fn check_same_plugin(
    op: &OperatorConfig,
    m: &OperatorMeta,
    plugin: &crate::wasm::Plugin,
    what: &str,
    otherwise: &str,
) -> Result<(), String> {
    if m.sha256 == plugin.sha256() {
        return Ok(());
    }
    let ran = match &m.plugin_path {
        Some(path) => format!(", {path}"),
        None => String::new(),
    };
    Err(format!(
        "operator `{}`: {what} ran plugin {} {} (sha256 {}{ran}) but {} is now {} {} (sha256 {}); refusing to change code silently. To upgrade it and keep its state, run with `--swap {}={}`; else {otherwise}",
        op.id,
        m.plugin_name,
        m.plugin_version,
        &m.sha256[..12.min(m.sha256.len())],
        op.plugin.display(),
        plugin.info().name,
        plugin.info().version,
        &plugin.sha256()[..12],
        op.id,
        op.plugin.display(),
    ))
}

/// Refuses a checkpoint whose operators do not match those of `plan`.
fn check_restorable(
    plan: &Plan<'_>,
    meta: &CheckpointMeta,
    swapped: &BTreeSet<String>,
) -> Result<(), RunError> {
    let job = plan.job();
    let err = |message: String| RunError::Restore {
        job: job.name.clone(),
        id: meta.id,
        message,
    };
    if meta.key_groups != KEY_GROUPS {
        return Err(err(format!(
            "it uses {} key groups, this Weir uses {KEY_GROUPS}",
            meta.key_groups
        )));
    }
    for (_, op, plugin) in plan.operator_plugins() {
        let Some(m) = meta.operators.get(&op.id) else {
            return Err(err(format!(
                "operator `{}` is not in the checkpoint (it has: {}); operators cannot be added to a checkpointed job yet. Use `--restore none` to start over",
                op.id,
                meta.operators
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        check_state_version(&op.id, m, plugin).map_err(err)?;
        if !swapped.contains(&op.id) {
            let otherwise = "restore with the plugin the checkpoint ran, or use `--restore none`";
            check_same_plugin(op, m, plugin, "the checkpoint", otherwise).map_err(err)?;
        }
    }
    if let Some(extra) = meta.operators.keys().find(|k| {
        plan.find(k)
            .and_then(|id| plan.node(id).operator())
            .is_none()
    }) {
        return Err(err(format!(
            "the checkpoint has operator `{extra}`, which the job no longer has; use `--restore none` to start over"
        )));
    }
    if let Some((id, was, now)) = changed_sinks(job, meta).next() {
        return Err(err(format!(
            "sink `{id}` was a {was} sink and is a {now} sink now: its output cannot continue where the {was} sink's stopped. To keep the state and start the new sink empty, take a savepoint and start from it with --allow-non-restored-state; else use `--restore none`"
        )));
    }
    Ok(())
}

/// The sinks of `job` whose `type` differs from the one that wrote their
/// commit information in `old`: (id, old type, new type). Their output
/// cannot continue; they start fresh.
pub(crate) fn changed_sinks<'a>(
    job: &'a Job,
    old: &'a CheckpointMeta,
) -> impl Iterator<Item = (&'a str, &'a str, &'a str)> {
    job.sinks.iter().filter_map(|s| {
        let was = old.sink_types.get(&s.id)?;
        let changed = was != s.kind && old.sinks.contains_key(&s.id);
        changed.then_some((s.id.as_str(), was.as_str(), s.kind))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::remote::{MANIFEST_FORMAT, Manifest};
    use crate::store::tests::meta;

    /// A commit point that answers `committed` with what it holds.
    #[derive(Debug)]
    struct Held(Result<Option<u64>, String>);

    impl CommitPoint for Held {
        fn commit(&self, _: u64, _: &BTreeMap<String, serde_json::Value>) -> Result<(), String> {
            unreachable!("a restore commits nothing")
        }
        fn committed(&self) -> Result<Option<u64>, String> {
            self.0.clone()
        }
        fn claim(&self, committed: Option<u64>) -> Result<(), String> {
            assert_eq!(Ok(committed), self.0, "claims what it read");
            Ok(())
        }
    }

    /// A commit point that reads `committed` and then finds the job lost
    /// when the restore claims it (another process owns it now).
    #[derive(Debug)]
    struct Lost(Option<u64>);

    impl CommitPoint for Lost {
        fn commit(&self, _: u64, _: &BTreeMap<String, serde_json::Value>) -> Result<(), String> {
            unreachable!("a restore commits nothing")
        }
        fn committed(&self) -> Result<Option<u64>, String> {
            Ok(self.0)
        }
        fn claim(&self, _: Option<u64>) -> Result<(), String> {
            Err("task 0-2 is no longer this worker's".into())
        }
    }

    /// A `file://` store holding the manifests `ids` of job `job`.
    fn store_with(dir: &std::path::Path, ids: &[u64]) -> RemoteStore {
        let url = format!("file://{}", dir.display());
        let remote = RemoteStore::open(&url, &BTreeMap::new()).unwrap();
        for &id in ids {
            let manifest = Manifest {
                format: MANIFEST_FORMAT,
                job: "job".into(),
                id,
                writer: "w".into(),
                packs: vec![],
                meta: meta(id),
                catalog: None,
                staged: vec![],
            };
            remote.create_manifest(&manifest).unwrap();
        }
        remote
    }

    /// The committed checkpoint is restored, and the manifests after it,
    /// never committed, are deleted; the ones before it stay.
    #[test]
    fn a_restore_takes_the_committed_checkpoint_and_drops_the_later_ones() {
        let dir = tempfile::tempdir().unwrap();
        let remote = store_with(dir.path(), &[3, 4, 5, 6]);
        let got = committed("job", &remote, &Held(Ok(Some(4)))).unwrap();
        let dropped = Some(6);
        assert_eq!(got, Picked::Committed { id: 4, dropped });
        assert_eq!(remote.manifest_ids().unwrap(), [3, 4]);
    }

    /// Nothing committed and several manifests: the group's offsets
    /// expired (checkpoint 2 was triggered only once 1 was committed): the
    /// newest manifest, nothing deleted.
    #[test]
    fn with_commits_expired_a_restore_takes_the_newest_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let remote = store_with(dir.path(), &[1, 2]);
        assert_eq!(
            committed("job", &remote, &Held(Ok(None))).unwrap(),
            Picked::Newest
        );
        assert_eq!(remote.manifest_ids().unwrap(), [1, 2]);
    }

    /// Nothing committed and one manifest, or none: the task's first
    /// checkpoint never reached its commit point. Its manifest is deleted
    /// and the job starts over; restoring it would lose what a direct
    /// Kafka sink wrote into the transaction the next owner aborts.
    #[test]
    fn a_first_checkpoint_never_committed_is_dropped_and_the_job_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let remote = store_with(dir.path(), &[1]);
        let got = committed("job", &remote, &Held(Ok(None))).unwrap();
        assert_eq!(got, Picked::Nothing { dropped: Some(1) });
        assert!(remote.manifest_ids().unwrap().is_empty());
        let got = committed("job", &remote, &Held(Ok(None))).unwrap();
        assert_eq!(got, Picked::Nothing { dropped: None });
    }

    /// A restore that finds the job lost when it claims it deletes no
    /// manifest: the ones after the checkpoint it read may be the new
    /// owner's, committed since (a worker stalled mid-restore once deleted
    /// them, and the task's next restore failed forever). With nothing to
    /// delete, no claim is needed.
    #[test]
    fn a_restore_that_lost_the_job_deletes_no_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let remote = store_with(dir.path(), &[3, 4, 5, 6]);
        let err = committed("job", &remote, &Lost(Some(4))).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("not restoring (and deleting no manifest)"),
            "{text}"
        );
        assert!(text.contains("no longer this worker's"), "{text}");
        assert_eq!(remote.manifest_ids().unwrap(), [3, 4, 5, 6]);
        let dir = tempfile::tempdir().unwrap();
        let remote = store_with(dir.path(), &[1]);
        assert!(committed("job", &remote, &Lost(None)).is_err());
        assert_eq!(remote.manifest_ids().unwrap(), [1]);
        let dir = tempfile::tempdir().unwrap();
        let remote = store_with(dir.path(), &[3, 4]);
        let got = committed("job", &remote, &Lost(Some(4))).unwrap();
        assert_eq!(
            got,
            Picked::Committed {
                id: 4,
                dropped: None
            }
        );
    }

    /// A committed checkpoint the store lacks, or a commit point that
    /// cannot be read, fails the restore in one line saying what to do;
    /// nothing is deleted.
    #[test]
    fn a_committed_checkpoint_the_store_lacks_is_an_error_naming_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let remote = store_with(dir.path(), &[1, 2]);
        let err = committed("job", &remote, &Held(Ok(Some(7)))).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("checkpoint 7 is committed but"), "{text}");
        assert!(text.contains("it holds: 1, 2"), "{text}");
        assert!(text.contains("--delete-offsets"), "{text}");
        assert!(!text.contains('\n'), "{text}");
        let err = committed("job", &remote, &Held(Err("broker down".into()))).unwrap_err();
        assert!(
            err.to_string()
                .contains("reading its committed checkpoint failed: broker down")
        );
        assert_eq!(remote.manifest_ids().unwrap(), [1, 2]);
    }
}
