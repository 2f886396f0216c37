//! Live counters of a running job, shared by the job's threads (writers), the
//! progress display and the Prometheus endpoint (readers). Writers only use
//! relaxed atomic adds, so counting costs a few nanoseconds per batch.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::job::Job;

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

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (b, n) in BUCKETS.iter().zip(&self.buckets) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{}le=\"{b}\"}} {cumulative}",
                sep(labels)
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{}le=\"+Inf\"}} {}",
            sep(labels),
            self.count()
        );
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {}",
            self.sum_ns.load(Relaxed) as f64 / 1e9
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count());
    }
}

fn sep(labels: &str) -> &'static str {
    if labels.is_empty() { "" } else { "," }
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

    /// The metrics in the Prometheus text exposition format.
    pub fn render_prometheus(&self) -> String {
        let mut out = String::new();
        let job = escape(&self.job);
        let counters: [(&str, &str, Getter); 5] = [
            (
                "weir_records_in_total",
                "Records received by a node.",
                |m| m.records_in.load(Relaxed) as f64,
            ),
            (
                "weir_records_out_total",
                "Records sent downstream by a node.",
                |m| m.records_out.load(Relaxed) as f64,
            ),
            (
                "weir_bytes_in_total",
                "Key and value bytes received by a node.",
                |m| m.bytes_in.load(Relaxed) as f64,
            ),
            (
                "weir_bytes_out_total",
                "Key and value bytes sent downstream by a node.",
                |m| m.bytes_out.load(Relaxed) as f64,
            ),
            (
                "weir_backpressure_seconds_total",
                "Time a node waited on full downstream channels.",
                |m| m.blocked_ns.load(Relaxed) as f64 / 1e9,
            ),
        ];
        for (name, help, get) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (id, kind, m) in &self.nodes {
                let _ = writeln!(
                    out,
                    "{name}{{job=\"{job}\",node=\"{}\",kind=\"{}\"}} {}",
                    escape(id),
                    kind.name(),
                    get(m)
                );
            }
        }
        let name = "weir_batch_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time per process call (operators) or write (sinks).\n# TYPE {name} histogram"
        );
        for (id, kind, m) in self.nodes.iter().filter(|(_, k, _)| *k != NodeKind::Source) {
            m.batch_latency.render(
                &mut out,
                name,
                &format!(
                    "job=\"{job}\",node=\"{}\",kind=\"{}\"",
                    escape(id),
                    kind.name()
                ),
            );
        }
        let c = &self.checkpoints;
        let gauges: [(&str, &str, &str, u64); 7] = [
            (
                "weir_checkpoints_total",
                "counter",
                "Completed checkpoints.",
                c.completed.load(Relaxed),
            ),
            (
                "weir_checkpoint_last_id",
                "gauge",
                "Id of the last completed checkpoint.",
                c.last_id.load(Relaxed),
            ),
            (
                "weir_checkpoint_last_bytes",
                "gauge",
                "Bytes written by the last checkpoint.",
                c.last_bytes.load(Relaxed),
            ),
            (
                "weir_checkpoint_last_duration_milliseconds",
                "gauge",
                "Duration of the last checkpoint.",
                c.last_duration_ms.load(Relaxed),
            ),
            (
                "weir_alignment_last_milliseconds",
                "gauge",
                "Longest barrier alignment of the last checkpoint.",
                c.last_alignment_ms.load(Relaxed),
            ),
            (
                "weir_alignment_buffered_bytes",
                "gauge",
                "Most bytes one instance buffered during the last alignment.",
                c.last_alignment_buffered_bytes.load(Relaxed),
            ),
            (
                "weir_restarts_total",
                "counter",
                "Times the job was restored from a checkpoint.",
                c.restarts.load(Relaxed),
            ),
        ];
        for (name, kind, help, v) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{job=\"{job}\"}} {v}"
            );
        }
        for (name, help, h) in [
            (
                "weir_checkpoint_duration_seconds",
                "Checkpoint durations, trigger to complete.",
                &c.duration,
            ),
            (
                "weir_alignment_duration_seconds",
                "Barrier alignment durations.",
                &c.alignment,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            h.render(&mut out, name, &format!("job=\"{job}\""));
        }
        out
    }
}

/// Reads one counter of a node.
type Getter = fn(&NodeMetrics) -> f64;

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Serves `metrics` as Prometheus text on `addr` (any path) from a
/// background thread. Returns the bound address (useful with port 0).
pub fn serve(addr: &str, metrics: Arc<JobMetrics>) -> std::io::Result<std::net::SocketAddr> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let bound = std_listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    std::thread::Builder::new().name("metrics".into()).spawn(move || {
        rt.block_on(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else { return };
            loop {
                let Ok((mut conn, _)) = listener.accept().await else { continue };
                let metrics = metrics.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    // Read the request head; its content does not matter.
                    let _ = conn.read(&mut buf).await;
                    let body = metrics.render_prometheus();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(head.as_bytes()).await;
                    let _ = conn.write_all(body.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
    })?;
    Ok(bound)
}
