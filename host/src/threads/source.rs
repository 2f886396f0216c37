//! The source thread: reads batches and sends them downstream, injects
//! barriers when the driver triggers a checkpoint, and ends the stream when
//! told to finish.
//!
//! Invariants:
//! - A source acknowledges checkpoint `n` with the offset right after the
//!   last record it sent, then announces and sends `Barrier(n)` (or sends
//!   `End(n)`) on every
//!   outgoing channel, so the records before the barrier are exactly those
//!   before the offset.
//! - The offset also holds the highest timestamp sent (`max_timestamp`),
//!   so a restored source's watermarks continue from where they were
//!   instead of starting over: what was late before a crash is late after.
//! - Watermarks and `Idle` follow the batches they describe on every
//!   outgoing channel; at the end of its input a source sends the end of
//!   time ([`SourceWatermark`]).
//! - The watermark in `metrics` is the last one the source sent.
//! - The records a read could not make records of go as its `on_error`
//!   says ([`BadRecords`]), before the next barrier: dead letters on the
//!   dead-letter port, or the source fails.
//! - A source whose records do not move event time (replayed dead
//!   letters) sends `Idle` first and after each batch.
//! - Each batch carries its place in the input ([`Provenance`]); the first
//!   `narrow` records of an attempt go one per batch, so that a failure
//!   downstream names the one record it failed on.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::connectors::replay::StillReading;
use crate::connectors::source::SourceReader;
use crate::dataflow::cancel::{Cancelled, POLL};
use crate::dataflow::output::Output;
use crate::dataflow::protocol::{Ack, Event, Msg, SourceCtl};
use crate::dataflow::provenance::Provenance;
use crate::dataflow::watermark::SourceWatermark;
use crate::metrics::NodeMetrics;
use crate::threads::Shared;
use crate::threads::bad_records::BadRecords;

/// The offset field holding the highest timestamp a source sent.
const MAX_TIMESTAMP: &str = "max_timestamp";

/// The highest timestamp a source had sent at the checkpoint whose offset
/// is `offset`.
pub(crate) fn restored_max_timestamp(offset: Option<&Value>) -> Option<i64> {
    offset?.get(MAX_TIMESTAMP)?.as_i64()
}

/// `offset` with the highest timestamp sent, when there is one (an offset
/// that is not a JSON object cannot hold it).
fn with_max_timestamp(mut offset: Value, max: Option<i64>) -> Value {
    if let (Value::Object(fields), Some(max)) = (&mut offset, max) {
        fields.insert(MAX_TIMESTAMP.into(), max.into());
    }
    offset
}

/// A source thread.
pub(crate) struct SourceTask {
    /// The attempt's cancel flag and events.
    pub shared: Shared,
    /// Source id.
    pub id: String,
    /// The opened source.
    pub reader: Box<dyn SourceReader>,
    /// Records per batch at most.
    pub batch_size: usize,
    /// Records sent one per batch first (to find a failing record).
    pub narrow: u64,
    /// Records per second at most, if limited.
    pub rate: Option<u64>,
    /// Commands from the driver.
    pub ctl: Receiver<SourceCtl>,
    /// Its outgoing edges.
    pub out: Output,
    /// Its watermark state.
    pub watermark: SourceWatermark,
    /// Its counters (records skipped, the watermark it sent; `out` counts
    /// the records sent).
    pub metrics: Arc<NodeMetrics>,
    /// What becomes of the records it cannot read (`on_error`).
    pub bad: BadRecords,
    /// The count of sources still reading it belongs to, if replay
    /// sources wait for it ([`StillReading`]).
    pub still_reading: Option<StillReading>,
}

