//! A transactional sink for a destination outside Weir (a database, a
//! message log): each epoch is staged in a file of its own under the state
//! dir, made durable at precommit, and handed to a [`Destination`] once
//! its checkpoint is complete. The PostgreSQL and NATS sinks are such
//! destinations.
//!
//! Invariants:
//! - An epoch is delivered only after its checkpoint is complete (the
//!   coordinator calls [`Sink::commit`] only then), epochs in checkpoint
//!   order, each at most once per attempt.
//! - A staged epoch file is deleted only after its delivery succeeded, so
//!   every complete but undelivered epoch is on disk.
//! - Restoring checkpoint *n* delivers the staged epochs `<= n` that the
//!   destination does not hold yet ([`Destination::delivered`]; when it
//!   cannot tell, all of them, and the destination drops what it already
//!   has), then deletes what later checkpoints staged.
//! - The disk and network work runs on the sink's worker thread, in the
//!   order it was requested, so the sink thread writes the next epoch
//!   meanwhile.
//!
//! An epoch file is `MAGIC`, then a sequence of checked frames
//! (`dataflow/frame.rs`), one per written batch: the lengths of the batch's
//! data and spans (two little-endian `u32`s), both ([`Batch::parts`]), and
//! the CRC-32 of all that, so a changed byte is an error, never a record
//! delivered differently. A file without `MAGIC` was staged by a Weir
//! before checksums: plain frames, read as they are. For a destination
//! that [carries signals](Destination::carries_signals), the last frame
//! of an epoch that heard any holds no record and, as its data, the
//! epoch's [`EpochSignals`] in JSON (a written batch always has a record).

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::connectors::sink::{Done, RecordCheck, SealEpoch, Signal, Sink, SinkContext, SinkError};
use crate::connectors::worker::Worker;
use crate::dataflow::Batch;
use crate::dataflow::frame::{self, FrameError};
use crate::failpoint::{self, Failpoint};

/// The first bytes of an epoch file of checked frames; as the start of a
/// plain frame it would announce a batch of 4 GiB, which no batch is.
const MAGIC: [u8; 8] = [0xff, 0xff, 0xff, 0xff, b'w', b'e', b'p', b'1'];

/// Where a staged sink delivers its epochs.
pub trait Destination: Send + 'static {
    /// The last checkpoint whose epoch the destination holds, when it
    /// records that atomically with the epoch (PostgreSQL); `None` when it
    /// cannot tell, and then every staged epoch up to the restored
    /// checkpoint is delivered again and the destination must drop what it
    /// already holds (NATS, by message id).
    fn delivered(&mut self) -> Result<Option<u64>, SinkError>;

    /// Forgets what a previous run of the job delivered, for a job that
    /// starts over (no checkpoint to restore). Delivered output stays.
    fn start_over(&mut self) -> Result<(), SinkError>;

    /// Delivers epoch `id`: every record of `epoch`, in order, atomically
    /// where the destination can. Once the destination holds the epoch,
    /// and before any bookkeeping of the implementation's own, it hits
    /// failpoint `sink.after-delivery` (the staged file is deleted after
    /// this returns).
    fn deliver(&mut self, id: u64, epoch: &mut EpochReader) -> Result<(), SinkError>;

    /// What checks records against the destination on the sink's thread,
    /// if anything can ([`Sink::refuse`]); taken once, at open.
    fn check(&self) -> Option<Box<dyn RecordCheck>> {
        None
    }

    /// Whether the epochs it delivers may hold rows as rows
    /// ([`Sink::reads_rows`]); false by default.
    fn reads_rows(&self) -> bool {
        false
    }

    /// Whether the destination passes the sink's [`Signal`]s on (a
    /// repartition topic to the next stage): each epoch then carries
    /// [`EpochSignals`], read by [`EpochReader::signals`].
    fn carries_signals(&self) -> bool {
        false
    }
}

/// Where event time stood for a sink at the end of an epoch: the last
/// [`Signal`]s it heard, each kept until another replaces it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EpochSignals {
    /// The latest watermark of the sink's inputs, if any came.
    pub watermark: Option<i64>,
    /// Whether every input was idle (no watermark or record since).
    pub idle: bool,
    /// Whether the input ended with this epoch.
    pub end: bool,
}

impl EpochSignals {
    /// Takes in `signal`.
    fn hear(&mut self, signal: Signal) {
        match signal {
            Signal::Watermark(w) => {
                self.watermark = Some(w);
                self.idle = false;
            }
            Signal::Idle => self.idle = true,
            Signal::End => self.end = true,
        }
    }

