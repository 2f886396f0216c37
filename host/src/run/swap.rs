//! A live plugin swap's lifecycle: the request from `weir swap`
//! ([`SwapRequest`]) and the swapped plugin's probation ([`Probation`]).
//!
//! Invariant: a request is answered at most once: refused, rolled back, or
//! confirmed once a checkpoint after the swap completed with the new plugin
//! (or the job ended first). A request dropped unanswered reads, on the
//! socket, as "the job ended before the swap completed".

use std::path::PathBuf;

use crossbeam_channel::Sender;

/// A `weir swap` request from the control socket.
#[derive(Debug)]
pub(crate) struct SwapRequest {
    /// The operator to swap.
    pub operator: String,
    /// Its new plugin.
    pub plugin: PathBuf,
    /// Where the answer goes.
    pub reply: Sender<Result<String, String>>,
}

impl SwapRequest {
    /// Answers the request with a refusal.
    pub(crate) fn refuse(self, why: String) {
        let _ = self.reply.send(Err(why));
    }
}

/// A swapped plugin on probation: the swap is reported successful once a
/// checkpoint after `from` completes with it.
#[derive(Debug)]
pub(crate) struct Probation {
    /// The checkpoint the swap restarted from.
    pub from: u64,
    /// The swapped operator.
    pub operator: String,
    /// The request's answer channel, until answered.
    pub reply: Option<Sender<Result<String, String>>>,
}

impl Probation {
    /// Whether the swap is still unanswered (its first checkpoint not yet
    /// taken).
    pub(crate) fn pending(&self) -> bool {
        self.reply.is_some()
    }

    /// Whether checkpoint `id` completing ends the probation: it is the
    /// first after the swap to complete.
    pub(crate) fn ends_at(&self, id: u64) -> bool {
        self.pending() && id > self.from
    }

    /// Checkpoint `id` completed: ends the probation if `id` came after the
    /// swap.
    pub(crate) fn checkpoint_completed(&mut self, id: u64) {
        if self.ends_at(id)
            && let Some(reply) = self.reply.take()
        {
            let _ = reply.send(Ok(format!(
                "operator `{}` now runs the new plugin: swapped at checkpoint {}, checkpoint {} completed with it",
                self.operator, self.from, id
            )));
        }
    }

    /// The job ended before the swap's first checkpoint.
    pub(crate) fn job_ended(self) {
        if let Some(reply) = self.reply {
            let _ = reply.send(Ok(format!(
                "operator `{}` swapped; the job ended before its next checkpoint",
                self.operator
            )));
        }
    }

    /// The new plugin failed with `error`: it was rolled back.
    pub(crate) fn rolled_back(self, error: &dyn std::fmt::Display) {
        if let Some(reply) = self.reply {
            let _ = reply.send(Err(format!(
                "the new plugin of `{}` failed, rolled back to the previous plugin from checkpoint {}: {error}",
                self.operator, self.from
            )));
        }
    }
}
