//! Narrowing: finding the one record a plugin fails on.
//!
//! A plugin that fails processing a batch of many records (returns an
//! error, traps, or exhausts a limit other than its call timeout) names no
//! record: the failure says only which lines, sequences or offsets the
//! batch came from. The supervisor then replays from the last complete
//! checkpoint with every source sending, one per batch, as many records as
//! it sent in the failed attempt: plugins are deterministic, so the replay
//! fails again, with the same message, on a batch made from a single
//! source record, which the failure then names (`in.txt line 734 of source
//! `lines``); and the job stops there, since a restart would only fail on
//! it once more. A replay that does not fail so (the failure depended on
//! the batching, or was a fault of the moment) is handled as any attempt:
//! it goes on at full batch size once past those records, or its own
//! failure restarts it.
//!
//! Invariants:
//! - An attempt is narrowed at most once per complete checkpoint or bad
//!   record found ([`Narrowing::again`]): a second failure on many records
//!   with neither since is handled as any failure.
//! - Narrowing replays only where restarts are allowed (the restart
//!   strategy permits at least one), and does not count as a restart.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crate::metrics::{JobMetrics, NodeKind};
use crate::run::error::RunError;
use crate::threads::TaskError;
#[cfg(doc)]
use crate::wasm::InstanceError;

/// Per source id, how many records an attempt sends one per batch first.
pub(crate) type Narrow = BTreeMap<String, u64>;

/// What to do after a failed attempt.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Replay narrowed: the failure was on a batch of many records.
    Narrow,
    /// The narrowed replay failed as the attempt before it, on one
    /// source record: stop the job.
    Found,
    /// Neither: handle the failure as any other.
    Other,
}

/// The supervisor's narrowing across attempts.
#[derive(Debug, Default)]
pub(crate) struct Narrowing {
    /// Records each source had sent when the running attempt started.
    sent_before: BTreeMap<String, u64>,
    /// The narrowing of the running attempt (empty: none).
    running: Narrow,
    /// The plugin failure the running attempt's narrowing looks for.
    looking_for: Option<String>,
    /// The narrowing for the next attempt.
    next: Narrow,
    /// Checkpoints completed when the last narrowed attempt was decided.
    tried_at: Option<u64>,
}

impl Narrowing {
    /// An attempt starts: the narrowing it runs with.
    pub(crate) fn start(&mut self, metrics: &JobMetrics) -> &Narrow {
        self.sent_before = sources_sent(metrics);
        self.running = std::mem::take(&mut self.next);
        if self.running.is_empty() {
            self.looking_for = None;
        }
        &self.running
    }

    /// The running attempt failed on a record a replay can now go past:
    /// the next attempt replays one record per batch again, at least as
    /// far as the failed one went and as its own narrowing did, to go
    /// past it and on to the next.
    pub(crate) fn again(&mut self, metrics: &JobMetrics) {
        let mut next = std::mem::take(&mut self.running);
        for (id, n) in sources_sent(metrics) {
            let before = self.sent_before.get(&id).copied().unwrap_or(0);
            let at_least = next.entry(id).or_insert(1);
            *at_least = (*at_least).max(n.saturating_sub(before));
        }
        self.next = next;
        self.looking_for = None;
        // Something was learnt: a later failure on many records (the
        // next bad one) may be narrowed too.
        self.tried_at = None;
    }

    /// The running attempt failed with `e`, with `completed` checkpoints
    /// completed in the run so far; `may_restart` when the restart
    /// strategy allows a restart at all.
    pub(crate) fn failed(
        &mut self,
        e: &RunError,
        metrics: &JobMetrics,
        completed: u64,
        may_restart: bool,
    ) -> AfterFailure {
        let looked_for = self.looking_for.take();
        let narrowed = !std::mem::take(&mut self.running).is_empty();
        let Some((failure, many)) = plugin_failed_on_batch(e) else {
            return AfterFailure::Other;
        };
        if narrowed && looked_for.as_ref() == Some(&failure) {
            return AfterFailure::Found;
        }
        if !many || !may_restart || self.tried_at == Some(completed) {
            return AfterFailure::Other;
        }
        self.tried_at = Some(completed);
        self.looking_for = Some(failure);
        let sent = sources_sent(metrics);
        self.next = (sent.into_iter())
            .map(|(id, n)| {
                let before = self.sent_before.get(&id).copied().unwrap_or(0);
                (id, n.saturating_sub(before).max(1))
            })
            .collect();
        AfterFailure::Narrow
    }
}

/// Records each source has sent in the run so far.
fn sources_sent(metrics: &JobMetrics) -> BTreeMap<String, u64> {
    (metrics.nodes.iter())
        .filter(|(_, kind, _)| *kind == NodeKind::Source)
        .map(|(id, _, m)| (id.clone(), m.records_out.load(Ordering::Relaxed)))
        .collect()
}

