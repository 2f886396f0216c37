//! [`Manifest`]: the object that makes checkpoint *n* exist in the store,
//! created last, after every pack it names.

use serde::{Deserialize, Serialize};

use crate::store::CheckpointMeta;

/// The manifest format this Weir writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

/// Checkpoint `id` in the object store (`manifests/<id>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`].
    pub format: u32,
    /// The job.
    pub job: String,
    /// The checkpoint.
    pub id: u64,
    /// Who wrote it: one id per attempt of a process, so that two
    /// processes of the job never take each other's objects for their own.
    pub writer: String,
    /// The packs of every version the checkpoint reads, ascending by
    /// version; the last is the checkpoint's own, holding its metadata,
    /// in-flight data and the sinks' staged epochs to deliver.
    pub packs: Vec<String>,
    /// The checkpoint's metadata, for listings without a download.
    pub meta: CheckpointMeta,
}
