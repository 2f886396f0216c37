//! The metadata of a checkpoint, stored as JSON in the `checkpoints` table:
//! [`CheckpointMeta`] with, per operator, its plugin ([`OperatorMeta`], and
//! [`SwappedPlugin`] when it is not the job file's), and
//! the source offsets and sink commit information, which are opaque JSON
//! values to the store (the connectors define them).

use std::collections::BTreeMap;

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::config::RecordInputs;
use crate::dataflow::partition::KEY_GROUPS;
use crate::time::unix_ms;

/// Metadata of one complete checkpoint (stored as JSON).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CheckpointMeta {
    /// Checkpoint id; strictly increasing within a store, from 1.
    pub id: u64,
    /// Job name.
    pub job: String,
    /// Unix milliseconds when the checkpoint was triggered.
    pub started_at_ms: u64,
    /// Milliseconds from trigger to completion.
    pub duration_ms: u64,
    /// Longest barrier alignment over all instances, in milliseconds.
    pub alignment_ms: u64,
    /// Longest pause of an operator instance's thread for the checkpoint
    /// (from its aligned barrier to its acknowledgement), in milliseconds;
    /// absent in checkpoints written before Weir measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_ms: Option<u64>,
    /// Bytes of keys, values and snapshots written (set by [`CheckpointStore::commit`](super::CheckpointStore::commit)).
    pub bytes_written: u64,
    /// Live keys across all operators after this checkpoint (set by [`CheckpointStore::commit`](super::CheckpointStore::commit)).
    pub state_keys: u64,
    /// Number of key groups the key space is split into.
    pub key_groups: u32,
    /// Source id -> read offset (opaque to the store).
    pub sources: BTreeMap<String, serde_json::Value>,
    /// Operator id -> plugin and parallelism.
    pub operators: BTreeMap<String, OperatorMeta>,
    /// Sink id -> commit information (opaque to the store).
    pub sinks: BTreeMap<String, serde_json::Value>,
    /// Sink id -> its `type`, whose connector wrote the commit information;
    /// absent in checkpoints written before Weir recorded it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sink_types: BTreeMap<String, String>,
    /// Taken at end of input.
    pub final_checkpoint: bool,
    /// Some operator instance took the checkpoint unaligned (its first
    /// barrier overtook the records queued ahead of the others); absent,
    /// i.e. false, in aligned checkpoints and in those written before Weir
    /// had unaligned checkpoints.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unaligned: bool,
    /// Bytes of in-flight data stored with the checkpoint (the `inflight`
    /// table); absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inflight_bytes: u64,
    /// Bytes of recorded input written with the checkpoint (the
    /// `recordings` table, which drops them once `record_inputs` no
    /// longer keeps them); absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recorded_bytes: u64,
    /// Set when the checkpoint was derived from another one instead of
    /// taken from the running job: at a restore that changed operators'
    /// parallelism, or from a savepoint. Absent otherwise (and in
    /// checkpoints written before Weir derived any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<Derivation>,
}

