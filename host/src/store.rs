//! The checkpoint store: one redb file per state directory holding the
//! complete checkpoints of one job, with incremental keyed state.
//!
//! A checkpoint is complete iff its row in `checkpoints` exists; it is written
//! with its state in one durable write transaction, so it is never
//! half-visible. Each checkpoint stores, per instance that changed, one
//! segment: a sorted run of its changes (a delta) or, now and then, its whole
//! state (a full segment). Layout, compaction and garbage collection:
//! `docs/checkpoints.md`.

mod chain;
mod segment;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::{
    Builder, ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase,
    ReadableTable, TableDefinition, TableHandle, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use chain::{TUNING, Tables, Tuning};

pub use crate::dataflow::protocol::InstanceDelta;

/// Name of the store file inside the state directory.
pub const FILE_NAME: &str = "checkpoints.redb";
/// Version of the table layout, stored under `format` in the `meta` table.
pub const FORMAT_VERSION: u32 = 2;

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const CHECKPOINTS: TableDefinition<u64, &[u8]> = TableDefinition::new("checkpoints");
/// (operator, instance, version) -> segment header.
const SEGMENTS: TableDefinition<(&str, u32, u64), &[u8]> = TableDefinition::new("segments");
/// (operator, instance, version, chunk) -> encoded entries.
const CHUNKS: TableDefinition<(&str, u32, u64, u32), &[u8]> = TableDefinition::new("chunks");
/// (operator, instance, version) -> snapshot bytes.
const SNAPSHOTS: TableDefinition<(&str, u32, u64), &[u8]> = TableDefinition::new("snapshots");
/// (version, operator, instance): the instance wrote a full segment or a
/// snapshot at `version` that hides older ones; collected once `version` is
/// no newer than the oldest retained checkpoint.
const GC: TableDefinition<(u64, &str, u32), ()> = TableDefinition::new("gc");
const TABLES: [&str; 6] = [
    "meta",
    "checkpoints",
    "segments",
    "chunks",
    "snapshots",
    "gc",
];

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
    /// Bytes of keys, values and snapshots written (set by [`CheckpointStore::commit`]).
    pub bytes_written: u64,
    /// Live keys across all operators after this checkpoint (set by [`CheckpointStore::commit`]).
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

/// Outcome of [`CheckpointStore::commit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    /// Bytes of keys, values and snapshots written.
    pub bytes_written: u64,
    /// Time spent in the store, including the durable commit.
    pub duration: Duration,
}

/// State of one instance as of a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoredInstance {
    /// Live entries, sorted by key.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Snapshot bytes; empty if never written.
    pub snapshot: Vec<u8>,
}

/// One live entry of an operator: `(instance, key, value)`.
pub type OperatorEntry = (u32, Vec<u8>, Vec<u8>);

