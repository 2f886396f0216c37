//! `skew`: barrier alignment of a two-input operator (`reconcile`) when one
//! input is 10x slower than the other (the sources' `rate` option), against
//! the same job with both inputs at the same rate. Also a case where the
//! fast input is not throttled at all, so its channel is full (backlogged)
//! when the barrier is injected. Alignment times come from the checkpoints'
//! metadata (`alignment_ms`); buffered bytes from the
//! `weir_alignment_buffered_bytes` gauge, sampled every millisecond.

use serde_json::json;
use weir::run::RestoreMode;

use weir_tests::job_file::{JobFile, Operator, Sink, Source};

use crate::jobs::{checkpoint_table, run_job};
use crate::{Report, Settings, median};

fn order(i: u64) -> String {
    format!(r#"{{"key":"K{i:09}","amount":{}.{:02}}}"#, i % 997, i % 100)
}

/// What the rows measure.
const UNIT: &str = "longest alignment of a periodic checkpoint (ms); ratio = value / balanced";

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    // The fast input's rate: low enough that the operator keeps up with
    // both inputs on a busy 2-core machine, so alignment is not confused
    // with overload.
    let rate = settings.pick(20_000u64, 20_000, 10_000);
    let millis = settings.pick(10_000u64, 2_000, 600);
    let interval = settings.pick("1s", "200ms", "100ms");
    let (mut report, scratch) = settings.start("skew", UNIT)?;
    report.params(json!({"fast_rate": rate, "seconds": millis as f64 / 1e3,
        "checkpoint_interval": interval}));
    let dir = scratch.path();
    let plugin = settings.plugin("reconcile")?;

    let na = rate * millis / 1000;
    let slow = na / 10;
    crate::data::write_lines(&dir.join("a.jsonl"), na, order)?;
    // Every tenth order of a, the first `slow` of them, on the slow side.
    crate::data::write_lines(&dir.join("b.jsonl"), na, |i| order(i * 10))?;
    crate::data::write_lines(&dir.join("b-slow.jsonl"), slow, |i| order(i * 10))?;

    // (case, b file, a's rate, b's rate)
    let cases: [(&str, &str, Option<u64>, u64); 3] = [
        (
            "balanced: a and b at the same rate",
            "b.jsonl",
            Some(rate),
            rate,
        ),
        (
            "skewed: b 10x slower",
            "b-slow.jsonl",
            Some(rate),
            rate / 10,
        ),
        (
            "skewed, a unthrottled: b 10x slower than a's nominal rate",
            "b-slow.jsonl",
            None,
            rate / 10,
        ),
    ];
    let baseline = cases[0].0;
    for (case, b_file, a_rate, b_rate) in cases {
        settings.say(&format!("skew: {case}"));
        let case_dir = dir.join(format!("case-{}", report.rows.len()));
        std::fs::create_dir_all(&case_dir)?;
        let keyed = |id: &str, path: &str| Source::file(id, path).format("jsonl").key("key");
        let job = JobFile::new("bench-skew")
            .checkpoint(checkpoint_table(Some(interval), 100_000))
            .source(keyed("a", "../a.jsonl").throttle(a_rate))
            .source(keyed("b", &format!("../{b_file}")).rate(b_rate))
            .operator(Operator::new("op", &plugin).ports(&[("a", "a"), ("b", "b")]))
            .sink(Sink::file("out", "out.jsonl").format("jsonl").input("op"));
        let run = run_job(&case_dir, &job, RestoreMode::None, ("a", "op", "out"))?;
        let cps = run.periodic_checkpoints();
        let a: Vec<f64> = cps.iter().map(|c| c.alignment_ms as f64).collect();
        let d: Vec<f64> = cps.iter().map(|c| c.duration_ms as f64).collect();
        let max = a.iter().copied().fold(0.0, f64::max);
        let row = report.row(case, max, "ms", (case != baseline).then_some(baseline));
        row.extra.insert("alignment_median_ms".into(), median(&a));
        row.extra
            .insert("max_buffered_bytes".into(), run.max_buffered_bytes as f64);
        row.extra.insert("checkpoint_median_ms".into(), median(&d));
        run.note_checkpoints_and_wall(row);
        std::fs::remove_dir_all(&case_dir)?;
    }
    report.notes.push(
        "a rate-limited source checks for barriers every 5 ms while it waits, so a slow input alone delays a barrier little; alignment grows when the operator falls behind and its input channels fill (see the two-stage job of the checkpoint benchmark)".into(),
    );
    Ok(report)
}
