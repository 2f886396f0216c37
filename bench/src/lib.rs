//! # weir-bench
//!
//! Benchmarks of Weir, each reported as a ratio against a baseline measured
//! in the same run (absolute times on a shared machine drift; ratios much
//! less). The `weir-bench` binary runs them; `docs/performance.md` has the
//! numbers and how to reproduce them.
//!
//! The benchmarks and what each measures are listed in [`BENCHMARKS`].

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
pub mod recording;
pub mod recovery;
pub mod remote;
pub mod report;
pub mod skew;
pub mod state;
pub mod threads;
pub mod tight;
pub mod ui;
pub mod windows;
pub mod workers;

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

/// The unit of benchmarks that time whole runs.
pub const WHOLE_RUN_RATE: &str =
    "records/s over the wall time of the whole run (for Weir: `weir run` from start to exit)";
/// The unit of benchmarks that time from the first record read, against a
/// baseline.
pub const RECORDS_RATE: &str =
    "records/s from the first record read to the end of the run; ratio = value / baseline";

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

    /// The start of benchmark `name`'s run: its report, saying the `unit`
    /// its values are in, and a fresh scratch folder.
    pub fn start(&self, name: &str, unit: &str) -> anyhow::Result<(Report, Scratch)> {
        let mut report = Report::new(name);
        report.param("unit", unit);
        Ok((report, self.scratch(name)?))
    }

    /// A record count `--records` overrides: that, or one of three by mode.
    pub fn records_or(&self, full: u64, quick: u64, tiny: u64) -> u64 {
        self.records.unwrap_or(self.pick(full, quick, tiny))
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

/// One benchmark: its name and what it measures, and the function that
/// runs it and returns its report.
#[derive(Debug, Clone, Copy)]
pub struct Benchmark {
    /// Its name on the command line and in its report.
    pub name: &'static str,
    /// What it measures, against what baseline (one line, for `--help`).
    pub about: &'static str,
    /// Runs it.
    pub run: fn(&Settings) -> anyhow::Result<Report>,
}

/// Every benchmark, in the order `all` runs them.
pub const BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        name: "boundary",
        about: "ns per record through `process`, Wasm against the same logic called natively",
        run: boundary::run,
    },
    Benchmark {
        name: "connectors",
        about: "records/s into PostgreSQL and JetStream and out of JetStream, against each server's own client",
        run: connectors::run,
    },
    Benchmark {
        name: "end-to-end",
        about: "records/s of a filter job and a keyed word count, against native programs",
        run: end_to_end::run,
    },
    Benchmark {
        name: "checkpoint",
        about: "full against incremental checkpoints; duration and alignment as parallelism grows",
        run: checkpoint::run,
    },
    Benchmark {
        name: "intervals",
        about: "word count and reconcile with 100 ms checkpoints, against 1 s checkpoints",
        run: intervals::run,
    },
    Benchmark {
        name: "kafka",
        about: "records/s into and out of Kafka, against librdkafka's own producer and consumer",
        run: kafka::run,
    },
    Benchmark {
        name: "latency",
        about: "ms from a record's write to stdin to its count on stdout, by delivery mode and interval",
        run: latency::run,
    },
    Benchmark {
        name: "modes",
        about: "aligned, unaligned and timed-out alignment under backpressure",
        run: modes::run,
    },
    Benchmark {
        name: "recording",
        about: "word count recording its input (`record_inputs`) against the same job not recording",
        run: recording::run,
    },
    Benchmark {
        name: "recovery",
        about: "time to the first processed record when restoring state",
        run: recovery::run,
    },
    Benchmark {
        name: "remote",
        about: "records/s with checkpoints copied to S3 against the local file; a million keys restored from S3",
        run: remote::run,
    },
    Benchmark {
        name: "skew",
        about: "alignment when one input of a two-input operator is slower",
        run: skew::run,
    },
    Benchmark {
        name: "state",
        about: "jobs with a million keys of state through `weir`, against native programs, with peak RSS",
        run: state::run,
    },
    Benchmark {
        name: "threads",
        about: "the host's thread per stage against tokio tasks on the same pipeline",
        run: threads::run,
    },
    Benchmark {
        name: "ui",
        about: "the web dashboard's cost, nobody watching and with the page open in Chromium",
        run: ui::run,
    },
    Benchmark {
        name: "workers",
        about: "one job on 1, 2 and 3 worker processes over Kafka; a killed worker's tasks taken over",
        run: workers::run,
    },
    Benchmark {
        name: "windows",
        about: "event-time windows with out-of-order input, against a native program",
        run: windows::run,
    },
];

/// The benchmark named `name`.
pub fn benchmark(name: &str) -> Option<&'static Benchmark> {
    BENCHMARKS.iter().find(|b| b.name == name)
}

/// Runs the benchmark `name` (one of [`BENCHMARKS`]).
pub fn run(name: &str, settings: &Settings) -> anyhow::Result<Report> {
    let Some(benchmark) = benchmark(name) else {
        let known: Vec<&str> = BENCHMARKS.iter().map(|b| b.name).collect();
        anyhow::bail!(
            "unknown benchmark `{name}` (known: {}, all)",
            known.join(", ")
        );
    };
    let before = load_average();
    let mut report = (benchmark.run)(settings)?;
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
