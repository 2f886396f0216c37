//! The dashboard's JSON documents: [`job`] (the graph with live counters and
//! rates), [`checkpoints`] (the history) and [`events`] (failures, restarts,
//! swaps, savepoints), built from the job's [`JobMetrics`] on request.
//!
//! Rates and backpressure are differences between two samples of the
//! counters at least [`MIN_SAMPLE_GAP`] apart, taken when a document is
//! asked for ([`Sampler`]): nothing is sampled while nobody watches.

use std::sync::Mutex;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use weir::config::{Inputs, Job};
use weir::metrics::{JobMetrics, NodeKind, NodeMetrics};

/// Shortest time between two samples that rates are computed over.
pub const MIN_SAMPLE_GAP: Duration = Duration::from_millis(900);

/// What the dashboard knows of its job besides the live metrics (which
/// name the nodes, in job order, with their instances).
#[derive(Debug)]
pub struct JobView {
    /// Each node's `type` in job order (`None` for an operator).
    connectors: Vec<Option<&'static str>>,
    operators: Vec<String>,
    edges: Value,
    job: String,
    state_dir: String,
    checkpoint: Value,
    started: SystemTime,
    /// Whether actions are enabled (`--ui-actions`).
    pub actions: bool,
}

impl JobView {
    /// The view of `job`, running on `state_dir`.
    pub fn new(job: &Job, state_dir: &std::path::Path, actions: bool) -> JobView {
        let sources = job.sources.iter().map(|s| Some(s.kind));
        let operators = job.operators.iter().map(|_| None);
        let sinks = job.sinks.iter().map(|s| Some(s.kind));
        let c = &job.checkpoint;
        JobView {
            connectors: sources.chain(operators).chain(sinks).collect(),
            operators: job.operators.iter().map(|o| o.id.clone()).collect(),
            edges: edges(job),
            job: job.name.clone(),
            state_dir: state_dir.display().to_string(),
            checkpoint: json!({
                "interval_ms": c.interval.map(|d| d.as_millis() as u64),
                "mode": format!("{:?}", c.mode).to_lowercase(),
                "retain": c.retain,
            }),
            started: SystemTime::now(),
            actions,
        }
    }

    /// The operators' ids, in job order.
    pub fn operators(&self) -> &[String] {
        &self.operators
    }
}

/// Every edge of `job`: from a source or an operator's output port to an
/// operator's input port or a sink (a replay source's to an operator,
/// all its input ports).
fn edges(job: &Job) -> Value {
    let mut edges = Vec::new();
    let mut edge = |up: &weir::config::Upstream, to: &str, input: Value| {
        edges.push(json!({"from": up.node, "output": up.port, "to": to, "input": input}));
    };
    for op in &job.operators {
        match &op.inputs {
            Inputs::Named(ports) => {
                for (port, ups) in ports {
                    ups.iter().for_each(|up| edge(up, &op.id, json!(port)));
                }
            }
            Inputs::Positional(ups) => {
                for (i, up) in ups.iter().enumerate() {
                    edge(up, &op.id, json!(i));
                }
            }
        }
        // Its replayed dead letters go back to each input port.
        if let Some(replay) = job.replay_source(&op.id) {
            edge(
                &weir::config::Upstream::parse(&replay.id),
                &op.id,
                Value::Null,
            );
        }
    }
    for sink in &job.sinks {
        sink.input
            .iter()
            .for_each(|up| edge(up, &sink.id, Value::Null));
    }
    Value::Array(edges)
}

/// One sample of every node's counters.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    /// Per node in job order: records in, records out, blocked ns.
    nodes: Vec<[u64; 3]>,
}

impl Sample {
    fn take(metrics: &JobMetrics) -> Sample {
        let nodes = (metrics.nodes.iter())
            .map(|(_, _, m)| {
                [
                    m.records_in.load(Relaxed),
                    m.records_out.load(Relaxed),
                    m.blocked_ns.load(Relaxed),
                ]
            })
            .collect();
        Sample {
            at: Instant::now(),
            nodes,
        }
    }
}

