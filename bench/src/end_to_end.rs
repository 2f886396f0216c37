//! `end-to-end`: records per second of two jobs, from a file source to a
//! file sink, through [`weir::runner::run`]:
//!
//! - `filter`: JSON events, keep `amount >= 50` (stateless);
//! - `word-count`: one word per line, count per word in host state (keyed).
//!
//! Each at parallelism 1 and 2, with a checkpoint every second and without
//! (only the final checkpoint), against two baselines run in the same
//! process: a native single-threaded program doing the same job (read,
//! filter or count in a `HashMap`, write), and the same job in a host-like
//! pipeline with the operator compiled natively (Weir's source reader and
//! file sink, a thread each, bounded channels; no Wasm, barriers or
//! coordinator). Rates are over the time from the first record read to the
//! end of the run, so plugin compilation is not counted; `wall_s` includes
//! it.

use std::path::Path;

use weir::job::Job;
use weir::runner::RestoreMode;

use crate::data;
use crate::jobs::{LinearJob, checkpoint_table, run_job};
use crate::native::{self, NativeFilter, NativeWordCount};
use crate::{Report, Settings, Target};

struct Workload {
    name: &'static str,
    plugin: &'static str,
    input: &'static str,
    source: String,
    config: &'static str,
    native_single: fn(&Path, &Path) -> anyhow::Result<u64>,
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let n = settings
        .records
        .unwrap_or(settings.pick(10_000_000, 200_000, 20_000));
    let mut report = Report::new("end-to-end");
    report.param("records", n);
    report.param("distinct_words", data::WORDS);
    report.param(
        "unit",
        "records/s from the first record read to the end of the run; ratio = value / baseline",
    );
    let scratch = settings.scratch("end-to-end")?;
    let dir = scratch.path();

    let workloads = [
        Workload {
            name: "filter",
            plugin: "filter",
            input: "events.jsonl",
            source: "type = \"file\"\npath = \"../events.jsonl\"\nformat = \"jsonl\"\n".into(),
            config: r#"{ field = "amount", op = "ge", value = 50 }"#,
            native_single: native::filter_program,
        },
        Workload {
            name: "word-count",
            plugin: "word-count",
            input: "words.txt",
            source: "type = \"file\"\npath = \"../words.txt\"\nformat = \"lines\"\n".into(),
            config: "{}",
            native_single: native::word_count_program,
        },
    ];
    settings.say(&format!("end-to-end: writing {n} events and {n} words"));
    let events_bytes = data::write_lines(&dir.join("events.jsonl"), n, data::event)?;
    let words_bytes = data::write_lines(&dir.join("words.txt"), n, |i| data::word(i, data::WORDS))?;
    report.param("events_file_bytes", events_bytes);
    report.param("words_file_bytes", words_bytes);

