//! Repartition topics' control records: how event time and the end of
//! input cross from one stage of a job to the next in worker mode
//! (docs/scale-out.md, "Repartitioning through Kafka topics").
//!
//! Upstream task *u* writes its records to a repartition topic through a
//! Kafka sink with `upstream_task = u`; with each epoch, in the epoch's
//! transaction, it writes one control record to **every** partition: a
//! message with the [`HEADER`] header whose value is its [`Control`] in
//! JSON (where its watermark stood, whether it was idle, whether its input
//! ended). Downstream, a Kafka source with `upstream_tasks = U` reads one
//! partition, keeps the latest control of each upstream task
//! ([`Upstreams`], in its checkpointed offset) and passes no control
//! record on as a record.
//!
//! Invariants:
//! - The downstream watermark is the least over the upstream tasks that
//!   are neither idle nor ended; none until each of them has sent one.
//! - The input ends once all `U` upstream tasks sent `end`: each wrote its
//!   records before its end, in one partition's order, so none is missed.
//! - An upstream's watermark never goes back here, whatever the order of
//!   its restarts (the highest one seen is kept).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weir::connectors::staged::EpochSignals;

/// The header that marks a control record (its value is empty).
pub const HEADER: &str = "weir-ctl";

/// The header that carries a record's change kind (its name), when it is
/// not an insert, across a repartition topic: a stage's records cross
/// exactly as they were.
pub const CHANGE_HEADER: &str = "weir-change";

/// One upstream task's control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    /// The upstream task's partition index.
    pub from: u32,
    /// Where its event time stood at the end of the epoch.
    #[serde(flatten)]
    pub signals: EpochSignals,
}

impl Control {
    /// The record's value.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a control record serializes")
    }
}

/// What a downstream reader knows of its `count` upstream tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstreams {
    count: u32,
    /// The latest control of each upstream heard from, by index.
    latest: BTreeMap<u32, EpochSignals>,
}

impl Upstreams {
    /// Nothing heard yet from `count` upstream tasks.
    pub fn new(count: u32) -> Upstreams {
        Upstreams {
            count,
            latest: BTreeMap::new(),
        }
    }

    /// Takes in the control record `value`; an error says what is wrong
    /// with it (a topic written by something other than Weir's stages).
    pub fn hear(&mut self, value: &[u8]) -> Result<(), String> {
        let control: Control = serde_json::from_slice(value).map_err(|e| {
            format!(
                "a `{HEADER}` message is not a control record ({e}); only Weir's upstream stage may write a repartition topic"
            )
        })?;
        if control.from >= self.count {
            return Err(format!(
                "a control record comes from upstream task {}, but the stage has {} (0 to {}); the topic is another job's, or the upstream's partition count changed",
                control.from,
                self.count,
                self.count - 1
            ));
        }
        let new = control.signals;
        let kept = self.latest.entry(control.from).or_default();
        kept.watermark = kept.watermark.max(new.watermark);
        kept.idle = new.idle;
        kept.end |= new.end;
        Ok(())
    }

    /// Whether every upstream task's input ended.
    pub fn ended(&self) -> bool {
        (0..self.count).all(|u| self.latest.get(&u).is_some_and(|s| s.end))
    }

    /// The combined watermark: the least over the upstream tasks neither
    /// idle nor ended; `None` while one of them has sent none, or when
    /// none is active.
    pub fn watermark(&self) -> Option<i64> {
        let mut least: Option<i64> = None;
        for u in 0..self.count {
            let s = self.latest.get(&u).copied().unwrap_or_default();
            if s.end || s.idle {
                continue;
            }
            let w = s.watermark?;
            least = Some(least.map_or(w, |l| l.min(w)));
        }
        least
    }

    /// As kept in the source's offset: `[{"from", "watermark", "idle", "end"}]`.
    pub fn to_json(&self) -> Value {
        let all = self
            .latest
            .iter()
            .map(|(&from, &signals)| Control { from, signals });
        serde_json::to_value(all.collect::<Vec<_>>()).expect("controls serialize")
    }

    /// What [`to_json`](Self::to_json) kept, for `count` upstream tasks.
    pub fn from_json(count: u32, value: &Value) -> Option<Upstreams> {
        let all: Vec<Control> = serde_json::from_value(value.clone()).ok()?;
        let mut upstreams = Upstreams::new(count);
        for c in all {
            (c.from < count).then_some(())?;
            upstreams.latest.insert(c.from, c.signals);
        }
        Some(upstreams)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(from: u32, watermark: Option<i64>, idle: bool, end: bool) -> Vec<u8> {
        let signals = EpochSignals {
            watermark,
            idle,
            end,
        };
        Control { from, signals }.encode()
    }

    #[test]
    fn the_watermark_waits_for_every_upstream_and_follows_the_slowest_active() {
        let mut u = Upstreams::new(3);
        u.hear(&control(0, Some(10), false, false)).unwrap();
        u.hear(&control(2, Some(30), false, false)).unwrap();
        assert_eq!(u.watermark(), None, "upstream 1 has sent nothing");
        u.hear(&control(1, Some(20), false, false)).unwrap();
        assert_eq!(u.watermark(), Some(10));
        u.hear(&control(0, Some(5), false, false)).unwrap();
        assert_eq!(u.watermark(), Some(10), "never back");
        u.hear(&control(0, Some(10), true, false)).unwrap();
        assert_eq!(u.watermark(), Some(20), "idle upstreams do not hold it");
        u.hear(&control(1, Some(25), false, true)).unwrap();
        assert_eq!(u.watermark(), Some(30), "ended ones neither");
        assert!(!u.ended());
        u.hear(&control(0, Some(40), false, true)).unwrap();
        u.hear(&control(2, None, false, true)).unwrap();
        assert!(u.ended());
        assert_eq!(u.watermark(), None);
    }

    #[test]
    fn upstreams_round_trip_through_the_offset() {
        let mut u = Upstreams::new(2);
        u.hear(&control(1, Some(7), false, true)).unwrap();
        let back = Upstreams::from_json(2, &u.to_json()).unwrap();
        assert_eq!(back, u);
        assert_eq!(
            Upstreams::from_json(1, &u.to_json()),
            None,
            "upstream 1 of 1"
        );
    }

    #[test]
    fn foreign_control_records_are_refused() {
        let mut u = Upstreams::new(2);
        let err = u.hear(b"hello").unwrap_err();
        assert!(err.contains("not a control record"), "{err}");
        let err = u.hear(&control(2, None, false, false)).unwrap_err();
        assert!(
            err.contains("upstream task 2, but the stage has 2"),
            "{err}"
        );
    }
}