impl CheckpointMeta {
    /// Checkpoint `id` of `job`, started now, over the whole key space
    /// ([`KEY_GROUPS`]), with no offsets, operators or sinks and nothing
    /// measured yet: the base the other fields are set on.
    pub fn new(id: u64, job: impl Into<String>) -> CheckpointMeta {
        CheckpointMeta {
            id,
            job: job.into(),
            started_at_ms: unix_ms(SystemTime::now()),
            duration_ms: 0,
            alignment_ms: 0,
            pause_ms: None,
            bytes_written: 0,
            state_keys: 0,
            key_groups: KEY_GROUPS,
            sources: BTreeMap::new(),
            operators: BTreeMap::new(),
            sinks: BTreeMap::new(),
            sink_types: BTreeMap::new(),
            final_checkpoint: false,
            unaligned: false,
            inflight_bytes: 0,
            recorded_bytes: 0,
            derived: None,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a derived checkpoint's state came from.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Derivation {
    /// The checkpoint whose state it holds (of this store, or of the
    /// savepoint).
    pub checkpoint: u64,
    /// The savepoint directory, when the state came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub savepoint: Option<String>,
    /// Operators whose parallelism changed: id -> `[from, to]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rescaled: BTreeMap<String, [u32; 2]>,
    /// State left behind because the job no longer has its operator,
    /// source or sink (`--allow-non-restored-state`): their ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
}

/// The plugin behind an operator at a checkpoint.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct OperatorMeta {
    /// Plugin name.
    pub plugin_name: String,
    /// Plugin version.
    pub plugin_version: String,
    /// Version of the plugin's state format.
    pub state_version: u32,
    /// SHA-256 of the plugin's `.wasm`, hex.
    pub sha256: String,
    /// The plugin file it ran, as the job file or `--swap` named it;
    /// absent in checkpoints written before Weir recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_path: Option<String>,
    /// Number of instances.
    pub parallelism: u32,
    /// Set when the operator ran another plugin than its job file's (a swap
    /// with `--swap` or `weir swap`); absent in checkpoints written before
    /// Weir recorded swaps, which read as "the job file's plugin".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swapped: Option<SwappedPlugin>,
    /// What of its input the operator records (`record_inputs`); absent
    /// when nothing: its recordings go at the next checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<RecordInputs>,
    /// sha256 of the operator's `config` (its JSON text), kept while it
    /// records: a replay runs its epochs with the config they ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
}

/// Where an operator's swapped-in plugin came from and where the state dir
/// keeps its copy, so that a restart restores with it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SwappedPlugin {
    /// The file it was swapped in from.
    pub from: String,
    /// Its copy, relative to the state dir: `plugins/<sha256>.wasm`.
    pub copy: String,
    /// sha256 of the job file's plugin for the operator when the swap was
    /// made (empty if that file could not be read). A job file whose plugin
    /// has another sha256 now was edited since, and takes precedence.
    pub job_file_sha256: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint written before pauses were measured reads without one,
    /// and the pause round-trips.
    #[test]
    fn checkpoint_meta_reads_old_checkpoints_and_keeps_the_pause() {
        let old = r#"{"id":3,"job":"j","started_at_ms":1,"duration_ms":2,"alignment_ms":0,"bytes_written":4,"state_keys":5,"key_groups":128,"sources":{},"operators":{},"sinks":{},"final_checkpoint":false}"#;
        let m: CheckpointMeta = serde_json::from_str(old).unwrap();
        assert_eq!((m.id, m.pause_ms), (3, None));
        assert_eq!(serde_json::to_string(&m).unwrap(), old, "no new field");
        let paused = CheckpointMeta {
            pause_ms: Some(7),
            ..m
        };
        let json = serde_json::to_string(&paused).unwrap();
        assert!(json.contains(r#""alignment_ms":0,"pause_ms":7,"#), "{json}");
        assert_eq!(
            serde_json::from_str::<CheckpointMeta>(&json).unwrap(),
            paused
        );
    }

    /// A checkpoint written before unaligned checkpoints reads as aligned
    /// with no in-flight data; both fields round-trip and are written only
    /// when set.
    #[test]
    fn checkpoint_meta_reads_old_checkpoints_as_aligned() {
        let old = r#"{"id":3,"job":"j","started_at_ms":1,"duration_ms":2,"alignment_ms":0,"bytes_written":4,"state_keys":5,"key_groups":128,"sources":{},"operators":{},"sinks":{},"final_checkpoint":false}"#;
        let m: CheckpointMeta = serde_json::from_str(old).unwrap();
        assert_eq!((m.unaligned, m.inflight_bytes), (false, 0));
        assert_eq!(serde_json::to_string(&m).unwrap(), old, "no new field");
        let unaligned = CheckpointMeta {
            unaligned: true,
            inflight_bytes: 42,
            ..m
        };
        let json = serde_json::to_string(&unaligned).unwrap();
        assert!(
            json.ends_with(r#""final_checkpoint":false,"unaligned":true,"inflight_bytes":42}"#),
            "{json}"
        );
        assert_eq!(
            serde_json::from_str::<CheckpointMeta>(&json).unwrap(),
            unaligned
        );
    }

    /// A checkpoint written before swaps were recorded reads as running the
    /// job file's plugin, and the record round-trips.
    #[test]
    fn operator_meta_reads_old_checkpoints_and_keeps_the_swap_record() {
        let old = r#"{"plugin_name":"word-count","plugin_version":"0.1.0","state_version":1,"sha256":"ab","parallelism":2}"#;
        let m: OperatorMeta = serde_json::from_str(old).unwrap();
        assert_eq!(m.swapped, None);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            old,
            "no new field when not swapped"
        );
        let swapped = OperatorMeta {
            swapped: Some(SwappedPlugin {
                from: "/p/v2.wasm".into(),
                copy: "plugins/ab.wasm".into(),
                job_file_sha256: "cd".into(),
            }),
            ..m
        };
        let json = serde_json::to_string(&swapped).unwrap();
        assert_eq!(
            serde_json::from_str::<OperatorMeta>(&json).unwrap(),
            swapped
        );
    }
}
