//! Recorded epochs run again, offline, touching no source or sink: an
//! operator that records its input (`record_inputs`) leaves, per
//! checkpoint, every call its instances made into the plugin and what each
//! emitted (`dataflow/recording.rs`, the store's `recordings` table).
//!
//! - [`replay`] runs one recorded epoch again with the plugin that ran it,
//!   from the checkpoint before it, and checks that every call emits the
//!   same bytes and that the state at the end is the checkpoint's: a
//!   determinism check (`weir replay`).
//! - [`shadow`] runs another plugin on a range of recorded epochs, from the
//!   state of the checkpoint before them (migrated by its `restore`, as a
//!   swap would), and compares what it emits and keeps with what the
//!   recorded plugin emitted and kept (`weir shadow`, `weir swap
//!   --shadow`). The recorded plugin runs again beside it, for its costs
//!   and to check that it reproduces its recording.
//!
//! Invariants:
//! - A range is whole: every checkpoint of the store in it has a recording
//!   of every instance, one plugin ran it all (no swap inside it) and the
//!   operator's parallelism did not change in it, or the run is refused
//!   with the reason.
//! - The calls are made as the instance thread made them: the restored
//!   checkpoint's in-flight data is not processed again (the recording
//!   holds it, where the instance processed it), `processing-time` returns
//!   each step's recorded time.

mod diff;
mod recorded;
mod report;
mod rerun;

use std::collections::BTreeMap;
use std::path::Path;

pub use diff::{Difference, KeyDiff, PortDiff, RecordDiff, Shown, StateDiff, shown};
pub use report::{InstanceReplay, PluginRun, ReplayReport, Rule, ShadowReport};
pub use rerun::{Failure, StepError};

use crate::config::Job;
use crate::dataflow::recording::Step;
use crate::run::{RunError, check_state_version, load_operator};
use crate::store::StoreError;
use crate::wasm::{OperatorInstance, Plugin, Runtime};
use diff::StepAt;
use recorded::Recorded;
use report::{Cost, plugin_run};
use rerun::Run;

/// Why a replay or shadow run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ShadowError {
    /// The checkpoint store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A plugin could not be loaded or did not fit the job.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The range asked for cannot be run; the message says why and what
    /// can.
    #[error("{0}")]
    Range(String),
    /// The Wasm engine could not be set up.
    #[error("cannot set up the Wasm engine: {0}")]
    Engine(String),
    /// The recorded plugin failed where it had not.
    #[error("the recorded plugin failed on its own recording: {0}")]
    Recorded(String),
}

/// Which recorded epochs to run: those after checkpoint `from` up to
/// checkpoint `to`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Range {
    /// The checkpoint whose state the run starts from; `Some(0)`: the job's
    /// start; `None`: the oldest the recordings allow within one plugin and
    /// parallelism (after the last swap or rescale).
    pub from: Option<u64>,
    /// The last epoch's checkpoint; `None`: the newest recorded.
    pub to: Option<u64>,
}

