//! What happened to a running job, for the dashboard: the recent
//! checkpoints (completed and failed), the recent events (failures,
//! restarts, swaps, savepoints) and the plugin each operator runs.
//!
//! Invariants:
//! - Only the job's control paths write it (the driver once per checkpoint,
//!   the supervisor per attempt, the control socket per request), never the
//!   data path: its locks cost a job nothing per record.
//! - It holds at most [`CHECKPOINTS_KEPT`] checkpoints and [`EVENTS_KEPT`]
//!   events, the newest; [`Journal::changes`] counts every write, so a
//!   reader can tell an unchanged journal without locking.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::SystemTime;

use serde::Serialize;

use crate::time::unix_ms;

/// Checkpoints the journal keeps, the newest.
pub const CHECKPOINTS_KEPT: usize = 100;
/// Events the journal keeps, the newest.
pub const EVENTS_KEPT: usize = 50;

/// One checkpoint, completed or failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointRecord {
    /// Checkpoint id.
    pub id: u64,
    /// When it was triggered, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// Trigger to completion (or failure), ms.
    pub duration_ms: u64,
    /// Longest barrier alignment of an instance, ms.
    pub alignment_ms: u64,
    /// Longest pause of an operator instance's thread, ms.
    pub pause_ms: u64,
    /// Bytes the store wrote for it (0 when failed).
    pub bytes_written: u64,
    /// Whether some instance took it unaligned.
    pub unaligned: bool,
    /// Bytes of in-flight records stored with it (unaligned only).
    pub inflight_bytes: u64,
    /// Whether it is the final checkpoint at the end of input.
    pub is_final: bool,
    /// Why it failed; `None` for a completed checkpoint.
    pub error: Option<String>,
}

/// What an [`Event`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// An attempt of the job failed (or the job gave up).
    Failure,
    /// The job restarts from its last complete checkpoint.
    Restart,
    /// A plugin swap's outcome.
    Swap,
    /// A savepoint's outcome.
    Savepoint,
    /// A control request refused before it was understood.
    Control,
}

/// One thing that happened to the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Position in the journal's history, from 1 (never reused).
    pub seq: u64,
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What it is about.
    pub kind: EventKind,
    /// Whether it reports an error.
    pub error: bool,
    /// What happened, one line for a person.
    pub message: String,
}

/// The plugin an operator runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginRecord {
    /// Its name, as its `describe` says.
    pub name: String,
    /// Its version, as its `describe` says.
    pub version: String,
    /// The sha256 of its `.wasm` bytes, lower-case hex.
    pub sha256: String,
    /// The file it was loaded from.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Whether it exports the flat batch interface.
    pub flat: bool,
    /// The version of the state layout it reads and writes.
    pub state_version: u32,
}

/// The journal of one job run (see the module docs).
#[derive(Debug, Default)]
pub struct Journal {
    checkpoints: Mutex<VecDeque<CheckpointRecord>>,
    events: Mutex<VecDeque<Event>>,
    plugins: Mutex<BTreeMap<String, PluginRecord>>,
    next_seq: AtomicU64,
    changes: AtomicU64,
}

impl Journal {
    /// Records a checkpoint (completed or failed), dropping the oldest
    /// beyond [`CHECKPOINTS_KEPT`].
    pub fn checkpoint(&self, record: CheckpointRecord) {
        push(&self.checkpoints, record, CHECKPOINTS_KEPT);
        self.changes.fetch_add(1, Relaxed);
    }

    /// Records an event that happens now.
    ///
    /// ```
    /// use weir::metrics::{EventKind, Journal};
    /// let j = Journal::default();
    /// j.event(EventKind::Restart, false, "restarting".into());
    /// let e = &j.events()[0];
    /// assert_eq!((e.seq, e.kind, e.error), (1, EventKind::Restart, false));
    /// ```
    pub fn event(&self, kind: EventKind, error: bool, message: String) {
        let event = Event {
            seq: self.next_seq.fetch_add(1, Relaxed) + 1,
            at_ms: unix_ms(SystemTime::now()),
            kind,
            error,
            message,
        };
        push(&self.events, event, EVENTS_KEPT);
        self.changes.fetch_add(1, Relaxed);
    }