/// Errors of the checkpoint store. Messages are one line, name the file or
/// directory and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state directory holds no store.
    #[error("no checkpoints in {}: it has no {FILE_NAME} (check --state-dir; a job creates it when it first runs)", dir.display())]
    NotFound {
        /// State directory.
        dir: PathBuf,
    },
    /// The store belongs to another job.
    #[error("{} holds the checkpoints of job `{found}`, not `{expected}`: use another --state-dir for `{expected}`, or delete the directory to discard `{found}`'s checkpoints", dir.display())]
    OtherJob {
        /// State directory.
        dir: PathBuf,
        /// Job recorded in the store.
        found: String,
        /// Job that tried to open it.
        expected: String,
    },
    /// The file is damaged or not a checkpoint store.
    #[error("checkpoint store {} is damaged ({message}): move it away to start from scratch, or restore it from a backup", path.display())]
    Corrupt {
        /// Store file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An I/O error.
    #[error("I/O error on {}: {error} (check permissions and free disk space)", path.display())]
    Io {
        /// File or directory.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// Another process has the store open for writing.
    #[error("checkpoint store {} is in use by another process: stop the other `weir run` using this --state-dir, or use another one", path.display())]
    InUse {
        /// Store file.
        path: PathBuf,
    },
    /// The checkpoint does not exist (never completed, garbage-collected or truncated).
    #[error("checkpoint {id} is not in {}: it never completed or is no longer retained; `weir checkpoints` lists the restorable ones", path.display())]
    UnknownCheckpoint {
        /// Store file.
        path: PathBuf,
        /// Requested checkpoint.
        id: u64,
    },
    /// The store was written with a layout this build does not read.
    #[error("checkpoint store {} has format {found:?}, this weir reads format {FORMAT_VERSION}: use the weir version that wrote it, or another --state-dir, or delete {} to start from scratch", path.display(), path.parent().map_or_else(|| path.display().to_string(), |d| d.display().to_string()))]
    UnsupportedFormat {
        /// Store file.
        path: PathBuf,
        /// Format recorded in the store.
        found: String,
    },
    /// The caller passed something the store refuses (a bug in the caller).
    #[error("{message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
    /// Any other database error, with the operation that failed.
    #[error("{message}")]
    Db {
        /// Operation, file and error.
        message: String,
    },
}

/// Internal error: a redb error, given context at the API boundary, or a
/// finished [`StoreError`]. Lets `?` work on every redb call.
#[derive(Debug)]
enum Fail {
    Redb(redb::Error),
    Store(StoreError),
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(impl From<$t> for Fail {
        fn from(e: $t) -> Self { Fail::Redb(e.into()) }
    })*};
}
from_redb!(
    redb::StorageError,
    redb::TableError,
    redb::TransactionError,
    redb::CommitError
);

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

fn classify(path: &Path, what: &str, e: Fail) -> StoreError {
    let path = path.to_path_buf();
    match e {
        Fail::Store(e) => e,
        Fail::Redb(redb::Error::Corrupted(message)) => StoreError::Corrupt { path, message },
        Fail::Redb(redb::Error::Io(error)) if error.kind() == std::io::ErrorKind::InvalidData => {
            StoreError::Corrupt {
                path,
                message: error.to_string(),
            }
        }
        Fail::Redb(redb::Error::Io(error)) => StoreError::Io { path, error },
        Fail::Redb(redb::Error::DatabaseAlreadyOpen) => StoreError::InUse { path },
        Fail::Redb(other) => StoreError::Db {
            message: format!(
                "checkpoint store {}: {what} failed: {other} (the last complete checkpoint is unaffected; retry, or report a bug)",
                path.display()
            ),
        },
    }
}

fn builder() -> Builder {
    let mut b = Builder::new();
    // Corruption is reported at open instead of panicking later; the
    // single-writer mode lets `weir checkpoints` read while a job runs.
    b.set_check_integrity_on_open(true)
        .set_concurrency_mode(ConcurrencyMode::SingleWriter);
    b
}

fn invalid(message: String) -> StoreError {
    StoreError::Invalid { message }
}

enum Handle {
    ReadWrite(Database),
    ReadOnly(ReadOnlyDatabase),
}

/// The checkpoint store of one job.
pub struct CheckpointStore {
    db: Handle,
    dir: PathBuf,
    path: PathBuf,
    tuning: Tuning,
}

impl std::fmt::Debug for CheckpointStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointStore")
            .field("path", &self.path)
            .field("read_only", &self.is_read_only())
            .finish()
    }
}

