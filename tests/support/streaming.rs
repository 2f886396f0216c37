//! The streaming reconcile over a live stdin ([`run_over_live_stdin`]): a
//! `weir run` of [`jobs::reconcile_streaming`] whose source `a` is stdin,
//! fed in phases by the test, so that which orders time out and which
//! records are late does not depend on how fast anything runs.

use std::collections::BTreeMap;
use std::path::Path;

use crate::cli::Weir;
use crate::job_dir::JobDir;
use crate::job_file::Source;
use crate::jobs::{self, order_line, streaming_orders};
use crate::pipeline::{XorShift, multiset, seed};
use crate::wait::{PATIENCE, wait_until};

/// The `timeout` of the streaming reconcile's runs.
pub const TIMEOUT: &str = "5s";

/// The input of a run: what stdin (side A) gets before and after the
/// test waits, and the file `b.jsonl` (side B).
pub struct Script {
    /// Orders up to event time 2.9 s, then an order at 9 s: the watermark
    /// of `a` reaches 7.999 s, past first timestamp + [`TIMEOUT`] of every
    /// earlier order, and before first timestamp + 2 × [`TIMEOUT`].
    pub first: Vec<String>,
    /// The keys of `first` on side A only: their `ONLY_A` rows are due
    /// after `first`.
    pub only_a: Vec<String>,
    /// Sent once those rows are committed: records of emitted keys
    /// (late), then orders from event time 10 s on.
    pub then: Vec<String>,
    /// The records of `then` that are late.
    pub late: Vec<String>,
    /// Side B, in time order.
    pub b: Vec<String>,
}

impl Script {
    /// The script for this test run's seed.
    pub fn new() -> Self {
        let mut rng = XorShift(seed() ^ 23);
        let (mut first, mut b) = streaming_orders(&mut rng, "P", 30, 0);
        let only_a: Vec<String> = first
            .iter()
            .filter(|line| !b.iter().any(|l| key_of(l) == key_of(line)))
            .map(|line| key_of(line).to_string())
            .collect();
        assert!(only_a.len() >= 2, "the seed gives orders on side A only");
        first.push(order_line("PUSH", "1.00", 9_000));
        b.push(order_line("PUSH", "1.00", 9_000));
        // Not late for the watermark (8.5 s > 7.999 s), but their keys are
        // emitted.
        let late: Vec<String> = only_a
            .iter()
            .take(3)
            .map(|k| order_line(k, "2.00", 8_500))
            .collect();
        let (rest_a, rest_b) = streaming_orders(&mut rng, "Q", 40, 10_000);
        b.extend(rest_b);
        let then = late.iter().cloned().chain(rest_a).collect();
        Script {
            first,
            only_a,
            then,
            late,
            b,
        }
    }

    /// Everything side A gets, in order (the batch reconcile's `a.jsonl`).
    pub fn all_a(&self) -> String {
        self.first.iter().chain(&self.then).cloned().collect()
    }
}

impl Default for Script {
    fn default() -> Self {
        Self::new()
    }
}

/// The `key` of an order line.
fn key_of(line: &str) -> &str {
    line.split('"').nth(3).expect("an order line")
}

/// Runs the streaming reconcile with `plugin` over a live stdin: sends
/// `script.first`, waits (stdin still open) until the committed
/// `out/reconcile.jsonl` holds the `ONLY_A` row of every order of
/// `script.only_a`, sends `script.then`, closes stdin and waits for the
/// run to succeed. Returns the job's folder.
pub fn run_over_live_stdin(weir: Weir, plugin: &Path, script: &Script) -> JobDir {
    let job = jobs::reconcile_streaming(plugin, Source::stdin("a"), Some(TIMEOUT));
    let b: String = script.b.concat();
    let j = JobDir::new(weir, job, &[("b.jsonl", &b)]);
    let mut run = j.spawn_fed(&[]);
    run.send(&script.first.concat());
    let rows: Vec<String> = script
        .only_a
        .iter()
        .map(|k| format!(r#"{{"key":"{k}","status":"ONLY_A","#))
        .collect();
    let running = wait_until(
        "the ONLY_A rows of the first orders, committed while stdin is open",
        PATIENCE,
        || {
            if run.child.try_wait().unwrap().is_some() {
                return Some(false);
            }
            let out = j.read_so_far("out/reconcile.jsonl");
            rows.iter()
                .all(|r| out.contains(r.as_str()))
                .then_some(true)
        },
    );
    if !running {
        let (status, stderr) = run.wait();
        panic!("the run ended with stdin open ({status}):\n{stderr}");
    }
    run.send(&script.then.concat());
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    j
}

/// The results and late records of a finished streaming run, as
/// multisets of lines.
pub fn outputs(j: &JobDir) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    (j.lines("out/reconcile.jsonl"), j.lines("out/late.jsonl"))
}

/// `lines` as a multiset.
pub fn lines(lines: &[String]) -> BTreeMap<String, usize> {
    multiset(&lines.concat())
}
