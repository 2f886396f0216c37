//! [`Recorded`]: the recorded epochs of one operator in a range, checked
//! whole, and running them on an instance of a plugin restored to the
//! checkpoint the range starts from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::rerun::{At, Run};
use super::{Range, ShadowError};
use crate::config::{Job, OperatorConfig};
use crate::dataflow::recording::Step;
use crate::run::{RunError, load_operator, restore_instance};
use crate::store::{CheckpointMeta, CheckpointStore, OperatorMeta};
use crate::wasm::{OperatorInstance, Plugin, Runtime, sha256_hex};

/// The recorded epochs of one operator in a range, and what running them
/// needs.
pub(super) struct Recorded<'j> {
    pub(super) job: &'j Job,
    pub(super) op: &'j OperatorConfig,
    pub(super) store: CheckpointStore,
    pub(super) state_dir: PathBuf,
    /// The checkpoint the range starts from; `None`: the job's start.
    pub(super) from: Option<CheckpointMeta>,
    /// The checkpoints whose epochs the range holds, ascending.
    pub(super) epochs: Vec<CheckpointMeta>,
    pub(super) parallelism: u32,
}

impl<'j> Recorded<'j> {
    /// The range of `operator`'s recorded epochs (see [`Range`]; only the
    /// epoch of `range.to` when `one`), checked whole.
    pub(super) fn open(
        job: &'j Job,
        state_dir: &Path,
        operator: &str,
        range: Range,
        one: bool,
    ) -> Result<Self, ShadowError> {
        let op = (job.operators.iter().find(|o| o.id == operator)).ok_or_else(|| {
            let ids: Vec<&str> = job.operators.iter().map(|o| o.id.as_str()).collect();
            ShadowError::Range(format!(
                "job `{}` has no operator `{operator}` (it has: {})",
                job.name,
                ids.join(", ")
            ))
        })?;
        let store = CheckpointStore::open_existing(state_dir)?;
        let list = store.list()?;
        let recorded: BTreeMap<u64, Vec<u32>> = (store.recorded_epochs(operator)?.into_iter())
            .map(|e| (e.checkpoint, e.instances))
            .collect();
        let ids = |ids: &mut dyn Iterator<Item = u64>| {
            let ids: Vec<String> = ids.map(|id| id.to_string()).collect();
            ids.join(", ")
        };
        let Some(&newest) = recorded.keys().next_back() else {
            let why = match op.record_inputs {
                Some(r) => format!(
                    "it records its input ({r}), but no epoch is kept: each was over record_max_bytes, or none has completed yet"
                ),
                None => "set record_inputs = \"20 checkpoints\" (or a duration) on it in the job file and run the job".to_owned(),
            };
            return Err(ShadowError::Range(format!(
                "operator `{operator}` has no recorded epoch in {}: {why}",
                store.path().display()
            )));
        };
        let to = range.to.unwrap_or(newest);
        let whole = |m: &CheckpointMeta| {
            let parallelism = m.operators.get(operator).map_or(0, |o| o.parallelism);
            recorded
                .get(&m.id)
                .is_some_and(|i| i.iter().copied().eq(0..parallelism) && parallelism > 0)
        };
        let Some(at) = list.iter().position(|m| m.id == to) else {
            return Err(ShadowError::Range(format!(
                "checkpoint {to} is not in {}; its recorded epochs end at checkpoints {}",
                store.path().display(),
                ids(&mut recorded.keys().copied())
            )));
        };
        if !whole(&list[at]) {
            return Err(ShadowError::Range(format!(
                "the epoch of checkpoint {to} of operator `{operator}` is not recorded (or not for every instance); recorded: checkpoints {}",
                ids(&mut recorded.keys().copied())
            )));
        }
        // The epoch of `m` ran with the plugin and parallelism of `to`'s.
        let ran_as_last = |m: &CheckpointMeta| {
            let of = |m: &CheckpointMeta| {
                let o = m.operators.get(operator);
                o.map(|o| (o.sha256.clone(), o.parallelism))
            };
            of(m) == of(&list[at])
        };
        // Walk back from `to` to the checkpoint the range starts from: by
        // default, the newest whose epoch is not recorded or ran another
        // plugin or parallelism (a swap, a rescale).
        let mut first = at;
        loop {
            let before = first.checked_sub(1).map(|i| &list[i]);
            let stop = match (range.from, before) {
                _ if one => true,
                (Some(from), Some(b)) if b.id <= from => {
                    if b.id < from {
                        return Err(ShadowError::Range(format!(
                            "checkpoint {from} is not in {} before checkpoint {to}",
                            store.path().display()
                        )));
                    }
                    true
                }
                (Some(0), None) | (None, None) => true,
                (Some(from), None) => {
                    return Err(ShadowError::Range(format!(
                        "checkpoint {from} is not in {}; the recorded epochs up to {to} start at {}",
                        store.path().display(),
                        ids(&mut list[..=at].iter().map(|m| m.id))
                    )));
                }
                (None, Some(b)) => !whole(b) || !ran_as_last(b),
                (Some(_), Some(_)) => false,
            };
            if stop {
                break;
            }
            if !whole(&list[first - 1]) {
                return Err(ShadowError::Range(format!(
                    "the epoch of checkpoint {} of operator `{operator}` is not recorded, so the range cannot start before it; recorded: checkpoints {}",
                    list[first - 1].id,
                    ids(&mut recorded.keys().copied())
                )));
            }
            first -= 1;
        }
        let from = first.checked_sub(1).map(|i| list[i].clone());
        let epochs = list[first..=at].to_vec();
        let meta = |m: &CheckpointMeta| m.operators.get(operator).cloned();
        let last: OperatorMeta = meta(&list[at]).expect("a recorded operator");
        for m in from.iter().chain(&epochs) {
            let Some(o) = meta(m) else {
                return Err(ShadowError::Range(format!(
                    "checkpoint {} has no operator `{operator}`",
                    m.id
                )));
            };
            if o.parallelism != last.parallelism {
                return Err(ShadowError::Range(format!(
                    "operator `{operator}` ran {} instances at checkpoint {} and {} at checkpoint {to}: choose a range without a rescale",
                    o.parallelism, m.id, last.parallelism
                )));
            }
        }
        for m in &epochs {
            let o = meta(m).expect("checked above");
            if o.sha256 != last.sha256 {
                return Err(ShadowError::Range(format!(
                    "operator `{operator}` ran plugin {} at checkpoint {} and {} at checkpoint {to} (a swap): choose a range within one plugin",
                    &o.sha256[..12.min(o.sha256.len())],
                    m.id,
                    &last.sha256[..12.min(last.sha256.len())]
                )));
            }
        }
        Ok(Recorded {
            job,
            op,
            store,
            state_dir: state_dir.to_path_buf(),
            from,
            epochs,
            parallelism: last.parallelism,
        })
    }

