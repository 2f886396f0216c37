//! `latency`: how long a record takes from the source to the sink, through
//! the real `weir` binary: stdin → word-count → stdout, one unique word per
//! record, written at a fixed rate. Each word carries the time it was
//! written (microseconds since the run started); a reader of the job's
//! stdout takes the time each count is printed, so the latency of a record
//! is print time − write time, measured on one clock, outside the job.
//!
//! Cases: stdout at-least-once (the default: printed as it arrives) and
//! exactly-once (printed at commit) with 1 s and 100 ms checkpoints, at 100,
//! 10,000 and (full size only) 100,000 records/s. Reported: p50, p99 and
//! max in milliseconds.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Operator, Sink, Source};

use crate::{Report, Settings, Target};

/// One configuration of the job.
struct Case {
    name: &'static str,
    delivery: &'static str,
    interval: &'static str,
}

const CASES: [Case; 3] = [
    Case {
        name: "at-least-once, 1s checkpoints",
        delivery: "at-least-once",
        interval: "1s",
    },
    Case {
        name: "exactly-once, 100ms checkpoints",
        delivery: "exactly-once",
        interval: "100ms",
    },
    Case {
        name: "exactly-once, 1s checkpoints",
        delivery: "exactly-once",
        interval: "1s",
    },
];

/// What the rows measure.
const UNIT: &str = "milliseconds from writing a record to stdin to reading its count on stdout";

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let seconds = settings.pick(10, 3, 1);
    let rates: &[u64] = settings.pick(&[100, 10_000, 100_000], &[100, 10_000], &[100, 10_000]);
    let (mut report, scratch) = settings.start("latency", UNIT)?;
    report.param("seconds_per_case", seconds);
    report.param(
        "job",
        "stdin -> word-count (p1) -> stdout, one unique word per record",
    );
    let plugin = settings.plugin("word-count")?;
    let weir = settings.weir_binary()?;
    for &rate in rates {
        for case in &CASES {
            settings.say(&format!("latency: {}, {rate} records/s", case.name));
            let job = JobFile::new("latency")
                .checkpoint(Checkpoint::every(case.interval))
                .source(Source::stdin("in"))
                .operator(Operator::new("count", &plugin).inputs(&["in"]))
                .sink(
                    Sink::stdout("out")
                        .value("delivery", format!("{:?}", case.delivery))
                        .input("count"),
                );
            let dir = scratch
                .path()
                .join(format!("{rate}-{}", case.delivery))
                .join(case.interval);
            std::fs::create_dir_all(&dir)?;
            let file = dir.join("job.toml");
            std::fs::write(&file, job.to_string())?;
            let latencies = measure(&weir, &file, rate, Duration::from_secs(seconds))
                .with_context(|| format!("latency case `{}` at {rate}/s", case.name))?;
            let name = format!("{} @ {rate}/s", case.name);
            let row = report.row(
                &format!("{name}: p99"),
                percentile(&latencies, 0.99),
                "ms",
                None,
            );
            row.extra
                .insert("p50_ms".into(), percentile(&latencies, 0.50));
            row.extra
                .insert("max_ms".into(), percentile(&latencies, 1.0));
            row.extra.insert("records".into(), latencies.len() as f64);
        }
    }
    let p99 = |case: &str| {
        report
            .value(&format!("{case} @ 100/s: p99"))
            .unwrap_or(f64::NAN)
    };
    let targets = [
        Target::below(
            "at-least-once p99 at 100 records/s (ms)",
            p99(CASES[0].name),
            20.0,
        ),
        Target::below(
            "exactly-once, 100ms checkpoints, p99 at 100 records/s (ms)",
            p99(CASES[1].name),
            150.0,
        ),
    ];
    report.targets.extend(targets);
    Ok(report)
}

/// Runs `weir run FILE` for `length`, writing `rate` unique words per second
/// to its stdin; returns each record's latency in milliseconds.
fn measure(
    weir: &std::path::Path,
    file: &std::path::Path,
    rate: u64,
    length: Duration,
) -> anyhow::Result<Vec<f64>> {
    let mut child = Command::new(weir)
        .args(["run", "--restore", "none", "--progress-every", "0"])
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting weir")?;
    let started = Instant::now();
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            let at = started.elapsed().as_micros() as u64;
            if tx.send((line, at)).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().expect("piped");
    // Writes in ticks of 1 ms (or one record's interval, if longer).
    let tick = Duration::from_micros((1_000_000 / rate).max(1000));
    let per_tick = (rate * tick.as_micros() as u64 / 1_000_000).max(1);
    let mut written = 0u64;
    let mut next = started;
    while started.elapsed() < length {
        let mut chunk = String::new();
        for _ in 0..per_tick {
            let sent = started.elapsed().as_micros();
            chunk.push_str(&format!("t{sent}n{written}\n"));
            written += 1;
        }
        stdin.write_all(chunk.as_bytes())?;
        stdin.flush()?;
        next += tick;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    drop(stdin);
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "weir exited with {status}");
    reader.join().expect("the reader does not panic");
    let mut latencies = Vec::new();
    for (line, at) in rx.try_iter() {
        let Some(sent) = line
            .split_once("\"t")
            .and_then(|(_, rest)| rest.split_once('n'))
            .and_then(|(micros, _)| micros.parse::<u64>().ok())
        else {
            continue;
        };
        latencies.push(at.saturating_sub(sent) as f64 / 1000.0);
    }
    anyhow::ensure!(
        latencies.len() as u64 == written,
        "{written} records written, {} counts printed",
        latencies.len()
    );
    Ok(latencies)
}

/// The `q` quantile of `values` (nearest rank; 1.0 is the maximum).
fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_ranks() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
