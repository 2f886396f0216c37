//! Watermarks: how far event time has progressed. A source derives its
//! watermark from the timestamps it has read (`SourceWatermark`); an
//! operator instance or sink combines those of its input channels
//! (`InputWatermarks`) and, after firing the event-time timers it covers,
//! forwards the result.
//!
//! Invariants:
//! - **Never back.** Every watermark a node sends is greater than the one
//!   it sent before on the same channel; the combined watermark of a node
//!   only grows, also across an input going idle and active again.
//! - **Minimum over active inputs.** A node's watermark is the minimum of
//!   the latest watermarks of its input channels, leaving out idle ones. A
//!   channel that has sent no watermark yet holds it at "none" (before all
//!   time). While every channel is idle, nothing advances and the node is
//!   idle itself.
//! - **The end is +∞.** A source whose input has ended sends
//!   `i64::MAX`, so a finished input never holds back a union, and the end
//!   of every input fires every pending event-time timer.
//! - A source's watermark is its highest timestamp seen, less
//!   `max_out_of_orderness`, less 1 ms: records up to that bound of
//!   disorder are never late.

use std::time::{Duration, Instant};

/// A finished input's watermark: after every timestamp.
pub const END_OF_TIME: i64 = i64::MAX;

/// How a source makes watermarks (its `watermark` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatermarkConfig {
    /// How late a record may be, in milliseconds, and not be late
    /// (`max_out_of_orderness`).
    pub max_out_of_orderness: i64,
    /// A source without records for this long is idle (`idle_timeout`);
    /// never, when `None`.
    pub idle_timeout: Option<Duration>,
    /// Least time between two watermarks (`interval`); zero sends one after
    /// every batch that advanced it.
    pub interval: Duration,
}

/// Default `watermark.interval`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(200);

/// The watermark state of one source: the highest timestamp it has read and
/// what it last sent. Without a [`WatermarkConfig`] a source sends no
/// watermark until its end.
#[derive(Debug)]
pub(crate) struct SourceWatermark {
    config: Option<WatermarkConfig>,
    /// Highest timestamp of the records read so far (kept in checkpoints).
    max_timestamp: Option<i64>,
    /// The last watermark sent.
    sent: Option<i64>,
    last_sent_at: Instant,
    last_record_at: Instant,
    idle: bool,
}

impl SourceWatermark {
    /// The state of a source with `config`, which had read up to
    /// `max_timestamp` before the checkpoint it restores from.
    pub(crate) fn new(config: Option<WatermarkConfig>, max_timestamp: Option<i64>) -> Self {
        let now = Instant::now();
        SourceWatermark {
            config,
            max_timestamp,
            sent: None,
            last_sent_at: now,
            last_record_at: now,
            idle: false,
        }
    }

    /// After how long without records the source is idle, if ever.
    pub(crate) fn idle_timeout(&self) -> Option<Duration> {
        self.config.and_then(|c| c.idle_timeout)
    }

    /// The highest timestamp read so far.
    pub(crate) fn max_timestamp(&self) -> Option<i64> {
        self.max_timestamp
    }

    /// Records were read at `now`; `max` gives their highest timestamp
    /// (called only when the source makes watermarks, so a source without
    /// them does not read its batches' timestamps). Returns whether the
    /// source was idle (its next message makes it active again downstream).
    pub(crate) fn on_records(&mut self, max: impl FnOnce() -> Option<i64>, now: Instant) -> bool {
        if self.config.is_some()
            && let Some(t) = max()
        {
            self.max_timestamp = Some(self.max_timestamp.map_or(t, |m| m.max(t)));
        }
        self.last_record_at = now;
        std::mem::take(&mut self.idle)
    }

    /// The watermark to send at `now`, if it is due and has advanced.
    pub(crate) fn due(&mut self, now: Instant) -> Option<i64> {
        let config = self.config?;
        let max = self.max_timestamp?;
        let watermark = max
            .saturating_sub(config.max_out_of_orderness)
            .saturating_sub(1);
        let advanced = self.sent.is_none_or(|s| watermark > s);
        let waited = self.sent.is_none() || now - self.last_sent_at >= config.interval;
        if !(advanced && waited) {
            return None;
        }
        self.sent = Some(watermark);
        self.last_sent_at = now;
        Some(watermark)
    }

