//! The driver of an attempt, on the calling thread: feeds the threads'
//! events to the [`Coordinator`] and carries out its decisions: sends
//! commands to the sources, persists each completed checkpoint, tells the
//! sinks to commit it, takes stop and swap requests ([`Driver::drive`]).
//!
//! Invariants:
//! - A completed checkpoint is written, with all its state deltas, in one
//!   store transaction ([`CheckpointStore::commit`]) before any sink is
//!   told to commit it: output never becomes visible for a checkpoint that
//!   does not exist. With an object store, the sinks are told only once
//!   its manifest exists there, and no checkpoint is triggered meanwhile;
//!   with a [`CommitPoint`], only once it is committed there too.
//! - A stop or a swap ends the attempt only after a checkpoint taken for it
//!   is committed by every sink; the end of input only after the final
//!   checkpoint is.
//! - At most one stop, swap or savepoint is pending at a time; a swap is
//!   refused while an earlier one is on probation.
//! - A savepoint is written from a checkpoint triggered after its request
//!   (with `--stop`: the checkpoint the job stops at), once every sink
//!   committed it, and no checkpoint is triggered meanwhile (so garbage
//!   collection cannot drop it first).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::checkpoint::coordinator::{Completed, Coordinator, Participant};
use crate::config::Job;
use crate::dataflow::cancel::POLL;
use crate::dataflow::protocol::{Command, Event, SourceCtl};
use crate::failpoint::{self, Failpoint};
use crate::metrics::{CheckpointRecord, JobMetrics};
use crate::plan::{NodeKind, Plan};
use crate::remote::{RemoteStore, Replica};
use crate::run::commit_point::CommitPoint;
use crate::run::control::ControlRequest;
use crate::run::error::RunError;
use crate::run::kept::{Kept, operators_meta};
use crate::run::restore::RestorePoint;
use crate::run::savepoint::{CopyOut, SavepointRequest, tempfile_dir};
use crate::run::swap::{Probation, SwapRequest};
use crate::run::wiring::DriverEnds;
use crate::store::{CheckpointMeta, CheckpointStore, CommitStats, OperatorMeta};
use crate::time::unix_ms;

/// What the driver did, once it returned.
pub(crate) struct Driven {
    /// Checkpoints completed.
    pub checkpoints: u64,
    /// The last completed checkpoint.
    pub last: Option<u64>,
    /// The final checkpoint was committed (end of input).
    pub finished: bool,
    /// A swap waiting for the attempt to end at `last`.
    pub swap: Option<SwapRequest>,
}

/// The coordinator loop's I/O.
pub(crate) struct Driver<'a> {
    plan: &'a Plan<'a>,
    job: &'a Job,
    store: &'a CheckpointStore,
    coordinator: Coordinator,
    channels: DriverEnds,
    operators_meta: BTreeMap<String, OperatorMeta>,
    metrics: &'a JobMetrics,
    control: Option<&'a Receiver<ControlRequest>>,
    /// A swap waiting for its checkpoint.
    pending_swap: Option<SwapRequest>,
    /// A savepoint waiting for its checkpoint and that checkpoint's commits.
    pending_savepoint: Option<PendingSavepoint>,
    state_dir: &'a std::path::Path,
    probation: Option<&'a mut Probation>,
    checkpoints: u64,
    last: Option<u64>,
    /// A checkpoint whose sink commits end the run (final or stop).
    awaiting_commit: Option<u64>,
    committed: usize,
    finished: bool,
    /// The copy of checkpoints to the object store, if the job has one.
    replica: Option<Replica>,
    /// The checkpoints being copied there, oldest first, each released to
    /// the sinks once it is.
    uploading: VecDeque<Completed>,
    /// Savepoints being copied to an object store.
    copies: Vec<std::thread::JoinHandle<()>>,
    /// The source offsets of the stored checkpoints, oldest first, from
    /// the oldest a restore may still pick ([`Driver::release_inputs`]).
    restorable: VecDeque<(u64, BTreeMap<String, serde_json::Value>)>,
    /// What commits each checkpoint before the sinks deliver it, if
    /// anything does.
    commit_point: Option<std::sync::Arc<dyn CommitPoint>>,
}

