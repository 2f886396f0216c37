//! What a finished run did ([`RunSummary`]) and the reports `weir run`
//! prints: [`format_summary`] for a person, [`summary_json`] for a program
//! (`weir run --json`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::config::Job;
use crate::metrics::{BadKind, JobMetrics};

/// What a finished run did.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The checkpoint the run resumed from.
    pub restored_from: Option<u64>,
    /// Checkpoints completed during this run (including the final one).
    pub checkpoints: u64,
    /// The last completed checkpoint.
    pub last_checkpoint: Option<u64>,
    /// Whether the job reached the end of its input (else it was stopped).
    pub finished: bool,
    /// Wall time of the run.
    pub duration: Duration,
    /// Restarts after failures (see the job's `[restart]` strategy).
    pub restarts: u32,
    /// Per node: sources, operators, sinks, as the job file lists them.
    pub nodes: Vec<NodeCounts>,
}

/// What a node of a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCounts {
    /// Its id.
    pub id: String,
    /// Records received.
    pub records_in: u64,
    /// Records sent on (a sink's: delivered).
    pub records_out: u64,
    /// Records a source dropped for a bad timestamp
    /// (`on_bad_timestamp = "skip"`).
    pub skipped: u64,
    /// Records it could not handle and went on past, as its `on_error`
    /// says (skipped, or sent to a dead-letter sink).
    pub bad: u64,
    /// Those by kind, the kinds it met only.
    pub bad_kinds: Vec<(BadKind, u64)>,
}

/// What each node of `metrics` did (sources, operators, sinks, as the job
/// file lists them).
pub(crate) fn node_counts(metrics: &JobMetrics) -> Vec<NodeCounts> {
    let load = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
    (metrics.nodes.iter())
        .map(|(id, _, m)| NodeCounts {
            id: id.clone(),
            records_in: load(&m.records_in),
            records_out: load(&m.records_out),
            skipped: load(&m.records_skipped),
            bad: m.records_bad.total(),
            bad_kinds: (BadKind::ALL.iter())
                .map(|&k| (k, m.records_bad.get(k)))
                .filter(|&(_, n)| n > 0)
                .collect(),
        })
        .collect()
}

/// The summary `weir run` prints at the end.
pub fn format_summary(job: &Job, s: &RunSummary) -> String {
    let mut out = format!(
        "job `{}` {} in {:.2} s: {} checkpoint(s){}{}{}\n",
        job.name,
        if s.finished { "finished" } else { "stopped" },
        s.duration.as_secs_f64(),
        s.checkpoints,
        s.last_checkpoint
            .map(|c| format!(", last {c}"))
            .unwrap_or_default(),
        s.restored_from
            .map(|c| format!(", resumed from checkpoint {c}"))
            .unwrap_or_default(),
        if s.restarts > 0 {
            format!(", {} restart(s) after failures", s.restarts)
        } else {
            String::new()
        },
    );
    let width = s.nodes.iter().map(|n| n.id.len()).max().unwrap_or(0);
    for n in &s.nodes {
        let (id, records_in, records_out) = (&n.id, n.records_in, n.records_out);
        let kind = node_kind(job, id);
        out.push_str(&format!(
            "  {kind:<8} {id:<width$}  in {records_in:>12}  out {records_out:>12}"
        ));
        if n.skipped > 0 {
            out.push_str(&format!("  skipped {} (bad timestamp)", n.skipped));
        }
        if n.bad > 0 {
            let kinds: Vec<String> = (n.bad_kinds.iter())
                .map(|(k, n)| format!("{n} {}", k.name()))
                .collect();
            out.push_str(&format!("  bad {} (on_error: {})", n.bad, kinds.join(", ")));
        }
        out.push('\n');
    }
    out
}

/// `source`, `operator` or `sink`: what node `id` of `job` is.
fn node_kind(job: &Job, id: &str) -> &'static str {
    if job.sources.iter().any(|x| x.id == id) {
        "source"
    } else if job.sinks.iter().any(|x| x.id == id) {
        "sink"
    } else {
        "operator"
    }
}

/// The summary as one JSON object, the shape `weir run --json` prints
/// (documented in docs/reference/cli.md; fields are only ever added):
///
/// ```json
/// {"job": "wordcount", "finished": true, "duration_secs": 1.25,
///  "checkpoints": 3, "last_checkpoint": 3, "restored_from": null,
///  "restarts": 0,
///  "nodes": [{"id": "text", "kind": "source", "records_in": 0, "records_out": 9,
///             "records_skipped": 0, "records_bad": 0,
///             "records_bad_by_kind": {}}]}
/// ```
///
/// `records_skipped` is only on sources; `records_bad` and
/// `records_bad_by_kind` (the kinds met, as `BadKind::name` says them) are
/// on every node.
pub fn summary_json(job: &Job, s: &RunSummary) -> serde_json::Value {
    let nodes: Vec<serde_json::Value> = s
        .nodes
        .iter()
        .map(|n| {
            let kind = node_kind(job, &n.id);
            let mut node = serde_json::json!({
                "id": n.id,
                "kind": kind,
                "records_in": n.records_in,
                "records_out": n.records_out,
            });
            if kind == "source" {
                node["records_skipped"] = n.skipped.into();
            }
            node["records_bad"] = n.bad.into();
            let kinds: serde_json::Map<String, serde_json::Value> = (n.bad_kinds.iter())
                .map(|(k, n)| (k.name().to_owned(), (*n).into()))
                .collect();
            node["records_bad_by_kind"] = kinds.into();
            node
        })
        .collect();
    serde_json::json!({
        "job": job.name,
        "finished": s.finished,
        "duration_secs": s.duration.as_secs_f64(),
        "checkpoints": s.checkpoints,
        "last_checkpoint": s.last_checkpoint,
        "restored_from": s.restored_from,
        "restarts": s.restarts,
        "nodes": nodes,
    })
}