/// Whether `e` is a plugin failing on a batch in a way that repeats on
/// replay ([`InstanceError::repeats_on_replay`]): its message (naming the
/// operator instance, not the batch), and whether the batch came from
/// more than one source record (or, from nowhere known, holds more than
/// one record).
fn plugin_failed_on_batch(e: &RunError) -> Option<(String, bool)> {
    let RunError::Task(TaskError::Process { error, batch }) = e else {
        return None;
    };
    let many = batch.from.as_ref().map_or(batch.records, |f| f.records) > 1;
    error.repeats_on_replay().then(|| (error.to_string(), many))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::LimitValue;
    use crate::dataflow::provenance::Provenance;
    use crate::metrics::NodeMetrics;
    use crate::threads::FailedBatch;
    use crate::wasm::{Hook, InstanceError, LimitExceeded};

    /// Metrics of sources `a` and `b` and operator `op`.
    fn metrics() -> JobMetrics {
        let node = |id: &str, kind| (id.to_string(), kind, Arc::new(NodeMetrics::new(1)));
        JobMetrics {
            job: "j".into(),
            nodes: vec![
                node("a", NodeKind::Source),
                node("b", NodeKind::Source),
                node("op", NodeKind::Operator),
            ],
            checkpoints: Default::default(),
            journal: Default::default(),
        }
    }

    fn sent(m: &JobMetrics, id: &str, n: u64) {
        let node = m.node(id).unwrap();
        node.records_out.fetch_add(n, Ordering::Relaxed);
    }

    fn trap(message: &str) -> InstanceError {
        InstanceError::Trap {
            operator: "op[0]".into(),
            hook: Hook::Process,
            message: message.into(),
            backtrace: None,
        }
    }

    /// `error` processing a batch of `records` from `source_records` of
    /// source `a`.
    fn on_batch(error: InstanceError, records: usize, source_records: usize) -> RunError {
        let from = Provenance {
            source: "a".into(),
            place: "in.txt lines 1–9".into(),
            records: source_records,
        };
        failed(error, records, Some(Arc::new(from)))
    }

    /// `error` processing a batch of `records` from `from`.
    fn failed(error: InstanceError, records: usize, from: Option<Arc<Provenance>>) -> RunError {
        let batch = Box::new(FailedBatch {
            operator: "op".into(),
            port: "in".into(),
            records,
            from,
            record: None,
        });
        RunError::Task(TaskError::Process { error, batch })
    }

    #[test]
    fn a_failure_on_many_records_narrows_each_source_to_what_it_sent_in_the_attempt() {
        let (m, mut n) = (metrics(), Narrowing::default());
        sent(&m, "a", 100);
        assert!(n.start(&m).is_empty());
        sent(&m, "a", 30);
        let e = on_batch(trap("boom"), 4, 30);
        assert_eq!(n.failed(&e, &m, 0, true), AfterFailure::Narrow);
        let narrow = n.start(&m).clone();
        // `b` sent nothing: one record still goes alone, harmlessly.
        assert_eq!(narrow, Narrow::from([("a".into(), 30), ("b".into(), 1)]));
        sent(&m, "a", 7);
        assert_eq!(n.failed(&e, &m, 0, true), AfterFailure::Found);
        assert!(n.start(&m).is_empty(), "the next attempt is not narrowed");
    }

    #[test]
    fn a_narrowed_replay_that_fails_otherwise_is_any_failure() {
        let (m, mut n) = (metrics(), Narrowing::default());
        n.start(&m);
        let first = on_batch(trap("at 10 ms"), 4, 4);
        assert_eq!(n.failed(&first, &m, 3, true), AfterFailure::Narrow);
        assert!(!n.start(&m).is_empty());
        let other = on_batch(trap("at 20 ms"), 1, 1);
        assert_eq!(n.failed(&other, &m, 3, true), AfterFailure::Other);
        // No checkpoint since the narrowing: the same failure is not
        // narrowed twice.
        n.start(&m);
        assert_eq!(n.failed(&first, &m, 3, true), AfterFailure::Other);
        n.start(&m);
        assert_eq!(n.failed(&first, &m, 4, true), AfterFailure::Narrow);
    }

    #[test]
    fn one_record_a_call_timeout_or_no_restarts_do_not_narrow() {
        let (m, mut n) = (metrics(), Narrowing::default());
        n.start(&m);
        // Five records made from one source record: already found.
        assert_eq!(
            n.failed(&on_batch(trap("x"), 5, 1), &m, 0, true),
            AfterFailure::Other
        );
        let timeout = InstanceError::Limit {
            operator: "op[0]".into(),
            hook: Hook::Process,
            limit: Box::new(LimitExceeded {
                what: "call time",
                key: "call_timeout",
                limit: LimitValue::Time(std::time::Duration::from_secs(1)),
                actual: None,
            }),
        };
        assert_eq!(
            n.failed(&on_batch(timeout, 9, 9), &m, 0, true),
            AfterFailure::Other
        );
        assert_eq!(
            n.failed(&on_batch(trap("x"), 9, 9), &m, 0, false),
            AfterFailure::Other
        );
        let unknown = failed(trap("x"), 2, None);
        assert_eq!(n.failed(&unknown, &m, 0, true), AfterFailure::Narrow);
    }
}