    /// Whether the source just became idle at `now` (send `Idle` once).
    pub(crate) fn became_idle(&mut self, now: Instant) -> bool {
        let Some(timeout) = self.config.and_then(|c| c.idle_timeout) else {
            return false;
        };
        if self.idle || now - self.last_record_at < timeout {
            return false;
        }
        self.idle = true;
        true
    }

    /// The watermark to send at the end of the input: [`END_OF_TIME`],
    /// unless it was sent already.
    pub(crate) fn at_end(&mut self) -> Option<i64> {
        (self.sent != Some(END_OF_TIME)).then(|| {
            self.sent = Some(END_OF_TIME);
            END_OF_TIME
        })
    }
}

/// The watermark of one input channel.
#[derive(Debug, Clone, Copy, Default)]
struct Channel {
    watermark: Option<i64>,
    idle: bool,
}

/// The combined watermark of a node's input channels.
///
/// ```text
/// channel 0: wm 10 ─┐
/// channel 1: wm 7  ─┼─ min over active = 7
/// channel 2: idle  ─┘
/// ```
#[derive(Debug)]
pub(crate) struct InputWatermarks {
    channels: Vec<Channel>,
    current: Option<i64>,
}

impl InputWatermarks {
    /// `channels` channels, none with a watermark yet; the combined
    /// watermark starts at `floor` (restored from a checkpoint).
    pub(crate) fn new(channels: usize, floor: Option<i64>) -> Self {
        InputWatermarks {
            channels: vec![Channel::default(); channels],
            current: floor,
        }
    }

    /// The combined watermark.
    #[cfg(test)]
    fn current(&self) -> Option<i64> {
        self.current
    }

    /// Whether every channel is idle (and there is at least one).
    pub(crate) fn all_idle(&self) -> bool {
        !self.channels.is_empty() && self.channels.iter().all(|c| c.idle)
    }

    /// Records arrived on `channel`: it is active.
    pub(crate) fn on_records(&mut self, channel: usize) {
        self.channels[channel].idle = false;
    }

    /// `channel` sent watermark `t`. Returns the combined watermark if it
    /// advanced.
    pub(crate) fn on_watermark(&mut self, channel: usize, t: i64) -> Option<i64> {
        let c = &mut self.channels[channel];
        c.idle = false;
        c.watermark = Some(c.watermark.map_or(t, |w| w.max(t)));
        self.advance()
    }

    /// `channel` went idle. Returns the combined watermark if it advanced
    /// (the channel was the one holding it back).
    pub(crate) fn on_idle(&mut self, channel: usize) -> Option<i64> {
        self.channels[channel].idle = true;
        self.advance()
    }

