//! Sinks with two-phase commit: output of checkpoint *n* is staged, and made
//! visible only once *n* is complete.
//!
//! The file sink's invariants:
//! - The visible file only ever grows by whole staged epochs, appended in
//!   checkpoint order by [`Sink::commit`].
//! - The commit info recorded in checkpoint *n* is `visible_len` (length of the
//!   visible file once *n* is committed) and `staged_len` (bytes of epoch *n*).
//!   Restoring *n* truncates the visible file to `visible_len`, or, when the
//!   crash came between completing *n* and appending it, re-appends staged
//!   epoch *n*. Either way the visible file ends exactly at *n*.
//! - The disk work of a checkpoint (fsync of a staged epoch, appending it to
//!   the visible file) runs on the sink's I/O thread, in the order it was
//!   requested, so the sink thread keeps writing the next epoch meanwhile.
//!   A precommit reports done only after its epoch is durable, and a commit
//!   is requested only after the coordinator saw that, so every operation
//!   on disk happens in the same order as if it ran inline.

use std::collections::BTreeMap;
use std::thread::JoinHandle;

use crossbeam_channel::{Sender, unbounded};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::Batch;
use crate::config::{SinkConfig, SinkKind};

/// Why a sink failed. Messages name the sink and the file.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Writing or committing output failed.
    #[error("sink `{sink}`: {path}: {error}")]
    Io {
        /// The sink's id.
        sink: String,
        /// The file.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The output file does not match the checkpoint being restored.
    #[error("sink `{sink}`: {path}: {message}")]
    Inconsistent {
        /// The sink's id.
        sink: String,
        /// The file.
        path: String,
        /// What is wrong and what to do.
        message: String,
    },
}

/// Receives the outcome of a sink step that may finish on another thread:
/// the commit info once a precommitted epoch is durable, `Value::Null` once
/// a commit is visible, or the error.
pub type Done = Box<dyn FnOnce(Result<Value, SinkError>) + Send>;

