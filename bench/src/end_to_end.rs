//! `end-to-end`: records per second of two jobs, from a file source to a
//! file sink, through [`weir::run::run`]:
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

use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

use weir::config::Job;
use weir::run::RestoreMode;
use weir_tests::job_file::Source;

use crate::data;
use crate::jobs::{LinearJob, checkpoint_table, run_job};
use crate::native::{self, NativeFilter, NativeWordCount};
use crate::{Report, Settings, Target};

struct Workload {
    name: &'static str,
    plugin: &'static str,
    input: &'static str,
    source: Source,
    config: &'static str,
    native_single: fn(&Path, &Path) -> anyhow::Result<u64>,
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let n = settings.records_or(10_000_000, 200_000, 20_000);
    let (mut report, scratch) = settings.start("end-to-end", crate::RECORDS_RATE)?;
    report.params(json!({"records": n, "distinct_words": data::WORDS}));
    let dir = scratch.path();

    let workloads = [
        Workload {
            name: "filter",
            plugin: "filter",
            input: "events.jsonl",
            source: Source::file("in", "../events.jsonl").format("jsonl"),
            config: r#"{ field = "amount", op = "ge", value = 50 }"#,
            native_single: native::filter_program,
        },
        Workload {
            name: "word-count",
            plugin: "word-count",
            input: "words.txt",
            source: Source::file("in", "../words.txt").format("lines"),
            config: "{}",
            native_single: native::word_count_program,
        },
    ];
    settings.say(&format!("end-to-end: writing {n} events and {n} words"));
    let events_bytes = data::write_lines(&dir.join("events.jsonl"), n, data::event)?;
    let words_bytes = data::write_lines(&dir.join("words.txt"), n, |i| data::word(i, data::WORDS))?;
    report.params(json!({"events_file_bytes": events_bytes, "words_file_bytes": words_bytes}));