/// Runs the epoch of checkpoint `checkpoint` of `operator` again with the
/// plugin that ran it and compares, byte for byte; with `host_calls`, the
/// log lists every host call of each step too.
pub fn replay(
    job: &Job,
    state_dir: &Path,
    operator: &str,
    checkpoint: u64,
    host_calls: bool,
) -> Result<ReplayReport, ShadowError> {
    let range = Range {
        from: None,
        to: Some(checkpoint),
    };
    let recorded = Recorded::open(job, state_dir, operator, range, true)?;
    if let Some(id) = recorded.config_changed() {
        return Err(ShadowError::Range(format!(
            "the config of operator `{operator}` in the job file is not the one the epoch of checkpoint {id} ran with, so a replay would differ for that alone: put that config back to replay it"
        )));
    }
    let runtime = Runtime::for_job(job).map_err(|e| ShadowError::Engine(format!("{e:#}")))?;
    let (plugin, path) = recorded.plugin_that_ran(&runtime)?;
    let mut report = ReplayReport {
        operator: operator.to_owned(),
        checkpoint,
        from_checkpoint: recorded.from.as_ref().map(|m| m.id),
        plugin: plugin_run(&plugin, &path),
        instances: Vec::new(),
        identical: true,
    };
    let mut cost = Cost::default();
    for index in 0..recorded.parallelism {
        let epochs = recorded.recordings(index)?;
        let (run, mut instance) = recorded.run(&plugin, index, &epochs, host_calls)?;
        cost.add(&run);
        let mut first_difference = None;
        let mut log = Vec::new();
        let (mut steps, mut records_out) = (0, 0);
        for (epoch, recording) in &epochs {
            for (k, step) in recording.iter().enumerate() {
                let got = run.outputs.get(steps).map_or(&[][..], Vec::as_slice);
                steps += 1;
                records_out += step
                    .outputs
                    .iter()
                    .map(|(_, b)| b.len() as u64)
                    .sum::<u64>();
                log.push(log_line(*epoch, k, step, got));
                let calls = run.host_calls.get(steps - 1).map_or(&[][..], Vec::as_slice);
                log.extend(calls.iter().map(|c| format!("    {c}")));
                if first_difference.is_none() {
                    first_difference = diff::first_difference(&step.outputs, got)
                        .map(|d| format!("step {k} ({}): {d}", step.call.name()));
                }
            }
        }
        let outputs_identical = first_difference.is_none() && run.errors.is_empty();
        let stored = recorded.store.load_instance(checkpoint, operator, index)?;
        let state: Vec<(Vec<u8>, Vec<u8>)> = sorted_state(&instance);
        let state_identical = state == stored.entries;
        let snapshot = instance
            .snapshot()
            .map_err(|e| ShadowError::Recorded(e.to_string()))?;
        let snapshot_identical = snapshot == stored.snapshot;
        if first_difference.is_none() && !state_identical {
            first_difference = Some(format!(
                "the keyed state at the end differs from checkpoint {checkpoint}'s: {}",
                summary(&StateDiff::of(&stored.entries, &state, 3))
            ));
        }
        if first_difference.is_none() && !snapshot_identical {
            first_difference = Some(format!(
                "the snapshot at the end differs from checkpoint {checkpoint}'s ({} bytes, now {})",
                stored.snapshot.len(),
                snapshot.len()
            ));
        }
        let identical = outputs_identical && state_identical && snapshot_identical;
        report.identical &= identical;
        report.instances.push(InstanceReplay {
            instance: index,
            steps,
            records_out,
            outputs_identical,
            state_identical,
            snapshot_identical,
            first_difference,
            errors: run.errors,
            log,
        });
    }
    cost.set(&mut report.plugin);
    Ok(report)
}

