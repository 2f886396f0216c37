//! `state`: jobs whose keyed state is large (a million keys), each run
//! through the real `weir` binary as a child process, against a native
//! single-threaded program doing the same work, run as a child process too
//! (`weir-bench native ...`), so that both are timed from outside and their
//! peak RSS is measured the same way (`ru_maxrss` of `wait4`):
//!
//! - `reconcile`: the reconcile example over 1M orders (about 930K payment
//!   and 920K bank rows, 1M keys; [`data::write_orders`]), at parallelism
//!   1 and 2 with a checkpoint every second, against
//!   [`native::reconcile_program`] (csv and serde) and
//!   [`tight::reconcile`] (no parser, foldhash, output written by hand);
//! - `word-count uniform`: 5M words drawn uniformly from 1M, and
//!   `word-count zipf`: 5M words of 100K drawn with Zipf's law
//!   ([`data::Zipf`]), each at parallelism 1 and 2 with a checkpoint every
//!   second, against [`native::word_count_program`] and
//!   [`tight::word_count`];
//! - restore and checkpoint at 1M keys, from the [`recovery`](crate::recovery)
//!   benchmark: the time from start to the first processed record of a job
//!   restoring 1M keys, and the final checkpoint of a job that wrote 1M
//!   keys.
//!
//! Rates are input records over the child's wall time, start-up included
//! (plugin compilation is cached by `weir` after the first run). Every
//! case's output is checked against the plain native program's: the same lines,
//! in any order (line count, bytes and an order-independent checksum).
//! Checkpoint numbers of a run come from the `checkpoint N complete in ...`
//! lines `weir -v run` logs: duration, alignment and, when the host
//! reports it, the operator thread's pause.

use serde_json::json;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use weir_tests::job_file::{JobFile, Operator, Sink, Source};

use crate::child::{ChildRun, run_child, weir_run};
use crate::data::{self, mix64};
use crate::jobs::{LinearJob, checkpoint_table};
use crate::{Report, Settings, Target, native, tight};

/// The numbers of one `checkpoint N complete in D ms (B bytes written,
/// alignment A ms[, pause P ms])` log line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CheckpointLine {
    /// Its duration, ms.
    pub duration_ms: f64,
    /// Its alignment, ms.
    pub alignment_ms: f64,
    /// The longest pause of an operator thread, ms, when the host logs it.
    pub pause_ms: Option<f64>,
}

/// The checkpoint lines of a `weir -v run` log.
///
/// ```
/// let log = "INFO weir: checkpoint 3 complete in 12 ms (400 bytes written, alignment 2 ms)\n\
///            INFO weir: checkpoint 4 complete in 9 ms (10 bytes written, alignment 1 ms, pause 5 ms)";
/// let lines = weir_bench::state::checkpoint_lines(log);
/// assert_eq!(lines.len(), 2);
/// assert_eq!((lines[0].duration_ms, lines[0].alignment_ms, lines[0].pause_ms), (12.0, 2.0, None));
/// assert_eq!(lines[1].pause_ms, Some(5.0));
/// ```
pub fn checkpoint_lines(log: &str) -> Vec<CheckpointLine> {
    /// The number right after the first `label` in `s`.
    fn number_after(s: &str, label: &str) -> Option<f64> {
        let rest = &s[s.find(label)? + label.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    }
    log.lines()
        .filter_map(|line| {
            let at = line.find("checkpoint ")?;
            let line = &line[at..];
            Some(CheckpointLine {
                duration_ms: number_after(line, " complete in ")?,
                alignment_ms: number_after(line, "alignment ")?,
                pause_ms: number_after(line, "pause "),
            })
        })
        .collect()
}

/// Lines, bytes and an order-independent checksum of the lines of a file:
/// equal for two files holding the same lines in any order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineSet {
    /// Lines.
    pub lines: u64,
    /// Bytes, line breaks included.
    pub bytes: u64,
    /// The wrapping sum of a hash of each line.
    pub checksum: u64,
}

/// The [`LineSet`] of the file at `path`.
pub fn line_set(path: &Path) -> anyhow::Result<LineSet> {
    let mut r = BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let mut set = LineSet {
        lines: 0,
        bytes: 0,
        checksum: 0,
    };
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(set);
        }
        set.bytes += n as u64;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        // FNV-1a, then mixed: the sum of well-mixed hashes.
        let fnv = text.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        set.checksum = set.checksum.wrapping_add(mix64(fnv));
        set.lines += 1;
    }
}

