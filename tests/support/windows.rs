//! The windowed-count job of the event-time and rescale tests: clicks out
//! of order ([`clicks`]), `window-count` over them ([`windows_job`]) and
//! checking its output against a batch computation ([`assert_windows`]).
//!
//! Each user's clicks go to one instance (the source is keyed by user),
//! whose timers fire in time order, so a user's windows reach the sink in
//! time order and its late clicks in input order, through restores and
//! rescales too.

use std::collections::BTreeMap;

use crate::job_dir::JobDir;
use crate::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};
use crate::order::check_grouped;
use crate::pipeline::{XorShift, multiset};
use crate::plugins;

/// Start of the clicks' event time: 2026-01-01T00:00:00Z.
pub const EPOCH: i64 = 1_767_225_600_000;
/// Window size of the tests, ms.
pub const WINDOW: i64 = 1_000;
/// Disorder of the clicks, below the source's `max_out_of_orderness`.
pub const DISORDER: u64 = 1_500;

/// `n` clicks of 7 users, 10 ms apart in event time and written up to
/// [`DISORDER`] out of order, with a click replayed a minute late every
/// 500 lines. Returns the file's text, the windowed counts a batch
/// computation gives for the on-time clicks (`(user, window start)` →
/// count) and the late lines.
pub fn clicks(rng: &mut XorShift, n: i64) -> (String, BTreeMap<(String, i64), u64>, Vec<String>) {
    let mut timed: Vec<(i64, i64, String)> = (0..n)
        .map(|i| {
            let ts = EPOCH + i * 10;
            let arrival = ts + rng.range(0, DISORDER) as i64;
            (arrival, ts, format!("u{}", rng.range(0, 7)))
        })
        .collect();
    timed.sort();
    let (mut text, mut counts, mut late) = (String::new(), BTreeMap::new(), Vec::new());
    for (line, (_, ts, user)) in timed.into_iter().enumerate() {
        if line % 500 == 499 {
            let l = format!(r#"{{"user":"{user}","ts":{},"late":true}}"#, ts - 60_000);
            text.push_str(&l);
            text.push('\n');
            late.push(l);
        }
        *counts
            .entry((user.clone(), ts - ts.rem_euclid(WINDOW)))
            .or_insert(0) += 1;
        text.push_str(&format!(r#"{{"user":"{user}","ts":{ts}}}"#));
        text.push('\n');
    }
    (text, counts, late)
}

/// The counts in `window-count`'s output; asserts that each window is
/// there once and each key's windows are in time order.
pub fn windows_of(output: &str) -> BTreeMap<(String, i64), u64> {
    let mut out = BTreeMap::new();
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for line in output.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            v["window_end"].as_i64().unwrap() - v["window_start"].as_i64().unwrap(),
            WINDOW
        );
        let k = (
            v["key"].as_str().unwrap().to_string(),
            v["window_start"].as_i64().unwrap(),
        );
        assert!(
            out.insert(k.clone(), v["count"].as_u64().unwrap())
                .is_none(),
            "window {k:?} emitted twice"
        );
        if let Some(before) = last.insert(k.0.clone(), k.1) {
            assert!(
                before < k.1,
                "window {k:?} after the later window starting at {before}"
            );
        }
    }
    out
}

/// A file of clicks → `window-count` (tumbling 1 s, parallelism 2) → the
/// counts and the late records, each to its own file.
pub fn windows_job(checkpoint: Checkpoint) -> JobFile {
    JobFile::new("windows")
        .checkpoint(checkpoint)
        .source(
            Source::file("clicks", "clicks.jsonl")
                .format("jsonl")
                .key("user")
                .batch_size(100)
                .string("timestamp", "ts")
                .value(
                    "watermark",
                    r#"{ max_out_of_orderness = "2s", interval = "0s" }"#,
                ),
        )
        .operator(
            Operator::new("count", plugins::WINDOW_COUNT)
                .inputs(&["clicks"])
                .parallelism(2)
                .config(r#"{ size = "1s" }"#),
        )
        .sink(Sink::file("counts", "counts.jsonl").input("count"))
        .sink(Sink::file("late", "late.jsonl").input("count.late"))
}

/// Asserts that the job in `j` wrote exactly the windows `counts` to
/// `counts.jsonl`, each user's in time order, and the `late` lines to
/// `late.jsonl`, each user's in input order.
pub fn assert_windows(j: &JobDir, counts: &BTreeMap<(String, i64), u64>, late: &[String]) {
    assert_eq!(&windows_of(&j.read("counts.jsonl")), counts);
    assert_eq!(j.lines("late.jsonl"), multiset(&(late.join("\n") + "\n")));
    let out = j.read("late.jsonl");
    let out: Vec<&str> = out.lines().collect();
    let late: Vec<&str> = late.iter().map(String::as_str).collect();
    let user = |line: &str| {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["user"].as_str().unwrap().to_string()
    };
    check_grouped(&out, &[&late], user)
        .unwrap_or_else(|e| panic!("late clicks not in input order per user: {e}"));
}