    /// Whether any signal came.
    fn any(&self) -> bool {
        *self != EpochSignals::default()
    }
}

/// A sink whose epochs are staged on disk and delivered to a
/// [`Destination`] at commit.
pub struct StagedSink {
    id: String,
    staging: PathBuf,
    /// The epoch being written, `staging/<opened>.open`.
    epoch: Option<BufWriter<File>>,
    /// Epochs opened so far, to name their files.
    opened: u64,
    /// Precommitted, not yet delivered epochs: id -> staged file.
    pending: BTreeMap<u64, PathBuf>,
    /// The signals heard so far, when the destination carries them.
    signals: Option<EpochSignals>,
    /// The destination's record check, if it has one.
    check: Option<Box<dyn RecordCheck>>,
    /// Whether the destination reads rows as rows.
    reads_rows: bool,
    worker: Option<Worker<Request>>,
}

/// The steps the worker thread runs, in request order.
enum Request {
    /// Make the epoch durable.
    Seal(SealEpoch),
    /// Deliver the staged epochs, in order, and delete each once delivered.
    Deliver {
        epochs: Vec<(u64, PathBuf)>,
        done: Done,
    },
}

impl SinkContext<'_> {
    /// The exactly-once sink over `destination`: epochs staged in
    /// [`staging`](Self::staging) and delivered once their checkpoint
    /// completes, recovered to [`restore`](Self::restore).
    pub fn staged(
        &self,
        destination: impl Destination + 'static,
    ) -> Result<Box<dyn Sink>, SinkError> {
        let sink = StagedSink::open(self.id, self.staging, self.restore, Box::new(destination))?;
        Ok(Box::new(sink))
    }
}

impl StagedSink {
    /// Opens sink `id` staging under `staging`, recovering to the
    /// checkpoint whose commit info is `restore` (delivering what it
    /// completed and the destination lacks), or starting over.
    pub fn open(
        id: &str,
        staging: &Path,
        restore: Option<&Value>,
        mut destination: Box<dyn Destination>,
    ) -> Result<Self, SinkError> {
        let io = io_error(id, staging);
        fs::create_dir_all(staging).map_err(&io)?;
        let staged = staged_epochs(id, staging)?;
        match restore {
            None => destination.start_over()?,
            Some(info) => {
                let Some(n) = info.get("checkpoint").and_then(Value::as_u64) else {
                    return Err(SinkError::Inconsistent {
                        sink: id.to_owned(),
                        path: staging.display().to_string(),
                        message: format!("the checkpoint's sink record is malformed: {info}"),
                    });
                };
                recover(id, staging, n, &staged, destination.as_mut())?;
            }
        }
        // What is left was delivered (a crash came before its deletion),
        // staged after the restored checkpoint (never complete), or never
        // sealed.
        for entry in fs::read_dir(staging).map_err(&io)? {
            let path = entry.map_err(&io)?.path();
            fs::remove_file(&path).map_err(io_error(id, &path))?;
        }
        let signals = destination.carries_signals().then(EpochSignals::default);
        let check = destination.check();
        let reads_rows = destination.reads_rows();
        let sink = id.to_owned();
        let worker = Worker::start(id, staging, move |request| {
            perform(&sink, destination.as_mut(), request)
        });
        Ok(StagedSink {
            id: id.to_owned(),
            staging: staging.to_path_buf(),
            epoch: None,
            opened: 0,
            pending: BTreeMap::new(),
            signals,
            check,
            reads_rows,
            worker: Some(worker),
        })
    }

    fn open_path(&self) -> PathBuf {
        self.staging.join(format!("{}.open", self.opened))
    }

    /// The current epoch's writer, opening a new file for a new epoch.
    fn epoch(&mut self) -> Result<&mut BufWriter<File>, SinkError> {
        if self.epoch.is_none() {
            self.opened += 1;
            let path = self.open_path();
            let file = File::create(&path).map_err(io_error(&self.id, &path))?;
            let mut out = BufWriter::with_capacity(1 << 20, file);
            out.write_all(&MAGIC).map_err(io_error(&self.id, &path))?;
            self.epoch = Some(out);
        }
        Ok(self.epoch.as_mut().expect("opened above"))
    }

    fn send(&self, request: Request) -> Result<(), SinkError> {
        self.worker.as_ref().expect("started at open").send(request)
    }
}

