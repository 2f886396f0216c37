//! A live plugin swap's lifecycle: the request from `weir swap`
//! ([`SwapRequest`]) and the swapped plugin's probation ([`Probation`]).
//!
//! Invariant: a request is answered at most once: refused, rolled back, or
//! confirmed once the first checkpoint after the swap completed with the
//! new plugin and every sink delivered it (or the job ended first). Until
//! then a failure of the attempt, a sink's delivery included, rolls the
//! swap back. A request dropped unanswered reads, on the socket, as "the
//! job ended before the swap completed".

use std::collections::BTreeSet;
use std::path::PathBuf;

use crossbeam_channel::Sender;

use crate::wasm::OperatorInfo;

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

/// A swapped plugin on probation: the swap is reported successful once the
/// first checkpoint after `from` completed with it and every sink
/// delivered that checkpoint.
#[derive(Debug)]
pub(crate) struct Probation {
    /// The checkpoint the swap restarted from.
    pub from: u64,
    /// The swapped operator.
    pub operator: String,
    /// The request's answer channel, until answered.
    pub reply: Option<Sender<Result<String, String>>>,
    /// What changed with the plugin ([`differences`]), said in the answer.
    pub warnings: Vec<String>,
    /// The first checkpoint after the swap to complete, and the sinks that
    /// delivered it (or a later one) so far.
    pub delivering: Option<(u64, BTreeSet<String>)>,
}

impl Probation {
    /// A probation of the swap of `operator` at checkpoint `from`.
    pub(crate) fn new(from: u64, request: SwapRequest, warnings: Vec<String>) -> Probation {
        Probation {
            from,
            operator: request.operator,
            reply: Some(request.reply),
            warnings,
            delivering: None,
        }
    }

    /// Whether the swap is still unanswered (its first checkpoint not yet
    /// delivered by every sink).
    pub(crate) fn pending(&self) -> bool {
        self.reply.is_some()
    }

    /// Whether checkpoint `id` is the first after the swap to complete.
    pub(crate) fn ends_at(&self, id: u64) -> bool {
        self.pending() && id > self.from && self.delivering.is_none()
    }

    /// Whether rolling the swap back keeps every sink's output exactly once:
    /// no sink delivered the new plugin's output yet.
    pub(crate) fn revertible(&self) -> bool {
        self.delivering
            .as_ref()
            .is_none_or(|(_, delivered)| delivered.is_empty())
    }

    /// The attempt failed with `error` after some sink delivered the new
    /// plugin's output: the swap is kept (a rollback would repeat or lose
    /// that output), and the job goes on as its restart strategy says.
    pub(crate) fn kept_after_delivery(mut self, error: &dyn std::fmt::Display) {
        let (id, delivered) = self.delivering.take().unwrap_or_default();
        let sinks: Vec<String> = delivered.iter().map(|s| format!("`{s}`")).collect();
        let message = format!(
            "the new plugin of `{}` stays: sink(s) {} delivered its output of checkpoint {id} before the job failed ({error}), and a rollback would repeat or lose that output; the job restarts as its [restart] allows",
            self.operator,
            sinks.join(", ")
        );
        tracing::warn!("{message}");
        self.answer(Err(message));
    }

    /// Checkpoint `id` completed; the job has `sinks` sinks.
    pub(crate) fn checkpoint_completed(&mut self, id: u64, sinks: usize) {
        if self.ends_at(id) {
            self.delivering = Some((id, BTreeSet::new()));
            self.confirm_if_delivered(sinks);
        }
    }

    /// Sink `sink` (of `sinks`) delivered checkpoint `id`.
    pub(crate) fn sink_committed(&mut self, sink: &str, id: u64, sinks: usize) {
        if let Some((first, delivered)) = self.delivering.as_mut()
            && id >= *first
        {
            delivered.insert(sink.to_owned());
            self.confirm_if_delivered(sinks);
        }
    }

    fn confirm_if_delivered(&mut self, sinks: usize) {
        let Some((id, delivered)) = &self.delivering else {
            return;
        };
        if delivered.len() < sinks {
            return;
        }
        let confirmed = format!(
            "operator `{}` now runs the new plugin: swapped at checkpoint {}, checkpoint {id} completed with it and every sink delivered it",
            self.operator, self.from
        );
        self.answer(Ok(confirmed));
    }

    /// The job ended before the swap's first checkpoint.
    pub(crate) fn job_ended(mut self) {
        let ended = format!(
            "operator `{}` swapped; the job ended before its next checkpoint",
            self.operator
        );
        self.answer(Ok(ended));
    }

    /// The new plugin failed with `error`: it was rolled back.
    pub(crate) fn rolled_back(mut self, error: &dyn std::fmt::Display) {
        let why = format!(
            "the new plugin of `{}` failed, rolled back to the previous plugin from checkpoint {}: {error}",
            self.operator, self.from
        );
        self.answer(Err(why));
    }

