//! # weir-bench
//!
//! Benchmarks of Weir, each reported as a ratio against a baseline measured
//! in the same run (absolute times on a shared machine drift; ratios much
//! less). The `weir-bench` binary runs them; `docs/performance.md` has the
//! numbers and how to reproduce them.
//!
//! - [`boundary`]: ns per record through `process`, Wasm against the same
//!   logic compiled natively and called directly.
//! - [`end_to_end`]: records per second of a filter job and a keyed word
//!   count, against native programs doing the same job.
//! - [`checkpoint`]: full against incremental checkpoints, and checkpoint
//!   duration and alignment as parallelism grows.
//! - [`connectors`]: records per second into PostgreSQL and JetStream and
//!   out of JetStream, against each server's own client.
//! - [`intervals`]: word count and reconcile with 100 ms checkpoints
//!   against the same jobs with 1 s checkpoints.
//! - [`kafka`]: records per second into and out of Kafka, against
//!   librdkafka's own producer and consumer.
//! - [`latency`]: milliseconds from a record's write to stdin to its count
//!   on stdout, by sink delivery mode and checkpoint interval.
//! - [`recovery`]: time to the first processed record when restoring state.
//! - [`skew`]: alignment when one input of a two-input operator is slower.
//! - [`state`]: jobs with a million keys of state (reconcile, word count),
//!   through the `weir` binary, against native programs, with peak RSS;
//!   restore and checkpoint at a million keys.
//! - [`ui`]: the web dashboard's cost, nobody watching and with the page
//!   open in headless Chromium.
//! - [`threads`]: the host's thread per stage against tokio tasks, on the
//!   same pipeline.

use std::path::{Path, PathBuf};

pub mod boundary;
pub mod checkpoint;
pub mod child;
pub mod connectors;
pub mod data;
pub mod end_to_end;
pub mod intervals;
pub mod jobs;
pub mod kafka;
pub mod latency;
pub mod modes;
pub mod native;
pub mod recovery;
pub mod report;
pub mod skew;
pub mod state;
pub mod threads;
pub mod ui;
pub mod windows;

pub use report::{Report, Row, Target};

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The sizes of the issue (10 million records, 1 million keys).
    Full,
    /// About 200k records, for CI smoke runs (seconds).
    Quick,
    /// The smallest sizes that still exercise every path (the tests).
    Tiny,
}

/// What every benchmark runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Size of the run.
    pub mode: Mode,
    /// Overrides the number of records of `end-to-end`.
    pub records: Option<u64>,
    /// Overrides the number of state keys of `checkpoint` and `recovery`.
    pub keys: Option<u64>,
    /// Folder with the plugin components (`filter.wasm`, ...).
    pub plugins: PathBuf,
    /// Where inputs, jobs and state go (a temporary folder when `None`).
    pub work_dir: Option<PathBuf>,
    /// Print progress on stderr.
    pub verbose: bool,
    /// The `weir` binary (default: next to this executable).
    pub weir: Option<PathBuf>,
    /// The `weir-bench` binary, which runs the native programs as child
    /// processes (default: this executable).
    pub bench_exe: Option<PathBuf>,
}

impl Settings {
    /// Settings for `mode` with the plugins in `plugins/target` of this
    /// checkout.
    pub fn new(mode: Mode) -> Self {
        Settings {
            mode,
            records: None,
            keys: None,
            plugins: default_plugins(),
            work_dir: None,
            verbose: false,
            weir: None,
            bench_exe: None,
        }
    }

    /// The `weir` binary: [`weir`](Self::weir), else `weir` next to this
    /// executable (or one folder up, from `target/*/deps`), which must exist.
    pub fn weir_binary(&self) -> anyhow::Result<PathBuf> {
        let path = match &self.weir {
            Some(p) => p.clone(),
            None => {
                let exe = std::env::current_exe()?;
                let dir = exe.parent().unwrap_or(Path::new("."));
                let next = dir.join("weir");
                match dir.parent() {
                    Some(up) if !next.is_file() && dir.ends_with("deps") => up.join("weir"),
                    _ => next,
                }
            }
        };
        if !path.is_file() {
            anyhow::bail!(
                "{} is missing: build it with `cargo build --release -p weir-cli` (or pass --weir PATH)",
                path.display()
            );
        }
        Ok(std::path::absolute(&path)?)
    }