/// The hidden `weir-bench native` subcommand: a native program as a child
/// process. `args` after `native`: `reconcile PAYMENTS BANK OUT` or
/// `word-count IN OUT`, or the same with `tight-` before the program's name
/// for its tight version ([`crate::tight`]).
pub fn native_child(args: &[OsString]) -> anyhow::Result<()> {
    let arg = |i: usize| -> anyhow::Result<&Path> {
        args.get(i)
            .map(Path::new)
            .context("usage: weir-bench native ([tight-]reconcile PAYMENTS BANK OUT | [tight-]word-count IN OUT)")
    };
    match args.first().and_then(|a| a.to_str()) {
        Some("reconcile") => native::reconcile_program(arg(1)?, arg(2)?, arg(3)?).map(drop),
        Some("word-count") => native::word_count_program(arg(1)?, arg(2)?).map(drop),
        Some("tight-reconcile") => tight::reconcile(arg(1)?, arg(2)?, arg(3)?).map(drop),
        Some("tight-word-count") => tight::word_count(arg(1)?, arg(2)?).map(drop),
        other => anyhow::bail!(
            "unknown native program {other:?} (reconcile, word-count, tight-reconcile, tight-word-count)"
        ),
    }
}

/// One job and the native program doing its work.
struct Workload {
    name: &'static str,
    /// Input records (both inputs).
    records: u64,
    /// The `weir-bench native` arguments, but the output file.
    native: Vec<OsString>,
    /// The job at a parallelism, writing `out.jsonl` next to its file.
    job: Box<dyn Fn(u32) -> JobFile>,
}

/// One case of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// The plain native program ([`native`]).
    Native,
    /// The tight native program ([`tight`]).
    Tight,
    Weir {
        parallelism: u32,
    },
}

impl Case {
    fn name(self, workload: &str) -> String {
        match self {
            Case::Native => format!("{workload} native"),
            Case::Tight => format!("{workload} native tight"),
            Case::Weir { parallelism } => format!("{workload} weir p{parallelism} ckpt=1s"),
        }
    }
}

/// One run of one case.
#[derive(Debug, Clone)]
struct Measured {
    run: ChildRun,
    output: LineSet,
    checkpoints: Vec<CheckpointLine>,
}

/// Runs `case` of `w` once in a fresh folder under `dir`.
fn run_case(settings: &Settings, w: &Workload, case: Case, dir: &Path) -> anyhow::Result<Measured> {
    let case_dir = dir.join(case.name(w.name).replace([' ', '='], "-"));
    if case_dir.exists() {
        std::fs::remove_dir_all(&case_dir)?;
    }
    std::fs::create_dir_all(&case_dir)?;
    let out = case_dir.join("out.jsonl");
    let cmd = match case {
        Case::Native => {
            let mut cmd = Command::new(settings.bench_binary()?);
            cmd.arg("native").args(&w.native).arg(&out);
            cmd
        }
        Case::Tight => {
            let mut cmd = Command::new(settings.bench_binary()?);
            let program = format!("tight-{}", w.native[0].to_string_lossy());
            cmd.arg("native")
                .arg(program)
                .args(&w.native[1..])
                .arg(&out);
            cmd
        }
        Case::Weir { parallelism } => {
            let job = case_dir.join("job.toml");
            std::fs::write(&job, (w.job)(parallelism).to_string())?;
            let mut cmd = weir_run(settings, &job)?;
            cmd.arg("-v");
            cmd
        }
    };
    let run = run_child(cmd, &case_dir.join("run"))?;
    let output = line_set(&out)?;
    let checkpoints = checkpoint_lines(&run.stderr);
    std::fs::remove_dir_all(&case_dir)?;
    Ok(Measured {
        run,
        output,
        checkpoints,
    })
}