impl Drop for Driver<'_> {
    /// Waits for the savepoints still being copied: their requests are
    /// answered before the attempt ends.
    fn drop(&mut self) {
        for copy in self.copies.drain(..) {
            let _ = copy.join();
        }
    }
}

impl<'a> Driver<'a> {
    /// A driver of `plan` (its operators in `kept` swapped in) over
    /// `channels`, storing into `at`'s store with checkpoint ids from
    /// `at.first_id` on.
    pub(crate) fn new(
        (plan, kept): (&'a Plan<'a>, &Kept),
        at: &'a RestorePoint,
        channels: DriverEnds,
        metrics: &'a JobMetrics,
        control: Option<&'a Receiver<ControlRequest>>,
        probation: Option<&'a mut Probation>,
    ) -> Self {
        let job = plan.job();
        Driver {
            plan,
            job,
            store: &at.store,
            coordinator: Coordinator::new(participants(plan), job.checkpoint.interval, at.first_id),
            channels,
            operators_meta: operators_meta(plan, kept),
            metrics,
            control,
            pending_swap: None,
            pending_savepoint: None,
            state_dir: &at.state_dir,
            probation,
            checkpoints: 0,
            last: None,
            awaiting_commit: None,
            committed: 0,
            finished: false,
            replica: None,
            uploading: VecDeque::new(),
            copies: Vec::new(),
            // A list that cannot be read only delays the first release.
            restorable: (at.store.list().unwrap_or_default().into_iter())
                .map(|m| (m.id, m.sources))
                .collect(),
            commit_point: None,
        }
    }

    /// The driver, committing every checkpoint with `point` before the
    /// sinks deliver it.
    pub(crate) fn committing(mut self, point: Option<std::sync::Arc<dyn CommitPoint>>) -> Self {
        self.commit_point = point;
        self
    }

    /// The driver, copying every checkpoint with `replica` before the
    /// sinks commit it.
    pub(crate) fn replicating(mut self, replica: Option<Replica>) -> Self {
        self.replica = replica;
        self
    }

    /// Releases the oldest checkpoint being copied to the object store once
    /// its manifest exists; an upload that failed for good fails the
    /// attempt.
    fn poll_upload(&mut self) -> Result<(), RunError> {
        let Some(replica) = &self.replica else {
            return Ok(());
        };
        if self.uploading.is_empty() {
            return Ok(());
        }
        match replica.done().try_recv() {
            Ok(Ok(id)) => {
                let done = self.uploading.pop_front().expect("checked above");
                debug_assert_eq!(done.id, id);
                tracing::debug!("checkpoint {id} is in the object store");
                self.release(done)
            }
            Ok(Err(e)) => Err(e.into()),
            Err(crossbeam_channel::TryRecvError::Empty) => Ok(()),
            Err(crossbeam_channel::TryRecvError::Disconnected) => Err(RunError::Panicked(
                "the thread uploading checkpoints exited unexpectedly".into(),
            )),
        }
    }