/// A transactional sink.
pub trait Sink: Send {
    /// Stages a batch into the current epoch.
    fn write(&mut self, batch: &Batch) -> Result<(), SinkError>;
    /// Closes the current epoch as checkpoint `id`'s output. `done` gets the
    /// commit info to record in the checkpoint once the epoch is durable,
    /// possibly from another thread after this returned.
    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError>;
    /// Makes the output of every precommitted checkpoint `<= id` visible;
    /// `done` is called once it is.
    fn commit(&mut self, id: u64, done: Done) -> Result<(), SinkError>;
    /// Waits until every step requested so far has called its `done`.
    fn close(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Runs a sink step and waits for its `done`.
fn blocking(step: impl FnOnce(Done) -> Result<(), SinkError>) -> Result<Value, SinkError> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    step(Box::new(move |r| drop(tx.send(r))))?;
    rx.recv().expect("a sink calls `done` exactly once")
}

/// [`Sink::precommit`], waiting for the epoch to be durable (tests, tools).
pub fn precommit_blocking(sink: &mut dyn Sink, id: u64) -> Result<Value, SinkError> {
    blocking(|done| sink.precommit(id, done))
}

/// [`Sink::commit`], waiting for the output to be visible (tests, tools).
pub fn commit_blocking(sink: &mut dyn Sink, id: u64) -> Result<(), SinkError> {
    blocking(|done| sink.commit(id, done)).map(drop)
}

/// Opens the sink of `cfg`. `staging` is a directory the sink owns (under the
/// state dir); `restore` is the commit info of the checkpoint being restored,
/// or `None` to start fresh (which empties the output file).
pub fn open(
    cfg: &SinkConfig,
    staging: &Path,
    restore: Option<&Value>,
) -> Result<Box<dyn Sink>, SinkError> {
    match &cfg.kind {
        // Both formats write one record value per line.
        SinkKind::File { path, .. } => {
            Ok(Box::new(FileSink::open(&cfg.id, path, staging, restore)?))
        }
        SinkKind::Stdout { .. } => Ok(Box::new(StdoutSink {
            epoch: Vec::new(),
            pending: BTreeMap::new(),
        })),
    }
}

/// Writes each record's value and a newline; returns the bytes written.
fn encode(batch: &Batch, out: &mut impl Write) -> std::io::Result<u64> {
    let mut bytes = 0;
    for r in batch.iter() {
        out.write_all(r.value)?;
        out.write_all(b"\n")?;
        bytes += r.value.len() as u64 + 1;
    }
    Ok(bytes)
}

/// Bytes of an epoch after which the file sink asks its I/O thread to start
/// writing them to the disk (`sync_data` on a clone of the file), so that
/// dirty pages do not pile up until the precommit, where the kernel's
/// writeback throttling would stall the sink thread.
const WRITEBACK_EVERY: u64 = 32 << 20;

/// Disk work of the file sink, done in order on its I/O thread.
enum Job {
    /// Write what the file holds so far to the disk (a hint: a failure
    /// resurfaces at the epoch's precommit, which syncs again).
    Writeback { file: File },
    /// Make the epoch written to `open` durable and rename it to `staged`.
    Seal {
        file: File,
        open: PathBuf,
        staged: PathBuf,
        info: Value,
        done: Done,
    },
    /// Append the `staged` epochs, in order, to the visible file, make it
    /// durable, then delete them.
    Commit { staged: Vec<PathBuf>, done: Done },
}

/// The file sink's I/O thread.
struct Worker {
    jobs: Sender<Job>,
    thread: JoinHandle<()>,
}

impl Worker {
    fn start(sink: String, visible: PathBuf) -> Worker {
        let (jobs, rx) = unbounded::<Job>();
        let thread = std::thread::Builder::new()
            .name(format!("sink-io-{sink}"))
            .spawn(move || {
                for job in rx {
                    run_job(&sink, &visible, job);
                }
            })
            .expect("spawning the sink's I/O thread");
        Worker { jobs, thread }
    }
}

fn run_job(sink: &str, visible: &Path, job: Job) {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |error| SinkError::Io {
            sink: sink.to_string(),
            path,
            error,
        }
    };
    match job {
        Job::Writeback { file } => {
            if let Err(e) = file.sync_data() {
                tracing::debug!("sink `{sink}`: early writeback failed: {e}");
            }
        }
        Job::Seal {
            file,
            open,
            staged,
            info,
            done,
        } => done(
            file.sync_all()
                .map_err(io(&open))
                .and_then(|()| fs::rename(&open, &staged).map_err(io(&staged)))
                .map(|()| info),
        ),
        Job::Commit { staged, done } if staged.is_empty() => done(Ok(Value::Null)),
        Job::Commit { staged, done } => {
            let append = || -> Result<(), SinkError> {
                let renamed = renamed_into_empty(visible, &staged).map_err(io(visible))?;
                let rest = &staged[usize::from(renamed)..];
                if rest.is_empty() {
                    return Ok(());
                }
                let out = OpenOptions::new()
                    .append(true)
                    .open(visible)
                    .map_err(io(visible))?;
                append_epochs(&out, rest.iter().map(PathBuf::as_path))
                    .map_err(|(path, e)| io(path.unwrap_or(visible))(e))?;
                for path in rest {
                    fs::remove_file(path).map_err(io(path))?;
                }
                Ok(())
            };
            done(append().map(|()| Value::Null))
        }
    }
}

/// Appends the files `epochs`, in order, to `out` and makes it durable. An
/// error comes with the epoch file it concerns, or `None` for `out`.
fn append_epochs<'a>(
    mut out: &File,
    epochs: impl IntoIterator<Item = &'a Path>,
) -> Result<(), (Option<&'a Path>, std::io::Error)> {
    for path in epochs {
        let mut from = File::open(path).map_err(|e| (Some(path), e))?;
        std::io::copy(&mut from, &mut out).map_err(|e| (None, e))?;
    }
    out.sync_all().map_err(|e| (None, e))
}

/// Commits the first of `staged` by renaming it over `visible` when
/// `visible` is an empty regular file: the epoch was made durable when it
/// was sealed, so it need not be copied and synced a second time (a job
/// without periodic checkpoints commits all of its output at once). Returns
/// whether it did.
///
/// A crash before the rename leaves the empty file and the staged epoch,
/// which recovery appends; after it, the file is complete. When the rename
/// fails (another file system, say), the caller appends instead.
fn renamed_into_empty(visible: &Path, staged: &[PathBuf]) -> std::io::Result<bool> {
    let Some(first) = staged.first() else {
        return Ok(false);
    };
    let meta = fs::symlink_metadata(visible)?;
    if !meta.file_type().is_file() || meta.len() != 0 || fs::rename(first, visible).is_err() {
        return Ok(false);
    }
    // The rename itself must survive a power loss before the epoch counts
    // as appended; the staged file's data was synced when it was sealed.
    let dir = visible.parent().filter(|p| !p.as_os_str().is_empty());
    File::open(dir.unwrap_or(Path::new(".")))?.sync_all()?;
    Ok(true)
}

