//! The streaming reconcile (`reconcile` with `timeout`, event time) as a
//! `weir run` job, `examples/reconcile-streaming/` and issue 15's Done-when:
//! over a live stdin it commits `ONLY_A` rows while stdin is still open,
//! and its final output equals the batch reconcile's.

use std::ffi::OsStr;
use std::path::Path;

use weir_tests::cli::Weir;
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::Source;
use weir_tests::jobs;
use weir_tests::plugins;
use weir_tests::streaming::{self, Script};
use weir_tests::text::assert_has;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

#[test]
fn over_a_live_stdin_only_a_rows_are_committed_while_stdin_is_open_and_the_end_equals_the_batch_reconcile()
 {
    let script = Script::new();
    // Waits for the ONLY_A rows while stdin is open, then ends the input.
    let live = streaming::run_over_live_stdin(WEIR, Path::new(plugins::RECONCILE), &script);
    let (out, late) = streaming::outputs(&live);

    // The batch reconcile: the same job without `timeout`, side A a file
    // with everything stdin got.
    let job = jobs::reconcile_streaming(plugins::RECONCILE, Source::file("a", "a.jsonl"), None);
    let b = script.b.concat();
    let batch = JobDir::new(WEIR, job, &[("a.jsonl", &script.all_a()), ("b.jsonl", &b)]);
    batch.run_ok(&[]);
    let want = batch.lines("out/reconcile.jsonl");
    assert!(
        want.keys().any(|l| l.contains("ONLY_B")) && want.keys().any(|l| l.contains("MATCH")),
        "{want:?}"
    );
    assert_eq!(
        out, want,
        "the streaming output equals the batch reconcile's"
    );
    assert_eq!(
        late,
        streaming::lines(&script.late),
        "the records of emitted keys are late, unchanged"
    );
    assert!(
        batch.lines("out/late.jsonl").is_empty(),
        "no late record without `timeout`"
    );
}

/// `examples/reconcile-streaming/` runs: every order is classified once,
/// with each status; `late.jsonl` holds only records of classified orders
/// (which of the bank's out-of-order records are late depends on how far
/// the payments file was read when they came).
#[test]
fn the_streaming_example_classifies_every_order_once() {
    let example = weir_tests::repo_root().join("examples/reconcile-streaming");
    let dir = tempfile::tempdir().unwrap();
    for f in ["job.toml", "payments.jsonl", "bank.jsonl"] {
        std::fs::copy(example.join(f), dir.path().join(f)).unwrap();
    }
    let job = std::fs::read_to_string(dir.path().join("job.toml")).unwrap();
    assert_has(&job, "../../plugins/target/reconcile.wasm");
    let job = job.replace("../../plugins/target/reconcile.wasm", plugins::RECONCILE);
    std::fs::write(dir.path().join("job.toml"), job).unwrap();
    let job_file = dir.path().join("job.toml");
    WEIR.ok([
        OsStr::new("run"),
        job_file.as_os_str(),
        OsStr::new("--restore"),
        OsStr::new("none"),
    ]);
    let results = std::fs::read_to_string(dir.path().join("out/reconcile.jsonl")).unwrap();
    let key = |line: &str| line.split('"').nth(3).unwrap().to_string();
    let mut keys: Vec<String> = results.lines().map(key).collect();
    let n = keys.len();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), n, "one result per order: {results}");
    for status in ["\"MATCH\"", "AMOUNT_MISMATCH", "ONLY_A", "ONLY_B"] {
        assert!(results.contains(status), "{status}: {results}");
    }
    let late = std::fs::read_to_string(dir.path().join("out/late.jsonl")).unwrap();
    for line in late.lines() {
        assert!(
            keys.contains(&key(line)),
            "{line} is late but its order has no result"
        );
    }
}
