//! `windows`: a tumbling-window count over out-of-order events, from a
//! file to a file, against a native single-threaded program doing the same
//! windows in the same run.
//!
//! The input is `n` JSON events `{"user":"u<k>","ts":<ms>}`, 1 ms apart in
//! event time and written up to 2 s out of order. The job reads them with
//! `timestamp = "ts"` and `watermark = { max_out_of_orderness = "3s" }` and
//! counts per user in tumbling windows with the `window-count` plugin at
//! parallelism 1. The native program reads the same file, parses each line
//! for its user and timestamp, keeps a count per (user, window) in a
//! `HashMap`, tracks the same watermark (highest timestamp − 3 s − 1 ms)
//! and writes each window, in the plugin's format, once the watermark
//! passes its end.
//!
//! Two workloads: `aggregate` (100 users, 10 s windows: about 100 events
//! per window, what a windowed count is for; the target) and `churn`
//! (1,000 users, 1 s windows: about 1.6 events per window, so nearly every
//! event opens a window, registers a timer, and is emitted again when the
//! timer fires; reported, not a target).

use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use weir::run::RestoreMode;
use weir_tests::job_file::{Entry, Source};

use crate::data::mix64;
use crate::jobs::{LinearJob, checkpoint_table, run_job};
use crate::{Report, Settings, Target};

/// How far out of order events are written, ms.
const DISORDER: u64 = 2_000;
/// The job's `max_out_of_orderness`, ms.
const OUT_OF_ORDERNESS: i64 = 3_000;

/// One input and window size.
#[derive(Debug, Clone, Copy)]
struct Workload {
    name: &'static str,
    /// Distinct users (keys).
    users: u64,
    /// Window size, ms.
    window: i64,
    /// The plugin's config.
    config: &'static str,
}

const WORKLOADS: [Workload; 2] = [
    Workload {
        name: "aggregate",
        users: 100,
        window: 10_000,
        config: r#"{ size = "10s" }"#,
    },
    Workload {
        name: "churn",
        users: 1_000,
        window: 1_000,
        config: r#"{ size = "1s" }"#,
    },
];
/// Event time of the first event: 2026-01-01T00:00:00Z.
const START: i64 = 1_767_225_600_000;