    fn advance(&mut self) -> Option<i64> {
        let mut active = self.channels.iter().filter(|c| !c.idle).peekable();
        active.peek()?;
        let min = active.map(|c| c.watermark).min()??;
        if self.current.is_some_and(|c| c >= min) {
            return None;
        }
        self.current = Some(min);
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_combined_watermark_is_the_minimum_over_channels() {
        let mut w = InputWatermarks::new(2, None);
        assert_eq!(w.on_watermark(0, 10), None, "channel 1 has none yet");
        assert_eq!(w.on_watermark(1, 7), Some(7));
        assert_eq!(w.on_watermark(1, 12), Some(10));
        assert_eq!(w.on_watermark(0, 11), Some(11));
        assert_eq!(w.current(), Some(11));
    }

    #[test]
    fn an_idle_channel_does_not_hold_back_the_others() {
        let mut w = InputWatermarks::new(2, None);
        w.on_watermark(0, 100);
        assert_eq!(w.on_idle(1), Some(100), "the silent channel is left out");
        assert_eq!(w.on_watermark(0, 150), Some(150));
        // Back from idleness with an older watermark: nothing goes back.
        w.on_records(1);
        assert!(!w.all_idle());
        assert_eq!(w.on_watermark(1, 120), None);
        assert_eq!(w.current(), Some(150));
        assert_eq!(w.on_watermark(0, 200), None, "channel 1 holds it at 120");
        assert_eq!(w.on_watermark(1, 180), Some(180));
    }

    #[test]
    fn all_idle_advances_nothing() {
        let mut w = InputWatermarks::new(2, None);
        w.on_watermark(0, 5);
        w.on_watermark(1, 3);
        assert_eq!(w.on_idle(0), None);
        assert_eq!(w.on_idle(1), None);
        assert!(w.all_idle());
        assert_eq!(w.current(), Some(3));
    }

    #[test]
    fn a_finished_input_counts_as_end_of_time() {
        let mut w = InputWatermarks::new(2, None);
        w.on_watermark(0, END_OF_TIME);
        assert_eq!(w.on_watermark(1, 42), Some(42));
        assert_eq!(w.on_watermark(1, END_OF_TIME), Some(END_OF_TIME));
    }

    #[test]
    fn a_restored_floor_is_never_undercut() {
        let mut w = InputWatermarks::new(1, Some(50));
        assert_eq!(w.on_watermark(0, 40), None);
        assert_eq!(w.current(), Some(50));
        assert_eq!(w.on_watermark(0, 60), Some(60));
    }

    fn config(ooo: i64, idle: Option<u64>, interval: u64) -> WatermarkConfig {
        WatermarkConfig {
            max_out_of_orderness: ooo,
            idle_timeout: idle.map(Duration::from_millis),
            interval: Duration::from_millis(interval),
        }
    }

    #[test]
    fn a_source_watermark_is_the_highest_timestamp_less_the_disorder_less_one() {
        let t0 = Instant::now();
        let mut s = SourceWatermark::new(Some(config(5000, None, 0)), None);
        assert_eq!(s.due(t0), None, "no record yet");
        s.on_records(|| Some(10_000), t0);
        assert_eq!(s.due(t0), Some(4999));
        s.on_records(|| Some(9_000), t0);
        assert_eq!(s.due(t0), None, "an older record does not move it");
        s.on_records(|| None, t0);
        s.on_records(|| Some(12_000), t0);
        assert_eq!(s.due(t0), Some(6999));
        assert_eq!(s.at_end(), Some(END_OF_TIME));
        assert_eq!(s.at_end(), None);
    }

    #[test]
    fn a_source_sends_at_most_one_watermark_per_interval() {
        let t0 = Instant::now();
        let mut s = SourceWatermark::new(Some(config(0, None, 200)), None);
        s.on_records(|| Some(1), t0);
        assert_eq!(s.due(t0), Some(0), "the first one goes at once");
        s.on_records(|| Some(2), t0);
        assert_eq!(s.due(t0 + Duration::from_millis(100)), None);
        assert_eq!(s.due(t0 + Duration::from_millis(200)), Some(1));
    }

    #[test]
    fn a_source_goes_idle_once_after_the_timeout_and_back_with_records() {
        let t0 = Instant::now();
        let mut s = SourceWatermark::new(Some(config(0, Some(30), 0)), None);
        s.on_records(|| Some(1), t0);
        assert!(!s.became_idle(t0 + Duration::from_millis(29)));
        assert!(s.became_idle(t0 + Duration::from_millis(30)));
        assert!(!s.became_idle(t0 + Duration::from_millis(60)), "once");
        assert!(s.on_records(|| Some(2), t0 + Duration::from_millis(61)));
        assert!(!s.on_records(|| Some(3), t0 + Duration::from_millis(62)));
    }

    #[test]
    fn a_restored_source_resumes_from_its_highest_timestamp() {
        let t0 = Instant::now();
        let mut s = SourceWatermark::new(Some(config(10, None, 0)), Some(1000));
        s.on_records(|| Some(500), t0);
        assert_eq!(s.due(t0), Some(989));
        assert_eq!(s.max_timestamp(), Some(1000));
    }

    #[test]
    fn without_a_config_a_source_only_sends_the_end() {
        let t0 = Instant::now();
        let mut s = SourceWatermark::new(None, None);
        s.on_records(|| Some(100), t0);
        assert_eq!(s.due(t0), None);
        assert!(!s.became_idle(t0 + Duration::from_secs(3600)));
        assert_eq!(s.at_end(), Some(END_OF_TIME));
    }
}