    /// The `weir-bench` binary: [`bench_exe`](Self::bench_exe), else this
    /// executable.
    pub fn bench_binary(&self) -> anyhow::Result<PathBuf> {
        match &self.bench_exe {
            Some(p) => Ok(p.clone()),
            None => Ok(std::env::current_exe()?),
        }
    }

    /// The number of state keys of `checkpoint` and `recovery`: `keys`, or
    /// 1 million, 100,000 or 5,000 by mode.
    pub fn state_keys(&self) -> u64 {
        self.keys.unwrap_or(self.pick(1_000_000, 100_000, 5_000))
    }

    /// One of three values by mode.
    pub fn pick<T>(&self, full: T, quick: T, tiny: T) -> T {
        match self.mode {
            Mode::Full => full,
            Mode::Quick => quick,
            Mode::Tiny => tiny,
        }
    }

    /// The component `name.wasm`, which must exist.
    pub fn plugin(&self, name: &str) -> anyhow::Result<PathBuf> {
        let path = self.plugins.join(format!("{name}.wasm"));
        if !path.is_file() {
            anyhow::bail!(
                "{} is missing: build the plugins with scripts/build-plugins.sh (or pass --plugins DIR)",
                path.display()
            );
        }
        Ok(std::path::absolute(&path)?)
    }

    /// A fresh folder for one benchmark: under `work_dir` (kept) or a
    /// temporary one (deleted when dropped).
    pub fn scratch(&self, name: &str) -> anyhow::Result<Scratch> {
        match &self.work_dir {
            Some(dir) => {
                let path = dir.join(name);
                if path.exists() {
                    std::fs::remove_dir_all(&path)?;
                }
                std::fs::create_dir_all(&path)?;
                Ok(Scratch {
                    path: std::path::absolute(&path)?,
                    _temp: None,
                })
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix(&format!("weir-bench-{name}-"))
                    .tempdir()?;
                Ok(Scratch {
                    path: temp.path().to_path_buf(),
                    _temp: Some(temp),
                })
            }
        }
    }

    /// Progress on stderr when verbose.
    pub fn say(&self, msg: &str) {
        if self.verbose {
            eprintln!("weir-bench: {msg}");
        }
    }
}

/// A working folder; deleted on drop when temporary.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl Scratch {
    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `plugins/target` of the checkout this crate was built from.
pub fn default_plugins() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("plugins")
        .join("target")
}

/// The benchmarks, by name.
pub const BENCHMARKS: [&str; 14] = [
    "boundary",
    "connectors",
    "end-to-end",
    "checkpoint",
    "intervals",
    "kafka",
    "latency",
    "modes",
    "recovery",
    "skew",
    "state",
    "threads",
    "ui",
    "windows",
];

/// Runs the benchmark `name` (one of [`BENCHMARKS`]).
pub fn run(name: &str, settings: &Settings) -> anyhow::Result<Report> {
    let before = load_average();
    let mut report = match name {
        "boundary" => boundary::run(settings),
        "connectors" => connectors::run(settings),
        "end-to-end" => end_to_end::run(settings),
        "checkpoint" => checkpoint::run(settings),
        "intervals" => intervals::run(settings),
        "kafka" => kafka::run(settings),
        "latency" => latency::run(settings),
        "modes" => modes::run(settings),
        "recovery" => recovery::run(settings),
        "skew" => skew::run(settings),
        "state" => state::run(settings),
        "threads" => threads::run(settings),
        "ui" => ui::run(settings),
        "windows" => windows::run(settings),
        other => anyhow::bail!(
            "unknown benchmark `{other}` (known: {}, all)",
            BENCHMARKS.join(", ")
        ),
    }?;
    // Other processes on the machine skew absolute numbers: say how busy it was.
    report.param("loadavg_before", before);
    report.param("loadavg_after", load_average());
    Ok(report)
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`), or `?`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The median of `values` (0 when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if !n.is_multiple_of(2) => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Bytes this process caused to be written to storage so far
/// (`write_bytes` of `/proc/self/io`), when the kernel reports it.
pub fn io_write_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}