/// The last two samples, shared by every viewer (see the module docs).
#[derive(Debug, Default)]
pub struct Sampler {
    samples: Mutex<(Option<Sample>, Option<Sample>)>,
}

/// A node's rates between the last two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rates {
    in_per_s: f64,
    out_per_s: f64,
    /// Share of the time its instances waited on a full channel, 0..=1.
    backpressure: f64,
}

impl Sampler {
    /// Samples when the newest sample is older than [`MIN_SAMPLE_GAP`] and
    /// returns each node's rates over the last two samples (`None` until
    /// there are two).
    fn rates(&self, metrics: &JobMetrics) -> Vec<Option<Rates>> {
        let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if s.1
            .as_ref()
            .is_none_or(|n| n.at.elapsed() >= MIN_SAMPLE_GAP)
        {
            let newest = Sample::take(metrics);
            s.0 = s.1.replace(newest);
        }
        let (Some(old), Some(new)) = (&s.0, &s.1) else {
            return vec![None; metrics.nodes.len()];
        };
        let secs = new.at.duration_since(old.at).as_secs_f64().max(1e-9);
        let instances = metrics.nodes.iter().map(|(_, _, m)| m.instances().len());
        (old.nodes.iter().zip(&new.nodes).zip(instances))
            .map(|((a, b), n)| {
                let d = |i: usize| b[i].saturating_sub(a[i]) as f64;
                Some(Rates {
                    in_per_s: d(0) / secs,
                    out_per_s: d(1) / secs,
                    backpressure: (d(2) / 1e9 / secs / n.max(1) as f64).clamp(0.0, 1.0),
                })
            })
            .collect()
    }
}

/// `/api/job`: the job, its graph and every node's counters and rates.
pub fn job(view: &JobView, metrics: &JobMetrics, sampler: &Sampler) -> Value {
    let rates = sampler.rates(metrics);
    let plugins = metrics.journal.plugins();
    let nodes: Vec<Value> = (view.connectors.iter().zip(&metrics.nodes).zip(rates))
        .map(|((connector, (id, kind, m)), rates)| {
            let mut v = counters(m, *kind);
            v["id"] = json!(id);
            v["kind"] = json!(kind.name());
            v["type"] = json!(connector);
            v["instances"] = json!(m.instances().len());
            v["rates"] = rates.map_or(Value::Null, |r| {
                json!({"in_per_s": r.in_per_s, "out_per_s": r.out_per_s, "backpressure": r.backpressure})
            });
            if *kind == NodeKind::Operator {
                v["plugin"] = json!(plugins.get(id));
            }
            v
        })
        .collect();
    let c = &metrics.checkpoints;
    let now = SystemTime::now();
    json!({
        "job": view.job,
        "state_dir": view.state_dir,
        "started_at_ms": weir::time::unix_ms(view.started),
        "uptime_ms": now.duration_since(view.started).unwrap_or_default().as_millis() as u64,
        "actions": view.actions,
        "checkpoint": view.checkpoint,
        "nodes": nodes,
        "edges": view.edges,
        "checkpoints": {
            "completed": c.completed.load(Relaxed),
            "failed": c.failed.load(Relaxed),
            "last_id": c.last_id.load(Relaxed),
            "restarts": c.restarts.load(Relaxed),
        },
        "journal": metrics.journal.changes(),
    })
}

