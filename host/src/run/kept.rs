//! Plugins kept in the state dir: a copy of every plugin an operator runs
//! that is not its job file's (swapped in with `--swap` or `weir swap`), at
//! `<state dir>/plugins/<sha256>.wasm`, so that a restart, after a crash
//! included, restores with the plugin its checkpoint ran
//! ([`restored_swaps`]).
//!
//! Invariants:
//! - A copy exists only complete: it is written to a temporary file, synced,
//!   renamed into place and its folder synced ([`keep`]) before the attempt
//!   that runs the plugin starts, so before any checkpoint that records it
//!   (`OperatorMeta::swapped`) commits.
//! - A copy is deleted only when neither a retained checkpoint nor the
//!   starting attempt records it ([`collect`]).
//! - On restore, `--swap` takes precedence over the job file, and the job
//!   file over the copy: a job file whose plugin's sha256 differs from the
//!   one recorded at the swap was edited since, and its plugin is used.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::config::Job;
use crate::plan::Plan;
use crate::remote::RemoteStore;
use crate::run::error::RunError;
use crate::run::options::{RestoreMode, RunOptions};
use crate::store::{CheckpointMeta, CheckpointStore, OperatorMeta, SwappedPlugin};
use crate::wasm::{Plugin, sha256_hex};

/// Folder of the kept plugins in the state dir.
pub const KEPT_DIR: &str = "plugins";

/// Per operator id, the record of the swapped-in plugin it runs (only
/// operators that do not run their job file's plugin).
pub(crate) type Kept = BTreeMap<String, SwappedPlugin>;

/// Per operator id, the sha256 of its job-file plugin when the run
/// started; `None` when the file cannot be read.
pub(crate) type JobShas = BTreeMap<String, Option<String>>;

/// The sha256 of each operator's job-file plugin, by operator id.
pub(crate) fn job_file_shas(job: &Job) -> JobShas {
    job.operators
        .iter()
        .map(|op| {
            let sha = std::fs::read(&op.plugin).ok().map(|b| sha256_hex(&b));
            (op.id.clone(), sha)
        })
        .collect()
}

/// The record of an operator running `plugin`, swapped in from `from`,
/// whose job file's plugin has sha256 `job_sha`: `None` when `plugin` is
/// the job file's plugin.
pub(crate) fn record(plugin: &Plugin, from: &Path, job_sha: Option<&str>) -> Option<SwappedPlugin> {
    if job_sha == Some(plugin.sha256()) {
        return None;
    }
    let from = std::path::absolute(from).unwrap_or_else(|_| from.to_path_buf());
    Some(SwappedPlugin {
        from: from.display().to_string(),
        copy: format!("{KEPT_DIR}/{}.wasm", plugin.sha256()),
        job_file_sha256: job_sha.unwrap_or_default().to_string(),
    })
}

