//! The jobs that several integration tests run, as [`JobFile`]s to vary
//! (`source_with`, `operator_with`) before they are written.

use std::path::Path;

use crate::job_file::{Checkpoint, JobFile, Operator, Sink, Source};
use crate::plugins;

/// `name`: source `words` reads `words.txt` at `rate` records per second,
/// operator `count` (word-count, `parallelism` instances) counts them, and
/// sink `out` writes the counts to `out.jsonl`.
pub fn count_words(name: &str, checkpoint: Checkpoint, rate: u64, parallelism: u32) -> JobFile {
    JobFile::new(name)
        .checkpoint(checkpoint)
        .source(Source::file("words", "words.txt").rate(rate))
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&["words"])
                .parallelism(parallelism),
        )
        .sink(
            Sink::file("out", "out.jsonl")
                .format("jsonl")
                .input("count"),
        )
}

/// `name`: source `in` reads stdin, operator `count` (word-count, one
/// instance) counts its lines as words, and sink `out` writes the counts to
/// `out.jsonl`; under `checkpoint`.
pub fn count_stdin(name: &str, checkpoint: Checkpoint) -> JobFile {
    JobFile::new(name)
        .checkpoint(checkpoint)
        .source(Source::stdin("in"))
        .operator(Operator::new("count", plugins::WORD_COUNT).inputs(&["in"]))
        .sink(
            Sink::file("out", "out.jsonl")
                .format("jsonl")
                .input("count"),
        )
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
        .sink(
            Sink::file("out", "out/counts.jsonl")
                .format("jsonl")
                .input("count"),
        )
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
        .sink(
            Sink::file("out", "out/reconcile.jsonl")
                .format("jsonl")
                .input("reconcile"),
        )
}