/// The events, in arrival order: event `i` happens at `START + i` and
/// arrives up to [`DISORDER`] ms later.
fn write_events(path: &Path, n: u64, users: u64) -> anyhow::Result<u64> {
    // Arrival = time + delay; sorting by arrival in a sliding buffer keeps
    // memory small: an event can only be overtaken by the next DISORDER.
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut pending: BTreeMap<(i64, u64), String> = BTreeMap::new();
    let mut bytes = 0u64;
    let mut write = |line: String, w: &mut BufWriter<std::fs::File>| -> std::io::Result<()> {
        bytes += line.len() as u64 + 1;
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")
    };
    for i in 0..n {
        let h = mix64(i);
        let ts = START + i as i64;
        let arrival = ts + (h % DISORDER) as i64;
        pending.insert(
            (arrival, i),
            format!(r#"{{"user":"u{}","ts":{ts}}}"#, (h >> 16) % users),
        );
        // Nothing later can arrive before `ts`.
        while let Some(entry) = pending.first_entry() {
            if entry.key().0 > ts {
                break;
            }
            write(entry.remove(), &mut w)?;
        }
    }
    for (_, line) in std::mem::take(&mut pending) {
        write(line, &mut w)?;
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(bytes)
}

/// One event as the native program reads it.
#[derive(serde::Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    user: &'a str,
    ts: i64,
}

/// The native program: returns the windows written.
pub fn native_program(input: &Path, output: &Path, window: i64) -> anyhow::Result<u64> {
    let mut r = BufReader::with_capacity(1 << 20, std::fs::File::open(input)?);
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(output)?);
    let mut counts: HashMap<(String, i64), u64> = HashMap::new();
    // Open windows by fire time (end - 1).
    let mut by_end: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let mut max_ts = i64::MIN;
    let mut written = 0u64;
    let mut fire = |upto: i64,
                    by_end: &mut BTreeMap<i64, Vec<String>>,
                    counts: &mut HashMap<(String, i64), u64>,
                    w: &mut BufWriter<std::fs::File>|
     -> anyhow::Result<()> {
        while let Some(entry) = by_end.first_entry() {
            if *entry.key() > upto {
                break;
            }
            let fire_time = *entry.key();
            let start = fire_time + 1 - window;
            for user in entry.remove() {
                let n = counts.remove(&(user.clone(), start)).unwrap_or(0);
                writeln!(
                    w,
                    r#"{{"key":"{user}","window_start":{start},"window_end":{},"count":{n}}}"#,
                    start + window
                )?;
                written += 1;
            }
        }
        Ok(())
    };
    let mut line = String::new();
    let mut since_watermark = 0;
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        let e: Event<'_> = serde_json::from_str(line.trim_end())?;
        let start = e.ts - e.ts.rem_euclid(window);
        let watermark = max_ts.saturating_sub(OUT_OF_ORDERNESS + 1);
        if start + window - 1 <= watermark {
            continue; // late (none in this input)
        }
        let n = counts.entry((e.user.to_string(), start)).or_insert(0);
        *n += 1;
        if *n == 1 {
            by_end
                .entry(start + window - 1)
                .or_default()
                .push(e.user.to_string());
        }
        max_ts = max_ts.max(e.ts);
        // The job's source sends a watermark per batch: do the same.
        since_watermark += 1;
        if since_watermark == 1024 {
            since_watermark = 0;
            fire(
                max_ts - OUT_OF_ORDERNESS - 1,
                &mut by_end,
                &mut counts,
                &mut w,
            )?;
        }
    }
    fire(i64::MAX, &mut by_end, &mut counts, &mut w)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(written)
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let n = settings.records_or(5_000_000, 200_000, 20_000);
    let (mut report, scratch) = settings.start("windows", crate::RECORDS_RATE)?;
    report.params(json!({"records": n, "disorder_ms": DISORDER}));
    let reps = settings.pick(3, 1, 1);
    report.repetitions(reps, "median of the repetitions, cases run round-robin");
    let dir = scratch.path();
    let plugin = settings.plugin("window-count")?;
    for w in WORKLOADS {
        let input = dir.join(format!("{}.jsonl", w.name));
        settings.say(&format!(
            "windows: writing {n} out-of-order events ({})",
            w.name
        ));
        let bytes = write_events(&input, n, w.users)?;
        report.param(&format!("{}_users", w.name), w.users);
        report.param(&format!("{}_window_ms", w.name), w.window);
        report.param(&format!("{}_input_bytes", w.name), bytes);
        let source = Source::file("in", &format!("../{}.jsonl", w.name))
            .format("jsonl")
            .key("user")
            .string("timestamp", "ts")
            .value(
                "watermark",
                format!(r#"{{ max_out_of_orderness = "{OUT_OF_ORDERNESS}ms" }}"#),
            );
        let native = format!("{} native single-threaded", w.name);
        let cases: [(String, Option<&str>); 3] = [
            (native.clone(), None),
            (format!("{} wasm p1 ckpt=none", w.name), None),
            (format!("{} wasm p1 ckpt=1s", w.name), Some("1s")),
        ];
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
        let mut windows: Vec<u64> = vec![0; cases.len()];
        for rep in 0..reps {
            for (i, (name, interval)) in cases.iter().enumerate() {
                settings.say(&format!("windows: {name} (run {} of {reps})", rep + 1));
                let case_dir = dir.join(format!("case-{i}"));
                std::fs::create_dir_all(&case_dir)?;
                let out = case_dir.join("out.jsonl");
                let rate = if i == 0 {
                    let started = Instant::now();
                    windows[i] = native_program(&input, &out, w.window)?;
                    n as f64 / started.elapsed().as_secs_f64()
                } else {
                    let job = LinearJob {
                        name: "bench",
                        checkpoint: checkpoint_table(*interval, 3),
                        source: source.clone(),
                        plugin: &plugin,
                        parallelism: 1,
                        config: w.config,
                    }
                    .job();
                    let run = run_job(&case_dir, &job, RestoreMode::None, ("in", "op", "out"))?;
                    windows[i] = std::fs::read_to_string(&out)?.lines().count() as u64;
                    run.rate(n)
                };
                rates[i].push(rate);
                std::fs::remove_dir_all(&case_dir)?;
            }
        }
        for (i, (name, _)) in cases.iter().enumerate() {
            let baseline = (i > 0).then_some(native.as_str());
            let row = report.row(name, crate::median(&rates[i]), "records/s", baseline);
            row.extra.insert("windows".into(), windows[i] as f64);
            for (j, r) in rates[i].iter().enumerate() {
                row.extra.insert(format!("rates_{}", j + 1), *r);
            }
            if windows[i] != windows[0] {
                report.notes.push(format!(
                    "{name} wrote {} windows, the native program {}: the outputs differ",
                    windows[i], windows[0]
                ));
            }
        }
        std::fs::remove_file(&input)?;
    }
    let ratio = |case: &str| report.get(case).and_then(|r| r.ratio).unwrap_or(f64::NAN);
    report.targets = vec![Target::at_least(
        "tumbling window count (aggregate) wasm p1 / native single-threaded program",
        ratio("aggregate wasm p1 ckpt=none"),
        0.4,
    )];
    Ok(report)
}
