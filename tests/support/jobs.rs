//! The jobs that several integration tests run, as [`JobFile`]s to vary
//! (`source_with`, `operator_with`) before they are written.

use std::path::Path;

use crate::job_file::{Checkpoint, Entry, JobFile, Operator, Restart, Sink, Source};
use crate::pipeline::XorShift;
use crate::plugins;

/// `n` words of 37 distinct ones (`w<i * 7 % 37>`).
pub fn words(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("w{}", i * 7 % 37)).collect()
}

/// `name`: operator `count` (word-count, `parallelism` instances) counts
/// the words of `source` into `sink`; no `[checkpoint]` or `[restart]`.
pub fn word_count(name: &str, source: Source, parallelism: u32, sink: Sink) -> JobFile {
    let input = source.id();
    JobFile::new(name)
        .source(source)
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&[&input])
                .parallelism(parallelism),
        )
        .sink(sink.input("count"))
}

/// [`word_count`] by two instances, checkpointed every 100 ms and
/// restarted up to 20 times, 200 ms apart: the job that connector tests
/// kill and restart.
pub fn count_restarting(name: &str, source: Source, sink: Sink) -> JobFile {
    word_count(name, source, 2, sink)
        .checkpoint(Checkpoint::every("100ms"))
        .restart(Restart::fixed_delay(20, "200ms"))
}

/// `name`: source `words` reads `words.txt` at `rate` records per second,
/// operator `count` (word-count, `parallelism` instances) counts them, and
/// sink `out` writes the counts to `out.jsonl`.
pub fn count_words(name: &str, checkpoint: Checkpoint, rate: u64, parallelism: u32) -> JobFile {
    let words = Source::file("words", "words.txt").rate(rate);
    word_count(name, words, parallelism, Sink::jsonl("out", "out.jsonl")).checkpoint(checkpoint)
}

/// `name`: source `in` reads stdin, operator `count` (word-count, one
/// instance) counts its lines as words, and sink `out` writes the counts to
/// `out.jsonl`; under `checkpoint`.
pub fn count_stdin(name: &str, checkpoint: Checkpoint) -> JobFile {
    let sink = Sink::jsonl("out", "out.jsonl");
    word_count(name, Source::stdin("in"), 1, sink).checkpoint(checkpoint)
}

/// `ptimer`: stdin lines → `processing-timer` (timers `delay_ms` after
/// each record, on the host's clock) → `out.txt`; checkpoints every
/// 100 ms.
pub fn processing_timer(delay_ms: u64) -> JobFile {
    JobFile::new("ptimer")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::stdin("in"))
        .operator(
            Operator::new("pt", plugins::GUEST_PROCESSING_TIMER)
                .inputs(&["in"])
                .config(&format!("{{ delay_ms = {delay_ms} }}")),
        )
        .sink(Sink::file("out", "out.txt").input("pt"))
}

/// `name`: source `words` reads `words.txt`, operator `route`
/// (`two-outputs`, `parallelism` instances) emits each word on its port
/// `out` and again on its port `rejected`; no sinks yet.
pub fn route_words(name: &str, parallelism: u32) -> JobFile {
    let route = Operator::new("route", plugins::GUEST_TWO_OUTPUTS).inputs(&["words"]);
    JobFile::new(name)
        .source(Source::file("words", "words.txt"))
        .operator(route.parallelism(parallelism))
}

/// `name`: `source` straight into `sink`.
pub fn pipe(name: &str, source: Source, sink: Sink) -> JobFile {
    let sink = sink.input(&source.id());
    JobFile::new(name).source(source).sink(sink)
}

/// `name`: copies `source` (bounded, with the `extra` keys set) to the
/// file `out.txt`; checkpoints every 100 ms.
pub fn copy_bounded(name: &str, source: Source, extra: &[(&str, &str)]) -> JobFile {
    let mut source = source.value("bounded", true);
    for (key, value) in extra {
        source = source.value(key, value);
    }
    pipe(name, source, Sink::file("out", "out.txt")).checkpoint(Checkpoint::every("100ms"))
}

/// `wordcount`, the golden word count: source `text` reads `input.txt` (at
/// `rate` records per second, or unthrottled), operator `split` splits the
/// lines into words, operator `count` (the component `count`, 2 instances)
/// counts them, and sink `out` writes the counts to `out/counts.jsonl`.
pub fn wordcount(count: impl AsRef<Path>, rate: Option<u64>) -> JobFile {
    JobFile::new("wordcount")
        .checkpoint(Checkpoint::every("100ms"))
        .source(Source::file("text", "input.txt").throttle(rate))
        .operator(Operator::new("split", plugins::SPLIT).inputs(&["text"]))
        .operator(
            Operator::new("count", count)
                .inputs(&["split"])
                .parallelism(2),
        )
        .sink(Sink::jsonl("out", "out/counts.jsonl").input("count"))
}

