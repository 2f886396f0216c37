//! `threads`: the host's threading model against tokio tasks, on the same
//! pipeline in the same run. The pipeline is a source stage, `p` operator
//! stages (records hash-partitioned by key, as the host routes them) and a
//! sink stage that counts what arrives. Three executors run it:
//!
//! - `threads` (the baseline; what the host does): a `std::thread` per stage
//!   and `crossbeam_channel::bounded(16)` between stages;
//! - `tokio`: a multi-thread runtime with [`WORKERS`] worker threads, a task
//!   per stage, `tokio::sync::mpsc::channel(16)`, and the operator's
//!   synchronous Wasm call made directly in its task (a naive port);
//! - `tokio+block_in_place`: as `tokio`, with every call into the operator
//!   wrapped in `tokio::task::block_in_place`, so that the worker's other
//!   tasks move to another thread while the call runs. That is the port a
//!   careful author would make: the instance stays borrowed by its task
//!   (`spawn_blocking` would move the `Store` to a pool thread and back for
//!   every batch), and the task keeps its place on the runtime.
//!
//! Two workloads, for `p` = 1, 2 and 4:
//!
//! - `hop`: one record per message and no operator work (the operator stage
//!   forwards), so the cost measured is the executor's: messages per second,
//!   and process CPU time per channel hop (two hops per message);
//! - `word-count`: batches of [`BATCH`] word records cut by the source,
//!   split by key, through the real `word-count` plugin, an instance (own
//!   `Store`) per operator stage, created on that stage. Records per second,
//!   and each batch's latency from the source's send to the sink's receipt.
//!
//! The inputs are built and partitioned before the clock starts; the clock
//! runs from the source's first send (once every operator stage is ready) to
//! the sink's last receipt.

use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir::dataflow::partition::Partitioner;
use weir::{Batch, OperatorInstance, Plugin, Record, Runtime};

use crate::{Report, Settings, data, median};

/// The operator parallelisms measured.
pub const PARALLELISM: [usize; 3] = [1, 2, 4];

/// Capacity of every channel into an operator stage, in messages (the
/// host's). The sink's one channel holds this many per operator stage, as
/// the host's sink has a channel per upstream instance.
pub const CAPACITY: usize = 16;

/// Records per batch that the source cuts in `word-count` (the host
/// sources' default).
pub const BATCH: usize = 1024;

/// Worker threads of the tokio runtime (the cores of the machine measured).
pub const WORKERS: usize = 2;

/// How the stages of the pipeline run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    /// A thread per stage and crossbeam channels (the host).
    Threads,
    /// A tokio task per stage; operator calls block the worker.
    Tokio,
    /// A tokio task per stage; operator calls in `block_in_place`.
    TokioBlockInPlace,
}

impl Executor {
    /// Every executor, the baseline first.
    pub const ALL: [Executor; 3] = [
        Executor::Threads,
        Executor::Tokio,
        Executor::TokioBlockInPlace,
    ];

    /// The name used in the report's cases.
    pub fn name(self) -> &'static str {
        match self {
            Executor::Threads => "threads",
            Executor::Tokio => "tokio",
            Executor::TokioBlockInPlace => "tokio+block_in_place",
        }
    }
}

/// A message on every edge: a batch, stamped by the source when latency is
/// measured.
struct Msg {
    records: Batch,
    sent: Option<Instant>,
    /// Time the operator's call on the batch took (zero from the source).
    call: Duration,
}

impl Msg {
    /// A batch as the source sends it, stamped with the send time when
    /// latency is measured.
    fn from_source(records: Batch, stamp: bool) -> Msg {
        Msg {
            records,
            sent: stamp.then(Instant::now),
            call: Duration::ZERO,
        }
    }
}

/// What the operator stages do; cloned into each stage.
#[derive(Clone)]
enum Work {
    Forward,
    Wasm(Plugin),
}

/// One operator stage's state, made on the stage.
enum Stage {
    Forward,
    Wasm(Box<OperatorInstance>),
}

impl Stage {
    fn open(work: &Work, instance: usize, parallelism: usize) -> anyhow::Result<Stage> {
        Ok(match work {
            Work::Forward => Stage::Forward,
            Work::Wasm(plugin) => Stage::Wasm(Box::new(OperatorInstance::new(
                plugin,
                "op",
                instance as u32,
                parallelism as u32,
                "{}",
            )?)),
        })
    }

    /// The operator's output for `msg`, with the time its call took.
    fn apply(&mut self, msg: Msg) -> anyhow::Result<Msg> {
        match self {
            Stage::Forward => Ok(msg),
            Stage::Wasm(inst) => {
                let started = Instant::now();
                inst.process_batch(0, &msg.records)?;
                Ok(Msg {
                    records: inst.take_output_batch(0),
                    sent: msg.sent,
                    call: started.elapsed(),
                })
            }
        }
    }
}

