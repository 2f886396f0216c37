//! The metadata of a checkpoint, stored as JSON in the `checkpoints` table:
//! [`CheckpointMeta`] with, per operator, its plugin ([`OperatorMeta`]), and
//! the source offsets and sink commit information, which are opaque JSON
//! values to the store (the connectors define them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    /// Taken at end of input.
    pub final_checkpoint: bool,
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
    /// Number of instances.
    pub parallelism: u32,
}