impl CheckpointStore {
    /// Opens (creating the dir and file when missing) the store in `dir` for
    /// job `job`. A store of another job is refused ([`StoreError::OtherJob`]),
    /// a damaged file is [`StoreError::Corrupt`].
    pub fn open(dir: &Path, job: &str) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|error| StoreError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        let path = dir.join(FILE_NAME);
        let db = builder()
            .create(&path)
            .map_err(|e| classify(&path, "opening", Fail::Redb(e.into())))?;
        let store = CheckpointStore {
            db: Handle::ReadWrite(db),
            dir: dir.to_path_buf(),
            path,
            tuning: TUNING,
        };
        store.run("creating the tables", || {
            let txn = store.rw()?.begin_write()?;
            if txn.list_tables()?.next().is_some() {
                return Ok(txn.abort()?);
            }
            let mut meta = txn.open_table(META)?;
            meta.insert("job", job.as_bytes())?;
            meta.insert("format", FORMAT_VERSION.to_string().as_bytes())?;
            drop(meta);
            txn.open_table(CHECKPOINTS)?;
            txn.open_table(SEGMENTS)?;
            txn.open_table(CHUNKS)?;
            txn.open_table(SNAPSHOTS)?;
            txn.open_table(GC)?;
            Ok(txn.commit()?)
        })?;
        store.check_layout()?;
        let found = store.job()?;
        if found != job {
            let (dir, expected) = (store.dir.clone(), job.to_string());
            return Err(StoreError::OtherJob {
                dir,
                found,
                expected,
            });
        }
        Ok(store)
    }

    /// Opens an existing store for inspection (`weir checkpoints`, `weir
    /// state`) without creating anything; no file is [`StoreError::NotFound`].
    /// While a job has the store open, it is opened read-only and follows the
    /// job's commits; writes are then refused.
    pub fn open_existing(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(FILE_NAME);
        match path.try_exists() {
            Ok(true) => {}
            Ok(false) => {
                return Err(StoreError::NotFound {
                    dir: dir.to_path_buf(),
                });
            }
            Err(error) => return Err(StoreError::Io { path, error }),
        }
        let opened = builder().open(&path).map_err(|e| Fail::Redb(e.into()));
        let db = match opened.map_err(|e| classify(&path, "opening", e)) {
            Ok(db) => Handle::ReadWrite(db),
            // A running job holds the writer lock (it checked the file when it
            // opened it); a read-only directory refuses a writer.
            Err(StoreError::InUse { .. } | StoreError::Io { .. }) => {
                let ro = builder()
                    .open_read_only(&path)
                    .map_err(|e| Fail::Redb(e.into()));
                Handle::ReadOnly(ro.map_err(|e| classify(&path, "opening read-only", e))?)
            }
            Err(e) => return Err(e),
        };
        let store = CheckpointStore {
            db,
            dir: dir.to_path_buf(),
            path,
            tuning: TUNING,
        };
        store.check_layout()?;
        Ok(store)
    }

    /// Refuses another layout version first (its tables differ), then a
    /// file lacking one of this version's tables.
    fn check_layout(&self) -> Result<(), StoreError> {
        let (tables, format) = self.run("checking the layout", || {
            let txn = self.read()?;
            let tables: Vec<String> = txn.list_tables()?.map(|t| t.name().to_string()).collect();
            let format = match tables.iter().any(|t| t == "meta") {
                true => Some(
                    txn.open_table(META)?
                        .get("format")?
                        .map(|v| v.value().to_vec()),
                ),
                false => None,
            };
            Ok((tables, format))
        })?;
        if let Some(format) = format
            && format.as_deref() != Some(FORMAT_VERSION.to_string().as_bytes())
        {
            return Err(StoreError::UnsupportedFormat {
                path: self.path.clone(),
                found: String::from_utf8_lossy(&format.unwrap_or_default()).into_owned(),
            });
        }
        if let Some(missing) = TABLES.iter().find(|t| !tables.iter().any(|n| n == *t)) {
            let message = format!("not a Weir checkpoint store: it has no `{missing}` table");
            return Err(self.corrupt(message));
        }
        Ok(())
    }

    fn run<T>(&self, what: &str, f: impl FnOnce() -> Result<T, Fail>) -> Result<T, StoreError> {
        f().map_err(|e| classify(&self.path, what, e))
    }

    fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            message,
        }
    }

    fn rw(&self) -> Result<&Database, StoreError> {
        match &self.db {
            Handle::ReadWrite(db) => Ok(db),
            Handle::ReadOnly(_) => Err(invalid(format!(
                "checkpoint store {} is open read-only because a job is using it: stop the job to modify it",
                self.path.display()
            ))),
        }
    }

    fn read(&self) -> Result<ReadTransaction, Fail> {
        Ok(match &self.db {
            Handle::ReadWrite(db) => db.begin_read()?,
            Handle::ReadOnly(db) => db.begin_read()?,
        })
    }

    fn decode_meta(&self, id: u64, raw: &[u8]) -> Result<CheckpointMeta, StoreError> {
        let meta: CheckpointMeta = serde_json::from_slice(raw)
            .map_err(|e| self.corrupt(format!("metadata of checkpoint {id} is unreadable: {e}")))?;
        if meta.id != id {
            return Err(self.corrupt(format!("checkpoint row {id} holds checkpoint {}", meta.id)));
        }
        Ok(meta)
    }

    /// The job this store belongs to.
    pub fn job(&self) -> Result<String, StoreError> {
        let raw = self.run("reading the job name", || {
            Ok(self
                .read()?
                .open_table(META)?
                .get("job")?
                .map(|v| v.value().to_vec()))
        })?;
        let raw = raw.ok_or_else(|| self.corrupt("no job name recorded".into()))?;
        String::from_utf8(raw).map_err(|_| self.corrupt("the job name is not UTF-8".into()))
    }

    /// Writes checkpoint `meta.id` (greater than every existing id) with
    /// `deltas` applied in slice order (a later delta for the same
    /// operator/instance/key wins), then garbage-collects so that only the
    /// newest `retain` checkpoints stay restorable, all in one durable
    /// transaction. Stores `bytes_written` and `state_keys` in the meta row.
    pub fn commit(
        &self,
        meta: &CheckpointMeta,
        deltas: &[InstanceDelta],
        retain: usize,
    ) -> Result<CommitStats, StoreError> {
        let start = Instant::now();
        let (n, job) = (meta.id, self.job()?);
        if retain == 0 || n == 0 || n == u64::MAX || meta.job != job {
            return Err(invalid(format!(
                "refusing checkpoint {n} of job `{}` with retain {retain} in {} (job `{job}`): ids are 1..u64::MAX, retain is at least 1, the job must match",
                meta.job,
                self.path.display()
            )));
        }
        for d in deltas {
            if meta
                .operators
                .get(&d.operator)
                .is_none_or(|op| d.instance >= op.parallelism)
            {
                return Err(invalid(format!(
                    "checkpoint {n} has state for instance {} of operator `{}`, which its metadata does not list",
                    d.instance, d.operator
                )));
            }
        }
        let db = self.rw()?;
        let bytes_written = self.run(&format!("writing checkpoint {n}"), || {
            let txn = db.begin_write()?;
            let written = self.write_checkpoint(&txn, meta, deltas)?;
            self.collect_garbage(&txn, retain)?;
            txn.commit()?;
            Ok(written)
        })?;
        Ok(CommitStats {
            bytes_written,
            duration: start.elapsed(),
        })
    }

    fn write_checkpoint(
        &self,
        txn: &WriteTransaction,
        meta: &CheckpointMeta,
        deltas: &[InstanceDelta],
    ) -> Result<u64, Fail> {
        let n = meta.id;
        let mut checkpoints = txn.open_table(CHECKPOINTS)?;
        let mut live = match checkpoints.last()? {
            Some((last, _)) if last.value() >= n => {
                let message = format!(
                    "checkpoint {n} is not newer than checkpoint {} in {}: ids must increase (truncate_after the restored checkpoint first)",
                    last.value(),
                    self.path.display()
                );
                return Err(invalid(message).into());
            }
            Some((last, raw)) => self.decode_meta(last.value(), raw.value())?.state_keys,
            None => 0,
        };
        let mut t = Tables {
            segments: txn.open_table(SEGMENTS)?,
            chunks: txn.open_table(CHUNKS)?,
            snapshots: txn.open_table(SNAPSHOTS)?,
            gc: txn.open_table(GC)?,
        };
        let mut by_instance: BTreeMap<(&str, u32), Vec<&InstanceDelta>> = BTreeMap::new();
        for d in deltas {
            let instance = (d.operator.as_str(), d.instance);
            by_instance.entry(instance).or_default().push(d);
        }
        let mut bytes = 0u64;
        for ((op, inst), deltas) in by_instance {
            let changes = deltas
                .iter()
                .flat_map(|d| &d.changes)
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            let written = self.write_state(&mut t, n, op, inst, changes)?;
            bytes += written.bytes;
            live = (live + written.added)
                .checked_sub(written.removed)
                .ok_or_else(|| self.corrupt("the live key count went negative".into()))?;
            for snapshot in deltas.iter().filter_map(|d| d.snapshot.as_deref()) {
                let older = t
                    .snapshots
                    .range((op, inst, 0)..(op, inst, n))?
                    .next_back()
                    .is_some();
                t.snapshots.insert((op, inst, n), snapshot)?;
                bytes += snapshot.len() as u64;
                if older {
                    t.gc.insert((n, op, inst), ())?;
                }
            }
        }
        let stored = CheckpointMeta {
            bytes_written: bytes,
            state_keys: live,
            ..meta.clone()
        };
        let json = serde_json::to_vec(&stored)
            .map_err(|e| invalid(format!("checkpoint {n} metadata cannot be encoded: {e}")))?;
        checkpoints.insert(n, json.as_slice())?;
        Ok(bytes)
    }

    /// Drops checkpoints older than the newest `retain`, then, for every
    /// instance journaled at a version no newer than the oldest retained
    /// checkpoint (`horizon`), the segments older than its newest full
    /// segment <= horizon and the snapshots older than its newest snapshot
    /// <= horizon: every retained checkpoint reads those or newer ones.
    fn collect_garbage(&self, txn: &WriteTransaction, retain: usize) -> Result<(), Fail> {
        let mut checkpoints = txn.open_table(CHECKPOINTS)?;
        let mut horizon = 0;
        for row in checkpoints.iter()?.rev().take(retain) {
            horizon = row?.0.value();
        }
        checkpoints.retain_in(..horizon, |_, _| false)?;
        let end = horizon + 1; // ids are below u64::MAX

        let mut journal = txn.open_table(GC)?;
        let mut due = BTreeSet::new();
        for row in journal.range(..(end, "", 0))? {
            let row = row?.0;
            let (_, op, inst) = row.value();
            due.insert((op.to_string(), inst));
        }
        journal.retain_in(..(end, "", 0), |_, _| false)?;
        let mut segments = txn.open_table(SEGMENTS)?;
        let mut chunks = txn.open_table(CHUNKS)?;
        let mut snapshots = txn.open_table(SNAPSHOTS)?;
        for (op, inst) in &due {
            let (op, inst) = (op.as_str(), *inst);
            if let Some((base, _)) = self.chain(&segments, op, inst, horizon)?.full {
                segments.retain_in((op, inst, 0)..(op, inst, base), |_, _| false)?;
                chunks.retain_in((op, inst, 0, 0)..(op, inst, base, 0), |_, _| false)?;
            }
            let newest = snapshots
                .range((op, inst, 0)..=(op, inst, horizon))?
                .next_back()
                .transpose()?;
            if let Some(base) = newest.map(|(k, _)| k.value().2) {
                snapshots.retain_in((op, inst, 0)..(op, inst, base), |_, _| false)?;
            }
        }
        Ok(())
    }

    /// All complete checkpoints, ascending by id.
    pub fn list(&self) -> Result<Vec<CheckpointMeta>, StoreError> {
        self.run("listing checkpoints", || {
            let table = self.read()?.open_table(CHECKPOINTS)?;
            let rows = table.iter()?.map(|row| {
                let (id, raw) = row?;
                Ok(self.decode_meta(id.value(), raw.value())?)
            });
            rows.collect()
        })
    }

    /// The newest complete checkpoint.
    pub fn latest(&self) -> Result<Option<CheckpointMeta>, StoreError> {
        self.run("reading the latest checkpoint", || {
            let table = self.read()?.open_table(CHECKPOINTS)?;
            let last = table.last()?;
            Ok(last
                .map(|(id, raw)| self.decode_meta(id.value(), raw.value()))
                .transpose()?)
        })
    }

    /// Checkpoint `id`, if complete and retained.
    pub fn get(&self, id: u64) -> Result<Option<CheckpointMeta>, StoreError> {
        self.run("reading a checkpoint", || {
            let raw = self.read()?.open_table(CHECKPOINTS)?.get(id)?;
            Ok(raw
                .map(|raw| self.decode_meta(id, raw.value()))
                .transpose()?)
        })
    }

    fn check_exists(&self, txn: &ReadTransaction, id: u64) -> Result<(), Fail> {
        match txn.open_table(CHECKPOINTS)?.get(id)? {
            Some(_) => Ok(()),
            None => Err(StoreError::UnknownCheckpoint {
                path: self.path.clone(),
                id,
            }
            .into()),
        }
    }

    /// State of one instance as of checkpoint `id`: its newest full segment
    /// <= id with every later delta <= id applied in version order, and its
    /// newest snapshot <= id.
    pub fn load_instance(
        &self,
        id: u64,
        operator: &str,
        instance: u32,
    ) -> Result<RestoredInstance, StoreError> {
        self.run("loading state", || {
            let txn = self.read()?;
            self.check_exists(&txn, id)?;
            let entries = self.load(&txn, id, operator, instance)?;
            let snapshots = txn.open_table(SNAPSHOTS)?;
            let snapshot = match snapshots
                .range((operator, instance, 0)..=(operator, instance, id))?
                .next_back()
            {
                Some(row) => row?.1.value().to_vec(),
                None => Vec::new(),
            };
            Ok(RestoredInstance { entries, snapshot })
        })
    }

    /// All live entries of `operator` at checkpoint `id`, across instances:
    /// `(instance, key, value)` sorted by (key, instance).
    pub fn operator_state(
        &self,
        id: u64,
        operator: &str,
    ) -> Result<Vec<OperatorEntry>, StoreError> {
        let mut out = self.run("loading state", || {
            let txn = self.read()?;
            self.check_exists(&txn, id)?;
            let mut instances = BTreeSet::new();
            let segments = txn.open_table(SEGMENTS)?;
            for row in segments.range((operator, 0, 0)..=(operator, u32::MAX, u64::MAX))? {
                instances.insert(row?.0.value().1);
            }
            let mut out = Vec::new();
            for inst in instances {
                let entries = self.load(&txn, id, operator, inst)?;
                out.extend(entries.into_iter().map(|(k, v)| (inst, k, v)));
            }
            Ok(out)
        })?;
        out.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
        Ok(out)
    }

    /// Deletes every checkpoint newer than `id` (an existing checkpoint, or 0
    /// for all) with the segments, snapshots and journal rows they wrote, in
    /// one transaction.
    pub fn truncate_after(&self, id: u64) -> Result<(), StoreError> {
        let db = self.rw()?;
        self.run(&format!("truncating after checkpoint {id}"), || {
            let txn = db.begin_write()?;
            {
                let mut checkpoints = txn.open_table(CHECKPOINTS)?;
                if id != 0 && checkpoints.get(id)?.is_none() {
                    return Err(StoreError::UnknownCheckpoint {
                        path: self.path.clone(),
                        id,
                    }
                    .into());
                }
                let after = id.saturating_add(1);
                checkpoints.retain_in(after.., |_, _| false)?;
                let mut segments = txn.open_table(SEGMENTS)?;
                let mut newer = Vec::new();
                for row in segments.iter()? {
                    let row = row?.0;
                    let (op, inst, version) = row.value();
                    if version > id {
                        newer.push((op.to_string(), inst, version));
                    }
                }
                segments.retain(|k, _| k.2 <= id)?;
                let mut chunks = txn.open_table(CHUNKS)?;
                for (op, inst, v) in &newer {
                    let (op, inst, v) = (op.as_str(), *inst, *v);
                    chunks.retain_in((op, inst, v, 0)..=(op, inst, v, u32::MAX), |_, _| false)?;
                }
                txn.open_table(SNAPSHOTS)?.retain(|k, _| k.2 <= id)?;
                txn.open_table(GC)?
                    .retain_in((after, "", 0).., |_, _| false)?;
            }
            Ok(txn.commit()?)
        })
    }

    /// Path of the store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the store was opened read-only (by [`Self::open_existing`]
    /// while a job holds it); commits and truncation are then refused.
    pub fn is_read_only(&self) -> bool {
        matches!(self.db, Handle::ReadOnly(_))
    }

    /// The store with other chunk and compaction thresholds.
    #[cfg(test)]
    fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// Size of the store file in bytes.
    pub fn file_size(&self) -> Result<u64, StoreError> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|error| StoreError::Io {
                path: self.path.clone(),
                error,
            })
    }
}

#[cfg(test)]
mod tests;
