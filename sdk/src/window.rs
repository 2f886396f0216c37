//! Event-time windows: which windows a timestamp falls in
//! ([`WindowSpec::assign`]), when a window is complete
//! ([`WindowSpec::fire_time`]), whether a record is too late for it, and
//! session merging ([`merge_session`]). The state and timers are the
//! operator's: a window operator keeps, per key and window, its aggregate
//! in state and registers an event-time timer at the window's fire time
//! (the `window-count` plugin in the Weir repository is one).
//!
//! A window is `[start, end)` in milliseconds since the Unix epoch.
//! Tumbling windows of `size` start at multiples of `size`; sliding windows
//! of `size` start every `slide`, at multiples of `slide`; a session window
//! spans from a key's first record to `gap` after its last, merging with
//! any session it overlaps. A window *fires* once the watermark reaches
//! `end - 1 + allowed_lateness`; a record whose windows have all fired is
//! *late*.
//!
//! ```
//! use weir_sdk::window::{Window, WindowSpec};
//! let spec: WindowSpec = serde_json::from_str(r#"{"size": "10s", "allowed_lateness": "2s"}"#).unwrap();
//! assert!(spec.assign(12_345).eq([Window { start: 10_000, end: 20_000 }]));
//! assert_eq!(spec.fire_time(Window { start: 10_000, end: 20_000 }), 21_999);
//! assert!(!spec.is_fired(Window { start: 10_000, end: 20_000 }, Some(21_998)));
//! assert!(spec.is_fired(Window { start: 10_000, end: 20_000 }, Some(21_999)));
//! ```

use serde::Deserialize;

/// One window: `[start, end)`, milliseconds since the Unix epoch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, Deserialize,
)]
pub struct Window {
    /// First millisecond in the window.
    pub start: i64,
    /// First millisecond after it.
    pub end: i64,
}

impl Window {
    /// The last millisecond in the window, `end - 1`: the timestamp of
    /// what the window emits.
    ///
    /// ```
    /// assert_eq!(weir_sdk::window::Window { start: 0, end: 10 }.max_timestamp(), 9);
    /// ```
    pub fn max_timestamp(&self) -> i64 {
        self.end.saturating_sub(1)
    }

    /// Whether `timestamp` lies in it.
    pub fn contains(&self, timestamp: i64) -> bool {
        self.start <= timestamp && timestamp < self.end
    }
}

/// The kind of windows, with its sizes in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Windows {
    /// Back-to-back windows of `size`.
    Tumbling {
        /// Window length.
        size: i64,
    },
    /// Windows of `size` starting every `slide`.
    Sliding {
        /// Window length.
        size: i64,
        /// Distance between window starts.
        slide: i64,
    },
    /// Per key, activity separated by at least `gap`.
    Session {
        /// Inactivity that ends a session.
        gap: i64,
    },
}

/// Windows and how late a record may be for them: read from an operator's
/// JSON config as `{"size": "10s"}` (tumbling), `{"size": "10s", "slide":
/// "5s"}` (sliding) or `{"gap": "30s"}` (session), with an optional
/// `"allowed_lateness"`. Durations are strings such as `"250ms"`, `"10s"`,
/// `"5m"`, `"1h"`, `"1d"`, or integer milliseconds.
///
/// ```
/// use weir_sdk::window::{WindowSpec, Windows};
/// let s: WindowSpec = serde_json::from_str(r#"{"gap": "30s"}"#).unwrap();
/// assert_eq!(s.windows, Windows::Session { gap: 30_000 });
/// let e = serde_json::from_str::<WindowSpec>(r#"{"size": "10s", "gap": "1s"}"#).unwrap_err();
/// assert!(e.to_string().contains("not both"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    /// The windows.
    pub windows: Windows,
    /// How long after a window's end its records are still accepted, ms.
    pub allowed_lateness: i64,
}

/// A duration in an operator's JSON config: a string such as `"10s"` or
/// integer milliseconds.
///
/// ```
/// use weir_sdk::window::DurationMs;
/// let d: DurationMs = serde_json::from_str(r#""1.5s""#).unwrap();
/// assert_eq!(d.0, 1500);
/// assert_eq!(serde_json::from_str::<DurationMs>("250").unwrap().0, 250);
/// assert!(serde_json::from_str::<DurationMs>(r#""soon""#).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationMs(pub i64);

