//! Direct writes (`write = "direct"` on a Kafka sink, worker mode only):
//! records are produced into a Kafka transaction as they arrive, and the
//! task's commit point commits that transaction with the task's anchor
//! offset in it (`send_offsets_to_transaction`). Kafka holds the output
//! until then, replicated; nothing crosses the object store, and output
//! is visible as soon as its checkpoint is committed.
//!
//! Each task has two transactional ids, `weir-<job>@<task>#a` and `#b`
//! ([`TaskTransactions`]), shared by every direct sink of the task: epoch
//! *k* of an attempt (its *k*-th checkpoint's output) is written in the
//! transaction of producer *k mod 2*, so the sinks write epoch *k + 1*
//! while checkpoint *k* is stored, uploaded and committed.
//!
//! Invariants:
//! - Checkpoint *n* becomes visible exactly when it is committed: its
//!   transaction holds its records and the commit point (the anchor
//!   offset with metadata `weir:<n>`), and commits both together. The
//!   group coordinator checks the member's generation inside the
//!   transaction, so a worker that lost the task cannot commit.
//! - Before a task restores, both ids are fenced (`init_transactions`):
//!   whatever an earlier owner or attempt left open is aborted (its
//!   checkpoint was not committed, and is dropped by the restore), what it
//!   was committing completes. Only then is the committed checkpoint read.
//! - A producer begins epoch *k + 2* only once epoch *k* is committed: at
//!   most two transactions of a task are open, one per id.
//! - A transaction that must be aborted (a rebalance changed the group's
//!   generation while the commit was made, a delivery failed) ends the
//!   attempt: the task restores its last committed checkpoint and its
//!   sources read the aborted epoch's input again.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use rdkafka::TopicPartitionList;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, Producer};
use serde_json::{Value, json};
use weir::cluster::CommitRefused;
use weir::connectors::sink::{Done, Sink, SinkError};
use weir::dataflow::Batch;
use weir::failpoint::{self, Failpoint};

use super::client::{ClientSettings, Context, TIMEOUT};
use super::sink::COMMIT_TIMEOUT;
use super::writer::Writer;

/// The commit info a direct sink records: what a restore tells apart from
/// a staged sink's.
const DIRECT: &str = "direct";

/// The two transactions of one task, and where its epochs stand.
pub struct TaskTransactions {
    /// `<base>#a` and `<base>#b`.
    ids: [String; 2],
    producers: [BaseProducer<Context>; 2],
    slots: Mutex<Slots>,
    /// Signalled when a transaction is committed or the transactions
    /// break.
    changed: Condvar,
}

/// Where the two transactions stand.
#[derive(Default)]
struct Slots {
    /// Per producer: the epoch its open transaction holds, if one is open.
    open: [Option<u64>; 2],
    /// Checkpoints precommitted and not committed yet: the producer
    /// holding each, and whether its offsets are in the transaction.
    sealed: BTreeMap<u64, Sealed>,
    /// Why the transactions cannot be used any more (an abort, a fence).
    broken: Option<String>,
}

/// A checkpoint's transaction, precommitted.
#[derive(Debug, Clone, Copy)]
struct Sealed {
    slot: usize,
    offsets_sent: bool,
}

impl std::fmt::Debug for TaskTransactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TaskTransactions({})", self.ids[0])
    }
}