impl Sink for StagedSink {
    fn reads_rows(&self) -> bool {
        self.reads_rows
    }

    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        match &mut self.check {
            Some(check) => check.refuse(batch),
            None => Vec::new(),
        }
    }

    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        if batch.is_empty() {
            return Ok(());
        }
        if let Some(signals) = &mut self.signals {
            signals.idle = false;
        }
        let path = self.open_path();
        frame::write_checked(self.epoch()?, batch).map_err(io_error(&self.id, &path))
    }

    fn signal(&mut self, signal: Signal) -> Result<(), SinkError> {
        if let Some(signals) = &mut self.signals {
            signals.hear(signal);
        }
        Ok(())
    }

    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        self.epoch()?;
        if let Some(signals) = self.signals.filter(EpochSignals::any) {
            let json = serde_json::to_vec(&signals).expect("signals serialize");
            let frame = Batch::from_parts(json, Vec::new()).expect("no spans fit any data");
            let path = self.open_path();
            frame::write_checked(self.epoch()?, &frame).map_err(io_error(&self.id, &path))?;
        }
        let open = self.open_path();
        let epoch = self.epoch.take().expect("opened above");
        let file = epoch
            .into_inner()
            .map_err(|e| io_error(&self.id, &open)(e.into_error()))?;
        let staged = self.staging.join(format!("{id}.epoch"));
        self.pending.insert(id, staged.clone());
        self.send(Request::Seal(SealEpoch {
            file,
            open,
            staged,
            info: json!({ "checkpoint": id }),
            done,
        }))
    }

    fn commit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let rest = self.pending.split_off(&(id + 1));
        let epochs = std::mem::replace(&mut self.pending, rest);
        self.send(Request::Deliver {
            epochs: epochs.into_iter().collect(),
            done,
        })
    }

    fn close(&mut self) -> Result<(), SinkError> {
        match self.worker.as_mut() {
            Some(worker) => worker.close(),
            None => Ok(()),
        }
    }
}

/// Runs one step of sink `sink`'s worker.
fn perform(sink: &str, destination: &mut dyn Destination, request: Request) {
    match request {
        Request::Seal(seal) => seal.run(sink),
        Request::Deliver { epochs, done } => {
            let delivered = epochs
                .iter()
                .try_for_each(|(id, path)| deliver(sink, *id, path, destination));
            done(delivered.map(|()| Value::Null))
        }
    }
}

/// Delivers staged epoch `id` from `path`, then deletes the file.
fn deliver(
    sink: &str,
    id: u64,
    path: &Path,
    destination: &mut dyn Destination,
) -> Result<(), SinkError> {
    let mut epoch = EpochReader::open(sink, path)?;
    destination.deliver(id, &mut epoch)?;
    fs::remove_file(path).map_err(io_error(sink, path))
}

/// Brings the destination to the end of checkpoint `n`: delivers the
/// staged epochs `<= n` it does not hold, in order.
fn recover(
    sink: &str,
    staging: &Path,
    n: u64,
    staged: &BTreeMap<u64, PathBuf>,
    destination: &mut dyn Destination,
) -> Result<(), SinkError> {
    let inconsistent = |message: String| SinkError::Inconsistent {
        sink: sink.to_owned(),
        path: staging.display().to_string(),
        message,
    };
    let from = match destination.delivered()? {
        Some(d) if d > n => {
            return Err(inconsistent(format!(
                "the destination already holds the output of checkpoint {d}, later than checkpoint {n} being restored; \
                 restore checkpoint {d} or later, or clear the destination's output and rerun with `--restore none`"
            )));
        }
        Some(d) if d == n => return Ok(()),
        Some(d) => {
            if !staged.contains_key(&n) {
                return Err(inconsistent(format!(
                    "the destination holds the output up to checkpoint {d}, and the staged output of checkpoint {n} \
                     ({}) is missing; clear the destination's output and rerun with `--restore none`",
                    staging.join(format!("{n}.epoch")).display()
                )));
            }
            d + 1
        }
        None => 0,
    };
    for (id, path) in staged.range(from..=n) {
        tracing::info!(
            "sink `{sink}`: delivering checkpoint {id}'s output, completed before the restart"
        );
        deliver(sink, *id, path, destination)?;
    }
    Ok(())
}

