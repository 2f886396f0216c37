//! The at-least-once file sink (`type = "file"` with
//! `delivery = "at-least-once"`): each batch is appended to the visible
//! file as it arrives, so readers (`tail -F`) see results within
//! milliseconds.
//!
//! Invariants:
//! - Every record written before a checkpoint's barrier is durable in the
//!   visible file (written, then `sync_data` at precommit) before the sink
//!   reports the checkpoint's commit info, so a completed checkpoint never
//!   lost output.
//! - Restoring a checkpoint keeps the file as it is: the output written
//!   after that checkpoint stays, and the restored run writes it again
//!   (duplicates, nothing lost). A fresh start (no checkpoint) empties it.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::records::{FileFormat, RecordWriter};
use crate::connectors::sink::{Done, Sink, SinkError, SinkFormat};
use crate::dataflow::Batch;

/// An at-least-once file sink.
pub(crate) struct AppendSink {
    id: String,
    path: PathBuf,
    file: File,
    /// The next batch's bytes, built in memory and written in one call.
    buffer: Vec<u8>,
    records: RecordWriter,
}

impl AppendSink {
    /// Opens sink `id` appending to `path` (emptied when `restore` is
    /// `None`, kept as it is otherwise).
    pub(crate) fn open(id: &str, path: &Path, restore: Option<&Value>) -> Result<Self, SinkError> {
        let io = |path: &Path| {
            let (sink, path) = (id.to_owned(), path.display().to_string());
            move |error| SinkError::Io { sink, path, error }
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io(path))?;
        if restore.is_none() {
            file.set_len(0).map_err(io(path))?;
        }
        Ok(AppendSink {
            id: id.to_owned(),
            path: path.to_path_buf(),
            file,
            buffer: Vec::new(),
            records: RecordWriter::open(&FileFormat::Text(SinkFormat::Lines), path, 0)
                .expect("lines need no file"),
        })
    }

    /// The sink writing records in `format`, a format of lines.
    pub(crate) fn with_format(mut self, format: &FileFormat) -> Result<Self, SinkError> {
        debug_assert!(!format.needs_whole_epochs(), "refused with at-least-once");
        let records = RecordWriter::open(format, &self.path, 0);
        self.records = records.map_err(|e| self.failed(std::io::Error::other(e)))?;
        Ok(self)
    }

    fn failed(&self, error: std::io::Error) -> SinkError {
        SinkError::Io {
            sink: self.id.clone(),
            path: self.path.display().to_string(),
            error,
        }
    }
}

impl Sink for AppendSink {
    /// Records that do not fit the format's schema.
    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        self.records.refuse(batch)
    }

    fn out_on_write(&self) -> bool {
        true
    }

    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        self.buffer.clear();
        let records = &mut self.records;
        let encoded = records.write(batch, &mut self.buffer);
        encoded
            .and_then(|_| records.finish(&mut self.buffer))
            .map_err(|e| self.failed(e))?;
        let written = self.file.write_all(&self.buffer);
        written.map_err(|e| self.failed(e))
    }

    /// Makes everything written so far durable, then reports the file's
    /// length (for `weir checkpoints`; a restore does not need it).
    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let synced = self.file.sync_data().and_then(|()| self.file.metadata());
        let len = synced.map_err(|e| self.failed(e))?.len();
        done(Ok(json!({ "checkpoint": id, "visible_len": len })));
        Ok(())
    }

    fn commit(&mut self, _: u64, done: Done) -> Result<(), SinkError> {
        done(Ok(Value::Null));
        Ok(())
    }

    fn close(&mut self) -> Result<(), SinkError> {
        let synced = self.file.sync_data();
        synced.map_err(|e| self.failed(e))
    }
}