/// `reconcile`, the golden reconciliation: sources `payments` and `bank`
/// read `payments.csv` and `bank.csv` keyed by `order_no`, operator
/// `reconcile` (the component `plugin`, 2 instances, tolerance 0.005) gets
/// them on its ports `a` and `b`, and sink `out` writes its verdicts to
/// `out/reconcile.jsonl`.
pub fn reconcile(plugin: impl AsRef<Path>) -> JobFile {
    let orders = |id: &str, path: &str| Source::file(id, path).format("csv").key("order_no");
    JobFile::new("reconcile")
        .checkpoint(Checkpoint::every("100ms"))
        .source(orders("payments", "payments.csv"))
        .source(orders("bank", "bank.csv"))
        .operator(
            Operator::new("reconcile", plugin)
                .ports(&[("a", "payments"), ("b", "bank")])
                .parallelism(2)
                .config("{ tolerance = 0.005 }"),
        )
        .sink(Sink::jsonl("out", "out/reconcile.jsonl").input("reconcile"))
}

/// The watermark of the streaming reconcile's sources: at most 1 s out of
/// order, sent every 20 ms.
pub const STREAMING_WATERMARK: &str = r#"{ max_out_of_orderness = "1s", interval = "20ms" }"#;

/// Source `a` of [`reconcile_streaming`] as `source` (a file or stdin):
/// jsonl keyed by `key`, event time in `ts`, [`STREAMING_WATERMARK`].
pub fn orders_source(source: Source) -> Source {
    source
        .format("jsonl")
        .key("key")
        .timestamp("ts")
        .value("watermark", STREAMING_WATERMARK)
}

/// `reconcile-streaming`, as `examples/reconcile-streaming/`: source `a`
/// (`a`, see [`orders_source`]) and source `b` (the file `b.jsonl`, the
/// same way) go to `reconcile` (the component `plugin`, 2 instances, with
/// `timeout` when given); sink `out` writes its results to
/// `out/reconcile.jsonl`, sink `late` its `late` records to
/// `out/late.jsonl`. Checkpoints every 100 ms.
pub fn reconcile_streaming(plugin: impl AsRef<Path>, a: Source, timeout: Option<&str>) -> JobFile {
    let config = match timeout {
        Some(t) => format!("{{ timeout = {t:?} }}"),
        None => "{}".into(),
    };
    JobFile::new("reconcile-streaming")
        .checkpoint(Checkpoint::every("100ms"))
        .source(orders_source(a))
        .source(orders_source(Source::file("b", "b.jsonl")))
        .operator(
            Operator::new("reconcile", plugin)
                .ports(&[("a", "a"), ("b", "b")])
                .parallelism(2)
                .config(&config),
        )
        .sink(Sink::jsonl("out", "out/reconcile.jsonl").input("reconcile"))
        .sink(Sink::jsonl("late", "out/late.jsonl").input("reconcile.late"))
}

/// One order line of the streaming reconcile: `{"key", "amount", "ts"}`.
pub fn order_line(key: &str, amount: &str, ts: i64) -> String {
    format!("{{\"key\":\"{key}\",\"amount\":{amount},\"ts\":{ts}}}\n")
}

/// `n` orders named `<prefix>-<i>` from event time `from` on, 100 ms
/// apart: the lines of side A and of side B, each in time order. A fifth
/// are on side A only, a fifth on side B only, a tenth differ in amount,
/// the rest match; both sides of an order have the same time, so with
/// [`STREAMING_WATERMARK`] and a `timeout` of 1 s or more no order times out
/// before its other side arrives.
pub fn streaming_orders(
    rng: &mut XorShift,
    prefix: &str,
    n: usize,
    from: i64,
) -> (Vec<String>, Vec<String>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..n {
        let key = format!("{prefix}-{i:04}");
        let ts = from + 100 * i as i64;
        let cents = rng.range(100, 100_000);
        let amount = format!("{}.{:02}", cents / 100, cents % 100);
        match rng.range(0, 10) {
            0 | 1 => a.push(order_line(&key, &amount, ts)),
            2 | 3 => b.push(order_line(&key, &amount, ts)),
            4 => {
                a.push(order_line(&key, &amount, ts));
                b.push(order_line(
                    &key,
                    &format!("{}.{:02}", cents / 100 + 1, cents % 100),
                    ts,
                ));
            }
            _ => {
                a.push(order_line(&key, &amount, ts));
                b.push(order_line(&key, &amount, ts));
            }
        }
    }
    (a, b)
}

/// `n` values `w<i>`, but `poison` at index `bad`: the input of
/// [`poisoned`].
pub fn poison_values(n: usize, bad: usize) -> Vec<String> {
    (0..n)
        .map(|i| match i == bad {
            true => "poison".into(),
            false => format!("w{i}"),
        })
        .collect()
}

/// `name`: `source` (id `in`) into operator `poison` (the guest that
/// traps on the record `poison`), then the file `out.txt`; three restarts
/// 10 ms apart, so that a failure is narrowed to its record.
pub fn poisoned(name: &str, source: Source) -> JobFile {
    JobFile::new(name)
        .restart(Restart::fixed_delay(3, "10ms"))
        .source(source)
        .operator(Operator::new("poison", plugins::GUEST_POISON).inputs(&["in"]))
        .sink(Sink::file("out", "out.txt").input("poison"))
}
