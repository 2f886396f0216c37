//! The Prometheus endpoint of `weir run --metrics`: [`render`] writes a
//! job's live [`JobMetrics`] in the text exposition format, [`serve`] serves
//! it over HTTP from a background thread.
//!
//! Event time is per instance: `weir_watermark_milliseconds` (sources and
//! operators; no sample while an instance has no watermark, `+Inf` once its
//! input ended) and `weir_pending_timers` (operators, per timer domain).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use weir::metrics::{CheckpointMetrics, Histogram, JobMetrics, NodeKind, NodeMetrics};

use crate::http::{self, Response};

/// Scrapes served at once.
const MAX_CONNECTIONS: usize = 8;

/// `metrics` in the Prometheus text exposition format.
pub fn render(metrics: &JobMetrics) -> String {
    render_all(&[metrics])
}

/// The metrics of several jobs (a worker's tasks, each its own `job`
/// label) in one exposition: each metric family once, its header then the
/// samples of every job; nothing without a job (a worker running no task).
pub fn render_all(jobs: &[&JobMetrics]) -> String {
    let mut out = String::new();
    if jobs.is_empty() {
        return out;
    }
    let labelled: Vec<(String, &JobMetrics)> = jobs.iter().map(|m| (escape(&m.job), *m)).collect();
    // Name, help, the kind of node it is for (all when `None`), value.
    let counters: [(&str, &str, Option<NodeKind>, Getter); 6] = [
        (
            "weir_records_in_total",
            "Records received by a node.",
            None,
            |m| m.records_in.load(Relaxed) as f64,
        ),
        (
            "weir_records_out_total",
            "Records sent downstream by a node; by a sink, records delivered.",
            None,
            |m| m.records_out.load(Relaxed) as f64,
        ),
        (
            "weir_bytes_in_total",
            "Key and value bytes received by a node.",
            None,
            |m| m.bytes_in.load(Relaxed) as f64,
        ),
        (
            "weir_bytes_out_total",
            "Key and value bytes sent downstream by a node.",
            None,
            |m| m.bytes_out.load(Relaxed) as f64,
        ),
        (
            "weir_backpressure_seconds_total",
            "Time a node waited on full downstream channels.",
            None,
            |m| m.blocked_ns.load(Relaxed) as f64 / 1e9,
        ),
        (
            "weir_source_records_skipped_total",
            "Records a source read and dropped for a bad timestamp.",
            Some(NodeKind::Source),
            |m| m.records_skipped.load(Relaxed) as f64,
        ),
    ];
    for (name, help, only, get) in counters {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (job, metrics) in &labelled {
            let nodes = metrics.nodes.iter();
            for (id, kind, m) in nodes.filter(|(_, k, _)| only.is_none_or(|o| o == *k)) {
                let _ = writeln!(
                    out,
                    "{name}{{job=\"{job}\",node=\"{}\",kind=\"{}\"}} {}",
                    escape(id),
                    kind.name(),
                    get(m)
                );
            }
        }
    }
    bad_records(&labelled, &mut out);
    event_time(&labelled, &mut out);
    // (name, help, the nodes it covers, the histogram, with the kind label)
    type NodeHistogram = (
        &'static str,
        &'static str,
        fn(NodeKind) -> bool,
        fn(&NodeMetrics) -> &Histogram,
        bool,
    );
    let histograms: [NodeHistogram; 2] = [
        (
            "weir_batch_latency_seconds",
            "Time per process call (operators) or write (sinks).",
            |k| k != NodeKind::Source,
            |m| &m.batch_latency,
            true,
        ),
        (
            "weir_sink_record_latency_seconds",
            "Per record, from its source handing it over to the sink's output being out: written (at-least-once) or committed (exactly-once).",
            |k| k == NodeKind::Sink,
            |m| &m.record_latency,
            false,
        ),
    ];
    for (name, help, covers, get, with_kind) in histograms {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (job, metrics) in &labelled {
            for (id, kind, m) in metrics.nodes.iter().filter(|(_, k, _)| covers(*k)) {
                let mut labels = format!("job=\"{job}\",node=\"{}\"", escape(id));
                if with_kind {
                    labels.push_str(&format!(",kind=\"{}\"", kind.name()));
                }
                histogram(get(m), &mut out, name, &labels);
            }
        }
    }
    // (name, type, help, value of a job's checkpoints)
    type JobGauge = (
        &'static str,
        &'static str,
        &'static str,
        fn(&CheckpointMetrics) -> u64,
    );
    let gauges: [JobGauge; 11] = [
        (
            "weir_checkpoints_total",
            "counter",
            "Completed checkpoints.",
            |c| c.completed.load(Relaxed),
        ),
        (
            "weir_checkpoints_failed_total",
            "counter",
            "Checkpoints that failed: the attempt ended while they were in flight, or the store could not write them.",
            |c| c.failed.load(Relaxed),
        ),
        (
            "weir_checkpoints_unaligned_total",
            "counter",
            "Completed checkpoints that some operator instance took unaligned.",
            |c| c.unaligned.load(Relaxed),
        ),
        (
            "weir_checkpoint_inflight_bytes_total",
            "counter",
            "Bytes of in-flight data stored with completed (unaligned) checkpoints.",
            |c| c.inflight_bytes.load(Relaxed),
        ),
        (
            "weir_checkpoint_last_id",
            "gauge",
            "Id of the last completed checkpoint.",
            |c| c.last_id.load(Relaxed),
        ),
        (
            "weir_checkpoint_last_bytes",
            "gauge",
            "Bytes written by the last checkpoint.",
            |c| c.last_bytes.load(Relaxed),
        ),
        (
            "weir_checkpoint_last_duration_milliseconds",
            "gauge",
            "Duration of the last checkpoint.",
            |c| c.last_duration_ms.load(Relaxed),
        ),
        (
            "weir_alignment_last_milliseconds",
            "gauge",
            "Longest barrier alignment of the last checkpoint.",
            |c| c.last_alignment_ms.load(Relaxed),
        ),
        (
            "weir_alignment_buffered_bytes",
            "gauge",
            "Most bytes one instance buffered during the last alignment.",
            |c| c.last_alignment_buffered_bytes.load(Relaxed),
        ),
        (
            "weir_checkpoint_pause_last_milliseconds",
            "gauge",
            "Longest pause of an operator instance's thread for the last checkpoint (from its aligned barrier to its acknowledgement).",
            |c| c.last_pause_ms.load(Relaxed),
        ),
        (
            "weir_restarts_total",
            "counter",
            "Times the job was restored from a checkpoint.",
            |c| c.restarts.load(Relaxed),
        ),
    ];
    for (name, kind, help, get) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (job, metrics) in &labelled {
            let _ = writeln!(out, "{name}{{job=\"{job}\"}} {}", get(&metrics.checkpoints));
        }
    }
    type JobHistogram = (
        &'static str,
        &'static str,
        fn(&CheckpointMetrics) -> &Histogram,
    );
    let checkpoint_histograms: [JobHistogram; 3] = [
        (
            "weir_checkpoint_duration_seconds",
            "Checkpoint durations, trigger to complete.",
            |c| &c.duration,
        ),
        (
            "weir_alignment_duration_seconds",
            "Barrier alignment durations.",
            |c| &c.alignment,
        ),
        (
            "weir_checkpoint_pause_duration_seconds",
            "Longest pause of an operator instance's thread per checkpoint.",
            |c| &c.pause,
        ),
    ];
    for (name, help, get) in checkpoint_histograms {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (job, metrics) in &labelled {
            histogram(
                get(&metrics.checkpoints),
                &mut out,
                name,
                &format!("job=\"{job}\""),
            );
        }
    }
    out
}

