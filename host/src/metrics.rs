//! Live counters of a running job, shared by the job's threads (writers), the
//! progress display and the Prometheus endpoint (readers). Writers only use
//! relaxed atomic adds and stores, so counting costs a few nanoseconds per
//! batch.
//!
//! Invariants:
//! - A node has one [`EventTime`] per instance (a source: one), created with
//!   the node's parallelism; only that instance's thread writes it.
//! - A watermark of `i64::MIN` (before all time) reads as none: it says as
//!   little as no watermark at all.
//! - [`NodeMetrics::has_event_time`] never goes back to `false`: once a node
//!   had a watermark before the end of time or a pending timer, its event
//!   time is shown until the run ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::config::Job;

mod bad;
mod journal;

pub use bad::{BadCounts, BadKind};
pub use journal::{
    CHECKPOINTS_KEPT, CheckpointRecord, EVENTS_KEPT, Event, EventKind, Journal, PluginRecord,
};

/// Upper bounds (seconds) of the latency histogram buckets.
const BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.0,
];

/// Upper bounds (seconds) of the record latency buckets: from a
/// millisecond to a minute, since exactly-once output waits for its
/// checkpoint.
const RECORD_LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// A fixed-bucket histogram of durations, Prometheus style.
#[derive(Debug)]
pub struct Histogram {
    /// Upper bounds, seconds, increasing.
    bounds: &'static [f64],
    /// Observations per bound (not cumulative).
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_ns: AtomicU64,
}

/// A histogram of call times: 100 µs to 2 s.
impl Default for Histogram {
    fn default() -> Self {
        Histogram::with_bounds(&BUCKETS)
    }
}

impl Histogram {
    fn with_bounds(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// A histogram of record latencies: 1 ms to 60 s.
    ///
    /// ```
    /// let h = weir::metrics::Histogram::record_latency();
    /// h.observe_n(std::time::Duration::from_millis(7), 3);
    /// assert_eq!(h.count(), 3);
    /// assert_eq!(h.buckets().find(|(_, n)| *n > 0), Some((0.01, 3)));
    /// ```
    pub fn record_latency() -> Self {
        Histogram::with_bounds(&RECORD_LATENCY_BUCKETS)
    }

    /// Records one observation.
    ///
    /// ```
    /// let h = weir::metrics::Histogram::default();
    /// h.observe(std::time::Duration::from_micros(300));
    /// assert_eq!(h.count(), 1);
    /// ```
    pub fn observe(&self, d: Duration) {
        self.observe_n(d, 1);
    }

    /// Records `n` observations of `d` (the records of one batch).
    pub fn observe_n(&self, d: Duration, n: u64) {
        let s = d.as_secs_f64();
        if let Some(i) = self.bounds.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(n, Relaxed);
        }
        self.count.fetch_add(n, Relaxed);
        self.sum_ns
            .fetch_add((d.as_nanos() as u64).saturating_mul(n), Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Every bucket as (upper bound in seconds, observations in it), in
    /// increasing order; observations above the last bound are only in
    /// [`count`](Self::count).
    pub fn buckets(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.bounds
            .iter()
            .zip(&self.buckets)
            .map(|(b, n)| (*b, n.load(Relaxed)))
    }

    /// The sum of all observations, seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_ns.load(Relaxed) as f64 / 1e9
    }
}

/// The end of time: the watermark of a finished input
/// ([`crate::dataflow::watermark::END_OF_TIME`]).
const END: i64 = i64::MAX;
/// What a watermark gauge holds while there is none.
const NO_WATERMARK: i64 = i64::MIN;

/// The event-time gauges of one instance of a node: its current watermark
/// and its pending timers.
#[derive(Debug)]
pub struct EventTime {
    /// Milliseconds since the Unix epoch; [`NO_WATERMARK`] for none.
    watermark: AtomicI64,
    event_timers: AtomicU64,
    processing_timers: AtomicU64,
}

impl Default for EventTime {
    fn default() -> Self {
        EventTime {
            watermark: AtomicI64::new(NO_WATERMARK),
            event_timers: AtomicU64::new(0),
            processing_timers: AtomicU64::new(0),
        }
    }
}

impl EventTime {
    /// The instance's watermark, milliseconds since the Unix epoch
    /// (`i64::MAX`: the end of time); `None` before its first.
    pub fn watermark(&self) -> Option<i64> {
        Some(self.watermark.load(Relaxed)).filter(|w| *w != NO_WATERMARK)
    }

