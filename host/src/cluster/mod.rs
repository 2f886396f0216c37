//! Worker mode (`weir run --worker`): the same job file started in several
//! processes, on one machine or many, runs as one job. The Kafka cluster
//! is the coordinator: the job is cut into **stages** at its repartition
//! edges (`stages.rs`), the workers join one consumer group per stage on
//! the stage's anchor topic, and being assigned partition *p* of stage *s*
//! means owning **task** `s-p`: the stage restricted to partition *p* of
//! every Kafka topic it reads, with its own state directory, its own
//! prefix in the object store and its own sink identities. Stages meet
//! through Kafka topics partitioned by key, which carry event time and the
//! end of input as control records.
//!
//! - [`WorkerStage`] (`stages.rs`): the cut, and each repartition edge's
//!   topic ([`Crossing`]).
//! - [`WorkerJob`] (`worker_job.rs`): the job file as worker mode reads it,
//!   the checks it must pass, and each task's job ([`WorkerJob::task_job`]).
//! - [`Worker`] (`worker.rs`): the tasks this process owns, started when
//!   the group assigns their partitions and handed over (a checkpoint, then
//!   stop) when it revokes them; [`Worker::run`] drives a [`Membership`].
//!
//! A job whose sources are all NATS streams (each one position, not
//! partitioned) is one task, `0-0`, owned by whoever the group assigns
//! the one partition of its lease topic (`<group>-lease` on `[cluster]
//! brokers`).
//!
//! The group protocol itself is a connector's (`weir-connectors`'
//! `kafka::group`), behind [`Membership`]: this crate links no Kafka client.
//!
//! Invariants:
//! - A task's identity is its job name `<job>@<stage>-<p>`: its checkpoints
//!   (`<dir>/tasks/<stage>-<p>`, `<store>/tasks/<stage>-<p>`), its Kafka
//!   sinks' transactional ids, its PostgreSQL bookkeeping rows and its NATS
//!   message ids all derive from it, so two tasks never share one.
//! - Exactly-once across processes rests on three fences, whoever runs a
//!   task: the object store's conditional create of each manifest (one
//!   writer per checkpoint id); the commit point (a checkpoint counts once
//!   the stage's group holds it, [`StageCommits`], which only a member of
//!   the current generation that still owns the task can commit, and
//!   sinks deliver only after it); and each sink's own (a Kafka sink's
//!   `init_transactions` on its per-task id; its marker). A worker that
//!   lost a task it still runs (a zombie) commits no checkpoint, so it
//!   delivers nothing, and its manifests are dropped by the next owner's
//!   restore.
//! - A task handed over takes a checkpoint before its partition goes to
//!   the next owner (within `handover_timeout`); a task of a worker that
//!   died is restored by the next owner from its committed checkpoint.

mod stages;
mod worker;
mod worker_job;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use stages::{Crossing, WorkerStage, topic_name};
pub use worker::{TaskRun, TaskState, Worker};
pub use worker_job::{Anchor, TaskId, WorkerJob, lease_topic};

/// What the group told a worker, delivered while it polls.
pub trait Owner: Send + Sync {
    /// The group of `stage` gave this worker `partitions` of the stage's
    /// anchor topic.
    fn assigned(&self, stage: u32, partitions: &[i32]);
    /// The group of `stage` takes `partitions` back: hand their tasks
    /// over before returning. `lost`: they are already someone else's
    /// (this worker was out of the group too long), so stop them without
    /// a handover.
    fn revoked(&self, stage: u32, partitions: &[i32], lost: bool);
}

/// A worker's membership in the job's group: the Kafka consumer group
/// protocol, with incremental (cooperative) rebalancing.
pub trait Membership {
    /// Serves the group for up to `timeout`: heartbeats, and the
    /// [`Owner`]'s calls for every assignment change.
    fn poll(&mut self, timeout: Duration) -> Result<(), String>;
    /// Leaves the group: every partition revoked (handed over) first.
    fn leave(&mut self) -> Result<(), String>;
    /// The commit points of the stage's tasks, made through this member.
    fn commits(&self) -> Arc<dyn StageCommits>;
}

/// The commit points of one stage's tasks (docs/scale-out.md): task *p*'s
/// checkpoint *n* counts once the stage's group holds an offset commit of
/// anchor partition *p* whose metadata names *n*, made by a member of the
/// group's current generation. The group coordinator refuses it from a
/// member it no longer has, so a worker that lost a task cannot commit
/// for it.
pub trait StageCommits: Send + Sync {
    /// Commits checkpoint `id` of task `partition`, at the anchor offset
    /// its source offsets `sources` hold: one try.
    fn commit(
        &self,
        partition: i32,
        id: u64,
        sources: &BTreeMap<String, serde_json::Value>,
    ) -> Result<(), CommitRefused>;
    /// The checkpoint the group holds as task `partition`'s, if any.
    fn committed(&self, partition: i32) -> Result<Option<u64>, String>;
    /// Proves that this worker's member holds task `partition` in the
    /// group's current generation and that the group still holds
    /// `committed` as its checkpoint, by committing that very commit point
    /// again (changing nothing): the coordinator refuses a commit from a
    /// member it no longer has or of an older generation. One try.
    fn claim(&self, partition: i32, committed: Option<u64>) -> Result<(), CommitRefused>;
    /// The transactions task `partition`'s commits are carried in, if the
    /// stage's sinks write into them
    /// ([`CommitPoint::transactions`](crate::run::CommitPoint::transactions)).
    fn transactions(&self, partition: i32) -> Result<Option<crate::run::Transactions>, String> {
        let _ = partition;
        Ok(None)
    }
}

/// Why a commit point was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitRefused {
    /// For now: a rebalance in progress, the group's coordinator moving
    /// or unreachable. Worth another try.
    #[error("{0}")]
    Busy(String),
    /// For good: this worker is not the group's member that holds the
    /// task (removed from the group, its partition revoked or lost).
    #[error("{0}")]
    Fenced(String),
}

/// Why worker mode cannot run a job.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The job file is invalid.
    #[error(transparent)]
    Job(#[from] crate::config::JobError),
    /// The job is valid but not one worker mode runs.
    #[error("{path}: worker mode: {message}")]
    Refused {
        /// The job file.
        path: String,
        /// What to change.
        message: String,
    },
    /// The group failed (the cluster unreachable, the worker fenced).
    #[error("worker of job `{job}`: {message}")]
    Group {
        /// The job.
        job: String,
        /// What failed.
        message: String,
    },
}