impl TaskTransactions {
    /// Opens producers `<base>#a` and `<base>#b` on `client`'s cluster and
    /// fences every earlier producer of those ids.
    pub(super) fn open(client: &ClientSettings, base: &str) -> Result<Arc<Self>, String> {
        let ids = [format!("{base}#a"), format!("{base}#b")];
        let open = |id: &String| -> Result<BaseProducer<Context>, String> {
            let producer: BaseProducer<Context> = client
                .config(
                    id,
                    &[
                        ("partitioner", "murmur2_random"),
                        ("linger.ms", "5"),
                        ("transactional.id", id),
                    ],
                )
                .create_with_context(Context::new(format!("transactions `{id}`")))
                .map_err(|e| format!("cannot create the Kafka producer `{id}`: {e}"))?;
            producer.init_transactions(TIMEOUT).map_err(|e| {
                format!(
                    "cannot start transactions as `{id}` ({e}); the cluster must support transactions (Kafka 0.11+, a transaction state log with enough replicas)"
                )
            })?;
            producer.context().opened();
            Ok(producer)
        };
        let producers = [open(&ids[0])?, open(&ids[1])?];
        Ok(Arc::new(TaskTransactions {
            ids,
            producers,
            slots: Mutex::new(Slots::default()),
            changed: Condvar::new(),
        }))
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The producer of epoch `epoch`, its transaction begun: waits (up to
    /// [`COMMIT_TIMEOUT`]) until that producer's transaction of epoch
    /// `epoch - 2` is committed. Every direct sink of the task calls it
    /// for each of its epochs; the first call begins the transaction.
    fn begin(&self, epoch: u64) -> Result<&BaseProducer<Context>, String> {
        let slot = (epoch % 2) as usize;
        let deadline = Instant::now() + COMMIT_TIMEOUT;
        let mut slots = self.slots();
        loop {
            if let Some(why) = &slots.broken {
                return Err(why.clone());
            }
            match slots.open[slot] {
                Some(e) if e == epoch => return Ok(&self.producers[slot]),
                None => break,
                Some(older) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(format!(
                            "the transaction of epoch {older} (`{}`) was not committed within {} s, so epoch {epoch} cannot begin; is the checkpoint stuck?",
                            self.ids[slot],
                            COMMIT_TIMEOUT.as_secs()
                        ));
                    }
                    slots = (self.changed.wait_timeout(slots, deadline - now))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
        (self.producers[slot].begin_transaction())
            .map_err(|e| format!("cannot begin a transaction as `{}`: {e}", self.ids[slot]))?;
        slots.open[slot] = Some(epoch);
        Ok(&self.producers[slot])
    }

    /// Records that epoch `epoch`, begun, is checkpoint `id`'s output.
    fn seal(&self, epoch: u64, id: u64) {
        let slot = (epoch % 2) as usize;
        let mut slots = self.slots();
        debug_assert_eq!(slots.open[slot], Some(epoch), "sealed before begun");
        (slots.sealed.entry(id)).or_insert(Sealed {
            slot,
            offsets_sent: false,
        });
    }

    /// Whether checkpoint `id` is committed (no longer sealed), with the
    /// transactions whole.
    fn committed(&self, id: u64) -> Result<bool, String> {
        let slots = self.slots();
        match &slots.broken {
            Some(why) => Err(why.clone()),
            None => Ok(!slots.sealed.contains_key(&id)),
        }
    }

    /// The commit point of checkpoint `id`: sends `offsets` (the anchor's,
    /// with metadata `weir:<id>`) as the group `group`'s into `id`'s
    /// transaction and commits it. A retriable failure is
    /// [`CommitRefused::Busy`] (the next try goes on where this one
    /// stopped); any other aborts the transaction and breaks the
    /// transactions ([`CommitRefused::Fenced`]): the attempt ends.
    pub(super) fn commit(
        &self,
        id: u64,
        offsets: &TopicPartitionList,
        group: &ConsumerGroupMetadata,
    ) -> Result<(), CommitRefused> {
        let sealed = {
            let slots = self.slots();
            if let Some(why) = &slots.broken {
                return Err(CommitRefused::Fenced(why.clone()));
            }
            let Some(&sealed) = slots.sealed.get(&id) else {
                return Err(CommitRefused::Fenced(format!(
                    "checkpoint {id} has no open transaction: its sinks wrote no epoch for it"
                )));
            };
            if let Some((&older, _)) = slots.sealed.range(..id).next() {
                return Err(CommitRefused::Fenced(format!(
                    "checkpoint {older}'s transaction is not committed, and checkpoints commit in order"
                )));
            }
            sealed
        };
        // The lock is not held while the cluster answers: the sinks go on
        // writing the next epoch into the other transaction.
        let producer = &self.producers[sealed.slot];
        if !sealed.offsets_sent {
            let sent = producer.send_offsets_to_transaction(offsets, group, TIMEOUT);
            self.settle(sealed.slot, "sending the commit point", sent)?;
            if let Some(s) = self.slots().sealed.get_mut(&id) {
                s.offsets_sent = true;
            }
            failpoint::hit(Failpoint::CheckpointMidCommitPoint);
        }
        let done = producer.commit_transaction(COMMIT_TIMEOUT);
        self.settle(sealed.slot, "committing", done)?;
        tracing::debug!(
            "transactions `{}`: checkpoint {id} committed",
            self.ids[sealed.slot]
        );
        let mut slots = self.slots();
        slots.sealed.remove(&id);
        slots.open[sealed.slot] = None;
        self.changed.notify_all();
        Ok(())
    }

    /// `result` of a transaction step `what` on producer `slot`, as a
    /// commit point's outcome: a failure that needs an abort aborts and
    /// breaks the transactions.
    fn settle(
        &self,
        slot: usize,
        what: &str,
        result: Result<(), KafkaError>,
    ) -> Result<(), CommitRefused> {
        let Err(error) = result else {
            return Ok(());
        };
        let said = format!("transactions `{}`: {what}: {error}", self.ids[slot]);
        if let KafkaError::Transaction(e) = &error
            && e.is_retriable()
        {
            return Err(CommitRefused::Busy(said));
        }
        // Best effort: a fenced or fatal producer cannot abort, and the
        // next owner's fence aborts what is left open.
        let _ = self.producers[slot].abort_transaction(TIMEOUT);
        let why = format!(
            "{said}; the transaction is aborted (a rebalance or another owner of the task fenced it): the task restores its last committed checkpoint"
        );
        self.slots().broken = Some(why.clone());
        self.changed.notify_all();
        Err(CommitRefused::Fenced(why))
    }
}

/// An exactly-once Kafka sink that writes into its task's transactions.
pub(super) struct DirectSink {
    pub(super) sink: String,
    pub(super) target: String,
    pub(super) transactions: Arc<TaskTransactions>,
    pub(super) writer: Writer,
    /// The epoch being written: counted from 0 per attempt, alike in every
    /// direct sink of the task (each precommits every checkpoint).
    pub(super) epoch: u64,
}

impl DirectSink {
    fn error(&self, message: String) -> SinkError {
        SinkError::Remote {
            sink: self.sink.clone(),
            target: self.target.clone(),
            message,
        }
    }

    /// The producer of the current epoch, its transaction begun.
    fn producer(&self) -> Result<&BaseProducer<Context>, SinkError> {
        (self.transactions.begin(self.epoch)).map_err(|m| self.error(m))
    }

    /// A delivery failure `producer` reported, as an error.
    fn check(&self, producer: &BaseProducer<Context>) -> Result<(), SinkError> {
        match producer.context().take_failure() {
            None => Ok(()),
            Some(m) => Err(self.error(format!("delivery failed: {m}"))),
        }
    }

    /// The commit info of checkpoint `id`.
    pub(super) fn info(id: u64) -> Value {
        json!({ "checkpoint": id, "write": DIRECT })
    }

    /// Whether `info` (a checkpoint's commit info of a Kafka sink) was
    /// recorded by a direct sink.
    pub(super) fn wrote(info: &Value) -> bool {
        info.get("write").and_then(Value::as_str) == Some(DIRECT)
    }
}

impl Sink for DirectSink {
    fn refuse(&mut self, batch: &Batch) -> Vec<(usize, String)> {
        self.writer.refused(batch)
    }

    fn write(&mut self, batch: &Batch) -> Result<(), SinkError> {
        if batch.is_empty() {
            return Ok(());
        }
        let producer = self.producer()?;
        (self.writer.produce(producer, batch))
            .map_err(|e| self.error(format!("producing failed: {e}")))?;
        self.check(producer)
    }

    fn precommit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        let producer = self.producer()?;
        (producer.flush(COMMIT_TIMEOUT))
            .map_err(|e| self.error(format!("waiting for deliveries failed: {e}")))?;
        self.check(producer)?;
        self.transactions.seal(self.epoch, id);
        self.epoch += 1;
        done(Ok(DirectSink::info(id)));
        Ok(())
    }

    fn commit(&mut self, id: u64, done: Done) -> Result<(), SinkError> {
        match self.transactions.committed(id) {
            Ok(true) => {
                done(Ok(Value::Null));
                Ok(())
            }
            Ok(false) => Err(self.error(format!(
                "checkpoint {id} is delivered before its transaction is committed: a bug"
            ))),
            Err(why) => Err(self.error(why)),
        }
    }
}
