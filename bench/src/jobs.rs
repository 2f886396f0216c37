//! Job files for the benchmarks (built with `weir_tests::job_file`), and
//! running a job through [`weir::run::run`] while watching its metrics.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::report::Row;
use anyhow::Context as _;
use weir::config::Job;
use weir::metrics::JobMetrics;
use weir::run::{RestoreMode, RunOptions, RunSummary};
use weir::store::{CheckpointMeta, CheckpointStore};
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};

/// `[checkpoint]` of a job: the state folder `state`, `retain` checkpoints,
/// and the interval (none: only the final checkpoint).
pub fn checkpoint_table(interval: Option<&str>, retain: u64) -> Checkpoint {
    let table = Checkpoint::final_only().dir("state").retain(retain);
    match interval {
        Some(i) => table.interval(i),
        None => table,
    }
}

/// A job: one source `in`, one operator `op` running `plugin` with
/// `parallelism` and `config`, one file sink `out` writing `out.jsonl`.
pub struct LinearJob<'a> {
    /// The job's name.
    pub name: &'a str,
    /// The `[checkpoint]` table.
    pub checkpoint: Checkpoint,
    /// The source, `in`.
    pub source: Source,
    /// The plugin component (absolute path).
    pub plugin: &'a Path,
    /// Instances of the operator.
    pub parallelism: u32,
    /// The operator's config as an inline TOML table.
    pub config: &'a str,
}

impl LinearJob<'_> {
    /// The job file.
    pub fn job(self) -> JobFile {
        JobFile::new(self.name)
            .checkpoint(self.checkpoint)
            .source(self.source)
            .operator(
                Operator::new("op", self.plugin)
                    .inputs(&["in"])
                    .parallelism(self.parallelism)
                    .config(self.config),
            )
            .sink(Sink::file("out", "out.jsonl").format("jsonl").input("op"))
    }
}

/// The word count the job benchmarks run: `words.txt` of the folder above
/// the job's, read as lines, into word-count `plugin` (one instance), a
/// checkpoint every `interval`, three retained.
pub fn word_count_job(name: &str, plugin: &Path, interval: &str) -> JobFile {
    LinearJob {
        name,
        checkpoint: checkpoint_table(Some(interval), 3),
        source: Source::file("in", "../words.txt").format("lines"),
        plugin,
        parallelism: 1,
        config: "{}",
    }
    .job()
}

/// What one run of a job did, as seen from outside.
#[derive(Debug, Clone)]
pub struct JobRun {
    /// The runner's summary.
    pub summary: RunSummary,
    /// From calling `run` to its return.
    pub wall: Duration,
    /// From calling `run` until the first record left a source (plugins
    /// are compiled and instances created before that).
    pub first_read: Option<Duration>,
    /// From calling `run` until the first record reached the operator.
    pub first_processed: Option<Duration>,
    /// From calling `run` until the operator's first output (the first
    /// `process` call returned).
    pub first_emitted: Option<Duration>,
    /// From calling `run` until the first record reached a sink (the first
    /// processed record came out of the operator).
    pub first_output: Option<Duration>,
    /// Most bytes one instance buffered during an alignment
    /// (`weir_alignment_buffered_bytes`, sampled every millisecond).
    pub max_buffered_bytes: u64,
    /// The retained checkpoints after the run.
    pub checkpoints: Vec<CheckpointMeta>,
    /// The job's folder.
    pub dir: PathBuf,
}

impl JobRun {
    /// From the first record read to the end of the run: the time the
    /// records took, without plugin compilation and start-up.
    pub fn processing(&self) -> Duration {
        self.wall - self.first_read.unwrap_or_default()
    }

    /// Records (per second) of `n` records over [`Self::processing`].
    pub fn rate(&self, n: u64) -> f64 {
        n as f64 / self.processing().as_secs_f64().max(1e-9)
    }

    /// The checkpoints taken while the input flowed (not the final one);
    /// all of them if there is no other.
    pub fn periodic_checkpoints(&self) -> Vec<&CheckpointMeta> {
        let periodic: Vec<&CheckpointMeta> = self
            .checkpoints
            .iter()
            .filter(|c| !c.final_checkpoint)
            .collect();
        if periodic.is_empty() {
            self.checkpoints.iter().collect()
        } else {
            periodic
        }
    }

    /// Adds the run's periodic checkpoint count and wall time to `row`.
    pub fn note_checkpoints_and_wall(&self, row: &mut Row) {
        let checkpoints = self.periodic_checkpoints().len() as f64;
        row.extra.insert("checkpoints".into(), checkpoints);
        row.extra.insert("wall_s".into(), self.wall.as_secs_f64());
    }
}

/// Writes `job` to `dir/job.toml` and runs it with `restore`, watching the
/// metrics of `source`, `operator` and `sink` (node ids).
pub fn run_job(
    dir: &Path,
    job: &JobFile,
    restore: RestoreMode,
    (source, operator, sink): (&str, &str, &str),
) -> anyhow::Result<JobRun> {
    let path = dir.join("job.toml");
    std::fs::write(&path, job.to_string())?;
    let job = Job::load(&path, &weir_connectors::registry())
        .with_context(|| format!("loading {}", path.display()))?;
    let runtime = weir::Runtime::new().map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let metrics = JobMetrics::for_job(&job);
    let node = |id: &str| {
        metrics
            .node(id)
            .cloned()
            .with_context(|| format!("no node `{id}` in the job"))
    };
    let (src, op, snk) = (node(source)?, node(operator)?, node(sink)?);
    let options = RunOptions {
        restore,
        metrics: Some(metrics.clone()),
        ..RunOptions::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let watcher = {
        let (stop, metrics) = (stop.clone(), metrics.clone());
        std::thread::spawn(move || {
            let (mut read, mut processed, mut emitted, mut output, mut buffered) =
                (None, None, None, None, 0u64);
            loop {
                let done = stop.load(Ordering::Relaxed);
                let now = started.elapsed();
                let first = |slot: &mut Option<Duration>, n: u64| {
                    if slot.is_none() && n > 0 {
                        *slot = Some(now);
                    }
                };
                first(&mut read, src.records_out.load(Ordering::Relaxed));
                first(&mut processed, op.records_in.load(Ordering::Relaxed));
                first(&mut emitted, op.records_out.load(Ordering::Relaxed));
                first(&mut output, snk.records_in.load(Ordering::Relaxed));
                buffered = buffered.max(
                    metrics
                        .checkpoints
                        .last_alignment_buffered_bytes
                        .load(Ordering::Relaxed),
                );
                if done {
                    return (read, processed, emitted, output, buffered);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let result = weir::run::run(&job, &runtime, &options, &AtomicBool::new(false));
    let wall = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (first_read, first_processed, first_emitted, first_output, max_buffered_bytes) =
        watcher.join().expect("watcher thread");
    let summary = result.with_context(|| format!("running {}", path.display()))?;
    let store = CheckpointStore::open_existing(&dir.join("state"))?;
    let checkpoints = store.list()?;
    Ok(JobRun {
        summary,
        wall,
        first_read,
        first_processed,
        first_emitted,
        first_output,
        max_buffered_bytes,
        checkpoints,
        dir: dir.to_path_buf(),
    })
}