impl SourceTask {
    /// The thread body: streams batches until finished or cancelled.
    pub(crate) fn stream_batches(self) -> Result<(), Cancelled> {
        let SourceTask {
            shared,
            id,
            mut reader,
            batch_size,
            narrow,
            rate,
            ctl,
            mut out,
            mut watermark,
            metrics,
            mut bad,
            still_reading,
        } = self;
        // What `reader.skipped()` said last, so each skip is counted once.
        let mut skipped = 0;
        let published = |w: i64| metrics.set_event_time(0, Some(w), 0, 0);
        let mut at_end = false;
        // With a rate limit, small batches (about 20 per second) keep it smooth.
        let batch_size = rate.map_or(batch_size, |r| batch_size.min((r / 20).max(1) as usize));
        let started = Instant::now();
        let mut sent: u64 = 0;
        // A live source had nothing on the last read.
        let mut idle = false;
        // A source whose records do not move event time never holds it back.
        let timeless = !reader.moves_event_time();
        if timeless {
            out.broadcast(&shared.cancel, || Msg::Idle)?;
        }
        loop {
            if shared.cancelled() {
                return Err(Cancelled);
            }
            let throttled = rate.is_some_and(|r| {
                started.elapsed() < Duration::from_secs_f64(sent as f64 / r as f64)
            });
            let wait = if at_end {
                Some(POLL)
            } else if throttled || idle {
                Some(Duration::from_millis(5))
            } else {
                None
            };
            let cmd = match wait {
                Some(wait) => match ctl.recv_timeout(wait) {
                    Ok(c) => Some(c),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return Err(Cancelled),
                },
                None => ctl.try_recv().ok(),
            };
            let ack = |n| {
                let offset = with_max_timestamp(reader.offset(), watermark.max_timestamp());
                let source = id.clone();
                shared.event(Event::Ack(n, Ack::Source { source, offset }));
            };
            match cmd {
                Some(SourceCtl::Trigger(n)) => {
                    ack(n);
                    out.broadcast_barrier(&shared.cancel, n)?;
                    bad.barrier(n);
                    continue;
                }
                Some(SourceCtl::Finish(n)) => {
                    ack(n);
                    return out.broadcast(&shared.cancel, || Msg::End(n));
                }
                Some(SourceCtl::Release(offset)) => {
                    reader.release(&offset);
                    continue;
                }
                None => {}
            }
            if at_end {
                continue;
            }
            let now = Instant::now();
            if let Some(w) = watermark.due(now) {
                out.broadcast(&shared.cancel, || Msg::Watermark(w))?;
                published(w);
            }
            if watermark.became_idle(now) {
                out.broadcast(&shared.cancel, || Msg::Idle)?;
            }
            if throttled {
                continue;
            }
            idle = false;
            let read = reader.read_batch(if sent < narrow { 1 } else { batch_size });
            let now_skipped = reader.skipped();
            metrics
                .records_skipped
                .fetch_add(now_skipped - skipped, Ordering::Relaxed);
            skipped = now_skipped;
            // Before the records read with them: a source's dead letters
            // and its records reach the barrier after them alike.
            let handled = bad.read(reader.take_bad(), &metrics);
            bad.send(handled, &mut out, &shared)?;
            match read {
                Ok(Some(batch)) if batch.is_empty() => {
                    idle = true;
                    if reader.signalled() {
                        let idle_after = watermark.idle_timeout();
                        let now = Instant::now();
                        watermark
                            .on_records(|| reader.watermark_timestamp(&batch, idle_after), now);
                    }
                }
                Ok(Some(mut batch)) => {
                    sent += batch.len() as u64;
                    let idle_after = watermark.idle_timeout();
                    let now = Instant::now();
                    batch.set_origin(now);
                    let place = reader.place();
                    batch.set_provenance(place.map(|place| {
                        let (source, records) = (id.clone(), batch.len());
                        Arc::new(Provenance {
                            source,
                            place,
                            records,
                        })
                    }));
                    watermark.on_records(|| reader.watermark_timestamp(&batch, idle_after), now);
                    out.send(&shared.cancel, reader.output_port(), batch)?;
                    if timeless {
                        out.broadcast(&shared.cancel, || Msg::Idle)?;
                    }
                }
                Ok(None) => {
                    at_end = true;
                    if let Some(count) = &still_reading {
                        count.ended();
                    }
                    if let Some(w) = watermark.at_end() {
                        out.broadcast(&shared.cancel, || Msg::Watermark(w))?;
                        published(w);
                    }
                    shared.event(Event::SourceAtEnd(id.clone()));
                }
                Err(e) => return Err(shared.fail(e)),
            }
        }
    }
}