    /// Records the plugin operator `operator` runs from now on.
    pub fn plugin(&self, operator: &str, record: PluginRecord) {
        let mut plugins = self.plugins.lock().unwrap_or_else(|e| e.into_inner());
        if plugins.get(operator) != Some(&record) {
            plugins.insert(operator.to_string(), record);
            self.changes.fetch_add(1, Relaxed);
        }
    }

    /// The kept checkpoints, oldest first.
    pub fn checkpoints(&self) -> Vec<CheckpointRecord> {
        let kept = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().cloned().collect()
    }

    /// The kept events, oldest first.
    pub fn events(&self) -> Vec<Event> {
        let kept = self.events.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().cloned().collect()
    }

    /// The plugin of each operator that loaded one, by operator id.
    pub fn plugins(&self) -> BTreeMap<String, PluginRecord> {
        self.plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Writes so far: equal counts mean an unchanged journal.
    pub fn changes(&self) -> u64 {
        self.changes.load(Relaxed)
    }
}

/// Appends `item`, keeping the newest `keep`.
fn push<T>(list: &Mutex<VecDeque<T>>, item: T, keep: usize) {
    let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
    if list.len() == keep {
        list.pop_front();
    }
    list.push_back(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64) -> CheckpointRecord {
        CheckpointRecord {
            id,
            started_at_ms: 0,
            duration_ms: 1,
            alignment_ms: 0,
            pause_ms: 0,
            bytes_written: 10,
            unaligned: false,
            inflight_bytes: 0,
            is_final: false,
            error: None,
        }
    }

    #[test]
    fn the_newest_checkpoints_and_events_are_kept_in_order() {
        let j = Journal::default();
        for id in 1..=CHECKPOINTS_KEPT as u64 + 5 {
            j.checkpoint(record(id));
        }
        let ids: Vec<u64> = j.checkpoints().iter().map(|c| c.id).collect();
        assert_eq!(ids, (6..=CHECKPOINTS_KEPT as u64 + 5).collect::<Vec<_>>());
        for i in 0..EVENTS_KEPT + 3 {
            j.event(EventKind::Failure, true, format!("e{i}"));
        }
        let events = j.events();
        assert_eq!(events.len(), EVENTS_KEPT);
        assert_eq!(events[0].message, "e3");
        assert_eq!(events[0].seq, 4, "sequence numbers are never reused");
        assert_eq!(events.last().unwrap().seq, EVENTS_KEPT as u64 + 3);
    }

    #[test]
    fn every_write_is_a_change_and_an_unchanged_plugin_is_not() {
        let j = Journal::default();
        assert_eq!(j.changes(), 0);
        j.checkpoint(record(1));
        j.event(EventKind::Swap, false, "swapped".into());
        assert_eq!(j.changes(), 2);
        let p = PluginRecord {
            name: "wc".into(),
            version: "1".into(),
            sha256: "ab".into(),
            path: "wc.wasm".into(),
            size: 3,
            flat: false,
            state_version: 1,
        };
        j.plugin("count", p.clone());
        j.plugin("count", p.clone());
        assert_eq!(j.changes(), 3, "the same plugin again changes nothing");
        j.plugin(
            "count",
            PluginRecord {
                version: "2".into(),
                ..p
            },
        );
        assert_eq!(j.changes(), 4);
        assert_eq!(j.plugins()["count"].version, "2");
    }

    #[test]
    fn a_failed_checkpoint_serializes_with_its_error() {
        let failed = CheckpointRecord {
            error: Some("disk full".into()),
            ..record(7)
        };
        let v = serde_json::to_value(&failed).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"], "disk full");
        assert_eq!(
            serde_json::to_value(record(1)).unwrap()["error"],
            serde_json::Value::Null
        );
        let kind = serde_json::to_value(EventKind::Savepoint).unwrap();
        assert_eq!(kind, "savepoint");
    }
}