/// A file sink: epochs are staged in `staging/<id>.staged` and appended to the
/// visible file at commit.
struct FileSink {
    id: String,
    path: PathBuf,
    staging: PathBuf,
    /// The epoch being written (records since the last precommit), streamed
    /// to `staging/current.open` so that memory stays flat however long the
    /// epoch is.
    epoch: Option<BufWriter<File>>,
    /// Bytes in the current epoch.
    epoch_len: u64,
    /// `epoch_len` at the last early writeback request.
    written_back: u64,
    /// Length of the visible file once every precommitted epoch is committed.
    planned_len: u64,
    /// Precommitted, not yet committed epochs: id -> staged file.
    pending: BTreeMap<u64, PathBuf>,
    /// The file of the current epoch, `staging/<n>.open` (a new name per
    /// epoch, since the I/O thread may still be renaming the previous one).
    open: PathBuf,
    /// Epochs opened so far, to name them.
    opened: u64,
    /// Runs the fsyncs and appends.
    worker: Option<Worker>,
}

impl FileSink {
    fn io(&self, path: &Path) -> impl Fn(std::io::Error) -> SinkError + '_ {
        let path = path.display().to_string();
        move |error| SinkError::Io {
            sink: self.id.clone(),
            path: path.clone(),
            error,
        }
    }

    fn open(
        id: &str,
        path: &Path,
        staging: &Path,
        restore: Option<&Value>,
    ) -> Result<Self, SinkError> {
        let mut sink = FileSink {
            id: id.to_string(),
            path: path.to_path_buf(),
            staging: staging.to_path_buf(),
            epoch: None,
            epoch_len: 0,
            written_back: 0,
            planned_len: 0,
            pending: BTreeMap::new(),
            open: PathBuf::new(),
            opened: 0,
            worker: None,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(sink.io(parent))?;
        }
        fs::create_dir_all(staging).map_err(sink.io(staging))?;
        let visible = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(sink.io(path))?;
        let current = visible.metadata().map_err(sink.io(path))?.len();
        let target = match restore {
            None => 0,
            Some(info) => sink.recover(&visible, current, info)?,
        };
        if current != target || restore.is_none() {
            visible.set_len(target).map_err(sink.io(path))?;
            visible.sync_all().map_err(sink.io(path))?;
        }
        // Epochs staged after the restored checkpoint were never committed.
        for entry in fs::read_dir(staging).map_err(sink.io(staging))? {
            let entry = entry.map_err(sink.io(staging))?;
            fs::remove_file(entry.path()).map_err(sink.io(&entry.path()))?;
        }
        sink.planned_len = target;
        sink.worker = Some(Worker::start(sink.id.clone(), sink.path.clone()));
        Ok(sink)
    }

    /// Brings the visible file to the end of the restored checkpoint; returns
    /// the length it must have.
    fn recover(&self, visible: &File, current: u64, info: &Value) -> Result<u64, SinkError> {
        let field = |k: &str| info.get(k).and_then(Value::as_u64);
        let inconsistent = |message: String| SinkError::Inconsistent {
            sink: self.id.clone(),
            path: self.path.display().to_string(),
            message,
        };
        let (Some(len), Some(staged_len), Some(id)) = (
            field("visible_len"),
            field("staged_len"),
            field("checkpoint"),
        ) else {
            return Err(inconsistent(format!(
                "the checkpoint's sink record is malformed: {info}"
            )));
        };
        if current >= len {
            return Ok(len);
        }
        // Completed but not (fully) appended before the crash. Epochs are
        // appended in order and each staged file is deleted only after its
        // append, so the missing tail is a run of staged epochs ending at
        // `id`: walk back from `id` until the visible file reaches the start
        // of an epoch, then append that epoch and every later one.
        let mut staged: Vec<(u64, PathBuf, u64)> = Vec::new();
        for entry in fs::read_dir(&self.staging).map_err(self.io(&self.staging))? {
            let path = entry.map_err(self.io(&self.staging))?.path();
            let epoch = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".staged"))
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(k) = epoch.filter(|k| *k <= id) {
                let size = fs::metadata(&path).map_err(self.io(&path))?.len();
                staged.push((k, path, size));
            }
        }
        staged.sort_unstable_by_key(|(k, _, _)| std::cmp::Reverse(*k));
        if staged.first().map(|(k, _, size)| (*k, *size)) != Some((id, staged_len)) {
            return Err(inconsistent(format!(
                "the output file is {current} bytes, checkpoint {id} expects {len}, and its staged output ({}) is missing or damaged. Move the output away and rerun with `--restore none` to rebuild it from scratch",
                self.staging.join(format!("{id}.staged")).display()
            )));
        }
        let mut end = len;
        let mut from = None;
        for (i, (_, _, size)) in staged.iter().enumerate() {
            let start = end.saturating_sub(*size);
            if current >= start {
                from = Some((i, start));
                break;
            }
            end = start;
        }
        let Some((first, start)) = from else {
            return Err(inconsistent(format!(
                "the output file is {current} bytes but checkpoint {id} expects {len}; it was modified or replaced outside Weir. Move it away and rerun with `--restore none` to rebuild it from scratch"
            )));
        };
        visible.set_len(start).map_err(self.io(&self.path))?;
        let epochs = staged[..=first]
            .iter()
            .rev()
            .map(|(_, path, _)| path.as_path());
        append_epochs(visible, epochs)
            .map_err(|(path, e)| self.io(path.unwrap_or(&self.path))(e))?;
        Ok(len)
    }
}