const MB: f64 = 1e6;

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let orders = settings.pick(1_000_000, 100_000, 2_000);
    let words = settings.pick(5_000_000, 500_000, 20_000);
    let (distinct, zipf_distinct) =
        settings.pick((1_000_000, 100_000), (100_000, 10_000), (5_000, 500));
    let (mut report, scratch) = settings.start("state", "records/s: input records over the child process's wall time; ratio = value / the plain native program's (csv and serde), ratio_tight = value / the tight native program's")?;
    report.params(json!({"orders": orders, "words": words,
        "distinct_words": distinct, "zipf_distinct_words": zipf_distinct}));
    let dir = scratch.path();

    settings.say(&format!(
        "state: writing {orders} orders and 2 x {words} words"
    ));
    let written = data::write_orders(dir, orders)?;
    report.params(json!({"payments_rows": written.payments, "bank_rows": written.bank}));
    data::write_lines(&dir.join("words-uniform.txt"), words, |i| {
        data::word(i, distinct)
    })?;
    let zipf = data::Zipf::new(zipf_distinct);
    data::write_lines(&dir.join("words-zipf.txt"), words, |i| zipf.word(i))?;

    let reconcile = settings.plugin("reconcile")?;
    let word_count = settings.plugin("word-count")?;
    let word_job = |input: &'static str, plugin: PathBuf| -> Box<dyn Fn(u32) -> JobFile> {
        Box::new(move |parallelism| {
            LinearJob {
                name: "bench-state",
                checkpoint: checkpoint_table(Some("1s"), 3),
                source: Source::file("in", &format!("../{input}")).format("lines"),
                plugin: &plugin,
                parallelism,
                config: "{}",
            }
            .job()
        })
    };
    let path = |name: &str| dir.join(name).into_os_string();
    let workloads = [
        Workload {
            name: "reconcile",
            records: written.payments + written.bank,
            native: vec!["reconcile".into(), path("payments.csv"), path("bank.csv")],
            job: Box::new(move |parallelism| reconcile_job(&reconcile, parallelism, "1s")),
        },
        Workload {
            name: "word-count uniform",
            records: words,
            native: vec!["word-count".into(), path("words-uniform.txt")],
            job: word_job("words-uniform.txt", word_count.clone()),
        },
        Workload {
            name: "word-count zipf",
            records: words,
            native: vec!["word-count".into(), path("words-zipf.txt")],
            job: word_job("words-zipf.txt", word_count),
        },
    ];

    let reps = settings.pick(3, 1, 1);
    report.repetitions(
        reps,
        "the run with the median wall time (cases run round-robin, each round starting one case later); all rates in rates_*",
    );
    let cases = [
        Case::Native,
        Case::Tight,
        Case::Weir { parallelism: 1 },
        Case::Weir { parallelism: 2 },
    ];
    for w in &workloads {
        let mut runs: Vec<Vec<Measured>> = vec![Vec::new(); cases.len()];
        for rep in 0..reps {
            for i in 0..cases.len() {
                let at = (i + rep) % cases.len();
                let name = cases[at].name(w.name);
                settings.say(&format!("state: {name} (run {} of {reps})", rep + 1));
                runs[at].push(run_case(settings, w, cases[at], dir)?);
            }
        }
        let native_name = Case::Native.name(w.name);
        let mut native: Option<(LineSet, u64)> = None;
        // The tight program's rate and peak RSS.
        let mut tight: Option<(f64, u64)> = None;
        for (case, runs) in cases.iter().zip(&runs) {
            let name = case.name(w.name);
            let mut sorted: Vec<&Measured> = runs.iter().collect();
            sorted.sort_by_key(|m| m.run.wall);
            let m = sorted[(sorted.len() - 1) / 2];
            let rate = w.records as f64 / m.run.wall.as_secs_f64().max(1e-9);
            let baseline = (*case != Case::Native).then_some(native_name.as_str());
            let row = report.row(&name, rate, "records/s", baseline);
            row.extra.insert("wall_s".into(), m.run.wall.as_secs_f64());
            row.extra
                .insert("peak_rss_mb".into(), m.run.peak_rss as f64 / MB);
            row.extra
                .insert("output_lines".into(), m.output.lines as f64);
            for (i, r) in runs.iter().enumerate() {
                let rate = w.records as f64 / r.run.wall.as_secs_f64().max(1e-9);
                row.extra.insert(format!("rates_{}", i + 1), rate);
            }
            if let Some((_, native_rss)) = native {
                row.extra.insert(
                    "peak_rss_ratio".into(),
                    m.run.peak_rss as f64 / native_rss.max(1) as f64,
                );
            }
            match (case, tight) {
                (Case::Tight, _) => tight = Some((rate, m.run.peak_rss)),
                (Case::Weir { .. }, Some((tight_rate, tight_rss))) => {
                    row.extra.insert("ratio_tight".into(), rate / tight_rate);
                    row.extra.insert(
                        "peak_rss_ratio_tight".into(),
                        m.run.peak_rss as f64 / tight_rss.max(1) as f64,
                    );
                }
                _ => {}
            }
            let lines = &m.checkpoints;
            if !lines.is_empty() {
                let max = |f: fn(&CheckpointLine) -> f64| lines.iter().map(f).fold(0.0, f64::max);
                row.extra.insert("checkpoints".into(), lines.len() as f64);
                row.extra
                    .insert("max_ckpt_ms".into(), max(|c| c.duration_ms));
                row.extra
                    .insert("max_alignment_ms".into(), max(|c| c.alignment_ms));
                if lines.iter().any(|c| c.pause_ms.is_some()) {
                    row.extra
                        .insert("max_pause_ms".into(), max(|c| c.pause_ms.unwrap_or(0.0)));
                }
            }
            match native {
                None => native = Some((m.output, m.run.peak_rss)),
                Some((expected, _)) => {
                    for r in runs.iter().filter(|r| r.output != expected) {
                        report.notes.push(format!(
                            "{name}: the output ({} lines, {} bytes) is not the native program's ({} lines, {} bytes) in some order",
                            r.output.lines, r.output.bytes, expected.lines, expected.bytes
                        ));
                    }
                }
            }
        }
    }

    // Restore and checkpoint at 1M keys: the recovery benchmark's own runs.
    let keys = settings.state_keys();
    settings.say(&format!(
        "state: restore and checkpoint at {keys} keys (the recovery benchmark)"
    ));
    let mut recovery_settings = settings.clone();
    recovery_settings.keys = Some(keys);
    let recovery = crate::recovery::run(&recovery_settings)?;
    let extra = |case: &str, key: &str| {
        recovery
            .get(case)
            .and_then(|r| r.extra.get(key).copied())
            .unwrap_or(f64::NAN)
    };
    let restore_ms = extra("restore: first output", "first_processed_ms");
    report
        .row(
            &format!("restore {keys} keys: first processed record"),
            restore_ms,
            "ms",
            None,
        )
        .extra
        .insert(
            "first_output_ms".into(),
            recovery.value("restore: first output").unwrap_or(f64::NAN),
        );
    let ckpt = "build: job counting the keys";
    let row = report.row(
        &format!("checkpoint of {keys} dirty keys"),
        extra(ckpt, "final_checkpoint_ms"),
        "ms",
        None,
    );
    row.extra.insert(
        "alignment_ms".into(),
        extra(ckpt, "final_checkpoint_alignment_ms"),
    );
    let pause_ms = extra(ckpt, "final_checkpoint_pause_ms");
    if pause_ms.is_finite() {
        row.extra.insert("pause_ms".into(), pause_ms);
    } else {
        report.notes.push(
            "checkpoint pause: not reported (neither checkpoint metadata nor the log lines hold a pause yet); the targets on it are missed until the host measures it".into(),
        );
    }

    let ratio = |case: &str| report.get(case).and_then(|r| r.ratio).unwrap_or(f64::NAN);
    let extra_of = |case: &str, key: &str| {
        report
            .get(case)
            .and_then(|r| r.extra.get(key).copied())
            .unwrap_or(f64::NAN)
    };
    let value = |case: &str| report.value(case).unwrap_or(f64::NAN);
    let p1 = Case::Weir { parallelism: 1 }.name("reconcile");
    let p2 = Case::Weir { parallelism: 2 }.name("reconcile");
    let reconcile_pause = extra_of(&p1, "max_pause_ms");
    report.targets = vec![
        Target::at_least(
            "reconcile p1 (1 s checkpoints) / native program, throughput",
            ratio(&p1),
            0.3,
        ),
        Target::at_most(
            "reconcile p1 peak RSS / native program's",
            extra_of(&p1, "peak_rss_ratio"),
            4.0,
        ),
        Target::above(
            "reconcile p2 / p1, throughput",
            value(&p2) / value(&p1),
            1.0,
        ),
        Target::at_least(
            "word count over 1M distinct words p1 / native program",
            ratio(&Case::Weir { parallelism: 1 }.name("word-count uniform")),
            0.3,
        ),
        Target::at_least(
            "word count over Zipf words (100K distinct) p1 / native program",
            ratio(&Case::Weir { parallelism: 1 }.name("word-count zipf")),
            0.5,
        ),
        Target::at_least(
            "reconcile p1 / tight native program, throughput",
            extra_of(&p1, "ratio_tight"),
            0.3,
        ),
        Target::at_most(
            "reconcile p1 peak RSS / tight native program's",
            extra_of(&p1, "peak_rss_ratio_tight"),
            3.0,
        ),
        Target::at_least(
            "word count over Zipf words p1 / tight native program",
            extra_of(
                &Case::Weir { parallelism: 1 }.name("word-count zipf"),
                "ratio_tight",
            ),
            0.6,
        ),
        Target::below(
            &format!("restore {keys} keys: start to first processed record (s)"),
            restore_ms / 1e3,
            1.0,
        ),
        Target::below(
            &format!("checkpoint of {keys} dirty keys: operator thread pause (s)"),
            pause_ms / 1e3,
            1.0,
        ),
        Target::below(
            "reconcile p1: longest operator thread pause of a checkpoint (s)",
            reconcile_pause / 1e3,
            1.0,
        ),
    ];
    Ok(report)
}