impl<'de> Deserialize<'de> for DurationMs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Millis(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Millis(ms) if ms >= 0 => Ok(DurationMs(ms)),
            Raw::Millis(ms) => Err(serde::de::Error::custom(format!(
                "{ms} is a negative duration"
            ))),
            Raw::Text(t) => parse_duration_ms(&t)
                .map(DurationMs)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// Parses `"250ms"`, `"10s"`, `"1.5s"`, `"5m"`, `"2h"`, `"1d"` into
/// milliseconds.
///
/// ```
/// assert_eq!(weir_sdk::window::parse_duration_ms("2m"), Ok(120_000));
/// assert!(weir_sdk::window::parse_duration_ms("2 weeks").is_err());
/// ```
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let bad =
        || format!("{text:?} is not a duration; write e.g. \"250ms\", \"10s\", \"5m\", \"1h\"");
    let number: f64 = number.parse().map_err(|_| bad())?;
    let unit_ms = match unit.trim() {
        "ms" => 1.0,
        "s" => 1e3,
        "m" | "min" => 60e3,
        "h" => 3600e3,
        "d" => 86_400e3,
        _ => return Err(bad()),
    };
    let ms = (number * unit_ms).round();
    if !(0.0..=9.0e15).contains(&ms) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(ms as i64)
}

impl<'de> Deserialize<'de> for WindowSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            size: Option<DurationMs>,
            slide: Option<DurationMs>,
            gap: Option<DurationMs>,
            allowed_lateness: Option<DurationMs>,
        }
        let raw = Raw::deserialize(d)?;
        let err = |m: &str| serde::de::Error::custom(m.to_string());
        let positive = |name: &str, d: DurationMs| {
            if d.0 > 0 {
                Ok(d.0)
            } else {
                Err(err(&format!("`{name}` must be longer than 0ms")))
            }
        };
        let windows = match (raw.size, raw.slide, raw.gap) {
            (Some(_), _, Some(_)) => {
                return Err(err(
                    "set either `size` (tumbling or sliding windows) or `gap` (session windows), not both",
                ));
            }
            (None, Some(_), _) => return Err(err("`slide` needs a `size`")),
            (Some(size), None, None) => Windows::Tumbling {
                size: positive("size", size)?,
            },
            (Some(size), Some(slide), None) => {
                let (size, slide) = (positive("size", size)?, positive("slide", slide)?);
                if slide > size {
                    return Err(err(
                        "`slide` is longer than `size`: records between windows would belong to none",
                    ));
                }
                Windows::Sliding { size, slide }
            }
            (None, None, Some(gap)) => Windows::Session {
                gap: positive("gap", gap)?,
            },
            (None, None, None) => {
                return Err(err(
                    "no windows: set `size` (tumbling), `size` and `slide` (sliding) or `gap` (session)",
                ));
            }
        };
        Ok(WindowSpec {
            windows,
            allowed_lateness: raw.allowed_lateness.map_or(0, |d| d.0),
        })
    }
}

impl WindowSpec {
    /// The windows `timestamp` falls in, oldest first, computed as they are
    /// read (no allocation). For sessions, the
    /// record's own window `[timestamp, timestamp + gap)`, to merge with
    /// the key's sessions ([`merge_session`]).
    ///
    /// ```
    /// use weir_sdk::window::{Window, WindowSpec, Windows};
    /// let s = WindowSpec { windows: Windows::Sliding { size: 10, slide: 5 }, allowed_lateness: 0 };
    /// assert!(s.assign(12).eq([Window { start: 5, end: 15 }, Window { start: 10, end: 20 }]));
    /// let t = WindowSpec { windows: Windows::Tumbling { size: 10 }, allowed_lateness: 0 };
    /// assert!(t.assign(-1).eq([Window { start: -10, end: 0 }]));
    /// ```
    pub fn assign(&self, timestamp: i64) -> impl Iterator<Item = Window> + use<> {
        let (first, size, step, count) = match self.windows {
            Windows::Tumbling { size } => (timestamp - timestamp.rem_euclid(size), size, size, 1),
            Windows::Sliding { size, slide } => {
                let last = timestamp - timestamp.rem_euclid(slide);
                // How many slides back the oldest start after `timestamp - size` is.
                let behind = (last.saturating_sub(timestamp.saturating_sub(size)) - 1) / slide;
                (last - behind * slide, size, slide, behind + 1)
            }
            Windows::Session { gap } => (timestamp, gap, gap, 1),
        };
        (0..count).map(move |i| {
            let start = first + i * step;
            Window {
                start,
                end: start.saturating_add(size),
            }
        })
    }