impl FileSink {
    /// The current epoch's writer, opening `staging/<n>.open` for a new
    /// epoch.
    fn epoch(&mut self) -> Result<&mut BufWriter<File>, SinkError> {
        if self.epoch.is_none() {
            self.opened += 1;
            self.open = self.staging.join(format!("{}.open", self.opened));
            let f = File::create(&self.open).map_err(self.io(&self.open))?;
            self.epoch = Some(BufWriter::with_capacity(1 << 20, f));
        }
        Ok(self.epoch.as_mut().expect("opened above"))
    }

    fn send(&self, job: Job) -> Result<(), SinkError> {
        let worker = self.worker.as_ref().expect("started at open");
        worker.jobs.send(job).map_err(|_| SinkError::Io {
            sink: self.id.clone(),
            path: self.staging.display().to_string(),
            error: std::io::Error::other("the sink's I/O thread stopped"),
        })
    }
}

impl Sink for FileSink {
    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        let written = encode(batch, self.epoch()?);
        self.epoch_len += written.map_err(self.io(&self.open))?;
        let epoch = self.epoch.as_mut().expect("opened above");
        if self.epoch_len - self.written_back >= WRITEBACK_EVERY {
            self.written_back = self.epoch_len;
            let file = epoch.flush().and_then(|()| epoch.get_ref().try_clone());
            let file = file.map_err(self.io(&self.open))?;
            self.send(Job::Writeback { file })?;
        }
        Ok(())
    }

    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let staged = self.staging.join(format!("{id}.staged"));
        self.epoch()?;
        let epoch = self.epoch.take().expect("opened above");
        let file = epoch
            .into_inner()
            .map_err(|e| self.io(&self.open)(e.into_error()))?;
        let staged_len = std::mem::take(&mut self.epoch_len);
        self.written_back = 0;
        self.planned_len += staged_len;
        self.pending.insert(id, staged.clone());
        let info = json!({"checkpoint": id, "visible_len": self.planned_len, "staged_len": staged_len, "path": self.path.display().to_string()});
        self.send(Job::Seal {
            file,
            open: self.open.clone(),
            staged,
            info,
            done,
        })
    }

    fn commit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let ready: Vec<u64> = self.pending.range(..=id).map(|(k, _)| *k).collect();
        let staged = ready
            .into_iter()
            .map(|k| self.pending.remove(&k).expect("listed above"))
            .collect();
        self.send(Job::Commit { staged, done })
    }

    fn close(&mut self) -> Result<(), SinkError> {
        if let Some(worker) = self.worker.take() {
            drop(worker.jobs);
            if worker.thread.join().is_err() {
                return Err(SinkError::Io {
                    sink: self.id.clone(),
                    path: self.staging.display().to_string(),
                    error: std::io::Error::other("the sink's I/O thread panicked"),
                });
            }
        }
        Ok(())
    }
}

