//! `recovery`: time from start to the first processed record when the job
//! restores N keys of state (1 million by default).
//!
//! The checkpoint is made by the host itself: a word-count job counts a file
//! of N distinct words to its end (final checkpoint 1, N keys). The bench
//! then records checkpoint 2, the same but not final (no new state), and
//! appends more words to the input, so that restoring checkpoint 2 resumes
//! reading there. Measured:
//!
//! - step by step: open the store, `load_instance`, build the `KeyedState`,
//!   compile the plugin, `OperatorInstance::new`, `restore`, the first
//!   `process`;
//! - end to end: `weir::run::run` restoring checkpoint 2, until the
//!   first record reaches the operator and until its first output reaches
//!   the sink;
//! - the baseline: the same job started with no checkpoint (cold start);
//! - rescaling that state from 1 to 2 instances (`CheckpointStore::derive`,
//!   as a restore with a changed parallelism does) and writing it as a
//!   savepoint, against `load_instance` of the same state.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use weir::keyed::state::KeyedState;
use weir::run::RestoreMode;
use weir::store::CheckpointStore;
use weir::{OperatorInstance, Record, Runtime};

use weir_tests::job_file::{JobFile, Source};

use crate::jobs::{LinearJob, checkpoint_table, run_job};
use crate::{Report, Settings, Target};