/// The copies to restore with: for every operator whose plugin the
/// checkpoint `options.restore` names recorded as swapped in, unless a
/// `--swap` names the operator or its job file's plugin changed since the
/// swap, `(operator, its copy, the record)`. Checks each copy's sha256 and
/// logs one line per copy used. A state dir without that checkpoint (its
/// machine lost) takes it from the job's object store `remote`, with the
/// copies its manifest names.
pub(crate) fn restored_swaps(
    job: &Job,
    options: &RunOptions,
    job_shas: &JobShas,
    remote: Option<&RemoteStore>,
) -> Result<Vec<(String, PathBuf, SwappedPlugin)>, RunError> {
    let state_dir = options.state_dir(job);
    let local = checkpoint_to_restore(job, &state_dir, options.restore)?;
    let remote = match (&local, remote) {
        (None, Some(remote)) => stored_checkpoint(job, &state_dir, options.restore, remote)?,
        _ => None,
    };
    let Some(meta) = local.or(remote) else {
        return Ok(Vec::new());
    };
    let mut restored = Vec::new();
    for op in &job.operators {
        let job_sha = job_shas.get(&op.id).cloned().flatten();
        let Some((m, swap)) = meta
            .operators
            .get(&op.id)
            .and_then(|m| Some((m, m.swapped.clone()?)))
        else {
            continue;
        };
        if options.swaps.iter().any(|(id, _)| id == &op.id) {
            continue;
        }
        if job_sha.as_deref().unwrap_or_default() != swap.job_file_sha256 {
            tracing::info!(
                "operator `{}`: {} changed since it was swapped to {} {} (checkpoint {}); restoring with the job file's plugin",
                op.id,
                op.plugin.display(),
                m.plugin_name,
                m.plugin_version,
                meta.id
            );
            continue;
        }
        let copy = state_dir.join(KEPT_DIR).join(format!("{}.wasm", m.sha256));
        let intact = is_sha256(&m.sha256)
            && std::fs::read(&copy).is_ok_and(|bytes| sha256_hex(&bytes) == m.sha256);
        if !intact {
            return Err(RunError::Restore {
                job: job.name.clone(),
                id: meta.id,
                message: format!(
                    "operator `{}` ran {} {} (sha256 {}), swapped in from {}, but its copy {} is missing or damaged; run with `--swap {}={}` if that file still holds the plugin, or point the job file's plugin at it",
                    op.id,
                    m.plugin_name,
                    m.plugin_version,
                    short(&m.sha256),
                    swap.from,
                    copy.display(),
                    op.id,
                    swap.from
                ),
            });
        }
        tracing::warn!(
            "operator `{}` restores with the plugin it was swapped to, {} {} (sha256 {}, kept as {}), not {}; to change it, edit the job file's plugin or run with --swap {}=NEW.wasm",
            op.id,
            m.plugin_name,
            m.plugin_version,
            short(&m.sha256),
            copy.display(),
            op.plugin.display(),
            op.id
        );
        restored.push((op.id.clone(), copy, swap));
    }
    Ok(restored)
}

/// The checkpoint a run with `mode` restores, if it is not final.
fn checkpoint_to_restore(
    job: &Job,
    state_dir: &Path,
    mode: RestoreMode,
) -> Result<Option<CheckpointMeta>, RunError> {
    let meta = match mode {
        RestoreMode::None => return Ok(None),
        RestoreMode::Latest => CheckpointStore::open(state_dir, &job.name)?.latest()?,
        RestoreMode::Id(id) => CheckpointStore::open(state_dir, &job.name)?.get(id)?,
    };
    Ok(meta.filter(|m| !m.final_checkpoint))
}

/// Checkpoint `mode` names in the object store `remote` (the newest for
/// `Latest`), unless final, with the copies of swapped-in plugins its
/// manifest names downloaded into `state_dir`. An unknown id or another
/// job's store is the error the attempt's sync would give.
fn stored_checkpoint(
    job: &Job,
    state_dir: &Path,
    mode: RestoreMode,
    remote: &RemoteStore,
) -> Result<Option<CheckpointMeta>, RunError> {
    let id = match mode {
        RestoreMode::None => return Ok(None),
        RestoreMode::Latest => None,
        RestoreMode::Id(id) => Some(id),
    };
    let Some(manifest) = crate::remote::pick(remote, &job.name, id)? else {
        return Ok(None);
    };
    if manifest.meta.final_checkpoint {
        return Ok(None);
    }
    crate::remote::fetch_kept_plugins(remote, state_dir, &manifest)?;
    Ok(Some(manifest.meta))
}

/// Writes the copy of every plugin in `kept` (operators of `plan`) that the
/// state dir does not hold yet, durably.
pub(crate) fn keep(state_dir: &Path, plan: &Plan<'_>, kept: &Kept) -> Result<(), RunError> {
    for (_, op, plugin) in plan.operator_plugins() {
        if !kept.contains_key(&op.id) {
            continue;
        }
        let dir = state_dir.join(KEPT_DIR);
        let path = dir.join(format!("{}.wasm", plugin.sha256()));
        write_copy(state_dir, &dir, &path, plugin.bytes()).map_err(|e| {
            RunError::Swap(format!(
                "cannot keep a copy of the plugin swapped into `{}` at {}: {e}; make the state dir writable",
                op.id,
                path.display()
            ))
        })?;
    }
    Ok(())
}