/// The sink's count.
struct Tally {
    records: u64,
    half: u64,
    last: Option<Instant>,
    latencies: Vec<Duration>,
    threads_midway: usize,
    calls: Duration,
    messages: u32,
}

impl Tally {
    fn new(expected: u64) -> Self {
        Tally {
            records: 0,
            half: expected / 2,
            last: None,
            latencies: Vec::new(),
            threads_midway: 0,
            calls: Duration::ZERO,
            messages: 0,
        }
    }

    fn receive(&mut self, msg: Msg) {
        let now = Instant::now();
        if let Some(sent) = msg.sent {
            self.latencies.push(now - sent);
        }
        let before = self.records;
        self.records += msg.records.len() as u64;
        if before < self.half.max(1) && self.records >= self.half.max(1) {
            self.threads_midway = thread_count();
        }
        self.calls += msg.call;
        self.messages += 1;
        self.last = Some(now);
    }
}

/// One run of the pipeline.
struct Outcome {
    elapsed: Duration,
    /// Process CPU time from before the stages started to after they ended.
    cpu: Duration,
    /// Threads the run added to the process, counted halfway through.
    threads: usize,
    /// Per-batch latencies, sorted.
    latencies: Vec<Duration>,
    /// Mean time of one operator call.
    call: Duration,
}

impl Outcome {
    fn from_tally(
        start: Instant,
        tally: Tally,
        expected: u64,
        cpu: Duration,
        before: usize,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            tally.records == expected,
            "the sink received {} records of {expected}",
            tally.records
        );
        let mut latencies = tally.latencies;
        latencies.sort_unstable();
        Ok(Outcome {
            elapsed: tally.last.map_or(Duration::ZERO, |l| l - start),
            cpu,
            threads: tally.threads_midway.saturating_sub(before),
            latencies,
            call: tally.calls / tally.messages.max(1),
        })
    }

    /// The `q` quantile of the latencies, in ms.
    fn latency_ms(&self, q: f64) -> f64 {
        let i = ((self.latencies.len().saturating_sub(1)) as f64 * q).round() as usize;
        self.latencies
            .get(i)
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    }
}

/// The source's messages, in order, each with the operator stage it goes to.
type Input = Vec<(usize, Batch)>;

/// A workload: name, operator work, records, and how the input is cut.
type Workload = (&'static str, Work, u64, fn(u64, usize) -> Input);

/// `n` word records, one per message, routed by key over `p` stages.
fn hop_input(n: u64, p: usize) -> Input {
    let mut router = Partitioner::new(p as u32);
    data::word_records(n)
        .into_iter()
        .map(|r| (router.route(r.key.as_deref()), Batch::from(vec![r])))
        .collect()
}

/// `n` word records cut into batches of [`BATCH`], each split by key over
/// `p` stages into one message per stage that gets records.
fn batch_input(n: u64, p: usize) -> Input {
    let mut router = Partitioner::new(p as u32);
    let mut parts: Vec<Vec<Record>> = (0..p).map(|_| Vec::new()).collect();
    let mut out = Vec::new();
    let mut flush = |parts: &mut Vec<Vec<Record>>| {
        for (i, part) in parts.iter_mut().enumerate() {
            if !part.is_empty() {
                out.push((i, Batch::from(std::mem::take(part))));
            }
        }
    };
    for (i, r) in data::word_records(n).into_iter().enumerate() {
        parts[router.route(r.key.as_deref())].push(r);
        if (i + 1) % BATCH == 0 {
            flush(&mut parts);
        }
    }
    flush(&mut parts);
    out
}

/// Runs the pipeline once on `executor`.
fn run_once(
    executor: Executor,
    work: &Work,
    p: usize,
    input: Input,
    stamp: bool,
) -> anyhow::Result<Outcome> {
    let expected: u64 = input.iter().map(|(_, r)| r.len() as u64).sum();
    let before = thread_count();
    match executor {
        Executor::Threads => {
            let cpu0 = cpu_time();
            let (start, tally) = on_threads(work, p, input, stamp, expected)?;
            Outcome::from_tally(start, tally, expected, cpu_time() - cpu0, before)
        }
        Executor::Tokio | Executor::TokioBlockInPlace => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .build()?;
            let cpu0 = cpu_time();
            let wrap = executor == Executor::TokioBlockInPlace;
            let (start, tally) = rt.block_on(on_tokio(work, p, input, stamp, expected, wrap))?;
            let cpu = cpu_time() - cpu0;
            drop(rt);
            Outcome::from_tally(start, tally, expected, cpu, before)
        }
    }
}

