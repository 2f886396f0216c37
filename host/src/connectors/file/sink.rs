//! The file sink (`type = "file"` in `[[sink]]`): a transactional sink
//! whose epochs are staged in files of their own under the state dir and
//! appended to the visible file at commit, with the disk work on an I/O
//! thread (module `io`).
//!
//! Invariants:
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
//! - A staged epoch is named `<id>.<crc>.staged`, `<crc>` the CRC-32 of its
//!   bytes in hex: a recovery that appends it checks them first, so a
//!   changed byte is an error, never a record written differently.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use toml::Table;

use super::append::AppendSink;
use super::csv_layout::{ColumnNames, CsvKeys};
use super::io::{IoRequest, append_epochs, perform};
use super::records::{FileFormat, RecordWriter};
use crate::connectors::sink::{
    Delivery, Done, SealEpoch, Sink, SinkContext, SinkError, SinkFormat,
};
use crate::connectors::worker::Worker;
use crate::connectors::{BuildSink, SinkConnector, SinkType};
use crate::dataflow::Batch;
use crate::fields::{from_table, resolve};

/// The registry entry of `type = "file"` sinks.
pub const SINK: SinkType = SinkType {
    name: "file",
    keys: &[
        "path",
        "format",
        "schema",
        "message",
        "codec",
        "columns",
        "header",
        "delimiter",
    ],
    delivery: Delivery::ExactlyOnce,
    read: FileSinkConfig::read,
};

/// The settings of a file sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSinkConfig {
    /// The visible file (`path`, resolved onto the job folder); its folder
    /// is created if missing.
    pub path: PathBuf,
    /// How records are written (`format`, default `lines`, with
    /// `schema`, `message` and `codec`; `csv` with `columns`, `header` and
    /// `delimiter`).
    pub format: FileFormat,
}

impl FileSinkConfig {
    fn read(table: Table) -> Result<BuildSink, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            path: Option<String>,
            format: Option<String>,
            schema: Option<String>,
            message: Option<String>,
            codec: Option<String>,
            columns: Option<ColumnNames>,
            header: Option<bool>,
            delimiter: Option<String>,
        }
        let raw: Raw = from_table(table)?;
        Ok(Box::new(move |dir: &Path, delivery| {
            let csv = CsvKeys {
                columns: raw.columns.clone(),
                header: raw.header,
                delimiter: raw.delimiter.clone(),
            };
            let format = FileFormat::read(
                raw.format.as_deref(),
                raw.schema.as_deref(),
                raw.message.as_deref(),
                raw.codec.as_deref(),
                csv,
                dir,
            )?;
            if format.needs_whole_epochs() && delivery == Delivery::AtLeastOnce {
                return Err(format!(
                    "delivery = \"at-least-once\" appends records as they come, and a crash in the middle of one would damage the {} file after it: remove `delivery` (exactly-once appends whole checkpoints)",
                    raw.format.as_deref().unwrap_or_default()
                ));
            }
            Ok(Arc::new(FileSinkConfig {
                path: resolve(dir, "path", raw.path)?,
                format,
            }))
        }))
    }
}

impl SinkConnector for FileSinkConfig {
    /// Exactly-once appends whole checkpoints at commit; at-least-once
    /// (formats of lines only) appends records as they arrive
    /// (`super::append`).
    fn open(&self, at: &SinkContext) -> Result<Box<dyn Sink>, SinkError> {
        let (id, path, format) = (at.id, &self.path, &self.format);
        Ok(match at.delivery {
            Delivery::ExactlyOnce => {
                Box::new(FileSink::open(id, path, at.staging, at.restore)?.with_format(format)?)
            }
            Delivery::AtLeastOnce => {
                Box::new(AppendSink::open(id, path, at.restore)?.with_format(format)?)
            }
        })
    }