    /// Drives the attempt until every sink committed the checkpoint that
    /// ends it, or a thread failed.
    pub(crate) fn drive(&mut self, shutdown: &AtomicBool) -> Result<(), RunError> {
        loop {
            let now = Instant::now();
            if shutdown.load(Ordering::Relaxed)
                && !self.coordinator.stop_requested()
                && self.awaiting_commit.is_none()
            {
                tracing::info!("stop requested: taking a checkpoint");
                let cmd = self.coordinator.request_stop(now);
                self.command(cmd);
            }
            match self.control.and_then(|c| c.try_recv().ok()) {
                Some(ControlRequest::Swap(req)) => self.swap_requested(req, now),
                Some(ControlRequest::Savepoint(req)) => self.savepoint_requested(req, now),
                None => {}
            }
            self.poll_upload()?;
            if !self.savepoint_committing() && self.uploading.is_empty() {
                let cmd = self.coordinator.tick(now);
                self.command(cmd);
            }
            let wait = self.coordinator.next_due(now).unwrap_or(POLL).min(POLL);
            match self.channels.events.recv_timeout(wait) {
                Ok(Event::Ack(id, ack)) => {
                    let (done, next) = self.coordinator.on_ack(id, ack, Instant::now());
                    if let Some(done) = done {
                        self.persist(done)?;
                    }
                    self.command(next);
                }
                Ok(Event::SourceAtEnd(s)) => {
                    let cmd = self.coordinator.source_at_end(&s, now);
                    self.command(cmd);
                }
                Ok(Event::SinkCommitted(sink, id)) => {
                    tracing::debug!("sink `{sink}` committed checkpoint {id}");
                    if let Some(p) = self.probation.as_mut() {
                        p.sink_committed(&sink, id, self.channels.commits.len());
                    }
                    if let Some(p) = self.pending_savepoint.as_mut()
                        && p.checkpoint.is_some_and(|c| id >= c)
                    {
                        p.committed.insert(sink);
                    }
                    self.write_savepoint_when_committed();
                    if Some(id) >= self.awaiting_commit && self.awaiting_commit.is_some() {
                        self.committed += 1;
                        if self.committed == self.channels.commits.len() {
                            return Ok(());
                        }
                    }
                }
                Ok(Event::Failed(e)) => {
                    let e = RunError::from(e);
                    self.in_flight_failed(&e);
                    return Err(e);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    let e = RunError::Panicked("every job thread exited unexpectedly".into());
                    self.in_flight_failed(&e);
                    return Err(e);
                }
            }
        }
    }

