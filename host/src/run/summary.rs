//! What a finished run did ([`RunSummary`]) and the reports `weir run`
//! prints: [`format_summary`] for a person, [`summary_json`] for a program
//! (`weir run --json`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::config::Job;
use crate::metrics::JobMetrics;

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
    /// Per node (sources, operators, sinks, as the job file lists them): id, records in,
    /// records out, records skipped (by a source, for a bad timestamp).
    pub nodes: Vec<(String, u64, u64, u64)>,
}

/// Per node of `metrics` (sources, operators, sinks, as the job file lists
/// them): id, records in, records out, records skipped.
pub(crate) fn node_counts(metrics: &JobMetrics) -> Vec<(String, u64, u64, u64)> {
    metrics
        .nodes
        .iter()
        .map(|(id, _, m)| {
            (
                id.clone(),
                m.records_in.load(Ordering::Relaxed),
                m.records_out.load(Ordering::Relaxed),
                m.records_skipped.load(Ordering::Relaxed),
            )
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
    let width = s.nodes.iter().map(|n| n.0.len()).max().unwrap_or(0);
    for (id, records_in, records_out, skipped) in &s.nodes {
        let kind = node_kind(job, id);
        out.push_str(&format!(
            "  {kind:<8} {id:<width$}  in {records_in:>12}  out {records_out:>12}"
        ));
        if *skipped > 0 {
            out.push_str(&format!("  skipped {skipped} (bad timestamp)"));
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
///             "records_skipped": 0}]}
/// ```
///
/// `records_skipped` is only on sources.
pub fn summary_json(job: &Job, s: &RunSummary) -> serde_json::Value {
    let nodes: Vec<serde_json::Value> = s
        .nodes
        .iter()
        .map(|(id, records_in, records_out, skipped)| {
            let kind = node_kind(job, id);
            let mut node = serde_json::json!({
                "id": id,
                "kind": kind,
                "records_in": records_in,
                "records_out": records_out,
            });
            if kind == "source" {
                node["records_skipped"] = (*skipped).into();
            }
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