    /// Answers the request, if not answered yet; a success with the
    /// warnings of the swap.
    fn answer(&mut self, mut result: Result<String, String>) {
        let Some(reply) = self.reply.take() else {
            return;
        };
        if let Ok(text) = &mut result {
            for w in &self.warnings {
                text.push_str(&format!("\nwarning: {w}"));
            }
        }
        let _ = reply.send(result);
    }
}

/// What a swap from the plugin described by `old` to `new` changes besides
/// the code: its name, its ports, its state version. Each is a warning:
/// accepted, but said, since a plugin of another name or other ports is
/// rarely the intended upgrade.
pub(crate) fn differences(old: &OperatorInfo, new: &OperatorInfo) -> Vec<String> {
    let mut out = Vec::new();
    if old.name != new.name {
        out.push(format!(
            "the new plugin is `{}`, not `{}`: another operator, not a new version of it",
            new.name, old.name
        ));
    }
    let ports = |p: &[String]| p.join(", ");
    if old.inputs != new.inputs {
        out.push(format!(
            "its input ports changed from [{}] to [{}]",
            ports(&old.inputs),
            ports(&new.inputs)
        ));
    }
    if old.outputs != new.outputs {
        out.push(format!(
            "its output ports changed from [{}] to [{}]",
            ports(&old.outputs),
            ports(&new.outputs)
        ));
    }
    if old.state_version != new.state_version {
        out.push(format!(
            "its state version changed from {} to {}: its `restore` migrated the state",
            old.state_version, new.state_version
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> (
        SwapRequest,
        crossbeam_channel::Receiver<Result<String, String>>,
    ) {
        let (reply, answers) = crossbeam_channel::bounded(1);
        let request = SwapRequest {
            operator: "count".into(),
            plugin: "v2.wasm".into(),
            reply,
        };
        (request, answers)
    }

    /// The swap is confirmed only once every sink delivered the first
    /// checkpoint after it; a checkpoint before the swap counts for
    /// nothing.
    #[test]
    fn a_swap_is_confirmed_once_every_sink_delivered_its_first_checkpoint() {
        let (request, answers) = request();
        let mut p = Probation::new(4, request, vec!["its state version changed".into()]);
        p.checkpoint_completed(4, 2);
        p.sink_committed("a", 4, 2);
        assert!(p.delivering.is_none() && p.pending());
        p.checkpoint_completed(5, 2);
        p.checkpoint_completed(6, 2);
        p.sink_committed("a", 5, 2);
        p.sink_committed("a", 6, 2);
        assert!(p.pending(), "one sink of two delivered");
        assert!(answers.try_recv().is_err());
        p.sink_committed("b", 6, 2);
        assert!(!p.pending());
        let answer = answers.try_recv().unwrap().unwrap();
        assert!(
            answer.contains("checkpoint 5 completed with it and every sink delivered it"),
            "{answer}"
        );
        assert!(
            answer.contains("\nwarning: its state version changed"),
            "{answer}"
        );
    }

    /// A rollback keeps output exactly once only while no sink delivered
    /// the new plugin's output; after that the swap stays, and says why.
    #[test]
    fn a_swap_is_revertible_until_a_sink_delivered_its_output() {
        let (request, answers) = request();
        let mut p = Probation::new(4, request, Vec::new());
        assert!(p.revertible());
        p.checkpoint_completed(5, 2);
        assert!(p.revertible(), "completed, delivered by none");
        p.sink_committed("pg", 5, 2);
        assert!(p.pending() && !p.revertible());
        p.kept_after_delivery(&"sink `nats` failed");
        let said = answers.try_recv().unwrap().unwrap_err();
        assert!(
            said.contains("stays: sink(s) `pg` delivered its output of checkpoint 5"),
            "{said}"
        );
        assert!(said.contains("sink `nats` failed"), "{said}");
    }

    #[test]
    fn a_job_without_sinks_confirms_at_completion() {
        let (request, answers) = request();
        let mut p = Probation::new(1, request, Vec::new());
        p.checkpoint_completed(2, 0);
        assert!(!p.pending());
        assert!(answers.try_recv().unwrap().is_ok());
    }

    #[test]
    fn another_name_other_ports_and_state_version_are_warned_of() {
        let info = |name: &str, outputs: &[&str], state_version| OperatorInfo {
            name: name.into(),
            version: "1".into(),
            inputs: vec!["in".into()],
            outputs: outputs.iter().map(|o| o.to_string()).collect(),
            state_version,
        };
        let old = info("word-count", &["out"], 1);
        assert!(differences(&old, &info("word-count", &["out"], 1)).is_empty());
        let said = differences(&old, &info("split", &["out", "late"], 2)).join("; ");
        assert!(
            said.contains("the new plugin is `split`, not `word-count`"),
            "{said}"
        );
        assert!(
            said.contains("output ports changed from [out] to [out, late]"),
            "{said}"
        );
        assert!(said.contains("state version changed from 1 to 2"), "{said}");
    }
}