    /// Records the checkpoint in flight, if any, as failed with `error`.
    fn in_flight_failed(&self, error: &RunError) {
        let Some((id, started, is_final)) = self.coordinator.in_flight_since() else {
            return;
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        self.checkpoint_failed(CheckpointRecord {
            id,
            started_at_ms: unix_ms(SystemTime::now()).saturating_sub(duration_ms),
            duration_ms,
            alignment_ms: 0,
            pause_ms: 0,
            bytes_written: 0,
            unaligned: false,
            inflight_bytes: 0,
            is_final,
            error: Some(format!(
                "the attempt failed while it was in flight: {error}"
            )),
        });
    }

    /// Journals a failed checkpoint, then counts it: a reader that sees the
    /// count (Acquire) finds the record in the journal.
    fn checkpoint_failed(&self, record: CheckpointRecord) {
        self.metrics.journal.checkpoint(record);
        let failed = &self.metrics.checkpoints.failed;
        failed.fetch_add(1, Ordering::Release);
    }

    /// What the drive did (taking the pending swap).
    pub(crate) fn driven(&mut self) -> Driven {
        Driven {
            checkpoints: self.checkpoints,
            last: self.last,
            finished: self.finished,
            swap: self.pending_swap.take(),
        }
    }

    fn command(&self, cmd: Option<Command>) {
        match cmd {
            Some(Command::Trigger(n)) => {
                tracing::debug!("triggering checkpoint {n}");
                for tx in self.channels.source_ctls.values() {
                    let _ = tx.send(SourceCtl::Trigger(n));
                }
            }
            Some(Command::Finish(n)) => {
                tracing::debug!("end of input: final checkpoint {n}");
                for tx in self.channels.source_ctls.values() {
                    let _ = tx.send(SourceCtl::Finish(n));
                }
            }
            None => {}
        }
    }

    /// Stores the completed checkpoint, then tells the sinks to commit it
    /// (once it is in the object store, if the job has one).
    fn persist(&mut self, mut done: Completed) -> Result<(), RunError> {
        let meta = self.checkpoint_meta(&mut done);
        let stats = self.store_checkpoint(&meta, &done)?;
        self.restorable.push_back((meta.id, meta.sources.clone()));
        self.completed(&meta, &done, &stats);
        if let Some(replica) = &mut self.replica {
            let retain = self.job.checkpoint.retain;
            replica.upload(self.store, meta.id, self.state_dir, retain)?;
            self.uploading.push_back(done);
            return Ok(());
        }
        self.release(done)
    }

    /// Commits the stored checkpoint `done` at the commit point, if there
    /// is one, then tells the sinks to deliver it, and whoever waits for
    /// it.
    fn release(&mut self, done: Completed) -> Result<(), RunError> {
        if let Some(point) = &self.commit_point {
            failpoint::hit(Failpoint::CheckpointBeforeCommitPoint);
            let sources = (self.restorable.iter().rev())
                .find(|(id, _)| *id == done.id)
                .map(|(_, sources)| sources)
                .expect("a stored checkpoint is restorable until a newer one is released");
            point
                .commit(done.id, sources)
                .map_err(|m| RunError::CommitPoint {
                    job: self.job.name.clone(),
                    message: format!("checkpoint {} is not committed: {m}", done.id),
                })?;
            tracing::debug!("checkpoint {} committed", done.id);
            failpoint::hit(Failpoint::CheckpointAfterCommitPoint);
        }
        for tx in self.channels.commits.values() {
            let _ = tx.send(done.id);
        }
        self.release_inputs(done.id);
        if let Some(p) = self.probation.as_mut() {
            p.checkpoint_completed(done.id, self.channels.commits.len());
        }
        // A stop ends at its checkpoint: the last one taken, none being
        // taken or copied to the object store after it.
        let last = self.uploading.is_empty() && self.coordinator.in_flight().is_none();
        if done.is_final || (self.coordinator.stop_requested() && last) {
            self.finished = done.is_final;
            self.awaiting_commit = Some(done.id);
        }
        self.savepoint_checkpoint(&done);
        Ok(())
    }

    /// Tells each source where the oldest checkpoint a restore may still
    /// pick stands, now that checkpoint `id` is complete (stored, and in
    /// the object store if the job has one): of the checkpoints up to
    /// `id`, the newest `retain` are kept. The input before it is never
    /// read again, and a source may drop it ([`SourceReader::release`]).
    ///
    /// [`SourceReader::release`]: crate::connectors::source::SourceReader::release
    fn release_inputs(&mut self, id: u64) {
        let retain = self.job.checkpoint.retain;
        let upto = self.restorable.iter().filter(|(c, _)| *c <= id).count();
        let Some(older) = upto.checked_sub(retain) else {
            return;
        };
        self.restorable.drain(..older);
        let (_, sources) = &self.restorable[0];
        for (node, tx) in &self.channels.source_ctls {
            if let Some(offset) = sources.get(self.plan.node(*node).name()) {
                let _ = tx.send(SourceCtl::Release(offset.clone()));
            }
        }
    }

    /// What the store records of the completed checkpoint `done` (taking
    /// its source offsets and sink commit infos).
    fn checkpoint_meta(&self, done: &mut Completed) -> CheckpointMeta {
        let inflight = done.deltas.iter().filter_map(|d| d.inflight.as_ref());
        let unaligned = inflight.clone().next().is_some();
        let inflight_bytes: u64 = inflight.map(|b| b.len() as u64).sum();
        CheckpointMeta {
            started_at_ms: unix_ms(SystemTime::now())
                .saturating_sub(done.started.elapsed().as_millis() as u64),
            duration_ms: done.started.elapsed().as_millis() as u64,
            alignment_ms: done.align.duration.as_millis() as u64,
            pause_ms: Some(done.pause.as_millis() as u64),
            sources: std::mem::take(&mut done.sources),
            operators: self.operators_meta.clone(),
            sinks: std::mem::take(&mut done.sinks),
            sink_types: (self.job.sinks.iter())
                .map(|s| (s.id.clone(), s.kind.to_owned()))
                .collect(),
            final_checkpoint: done.is_final,
            unaligned,
            inflight_bytes,
            ..CheckpointMeta::new(done.id, &self.job.name)
        }
    }

    /// Commits checkpoint `meta` with the deltas of `done` to the store,
    /// recording it as failed in the journal if that fails.
    fn store_checkpoint(
        &self,
        meta: &CheckpointMeta,
        done: &Completed,
    ) -> Result<CommitStats, RunError> {
        let stats = match (self.store).commit(meta, &done.deltas, self.job.checkpoint.retain) {
            Ok(stats) => stats,
            Err(e) => {
                self.checkpoint_failed(CheckpointRecord {
                    error: Some(format!("writing it failed: {e}")),
                    ..record(meta, done)
                });
                return Err(e.into());
            }
        };
        failpoint::hit(Failpoint::CheckpointAfterStoreCommit);
        if self.probation.as_ref().is_some_and(|p| p.ends_at(done.id)) {
            // The checkpoint records the swapped plugin; the swap is not
            // confirmed yet.
            failpoint::hit(Failpoint::SwapAfterRecord);
        }
        Ok(stats)
    }

    /// Records the stored checkpoint `meta`: the journal, the log, the
    /// metrics, and the driver's count.
    fn completed(&mut self, meta: &CheckpointMeta, done: &Completed, stats: &CommitStats) {
        self.metrics.journal.checkpoint(CheckpointRecord {
            bytes_written: stats.bytes_written,
            ..record(meta, done)
        });
        let (unaligned, inflight_bytes) = (meta.unaligned, meta.inflight_bytes);
        let mode = match unaligned {
            true => format!(", unaligned, {inflight_bytes} bytes in flight"),
            false => String::new(),
        };
        tracing::info!(
            "checkpoint {} complete in {} ms ({} bytes written, alignment {} ms, pause {} ms{mode})",
            done.id,
            meta.duration_ms,
            stats.bytes_written,
            meta.alignment_ms,
            done.pause.as_millis()
        );
        self.checkpoints += 1;
        self.last = Some(done.id);
        let c = &self.metrics.checkpoints;
        c.completed.fetch_add(1, Ordering::Release);
        c.last_id.store(done.id, Ordering::Relaxed);
        c.last_duration_ms
            .store(meta.duration_ms, Ordering::Relaxed);
        c.last_bytes.store(stats.bytes_written, Ordering::Relaxed);
        c.last_alignment_ms
            .store(meta.alignment_ms, Ordering::Relaxed);
        c.last_alignment_buffered_bytes
            .store(done.align.peak_bytes, Ordering::Relaxed);
        c.last_pause_ms
            .store(done.pause.as_millis() as u64, Ordering::Relaxed);
        c.unaligned.fetch_add(unaligned as u64, Ordering::Relaxed);
        c.inflight_bytes
            .fetch_add(inflight_bytes, Ordering::Relaxed);
        c.duration.observe(done.started.elapsed());
        c.alignment.observe(done.align.duration);
        c.pause.observe(done.pause);
    }

    /// Makes the stored checkpoint `done` the pending savepoint's, if it is
    /// the first after the request (or answers that the job finished first).
    fn savepoint_checkpoint(&mut self, done: &Completed) {
        if let Some(p) = self.pending_savepoint.as_mut()
            && p.checkpoint.is_none()
            && done.id >= p.after
        {
            if done.is_final {
                let p = self.pending_savepoint.take().expect("checked above");
                p.request.answer(Err(format!(
                    "the job reached the end of its input first (final checkpoint {}); a finished job has nothing to resume",
                    done.id
                )));
            } else {
                p.checkpoint = Some(done.id);
                self.write_savepoint_when_committed();
            }
        }
    }

    /// Whether a savepoint's checkpoint completed and waits for its sink
    /// commits (no new checkpoint is triggered then).
    fn savepoint_committing(&self) -> bool {
        self.pending_savepoint
            .as_ref()
            .is_some_and(|p| p.checkpoint.is_some())
    }

    /// A savepoint: checkpoint now (and stop after it with `stop`), then
    /// write it once every sink committed that checkpoint.
    fn savepoint_requested(&mut self, req: SavepointRequest, now: Instant) {
        if self.pending_savepoint.is_some()
            || self.pending_swap.is_some()
            || self.coordinator.stop_requested()
            || self.awaiting_commit.is_some()
        {
            let why =
                "the job is already stopping, swapping or taking a savepoint; retry in a moment";
            return req.answer(Err(why.into()));
        }
        tracing::info!(
            "savepoint requested{}: taking a checkpoint",
            if req.stop { " (then stopping)" } else { "" }
        );
        let after = savepoint_from(&self.coordinator, req.stop);
        let cmd = if req.stop {
            self.coordinator.request_stop(now)
        } else {
            self.coordinator.request_checkpoint(now)
        };
        self.pending_savepoint = Some(PendingSavepoint {
            request: req,
            after,
            checkpoint: None,
            committed: std::collections::BTreeSet::new(),
        });
        self.command(cmd);
    }

    /// Writes the pending savepoint once every sink committed its
    /// checkpoint, and answers its request.
    fn write_savepoint_when_committed(&mut self) {
        let ready = self.pending_savepoint.as_ref().is_some_and(|p| {
            p.checkpoint.is_some() && p.committed.len() >= self.channels.commits.len()
        });
        if !ready {
            return;
        }
        let p = self.pending_savepoint.take().expect("checked above");
        let id = p.checkpoint.expect("checked above");
        let dir =
            p.request.out.clone().unwrap_or_else(|| {
                (self.state_dir.join("savepoints")).join(format!("savepoint-{id}"))
            });
        let (stop, shown) = (p.request.stop, dir.display().to_string());
        let written = move |()| {
            let then = if stop { "; the job stops" } else { "" };
            let message = format!("savepoint of checkpoint {id} written to {shown}{then}");
            tracing::info!(target: crate::NOTICE, "{message}");
            message
        };
        match self.write_savepoint(id, &dir) {
            Ok(None) => p.request.answer(Ok(written(()))),
            Err(e) => p.request.answer(Err(e)),
            Ok(Some(copy)) => {
                // Copied to the object store off this thread; the attempt
                // waits for it before it ends (`Drop`).
                let request = p.request;
                let thread = std::thread::Builder::new()
                    .name("savepoint-copy".into())
                    .spawn(move || request.answer(copy().map(written)))
                    .expect("spawning the savepoint copy thread");
                self.copies.push(thread);
            }
        }
    }

    /// Writes the savepoint of checkpoint `id` to `dir`, a folder; or, for
    /// an object store's URL, to a temporary folder, and returns what
    /// copies it there (with the credentials of the environment, and the
    /// job's `store_options` for a URL of its store's scheme) and deletes
    /// the folder.
    fn write_savepoint(&self, id: u64, dir: &std::path::Path) -> Result<Option<CopyOut>, String> {
        let Some(url) = dir.to_str().filter(|d| crate::config::is_url(d)) else {
            let written = self.store.write_savepoint(id, dir);
            return written.map(|_| None).map_err(|e| e.to_string());
        };
        let checkpoint = &self.job.checkpoint;
        let same_scheme = |store: &String| store.split("://").next() == url.split("://").next();
        let options = match checkpoint.store.as_ref().is_some_and(same_scheme) {
            true => checkpoint.store_options.clone(),
            false => BTreeMap::new(),
        };
        let remote = RemoteStore::open(url, &options).map_err(|e| e.to_string())?;
        let local = tempfile_dir(self.state_dir).map_err(|e| e.to_string())?;
        if let Err(e) = self.store.write_savepoint(id, &local.join("savepoint")) {
            let _ = std::fs::remove_dir_all(&local);
            return Err(e.to_string());
        }
        Ok(Some(Box::new(move || {
            let copied = remote.put_tree(&local.join("savepoint"));
            let _ = std::fs::remove_dir_all(&local);
            copied.map(|_| ()).map_err(|e| e.to_string())
        })))
    }

    /// A live swap: checkpoint now, then end the attempt so that the
    /// supervisor restarts from that checkpoint with the new plugin.
    fn swap_requested(&mut self, req: SwapRequest, now: Instant) {
        let found = self
            .plan
            .find(&req.operator)
            .map(|id| self.plan.node(id).kind());
        if found != Some(NodeKind::Operator) {
            let ids: Vec<&str> = self.plan.operators().map(|o| o.name()).collect();
            let why = format!(
                "job `{}` has no operator `{}` (it has: {})",
                self.job.name,
                req.operator,
                ids.join(", ")
            );
            return req.refuse(why);
        }
        if self.pending_swap.is_some()
            || self.coordinator.stop_requested()
            || self.awaiting_commit.is_some()
        {
            return req.refuse("the job is already stopping or swapping; retry in a moment".into());
        }
        if self.probation.as_ref().is_some_and(|p| p.pending()) {
            return req.refuse(
                "the previous swap is still on probation; retry once every sink delivered its first checkpoint".into(),
            );
        }
        tracing::info!("swap of `{}` requested: taking a checkpoint", req.operator);
        self.pending_swap = Some(req);
        let cmd = self.coordinator.request_stop(now);
        self.command(cmd);
    }
}

/// The journal's record of checkpoint `meta`, completed as `done`, before
/// it is written.
fn record(meta: &CheckpointMeta, done: &Completed) -> CheckpointRecord {
    CheckpointRecord {
        id: done.id,
        started_at_ms: meta.started_at_ms,
        duration_ms: meta.duration_ms,
        alignment_ms: meta.alignment_ms,
        pause_ms: done.pause.as_millis() as u64,
        bytes_written: 0,
        unaligned: meta.unaligned,
        inflight_bytes: meta.inflight_bytes,
        is_final: done.is_final,
        error: None,
    }
}

/// The first checkpoint id a savepoint requested now may be written from:
/// with `stop`, the checkpoint the job stops at, which is the one in
/// flight if there is one (the stop waits for it and takes no other);
/// otherwise the next one triggered, which starts after the request.
fn savepoint_from(coordinator: &Coordinator, stop: bool) -> u64 {
    match coordinator.in_flight() {
        Some(id) if stop => id,
        _ => coordinator.next_id(),
    }
}

/// A savepoint request and its progress.
struct PendingSavepoint {
    request: SavepointRequest,
    /// The first checkpoint id it may use (triggered after the request).
    after: u64,
    /// The completed checkpoint it uses.
    checkpoint: Option<u64>,
    /// The sinks that committed it.
    committed: std::collections::BTreeSet<String>,
}

/// Every participant of a checkpoint of `plan`, by id: each source, each
/// operator instance, each sink.
fn participants<'p>(plan: &'p Plan<'_>) -> impl Iterator<Item = Participant> + 'p {
    plan.instances().map(|i| {
        let name = plan.node(i.node).name().to_string();
        match plan.node(i.node).kind() {
            NodeKind::Source => Participant::Source(name),
            NodeKind::Operator => Participant::Instance(name, i.index),
            NodeKind::Sink => Participant::Sink(name),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::coordinator::Participant;

    /// A stop-with-savepoint requested while a checkpoint is in flight is
    /// written from that checkpoint, the one the job stops at; a savepoint
    /// that goes on waits for the next one.
    #[test]
    fn a_stop_savepoint_uses_the_checkpoint_in_flight() {
        let parts = [Participant::Source("s".into())];
        let mut c = Coordinator::new(parts, Some(std::time::Duration::ZERO), 5);
        assert_eq!(savepoint_from(&c, true), 5, "nothing in flight");
        assert_eq!(c.tick(Instant::now()), Some(Command::Trigger(5)));
        assert_eq!(savepoint_from(&c, true), 5);
        assert_eq!(savepoint_from(&c, false), 6);
    }
}