    for w in &workloads {
        let plugin = settings.plugin(w.plugin)?;
        let input = dir.join(w.input);

        // Baseline 1: native single-threaded program.
        settings.say(&format!("end-to-end: {} native single-threaded", w.name));
        let out = dir.join(format!("{}-native.jsonl", w.name));
        let started = std::time::Instant::now();
        let written = (w.native_single)(&input, &out)?;
        let elapsed = started.elapsed();
        let native_bytes = std::fs::metadata(&out)?.len();
        let single = format!("{} native single-threaded", w.name);
        let row = report.row(&single, n as f64 / elapsed.as_secs_f64(), "records/s", None);
        row.extra.insert("wall_s".into(), elapsed.as_secs_f64());
        row.extra.insert("records_out".into(), written as f64);
        std::fs::remove_file(&out)?;

        // Baseline 2: the job with the operator native, in a host-like pipeline.
        settings.say(&format!("end-to-end: {} native in a host pipeline", w.name));
        let case_dir = dir.join(format!("{}-native-host", w.name));
        std::fs::create_dir_all(&case_dir)?;
        let text = LinearJob {
            name: "bench",
            checkpoint: checkpoint_table(None, 3),
            source: w.source.clone(),
            plugin: &plugin,
            parallelism: 1,
            config: w.config,
        }
        .text();
        let job_path = case_dir.join("job.toml");
        std::fs::write(&job_path, &text)?;
        let job = Job::load(&job_path)?;
        let staging = case_dir.join("state/sinks/out");
        let (out_records, elapsed) = match w.name {
            "filter" => {
                let mut f = NativeFilter::bench();
                native::host_pipeline(&job, &staging, move |b, o| f.process(b, o))?
            }
            _ => {
                let mut wc = NativeWordCount::default();
                native::host_pipeline(&job, &staging, move |b, o| wc.process(b, o))?
            }
        };
        check_output(
            &mut report,
            &case_dir,
            native_bytes,
            w.name,
            "native host pipeline",
        );
        let in_host = format!("{} native in host pipeline", w.name);
        let row = report.row(
            &in_host,
            n as f64 / elapsed.as_secs_f64(),
            "records/s",
            Some(&single),
        );
        row.extra.insert("wall_s".into(), elapsed.as_secs_f64());
        row.extra.insert("records_out".into(), out_records as f64);
        std::fs::remove_dir_all(&case_dir)?;

        // The Wasm job.
        for parallelism in [1u32, 2] {
            for interval in [None, Some("1s")] {
                let case = format!(
                    "{} wasm p{parallelism} {}",
                    w.name,
                    if interval.is_some() {
                        "ckpt=1s"
                    } else {
                        "ckpt=none"
                    }
                );
                settings.say(&format!("end-to-end: {case}"));
                let case_dir = dir.join(case.replace([' ', '='], "-"));
                std::fs::create_dir_all(&case_dir)?;
                let text = LinearJob {
                    name: "bench",
                    checkpoint: checkpoint_table(interval, 3),
                    source: w.source.clone(),
                    plugin: &plugin,
                    parallelism,
                    config: w.config,
                }
                .text();
                let run = run_job(&case_dir, &text, RestoreMode::None, ("in", "op", "out"))?;
                check_output(&mut report, &case_dir, native_bytes, w.name, &case);
                // Filter's target compares with the operator native in the
                // host; word count's with the native program.
                let baseline = if w.name == "filter" {
                    &in_host
                } else {
                    &single
                };
                let rate = run.rate(n);
                let row = report.row(&case, rate, "records/s", Some(baseline));
                row.extra.insert("wall_s".into(), run.wall.as_secs_f64());
                row.extra.insert(
                    "startup_s".into(),
                    run.first_read.unwrap_or_default().as_secs_f64(),
                );
                row.extra
                    .insert("checkpoints".into(), run.summary.checkpoints as f64);
                let other = if w.name == "filter" {
                    &single
                } else {
                    &in_host
                };
                if let Some(v) = report.value(other) {
                    let key = if w.name == "filter" {
                        "ratio_vs_native_single"
                    } else {
                        "ratio_vs_native_host"
                    };
                    report
                        .rows
                        .last_mut()
                        .expect("row")
                        .extra
                        .insert(key.into(), rate / v);
                }
                if let Some(c) = run.periodic_checkpoints().last() {
                    let row = report.rows.last_mut().expect("row");
                    row.extra
                        .insert("last_ckpt_ms".into(), c.duration_ms as f64);
                }
                std::fs::remove_dir_all(&case_dir)?;
            }
        }
    }

    let ratio = |case: &str| report.get(case).and_then(|r| r.ratio).unwrap_or(f64::NAN);
    let value = |case: &str| report.value(case).unwrap_or(f64::NAN);
    let mut targets = vec![
        Target::at_least(
            "filter wasm p1 (no checkpoints) / same job with the operator native in the host",
            ratio("filter wasm p1 ckpt=none"),
            0.5,
        ),
        Target::at_least(
            "word count wasm p1 (no checkpoints) / native single-threaded program",
            ratio("word-count wasm p1 ckpt=none"),
            0.4,
        ),
        Target::above(
            "word count wasm p2 / p1 (no checkpoints)",
            value("word-count wasm p2 ckpt=none") / value("word-count wasm p1 ckpt=none"),
            1.0,
        ),
    ];
    for job in ["filter", "word-count"] {
        for p in [1, 2] {
            targets.push(Target::at_least(
                &format!(
                    "{job} p{p}: throughput with a checkpoint every second / without (cost < 10%)"
                ),
                value(&format!("{job} wasm p{p} ckpt=1s"))
                    / value(&format!("{job} wasm p{p} ckpt=none")),
                0.9,
            ));
        }
    }
    report.targets = targets;
    Ok(report)
}

/// Notes when the output file of a case differs in size from the native
/// program's output (same records in any order have the same size).
fn check_output(report: &mut Report, case_dir: &Path, expected: u64, job: &str, case: &str) {
    let got = std::fs::metadata(case_dir.join("out.jsonl")).map_or(0, |m| m.len());
    if got != expected {
        report.notes.push(format!(
            "{job}: {case} wrote {got} bytes of output, the native program {expected}: the outputs differ"
        ));
    }
}
