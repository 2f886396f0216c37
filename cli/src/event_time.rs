//! How `weir` shows event time: a watermark or timer time as text
//! ([`show_time`], [`show_watermark`]), and the watermark and pending timers
//! of a running job's nodes, for the progress display and the run summary
//! ([`node_status`], [`summary`]).
//!
//! Invariant: a job without event time (no node has had a watermark before
//! the end of time or a pending timer, see
//! [`JobMetrics::has_event_time`]) is shown exactly as before event time
//! existed: [`node_status`] and [`summary`] add nothing.

use std::time::Duration;

use weir::metrics::{JobMetrics, NodeKind, NodeMetrics};

/// The end of time, the watermark of a finished input.
const END: i64 = i64::MAX;

/// A time in milliseconds since the Unix epoch as people read it: `end`
/// for the end of time (`i64::MAX`), else RFC 3339, else (outside the
/// years 0 to 9999) the number of milliseconds.
///
/// ```
/// use weir_cli::event_time::show_time;
/// assert_eq!(show_time(i64::MAX), "end");
/// assert_eq!(show_time(86_400_000), "1970-01-02T00:00:00.000Z");
/// assert_eq!(show_time(i64::MIN), "-9223372036854775808 ms");
/// ```
pub fn show_time(ms: i64) -> String {
    if ms == END {
        return "end".into();
    }
    weir::time::format_rfc3339(ms).unwrap_or_else(|| format!("{ms} ms"))
}

/// A watermark as [`show_time`] shows it, `—` for none.
///
/// ```
/// use weir_cli::event_time::show_watermark;
/// assert_eq!(show_watermark(None), "—");
/// assert_eq!(show_watermark(Some(i64::MAX)), "end");
/// ```
pub fn show_watermark(watermark: Option<i64>) -> String {
    watermark.map_or_else(|| "—".into(), show_time)
}

/// How far `watermark` is behind the wall clock `now_ms`: `None` for no
/// watermark, the end of time, or a watermark ahead of the clock.
fn lag(watermark: Option<i64>, now_ms: i64) -> Option<Duration> {
    let w = watermark.filter(|w| *w != END)?;
    let behind = now_ms.checked_sub(w).filter(|d| *d >= 0)?;
    Some(Duration::from_millis(behind as u64))
}

/// A lag as `2.4s` under a minute, else in whole units (`1h 2m 3s`).
fn show_lag(d: Duration) -> String {
    if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

/// What the progress display adds to the line of node `m` of `kind` when
/// the job has event time: the watermark (with its lag behind `now_ms`,
/// the wall clock) for sources and operators, the pending timers for
/// operators. Empty for a job without event time and for sinks.
///
/// ```
/// use weir::metrics::{NodeKind, NodeMetrics};
/// use weir_cli::event_time::node_status;
/// let m = NodeMetrics::new(1);
/// assert_eq!(node_status(&m, NodeKind::Operator, false, 0), "");
/// m.set_event_time(0, Some(1_000), 2, 1);
/// assert_eq!(
///     node_status(&m, NodeKind::Operator, true, 3_500),
///     "  watermark 1970-01-01T00:00:01.000Z (2.5s behind)  timers 2 event-time, 1 processing-time"
/// );
/// ```
pub fn node_status(m: &NodeMetrics, kind: NodeKind, event_time: bool, now_ms: i64) -> String {
    if !event_time || kind == NodeKind::Sink {
        return String::new();
    }
    let watermark = m.watermark();
    let behind = lag(watermark, now_ms)
        .map(|d| format!(" ({} behind)", show_lag(d)))
        .unwrap_or_default();
    let mut s = format!("  watermark {}{behind}", show_watermark(watermark));
    if kind == NodeKind::Operator {
        s.push_str(&format!(
            "  timers {} event-time, {} processing-time",
            m.event_timers(),
            m.processing_timers()
        ));
    }
    s
}

/// The wall clock, milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// The event-time lines of the run summary: each source's and operator's
/// watermark at the end and the timers still pending; `None` for a job
/// without event time.
///
/// ```
/// use std::sync::Arc;
/// use weir::metrics::{CheckpointMetrics, JobMetrics, NodeKind, NodeMetrics};
/// let op = Arc::new(NodeMetrics::new(2));
/// let metrics = JobMetrics {
///     job: "j".into(),
///     nodes: vec![("op".into(), NodeKind::Operator, op.clone())],
///     checkpoints: CheckpointMetrics::default(),
///     journal: Default::default(),
/// };
/// assert_eq!(weir_cli::event_time::summary(&metrics), None);
/// op.set_event_time(0, Some(i64::MAX), 0, 3);
/// op.set_event_time(1, Some(i64::MAX), 0, 0);
/// assert_eq!(
///     weir_cli::event_time::summary(&metrics).unwrap(),
///     "  event time:\n    operator op  watermark end  timers 0 event-time, 3 processing-time pending\n"
/// );
/// ```
pub fn summary(metrics: &JobMetrics) -> Option<String> {
    if !metrics.has_event_time() {
        return None;
    }
    let shown = || {
        metrics
            .nodes
            .iter()
            .filter(|(_, k, _)| *k != NodeKind::Sink)
    };
    let width = shown().map(|(id, _, _)| id.len()).max().unwrap_or(0);
    let mut s = String::from("  event time:\n");
    for (id, kind, m) in shown() {
        s.push_str(&format!(
            "    {:<8} {id:<width$}  watermark {}",
            kind.name(),
            show_watermark(m.watermark())
        ));
        if *kind == NodeKind::Operator {
            s.push_str(&format!(
                "  timers {} event-time, {} processing-time pending",
                m.event_timers(),
                m.processing_timers()
            ));
        }
        s.push('\n');
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_only_for_a_finite_watermark_behind_the_clock() {
        assert_eq!(lag(Some(1000), 4000), Some(Duration::from_secs(3)));
        assert_eq!(lag(Some(5000), 4000), None, "ahead of the clock");
        assert_eq!(lag(Some(END), 4000), None);
        assert_eq!(lag(None, 4000), None);
        assert_eq!(lag(Some(i64::MIN + 1), i64::MAX), None, "no overflow");
        assert_eq!(show_lag(Duration::from_millis(2_440)), "2.4s");
        assert_eq!(show_lag(Duration::from_millis(3_723_500)), "1h 2m 3s");
    }

    #[test]
    fn sinks_and_jobs_without_event_time_show_nothing() {
        let m = NodeMetrics::new(1);
        m.set_event_time(0, Some(5), 1, 0);
        assert_eq!(node_status(&m, NodeKind::Sink, true, 10), "");
        assert_eq!(node_status(&m, NodeKind::Source, false, 10), "");
        assert_eq!(
            node_status(&NodeMetrics::new(1), NodeKind::Source, true, 10),
            "  watermark —"
        );
    }
}
