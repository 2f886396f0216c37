//! What a source does with the records it reads but cannot make records
//! of ([`BadRecord`]): its `on_error` ([`OnError`]) within its budget
//! `max_bad`. With a dead-letter sink, each becomes a dead letter
//! ([`dead_letter`]) sent on the source's dead-letter port, so it reaches
//! the sink before the barrier of the checkpoint whose offset is past it:
//! exactly once, as any record.
//!
//! Invariants:
//! - With `fail`, the first bad record fails the source with its own
//!   error, as before there was a policy.
//! - Every bad record is counted (`records_bad`), whatever becomes of it,
//!   and the log names the first and then at most one line per
//!   [`LOG_EVERY`].
//! - More than `max_bad` bad records between two checkpoint barriers fail
//!   the source, naming the budget and the last bad record.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::Batch;
use crate::config::OnError;
use crate::connectors::source::{BadRecord, SourceError};
use crate::metrics::NodeMetrics;

/// How often at most the log tells of bad records after the first.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(10);

/// A source's handling of its bad records.
pub(crate) struct BadRecords {
    policy: OnError,
    max_bad: Option<u64>,
    /// The source's id.
    source: String,
    /// The job's name.
    job: String,
    /// The checkpoint the records read now belong to: the next one whose
    /// barrier the source sends.
    checkpoint: u64,
    /// Bad records since the last barrier.
    since_barrier: u64,
    /// When the log last told of bad records, and how many it has not
    /// told of since.
    logged: Option<Instant>,
    untold: u64,
}

impl BadRecords {
    /// The handling of source `source` of job `job` with `policy` and
    /// budget `max_bad`, whose next checkpoint is `checkpoint`.
    pub(crate) fn new(
        (source, job): (&str, &str),
        policy: OnError,
        max_bad: Option<u64>,
        checkpoint: u64,
    ) -> Self {
        BadRecords {
            policy,
            max_bad,
            source: source.to_owned(),
            job: job.to_owned(),
            checkpoint,
            since_barrier: 0,
            logged: None,
            untold: 0,
        }
    }

    /// The barrier of checkpoint `n` was sent: later records belong to
    /// the next, and the budget starts over.
    pub(crate) fn barrier(&mut self, n: u64) {
        self.checkpoint = n + 1;
        self.since_barrier = 0;
    }

    /// Decides about `bad`, read in this order: the dead letters to send
    /// (with a dead-letter sink), or the error that fails the source.
    pub(crate) fn handle(
        &mut self,
        bad: Vec<BadRecord>,
        metrics: &NodeMetrics,
    ) -> Result<Option<Batch>, SourceError> {
        let Some(last) = bad.last() else {
            return Ok(None);
        };
        if self.policy == OnError::Fail {
            return Err(bad.into_iter().next().expect("not empty").error);
        }
        let count = bad.len() as u64;
        metrics.records_bad.fetch_add(count, Ordering::Relaxed);
        self.since_barrier += count;
        if let Some(max) = self.max_bad.filter(|&max| self.since_barrier > max) {
            return Err(SourceError::TooManyBad {
                source_id: self.source.clone(),
                count: self.since_barrier,
                max_bad: max,
                last: format!("{}: {}", last.origin, last.reason()),
            });
        }
        self.log(last, count);
        let OnError::DeadLetter(_) = self.policy else {
            return Ok(None);
        };
        let mut letters = Batch::with_capacity(bad.len(), 0);
        for record in &bad {
            let value = dead_letter(record, (&self.source, &self.job), self.checkpoint);
            letters.push(record.key.as_deref(), &value, record.timestamp);
        }
        Ok(Some(letters))
    }

    /// Logs the first bad record, then at most one line per [`LOG_EVERY`]
    /// for those since.
    fn log(&mut self, last: &BadRecord, count: u64) {
        let what = match self.policy {
            OnError::DeadLetter(ref sink) => format!("sent to sink `{sink}`"),
            _ => "skipped".to_owned(),
        };
        let now = Instant::now();
        self.untold += count;
        match self.logged {
            Some(at) if now.duration_since(at) < LOG_EVERY => return,
            None => tracing::warn!(
                "source `{}`: bad record {what}: {}: {}",
                self.source,
                last.origin,
                last.reason()
            ),
            Some(_) => tracing::warn!(
                "source `{}`: {} more bad record(s) {what}; the last: {}: {}",
                self.source,
                self.untold,
                last.origin,
                last.reason()
            ),
        }
        self.logged = Some(now);
        self.untold = 0;
    }
}

