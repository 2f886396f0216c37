//! [`Manifest`]: the object that makes checkpoint *n* exist in the store,
//! created last, after every pack it names.

use serde::{Deserialize, Serialize};

use crate::store::{Catalog, CheckpointMeta};

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
    /// What the writer's store held up to the checkpoint, every piece of
    /// it rebuilt from `packs`: the checkpoints it kept (by `retain`, and
    /// for recorded epochs) and its recorded epochs. Absent in manifests
    /// written before Weir kept them: the checkpoint alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<Catalog>,
    /// The files of the state directory a restore needs: the sinks'
    /// staged epochs up to the checkpoint that were still to deliver (what
    /// a sink may have to deliver after it is restored), and the plugins
    /// kept for its swapped operators (`plugins/<sha256>.wasm`).
    pub staged: Vec<Staged>,
}

/// A file of the state directory copied to the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staged {
    /// Its path relative to the state directory (`sinks/<id>/<n>.epoch`,
    /// `plugins/<sha256>.wasm`).
    pub path: String,
    /// Its object (`staged/<version>-<writer>/<path>`).
    pub object: String,
}

impl Manifest {
    /// What the packs rebuild: the catalog, else the checkpoint alone.
    pub fn catalog(&self) -> Catalog {
        (self.catalog.clone()).unwrap_or_else(|| Catalog::only(self.id))
    }

    /// Every object the checkpoint reads: its packs and staged epochs.
    pub fn objects(&self) -> impl Iterator<Item = &String> {
        self.packs
            .iter()
            .chain(self.staged.iter().map(|s| &s.object))
    }
}
