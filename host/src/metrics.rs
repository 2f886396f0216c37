//! Live counters of a running job, shared by the job's threads (writers), the
//! progress display and the Prometheus endpoint (readers). Writers only use
//! relaxed atomic adds, so counting costs a few nanoseconds per batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::config::Job;

/// Upper bounds (seconds) of the latency histogram buckets.
const BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.0,
];

/// A fixed-bucket histogram of durations, Prometheus style.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    ///
    /// ```
    /// let h = weir::metrics::Histogram::default();
    /// h.observe(std::time::Duration::from_micros(300));
    /// assert_eq!(h.count(), 1);
    /// ```
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Every bucket as (upper bound in seconds, observations in it), in
    /// increasing order; observations above the last bound are only in
    /// [`count`](Self::count).
    pub fn buckets(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        BUCKETS
            .iter()
            .zip(&self.buckets)
            .map(|(b, n)| (*b, n.load(Relaxed)))
    }

    /// The sum of all observations, seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_ns.load(Relaxed) as f64 / 1e9
    }
}

/// Counters of one node (a source, an operator over all its instances, a sink).
#[derive(Debug, Default)]
pub struct NodeMetrics {
    /// Records received.
    pub records_in: AtomicU64,
    /// Records sent downstream.
    pub records_out: AtomicU64,
    /// Bytes (keys and values) received.
    pub bytes_in: AtomicU64,
    /// Bytes (keys and values) sent downstream.
    pub bytes_out: AtomicU64,
    /// Records a source read and dropped: a bad timestamp with
    /// `on_bad_timestamp = "skip"` (0 for other nodes).
    pub records_skipped: AtomicU64,
    /// Nanoseconds spent waiting for a full downstream channel (backpressure).
    pub blocked_ns: AtomicU64,
    /// Time per `process` call (operators) or write (sinks).
    pub batch_latency: Histogram,
}

/// What kind of node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A source.
    Source,
    /// An operator.
    Operator,
    /// A sink.
    Sink,
}

impl NodeKind {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Source => "source",
            NodeKind::Operator => "operator",
            NodeKind::Sink => "sink",
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
    /// Checkpoint durations.
    pub duration: Histogram,
    /// Alignment durations.
    pub alignment: Histogram,
    /// Times the job was restored from a checkpoint.
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
}

impl JobMetrics {
    /// Zeroed metrics for every node of `job`.
    pub fn for_job(job: &Job) -> Arc<Self> {
        let nodes = job
            .sources
            .iter()
            .map(|s| (s.id.clone(), NodeKind::Source))
            .chain(
                job.operators
                    .iter()
                    .map(|o| (o.id.clone(), NodeKind::Operator)),
            )
            .chain(job.sinks.iter().map(|s| (s.id.clone(), NodeKind::Sink)))
            .map(|(id, kind)| (id, kind, Arc::new(NodeMetrics::default())))
            .collect();
        Arc::new(JobMetrics {
            job: job.name.clone(),
            nodes,
            checkpoints: CheckpointMetrics::default(),
        })
    }

    /// The counters of node `id`.
    pub fn node(&self, id: &str) -> Option<&Arc<NodeMetrics>> {
        self.nodes
            .iter()
            .find(|(n, _, _)| n == id)
            .map(|(_, _, m)| m)
    }
}