    /// Pending event-time timers.
    pub fn event_timers(&self) -> u64 {
        self.event_timers.load(Relaxed)
    }

    /// Pending processing-time timers.
    pub fn processing_timers(&self) -> u64 {
        self.processing_timers.load(Relaxed)
    }
}

/// Counters of one node (a source, an operator over all its instances, a sink).
#[derive(Debug)]
pub struct NodeMetrics {
    /// Records received.
    pub records_in: AtomicU64,
    /// Records sent downstream; a sink's: records delivered (an exactly-once
    /// sink's once their checkpoint is committed).
    pub records_out: AtomicU64,
    /// Bytes (keys and values) received.
    pub bytes_in: AtomicU64,
    /// Bytes (keys and values) sent downstream.
    pub bytes_out: AtomicU64,
    /// Records a source read and dropped: a bad timestamp with
    /// `on_bad_timestamp = "skip"` (0 for other nodes).
    pub records_skipped: AtomicU64,
    /// Records a node could not handle and went on past, as its
    /// `on_error` says (skipped or sent to a dead-letter sink), by kind.
    pub records_bad: BadCounts,
    /// Nanoseconds spent waiting for a full downstream channel (backpressure).
    pub blocked_ns: AtomicU64,
    /// Time per `process` call (operators) or write (sinks).
    pub batch_latency: Histogram,
    /// Sinks: per record, the time from its source handing it over
    /// ([`crate::Batch::origin`]) to its output being visible: written
    /// (at-least-once) or committed (exactly-once).
    pub record_latency: Histogram,
    /// Watermark and pending timers per instance (see [`NodeMetrics::new`]).
    instances: Box<[EventTime]>,
    /// Whether the node ever had event time (see the module docs).
    event_time: AtomicBool,
}

/// A node with one instance.
impl Default for NodeMetrics {
    fn default() -> Self {
        NodeMetrics::new(1)
    }
}

impl NodeMetrics {
    /// Zeroed counters of a node with `instances` instances (a source or
    /// sink: 1), none with a watermark yet.
    ///
    /// ```
    /// let m = weir::metrics::NodeMetrics::new(2);
    /// m.set_event_time(0, Some(10), 3, 0);
    /// assert_eq!(m.watermark(), None, "instance 1 has none yet");
    /// m.set_event_time(1, Some(7), 1, 2);
    /// assert_eq!(m.watermark(), Some(7), "the minimum over instances");
    /// assert_eq!((m.event_timers(), m.processing_timers()), (4, 2));
    /// ```
    pub fn new(instances: u32) -> Self {
        NodeMetrics {
            records_in: AtomicU64::new(0),
            records_out: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            records_skipped: AtomicU64::new(0),
            records_bad: BadCounts::default(),
            blocked_ns: AtomicU64::new(0),
            batch_latency: Histogram::default(),
            record_latency: Histogram::record_latency(),
            instances: (0..instances).map(|_| EventTime::default()).collect(),
            event_time: AtomicBool::new(false),
        }
    }

    /// Sets the watermark and pending timer counts of instance `instance`:
    /// a few relaxed stores, for the instance's own thread. An instance
    /// outside the node's parallelism is not counted.
    pub fn set_event_time(
        &self,
        instance: u32,
        watermark: Option<i64>,
        event: usize,
        processing: usize,
    ) {
        let Some(t) = self.instances.get(instance as usize) else {
            return;
        };
        t.watermark
            .store(watermark.unwrap_or(NO_WATERMARK), Relaxed);
        t.event_timers.store(event as u64, Relaxed);
        t.processing_timers.store(processing as u64, Relaxed);
        let timed = watermark.is_some_and(|w| w != END && w != NO_WATERMARK);
        if (timed || event + processing > 0) && !self.event_time.load(Relaxed) {
            self.event_time.store(true, Relaxed);
        }
    }