/// The dead letter of `record`, read by source `source` of job `job` into
/// checkpoint `checkpoint`: a JSON object with what went wrong (`error`),
/// where (`job`, `node`, `kind`, `origin`, `checkpoint`) and the record
/// itself (`key`, `value`, `timestamp`; bytes that are not UTF-8 as
/// `key_base64` / `value_base64`).
pub(crate) fn dead_letter(
    record: &BadRecord,
    (source, job): (&str, &str),
    checkpoint: u64,
) -> Vec<u8> {
    let mut letter = json!({
        "error": record.reason(),
        "job": job,
        "node": source,
        "kind": "source",
        "origin": record.origin,
        "checkpoint": checkpoint,
        "timestamp": record.timestamp,
    });
    let fields = letter.as_object_mut().expect("an object");
    for (name, bytes) in [
        ("key", record.key.as_deref()),
        ("value", Some(&record.value[..])),
    ] {
        let Some(bytes) = bytes else {
            fields.insert(name.to_owned(), Value::Null);
            continue;
        };
        match std::str::from_utf8(bytes) {
            Ok(text) => fields.insert(name.to_owned(), text.into()),
            Err(_) => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
                fields.insert(format!("{name}_base64"), encoded.into())
            }
        };
    }
    letter.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(line: u64, value: &[u8]) -> BadRecord {
        BadRecord {
            error: SourceError::Malformed {
                source_id: "in".into(),
                path: "in.jsonl".into(),
                line,
                message: "not JSON: expected value".into(),
            },
            origin: format!("in.jsonl line {line}"),
            key: None,
            value: value.to_vec(),
            timestamp: Some(7),
        }
    }

    fn handling(policy: OnError, max_bad: Option<u64>) -> BadRecords {
        BadRecords::new(("in", "job"), policy, max_bad, 4)
    }

    /// `fail` fails with the first bad record's own error; nothing is
    /// counted.
    #[test]
    fn fail_fails_with_the_first_bad_record() {
        let m = NodeMetrics::default();
        let err = handling(OnError::Fail, None)
            .handle(vec![bad(3, b"{"), bad(5, b"x")], &m)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "source `in`: in.jsonl:3: not JSON: expected value"
        );
        assert_eq!(m.records_bad.load(Ordering::Relaxed), 0);
    }

    /// A dead letter holds the error, where the record came from and the
    /// record as read; bytes that are not text are base64.
    #[test]
    fn dead_letters_say_what_was_wrong_and_where() {
        let m = NodeMetrics::default();
        let mut h = handling(OnError::DeadLetter("dlq".into()), None);
        let letters = h
            .handle(vec![bad(3, b"{"), bad(5, b"\xff")], &m)
            .unwrap()
            .unwrap();
        assert_eq!(letters.len(), 2);
        let first: Value = serde_json::from_slice(letters.get(0).value).unwrap();
        assert_eq!(
            first,
            json!({"error": "not JSON: expected value", "job": "job", "node": "in",
                   "kind": "source", "origin": "in.jsonl line 3", "checkpoint": 4,
                   "timestamp": 7, "key": null, "value": "{"})
        );
        assert_eq!(letters.get(0).timestamp, Some(7));
        let second: Value = serde_json::from_slice(letters.get(1).value).unwrap();
        assert_eq!(second["value_base64"], "/w==");
        assert!(second.get("value").is_none());
        h.barrier(4);
        let later = h.handle(vec![bad(9, b"[")], &m).unwrap().unwrap();
        let later: Value = serde_json::from_slice(later.get(0).value).unwrap();
        assert_eq!(later["checkpoint"], 5, "read after barrier 4");
        assert_eq!(m.records_bad.load(Ordering::Relaxed), 3);
    }

    /// `skip` counts and sends nothing; past `max_bad` between two
    /// barriers the source fails, naming the budget and the last record.
    #[test]
    fn skip_counts_and_the_budget_is_per_checkpoint() {
        let m = NodeMetrics::default();
        let mut h = handling(OnError::Skip, Some(2));
        assert!(
            h.handle(vec![bad(1, b"{"), bad(2, b"{")], &m)
                .unwrap()
                .is_none()
        );
        h.barrier(4);
        assert!(h.handle(vec![bad(3, b"{")], &m).unwrap().is_none());
        let err = h.handle(vec![bad(4, b"{"), bad(6, b"{")], &m).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("3 bad records since its last checkpoint, more than max_bad = 2"),
            "{text}"
        );
        assert!(text.contains("in.jsonl line 6: not JSON"), "{text}");
        assert_eq!(m.records_bad.load(Ordering::Relaxed), 5);
    }
}