/// Writes `bytes` to `path` in `dir` (a folder of `state_dir`) unless it
/// exists: temporary file, sync, rename, sync of the folders.
fn write_copy(state_dir: &Path, dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path.is_file() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()?;
        File::open(state_dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Deletes the copies that neither a checkpoint retained in `store` nor
/// `kept` (the starting attempt) records. Best effort: a copy that cannot
/// be deleted stays.
pub(crate) fn collect(state_dir: &Path, store: &CheckpointStore, kept: &Kept) {
    let dir = state_dir.join(KEPT_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let Ok(checkpoints) = store.list() else {
        return;
    };
    let used: BTreeSet<String> = checkpoints
        .iter()
        .flat_map(|c| c.operators.values())
        .filter(|m| m.swapped.is_some())
        .map(|m| format!("{}.wasm", m.sha256))
        .chain(
            kept.values()
                .filter_map(|s| Some(Path::new(&s.copy).file_name()?.to_str()?.to_string())),
        )
        .collect();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !used.contains(name.to_str().unwrap_or_default()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether `s` is a sha256 in lower-case hex (so a file name, no path).
fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The first 12 hex digits of a sha256, as messages show it.
fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

/// What each checkpoint records of the plugins the operators of `plan` run
/// (those in `kept` with their swap record).
pub(crate) fn operators_meta(plan: &Plan<'_>, kept: &Kept) -> BTreeMap<String, OperatorMeta> {
    plan.operator_plugins()
        .map(|(_, op, p)| {
            (
                op.id.clone(),
                OperatorMeta {
                    plugin_name: p.info().name.clone(),
                    plugin_version: p.info().version.clone(),
                    state_version: p.info().state_version,
                    sha256: p.sha256().to_string(),
                    plugin_path: Some(match kept.get(&op.id) {
                        Some(swapped) => swapped.from.clone(),
                        None => op.plugin.display().to_string(),
                    }),
                    parallelism: op.parallelism,
                    swapped: kept.get(&op.id).cloned(),
                    recording: op.record_inputs,
                    config_sha256: (op.record_inputs.is_some())
                        .then(|| sha256_hex(op.config.as_bytes())),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::OperatorMeta;

    /// Checkpoint `id` of job `job`, whose operator `count` ran a plugin
    /// with sha256 `sha`, swapped in when `swapped`.
    fn meta(id: u64, sha: &str, swapped: bool) -> CheckpointMeta {
        let op = OperatorMeta {
            plugin_name: "p".into(),
            plugin_version: "1".into(),
            state_version: 1,
            sha256: sha.into(),
            plugin_path: None,
            parallelism: 1,
            swapped: swapped.then(|| SwappedPlugin {
                from: "/p.wasm".into(),
                copy: format!("{KEPT_DIR}/{sha}.wasm"),
                job_file_sha256: String::new(),
            }),
            recording: None,
            config_sha256: None,
        };
        CheckpointMeta {
            operators: BTreeMap::from([("count".to_string(), op)]),
            ..CheckpointMeta::new(id, "job")
        }
    }

    #[test]
    fn collect_keeps_exactly_the_copies_retained_checkpoints_and_the_attempt_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = CheckpointStore::open(dir.path(), "job").unwrap();
        let [a, b, c] = ["a", "b", "c"].map(|x| x.repeat(64));
        store.commit(&meta(1, &a, true), &[], 5).unwrap();
        store.commit(&meta(2, &b, false), &[], 5).unwrap();
        let folder = dir.path().join(KEPT_DIR);
        std::fs::create_dir_all(&folder).unwrap();
        let copy = |sha: &str| folder.join(format!("{sha}.wasm"));
        for sha in [&a, &b, &c] {
            std::fs::write(copy(sha), b"wasm").unwrap();
        }
        let attempt = Kept::from([(
            "count".to_string(),
            meta(3, &c, true).operators["count"]
                .swapped
                .clone()
                .unwrap(),
        )]);
        collect(dir.path(), &store, &attempt);
        assert!(copy(&a).exists(), "recorded by retained checkpoint 1");
        assert!(!copy(&b).exists(), "recorded by nothing");
        assert!(copy(&c).exists(), "recorded by the starting attempt");

        // Once checkpoint 1 is no longer retained, its copy goes.
        store.commit(&meta(3, &b, false), &[], 1).unwrap();
        collect(dir.path(), &store, &Kept::new());
        assert!(!copy(&a).exists() && !copy(&c).exists());
    }

    #[test]
    fn a_copy_is_written_once_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(KEPT_DIR);
        let path = folder.join("x.wasm");
        write_copy(dir.path(), &folder, &path, b"first").unwrap();
        write_copy(dir.path(), &folder, &path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        let names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["x.wasm"], "no temporary file left");
    }
}