/// `weir_bad_records_total` of every source and operator of each job (its
/// escaped label, its metrics): one sample per kind of bad record the
/// node can meet (`reason`), zero or not.
fn bad_records(jobs: &[(String, &JobMetrics)], out: &mut String) {
    let name = "weir_bad_records_total";
    let _ = writeln!(
        out,
        "# HELP {name} Records a node could not handle and went on past, as its on_error says (skipped or sent to a dead-letter sink), by reason.\n# TYPE {name} counter"
    );
    for (job, metrics) in jobs {
        for (id, kind, m) in &metrics.nodes {
            for &reason in kind.bad_kinds() {
                let _ = writeln!(
                    out,
                    "{name}{{job=\"{job}\",node=\"{}\",kind=\"{}\",reason=\"{}\"}} {}",
                    escape(id),
                    kind.name(),
                    reason.name(),
                    m.records_bad.get(reason)
                );
            }
        }
    }
}

/// The event-time gauges of every source and operator instance of each
/// job (its escaped label, its metrics).
fn event_time(jobs: &[(String, &JobMetrics)], out: &mut String) {
    let timed = || {
        (jobs.iter()).flat_map(|(job, m)| {
            (m.nodes.iter())
                .filter(|(_, k, _)| *k != NodeKind::Sink)
                .map(move |node| (job, node))
        })
    };
    let name = "weir_watermark_milliseconds";
    let _ = writeln!(
        out,
        "# HELP {name} Current watermark of a source or operator instance, milliseconds since the Unix epoch; +Inf once its input ended, no sample before its first.\n# TYPE {name} gauge"
    );
    for (job, (id, kind, m)) in timed() {
        for (i, t) in m.instances().iter().enumerate() {
            let Some(w) = t.watermark() else { continue };
            let value = if w == i64::MAX {
                "+Inf".to_string()
            } else {
                w.to_string()
            };
            let _ = writeln!(
                out,
                "{name}{{job=\"{job}\",node=\"{}\",kind=\"{}\",instance=\"{i}\"}} {value}",
                escape(id),
                kind.name()
            );
        }
    }
    let name = "weir_pending_timers";
    let _ = writeln!(
        out,
        "# HELP {name} Timers an operator instance has registered that have not fired yet, per domain.\n# TYPE {name} gauge"
    );
    for (job, (id, kind, m)) in timed() {
        if *kind != NodeKind::Operator {
            continue;
        }
        for (i, t) in m.instances().iter().enumerate() {
            for (domain, n) in [
                ("event-time", t.event_timers()),
                ("processing-time", t.processing_timers()),
            ] {
                let _ = writeln!(
                    out,
                    "{name}{{job=\"{job}\",node=\"{}\",kind=\"operator\",instance=\"{i}\",domain=\"{domain}\"}} {n}",
                    escape(id)
                );
            }
        }
    }
}

