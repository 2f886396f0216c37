//! Unaligned checkpoints and the alignment timeout, end to end: a skewed
//! two-input job (a fast and a slow source, a union into a slow operator,
//! then a word count) under backpressure counts every word exactly once
//! through repeated SIGKILLs in each checkpoint mode; its unaligned
//! checkpoints store in-flight data (`weir checkpoints --json`), and a
//! restore of such a checkpoint replays it exactly once.

use serde_json::Value;
use weir_tests::cli::Weir;
use weir_tests::counts::{assert_running_counts, true_counts};
use weir_tests::job_dir::JobDir;
use weir_tests::job_file::{Checkpoint, JobFile, Operator, Sink, Source};
use weir_tests::pipeline::{XorShift, seed};
use weir_tests::plugins;
use weir_tests::text::assert_has;

const WEIR: Weir = Weir::new(env!("CARGO_BIN_EXE_weir"));

/// `skewed`: source `fast` (unthrottled, so its channels are full) and
/// source `slow` (500 records a second) in a union into `delay` (the
/// `slow-pass` guest, 2 instances, 3 ms per batch), then `count`
/// (word-count, 2 instances), then `out.jsonl`; checkpoints every 50 ms
/// under `checkpoint`'s mode.
fn skewed(checkpoint: Checkpoint) -> JobFile {
    JobFile::new("skewed")
        .checkpoint(checkpoint.interval("50ms").retain(1000))
        .source(Source::file("fast", "fast.txt").batch_size(20))
        .source(Source::file("slow", "slow.txt").batch_size(5).rate(500))
        .operator(
            Operator::new("delay", plugins::GUEST_SLOW_PASS)
                .union("in", &["fast", "slow"])
                .parallelism(2)
                .config("{ delay_ms = 3 }")
                .grants(&["clocks"]),
        )
        .operator(
            Operator::new("count", plugins::WORD_COUNT)
                .inputs(&["delay"])
                .parallelism(2),
        )
        .sink(Sink::jsonl("out", "out.jsonl").input("count"))
}

/// The inputs: `fast` words `f0..f96`, `slow` words `s0..s12`.
fn inputs(fast: usize, slow: usize) -> (String, String) {
    let fast: String = (0..fast).map(|i| format!("f{}\n", i % 97)).collect();
    let slow: String = (0..slow).map(|i| format!("s{}\n", i % 13)).collect();
    (fast, slow)
}

fn job(checkpoint: Checkpoint, fast: usize, slow: usize) -> (JobDir, String) {
    let (f, s) = inputs(fast, slow);
    let j = JobDir::new(
        WEIR,
        skewed(checkpoint),
        &[("fast.txt", &f), ("slow.txt", &s)],
    );
    (j, format!("{f}{s}"))
}

/// Every checkpoint `weir checkpoints --json` lists.
fn checkpoints(j: &JobDir) -> Vec<Value> {
    serde_json::from_str(&j.checkpoints(&["--json"])).unwrap()
}

fn unaligned(c: &Value) -> bool {
    c["unaligned"]
        .as_bool()
        .expect("`unaligned` is always shown")
}

fn inflight(c: &Value) -> u64 {
    c["inflight_bytes"]
        .as_u64()
        .expect("`inflight_bytes` is always shown")
}

/// Kills the job four times and runs it to the end; every word is counted
/// exactly once. Returns the checkpoints.
fn through_kills(checkpoint: Checkpoint, salt: u64) -> Vec<Value> {
    let mut rng = XorShift(seed() ^ salt);
    let (j, input) = job(checkpoint, 40_000, 1_500);
    j.run_through_kills(4, "out.jsonl", (0, 300), &mut rng);
    let want = true_counts(input.lines());
    assert_running_counts(&want, &j.read("out.jsonl"), "after four SIGKILLs");
    checkpoints(&j)
}

#[test]
fn aligned_checkpoints_count_exactly_once_through_sigkills() {
    let list = through_kills(Checkpoint::final_only().mode("aligned"), 1);
    assert!(list.iter().all(|c| !unaligned(c) && inflight(c) == 0));
}

#[test]
fn unaligned_checkpoints_count_exactly_once_through_sigkills() {
    let list = through_kills(Checkpoint::final_only().mode("unaligned"), 2);
    let periodic = list.iter().filter(|c| c["final_checkpoint"] == false);
    assert!(periodic.clone().count() > 0);
    assert!(
        periodic.clone().all(unaligned),
        "every periodic one unaligned"
    );
    assert!(
        periodic.clone().any(|c| inflight(c) > 0),
        "under backpressure"
    );
}

#[test]
fn aligned_with_a_timeout_counts_exactly_once_through_sigkills() {
    let list = through_kills(Checkpoint::final_only().alignment_timeout("5ms"), 3);
    assert!(
        list.iter().any(unaligned),
        "some alignment lasted over 5 ms"
    );
}

