//! The open store file: [`CheckpointStore`], the redb database (read-write,
//! or read-only while a job holds it) with its path and tuning; opening it
//! (creating the tables, refusing another layout version or another job's
//! store); and the helpers every operation runs through. Committing and
//! reading checkpoints are in the store's root module, segment chains in
//! `chain.rs`, garbage collection and truncation in `gc.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::{
    Builder, ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase,
    TableHandle,
};

use super::error::{Fail, StoreError, classify, invalid};
use super::layout::{
    CHECKPOINTS, CHUNKS, FILE_NAME, FORMAT_VERSION, GC, INFLIGHT, META, READS, RECORDED,
    RECORDINGS, SEALED_FROM, SEGMENTS, SNAPSHOTS, TABLES,
};
use super::tuning::{TUNING, Tuning};

/// Bytes of redb's page cache per open store. Checkpoints write each
/// segment once and read it back only at a restore or a compaction, so a
/// larger cache (redb's default is 1 GiB) holds written pages nobody reads
/// and adds them to the job's memory.
const PAGE_CACHE_BYTES: usize = 64 << 20;
/// How long [`CheckpointStore::open`] waits for another process to close
/// the file before it reports [`StoreError::InUse`]; an inspection (`weir
/// checkpoints`, `weir state`) holds it for milliseconds to seconds.
const OPEN_WAIT: Duration = Duration::from_secs(5);
/// How often the open is tried again meanwhile.
const OPEN_RETRY: Duration = Duration::from_millis(20);

/// The redb settings of every open.
pub(super) fn builder() -> Builder {
    let mut b = Builder::new();
    // Corruption is reported at open instead of panicking later; the
    // single-writer mode lets `weir checkpoints` read while a job runs.
    b.set_check_integrity_on_open(true)
        .set_concurrency_mode(ConcurrencyMode::SingleWriter)
        .set_cache_size(PAGE_CACHE_BYTES);
    b
}

/// The database, opened read-write or read-only.
enum Handle {
    ReadWrite(Database),
    ReadOnly(ReadOnlyDatabase),
}