const NAME: &str = "bench-recovery";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let keys = settings.state_keys();
    let more = 10_000u64;
    let mut report = Report::new("recovery");
    report.param("keys", keys);
    let scratch = settings.scratch("recovery")?;
    let dir = scratch.path();
    let plugin_path = settings.plugin("word-count")?;
    let job = |dir_name: &str| -> anyhow::Result<(std::path::PathBuf, JobFile)> {
        let d = dir.join(dir_name);
        std::fs::create_dir_all(&d)?;
        let job = LinearJob {
            name: NAME,
            checkpoint: checkpoint_table(None, 3),
            source: Source::file("in", "words.txt").format("lines"),
            plugin: &plugin_path,
            parallelism: 1,
            config: "{}",
        }
        .job();
        Ok((d, job))
    };

    // Cold start (the baseline): the extra words only, no checkpoint.
    settings.say("recovery: cold start");
    let (cold_dir, job_file) = job("cold")?;
    crate::data::write_lines(&cold_dir.join("words.txt"), more, |i| format!("x{i}"))?;
    let cold = run_job(&cold_dir, &job_file, RestoreMode::None, ("in", "op", "out"))?;

    // Build a checkpoint with `keys` keys.
    settings.say(&format!("recovery: building a checkpoint of {keys} keys"));
    let (warm_dir, job_file) = job("restore")?;
    let input = warm_dir.join("words.txt");
    crate::data::write_lines(&input, keys, |i| format!("w{i}"))?;
    let build = run_job(&warm_dir, &job_file, RestoreMode::None, ("in", "op", "out"))?;
    let state_dir = warm_dir.join("state");
    {
        let store = CheckpointStore::open(&state_dir, NAME)?;
        let last = store.latest()?.context("the job left no checkpoint")?;
        if last.state_keys != keys {
            anyhow::bail!(
                "checkpoint {} has {} keys, expected {keys}",
                last.id,
                last.state_keys
            );
        }
        let mut next = last.clone();
        next.id = last.id + 1;
        next.final_checkpoint = false;
        store.commit(&next, &[], 3)?;
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(&input)?;
    for i in 0..more {
        writeln!(f, "x{i}")?;
    }
    f.sync_all()?;
    drop(f);

    // Step by step, as run_attempt restores an instance.
    settings.say("recovery: step by step");
    let t = Instant::now();
    let store = CheckpointStore::open(&state_dir, NAME)?;
    let meta = store.latest()?.context("checkpoint 2")?;
    let open = t.elapsed();
    let t = Instant::now();
    let restored = store.load_instance(meta.id, "op", 0)?;
    let load = t.elapsed();
    let loaded_keys = restored.entries.len();
    drop(store);
    let t = Instant::now();
    let state = KeyedState::from_entries(restored.entries);
    let build_state = t.elapsed();
    let t = Instant::now();
    let runtime = Runtime::new().map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let plugin = runtime.load(&plugin_path)?;
    let compile = t.elapsed();
    let t = Instant::now();
    let mut inst = OperatorInstance::new(&plugin, "op", 0, 1, "{}")?;
    let instantiate = t.elapsed();
    let t = Instant::now();
    let version = meta.operators.get("op").map_or(1, |o| o.state_version);
    inst.restore(state, version, &restored.snapshot)?;
    let restore = t.elapsed();
    let t = Instant::now();
    // A first batch as the job's source reads it: a known word, then new ones.
    let batch: Vec<Record> = std::iter::once("w7".to_string())
        .chain((1..1024).map(|i| format!("x{i}")))
        .map(|w| Record::new(w.clone().into_bytes()).with_key(w.into_bytes()))
        .collect();
    inst.process(0, &batch)?;
    let out = inst.take_output(0);
    let first = t.elapsed();
    if out.first().map(|r| r.value.as_slice()) != Some(&br#"{"word":"w7","count":2}"#[..]) {
        anyhow::bail!(
            "the restored instance did not continue the count: {:?}",
            out.first()
        );
    }
    drop(inst);

    // End to end.
    settings.say("recovery: end to end");
    let restored_run = run_job(
        &warm_dir,
        &job_file,
        RestoreMode::Latest,
        ("in", "op", "out"),
    )?;
    if restored_run.summary.restored_from != Some(meta.id) {
        anyhow::bail!(
            "the run restored {:?}, not checkpoint {}",
            restored_run.summary.restored_from,
            meta.id
        );
    }

    // Rescaling the restored state (a derived checkpoint, as a restore with
    // a changed parallelism writes) and writing it as a savepoint.
    settings.say("recovery: rescale and savepoint");
    let store = CheckpointStore::open(&state_dir, NAME)?;
    let last = store.latest()?.context("the restored run's checkpoint")?;
    let mut wider = last.clone();
    wider.id = last.id + 1;
    wider.final_checkpoint = false;
    wider.derived = Some(weir::store::Derivation {
        checkpoint: last.id,
        ..Default::default()
    });
    if let Some(op) = wider.operators.get_mut("op") {
        op.parallelism = 2;
    }
    let moves = [weir::store::Move {
        operator: "op".into(),
        from: 1,
        to: 2,
    }];
    let t = Instant::now();
    store.derive(None, last.id, &wider, &moves, 3)?;
    let rescale = t.elapsed();
    let t = Instant::now();
    store.write_savepoint(wider.id, &dir.join("savepoint"))?;
    let savepoint = t.elapsed();
    let derived_keys = store.get(wider.id)?.map_or(0, |m| m.state_keys);
    if derived_keys != last.state_keys {
        anyhow::bail!(
            "the rescale kept {derived_keys} of {} keys",
            last.state_keys
        );
    }
    drop(store);

    let opt_ms = |d: Option<Duration>| d.map_or(f64::NAN, ms);
    let row = report.row(
        "cold start: first output",
        opt_ms(cold.first_output),
        "ms",
        None,
    );
    row.extra
        .insert("first_processed_ms".into(), opt_ms(cold.first_processed));
    let row = report.row(
        "restore: first output",
        opt_ms(restored_run.first_output),
        "ms",
        Some("cold start: first output"),
    );
    row.extra.insert(
        "first_processed_ms".into(),
        opt_ms(restored_run.first_processed),
    );
    row.extra
        .insert("first_read_ms".into(), opt_ms(restored_run.first_read));
    row.extra.insert(
        "first_emitted_ms".into(),
        opt_ms(restored_run.first_emitted),
    );
    let steps = [
        ("step: open store", open),
        ("step: load_instance", load),
        ("step: KeyedState::from_entries", build_state),
        ("step: compile plugin (Runtime::load)", compile),
        ("step: OperatorInstance::new", instantiate),
        ("step: OperatorInstance::restore", restore),
        ("step: first process (1024 records)", first),
    ];
    let total: Duration = steps.iter().map(|(_, d)| *d).sum();
    for (name, d) in steps {
        report.row(name, ms(d), "ms", None);
    }
    report.row(
        "rescale 1 -> 2 instances (derived checkpoint)",
        ms(rescale),
        "ms",
        Some("step: load_instance"),
    );
    report.row(
        "savepoint (write, 2 instances)",
        ms(savepoint),
        "ms",
        Some("step: load_instance"),
    );
    let row = report.row(
        "steps: total",
        ms(total),
        "ms",
        Some("cold start: first output"),
    );
    row.extra.insert("keys_loaded".into(), loaded_keys as f64);
    let row = report.row("build: job counting the keys", ms(build.wall), "ms", None);
    if let Some(last) = build.checkpoints.last() {
        row.extra
            .insert("final_checkpoint_ms".into(), last.duration_ms as f64);
        row.extra.insert(
            "final_checkpoint_alignment_ms".into(),
            last.alignment_ms as f64,
        );
        // The operator thread's pause, once checkpoint metadata holds one.
        let pause = serde_json::to_value(last)
            .ok()
            .and_then(|meta| meta.get("pause_ms").and_then(serde_json::Value::as_f64));
        if let Some(pause) = pause {
            row.extra.insert("final_checkpoint_pause_ms".into(), pause);
        }
    }
    report.targets.push(Target::below(
        &format!("restore {keys} keys: time to first processed record, end to end (s)"),
        opt_ms(restored_run.first_output) / 1e3,
        2.0,
    ));
    Ok(report)
}