/// The pipeline on a thread per stage; returns the start and the sink's
/// tally.
fn on_threads(
    work: &Work,
    p: usize,
    input: Input,
    stamp: bool,
    expected: u64,
) -> anyhow::Result<(Instant, Tally)> {
    use crossbeam_channel::bounded;
    let ready = std::sync::Barrier::new(p + 1);
    let (sink_tx, sink_rx) = bounded::<Msg>(CAPACITY * p);
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..p).map(|_| bounded::<Msg>(CAPACITY)).unzip();
    std::thread::scope(|s| {
        let ready = &ready;
        let ops: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(i, rx)| {
                let out = sink_tx.clone();
                s.spawn(move || -> anyhow::Result<()> {
                    let stage = Stage::open(work, i, p);
                    ready.wait();
                    let mut stage = stage?;
                    for msg in rx {
                        let msg = stage.apply(msg)?;
                        if !msg.records.is_empty() && out.send(msg).is_err() {
                            break;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        drop(sink_tx);
        let sink = s.spawn(move || {
            let mut tally = Tally::new(expected);
            for msg in sink_rx {
                tally.receive(msg);
            }
            tally
        });
        let source = s.spawn(move || {
            ready.wait();
            let start = Instant::now();
            for (i, records) in input {
                if txs[i].send(Msg::from_source(records, stamp)).is_err() {
                    break;
                }
            }
            start
        });
        let start = source.join().map_err(|_| panicked("source"))?;
        for op in ops {
            op.join().map_err(|_| panicked("operator"))??;
        }
        Ok((start, sink.join().map_err(|_| panicked("sink"))?))
    })
}

fn panicked(stage: &str) -> anyhow::Error {
    anyhow::anyhow!("the {stage} thread panicked")
}

/// Runs `f` on the task's worker, or in `block_in_place` when `wrap`.
fn call<T>(wrap: bool, f: impl FnOnce() -> T) -> T {
    if wrap {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// The pipeline as a tokio task per stage; returns the start and the
/// sink's tally.
async fn on_tokio(
    work: &Work,
    p: usize,
    input: Input,
    stamp: bool,
    expected: u64,
    wrap: bool,
) -> anyhow::Result<(Instant, Tally)> {
    use tokio::sync::mpsc::channel;
    let ready = Arc::new(tokio::sync::Barrier::new(p + 1));
    let (sink_tx, mut sink_rx) = channel::<Msg>(CAPACITY * p);
    let mut txs = Vec::new();
    let mut ops = Vec::new();
    for i in 0..p {
        let (tx, mut rx) = channel::<Msg>(CAPACITY);
        txs.push(tx);
        let (out, ready, work) = (sink_tx.clone(), ready.clone(), work.clone());
        ops.push(tokio::spawn(async move {
            let stage = call(wrap, || Stage::open(&work, i, p));
            ready.wait().await;
            let mut stage = stage?;
            while let Some(msg) = rx.recv().await {
                let msg = call(wrap, || stage.apply(msg))?;
                if !msg.records.is_empty() && out.send(msg).await.is_err() {
                    break;
                }
            }
            anyhow::Ok(())
        }));
    }
    drop(sink_tx);
    let sink = tokio::spawn(async move {
        let mut tally = Tally::new(expected);
        while let Some(msg) = sink_rx.recv().await {
            tally.receive(msg);
        }
        tally
    });
    let source = tokio::spawn(async move {
        ready.wait().await;
        let start = Instant::now();
        for (i, records) in input {
            if txs[i].send(Msg::from_source(records, stamp)).await.is_err() {
                break;
            }
        }
        start
    });
    let start = source.await?;
    for op in ops {
        op.await??;
    }
    Ok((start, sink.await?))
}

/// Runs the benchmark.
pub fn run(settings: &Settings) -> anyhow::Result<Report> {
    let hop_n = settings.pick(500_000u64, 50_000, 2_000);
    let words_n = settings.pick(500_000u64, 100_000, 4_096);
    let runs = settings.pick(5usize, 1, 1);
    let mut report = Report::new("threads");
    report.params(
        json!({"hop_messages": hop_n, "word_count_records": words_n, "batch": BATCH as u64,
        "channel_capacity": CAPACITY as u64, "tokio_workers": WORKERS as u64, "runs": runs as u64}),
    );
    report.param(
        "statistic",
        "median of the runs; the executors alternate, starting with a different one each run",
    );
    report.param(
        "unit",
        "messages/s, records/s, ms; ratio = tokio variant / threads",
    );
    let runtime = Runtime::new().map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let plugin = runtime.load(settings.plugin("word-count")?)?;

    let workloads: [Workload; 2] = [
        ("hop", Work::Forward, hop_n, hop_input),
        ("word-count", Work::Wasm(plugin), words_n, batch_input),
    ];
    for (name, work, n, input) in &workloads {
        let stamp = matches!(work, Work::Wasm(_));
        for p in PARALLELISM {
            let mut outcomes: [Vec<Outcome>; 3] = Default::default();
            for run in 0..runs {
                for k in 0..Executor::ALL.len() {
                    let e = (run + k) % Executor::ALL.len();
                    let executor = Executor::ALL[e];
                    settings.say(&format!(
                        "threads: {name} p{p} {} (run {})",
                        executor.name(),
                        run + 1
                    ));
                    let outcome = run_once(executor, work, p, input(*n, p), stamp)?;
                    outcomes[e].push(outcome);
                }
            }
            rows(&mut report, name, p, &outcomes, *n, stamp);
        }
    }
    report.notes.push(
        "hop: ns_per_hop is process CPU time (utime + stime, 10 ms ticks) over messages x 2 hops; cores_busy = CPU time / wall time".into(),
    );
    report.notes.push(
        "word-count latency: the pipeline is saturated, so latency is mostly the batches queued ahead (16 per channel, the same for every executor)".into(),
    );
    report.notes.push(
        "threads: threads the run added to the process, counted when the sink had half the records"
            .into(),
    );
    Ok(report)
}

/// The rows of one workload at one parallelism: for each executor and
/// metric, the median of its runs and, against threads, the range of the
/// per-run ratios (run `i` of an executor ran next to run `i` of threads).
/// `latency`: the word-count workload (records, latency rows, call times).
fn rows(
    report: &mut Report,
    name: &str,
    p: usize,
    outcomes: &[Vec<Outcome>; 3],
    n: u64,
    latency: bool,
) {
    type Metric<'a> = (String, &'static str, Box<dyn Fn(&Outcome) -> f64 + 'a>);
    let per_second = move |o: &Outcome| n as f64 / o.elapsed.as_secs_f64();
    let unit = if latency { "records/s" } else { "messages/s" };
    let mut metrics: Vec<Metric> = vec![(name.to_string(), unit, Box::new(per_second))];
    if latency {
        for (label, q) in [("p50", 0.5), ("p99", 0.99)] {
            metrics.push((
                format!("{name} latency {label}"),
                "ms",
                Box::new(move |o: &Outcome| o.latency_ms(q)),
            ));
        }
    }
    let case = |what: &str, e: Executor| format!("{what} p{p} {}", e.name());
    for (what, unit, f) in &metrics {
        let base: Vec<f64> = outcomes[0].iter().map(f).collect();
        for (e, outs) in Executor::ALL.into_iter().zip(outcomes) {
            let values: Vec<f64> = outs.iter().map(f).collect();
            let baseline = (e != Executor::Threads).then(|| case(what, Executor::Threads));
            let row = report.row(&case(what, e), median(&values), unit, baseline.as_deref());
            let of = |g: &dyn Fn(&Outcome) -> f64| median(&outs.iter().map(g).collect::<Vec<_>>());
            if e != Executor::Threads {
                let ratios: Vec<f64> = values.iter().zip(&base).map(|(v, b)| v / b).collect();
                row.extra.insert(
                    "run_ratio_min".into(),
                    ratios.iter().copied().fold(f64::INFINITY, f64::min),
                );
                row.extra.insert(
                    "run_ratio_max".into(),
                    ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                );
            }
            if what != name {
                continue;
            }
            row.extra
                .insert("threads".into(), of(&|o| o.threads as f64));
            row.extra.insert(
                "cores_busy".into(),
                of(&|o| o.cpu.as_secs_f64() / o.elapsed.as_secs_f64()),
            );
            if latency {
                row.extra
                    .insert("ms_per_call".into(), of(&|o| o.call.as_secs_f64() * 1e3));
                row.extra.insert(
                    "cpu_ns_per_record".into(),
                    of(&|o| o.cpu.as_nanos() as f64 / n as f64),
                );
            } else {
                row.extra.insert(
                    "ns_per_hop".into(),
                    of(&|o| o.cpu.as_nanos() as f64 / (n as f64 * 2.0)),
                );
                row.extra.insert(
                    "wall_ns_per_msg".into(),
                    of(&|o| o.elapsed.as_nanos() as f64 / n as f64),
                );
            }
        }
    }
}

/// Threads of this process (`/proc/self/status`), or 0.
fn thread_count() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time of this process, user and system, all threads
/// (`/proc/self/stat`, in ticks of 10 ms), or 0.
fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name, which may hold spaces: state is
            // the first, utime the 12th and stime the 13th.
            let rest = &s[s.rfind(')')? + 1..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        });
    Duration::from_millis(ticks.unwrap_or(0) * 10)
}