fn histogram(h: &Histogram, out: &mut String, name: &str, labels: &str) {
    let mut cumulative = 0;
    for (b, n) in h.buckets() {
        cumulative += n;
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
        h.count()
    );
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_seconds());
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count());
}

fn sep(labels: &str) -> &'static str {
    if labels.is_empty() { "" } else { "," }
}

/// Reads one counter of a node.
type Getter = fn(&NodeMetrics) -> f64;

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Serves `metrics` as Prometheus text on `addr` (a GET of any path) from a
/// background thread, with the request limits of [`crate::http`]. Returns
/// the bound address (useful with port 0).
pub fn serve(
    addr: std::net::SocketAddr,
    metrics: Arc<JobMetrics>,
) -> std::io::Result<std::net::SocketAddr> {
    serve_jobs(addr, move || vec![metrics.clone()])
}

/// [`serve`] for the jobs `jobs` returns at each scrape (a worker's tasks
/// come and go), rendered by [`render_all`].
pub fn serve_jobs(
    addr: std::net::SocketAddr,
    jobs: impl Fn() -> Vec<Arc<JobMetrics>> + Send + Sync + 'static,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    let jobs = Arc::new(jobs);
    http::spawn(listener, "metrics", MAX_CONNECTIONS, move |mut conn| {
        let jobs = jobs.clone();
        async move {
            let response = match http::read_request(&mut conn).await {
                Ok(req) if req.method == "GET" => Response {
                    status: 200,
                    content_type: "text/plain; version=0.0.4",
                    body: render_all(&jobs().iter().map(Arc::as_ref).collect::<Vec<_>>())
                        .into_bytes(),
                },
                Ok(req) => Response::error(
                    405,
                    format!(
                        "{} {}: the metrics endpoint takes GET",
                        req.method, req.path
                    ),
                ),
                Err(refused) => refused,
            };
            http::respond(&mut conn, &response).await;
        }
    })?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir::metrics::CheckpointMetrics;

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("line\nbreak"), r"line\nbreak");
        assert_eq!(escape(r"\n"), r"\\n", "a backslash is escaped first");
        assert_eq!(escape("plain-id_1"), "plain-id_1");
    }

    #[test]
    fn every_sample_is_one_line_with_its_labels_escaped() {
        let node = Arc::new(NodeMetrics::default());
        node.records_in.store(7, Relaxed);
        let metrics = JobMetrics {
            job: "j\"1\\\nx".into(),
            nodes: vec![("op\"\\".into(), NodeKind::Operator, node)],
            checkpoints: CheckpointMetrics::default(),
            journal: Default::default(),
        };
        let text = render(&metrics);
        assert!(
            text.contains(
                r#"weir_records_in_total{job="j\"1\\\nx",node="op\"\\",kind="operator"} 7"#
            ),
            "{text}"
        );
        for line in text.lines() {
            assert!(
                line.starts_with("# ") || line.starts_with("weir_"),
                "{line}"
            );
        }
    }

    /// Bad records are counted by reason: each of the node's kinds once,
    /// zero or not.
    #[test]
    fn bad_records_have_a_sample_per_reason_the_node_can_meet() {
        let op = Arc::new(NodeMetrics::default());
        op.records_bad.add(weir::metrics::BadKind::Trap, 2);
        let metrics = JobMetrics {
            job: "j".into(),
            nodes: vec![
                (
                    "in".into(),
                    NodeKind::Source,
                    Arc::new(NodeMetrics::default()),
                ),
                ("op".into(), NodeKind::Operator, op),
                (
                    "out".into(),
                    NodeKind::Sink,
                    Arc::new(NodeMetrics::default()),
                ),
            ],
            checkpoints: CheckpointMetrics::default(),
            journal: Default::default(),
        };
        assert_eq!(
            samples(&render(&metrics), "weir_bad_records_total"),
            [
                r#"weir_bad_records_total{job="j",node="in",kind="source",reason="unreadable"} 0"#,
                r#"weir_bad_records_total{job="j",node="in",kind="source",reason="no-key"} 0"#,
                r#"weir_bad_records_total{job="j",node="in",kind="source",reason="bad-timestamp"} 0"#,
                r#"weir_bad_records_total{job="j",node="op",kind="operator",reason="trap"} 2"#,
                r#"weir_bad_records_total{job="j",node="op",kind="operator",reason="invalid-input"} 0"#,
                r#"weir_bad_records_total{job="j",node="op",kind="operator",reason="failed"} 0"#,
                r#"weir_bad_records_total{job="j",node="out",kind="sink",reason="refused"} 0"#,
            ]
        );
    }

    /// Two tasks' metrics: each family's help and type once, then both
    /// tasks' samples, every family together.
    #[test]
    fn several_jobs_share_each_family_once() {
        let task = |name: &str, n: u64| {
            let node = Arc::new(NodeMetrics::default());
            node.records_in.store(n, Relaxed);
            Arc::new(JobMetrics {
                job: name.into(),
                nodes: vec![("op".into(), NodeKind::Operator, node)],
                checkpoints: CheckpointMetrics::default(),
                journal: Default::default(),
            })
        };
        let (a, b) = (task("j@0-0", 3), task("j@0-1", 5));
        let text = render_all(&[&a, &b]);
        let one = render(&task("j@0-0", 3));
        let heads = |t: &str| t.lines().filter(|l| l.starts_with("# ")).count();
        assert_eq!(heads(&text), heads(&one), "{text}");
        assert_eq!(
            samples(&text, "weir_records_in_total"),
            [
                r#"weir_records_in_total{job="j@0-0",node="op",kind="operator"} 3"#,
                r#"weir_records_in_total{job="j@0-1",node="op",kind="operator"} 5"#
            ]
        );
        // A family's lines are contiguous: its header, then its samples.
        let lines: Vec<&str> = text.lines().collect();
        let at = |s: &str| lines.iter().position(|l| l.starts_with(s)).unwrap();
        assert_eq!(
            at("weir_records_in_total{job=\"j@0-1\""),
            at("# TYPE weir_records_in_total") + 2
        );
        assert_eq!(render_all(&[]), "");
    }

    #[test]
    fn unaligned_checkpoints_and_their_inflight_bytes_are_counted() {
        let metrics = JobMetrics {
            job: "j".into(),
            nodes: Vec::new(),
            checkpoints: CheckpointMetrics::default(),
            journal: Default::default(),
        };
        metrics.checkpoints.unaligned.store(2, Relaxed);
        metrics.checkpoints.failed.store(1, Relaxed);
        metrics.checkpoints.inflight_bytes.store(4096, Relaxed);
        let text = render(&metrics);
        assert!(text.contains("# TYPE weir_checkpoints_unaligned_total counter"));
        assert_eq!(
            samples(&text, "weir_checkpoints_unaligned_total"),
            [r#"weir_checkpoints_unaligned_total{job="j"} 2"#]
        );
        assert_eq!(
            samples(&text, "weir_checkpoints_failed_total"),
            [r#"weir_checkpoints_failed_total{job="j"} 1"#]
        );
        assert_eq!(
            samples(&text, "weir_checkpoint_inflight_bytes_total"),
            [r#"weir_checkpoint_inflight_bytes_total{job="j"} 4096"#]
        );
    }

    /// Every sample line of `text` for metric `name`.
    fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        let prefix = format!("{name}{{");
        text.lines().filter(|l| l.starts_with(&prefix)).collect()
    }

    #[test]
    fn watermarks_and_pending_timers_are_per_instance_gauges() {
        let source = Arc::new(NodeMetrics::new(1));
        let op = Arc::new(NodeMetrics::new(3));
        let sink = Arc::new(NodeMetrics::new(1));
        source.set_event_time(0, Some(1_700_000_000_000), 0, 0);
        op.set_event_time(0, Some(-5), 4, 0);
        op.set_event_time(2, Some(i64::MAX), 0, 2);
        sink.set_event_time(0, Some(9), 0, 0);
        let metrics = JobMetrics {
            job: "j".into(),
            nodes: vec![
                ("src".into(), NodeKind::Source, source),
                ("op".into(), NodeKind::Operator, op),
                ("out".into(), NodeKind::Sink, sink),
            ],
            checkpoints: CheckpointMetrics::default(),
            journal: Default::default(),
        };
        let text = render(&metrics);
        for name in ["weir_watermark_milliseconds", "weir_pending_timers"] {
            assert_eq!(
                text.matches(&format!("# TYPE {name} gauge\n")).count(),
                1,
                "{text}"
            );
            assert_eq!(text.matches(&format!("# HELP {name} ")).count(), 1);
        }
        // Instance 1 has no watermark yet: no sample, never NaN; the end
        // of time is +Inf; a sink has none.
        assert_eq!(
            samples(&text, "weir_watermark_milliseconds"),
            [
                r#"weir_watermark_milliseconds{job="j",node="src",kind="source",instance="0"} 1700000000000"#,
                r#"weir_watermark_milliseconds{job="j",node="op",kind="operator",instance="0"} -5"#,
                r#"weir_watermark_milliseconds{job="j",node="op",kind="operator",instance="2"} +Inf"#,
            ],
            "{text}"
        );
        let timers = samples(&text, "weir_pending_timers");
        assert_eq!(timers.len(), 6, "3 instances x 2 domains: {text}");
        for (line, want) in [
            (timers[0], r#"instance="0",domain="event-time"} 4"#),
            (timers[1], r#"instance="0",domain="processing-time"} 0"#),
            (timers[3], r#"instance="1",domain="processing-time"} 0"#),
            (timers[5], r#"instance="2",domain="processing-time"} 2"#),
        ] {
            let head = r#"weir_pending_timers{job="j",node="op",kind="operator","#;
            assert_eq!(line, format!("{head}{want}"));
        }
        assert!(!text.contains("NaN"), "{text}");
    }

    #[test]
    fn skipped_records_are_counted_per_source() {
        let (source, op) = (Arc::new(NodeMetrics::default()), Arc::default());
        source.records_skipped.store(3, Relaxed);
        let metrics = JobMetrics {
            job: "j".into(),
            nodes: vec![
                ("s".into(), NodeKind::Source, source),
                ("op".into(), NodeKind::Operator, op),
            ],
            checkpoints: CheckpointMetrics::default(),
            journal: Default::default(),
        };
        let text = render(&metrics);
        let name = "weir_source_records_skipped_total";
        let samples: Vec<&str> = text.lines().filter(|l| l.starts_with(name)).collect();
        assert_eq!(
            samples,
            [format!(r#"{name}{{job="j",node="s",kind="source"}} 3"#)]
        );
    }
}
