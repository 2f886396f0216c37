//! The checkpoint store: one redb file per state directory holding the
//! complete checkpoints of one job, with incremental (versioned) keyed state.
//!
//! A checkpoint is complete iff its row in `checkpoints` exists; it is written
//! with its state in one durable write transaction, so it is never
//! half-visible. Layout and garbage collection: `docs/checkpoints.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::{
    Builder, ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase,
    ReadableTable, TableDefinition, TableHandle, WriteTransaction,
};
use serde::{Deserialize, Serialize};

/// Name of the store file inside the state directory.
pub const FILE_NAME: &str = "checkpoints.redb";
/// Version of the table layout, stored under `format` in the `meta` table.
pub const FORMAT_VERSION: u32 = 1;

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const CHECKPOINTS: TableDefinition<u64, &[u8]> = TableDefinition::new("checkpoints");
/// (operator, instance, state key, version) -> 1 + value, or 0 (tombstone).
const STATE: TableDefinition<(&str, u32, &[u8], u64), &[u8]> = TableDefinition::new("state");
/// (operator, instance, version) -> snapshot bytes.
const SNAPSHOTS: TableDefinition<(&str, u32, u64), &[u8]> = TableDefinition::new("snapshots");
/// (version, operator, instance, key): a key to compact once `version` is
/// no newer than the oldest retained checkpoint.
const GC_STATE: TableDefinition<(u64, &str, u32, &[u8]), ()> = TableDefinition::new("gc_state");
/// (version, operator, instance): the same for snapshots.
const GC_SNAPSHOTS: TableDefinition<(u64, &str, u32), ()> = TableDefinition::new("gc_snapshots");
const TABLES: [&str; 6] = [
    "meta",
    "checkpoints",
    "state",
    "snapshots",
    "gc_state",
    "gc_snapshots",
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

/// What one operator instance changed since its previous checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceDelta {
    /// Operator id (a key of [`CheckpointMeta::operators`]).
    pub operator: String,
    /// Instance index, below the operator's parallelism.
    pub instance: u32,
    /// Changed keys: `Some(value)` = put, `None` = deleted.
    pub changes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Plugin snapshot bytes; `None` = unchanged since the previous checkpoint.
    pub snapshot: Option<Vec<u8>>,
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
    #[error("checkpoint store {} has format {found:?}, this weir reads format {FORMAT_VERSION}: use the weir version that wrote it, or another --state-dir", path.display())]
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
            txn.open_table(STATE)?;
            txn.open_table(SNAPSHOTS)?;
            txn.open_table(GC_STATE)?;
            txn.open_table(GC_SNAPSHOTS)?;
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
        };
        store.check_layout()?;
        Ok(store)
    }

    fn check_layout(&self) -> Result<(), StoreError> {
        let format = self.run("checking the layout", || {
            let txn = self.read()?;
            let tables: Vec<String> = txn.list_tables()?.map(|t| t.name().to_string()).collect();
            if let Some(missing) = TABLES.iter().find(|t| !tables.iter().any(|n| n == *t)) {
                let message = format!("not a Weir checkpoint store: it has no `{missing}` table");
                return Err(self.corrupt(message).into());
            }
            Ok(txn
                .open_table(META)?
                .get("format")?
                .map(|v| v.value().to_vec()))
        })?;
        if format.as_deref() != Some(FORMAT_VERSION.to_string().as_bytes()) {
            let found = String::from_utf8_lossy(&format.unwrap_or_default()).into_owned();
            return Err(StoreError::UnsupportedFormat {
                path: self.path.clone(),
                found,
            });
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

    /// Decodes a `state` value: `Some(value)`, or `None` for a tombstone.
    fn tag<'a>(&self, raw: &'a [u8]) -> Result<Option<&'a [u8]>, StoreError> {
        match raw.split_first() {
            Some((1, value)) => Ok(Some(value)),
            Some((0, [])) => Ok(None),
            _ => Err(self.corrupt("a state row has a bad tag".into())),
        }
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
        let mut state = txn.open_table(STATE)?;
        let mut gc_state = txn.open_table(GC_STATE)?;
        let mut snapshots = txn.open_table(SNAPSHOTS)?;
        let mut gc_snapshots = txn.open_table(GC_SNAPSHOTS)?;
        let mut bytes = 0u64;
        for d in deltas {
            let (op, inst) = (d.operator.as_str(), d.instance);
            // Key order makes the B-tree accesses sequential; the stable sort
            // keeps "later change wins" for repeated keys.
            let mut changes: Vec<_> = d.changes.iter().collect();
            changes.sort_by(|a, b| a.0.cmp(&b.0));
            for (key, change) in changes {
                let k = key.as_slice();
                // Newest version so far, including one written earlier in this commit.
                let newest = match state
                    .range((op, inst, k, 0)..=(op, inst, k, n))?
                    .next_back()
                {
                    Some(row) => {
                        let (key, value) = row?;
                        Some((key.value().3, self.tag(value.value())?.is_some()))
                    }
                    None => None,
                };
                let was_live = newest.is_some_and(|(_, live)| live);
                if change.is_none() && !was_live {
                    continue; // deleting an absent key
                }
                let mut row = vec![u8::from(change.is_some())];
                row.extend_from_slice(change.as_deref().unwrap_or_default());
                state.insert((op, inst, k, n), row.as_slice())?;
                bytes += (k.len() + row.len() - 1) as u64;
                live = (live + u64::from(change.is_some()))
                    .checked_sub(u64::from(was_live))
                    .ok_or_else(|| self.corrupt("the live key count went negative".into()))?;
                // Versions to compact later: older ones, or this tombstone.
                if change.is_none() || newest.is_some_and(|(v, _)| v < n) {
                    gc_state.insert((n, op, inst, k), ())?;
                }
            }
            if let Some(snapshot) = &d.snapshot {
                let older = snapshots
                    .range((op, inst, 0)..(op, inst, n))?
                    .next_back()
                    .is_some();
                snapshots.insert((op, inst, n), snapshot.as_slice())?;
                bytes += snapshot.len() as u64;
                if older {
                    gc_snapshots.insert((n, op, inst), ())?;
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

    /// Drops checkpoints older than the newest `retain`, and compacts the
    /// journaled versions that are no newer than the oldest retained one
    /// (`horizon`): per key, only the newest version <= horizon is visible to
    /// a retained checkpoint, and not even that if it is a tombstone.
    fn collect_garbage(&self, txn: &WriteTransaction, retain: usize) -> Result<(), Fail> {
        let mut checkpoints = txn.open_table(CHECKPOINTS)?;
        let mut horizon = 0;
        for row in checkpoints.iter()?.rev().take(retain) {
            horizon = row?.0.value();
        }
        checkpoints.retain_in(..horizon, |_, _| false)?;
        let end = horizon + 1; // ids are below u64::MAX

        let mut journal = txn.open_table(GC_STATE)?;
        let mut due = BTreeSet::new();
        for row in journal.range(..(end, "", 0, &[][..]))? {
            let row = row?.0;
            let (_, op, inst, key) = row.value();
            due.insert((op.to_string(), inst, key.to_vec()));
        }
        journal.retain_in(..(end, "", 0, &[][..]), |_, _| false)?;
        let mut state = txn.open_table(STATE)?;
        for (op, inst, key) in &due {
            let (op, k) = (op.as_str(), key.as_slice());
            let mut versions = Vec::new();
            for row in state.range((op, *inst, k, 0)..=(op, *inst, k, horizon))? {
                let (key, value) = row?;
                versions.push((key.value().3, self.tag(value.value())?.is_some()));
            }
            if let Some(&(base, base_live)) = versions.last() {
                for (v, _) in versions
                    .into_iter()
                    .filter(|&(v, _)| v < base || !base_live)
                {
                    state.remove((op, *inst, k, v))?;
                }
            }
        }

        let mut journal = txn.open_table(GC_SNAPSHOTS)?;
        let mut due = BTreeSet::new();
        for row in journal.range(..(end, "", 0))? {
            let row = row?.0;
            let (_, op, inst) = row.value();
            due.insert((op.to_string(), inst));
        }
        journal.retain_in(..(end, "", 0), |_, _| false)?;
        let mut snapshots = txn.open_table(SNAPSHOTS)?;
        for (op, inst) in &due {
            let op = op.as_str();
            let mut versions = Vec::new();
            for row in snapshots.range((op, *inst, 0)..=(op, *inst, horizon))? {
                versions.push(row?.0.value().2);
            }
            for v in versions.iter().rev().skip(1) {
                snapshots.remove((op, *inst, *v))?;
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

    /// Live entries of `operator` (of one instance, or all) at checkpoint
    /// `id`, sorted by (instance, key).
    fn scan(
        &self,
        txn: &ReadTransaction,
        id: u64,
        operator: &str,
        instance: Option<u32>,
    ) -> Result<Vec<OperatorEntry>, Fail> {
        if txn.open_table(CHECKPOINTS)?.get(id)?.is_none() {
            return Err(StoreError::UnknownCheckpoint {
                path: self.path.clone(),
                id,
            }
            .into());
        }
        let state = txn.open_table(STATE)?;
        let mut out = Vec::new();
        // Newest version <= id so far of the key being scanned.
        let mut current: Option<(u32, Vec<u8>, Option<Vec<u8>>)> = None;
        for row in state.range((operator, instance.unwrap_or(0), &[][..], 0)..)? {
            let (k, v) = row?;
            let (op, inst, key, version) = k.value();
            if op != operator || instance.is_some_and(|i| i != inst) {
                break;
            }
            if version > id {
                continue;
            }
            let value = self.tag(v.value())?.map(<[u8]>::to_vec);
            match &mut current {
                Some((i, cur, val)) if *i == inst && cur.as_slice() == key => *val = value,
                _ => {
                    if let Some((i, k, Some(val))) = current.replace((inst, key.to_vec(), value)) {
                        out.push((i, k, val));
                    }
                }
            }
        }
        if let Some((i, k, Some(val))) = current {
            out.push((i, k, val));
        }
        Ok(out)
    }

    /// State of one instance as of checkpoint `id` (the newest version <= id
    /// of every key, tombstones removed).
    pub fn load_instance(
        &self,
        id: u64,
        operator: &str,
        instance: u32,
    ) -> Result<RestoredInstance, StoreError> {
        self.run("loading state", || {
            let txn = self.read()?;
            let entries = self.scan(&txn, id, operator, Some(instance))?;
            let entries = entries.into_iter().map(|(_, k, v)| (k, v)).collect();
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
            self.scan(&self.read()?, id, operator, None)
        })?;
        out.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
        Ok(out)
    }

    /// Deletes every checkpoint newer than `id` (an existing checkpoint, or 0
    /// for all) and all their state versions, in one transaction. Scans the
    /// whole state table: meant for the rare restore of an older checkpoint.
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
                txn.open_table(STATE)?.retain(|k, _| k.3 <= id)?;
                txn.open_table(SNAPSHOTS)?.retain(|k, _| k.2 <= id)?;
                txn.open_table(GC_STATE)?
                    .retain_in((after, "", 0, &[][..]).., |_, _| false)?;
                txn.open_table(GC_SNAPSHOTS)?
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
mod tests {
    use super::*;
    use redb::{Key, ReadableTableMetadata, Value};

    type Model = BTreeMap<(String, u32), RestoredInstance>;

    fn meta(id: u64) -> CheckpointMeta {
        let op = |parallelism| OperatorMeta {
            plugin_name: "p".into(),
            plugin_version: "1".into(),
            state_version: 1,
            sha256: "00".into(),
            parallelism,
        };
        CheckpointMeta {
            id,
            job: "job".into(),
            started_at_ms: 1_700_000_000_000 + id,
            duration_ms: 5,
            alignment_ms: 1,
            bytes_written: 0,
            state_keys: 0,
            key_groups: 128,
            sources: [("src".into(), serde_json::json!({"offset": id, "f": 0.1}))].into(),
            operators: [("a".into(), op(2)), ("b".into(), op(2))].into(),
            sinks: BTreeMap::new(),
            final_checkpoint: false,
        }
    }

    /// `delta("a", 0, "x=1 -y", Some("s"))`: put x=1, delete y, snapshot "s".
    fn delta(op: &str, instance: u32, changes: &str, snap: Option<&str>) -> InstanceDelta {
        let b = |s: &str| s.as_bytes().to_vec();
        let changes = changes
            .split_whitespace()
            .map(|c| match c.strip_prefix('-') {
                Some(key) => (b(key), None),
                None => c.split_once('=').map(|(k, v)| (b(k), Some(b(v)))).unwrap(),
            });
        let (operator, changes, snapshot) = (op.into(), changes.collect(), snap.map(b));
        InstanceDelta {
            operator,
            instance,
            changes,
            snapshot,
        }
    }

    /// `"x=1 y=2"` for the entries of an instance.
    fn show(r: &RestoredInstance) -> String {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let e: Vec<_> = r
            .entries
            .iter()
            .map(|(k, v)| format!("{}={}", s(k), s(v)))
            .collect();
        e.join(" ")
    }

    fn rows<K: Key + 'static, V: Value + 'static>(
        s: &CheckpointStore,
        t: TableDefinition<K, V>,
    ) -> u64 {
        s.read().unwrap().open_table(t).unwrap().len().unwrap()
    }

    #[test]
    fn incremental_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let s = CheckpointStore::open(dir.path(), "job").unwrap();
        assert_eq!(
            (s.job().unwrap(), s.latest().unwrap()),
            ("job".into(), None)
        );
        let d1 = [
            delta("a", 0, "x=1 y=2 z=3", Some("snap1")),
            delta("a", 1, "x=other", None),
        ];
        assert_eq!(s.commit(&meta(1), &d1, 3).unwrap().bytes_written, 6 + 5 + 6);
        // A later change wins; deleting a missing key writes nothing; no snapshot keeps snap1.
        let d2 = [
            delta("a", 0, "y=20 -z -w y=22", None),
            delta("a", 1, "", Some("")),
        ];
        assert_eq!(s.commit(&meta(3), &d2, 3).unwrap().bytes_written, 3 + 1 + 3);
        let r1 = s.load_instance(1, "a", 0).unwrap();
        assert_eq!(
            (show(&r1).as_str(), &r1.snapshot[..]),
            ("x=1 y=2 z=3", &b"snap1"[..])
        );
        let r3 = s.load_instance(3, "a", 0).unwrap();
        assert_eq!(
            (show(&r3).as_str(), &r3.snapshot[..]),
            ("x=1 y=22", &b"snap1"[..])
        );
        assert_eq!(
            s.load_instance(3, "b", 1).unwrap(),
            RestoredInstance::default()
        );
        let all = s.operator_state(3, "a").unwrap();
        let keys: Vec<_> = all.iter().map(|(i, k, _)| (*i, k.as_slice())).collect();
        assert_eq!(keys, [(0, &b"x"[..]), (1, b"x"), (0, b"y")]);
        let list: Vec<_> = s
            .list()
            .unwrap()
            .iter()
            .map(|m| (m.id, m.state_keys))
            .collect();
        assert_eq!(list, [(1, 4), (3, 3)]);
        assert_eq!(s.latest().unwrap().unwrap().sources, meta(3).sources);
        assert!(s.get(2).unwrap().is_none());
        let e = s.load_instance(2, "a", 0).unwrap_err();
        assert!(
            matches!(e, StoreError::UnknownCheckpoint { id: 2, .. }),
            "{e}"
        );
        drop(s);
        let s = CheckpointStore::open(dir.path(), "job").unwrap();
        assert_eq!(s.latest().unwrap().unwrap().id, 3);
        assert_eq!(show(&s.load_instance(3, "a", 1).unwrap()), "x=other");
        assert!(s.file_size().unwrap() > 0);
    }

    #[test]
    fn commit_refuses_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let s = CheckpointStore::open(dir.path(), "job").unwrap();
        s.commit(&meta(5), &[], 2).unwrap();
        let refused = |m: &CheckpointMeta, d: &[InstanceDelta], retain| {
            matches!(s.commit(m, d, retain), Err(StoreError::Invalid { .. }))
        };
        assert!(refused(&meta(5), &[], 2) && refused(&meta(4), &[], 2));
        assert!(refused(&meta(6), &[], 0));
        assert!(refused(&meta(6), &[delta("c", 0, "", None)], 2));
        assert!(refused(&meta(6), &[delta("a", 2, "", None)], 2));
        assert!(refused(
            &CheckpointMeta {
                job: "other".into(),
                ..meta(6)
            },
            &[],
            2
        ));
        assert_eq!(s.list().unwrap().len(), 1);
    }

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Random changes, snapshots, id gaps, truncations and reopens, checked
    /// after every commit against an in-memory model of every checkpoint.
    fn model_run(mut rng: u64, retain: usize, rounds: usize) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = CheckpointStore::open(dir.path(), "job").unwrap();
        let instances = [("a", 0), ("a", 1), ("b", 0), ("b", 1)].map(|(o, i)| (o.to_string(), i));
        let mut current: Model = instances
            .iter()
            .map(|i| (i.clone(), Default::default()))
            .collect();
        let mut history: BTreeMap<u64, Model> = BTreeMap::new();
        let mut id = 0;
        for _ in 0..rounds {
            let r = &mut rng;
            id += 1 + u64::from(xorshift(r).is_multiple_of(4));
            let mut deltas = Vec::new();
            for ((op, inst), model) in current.iter_mut() {
                if xorshift(r).is_multiple_of(5) {
                    continue;
                }
                let mut state: BTreeMap<_, _> = model.entries.drain(..).collect();
                let mut changes = Vec::new();
                for _ in 0..xorshift(r) % 12 {
                    let key = format!("k{}", xorshift(r) % 50).into_bytes();
                    let value = match xorshift(r) % 10 {
                        0..=2 => None,
                        3 => Some(vec![]),
                        _ => Some(format!("v{id}.{}", xorshift(r) % 1000).into_bytes()),
                    };
                    match &value {
                        Some(v) => state.insert(key.clone(), v.clone()),
                        None => state.remove(&key),
                    };
                    changes.push((key, value));
                }
                model.entries = state.into_iter().collect();
                let snapshot = xorshift(r)
                    .is_multiple_of(3)
                    .then(|| format!("s{id}").into_bytes());
                model.snapshot = snapshot
                    .clone()
                    .unwrap_or(std::mem::take(&mut model.snapshot));
                let (operator, instance) = (op.clone(), *inst);
                deltas.push(InstanceDelta {
                    operator,
                    instance,
                    changes,
                    snapshot,
                });
            }
            s.commit(&meta(id), &deltas, retain).unwrap();
            history.insert(id, current.clone());
            while history.len() > retain {
                let (gone, _) = history.pop_first().unwrap();
                assert!(s.get(gone).unwrap().is_none());
                assert!(s.load_instance(gone, "a", 0).is_err());
            }
            if xorshift(r).is_multiple_of(8) {
                let to = *history
                    .keys()
                    .nth(xorshift(r) as usize % history.len())
                    .unwrap();
                s.truncate_after(to).unwrap();
                history.retain(|k, _| *k <= to);
                current = history[&to].clone();
            }
            if xorshift(r).is_multiple_of(6) {
                drop(s);
                s = CheckpointStore::open(dir.path(), "job").unwrap();
            }
            let listed: Vec<u64> = s.list().unwrap().iter().map(|m| m.id).collect();
            assert_eq!(listed, history.keys().copied().collect::<Vec<_>>());
            for (cp, model) in &history {
                for ((op, inst), want) in model {
                    let got = s.load_instance(*cp, op, *inst).unwrap();
                    assert_eq!(&got, want, "checkpoint {cp} {op}/{inst}");
                }
                let live = model.values().map(|m| m.entries.len() as u64).sum::<u64>();
                assert_eq!(s.get(*cp).unwrap().unwrap().state_keys, live);
                let a = s.operator_state(*cp, "a").unwrap();
                let want = (0..2)
                    .map(|i| model[&("a".into(), i)].entries.len())
                    .sum::<usize>();
                assert_eq!(a.len(), want);
                assert!(a.windows(2).all(|w| (&w[0].1, w[0].0) < (&w[1].1, w[1].0)));
            }
            // Per key: the newest version <= the oldest retained checkpoint,
            // plus one per newer retained checkpoint.
            let bound = (instances.len() * 50 * retain) as u64;
            assert!(rows(&s, STATE) <= bound, "{} state rows", rows(&s, STATE));
            assert!(rows(&s, GC_STATE) <= bound);
            assert!(rows(&s, SNAPSHOTS) <= (instances.len() * retain) as u64);
        }
    }

    #[test]
    fn model_retain_3() {
        model_run(0x9E37_79B9_7F4A_7C15, 3, 40);
    }

    #[test]
    fn model_retain_1_and_5() {
        model_run(0xDEAD_BEEF_1234_5678, 1, 40);
        model_run(0x0123_4567_89AB_CDEF, 5, 40);
    }

    #[test]
    fn incremental_is_small() {
        let dir = tempfile::tempdir().unwrap();
        let s = CheckpointStore::open(dir.path(), "job").unwrap();
        let changes = |round: u32, step| {
            let kv = |i: u32| format!("key-{i:08}=value-{round}-{i:032}");
            let changes: Vec<_> = (0..10_000).step_by(step).map(kv).collect();
            [delta("a", 0, &changes.join(" "), None)]
        };
        let full = s.commit(&meta(1), &changes(0, 1), 3).unwrap().bytes_written;
        let inc = s
            .commit(&meta(2), &changes(1, 100), 3)
            .unwrap()
            .bytes_written;
        assert!(inc * 20 < full, "{inc} vs {full}");
        let latest = s.latest().unwrap().unwrap();
        assert_eq!((latest.bytes_written, latest.state_keys), (inc, 10_000));
        assert_eq!(s.load_instance(2, "a", 0).unwrap().entries.len(), 10_000);
    }

    #[test]
    fn dead_keys_are_collected() {
        let dir = tempfile::tempdir().unwrap();
        let s = CheckpointStore::open(dir.path(), "job").unwrap();
        // Keys live for one checkpoint each (windows, sessions): nothing of
        // them may linger once no retained checkpoint sees them.
        for id in 1..=20u64 {
            let new: Vec<_> = (0..10).map(|k| format!("{id}.{k}=v")).collect();
            let old: Vec<_> = (0..10).map(|k| format!("-{}.{k}", id - 1)).collect();
            let d = delta(
                "a",
                0,
                &format!("{} {} t{id}=1 -t{id}", new.join(" "), old.join(" ")),
                None,
            );
            s.commit(&meta(id), &[d], 2).unwrap();
        }
        // Retained 19 and 20: the keys of 20, the keys of 19 with their
        // tombstones, and the tombstone of `t20`.
        assert_eq!(rows(&s, STATE), 10 + 20 + 1);
        s.commit(&meta(21), &[delta("a", 0, "-20.0", None)], 1)
            .unwrap();
        assert_eq!(rows(&s, STATE), 9);
        assert_eq!(rows(&s, GC_STATE), 0);
    }

    #[test]
    fn truncate_after_drops_newer() {
        let dir = tempfile::tempdir().unwrap();
        let s = CheckpointStore::open(dir.path(), "job").unwrap();
        for id in 1..=4 {
            let d = delta("a", 0, &format!("k={id} {id}=x"), Some(&id.to_string()));
            s.commit(&meta(id), &[d], 10).unwrap();
        }
        let e = s.truncate_after(7).unwrap_err();
        assert!(
            matches!(e, StoreError::UnknownCheckpoint { id: 7, .. }),
            "{e}"
        );
        s.truncate_after(2).unwrap();
        let ids: Vec<_> = s.list().unwrap().iter().map(|m| m.id).collect();
        assert_eq!(ids, [1, 2]);
        let r = s.load_instance(2, "a", 0).unwrap();
        assert_eq!(
            (show(&r).as_str(), &r.snapshot[..]),
            ("1=x 2=x k=2", &b"2"[..])
        );
        // The next checkpoint builds on 2, not on the truncated 3 and 4.
        s.commit(&meta(5), &[delta("a", 0, "5=x", None)], 10)
            .unwrap();
        let r = s.load_instance(5, "a", 0).unwrap();
        assert_eq!(
            (show(&r).as_str(), &r.snapshot[..]),
            ("1=x 2=x 5=x k=2", &b"2"[..])
        );
        assert_eq!(s.latest().unwrap().unwrap().state_keys, 4);
        s.truncate_after(0).unwrap();
        assert!(s.list().unwrap().is_empty());
        assert_eq!(
            rows(&s, STATE) + rows(&s, SNAPSHOTS) + rows(&s, GC_STATE),
            0
        );
    }

    #[test]
    fn open_refuses_other_job_and_reports_missing() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        let e = CheckpointStore::open_existing(&empty).err().unwrap();
        assert!(matches!(e, StoreError::NotFound { .. }), "{e}");
        std::fs::create_dir(&empty).unwrap();
        let e = CheckpointStore::open_existing(&empty).err().unwrap();
        assert!(matches!(e, StoreError::NotFound { .. }), "{e}");
        assert!(e.to_string().starts_with("no checkpoints in "), "{e}");
        assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
        drop(CheckpointStore::open(dir.path(), "job").unwrap());
        let e = CheckpointStore::open(dir.path(), "other").err().unwrap();
        assert!(
            matches!(&e, StoreError::OtherJob { found, .. } if found == "job"),
            "{e}"
        );
        assert!(e.to_string().contains("--state-dir"), "{e}");
        assert_eq!(
            CheckpointStore::open_existing(dir.path())
                .unwrap()
                .job()
                .unwrap(),
            "job"
        );
    }

    #[test]
    fn inspect_while_job_runs() {
        let dir = tempfile::tempdir().unwrap();
        let s = CheckpointStore::open(dir.path(), "job").unwrap();
        s.commit(&meta(1), &[delta("a", 0, "k=v", None)], 3)
            .unwrap();
        let e = CheckpointStore::open(dir.path(), "job").err().unwrap();
        assert!(matches!(e, StoreError::InUse { .. }), "{e}");
        let ro = CheckpointStore::open_existing(dir.path()).unwrap();
        assert_eq!(ro.latest().unwrap().unwrap().id, 1);
        s.commit(&meta(2), &[], 3).unwrap();
        assert_eq!(ro.latest().unwrap().unwrap().id, 2);
        assert!(matches!(
            ro.truncate_after(1),
            Err(StoreError::Invalid { .. })
        ));
    }

    #[test]
    fn damaged_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let check = |e: Option<StoreError>| {
            let e = e.expect("a damaged file must not open");
            assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
            assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        };
        let mut r = 42u64;
        let garbage: Vec<u8> = (0..10_000).map(|_| xorshift(&mut r) as u8).collect();
        std::fs::write(&path, &garbage).unwrap();
        check(CheckpointStore::open(dir.path(), "job").err());
        check(CheckpointStore::open_existing(dir.path()).err());
        std::fs::remove_file(&path).unwrap();
        let changes: Vec<_> = (0..5000).map(|i| format!("{i}={i:064}")).collect();
        let s = CheckpointStore::open(dir.path(), "job").unwrap();
        s.commit(&meta(1), &[delta("a", 0, &changes.join(" "), None)], 3)
            .unwrap();
        drop(s);
        let valid = std::fs::read(&path).unwrap();
        std::fs::write(&path, &valid[..valid.len() / 2]).unwrap();
        check(CheckpointStore::open(dir.path(), "job").err());
        check(CheckpointStore::open_existing(dir.path()).err());
        // Flipped bytes anywhere: an error or a readable store, never a panic.
        for at in (0..valid.len()).step_by(valid.len() / 37) {
            let mut bad = valid.clone();
            bad[at] ^= 0x55;
            std::fs::write(&path, &bad).unwrap();
            if let Ok(s) = CheckpointStore::open(dir.path(), "job") {
                let _ = s.list().and_then(|_| s.load_instance(1, "a", 0));
            }
        }
    }
}