/// The counters of one node, and its event time when it has any.
fn counters(m: &NodeMetrics, kind: NodeKind) -> Value {
    let mut v = json!({
        "records_in": m.records_in.load(Relaxed),
        "records_out": m.records_out.load(Relaxed),
        "bytes_in": m.bytes_in.load(Relaxed),
        "bytes_out": m.bytes_out.load(Relaxed),
        "blocked_ms": m.blocked_ns.load(Relaxed) / 1_000_000,
        "batch_latency": {
            "count": m.batch_latency.count(),
            "sum_seconds": m.batch_latency.sum_seconds(),
        },
    });
    if kind == NodeKind::Source {
        v["records_skipped"] = json!(m.records_skipped.load(Relaxed));
    }
    v["records_bad"] = json!(m.records_bad.total());
    let by_kind: serde_json::Map<String, Value> = (kind.bad_kinds().iter())
        .map(|&k| (k.name().to_owned(), json!(m.records_bad.get(k))))
        .collect();
    v["records_bad_by_kind"] = by_kind.into();
    if kind == NodeKind::Sink {
        let h = &m.record_latency;
        let buckets: Vec<Value> = h.buckets().map(|(le, n)| json!([le, n])).collect();
        v["record_latency"] = json!({
            "count": h.count(),
            "sum_seconds": h.sum_seconds(),
            "buckets": buckets,
        });
    }
    let watermark = |w: Option<i64>| match w {
        Some(i64::MAX) => json!("end"),
        w => json!(w),
    };
    v["event_time"] = json!(m.has_event_time());
    v["watermark_ms"] = watermark(m.watermark());
    if kind != NodeKind::Sink {
        let each: Vec<Value> = (m.instances().iter())
            .map(|t| {
                json!({
                    "watermark_ms": watermark(t.watermark()),
                    "event_timers": t.event_timers(),
                    "processing_timers": t.processing_timers(),
                })
            })
            .collect();
        v["event_timers"] = json!(m.event_timers());
        v["processing_timers"] = json!(m.processing_timers());
        v["per_instance"] = json!(each);
    }
    v
}

/// `GET /api/shadow`: per operator, the last `weir shadow` report kept in
/// `state_dir` (`weir_cli::shadow::last_report_path`) summed up, or `null`:
/// what the page shows beside the swap button.
pub fn shadow_reports(state_dir: &std::path::Path, operators: &[String]) -> Value {
    let mut out = serde_json::Map::new();
    for op in operators {
        let path = crate::shadow::last_report_path(state_dir, op);
        let report = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        out.insert(
            op.clone(),
            report.as_ref().map_or(Value::Null, shadow_summary),
        );
    }
    json!({ "operators": out })
}