/// The sealed epochs in `staging`, by checkpoint id.
fn staged_epochs(sink: &str, staging: &Path) -> Result<BTreeMap<u64, PathBuf>, SinkError> {
    let io = io_error(sink, staging);
    let mut staged = BTreeMap::new();
    for entry in fs::read_dir(staging).map_err(&io)? {
        let path = entry.map_err(&io)?.path();
        if let Some(id) = epoch_of(&path) {
            staged.insert(id, path);
        }
    }
    Ok(staged)
}

/// The checkpoint id of a sealed epoch file `<id>.epoch`.
fn epoch_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_suffix(".epoch")?.parse().ok()
}

fn io_error(sink: &str, path: &Path) -> impl Fn(std::io::Error) -> SinkError + use<> {
    let (sink, path) = (sink.to_owned(), path.display().to_string());
    move |error| SinkError::Io {
        sink: sink.clone(),
        path: path.clone(),
        error,
    }
}

/// The batches of one staged epoch, read back in the order they were
/// written.
pub struct EpochReader {
    sink: String,
    path: PathBuf,
    input: BufReader<File>,
    /// Whether the frames are checked (the file starts with [`MAGIC`]).
    checked: bool,
    /// Batches returned so far.
    returned: u64,
    /// The epoch's signals, once read (its last frame).
    signals: Option<EpochSignals>,
}

impl EpochReader {
    /// The reader of the epoch file `path` of sink `sink`.
    fn open(sink: &str, path: &Path) -> Result<EpochReader, SinkError> {
        let io = io_error(sink, path);
        let mut input = BufReader::with_capacity(1 << 20, File::open(path).map_err(&io)?);
        let checked = input.fill_buf().map_err(&io)?.starts_with(&MAGIC);
        if checked {
            input.consume(MAGIC.len());
        }
        Ok(EpochReader {
            sink: sink.to_owned(),
            path: path.to_path_buf(),
            input,
            checked,
            returned: 0,
            signals: None,
        })
    }

    /// The next batch, or `None` at the end of the epoch.
    ///
    /// Failpoint `sink.mid-delivery` is hit before every batch but the
    /// first: the destination has the batches before it (in its open
    /// transaction, or published) and not this one.
    pub fn next_batch(&mut self) -> Result<Option<Batch>, SinkError> {
        let read = match self.checked {
            true => frame::read_checked(&mut self.input),
            false => frame::read(&mut self.input),
        };
        let damaged = |sink: &str, path: &Path, what: String| SinkError::Inconsistent {
            sink: sink.to_owned(),
            path: path.display().to_string(),
            message: format!(
                "a staged epoch is damaged ({what}): its records cannot be delivered as they were staged; restore the file from a backup, or rerun with `--restore none`"
            ),
        };
        let batch = read.map_err(|e| match e {
            FrameError::Io(error) => io_error(&self.sink, &self.path)(error),
            damage @ (FrameError::Spans(_) | FrameError::Checksum) => {
                damaged(&self.sink, &self.path, damage.to_string())
            }
        })?;
        if let Some(frame) = batch.as_ref().filter(|b| b.is_empty()) {
            let signals = serde_json::from_slice(frame.parts().0)
                .map_err(|e| damaged(&self.sink, &self.path, format!("its signals: {e}")))?;
            self.signals = Some(signals);
            return Ok(None);
        }
        if batch.is_some() {
            if self.returned > 0 {
                failpoint::hit(Failpoint::SinkMidDelivery);
            }
            self.returned += 1;
        }
        Ok(batch)
    }

