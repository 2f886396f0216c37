//! `window-count`: per key, counts records in event-time windows.
//!
//! Config (JSON): `{"size": "10s"}` (tumbling), `{"size": "10s", "slide":
//! "5s"}` (sliding) or `{"gap": "30s"}` (session), with an optional
//! `"allowed_lateness"` (see `weir_sdk::window`). Records need a key and a
//! timestamp (set the source's `key` and `timestamp`).
//!
//! When the watermark passes a window's end (plus the allowed lateness), it
//! emits exactly once, on port `out`, keyed by the key, with timestamp
//! `window_end - 1`:
//!
//! `{"key": "<k>", "window_start": <ms>, "window_end": <ms>, "count": <n>}`
//!
//! Tumbling windows start at multiples of `size` since the epoch, sliding
//! ones at multiples of `slide`. A record too late for every window it
//! falls in (they have all fired) goes unchanged to port `late`; one that
//! still fits some of them counts in those. With sessions, a record whose
//! timestamp plus the allowed lateness is at or behind the watermark is
//! late (it may belong to a session that has fired).
//!
//! State: tumbling and sliding windows keep one count per key and window
//! (map `wc`, key `<key> 0x00 <window start>`), session windows one list of
//! sessions per key (map `ws`); each open window has an event-time timer at
//! its fire time.

use std::fmt::Write;

use serde::{Deserialize, Serialize};
use weir_sdk::window::{Window, WindowSpec, Windows, merge_session};
use weir_sdk::{
    Batch, BatchBuf, Context, Error, MapState, OpenContext, Operator, OperatorInfo, Record,
    RecordRef, Result, Timer,
};

/// Output port of the counts.
const OUT: u32 = 0;
/// Output port of late records.
const LATE: u32 = 1;

/// One session of a key and its count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    start: i64,
    end: i64,
    count: u64,
}

impl Session {
    fn window(&self) -> Window {
        Window {
            start: self.start,
            end: self.end,
        }
    }
}

/// The window-count operator.
pub struct WindowCount {
    spec: WindowSpec,
    /// Tumbling and sliding windows: `<key> 0x00 <start>` → count.
    counts: MapState<String, u64>,
    /// Session windows: `<key>` → its sessions.
    sessions: MapState<String, Vec<Session>>,
    /// Scratch for state keys.
    key_buf: String,
}

/// What a window emits.
#[derive(Serialize)]
struct Count<'a> {
    key: &'a str,
    window_start: i64,
    window_end: i64,
    count: u64,
}

fn emit_count(ctx: &mut Context, key: &str, window: Window, count: u64) {
    let out = Count {
        key,
        window_start: window.start,
        window_end: window.end,
        count,
    };
    let rec = Record::json(&out)
        .with_key(key.as_bytes())
        .with_timestamp(window.max_timestamp());
    ctx.emit(OUT, rec);
}

/// The state key of `key`'s window starting at `start`, written into `buf`.
fn window_key<'a>(buf: &'a mut String, key: &str, start: i64) -> &'a str {
    buf.clear();
    buf.push_str(key);
    buf.push('\0');
    write!(buf, "{start}").expect("writing to a String");
    buf
}

/// A record as windows see it: its key and event time, and the watermark
/// when it arrived.
#[derive(Clone, Copy)]
struct Arrival<'a> {
    rec: RecordRef<'a>,
    key: &'a str,
    ts: i64,
    watermark: Option<i64>,
}

impl<'a> Arrival<'a> {
    /// `rec`, refused when it has no UTF-8 key or no timestamp.
    fn of(rec: RecordRef<'a>, watermark: Option<i64>) -> Result<Arrival<'a>> {
        let key = rec.key_str().ok_or_else(|| {
            Error::InvalidInput(
                "a record has no UTF-8 key: window-count counts per key; set the source's `key`"
                    .into(),
            )
        })?;
        let ts = rec.timestamp.ok_or_else(|| {
            Error::InvalidInput(format!(
                "record with key {key:?} has no timestamp: window-count needs event time; set the source's `timestamp`"
            ))
        })?;
        Ok(Arrival {
            rec,
            key,
            ts,
            watermark,
        })
    }
}

impl WindowCount {
    /// Counts a record in its open windows; sends it to `late` when none is
    /// open.
    fn count(&mut self, ctx: &mut Context, at: Arrival<'_>) -> Result<()> {
        let spec = self.spec;
        if let Windows::Session { .. } = spec.windows {
            return self.count_session(ctx, at);
        }
        let mut counted = false;
        for window in spec.assign(at.ts) {
            if spec.is_fired(window, at.watermark) {
                continue;
            }
            counted = true;
            let state_key = window_key(&mut self.key_buf, at.key, window.start);
            let n = self.counts.update(ctx, state_key, |n| n.unwrap_or(0) + 1)?;
            if n == 1 {
                ctx.register_event_timer(at.key.as_bytes(), spec.fire_time(window));
            }
        }
        if !counted {
            ctx.emit_ref(LATE, at.rec);
        }
        Ok(())
    }

