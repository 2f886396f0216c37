//! `modes`: checkpoint duration under backpressure in each checkpoint mode
//! (`[checkpoint] mode` and `alignment_timeout`). A skewed two-input job:
//! source `fast` (unthrottled, so its channels stay full) and source `slow`
//! (throttled) in a union into `op`, the `slow-pass` guest sleeping a
//! fixed time per batch (2 instances), then a file sink. An aligned barrier
//! waits behind every batch queued ahead of it (16 per channel), so its
//! checkpoints last about the queue times the delay; an unaligned one
//! overtakes the queue (the priority path) and stores it as in-flight
//! data, so its checkpoints last about one batch. The alignment timeout
//! starts aligned and switches at the timeout. Per delay, the aligned case
//! is the baseline. Durations and in-flight bytes come from the
//! checkpoints' metadata.

use serde_json::json;
use weir::run::RestoreMode;

use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};

use crate::jobs::{checkpoint_table, run_job};
use crate::{Report, Settings, median};

/// Records per batch of the fast source.
const BATCH: u64 = 20;

/// What the rows measure.
const UNIT: &str =
    "mean duration of a periodic checkpoint (ms); ratio = value / aligned at the same delay";

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let seconds = settings.pick(4.0, 1.5, 0.4);
    let interval = settings.pick("200ms", "200ms", "100ms");
    let delays: &[u64] = settings.pick(&[2, 8], &[2, 8], &[4]);
    let timeout = "20ms";
    let (mut report, scratch) = settings.start("modes", UNIT)?;
    report.params(
        json!({"seconds_per_case": seconds, "checkpoint_interval": interval,
        "alignment_timeout": timeout, "fast_batch_size": BATCH}),
    );
    let dir = scratch.path();
    let plugin = settings.plugin("slow-pass")?;
    for &delay in delays {
        // What two instances get through in `seconds`.
        let records = (seconds * 2.0 * BATCH as f64 * 1000.0 / delay as f64) as u64;
        let fast = dir.join(format!("fast-{delay}.txt"));
        let slow = dir.join(format!("slow-{delay}.txt"));
        crate::data::write_lines(&fast, records, |i| format!("f{}", i % 1000))?;
        crate::data::write_lines(&slow, records / 20, |i| format!("s{}", i % 100))?;
        let baseline = format!("aligned, {delay} ms per batch");
        let table = || checkpoint_table(Some(interval), 100_000);
        let cases: [(String, Checkpoint); 3] = [
            (baseline.clone(), table().mode("aligned")),
            (
                format!("unaligned, {delay} ms per batch"),
                table().mode("unaligned"),
            ),
            (
                format!("aligned + {timeout} timeout, {delay} ms per batch"),
                table().alignment_timeout(timeout),
            ),
        ];
        for (case, checkpoint) in cases {
            settings.say(&format!("modes: {case}"));
            let case_dir = dir.join(format!("case-{}", report.rows.len()));
            std::fs::create_dir_all(&case_dir)?;
            let slow_rate = (records / 20) as f64 / seconds;
            let job = JobFile::new("bench-modes")
                .checkpoint(checkpoint)
                .source(Source::file("fast", fast.to_str().expect("UTF-8 path")).batch_size(BATCH))
                .source(
                    Source::file("slow", slow.to_str().expect("UTF-8 path"))
                        .batch_size(5)
                        .rate(slow_rate.max(1.0) as u64),
                )
                .operator(
                    Operator::new("op", &plugin)
                        .union("in", &["fast", "slow"])
                        .parallelism(2)
                        .config(&format!("{{ delay_ms = {delay} }}"))
                        .grants(&["clocks"]),
                )
                .sink(Sink::file("out", "out.txt").input("op"));
            let run = run_job(&case_dir, &job, RestoreMode::None, ("fast", "op", "out"))?;
            let cps = run.periodic_checkpoints();
            let d: Vec<f64> = cps.iter().map(|c| c.duration_ms as f64).collect();
            let a: Vec<f64> = cps.iter().map(|c| c.alignment_ms as f64).collect();
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
            let inflight: Vec<f64> = cps.iter().map(|c| c.inflight_bytes as f64).collect();
            let unaligned = cps.iter().filter(|c| c.unaligned).count();
            let base = (case != baseline).then_some(baseline.as_str());
            let row = report.row(&case, mean(&d), "ms", base);
            row.extra
                .insert("max_ms".into(), d.iter().copied().fold(0.0, f64::max));
            row.extra.insert("median_ms".into(), median(&d));
            row.extra.insert("alignment_mean_ms".into(), mean(&a));
            row.extra
                .insert("inflight_mean_bytes".into(), mean(&inflight));
            row.extra.insert(
                "inflight_max_bytes".into(),
                inflight.iter().copied().fold(0.0, f64::max),
            );
            row.extra
                .insert("unaligned_checkpoints".into(), unaligned as f64);
            run.note_checkpoints_and_wall(row);
            std::fs::remove_dir_all(&case_dir)?;
        }
    }
    report.notes.push(
        "an aligned checkpoint lasts about the batches queued ahead of its barriers times the delay, so it grows with the delay (and the channel capacity); an unaligned one lasts about one batch plus the drain, whatever the delay, and stores the overtaken batches (in-flight bytes); the timeout case switches after the timeout".into(),
    );
    Ok(report)
}