    /// The watermark and timers of each instance, in instance order.
    pub fn instances(&self) -> &[EventTime] {
        &self.instances
    }

    /// The node's watermark: the minimum over its instances; `None` until
    /// every instance has one (or for a node without instances).
    pub fn watermark(&self) -> Option<i64> {
        let mut each = self.instances.iter().map(EventTime::watermark);
        let first = each.next()??;
        each.try_fold(first, |min, w| Some(min.min(w?)))
    }

    /// Pending event-time timers over all instances.
    pub fn event_timers(&self) -> u64 {
        self.instances.iter().map(EventTime::event_timers).sum()
    }

    /// Pending processing-time timers over all instances.
    pub fn processing_timers(&self) -> u64 {
        self.instances
            .iter()
            .map(EventTime::processing_timers)
            .sum()
    }

    /// Whether the node has had event time in this run: a watermark before
    /// the end of time or a pending timer, now or earlier. The end of time
    /// alone (every input's last watermark) does not count.
    pub fn has_event_time(&self) -> bool {
        self.event_time.load(Relaxed)
    }
}

/// What a node of a job is (of the plan's graph, and of its metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A `[[source]]`: reads records, has no input.
    Source,
    /// An `[[operator]]`: a plugin run as `parallelism` instances.
    Operator,
    /// A `[[sink]]`: writes records; its only output is its dead letters.
    Sink,
}

impl NodeKind {
    /// `source`, `operator` or `sink`, as messages and reports say it.
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Source => "source",
            NodeKind::Operator => "operator",
            NodeKind::Sink => "sink",
        }
    }

    /// The kinds of bad records a node of this kind meets.
    pub fn bad_kinds(self) -> &'static [BadKind] {
        match self {
            NodeKind::Source => &BadKind::ALL[..3],
            NodeKind::Operator => &BadKind::ALL[3..6],
            NodeKind::Sink => &BadKind::ALL[6..],
        }
    }
}

/// Checkpoint and restart counters of a job.
#[derive(Debug, Default)]
pub struct CheckpointMetrics {
    /// Completed checkpoints.
    pub completed: AtomicU64,
    /// Id of the last completed checkpoint (0: none).
    pub last_id: AtomicU64,
    /// Duration of the last checkpoint, ms.
    pub last_duration_ms: AtomicU64,
    /// Bytes written by the last checkpoint.
    pub last_bytes: AtomicU64,
    /// Longest alignment of the last checkpoint, ms.
    pub last_alignment_ms: AtomicU64,
    /// Most bytes buffered by one instance during the last alignment.
    pub last_alignment_buffered_bytes: AtomicU64,
    /// Longest pause of an operator instance for the last checkpoint, ms.
    pub last_pause_ms: AtomicU64,
    /// Checkpoints that failed (an attempt ended while they were in flight,
    /// or the store could not write them).
    pub failed: AtomicU64,
    /// Completed checkpoints that some instance took unaligned.
    pub unaligned: AtomicU64,
    /// Bytes of in-flight data stored with completed checkpoints, in all.
    pub inflight_bytes: AtomicU64,
    /// Checkpoint durations.
    pub duration: Histogram,
    /// Alignment durations.
    pub alignment: Histogram,
    /// Longest pause of an operator instance per checkpoint.
    pub pause: Histogram,
    /// Restarts after a failed attempt (not the restores of a resumed run or
    /// of a swap, which are no failure).
    pub restarts: AtomicU64,
}

/// All live metrics of one job.
#[derive(Debug)]
pub struct JobMetrics {
    /// Job name.
    pub job: String,
    /// Every node in job order: sources, operators, sinks.
    pub nodes: Vec<(String, NodeKind, Arc<NodeMetrics>)>,
    /// Checkpoints and restarts.
    pub checkpoints: CheckpointMetrics,
    /// Recent checkpoints, events and plugins, for the dashboard.
    pub journal: Journal,
}

