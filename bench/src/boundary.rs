//! `boundary`: nanoseconds per record through `process`, for batch sizes 1,
//! 16, 256 and 4096, for a stateless operator (`filter`) and a keyed-state
//! operator (`word-count`), each through [`weir::OperatorInstance`] and
//! against the same logic compiled natively and called directly. The ratio
//! is Wasm time over native time (how many times slower).

use serde_json::json;
use std::hint::black_box;
use std::time::{Duration, Instant};

use weir::{Batch, OperatorInstance, Record, Runtime};

use crate::data;
use crate::native::{NativeFilter, NativeWordCount};
use crate::{Report, Settings, Target, median};

/// The batch sizes measured.
pub const BATCH_SIZES: [usize; 4] = [1, 16, 256, 4096];

/// Calls `call` on every batch; returns the time per record.
fn pass(
    batches: &[Batch],
    call: &mut impl FnMut(&Batch) -> anyhow::Result<()>,
) -> anyhow::Result<Duration> {
    let records: usize = batches.iter().map(Batch::len).sum();
    let started = Instant::now();
    for batch in batches {
        call(batch)?;
    }
    Ok(started.elapsed() / records.max(1) as u32)
}

/// Times `native` and `wasm` in alternating passes over `records` (after a
/// warm-up pass each), `reps` times; returns the fastest and the median
/// pass of each, so that load from other processes on a shared machine
/// hits both sides alike and mostly drops out.
fn interleaved(
    records: &[Record],
    size: usize,
    reps: usize,
    mut native: impl FnMut(&Batch) -> anyhow::Result<()>,
    mut wasm: impl FnMut(&Batch) -> anyhow::Result<()>,
) -> anyhow::Result<[(f64, f64); 2]> {
    // Batches are cut before timing: the host's sources hand them over ready.
    let batches: Vec<Batch> = records.chunks(size).map(Batch::from).collect();
    let warm = &batches[..(batches.len() / 4).max(1).min(batches.len())];
    pass(warm, &mut native)?;
    pass(warm, &mut wasm)?;
    let (mut n, mut w) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        n.push(pass(&batches, &mut native)?.as_nanos() as f64);
        w.push(pass(&batches, &mut wasm)?.as_nanos() as f64);
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    Ok([(min(&n), median(&n)), (min(&w), median(&w))])
}

/// The native side of [`interleaved`]: each call clears `out` and lets `op`
/// append what it makes of the batch.
fn native_side<'a>(
    out: &'a mut Batch,
    mut op: impl FnMut(&Batch, &mut Batch) -> anyhow::Result<()> + 'a,
) -> impl FnMut(&Batch) -> anyhow::Result<()> + 'a {
    move |b| {
        out.clear();
        op(black_box(b), out)?;
        black_box(&*out);
        Ok(())
    }
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let n = settings.pick(131_072u64, 32_768, 4_096);
    let reps = settings.pick(5, 3, 1);
    let mut report = Report::new("boundary");
    report.params(json!({"records_per_pass": n, "passes": reps}));
    report.param(
        "statistic",
        "fastest pass (median in details); native and wasm passes alternate",
    );
    report.param("batch_sizes", format!("{BATCH_SIZES:?}"));
    report.param(
        "unit",
        "ns per record; ratio = wasm / native (times slower)",
    );
    let runtime = Runtime::new().map_err(|e| anyhow::anyhow!("{e:#}"))?;

    let operators: [(&str, &str, Vec<Record>); 2] = [
        ("filter", data::FILTER_CONFIG, data::event_records(n)),
        ("word-count", "{}", data::word_records(n)),
    ];
    for (name, config, records) in &operators {
        let plugin = runtime.load(settings.plugin(name)?)?;
        for size in BATCH_SIZES {
            settings.say(&format!("boundary: {name}, batch {size}"));
            let mut out = Batch::new();
            let mut inst = OperatorInstance::new(&plugin, name, 0, 1, config)?;
            let mut emitted = 0usize;
            let wasm = |b: &Batch| -> anyhow::Result<()> {
                inst.process_batch(0, b)?;
                emitted += black_box(inst.take_output_batch(0)).len();
                Ok(())
            };
            let [native, wasm] = match *name {
                "filter" => {
                    let mut f = NativeFilter::bench();
                    let native = native_side(&mut out, |b, o| f.process(b, o));
                    interleaved(records, size, reps, native, wasm)?
                }
                _ => {
                    let mut wc = NativeWordCount::default();
                    let native = native_side(&mut out, |b, o| wc.process(b, o));
                    interleaved(records, size, reps, native, wasm)?
                }
            };
            if emitted == 0 {
                anyhow::bail!("{name} emitted nothing; the benchmark is broken");
            }
            let base = format!("{name} native batch={size}");
            report
                .row(&base, native.0, "ns/record", None)
                .extra
                .insert("median".into(), native.1);
            let case = format!("{name} wasm batch={size}");
            let row = report.row(&case, wasm.0, "ns/record", Some(&base));
            row.extra.insert("median".into(), wasm.1);
            row.extra.insert("ns_per_call".into(), wasm.0 * size as f64);
        }
        // Per-call cost: what batching removes (batch 1 minus batch 4096).
        let one = report.value(&format!("{name} wasm batch=1")).unwrap_or(0.0);
        let big = report
            .value(&format!("{name} wasm batch=4096"))
            .unwrap_or(0.0);
        report.notes.push(format!(
            "{name}: fixed cost per process call ≈ {:.0} ns (ns/record at batch 1 minus at batch 4096)",
            one - big
        ));
    }
    // The filter target is for whole jobs (end-to-end); here the
    // per-record slowdown at the default source batch size is recorded.
    if let Some(r) = report.get("filter wasm batch=256").and_then(|r| r.ratio) {
        report.targets.push(Target::below(
            "filter wasm/native ns per record at batch 256 (informational: 2x slower = 50% throughput)",
            r,
            2.0,
        ));
    }
    Ok(report)
}
