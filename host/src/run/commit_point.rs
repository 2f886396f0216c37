//! [`CommitPoint`]: what makes a checkpoint count, when a manifest in the
//! object store is not enough. In worker mode a task's checkpoint counts
//! once the task's group records it (docs/scale-out.md, "Exactly-once
//! across processes"), which only the task's current owner can do: a
//! worker that lost the task (a zombie) writes at most a manifest nobody
//! restores, and delivers nothing.
//!
//! Invariants (carried out by the driver and the restore phase):
//! - Checkpoint *n* is committed after its manifest exists and before any
//!   sink is told to deliver it; a commit that fails ends the attempt.
//! - A restore takes the committed checkpoint *c*. Manifests after *c*
//!   were never committed, so nothing of them reached a sink: they are
//!   deleted, and new checkpoint ids continue after the newest of them (an
//!   id names one checkpoint ever).
//! - A restore deletes a manifest only after listing it and then
//!   [claiming](CommitPoint::claim) the job: only the job's owner can
//!   commit, so a manifest listed before a successful claim and past *c*
//!   can never be committed by anyone. A process that lost the job (a
//!   stalled worker whose task moved on) fails its claim and deletes
//!   nothing of the new owner's.
//! - With no commit recorded and at most one manifest, the first
//!   checkpoint never reached its commit point: its manifest is deleted and
//!   the job starts over. With several manifests the commits expired
//!   (checkpoint *n + 1* starts only once *n* is committed): a restore takes
//!   the newest, every manifest being a whole checkpoint.

use std::collections::BTreeMap;

pub use crate::connectors::sink::Transactions;

/// The commit point of one job's checkpoints (in worker mode, one task's).
pub trait CommitPoint: Send + Sync + std::fmt::Debug {
    /// Makes checkpoint `id`, whose manifest exists and whose source
    /// offsets are `sources`, the one a restore takes. An error (this
    /// process no longer owns the job, or the commit could not be made in
    /// time) says what happened in a sentence; the attempt then ends
    /// without delivering `id`.
    fn commit(&self, id: u64, sources: &BTreeMap<String, serde_json::Value>) -> Result<(), String>;

    /// The checkpoint the newest commit made, if any. Called once per
    /// attempt, before any sink opens: a commit point that carries
    /// transactions fences their earlier users first.
    fn committed(&self) -> Result<Option<u64>, String>;

    /// Confirms that this process still owns the job and that the commit
    /// point still names `committed` (what [`CommitPoint::committed`]
    /// read), just before a restore deletes the manifests after it. An
    /// error says in a sentence why not; the restore then deletes nothing.
    fn claim(&self, committed: Option<u64>) -> Result<(), String>;

    /// The transactions this commit point's commits are carried in, if
    /// any: a sink that writes into them makes checkpoint *n*'s output
    /// visible exactly when *n* is committed. Most commit points carry
    /// none.
    fn transactions(&self) -> Result<Option<Transactions>, String> {
        Ok(None)
    }
}