    /// The first checkpoint of the range whose epoch ran with another
    /// `config` than the job file's (as its sha256 says; checkpoints
    /// written before Weir kept it say nothing).
    pub(super) fn config_changed(&self) -> Option<u64> {
        let now = sha256_hex(self.op.config.as_bytes());
        (self.epochs.iter())
            .find(|m| {
                let ran = m.operators.get(&self.op.id);
                ran.and_then(|o| o.config_sha256.as_ref())
                    .is_some_and(|sha| *sha != now)
            })
            .map(|m| m.id)
    }

    /// Instance `index`'s recordings, epoch by epoch.
    pub(super) fn recordings(&self, index: u32) -> Result<Vec<(u64, Vec<Step>)>, ShadowError> {
        let mut out = Vec::new();
        for m in &self.epochs {
            let steps = self.store.recording(m.id, &self.op.id, index)?;
            let steps = steps.ok_or_else(|| {
                ShadowError::Range(format!(
                    "the recording of instance {index} of checkpoint {} went from the store meanwhile",
                    m.id
                ))
            })?;
            out.push((m.id, steps));
        }
        Ok(out)
    }

    /// The plugin that ran the range, and its file: the copy the state
    /// directory keeps of a swapped-in plugin or the file it was swapped in
    /// from, else the job file's plugin or the file the checkpoint names,
    /// whichever has its sha256.
    pub(super) fn plugin_that_ran(
        &self,
        runtime: &Runtime,
    ) -> Result<(Plugin, PathBuf), ShadowError> {
        let last = self.epochs.last().expect("a range has an epoch");
        let m = &last.operators[&self.op.id];
        let mut candidates = Vec::new();
        if let Some(swapped) = &m.swapped {
            candidates.push(self.state_dir.join(&swapped.copy));
            candidates.push(self.job.dir.join(&swapped.from));
        }
        candidates.push(self.op.plugin.clone());
        if let Some(path) = &m.plugin_path {
            candidates.push(self.job.dir.join(path));
        }
        for path in &candidates {
            if !path.is_file() {
                continue;
            }
            let (plugin, _) = load_operator(self.job, runtime, self.op, path)?;
            if plugin.sha256() == m.sha256 {
                return Ok((plugin, path.clone()));
            }
        }
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        Err(ShadowError::Range(format!(
            "operator `{}` ran plugin {} {} (sha256 {}) in checkpoint {}, and no file of it was found (tried {})",
            self.op.id,
            m.plugin_name,
            m.plugin_version,
            &m.sha256[..12.min(m.sha256.len())],
            last.id,
            tried.join(", ")
        )))
    }

    /// Instance `index` of `plugin`, restored to the range's first
    /// checkpoint, run on `epochs` (its host calls noted when `trace`). A failure to open or restore it is
    /// [`ShadowError::Recorded`].
    pub(super) fn run(
        &self,
        plugin: &Plugin,
        index: u32,
        epochs: &[(u64, Vec<Step>)],
        trace: bool,
    ) -> Result<(Run, OperatorInstance), ShadowError> {
        let failed = |e: &dyn std::fmt::Display| ShadowError::Recorded(e.to_string());
        let mut instance =
            OperatorInstance::for_operator(plugin, self.op, index).map_err(|e| failed(&e))?;
        if let Some(m) = &self.from {
            match restore_instance(&mut instance, &self.store, m, &self.op.id, index) {
                Ok(_) => {}
                Err(RunError::Task(e)) => return Err(failed(&e)),
                Err(e) => return Err(e.into()),
            }
        }
        instance.trace_host_calls(trace);
        let mut run = Run::default();
        'epochs: for (epoch, steps) in epochs {
            for (step, s) in steps.iter().enumerate() {
                let at = At {
                    instance: index,
                    epoch: *epoch,
                    step,
                };
                if !run.step(&mut instance, s, at) {
                    break 'epochs;
                }
            }
        }
        Ok((run, instance))
    }
}