/// A shadow report's lines the page shows.
fn shadow_summary(r: &Value) -> Value {
    let ports = r["outputs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let sum = |keys: &[&str]| -> u64 {
        (ports.iter())
            .flat_map(|p| keys.iter().map(move |k| p[k].as_u64().unwrap_or(0)))
            .sum()
    };
    let errors = r["errors"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let state = &r["state"];
    let state_differing = ["changed", "only_v1", "only_v2"]
        .iter()
        .map(|k| state[k].as_u64().unwrap_or(0))
        .sum::<u64>();
    json!({
        "v2": { "name": r["v2"]["name"], "version": r["v2"]["version"], "path": r["v2"]["path"] },
        "from_checkpoint": r["from_checkpoint"],
        "to_checkpoint": r["to_checkpoint"],
        "epochs": r["epochs"].as_array().map_or(0, Vec::len),
        "same": sum(&["same"]),
        "differing": sum(&["changed", "only_v1", "only_v2"]),
        "state_differing": state_differing,
        "errors": errors.len(),
        "traps": errors.iter().filter(|e| e["kind"] == "trap").count(),
        "v1_reproduced": r["v1_reproduced"],
    })
}

/// `/api/checkpoints`: the recent checkpoints, newest first, with totals.
pub fn checkpoints(metrics: &JobMetrics) -> Value {
    // Counts read before the journal: every checkpoint counted is
    // journaled by then.
    let c = &metrics.checkpoints;
    let (completed, failed) = (c.completed.load(Acquire), c.failed.load(Acquire));
    let mut history = metrics.journal.checkpoints();
    history.reverse();
    json!({
        "completed": completed,
        "failed": failed,
        "unaligned": c.unaligned.load(Relaxed),
        "history": history,
    })
}

/// `/api/events`: the recent events, newest first.
pub fn events(metrics: &JobMetrics) -> Value {
    // Read before the journal: every restart counted is journaled by then.
    let restarts = metrics.checkpoints.restarts.load(Acquire);
    let mut events = metrics.journal.events();
    events.reverse();
    json!({ "restarts": restarts, "events": events })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// `text` parsed as a job file in a folder holding its plugin file
    /// (empty: parsing only checks that it exists).
    fn job_file(text: &str) -> Job {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wc.wasm"), b"").unwrap();
        Job::parse(
            &dir.path().join("job.toml"),
            text,
            &weir_connectors::registry(),
        )
        .unwrap()
    }

    const JOB: &str = r#"
name = "j"
[[source]]
id = "words"
type = "generator"
count = 10
[[operator]]
id = "count"
plugin = "wc.wasm"
inputs = ["words"]
parallelism = 2
[[sink]]
id = "out"
type = "stdout"
input = "count"
"#;

    #[test]
    fn the_graph_names_every_node_and_edge_with_counters() {
        let job = job_file(JOB);
        let metrics = JobMetrics::for_job(&job);
        metrics.nodes[1].2.records_in.store(5, Relaxed);
        (metrics.nodes[1].2.records_bad).add(weir::metrics::BadKind::InvalidInput, 2);
        let view = JobView::new(&job, std::path::Path::new("/s"), false);
        let v = super::job(&view, &metrics, &Sampler::default());
        let ids: Vec<&str> = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["words", "count", "out"]);
        assert_eq!(v["nodes"][0]["type"], "generator");
        assert_eq!(v["nodes"][1]["instances"], 2);
        assert_eq!(v["nodes"][1]["records_in"], 5);
        assert_eq!(
            v["nodes"][1]["records_bad"], 2,
            "an operator's, by on_error"
        );
        assert_eq!(
            v["nodes"][1]["records_bad_by_kind"],
            json!({"trap": 0, "invalid-input": 2, "failed": 0}),
            "an operator's kinds"
        );
        assert_eq!(
            v["nodes"][2]["records_bad_by_kind"],
            json!({"refused": 0}),
            "a sink's kinds"
        );
        assert_eq!(v["nodes"][1]["per_instance"].as_array().unwrap().len(), 2);
        assert_eq!(v["nodes"][2]["type"], "stdout");
        assert_eq!(v["nodes"][1]["rates"], Value::Null, "one sample only");
        assert_eq!(
            v["edges"],
            json!([
                {"from": "words", "output": null, "to": "count", "input": 0},
                {"from": "count", "output": null, "to": "out", "input": null},
            ])
        );
        assert_eq!(v["checkpoint"]["mode"], "aligned");
        assert_eq!(view.operators(), ["count"]);
    }

    #[test]
    fn rates_and_backpressure_are_over_the_last_two_samples() {
        let job = job_file(JOB);
        let metrics: Arc<JobMetrics> = JobMetrics::for_job(&job);
        let sampler = Sampler::default();
        assert_eq!(sampler.rates(&metrics), vec![None; 3]);
        let op = &metrics.nodes[1].2;
        op.records_in.store(1000, Relaxed);
        // Both instances blocked the whole time: more than the wall time.
        op.blocked_ns.store(10_000_000_000, Relaxed);
        // Too soon: the same single sample.
        assert_eq!(sampler.rates(&metrics), vec![None; 3]);
        {
            let mut s = sampler.samples.lock().unwrap();
            let first = s.1.as_mut().unwrap();
            first.at -= Duration::from_secs(1);
        }
        let rates = sampler.rates(&metrics);
        let r = rates[1].unwrap();
        assert!((900.0..=1000.0).contains(&r.in_per_s), "{r:?}");
        assert_eq!(r.backpressure, 1.0, "clamped");
        assert_eq!(rates[0].unwrap().in_per_s, 0.0);
    }

    #[test]
    fn watermarks_read_as_numbers_none_or_end() {
        let m = NodeMetrics::new(2);
        m.set_event_time(0, Some(i64::MAX), 0, 0);
        m.set_event_time(1, Some(42), 3, 1);
        let v = counters(&m, NodeKind::Operator);
        assert_eq!(v["watermark_ms"], 42);
        assert_eq!(v["per_instance"][0]["watermark_ms"], "end");
        assert_eq!(
            (v["event_timers"].clone(), v["processing_timers"].clone()),
            (json!(3), json!(1))
        );
        let none = counters(&NodeMetrics::new(1), NodeKind::Sink);
        assert_eq!(none["watermark_ms"], Value::Null);
        assert!(none.get("per_instance").is_none());
    }
}