impl Drop for FileSink {
    fn drop(&mut self) {
        // Finishes the requested steps; a crash would not, and recovery
        // handles that.
        let _ = self.close();
    }
}

/// Prints committed output to stdout. Not transactional across crashes:
/// output staged in memory is lost with the process, so after a crash the
/// output of the checkpoint being committed may be missing or, when printing
/// was interrupted, partly printed.
struct StdoutSink {
    epoch: Vec<u8>,
    pending: BTreeMap<u64, Vec<u8>>,
}

impl Sink for StdoutSink {
    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        encode(batch, &mut self.epoch).expect("writing to memory");
        Ok(())
    }

    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let len = self.epoch.len();
        self.pending.insert(id, std::mem::take(&mut self.epoch));
        done(Ok(json!({"checkpoint": id, "staged_len": len})));
        Ok(())
    }

    fn commit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let ready: Vec<u64> = self.pending.range(..=id).map(|(k, _)| *k).collect();
        let mut out = std::io::stdout().lock();
        for k in ready {
            let bytes = self.pending.remove(&k).expect("listed above");
            out.write_all(&bytes)
                .and_then(|_| out.flush())
                .map_err(|error| SinkError::Io {
                    sink: "stdout".into(),
                    path: "stdout".into(),
                    error,
                })?;
        }
        done(Ok(Value::Null));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(values: &[&str]) -> Batch {
        let mut b = Batch::new();
        for v in values {
            b.push(None, v.as_bytes(), None);
        }
        b
    }

    fn open(dir: &Path, restore: Option<&Value>) -> FileSink {
        FileSink::open("out", &dir.join("out.txt"), &dir.join("staging"), restore).unwrap()
    }

    fn visible(dir: &Path) -> String {
        fs::read_to_string(dir.join("out.txt")).unwrap()
    }

    #[test]
    fn output_appears_only_at_commit() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["a"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        assert_eq!(visible(dir.path()), "");
        commit_blocking(&mut s, 1).unwrap();
        assert_eq!(visible(dir.path()), "a\n");
    }

    /// The sink thread writes the next epoch while the I/O thread still
    /// seals the previous one; each epoch keeps its own file and the order.
    #[test]
    fn epochs_written_while_earlier_ones_are_sealed_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        let (tx, rx) = crossbeam_channel::unbounded();
        for id in 1..=20u64 {
            let values: Vec<String> = (0..50).map(|i| format!("{id}-{i}")).collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            s.write(&recs(&values)).unwrap();
            let tx = tx.clone();
            s.precommit(id, Box::new(move |r| tx.send((id, r)).unwrap()))
                .unwrap();
        }
        let acks: Vec<u64> = (0..20)
            .map(|_| rx.recv().unwrap())
            .map(|(id, r)| {
                r.unwrap();
                id
            })
            .collect();
        assert_eq!(acks, (1..=20).collect::<Vec<_>>(), "done in request order");
        commit_blocking(&mut s, 20).unwrap();
        let want: String = (1..=20)
            .flat_map(|id| (0..50).map(move |i| format!("{id}-{i}\n")))
            .collect();
        assert_eq!(visible(dir.path()), want);
        assert_eq!(fs::read_dir(dir.path().join("staging")).unwrap().count(), 0);
    }

    /// The first commit into an empty file renames the staged epoch into
    /// place (one write and one sync of the output, not two); later ones
    /// append to it.
    #[test]
    fn the_first_commit_into_an_empty_file_moves_the_epoch_into_place() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["a", "b"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        s.write(&recs(&["c"])).unwrap();
        precommit_blocking(&mut s, 2).unwrap();
        let staged1 = fs::metadata(dir.path().join("staging/1.staged")).unwrap();
        commit_blocking(&mut s, 2).unwrap();
        let out = fs::metadata(dir.path().join("out.txt")).unwrap();
        assert_eq!(out.ino(), staged1.ino(), "epoch 1 was renamed, not copied");
        assert_eq!(visible(dir.path()), "a\nb\nc\n");
        s.write(&recs(&["d"])).unwrap();
        precommit_blocking(&mut s, 3).unwrap();
        commit_blocking(&mut s, 3).unwrap();
        assert_eq!(visible(dir.path()), "a\nb\nc\nd\n");
        assert_eq!(fs::read_dir(dir.path().join("staging")).unwrap().count(), 0);
        let out3 = fs::metadata(dir.path().join("out.txt")).unwrap();
        assert_eq!(out3.ino(), out.ino(), "appended to");
    }

    /// A crash between moving epoch 1 into place and appending epoch 2.
    #[test]
    fn a_crash_after_the_rename_restores_the_epochs_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["a"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        s.write(&recs(&["b", "c"])).unwrap();
        let info2 = precommit_blocking(&mut s, 2).unwrap();
        drop(s);
        fs::rename(
            dir.path().join("staging/1.staged"),
            dir.path().join("out.txt"),
        )
        .unwrap();
        open(dir.path(), Some(&info2));
        assert_eq!(visible(dir.path()), "a\nb\nc\n");
    }

    /// An output path that is not a regular file (a symlink here) is
    /// appended to, never replaced.
    #[test]
    fn a_symlinked_output_is_appended_to_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("target.txt"), "").unwrap();
        std::os::unix::fs::symlink("target.txt", dir.path().join("out.txt")).unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["a"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        commit_blocking(&mut s, 1).unwrap();
        let link = fs::symlink_metadata(dir.path().join("out.txt")).unwrap();
        assert!(link.file_type().is_symlink());
        assert_eq!(
            fs::read_to_string(dir.path().join("target.txt")).unwrap(),
            "a\n"
        );
    }

    #[test]
    fn restore_truncates_output_of_later_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["a"])).unwrap();
        let info1 = precommit_blocking(&mut s, 1).unwrap();
        commit_blocking(&mut s, 1).unwrap();
        s.write(&recs(&["b"])).unwrap();
        precommit_blocking(&mut s, 2).unwrap();
        commit_blocking(&mut s, 2).unwrap();
        drop(s);
        open(dir.path(), Some(&info1));
        assert_eq!(visible(dir.path()), "a\n");
    }

    /// Regression: the sink may precommit `n` before it gets the commit of
    /// `n - 1`; a crash after checkpoint `n` completed but before either was
    /// appended must restore both epochs, not report the file as modified.
    #[test]
    fn restore_appends_every_completed_but_unappended_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["a"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        commit_blocking(&mut s, 1).unwrap();
        s.write(&recs(&["b"])).unwrap();
        precommit_blocking(&mut s, 2).unwrap();
        s.write(&recs(&["c", "d"])).unwrap();
        let info3 = precommit_blocking(&mut s, 3).unwrap();
        drop(s); // crash: 3 is complete, 2 and 3 were never appended
        let mut s = open(dir.path(), Some(&info3));
        assert_eq!(visible(dir.path()), "a\nb\nc\nd\n");
        s.write(&recs(&["e"])).unwrap();
        precommit_blocking(&mut s, 4).unwrap();
        commit_blocking(&mut s, 4).unwrap();
        assert_eq!(visible(dir.path()), "a\nb\nc\nd\ne\n");
    }

    #[test]
    fn a_partial_append_is_redone() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["a"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        commit_blocking(&mut s, 1).unwrap();
        s.write(&recs(&["bbbb"])).unwrap();
        let info2 = precommit_blocking(&mut s, 2).unwrap();
        drop(s);
        // Half of epoch 2 made it before the crash.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join("out.txt"))
            .unwrap();
        f.write_all(b"bb").unwrap();
        open(dir.path(), Some(&info2));
        assert_eq!(visible(dir.path()), "a\nbbbb\n");
    }

    #[test]
    fn a_file_shorter_than_committed_output_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["a"])).unwrap();
        let info = precommit_blocking(&mut s, 1).unwrap();
        commit_blocking(&mut s, 1).unwrap();
        drop(s);
        fs::write(dir.path().join("out.txt"), "").unwrap();
        let err = FileSink::open(
            "out",
            &dir.path().join("out.txt"),
            &dir.path().join("staging"),
            Some(&info),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("--restore none"), "{err}");
    }
}
