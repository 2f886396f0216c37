//! The streaming reconcile (`reconcile` with `timeout`, event time) as a
//! `weir run` job, `examples/reconcile-streaming/` and issue 15's Done-when:
//! over a live stdin it commits `ONLY_A` rows while stdin is still open,
//! and its final output is what the batch reconcile makes of the input
//! (computed by the test).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;

use serde_json::{Value, json};

use weir_tests::cli::Weir;
use weir_tests::plugins;
use weir_tests::streaming::{self, Script};
use weir_tests::text::assert_has;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// What `reconcile` (tolerance 0) makes of the order lines `a` and `b`
/// once both have ended: per key, the first amount of each side, `MATCH`
/// when they are equal, `AMOUNT_MISMATCH` when not, else `ONLY_A` or
/// `ONLY_B`; by key.
fn reconciled(a: &str, b: &str) -> BTreeMap<String, Value> {
    let firsts = |text: &str| {
        let mut first: BTreeMap<String, f64> = BTreeMap::new();
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let key = v["key"].as_str().unwrap().to_owned();
            first.entry(key).or_insert(v["amount"].as_f64().unwrap());
        }
        first
    };
    let (a, b) = (firsts(a), firsts(b));
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let (x, y) = (a.get(k), b.get(k));
            let status = match (x, y) {
                (Some(x), Some(y)) if x == y => "MATCH",
                (Some(_), Some(_)) => "AMOUNT_MISMATCH",
                (Some(_), None) => "ONLY_A",
                _ => "ONLY_B",
            };
            (
                k.clone(),
                json!({"key": k, "status": status, "a": x, "b": y}),
            )
        })
        .collect()
}

/// The reconcile's output lines by key, each key once.
fn results(out: &BTreeMap<String, usize>) -> BTreeMap<String, Value> {
    let mut by_key = BTreeMap::new();
    for (line, n) in out {
        assert_eq!(*n, 1, "{line} written {n} times");
        let v: Value = serde_json::from_str(line).unwrap();
        let key = v["key"].as_str().unwrap().to_owned();
        assert!(
            by_key.insert(key, v).is_none(),
            "two results for one key: {out:?}"
        );
    }
    by_key
}

#[test]
fn over_a_live_stdin_only_a_rows_are_committed_while_stdin_is_open_and_the_end_equals_the_batch_reconcile()
 {
    let script = Script::new();
    // Waits for the ONLY_A rows while stdin is open, then ends the input.
    let live = streaming::run_over_live_stdin(WEIR, Path::new(plugins::RECONCILE), &script);
    let (out, late) = streaming::outputs(&live);

    // What the batch reconcile makes of everything stdin got and side B,
    // computed here from the input.
    let want = reconciled(&script.all_a(), &script.b.concat());
    let statuses: Vec<&str> = want.values().filter_map(|v| v["status"].as_str()).collect();
    assert!(
        statuses.contains(&"ONLY_B") && statuses.contains(&"MATCH"),
        "{want:?}"
    );
    assert_eq!(
        results(&out),
        want,
        "the streaming output is what the batch reconcile makes of the input"
    );
    assert_eq!(
        late,
        streaming::lines(&script.late),
        "the records of emitted keys are late, unchanged"
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