/// The checkpoint store of one job.
pub struct CheckpointStore {
    db: Handle,
    dir: PathBuf,
    /// The store file.
    pub(super) path: PathBuf,
    /// How segments are chunked and chains compacted.
    pub(super) tuning: Tuning,
    /// Whether values carry checksums (format 3; see `seal.rs`).
    pub(super) sealed: bool,
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
    /// a damaged file, an empty one included, is [`StoreError::Corrupt`]; a
    /// file another process keeps open for longer than `OPEN_WAIT` (5 s) is
    /// [`StoreError::InUse`].
    pub fn open(dir: &Path, job: &str) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|error| StoreError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        let path = dir.join(FILE_NAME);
        // A file that exists is opened, never created over: redb would
        // initialize an empty file as a new database, and an empty or
        // damaged store must be refused, not taken for "no checkpoints".
        let exists = path.try_exists().map_err(|error| StoreError::Io {
            path: path.clone(),
            error,
        })?;
        // Another process may have the file open: `weir checkpoints` or
        // `weir state` for as long as they read it (redb then refuses a
        // writer), or another `weir run`. Wait for the first kind; report
        // the second once the wait is over.
        let started = Instant::now();
        let opened = loop {
            let opened = if exists {
                builder().open(&path)
            } else {
                builder().create(&path)
            };
            match opened {
                Err(redb::DatabaseError::DatabaseAlreadyOpen) if started.elapsed() < OPEN_WAIT => {
                    std::thread::sleep(OPEN_RETRY);
                }
                opened => break opened,
            }
        };
        let db = opened.map_err(|e| classify(&path, "opening", Fail::Redb(e.into())))?;
        let mut store = CheckpointStore {
            db: Handle::ReadWrite(db),
            dir: dir.to_path_buf(),
            path,
            tuning: TUNING,
            sealed: true,
        };
        store.in_context("creating the tables", || {
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
            txn.open_table(INFLIGHT)?;
            txn.open_table(RECORDINGS)?;
            txn.open_table(RECORDED)?;
            Ok(txn.commit()?)
        })?;
        store.sealed = store.check_layout()? >= SEALED_FROM;
        // A store written before unaligned checkpoints or recordings gets
        // the `inflight`, `recordings` and `recorded` tables now, after its
        // layout was checked.
        store.in_context("adding the inflight and recordings tables", || {
            let txn = store.rw()?.begin_write()?;
            let names: Vec<String> = txn.list_tables()?.map(|t| t.name().to_string()).collect();
            if [INFLIGHT.name(), RECORDINGS.name(), RECORDED.name()]
                .iter()
                .all(|t| names.iter().any(|n| n == t))
            {
                return Ok(txn.abort()?);
            }
            txn.open_table(INFLIGHT)?;
            txn.open_table(RECORDINGS)?;
            txn.open_table(RECORDED)?;
            Ok(txn.commit()?)
        })?;
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
        let mut store = CheckpointStore {
            db,
            dir: dir.to_path_buf(),
            path,
            tuning: TUNING,
            sealed: true,
        };
        store.sealed = store.check_layout()? >= SEALED_FROM;
        Ok(store)
    }

    /// Refuses a layout version this Weir does not read first (its tables
    /// differ), then a file lacking one of the tables (`inflight` excepted:
    /// it reads as empty when missing); returns the format. A file without
    /// a `meta` table is a new store: this Weir's format.
    fn check_layout(&self) -> Result<u32, StoreError> {
        let (tables, format) = self.in_context("checking the layout", || {
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
        let format = match format {
            None => FORMAT_VERSION,
            Some(found) => {
                let text = String::from_utf8_lossy(&found.unwrap_or_default()).into_owned();
                match text.parse() {
                    Ok(n) if READS.contains(&n) => n,
                    _ => {
                        let path = self.path.clone();
                        return Err(StoreError::UnsupportedFormat { path, found: text });
                    }
                }
            }
        };
        if let Some(missing) = TABLES.iter().find(|t| !tables.iter().any(|n| n == *t)) {
            let message = format!("not a Weir checkpoint store: it has no `{missing}` table");
            return Err(self.corrupt(message));
        }
        Ok(format)
    }

    /// Runs `f`, giving a failure the context of operation `what`.
    pub(super) fn in_context<T>(
        &self,
        what: &str,
        f: impl FnOnce() -> Result<T, Fail>,
    ) -> Result<T, StoreError> {
        f().map_err(|e| classify(&self.path, what, e))
    }

    /// A [`StoreError::Corrupt`] for this file.
    pub(super) fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            message,
        }
    }

    /// The read-write database, or an error when opened read-only.
    pub(super) fn rw(&self) -> Result<&Database, StoreError> {
        match &self.db {
            Handle::ReadWrite(db) => Ok(db),
            Handle::ReadOnly(_) => Err(invalid(format!(
                "checkpoint store {} is open read-only because a job is using it: stop the job to modify it",
                self.path.display()
            ))),
        }
    }

    /// A read transaction.
    pub(super) fn read(&self) -> Result<ReadTransaction, Fail> {
        Ok(match &self.db {
            Handle::ReadWrite(db) => db.begin_read()?,
            Handle::ReadOnly(db) => db.begin_read()?,
        })
    }

    /// The job this store belongs to.
    pub fn job(&self) -> Result<String, StoreError> {
        let raw = self.in_context("reading the job name", || {
            Ok(self
                .read()?
                .open_table(META)?
                .get("job")?
                .map(|v| v.value().to_vec()))
        })?;
        let raw = raw.ok_or_else(|| self.corrupt("no job name recorded".into()))?;
        String::from_utf8(raw).map_err(|_| self.corrupt("the job name is not UTF-8".into()))
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
    pub(super) fn with_tuning(mut self, tuning: Tuning) -> Self {
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
