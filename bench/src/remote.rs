//! `remote`: the cost of copying checkpoints to an object store, a private
//! S3 server (SeaweedFS `weed mini`, as the tests start it).
//!
//! - Throughput: a keyed word count (`word-count`, one instance) over
//!   `records` words of a 100,000-word vocabulary, checkpointing every
//!   second, with `[checkpoint] store` on the S3 server against the same
//!   job with the local file only, alternating twice; the best run of each.
//!   Target: at least 0.9 of the local rate.
//! - Restore: the job counts `keys` distinct words to its end (its final
//!   checkpoint in the store); then the time to rebuild an empty state
//!   directory from the store (download and import: what `weir run` on a
//!   new machine does before restoring), against reading the same state
//!   from the local file (`load_instance`). Target: 1 million keys in under
//!   3 s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use weir::remote::{RemoteStore, sync_state_dir};
use weir::run::RestoreMode;
use weir::store::CheckpointStore;
use weir_tests::job_file::{Checkpoint, Entry, JobFile, Source};
use weir_tests::servers::S3;

use crate::jobs::{LinearJob, checkpoint_table, run_job};
use crate::{Report, Settings, Target};

const NAME: &str = "bench-remote";

/// The word count job, its checkpoints every `interval` copied to `store`
/// (with `options`) when given.
fn job(
    settings: &Settings,
    interval: Option<&str>,
    store: Option<(&str, &BTreeMap<String, String>)>,
) -> anyhow::Result<JobFile> {
    let plugin = settings.plugin("word-count")?;
    let mut checkpoint: Checkpoint = checkpoint_table(interval, 3);
    if let Some((url, options)) = store {
        let table: Vec<String> = (options.iter())
            .map(|(k, v)| format!("{k} = {}", serde_json::Value::String(v.clone())))
            .collect();
        checkpoint = checkpoint
            .string("store", url)
            .value("store_options", format!("{{ {} }}", table.join(", ")));
    }
    Ok(LinearJob {
        name: NAME,
        checkpoint,
        source: Source::file("in", "words.txt").format("lines"),
        plugin: &plugin,
        parallelism: 1,
        config: "{}",
    }
    .job())
}

/// The client settings that reach `s3` without the environment.
fn options(s3: &S3) -> BTreeMap<String, String> {
    let key = |k: &str| k.to_ascii_lowercase();
    s3.env().into_iter().map(|(k, v)| (key(k), v)).collect()
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let records = settings.records_or(10_000_000, 200_000, 20_000);
    let keys = settings.state_keys();
    let mut report = Report::new("remote");
    report.param("records", records);
    report.param("keys", keys);
    let scratch = settings.scratch("remote")?;
    let dir = scratch.path();
    settings.say("remote: starting a private S3 server (SeaweedFS)");
    let s3 = S3::start();
    let options = options(&s3);

    // Throughput, alternating local and remote.
    let input = dir.join("words.txt");
    crate::data::write_lines(&input, records, |i| format!("w{}", (i * 7919) % 100_000))?;
    let mut best = [Duration::MAX, Duration::MAX];
    let mut uploaded = 0;
    for round in 0..2 {
        for (which, remote) in [(0, false), (1, true)] {
            let d = dir.join(format!("run-{round}-{which}"));
            std::fs::create_dir_all(&d)?;
            std::fs::hard_link(&input, d.join("words.txt"))
                .or_else(|_| std::fs::copy(&input, d.join("words.txt")).map(|_| ()))?;
            let url = s3.url(&format!("throughput-{round}"));
            let store = remote.then_some((url.as_str(), &options));
            settings.say(&format!(
                "remote: word count, round {round}, store: {remote}"
            ));
            let run = run_job(
                &d,
                &job(settings, Some("1s"), store)?,
                RestoreMode::None,
                ("in", "op", "out"),
            )?;
            best[which] = best[which].min(run.wall);
            if remote {
                uploaded = run.summary.checkpoints;
            }
        }
    }
    let rate = |d: Duration| records as f64 / d.as_secs_f64();
    let row = report.row(
        "word count, checkpoints in the local file",
        rate(best[0]),
        "records/s",
        None,
    );
    row.extra.insert("wall_s".into(), best[0].as_secs_f64());
    let row = report.row(
        "word count, checkpoints copied to S3",
        rate(best[1]),
        "records/s",
        Some("word count, checkpoints in the local file"),
    );
    row.extra.insert("wall_s".into(), best[1].as_secs_f64());
    row.extra.insert("checkpoints".into(), uploaded as f64);
    report.targets.push(Target::at_least(
        "records/s with checkpoints copied to S3, as a share of the local file's",
        best[0].as_secs_f64() / best[1].as_secs_f64(),
        0.9,
    ));

    // Restore of `keys` keys from the store into an empty state directory.
    settings.say(&format!(
        "remote: building a checkpoint of {keys} keys in S3"
    ));
    let d = dir.join("restore");
    std::fs::create_dir_all(&d)?;
    crate::data::write_lines(&d.join("words.txt"), keys, |i| format!("k{i}"))?;
    let url = s3.url("restore");
    run_job(
        &d,
        &job(settings, None, Some((&url, &options)))?,
        RestoreMode::None,
        ("in", "op", "out"),
    )?;
    let state_dir = d.join("state");
    let store = CheckpointStore::open(&state_dir, NAME)?;
    let meta = store.latest()?.context("the job left no checkpoint")?;
    let t = Instant::now();
    let local = store.load_instance(meta.id, "op", 0)?;
    let local_load = t.elapsed();
    drop(store);
    let remote = RemoteStore::open(&url, &options)?;
    let fresh = dir.join("fresh-state");
    let t = Instant::now();
    let manifest =
        sync_state_dir(&remote, &fresh, NAME, None)?.context("no manifest in the store")?;
    let fetched = t.elapsed();
    let t = Instant::now();
    let rebuilt = CheckpointStore::open(&fresh, NAME)?.load_instance(manifest.id, "op", 0)?;
    let rebuilt_load = t.elapsed();
    if rebuilt.entries.len() as u64 != keys || rebuilt != local {
        anyhow::bail!("the state rebuilt from the store differs from the local one");
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    report.row(
        "restore: load_instance from the local file",
        ms(local_load),
        "ms",
        None,
    );
    let row = report.row(
        "restore: rebuild the state directory from S3",
        ms(fetched),
        "ms",
        Some("restore: load_instance from the local file"),
    );
    row.extra
        .insert("packs".into(), manifest.packs.len() as f64);
    report.row(
        "restore: then load_instance from it",
        ms(rebuilt_load),
        "ms",
        None,
    );
    report.targets.push(Target::below(
        &format!("rebuild {keys} keys from S3 and load them (s)"),
        (fetched + rebuilt_load).as_secs_f64(),
        3.0,
    ));
    Ok(report)
}
