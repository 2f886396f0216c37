//! `checkpoint`: what a checkpoint costs.
//!
//! - Store level, with [`weir::store::CheckpointStore`] directly: a full
//!   checkpoint of N keys (1 million by default) against incremental ones
//!   with 1% of the keys changed (duration and bytes written), against
//!   writing the same bytes to a plain file with one fsync; and the cost of
//!   collecting the changes from [`weir::keyed::state::KeyedState`].
//! - Job level: two keyed word-count stages (generator source, 100,000
//!   distinct words) at parallelism 1, 2 and 4 with periodic checkpoints, so
//!   that the second stage aligns barriers over `p` input channels;
//!   checkpoint duration and alignment time from the checkpoints' metadata.

use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use weir::keyed::state::KeyedState;
use weir::run::RestoreMode;
use weir::store::{CheckpointMeta, CheckpointStore, InstanceDelta, OperatorMeta};

use weir_tests::job_file::{JobFile, Operator, Sink, Source};

use crate::jobs::{checkpoint_table, run_job};
use crate::{Report, Settings, Target, median};

const JOB: &str = "bench-checkpoint";

fn meta(id: u64) -> CheckpointMeta {
    CheckpointMeta {
        operators: BTreeMap::from([(
            "count".to_string(),
            OperatorMeta {
                plugin_name: "word-count".into(),
                plugin_version: "0.1.0".into(),
                state_version: 1,
                sha256: "0".repeat(64),
                plugin_path: None,
                parallelism: 1,
                swapped: None,
                recording: None,
                config_sha256: None,
            },
        )]),
        ..CheckpointMeta::new(id, JOB)
    }
}

