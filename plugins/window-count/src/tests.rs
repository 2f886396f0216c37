use std::collections::BTreeMap;

use serde_json::{Value, json};
use weir_sdk::testing::Harness;
use weir_sdk::{Record, TimeDomain};

use super::*;

fn rec(key: &str, ts: i64) -> Record {
    Record::new(format!(r#"{{"k":"{key}","ts":{ts}}}"#))
        .with_key(key)
        .with_timestamp(ts)
}

fn counts(out: &[(u32, Record)]) -> Vec<Value> {
    out.iter()
        .filter(|(p, _)| *p == OUT)
        .map(|(_, r)| r.parse_json().unwrap())
        .collect()
}

fn count(key: &str, start: i64, end: i64, n: u64) -> Value {
    json!({"key": key, "window_start": start, "window_end": end, "count": n})
}

#[test]
fn tumbling_windows_emit_once_when_the_watermark_passes_their_end() {
    let mut h = Harness::<WindowCount>::open(r#"{"size": "10s"}"#).unwrap();
    h.process(
        "in",
        vec![
            rec("a", 1_000),
            rec("b", 2_000),
            rec("a", 9_999),
            rec("a", 10_000),
        ],
    )
    .unwrap();
    assert!(h.advance_watermark_ports(9_998).unwrap().is_empty());
    let out = h.advance_watermark_ports(9_999).unwrap();
    assert_eq!(
        counts(&out),
        [count("a", 0, 10_000, 2), count("b", 0, 10_000, 1)]
    );
    assert!(out.iter().all(|(_, r)| r.timestamp == Some(9_999)));
    assert_eq!(out[0].1.key_str(), Some("a"));
    assert!(
        h.advance_watermark_ports(15_000).unwrap().is_empty(),
        "once"
    );
    let out = h.finish().unwrap();
    assert_eq!(out.len(), 1, "the end of input fires the last window");
    assert!(h.state().is_empty(), "fired windows leave no state");
    assert!(h.pending_timers(TimeDomain::EventTime).is_empty());
}

#[test]
fn a_record_for_a_fired_window_goes_unchanged_to_late() {
    let mut h = Harness::<WindowCount>::open(r#"{"size": "10s"}"#).unwrap();
    h.process("in", vec![rec("a", 1_000)]).unwrap();
    h.advance_watermark(20_000).unwrap();
    let late = rec("a", 5_000);
    let out = h.process_ports("in", vec![late.clone()]).unwrap();
    assert_eq!(out, [(LATE, late)]);
    assert!(
        h.finish().unwrap().is_empty(),
        "a late record opens no window"
    );
}

#[test]
fn allowed_lateness_keeps_a_window_open_past_its_end() {
    let mut h =
        Harness::<WindowCount>::open(r#"{"size": "10s", "allowed_lateness": "5s"}"#).unwrap();
    h.process("in", vec![rec("a", 1_000)]).unwrap();
    assert!(h.advance_watermark(14_998).unwrap().is_empty());
    let out = h.process_ports("in", vec![rec("a", 2_000)]).unwrap();
    assert!(out.is_empty(), "still accepted");
    let out = h.advance_watermark_ports(14_999).unwrap();
    assert_eq!(counts(&out), [count("a", 0, 10_000, 2)]);
    assert_eq!(out[0].1.timestamp, Some(9_999), "window_end - 1");
    let out = h.process_ports("in", vec![rec("a", 3_000)]).unwrap();
    assert_eq!(out[0].0, LATE);
}

#[test]
fn sliding_windows_count_a_record_in_each_window_it_falls_in() {
    let mut h = Harness::<WindowCount>::open(r#"{"size": "10s", "slide": "5s"}"#).unwrap();
    h.process("in", vec![rec("a", 7_000)]).unwrap();
    let out = h.finish().unwrap();
    let got: Vec<Value> = out.iter().map(|r| r.parse_json().unwrap()).collect();
    assert_eq!(
        got,
        [count("a", 0, 10_000, 1), count("a", 5_000, 15_000, 1)]
    );
    // Late for the first window, in time for the second: counts, not late.
    let mut h = Harness::<WindowCount>::open(r#"{"size": "10s", "slide": "5s"}"#).unwrap();
    h.advance_watermark(9_999).unwrap();
    let out = h.process_ports("in", vec![rec("a", 7_000)]).unwrap();
    assert!(out.is_empty());
    let out = h.finish().unwrap();
    assert_eq!(out.len(), 1);
}

#[test]
fn sessions_merge_and_fire_once_per_merged_session() {
    let mut h = Harness::<WindowCount>::open(r#"{"gap": "10s"}"#).unwrap();
    h.process("in", vec![rec("a", 0), rec("a", 30_000)])
        .unwrap();
    assert_eq!(h.pending_timers(TimeDomain::EventTime).len(), 2);
    // Bridges the two sessions: one session, one timer.
    h.process(
        "in",
        vec![rec("a", 15_000), rec("a", 8_000), rec("a", 22_000)],
    )
    .unwrap();
    assert_eq!(
        h.pending_timers(TimeDomain::EventTime),
        [(39_999, b"a".to_vec())]
    );
    let out = h.advance_watermark_ports(39_999).unwrap();
    assert_eq!(counts(&out), [count("a", 0, 40_000, 5)]);
    let late = rec("a", 35_000);
    assert_eq!(
        h.process_ports("in", vec![late.clone()]).unwrap(),
        [(LATE, late)]
    );
    // A new session after the fired one is not late.
    assert!(
        h.process_ports("in", vec![rec("a", 45_000)])
            .unwrap()
            .is_empty()
    );
    assert_eq!(h.finish().unwrap().len(), 1);
}

#[test]
fn pending_windows_survive_a_restart() {
    let mut h = Harness::<WindowCount>::open(r#"{"size": "1s"}"#).unwrap();
    h.process("in", vec![rec("a", 100), rec("b", 200), rec("a", 1_100)])
        .unwrap();
    h.restart().unwrap();
    h.process("in", vec![rec("a", 300)]).unwrap();
    let out = h.advance_watermark_ports(999).unwrap();
    assert_eq!(
        counts(&out),
        [count("a", 0, 1_000, 2), count("b", 0, 1_000, 1)]
    );
    h.restart().unwrap();
    let out = h.finish().unwrap();
    assert_eq!(out.len(), 1);
}

#[test]
fn records_without_key_or_timestamp_and_bad_configs_are_errors() {
    let mut h = Harness::<WindowCount>::open(r#"{"size": "1s"}"#).unwrap();
    let e = h
        .process("in", vec![Record::new("x").with_timestamp(1)])
        .unwrap_err();
    assert!(e.to_string().contains("set the source's `key`"), "{e}");
    let e = h
        .process("in", vec![Record::new("x").with_key("k")])
        .unwrap_err();
    assert!(
        e.to_string().contains("set the source's `timestamp`"),
        "{e}"
    );
    assert!(Harness::<WindowCount>::open("{}").is_err());
    assert!(Harness::<WindowCount>::open(r#"{"size": "1s", "gap": "1s"}"#).is_err());
}

/// A small xorshift, so the test needs no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Out-of-order input within the bound of disorder, watermarks as a source
/// makes them after every batch: the counts equal a batch computation.
#[test]
fn out_of_order_input_within_the_bound_counts_like_a_batch_computation() {
    for (config, size, slide) in [
        (r#"{"size": "1s"}"#, 1_000, 1_000),
        (r#"{"size": "1s", "slide": "250ms"}"#, 1_000, 250),
    ] {
        let mut rng = Rng(7);
        let disorder = 300;
        let mut h = Harness::<WindowCount>::open(config).unwrap();
        let mut expected: BTreeMap<(String, i64), u64> = BTreeMap::new();
        let mut got: BTreeMap<(String, i64), u64> = BTreeMap::new();
        let mut max_ts = i64::MIN;
        let mut collect = |out: Vec<(u32, Record)>| {
            for v in counts(&out) {
                let k = (
                    v["key"].as_str().unwrap().to_string(),
                    v["window_start"].as_i64().unwrap(),
                );
                assert!(
                    got.insert(k, v["count"].as_u64().unwrap()).is_none(),
                    "once"
                );
            }
            assert!(out.iter().all(|(p, _)| *p == OUT), "nothing is late");
        };
        for batch in 0..50 {
            let mut records = Vec::new();
            for i in 0..40 {
                let base = (batch * 40 + i) * 10;
                let ts = base - (rng.next() % disorder) as i64;
                let key = format!("k{}", rng.next() % 5);
                let last = ts - ts.rem_euclid(slide);
                let mut start = last;
                while start > ts - size {
                    *expected.entry((key.clone(), start)).or_default() += 1;
                    start -= slide;
                }
                max_ts = max_ts.max(ts);
                records.push(rec(&key, ts));
            }
            collect(h.process_ports("in", records).unwrap());
            collect(
                h.advance_watermark_ports(max_ts - disorder as i64 - 1)
                    .unwrap(),
            );
            if batch % 7 == 3 {
                h.restart().unwrap();
            }
        }
        let out: Vec<(u32, Record)> = h.finish().unwrap().into_iter().map(|r| (OUT, r)).collect();
        collect(out);
        assert_eq!(got, expected, "{config}");
    }
}