    /// The signals the epoch carries, once [`next_batch`](Self::next_batch)
    /// returned `None`: `None` when it heard none (or its destination
    /// carries none).
    pub fn signals(&self) -> Option<EpochSignals> {
        self.signals
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::connectors::sink::{commit_blocking, precommit_blocking};

    /// The signals each delivered epoch carried.
    type Heard = Vec<(u64, Option<EpochSignals>)>;

    /// A destination that keeps what it was given, and a `delivered` mark
    /// as a database would (`tracks`) or none as a log.
    #[derive(Clone, Default)]
    struct Memory {
        held: Arc<Mutex<Vec<(u64, String)>>>,
        mark: Arc<Mutex<Option<u64>>>,
        tracks: bool,
        fail: Arc<Mutex<bool>>,
        /// Whether it carries signals, and those each epoch carried.
        signals: bool,
        heard: Arc<Mutex<Heard>>,
    }

    impl Destination for Memory {
        fn delivered(&mut self) -> Result<Option<u64>, SinkError> {
            Ok(if self.tracks {
                Some(self.mark.lock().unwrap().unwrap_or(0))
            } else {
                None
            })
        }
        fn start_over(&mut self) -> Result<(), SinkError> {
            *self.mark.lock().unwrap() = None;
            Ok(())
        }
        fn deliver(&mut self, id: u64, epoch: &mut EpochReader) -> Result<(), SinkError> {
            if *self.fail.lock().unwrap() {
                return Err(SinkError::Inconsistent {
                    sink: "s".into(),
                    path: "memory".into(),
                    message: "refused".into(),
                });
            }
            let mut held = self.held.lock().unwrap();
            if !self.tracks && held.iter().any(|(k, _)| *k == id) {
                return Ok(()); // a log drops what it already has
            }
            while let Some(batch) = epoch.next_batch()? {
                for r in batch.iter() {
                    held.push((id, String::from_utf8(r.value.to_vec()).unwrap()));
                }
            }
            self.heard.lock().unwrap().push((id, epoch.signals()));
            *self.mark.lock().unwrap() = Some(id);
            Ok(())
        }
        fn carries_signals(&self) -> bool {
            self.signals
        }
    }

    fn batch(values: &[&str]) -> Batch {
        let mut b = Batch::new();
        for v in values {
            b.push(Some(v.as_bytes()), v.as_bytes(), Some(7));
        }
        b
    }

    fn held(m: &Memory) -> Vec<String> {
        m.held
            .lock()
            .unwrap()
            .iter()
            .map(|(_, v)| v.clone())
            .collect()
    }

    #[test]
    fn epochs_reach_the_destination_only_at_commit_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let m = Memory::default();
        let mut s = StagedSink::open("s", dir.path(), None, Box::new(m.clone())).unwrap();
        s.write(&batch(&["a", "b"])).unwrap();
        s.write(&batch(&["c"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        s.write(&batch(&["d"])).unwrap();
        precommit_blocking(&mut s, 2).unwrap();
        assert!(held(&m).is_empty());
        commit_blocking(&mut s, 2).unwrap();
        assert_eq!(held(&m), ["a", "b", "c", "d"]);
        let ids: Vec<u64> = m.held.lock().unwrap().iter().map(|(k, _)| *k).collect();
        assert_eq!(ids, [1, 1, 1, 2]);
        assert_eq!(staged_epochs("s", dir.path()).unwrap().len(), 0);
    }

    /// A destination that carries signals gets, with each epoch, the
    /// latest watermark, idleness and end its sink heard by then (records
    /// clear idleness); one that does not gets none, and epochs without
    /// any signal carry none.
    #[test]
    fn epochs_carry_the_signals_heard_until_their_end() {
        for carries in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let m = Memory {
                signals: carries,
                ..Memory::default()
            };
            let mut s = StagedSink::open("s", dir.path(), None, Box::new(m.clone())).unwrap();
            s.write(&batch(&["a"])).unwrap();
            precommit_blocking(&mut s, 1).unwrap();
            s.signal(Signal::Watermark(5)).unwrap();
            s.write(&batch(&["b"])).unwrap();
            s.signal(Signal::Watermark(9)).unwrap();
            precommit_blocking(&mut s, 2).unwrap();
            s.signal(Signal::Idle).unwrap();
            precommit_blocking(&mut s, 3).unwrap();
            s.write(&batch(&["c"])).unwrap();
            s.signal(Signal::End).unwrap();
            precommit_blocking(&mut s, 4).unwrap();
            commit_blocking(&mut s, 4).unwrap();
            assert_eq!(held(&m), ["a", "b", "c"]);
            let at = |watermark, idle, end| {
                carries.then_some(EpochSignals {
                    watermark: Some(watermark),
                    idle,
                    end,
                })
            };
            assert_eq!(
                *m.heard.lock().unwrap(),
                [
                    (1, None),
                    (2, at(9, false, false)),
                    (3, at(9, true, false)),
                    (4, at(9, false, true)),
                ]
            );
        }
    }

    /// A crash after checkpoint 2 completed but before its delivery: the
    /// restore delivers it (and only what the destination lacks), and drops
    /// checkpoint 3's staged output, which never completed.
    #[test]
    fn a_restore_delivers_completed_epochs_the_destination_lacks() {
        for tracks in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let m = Memory {
                tracks,
                ..Memory::default()
            };
            let mut s = StagedSink::open("s", dir.path(), None, Box::new(m.clone())).unwrap();
            s.write(&batch(&["a"])).unwrap();
            precommit_blocking(&mut s, 1).unwrap();
            commit_blocking(&mut s, 1).unwrap();
            s.write(&batch(&["b"])).unwrap();
            precommit_blocking(&mut s, 2).unwrap();
            s.write(&batch(&["c"])).unwrap();
            precommit_blocking(&mut s, 3).unwrap();
            s.write(&batch(&["d"])).unwrap();
            std::mem::forget(s); // the crash: nothing more happens

            let info = json!({"checkpoint": 2});
            let s = StagedSink::open("s", dir.path(), Some(&info), Box::new(m.clone())).unwrap();
            drop(s);
            assert_eq!(held(&m), ["a", "b"], "tracks {tracks}");
            assert_eq!(staged_epochs("s", dir.path()).unwrap().len(), 0);
            // Restoring the same checkpoint again changes nothing.
            StagedSink::open("s", dir.path(), Some(&info), Box::new(m.clone())).unwrap();
            assert_eq!(held(&m), ["a", "b"], "tracks {tracks}");
        }
    }

    #[test]
    fn a_destination_ahead_of_the_restored_checkpoint_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let m = Memory {
            tracks: true,
            ..Memory::default()
        };
        *m.mark.lock().unwrap() = Some(5);
        let info = json!({"checkpoint": 3});
        let err = StagedSink::open("s", dir.path(), Some(&info), Box::new(m))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("checkpoint 5") && err.contains("--restore none"),
            "{err}"
        );
    }

    /// A failed delivery keeps the epoch staged, so the restore that
    /// follows the failure delivers it.
    #[test]
    fn a_failed_delivery_keeps_the_epoch_for_the_restore() {
        let dir = tempfile::tempdir().unwrap();
        let m = Memory {
            tracks: true,
            ..Memory::default()
        };
        let mut s = StagedSink::open("s", dir.path(), None, Box::new(m.clone())).unwrap();
        s.write(&batch(&["a"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        *m.fail.lock().unwrap() = true;
        assert!(commit_blocking(&mut s, 1).is_err());
        drop(s);
        *m.fail.lock().unwrap() = false;
        let info = json!({"checkpoint": 1});
        drop(StagedSink::open("s", dir.path(), Some(&info), Box::new(m.clone())).unwrap());
        assert_eq!(held(&m), ["a"]);
    }

    #[test]
    fn records_come_back_with_their_keys_and_timestamps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.open");
        let b = batch(&["x", "yy"]);
        // As this Weir stages (checked frames), and as one before checksums.
        let staged = |checked: bool| {
            let mut out = BufWriter::new(File::create(&path).unwrap());
            if checked {
                out.write_all(&MAGIC).unwrap();
                frame::write_checked(&mut out, &b).unwrap();
                frame::write_checked(&mut out, &b).unwrap();
            } else {
                frame::write(&mut out, &b).unwrap();
                frame::write(&mut out, &b).unwrap();
            }
        };
        for checked in [true, false] {
            staged(checked);
            let mut r = EpochReader::open("s", &path).unwrap();
            assert_eq!(r.checked, checked);
            for _ in 0..2 {
                let back = r.next_batch().unwrap().unwrap();
                assert_eq!(back.to_records(), b.to_records());
            }
            assert!(r.next_batch().unwrap().is_none());
        }
    }

    /// A changed bit anywhere in a staged epoch is an error naming the
    /// file, never a record delivered differently.
    #[test]
    fn a_changed_bit_in_a_staged_epoch_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let m = Memory::default();
        let mut s = StagedSink::open("s", dir.path(), None, Box::new(m.clone())).unwrap();
        s.write(&batch(&["a", "bb"])).unwrap();
        precommit_blocking(&mut s, 1).unwrap();
        std::mem::forget(s); // a crash before the commit: the epoch stays
        let path = dir.path().join("1.epoch");
        let good = std::fs::read(&path).unwrap();
        for at in MAGIC.len()..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[at] ^= 1 << bit;
                std::fs::write(&path, &bad).unwrap();
                let mut r = EpochReader::open("s", &path).unwrap();
                let mut read = || -> Result<(), SinkError> {
                    while r.next_batch()?.is_some() {}
                    Ok(())
                };
                let e = read().expect_err("a changed bit must not deliver");
                assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            }
        }
    }
}