    let reps = settings.pick(5, 1, 1);
    report.repetitions(
        reps,
        "median of the repetitions (cases run round-robin, so load from other processes hits every case alike, each round starting one case later, so no case always follows the same one); all rates in rates_*",
    );
    for w in &workloads {
        let plugin = settings.plugin(w.plugin)?;
        let input = dir.join(w.input);
        let single = format!("{} native single-threaded", w.name);
        let in_host = format!("{} native in host pipeline", w.name);
        let mut cases = vec![Case::NativeSingle, Case::NativeHost];
        for parallelism in [1u32, 2] {
            for interval in [None, Some("1s")] {
                cases.push(Case::Wasm {
                    parallelism,
                    interval,
                });
            }
        }
        // The native program's output size: every case must write as much.
        let native_bytes = {
            let out = dir.join(format!("{}-native.jsonl", w.name));
            (w.native_single)(&input, &out)?;
            let len = std::fs::metadata(&out)?.len();
            std::fs::remove_file(&out)?;
            len
        };
        let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); cases.len()];
        for rep in 0..reps {
            // Each round starts one case later: what a case leaves behind
            // (page cache, writeback, freed memory) then lands on a
            // different case each round instead of always on its successor.
            for i in 0..cases.len() {
                let at = (i + rep) % cases.len();
                let (case, runs) = (&cases[at], &mut runs[at]);
                let name = case.name(w.name);
                settings.say(&format!("end-to-end: {name} (run {} of {reps})", rep + 1));
                let m = run_case(*case, w, &plugin, &input, dir, n)?;
                if m.output_bytes != native_bytes {
                    report.notes.push(format!(
                        "{}: {name} wrote {} bytes of output, the native program {native_bytes}: the outputs differ",
                        w.name, m.output_bytes
                    ));
                }
                runs.push(m);
            }
        }
        for (case, runs) in cases.iter().zip(&runs) {
            let name = case.name(w.name);
            // Filter's target compares with the operator native in the
            // host; word count's with the native program.
            let baseline = match case {
                Case::NativeSingle => None,
                Case::NativeHost => Some(single.as_str()),
                Case::Wasm { .. } if w.name == "filter" => Some(in_host.as_str()),
                Case::Wasm { .. } => Some(single.as_str()),
            };
            let median = median_run(runs);
            let row = report.row(&name, median.rate, "records/s", baseline);
            row.extra = median.extra.clone();
            for (i, r) in runs.iter().enumerate() {
                row.extra.insert(format!("rates_{}", i + 1), r.rate);
            }
        }
        for case in &cases {
            if let Case::Wasm { .. } = case {
                let name = case.name(w.name);
                let (other, key) = if w.name == "filter" {
                    (&single, "ratio_vs_native_single")
                } else {
                    (&in_host, "ratio_vs_native_host")
                };
                if let (Some(v), Some(o)) = (report.value(&name), report.value(other)) {
                    let row = report
                        .rows
                        .iter_mut()
                        .find(|r| r.case == name)
                        .expect("row");
                    row.extra.insert(key.into(), v / o);
                }
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

/// One case of a workload.
#[derive(Debug, Clone, Copy)]
enum Case {
    /// The native single-threaded program.
    NativeSingle,
    /// The operator native in a host-like pipeline.
    NativeHost,
    /// The Wasm job through `weir::run::run`.
    Wasm {
        parallelism: u32,
        interval: Option<&'static str>,
    },
}

impl Case {
    fn name(&self, job: &str) -> String {
        match self {
            Case::NativeSingle => format!("{job} native single-threaded"),
            Case::NativeHost => format!("{job} native in host pipeline"),
            Case::Wasm {
                parallelism,
                interval,
            } => format!(
                "{job} wasm p{parallelism} {}",
                if interval.is_some() {
                    "ckpt=1s"
                } else {
                    "ckpt=none"
                }
            ),
        }
    }
}

/// One run of one case.
#[derive(Debug, Clone)]
struct Measured {
    rate: f64,
    output_bytes: u64,
    extra: BTreeMap<String, f64>,
}

/// The run with the median rate (the lower middle one for an even count).
fn median_run(runs: &[Measured]) -> &Measured {
    let mut sorted: Vec<&Measured> = runs.iter().collect();
    sorted.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    sorted[(sorted.len() - 1) / 2]
}

/// Runs `case` of workload `w` once over `n` records.
fn run_case(
    case: Case,
    w: &Workload,
    plugin: &Path,
    input: &Path,
    dir: &Path,
    n: u64,
) -> anyhow::Result<Measured> {
    let case_dir = dir.join(case.name(w.name).replace([' ', '='], "-"));
    std::fs::create_dir_all(&case_dir)?;
    let out = case_dir.join("out.jsonl");
    let (parallelism, interval) = match case {
        Case::Wasm {
            parallelism,
            interval,
        } => (parallelism, interval),
        _ => (1, None),
    };
    let job = LinearJob {
        name: "bench",
        checkpoint: checkpoint_table(interval, 3),
        source: w.source.clone(),
        plugin,
        parallelism,
        config: w.config,
    }
    .job();
    let mut extra = BTreeMap::new();
    // Rates count from the first record read (plugin loading excluded).
    let rate = match case {
        Case::NativeSingle => {
            let started = std::time::Instant::now();
            let written = (w.native_single)(input, &out)?;
            let elapsed = started.elapsed().as_secs_f64();
            extra.insert("records_out".into(), written as f64);
            extra.insert("wall_s".into(), elapsed);
            n as f64 / elapsed
        }
        Case::NativeHost => {
            let job_path = case_dir.join("job.toml");
            std::fs::write(&job_path, job.to_string())?;
            let job = Job::load(&job_path, &weir_connectors::registry())?;
            let staging = case_dir.join("state/sinks/out");
            let (records, elapsed) = match w.name {
                "filter" => {
                    let mut f = NativeFilter::bench();
                    native::host_pipeline(&job, &staging, move |b, o| f.process(b, o))?
                }
                _ => {
                    let mut wc = NativeWordCount::default();
                    native::host_pipeline(&job, &staging, move |b, o| wc.process(b, o))?
                }
            };
            extra.insert("records_out".into(), records as f64);
            extra.insert("wall_s".into(), elapsed.as_secs_f64());
            n as f64 / elapsed.as_secs_f64()
        }
        Case::Wasm { .. } => {
            let run = run_job(&case_dir, &job, RestoreMode::None, ("in", "op", "out"))?;
            extra.insert(
                "startup_s".into(),
                run.first_read.unwrap_or_default().as_secs_f64(),
            );
            extra.insert("checkpoints".into(), run.summary.checkpoints as f64);
            if let Some(c) = run.periodic_checkpoints().last() {
                extra.insert("last_ckpt_ms".into(), c.duration_ms as f64);
            }
            extra.insert("wall_s".into(), run.wall.as_secs_f64());
            run.rate(n)
        }
    };
    let output_bytes = std::fs::metadata(&out).map_or(0, |m| m.len());
    std::fs::remove_dir_all(&case_dir)?;
    Ok(Measured {
        rate,
        output_bytes,
        extra,
    })
}