/// The reconcile example's job at `parallelism`: `../payments.csv` (a) and
/// `../bank.csv` (b), keyed by `order_no`, a checkpoint every `interval`,
/// and a call timeout of 60 s.
pub(crate) fn reconcile_job(plugin: &Path, parallelism: u32, interval: &str) -> JobFile {
    JobFile::new("bench-state-reconcile")
        .checkpoint(checkpoint_table(Some(interval), 3))
        .source(
            Source::file("payments", "../payments.csv")
                .format("csv")
                .key("order_no"),
        )
        .source(
            Source::file("bank", "../bank.csv")
                .format("csv")
                .key("order_no"),
        )
        .operator(
            Operator::new("reconcile", plugin)
                .ports(&[("a", "payments"), ("b", "bank")])
                .parallelism(parallelism)
                .config("{ tolerance = 0.0 }"),
        )
        .sink(
            Sink::file("out", "out.jsonl")
                .format("jsonl")
                .input("reconcile"),
        )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn line_sets_ignore_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, "x\ny\n").unwrap();
        std::fs::write(&b, "y\nx\n").unwrap();
        std::fs::write(&c, "x\nz\n").unwrap();
        assert_eq!(line_set(&a).unwrap(), line_set(&b).unwrap());
        assert_ne!(line_set(&a).unwrap(), line_set(&c).unwrap());
        assert_eq!(line_set(&a).unwrap().lines, 2);
    }

    #[test]
    fn the_native_reconcile_classifies_like_the_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let orders = data::write_orders(dir.path(), 2_000).unwrap();
        assert!(orders.payments > 1_700 && orders.bank > 1_600, "{orders:?}");
        let out = dir.path().join("out.jsonl");
        let lines = native::reconcile_program(
            &dir.path().join("payments.csv"),
            &dir.path().join("bank.csv"),
            &out,
        )
        .unwrap();
        assert_eq!(lines, 2_000, "one line per order");
        let text = std::fs::read_to_string(&out).unwrap();
        let mut statuses = BTreeMap::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            *statuses
                .entry(v["status"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
        // The example's distribution: 80% match, 5% mismatch, 8% + 7% one-sided.
        let share = |s: &str| f64::from(statuses[s]) / 2_000.0;
        assert!((share("MATCH") - 0.80).abs() < 0.04, "{statuses:?}");
        assert!(
            (share("AMOUNT_MISMATCH") - 0.05).abs() < 0.02,
            "{statuses:?}"
        );
        assert!((share("ONLY_A") - 0.08).abs() < 0.02, "{statuses:?}");
        assert!((share("ONLY_B") - 0.07).abs() < 0.02, "{statuses:?}");
    }

    #[test]
    fn zipf_words_favour_low_ranks() {
        let z = data::Zipf::new(1_000);
        let words: Vec<String> = (0..20_000).map(|i| z.word(i)).collect();
        let top = words.iter().filter(|w| *w == "w0").count();
        // P(rank 0) = 1 / H(1000), about 0.134.
        assert!((2_300..3_100).contains(&top), "{top}");
        assert!(words.iter().all(|w| w[1..].parse::<u64>().unwrap() < 1_000));
    }
}