impl JobMetrics {
    /// Zeroed metrics for every node of `job`: an operator with one
    /// [`EventTime`] per instance, a source or sink with one. A source with
    /// a `watermark` table has event time from the start.
    pub fn for_job(job: &Job) -> Arc<Self> {
        let source = |s: &crate::config::SourceConfig| {
            let m = NodeMetrics::new(1);
            m.event_time.store(s.watermark.is_some(), Relaxed);
            (s.id.clone(), NodeKind::Source, m)
        };
        let nodes = job
            .sources
            .iter()
            .map(source)
            .chain(job.operators.iter().map(|o| {
                let m = NodeMetrics::new(o.parallelism);
                (o.id.clone(), NodeKind::Operator, m)
            }))
            .chain(
                job.sinks
                    .iter()
                    .map(|s| (s.id.clone(), NodeKind::Sink, NodeMetrics::new(1))),
            )
            .map(|(id, kind, m)| (id, kind, Arc::new(m)))
            .collect();
        Arc::new(JobMetrics {
            job: job.name.clone(),
            nodes,
            checkpoints: CheckpointMetrics::default(),
            journal: Journal::default(),
        })
    }

    /// The counters of node `id`.
    pub fn node(&self, id: &str) -> Option<&Arc<NodeMetrics>> {
        self.nodes
            .iter()
            .find(|(n, _, _)| n == id)
            .map(|(_, _, m)| m)
    }

    /// Whether any node has had event time in this run (see
    /// [`NodeMetrics::has_event_time`]): what the progress display and the
    /// run summary show only then.
    pub fn has_event_time(&self) -> bool {
        self.nodes.iter().any(|(_, _, m)| m.has_event_time())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_watermark_is_the_minimum_once_every_instance_has_one() {
        let m = NodeMetrics::new(3);
        assert_eq!(m.watermark(), None);
        m.set_event_time(2, Some(50), 0, 0);
        m.set_event_time(0, Some(30), 0, 0);
        assert_eq!(m.watermark(), None, "instance 1 has none yet");
        m.set_event_time(1, Some(END), 0, 0);
        assert_eq!(m.watermark(), Some(30));
        m.set_event_time(0, Some(END), 0, 0);
        assert_eq!(m.watermark(), Some(50));
        for i in 0..3 {
            m.set_event_time(i, Some(END), 0, 0);
        }
        assert_eq!(m.watermark(), Some(END), "the end of time once all ended");
        let w: Vec<_> = m.instances().iter().map(EventTime::watermark).collect();
        assert_eq!(w, [Some(END); 3]);
        assert_eq!(NodeMetrics::new(0).watermark(), None, "no instance");
        assert_eq!(NodeMetrics::default().watermark(), None);
    }

    #[test]
    fn pending_timers_are_summed_per_domain_and_replaced_per_instance() {
        let m = NodeMetrics::new(2);
        m.set_event_time(0, None, 4, 1);
        m.set_event_time(1, None, 2, 0);
        assert_eq!((m.event_timers(), m.processing_timers()), (6, 1));
        m.set_event_time(0, None, 0, 3);
        assert_eq!((m.event_timers(), m.processing_timers()), (2, 3));
        assert_eq!(m.instances()[1].event_timers(), 2);
        // Out of range: not counted, no panic.
        m.set_event_time(7, Some(1), 100, 100);
        assert_eq!((m.event_timers(), m.processing_timers()), (2, 3));
    }

    #[test]
    fn event_time_is_sticky_and_the_end_alone_is_none() {
        let m = NodeMetrics::new(1);
        m.set_event_time(0, Some(END), 0, 0);
        assert!(!m.has_event_time(), "every job's inputs end with END");
        m.set_event_time(0, Some(NO_WATERMARK), 0, 0);
        assert_eq!(m.watermark(), None, "before all time reads as none");
        assert!(!m.has_event_time());
        m.set_event_time(0, None, 1, 0);
        assert!(m.has_event_time());
        m.set_event_time(0, Some(END), 0, 0);
        assert!(m.has_event_time(), "it stays");
        let w = NodeMetrics::new(1);
        w.set_event_time(0, Some(-5), 0, 0);
        assert!(w.has_event_time());
        assert_eq!(w.watermark(), Some(-5));
    }
}