    fn file(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn check_files(&self, _dir: &Path) -> Result<(), String> {
        if !self.path.is_dir() {
            return Ok(());
        }
        Err(format!(
            "path {} is a directory; set `path` to a file",
            self.path.display()
        ))
    }
}

/// Bytes of an epoch after which the file sink asks its I/O thread to start
/// writing them to the disk (`sync_data` on a clone of the file), so that
/// dirty pages do not pile up until the precommit, where the kernel's
/// writeback throttling would stall the sink thread.
const WRITEBACK_EVERY: u64 = 32 << 20;

/// A file sink: epochs are staged in `staging/<id>.<crc>.staged` and
/// appended to the visible file at commit.
pub(crate) struct FileSink {
    id: String,
    /// Records as the format writes them.
    records: RecordWriter,
    path: PathBuf,
    staging: PathBuf,
    /// The epoch being written (records since the last precommit), streamed
    /// to `staging/current.open` so that memory stays flat however long the
    /// epoch is.
    epoch: Option<BufWriter<Summed<File>>>,
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
    worker: Option<Worker<IoRequest>>,
}

impl FileSink {
    /// The sink writing records in `format` (opened on the visible file
    /// as the restore left it: an Avro file is continued).
    fn with_format(mut self, format: &FileFormat) -> Result<Self, SinkError> {
        let records = RecordWriter::open(format, &self.path, self.planned_len);
        self.records = records.map_err(|message| SinkError::Inconsistent {
            sink: self.id.clone(),
            path: self.path.display().to_string(),
            message,
        })?;
        Ok(self)
    }

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
            records: RecordWriter::open(&FileFormat::Text(SinkFormat::Lines), path, 0)
                .expect("lines need no file"),
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
        let (id, visible) = (sink.id.clone(), sink.path.clone());
        sink.worker = Some(Worker::start(&sink.id, &sink.path, move |request| {
            perform(&id, &visible, request)
        }));
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
            if let Some(k) = staged_epoch(&path).map(|(k, _)| k).filter(|k| *k <= id) {
                let size = fs::metadata(&path).map_err(self.io(&path))?.len();
                staged.push((k, path, size));
            }
        }
        staged.sort_unstable_by_key(|(k, _, _)| std::cmp::Reverse(*k));
        if staged.first().map(|(k, _, size)| (*k, *size)) != Some((id, staged_len)) {
            return Err(inconsistent(format!(
                "the output file is {current} bytes, checkpoint {id} expects {len}, and its staged output ({}) is missing or damaged. Move the output away and rerun with `--restore none` to rebuild it from scratch",
                self.staging.join(format!("{id}.*.staged")).display()
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
        for (_, path, _) in &staged[..=first] {
            self.check_staged(path)?;
        }
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

/// The epoch id and checksum in the name of a staged epoch file
/// (`<id>.<crc>.staged`; `<id>.staged`, without a checksum, as a Weir
/// before checksums staged it), or `None` for another file.
fn staged_epoch(path: &Path) -> Option<(u64, Option<u32>)> {
    let name = path.file_name()?.to_str()?.strip_suffix(".staged")?;
    match name.split_once('.') {
        None => Some((name.parse().ok()?, None)),
        Some((id, crc)) => Some((id.parse().ok()?, Some(u32::from_str_radix(crc, 16).ok()?))),
    }
}

/// A writer that keeps the CRC-32 of what it wrote. Under a `BufWriter`
/// it sums whole buffers, not records.
struct Summed<W> {
    out: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Summed<W> {
    fn new(out: W) -> Self {
        Summed {
            out,
            crc: crc32fast::Hasher::new(),
        }
    }
}

impl<W: Write> Write for Summed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl FileSink {
    /// The current epoch's writer, opening `staging/<n>.open` for a new
    /// epoch.
    fn epoch(&mut self) -> Result<&mut BufWriter<Summed<File>>, SinkError> {
        if self.epoch.is_none() {
            self.opened += 1;
            self.open = self.staging.join(format!("{}.open", self.opened));
            let f = File::create(&self.open).map_err(self.io(&self.open))?;
            self.epoch = Some(BufWriter::with_capacity(1 << 20, Summed::new(f)));
        }
        Ok(self.epoch.as_mut().expect("opened above"))
    }

    /// Checks a staged epoch's bytes against the checksum in its name.
    fn check_staged(&self, path: &Path) -> Result<(), SinkError> {
        let Some((_, Some(want))) = staged_epoch(path) else {
            return Ok(());
        };
        let mut summed = Summed::new(std::io::sink());
        let mut file = File::open(path).map_err(self.io(path))?;
        std::io::copy(&mut file, &mut summed).map_err(self.io(path))?;
        if summed.crc.finalize() != want {
            return Err(SinkError::Inconsistent {
                sink: self.id.clone(),
                path: path.display().to_string(),
                message: "the staged output of a completed checkpoint does not match its checksum (changed on disk), so it cannot be appended as it was written: restore it from a backup, or move the output away and rerun with `--restore none` to rebuild it from scratch".into(),
            });
        }
        Ok(())
    }

    fn send(&self, request: IoRequest) -> Result<(), SinkError> {
        self.worker.as_ref().expect("started at open").send(request)
    }
}

impl Sink for FileSink {
    fn reads_rows(&self) -> bool {
        self.records.reads_rows()
    }

    /// Records that do not fit the format's schema.
    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        self.records.refuse(batch)
    }

    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        self.epoch()?;
        let epoch = self.epoch.as_mut().expect("opened above");
        let written = self.records.write(batch, epoch);
        self.epoch_len += written.map_err(self.io(&self.open))?;
        let epoch = self.epoch.as_mut().expect("opened above");
        if self.epoch_len - self.written_back >= WRITEBACK_EVERY {
            self.written_back = self.epoch_len;
            let file = epoch.flush().and_then(|()| epoch.get_ref().out.try_clone());
            let file = file.map_err(self.io(&self.open))?;
            self.send(IoRequest::Writeback { file })?;
        }
        Ok(())
    }

    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        self.epoch()?;
        let epoch = self.epoch.as_mut().expect("opened above");
        let written = self.records.finish(epoch);
        self.epoch_len += written.map_err(self.io(&self.open))?;
        let epoch = self.epoch.take().expect("opened above");
        let Summed { out: file, crc } = epoch
            .into_inner()
            .map_err(|e| self.io(&self.open)(e.into_error()))?;
        let staged = (self.staging).join(format!("{id}.{:08x}.staged", crc.finalize()));
        let staged_len = std::mem::take(&mut self.epoch_len);
        self.written_back = 0;
        self.planned_len += staged_len;
        self.pending.insert(id, staged.clone());
        let info = json!({"checkpoint": id, "visible_len": self.planned_len, "staged_len": staged_len, "path": self.path.display().to_string()});
        self.send(IoRequest::Seal(SealEpoch {
            file,
            open: self.open.clone(),
            staged,
            info,
            done,
        }))
    }

    fn commit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let ready: Vec<u64> = self.pending.range(..=id).map(|(k, _)| *k).collect();
        let staged = ready
            .into_iter()
            .map(|k| self.pending.remove(&k).expect("listed above"))
            .collect();
        self.send(IoRequest::Commit { staged, done })
    }

    fn close(&mut self) -> Result<(), SinkError> {
        match self.worker.as_mut() {
            Some(worker) => worker.close(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::sink::{commit_blocking, precommit_blocking};

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

    /// The staged file of epoch `id`.
    fn staged(dir: &Path, id: u64) -> PathBuf {
        let files = fs::read_dir(dir.join("staging")).unwrap();
        let mut paths = files.map(|e| e.unwrap().path());
        paths
            .find(|p| staged_epoch(p).is_some_and(|(k, _)| k == id))
            .unwrap_or_else(|| panic!("no staged epoch {id}"))
    }

    /// A crash after checkpoint 1 completed and before its append: a
    /// changed bit in its staged epoch stops the restore with the file's
    /// name, where it would have appended a changed record; unchanged (and
    /// as a Weir before checksums named it), the epoch is appended.
    #[test]
    fn a_changed_bit_in_a_staged_epoch_stops_the_restore() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), None);
        s.write(&recs(&["alpha", "beta"])).unwrap();
        let info = precommit_blocking(&mut s, 1).unwrap();
        drop(s);
        let path = staged(dir.path(), 1);
        let good = fs::read(&path).unwrap();
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x20; // "alpha" -> "Alpha": still a well-formed line
            fs::write(&path, &bad).unwrap();
            let e = FileSink::open(
                "out",
                &dir.path().join("out.txt"),
                &dir.path().join("staging"),
                Some(&info),
            );
            let e = e
                .err()
                .expect("a changed epoch must not be appended")
                .to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            assert!(e.contains("checksum"), "{e}");
            assert_eq!(visible(dir.path()), "", "nothing appended");
        }
        fs::write(&path, &good).unwrap();
        fs::rename(&path, dir.path().join("staging/1.staged")).unwrap();
        open(dir.path(), Some(&info));
        assert_eq!(visible(dir.path()), "alpha\nbeta\n");
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
        let staged1 = fs::metadata(staged(dir.path(), 1)).unwrap();
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
        fs::rename(staged(dir.path(), 1), dir.path().join("out.txt")).unwrap();
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

    const AVSC: &str = r#"{"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "long"}, {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}}]}"#;

    fn avro(codec: &str) -> FileFormat {
        let schema = crate::schemas::avro::AvroSchema::parse(AVSC).unwrap();
        let codec = crate::schemas::avro::container::AvroCodec::parse(codec).unwrap();
        FileFormat::Avro(schema, codec)
    }

    fn numbered(range: std::ops::Range<i64>) -> Batch {
        let values: Vec<String> = range
            .map(|n| format!(r#"{{"n":{n},"kind":"{}"}}"#, ["A", "B"][n as usize % 2]))
            .collect();
        recs(&values.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// The `n` of every record of the Avro file `path`, read by
    /// apache-avro's reader.
    fn avro_ns(path: &Path) -> Vec<i64> {
        let reader = apache_avro::Reader::new(File::open(path).unwrap()).unwrap();
        (reader.map(|v| match v.unwrap() {
            apache_avro::types::Value::Record(fields) => match fields[0].1 {
                apache_avro::types::Value::Long(n) => n,
                _ => panic!("{fields:?}"),
            },
            v => panic!("{v:?}"),
        }))
        .collect()
    }

    /// An Avro container file grows by whole blocks per checkpoint: the
    /// header comes with the first epoch that has records (an empty epoch
    /// writes nothing), large epochs span blocks, and a restore (after a
    /// crash that lost a precommitted epoch) continues the file with its
    /// own sync marker; the file reads back whole, in order, with every
    /// codec.
    #[test]
    fn an_avro_file_grows_by_whole_blocks_through_a_restore() {
        for codec in ["null", "deflate", "snappy", "zstandard"] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("out.avro");
            let open = |restore: Option<&Value>| {
                let s = FileSink::open("out", &path, &dir.path().join("staging"), restore);
                s.unwrap().with_format(&avro(codec)).unwrap()
            };
            let mut s = open(None);
            precommit_blocking(&mut s, 1).unwrap();
            commit_blocking(&mut s, 1).unwrap();
            assert_eq!(fs::metadata(&path).unwrap().len(), 0, "an empty epoch");
            s.write(&numbered(0..10)).unwrap();
            s.write(&numbered(10..20_000)).unwrap();
            let info = precommit_blocking(&mut s, 2).unwrap();
            commit_blocking(&mut s, 2).unwrap();
            s.write(&numbered(20_000..20_100)).unwrap();
            precommit_blocking(&mut s, 3).unwrap();
            drop(s);
            let mut s = open(Some(&info));
            s.write(&numbered(30_000..30_050)).unwrap();
            precommit_blocking(&mut s, 3).unwrap();
            commit_blocking(&mut s, 3).unwrap();
            let want: Vec<i64> = (0..20_000).chain(30_000..30_050).collect();
            assert_eq!(avro_ns(&path), want, "{codec}");
        }
    }

    /// Rows reach an Avro file sink as rows (`reads_rows`; a sink of lines
    /// takes their JSON) and are written as their JSON records would be:
    /// both files read back the same records, in order; a row that does
    /// not fit is refused, named by its JSON.
    #[test]
    fn rows_are_written_to_an_avro_file_as_their_json_records_would_be() {
        let dir = tempfile::tempdir().unwrap();
        let written = |name: &str, batch: &Batch| {
            let path = dir.path().join(name);
            let staging = dir.path().join(format!("{name}.staging"));
            let s = FileSink::open("out", &path, &staging, None).unwrap();
            let mut s = s.with_format(&avro("deflate")).unwrap();
            assert!(s.reads_rows());
            s.write(batch).unwrap();
            precommit_blocking(&mut s, 1).unwrap();
            commit_blocking(&mut s, 1).unwrap();
            let reader = apache_avro::Reader::new(File::open(&path).unwrap()).unwrap();
            reader.map(Result::unwrap).collect::<Vec<_>>()
        };
        let mut rows = Batch::new();
        for n in [0i64, -1, i64::MAX, 7] {
            let mut row = Vec::new();
            let kind = ["A", "B"][n.unsigned_abs() as usize % 2];
            weir_flat::row::RowWriter::new(&mut row)
                .i64("n", n)
                .str("kind", kind);
            rows.push_row(None, &row, None);
        }
        let texts: Vec<Vec<u8>> = rows.iter().map(|r| r.text_value()).collect();
        let json = recs(
            &texts
                .iter()
                .map(|t| std::str::from_utf8(t).unwrap())
                .collect::<Vec<_>>(),
        );
        let from_rows = written("rows.avro", &rows);
        assert_eq!(from_rows.len(), 4);
        assert_eq!(from_rows, written("json.avro", &json));

        let mut misfit = Vec::new();
        weir_flat::row::RowWriter::new(&mut misfit)
            .i64("n", 1)
            .str("kind", "C");
        let mut bad = Batch::new();
        bad.push_row(None, &misfit, None);
        let path = dir.path().join("bad.avro");
        let s = FileSink::open("out", &path, &dir.path().join("bad"), None).unwrap();
        let mut s = s.with_format(&avro("null")).unwrap();
        assert_eq!(s.refuse(&bad).len(), 1);
        let e = s.write(&bad).unwrap_err().to_string();
        assert!(e.contains(r#"{"n":1,"kind":"C"}"#), "{e}");
        let lines = FileSink::open(
            "out",
            &dir.path().join("out.txt"),
            &dir.path().join("t"),
            None,
        );
        assert!(!lines.unwrap().reads_rows(), "a sink of lines takes JSON");
    }

    /// A file sink's records must fit its schema: `write` fails naming the
    /// record and why, `refuse` lists them (for `on_error`); an Avro file
    /// of another schema or codec is not continued.
    #[test]
    fn records_that_do_not_fit_and_files_of_another_schema_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.avro");
        let staging = dir.path().join("staging");
        let mut s = FileSink::open("out", &path, &staging, None).unwrap();
        s = s.with_format(&avro("null")).unwrap();
        let batch = recs(&[r#"{"n":1,"kind":"A"}"#, r#"{"n":2,"kind":"C"}"#, "x"]);
        let refused: Vec<usize> = s.refuse(&batch).into_iter().map(|(i, _)| i).collect();
        assert_eq!(refused, [1, 2]);
        let e = s.write(&batch).unwrap_err().to_string();
        assert!(e.contains("does not fit the sink's schema"), "{e}");
        assert!(e.contains(r#"{"n":2,"kind":"C"}"#), "{e}");
        let mut s = FileSink::open("out", &path, &staging, None).unwrap();
        s = s.with_format(&avro("null")).unwrap();
        s.write(&numbered(0..3)).unwrap();
        let info = precommit_blocking(&mut s, 1).unwrap();
        commit_blocking(&mut s, 1).unwrap();
        drop(s);
        let reopen = |format: &FileFormat| {
            let s = FileSink::open("out", &path, &staging, Some(&info)).unwrap();
            s.with_format(format).err().unwrap().to_string()
        };
        let e = reopen(&avro("deflate"));
        assert!(e.contains("compressed with \"null\""), "{e}");
        let other = AVSC.replace("\"n\"", "\"m\"");
        let other = crate::schemas::avro::AvroSchema::parse(&other).unwrap();
        let e = reopen(&FileFormat::Avro(other, Default::default()));
        assert!(e.contains("another schema"), "{e}");
    }

    fn csv(columns: Option<&[&str]>) -> FileFormat {
        FileFormat::Csv(super::super::csv_layout::CsvLayout {
            columns: columns.map(|c| c.iter().map(|n| n.to_string()).collect()),
            header: true,
            delimiter: b',',
        })
    }

    /// Rows of `{"word", "count"}`, `count` from each of `range`.
    fn count_rows(range: std::ops::Range<u64>) -> Batch {
        let mut batch = Batch::new();
        for n in range {
            let mut row = Vec::new();
            let word = format!("w,{}", n % 3);
            weir_flat::row::RowWriter::new(&mut row)
                .str("word", &word)
                .u64("count", n);
            batch.push_row(None, &row, None);
        }
        batch
    }

    /// A CSV file sink reads rows and gets one header line, with its first
    /// record, through every kind of restart: a crash before the first
    /// commit (the header is staged again), after a commit (the file's
    /// header gives the columns, none is written again), between a
    /// checkpoint and its append (the staged epoch is appended, then
    /// continued); `columns` other than the file's are refused at open.
    #[test]
    fn a_csv_file_keeps_one_header_and_its_columns_through_restores() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        let staging = dir.path().join("staging");
        let open = |restore: Option<&Value>, format: &FileFormat| {
            let s = FileSink::open("out", &path, &staging, restore).unwrap();
            s.with_format(format)
        };
        let mut s = open(None, &csv(None)).unwrap();
        assert!(s.reads_rows());
        s.write(&count_rows(0..2)).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        drop(s);
        let mut s = open(None, &csv(None)).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        commit_blocking(&mut s, 1).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "",
            "no record, no header"
        );
        s.write(&count_rows(0..2)).unwrap();
        let info2 = precommit_blocking(&mut s, 2).unwrap();
        commit_blocking(&mut s, 2).unwrap();
        s.write(&count_rows(2..4)).unwrap();
        precommit_blocking(&mut s, 3).unwrap();
        drop(s);
        let mut s = open(Some(&info2), &csv(None)).unwrap();
        s.write(&count_rows(10..11)).unwrap();
        let info3 = precommit_blocking(&mut s, 3).unwrap();
        drop(s);
        let mut s = open(Some(&info3), &csv(Some(&["word", "count"]))).unwrap();
        let mut text = Batch::new();
        text.push(None, br#"{"count":11}"#, None);
        s.write(&text).unwrap();
        precommit_blocking(&mut s, 4).unwrap();
        commit_blocking(&mut s, 4).unwrap();
        let want = "word,count\n\"w,0\",0\n\"w,1\",1\n\"w,1\",10\n,11\n";
        assert_eq!(fs::read_to_string(&path).unwrap(), want);
        drop(s);
        let info = json!({"checkpoint": 4, "visible_len": want.len(), "staged_len": 6});
        let e = open(Some(&info), &csv(Some(&["count", "word"])));
        let e = e.err().unwrap().to_string();
        assert!(e.contains(r#"set columns = ["word", "count"]"#), "{e}");
    }

    /// Length-delimited Protobuf messages written by the sink read back
    /// through the file source, from the start and from each offset.
    #[test]
    fn protobuf_files_read_back_from_every_offset() {
        use crate::connectors::SourceConnector;
        use crate::connectors::file::source::FileSourceConfig;
        use crate::connectors::format::Format;
        use crate::connectors::parsing::Parsing;
        use crate::connectors::schema_format::{Role, Schema, SchemaKind, SchemaSettings};
        let proto = "syntax = \"proto3\"; message M { int64 n = 1; string s = 2; }";
        let schema = crate::schemas::protobuf::ProtoSchema::compile(proto, None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.pb");
        let mut s = FileSink::open("out", &path, &dir.path().join("staging"), None).unwrap();
        s = s
            .with_format(&FileFormat::Protobuf(schema.clone()))
            .unwrap();
        let values: Vec<String> = (0..300)
            .map(|n| format!(r#"{{"n":{n},"s":"{}"}}"#, "x".repeat(n % 200)))
            .collect();
        s.write(&recs(
            &values.iter().map(String::as_str).collect::<Vec<_>>(),
        ))
        .unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        commit_blocking(&mut s, 1).unwrap();
        let source = FileSourceConfig {
            path,
            parsing: Parsing {
                format: Format::Protobuf,
                schema: Some(SchemaSettings {
                    kind: SchemaKind::Protobuf,
                    role: Role::Values,
                    schema: Some(Schema::Protobuf(schema)),
                    registry: None,
                    strategy: Default::default(),
                }),
                ..Parsing::default()
            },
        };
        let want: Vec<String> = (0..300)
            .map(|n| format!(r#"{{"n":{n},"s":"{}"}}"#, "x".repeat(n % 200)))
            .collect();
        for first in [0, 1, 7, 299, 300] {
            let mut reader = source.open("s", None).unwrap();
            let mut got = Vec::new();
            if first > 0 {
                let batch = reader.read_batch(first).unwrap().unwrap();
                got.extend(
                    batch
                        .iter()
                        .map(|r| String::from_utf8(r.text_value()).unwrap()),
                );
            }
            let offset = reader.offset();
            let mut rest = source.open("s", Some(&offset)).unwrap();
            while let Some(batch) = rest.read_batch(64).unwrap() {
                got.extend(
                    batch
                        .iter()
                        .map(|r| String::from_utf8(r.text_value()).unwrap()),
                );
            }
            assert_eq!(got, want, "first batch of {first}");
        }
        let cut = source.path.with_extension("cut");
        let bytes = fs::read(&source.path).unwrap();
        fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
        let cut_source = FileSourceConfig {
            path: cut,
            ..source
        };
        let mut reader = cut_source.open("s", None).unwrap();
        let e = loop {
            match reader.read_batch(64) {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("a cut message must fail the source"),
                Err(e) => break e.to_string(),
            }
        };
        assert!(e.contains("the file ends inside a message"), "{e}");
        // A message that does not decode is a bad record holding its bytes.
        let bad = cut_source.path.with_extension("bad");
        let mut bytes = vec![2u8, 0xFF, 0xFF];
        bytes.extend_from_slice(&fs::read(&source.path).unwrap()[..]);
        fs::write(&bad, &bytes).unwrap();
        let bad_source = FileSourceConfig {
            path: bad,
            ..cut_source
        };
        let mut reader = bad_source.open("s", None).unwrap();
        let batch = reader.read_batch(5).unwrap().unwrap();
        assert_eq!(batch.len(), 4, "the bad message, then four good ones");
        let letters = reader.take_bad();
        assert_eq!(letters.len(), 1);
        assert_eq!(letters[0].value, [0xFF, 0xFF]);
        assert!(
            letters[0].origin.contains("message 1"),
            "{}",
            letters[0].origin
        );
    }

    /// The settings of formats with a schema are checked in one line each.
    #[test]
    fn format_settings_are_checked_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("r.avsc"), AVSC).unwrap();
        let read = |text: &str, delivery| {
            let build = (SINK.read)(text.parse().unwrap()).unwrap();
            build(dir.path(), delivery).map(drop)
        };
        let eo = Delivery::ExactlyOnce;
        let cases = [
            (
                "path = \"o\"\nformat = \"xml\"",
                eo,
                "write \"lines\", \"jsonl\"",
            ),
            (
                "path = \"o\"\nformat = \"avro\"",
                eo,
                "add schema = \"<file>.avsc\"",
            ),
            (
                "path = \"o\"\ncodec = \"deflate\"",
                eo,
                "`codec` compresses the blocks",
            ),
            (
                "path = \"o\"\nschema = \"r.avsc\"",
                eo,
                "settings of format = \"avro\"",
            ),
            (
                "path = \"o\"\nformat = \"avro\"\nschema = \"r.avsc\"\ncodec = \"lz4\"",
                eo,
                "Avro codec \"lz4\"",
            ),
            (
                "path = \"o\"\nformat = \"avro\"\nschema = \"r.avsc\"",
                Delivery::AtLeastOnce,
                "would damage the avro file",
            ),
        ];
        for (text, delivery, want) in cases {
            let e = read(text, delivery).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        read("path = \"o\"\nformat = \"avro\"\nschema = \"r.avsc\"", eo).unwrap();
    }
}
