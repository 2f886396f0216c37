//! What a replay or shadow run reports ([`ReplayReport`], [`ShadowReport`],
//! the [`PluginRun`] of each plugin) and when a shadow run allows a swap
//! ([`Rule`]).

use std::path::Path;

use serde::Serialize;

use super::diff::{PortDiff, StateDiff};
use super::rerun::{Failure, Run, StepError};
use crate::wasm::Plugin;

/// A plugin as a report names it, and what running it cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PluginRun {
    /// Its name and version, as it describes itself.
    pub name: String,
    /// Its version.
    pub version: String,
    /// SHA-256 of its `.wasm`.
    pub sha256: String,
    /// The file it was loaded from.
    pub path: String,
    /// Records given to `process`.
    pub records_in: u64,
    /// CPU time in its calls per record given, nanoseconds.
    pub cpu_ns_per_record: f64,
    /// The most linear memory one of its instances had, bytes.
    pub peak_memory_bytes: u64,
}

/// What [`replay`](super::replay) found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The operator.
    pub operator: String,
    /// The checkpoint whose epoch ran again.
    pub checkpoint: u64,
    /// The checkpoint it started from; `None`: the job's start.
    pub from_checkpoint: Option<u64>,
    /// The plugin that ran it, and ran it again.
    pub plugin: PluginRun,
    /// Per instance.
    pub instances: Vec<InstanceReplay>,
    /// Every instance emitted the same bytes and ended in the same state.
    pub identical: bool,
}

/// What the replay of one instance found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceReplay {
    /// The instance.
    pub instance: u32,
    /// Calls made again.
    pub steps: usize,
    /// Records emitted, as recorded.
    pub records_out: u64,
    /// Every call emitted the bytes it had.
    pub outputs_identical: bool,
    /// The keyed state at the end is the checkpoint's.
    pub state_identical: bool,
    /// The plugin's snapshot at the end is the checkpoint's.
    pub snapshot_identical: bool,
    /// The first difference: the step, its call and what differs.
    pub first_difference: Option<String>,
    /// Calls that failed.
    pub errors: Vec<StepError>,
    /// Every call made again, one line each: the step, its time, the
    /// call, records in and out, then (when asked for) the host calls it
    /// made, one indented line each (the log of `weir replay --log`).
    pub log: Vec<String>,
}

/// What [`shadow`](super::shadow) found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShadowReport {
    /// The operator.
    pub operator: String,
    /// The checkpoint the run started from; `None`: the job's start.
    pub from_checkpoint: Option<u64>,
    /// The last epoch's checkpoint.
    pub to_checkpoint: u64,
    /// The checkpoints whose epochs ran.
    pub epochs: Vec<u64>,
    /// The operator's instances.
    pub instances: u32,
    /// The plugin that ran the recorded epochs (run again for its costs).
    pub v1: PluginRun,
    /// The plugin tried on them.
    pub v2: PluginRun,
    /// The recorded plugin, run again, emitted what it had recorded.
    pub v1_reproduced: bool,
    /// The job file's `config` of the operator, which both runs were
    /// given, is not the one the recorded epochs ran with: a difference
    /// may be the config's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub config_changed: bool,
    /// Per output port (by name, of either plugin).
    pub outputs: Vec<PortDiff>,
    /// The new plugin's state against the recorded plugin's at
    /// `to_checkpoint`.
    pub state: StateDiff,
    /// The new plugin's failed calls and refused records.
    pub errors: Vec<StepError>,
    /// The most differences listed per port and in the state.
    pub limit: usize,
}

impl ShadowReport {
    /// Records that differ on every port.
    pub fn differing_records(&self) -> u64 {
        self.outputs.iter().map(PortDiff::differing).sum()
    }

    /// The new plugin's traps.
    pub fn traps(&self) -> usize {
        self.errors
            .iter()
            .filter(|e| e.kind == Failure::Trap)
            .count()
    }
}

/// When a shadow run allows a swap (`weir swap --shadow`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rule {
    /// Most records that may differ (changed or only in one run); `None`:
    /// any number.
    pub max_changed: Option<u64>,
    /// Most failed calls and refused records that are no trap. A trap
    /// always refuses.
    pub max_errors: u64,
}

impl Rule {
    /// `Ok` when `report` meets the rule, else why not.
    pub fn check(&self, report: &ShadowReport) -> Result<(), String> {
        if let Some(trap) = report.errors.iter().find(|e| e.kind == Failure::Trap) {
            return Err(format!(
                "{} trapped on recorded input (instance {}, epoch of checkpoint {}, step {}, {}): {}",
                report.v2.path, trap.instance, trap.epoch, trap.step, trap.call, trap.message
            ));
        }
        let errors = report.errors.len() as u64;
        if errors > self.max_errors {
            return Err(format!(
                "{} failed {errors} times on recorded input (at most {} allowed; --max-errors); the first: {}",
                report.v2.path, self.max_errors, report.errors[0].message
            ));
        }
        let differing = report.differing_records();
        match self.max_changed {
            Some(max) if differing > max => Err(format!(
                "{} emitted {differing} records other than the recorded plugin did on the recorded epochs (at most {max} allowed; --max-changed)",
                report.v2.path
            )),
            _ => Ok(()),
        }
    }
}

/// A plugin as a report names it, before it ran.
pub(super) fn plugin_run(plugin: &Plugin, path: &Path) -> PluginRun {
    PluginRun {
        name: plugin.info().name.clone(),
        version: plugin.info().version.clone(),
        sha256: plugin.sha256().to_owned(),
        path: path.display().to_string(),
        ..PluginRun::default()
    }
}

/// What the runs of one plugin cost, over its instances.
#[derive(Default)]
pub(super) struct Cost {
    records: u64,
    cpu_ns: u128,
    peak_memory: usize,
}

impl Cost {
    pub(super) fn add(&mut self, run: &Run) {
        self.records += run.records_in;
        self.cpu_ns += run.cpu.as_nanos();
        self.peak_memory = self.peak_memory.max(run.peak_memory);
    }

    pub(super) fn set(&self, plugin: &mut PluginRun) {
        plugin.records_in = self.records;
        plugin.cpu_ns_per_record = match self.records {
            0 => 0.0,
            n => self.cpu_ns as f64 / n as f64,
        };
        plugin.peak_memory_bytes = self.peak_memory as u64;
    }
}