/// A checkpoint that stored in-flight data, restored by id after the job
/// ran to its end (which deletes the later checkpoints and cuts the output
/// back to it), replays that data exactly once: nothing lost, nothing
/// counted twice.
#[test]
fn restoring_an_unaligned_checkpoint_replays_its_inflight_data_once() {
    let (j, input) = job(Checkpoint::final_only().mode("unaligned"), 40_000, 1_500);
    let id = ran_with_inflight(&j);
    let stderr = j.run_ok(&["--restore", &id.to_string()]);
    assert_has(&stderr, &format!("resumed from checkpoint {id}"));
    let want = true_counts(input.lines());
    assert_running_counts(&want, &j.read("out.jsonl"), "after the restore");
}

/// The same restore into a changed parallelism (`count`, which also
/// records in-flight data from `delay`'s two instances, from 2 to 3): the
/// in-flight records move with their keys and are replayed exactly once.
/// (`delay` keeps a state key of no record, `records`, so it cannot be
/// rescaled: that refusal is tested in `tests/rescale.rs`'s way.)
#[test]
fn an_unaligned_checkpoint_rescales_with_its_inflight_data() {
    let (j, input) = job(Checkpoint::final_only().mode("unaligned"), 40_000, 1_500);
    j.run_ok(&[]);
    // In-flight records of `count` per checkpoint: (id, records).
    let count_inflight = |j: &JobDir| -> Vec<(u64, usize)> {
        let store = weir::store::CheckpointStore::open_existing(&j.state_dir()).unwrap();
        let list = store.list().unwrap();
        list.iter()
            .map(|m| {
                let frames = store.operator_inflight(m.id, "count").unwrap();
                let records = frames
                    .iter()
                    .flat_map(|(_, f)| f)
                    .map(|(_, b)| b.len())
                    .sum();
                (m.id, records)
            })
            .collect()
    };
    let before = count_inflight(&j);
    let &(id, records) = before
        .iter()
        .rev()
        .filter(|(_, r)| *r > 0)
        .nth(1)
        .unwrap_or_else(|| panic!("no checkpoint with in-flight data of `count`: {before:?}"));
    j.write_job(
        skewed(Checkpoint::final_only().mode("unaligned"))
            .operator_with("count", |o| o.parallelism(3)),
    );
    let stderr = j.run_ok(&["--restore", &id.to_string()]);
    assert_has(&stderr, "`count`: rescaled from 2 to 3");
    let after = count_inflight(&j);
    // The derived checkpoint comes after every id the restore dropped.
    let derived = before.iter().map(|&(i, _)| i).max().unwrap() + 1;
    assert!(
        after.contains(&(derived, records)),
        "the derived checkpoint {derived} holds the {records} in-flight records of `count`: {after:?}"
    );
    let want = true_counts(input.lines());
    assert_running_counts(&want, &j.read("out.jsonl"), "after the rescale");
}

/// Runs the job in `j` to its end and returns a non-final checkpoint with
/// in-flight data: the last such but one, so that a restore redoes a part
/// of the run that later checkpoints covered.
fn ran_with_inflight(j: &JobDir) -> u64 {
    j.run_ok(&[]);
    let list = checkpoints(j);
    let with_inflight = list
        .iter()
        .filter(|c| c["final_checkpoint"] == false && unaligned(c) && inflight(c) > 0);
    let ids: Vec<u64> = with_inflight.map(|c| c["id"].as_u64().unwrap()).collect();
    *ids.iter()
        .rev()
        .nth(1)
        .or(ids.last())
        .unwrap_or_else(|| panic!("no checkpoint with in-flight data: {list:?}"))
}

/// In unaligned mode every periodic checkpoint is unaligned, with its
/// in-flight bytes in `weir checkpoints`; in aligned mode none is.
#[test]
fn weir_checkpoints_shows_which_checkpoints_were_unaligned() {
    let (j, _) = job(Checkpoint::final_only().mode("unaligned"), 20_000, 500);
    j.run_ok(&[]);
    let list = checkpoints(&j);
    let last = list.last().unwrap();
    assert_eq!(last["final_checkpoint"], true);
    assert!(
        !unaligned(last) && inflight(last) == 0,
        "the final one is taken at End"
    );
    assert!(list.iter().any(|c| inflight(c) > 0), "{list:?}");
    let text = j.checkpoints(&[]);
    assert_has(&text, "unaligned, in flight ");

    let (j, _) = job(Checkpoint::final_only(), 20_000, 500);
    j.run_ok(&[]);
    assert!(checkpoints(&j).iter().all(|c| !unaligned(c)));
    assert!(!j.checkpoints(&[]).contains("unaligned"));
}
