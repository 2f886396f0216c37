//! `recording`: what recorded input (`record_inputs`) costs. The word count
//! (p1, as `intervals` writes its words) through the real `weir` binary
//! with a checkpoint every second, without recording and recording its
//! last two epochs, run round-robin; the recording case's records per
//! second as a ratio of the other's. Each recording run also reports the
//! bytes recorded per record it was given: the kept epochs' recordings,
//! from the store, over the records of their `process` calls.

use std::path::Path;

use serde_json::json;
use weir::dataflow::recording::Call;
use weir::store::CheckpointStore;
use weir_tests::job_file::{Entry, JobFile};

use crate::child::{run_child, weir_case};
use crate::jobs::word_count_job;
use crate::{Report, Settings, data, median};

/// The cases, baseline first: the operator's `record_inputs`, if any.
const CASES: [(&str, Option<&str>); 2] = [
    ("word-count p1", None),
    ("word-count p1 recording 2 epochs", Some("2 checkpoints")),
];

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let words = settings.pick(5_000_000, 500_000, 20_000);
    let distinct = settings.pick(100_000, 10_000, 500);
    let reps = settings.pick(3, 1, 1);
    let (mut report, scratch) = settings.start(
        "recording",
        "records/s: input records over the weir process's wall time (median of the repetitions, cases round-robin); ratio = value / the same job not recording",
    )?;
    report.params(json!({"words": words, "distinct_words": distinct,
        "repetitions": reps, "checkpoint_interval": "1s"}));
    let dir = scratch.path();
    settings.say(&format!("recording: writing {words} words"));
    data::write_lines(&dir.join("words.txt"), words, |i| data::word(i, distinct))?;
    let plugin = settings.plugin("word-count")?;
    let job = |keep: Option<&str>| -> JobFile {
        let job = word_count_job("bench-recording", &plugin, "1s");
        match keep {
            // The bound holds every epoch of the full size whole.
            Some(keep) => job.operator_with("op", |o| {
                o.string("record_inputs", keep)
                    .string("record_max_bytes", "4GiB")
            }),
            None => job,
        }
    };
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); CASES.len()];
    let mut bytes_per_record = Vec::new();
    for rep in 0..reps {
        for i in 0..CASES.len() {
            let at = (i + rep) % CASES.len();
            let (case, keep) = CASES[at];
            settings.say(&format!("recording: {case} (run {})", rep + 1));
            let (cmd, log) = weir_case(settings, dir, &job(keep))?;
            let wall = run_child(cmd, &log)?.wall.as_secs_f64();
            rates[at].push(words as f64 / wall.max(1e-9));
            if keep.is_some() {
                bytes_per_record.push(recorded_per_record(&dir.join("case/state"))?);
            }
        }
    }
    for (i, (case, _)) in CASES.iter().enumerate() {
        let base = (i > 0).then_some(CASES[0].0);
        let row = report.row(case, median(&rates[i]), "records/s", base);
        for (r, rate) in rates[i].iter().enumerate() {
            row.extra.insert(format!("rates_{}", r + 1), *rate);
        }
        if i > 0 {
            row.extra.insert(
                "recorded_bytes_per_record".into(),
                median(&bytes_per_record),
            );
        }
    }
    report.notes.push(
        "recording writes each batch the operator is given and each batch it emits to the store with the checkpoint: about twice the bytes an instance moves per record, and the checkpoint's commit grows with them".into(),
    );
    Ok(report)
}

/// The bytes of the recordings of operator `op` in the store in `state`
/// over the records their `process` calls were given.
fn recorded_per_record(state: &Path) -> anyhow::Result<f64> {
    let store = CheckpointStore::open_existing(state)?;
    let (mut bytes, mut records) = (0u64, 0u64);
    for epoch in store.recorded_epochs("op")? {
        bytes += epoch.bytes;
        for &instance in &epoch.instances {
            let steps = store.recording(epoch.checkpoint, "op", instance)?;
            for step in steps.unwrap_or_default() {
                if let Call::Process { batch, .. } = &step.call {
                    records += batch.len() as u64;
                }
            }
        }
    }
    anyhow::ensure!(records > 0, "no recorded record in {}", state.display());
    Ok(bytes as f64 / records as f64)
}