    /// The watermark at which `window` fires: `end - 1 + allowed_lateness`.
    pub fn fire_time(&self, window: Window) -> i64 {
        window.max_timestamp().saturating_add(self.allowed_lateness)
    }

    /// Whether `window` has fired at `watermark`: a record for it is late.
    pub fn is_fired(&self, window: Window, watermark: Option<i64>) -> bool {
        watermark.is_some_and(|w| self.fire_time(window) <= w)
    }
}

/// Merges session `new` into `sessions` (one key's, disjoint): every
/// session that overlaps or touches it is removed and returned, and the
/// merged session is added and returned.
///
/// ```
/// use weir_sdk::window::{merge_session, Window};
/// let w = |start, end| Window { start, end };
/// let mut s = vec![w(0, 10), w(20, 30), w(50, 60)];
/// let (merged, absorbed) = merge_session(&mut s, w(8, 22));
/// assert_eq!(merged, w(0, 30));
/// assert_eq!(absorbed, [w(0, 10), w(20, 30)]);
/// assert_eq!(s, [w(50, 60), w(0, 30)]);
/// ```
pub fn merge_session(sessions: &mut Vec<Window>, new: Window) -> (Window, Vec<Window>) {
    let mut merged = new;
    let mut absorbed = Vec::new();
    sessions.retain(|s| {
        let touches = s.start <= new.end && new.start <= s.end;
        if touches {
            merged.start = merged.start.min(s.start);
            merged.end = merged.end.max(s.end);
            absorbed.push(*s);
        }
        !touches
    });
    sessions.push(merged);
    (merged, absorbed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(windows: Windows) -> WindowSpec {
        WindowSpec {
            windows,
            allowed_lateness: 0,
        }
    }

    #[test]
    fn every_timestamp_falls_in_exactly_size_over_slide_sliding_windows() {
        let s = spec(Windows::Sliding {
            size: 30,
            slide: 10,
        });
        for ts in -100..100 {
            let ws: Vec<Window> = s.assign(ts).collect();
            assert_eq!(ws.len(), 3, "{ts}");
            assert!(
                ws.iter()
                    .all(|w| w.contains(ts) && w.start.rem_euclid(10) == 0)
            );
        }
    }

    #[test]
    fn tumbling_windows_start_at_multiples_of_the_size() {
        let s = spec(Windows::Tumbling { size: 1000 });
        for ts in [-1001, -1, 0, 999, 1000, 1_700_000_000_123] {
            let [w] = s.assign(ts).collect::<Vec<_>>()[..] else {
                panic!()
            };
            assert!(w.contains(ts));
            assert_eq!(w.start.rem_euclid(1000), 0);
        }
    }

    #[test]
    fn session_merging_is_transitive_and_keeps_sessions_disjoint() {
        let mut s = Vec::new();
        let gap = 10;
        let w = |start, end| Window { start, end };
        for ts in [0, 5, 30, 50, 41, 20] {
            merge_session(&mut s, w(ts, ts + gap));
        }
        s.sort();
        assert_eq!(s, [w(0, 15), w(20, 40), w(41, 60)]);
        // One record joining two sessions joins them into one.
        let (merged, absorbed) = merge_session(&mut s, w(15, 25));
        assert_eq!((merged, absorbed.len()), (w(0, 40), 2));
        s.sort();
        assert_eq!(s, [w(0, 40), w(41, 60)]);
    }

    #[test]
    fn durations_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("1d"), Ok(86_400_000));
        for bad in ["", "s", "10", "1e3s", "-1s", "10 parsecs"] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = |j: &str| {
            serde_json::from_str::<WindowSpec>(j)
                .unwrap_err()
                .to_string()
        };
        assert!(e(r#"{"slide": "1s"}"#).contains("`slide` needs a `size`"));
        assert!(e(r#"{"size": "0s"}"#).contains("`size` must be longer"));
        assert!(e(r#"{"size": "1s", "slide": "2s"}"#).contains("`slide` is longer"));
        assert!(e(r#"{}"#).contains("no windows"));
        assert!(e(r#"{"size": "1s", "sise": 1}"#).contains("sise"));
    }
}
