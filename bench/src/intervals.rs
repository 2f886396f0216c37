//! `intervals`: what short checkpoints cost. Word count (p1, 100K distinct
//! words) and reconcile (p1) through the real `weir` binary, each with a
//! checkpoint every second and every 100 ms, run round-robin; the 100 ms
//! case's records per second as a ratio of the 1 s case's. Issue 21 wants
//! exactly-once latency of about 100 ms to cost under 10% of throughput.

use serde_json::json;
use std::path::Path;

use weir_tests::job_file::JobFile;

use crate::child::{run_child, weir_case};
use crate::jobs::word_count_job;
use crate::state::reconcile_job;
use crate::{Report, Settings, Target, data, median};

/// A job with a checkpoint every given interval.
type JobAt<'a> = Box<dyn Fn(&str) -> JobFile + 'a>;

/// The checkpoint intervals compared, baseline first.
const INTERVALS: [&str; 2] = ["1s", "100ms"];

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let words = settings.pick(5_000_000, 500_000, 20_000);
    let orders = settings.pick(1_000_000, 100_000, 2_000);
    let distinct = settings.pick(100_000, 10_000, 500);
    let reps = settings.pick(3, 1, 1);
    let (mut report, scratch) = settings.start("intervals", "records/s: input records over the weir process's wall time (median of the repetitions, cases round-robin); ratio = value / the same job with 1 s checkpoints")?;
    report.params(json!({"words": words, "distinct_words": distinct,
        "orders": orders, "repetitions": reps}));
    let dir = scratch.path();
    settings.say(&format!(
        "intervals: writing {words} words and {orders} orders"
    ));
    data::write_lines(&dir.join("words.txt"), words, |i| data::word(i, distinct))?;
    let written = data::write_orders(dir, orders)?;
    let word_count = settings.plugin("word-count")?;
    let reconcile = settings.plugin("reconcile")?;
    let jobs: [(&str, u64, JobAt); 2] = [
        (
            "word-count p1",
            words,
            Box::new(|interval: &str| word_count_job("bench-intervals", &word_count, interval)),
        ),
        (
            "reconcile p1",
            written.payments + written.bank,
            Box::new(|interval: &str| reconcile_job(&reconcile, 1, interval)),
        ),
    ];
    for (name, records, job) in &jobs {
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); INTERVALS.len()];
        for rep in 0..reps {
            for i in 0..INTERVALS.len() {
                let at = (i + rep) % INTERVALS.len();
                let interval = INTERVALS[at];
                settings.say(&format!(
                    "intervals: {name} ckpt={interval} (run {})",
                    rep + 1
                ));
                let wall = run_job(settings, dir, &job(interval))?;
                rates[at].push(*records as f64 / wall.max(1e-9));
            }
        }
        let baseline = format!("{name} ckpt={}", INTERVALS[0]);
        for (i, interval) in INTERVALS.iter().enumerate() {
            let case = format!("{name} ckpt={interval}");
            let base = (i > 0).then_some(baseline.as_str());
            let row = report.row(&case, median(&rates[i]), "records/s", base);
            for (r, rate) in rates[i].iter().enumerate() {
                row.extra.insert(format!("rates_{}", r + 1), *rate);
            }
        }
        let ratio = report
            .get(&format!("{name} ckpt=100ms"))
            .and_then(|r| r.ratio)
            .unwrap_or(f64::NAN);
        report.targets.push(Target::at_least(
            &format!("{name}: 100 ms checkpoints vs 1 s (ratio)"),
            ratio,
            0.9,
        ));
    }
    Ok(report)
}

/// Runs `job` in a fresh folder under `dir`; returns its wall time in seconds.
fn run_job(settings: &Settings, dir: &Path, job: &JobFile) -> anyhow::Result<f64> {
    let (cmd, log) = weir_case(settings, dir, job)?;
    Ok(run_child(cmd, &log)?.wall.as_secs_f64())
}