/// Runs `with` on the recorded epochs of `operator` in `range`, the
/// recorded plugin beside it, and compares what they emit and keep; lists
/// at most `limit` differences per port and in the state.
pub fn shadow(
    job: &Job,
    state_dir: &Path,
    operator: &str,
    with: &Path,
    range: Range,
    limit: usize,
) -> Result<ShadowReport, ShadowError> {
    let recorded = Recorded::open(job, state_dir, operator, range, false)?;
    let runtime = Runtime::for_job(job).map_err(|e| ShadowError::Engine(format!("{e:#}")))?;
    let (v1, v1_path) = recorded.plugin_that_ran(&runtime)?;
    let (v2, _) = load_operator(job, &runtime, recorded.op, with)?;
    let last = recorded.epochs.last().expect("a range has an epoch");
    if let Some(m) = recorded
        .from
        .as_ref()
        .and_then(|m| m.operators.get(operator))
    {
        check_state_version(operator, m, &v2).map_err(ShadowError::Range)?;
    }
    let mut report = ShadowReport {
        operator: operator.to_owned(),
        from_checkpoint: recorded.from.as_ref().map(|m| m.id),
        to_checkpoint: last.id,
        epochs: recorded.epochs.iter().map(|m| m.id).collect(),
        instances: recorded.parallelism,
        v1: plugin_run(&v1, &v1_path),
        v2: plugin_run(&v2, with),
        v1_reproduced: true,
        config_changed: recorded.config_changed().is_some(),
        outputs: Vec::new(),
        state: StateDiff::default(),
        errors: Vec::new(),
        limit,
    };
    let name = |plugin: &Plugin, port: u32| {
        let outputs = &plugin.info().outputs;
        outputs
            .get(port as usize)
            .cloned()
            .unwrap_or_else(|| port.to_string())
    };
    let mut ports: BTreeMap<String, PortDiff> = BTreeMap::new();
    let (mut v1_cost, mut v2_cost) = (Cost::default(), Cost::default());
    for index in 0..recorded.parallelism {
        let epochs = recorded.recordings(index)?;
        let (v1_run, _) = recorded.run(&v1, index, &epochs, false)?;
        v1_cost.add(&v1_run);
        let (v2_run, v2_instance) = match recorded.run(&v2, index, &epochs, false) {
            Ok((run, instance)) => (run, Some(instance)),
            Err(ShadowError::Recorded(message)) => {
                let error = StepError {
                    instance: index,
                    epoch: recorded.epochs[0].id,
                    step: 0,
                    call: "open and restore",
                    kind: Failure::Trap,
                    message,
                };
                let run = Run {
                    errors: vec![error],
                    ..Run::default()
                };
                (run, None)
            }
            Err(e) => return Err(e),
        };
        v2_cost.add(&v2_run);
        let mut k = 0;
        for (epoch, recording) in &epochs {
            for (step_index, step) in recording.iter().enumerate() {
                let v1_again = v1_run.outputs.get(k).map_or(&[][..], Vec::as_slice);
                report.v1_reproduced &= diff::first_difference(&step.outputs, v1_again).is_none();
                let v2_out = v2_run.outputs.get(k).map_or(&[][..], Vec::as_slice);
                k += 1;
                let mut by_port: BTreeMap<String, (Vec<_>, Vec<_>)> = BTreeMap::new();
                for (port, batch) in &step.outputs {
                    by_port
                        .entry(name(&v1, *port))
                        .or_default()
                        .0
                        .extend(batch.to_records());
                }
                for (port, batch) in v2_out {
                    by_port
                        .entry(name(&v2, *port))
                        .or_default()
                        .1
                        .extend(batch.to_records());
                }
                let at = StepAt {
                    epoch: *epoch,
                    instance: index,
                    step: step_index,
                };
                for (port, (a, b)) in by_port {
                    let d = ports.entry(port.clone()).or_insert_with(|| PortDiff {
                        port,
                        ..PortDiff::default()
                    });
                    d.add(at, a, b, limit);
                }
            }
        }
        report.v1_reproduced &= v1_run.errors.is_empty();
        report.errors.extend(v2_run.errors);
        let want = recorded
            .store
            .load_instance(last.id, operator, index)?
            .entries;
        let got = v2_instance.as_ref().map(sorted_state).unwrap_or_default();
        merge(&mut report.state, StateDiff::of(&want, &got, limit), limit);
    }
    // Every port of either plugin has its line, records or not.
    for plugin in [&v1, &v2] {
        for port in 0..plugin.info().outputs.len() as u32 {
            let port = name(plugin, port);
            ports.entry(port.clone()).or_insert_with(|| PortDiff {
                port,
                ..PortDiff::default()
            });
        }
    }
    report.outputs = ports.into_values().collect();
    v1_cost.set(&mut report.v1);
    v2_cost.set(&mut report.v2);
    Ok(report)
}

/// The instance's keyed state, sorted by key.
fn sorted_state(instance: &OperatorInstance) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = (instance.state().iter())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    entries.sort();
    entries
}

/// Adds the differences of one instance's state to the report's.
fn merge(into: &mut StateDiff, d: StateDiff, limit: usize) {
    into.same += d.same;
    into.changed += d.changed;
    into.only_v1 += d.only_v1;
    into.only_v2 += d.only_v2;
    let room = limit.saturating_sub(into.keys.len());
    into.keys.extend(d.keys.into_iter().take(room));
    into.keys.sort_by(|a, b| a.key.cmp(&b.key));
}

/// One state difference in a sentence.
fn summary(d: &StateDiff) -> String {
    let first: Vec<String> = d
        .keys
        .iter()
        .map(|k| format!("{:?} ({})", k.key, k.kind.name()))
        .collect();
    format!(
        "{} keys changed, {} only in the checkpoint, {} only now; first: {}",
        d.changed,
        d.only_v1,
        d.only_v2,
        first.join(", ")
    )
}

/// A replay's log line for step `k` of the epoch of checkpoint `epoch`.
fn log_line(epoch: u64, k: usize, step: &Step, got: &[(u32, crate::Batch)]) -> String {
    use crate::dataflow::recording::Call;
    let call = match &step.call {
        Call::Process { port, batch } => format!("process port {port}: {} records", batch.len()),
        Call::Watermark(w) => format!("watermark {w}"),
        Call::Timers => "processing-time timers".to_owned(),
        Call::Checkpoint(id) => format!("on-checkpoint {id}"),
        Call::Finish => "finish".to_owned(),
    };
    let out = |o: &[(u32, crate::Batch)]| {
        let each: Vec<String> = o.iter().map(|(p, b)| format!("{}@{p}", b.len())).collect();
        match each.is_empty() {
            true => "nothing".to_owned(),
            false => each.join(" "),
        }
    };
    format!(
        "epoch {epoch} step {k} at {}: {call}; emitted {} (recorded {})",
        step.time,
        out(got),
        out(&step.outputs)
    )
}