    fn count_session(&mut self, ctx: &mut Context, at: Arrival<'_>) -> Result<()> {
        let spec = self.spec;
        let own = spec
            .assign(at.ts)
            .next()
            .expect("a session record has one window of its own");
        let mut sessions = self.sessions.get(ctx, at.key)?.unwrap_or_default();
        let mut windows: Vec<Window> = sessions.iter().map(Session::window).collect();
        let (merged, absorbed) = merge_session(&mut windows, own);
        // Behind the watermark, a record may belong to a session that has
        // fired already (and left no state): late, as in Flink.
        let behind = at
            .watermark
            .is_some_and(|w| at.ts.saturating_add(spec.allowed_lateness) <= w);
        if behind || spec.is_fired(merged, at.watermark) {
            ctx.emit_ref(LATE, at.rec);
            return Ok(());
        }
        let mut count = 1;
        sessions.retain(|s| {
            let gone = absorbed.contains(&s.window());
            if gone {
                count += s.count;
            }
            !gone
        });
        for old in &absorbed {
            if spec.fire_time(*old) != spec.fire_time(merged) {
                ctx.delete_timer(
                    at.key.as_bytes(),
                    weir_sdk::TimeDomain::EventTime,
                    spec.fire_time(*old),
                );
            }
        }
        ctx.register_event_timer(at.key.as_bytes(), spec.fire_time(merged));
        sessions.push(Session {
            start: merged.start,
            end: merged.end,
            count,
        });
        self.sessions.put(ctx, &at.key.to_string(), &sessions);
        Ok(())
    }
}

impl Operator for WindowCount {
    fn describe() -> OperatorInfo {
        OperatorInfo::new("window-count", env!("CARGO_PKG_VERSION"))
            .input("in")
            .output("out")
            .output("late")
    }

    fn open(ctx: &OpenContext) -> Result<Self> {
        let spec: WindowSpec = ctx.config_as()?;
        Ok(WindowCount {
            spec,
            counts: MapState::new("wc"),
            sessions: MapState::new("ws"),
            key_buf: String::new(),
        })
    }

    fn process(&mut self, ctx: &mut Context, port: u32, batch: Vec<Record>) -> Result<()> {
        self.process_batch(ctx, port, &BatchBuf::from_records(&batch).as_batch())
    }

    fn process_batch(&mut self, ctx: &mut Context, _port: u32, batch: &Batch<'_>) -> Result<()> {
        let watermark = ctx.watermark();
        for rec in batch {
            self.count(ctx, Arrival::of(rec, watermark)?)?;
        }
        Ok(())
    }

    fn on_timer(&mut self, ctx: &mut Context, timer: Timer<'_>) -> Result<()> {
        let key = timer.key_str().ok_or_else(|| {
            Error::Other("a timer with a key that is not UTF-8: not one of ours".into())
        })?;
        let spec = self.spec;
        let size = match spec.windows {
            Windows::Tumbling { size } | Windows::Sliding { size, .. } => size,
            Windows::Session { .. } => {
                let Some(mut sessions) = self.sessions.get(ctx, key)? else {
                    return Ok(());
                };
                let mut fired = Vec::new();
                sessions.retain(|s| {
                    let due = spec.fire_time(s.window()) == timer.time;
                    if due {
                        fired.push(s.clone());
                    }
                    !due
                });
                for s in fired {
                    emit_count(ctx, key, s.window(), s.count);
                }
                if sessions.is_empty() {
                    self.sessions.remove(ctx, key);
                } else {
                    self.sessions.put(ctx, &key.to_string(), &sessions);
                }
                return Ok(());
            }
        };
        // fire time = end - 1 + allowed lateness
        let end = timer.time - spec.allowed_lateness + 1;
        let window = Window {
            start: end - size,
            end,
        };
        let state_key = window_key(&mut self.key_buf, key, window.start);
        if let Some(n) = self.counts.get(ctx, state_key)? {
            self.counts.remove(ctx, state_key);
            emit_count(ctx, key, window, n);
        }
        Ok(())
    }
}

weir_sdk::export!(WindowCount);

#[cfg(test)]
mod tests;