/// Key `i` in word-count's layout (`<word> 0x00 count`).
pub fn state_key(i: u64) -> Vec<u8> {
    format!("w{i}\0count").into_bytes()
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let keys = settings.state_keys();
    let mut report = Report::new("checkpoint");
    report.params(json!({"keys": keys, "changed_per_incremental": "1% of the keys"}));
    let scratch = settings.scratch("checkpoint")?;
    let dir = scratch.path();

    // --- store level ---
    settings.say(&format!("checkpoint: full checkpoint of {keys} keys"));
    let mut state = KeyedState::default();
    for i in 0..keys {
        state.put(&state_key(i), b"1");
    }
    let memory = state.memory_bytes();
    let started = Instant::now();
    let changes = state.take_changes();
    let take_full = started.elapsed();
    let store = CheckpointStore::open(&dir.join("store"), JOB)?;
    let io_before = crate::io_write_bytes();
    let full = store.commit(
        &meta(1),
        &[InstanceDelta {
            operator: "count".into(),
            instance: 0,
            changes,
            snapshot: Some(Vec::new()),
            timers: Vec::new(),
            inflight: None,
            recorded: None,
        }],
        3,
    )?;
    let full_physical = crate::io_write_bytes()
        .zip(io_before)
        .map(|(a, b)| (a - b) as f64);
    let size_after_full = store.file_size()?;

    // The same bytes to a plain file, with one fsync: the practical limit.
    let started = Instant::now();
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("plain.bin"))?);
        for i in 0..keys {
            f.write_all(&state_key(i))?;
            f.write_all(b"1")?;
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    let plain = started.elapsed();

    let rounds = 5u64;
    let changed = (keys / 100).max(1);
    let (mut durations, mut bytes, mut takes, mut physical) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        settings.say(&format!(
            "checkpoint: incremental {} of {rounds}",
            round + 1
        ));
        // A different 1% each round, spread over the key space.
        for j in 0..changed {
            let i = (j * 100 + round * 7 + 1) % keys;
            state.put(&state_key(i), (round + 2).to_string().as_bytes());
        }
        let started = Instant::now();
        let changes = state.take_changes();
        takes.push(started.elapsed().as_secs_f64() * 1e3);
        let io_before = crate::io_write_bytes();
        let stats = store.commit(
            &meta(2 + round),
            &[InstanceDelta {
                operator: "count".into(),
                instance: 0,
                changes,
                snapshot: None,
                timers: Vec::new(),
                inflight: None,
                recorded: None,
            }],
            3,
        )?;
        durations.push(stats.duration.as_secs_f64() * 1e3);
        bytes.push(stats.bytes_written as f64);
        if let Some(w) = crate::io_write_bytes().zip(io_before).map(|(a, b)| a - b) {
            physical.push(w as f64);
        }
    }
    let size_after = store.file_size()?;
    drop(store);

    report
        .row(
            "plain file, same bytes, one fsync",
            plain.as_secs_f64() * 1e3,
            "ms",
            None,
        )
        .extra
        .insert(
            "bytes".into(),
            (keys * (state_key(0).len() as u64 + 1)) as f64,
        );
    let row = report.row(
        "store full checkpoint",
        full.duration.as_secs_f64() * 1e3,
        "ms",
        Some("plain file, same bytes, one fsync"),
    );
    row.extra
        .insert("bytes_written".into(), full.bytes_written as f64);
    row.extra
        .insert("file_bytes".into(), size_after_full as f64);
    row.extra
        .insert("take_changes_ms".into(), take_full.as_secs_f64() * 1e3);
    row.extra.insert("state_memory_bytes".into(), memory as f64);
    if let Some(w) = full_physical {
        row.extra.insert("device_write_bytes".into(), w);
    }
    let incr = median(&durations);
    let incr_bytes = median(&bytes);
    let row = report.row(
        "store incremental 1% (median of 5)",
        incr,
        "ms",
        Some("store full checkpoint"),
    );
    row.extra.insert("bytes_written".into(), incr_bytes);
    row.extra.insert(
        "bytes_ratio".into(),
        incr_bytes / full.bytes_written.max(1) as f64,
    );
    row.extra.insert(
        "max_ms".into(),
        durations.iter().copied().fold(0.0, f64::max),
    );
    row.extra.insert("take_changes_ms".into(), median(&takes));
    row.extra
        .insert("file_bytes_after".into(), size_after as f64);
    let mut device_ratio = None;
    if !physical.is_empty() {
        // What reached the disk (redb rewrites whole pages): /proc/self/io.
        let phys = median(&physical);
        row.extra.insert("device_write_bytes".into(), phys);
        if let Some(full) = full_physical {
            row.extra
                .insert("device_bytes_ratio".into(), phys / full.max(1.0));
            device_ratio = Some(phys / full.max(1.0));
        }
    }
    report.targets.push(Target::below(
        &format!("KeyedState::take_changes of {keys} dirty keys (s)"),
        take_full.as_secs_f64(),
        1.0,
    ));
    report.targets.push(Target::below(
        "incremental checkpoint bytes (1% changed) / full checkpoint bytes",
        incr_bytes / full.bytes_written.max(1) as f64,
        0.05,
    ));
    if let Some(r) = device_ratio {
        report.targets.push(Target::below(
            "incremental checkpoint bytes reaching the disk / full checkpoint's (/proc/self/io write_bytes)",
            r,
            0.05,
        ));
    }

    // --- job level: duration and alignment as parallelism grows ---
    // Two keyed stages, so that every instance of the second has one input
    // channel per instance of the first and its barriers must be aligned.
    // Enough records for several periodic checkpoints at about 1.5 million
    // records per second.
    let records = settings.pick(15_000_000u64, 200_000, 20_000);
    let interval = settings.pick("1s", "200ms", "100ms");
    report.params(json!({"job_records": records, "job_checkpoint_interval": interval}));
    report.param(
        "job",
        "generator (100,000 words) -> word-count (p) -> word-count (p) -> file sink",
    );
    let plugin = settings.plugin("word-count")?;
    for p in [1u32, 2, 4] {
        let case = format!("job p{p}: checkpoint duration (median)");
        settings.say(&format!(
            "checkpoint: two-stage word count job at parallelism {p}"
        ));
        let case_dir = dir.join(format!("job-p{p}"));
        std::fs::create_dir_all(&case_dir)?;
        let stage =
            |id: &str, input: &str| Operator::new(id, &plugin).inputs(&[input]).parallelism(p);
        let job = JobFile::new("bench-checkpoint-job")
            .checkpoint(checkpoint_table(Some(interval), 100_000))
            .source(Source::generator("in", records).words(100_000))
            .operator(stage("count", "in"))
            .operator(stage("recount", "count"))
            .sink(
                Sink::file("out", "out.jsonl")
                    .format("jsonl")
                    .input("recount"),
            );
        let run = run_job(&case_dir, &job, RestoreMode::None, ("in", "count", "out"))?;
        let cps = run.periodic_checkpoints();
        let d: Vec<f64> = cps.iter().map(|c| c.duration_ms as f64).collect();
        let a: Vec<f64> = cps.iter().map(|c| c.alignment_ms as f64).collect();
        let pause: Vec<f64> = cps
            .iter()
            .filter_map(|c| c.pause_ms)
            .map(|p| p as f64)
            .collect();
        let b: Vec<f64> = cps.iter().map(|c| c.bytes_written as f64).collect();
        let baseline = (p > 1).then_some("job p1: checkpoint duration (median)");
        let row = report.row(&case, median(&d), "ms", baseline);
        row.extra
            .insert("max_ms".into(), d.iter().copied().fold(0.0, f64::max));
        row.extra.insert("alignment_median_ms".into(), median(&a));
        row.extra.insert(
            "alignment_max_ms".into(),
            a.iter().copied().fold(0.0, f64::max),
        );
        row.extra.insert("pause_median_ms".into(), median(&pause));
        row.extra.insert(
            "pause_max_ms".into(),
            pause.iter().copied().fold(0.0, f64::max),
        );
        row.extra
            .insert("max_buffered_bytes".into(), run.max_buffered_bytes as f64);
        row.extra.insert("bytes_median".into(), median(&b));
        row.extra.insert("checkpoints".into(), cps.len() as f64);
        row.extra.insert("records_per_s".into(), run.rate(records));
        std::fs::remove_dir_all(&case_dir)?;
    }
    report.notes.push(
        "store rows: one durable redb transaction per checkpoint (CheckpointStore::commit); job rows: duration_ms, alignment_ms and pause_ms (an operator thread's longest pause) of the periodic checkpoints in CheckpointStore::list()".into(),
    );
    Ok(report)
}
